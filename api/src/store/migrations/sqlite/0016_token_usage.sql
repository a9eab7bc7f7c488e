-- Tokens each workspace's model calls read and wrote per day (UTC), counted
-- while a daily budget (WORKSPACE_TOKEN_BUDGET_DAILY) is set.
CREATE TABLE token_usage (
    workspace_id  TEXT NOT NULL,
    day           TEXT NOT NULL,
    tokens        INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, day)
);
