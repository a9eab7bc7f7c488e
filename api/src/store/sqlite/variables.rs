//! Workspace variables: SqliteStore's [`VariableStore`].

use super::*;

#[async_trait]
impl VariableStore for SqliteStore {
    async fn create_variable(&self, workspace: Uuid, var: NewVariable) -> StoreResult<Variable> {
        let conflict = variable::name_taken(&var.name);
        self.call(move |conn| {
            let now = time::now();
            let created = Variable {
                id: Uuid::new_v4(),
                name: var.name,
                value: var.value,
                var_type: var.var_type,
                created_date: now,
                updated_date: now,
            };
            conn.execute(
                "INSERT INTO variables (id, workspace_id, name, value, type, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
                params![
                    created.id.to_string(),
                    workspace.to_string(),
                    created.name,
                    created.value,
                    created.var_type.as_str(),
                    to_millis(&now),
                ],
            )?;
            Ok(created)
        })
        .await
        .map_err(conflict_as(conflict))
    }

    async fn get_variable(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Variable>> {
        self.read(move |conn| get_variable(conn, workspace, id))
            .await
    }

    async fn list_variables(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Variable>> {
        self.read(move |conn| {
            list_page(
                conn,
                "SELECT COUNT(*) FROM variables WHERE workspace_id = ?1",
                &format!(
                    "SELECT {VARIABLE_COLUMNS} FROM variables WHERE workspace_id = ?1
                     ORDER BY name, id LIMIT ?2 OFFSET ?3"
                ),
                &[&workspace.to_string()],
                page,
                variable_from_row,
            )
        })
        .await
    }

    async fn update_variable(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: VariablePatch,
    ) -> StoreResult<Option<Variable>> {
        let conflict = variable::name_taken(patch.name.as_deref().unwrap_or_default());
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let Some(mut var) = get_variable(&tx, workspace, id)? else {
                return Ok(None);
            };
            patch.apply(&mut var, time::now());
            tx.execute(
                "UPDATE variables SET name = ?3, value = ?4, type = ?5, updated_at = ?6
                 WHERE id = ?1 AND workspace_id = ?2",
                params![
                    id.to_string(),
                    workspace.to_string(),
                    var.name,
                    var.value,
                    var.var_type.as_str(),
                    to_millis(&var.updated_date),
                ],
            )?;
            tx.commit()?;
            Ok(Some(var))
        })
        .await
        .map_err(conflict_as(conflict))
    }

    async fn delete_variable(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.call(move |conn| {
            conn.execute(
                "DELETE FROM variables WHERE id = ?1 AND workspace_id = ?2",
                params![id.to_string(), workspace.to_string()],
            )
            .map(|n| n > 0)
        })
        .await
    }
}
