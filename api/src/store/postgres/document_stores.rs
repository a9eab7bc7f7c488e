//! Flowise's document stores: PostgresStore's [`DocumentStoreStore`].

use super::*;
use crate::domain::document_store::content_key;
use crate::domain::{
    ChunkChange, ChunkPage, ComponentConfig, DocumentChunk, DocumentStore, DocumentStoreStatus,
    DocumentStoreWrite, StoredFile,
};

const STORE_COLUMNS: &str = "id, workspace_id, name, description, status, loaders, where_used, \
     vector_store_config, embedding_config, record_manager_config, created_at, updated_at";

#[async_trait]
impl DocumentStoreStore for PostgresStore {
    async fn create_document_store(&self, store: &DocumentStore) -> StoreResult<()> {
        let client = self.client().await?;
        write_store(
            &client,
            &format!(
                "INSERT INTO document_stores ({STORE_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
            ),
            store,
        )
        .await
        .map(drop)
    }

    async fn get_document_store(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<DocumentStore>> {
        self.query_opt(
            &format!(
                "SELECT {STORE_COLUMNS} FROM document_stores WHERE id = $1 AND workspace_id = $2"
            ),
            &[&id, &workspace],
            store_from_row,
        )
        .await
    }

    async fn list_document_stores(
        &self,
        workspace: Uuid,
        page: Option<Page>,
    ) -> StoreResult<Listing<DocumentStore>> {
        let page = page.unwrap_or(Page {
            page: 1,
            limit: u32::MAX,
        });
        self.list_page(
            "SELECT COUNT(*) FROM document_stores WHERE workspace_id = $1",
            &format!(
                "SELECT {STORE_COLUMNS} FROM document_stores WHERE workspace_id = $1
                 ORDER BY updated_at DESC, id LIMIT $2 OFFSET $3"
            ),
            &[&workspace],
            page,
            store_from_row,
        )
        .await
    }

    async fn save_document_store(&self, write: DocumentStoreWrite) -> StoreResult<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let store = &write.store;
        // $11 (the creation time) is bound but not written: cast so its type is known.
        let changed = write_store(
            &tx,
            "UPDATE document_stores SET name = $3, description = $4, status = $5,
                 loaders = $6, where_used = $7, vector_store_config = $8,
                 embedding_config = $9, record_manager_config = $10, updated_at = $12
             WHERE id = $1 AND workspace_id = $2 AND $11::timestamptz IS NOT NULL",
            store,
        )
        .await?;
        if changed == 0 {
            return Ok(false);
        }
        let id = store.id;
        match &write.chunks {
            ChunkChange::None => {}
            ChunkChange::Replace { loader, chunks } => {
                tx.execute(
                    "DELETE FROM document_store_chunks WHERE store_id = $1 AND loader_id = $2",
                    &[&id, loader],
                )
                .await
                .map_err(backend)?;
                if !chunks.is_empty() {
                    let ids: Vec<Uuid> = chunks.iter().map(|c| c.id).collect();
                    let numbers: Vec<i64> = chunks
                        .iter()
                        .map(|c| i64::try_from(c.chunk_no).unwrap_or(i64::MAX))
                        .collect();
                    let texts: Vec<&str> = chunks.iter().map(|c| c.page_content.as_str()).collect();
                    let keys: Vec<String> = chunks
                        .iter()
                        .map(|c| content_key(&c.page_content))
                        .collect();
                    let metadata = chunks
                        .iter()
                        .map(|c| json_text(&c.metadata))
                        .collect::<StoreResult<Vec<String>>>()?;
                    // One statement for all the chunks: arrays unnested into rows.
                    tx.execute(
                        "INSERT INTO document_store_chunks
                             (id, store_id, loader_id, chunk_no, page_content, content_key, metadata)
                         SELECT c.id, $1, $2, c.no, c.text, c.key, c.meta
                         FROM UNNEST($3::uuid[], $4::bigint[], $5::text[], $6::text[], $7::text[])
                             AS c(id, no, text, key, meta)",
                        &[&id, loader, &ids, &numbers, &texts, &keys, &metadata],
                    )
                    .await
                    .map_err(backend)?;
                }
            }
            ChunkChange::RemoveLoader(loader) => {
                for table in ["document_store_chunks", "document_store_files"] {
                    tx.execute(
                        &format!("DELETE FROM {table} WHERE store_id = $1 AND loader_id = $2"),
                        &[&id, loader],
                    )
                    .await
                    .map_err(backend)?;
                }
            }
            ChunkChange::Edit(c) => {
                tx.execute(
                    "UPDATE document_store_chunks
                     SET page_content = $3, metadata = $4, content_key = $5
                     WHERE store_id = $1 AND id = $2",
                    &[
                        &id,
                        &c.id,
                        &c.page_content,
                        &json_text(&c.metadata)?,
                        &content_key(&c.page_content),
                    ],
                )
                .await
                .map_err(backend)?;
            }
            ChunkChange::Remove(chunk) => {
                tx.execute(
                    "DELETE FROM document_store_chunks WHERE store_id = $1 AND id = $2",
                    &[&id, chunk],
                )
                .await
                .map_err(backend)?;
            }
        }
        if let Some((loader, files)) = &write.files {
            tx.execute(
                "DELETE FROM document_store_files WHERE store_id = $1 AND loader_id = $2",
                &[&id, loader],
            )
            .await
            .map_err(backend)?;
            for f in files {
                tx.execute(
                    "INSERT INTO document_store_files (store_id, loader_id, name, bytes)
                     VALUES ($1, $2, $3, $4)",
                    &[&id, loader, &f.name, &f.bytes],
                )
                .await
                .map_err(backend)?;
            }
        }
        tx.commit().await.map_err(backend)?;
        Ok(true)
    }

    async fn set_document_store_status(
        &self,
        id: Uuid,
        status: DocumentStoreStatus,
    ) -> StoreResult<bool> {
        self.execute(
            "UPDATE document_stores SET status = $2, updated_at = $3 WHERE id = $1",
            &[&id, &status.as_str(), &time::now()],
        )
        .await
        .map(|n| n > 0)
    }

    async fn set_document_store_users(&self, id: Uuid, where_used: &[Uuid]) -> StoreResult<bool> {
        let used = json_text(&where_used)?;
        self.execute(
            "UPDATE document_stores SET where_used = $2 WHERE id = $1",
            &[&id, &used],
        )
        .await
        .map(|n| n > 0)
    }

    async fn delete_document_store(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.execute(
            "DELETE FROM document_stores WHERE id = $1 AND workspace_id = $2",
            &[&id, &workspace],
        )
        .await
        .map(|n| n > 0)
    }

    async fn document_chunks(
        &self,
        store: Uuid,
        loader: Option<Uuid>,
        window: Option<(u64, u64)>,
    ) -> StoreResult<ChunkPage> {
        let client = self.client().await?;
        let filter = "store_id = $1 AND ($2::uuid IS NULL OR loader_id = $2)";
        let totals = client
            .query_one(
                &format!(
                    "SELECT COUNT(*), COALESCE(SUM(LENGTH(page_content)), 0)::bigint
                     FROM document_store_chunks WHERE {filter}"
                ),
                &[&store, &loader],
            )
            .await
            .map_err(backend)?;
        let (offset, limit) = window.unwrap_or((0, u64::MAX));
        let rows = client
            .query(
                &format!(
                    "SELECT id, store_id, loader_id, chunk_no, page_content, metadata
                     FROM document_store_chunks WHERE {filter}
                     ORDER BY loader_id, chunk_no LIMIT $3 OFFSET $4"
                ),
                &[
                    &store,
                    &loader,
                    &i64::try_from(limit).unwrap_or(i64::MAX),
                    &i64::try_from(offset).unwrap_or(i64::MAX),
                ],
            )
            .await
            .map_err(backend)?;
        let total: i64 = totals.try_get(0).map_err(backend)?;
        let characters: i64 = totals.try_get(1).map_err(backend)?;
        Ok(ChunkPage {
            chunks: rows
                .iter()
                .map(chunk_row)
                .collect::<PgResult<_>>()
                .map_err(backend)?,
            total: u64::try_from(total).unwrap_or(0),
            characters: u64::try_from(characters).unwrap_or(0),
        })
    }

    async fn loader_files(&self, store: Uuid, loader: Uuid) -> StoreResult<Vec<StoredFile>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT name, bytes FROM document_store_files
                 WHERE store_id = $1 AND loader_id = $2 ORDER BY name",
                &[&store, &loader],
            )
            .await
            .map_err(backend)?;
        rows.iter()
            .map(|r| {
                Ok(StoredFile {
                    name: r.try_get(0)?,
                    bytes: r.try_get(1)?,
                })
            })
            .collect::<PgResult<_>>()
            .map_err(backend)
    }

    async fn find_document_chunks(
        &self,
        store: Uuid,
        contents: Vec<String>,
    ) -> StoreResult<Vec<DocumentChunk>> {
        if contents.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = contents.iter().map(|c| content_key(c)).collect();
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, store_id, loader_id, chunk_no, page_content, metadata
                 FROM document_store_chunks
                 WHERE store_id = $1 AND content_key = ANY($2::text[])",
                &[&store, &keys],
            )
            .await
            .map_err(backend)?;
        let found: Vec<DocumentChunk> = rows
            .iter()
            .map(chunk_row)
            .collect::<PgResult<_>>()
            .map_err(backend)?;
        Ok(found
            .into_iter()
            .filter(|c| contents.contains(&c.page_content))
            .collect())
    }
}

/// Binds a store's columns in `STORE_COLUMNS` order.
async fn write_store(
    client: &impl GenericClient,
    sql: &str,
    s: &DocumentStore,
) -> StoreResult<u64> {
    let config = |c: &Option<ComponentConfig>| c.as_ref().map(json_text).transpose();
    let (loaders, where_used) = (json_text(&s.loaders)?, json_text(&s.where_used)?);
    let (vector, embedding, record) = (
        config(&s.vector_store_config)?,
        config(&s.embedding_config)?,
        config(&s.record_manager_config)?,
    );
    client
        .execute(
            sql,
            &[
                &s.id,
                &s.workspace_id,
                &s.name,
                &s.description,
                &s.status.as_str(),
                &loaders,
                &where_used,
                &vector,
                &embedding,
                &record,
                &s.created_date,
                &s.updated_date,
            ],
        )
        .await
        .map_err(backend)
}

fn store_from_row(row: &Row) -> PgResult<DocumentStore> {
    let config = |idx: usize| -> PgResult<Option<ComponentConfig>> {
        Ok(row
            .try_get::<_, Option<JsonText<ComponentConfig>>>(idx)?
            .map(|c| c.0))
    };
    Ok(DocumentStore {
        id: row.try_get(0)?,
        workspace_id: row.try_get(1)?,
        name: row.try_get(2)?,
        description: row.try_get(3)?,
        status: DocumentStoreStatus::parse_stored(row.try_get(4)?),
        loaders: row.try_get::<_, JsonText<_>>(5)?.0,
        where_used: row.try_get::<_, JsonText<_>>(6)?.0,
        vector_store_config: config(7)?,
        embedding_config: config(8)?,
        record_manager_config: config(9)?,
        created_date: row.try_get(10)?,
        updated_date: row.try_get(11)?,
    })
}

fn chunk_row(row: &Row) -> PgResult<DocumentChunk> {
    Ok(DocumentChunk {
        id: row.try_get(0)?,
        store_id: row.try_get(1)?,
        loader_id: row.try_get(2)?,
        chunk_no: u64::try_from(row.try_get::<_, i64>(3)?).unwrap_or(0),
        page_content: row.try_get(4)?,
        metadata: row.try_get::<_, JsonText<_>>(5)?.0,
    })
}
