-- Agentflow executions: one row per run of an agentflow in a session. `execution_data`
-- (a JSON array) and `action` are JSON text kept as written. `seq` orders rows made
-- in the same millisecond (the newest execution of a session is where a run resumes).
CREATE TABLE executions (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    agentflow_id    TEXT NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    session_id      TEXT NOT NULL,
    state           TEXT NOT NULL,
    execution_data  TEXT NOT NULL,
    action          TEXT,
    is_public       INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    stopped_at      INTEGER
);
CREATE INDEX executions_by_session ON executions (agentflow_id, session_id, created_at, seq);
-- Scanned backwards by listings: newest `updated_at` first, then newest row.
CREATE INDEX executions_by_workspace_updated ON executions (workspace_id, updated_at, seq);
