//! Credentials: sealed by the services; the store never sees a field's value: SqliteStore's [`CredentialStore`].

use super::*;

#[async_trait]
impl CredentialStore for SqliteStore {
    async fn create_credential(&self, credential: &SealedCredential) -> StoreResult<()> {
        let c = credential.clone();
        self.call(move |conn| {
            conn.execute(
                "INSERT INTO credentials (id, workspace_id, name, credential_name, key_id,
                                          sealed_data, created_at, updated_at, allowed_hosts)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    c.id.to_string(),
                    c.workspace_id.to_string(),
                    c.name,
                    c.credential_name,
                    c.key_id,
                    c.data,
                    to_millis(&c.created_date),
                    to_millis(&c.updated_date),
                    c.hosts_column(),
                ],
            )
            .map(drop)
        })
        .await
    }

    async fn get_credential(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<SealedCredential>> {
        self.read(move |conn| {
            conn.query_row(
                &format!(
                    "SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE id = ?1 AND workspace_id = ?2"
                ),
                params![id.to_string(), workspace.to_string()],
                credential_from_row,
            )
            .optional()
        })
        .await
    }

    async fn get_credentials(
        &self,
        workspace: Uuid,
        ids: &[Uuid],
    ) -> StoreResult<Vec<SealedCredential>> {
        let ids = serde_json::Value::from(ids.iter().map(Uuid::to_string).collect::<Vec<_>>())
            .to_string();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {CREDENTIAL_COLUMNS} FROM credentials
                 WHERE workspace_id = ?1 AND id IN (SELECT value FROM json_each(?2))"
            ))?;
            stmt.query_map(params![workspace.to_string(), ids], credential_from_row)?
                .collect()
        })
        .await
    }

    async fn list_credentials(
        &self,
        workspace: Uuid,
        credential_name: Option<&str>,
        page: Page,
    ) -> StoreResult<Listing<SealedCredential>> {
        let kind = credential_name.map(str::to_owned);
        self.read(move |conn| {
            let filter = "workspace_id = ?1 AND (?2 IS NULL OR credential_name = ?2)";
            list_page(
                conn,
                &format!("SELECT COUNT(*) FROM credentials WHERE {filter}"),
                &format!(
                    "SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE {filter}
                     ORDER BY name, id LIMIT ?3 OFFSET ?4"
                ),
                &[&workspace.to_string(), &kind],
                page,
                credential_from_row,
            )
        })
        .await
    }

    async fn update_credential(
        &self,
        credential: &SealedCredential,
        read_data: &str,
    ) -> StoreResult<bool> {
        let c = credential.clone();
        let read_data = read_data.to_owned();
        self.call(move |conn| {
            conn.execute(
                "UPDATE credentials SET name = ?3, credential_name = ?4, key_id = ?5,
                        sealed_data = ?6, updated_at = ?7, allowed_hosts = ?9
                 WHERE id = ?1 AND workspace_id = ?2 AND sealed_data = ?8",
                params![
                    c.id.to_string(),
                    c.workspace_id.to_string(),
                    c.name,
                    c.credential_name,
                    c.key_id,
                    c.data,
                    to_millis(&c.updated_date),
                    read_data,
                    c.hosts_column(),
                ],
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn delete_credential(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.call(move |conn| {
            conn.execute(
                "DELETE FROM credentials WHERE id = ?1 AND workspace_id = ?2",
                params![id.to_string(), workspace.to_string()],
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn credentials_sealed_by_other_keys(
        &self,
        key_id: &str,
    ) -> StoreResult<Vec<SealedCredential>> {
        let key_id = key_id.to_owned();
        self.read(move |conn| {
            let mut stmt = conn.prepare(&format!(
                "SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE key_id <> ?1"
            ))?;
            stmt.query_map([key_id], credential_from_row)?.collect()
        })
        .await
    }
}
