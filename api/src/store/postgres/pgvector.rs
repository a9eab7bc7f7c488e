//! pgvector under the `postgres` vector store node (Flowise's pgvector node):
//! setting it up at the server's start, and the statements that write and
//! search the chunks' vectors with it.
//!
//! Every chunk stays in `vector_chunks` with its embedding as bytes (what
//! weir's own index is built from); with pgvector the table also has an
//! `embedding_v vector` column, written with every chunk, which PostgreSQL
//! searches by cosine distance. The column has no fixed length, because each
//! store's embeddings have their own, so the search is exact (a scan of the
//! node's rows, found through the `(chatflow_id, node_id)` index): recall is
//! that of exact search, and the server holds none of those chunks in memory.
//!
//! The extension lives in `public` when weir installs it (a schema per
//! installation or test run would take the type with it when dropped); one
//! installed elsewhere is used where it is. Statements name its type and
//! operator with their schema, so they do not depend on the `search_path`.

use tokio_postgres::Client;

use super::backend;
use crate::domain::vector::embedding_from_bytes;
use crate::store::{Pgvector, StoreError, StoreResult};

/// The advisory lock replicas starting together take around the setup, so
/// one installs the extension and adds the column while the others wait.
const SETUP_LOCK: i64 = 0x7765_6972_7067_7663;
/// Chunks given their vector per round trip while filling the column.
const BACKFILL_BATCH: i64 = 512;

/// The statements of a store that uses pgvector.
#[derive(Clone)]
pub(super) struct PgvectorSql {
    /// `vector_chunks`' insert with `embedding_v` as its tenth parameter (`real[]`).
    pub insert: String,
    /// `$1` chatflow, `$2` node, `$3` the question's vector (`real[]`), `$4` the
    /// chat, `$5` how many: the chunk's columns as `chunk_from_row` reads them,
    /// then the cosine distance.
    pub nearest: String,
}

/// Sets pgvector up; `Ok(Err(outcome))` when it cannot be used (the outcome
/// says why), `Ok(Ok(..))` with the statements and what was found when it is.
pub(super) async fn enable(
    client: &mut Client,
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
        nearest: format!(
            "SELECT id, content_hash, source, chat_id, page_content, metadata, embedding,
                    embedding_v OPERATOR({schema}.<=>) question.v AS distance
             FROM vector_chunks, (SELECT $3::real[]::{vector} AS v) AS question
             WHERE chatflow_id = $1 AND node_id = $2 AND embedding_v IS NOT NULL
               AND (chat_id IS NULL OR chat_id = $4)
             ORDER BY distance LIMIT $5"
        ),
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
