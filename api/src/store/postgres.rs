//! The PostgreSQL store (deadpool-postgres + tokio-postgres): the backend for
//! several replicas sharing one database.
//!
//! An optional schema (`DATABASE_SCHEMA`) is created at connect and set as the
//! `search_path` of every pooled connection, so installations and test runs can
//! share a database. Migrations run under an advisory lock, so replicas starting
//! together apply each one exactly once. Statements are prepared once per
//! connection (`prepare_cached`).

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
    MESSAGE_COLUMNS, RESULT_COLUMNS, TOOL_COLUMNS, TRIGGER_COLUMNS, VARIABLE_COLUMNS,
};
use super::{
    ClaimPlanner, Listing, RunWrites, RunWritten, Store, StoreError, StoreResult, conflict_as,
};
use crate::domain::ApiConfig;
use crate::domain::credential::SealedCredential;
use crate::domain::time::{self, Timestamp};
use crate::domain::trigger::{self as trig, LEASE_EXPIRED, failure_mail};
use crate::domain::vector::{ChunkKey, UpsertCounts, embedding_bytes, embedding_from_bytes};
use crate::domain::{AgentflowRef, Execution, ExecutionFilter, ExecutionState, ListedExecution};
use crate::domain::{
    ApiKey, ChatMessageRecord, Chatflow, ChatflowPatch, ChatflowType, Delivery, Firing, Lead,
    MessageRole, NewApiKey, NewChatflow, NewMail, NewTool, NewTriggerResult, NewVariable,
    OutboxMail, Page, Permission, ResultStatus, Tool, ToolPatch, Trigger, TriggerResult,
    TriggerType, UpsertRecord, Variable, VariablePatch, VariableType, Workspace,
};
use crate::domain::{VectorChunk, VectorWrite, execution, tool, variable};

/// Connections kept per replica.
const POOL_SIZE: usize = 16;

mod pgvector;

#[derive(Clone)]

pub struct PostgresStore {
    pool: Pool,
    /// The statements that use pgvector, once [`Store::enable_pgvector`] found it.
    pgvector: std::sync::OnceLock<pgvector::PgvectorSql>,
}

type PgResult<T> = Result<T, tokio_postgres::Error>;

impl PostgresStore {
    /// Connects, creates the schema when one is named, and applies migrations.
    pub async fn connect(url: &str, schema: Option<&str>) -> StoreResult<Self> {
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
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Backend(format!("cannot build the connection pool: {e}")))?;
        let store = PostgresStore {
            pool,
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
    /// run fails them all: [`Store::write_runs`] then writes each on its own).
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
        if runs
            .iter()
            .all(|run| run.start_execution.is_none() && run.update_execution.is_none())
        {
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
            ],
        )
        .await
}

const TRIGGER_COLUMNS_T: &str = "t.id, t.workspace_id, t.name, t.chatflow_id, t.node_id, t.type, \
     t.cron_expression, t.timezone, t.enabled, t.webhook_platform, t.webhook_secret, \
     t.webhook_bot_token, t.trigger_message, t.execution_count, t.max_executions, t.timeout_secs, \
     t.last_executed, t.next_execution, t.notification_email, t.created_at, t.updated_at";

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
    if keep != u32::MAX {
        let prune = client
            .prepare_cached(
                "DELETE FROM trigger_results WHERE trigger_id = $1 AND seq <= (
                   SELECT seq FROM trigger_results WHERE trigger_id = $1
                   ORDER BY seq DESC LIMIT 1 OFFSET $2)",
            )
            .await?;
        client
            .execute(&prune, &[&stored.trigger_id, &i64::from(keep)])
            .await?;
    }
    Ok(stored)
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

async fn insert_firing(
    client: &impl GenericClient,
    firing: &Firing,
    owner: Uuid,
    lease_until: Timestamp,
    input: &str,
    chat_id: &str,
) -> PgResult<()> {
    let stmt = client
        .prepare_cached(
            "INSERT INTO trigger_firings (id, trigger_id, scheduled_at, is_cron, owner, lease_until,
               input, chat_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .await?;
    client
        .execute(
            &stmt,
            &[
                &firing.id,
                &firing.trigger.id,
                &firing.scheduled_at,
                &firing.is_cron,
                &owner,
                &lease_until,
                &input,
                &chat_id,
            ],
        )
        .await?;
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
    })
}

fn lead_from_row(row: &Row) -> PgResult<Lead> {
    Ok(Lead {
        id: row.try_get(0)?,
        chatflow_id: row.try_get(1)?,
        chat_id: row.try_get(2)?,
        email: row.try_get(3)?,
        created_date: row.try_get(4)?,
    })
}

#[async_trait]
impl Store for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn enable_pgvector(&self, wanted: bool) -> StoreResult<super::Pgvector> {
        if !wanted {
            return Ok(super::Pgvector::Off);
        }
        if self.pgvector.get().is_some() {
            return Err(StoreError::Backend("pgvector is already set up".into()));
        }
        let mut client = self.client().await?;
        match pgvector::enable(&mut client).await? {
            Ok((sql, found)) => {
                // Only this call sets it (checked above; called once at start).
                let _ = self.pgvector.set(sql);
                Ok(found)
            }
            Err(not_used) => Ok(not_used),
        }
    }

    fn pgvector_in_use(&self) -> bool {
        self.pgvector.get().is_some()
    }

    async fn nearest_vector_chunks(
        &self,
        chatflow: Uuid,
        node_id: &str,
        vector: &[f32],
        k: usize,
        chat_id: &str,
    ) -> StoreResult<Vec<(VectorChunk, f32)>> {
        let Some(sql) = self.pgvector.get() else {
            return Err(StoreError::Backend("pgvector is not in use".into()));
        };
        let limit = i64::try_from(k).unwrap_or(i64::MAX);
        let client = self.client().await?;
        let stmt = client.prepare_cached(&sql.nearest).await.map_err(backend)?;
        let rows = client
            .query(&stmt, &[&chatflow, &node_id, &vector, &chat_id, &limit])
            .await
            .map_err(backend)?;
        rows.iter()
            .map(|row| {
                let distance: f64 = row.try_get(7).map_err(backend)?;
                Ok((chunk_from_row(row)?, (1.0 - distance) as f32))
            })
            .collect()
    }

    async fn ensure_workspace(&self, name: &str) -> StoreResult<Workspace> {
        // The no-op update makes RETURNING yield the existing row on conflict.
        self.query_opt(
            "INSERT INTO workspaces (id, name, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
             RETURNING id, name",
            &[&Uuid::new_v4(), &name, &time::now()],
            workspace_from_row,
        )
        .await?
        .ok_or_else(|| StoreError::Backend("workspace upsert returned no row".into()))
    }

    async fn find_workspace(&self, name: &str) -> StoreResult<Option<Workspace>> {
        self.query_opt(
            "SELECT id, name FROM workspaces WHERE name = $1",
            &[&name],
            workspace_from_row,
        )
        .await
    }

    async fn create_api_key(&self, key: NewApiKey) -> StoreResult<ApiKey> {
        let id = Uuid::new_v4();
        self.execute(
            "INSERT INTO api_keys (id, workspace_id, name, permissions, key_hash, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &id,
                &key.workspace_id,
                &key.name,
                &Permission::join(&key.permissions),
                &key.key_hash,
                &time::now(),
            ],
        )
        .await?;
        self.query_opt(
            &format!("{API_KEY_SELECT} WHERE k.id = $1"),
            &[&id],
            api_key_from_row,
        )
        .await?
        .ok_or_else(|| StoreError::Backend("inserted API key not found".into()))
    }

    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
        self.query_opt(
            &format!("{API_KEY_SELECT} WHERE k.key_hash = $1"),
            &[&hash],
            api_key_from_row,
        )
        .await
    }

    async fn list_api_keys(&self, workspace: Option<Uuid>) -> StoreResult<Vec<ApiKey>> {
        self.query_all(
            &format!(
                "{API_KEY_SELECT} WHERE $1::uuid IS NULL OR k.workspace_id = $1
                 ORDER BY k.created_at, k.id"
            ),
            &[&workspace],
            api_key_from_row,
        )
        .await
    }

    async fn delete_api_key(&self, workspace: Option<Uuid>, id: Uuid) -> StoreResult<bool> {
        self.execute(
            "DELETE FROM api_keys WHERE id = $1 AND ($2::uuid IS NULL OR workspace_id = $2)",
            &[&id, &workspace],
        )
        .await
        .map(|n| n > 0)
    }

    async fn count_api_keys(&self) -> StoreResult<u64> {
        let client = self.client().await?;
        let n: i64 = client
            .query_one("SELECT COUNT(*) FROM api_keys", &[])
            .await
            .and_then(|r| r.try_get(0))
            .map_err(backend)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn touch_api_key(&self, id: Uuid) -> StoreResult<()> {
        self.execute(
            "UPDATE api_keys SET last_used_at = $2 WHERE id = $1",
            &[&id, &time::now()],
        )
        .await
        .map(|_| ())
    }

    async fn create_chatflow(&self, flow: NewChatflow) -> StoreResult<Chatflow> {
        let flow = flow.into_chatflow(Uuid::new_v4(), time::now());
        let client = self.client().await?;
        write_chatflow(
            &client,
            &format!(
                "INSERT INTO chatflows ({CHATFLOW_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
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
        page: Page,
    ) -> StoreResult<Arc<Listing<Chatflow>>> {
        self.list_page(
            "SELECT COUNT(*) FROM chatflows WHERE workspace_id = $1",
            &format!(
                "SELECT {CHATFLOW_COLUMNS} FROM chatflows WHERE workspace_id = $1
                 ORDER BY updated_at DESC, id LIMIT $2 OFFSET $3"
            ),
            &[&workspace],
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
               created_at = $12, updated_at = $13
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

    async fn create_variable(&self, workspace: Uuid, var: NewVariable) -> StoreResult<Variable> {
        let conflict = variable::name_taken(&var.name);
        let now = time::now();
        let created = Variable {
            id: Uuid::new_v4(),
            name: var.name,
            value: var.value,
            var_type: var.var_type,
            created_date: now,
            updated_date: now,
        };
        self.execute(
            "INSERT INTO variables (id, workspace_id, name, value, type, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $6)",
            &[
                &created.id,
                &workspace,
                &created.name,
                &created.value,
                &created.var_type.as_str(),
                &now,
            ],
        )
        .await
        .map_err(conflict_as(conflict))?;
        Ok(created)
    }

    async fn get_variable(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Variable>> {
        self.query_opt(
            &format!(
                "SELECT {VARIABLE_COLUMNS} FROM variables WHERE id = $1 AND workspace_id = $2"
            ),
            &[&id, &workspace],
            variable_from_row,
        )
        .await
    }

    async fn list_variables(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Variable>> {
        self.list_page(
            "SELECT COUNT(*) FROM variables WHERE workspace_id = $1",
            &format!(
                "SELECT {VARIABLE_COLUMNS} FROM variables WHERE workspace_id = $1
                 ORDER BY name, id LIMIT $2 OFFSET $3"
            ),
            &[&workspace],
            page,
            variable_from_row,
        )
        .await
    }

    async fn update_variable(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: VariablePatch,
    ) -> StoreResult<Option<Variable>> {
        let conflict = variable::name_taken(patch.name.as_deref().unwrap_or_default());
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let row = tx
            .query_opt(
                &format!(
                    "SELECT {VARIABLE_COLUMNS} FROM variables
                     WHERE id = $1 AND workspace_id = $2 FOR UPDATE"
                ),
                &[&id, &workspace],
            )
            .await
            .map_err(backend)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let mut var = variable_from_row(&row).map_err(backend)?;
        patch.apply(&mut var, time::now());
        tx.execute(
            "UPDATE variables SET name = $3, value = $4, type = $5, updated_at = $6
             WHERE id = $1 AND workspace_id = $2",
            &[
                &id,
                &workspace,
                &var.name,
                &var.value,
                &var.var_type.as_str(),
                &var.updated_date,
            ],
        )
        .await
        .map_err(backend)
        .map_err(conflict_as(conflict))?;
        tx.commit().await.map_err(backend)?;
        Ok(Some(var))
    }

    async fn delete_variable(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.execute(
            "DELETE FROM variables WHERE id = $1 AND workspace_id = $2",
            &[&id, &workspace],
        )
        .await
        .map(|n| n > 0)
    }

    async fn create_credential(&self, c: &SealedCredential) -> StoreResult<()> {
        self.execute(
            "INSERT INTO credentials (id, workspace_id, name, credential_name, key_id,
                                      sealed_data, created_at, updated_at, allowed_hosts)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &c.id,
                &c.workspace_id,
                &c.name,
                &c.credential_name,
                &c.key_id,
                &c.data,
                &c.created_date,
                &c.updated_date,
                &c.hosts_column(),
            ],
        )
        .await
        .map(drop)
    }

    async fn get_credential(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<SealedCredential>> {
        self.query_opt(
            &format!(
                "SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE id = $1 AND workspace_id = $2"
            ),
            &[&id, &workspace],
            credential_from_row,
        )
        .await
    }

    async fn get_credentials(
        &self,
        workspace: Uuid,
        ids: &[Uuid],
    ) -> StoreResult<Vec<SealedCredential>> {
        self.query_all(
            &format!(
                "SELECT {CREDENTIAL_COLUMNS} FROM credentials
                 WHERE workspace_id = $1 AND id = ANY($2)"
            ),
            &[&workspace, &ids],
            credential_from_row,
        )
        .await
    }

    async fn list_credentials(
        &self,
        workspace: Uuid,
        credential_name: Option<&str>,
        page: Page,
    ) -> StoreResult<Listing<SealedCredential>> {
        let filter = "workspace_id = $1 AND ($2::TEXT IS NULL OR credential_name = $2)";
        self.list_page(
            &format!("SELECT COUNT(*) FROM credentials WHERE {filter}"),
            &format!(
                "SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE {filter}
                 ORDER BY name, id LIMIT $3 OFFSET $4"
            ),
            &[&workspace, &credential_name],
            page,
            credential_from_row,
        )
        .await
    }

    async fn update_credential(&self, c: &SealedCredential, read_data: &str) -> StoreResult<bool> {
        self.execute(
            "UPDATE credentials SET name = $3, credential_name = $4, key_id = $5,
                    sealed_data = $6, updated_at = $7, allowed_hosts = $9
             WHERE id = $1 AND workspace_id = $2 AND sealed_data = $8",
            &[
                &c.id,
                &c.workspace_id,
                &c.name,
                &c.credential_name,
                &c.key_id,
                &c.data,
                &c.updated_date,
                &read_data,
                &c.hosts_column(),
            ],
        )
        .await
        .map(|n| n > 0)
    }

    async fn delete_credential(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.execute(
            "DELETE FROM credentials WHERE id = $1 AND workspace_id = $2",
            &[&id, &workspace],
        )
        .await
        .map(|n| n > 0)
    }

    async fn credentials_sealed_by_other_keys(
        &self,
        key_id: &str,
    ) -> StoreResult<Vec<SealedCredential>> {
        self.query_all(
            &format!("SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE key_id <> $1"),
            &[&key_id],
            credential_from_row,
        )
        .await
    }

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

    async fn find_chatflow(&self, id: Uuid) -> StoreResult<Option<Arc<Chatflow>>> {
        self.query_opt(
            &format!("SELECT {CHATFLOW_COLUMNS} FROM chatflows WHERE id = $1"),
            &[&id],
            |row| chatflow_from_row(row).map(Arc::new),
        )
        .await
    }

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

    async fn rate_limit_hit(
        &self,
        bucket: &str,
        window_start_ms: i64,
        window_ms: i64,
    ) -> StoreResult<u64> {
        let expires = time::from_millis(window_start_ms.saturating_add(window_ms));
        let hits: i64 = self
            .query_opt(
                "INSERT INTO rate_limit_windows (bucket, window_start, hits, expires_at)
                 VALUES ($1, $2, 1, $3)
                 ON CONFLICT (bucket, window_start)
                 DO UPDATE SET hits = rate_limit_windows.hits + 1
                 RETURNING hits",
                &[&bucket, &window_start_ms, &expires],
                |row| row.try_get(0),
            )
            .await?
            .unwrap_or(1);
        if hits == 1 {
            // A new window began: sweep windows that ended (cheap, indexed).
            self.execute(
                "DELETE FROM rate_limit_windows WHERE expires_at < now()",
                &[],
            )
            .await?;
        }
        Ok(u64::try_from(hits).unwrap_or(0))
    }

    async fn create_trigger(
        &self,
        trigger: Trigger,
        max_in_workspace: u64,
    ) -> StoreResult<Trigger> {
        let conflict = trig::address_taken(&trigger.node_id);
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        // Replicas creating in one workspace at once take turns here, so the
        // count and the insert are one step.
        tx.execute(
            "SELECT pg_advisory_xact_lock(730197, hashtext($1::TEXT))",
            &[&trigger.workspace_id.to_string()],
        )
        .await
        .map_err(backend)?;
        let count: i64 = tx
            .query_one(
                "SELECT COUNT(*) FROM triggers WHERE workspace_id = $1",
                &[&trigger.workspace_id],
            )
            .await
            .map_err(backend)?
            .try_get(0)
            .map_err(backend)?;
        if u64::try_from(count).unwrap_or(0) >= max_in_workspace {
            return Err(StoreError::Conflict(trig::quota_reached(max_in_workspace)));
        }
        write_trigger(
            &tx,
            &format!(
                "INSERT INTO triggers ({TRIGGER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                   $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)"
            ),
            &trigger,
        )
        .await
        .map_err(backend)
        .map_err(conflict_as(conflict))?;
        tx.commit().await.map_err(backend)?;
        Ok(trigger)
    }

    async fn get_trigger(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Trigger>> {
        self.query_opt(
            &format!("SELECT {TRIGGER_COLUMNS} FROM triggers WHERE id = $1 AND workspace_id = $2"),
            &[&id, &workspace],
            trigger_from_row,
        )
        .await
    }

    async fn list_triggers(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Trigger>> {
        self.list_page(
            "SELECT COUNT(*) FROM triggers WHERE workspace_id = $1",
            &format!(
                "SELECT {TRIGGER_COLUMNS} FROM triggers WHERE workspace_id = $1
                 ORDER BY created_at DESC, id LIMIT $2 OFFSET $3"
            ),
            &[&workspace],
            page,
            trigger_from_row,
        )
        .await
    }

    async fn update_trigger(&self, t: &Trigger) -> StoreResult<bool> {
        let conflict = trig::address_taken(&t.node_id);
        self.execute(
            "UPDATE triggers SET name = $3, chatflow_id = $4, node_id = $5, cron_expression = $6,
               timezone = $7, enabled = $8, webhook_platform = $9, webhook_secret = $10,
               webhook_bot_token = $11, trigger_message = $12, max_executions = $13,
               timeout_secs = $14, next_execution = $15, notification_email = $16,
               updated_at = $17
             WHERE id = $1 AND workspace_id = $2",
            &[
                &t.id,
                &t.workspace_id,
                &t.name,
                &t.chatflow_id,
                &t.node_id,
                &t.cron_expression,
                &t.timezone,
                &t.enabled,
                &t.webhook_platform,
                &t.webhook_secret,
                &t.webhook_bot_token,
                &t.trigger_message,
                &t.max_executions,
                &t.timeout,
                &t.next_execution,
                &t.notification_email,
                &t.updated_date,
            ],
        )
        .await
        .map(|n| n > 0)
        .map_err(conflict_as(conflict))
    }

    async fn delete_trigger(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.execute(
            "DELETE FROM triggers WHERE id = $1 AND workspace_id = $2",
            &[&id, &workspace],
        )
        .await
        .map(|n| n > 0)
    }

    async fn find_webhook_triggers(&self, address: &str) -> StoreResult<Vec<Trigger>> {
        if let Ok(id) = Uuid::parse_str(address)
            && let Some(found) = self
                .query_opt(
                    &format!(
                        "SELECT {TRIGGER_COLUMNS} FROM triggers WHERE id = $1 AND type = 'webhook'"
                    ),
                    &[&id],
                    trigger_from_row,
                )
                .await?
        {
            return Ok(vec![found]);
        }
        self.query_all(
            &format!(
                "SELECT {TRIGGER_COLUMNS} FROM triggers WHERE node_id = $1 AND type = 'webhook'
                 ORDER BY created_at, id LIMIT 2"
            ),
            &[&address],
            trigger_from_row,
        )
        .await
    }

    async fn triggers_with_secrets_not_sealed_by(
        &self,
        sealed_prefix: &str,
    ) -> StoreResult<Vec<Trigger>> {
        self.query_all(
            &format!(
                "SELECT {TRIGGER_COLUMNS} FROM triggers
                 WHERE NOT starts_with(webhook_secret, $1)
                    OR NOT starts_with(webhook_bot_token, $1)"
            ),
            &[&sealed_prefix],
            trigger_from_row,
        )
        .await
    }

    async fn replace_trigger_secrets(&self, old: &Trigger, new: &Trigger) -> StoreResult<bool> {
        self.execute(
            "UPDATE triggers SET webhook_secret = $2, webhook_bot_token = $3
             WHERE id = $1 AND webhook_secret IS NOT DISTINCT FROM $4
               AND webhook_bot_token IS NOT DISTINCT FROM $5",
            &[
                &old.id,
                &new.webhook_secret,
                &new.webhook_bot_token,
                &old.webhook_secret,
                &old.webhook_bot_token,
            ],
        )
        .await
        .map(|n| n > 0)
    }

    async fn next_cron_due(&self) -> StoreResult<Option<Timestamp>> {
        self.query_opt(
            "SELECT MIN(next_execution) FROM triggers WHERE type = 'cron' AND enabled",
            &[],
            |r| r.try_get::<_, Option<Timestamp>>(0),
        )
        .await
        .map(Option::flatten)
    }

    async fn claim_due_triggers(
        &self,
        now: Timestamp,
        owner: Uuid,
        lease_until: Timestamp,
        limit: u32,
        plan: ClaimPlanner,
    ) -> StoreResult<Vec<Firing>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        // Rows another replica is claiming are skipped, not waited for: each due
        // trigger is claimed by exactly one replica.
        let select = tx
            .prepare_cached(&format!(
                "SELECT {TRIGGER_COLUMNS} FROM triggers
                 WHERE type = 'cron' AND enabled AND next_execution <= $1
                 ORDER BY next_execution LIMIT $2 FOR UPDATE SKIP LOCKED"
            ))
            .await
            .map_err(backend)?;
        let due = tx
            .query(&select, &[&now, &i64::from(limit)])
            .await
            .map_err(backend)?
            .iter()
            .map(trigger_from_row)
            .collect::<PgResult<Vec<_>>>()
            .map_err(backend)?;
        if due.is_empty() {
            return Ok(Vec::new());
        }
        // One statement per kind of write for the whole batch (arrays unnested),
        // not one round trip per trigger.
        let n = due.len();
        let (mut ids, mut counts, mut lasts, mut enabled, mut nexts) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let (mut firing_ids, mut firing_triggers, mut firing_times, mut inputs, mut chats) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let mut missed = Vec::new();
        let mut firings = Vec::with_capacity(n);
        for mut trigger in due {
            let decision = plan(&trigger, now);
            if decision.missed > 0 {
                missed.push(trig::missed_result(&trigger, now, decision.missed));
            }
            trigger.advance(&decision, now);
            ids.push(trigger.id);
            counts.push(trigger.execution_count);
            lasts.push(trigger.last_executed);
            enabled.push(trigger.enabled);
            nexts.push(trigger.next_execution);
            if let Some(at) = decision.run_at {
                let firing = Firing {
                    id: Uuid::new_v4(),
                    scheduled_at: at,
                    is_cron: true,
                    trigger,
                };
                firing_ids.push(firing.id);
                firing_triggers.push(firing.trigger.id);
                firing_times.push(at);
                inputs.push(firing.trigger.cron_input());
                chats.push(firing.trigger.chat_id_at(at));
                firings.push(firing);
            }
        }
        for result in missed {
            insert_result(&tx, result, u32::MAX)
                .await
                .map_err(backend)?;
        }
        if !firings.is_empty() {
            let insert = tx
                .prepare_cached(
                    "INSERT INTO trigger_firings (id, trigger_id, scheduled_at, is_cron, owner,
                       lease_until, input, chat_id)
                     SELECT u.id, u.trigger_id, u.scheduled_at, TRUE, $4, $5, u.input, u.chat_id
                     FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $6::text[], $7::text[])
                       AS u(id, trigger_id, scheduled_at, input, chat_id)",
                )
                .await
                .map_err(backend)?;
            tx.execute(
                &insert,
                &[
                    &firing_ids,
                    &firing_triggers,
                    &firing_times,
                    &owner,
                    &lease_until,
                    &inputs,
                    &chats,
                ],
            )
            .await
            .map_err(backend)?;
        }
        let update = tx
            .prepare_cached(
                "UPDATE triggers t SET execution_count = u.execution_count,
                   last_executed = u.last_executed, enabled = u.enabled,
                   next_execution = u.next_execution
                 FROM unnest($1::uuid[], $2::bigint[], $3::timestamptz[], $4::bool[],
                             $5::timestamptz[])
                   AS u(id, execution_count, last_executed, enabled, next_execution)
                 WHERE t.id = u.id",
            )
            .await
            .map_err(backend)?;
        tx.execute(&update, &[&ids, &counts, &lasts, &enabled, &nexts])
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(firings)
    }

    async fn claim_webhook_firing(
        &self,
        trigger: Uuid,
        now: Timestamp,
        owner: Uuid,
        lease_until: Timestamp,
        input: String,
        chat_id: String,
    ) -> StoreResult<Option<Firing>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let claim = tx
            .prepare_cached(&format!(
                "UPDATE triggers SET execution_count = execution_count + 1, last_executed = $2,
                   enabled = CASE WHEN max_executions IS NOT NULL
                                   AND execution_count + 1 >= max_executions
                             THEN FALSE ELSE enabled END
                 WHERE id = $1 AND enabled
                   AND (max_executions IS NULL OR execution_count < max_executions)
                 RETURNING {TRIGGER_COLUMNS}"
            ))
            .await
            .map_err(backend)?;
        let Some(row) = tx
            .query_opt(&claim, &[&trigger, &now])
            .await
            .map_err(backend)?
        else {
            return Ok(None);
        };
        let firing = Firing {
            id: Uuid::new_v4(),
            trigger: trigger_from_row(&row).map_err(backend)?,
            scheduled_at: now,
            is_cron: false,
        };
        insert_firing(&tx, &firing, owner, lease_until, &input, &chat_id)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(Some(firing))
    }

    async fn firing_exists(&self, firing: Uuid) -> StoreResult<bool> {
        self.query_opt(
            "SELECT 1 FROM trigger_firings WHERE id = $1",
            &[&firing],
            |_| Ok(()),
        )
        .await
        .map(|found| found.is_some())
    }

    async fn renew_leases(
        &self,
        owner: Uuid,
        firings: &[Uuid],
        lease_until: Timestamp,
    ) -> StoreResult<()> {
        if firings.is_empty() {
            return Ok(());
        }
        self.execute(
            "UPDATE trigger_firings SET lease_until = $1 WHERE owner = $2 AND id = ANY($3)",
            &[&lease_until, &owner, &firings],
        )
        .await
        .map(drop)
    }

    async fn finish_firing(
        &self,
        firing: Uuid,
        result: NewTriggerResult,
        mail: Option<NewMail>,
        keep: u32,
    ) -> StoreResult<Option<TriggerResult>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let removed = tx
            .execute("DELETE FROM trigger_firings WHERE id = $1", &[&firing])
            .await
            .map_err(backend)?;
        if removed == 0 {
            // Deleted with its trigger, or expired and recorded by another replica.
            return Ok(None);
        }
        let trigger = result.trigger_id;
        let at = result.executed_at;
        let stored = insert_result(&tx, result, keep).await.map_err(backend)?;
        if let Some(mail) = mail {
            insert_mail(&tx, trigger, &mail, at)
                .await
                .map_err(backend)?;
        }
        tx.commit().await.map_err(backend)?;
        Ok(Some(stored))
    }

    async fn expire_firings(&self, now: Timestamp, keep: u32) -> StoreResult<u64> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let rows = tx
            .query(
                &format!(
                    "DELETE FROM trigger_firings f USING triggers t, chatflows c
                     WHERE t.id = f.trigger_id AND c.id = t.chatflow_id AND f.lease_until < $1
                     RETURNING f.scheduled_at, f.is_cron, f.input, f.chat_id, c.name, {TRIGGER_COLUMNS_T}"
                ),
                &[&now],
            )
            .await
            .map_err(backend)?;
        let count = rows.len() as u64;
        for row in rows {
            let expired = (|| -> PgResult<_> {
                Ok((
                    row.try_get::<_, Timestamp>(0)?,
                    row.try_get::<_, bool>(1)?,
                    row.try_get::<_, String>(2)?,
                    row.try_get::<_, String>(3)?,
                    row.try_get::<_, String>(4)?,
                    trigger_at(&row, 5)?,
                ))
            })()
            .map_err(backend)?;
            let (scheduled, is_cron, input, chat_id, flow_name, trigger) = expired;
            let mail = failure_mail(&trigger, &flow_name, now, &input, LEASE_EXPIRED);
            let result = trig::failed_result(
                &trigger,
                now,
                is_cron.then_some(scheduled),
                input,
                chat_id,
                LEASE_EXPIRED.to_owned(),
            );
            insert_result(&tx, result, keep).await.map_err(backend)?;
            if let Some(mail) = mail {
                insert_mail(&tx, trigger.id, &mail, now)
                    .await
                    .map_err(backend)?;
            }
        }
        tx.commit().await.map_err(backend)?;
        Ok(count)
    }

    async fn list_trigger_results(
        &self,
        trigger: Uuid,
        limit: u32,
    ) -> StoreResult<Vec<TriggerResult>> {
        self.query_all(
            &format!(
                "SELECT {RESULT_COLUMNS} FROM trigger_results WHERE trigger_id = $1
                 ORDER BY seq DESC LIMIT $2"
            ),
            &[&trigger, &i64::from(limit)],
            result_from_row,
        )
        .await
    }

    async fn recent_trigger_results(
        &self,
        triggers: &[Uuid],
        per_trigger: u32,
    ) -> StoreResult<Vec<TriggerResult>> {
        if triggers.is_empty() {
            return Ok(Vec::new());
        }
        self.query_all(
            &format!(
                "SELECT {RESULT_COLUMNS} FROM (
                   SELECT *, ROW_NUMBER() OVER (PARTITION BY trigger_id ORDER BY seq DESC) AS n
                   FROM trigger_results WHERE trigger_id = ANY($1)
                 ) r WHERE n <= $2 ORDER BY trigger_id, seq DESC"
            ),
            &[&triggers, &i64::from(per_trigger)],
            result_from_row,
        )
        .await
    }

    async fn prune_trigger_history(
        &self,
        before: Timestamp,
        deliveries_before: Timestamp,
    ) -> StoreResult<u64> {
        let results = self
            .execute(
                "DELETE FROM trigger_results WHERE executed_at < $1",
                &[&before],
            )
            .await?;
        let deliveries = self
            .execute(
                "DELETE FROM webhook_deliveries WHERE created_at < $1",
                &[&deliveries_before],
            )
            .await?;
        let mails = self
            .execute(
                "DELETE FROM mail_outbox WHERE sent_at IS NOT NULL AND sent_at < $1",
                &[&deliveries_before],
            )
            .await?;
        Ok(results + deliveries + mails)
    }

    async fn begin_delivery(
        &self,
        trigger: Uuid,
        delivery: &str,
        now: Timestamp,
    ) -> StoreResult<Delivery> {
        let inserted = self
            .execute(
                "INSERT INTO webhook_deliveries (trigger_id, delivery_id, created_at)
                 VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                &[&trigger, &delivery, &now],
            )
            .await?;
        if inserted == 1 {
            return Ok(Delivery::New);
        }
        let seen = self
            .query_opt(
                "SELECT status, body FROM webhook_deliveries WHERE trigger_id = $1 AND delivery_id = $2",
                &[&trigger, &delivery],
                |r| Ok((r.try_get::<_, Option<i32>>(0)?, r.try_get::<_, Option<String>>(1)?)),
            )
            .await?;
        Ok(match seen {
            Some((Some(status), Some(body))) => Delivery::Answered {
                status: u16::try_from(status).unwrap_or(200),
                body,
            },
            Some(_) => Delivery::InProgress,
            // Pruned between the two statements: a new delivery after all.
            None => Delivery::New,
        })
    }

    async fn finish_delivery(
        &self,
        trigger: Uuid,
        delivery: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()> {
        self.execute(
            "UPDATE webhook_deliveries SET status = $3, body = $4
             WHERE trigger_id = $1 AND delivery_id = $2",
            &[&trigger, &delivery, &i32::from(status), &body],
        )
        .await
        .map(drop)
    }

    async fn claim_mail(
        &self,
        now: Timestamp,
        claim_until: Timestamp,
    ) -> StoreResult<Vec<(OutboxMail, Option<Timestamp>)>> {
        self.query_all(
            "UPDATE mail_outbox m SET next_attempt_at = $2
             WHERE m.id IN (SELECT id FROM mail_outbox WHERE sent_at IS NULL AND next_attempt_at <= $1
                            ORDER BY created_at LIMIT 500 FOR UPDATE SKIP LOCKED)
             RETURNING m.id, m.trigger_id, m.recipient, m.subject, m.body, m.attempts, m.created_at,
               (SELECT MAX(s.sent_at) FROM mail_outbox s WHERE s.trigger_id = m.trigger_id)",
            &[&now, &claim_until],
            |r| {
                Ok((
                    OutboxMail {
                        id: r.try_get(0)?,
                        trigger_id: r.try_get(1)?,
                        recipient: r.try_get(2)?,
                        subject: r.try_get(3)?,
                        body: r.try_get(4)?,
                        attempts: r.try_get(5)?,
                        created_at: r.try_get(6)?,
                    },
                    r.try_get(7)?,
                ))
            },
        )
        .await
    }

    async fn mail_sent(&self, ids: &[Uuid], at: Timestamp) -> StoreResult<()> {
        self.execute(
            "UPDATE mail_outbox SET sent_at = $2 WHERE id = ANY($1)",
            &[&ids, &at],
        )
        .await
        .map(drop)
    }

    async fn mail_retry(&self, ids: &[Uuid], at: Timestamp, failed: bool) -> StoreResult<()> {
        self.execute(
            "UPDATE mail_outbox SET next_attempt_at = $2, attempts = attempts + $3 WHERE id = ANY($1)",
            &[&ids, &at, &i64::from(failed)],
        )
        .await
        .map(drop)
    }

    async fn any_trigger_with_email(&self) -> StoreResult<bool> {
        self.query_opt(
            "SELECT EXISTS (SELECT 1 FROM triggers WHERE notification_email IS NOT NULL)",
            &[],
            |r| r.try_get::<_, bool>(0),
        )
        .await
        .map(|found| found.unwrap_or(false))
    }

    async fn vector_store_version(&self, chatflow: Uuid, node_id: &str) -> StoreResult<i64> {
        self.query_opt(
            "SELECT version FROM vector_stores WHERE chatflow_id = $1 AND node_id = $2",
            &[&chatflow, &node_id],
            |r| r.try_get::<_, i64>(0),
        )
        .await
        .map(Option::unwrap_or_default)
    }

    async fn list_vector_chunks(
        &self,
        chatflow: Uuid,
        node_id: &str,
    ) -> StoreResult<(i64, Vec<VectorChunk>)> {
        let mut client = self.client().await?;
        // REPEATABLE READ: the version and the chunks of one snapshot.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(backend)?;
        let version = tx
            .query_opt(
                "SELECT version FROM vector_stores WHERE chatflow_id = $1 AND node_id = $2",
                &[&chatflow, &node_id],
            )
            .await
            .map_err(backend)?
            .map(|r| r.try_get::<_, i64>(0))
            .transpose()
            .map_err(backend)?
            .unwrap_or_default();
        let rows = tx
            .query(
                "SELECT id, content_hash, source, chat_id, page_content, metadata, embedding
                 FROM vector_chunks WHERE chatflow_id = $1 AND node_id = $2 ORDER BY seq",
                &[&chatflow, &node_id],
            )
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        let chunks = rows
            .iter()
            .map(chunk_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((version, chunks))
    }

    async fn vector_chunk_keys(&self, chatflow: Uuid, node_id: &str) -> StoreResult<Vec<ChunkKey>> {
        self.query_all(
            "SELECT id, content_hash, source, length(embedding) / 4 FROM vector_chunks
             WHERE chatflow_id = $1 AND node_id = $2 ORDER BY seq",
            &[&chatflow, &node_id],
            |row| {
                Ok(ChunkKey {
                    id: row.try_get(0)?,
                    content_hash: row.try_get(1)?,
                    source: row.try_get(2)?,
                    dims: usize::try_from(row.try_get::<_, i32>(3)?).unwrap_or(0),
                })
            },
        )
        .await
    }

    async fn write_vectors(&self, write: VectorWrite) -> StoreResult<UpsertRecord> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        if !write.deleted.is_empty() {
            tx.execute(
                "DELETE FROM vector_chunks
                 WHERE chatflow_id = $1 AND node_id = $2 AND id = ANY($3)",
                &[&write.chatflow_id, &write.node_id, &write.deleted],
            )
            .await
            .map_err(backend)?;
        }
        if !write.added.is_empty() {
            // With pgvector each chunk's vector goes into its column as well.
            let pgvector = self.pgvector.get();
            let insert = tx
                .prepare(pgvector.map_or(
                    "INSERT INTO vector_chunks (id, chatflow_id, node_id, content_hash, source,
                                                chat_id, page_content, metadata, embedding)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                    |sql| &sql.insert,
                ))
                .await
                .map_err(backend)?;
            // Pipelined: the inserts go out together, not one round trip each.
            let mut rows = Vec::with_capacity(write.added.len());
            for c in &write.added {
                rows.push((json_text(&c.metadata)?, embedding_bytes(&c.embedding)));
            }
            type Param<'p> = &'p (dyn tokio_postgres::types::ToSql + Sync);
            let params: Vec<Vec<Param<'_>>> = write
                .added
                .iter()
                .zip(&rows)
                .map(|(c, (metadata, bytes))| {
                    let mut params: Vec<Param<'_>> = vec![
                        &c.id,
                        &write.chatflow_id,
                        &write.node_id,
                        &c.content_hash,
                        &c.source,
                        &c.chat_id,
                        &c.page_content,
                        metadata,
                        bytes,
                    ];
                    if pgvector.is_some() {
                        params.push(&c.embedding);
                    }
                    params
                })
                .collect();
            let inserts = params.iter().map(|p| tx.execute(&insert, p));
            futures_util::future::try_join_all(inserts)
                .await
                .map_err(backend)?;
        }
        tx.execute(
            "INSERT INTO vector_stores (chatflow_id, node_id, version) VALUES ($1, $2, 1)
             ON CONFLICT (chatflow_id, node_id)
             DO UPDATE SET version = vector_stores.version + 1",
            &[&write.chatflow_id, &write.node_id],
        )
        .await
        .map_err(backend)?;
        let record = UpsertRecord {
            id: Uuid::now_v7(),
            chatflow_id: write.chatflow_id,
            node_id: write.node_id,
            counts: write.counts,
            date: time::now(),
        };
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        tx.execute(
            "INSERT INTO upsert_history (id, chatflow_id, node_id, num_added, num_updated,
                                         num_skipped, num_deleted, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &record.id,
                &record.chatflow_id,
                &record.node_id,
                &count(record.counts.num_added),
                &count(record.counts.num_updated),
                &count(record.counts.num_skipped),
                &count(record.counts.num_deleted),
                &record.date,
            ],
        )
        .await
        .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        Ok(record)
    }

    async fn list_upsert_history(
        &self,
        chatflow: Uuid,
        limit: u32,
    ) -> StoreResult<Vec<UpsertRecord>> {
        self.query_all(
            "SELECT id, chatflow_id, node_id, num_added, num_updated, num_skipped,
                    num_deleted, created_at
             FROM upsert_history WHERE chatflow_id = $1
             ORDER BY created_at DESC, id DESC LIMIT $2",
            &[&chatflow, &i64::from(limit)],
            |row| {
                let count = |i| {
                    row.try_get::<_, i64>(i)
                        .map(|n| u64::try_from(n).unwrap_or(0))
                };
                Ok(UpsertRecord {
                    id: row.try_get(0)?,
                    chatflow_id: row.try_get(1)?,
                    node_id: row.try_get(2)?,
                    counts: UpsertCounts {
                        num_added: count(3)?,
                        num_updated: count(4)?,
                        num_skipped: count(5)?,
                        num_deleted: count(6)?,
                    },
                    date: row.try_get(7)?,
                })
            },
        )
        .await
    }

    async fn get_execution(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Execution>> {
        let client = self.client().await?;
        get_execution(&client, Some(workspace), id, false).await
    }

    async fn find_public_execution(&self, id: Uuid) -> StoreResult<Option<Execution>> {
        let client = self.client().await?;
        Ok(get_execution(&client, None, id, false)
            .await?
            .filter(|found| found.is_public))
    }

    async fn latest_execution(
        &self,
        agentflow: Uuid,
        session_id: &str,
    ) -> StoreResult<Option<Execution>> {
        self.query_opt(
            &format!(
                "SELECT {EXECUTION_COLUMNS} FROM executions e
                 WHERE e.agentflow_id = $1 AND e.session_id = $2
                 ORDER BY e.created_at DESC, e.seq DESC LIMIT 1"
            ),
            &[&agentflow, &session_id],
            execution_from_row,
        )
        .await
    }

    async fn list_executions(
        &self,
        workspace: Uuid,
        filter: &ExecutionFilter,
        page: Page,
    ) -> StoreResult<Listing<ListedExecution>> {
        let (conditions, params) =
            sql::execution_conditions(sql::Dialect::Postgres, workspace, filter);
        let args: Vec<Arg> = params.into_iter().map(postgres_arg).collect();
        // The chatflow is joined for counting only when its name is filtered on.
        let name_join = if filter.agentflow_name.is_some() {
            "JOIN chatflows c ON c.id = e.agentflow_id"
        } else {
            ""
        };
        let count_sql = format!("SELECT COUNT(*) FROM executions e {name_join} WHERE {conditions}");
        let n = args.len();
        let page_sql = format!(
            "SELECT {EXECUTION_COLUMNS}, c.name FROM executions e
             JOIN chatflows c ON c.id = e.agentflow_id
             WHERE {conditions}
             ORDER BY e.updated_at DESC, e.seq DESC LIMIT ${} OFFSET ${}",
            n + 1,
            n + 2
        );
        let client = self.client().await?;
        let (count, stmt) = futures_util::future::try_join(
            client.prepare_cached(&count_sql),
            client.prepare_cached(&page_sql),
        )
        .await
        .map_err(backend)?;
        let limit = i64::from(page.limit);
        let offset = i64::try_from(page.offset()).unwrap_or(i64::MAX);
        let filter_args: Vec<&(dyn ToSql + Sync)> =
            args.iter().map(|a| &**a as &(dyn ToSql + Sync)).collect();
        let mut page_args = filter_args.clone();
        page_args.extend([&limit as &(dyn ToSql + Sync), &offset]);
        // Both queries go out together on the one connection (pipelined).
        let (total, rows) = futures_util::future::try_join(
            client.query_one(&count, &filter_args),
            client.query(&stmt, &page_args),
        )
        .await
        .map_err(backend)?;
        let total: i64 = total.try_get(0).map_err(backend)?;
        let items = rows
            .iter()
            .map(|row| {
                let execution = execution_from_row(row)?;
                Ok(ListedExecution {
                    agentflow: AgentflowRef {
                        id: execution.agentflow_id,
                        name: row.try_get(EXECUTION_COLUMN_COUNT)?,
                    },
                    execution,
                })
            })
            .collect::<PgResult<_>>()
            .map_err(backend)?;
        Ok(Listing {
            items,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    async fn set_execution_public(
        &self,
        workspace: Uuid,
        id: Uuid,
        public: bool,
    ) -> StoreResult<Option<Execution>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let Some(mut found) = get_execution(&tx, Some(workspace), id, true).await? else {
            return Ok(None);
        };
        found.is_public = public;
        found.updated_date = time::now();
        write_execution(&tx, &found).await?;
        tx.commit().await.map_err(backend)?;
        Ok(Some(found))
    }

    async fn delete_executions(&self, workspace: Uuid, ids: &[Uuid]) -> StoreResult<u64> {
        self.execute(
            "DELETE FROM executions WHERE workspace_id = $1 AND id = ANY($2)",
            &[&workspace, &ids],
        )
        .await
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
    let now = records[0].created_date;
    // The ordinality keeps `seq` in the order given.
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO chat_messages ({MESSAGE_COLUMNS})
             SELECT m.id, m.chatflow_id, m.chat_id, m.role, m.content, m.source_documents,
                    m.used_tools, $8
             FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[],
                         $6::text[], $7::text[])
                  WITH ORDINALITY AS m(id, chatflow_id, chat_id, role, content,
                                       source_documents, used_tools, ord)
             ORDER BY m.ord"
        ))
        .await
        .map_err(backend)?;
    client
        .execute(
            &stmt,
            &[
                &ids, &chatflows, &chat_ids, &roles, &contents, &sources, &tools, &now,
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
