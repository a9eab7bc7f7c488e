-- Remote MCP servers a workspace keeps (Flowise's CustomMcpServer) for its flows'
-- customMcpServerTool nodes: the URL, the headers sealed (`auth_config`), and what
-- `authorize` found (`tools`: the tools/list answer, `status`).
CREATE TABLE custom_mcp_servers (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    server_url    TEXT NOT NULL,
    icon_src      TEXT,
    color         TEXT,
    auth_type     TEXT NOT NULL DEFAULT 'NONE',
    auth_config   TEXT,
    tools         TEXT,
    tool_count    INTEGER NOT NULL DEFAULT 0,
    status        TEXT NOT NULL DEFAULT 'PENDING',
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX custom_mcp_servers_by_workspace ON custom_mcp_servers (workspace_id, created_at);
