-- Flowise 3.1's own triggers: an agentflow whose Start node runs on a schedule
-- owns one trigger (made, changed and removed with the chatflow), and a schedule
-- may end on a date (the trigger switches itself off after it).
ALTER TABLE triggers ADD COLUMN owned_by_chatflow BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE triggers ADD COLUMN ends_at TIMESTAMPTZ;
CREATE UNIQUE INDEX triggers_owned_by_chatflow ON triggers (chatflow_id) WHERE owned_by_chatflow;
