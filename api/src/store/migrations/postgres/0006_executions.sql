-- Agentflow executions: one row per run of an agentflow in a session. `execution_data`
-- (a JSON array) and `action` are JSON text kept as written. `seq` orders rows made
-- in the same millisecond (the newest execution of a session is where a run resumes).
CREATE TABLE executions (
    seq             BIGSERIAL PRIMARY KEY,
    id              UUID NOT NULL UNIQUE,
    workspace_id    UUID NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    agentflow_id    UUID NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    session_id      TEXT NOT NULL,
    state           TEXT NOT NULL,
    execution_data  TEXT NOT NULL,
    action          TEXT,
    is_public       BOOLEAN NOT NULL DEFAULT FALSE,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    stopped_at      TIMESTAMPTZ
);
CREATE INDEX executions_by_session ON executions (agentflow_id, session_id, created_at, seq);
-- Scanned backwards by listings: newest `updated_at` first, then newest row.
CREATE INDEX executions_by_workspace_updated ON executions (workspace_id, updated_at, seq);
