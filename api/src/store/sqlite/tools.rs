//! Stored tools: SqliteStore's [`ToolStore`].

use super::*;

#[async_trait]
impl ToolStore for SqliteStore {
    async fn create_tool(&self, workspace: Uuid, tool: NewTool) -> StoreResult<Tool> {
        let conflict = tool::name_taken(&tool.name);
        self.call(move |conn| {
            let now = time::now();
            let created = Tool {
                id: Uuid::new_v4(),
                name: tool.name,
                description: tool.description,
                schema: tool.schema,
                code: tool.code,
                requirements: tool.requirements,
                created_date: now,
                updated_date: now,
            };
            conn.execute(
                "INSERT INTO tools (id, workspace_id, name, description, schema, code,
                                    requirements, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
                params![
                    created.id.to_string(),
                    workspace.to_string(),
                    created.name,
                    created.description,
                    json_text(&created.schema)?,
                    created.code,
                    json_text(&created.requirements)?,
                    to_millis(&now),
                ],
            )?;
            Ok(created)
        })
        .await
        .map_err(conflict_as(conflict))
    }

    async fn get_tool(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Tool>> {
        self.read(move |conn| get_tool(conn, workspace, id)).await
    }

    async fn list_tools(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Tool>> {
        self.read(move |conn| {
            list_page(
                conn,
                "SELECT COUNT(*) FROM tools WHERE workspace_id = ?1",
                &format!(
                    "SELECT {TOOL_COLUMNS} FROM tools WHERE workspace_id = ?1
                     ORDER BY name, id LIMIT ?2 OFFSET ?3"
                ),
                &[&workspace.to_string()],
                page,
                tool_from_row,
            )
        })
        .await
    }

    async fn update_tool(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: ToolPatch,
    ) -> StoreResult<Option<Tool>> {
        let conflict = tool::name_taken(patch.name.as_deref().unwrap_or_default());
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let Some(mut tool) = get_tool(&tx, workspace, id)? else {
                return Ok(None);
            };
            patch.apply(&mut tool, time::now());
            tx.execute(
                "UPDATE tools SET name = ?3, description = ?4, schema = ?5, code = ?6,
                                  requirements = ?7, updated_at = ?8
                 WHERE id = ?1 AND workspace_id = ?2",
                params![
                    id.to_string(),
                    workspace.to_string(),
                    tool.name,
                    tool.description,
                    json_text(&tool.schema)?,
                    tool.code,
                    json_text(&tool.requirements)?,
                    to_millis(&tool.updated_date),
                ],
            )?;
            tx.commit()?;
            Ok(Some(tool))
        })
        .await
        .map_err(conflict_as(conflict))
    }

    async fn delete_tool(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.call(move |conn| {
            conn.execute(
                "DELETE FROM tools WHERE id = ?1 AND workspace_id = ?2",
                params![id.to_string(), workspace.to_string()],
            )
            .map(|n| n > 0)
        })
        .await
    }
}
