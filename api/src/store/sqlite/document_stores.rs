//! Flowise's document stores: SqliteStore's [`DocumentStoreStore`].

use super::*;
use crate::domain::document_store::content_key;
use crate::domain::{
    ChunkChange, ChunkPage, DocumentChunk, DocumentStore, DocumentStoreStatus, DocumentStoreWrite,
    StoredFile,
};

const STORE_COLUMNS: &str = "id, workspace_id, name, description, status, loaders, where_used, \
     vector_store_config, embedding_config, record_manager_config, created_at, updated_at";

#[async_trait]
impl DocumentStoreStore for SqliteStore {
    async fn create_document_store(&self, store: &DocumentStore) -> StoreResult<()> {
        let store = store.clone();
        self.call(move |conn| {
            write_store(
                conn,
                &format!(
                    "INSERT INTO document_stores ({STORE_COLUMNS})
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
                ),
                &store,
            )
            .map(drop)
        })
        .await
    }

    async fn get_document_store(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<DocumentStore>> {
        self.read(move |conn| get_store(conn, workspace, id)).await
    }

    async fn list_document_stores(
        &self,
        workspace: Uuid,
        page: Option<Page>,
    ) -> StoreResult<Listing<DocumentStore>> {
        self.read(move |conn| {
            let page = page.unwrap_or(Page {
                page: 1,
                limit: u32::MAX,
            });
            list_page(
                conn,
                "SELECT COUNT(*) FROM document_stores WHERE workspace_id = ?1",
                &format!(
                    "SELECT {STORE_COLUMNS} FROM document_stores WHERE workspace_id = ?1
                     ORDER BY updated_at DESC, id LIMIT ?2 OFFSET ?3"
                ),
                &[&workspace.to_string()],
                page,
                store_from_row,
            )
        })
        .await
    }

    async fn save_document_store(&self, write: DocumentStoreWrite) -> StoreResult<bool> {
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let store = &write.store;
            let changed = write_store(
                &tx,
                "UPDATE document_stores SET name = ?3, description = ?4, status = ?5,
                     loaders = ?6, where_used = ?7, vector_store_config = ?8,
                     embedding_config = ?9, record_manager_config = ?10, updated_at = ?12
                 WHERE id = ?1 AND workspace_id = ?2",
                store,
            )?;
            if changed == 0 {
                return Ok(false);
            }
            let id = store.id.to_string();
            match &write.chunks {
                ChunkChange::None => {}
                ChunkChange::Replace { loader, chunks } => {
                    tx.execute(
                        "DELETE FROM document_store_chunks WHERE store_id = ?1 AND loader_id = ?2",
                        params![id, loader.to_string()],
                    )?;
                    let mut insert = tx.prepare_cached(
                        "INSERT INTO document_store_chunks
                             (id, store_id, loader_id, chunk_no, page_content, content_key, metadata)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    )?;
                    for c in chunks {
                        insert.execute(params![
                            c.id.to_string(),
                            id,
                            c.loader_id.to_string(),
                            i64::try_from(c.chunk_no).unwrap_or(i64::MAX),
                            c.page_content,
                            content_key(&c.page_content),
                            json_text(&c.metadata)?,
                        ])?;
                    }
                }
                ChunkChange::RemoveLoader(loader) => {
                    for table in ["document_store_chunks", "document_store_files"] {
                        tx.execute(
                            &format!("DELETE FROM {table} WHERE store_id = ?1 AND loader_id = ?2"),
                            params![id, loader.to_string()],
                        )?;
                    }
                }
                ChunkChange::Edit(c) => {
                    tx.execute(
                        "UPDATE document_store_chunks
                         SET page_content = ?3, metadata = ?4, content_key = ?5
                         WHERE store_id = ?1 AND id = ?2",
                        params![
                            id,
                            c.id.to_string(),
                            c.page_content,
                            json_text(&c.metadata)?,
                            content_key(&c.page_content),
                        ],
                    )?;
                }
                ChunkChange::Remove(chunk) => {
                    tx.execute(
                        "DELETE FROM document_store_chunks WHERE store_id = ?1 AND id = ?2",
                        params![id, chunk.to_string()],
                    )?;
                }
            }
            if let Some((loader, files)) = &write.files {
                tx.execute(
                    "DELETE FROM document_store_files WHERE store_id = ?1 AND loader_id = ?2",
                    params![id, loader.to_string()],
                )?;
                let mut insert = tx.prepare_cached(
                    "INSERT INTO document_store_files (store_id, loader_id, name, bytes)
                     VALUES (?1, ?2, ?3, ?4)",
                )?;
                for f in files {
                    insert.execute(params![id, loader.to_string(), f.name, f.bytes])?;
                }
            }
            tx.commit()?;
            Ok(true)
        })
        .await
    }

    async fn set_document_store_status(
        &self,
        id: Uuid,
        status: DocumentStoreStatus,
    ) -> StoreResult<bool> {
        self.call(move |conn| {
            conn.execute(
                "UPDATE document_stores SET status = ?2, updated_at = ?3 WHERE id = ?1",
                params![id.to_string(), status.as_str(), to_millis(&time::now())],
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn set_document_store_users(&self, id: Uuid, where_used: &[Uuid]) -> StoreResult<bool> {
        let used = serde_json::to_string(where_used)
            .map_err(|e| StoreError::Backend(format!("cannot encode a JSON column: {e}")))?;
        self.call(move |conn| {
            conn.execute(
                "UPDATE document_stores SET where_used = ?2 WHERE id = ?1",
                params![id.to_string(), used],
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn delete_document_store(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.call(move |conn| {
            conn.execute(
                "DELETE FROM document_stores WHERE id = ?1 AND workspace_id = ?2",
                params![id.to_string(), workspace.to_string()],
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn document_chunks(
        &self,
        store: Uuid,
        loader: Option<Uuid>,
        window: Option<(u64, u64)>,
    ) -> StoreResult<ChunkPage> {
        self.read(move |conn| {
            let store = store.to_string();
            let loader = loader.map(|l| l.to_string());
            let filter = "store_id = ?1 AND (?2 IS NULL OR loader_id = ?2)";
            let (total, characters): (i64, i64) = conn.query_row(
                &format!(
                    "SELECT COUNT(*), COALESCE(SUM(LENGTH(page_content)), 0)
                     FROM document_store_chunks WHERE {filter}"
                ),
                params![store, loader],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let (offset, limit) = window.unwrap_or((0, u64::MAX));
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT id, store_id, loader_id, chunk_no, page_content, metadata
                 FROM document_store_chunks WHERE {filter}
                 ORDER BY loader_id, chunk_no LIMIT ?3 OFFSET ?4"
            ))?;
            let chunks = stmt
                .query_map(
                    params![
                        store,
                        loader,
                        i64::try_from(limit).unwrap_or(i64::MAX),
                        i64::try_from(offset).unwrap_or(i64::MAX)
                    ],
                    chunk_row,
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(ChunkPage {
                chunks,
                total: u64::try_from(total).unwrap_or(0),
                characters: u64::try_from(characters).unwrap_or(0),
            })
        })
        .await
    }

    async fn loader_files(&self, store: Uuid, loader: Uuid) -> StoreResult<Vec<StoredFile>> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT name, bytes FROM document_store_files
                 WHERE store_id = ?1 AND loader_id = ?2 ORDER BY name",
            )?;
            stmt.query_map(params![store.to_string(), loader.to_string()], |r| {
                Ok(StoredFile {
                    name: r.get(0)?,
                    bytes: r.get(1)?,
                })
            })?
            .collect()
        })
        .await
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
        let found: Vec<DocumentChunk> = self
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, store_id, loader_id, chunk_no, page_content, metadata
                     FROM document_store_chunks
                     WHERE store_id = ?1 AND content_key IN (SELECT value FROM json_each(?2))",
                )?;
                stmt.query_map(params![store.to_string(), json_text(&keys)?], chunk_row)?
                    .collect()
            })
            .await?;
        Ok(found
            .into_iter()
            .filter(|c| contents.contains(&c.page_content))
            .collect())
    }
}

fn get_store(conn: &Connection, ws: Uuid, id: Uuid) -> rusqlite::Result<Option<DocumentStore>> {
    conn.query_row(
        &format!("SELECT {STORE_COLUMNS} FROM document_stores WHERE id = ?1 AND workspace_id = ?2"),
        params![id.to_string(), ws.to_string()],
        store_from_row,
    )
    .optional()
}

/// Binds a store's columns in `STORE_COLUMNS` order (an update leaves `?11`,
/// the creation time, unused).
fn write_store(conn: &Connection, sql: &str, s: &DocumentStore) -> rusqlite::Result<usize> {
    let config = |c: &Option<crate::domain::ComponentConfig>| c.as_ref().map(json_text).transpose();
    conn.execute(
        sql,
        params![
            s.id.to_string(),
            s.workspace_id.to_string(),
            s.name,
            s.description,
            s.status.as_str(),
            json_text(&s.loaders)?,
            json_text(&s.where_used)?,
            config(&s.vector_store_config)?,
            config(&s.embedding_config)?,
            config(&s.record_manager_config)?,
            to_millis(&s.created_date),
            to_millis(&s.updated_date),
        ],
    )
}

fn store_from_row(row: &Row<'_>) -> rusqlite::Result<DocumentStore> {
    let config = |idx: usize| -> rusqlite::Result<Option<crate::domain::ComponentConfig>> {
        match row.get::<_, Option<String>>(idx)? {
            None => Ok(None),
            Some(_) => json_at(row, idx).map(Some),
        }
    };
    Ok(DocumentStore {
        id: uuid_at(row, 0)?,
        workspace_id: uuid_at(row, 1)?,
        name: row.get(2)?,
        description: row.get(3)?,
        status: DocumentStoreStatus::parse_stored(&row.get::<_, String>(4)?),
        loaders: json_at(row, 5)?,
        where_used: json_at(row, 6)?,
        vector_store_config: config(7)?,
        embedding_config: config(8)?,
        record_manager_config: config(9)?,
        created_date: from_millis(row.get(10)?),
        updated_date: from_millis(row.get(11)?),
    })
}

fn chunk_row(row: &Row<'_>) -> rusqlite::Result<DocumentChunk> {
    Ok(DocumentChunk {
        id: uuid_at(row, 0)?,
        store_id: uuid_at(row, 1)?,
        loader_id: uuid_at(row, 2)?,
        chunk_no: u64::try_from(row.get::<_, i64>(3)?).unwrap_or(0),
        page_content: row.get(4)?,
        metadata: json_at(row, 5)?,
    })
}
