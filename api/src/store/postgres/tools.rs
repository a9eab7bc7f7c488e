//! Stored tools: PostgresStore's [`ToolStore`].

use super::*;

#[async_trait]
impl ToolStore for PostgresStore {
    async fn create_tool(&self, workspace: Uuid, tool: NewTool) -> StoreResult<Tool> {
        let conflict = tool::name_taken(&tool.name);
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
        self.execute(
            "INSERT INTO tools (id, workspace_id, name, description, schema, code,
                                requirements, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
            &[
                &created.id,
                &workspace,
                &created.name,
                &created.description,
                &json_text(&created.schema)?,
                &created.code,
                &json_text(&created.requirements)?,
                &now,
            ],
        )
        .await
        .map_err(conflict_as(conflict))?;
        Ok(created)
    }

    async fn get_tool(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Tool>> {
        self.query_opt(
            &format!("SELECT {TOOL_COLUMNS} FROM tools WHERE id = $1 AND workspace_id = $2"),
            &[&id, &workspace],
            tool_from_row,
        )
        .await
    }

    async fn list_tools(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Tool>> {
        self.list_page(
            "SELECT COUNT(*) FROM tools WHERE workspace_id = $1",
            &format!(
                "SELECT {TOOL_COLUMNS} FROM tools WHERE workspace_id = $1
                 ORDER BY name, id LIMIT $2 OFFSET $3"
            ),
            &[&workspace],
            page,
            tool_from_row,
        )
        .await
    }

    async fn update_tool(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: ToolPatch,
    ) -> StoreResult<Option<Tool>> {
        let conflict = tool::name_taken(patch.name.as_deref().unwrap_or_default());
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let row = tx
            .query_opt(
                &format!(
                    "SELECT {TOOL_COLUMNS} FROM tools
                     WHERE id = $1 AND workspace_id = $2 FOR UPDATE"
                ),
                &[&id, &workspace],
            )
            .await
            .map_err(backend)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let mut tool = tool_from_row(&row).map_err(backend)?;
        patch.apply(&mut tool, time::now());
        tx.execute(
            "UPDATE tools SET name = $3, description = $4, schema = $5, code = $6,
                              requirements = $7, updated_at = $8
             WHERE id = $1 AND workspace_id = $2",
            &[
                &id,
                &workspace,
                &tool.name,
                &tool.description,
                &json_text(&tool.schema)?,
                &tool.code,
                &json_text(&tool.requirements)?,
                &tool.updated_date,
            ],
        )
        .await
        .map_err(backend)
        .map_err(conflict_as(conflict))?;
        tx.commit().await.map_err(backend)?;
        Ok(Some(tool))
    }

    async fn delete_tool(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.execute(
            "DELETE FROM tools WHERE id = $1 AND workspace_id = $2",
            &[&id, &workspace],
        )
        .await
        .map(|n| n > 0)
    }
}
