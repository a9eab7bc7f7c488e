-- Flowise's document stores: loaders whose chunks a person reads and edits, then
-- embeds into a vector store flows search. A store's vectors live in the vector
-- tables beside chatflows' vector store nodes, under the store's id (node
-- 'documentStore'), so `vector_*.chatflow_id` now names the chunks' owner — a
-- chatflow or a document store — and loses its foreign key to chatflows; the
-- owner's delete removes them instead (the triggers below).
CREATE TABLE document_stores (
    id                     UUID PRIMARY KEY,
    workspace_id           UUID NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name                   TEXT NOT NULL,
    description            TEXT NOT NULL,
    status                 TEXT NOT NULL,
    loaders                TEXT NOT NULL,
    where_used             TEXT NOT NULL,
    vector_store_config    TEXT,
    embedding_config       TEXT,
    record_manager_config  TEXT,
    created_at             TIMESTAMPTZ NOT NULL,
    updated_at             TIMESTAMPTZ NOT NULL
);
CREATE INDEX document_stores_by_workspace ON document_stores (workspace_id, updated_at DESC);

CREATE TABLE document_store_chunks (
    id            UUID PRIMARY KEY,
    store_id      UUID NOT NULL REFERENCES document_stores(id) ON DELETE CASCADE,
    loader_id     UUID NOT NULL,
    chunk_no      BIGINT NOT NULL,
    page_content  TEXT NOT NULL,
    -- A hash of page_content: a query's hits are found by it (the text itself
    -- is too long to index).
    content_key   TEXT NOT NULL,
    metadata      TEXT NOT NULL
);
CREATE INDEX document_store_chunks_by_loader ON document_store_chunks (store_id, loader_id, chunk_no);
CREATE INDEX document_store_chunks_by_content ON document_store_chunks (store_id, content_key);

CREATE TABLE document_store_files (
    store_id   UUID NOT NULL REFERENCES document_stores(id) ON DELETE CASCADE,
    loader_id  UUID NOT NULL,
    name       TEXT NOT NULL,
    bytes      BYTEA NOT NULL,
    PRIMARY KEY (store_id, loader_id, name)
);

ALTER TABLE vector_stores DROP CONSTRAINT IF EXISTS vector_stores_chatflow_id_fkey;
ALTER TABLE vector_chunks DROP CONSTRAINT IF EXISTS vector_chunks_chatflow_id_fkey;
ALTER TABLE upsert_history DROP CONSTRAINT IF EXISTS upsert_history_chatflow_id_fkey;

CREATE FUNCTION weir_drop_owned_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM vector_chunks WHERE chatflow_id = OLD.id;
    DELETE FROM vector_stores WHERE chatflow_id = OLD.id;
    DELETE FROM upsert_history WHERE chatflow_id = OLD.id;
    RETURN OLD;
END
$$;
CREATE TRIGGER chatflows_drop_vectors AFTER DELETE ON chatflows
    FOR EACH ROW EXECUTE FUNCTION weir_drop_owned_vectors();
CREATE TRIGGER document_stores_drop_vectors AFTER DELETE ON document_stores
    FOR EACH ROW EXECUTE FUNCTION weir_drop_owned_vectors();

-- Keys that could read or change chatflows may do the same to document stores
-- (the permissions are new; a key made from now on names them itself).
UPDATE api_keys SET permissions = permissions || ' documentStores:read'
    WHERE (' ' || permissions || ' ') LIKE '% chatflows:read %';
UPDATE api_keys SET permissions = permissions || ' documentStores:write'
    WHERE (' ' || permissions || ' ') LIKE '% chatflows:write %';
