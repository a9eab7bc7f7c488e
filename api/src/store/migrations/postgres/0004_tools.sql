-- Python tools of a workspace. `schema` (the argument fields) and `requirements`
-- (package specifiers) are JSON text; names are unique per workspace.
CREATE TABLE tools (
    id            UUID PRIMARY KEY,
    workspace_id  UUID NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    schema        TEXT NOT NULL DEFAULT '[]',
    code          TEXT NOT NULL,
    requirements  TEXT NOT NULL DEFAULT '[]',
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    UNIQUE (workspace_id, name)
);
