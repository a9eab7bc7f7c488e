//! Workspaces and API keys (kept hashed): SqliteStore's [`KeyStore`].

use super::*;

#[async_trait]
impl KeyStore for SqliteStore {
    async fn ensure_workspace(&self, name: &str) -> StoreResult<Workspace> {
        let name = name.to_owned();
        self.call(move |conn| {
            conn.execute(
                "INSERT INTO workspaces (id, name, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO NOTHING",
                params![Uuid::new_v4().to_string(), name, to_millis(&time::now())],
            )?;
            find_workspace(conn, &name)?.ok_or(rusqlite::Error::QueryReturnedNoRows)
        })
        .await
    }

    async fn find_workspace(&self, name: &str) -> StoreResult<Option<Workspace>> {
        let name = name.to_owned();
        self.read(move |conn| find_workspace(conn, &name)).await
    }

    async fn create_api_key(&self, key: NewApiKey) -> StoreResult<ApiKey> {
        self.call(move |conn| {
            let id = Uuid::new_v4();
            conn.execute(
                "INSERT INTO api_keys (id, workspace_id, name, permissions, key_hash, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    id.to_string(),
                    key.workspace_id.to_string(),
                    key.name,
                    Permission::join(&key.permissions),
                    key.key_hash,
                    to_millis(&time::now()),
                ],
            )?;
            conn.query_row(
                &format!(
                    "SELECT {API_KEY_COLUMNS} FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id
                     WHERE k.id = ?1"
                ),
                [id.to_string()],
                api_key_from_row,
            )
        })
        .await
    }

    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
        let hash = hash.to_owned();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {API_KEY_COLUMNS} FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id
                 WHERE k.key_hash = ?1"
            ))?;
            stmt.query_row([hash], api_key_from_row).optional()
        })
        .await
    }

    async fn list_api_keys(&self, workspace: Option<Uuid>) -> StoreResult<Vec<ApiKey>> {
        self.read(move |conn| {
            let mut stmt = conn.prepare(&format!(
                "SELECT {API_KEY_COLUMNS} FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id
                 WHERE ?1 IS NULL OR k.workspace_id = ?1
                 ORDER BY k.created_at, k.id"
            ))?;
            stmt.query_map([workspace.map(|w| w.to_string())], api_key_from_row)?
                .collect()
        })
        .await
    }

    async fn delete_api_key(&self, workspace: Option<Uuid>, id: Uuid) -> StoreResult<bool> {
        self.call(move |conn| {
            let n = conn.execute(
                "DELETE FROM api_keys WHERE id = ?1 AND (?2 IS NULL OR workspace_id = ?2)",
                params![id.to_string(), workspace.map(|w| w.to_string())],
            )?;
            Ok(n > 0)
        })
        .await
    }

    async fn count_api_keys(&self) -> StoreResult<u64> {
        self.read(|conn| {
            conn.query_row("SELECT COUNT(*) FROM api_keys", [], |r| r.get::<_, i64>(0))
                .map(|n| u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn touch_api_key(&self, id: Uuid) -> StoreResult<()> {
        self.call(move |conn| {
            conn.execute(
                "UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1",
                params![id.to_string(), to_millis(&time::now())],
            )
            .map(|_| ())
        })
        .await
    }
}
