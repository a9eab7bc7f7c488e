//! Workspace variables: PostgresStore's [`VariableStore`].

use super::*;

#[async_trait]
impl VariableStore for PostgresStore {
    async fn create_variable(&self, workspace: Uuid, var: NewVariable) -> StoreResult<Variable> {
        let conflict = variable::name_taken(&var.name);
        let now = time::now();
        let created = Variable {
            id: Uuid::new_v4(),
            name: var.name,
            value: var.value,
            var_type: var.var_type,
            created_date: now,
            updated_date: now,
        };
        self.execute(
            "INSERT INTO variables (id, workspace_id, name, value, type, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $6)",
            &[
                &created.id,
                &workspace,
                &created.name,
                &created.value,
                &created.var_type.as_str(),
                &now,
            ],
        )
        .await
        .map_err(conflict_as(conflict))?;
        Ok(created)
    }

    async fn get_variable(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Variable>> {
        self.query_opt(
            &format!(
                "SELECT {VARIABLE_COLUMNS} FROM variables WHERE id = $1 AND workspace_id = $2"
            ),
            &[&id, &workspace],
            variable_from_row,
        )
        .await
    }

    async fn list_variables(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Variable>> {
        self.list_page(
            "SELECT COUNT(*) FROM variables WHERE workspace_id = $1",
            &format!(
                "SELECT {VARIABLE_COLUMNS} FROM variables WHERE workspace_id = $1
                 ORDER BY name, id LIMIT $2 OFFSET $3"
            ),
            &[&workspace],
            page,
            variable_from_row,
        )
        .await
    }

    async fn update_variable(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: VariablePatch,
    ) -> StoreResult<Option<Variable>> {
        let conflict = variable::name_taken(patch.name.as_deref().unwrap_or_default());
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let row = tx
            .query_opt(
                &format!(
                    "SELECT {VARIABLE_COLUMNS} FROM variables
                     WHERE id = $1 AND workspace_id = $2 FOR UPDATE"
                ),
                &[&id, &workspace],
            )
            .await
            .map_err(backend)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let mut var = variable_from_row(&row).map_err(backend)?;
        patch.apply(&mut var, time::now());
        tx.execute(
            "UPDATE variables SET name = $3, value = $4, type = $5, updated_at = $6
             WHERE id = $1 AND workspace_id = $2",
            &[
                &id,
                &workspace,
                &var.name,
                &var.value,
                &var.var_type.as_str(),
                &var.updated_date,
            ],
        )
        .await
        .map_err(backend)
        .map_err(conflict_as(conflict))?;
        tx.commit().await.map_err(backend)?;
        Ok(Some(var))
    }

    async fn delete_variable(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.execute(
            "DELETE FROM variables WHERE id = $1 AND workspace_id = $2",
            &[&id, &workspace],
        )
        .await
        .map(|n| n > 0)
    }
}
