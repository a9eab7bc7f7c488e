-- A sequential-agents flow's checkpoint per session, when its start has agent memory:
-- the state and the whole conversation a run ended with (JSON text), where the
-- session's next run begins.
CREATE TABLE agent_checkpoints (
    chatflow_id  TEXT NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    session_id   TEXT NOT NULL,
    checkpoint   TEXT NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (chatflow_id, session_id)
);
