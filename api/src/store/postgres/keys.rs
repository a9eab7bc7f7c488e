//! Workspaces and API keys (kept hashed): PostgresStore's [`KeyStore`].

use super::*;

#[async_trait]
impl KeyStore for PostgresStore {
    async fn ensure_workspace(&self, name: &str) -> StoreResult<Workspace> {
        // The no-op update makes RETURNING yield the existing row on conflict.
        self.query_opt(
            "INSERT INTO workspaces (id, name, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
             RETURNING id, name",
            &[&Uuid::new_v4(), &name, &time::now()],
            workspace_from_row,
        )
        .await?
        .ok_or_else(|| StoreError::Backend("workspace upsert returned no row".into()))
    }

    async fn find_workspace(&self, name: &str) -> StoreResult<Option<Workspace>> {
        self.query_opt(
            "SELECT id, name FROM workspaces WHERE name = $1",
            &[&name],
            workspace_from_row,
        )
        .await
    }

    async fn create_api_key(&self, key: NewApiKey) -> StoreResult<ApiKey> {
        let id = Uuid::new_v4();
        self.execute(
            "INSERT INTO api_keys (id, workspace_id, name, permissions, key_hash, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &id,
                &key.workspace_id,
                &key.name,
                &Permission::join(&key.permissions),
                &key.key_hash,
                &time::now(),
            ],
        )
        .await?;
        self.query_opt(
            &format!("{API_KEY_SELECT} WHERE k.id = $1"),
            &[&id],
            api_key_from_row,
        )
        .await?
        .ok_or_else(|| StoreError::Backend("inserted API key not found".into()))
    }

    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
        self.query_opt(
            &format!("{API_KEY_SELECT} WHERE k.key_hash = $1"),
            &[&hash],
            api_key_from_row,
        )
        .await
    }

    async fn list_api_keys(&self, workspace: Option<Uuid>) -> StoreResult<Vec<ApiKey>> {
        self.query_all(
            &format!(
                "{API_KEY_SELECT} WHERE $1::uuid IS NULL OR k.workspace_id = $1
                 ORDER BY k.created_at, k.id"
            ),
            &[&workspace],
            api_key_from_row,
        )
        .await
    }

    async fn delete_api_key(&self, workspace: Option<Uuid>, id: Uuid) -> StoreResult<bool> {
        self.execute(
            "DELETE FROM api_keys WHERE id = $1 AND ($2::uuid IS NULL OR workspace_id = $2)",
            &[&id, &workspace],
        )
        .await
        .map(|n| n > 0)
    }

    async fn count_api_keys(&self) -> StoreResult<u64> {
        let client = self.client().await?;
        let n: i64 = client
            .query_one("SELECT COUNT(*) FROM api_keys", &[])
            .await
            .and_then(|r| r.try_get(0))
            .map_err(backend)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn touch_api_key(&self, id: Uuid) -> StoreResult<()> {
        self.execute(
            "UPDATE api_keys SET last_used_at = $2 WHERE id = $1",
            &[&id, &time::now()],
        )
        .await
        .map(|_| ())
    }
}
