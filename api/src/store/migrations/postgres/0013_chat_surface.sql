-- The chat surface Flowise's clients call: messages carry what Flowise's
-- ChatMessage carries (the kind of chat, the agentflow execution, the memory's
-- kind, and the rest as one JSON object of details), visitors rate answers
-- (feedback, one rating per message), and leads keep a name and a phone beside
-- the e-mail address (each optional, as Flowise's lead form has it).
ALTER TABLE chat_messages ADD COLUMN chat_type TEXT NOT NULL DEFAULT 'EXTERNAL';
ALTER TABLE chat_messages ADD COLUMN execution_id UUID;
ALTER TABLE chat_messages ADD COLUMN memory_type TEXT;
ALTER TABLE chat_messages ADD COLUMN details TEXT;
CREATE INDEX chat_messages_by_date ON chat_messages (chatflow_id, created_at);

CREATE TABLE chat_feedback (
    id           UUID PRIMARY KEY,
    chatflow_id  UUID NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    chat_id      TEXT NOT NULL,
    message_id   UUID NOT NULL UNIQUE REFERENCES chat_messages(id) ON DELETE CASCADE,
    rating       TEXT NOT NULL,
    content      TEXT,
    created_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX chat_feedback_by_chatflow ON chat_feedback (chatflow_id, created_at);

ALTER TABLE leads ALTER COLUMN email DROP NOT NULL;
ALTER TABLE leads ADD COLUMN name TEXT;
ALTER TABLE leads ADD COLUMN phone TEXT;
