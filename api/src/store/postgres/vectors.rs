//! Vector stores: chunks, versions, upsert history, and pgvector where it is in use: PostgresStore's [`VectorStore`].

use super::*;

impl PostgresStore {
    /// Sees to the HNSW index of vectors of `dimensions` floats, in the
    /// background, once per length and process (see the pgvector module).
    fn index_vectors_of(&self, dimensions: usize) {
        let Some(sql) = self.pgvector.get() else {
            return;
        };
        if !sql.index_due(dimensions) {
            return;
        }
        let (store, sql) = (self.clone(), sql.clone());
        tokio::spawn(async move {
            let outcome = match store.client().await {
                Ok(client) => pgvector::ensure_index(&client, &sql, dimensions)
                    .await
                    .map_err(|e| backend(e).to_string()),
                Err(e) => Err(e.to_string()),
            };
            match outcome {
                Ok(true) => tracing::info!(
                    index = pgvector::index_name(dimensions),
                    "built pgvector's HNSW index for {dimensions}-float embeddings"
                ),
                Ok(false) => {}
                Err(why) => {
                    sql.index_failed(dimensions);
                    tracing::warn!(
                        index = pgvector::index_name(dimensions),
                        error = %why,
                        "cannot build pgvector's HNSW index; searches stay exact until it is built"
                    );
                }
            }
        });
    }
}

#[async_trait]
impl VectorStore for PostgresStore {
    async fn enable_pgvector(&self, wanted: bool) -> StoreResult<crate::store::Pgvector> {
        if !wanted {
            return Ok(crate::store::Pgvector::Off);
        }
        if self.pgvector.get().is_some() {
            return Err(StoreError::Backend("pgvector is already set up".into()));
        }
        let mut client = self.client().await?;
        match pgvector::enable(&mut client, self.options.hnsw_ef_search).await? {
            Ok((sql, found)) => {
                // Only this call sets it (checked above; called once at start).
                let _ = self.pgvector.set(sql);
                Ok(found)
            }
            Err(not_used) => Ok(not_used),
        }
    }

    fn pgvector_in_use(&self) -> bool {
        self.pgvector.get().is_some()
    }

    async fn nearest_vector_chunks(
        &self,
        chatflow: Uuid,
        node_id: &str,
        vector: &[f32],
        k: usize,
        chat_id: &str,
    ) -> StoreResult<Vec<(VectorChunk, f32)>> {
        let Some(sql) = self.pgvector.get() else {
            return Err(StoreError::Backend("pgvector is not in use".into()));
        };
        self.index_vectors_of(vector.len());
        let limit = i64::try_from(k).unwrap_or(i64::MAX);
        let mut client = self.client().await?;
        let stmt = client
            .prepare_cached(&sql.nearest(vector.len()))
            .await
            .map_err(backend)?;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&chatflow, &node_id, &vector, &chat_id, &limit];
        let rows = match sql.search_settings.as_deref() {
            // The HNSW settings hold for this search's transaction only.
            Some(settings) if sql.hnsw(vector.len()) => {
                let tx = client.transaction().await.map_err(backend)?;
                tx.batch_execute(settings).await.map_err(backend)?;
                let rows = tx.query(&stmt, &params).await.map_err(backend)?;
                tx.commit().await.map_err(backend)?;
                rows
            }
            _ => client.query(&stmt, &params).await.map_err(backend)?,
        };
        rows.iter()
            .map(|row| {
                let distance: f64 = row.try_get(7).map_err(backend)?;
                Ok((chunk_from_row(row)?, (1.0 - distance) as f32))
            })
            .collect()
    }

    async fn vector_store_version(&self, chatflow: Uuid, node_id: &str) -> StoreResult<i64> {
        self.query_opt(
            "SELECT version FROM vector_stores WHERE chatflow_id = $1 AND node_id = $2",
            &[&chatflow, &node_id],
            |r| r.try_get::<_, i64>(0),
        )
        .await
        .map(Option::unwrap_or_default)
    }

    async fn list_vector_chunks(
        &self,
        chatflow: Uuid,
        node_id: &str,
    ) -> StoreResult<(i64, Vec<VectorChunk>)> {
        let mut client = self.client().await?;
        // REPEATABLE READ: the version and the chunks of one snapshot.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(backend)?;
        let version = tx
            .query_opt(
                "SELECT version FROM vector_stores WHERE chatflow_id = $1 AND node_id = $2",
                &[&chatflow, &node_id],
            )
            .await
            .map_err(backend)?
            .map(|r| r.try_get::<_, i64>(0))
            .transpose()
            .map_err(backend)?
            .unwrap_or_default();
        let rows = tx
            .query(
                "SELECT id, content_hash, source, chat_id, page_content, metadata, embedding
                 FROM vector_chunks WHERE chatflow_id = $1 AND node_id = $2 ORDER BY seq",
                &[&chatflow, &node_id],
            )
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        let chunks = rows
            .iter()
            .map(chunk_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((version, chunks))
    }

    async fn vector_chunk_keys(&self, chatflow: Uuid, node_id: &str) -> StoreResult<Vec<ChunkKey>> {
        self.query_all(
            "SELECT id, content_hash, source, length(embedding) / 4 FROM vector_chunks
             WHERE chatflow_id = $1 AND node_id = $2 ORDER BY seq",
            &[&chatflow, &node_id],
            |row| {
                Ok(ChunkKey {
                    id: row.try_get(0)?,
                    content_hash: row.try_get(1)?,
                    source: row.try_get(2)?,
                    dims: usize::try_from(row.try_get::<_, i32>(3)?).unwrap_or(0),
                })
            },
        )
        .await
    }

    async fn write_vectors(&self, write: VectorWrite) -> StoreResult<UpsertRecord> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        if !write.deleted.is_empty() {
            tx.execute(
                "DELETE FROM vector_chunks
                 WHERE chatflow_id = $1 AND node_id = $2 AND id = ANY($3)",
                &[&write.chatflow_id, &write.node_id, &write.deleted],
            )
            .await
            .map_err(backend)?;
        }
        if !write.added.is_empty() {
            // With pgvector each chunk's vector goes into its column as well.
            let pgvector = self.pgvector.get();
            let insert = tx
                .prepare(pgvector.map_or(
                    "INSERT INTO vector_chunks (id, chatflow_id, node_id, content_hash, source,
                                                chat_id, page_content, metadata, embedding)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                    |sql| &sql.insert,
                ))
                .await
                .map_err(backend)?;
            // Pipelined: the inserts go out together, not one round trip each.
            let mut rows = Vec::with_capacity(write.added.len());
            for c in &write.added {
                rows.push((json_text(&c.metadata)?, embedding_bytes(&c.embedding)));
            }
            type Param<'p> = &'p (dyn tokio_postgres::types::ToSql + Sync);
            let params: Vec<Vec<Param<'_>>> = write
                .added
                .iter()
                .zip(&rows)
                .map(|(c, (metadata, bytes))| {
                    let mut params: Vec<Param<'_>> = vec![
                        &c.id,
                        &write.chatflow_id,
                        &write.node_id,
                        &c.content_hash,
                        &c.source,
                        &c.chat_id,
                        &c.page_content,
                        metadata,
                        bytes,
                    ];
                    if pgvector.is_some() {
                        params.push(&c.embedding);
                    }
                    params
                })
                .collect();
            let inserts = params.iter().map(|p| tx.execute(&insert, p));
            futures_util::future::try_join_all(inserts)
                .await
                .map_err(backend)?;
        }
        tx.execute(
            "INSERT INTO vector_stores (chatflow_id, node_id, version) VALUES ($1, $2, 1)
             ON CONFLICT (chatflow_id, node_id)
             DO UPDATE SET version = vector_stores.version + 1",
            &[&write.chatflow_id, &write.node_id],
        )
        .await
        .map_err(backend)?;
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
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &record.id,
                &record.chatflow_id,
                &record.node_id,
                &count(record.counts.num_added),
                &count(record.counts.num_updated),
                &count(record.counts.num_skipped),
                &count(record.counts.num_deleted),
                &record.date,
            ],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        if let Some(first) = write.added.first() {
            self.index_vectors_of(first.embedding.len());
        }
        Ok(record)
    }

    async fn list_upsert_history(
        &self,
        chatflow: Uuid,
        limit: u32,
    ) -> StoreResult<Vec<UpsertRecord>> {
        self.query_all(
            "SELECT id, chatflow_id, node_id, num_added, num_updated, num_skipped,
                    num_deleted, created_at
             FROM upsert_history WHERE chatflow_id = $1
             ORDER BY created_at DESC, id DESC LIMIT $2",
            &[&chatflow, &i64::from(limit)],
            |row| {
                let count = |i| {
                    row.try_get::<_, i64>(i)
                        .map(|n| u64::try_from(n).unwrap_or(0))
                };
                Ok(UpsertRecord {
                    id: row.try_get(0)?,
                    chatflow_id: row.try_get(1)?,
                    node_id: row.try_get(2)?,
                    counts: UpsertCounts {
                        num_added: count(3)?,
                        num_updated: count(4)?,
                        num_skipped: count(5)?,
                        num_deleted: count(6)?,
                    },
                    date: row.try_get(7)?,
                })
            },
        )
        .await
    }
}
