-- Triggers, their firings (claims with a lease), results, webhook deliveries and
-- the failure-mail outbox. Times are timestamptz.
CREATE TABLE triggers (
    id                  UUID PRIMARY KEY,
    workspace_id        UUID NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    chatflow_id         UUID NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    name                TEXT NOT NULL,
    node_id             TEXT NOT NULL,
    type                TEXT NOT NULL,
    cron_expression     TEXT,
    timezone            TEXT NOT NULL DEFAULT 'UTC',
    enabled             BOOLEAN NOT NULL,
    webhook_platform    TEXT,
    webhook_secret      TEXT,
    webhook_bot_token   TEXT,
    trigger_message     TEXT,
    execution_count     BIGINT NOT NULL DEFAULT 0,
    max_executions      BIGINT,
    timeout_secs        BIGINT NOT NULL,
    last_executed       TIMESTAMPTZ,
    next_execution      TIMESTAMPTZ,
    notification_email  TEXT,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL
);
CREATE INDEX triggers_by_workspace ON triggers (workspace_id, created_at DESC);
CREATE INDEX triggers_due ON triggers (next_execution) WHERE type = 'cron' AND enabled;
CREATE UNIQUE INDEX triggers_webhook_address ON triggers (node_id) WHERE type = 'webhook';

CREATE TABLE trigger_firings (
    id            UUID PRIMARY KEY,
    trigger_id    UUID NOT NULL REFERENCES triggers(id) ON DELETE CASCADE,
    scheduled_at  TIMESTAMPTZ NOT NULL,
    is_cron       BOOLEAN NOT NULL,
    owner         UUID NOT NULL,
    lease_until   TIMESTAMPTZ NOT NULL,
    input         TEXT NOT NULL,
    chat_id       TEXT NOT NULL
);
CREATE UNIQUE INDEX trigger_firings_once ON trigger_firings (trigger_id, scheduled_at) WHERE is_cron;
CREATE INDEX trigger_firings_lease ON trigger_firings (lease_until);

CREATE TABLE trigger_results (
    seq               BIGSERIAL PRIMARY KEY,
    id                UUID NOT NULL UNIQUE,
    trigger_id        UUID NOT NULL REFERENCES triggers(id) ON DELETE CASCADE,
    executed_at       TIMESTAMPTZ NOT NULL,
    scheduled_at      TIMESTAMPTZ,
    input             TEXT NOT NULL,
    output            TEXT,
    source_documents  TEXT,
    used_tools        TEXT,
    chat_id           TEXT,
    status            TEXT NOT NULL,
    error             TEXT,
    missed_count      BIGINT
);
CREATE INDEX trigger_results_by_trigger ON trigger_results (trigger_id, seq DESC);
CREATE INDEX trigger_results_by_time ON trigger_results (executed_at);

CREATE TABLE webhook_deliveries (
    trigger_id   UUID NOT NULL REFERENCES triggers(id) ON DELETE CASCADE,
    delivery_id  TEXT NOT NULL,
    status       INTEGER,
    body         TEXT,
    created_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (trigger_id, delivery_id)
);
CREATE INDEX webhook_deliveries_by_time ON webhook_deliveries (created_at);

CREATE TABLE mail_outbox (
    id               UUID PRIMARY KEY,
    trigger_id       UUID NOT NULL REFERENCES triggers(id) ON DELETE CASCADE,
    recipient        TEXT NOT NULL,
    subject          TEXT NOT NULL,
    body             TEXT NOT NULL,
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ NOT NULL,
    sent_at          TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL
);
CREATE INDEX mail_outbox_due ON mail_outbox (next_attempt_at) WHERE sent_at IS NULL;
CREATE INDEX mail_outbox_by_trigger ON mail_outbox (trigger_id, sent_at);
