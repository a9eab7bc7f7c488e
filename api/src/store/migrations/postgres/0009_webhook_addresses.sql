-- Webhook addresses per trigger: a webhook nodeId is unique within a workspace only,
-- so no workspace can take (or learn of) another's. /webhook/<triggerId> always
-- reaches its trigger; /webhook/<nodeId> the oldest webhook trigger on that node.
DROP INDEX triggers_webhook_address;
CREATE UNIQUE INDEX triggers_webhook_node ON triggers (workspace_id, node_id) WHERE type = 'webhook';
CREATE INDEX triggers_webhook_address ON triggers (node_id, created_at) WHERE type = 'webhook';
