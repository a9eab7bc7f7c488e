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

    async fn create_mcp_server(&self, server: &CustomMcpServer) -> StoreResult<()> {
        let server = server.clone();
        self.call(move |conn| {
            conn.execute(
                &format!(
                    "INSERT INTO custom_mcp_servers ({MCP_SERVER_COLUMNS})
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
                ),
                rusqlite::params_from_iter(mcp_server_params(&server)),
            )
            .map(|_| ())
        })
        .await
    }

    async fn get_mcp_server(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<CustomMcpServer>> {
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {MCP_SERVER_COLUMNS} FROM custom_mcp_servers
                 WHERE id = ?1 AND workspace_id = ?2"
            ))?
            .query_row(
                params![id.to_string(), workspace.to_string()],
                mcp_server_from_row,
            )
            .optional()
        })
        .await
    }

    async fn list_mcp_servers(
        &self,
        workspace: Uuid,
        page: Page,
    ) -> StoreResult<Listing<CustomMcpServer>> {
        self.read(move |conn| {
            list_page(
                conn,
                "SELECT COUNT(*) FROM custom_mcp_servers WHERE workspace_id = ?1",
                &format!(
                    "SELECT {MCP_SERVER_LISTED} FROM custom_mcp_servers WHERE workspace_id = ?1
                     ORDER BY created_at, id LIMIT ?2 OFFSET ?3"
                ),
                &[&workspace.to_string()],
                page,
                mcp_server_from_row,
            )
        })
        .await
    }

    async fn update_mcp_server(&self, server: &CustomMcpServer) -> StoreResult<bool> {
        let server = server.clone();
        self.call(move |conn| {
            conn.execute(
                "UPDATE custom_mcp_servers SET name = ?3, server_url = ?4, icon_src = ?5,
                   color = ?6, auth_type = ?7, auth_config = ?8, tools = ?9, tool_count = ?10,
                   status = ?11, created_at = ?12, updated_at = ?13
                 WHERE id = ?1 AND workspace_id = ?2",
                rusqlite::params_from_iter(mcp_server_params(&server)),
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn delete_mcp_server(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.call(move |conn| {
            conn.execute(
                "DELETE FROM custom_mcp_servers WHERE id = ?1 AND workspace_id = ?2",
                params![id.to_string(), workspace.to_string()],
            )
            .map(|n| n > 0)
        })
        .await
    }
}

/// `custom_mcp_servers`' columns, in the order of [`mcp_server_params`].
const MCP_SERVER_COLUMNS: &str = "id, workspace_id, name, server_url, icon_src, color, \
     auth_type, auth_config, tools, tool_count, status, created_at, updated_at";

/// The columns of a listing: `tools` left out (read as NULL).
const MCP_SERVER_LISTED: &str = "id, workspace_id, name, server_url, icon_src, color, \
     auth_type, auth_config, NULL, tool_count, status, created_at, updated_at";

fn mcp_server_params(s: &CustomMcpServer) -> Vec<Box<dyn rusqlite::ToSql>> {
    vec![
        Box::new(s.id.to_string()),
        Box::new(s.workspace_id.to_string()),
        Box::new(s.name.clone()),
        Box::new(s.server_url.clone()),
        Box::new(s.icon_src.clone()),
        Box::new(s.color.clone()),
        Box::new(s.auth_type.as_str()),
        Box::new(s.sealed_auth.clone()),
        Box::new(s.tools.clone()),
        Box::new(s.tool_count),
        Box::new(s.status.as_str()),
        Box::new(to_millis(&s.created_date)),
        Box::new(to_millis(&s.updated_date)),
    ]
}

fn mcp_server_from_row(row: &Row<'_>) -> rusqlite::Result<CustomMcpServer> {
    Ok(CustomMcpServer {
        id: uuid_at(row, 0)?,
        workspace_id: uuid_at(row, 1)?,
        name: row.get(2)?,
        server_url: row.get(3)?,
        icon_src: row.get(4)?,
        color: row.get(5)?,
        auth_type: McpAuthType::parse_stored(&row.get::<_, String>(6)?),
        sealed_auth: row.get(7)?,
        tools: row.get(8)?,
        tool_count: row.get(9)?,
        status: McpServerStatus::parse_stored(&row.get::<_, String>(10)?),
        created_date: from_millis(row.get(11)?),
        updated_date: from_millis(row.get(12)?),
    })
}
