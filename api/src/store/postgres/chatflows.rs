//! Chatflows: PostgresStore's [`ChatflowStore`].

use super::*;

#[async_trait]
impl ChatflowStore for PostgresStore {
    async fn create_chatflow(&self, flow: NewChatflow) -> StoreResult<Chatflow> {
        let flow = flow.into_chatflow(Uuid::new_v4(), time::now());
        let client = self.client().await?;
        write_chatflow(
            &client,
            &format!(
                "INSERT INTO chatflows ({CHATFLOW_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
            ),
            &flow,
        )
        .await
        .map_err(backend)?;
        Ok(flow)
    }

    async fn get_chatflow(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Chatflow>> {
        self.query_opt(
            &format!(
                "SELECT {CHATFLOW_COLUMNS} FROM chatflows WHERE id = $1 AND workspace_id = $2"
            ),
            &[&id, &workspace],
            chatflow_from_row,
        )
        .await
    }

    async fn list_chatflows(
        &self,
        workspace: Uuid,
        flow_type: Option<ChatflowType>,
        page: Page,
    ) -> StoreResult<Arc<Listing<Chatflow>>> {
        let flow_type = flow_type.map(ChatflowType::as_str);
        self.list_page(
            "SELECT COUNT(*) FROM chatflows WHERE workspace_id = $1 AND ($2::text IS NULL OR type = $2)",
            &format!(
                "SELECT {CHATFLOW_COLUMNS} FROM chatflows
                 WHERE workspace_id = $1 AND ($2::text IS NULL OR type = $2)
                 ORDER BY updated_at DESC, id LIMIT $3 OFFSET $4"
            ),
            &[&workspace, &flow_type],
            page,
            chatflow_from_row,
        )
        .await
        .map(Arc::new)
    }

    async fn update_chatflow(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: ChatflowPatch,
    ) -> StoreResult<Option<Chatflow>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let row = tx
            .query_opt(
                &format!(
                    "SELECT {CHATFLOW_COLUMNS} FROM chatflows
                     WHERE id = $1 AND workspace_id = $2 FOR UPDATE"
                ),
                &[&id, &workspace],
            )
            .await
            .map_err(backend)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let mut flow = chatflow_from_row(&row).map_err(backend)?;
        patch.apply(&mut flow, time::now());
        write_chatflow(
            &tx,
            "UPDATE chatflows SET name = $3, flow_data = $4, deployed = $5, is_public = $6,
               apikeyid = $7, chatbot_config = $8, api_config = $9, category = $10, type = $11,
               created_at = $12, updated_at = $13, mcp_server_config = $14
             WHERE id = $1 AND workspace_id = $2",
            &flow,
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(Some(flow))
    }

    async fn delete_chatflow(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.execute(
            "DELETE FROM chatflows WHERE id = $1 AND workspace_id = $2",
            &[&id, &workspace],
        )
        .await
        .map(|n| n > 0)
    }

    async fn find_chatflow(&self, id: Uuid) -> StoreResult<Option<Arc<Chatflow>>> {
        self.query_opt(
            &format!("SELECT {CHATFLOW_COLUMNS} FROM chatflows WHERE id = $1"),
            &[&id],
            |row| chatflow_from_row(row).map(Arc::new),
        )
        .await
    }

    async fn list_mcp_chatflows(&self, workspace: Uuid) -> StoreResult<Vec<Arc<Chatflow>>> {
        self.query_all(
            &format!(
                "SELECT {CHATFLOW_COLUMNS} FROM chatflows
                 WHERE workspace_id = $1 AND mcp_server_config IS NOT NULL
                 ORDER BY created_at, id"
            ),
            &[&workspace],
            |row| chatflow_from_row(row).map(Arc::new),
        )
        .await
    }
}
