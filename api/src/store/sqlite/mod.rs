//! The embedded SQLite store (rusqlite, bundled SQLite): the default backend.
//!
//! WAL mode: one writer connection on a thread of its own ([`SqliteStore::call`],
//! the `writer` module) and read-only connections ([`SqliteStore::read`]), a few
//! more than the async runtime has worker threads, so that reads run side by side
//! and never wait for a write. Reads run on tokio's blocking pool, so request
//! threads never block on disk, with one exception: a session's messages, the
//! one store read of every prediction with memory, run in place on a free reader
//! ([`SqliteStore::read_in_place`]). That read is a short index-range walk over
//! pages the readers keep cached; handing it to the blocking pool cost more than
//! the read itself (a profile of the memory flow on one core put 15 % of the CPU
//! in blocking threads parking and waking, and under load the pool grew to dozens
//! of threads queueing for four connections).
//! UUIDs are stored as text and times as epoch milliseconds.

mod chatflows;
mod checkpoint;
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
mod writer;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};

use async_trait::async_trait;
use rusqlite::config::DbConfig;
use rusqlite::types::Value;
use rusqlite::{Connection, ErrorCode, OptionalExtension, Row, params};
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
use crate::domain::ApiConfig;
use crate::domain::callback::{
    AttemptOutcome, CallbackAttempt, CallbackState, CallbackStatus, NewCallback, OutboxCallback,
    error_body,
};
use crate::domain::credential::SealedCredential;
use crate::domain::mcp::{CustomMcpServer, McpAuthType, McpServerConfig, McpServerStatus};
use crate::domain::time::{self, Timestamp, from_millis, to_millis};
use crate::domain::trigger::{self as trig, LEASE_EXPIRED, failure_mail};
use crate::domain::vector::{ChunkKey, UpsertCounts, embedding_bytes, embedding_from_bytes};
use crate::domain::{AgentflowRef, Execution, ExecutionFilter, ListedExecution};
use crate::domain::{
    ApiKey, ChatMessageRecord, ChatType, Chatflow, ChatflowPatch, ChatflowType, Delivery, Feedback,
    FeedbackFilter, Firing, Lead, MessageFilter, MessageRole, NewApiKey, NewChatflow, NewLead,
    NewMail, NewTool, NewTriggerResult, NewVariable, OutboxMail, Page, Permission, Rating,
    ResultStatus, Tool, ToolPatch, Trigger, TriggerResult, TriggerType, UpsertRecord, Variable,
    VariablePatch, VariableType, VectorChunk, VectorWrite, Workspace,
};
use crate::domain::{execution, tool, variable};

/// Read-only connections kept open beside the writer, at least.
const MIN_READERS: usize = 4;

/// Read-only connections: enough that every worker thread of the async runtime
/// (one per core, tokio's default) finds one free for a read in place while the
/// blocking pool holds a couple more.
fn reader_count() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    (cores + 2).max(MIN_READERS)
}

/// Windows kept in memory before expired ones are swept.
const RATE_WINDOWS_SWEEP_AT: usize = 10_000;

/// (window start ms, window length ms, hits)
type RateWindow = (i64, i64, u64);

#[derive(Clone)]
pub struct SqliteStore {
    /// The one write connection, on its thread (which nudges the checkpointer).
    writer: Arc<writer::Writer>,
    readers: Arc<Vec<Mutex<Connection>>>,
    /// Where the next read starts looking for a free reader.
    next_reader: Arc<AtomicUsize>,
    /// Rate-limit counters: one process owns an SQLite store, so they live here,
    /// keyed by bucket, holding (window start, window length, hits).
    rate_windows: Arc<Mutex<HashMap<String, RateWindow>>>,
}

impl SqliteStore {
    /// Opens (creating when absent) the database file and applies migrations.
    pub async fn open(path: &Path) -> StoreResult<Self> {
        let path = path.to_owned();
        let (writer, readers) = tokio::task::spawn_blocking(move || -> StoreResult<_> {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| {
                    StoreError::Backend(format!("cannot create {}: {e}", dir.display()))
                })?;
            }
            let open = || {
                let conn = Connection::open(&path).map_err(|e| {
                    StoreError::Backend(format!("cannot open {}: {e}", path.display()))
                })?;
                conn.execute_batch(
                    "PRAGMA journal_mode = WAL;
                     PRAGMA synchronous = NORMAL;
                     PRAGMA foreign_keys = ON;
                     PRAGMA busy_timeout = 5000;",
                )
                .map_err(backend)?;
                // Plans that never look at bound values: otherwise a cached
                // statement whose plan used one (a `LIMIT ?`) is compiled again
                // every time it is bound, which is every time it runs.
                conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
                    .map_err(backend)?;
                Ok::<_, StoreError>(conn)
            };
            let mut conn = open()?;
            conn.busy_handler(Some(checkpoint::poll_when_busy))
                .map_err(backend)?;
            // The writer's page cache holds the hot index pages of growing tables
            // (SQLite's default is 2 MiB), so appends do not re-read them from disk.
            // Savepoints (every run of a group commit has one) keep their
            // undo pages in memory, not in a temporary file created and
            // removed by every transaction.
            conn.execute_batch("PRAGMA cache_size = -16384; PRAGMA temp_store = MEMORY;")
                .map_err(backend)?;
            migrate(&mut conn, migrations::SQLITE).map_err(backend)?;
            // Checkpoints are the checkpointer's (see its module).
            conn.execute_batch("PRAGMA wal_autocheckpoint = 0;")
                .map_err(backend)?;
            let checkpoints = open()?;
            checkpoints
                .busy_handler(Some(checkpoint::poll_when_busy))
                .map_err(backend)?;
            let checkpointer = checkpoint::Checkpointer::start(checkpoints).map_err(|e| {
                StoreError::Backend(format!("cannot start the checkpoint thread: {e}"))
            })?;
            let writer = writer::Writer::start(conn, checkpointer)
                .map_err(|e| StoreError::Backend(format!("cannot start the writer thread: {e}")))?;
            let readers = (0..reader_count())
                .map(|_| {
                    let reader = open()?;
                    reader
                        .execute_batch("PRAGMA query_only = ON;")
                        .map_err(backend)?;
                    Ok(Mutex::new(reader))
                })
                .collect::<StoreResult<Vec<_>>>()?;
            Ok((writer, readers))
        })
        .await
        .map_err(|e| StoreError::Backend(format!("store task failed: {e}")))??;
        Ok(SqliteStore {
            writer: Arc::new(writer),
            readers: Arc::new(readers),
            next_reader: Arc::default(),
            rate_windows: Arc::default(),
        })
    }

    /// Runs a read-only `f` on a free reader connection (waiting for one when all
    /// are busy) on the blocking pool.
    async fn read<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let readers = Arc::clone(&self.readers);
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        tokio::task::spawn_blocking(move || {
            let mut conn = free_reader(&readers, start).unwrap_or_else(|| {
                readers[start % readers.len()]
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
            });
            f(&mut conn)
        })
        .await
        .map_err(|e| StoreError::Backend(format!("store task failed: {e}")))?
        .map_err(backend)
    }

    /// Runs a short read-only `f` on the calling thread when a reader is free
    /// (no hand-off to the blocking pool: see the module's notes), else as
    /// [`read`](Self::read) does. Only for reads bounded by an index range.
    async fn read_in_place<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        if let Some(mut conn) = free_reader(&self.readers, start) {
            return f(&mut conn).map_err(backend);
        }
        self.read(f).await
    }

    /// Runs `f` with the write connection, on the writer's thread.
    async fn call<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.writer.call(f).await
    }

    /// A batch of writes on the writer ([`each_in_savepoint`]): one outcome
    /// per item, each the batch's error when the batch failed as a whole.
    async fn write_each<I, T>(
        &self,
        items: Vec<I>,
        write: impl FnMut(&Connection, I) -> StoreResult<T> + Send + 'static,
        then: impl FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static,
    ) -> Vec<StoreResult<T>>
    where
        I: Send + 'static,
        T: Send + 'static,
    {
        let count = items.len();
        self.call(move |conn| each_in_savepoint(conn, items, write, then))
            .await
            .unwrap_or_else(|e| (0..count).map(|_| Err(e.clone())).collect())
    }
}

/// The first reader not in use, looking from `start` on (a poisoned one is
/// usable: SQLite rolled back whatever the panic left open).
fn free_reader(
    readers: &[Mutex<Connection>],
    start: usize,
) -> Option<std::sync::MutexGuard<'_, Connection>> {
    let n = readers.len();
    (0..n).find_map(|i| match readers[(start + i) % n].try_lock() {
        Ok(conn) => Some(conn),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    })
}

fn migrate(conn: &mut Connection, set: &[Migration]) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
    )?;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let current: i64 = tx.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        [],
        |r| r.get(0),
    )?;
    for m in set.iter().filter(|m| m.version > current) {
        tx.execute_batch(m.sql)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
            params![m.version, m.name, to_millis(&time::now())],
        )?;
        tracing::info!(
            version = m.version,
            name = m.name,
            "applied sqlite migration"
        );
    }
    tx.commit()
}

fn backend(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::ConstraintViolation) => StoreError::Conflict(e.to_string()),
        _ => StoreError::Backend(e.to_string()),
    }
}

fn uuid_at(row: &Row<'_>, idx: usize) -> rusqlite::Result<Uuid> {
    let text: String = row.get(idx)?;
    Uuid::parse_str(&text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e))
    })
}

const API_KEY_COLUMNS: &str = "k.id, k.workspace_id, w.name, k.name, k.permissions, k.key_hash, \
     k.created_at, k.last_used_at";

fn api_key_from_row(row: &Row<'_>) -> rusqlite::Result<ApiKey> {
    Ok(ApiKey {
        id: uuid_at(row, 0)?,
        workspace_id: uuid_at(row, 1)?,
        workspace_name: row.get(2)?,
        name: row.get(3)?,
        permissions: Permission::split(&row.get::<_, String>(4)?),
        key_hash: row.get(5)?,
        created_date: from_millis(row.get(6)?),
        last_used_date: row.get::<_, Option<i64>>(7)?.map(from_millis),
    })
}

fn chatflow_from_row(row: &Row<'_>) -> rusqlite::Result<Chatflow> {
    Ok(Chatflow {
        id: uuid_at(row, 0)?,
        workspace_id: uuid_at(row, 1)?,
        name: row.get(2)?,
        flow_data: row.get(3)?,
        deployed: row.get(4)?,
        is_public: row.get(5)?,
        apikeyid: row.get(6)?,
        chatbot_config: row.get(7)?,
        api_config: row.get::<_, Option<String>>(8)?.map(ApiConfig::new),
        category: row.get(9)?,
        flow_type: ChatflowType::parse_stored(&row.get::<_, String>(10)?),
        created_date: from_millis(row.get(11)?),
        updated_date: from_millis(row.get(12)?),
        mcp_server: row
            .get::<_, Option<String>>(13)?
            .as_deref()
            .and_then(McpServerConfig::parse),
    })
}

fn write_chatflow(conn: &Connection, sql: &str, f: &Chatflow) -> rusqlite::Result<usize> {
    conn.execute(
        sql,
        params![
            f.id.to_string(),
            f.workspace_id.to_string(),
            f.name,
            f.flow_data,
            f.deployed,
            f.is_public,
            f.apikeyid,
            f.chatbot_config,
            f.api_config.as_ref().map(ApiConfig::text),
            f.category,
            f.flow_type.as_str(),
            to_millis(&f.created_date),
            to_millis(&f.updated_date),
            f.mcp_server.as_ref().map(McpServerConfig::to_text),
        ],
    )
}

fn variable_from_row(row: &Row<'_>) -> rusqlite::Result<Variable> {
    Ok(Variable {
        id: uuid_at(row, 0)?,
        name: row.get(1)?,
        value: row.get(2)?,
        var_type: VariableType::parse_stored(&row.get::<_, String>(3)?),
        created_date: from_millis(row.get(4)?),
        updated_date: from_millis(row.get(5)?),
    })
}

fn tool_from_row(row: &Row<'_>) -> rusqlite::Result<Tool> {
    Ok(Tool {
        id: uuid_at(row, 0)?,
        name: row.get(1)?,
        description: row.get(2)?,
        schema: json_at(row, 3)?,
        code: row.get(4)?,
        requirements: json_at(row, 5)?,
        created_date: from_millis(row.get(6)?),
        updated_date: from_millis(row.get(7)?),
    })
}

/// A text column holding JSON, decoded (a value that does not decode fails the row).
fn json_at<T: serde::de::DeserializeOwned>(row: &Row<'_>, idx: usize) -> rusqlite::Result<T> {
    let text: String = row.get(idx)?;
    serde_json::from_str(&text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// The JSON text stored for `value`.
fn json_text<T: serde::Serialize>(value: &T) -> rusqlite::Result<String> {
    serde_json::to_string(value).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

fn get_tool(conn: &Connection, ws: Uuid, id: Uuid) -> rusqlite::Result<Option<Tool>> {
    conn.query_row(
        &format!("SELECT {TOOL_COLUMNS} FROM tools WHERE id = ?1 AND workspace_id = ?2"),
        params![id.to_string(), ws.to_string()],
        tool_from_row,
    )
    .optional()
}

fn get_chatflow(conn: &Connection, ws: Uuid, id: Uuid) -> rusqlite::Result<Option<Chatflow>> {
    conn.query_row(
        &format!("SELECT {CHATFLOW_COLUMNS} FROM chatflows WHERE id = ?1 AND workspace_id = ?2"),
        params![id.to_string(), ws.to_string()],
        chatflow_from_row,
    )
    .optional()
}

fn credential_from_row(row: &Row<'_>) -> rusqlite::Result<SealedCredential> {
    Ok(SealedCredential {
        id: uuid_at(row, 0)?,
        workspace_id: uuid_at(row, 1)?,
        name: row.get(2)?,
        credential_name: row.get(3)?,
        key_id: row.get(4)?,
        data: row.get(5)?,
        created_date: from_millis(row.get(6)?),
        updated_date: from_millis(row.get(7)?),
        allowed_hosts: SealedCredential::hosts_from_column(&row.get::<_, String>(8)?),
    })
}

fn get_variable(conn: &Connection, ws: Uuid, id: Uuid) -> rusqlite::Result<Option<Variable>> {
    conn.query_row(
        &format!("SELECT {VARIABLE_COLUMNS} FROM variables WHERE id = ?1 AND workspace_id = ?2"),
        params![id.to_string(), ws.to_string()],
        variable_from_row,
    )
    .optional()
}

/// A page of `page_sql` and the total of `count_sql`, both filtered by the
/// parameters `filter` (`?1`…); `page_sql` takes the limit and the offset after them.
fn list_page<T>(
    conn: &Connection,
    count_sql: &str,
    page_sql: &str,
    filter: &[&dyn rusqlite::ToSql],
    page: Page,
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Listing<T>> {
    let total: i64 = conn.query_row(count_sql, filter, |r| r.get(0))?;
    let limit = i64::from(page.limit);
    let offset = i64::try_from(page.offset()).unwrap_or(i64::MAX);
    let mut page_params = filter.to_vec();
    page_params.extend([&limit as &dyn rusqlite::ToSql, &offset]);
    let mut stmt = conn.prepare_cached(page_sql)?;
    let items = stmt
        .query_map(page_params.as_slice(), map)?
        .collect::<rusqlite::Result<Vec<T>>>()?;
    Ok(Listing {
        items,
        total: u64::try_from(total).unwrap_or(0),
    })
}

fn trigger_from_row(row: &Row<'_>) -> rusqlite::Result<Trigger> {
    trigger_at(row, 0)
}

/// A trigger whose columns start at `at` (joins put other columns first).
fn trigger_at(row: &Row<'_>, at: usize) -> rusqlite::Result<Trigger> {
    let kind: String = row.get(at + 5)?;
    Ok(Trigger {
        id: uuid_at(row, at)?,
        workspace_id: uuid_at(row, at + 1)?,
        name: row.get(at + 2)?,
        chatflow_id: uuid_at(row, at + 3)?,
        node_id: row.get(at + 4)?,
        trigger_type: TriggerType::parse(&kind).unwrap_or(TriggerType::Webhook),
        cron_expression: row.get(at + 6)?,
        timezone: row.get(at + 7)?,
        enabled: row.get(at + 8)?,
        webhook_platform: row.get(at + 9)?,
        webhook_secret: row.get(at + 10)?,
        webhook_bot_token: row.get(at + 11)?,
        trigger_message: row.get(at + 12)?,
        execution_count: row.get(at + 13)?,
        max_executions: row.get(at + 14)?,
        timeout: row.get(at + 15)?,
        last_executed: row.get::<_, Option<i64>>(at + 16)?.map(from_millis),
        next_execution: row.get::<_, Option<i64>>(at + 17)?.map(from_millis),
        notification_email: row.get(at + 18)?,
        created_date: from_millis(row.get(at + 19)?),
        updated_date: from_millis(row.get(at + 20)?),
        owned_by_chatflow: row.get(at + 21)?,
        ends_at: row.get::<_, Option<i64>>(at + 22)?.map(from_millis),
        respond_async: row.get::<_, String>(at + 23)? == "async",
        callback_url: row.get(at + 24)?,
        callback_secret: row.get(at + 25)?,
    })
}

fn json_column(row: &Row<'_>, idx: usize) -> rusqlite::Result<Option<serde_json::Value>> {
    Ok(row
        .get::<_, Option<String>>(idx)?
        .and_then(|text| serde_json::from_str(&text).ok()))
}

fn result_from_row(row: &Row<'_>) -> rusqlite::Result<TriggerResult> {
    Ok(TriggerResult {
        id: uuid_at(row, 0)?,
        trigger_id: uuid_at(row, 1)?,
        executed_at: from_millis(row.get(2)?),
        scheduled_at: row.get::<_, Option<i64>>(3)?.map(from_millis),
        input: row.get(4)?,
        output: row.get(5)?,
        source_documents: json_column(row, 6)?,
        used_tools: json_column(row, 7)?,
        chat_id: row.get(8)?,
        status: ResultStatus::parse_stored(&row.get::<_, String>(9)?),
        error: row.get(10)?,
        missed_count: row.get(11)?,
        callback: None,
    })
}

/// Inserts a result and keeps the trigger's newest `keep`.
fn insert_result(
    conn: &Connection,
    result: NewTriggerResult,
    keep: u32,
) -> rusqlite::Result<TriggerResult> {
    let stored = insert_result_row(conn, result)?;
    trim_results(conn, stored.trigger_id, keep)?;
    Ok(stored)
}

/// Stores a result without trimming the trigger's older ones.
fn insert_result_row(
    conn: &Connection,
    result: NewTriggerResult,
) -> rusqlite::Result<TriggerResult> {
    let stored = result.into_result(Uuid::new_v4());
    conn.prepare_cached(&format!(
        "INSERT INTO trigger_results ({RESULT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
    ))?
    .execute(params![
        stored.id.to_string(),
        stored.trigger_id.to_string(),
        to_millis(&stored.executed_at),
        stored.scheduled_at.as_ref().map(to_millis),
        stored.input,
        stored.output,
        stored.source_documents.as_ref().map(|v| v.to_string()),
        stored.used_tools.as_ref().map(|v| v.to_string()),
        stored.chat_id,
        stored.status.as_str(),
        stored.error,
        stored.missed_count,
    ])?;
    Ok(stored)
}

/// Keeps the trigger's newest `keep` results.
fn trim_results(conn: &Connection, trigger: Uuid, keep: u32) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "DELETE FROM trigger_results WHERE trigger_id = ?1 AND seq <= (
           SELECT seq FROM trigger_results WHERE trigger_id = ?1
           ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
    )?
    .execute(params![trigger.to_string(), i64::from(keep)])?;
    Ok(())
}

/// What a batch of firing ends leaves to do once all of them are in: each trigger's
/// results trimmed once (the `then` of `write_each`).
fn trim_once_per_trigger<'a>(
    ends: impl IntoIterator<Item = &'a FiringEnd>,
) -> impl FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static {
    let keep: HashMap<Uuid, u32> = ends
        .into_iter()
        .map(|end| (end.result.trigger_id, end.keep))
        .collect();
    move |tx| {
        keep.into_iter()
            .try_for_each(|(trigger, keep)| trim_results(tx, trigger, keep))
    }
}

fn insert_mail(
    conn: &Connection,
    trigger: Uuid,
    mail: &NewMail,
    now: Timestamp,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO mail_outbox (id, trigger_id, recipient, subject, body, attempts,
           next_attempt_at, created_at) VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?6)",
    )?
    .execute(params![
        Uuid::new_v4().to_string(),
        trigger.to_string(),
        mail.recipient,
        mail.subject,
        mail.body,
        to_millis(&now),
    ])?;
    Ok(())
}

fn insert_firing(
    conn: &Connection,
    firing: &Firing,
    owner: Uuid,
    lease_until: Timestamp,
    input: &str,
    chat_id: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO trigger_firings (id, trigger_id, scheduled_at, is_cron, owner, lease_until,
           input, chat_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        firing.id.to_string(),
        firing.trigger.id.to_string(),
        to_millis(&firing.scheduled_at),
        firing.is_cron,
        owner.to_string(),
        to_millis(&lease_until),
        input,
        chat_id,
    ])?;
    Ok(())
}

/// Writes the callback a firing owes (its body comes when the firing ends).
fn insert_callback(
    conn: &Connection,
    firing: &Firing,
    callback: &NewCallback,
    now: Timestamp,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO callback_outbox (id, trigger_id, firing_id, url, secret, attempts,
           next_attempt_at, created_at) VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?6)",
    )?
    .execute(params![
        callback.id.to_string(),
        firing.trigger.id.to_string(),
        firing.id.to_string(),
        callback.url,
        callback.secret,
        to_millis(&now),
    ])?;
    Ok(())
}

/// Gives the callback `firing` owes (if any) its body and result: from then on
/// it is due.
fn fill_callback(
    conn: &Connection,
    firing: &str,
    result: Uuid,
    body: &str,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE callback_outbox SET body = ?2, result_id = ?3 WHERE firing_id = ?1 AND body IS NULL",
    )?
    .execute(params![firing, body, result.to_string()])?;
    Ok(())
}

/// Writes each of `items` with `write` in one transaction, each in a
/// savepoint of its own: a failing item is rolled back alone (and answers its
/// error), the others commit together; `then` runs in the same transaction
/// after the items (say, to trim what the batch added to). One outcome per
/// item, in order; the whole batch fails only when the transaction itself
/// cannot be had or committed.
fn each_in_savepoint<I, T>(
    conn: &mut Connection,
    items: Vec<I>,
    mut write: impl FnMut(&Connection, I) -> StoreResult<T>,
    then: impl FnOnce(&Connection) -> rusqlite::Result<()>,
) -> rusqlite::Result<Vec<StoreResult<T>>> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    // The savepoint statements are prepared once per connection, not parsed
    // again for every item of every batch.
    let run = |sql: &str| tx.prepare_cached(sql).and_then(|mut s| s.execute([]));
    let mut outcomes = Vec::with_capacity(items.len());
    for item in items {
        run("SAVEPOINT batch_item")?;
        match write(&tx, item) {
            Ok(written) => {
                run("RELEASE batch_item")?;
                outcomes.push(Ok(written));
            }
            Err(e) => {
                // Should SQLite have rolled the whole transaction back, this
                // fails and so does the batch.
                run("ROLLBACK TO batch_item")?;
                run("RELEASE batch_item")?;
                outcomes.push(Err(e));
            }
        }
    }
    then(&tx)?;
    tx.commit()?;
    Ok(outcomes)
}

/// `?, ?, …` for `n` values.
fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

fn write_trigger(conn: &Connection, sql: &str, t: &Trigger) -> rusqlite::Result<usize> {
    conn.execute(
        sql,
        params![
            t.id.to_string(),
            t.workspace_id.to_string(),
            t.name,
            t.chatflow_id.to_string(),
            t.node_id,
            t.trigger_type.as_str(),
            t.cron_expression,
            t.timezone,
            t.enabled,
            t.webhook_platform,
            t.webhook_secret,
            t.webhook_bot_token,
            t.trigger_message,
            t.execution_count,
            t.max_executions,
            t.timeout,
            t.last_executed.as_ref().map(to_millis),
            t.next_execution.as_ref().map(to_millis),
            t.notification_email,
            to_millis(&t.created_date),
            to_millis(&t.updated_date),
            t.owned_by_chatflow,
            t.ends_at.as_ref().map(to_millis),
            t.response_mode(),
            t.callback_url,
            t.callback_secret,
        ],
    )
}

/// `a, b` → `t.a, t.b`.
fn prefixed(table: &str, columns: &str) -> String {
    columns
        .split(',')
        .map(|c| format!("{table}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn find_workspace(conn: &Connection, name: &str) -> rusqlite::Result<Option<Workspace>> {
    conn.query_row(
        "SELECT id, name FROM workspaces WHERE name = ?1",
        [name],
        |r| {
            Ok(Workspace {
                id: uuid_at(r, 0)?,
                name: r.get(1)?,
            })
        },
    )
    .optional()
}

fn message_from_row(row: &Row<'_>) -> rusqlite::Result<ChatMessageRecord> {
    Ok(ChatMessageRecord {
        id: uuid_at(row, 0)?,
        chatflow_id: uuid_at(row, 1)?,
        chat_id: row.get(2)?,
        role: MessageRole::parse_stored(&row.get::<_, String>(3)?),
        content: row.get(4)?,
        source_documents: row.get(5)?,
        used_tools: row.get(6)?,
        created_date: from_millis(row.get(7)?),
        chat_type: ChatType::parse_stored(&row.get::<_, String>(8)?),
        execution_id: row
            .get::<_, Option<String>>(9)?
            .map(|_| uuid_at(row, 9))
            .transpose()?,
        memory_type: row.get(10)?,
        details: row.get(11)?,
    })
}

fn feedback_from_row(row: &Row<'_>) -> rusqlite::Result<Feedback> {
    Ok(Feedback {
        id: uuid_at(row, 0)?,
        chatflow_id: uuid_at(row, 1)?,
        chat_id: row.get(2)?,
        message_id: uuid_at(row, 3)?,
        rating: Rating::parse_stored(&row.get::<_, String>(4)?),
        content: row.get(5)?,
        created_date: from_millis(row.get(6)?),
    })
}

fn lead_from_row(row: &Row<'_>) -> rusqlite::Result<Lead> {
    Ok(Lead {
        id: uuid_at(row, 0)?,
        chatflow_id: uuid_at(row, 1)?,
        chat_id: row.get(2)?,
        name: row.get(3)?,
        email: row.get(4)?,
        phone: row.get(5)?,
        created_date: from_millis(row.get(6)?),
    })
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }
}

fn execution_from_row(row: &Row<'_>) -> rusqlite::Result<Execution> {
    let state: String = row.get(4)?;
    Ok(Execution {
        id: uuid_at(row, 0)?,
        workspace_id: uuid_at(row, 1)?,
        agentflow_id: uuid_at(row, 2)?,
        session_id: row.get(3)?,
        state: state.parse().map_err(|e: String| {
            rusqlite::Error::FromSqlConversionFailure(4, rusqlite::types::Type::Text, e.into())
        })?,
        execution_data: row.get(5)?,
        action: row.get(6)?,
        is_public: row.get(7)?,
        created_date: from_millis(row.get(8)?),
        updated_date: from_millis(row.get(9)?),
        stopped_date: row.get::<_, Option<i64>>(10)?.map(from_millis),
    })
}

/// Applies one run's writes (see [`RunWrites`]) inside the caller's transaction.
fn write_run(conn: &Connection, run: RunWrites, now: Timestamp) -> StoreResult<RunWritten> {
    let mut written = RunWritten::default();
    let mut update = run.update_execution;
    if let Some(execution) = run.start_execution {
        let agentflow = execution.agentflow_id;
        let (created, ended) = execution.start(&mut update, now);
        // Through the chatflow's row: an execution is always of a chatflow of
        // its own workspace. A record already there (a start whose writer could
        // not know it was stored, written again with the run's end) takes the
        // run's fields; its sharing stays. Columns returned as EXECUTION_COLUMNS.
        let stored = conn
            .prepare_cached(
                "INSERT INTO executions (id, workspace_id, agentflow_id, session_id, state,
                                         execution_data, action, is_public, created_at,
                                         updated_at, stopped_at)
                 SELECT ?1, workspace_id, id, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11
                 FROM chatflows WHERE id = ?3 AND workspace_id = ?2
                 ON CONFLICT (id) DO UPDATE SET
                     state = excluded.state, execution_data = excluded.execution_data,
                     action = excluded.action, updated_at = excluded.updated_at,
                     stopped_at = excluded.stopped_at
                 RETURNING id, workspace_id, agentflow_id, session_id, state, execution_data,
                           action, is_public, created_at, updated_at, stopped_at",
            )
            .and_then(|mut stmt| {
                stmt.query_row(
                    params![
                        created.id.to_string(),
                        created.workspace_id.to_string(),
                        created.agentflow_id.to_string(),
                        created.session_id,
                        created.state.as_str(),
                        created.execution_data,
                        created.action,
                        created.is_public,
                        to_millis(&created.created_date),
                        to_millis(&created.updated_date),
                        created.stopped_date.as_ref().map(to_millis),
                    ],
                    execution_from_row,
                )
                .optional()
            })
            .map_err(backend)?
            .ok_or_else(|| StoreError::Conflict(execution::chatflow_missing(agentflow)))?;
        written.updated = ended.then(|| stored.clone());
        written.started = Some(stored);
    }
    if let Some((id, update)) = update {
        let found = get_execution(conn, None, id).map_err(backend)?;
        if let Some(mut found) = found.filter(|found| update.applies_to(found)) {
            update.apply(&mut found, now);
            write_execution(conn, &found).map_err(backend)?;
            written.updated = Some(found);
        }
    }
    if !run.messages.is_empty() {
        let mut stmt = conn
            .prepare_cached(&format!(
                "INSERT INTO chat_messages ({MESSAGE_COLUMNS})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
            ))
            .map_err(backend)?;
        written.messages.reserve(run.messages.len());
        for m in run.messages {
            // Time-ordered ids (v7): new rows land at the end of the id index, not
            // on a random page of it, however large the table grows.
            let r = m.into_record(Uuid::now_v7(), now);
            stmt.execute(params![
                r.id.to_string(),
                r.chatflow_id.to_string(),
                r.chat_id,
                r.role.as_str(),
                r.content,
                r.source_documents,
                r.used_tools,
                to_millis(&r.created_date),
                r.chat_type.as_str(),
                r.execution_id.map(|id| id.to_string()),
                r.memory_type,
                r.details,
            ])
            .map_err(backend)?;
            written.messages.push(r);
        }
    }
    if let Some(end) = run.end_firing {
        written.firing_result = triggers::finish_firing(conn, end)?;
    }
    Ok(written)
}

/// An execution by id, in `workspace` when one is given.
fn get_execution(
    conn: &Connection,
    workspace: Option<Uuid>,
    id: Uuid,
) -> rusqlite::Result<Option<Execution>> {
    conn.prepare_cached(&format!(
        "SELECT {EXECUTION_COLUMNS} FROM executions e
         WHERE e.id = ?1 AND (?2 IS NULL OR e.workspace_id = ?2)"
    ))?
    .query_row(
        params![id.to_string(), workspace.map(|w| w.to_string())],
        execution_from_row,
    )
    .optional()
}

/// Writes everything of an execution that can change.
fn write_execution(conn: &Connection, e: &Execution) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "UPDATE executions SET state = ?2, execution_data = ?3, action = ?4, is_public = ?5,
                               updated_at = ?6, stopped_at = ?7
         WHERE id = ?1",
    )?
    .execute(params![
        e.id.to_string(),
        e.state.as_str(),
        e.execution_data,
        e.action,
        e.is_public,
        to_millis(&e.updated_date),
        e.stopped_date.as_ref().map(to_millis),
    ])
}

/// A shared query's argument as SQLite stores it (ids as text, times as
/// epoch milliseconds).
fn sqlite_value(param: sql::Param) -> Value {
    match param {
        sql::Param::Uuid(id) => Value::Text(id.to_string()),
        sql::Param::Text(text) => Value::Text(text),
        sql::Param::Time(at) => Value::Integer(to_millis(&at)),
    }
}

fn store_version(conn: &Connection, chatflow: Uuid, node_id: &str) -> rusqlite::Result<i64> {
    conn.query_row(
        "SELECT version FROM vector_stores WHERE chatflow_id = ?1 AND node_id = ?2",
        params![chatflow.to_string(), node_id],
        |r| r.get(0),
    )
    .optional()
    .map(Option::unwrap_or_default)
}

fn chunk_from_row(row: &Row<'_>) -> rusqlite::Result<VectorChunk> {
    let metadata: String = row.get(5)?;
    let bytes: Vec<u8> = row.get(6)?;
    let embedding = embedding_from_bytes(&bytes).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            6,
            rusqlite::types::Type::Blob,
            "an embedding that is not whole f32s".into(),
        )
    })?;
    Ok(VectorChunk {
        id: uuid_at(row, 0)?,
        content_hash: row.get(1)?,
        source: row.get(2)?,
        chat_id: row.get(3)?,
        page_content: row.get(4)?,
        metadata: serde_json::from_str(&metadata).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(5, rusqlite::types::Type::Text, Box::new(e))
        })?,
        embedding,
    })
}
