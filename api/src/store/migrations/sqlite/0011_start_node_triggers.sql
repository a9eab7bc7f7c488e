-- Flowise 3.1's own triggers: an agentflow whose Start node runs on a schedule
-- owns one trigger (made, changed and removed with the chatflow), and a schedule
-- may end on a date (the trigger switches itself off after it).
ALTER TABLE triggers ADD COLUMN owned_by_chatflow INTEGER NOT NULL DEFAULT 0;
ALTER TABLE triggers ADD COLUMN ends_at INTEGER;
CREATE UNIQUE INDEX triggers_owned_by_chatflow ON triggers (chatflow_id) WHERE owned_by_chatflow = 1;
