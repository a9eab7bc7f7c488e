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

    async fn create_mcp_server(&self, server: &CustomMcpServer) -> StoreResult<()> {
        self.write_mcp_server(
            &format!(
                "INSERT INTO custom_mcp_servers ({MCP_SERVER_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
            ),
            server,
        )
        .await
        .map(|_| ())
    }

    async fn get_mcp_server(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<CustomMcpServer>> {
        self.query_opt(
            &format!(
                "SELECT {MCP_SERVER_COLUMNS} FROM custom_mcp_servers
                 WHERE id = $1 AND workspace_id = $2"
            ),
            &[&id, &workspace],
            mcp_server_from_row,
        )
        .await
    }

    async fn list_mcp_servers(
        &self,
        workspace: Uuid,
        page: Page,
    ) -> StoreResult<Listing<CustomMcpServer>> {
        self.list_page(
            "SELECT COUNT(*) FROM custom_mcp_servers WHERE workspace_id = $1",
            &format!(
                "SELECT {MCP_SERVER_LISTED} FROM custom_mcp_servers WHERE workspace_id = $1
                 ORDER BY created_at, id LIMIT $2 OFFSET $3"
            ),
            &[&workspace],
            page,
            mcp_server_from_row,
        )
        .await
    }

    async fn update_mcp_server(&self, server: &CustomMcpServer) -> StoreResult<bool> {
        self.write_mcp_server(
            "UPDATE custom_mcp_servers SET name = $3, server_url = $4, icon_src = $5,
               color = $6, auth_type = $7, auth_config = $8, tools = $9, tool_count = $10,
               status = $11, created_at = $12, updated_at = $13
             WHERE id = $1 AND workspace_id = $2",
            server,
        )
        .await
        .map(|n| n > 0)
    }

    async fn delete_mcp_server(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.execute(
            "DELETE FROM custom_mcp_servers WHERE id = $1 AND workspace_id = $2",
            &[&id, &workspace],
        )
        .await
        .map(|n| n > 0)
    }
}

/// `custom_mcp_servers`' columns, in the order `write_mcp_server` binds them.
const MCP_SERVER_COLUMNS: &str = "id, workspace_id, name, server_url, icon_src, color, \
     auth_type, auth_config, tools, tool_count, status, created_at, updated_at";

/// The columns of a listing: `tools` left out (read as NULL).
const MCP_SERVER_LISTED: &str = "id, workspace_id, name, server_url, icon_src, color, \
     auth_type, auth_config, NULL::TEXT, tool_count, status, created_at, updated_at";

impl PostgresStore {
    /// Runs an INSERT or UPDATE of every column of a stored MCP server.
    async fn write_mcp_server(&self, sql: &str, s: &CustomMcpServer) -> StoreResult<u64> {
        let tool_count = i32::try_from(s.tool_count).unwrap_or(i32::MAX);
        let auth_type = s.auth_type.as_str();
        let status = s.status.as_str();
        self.execute(
            sql,
            &[
                &s.id,
                &s.workspace_id,
                &s.name,
                &s.server_url,
                &s.icon_src,
                &s.color,
                &auth_type,
                &s.sealed_auth,
                &s.tools,
                &tool_count,
                &status,
                &s.created_date,
                &s.updated_date,
            ],
        )
        .await
    }
}

fn mcp_server_from_row(row: &Row) -> PgResult<CustomMcpServer> {
    Ok(CustomMcpServer {
        id: row.try_get(0)?,
        workspace_id: row.try_get(1)?,
        name: row.try_get(2)?,
        server_url: row.try_get(3)?,
        icon_src: row.try_get(4)?,
        color: row.try_get(5)?,
        auth_type: McpAuthType::parse_stored(row.try_get(6)?),
        sealed_auth: row.try_get(7)?,
        tools: row.try_get(8)?,
        tool_count: u32::try_from(row.try_get::<_, i32>(9)?).unwrap_or(0),
        status: McpServerStatus::parse_stored(row.try_get(10)?),
        created_date: row.try_get(11)?,
        updated_date: row.try_get(12)?,
    })
}
