//! What runs write (conversation messages, execution records), agent checkpoints and leads: PostgresStore's [`ConversationStore`].

use super::*;

#[async_trait]
impl ConversationStore for PostgresStore {
    async fn write_runs(&self, runs: Vec<RunWrites>) -> Vec<StoreResult<RunWritten>> {
        together_or_each(&runs, "runs' writes", |runs| self.write_together(runs)).await
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

    async fn query_chat_messages(
        &self,
        chatflow: Uuid,
        filter: &MessageFilter,
        descending: bool,
    ) -> StoreResult<Vec<ChatMessageRecord>> {
        let (conditions, params) =
            sql::message_conditions(sql::Dialect::Postgres, chatflow, filter);
        let args: Vec<Arg> = params.into_iter().map(postgres_arg).collect();
        let args: Vec<&(dyn ToSql + Sync)> =
            args.iter().map(|a| &**a as &(dyn ToSql + Sync)).collect();
        let order = if descending { "DESC" } else { "ASC" };
        self.query_all(
            &format!(
                "SELECT {MESSAGE_COLUMNS_OF_M} FROM chat_messages m
                 WHERE {conditions} ORDER BY m.seq {order}"
            ),
            &args,
            message_from_row,
        )
        .await
    }

    async fn find_chat_message(&self, id: Uuid) -> StoreResult<Option<ChatMessageRecord>> {
        self.query_opt(
            &format!("SELECT {MESSAGE_COLUMNS} FROM chat_messages WHERE id = $1"),
            &[&id],
            message_from_row,
        )
        .await
    }

    async fn delete_chat_messages(
        &self,
        chatflow: Uuid,
        filter: &MessageFilter,
    ) -> StoreResult<u64> {
        let (conditions, params) =
            sql::message_conditions(sql::Dialect::Postgres, chatflow, filter);
        let args: Vec<Arg> = params.into_iter().map(postgres_arg).collect();
        let args: Vec<&(dyn ToSql + Sync)> =
            args.iter().map(|a| &**a as &(dyn ToSql + Sync)).collect();
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        // A whole chat (or every chat) cleared loses its agent checkpoints;
        // otherwise the chats losing messages do (`$1` is the chatflow).
        if filter.takes_whole_chats() {
            tx.execute(
                "DELETE FROM agent_checkpoints
                 WHERE chatflow_id = $1 AND ($2::text IS NULL OR session_id = $2)",
                &[&chatflow, &filter.chat_id],
            )
            .await
            .map_err(backend)?;
        } else {
            tx.execute(
                &format!(
                    "DELETE FROM agent_checkpoints WHERE chatflow_id = $1 AND session_id IN
                       (SELECT m.chat_id FROM chat_messages m WHERE {conditions})"
                ),
                &args,
            )
            .await
            .map_err(backend)?;
        }
        let deleted = tx
            .execute(
                &format!("DELETE FROM chat_messages AS m WHERE {conditions}"),
                &args,
            )
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(deleted)
    }

    async fn rate_message(&self, feedback: Feedback) -> StoreResult<Feedback> {
        let row = self
            .query_opt(
                &format!(
                    "INSERT INTO chat_feedback ({FEEDBACK_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)
                     ON CONFLICT (message_id) DO UPDATE
                       SET rating = EXCLUDED.rating, content = EXCLUDED.content
                     RETURNING {FEEDBACK_COLUMNS}"
                ),
                &[
                    &feedback.id,
                    &feedback.chatflow_id,
                    &feedback.chat_id,
                    &feedback.message_id,
                    &feedback.rating.as_str(),
                    &feedback.content,
                    &feedback.created_date,
                ],
                feedback_from_row,
            )
            .await?;
        row.ok_or_else(|| StoreError::Backend("the rating was not returned".into()))
    }

    async fn get_feedback(&self, id: Uuid) -> StoreResult<Option<Feedback>> {
        self.query_opt(
            &format!("SELECT {FEEDBACK_COLUMNS} FROM chat_feedback WHERE id = $1"),
            &[&id],
            feedback_from_row,
        )
        .await
    }

    async fn update_feedback(&self, feedback: &Feedback) -> StoreResult<bool> {
        let changed = self
            .execute(
                "UPDATE chat_feedback SET rating = $2, content = $3 WHERE id = $1",
                &[&feedback.id, &feedback.rating.as_str(), &feedback.content],
            )
            .await?;
        Ok(changed == 1)
    }

    async fn list_feedback(
        &self,
        chatflow: Uuid,
        filter: &FeedbackFilter,
    ) -> StoreResult<Vec<Feedback>> {
        let order = if filter.descending { "DESC" } else { "ASC" };
        self.query_all(
            &format!(
                "SELECT {FEEDBACK_COLUMNS} FROM chat_feedback
                 WHERE chatflow_id = $1 AND ($2::text IS NULL OR chat_id = $2)
                   AND ($3::timestamptz IS NULL OR created_at >= $3)
                   AND ($4::timestamptz IS NULL OR created_at <= $4)
                 ORDER BY created_at {order}, id {order}"
            ),
            &[
                &chatflow,
                &filter.chat_id,
                &filter.start_date,
                &filter.end_date,
            ],
            feedback_from_row,
        )
        .await
    }

    async fn feedback_of_messages(
        &self,
        chatflow: Uuid,
        messages: &[Uuid],
    ) -> StoreResult<Vec<Feedback>> {
        self.query_all(
            &format!(
                "SELECT {FEEDBACK_COLUMNS} FROM chat_feedback
                 WHERE chatflow_id = $1 AND message_id = ANY($2)"
            ),
            &[&chatflow, &messages],
            feedback_from_row,
        )
        .await
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

    async fn create_lead(&self, lead: NewLead) -> StoreResult<Lead> {
        let lead = lead.into_lead(Uuid::new_v4(), time::now());
        let kept = self
            .query_opt(
                "INSERT INTO leads (id, chatflow_id, chat_id, name, email, phone, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (chatflow_id, chat_id, email) WHERE email IS NOT NULL DO UPDATE
                   SET name = coalesce(EXCLUDED.name, leads.name),
                       phone = coalesce(EXCLUDED.phone, leads.phone)
                 RETURNING id, chatflow_id, chat_id, name, email, phone, created_at",
                &[
                    &lead.id,
                    &lead.chatflow_id,
                    &lead.chat_id,
                    &lead.name,
                    &lead.email,
                    &lead.phone,
                    &lead.created_date,
                ],
                lead_from_row,
            )
            .await?;
        kept.ok_or_else(|| StoreError::Backend("the lead was not returned".into()))
    }

    async fn request_abort(&self, chatflow: Uuid, chat_id: &str, at: Timestamp) -> StoreResult<()> {
        self.execute(
            "INSERT INTO chat_aborts (chatflow_id, chat_id, requested_at) VALUES ($1, $2, $3)
             ON CONFLICT (chatflow_id, chat_id) DO UPDATE SET requested_at = EXCLUDED.requested_at",
            &[&chatflow, &chat_id, &at],
        )
        .await
        .map(|_| ())
    }

    async fn aborts_since(&self, since: Timestamp) -> StoreResult<Vec<(Uuid, String, Timestamp)>> {
        self.query_all(
            "SELECT chatflow_id, chat_id, requested_at FROM chat_aborts WHERE requested_at >= $1",
            &[&since],
            |row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)),
        )
        .await
    }

    async fn sweep_aborts(&self, before: Timestamp) -> StoreResult<u64> {
        self.execute(
            "DELETE FROM chat_aborts WHERE requested_at < $1",
            &[&before],
        )
        .await
    }

    async fn add_token_usage(&self, workspace: Uuid, day: &str, tokens: u64) -> StoreResult<()> {
        let tokens = i64::try_from(tokens).unwrap_or(i64::MAX);
        self.execute(
            "INSERT INTO token_usage (workspace_id, day, tokens) VALUES ($1, $2, $3)
             ON CONFLICT (workspace_id, day) DO UPDATE SET tokens = token_usage.tokens + EXCLUDED.tokens",
            &[&workspace, &day, &tokens],
        )
        .await
        .map(|_| ())
    }

    async fn token_usage(&self, workspace: Uuid, day: &str) -> StoreResult<u64> {
        let tokens: Option<i64> = self
            .query_opt(
                "SELECT tokens FROM token_usage WHERE workspace_id = $1 AND day = $2",
                &[&workspace, &day],
                |row| row.try_get(0),
            )
            .await?;
        Ok(tokens.map_or(0, |t| u64::try_from(t).unwrap_or_default()))
    }

    async fn list_leads(&self, chatflow: Uuid) -> StoreResult<Vec<Lead>> {
        self.query_all(
            "SELECT id, chatflow_id, chat_id, name, email, phone, created_at FROM leads
             WHERE chatflow_id = $1 ORDER BY created_at, id",
            &[&chatflow],
            lead_from_row,
        )
        .await
    }
}
