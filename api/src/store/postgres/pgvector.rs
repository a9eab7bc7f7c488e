//! pgvector under the `postgres` vector store node (Flowise's pgvector node):
//! setting it up at the server's start, the statements that write and search
//! the chunks' vectors with it, and its approximate (HNSW) indexes.
//!
//! Every chunk stays in `vector_chunks` with its embedding as bytes (what
//! weir's own index is built from); with pgvector the table also has an
//! `embedding_v vector` column, written with every chunk, which PostgreSQL
//! searches by cosine distance. The column has no fixed length, because each
//! store's embeddings have their own; an HNSW index needs one, so there is an
//! index per embedding length, on the expression `embedding_v::vector(N)` and
//! limited to the rows of that length (`vector_dims(embedding_v) = N`). The
//! first upsert or search with a new length builds it in the background
//! (`CREATE INDEX CONCURRENTLY`: writes go on meanwhile), and the search names
//! the same expression and condition, so the planner can use it: for a node
//! with few chunks it still walks the `(chatflow_id, node_id)` index and
//! sorts (exact), for a big one it walks the graph (`hnsw.ef_search`
//! candidates, `PGVECTOR_EF_SEARCH`; iterative scans keep going until enough
//! rows pass the node's filter). Vectors longer than pgvector's HNSW limit
//! (2,000) are searched exactly.
//!
//! The extension lives in `public` when weir installs it (a schema per
//! installation or test run would take the type with it when dropped); one
//! installed elsewhere is used where it is. Statements name its type and
//! operator with their schema, so they do not depend on the `search_path`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio_postgres::Client;

use super::backend;
use crate::domain::vector::embedding_from_bytes;
use crate::store::{Pgvector, StoreError, StoreResult};

/// The advisory lock replicas starting together take around the setup, so
/// one installs the extension and adds the column while the others wait.
const SETUP_LOCK: i64 = 0x7765_6972_7067_7663;
/// The advisory lock class (with the embedding length) replicas take turns
/// under while seeing to an HNSW index.
const INDEX_LOCK: i32 = 0x7768_6e73;
/// Chunks given their vector per round trip while filling the column.
const BACKFILL_BATCH: i64 = 512;
/// The longest vectors pgvector's HNSW index takes (for the `vector` type).
const HNSW_MAX_DIMENSIONS: usize = 2000;
/// Memory an index build may use before it slows down (the graph of 100,000
/// 384-float vectors is about 200 MB).
const INDEX_BUILD_MEMORY: &str = "512MB";

/// The statements of a store that uses pgvector.
#[derive(Clone)]
pub(super) struct PgvectorSql {
    /// `vector_chunks`' insert with `embedding_v` as its tenth parameter (`real[]`).
    pub insert: String,
    /// The extension's schema, quoted.
    schema: String,
    /// `SET LOCAL` of the HNSW search settings (`None`: this pgvector has no
    /// HNSW, before 0.5.0), run in the search's transaction.
    pub search_settings: Option<String>,
    /// Embedding lengths whose HNSW index this process has seen to, or is
    /// building.
    indexed: Arc<Mutex<HashSet<usize>>>,
}

impl PgvectorSql {
    /// The nearest chunks to a question of `dimensions` floats: `$1` chatflow,
    /// `$2` node, `$3` the question's vector (`real[]`), `$4` the chat, `$5`
    /// how many; the chunk's columns as `chunk_from_row` reads them, then the
    /// cosine distance.
    pub fn nearest(&self, dimensions: usize) -> String {
        let schema = &self.schema;
        let (column, question, only_this_length) = if self.hnsw(dimensions) {
            (
                format!("(embedding_v::{schema}.vector({dimensions}))"),
                format!("($3::real[]::{schema}.vector({dimensions}))"),
                format!("AND {schema}.vector_dims(embedding_v) = {dimensions}"),
            )
        } else {
            (
                "embedding_v".to_owned(),
                format!("($3::real[]::{schema}.vector)"),
                String::new(),
            )
        };
        format!(
            "SELECT id, content_hash, source, chat_id, page_content, metadata, embedding,
                    {column} OPERATOR({schema}.<=>) {question} AS distance
             FROM vector_chunks
             WHERE chatflow_id = $1 AND node_id = $2 AND embedding_v IS NOT NULL
               {only_this_length}
               AND (chat_id IS NULL OR chat_id = $4)
             ORDER BY {column} OPERATOR({schema}.<=>) {question} LIMIT $5"
        )
    }

    /// Whether vectors of `dimensions` floats get an index that nobody has seen
    /// to yet in this process (the caller then does, with [`ensure_index`]).
    pub fn index_due(&self, dimensions: usize) -> bool {
        self.hnsw(dimensions)
            && self
                .indexed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(dimensions)
    }

    /// Whether vectors of `dimensions` floats are searched through an HNSW index.
    pub fn hnsw(&self, dimensions: usize) -> bool {
        self.search_settings.is_some() && (1..=HNSW_MAX_DIMENSIONS).contains(&dimensions)
    }

    /// Forgets that `dimensions` was seen to (its build failed: the next
    /// upsert or search tries again).
    pub fn index_failed(&self, dimensions: usize) {
        self.indexed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&dimensions);
    }
}

/// The `SET LOCAL`s of an HNSW search with pgvector `version`: `ef_search`
/// (0.5.0, with HNSW itself) and, from 0.8.0, iterative scans, so that a node's
/// filter thinning the graph's candidates does not leave fewer than asked for.
fn search_settings(version: &str, ef_search: u32) -> Option<String> {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let release = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if release < (0, 5) {
        return None;
    }
    let mut settings = format!("SET LOCAL hnsw.ef_search = {ef_search}");
    if release >= (0, 8) {
        settings.push_str("; SET LOCAL hnsw.iterative_scan = strict_order");
    }
    Some(settings)
}

/// The name of the HNSW index over vectors of `dimensions` floats.
pub(super) fn index_name(dimensions: usize) -> String {
    format!("vector_chunks_hnsw_{dimensions}")
}

/// Makes sure the HNSW index for vectors of `dimensions` floats exists and is
/// valid in the store's schema, building it (concurrently: writes go on) when
/// not; a build another replica left half-done is dropped and built again.
/// Replicas take turns (a session advisory lock per length), so an index one
/// of them is building is never taken for a leftover. Returns whether it built
/// one.
pub(super) async fn ensure_index(
    client: &Client,
    sql: &PgvectorSql,
    dimensions: usize,
) -> Result<bool, tokio_postgres::Error> {
    let key = i32::try_from(dimensions).unwrap_or(i32::MAX);
    client
        .execute("SELECT pg_advisory_lock($1, $2)", &[&INDEX_LOCK, &key])
        .await?;
    let outcome = build_index(client, sql, dimensions).await;
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1, $2)", &[&INDEX_LOCK, &key])
        .await;
    let built = outcome?;
    unlocked?;
    Ok(built)
}

async fn build_index(
    client: &Client,
    sql: &PgvectorSql,
    dimensions: usize,
) -> Result<bool, tokio_postgres::Error> {
    let name = index_name(dimensions);
    let valid: Option<bool> = client
        .query_opt(
            "SELECT i.indisvalid FROM pg_index i
             JOIN pg_class c ON c.oid = i.indexrelid
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relname = $1 AND n.nspname = current_schema()",
            &[&name],
        )
        .await?
        .map(|row| row.get(0));
    match valid {
        Some(true) => return Ok(false),
        Some(false) => {
            client
                .batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {name}"))
                .await?;
        }
        None => {}
    }
    let schema = &sql.schema;
    // One statement per message: CONCURRENTLY refuses to run in the implicit
    // transaction of a multi-statement query.
    client
        .batch_execute(&format!(
            "SET maintenance_work_mem = '{INDEX_BUILD_MEMORY}'"
        ))
        .await?;
    let built = client
        .batch_execute(&format!(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON vector_chunks
               USING hnsw ((embedding_v::{schema}.vector({dimensions})) {schema}.vector_cosine_ops)
               WHERE {schema}.vector_dims(embedding_v) = {dimensions}"
        ))
        .await;
    client.batch_execute("RESET maintenance_work_mem").await?;
    built.map(|()| true)
}

/// Sets pgvector up; `Ok(Err(outcome))` when it cannot be used (the outcome
/// says why), `Ok(Ok(..))` with the statements and what was found when it is.
pub(super) async fn enable(
    client: &mut Client,
    ef_search: u32,
) -> StoreResult<Result<(PgvectorSql, Pgvector), Pgvector>> {
    let offered = client
        .query_opt(
            "SELECT installed_version FROM pg_available_extensions WHERE name = 'vector'",
            &[],
        )
        .await
        .map_err(backend)?;
    let Some(offered) = offered else {
        return Ok(Err(Pgvector::Unavailable));
    };
    let installed: Option<String> = offered.try_get(0).map_err(backend)?;

    let tx = client.transaction().await.map_err(backend)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SETUP_LOCK])
        .await
        .map_err(backend)?;
    if installed.is_none()
        && let Err(e) = tx
            .batch_execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            .await
    {
        return Ok(Err(Pgvector::Refused(reason(&e))));
    }
    let row = tx
        .query_one(
            "SELECT n.nspname, e.extversion FROM pg_extension e
             JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'",
            &[],
        )
        .await
        .map_err(backend)?;
    let schema = quote_ident(&row.try_get::<_, String>(0).map_err(backend)?);
    let version: String = row.try_get(1).map_err(backend)?;
    let vector = format!("{schema}.vector");
    // Only when missing: ALTER TABLE locks the table, even when it changes nothing.
    let has_column = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = 'vector_chunks'
               AND column_name = 'embedding_v')",
            &[],
        )
        .await
        .map_err(backend)?
        .try_get::<_, bool>(0)
        .map_err(backend)?;
    if !has_column
        && let Err(e) = tx
            .batch_execute(&format!(
                "ALTER TABLE vector_chunks ADD COLUMN IF NOT EXISTS embedding_v {vector}"
            ))
            .await
    {
        return Ok(Err(Pgvector::Refused(reason(&e))));
    }
    tx.commit().await.map_err(backend)?;

    let backfilled = backfill(client, &vector).await?;
    let sql = PgvectorSql {
        insert: format!(
            "INSERT INTO vector_chunks (id, chatflow_id, node_id, content_hash, source, chat_id,
                                        page_content, metadata, embedding, embedding_v)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::real[]::{vector})"
        ),
        search_settings: search_settings(&version, ef_search),
        schema,
        indexed: Arc::default(),
    };
    Ok(Ok((
        sql,
        Pgvector::Enabled {
            version,
            backfilled,
        },
    )))
}

/// Gives every chunk stored without its vector (before pgvector, or while it
/// was off) its vector; returns how many.
async fn backfill(client: &Client, vector: &str) -> StoreResult<u64> {
    let update = client
        .prepare(&format!(
            "UPDATE vector_chunks SET embedding_v = $2::real[]::{vector} WHERE seq = $1"
        ))
        .await
        .map_err(backend)?;
    let mut filled = 0;
    // Paged by `seq` (the primary key), so each batch reads on from the last.
    let mut after: i64 = 0;
    loop {
        let rows = client
            .query(
                "SELECT seq, embedding FROM vector_chunks WHERE seq > $1 AND embedding_v IS NULL
                 ORDER BY seq LIMIT $2",
                &[&after, &BACKFILL_BATCH],
            )
            .await
            .map_err(backend)?;
        if rows.is_empty() {
            return Ok(filled);
        }
        let mut batch = Vec::with_capacity(rows.len());
        for row in &rows {
            let seq: i64 = row.try_get(0).map_err(backend)?;
            let bytes: &[u8] = row.try_get(1).map_err(backend)?;
            let embedding = embedding_from_bytes(bytes)
                .filter(|e| !e.is_empty())
                .ok_or_else(|| {
                    StoreError::Backend(format!(
                        "chunk {seq} has no embedding pgvector can hold ({} bytes)",
                        bytes.len()
                    ))
                })?;
            after = after.max(seq);
            batch.push((seq, embedding));
        }
        // Pipelined, as the inserts are: one round trip for the batch.
        type Param<'p> = &'p (dyn tokio_postgres::types::ToSql + Sync);
        let params: Vec<[Param<'_>; 2]> = batch
            .iter()
            .map(|(seq, embedding)| -> [Param<'_>; 2] { [seq, embedding] })
            .collect();
        let updates = params.iter().map(|p| client.execute(&update, p));
        futures_util::future::try_join_all(updates)
            .await
            .map_err(backend)?;
        filled += batch.len() as u64;
    }
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The database's own words for a failed statement.
fn reason(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map_or_else(|| e.to_string(), |db| db.message().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hnsw_settings_follow_the_extensions_version() {
        assert_eq!(search_settings("0.4.4", 100), None);
        assert_eq!(
            search_settings("0.7.4", 40).as_deref(),
            Some("SET LOCAL hnsw.ef_search = 40")
        );
        assert_eq!(
            search_settings("0.8.1", 100).as_deref(),
            Some("SET LOCAL hnsw.ef_search = 100; SET LOCAL hnsw.iterative_scan = strict_order")
        );
    }
}
