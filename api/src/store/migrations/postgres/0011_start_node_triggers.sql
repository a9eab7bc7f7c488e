-- Flowise 3.1's own triggers: an agentflow whose Start node runs on a schedule
-- owns one trigger (made, changed and removed with the chatflow), and a schedule
-- may end on a date (the trigger switches itself off after it). A webhook Start
-- node owns a webhook trigger the same way.
ALTER TABLE triggers ADD COLUMN owned_by_chatflow BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE triggers ADD COLUMN ends_at TIMESTAMPTZ;
CREATE UNIQUE INDEX triggers_owned_by_chatflow ON triggers (chatflow_id) WHERE owned_by_chatflow;
-- An owned webhook trigger is reached through its chatflow's address
-- (/api/v1/webhook/<chatflowId>), not by node id: every Flowise agentflow starts
-- at startAgentflow_0, so node ids are only unique among weir's own triggers.
DROP INDEX triggers_webhook_node;
CREATE UNIQUE INDEX triggers_webhook_node ON triggers (workspace_id, node_id)
    WHERE type = 'webhook' AND NOT owned_by_chatflow;
DROP INDEX triggers_webhook_address;
CREATE INDEX triggers_webhook_address ON triggers (node_id, created_at)
    WHERE type = 'webhook' AND NOT owned_by_chatflow;
