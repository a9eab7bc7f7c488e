-- Conversation memory, leads, and nothing for rate limits (SQLite counts in process).
CREATE TABLE chat_messages (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    id                TEXT NOT NULL UNIQUE,
    chatflow_id       TEXT NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    chat_id           TEXT NOT NULL,
    role              TEXT NOT NULL,
    content           TEXT NOT NULL,
    source_documents  TEXT,
    used_tools        TEXT,
    created_at        INTEGER NOT NULL
);
CREATE INDEX chat_messages_by_session ON chat_messages (chatflow_id, chat_id, seq);

CREATE TABLE leads (
    id           TEXT PRIMARY KEY,
    chatflow_id  TEXT NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    chat_id      TEXT NOT NULL,
    email        TEXT NOT NULL,
    created_at   INTEGER NOT NULL
);
CREATE INDEX leads_by_chatflow ON leads (chatflow_id, created_at);
