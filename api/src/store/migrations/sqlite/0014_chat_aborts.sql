-- Stops asked of running predictions (`PUT /chatmessage/abort`), one row per
-- chat, read by every replica that runs predictions and swept after minutes.
CREATE TABLE chat_aborts (
    chatflow_id   TEXT NOT NULL,
    chat_id       TEXT NOT NULL,
    requested_at  INTEGER NOT NULL,
    PRIMARY KEY (chatflow_id, chat_id)
);
CREATE INDEX chat_aborts_by_time ON chat_aborts (requested_at);
