//! What runs write (conversation messages, execution records), agent checkpoints and leads: SqliteStore's [`ConversationStore`].

use super::*;

/// A session's newest `?3` messages, oldest first (built once: it is every
/// prediction's statement).
static SESSION_MESSAGES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {MESSAGE_COLUMNS} FROM (
           SELECT seq, {MESSAGE_COLUMNS} FROM chat_messages
           WHERE chatflow_id = ?1 AND chat_id = ?2
           ORDER BY seq DESC LIMIT ?3
         ) ORDER BY seq"
    )
});

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn write_runs(&self, runs: Vec<RunWrites>) -> Vec<StoreResult<RunWritten>> {
        // One time for the batch, taken when the writer comes to it.
        let mut now = None;
        let write =
            move |tx: &Connection, run| write_run(tx, run, *now.get_or_insert_with(time::now));
        // The firings ended with runs are trimmed as `finish_firings` trims them.
        let trim = trim_once_per_trigger(runs.iter().filter_map(|run| run.end_firing.as_ref()));
        self.write_each(runs, write, trim).await
    }

    async fn list_chat_messages(
        &self,
        chatflow: Uuid,
        chat_id: Option<&str>,
        last: Option<u32>,
    ) -> StoreResult<Vec<ChatMessageRecord>> {
        // The newest `last` rows, returned oldest first. One statement per
        // shape, so a session's read walks its own index range only.
        let limit = last.map_or(-1, i64::from);
        if let Some(chat_id) = chat_id {
            // A session's messages: every prediction with memory reads them.
            let chat_id = chat_id.to_owned();
            return self
                .read_in_place(move |conn| {
                    conn.prepare_cached(SESSION_MESSAGES.as_str())?
                        .query_map(
                            params![chatflow.to_string(), chat_id, limit],
                            message_from_row,
                        )?
                        .collect()
                })
                .await;
        }
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {MESSAGE_COLUMNS} FROM (
                   SELECT seq, {MESSAGE_COLUMNS} FROM chat_messages
                   WHERE chatflow_id = ?1
                   ORDER BY seq DESC LIMIT ?2
                 ) ORDER BY seq"
            ))?
            .query_map(params![chatflow.to_string(), limit], message_from_row)?
            .collect()
        })
        .await
    }

    async fn query_chat_messages(
        &self,
        chatflow: Uuid,
        filter: &MessageFilter,
        descending: bool,
    ) -> StoreResult<Vec<ChatMessageRecord>> {
        let filter = filter.clone();
        self.read(move |conn| {
            let (conditions, params) =
                sql::message_conditions(sql::Dialect::Sqlite, chatflow, &filter);
            let args: Vec<Value> = params.into_iter().map(sqlite_value).collect();
            let order = if descending { "DESC" } else { "ASC" };
            conn.prepare_cached(&format!(
                "SELECT {MESSAGE_COLUMNS_OF_M} FROM chat_messages m
                 WHERE {conditions} ORDER BY m.seq {order}"
            ))?
            .query_map(rusqlite::params_from_iter(&args), message_from_row)?
            .collect()
        })
        .await
    }

    async fn find_chat_message(&self, id: Uuid) -> StoreResult<Option<ChatMessageRecord>> {
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {MESSAGE_COLUMNS} FROM chat_messages WHERE id = ?1"
            ))?
            .query_row([id.to_string()], message_from_row)
            .optional()
        })
        .await
    }

    async fn delete_chat_messages(
        &self,
        chatflow: Uuid,
        filter: &MessageFilter,
    ) -> StoreResult<u64> {
        let filter = filter.clone();
        self.call(move |conn| {
            let (conditions, params) =
                sql::message_conditions(sql::Dialect::Sqlite, chatflow, &filter);
            let mut args: Vec<Value> = params.into_iter().map(sqlite_value).collect();
            let tx = conn.transaction()?;
            // A whole chat (or every chat) cleared loses its agent checkpoints;
            // otherwise the chats losing messages do.
            if filter.takes_whole_chats() {
                tx.execute(
                    "DELETE FROM agent_checkpoints
                     WHERE chatflow_id = ?1 AND (?2 IS NULL OR session_id = ?2)",
                    params![chatflow.to_string(), filter.chat_id],
                )?;
            } else {
                let n = args.len();
                args.push(Value::Text(chatflow.to_string()));
                tx.execute(
                    &format!(
                        "DELETE FROM agent_checkpoints WHERE chatflow_id = ?{} AND session_id IN
                           (SELECT m.chat_id FROM chat_messages m WHERE {conditions})",
                        n + 1
                    ),
                    rusqlite::params_from_iter(&args),
                )?;
                args.pop();
            }
            let deleted = tx.execute(
                &format!("DELETE FROM chat_messages AS m WHERE {conditions}"),
                rusqlite::params_from_iter(&args),
            )?;
            tx.commit()?;
            Ok(deleted as u64)
        })
        .await
    }

    async fn rate_message(&self, feedback: Feedback) -> StoreResult<Feedback> {
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "INSERT INTO chat_feedback ({FEEDBACK_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (message_id) DO UPDATE
                   SET rating = excluded.rating, content = excluded.content
                 RETURNING {FEEDBACK_COLUMNS}"
            ))?
            .query_row(
                params![
                    feedback.id.to_string(),
                    feedback.chatflow_id.to_string(),
                    feedback.chat_id,
                    feedback.message_id.to_string(),
                    feedback.rating.as_str(),
                    feedback.content,
                    to_millis(&feedback.created_date),
                ],
                feedback_from_row,
            )
        })
        .await
    }

    async fn get_feedback(&self, id: Uuid) -> StoreResult<Option<Feedback>> {
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {FEEDBACK_COLUMNS} FROM chat_feedback WHERE id = ?1"
            ))?
            .query_row([id.to_string()], feedback_from_row)
            .optional()
        })
        .await
    }

    async fn update_feedback(&self, feedback: &Feedback) -> StoreResult<bool> {
        let feedback = feedback.clone();
        self.call(move |conn| {
            let changed = conn.execute(
                "UPDATE chat_feedback SET rating = ?2, content = ?3 WHERE id = ?1",
                params![
                    feedback.id.to_string(),
                    feedback.rating.as_str(),
                    feedback.content
                ],
            )?;
            Ok(changed == 1)
        })
        .await
    }

    async fn list_feedback(
        &self,
        chatflow: Uuid,
        filter: &FeedbackFilter,
    ) -> StoreResult<Vec<Feedback>> {
        let filter = filter.clone();
        self.read(move |conn| {
            let order = if filter.descending { "DESC" } else { "ASC" };
            conn.prepare_cached(&format!(
                "SELECT {FEEDBACK_COLUMNS} FROM chat_feedback
                 WHERE chatflow_id = ?1 AND (?2 IS NULL OR chat_id = ?2)
                   AND (?3 IS NULL OR created_at >= ?3) AND (?4 IS NULL OR created_at <= ?4)
                 ORDER BY created_at {order}, id {order}"
            ))?
            .query_map(
                params![
                    chatflow.to_string(),
                    filter.chat_id,
                    filter.start_date.as_ref().map(to_millis),
                    filter.end_date.as_ref().map(to_millis),
                ],
                feedback_from_row,
            )?
            .collect()
        })
        .await
    }

    async fn feedback_of_messages(
        &self,
        chatflow: Uuid,
        messages: &[Uuid],
    ) -> StoreResult<Vec<Feedback>> {
        let ids = serde_json::to_string(&messages).unwrap_or_else(|_| "[]".into());
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {FEEDBACK_COLUMNS} FROM chat_feedback
                 WHERE chatflow_id = ?1 AND message_id IN (SELECT value FROM json_each(?2))"
            ))?
            .query_map(params![chatflow.to_string(), ids], feedback_from_row)?
            .collect()
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

    async fn create_lead(&self, lead: NewLead) -> StoreResult<Lead> {
        let lead = lead.into_lead(Uuid::new_v4(), time::now());
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO leads (id, chatflow_id, chat_id, name, email, phone, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (chatflow_id, chat_id, email) WHERE email IS NOT NULL DO UPDATE
                   SET name = coalesce(excluded.name, leads.name),
                       phone = coalesce(excluded.phone, leads.phone)
                 RETURNING id, chatflow_id, chat_id, name, email, phone, created_at",
            )?
            .query_row(
                params![
                    lead.id.to_string(),
                    lead.chatflow_id.to_string(),
                    lead.chat_id,
                    lead.name,
                    lead.email,
                    lead.phone,
                    to_millis(&lead.created_date)
                ],
                lead_from_row,
            )
        })
        .await
    }

    async fn request_abort(&self, chatflow: Uuid, chat_id: &str, at: Timestamp) -> StoreResult<()> {
        let chat_id = chat_id.to_owned();
        self.call(move |conn| {
            conn.execute(
                "INSERT INTO chat_aborts (chatflow_id, chat_id, requested_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (chatflow_id, chat_id) DO UPDATE SET requested_at = excluded.requested_at",
                params![chatflow.to_string(), chat_id, to_millis(&at)],
            )
            .map(|_| ())
        })
        .await
    }

    async fn aborts_since(&self, since: Timestamp) -> StoreResult<Vec<(Uuid, String, Timestamp)>> {
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT chatflow_id, chat_id, requested_at FROM chat_aborts WHERE requested_at >= ?1",
            )?
            .query_map([to_millis(&since)], |row| {
                Ok((uuid_at(row, 0)?, row.get(1)?, from_millis(row.get(2)?)))
            })?
            .collect()
        })
        .await
    }

    async fn sweep_aborts(&self, before: Timestamp) -> StoreResult<u64> {
        self.call(move |conn| {
            conn.execute(
                "DELETE FROM chat_aborts WHERE requested_at < ?1",
                [to_millis(&before)],
            )
            .map(|n| n as u64)
        })
        .await
    }

    async fn add_token_usage(&self, workspace: Uuid, day: &str, tokens: u64) -> StoreResult<()> {
        let day = day.to_owned();
        let tokens = i64::try_from(tokens).unwrap_or(i64::MAX);
        self.call(move |conn| {
            conn.execute(
                "INSERT INTO token_usage (workspace_id, day, tokens) VALUES (?1, ?2, ?3)
                 ON CONFLICT (workspace_id, day) DO UPDATE SET tokens = tokens + excluded.tokens",
                params![workspace.to_string(), day, tokens],
            )
            .map(|_| ())
        })
        .await
    }

    async fn token_usage(&self, workspace: Uuid, day: &str) -> StoreResult<u64> {
        let day = day.to_owned();
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT tokens FROM token_usage WHERE workspace_id = ?1 AND day = ?2",
            )?
            .query_row(params![workspace.to_string(), day], |row| {
                row.get::<_, i64>(0)
            })
            .optional()
            .map(|tokens| tokens.map_or(0, |t| u64::try_from(t).unwrap_or_default()))
        })
        .await
    }

    async fn list_leads(&self, chatflow: Uuid) -> StoreResult<Vec<Lead>> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, chatflow_id, chat_id, name, email, phone, created_at FROM leads
                 WHERE chatflow_id = ?1 ORDER BY created_at, id",
            )?;
            stmt.query_map([chatflow.to_string()], lead_from_row)?
                .collect()
        })
        .await
    }
}
