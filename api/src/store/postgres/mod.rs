//! The PostgreSQL store (deadpool-postgres + tokio-postgres): the backend for
//! several replicas sharing one database.
//!
//! An optional schema (`DATABASE_SCHEMA`) is created at connect and set as the
//! `search_path` of every pooled connection, so installations and test runs can
//! share a database. Migrations run under an advisory lock, so replicas starting
//! together apply each one exactly once. Statements are prepared once per
//! connection (`prepare_cached`).

mod chatflows;
mod conversations;
mod credentials;
mod document_stores;
mod executions;
mod keys;
mod rate_limits;
mod tools;
mod triggers;
mod variables;
mod vectors;

use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{FromSql, ToSql, Type};
use tokio_postgres::{NoTls, Row};
use uuid::Uuid;

use super::migrations::{self, Migration};
use super::sql::{
    self, CHATFLOW_COLUMNS, CREDENTIAL_COLUMNS, EXECUTION_COLUMN_COUNT, EXECUTION_COLUMNS,
    FEEDBACK_COLUMNS, MESSAGE_COLUMNS, MESSAGE_COLUMNS_OF_M, RESULT_COLUMNS, TOOL_COLUMNS,
    TRIGGER_COLUMNS, VARIABLE_COLUMNS,
};
use super::{
    ChatflowStore, ConversationStore, CredentialStore, DocumentStoreStore, ExecutionStore,
    KeyStore, RateLimitStore, ToolStore, TriggerStore, VariableStore, VectorStore,
};
use super::{
    ClaimPlanner, FiringClaim, FiringEnd, Listing, RunWrites, RunWritten, Store, StoreError,
    StoreResult, conflict_as,
};
pub use crate::config::PostgresOptions;
use crate::domain::ApiConfig;
use crate::domain::callback::{
    AttemptOutcome, CallbackAttempt, CallbackState, CallbackStatus, OutboxCallback, error_body,
};
use crate::domain::credential::SealedCredential;
use crate::domain::mcp::{CustomMcpServer, McpAuthType, McpServerConfig, McpServerStatus};
use crate::domain::time::{self, Timestamp};
use crate::domain::trigger::{self as trig, LEASE_EXPIRED, failure_mail};
use crate::domain::vector::{ChunkKey, UpsertCounts, embedding_bytes, embedding_from_bytes};
use crate::domain::{AgentflowRef, Execution, ExecutionFilter, ExecutionState, ListedExecution};
use crate::domain::{
    ApiKey, ChatMessageRecord, ChatType, Chatflow, ChatflowPatch, ChatflowType, Delivery, Feedback,
    FeedbackFilter, Firing, Lead, MessageFilter, MessageRole, NewApiKey, NewChatflow, NewLead,
    NewMail, NewTool, NewTriggerResult, NewVariable, OutboxMail, Page, Permission, Rating,
    ResultStatus, Tool, ToolPatch, Trigger, TriggerResult, TriggerType, UpsertRecord, Variable,
    VariablePatch, VariableType, Workspace,
};
use crate::domain::{VectorChunk, VectorWrite, execution, tool, variable};

mod pgvector;

#[derive(Clone)]

pub struct PostgresStore {
    pool: Pool,
    options: PostgresOptions,
    /// The statements that use pgvector, once [`VectorStore::enable_pgvector`](crate::store::VectorStore::enable_pgvector) found it.
    pgvector: std::sync::OnceLock<pgvector::PgvectorSql>,
}

type PgResult<T> = Result<T, tokio_postgres::Error>;

impl PostgresStore {
    /// Connects, creates the schema when one is named, and applies migrations.
    pub async fn connect(
        url: &str,
        schema: Option<&str>,
        options: PostgresOptions,
    ) -> StoreResult<Self> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StoreError::Backend(format!("invalid DATABASE_URL: {e}")))?;
        if let Some(schema) = schema {
            // The schema name is validated at configuration (a plain identifier).
            config.options(format!("-c search_path={schema}"));
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Backend(format!("cannot build the connection pool: {e}")))?;
        let store = PostgresStore {
            pool,
            options,
            pgvector: std::sync::OnceLock::new(),
        };
        let mut client = store.client().await?;
        if let Some(schema) = schema {
            client
                .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                .await
                .map_err(backend)?;
        }
        migrate(&mut client, migrations::POSTGRES)
            .await
            .map_err(backend)?;
        Ok(store)
    }

    async fn client(&self) -> StoreResult<deadpool_postgres::Client> {
        self.pool
            .get()
            .await
            .map_err(|e| StoreError::Backend(format!("cannot reach PostgreSQL: {e}")))
    }

    async fn query_opt<T>(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        map: fn(&Row) -> PgResult<T>,
    ) -> StoreResult<Option<T>> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql).await.map_err(backend)?;
        match client.query_opt(&stmt, params).await.map_err(backend)? {
            Some(row) => map(&row).map(Some).map_err(backend),
            None => Ok(None),
        }
    }

    async fn query_all<T>(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        map: fn(&Row) -> PgResult<T>,
    ) -> StoreResult<Vec<T>> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql).await.map_err(backend)?;
        let rows = client.query(&stmt, params).await.map_err(backend)?;
        rows.iter()
            .map(map)
            .collect::<PgResult<_>>()
            .map_err(backend)
    }

    async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> StoreResult<u64> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql).await.map_err(backend)?;
        client.execute(&stmt, params).await.map_err(backend)
    }

    /// Applies the writes of `runs` in one transaction, all or none (a failing
    /// run fails them all: [`ConversationStore::write_runs`](crate::store::ConversationStore::write_runs) then writes each on its own).
    /// Messages alone are one statement, atomic without a transaction.
    async fn write_together(&self, runs: &[RunWrites]) -> StoreResult<Vec<RunWritten>> {
        let now = time::now();
        let mut written: Vec<RunWritten> = runs
            .iter()
            .map(|run| RunWritten {
                // Time-ordered ids (v7): new rows land at the end of the id index,
                // not on a random page of it, however large the table grows.
                messages: run
                    .messages
                    .iter()
                    .map(|m| m.clone().into_record(Uuid::now_v7(), now))
                    .collect(),
                ..RunWritten::default()
            })
            .collect();
        let mut client = self.client().await?;
        if runs.iter().all(|run| {
            run.start_execution.is_none()
                && run.update_execution.is_none()
                && run.end_firing.is_none()
        }) {
            insert_messages(&client, &written).await?;
            return Ok(written);
        }
        let tx = client.transaction().await.map_err(backend)?;
        for (run, written) in runs.iter().zip(&mut written) {
            // Copied: the runs may still be written one by one if this fails.
            let mut update = run.update_execution.clone();
            if let Some(execution) = &run.start_execution {
                let (created, ended) = execution.clone().start(&mut update, now);
                let stored = start_execution(&tx, &created).await?;
                written.updated = ended.then(|| stored.clone());
                written.started = Some(stored);
            }
            if let Some((id, update)) = update
                && let Some(mut found) = get_execution(&tx, None, id, true).await?
                && update.applies_to(&found)
            {
                update.apply(&mut found, now);
                write_execution(&tx, &found).await?;
                written.updated = Some(found);
            }
        }
        insert_messages(&tx, &written).await?;
        let ends: Vec<(usize, &FiringEnd)> = runs
            .iter()
            .enumerate()
            .filter_map(|(i, run)| Some((i, run.end_firing.as_ref()?)))
            .collect();
        if !ends.is_empty() {
            let (at, ends): (Vec<usize>, Vec<&FiringEnd>) = ends.into_iter().unzip();
            let results = triggers::end_firings(&tx, &ends).await?;
            for (i, result) in at.into_iter().zip(results) {
                written[i].firing_result = result;
            }
        }
        tx.commit().await.map_err(backend)?;
        Ok(written)
    }

    /// A page of `page_sql` and the total of `count_sql`, both filtered by the
    /// parameters `filter` (`$1`…); `page_sql` takes the limit and the offset after them.
    async fn list_page<T>(
        &self,
        count_sql: &str,
        page_sql: &str,
        filter: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        page: Page,
        map: fn(&Row) -> PgResult<T>,
    ) -> StoreResult<Listing<T>> {
        let client = self.client().await?;
        let (count, stmt) = futures_util::future::try_join(
            client.prepare_cached(count_sql),
            client.prepare_cached(page_sql),
        )
        .await
        .map_err(backend)?;
        let offset = i64::try_from(page.offset()).unwrap_or(i64::MAX);
        let limit = i64::from(page.limit);
        // Both queries go out together on the one connection (pipelined): one
        // round trip, not two.
        let mut page_params = filter.to_vec();
        page_params.extend([
            &limit as &(dyn tokio_postgres::types::ToSql + Sync),
            &offset,
        ]);
        let (total, rows) = futures_util::future::try_join(
            client.query_one(&count, filter),
            client.query(&stmt, &page_params),
        )
        .await
        .map_err(backend)?;
        let total: i64 = total.try_get(0).map_err(backend)?;
        Ok(Listing {
            items: rows
                .iter()
                .map(map)
                .collect::<PgResult<_>>()
                .map_err(backend)?,
            total: u64::try_from(total).unwrap_or(0),
        })
    }
}

/// Writes `items` with `write` in one transaction; should that fail (one
/// item PostgreSQL refuses fails them all), each on its own, so one item's
/// failure is its own. One outcome per item, in order.
async fn together_or_each<'a, I, T, Fut>(
    items: &'a [I],
    what: &str,
    write: impl Fn(&'a [I]) -> Fut,
) -> Vec<StoreResult<T>>
where
    Fut: std::future::Future<Output = StoreResult<Vec<T>>>,
{
    if items.len() > 1 {
        match write(items).await {
            Ok(written) => return written.into_iter().map(Ok).collect(),
            Err(e) => {
                tracing::warn!(items = items.len(), error = %e,
                    "a group commit of {what} failed; writing each on its own");
            }
        }
    }
    let mut outcomes = Vec::with_capacity(items.len());
    for item in items {
        let written = write(std::slice::from_ref(item)).await;
        outcomes.push(written.and_then(|mut written| {
            written
                .pop()
                .ok_or_else(|| StoreError::Backend(format!("no outcome for one of the {what}")))
        }));
    }
    outcomes
}

async fn migrate(client: &mut deadpool_postgres::Client, set: &[Migration]) -> PgResult<()> {
    let tx = client.transaction().await?;
    // Replicas starting together queue here; each migration is applied once.
    tx.batch_execute(
        "SELECT pg_advisory_xact_lock(7301966515);
         CREATE TABLE IF NOT EXISTS schema_migrations (
            version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)",
    )
    .await?;
    let current: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            &[],
        )
        .await?
        .try_get(0)?;
    for m in set.iter().filter(|m| m.version > current) {
        tx.batch_execute(m.sql).await?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
            &[&m.version, &m.name, &time::now()],
        )
        .await?;
        tracing::info!(
            version = m.version,
            name = m.name,
            "applied postgres migration"
        );
    }
    tx.commit().await
}

fn backend(e: tokio_postgres::Error) -> StoreError {
    // tokio-postgres displays only "db error"; the server's own words are in the source.
    let detail = match e.as_db_error() {
        Some(db) => format!("{} ({}): {}", e, db.code().code(), db.message()),
        None => match std::error::Error::source(&e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    };
    if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
        StoreError::Conflict(detail)
    } else {
        StoreError::Backend(detail)
    }
}

const API_KEY_SELECT: &str = "SELECT k.id, k.workspace_id, w.name, k.name, k.permissions, \
     k.key_hash, k.created_at, k.last_used_at FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id";

fn api_key_from_row(row: &Row) -> PgResult<ApiKey> {
    Ok(ApiKey {
        id: row.try_get(0)?,
        workspace_id: row.try_get(1)?,
        workspace_name: row.try_get(2)?,
        name: row.try_get(3)?,
        permissions: Permission::split(row.try_get(4)?),
        key_hash: row.try_get(5)?,
        created_date: row.try_get(6)?,
        last_used_date: row.try_get(7)?,
    })
}

fn chatflow_from_row(row: &Row) -> PgResult<Chatflow> {
    Ok(Chatflow {
        id: row.try_get(0)?,
        workspace_id: row.try_get(1)?,
        name: row.try_get(2)?,
        flow_data: row.try_get(3)?,
        deployed: row.try_get(4)?,
        is_public: row.try_get(5)?,
        apikeyid: row.try_get(6)?,
        chatbot_config: row.try_get(7)?,
        api_config: row.try_get::<_, Option<String>>(8)?.map(ApiConfig::new),
        category: row.try_get(9)?,
        flow_type: ChatflowType::parse_stored(row.try_get(10)?),
        created_date: row.try_get(11)?,
        updated_date: row.try_get(12)?,
        mcp_server: row
            .try_get::<_, Option<String>>(13)?
            .as_deref()
            .and_then(McpServerConfig::parse),
    })
}

async fn write_chatflow(client: &impl GenericClient, sql: &str, f: &Chatflow) -> PgResult<u64> {
    let stmt = client.prepare_cached(sql).await?;
    client
        .execute(
            &stmt,
            &[
                &f.id,
                &f.workspace_id,
                &f.name,
                &f.flow_data,
                &f.deployed,
                &f.is_public,
                &f.apikeyid,
                &f.chatbot_config,
                &f.api_config.as_ref().map(ApiConfig::text),
                &f.category,
                &f.flow_type.as_str(),
                &f.created_date,
                &f.updated_date,
                &f.mcp_server.as_ref().map(McpServerConfig::to_text),
            ],
        )
        .await
}

const TRIGGER_COLUMNS_T: &str = "t.id, t.workspace_id, t.name, t.chatflow_id, t.node_id, t.type, \
     t.cron_expression, t.timezone, t.enabled, t.webhook_platform, t.webhook_secret, \
     t.webhook_bot_token, t.trigger_message, t.execution_count, t.max_executions, t.timeout_secs, \
     t.last_executed, t.next_execution, t.notification_email, t.created_at, t.updated_at, \
     t.owned_by_chatflow, t.ends_at, t.response_mode, t.callback_url, t.callback_secret";

fn trigger_from_row(row: &Row) -> PgResult<Trigger> {
    trigger_at(row, 0)
}

/// A trigger whose columns start at `at` (joins put other columns first).
fn trigger_at(row: &Row, at: usize) -> PgResult<Trigger> {
    Ok(Trigger {
        id: row.try_get(at)?,
        workspace_id: row.try_get(at + 1)?,
        name: row.try_get(at + 2)?,
        chatflow_id: row.try_get(at + 3)?,
        node_id: row.try_get(at + 4)?,
        trigger_type: TriggerType::parse(row.try_get(at + 5)?).unwrap_or(TriggerType::Webhook),
        cron_expression: row.try_get(at + 6)?,
        timezone: row.try_get(at + 7)?,
        enabled: row.try_get(at + 8)?,
        webhook_platform: row.try_get(at + 9)?,
        webhook_secret: row.try_get(at + 10)?,
        webhook_bot_token: row.try_get(at + 11)?,
        trigger_message: row.try_get(at + 12)?,
        execution_count: row.try_get(at + 13)?,
        max_executions: row.try_get(at + 14)?,
        timeout: row.try_get(at + 15)?,
        last_executed: row.try_get(at + 16)?,
        next_execution: row.try_get(at + 17)?,
        notification_email: row.try_get(at + 18)?,
        created_date: row.try_get(at + 19)?,
        updated_date: row.try_get(at + 20)?,
        owned_by_chatflow: row.try_get(at + 21)?,
        ends_at: row.try_get(at + 22)?,
        respond_async: row.try_get::<_, &str>(at + 23)? == "async",
        callback_url: row.try_get(at + 24)?,
        callback_secret: row.try_get(at + 25)?,
    })
}

fn json_column(row: &Row, idx: usize) -> PgResult<Option<serde_json::Value>> {
    Ok(row
        .try_get::<_, Option<String>>(idx)?
        .and_then(|text| serde_json::from_str(&text).ok()))
}

fn result_from_row(row: &Row) -> PgResult<TriggerResult> {
    Ok(TriggerResult {
        id: row.try_get(0)?,
        trigger_id: row.try_get(1)?,
        executed_at: row.try_get(2)?,
        scheduled_at: row.try_get(3)?,
        input: row.try_get(4)?,
        output: row.try_get(5)?,
        source_documents: json_column(row, 6)?,
        used_tools: json_column(row, 7)?,
        chat_id: row.try_get(8)?,
        status: ResultStatus::parse_stored(row.try_get(9)?),
        error: row.try_get(10)?,
        missed_count: row.try_get(11)?,
        callback: None,
    })
}

/// Inserts a result and keeps the trigger's newest `keep`.
async fn insert_result(
    client: &impl GenericClient,
    result: NewTriggerResult,
    keep: u32,
) -> PgResult<TriggerResult> {
    let stored = result.into_result(Uuid::new_v4());
    let insert = client
        .prepare_cached(&format!(
            "INSERT INTO trigger_results ({RESULT_COLUMNS})
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        ))
        .await?;
    client
        .execute(
            &insert,
            &[
                &stored.id,
                &stored.trigger_id,
                &stored.executed_at,
                &stored.scheduled_at,
                &stored.input,
                &stored.output,
                &stored.source_documents.as_ref().map(|v| v.to_string()),
                &stored.used_tools.as_ref().map(|v| v.to_string()),
                &stored.chat_id,
                &stored.status.as_str(),
                &stored.error,
                &stored.missed_count,
            ],
        )
        .await?;
    trim_results(client, stored.trigger_id, keep).await?;
    Ok(stored)
}

/// Keeps the trigger's newest `keep` results.
async fn trim_results(client: &impl GenericClient, trigger: Uuid, keep: u32) -> PgResult<()> {
    if keep == u32::MAX {
        return Ok(());
    }
    let prune = client
        .prepare_cached(
            "DELETE FROM trigger_results WHERE trigger_id = $1 AND seq <= (
               SELECT seq FROM trigger_results WHERE trigger_id = $1
               ORDER BY seq DESC LIMIT 1 OFFSET $2)",
        )
        .await?;
    client
        .execute(&prune, &[&trigger, &i64::from(keep)])
        .await?;
    Ok(())
}

async fn insert_mail(
    client: &impl GenericClient,
    trigger: Uuid,
    mail: &NewMail,
    now: Timestamp,
) -> PgResult<()> {
    let stmt = client
        .prepare_cached(
            "INSERT INTO mail_outbox (id, trigger_id, recipient, subject, body, attempts,
               next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $5, 0, $6, $6)",
        )
        .await?;
    client
        .execute(
            &stmt,
            &[
                &Uuid::new_v4(),
                &trigger,
                &mail.recipient,
                &mail.subject,
                &mail.body,
                &now,
            ],
        )
        .await?;
    Ok(())
}

/// Gives the callback `firing` owes (if any) its body and result: from then on
/// it is due.
async fn fill_callback(
    client: &impl GenericClient,
    firing: Uuid,
    result: Uuid,
    body: &str,
) -> PgResult<()> {
    let stmt = client
        .prepare_cached(
            "UPDATE callback_outbox SET body = $2, result_id = $3
             WHERE firing_id = $1 AND body IS NULL",
        )
        .await?;
    client.execute(&stmt, &[&firing, &body, &result]).await?;
    Ok(())
}

async fn write_trigger(client: &impl GenericClient, sql: &str, t: &Trigger) -> PgResult<u64> {
    let stmt = client.prepare_cached(sql).await?;
    client
        .execute(
            &stmt,
            &[
                &t.id,
                &t.workspace_id,
                &t.name,
                &t.chatflow_id,
                &t.node_id,
                &t.trigger_type.as_str(),
                &t.cron_expression,
                &t.timezone,
                &t.enabled,
                &t.webhook_platform,
                &t.webhook_secret,
                &t.webhook_bot_token,
                &t.trigger_message,
                &t.execution_count,
                &t.max_executions,
                &t.timeout,
                &t.last_executed,
                &t.next_execution,
                &t.notification_email,
                &t.created_date,
                &t.updated_date,
                &t.owned_by_chatflow,
                &t.ends_at,
                &t.response_mode(),
                &t.callback_url,
                &t.callback_secret,
            ],
        )
        .await
}

fn variable_from_row(row: &Row) -> PgResult<Variable> {
    Ok(Variable {
        id: row.try_get(0)?,
        name: row.try_get(1)?,
        value: row.try_get(2)?,
        var_type: VariableType::parse_stored(row.try_get(3)?),
        created_date: row.try_get(4)?,
        updated_date: row.try_get(5)?,
    })
}

fn credential_from_row(row: &Row) -> PgResult<SealedCredential> {
    Ok(SealedCredential {
        id: row.try_get(0)?,
        workspace_id: row.try_get(1)?,
        name: row.try_get(2)?,
        credential_name: row.try_get(3)?,
        key_id: row.try_get(4)?,
        data: row.try_get(5)?,
        created_date: row.try_get(6)?,
        updated_date: row.try_get(7)?,
        allowed_hosts: SealedCredential::hosts_from_column(&row.try_get::<_, String>(8)?),
    })
}

fn tool_from_row(row: &Row) -> PgResult<Tool> {
    Ok(Tool {
        id: row.try_get(0)?,
        name: row.try_get(1)?,
        description: row.try_get(2)?,
        schema: row.try_get::<_, JsonText<_>>(3)?.0,
        code: row.try_get(4)?,
        requirements: row.try_get::<_, JsonText<_>>(5)?.0,
        created_date: row.try_get(6)?,
        updated_date: row.try_get(7)?,
    })
}

/// A `TEXT` column holding JSON, decoded on read (a value that does not decode
/// fails the row).
struct JsonText<T>(T);

impl<'a, T: serde::de::DeserializeOwned> FromSql<'a> for JsonText<T> {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let text = <&str as FromSql>::from_sql(ty, raw)?;
        Ok(JsonText(serde_json::from_str(text)?))
    }

    fn accepts(ty: &Type) -> bool {
        <&str as FromSql>::accepts(ty)
    }
}

/// The JSON text stored for `value`.
fn json_text<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Backend(format!("cannot encode a JSON column: {e}")))
}

fn workspace_from_row(row: &Row) -> PgResult<Workspace> {
    Ok(Workspace {
        id: row.try_get(0)?,
        name: row.try_get(1)?,
    })
}

fn message_from_row(row: &Row) -> PgResult<ChatMessageRecord> {
    Ok(ChatMessageRecord {
        id: row.try_get(0)?,
        chatflow_id: row.try_get(1)?,
        chat_id: row.try_get(2)?,
        role: MessageRole::parse_stored(row.try_get(3)?),
        content: row.try_get(4)?,
        source_documents: row.try_get(5)?,
        used_tools: row.try_get(6)?,
        created_date: row.try_get(7)?,
        chat_type: ChatType::parse_stored(row.try_get(8)?),
        execution_id: row.try_get(9)?,
        memory_type: row.try_get(10)?,
        details: row.try_get(11)?,
    })
}

fn feedback_from_row(row: &Row) -> PgResult<Feedback> {
    Ok(Feedback {
        id: row.try_get(0)?,
        chatflow_id: row.try_get(1)?,
        chat_id: row.try_get(2)?,
        message_id: row.try_get(3)?,
        rating: Rating::parse_stored(row.try_get(4)?),
        content: row.try_get(5)?,
        created_date: row.try_get(6)?,
    })
}

fn lead_from_row(row: &Row) -> PgResult<Lead> {
    Ok(Lead {
        id: row.try_get(0)?,
        chatflow_id: row.try_get(1)?,
        chat_id: row.try_get(2)?,
        name: row.try_get(3)?,
        email: row.try_get(4)?,
        phone: row.try_get(5)?,
        created_date: row.try_get(6)?,
    })
}

#[async_trait]
impl Store for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }
}

fn execution_from_row(row: &Row) -> PgResult<Execution> {
    Ok(Execution {
        id: row.try_get(0)?,
        workspace_id: row.try_get(1)?,
        agentflow_id: row.try_get(2)?,
        session_id: row.try_get(3)?,
        state: row.try_get::<_, StoredState>(4)?.0,
        execution_data: row.try_get(5)?,
        action: row.try_get(6)?,
        is_public: row.try_get(7)?,
        created_date: row.try_get(8)?,
        updated_date: row.try_get(9)?,
        stopped_date: row.try_get(10)?,
    })
}

/// An execution's `state` column, read strictly (a name this version does not
/// know fails the row rather than being guessed).
struct StoredState(ExecutionState);

impl<'a> FromSql<'a> for StoredState {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let text = <&str as FromSql>::from_sql(ty, raw)?;
        Ok(StoredState(text.parse()?))
    }

    fn accepts(ty: &Type) -> bool {
        <&str as FromSql>::accepts(ty)
    }
}

/// Inserts the messages of every run in `written`, in order, in one statement.
async fn insert_messages(client: &impl GenericClient, written: &[RunWritten]) -> StoreResult<()> {
    let records: Vec<&ChatMessageRecord> = written.iter().flat_map(|w| &w.messages).collect();
    if records.is_empty() {
        return Ok(());
    }
    let column = |f: fn(&ChatMessageRecord) -> Option<&str>| -> Vec<Option<&str>> {
        records.iter().map(|r| f(r)).collect()
    };
    let ids: Vec<Uuid> = records.iter().map(|r| r.id).collect();
    let chatflows: Vec<Uuid> = records.iter().map(|r| r.chatflow_id).collect();
    let chat_ids = column(|r| Some(r.chat_id.as_str()));
    let roles = column(|r| Some(r.role.as_str()));
    let contents = column(|r| Some(r.content.as_str()));
    let sources = column(|r| r.source_documents.as_deref());
    let tools = column(|r| r.used_tools.as_deref());
    let chat_types = column(|r| Some(r.chat_type.as_str()));
    let executions: Vec<Option<Uuid>> = records.iter().map(|r| r.execution_id).collect();
    let memory_types = column(|r| r.memory_type.as_deref());
    let details = column(|r| r.details.as_deref());
    let now = records[0].created_date;
    // The ordinality keeps `seq` in the order given.
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO chat_messages ({MESSAGE_COLUMNS})
             SELECT m.id, m.chatflow_id, m.chat_id, m.role, m.content, m.source_documents,
                    m.used_tools, $8, m.chat_type, m.execution_id, m.memory_type, m.details
             FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[],
                         $6::text[], $7::text[], $9::text[], $10::uuid[], $11::text[],
                         $12::text[])
                  WITH ORDINALITY AS m(id, chatflow_id, chat_id, role, content,
                                       source_documents, used_tools, chat_type, execution_id,
                                       memory_type, details, ord)
             ORDER BY m.ord"
        ))
        .await
        .map_err(backend)?;
    client
        .execute(
            &stmt,
            &[
                &ids,
                &chatflows,
                &chat_ids,
                &roles,
                &contents,
                &sources,
                &tools,
                &now,
                &chat_types,
                &executions,
                &memory_types,
                &details,
            ],
        )
        .await
        .map_err(backend)?;
    Ok(())
}

/// Inserts an execution of a chatflow of its own workspace (a conflict when
/// the chatflow is not in it) and returns it as stored. A record already there
/// (a start whose writer could not know it was stored, written again with the
/// run's end) takes the run's fields; its sharing stays.
async fn start_execution(
    client: &impl GenericClient,
    created: &Execution,
) -> StoreResult<Execution> {
    // Through the chatflow's row: an execution is always of a chatflow of its
    // own workspace.
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO executions AS e (id, workspace_id, agentflow_id, session_id, state,
                                          execution_data, action, is_public, created_at,
                                          updated_at, stopped_at)
             SELECT $1, workspace_id, id, $4, $5, $6, $7, $8, $9, $10, $11
             FROM chatflows WHERE id = $3 AND workspace_id = $2
             ON CONFLICT (id) DO UPDATE SET
                 state = EXCLUDED.state, execution_data = EXCLUDED.execution_data,
                 action = EXCLUDED.action, updated_at = EXCLUDED.updated_at,
                 stopped_at = EXCLUDED.stopped_at
             RETURNING {EXECUTION_COLUMNS}"
        ))
        .await
        .map_err(backend)?;
    let stored = client
        .query_opt(
            &stmt,
            &[
                &created.id,
                &created.workspace_id,
                &created.agentflow_id,
                &created.session_id,
                &created.state.as_str(),
                &created.execution_data,
                &created.action,
                &created.is_public,
                &created.created_date,
                &created.updated_date,
                &created.stopped_date,
            ],
        )
        .await
        .map_err(backend)?
        .ok_or_else(|| StoreError::Conflict(execution::chatflow_missing(created.agentflow_id)))?;
    execution_from_row(&stored).map_err(backend)
}

/// An execution by id, in `workspace` when one is given; locked for the rest of
/// the transaction when `for_update`.
async fn get_execution(
    client: &impl GenericClient,
    workspace: Option<Uuid>,
    id: Uuid,
    for_update: bool,
) -> StoreResult<Option<Execution>> {
    let lock = if for_update { "FOR UPDATE" } else { "" };
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions e
             WHERE e.id = $1 AND ($2::uuid IS NULL OR e.workspace_id = $2) {lock}"
        ))
        .await
        .map_err(backend)?;
    match client
        .query_opt(&stmt, &[&id, &workspace])
        .await
        .map_err(backend)?
    {
        Some(row) => execution_from_row(&row).map(Some).map_err(backend),
        None => Ok(None),
    }
}

/// Writes everything of an execution that can change.
async fn write_execution(client: &impl GenericClient, e: &Execution) -> StoreResult<u64> {
    let stmt = client
        .prepare_cached(
            "UPDATE executions SET state = $2, execution_data = $3, action = $4, is_public = $5,
                                   updated_at = $6, stopped_at = $7
             WHERE id = $1",
        )
        .await
        .map_err(backend)?;
    client
        .execute(
            &stmt,
            &[
                &e.id,
                &e.state.as_str(),
                &e.execution_data,
                &e.action,
                &e.is_public,
                &e.updated_date,
                &e.stopped_date,
            ],
        )
        .await
        .map_err(backend)
}

/// A boxed query argument of a statement built at run time.
type Arg = Box<dyn ToSql + Sync + Send>;

/// A shared query's argument, boxed for tokio-postgres.
fn postgres_arg(param: sql::Param) -> Arg {
    match param {
        sql::Param::Uuid(id) => Box::new(id),
        sql::Param::Text(text) => Box::new(text),
        sql::Param::Time(at) => Box::new(at),
    }
}

fn chunk_from_row(row: &Row) -> StoreResult<VectorChunk> {
    let metadata: String = row.try_get(5).map_err(backend)?;
    let bytes: Vec<u8> = row.try_get(6).map_err(backend)?;
    Ok(VectorChunk {
        id: row.try_get(0).map_err(backend)?,
        content_hash: row.try_get(1).map_err(backend)?,
        source: row.try_get(2).map_err(backend)?,
        chat_id: row.try_get(3).map_err(backend)?,
        page_content: row.try_get(4).map_err(backend)?,
        metadata: serde_json::from_str(&metadata)
            .map_err(|e| StoreError::Backend(format!("a stored chunk's metadata: {e}")))?,
        embedding: embedding_from_bytes(&bytes)
            .ok_or_else(|| StoreError::Backend("an embedding that is not whole f32s".into()))?,
    })
}
