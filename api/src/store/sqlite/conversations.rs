//! What runs write (conversation messages, execution records), agent checkpoints and leads: SqliteStore's [`ConversationStore`].

use super::*;

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn write_runs(&self, runs: Vec<RunWrites>) -> Vec<StoreResult<RunWritten>> {
        let count = runs.len();
        let outcome = self
            .call(move |conn| {
                let mut tx =
                    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                let now = time::now();
                let mut outcomes = Vec::with_capacity(runs.len());
                for run in runs {
                    // Each run in a savepoint of its own: a failing run is rolled
                    // back alone (dropping the savepoint rolls it back).
                    let mut savepoint = tx.savepoint()?;
                    match write_run(&savepoint, run, now) {
                        Ok(written) => {
                            savepoint.commit()?;
                            outcomes.push(Ok(written));
                        }
                        Err(e) => {
                            // Should SQLite have rolled the whole transaction
                            // back, this fails and so does the batch.
                            savepoint.rollback()?;
                            outcomes.push(Err(e));
                        }
                    }
                }
                tx.commit()?;
                Ok(outcomes)
            })
            .await;
        match outcome {
            Ok(outcomes) => outcomes,
            Err(e) => (0..count).map(|_| Err(e.clone())).collect(),
        }
    }

    async fn list_chat_messages(
        &self,
        chatflow: Uuid,
        chat_id: Option<&str>,
        last: Option<u32>,
    ) -> StoreResult<Vec<ChatMessageRecord>> {
        let chat_id = chat_id.map(str::to_owned);
        self.read(move |conn| {
            // The newest `last` rows, returned oldest first. One statement per
            // shape, so a session's read walks its own index range only.
            let limit = last.map_or(-1, i64::from);
            match chat_id {
                Some(chat_id) => conn
                    .prepare_cached(&format!(
                        "SELECT {MESSAGE_COLUMNS} FROM (
                           SELECT seq, {MESSAGE_COLUMNS} FROM chat_messages
                           WHERE chatflow_id = ?1 AND chat_id = ?2
                           ORDER BY seq DESC LIMIT ?3
                         ) ORDER BY seq"
                    ))?
                    .query_map(
                        params![chatflow.to_string(), chat_id, limit],
                        message_from_row,
                    )?
                    .collect(),
                None => conn
                    .prepare_cached(&format!(
                        "SELECT {MESSAGE_COLUMNS} FROM (
                           SELECT seq, {MESSAGE_COLUMNS} FROM chat_messages
                           WHERE chatflow_id = ?1
                           ORDER BY seq DESC LIMIT ?2
                         ) ORDER BY seq"
                    ))?
                    .query_map(params![chatflow.to_string(), limit], message_from_row)?
                    .collect(),
            }
        })
        .await
    }

    async fn delete_chat_messages(
        &self,
        chatflow: Uuid,
        chat_id: Option<&str>,
    ) -> StoreResult<u64> {
        let chat_id = chat_id.map(str::to_owned);
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let deleted = tx.execute(
                "DELETE FROM chat_messages WHERE chatflow_id = ?1 AND (?2 IS NULL OR chat_id = ?2)",
                params![chatflow.to_string(), chat_id],
            )?;
            tx.execute(
                "DELETE FROM agent_checkpoints
                 WHERE chatflow_id = ?1 AND (?2 IS NULL OR session_id = ?2)",
                params![chatflow.to_string(), chat_id],
            )?;
            tx.commit()?;
            Ok(deleted as u64)
        })
        .await
    }

    async fn get_agent_checkpoint(
        &self,
        chatflow: Uuid,
        session_id: &str,
    ) -> StoreResult<Option<String>> {
        let session_id = session_id.to_owned();
        self.call(move |conn| {
            conn.query_row(
                "SELECT checkpoint FROM agent_checkpoints WHERE chatflow_id = ?1 AND session_id = ?2",
                params![chatflow.to_string(), session_id],
                |row| row.get(0),
            )
            .optional()
        })
        .await
    }

    async fn put_agent_checkpoint(
        &self,
        chatflow: Uuid,
        session_id: &str,
        checkpoint: &str,
    ) -> StoreResult<()> {
        let (session_id, checkpoint) = (session_id.to_owned(), checkpoint.to_owned());
        self.call(move |conn| {
            conn.execute(
                "INSERT INTO agent_checkpoints (chatflow_id, session_id, checkpoint, updated_at)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (chatflow_id, session_id)
                 DO UPDATE SET checkpoint = excluded.checkpoint, updated_at = excluded.updated_at",
                params![
                    chatflow.to_string(),
                    session_id,
                    checkpoint,
                    to_millis(&time::now())
                ],
            )
            .map(|_| ())
        })
        .await
    }

    async fn create_lead(&self, chatflow: Uuid, chat_id: &str, email: &str) -> StoreResult<Lead> {
        let lead = Lead {
            id: Uuid::new_v4(),
            chatflow_id: chatflow,
            chat_id: chat_id.to_owned(),
            email: email.to_owned(),
            created_date: time::now(),
        };
        self.call(move |conn| {
            conn.execute(
                "INSERT INTO leads (id, chatflow_id, chat_id, email, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    lead.id.to_string(),
                    lead.chatflow_id.to_string(),
                    lead.chat_id,
                    lead.email,
                    to_millis(&lead.created_date)
                ],
            )?;
            Ok(lead)
        })
        .await
    }

    async fn list_leads(&self, chatflow: Uuid) -> StoreResult<Vec<Lead>> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, chatflow_id, chat_id, email, created_at FROM leads
                 WHERE chatflow_id = ?1 ORDER BY created_at, id",
            )?;
            stmt.query_map([chatflow.to_string()], lead_from_row)?
                .collect()
        })
        .await
    }
}
