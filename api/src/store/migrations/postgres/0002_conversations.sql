-- Conversation memory, leads, and the shared rate-limit counters.
CREATE TABLE chat_messages (
    seq               BIGSERIAL PRIMARY KEY,
    id                UUID NOT NULL UNIQUE,
    chatflow_id       UUID NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    chat_id           TEXT NOT NULL,
    role              TEXT NOT NULL,
    content           TEXT NOT NULL,
    source_documents  TEXT,
    used_tools        TEXT,
    created_at        TIMESTAMPTZ NOT NULL
);
CREATE INDEX chat_messages_by_session ON chat_messages (chatflow_id, chat_id, seq);

CREATE TABLE leads (
    id           UUID PRIMARY KEY,
    chatflow_id  UUID NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    chat_id      TEXT NOT NULL,
    email        TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX leads_by_chatflow ON leads (chatflow_id, created_at);

-- One row per (bucket, fixed window); replicas increment the same row.
CREATE TABLE rate_limit_windows (
    bucket        TEXT NOT NULL,
    window_start  BIGINT NOT NULL,
    hits          BIGINT NOT NULL,
    expires_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (bucket, window_start)
);
CREATE INDEX rate_limit_windows_expiry ON rate_limit_windows (expires_at);
