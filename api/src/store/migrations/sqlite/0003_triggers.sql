-- Triggers, their firings (claims with a lease), results, webhook deliveries and
-- the failure-mail outbox. Times are epoch milliseconds.
CREATE TABLE triggers (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    chatflow_id         TEXT NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    name                TEXT NOT NULL,
    node_id             TEXT NOT NULL,
    type                TEXT NOT NULL,
    cron_expression     TEXT,
    timezone            TEXT NOT NULL DEFAULT 'UTC',
    enabled             INTEGER NOT NULL,
    webhook_platform    TEXT,
    webhook_secret      TEXT,
    webhook_bot_token   TEXT,
    trigger_message     TEXT,
    execution_count     INTEGER NOT NULL DEFAULT 0,
    max_executions      INTEGER,
    timeout_secs        INTEGER NOT NULL,
    last_executed       INTEGER,
    next_execution      INTEGER,
    notification_email  TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
);
CREATE INDEX triggers_by_workspace ON triggers (workspace_id, created_at DESC);
CREATE INDEX triggers_due ON triggers (next_execution) WHERE type = 'cron' AND enabled = 1;
CREATE UNIQUE INDEX triggers_webhook_address ON triggers (node_id) WHERE type = 'webhook';

CREATE TABLE trigger_firings (
    id            TEXT PRIMARY KEY,
    trigger_id    TEXT NOT NULL REFERENCES triggers(id) ON DELETE CASCADE,
    scheduled_at  INTEGER NOT NULL,
    is_cron       INTEGER NOT NULL,
    owner         TEXT NOT NULL,
    lease_until   INTEGER NOT NULL,
    input         TEXT NOT NULL,
    chat_id       TEXT NOT NULL
);
CREATE UNIQUE INDEX trigger_firings_once ON trigger_firings (trigger_id, scheduled_at) WHERE is_cron = 1;
CREATE INDEX trigger_firings_lease ON trigger_firings (lease_until);

CREATE TABLE trigger_results (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    id                TEXT NOT NULL UNIQUE,
    trigger_id        TEXT NOT NULL REFERENCES triggers(id) ON DELETE CASCADE,
    executed_at       INTEGER NOT NULL,
    scheduled_at      INTEGER,
    input             TEXT NOT NULL,
    output            TEXT,
    source_documents  TEXT,
    used_tools        TEXT,
    chat_id           TEXT,
    status            TEXT NOT NULL,
    error             TEXT,
    missed_count      INTEGER
);
CREATE INDEX trigger_results_by_trigger ON trigger_results (trigger_id, seq DESC);
CREATE INDEX trigger_results_by_time ON trigger_results (executed_at);

CREATE TABLE webhook_deliveries (
    trigger_id   TEXT NOT NULL REFERENCES triggers(id) ON DELETE CASCADE,
    delivery_id  TEXT NOT NULL,
    status       INTEGER,
    body         TEXT,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (trigger_id, delivery_id)
);
CREATE INDEX webhook_deliveries_by_time ON webhook_deliveries (created_at);

CREATE TABLE mail_outbox (
    id               TEXT PRIMARY KEY,
    trigger_id       TEXT NOT NULL REFERENCES triggers(id) ON DELETE CASCADE,
    recipient        TEXT NOT NULL,
    subject          TEXT NOT NULL,
    body             TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    sent_at          INTEGER,
    created_at       INTEGER NOT NULL
);
CREATE INDEX mail_outbox_due ON mail_outbox (next_attempt_at) WHERE sent_at IS NULL;
CREATE INDEX mail_outbox_by_trigger ON mail_outbox (trigger_id, sent_at);
