-- Credentials: named sets of secret fields, sealed (AES-256-GCM) by the server's key.
-- key_id names the key that sealed sealed_data (see sealing.rs).
CREATE TABLE credentials (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name             TEXT NOT NULL,
    credential_name  TEXT NOT NULL,
    key_id           TEXT NOT NULL,
    sealed_data      TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE INDEX credentials_by_workspace ON credentials (workspace_id, name);
CREATE INDEX credentials_by_key ON credentials (key_id);
