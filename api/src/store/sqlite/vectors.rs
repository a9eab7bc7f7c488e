//! Vector stores: chunks, versions, upsert history, and pgvector where it is in use: SqliteStore's [`VectorStore`].

use super::*;

#[async_trait]
impl VectorStore for SqliteStore {
    async fn vector_store_version(&self, chatflow: Uuid, node_id: &str) -> StoreResult<i64> {
        let node_id = node_id.to_owned();
        self.read(move |conn| store_version(conn, chatflow, &node_id))
            .await
    }

    async fn list_vector_chunks(
        &self,
        chatflow: Uuid,
        node_id: &str,
    ) -> StoreResult<(i64, Vec<VectorChunk>)> {
        let node_id = node_id.to_owned();
        self.read(move |conn| {
            // One read transaction: the version and the chunks of one snapshot.
            let tx = conn.transaction()?;
            let version = store_version(&tx, chatflow, &node_id)?;
            let mut stmt = tx.prepare_cached(
                "SELECT id, content_hash, source, chat_id, page_content, metadata, embedding
                 FROM vector_chunks WHERE chatflow_id = ?1 AND node_id = ?2 ORDER BY seq",
            )?;
            let chunks = stmt
                .query_map(params![chatflow.to_string(), node_id], chunk_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            drop(stmt);
            tx.commit()?;
            Ok((version, chunks))
        })
        .await
    }

    async fn vector_chunk_keys(&self, chatflow: Uuid, node_id: &str) -> StoreResult<Vec<ChunkKey>> {
        let node_id = node_id.to_owned();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, content_hash, source, length(embedding) / 4 FROM vector_chunks
                 WHERE chatflow_id = ?1 AND node_id = ?2 ORDER BY seq",
            )?;
            stmt.query_map(params![chatflow.to_string(), node_id], |row| {
                Ok(ChunkKey {
                    id: uuid_at(row, 0)?,
                    content_hash: row.get(1)?,
                    source: row.get(2)?,
                    dims: usize::try_from(row.get::<_, i64>(3)?).unwrap_or(0),
                })
            })?
            .collect()
        })
        .await
    }

    async fn write_vectors(&self, write: VectorWrite) -> StoreResult<UpsertRecord> {
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let chatflow = write.chatflow_id.to_string();
            {
                let mut delete = tx.prepare_cached(
                    "DELETE FROM vector_chunks WHERE id = ?1 AND chatflow_id = ?2 AND node_id = ?3",
                )?;
                for id in &write.deleted {
                    delete.execute(params![id.to_string(), chatflow, write.node_id])?;
                }
                let mut insert = tx.prepare_cached(
                    "INSERT INTO vector_chunks (id, chatflow_id, node_id, content_hash, source,
                                                chat_id, page_content, metadata, embedding)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )?;
                for c in &write.added {
                    insert.execute(params![
                        c.id.to_string(),
                        chatflow,
                        write.node_id,
                        c.content_hash,
                        c.source,
                        c.chat_id,
                        c.page_content,
                        json_text(&c.metadata)?,
                        embedding_bytes(&c.embedding),
                    ])?;
                }
            }
            tx.execute(
                "INSERT INTO vector_stores (chatflow_id, node_id, version) VALUES (?1, ?2, 1)
                 ON CONFLICT (chatflow_id, node_id) DO UPDATE SET version = version + 1",
                params![chatflow, write.node_id],
            )?;
            let record = UpsertRecord {
                id: Uuid::now_v7(),
                chatflow_id: write.chatflow_id,
                node_id: write.node_id,
                counts: write.counts,
                date: time::now(),
            };
            let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            tx.execute(
                "INSERT INTO upsert_history (id, chatflow_id, node_id, num_added, num_updated,
                                             num_skipped, num_deleted, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    record.id.to_string(),
                    chatflow,
                    record.node_id,
                    count(record.counts.num_added),
                    count(record.counts.num_updated),
                    count(record.counts.num_skipped),
                    count(record.counts.num_deleted),
                    to_millis(&record.date),
                ],
            )?;
            tx.commit()?;
            Ok(record)
        })
        .await
    }

    async fn list_upsert_history(
        &self,
        chatflow: Uuid,
        limit: u32,
    ) -> StoreResult<Vec<UpsertRecord>> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, chatflow_id, node_id, num_added, num_updated, num_skipped,
                        num_deleted, created_at
                 FROM upsert_history WHERE chatflow_id = ?1
                 ORDER BY created_at DESC, id DESC LIMIT ?2",
            )?;
            stmt.query_map(params![chatflow.to_string(), limit], |row| {
                let count = |i| row.get::<_, i64>(i).map(|n| u64::try_from(n).unwrap_or(0));
                Ok(UpsertRecord {
                    id: uuid_at(row, 0)?,
                    chatflow_id: uuid_at(row, 1)?,
                    node_id: row.get(2)?,
                    counts: UpsertCounts {
                        num_added: count(3)?,
                        num_updated: count(4)?,
                        num_skipped: count(5)?,
                        num_deleted: count(6)?,
                    },
                    date: from_millis(row.get(7)?),
                })
            })?
            .collect()
        })
        .await
    }
}
