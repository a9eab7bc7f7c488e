-- The chat surface Flowise's clients call: messages carry what Flowise's
-- ChatMessage carries (the kind of chat, the agentflow execution, the memory's
-- kind, and the rest as one JSON object of details), visitors rate answers
-- (feedback, one rating per message), and leads keep a name and a phone beside
-- the e-mail address (each optional, as Flowise's lead form has it).
ALTER TABLE chat_messages ADD COLUMN chat_type TEXT NOT NULL DEFAULT 'EXTERNAL';
ALTER TABLE chat_messages ADD COLUMN execution_id TEXT;
ALTER TABLE chat_messages ADD COLUMN memory_type TEXT;
ALTER TABLE chat_messages ADD COLUMN details TEXT;
CREATE INDEX chat_messages_by_date ON chat_messages (chatflow_id, created_at);

CREATE TABLE chat_feedback (
    id           TEXT PRIMARY KEY,
    chatflow_id  TEXT NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    chat_id      TEXT NOT NULL,
    message_id   TEXT NOT NULL UNIQUE REFERENCES chat_messages(id) ON DELETE CASCADE,
    rating       TEXT NOT NULL,
    content      TEXT,
    created_at   INTEGER NOT NULL
);
CREATE INDEX chat_feedback_by_chatflow ON chat_feedback (chatflow_id, created_at);

CREATE TABLE leads_with_contacts (
    id           TEXT PRIMARY KEY,
    chatflow_id  TEXT NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    chat_id      TEXT NOT NULL,
    name         TEXT,
    email        TEXT,
    phone        TEXT,
    created_at   INTEGER NOT NULL
);
INSERT INTO leads_with_contacts (id, chatflow_id, chat_id, email, created_at)
    SELECT id, chatflow_id, chat_id, email, created_at FROM leads;
DROP TABLE leads;
ALTER TABLE leads_with_contacts RENAME TO leads;
CREATE INDEX leads_by_chatflow ON leads (chatflow_id, created_at);
