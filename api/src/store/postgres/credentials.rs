//! Credentials: sealed by the services; the store never sees a field's value: PostgresStore's [`CredentialStore`].

use super::*;

#[async_trait]
impl CredentialStore for PostgresStore {
    async fn create_credential(&self, c: &SealedCredential) -> StoreResult<()> {
        self.execute(
            "INSERT INTO credentials (id, workspace_id, name, credential_name, key_id,
                                      sealed_data, created_at, updated_at, allowed_hosts)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &c.id,
                &c.workspace_id,
                &c.name,
                &c.credential_name,
                &c.key_id,
                &c.data,
                &c.created_date,
                &c.updated_date,
                &c.hosts_column(),
            ],
        )
        .await
        .map(drop)
    }

    async fn get_credential(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<SealedCredential>> {
        self.query_opt(
            &format!(
                "SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE id = $1 AND workspace_id = $2"
            ),
            &[&id, &workspace],
            credential_from_row,
        )
        .await
    }

    async fn get_credentials(
        &self,
        workspace: Uuid,
        ids: &[Uuid],
    ) -> StoreResult<Vec<SealedCredential>> {
        self.query_all(
            &format!(
                "SELECT {CREDENTIAL_COLUMNS} FROM credentials
                 WHERE workspace_id = $1 AND id = ANY($2)"
            ),
            &[&workspace, &ids],
            credential_from_row,
        )
        .await
    }

    async fn list_credentials(
        &self,
        workspace: Uuid,
        credential_name: Option<&str>,
        page: Page,
    ) -> StoreResult<Listing<SealedCredential>> {
        let filter = "workspace_id = $1 AND ($2::TEXT IS NULL OR credential_name = $2)";
        self.list_page(
            &format!("SELECT COUNT(*) FROM credentials WHERE {filter}"),
            &format!(
                "SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE {filter}
                 ORDER BY name, id LIMIT $3 OFFSET $4"
            ),
            &[&workspace, &credential_name],
            page,
            credential_from_row,
        )
        .await
    }

    async fn update_credential(&self, c: &SealedCredential, read_data: &str) -> StoreResult<bool> {
        self.execute(
            "UPDATE credentials SET name = $3, credential_name = $4, key_id = $5,
                    sealed_data = $6, updated_at = $7, allowed_hosts = $9
             WHERE id = $1 AND workspace_id = $2 AND sealed_data = $8",
            &[
                &c.id,
                &c.workspace_id,
                &c.name,
                &c.credential_name,
                &c.key_id,
                &c.data,
                &c.updated_date,
                &read_data,
                &c.hosts_column(),
            ],
        )
        .await
        .map(|n| n > 0)
    }

    async fn delete_credential(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.execute(
            "DELETE FROM credentials WHERE id = $1 AND workspace_id = $2",
            &[&id, &workspace],
        )
        .await
        .map(|n| n > 0)
    }

    async fn credentials_sealed_by_other_keys(
        &self,
        key_id: &str,
    ) -> StoreResult<Vec<SealedCredential>> {
        self.query_all(
            &format!("SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE key_id <> $1"),
            &[&key_id],
            credential_from_row,
        )
        .await
    }
}
