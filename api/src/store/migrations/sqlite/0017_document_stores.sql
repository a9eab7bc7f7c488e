-- Flowise's document stores: loaders whose chunks a person reads and edits, then
-- embeds into a vector store flows search. A store's vectors live in the vector
-- tables beside chatflows' vector store nodes, under the store's id (node
-- 'documentStore'), so `vector_*.chatflow_id` now names the chunks' owner — a
-- chatflow or a document store — and loses its foreign key to chatflows; the
-- owner's delete removes them instead (the triggers below).
CREATE TABLE document_stores (
    id                     TEXT PRIMARY KEY,
    workspace_id           TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name                   TEXT NOT NULL,
    description            TEXT NOT NULL,
    status                 TEXT NOT NULL,
    loaders                TEXT NOT NULL,
    where_used             TEXT NOT NULL,
    vector_store_config    TEXT,
    embedding_config       TEXT,
    record_manager_config  TEXT,
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL
);
CREATE INDEX document_stores_by_workspace ON document_stores (workspace_id, updated_at DESC);

CREATE TABLE document_store_chunks (
    id            TEXT PRIMARY KEY,
    store_id      TEXT NOT NULL REFERENCES document_stores(id) ON DELETE CASCADE,
    loader_id     TEXT NOT NULL,
    chunk_no      INTEGER NOT NULL,
    page_content  TEXT NOT NULL,
    -- A hash of page_content: a query's hits are found by it (the text itself
    -- is too long to index).
    content_key   TEXT NOT NULL,
    metadata      TEXT NOT NULL
);
CREATE INDEX document_store_chunks_by_loader ON document_store_chunks (store_id, loader_id, chunk_no);
CREATE INDEX document_store_chunks_by_content ON document_store_chunks (store_id, content_key);

CREATE TABLE document_store_files (
    store_id   TEXT NOT NULL REFERENCES document_stores(id) ON DELETE CASCADE,
    loader_id  TEXT NOT NULL,
    name       TEXT NOT NULL,
    bytes      BLOB NOT NULL,
    PRIMARY KEY (store_id, loader_id, name)
);

CREATE TABLE vector_stores_owned (
    chatflow_id  TEXT NOT NULL,
    node_id      TEXT NOT NULL,
    version      INTEGER NOT NULL,
    PRIMARY KEY (chatflow_id, node_id)
);
INSERT INTO vector_stores_owned SELECT chatflow_id, node_id, version FROM vector_stores;
DROP TABLE vector_stores;
ALTER TABLE vector_stores_owned RENAME TO vector_stores;

CREATE TABLE vector_chunks_owned (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    chatflow_id   TEXT NOT NULL,
    node_id       TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    source        TEXT,
    chat_id       TEXT,
    page_content  TEXT NOT NULL,
    metadata      TEXT NOT NULL,
    embedding     BLOB NOT NULL
);
INSERT INTO vector_chunks_owned
    SELECT seq, id, chatflow_id, node_id, content_hash, source, chat_id, page_content, metadata, embedding
    FROM vector_chunks;
DROP TABLE vector_chunks;
ALTER TABLE vector_chunks_owned RENAME TO vector_chunks;
CREATE INDEX vector_chunks_by_store ON vector_chunks (chatflow_id, node_id, seq);
CREATE UNIQUE INDEX vector_chunks_by_hash ON vector_chunks (chatflow_id, node_id, content_hash);

CREATE TABLE upsert_history_owned (
    id           TEXT PRIMARY KEY,
    chatflow_id  TEXT NOT NULL,
    node_id      TEXT NOT NULL,
    num_added    INTEGER NOT NULL,
    num_updated  INTEGER NOT NULL,
    num_skipped  INTEGER NOT NULL,
    num_deleted  INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
);
INSERT INTO upsert_history_owned
    SELECT id, chatflow_id, node_id, num_added, num_updated, num_skipped, num_deleted, created_at
    FROM upsert_history;
DROP TABLE upsert_history;
ALTER TABLE upsert_history_owned RENAME TO upsert_history;
CREATE INDEX upsert_history_by_chatflow ON upsert_history (chatflow_id, created_at);

CREATE TRIGGER chatflows_drop_vectors AFTER DELETE ON chatflows BEGIN
    DELETE FROM vector_chunks WHERE chatflow_id = OLD.id;
    DELETE FROM vector_stores WHERE chatflow_id = OLD.id;
    DELETE FROM upsert_history WHERE chatflow_id = OLD.id;
END;
CREATE TRIGGER document_stores_drop_vectors AFTER DELETE ON document_stores BEGIN
    DELETE FROM vector_chunks WHERE chatflow_id = OLD.id;
    DELETE FROM vector_stores WHERE chatflow_id = OLD.id;
    DELETE FROM upsert_history WHERE chatflow_id = OLD.id;
END;

-- Keys that could read or change chatflows may do the same to document stores
-- (the permissions are new; a key made from now on names them itself).
UPDATE api_keys SET permissions = permissions || ' documentStores:read'
    WHERE (' ' || permissions || ' ') LIKE '% chatflows:read %';
UPDATE api_keys SET permissions = permissions || ' documentStores:write'
    WHERE (' ' || permissions || ' ') LIKE '% chatflows:write %';
