//! Chatflows: SqliteStore's [`ChatflowStore`].

use super::*;

#[async_trait]
impl ChatflowStore for SqliteStore {
    async fn create_chatflow(&self, flow: NewChatflow) -> StoreResult<Chatflow> {
        self.call(move |conn| {
            let flow = flow.into_chatflow(Uuid::new_v4(), time::now());
            write_chatflow(
                conn,
                &format!(
                    "INSERT INTO chatflows ({CHATFLOW_COLUMNS})
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
                ),
                &flow,
            )?;
            Ok(flow)
        })
        .await
    }

    async fn get_chatflow(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Chatflow>> {
        self.read(move |conn| get_chatflow(conn, workspace, id))
            .await
    }

    async fn list_chatflows(
        &self,
        workspace: Uuid,
        flow_type: Option<ChatflowType>,
        page: Page,
    ) -> StoreResult<Arc<Listing<Chatflow>>> {
        self.read(move |conn| {
            list_page(
                conn,
                "SELECT COUNT(*) FROM chatflows WHERE workspace_id = ?1 AND (?2 IS NULL OR type = ?2)",
                &format!(
                    "SELECT {CHATFLOW_COLUMNS} FROM chatflows
                     WHERE workspace_id = ?1 AND (?2 IS NULL OR type = ?2)
                     ORDER BY updated_at DESC, id LIMIT ?3 OFFSET ?4"
                ),
                &[&workspace.to_string(), &flow_type.map(ChatflowType::as_str)],
                page,
                chatflow_from_row,
            )
            .map(Arc::new)
        })
        .await
    }

    async fn update_chatflow(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: ChatflowPatch,
    ) -> StoreResult<Option<Chatflow>> {
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let Some(mut flow) = get_chatflow(&tx, workspace, id)? else {
                return Ok(None);
            };
            patch.apply(&mut flow, time::now());
            write_chatflow(
                &tx,
                "UPDATE chatflows SET name = ?3, flow_data = ?4, deployed = ?5, is_public = ?6,
                   apikeyid = ?7, chatbot_config = ?8, api_config = ?9, category = ?10, type = ?11,
                   created_at = ?12, updated_at = ?13, mcp_server_config = ?14
                 WHERE id = ?1 AND workspace_id = ?2",
                &flow,
            )?;
            tx.commit()?;
            Ok(Some(flow))
        })
        .await
    }

    async fn delete_chatflow(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.call(move |conn| {
            conn.execute(
                "DELETE FROM chatflows WHERE id = ?1 AND workspace_id = ?2",
                params![id.to_string(), workspace.to_string()],
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn find_chatflow(&self, id: Uuid) -> StoreResult<Option<Arc<Chatflow>>> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {CHATFLOW_COLUMNS} FROM chatflows WHERE id = ?1"
            ))?;
            stmt.query_row([id.to_string()], chatflow_from_row)
                .optional()
                .map(|flow| flow.map(Arc::new))
        })
        .await
    }

    async fn list_mcp_chatflows(&self, workspace: Uuid) -> StoreResult<Vec<Arc<Chatflow>>> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {CHATFLOW_COLUMNS} FROM chatflows
                 WHERE workspace_id = ?1 AND mcp_server_config IS NOT NULL
                 ORDER BY created_at, id"
            ))?;
            stmt.query_map([workspace.to_string()], |row| {
                chatflow_from_row(row).map(Arc::new)
            })?
            .collect()
        })
        .await
    }
}
