//! What runs write (conversation messages, execution records), agent checkpoints and leads: PostgresStore's [`ConversationStore`].

use super::*;

#[async_trait]
impl ConversationStore for PostgresStore {
    async fn write_runs(&self, runs: Vec<RunWrites>) -> Vec<StoreResult<RunWritten>> {
        if runs.len() > 1 {
            match self.write_together(&runs).await {
                Ok(written) => return written.into_iter().map(Ok).collect(),
                Err(e) => {
                    tracing::warn!(runs = runs.len(), error = %e,
                        "a group commit failed; writing each run on its own");
                }
            }
        }
        let mut outcomes = Vec::with_capacity(runs.len());
        for run in &runs {
            let written = self.write_together(std::slice::from_ref(run)).await;
            outcomes.push(written.and_then(|mut written| {
                written
                    .pop()
                    .ok_or_else(|| StoreError::Backend("no outcome for the run".into()))
            }));
        }
        outcomes
    }

    async fn list_chat_messages(
        &self,
        chatflow: Uuid,
        chat_id: Option<&str>,
        last: Option<u32>,
    ) -> StoreResult<Vec<ChatMessageRecord>> {
        let limit: Option<i64> = last.map(i64::from);
        // One statement per shape, so a session's read walks its own index range.
        match chat_id {
            Some(chat_id) => {
                self.query_all(
                    &format!(
                        "SELECT {MESSAGE_COLUMNS} FROM (
                           SELECT seq, {MESSAGE_COLUMNS} FROM chat_messages
                           WHERE chatflow_id = $1 AND chat_id = $2
                           ORDER BY seq DESC LIMIT $3
                         ) recent ORDER BY seq"
                    ),
                    &[&chatflow, &chat_id, &limit],
                    message_from_row,
                )
                .await
            }
            None => {
                self.query_all(
                    &format!(
                        "SELECT {MESSAGE_COLUMNS} FROM (
                           SELECT seq, {MESSAGE_COLUMNS} FROM chat_messages
                           WHERE chatflow_id = $1
                           ORDER BY seq DESC LIMIT $2
                         ) recent ORDER BY seq"
                    ),
                    &[&chatflow, &limit],
                    message_from_row,
                )
                .await
            }
        }
    }

    async fn delete_chat_messages(
        &self,
        chatflow: Uuid,
        chat_id: Option<&str>,
    ) -> StoreResult<u64> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let deleted = tx
            .execute(
                "DELETE FROM chat_messages WHERE chatflow_id = $1 AND ($2::text IS NULL OR chat_id = $2)",
                &[&chatflow, &chat_id],
            )
            .await
            .map_err(backend)?;
        tx.execute(
            "DELETE FROM agent_checkpoints
             WHERE chatflow_id = $1 AND ($2::text IS NULL OR session_id = $2)",
            &[&chatflow, &chat_id],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(deleted)
    }

    async fn get_agent_checkpoint(
        &self,
        chatflow: Uuid,
        session_id: &str,
    ) -> StoreResult<Option<String>> {
        self.query_opt(
            "SELECT checkpoint FROM agent_checkpoints WHERE chatflow_id = $1 AND session_id = $2",
            &[&chatflow, &session_id],
            |row| row.try_get(0),
        )
        .await
    }

    async fn put_agent_checkpoint(
        &self,
        chatflow: Uuid,
        session_id: &str,
        checkpoint: &str,
    ) -> StoreResult<()> {
        self.execute(
            "INSERT INTO agent_checkpoints (chatflow_id, session_id, checkpoint, updated_at)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (chatflow_id, session_id)
             DO UPDATE SET checkpoint = EXCLUDED.checkpoint, updated_at = EXCLUDED.updated_at",
            &[&chatflow, &session_id, &checkpoint, &time::now()],
        )
        .await
        .map(|_| ())
    }

    async fn create_lead(&self, chatflow: Uuid, chat_id: &str, email: &str) -> StoreResult<Lead> {
        let lead = Lead {
            id: Uuid::new_v4(),
            chatflow_id: chatflow,
            chat_id: chat_id.to_owned(),
            email: email.to_owned(),
            created_date: time::now(),
        };
        self.execute(
            "INSERT INTO leads (id, chatflow_id, chat_id, email, created_at) VALUES ($1, $2, $3, $4, $5)",
            &[&lead.id, &lead.chatflow_id, &lead.chat_id, &lead.email, &lead.created_date],
        )
        .await?;
        Ok(lead)
    }

    async fn list_leads(&self, chatflow: Uuid) -> StoreResult<Vec<Lead>> {
        self.query_all(
            "SELECT id, chatflow_id, chat_id, email, created_at FROM leads
             WHERE chatflow_id = $1 ORDER BY created_at, id",
            &[&chatflow],
            lead_from_row,
        )
        .await
    }
}
