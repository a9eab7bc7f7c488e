-- Vector stores: the chunks of each vector store node of a chatflow, with their
-- embeddings (little-endian f32 bytes), and the record of every upsert.
-- `version` of a store moves on with every write, so caches of its index on
-- other replicas know to reload.
CREATE TABLE vector_stores (
    chatflow_id  UUID NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    node_id      TEXT NOT NULL,
    version      BIGINT NOT NULL,
    PRIMARY KEY (chatflow_id, node_id)
);

CREATE TABLE vector_chunks (
    seq           BIGSERIAL PRIMARY KEY,
    id            UUID NOT NULL UNIQUE,
    chatflow_id   UUID NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    node_id       TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    source        TEXT,
    chat_id       TEXT,
    page_content  TEXT NOT NULL,
    metadata      TEXT NOT NULL,
    embedding     BYTEA NOT NULL
);
CREATE INDEX vector_chunks_by_store ON vector_chunks (chatflow_id, node_id, seq);
-- One copy of a chunk per store: of two concurrent upserts of the same files,
-- the second to commit fails whole instead of storing duplicates.
CREATE UNIQUE INDEX vector_chunks_by_hash ON vector_chunks (chatflow_id, node_id, content_hash);

CREATE TABLE upsert_history (
    id           UUID PRIMARY KEY,
    chatflow_id  UUID NOT NULL REFERENCES chatflows(id) ON DELETE CASCADE,
    node_id      TEXT NOT NULL,
    num_added    BIGINT NOT NULL,
    num_updated  BIGINT NOT NULL,
    num_skipped  BIGINT NOT NULL,
    num_deleted  BIGINT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL
);
CREATE INDEX upsert_history_by_chatflow ON upsert_history (chatflow_id, created_at);
