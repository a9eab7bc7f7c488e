//! The embedded SQLite store (rusqlite, bundled SQLite): the default backend.
//!
//! WAL mode: one writer connection behind a mutex ([`SqliteStore::call`]) and a few
//! read-only connections ([`SqliteStore::read`]) so that reads (every request's key
//! lookup among them) run side by side and never wait for a write. Every call runs
//! on tokio's blocking pool, so request threads never block on disk.
//! UUIDs are stored as text and times as epoch milliseconds.

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
    MESSAGE_COLUMNS, RESULT_COLUMNS, TOOL_COLUMNS, TRIGGER_COLUMNS, VARIABLE_COLUMNS,
};
use super::{
    ClaimPlanner, Listing, RunWrites, RunWritten, Store, StoreError, StoreResult, conflict_as,
};
use crate::domain::ApiConfig;
use crate::domain::credential::SealedCredential;
use crate::domain::time::{self, Timestamp, from_millis, to_millis};
use crate::domain::trigger::{self as trig, LEASE_EXPIRED, failure_mail};
use crate::domain::vector::{ChunkKey, UpsertCounts, embedding_bytes, embedding_from_bytes};
use crate::domain::{AgentflowRef, Execution, ExecutionFilter, ListedExecution};
use crate::domain::{
    ApiKey, ChatMessageRecord, Chatflow, ChatflowPatch, ChatflowType, Delivery, Firing, Lead,
    MessageRole, NewApiKey, NewChatflow, NewMail, NewTool, NewTriggerResult, NewVariable,
    OutboxMail, Page, Permission, ResultStatus, Tool, ToolPatch, Trigger, TriggerResult,
    TriggerType, UpsertRecord, Variable, VariablePatch, VariableType, VectorChunk, VectorWrite,
    Workspace,
};
use crate::domain::{execution, tool, variable};

/// Read-only connections kept open beside the writer.
const READERS: usize = 4;

/// Windows kept in memory before expired ones are swept.
const RATE_WINDOWS_SWEEP_AT: usize = 10_000;

/// (window start ms, window length ms, hits)
type RateWindow = (i64, i64, u64);

#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
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
        let (conn, readers) = tokio::task::spawn_blocking(move || -> StoreResult<_> {
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
            // The writer's page cache holds the hot index pages of growing tables
            // (SQLite's default is 2 MiB), so appends do not re-read them from disk.
            conn.execute_batch("PRAGMA cache_size = -16384;")
                .map_err(backend)?;
            migrate(&mut conn, migrations::SQLITE).map_err(backend)?;
            let readers = (0..READERS)
                .map(|_| {
                    let reader = open()?;
                    reader
                        .execute_batch("PRAGMA query_only = ON;")
                        .map_err(backend)?;
                    Ok(Mutex::new(reader))
                })
                .collect::<StoreResult<Vec<_>>>()?;
            Ok((conn, readers))
        })
        .await
        .map_err(|e| StoreError::Backend(format!("store task failed: {e}")))??;
        Ok(SqliteStore {
            conn: Arc::new(Mutex::new(conn)),
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
            let n = readers.len();
            for i in 0..n {
                match readers[(start + i) % n].try_lock() {
                    Ok(mut conn) => return f(&mut conn),
                    Err(TryLockError::Poisoned(p)) => return f(&mut p.into_inner()),
                    Err(TryLockError::WouldBlock) => {}
                }
            }
            let mut conn = readers[start % n].lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn)
        })
        .await
        .map_err(|e| StoreError::Backend(format!("store task failed: {e}")))?
        .map_err(backend)
    }

    /// Runs `f` with the connection on the blocking pool.
    async fn call<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            // A panic while holding the lock leaves the connection usable: SQLite
            // rolls back any open transaction, so recover from poisoning.
            let mut guard = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut guard)
        })
        .await
        .map_err(|e| StoreError::Backend(format!("store task failed: {e}")))?
        .map_err(backend)
    }
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
    })
}

/// Inserts a result and keeps the trigger's newest `keep`.
fn insert_result(
    conn: &Connection,
    result: NewTriggerResult,
    keep: u32,
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
    conn.prepare_cached(
        "DELETE FROM trigger_results WHERE trigger_id = ?1 AND seq <= (
           SELECT seq FROM trigger_results WHERE trigger_id = ?1
           ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
    )?
    .execute(params![stored.trigger_id.to_string(), i64::from(keep)])?;
    Ok(stored)
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
    })
}

fn lead_from_row(row: &Row<'_>) -> rusqlite::Result<Lead> {
    Ok(Lead {
        id: uuid_at(row, 0)?,
        chatflow_id: uuid_at(row, 1)?,
        chat_id: row.get(2)?,
        email: row.get(3)?,
        created_date: from_millis(row.get(4)?),
    })
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ensure_workspace(&self, name: &str) -> StoreResult<Workspace> {
        let name = name.to_owned();
        self.call(move |conn| {
            conn.execute(
                "INSERT INTO workspaces (id, name, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO NOTHING",
                params![Uuid::new_v4().to_string(), name, to_millis(&time::now())],
            )?;
            find_workspace(conn, &name)?.ok_or(rusqlite::Error::QueryReturnedNoRows)
        })
        .await
    }

    async fn find_workspace(&self, name: &str) -> StoreResult<Option<Workspace>> {
        let name = name.to_owned();
        self.read(move |conn| find_workspace(conn, &name)).await
    }

    async fn create_api_key(&self, key: NewApiKey) -> StoreResult<ApiKey> {
        self.call(move |conn| {
            let id = Uuid::new_v4();
            conn.execute(
                "INSERT INTO api_keys (id, workspace_id, name, permissions, key_hash, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    id.to_string(),
                    key.workspace_id.to_string(),
                    key.name,
                    Permission::join(&key.permissions),
                    key.key_hash,
                    to_millis(&time::now()),
                ],
            )?;
            conn.query_row(
                &format!(
                    "SELECT {API_KEY_COLUMNS} FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id
                     WHERE k.id = ?1"
                ),
                [id.to_string()],
                api_key_from_row,
            )
        })
        .await
    }

    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
        let hash = hash.to_owned();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {API_KEY_COLUMNS} FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id
                 WHERE k.key_hash = ?1"
            ))?;
            stmt.query_row([hash], api_key_from_row).optional()
        })
        .await
    }

    async fn list_api_keys(&self, workspace: Option<Uuid>) -> StoreResult<Vec<ApiKey>> {
        self.read(move |conn| {
            let mut stmt = conn.prepare(&format!(
                "SELECT {API_KEY_COLUMNS} FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id
                 WHERE ?1 IS NULL OR k.workspace_id = ?1
                 ORDER BY k.created_at, k.id"
            ))?;
            stmt.query_map([workspace.map(|w| w.to_string())], api_key_from_row)?
                .collect()
        })
        .await
    }

    async fn delete_api_key(&self, workspace: Option<Uuid>, id: Uuid) -> StoreResult<bool> {
        self.call(move |conn| {
            let n = conn.execute(
                "DELETE FROM api_keys WHERE id = ?1 AND (?2 IS NULL OR workspace_id = ?2)",
                params![id.to_string(), workspace.map(|w| w.to_string())],
            )?;
            Ok(n > 0)
        })
        .await
    }

    async fn count_api_keys(&self) -> StoreResult<u64> {
        self.read(|conn| {
            conn.query_row("SELECT COUNT(*) FROM api_keys", [], |r| r.get::<_, i64>(0))
                .map(|n| u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn touch_api_key(&self, id: Uuid) -> StoreResult<()> {
        self.call(move |conn| {
            conn.execute(
                "UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1",
                params![id.to_string(), to_millis(&time::now())],
            )
            .map(|_| ())
        })
        .await
    }

    async fn create_chatflow(&self, flow: NewChatflow) -> StoreResult<Chatflow> {
        self.call(move |conn| {
            let flow = flow.into_chatflow(Uuid::new_v4(), time::now());
            write_chatflow(
                conn,
                &format!(
                    "INSERT INTO chatflows ({CHATFLOW_COLUMNS})
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
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
        page: Page,
    ) -> StoreResult<Arc<Listing<Chatflow>>> {
        self.read(move |conn| {
            list_page(
                conn,
                "SELECT COUNT(*) FROM chatflows WHERE workspace_id = ?1",
                &format!(
                    "SELECT {CHATFLOW_COLUMNS} FROM chatflows WHERE workspace_id = ?1
                     ORDER BY updated_at DESC, id LIMIT ?2 OFFSET ?3"
                ),
                &[&workspace.to_string()],
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
                   created_at = ?12, updated_at = ?13
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

    async fn create_variable(&self, workspace: Uuid, var: NewVariable) -> StoreResult<Variable> {
        let conflict = variable::name_taken(&var.name);
        self.call(move |conn| {
            let now = time::now();
            let created = Variable {
                id: Uuid::new_v4(),
                name: var.name,
                value: var.value,
                var_type: var.var_type,
                created_date: now,
                updated_date: now,
            };
            conn.execute(
                "INSERT INTO variables (id, workspace_id, name, value, type, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
                params![
                    created.id.to_string(),
                    workspace.to_string(),
                    created.name,
                    created.value,
                    created.var_type.as_str(),
                    to_millis(&now),
                ],
            )?;
            Ok(created)
        })
        .await
        .map_err(conflict_as(conflict))
    }

    async fn get_variable(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Variable>> {
        self.read(move |conn| get_variable(conn, workspace, id))
            .await
    }

    async fn list_variables(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Variable>> {
        self.read(move |conn| {
            list_page(
                conn,
                "SELECT COUNT(*) FROM variables WHERE workspace_id = ?1",
                &format!(
                    "SELECT {VARIABLE_COLUMNS} FROM variables WHERE workspace_id = ?1
                     ORDER BY name, id LIMIT ?2 OFFSET ?3"
                ),
                &[&workspace.to_string()],
                page,
                variable_from_row,
            )
        })
        .await
    }

    async fn update_variable(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: VariablePatch,
    ) -> StoreResult<Option<Variable>> {
        let conflict = variable::name_taken(patch.name.as_deref().unwrap_or_default());
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let Some(mut var) = get_variable(&tx, workspace, id)? else {
                return Ok(None);
            };
            patch.apply(&mut var, time::now());
            tx.execute(
                "UPDATE variables SET name = ?3, value = ?4, type = ?5, updated_at = ?6
                 WHERE id = ?1 AND workspace_id = ?2",
                params![
                    id.to_string(),
                    workspace.to_string(),
                    var.name,
                    var.value,
                    var.var_type.as_str(),
                    to_millis(&var.updated_date),
                ],
            )?;
            tx.commit()?;
            Ok(Some(var))
        })
        .await
        .map_err(conflict_as(conflict))
    }

    async fn delete_variable(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.call(move |conn| {
            conn.execute(
                "DELETE FROM variables WHERE id = ?1 AND workspace_id = ?2",
                params![id.to_string(), workspace.to_string()],
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn create_credential(&self, credential: &SealedCredential) -> StoreResult<()> {
        let c = credential.clone();
        self.call(move |conn| {
            conn.execute(
                "INSERT INTO credentials (id, workspace_id, name, credential_name, key_id,
                                          sealed_data, created_at, updated_at, allowed_hosts)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    c.id.to_string(),
                    c.workspace_id.to_string(),
                    c.name,
                    c.credential_name,
                    c.key_id,
                    c.data,
                    to_millis(&c.created_date),
                    to_millis(&c.updated_date),
                    c.hosts_column(),
                ],
            )
            .map(drop)
        })
        .await
    }

    async fn get_credential(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<SealedCredential>> {
        self.read(move |conn| {
            conn.query_row(
                &format!(
                    "SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE id = ?1 AND workspace_id = ?2"
                ),
                params![id.to_string(), workspace.to_string()],
                credential_from_row,
            )
            .optional()
        })
        .await
    }

    async fn get_credentials(
        &self,
        workspace: Uuid,
        ids: &[Uuid],
    ) -> StoreResult<Vec<SealedCredential>> {
        let ids = serde_json::Value::from(ids.iter().map(Uuid::to_string).collect::<Vec<_>>())
            .to_string();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {CREDENTIAL_COLUMNS} FROM credentials
                 WHERE workspace_id = ?1 AND id IN (SELECT value FROM json_each(?2))"
            ))?;
            stmt.query_map(params![workspace.to_string(), ids], credential_from_row)?
                .collect()
        })
        .await
    }

    async fn list_credentials(
        &self,
        workspace: Uuid,
        credential_name: Option<&str>,
        page: Page,
    ) -> StoreResult<Listing<SealedCredential>> {
        let kind = credential_name.map(str::to_owned);
        self.read(move |conn| {
            let filter = "workspace_id = ?1 AND (?2 IS NULL OR credential_name = ?2)";
            list_page(
                conn,
                &format!("SELECT COUNT(*) FROM credentials WHERE {filter}"),
                &format!(
                    "SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE {filter}
                     ORDER BY name, id LIMIT ?3 OFFSET ?4"
                ),
                &[&workspace.to_string(), &kind],
                page,
                credential_from_row,
            )
        })
        .await
    }

    async fn update_credential(
        &self,
        credential: &SealedCredential,
        read_data: &str,
    ) -> StoreResult<bool> {
        let c = credential.clone();
        let read_data = read_data.to_owned();
        self.call(move |conn| {
            conn.execute(
                "UPDATE credentials SET name = ?3, credential_name = ?4, key_id = ?5,
                        sealed_data = ?6, updated_at = ?7, allowed_hosts = ?9
                 WHERE id = ?1 AND workspace_id = ?2 AND sealed_data = ?8",
                params![
                    c.id.to_string(),
                    c.workspace_id.to_string(),
                    c.name,
                    c.credential_name,
                    c.key_id,
                    c.data,
                    to_millis(&c.updated_date),
                    read_data,
                    c.hosts_column(),
                ],
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn delete_credential(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.call(move |conn| {
            conn.execute(
                "DELETE FROM credentials WHERE id = ?1 AND workspace_id = ?2",
                params![id.to_string(), workspace.to_string()],
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn credentials_sealed_by_other_keys(
        &self,
        key_id: &str,
    ) -> StoreResult<Vec<SealedCredential>> {
        let key_id = key_id.to_owned();
        self.read(move |conn| {
            let mut stmt = conn.prepare(&format!(
                "SELECT {CREDENTIAL_COLUMNS} FROM credentials WHERE key_id <> ?1"
            ))?;
            stmt.query_map([key_id], credential_from_row)?.collect()
        })
        .await
    }

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

    async fn rate_limit_hit(
        &self,
        bucket: &str,
        window_start_ms: i64,
        window_ms: i64,
    ) -> StoreResult<u64> {
        let mut windows = self.rate_windows.lock().unwrap_or_else(|p| p.into_inner());
        if windows.len() >= RATE_WINDOWS_SWEEP_AT {
            let now = to_millis(&time::now());
            windows.retain(|_, (start, len, _)| *start + *len > now);
        }
        let entry = windows
            .entry(bucket.to_owned())
            .or_insert((window_start_ms, window_ms, 0));
        if entry.0 != window_start_ms {
            *entry = (window_start_ms, window_ms, 0);
        }
        entry.2 += 1;
        Ok(entry.2)
    }

    async fn create_trigger(
        &self,
        trigger: Trigger,
        max_in_workspace: u64,
    ) -> StoreResult<Trigger> {
        let conflict = trig::address_taken(&trigger.node_id);
        let created = self
            .call(move |conn| {
                // One writer: the count and the insert cannot interleave with another's.
                let count: i64 = conn.query_row(
                    "SELECT COUNT(*) FROM triggers WHERE workspace_id = ?1",
                    [trigger.workspace_id.to_string()],
                    |r| r.get(0),
                )?;
                if u64::try_from(count).unwrap_or(0) >= max_in_workspace {
                    return Ok(None);
                }
                write_trigger(
                    conn,
                    &format!(
                        "INSERT INTO triggers ({TRIGGER_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7,
                           ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"
                    ),
                    &trigger,
                )?;
                Ok(Some(trigger))
            })
            .await
            .map_err(conflict_as(conflict))?;
        created.ok_or_else(|| StoreError::Conflict(trig::quota_reached(max_in_workspace)))
    }

    async fn get_trigger(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Trigger>> {
        self.read(move |conn| {
            conn.query_row(
                &format!(
                    "SELECT {TRIGGER_COLUMNS} FROM triggers WHERE id = ?1 AND workspace_id = ?2"
                ),
                params![id.to_string(), workspace.to_string()],
                trigger_from_row,
            )
            .optional()
        })
        .await
    }

    async fn list_triggers(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Trigger>> {
        self.read(move |conn| {
            list_page(
                conn,
                "SELECT COUNT(*) FROM triggers WHERE workspace_id = ?1",
                &format!(
                    "SELECT {TRIGGER_COLUMNS} FROM triggers WHERE workspace_id = ?1
                     ORDER BY created_at DESC, id LIMIT ?2 OFFSET ?3"
                ),
                &[&workspace.to_string()],
                page,
                trigger_from_row,
            )
        })
        .await
    }

    async fn update_trigger(&self, trigger: &Trigger) -> StoreResult<bool> {
        let conflict = trig::address_taken(&trigger.node_id);
        let t = trigger.clone();
        self.call(move |conn| {
            conn.execute(
                "UPDATE triggers SET name = ?3, chatflow_id = ?4, node_id = ?5, cron_expression = ?6,
                   timezone = ?7, enabled = ?8, webhook_platform = ?9, webhook_secret = ?10,
                   webhook_bot_token = ?11, trigger_message = ?12, max_executions = ?13,
                   timeout_secs = ?14, next_execution = ?15, notification_email = ?16,
                   updated_at = ?17
                 WHERE id = ?1 AND workspace_id = ?2",
                params![
                    t.id.to_string(),
                    t.workspace_id.to_string(),
                    t.name,
                    t.chatflow_id.to_string(),
                    t.node_id,
                    t.cron_expression,
                    t.timezone,
                    t.enabled,
                    t.webhook_platform,
                    t.webhook_secret,
                    t.webhook_bot_token,
                    t.trigger_message,
                    t.max_executions,
                    t.timeout,
                    t.next_execution.as_ref().map(to_millis),
                    t.notification_email,
                    to_millis(&t.updated_date),
                ],
            )
            .map(|n| n > 0)
        })
        .await
        .map_err(conflict_as(conflict))
    }

    async fn delete_trigger(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.call(move |conn| {
            conn.execute(
                "DELETE FROM triggers WHERE id = ?1 AND workspace_id = ?2",
                params![id.to_string(), workspace.to_string()],
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn find_webhook_triggers(&self, address: &str) -> StoreResult<Vec<Trigger>> {
        let address = address.to_owned();
        let id = Uuid::parse_str(&address).ok().map(|id| id.to_string());
        self.read(move |conn| {
            if let Some(id) = id {
                let found = conn
                    .query_row(
                        &format!(
                            "SELECT {TRIGGER_COLUMNS} FROM triggers WHERE id = ?1 AND type = 'webhook'"
                        ),
                        [id],
                        trigger_from_row,
                    )
                    .optional()?;
                if let Some(found) = found {
                    return Ok(vec![found]);
                }
            }
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {TRIGGER_COLUMNS} FROM triggers WHERE node_id = ?1 AND type = 'webhook'
                 ORDER BY created_at, id LIMIT 2"
            ))?;
            stmt.query_map([address], trigger_from_row)?.collect()
        })
        .await
    }

    async fn triggers_with_secrets_not_sealed_by(
        &self,
        sealed_prefix: &str,
    ) -> StoreResult<Vec<Trigger>> {
        let prefix = sealed_prefix.to_owned();
        self.read(move |conn| {
            // A NULL field compares as NULL: only set values are looked at.
            let mut stmt = conn.prepare(&format!(
                "SELECT {TRIGGER_COLUMNS} FROM triggers
                 WHERE substr(webhook_secret, 1, length(?1)) <> ?1
                    OR substr(webhook_bot_token, 1, length(?1)) <> ?1"
            ))?;
            stmt.query_map([prefix], trigger_from_row)?.collect()
        })
        .await
    }

    async fn replace_trigger_secrets(&self, old: &Trigger, new: &Trigger) -> StoreResult<bool> {
        let id = old.id.to_string();
        let (old_secret, old_token) = (old.webhook_secret.clone(), old.webhook_bot_token.clone());
        let (secret, token) = (new.webhook_secret.clone(), new.webhook_bot_token.clone());
        self.call(move |conn| {
            conn.execute(
                "UPDATE triggers SET webhook_secret = ?2, webhook_bot_token = ?3
                 WHERE id = ?1 AND webhook_secret IS ?4 AND webhook_bot_token IS ?5",
                params![id, secret, token, old_secret, old_token],
            )
            .map(|n| n > 0)
        })
        .await
    }

    async fn next_cron_due(&self) -> StoreResult<Option<Timestamp>> {
        self.read(|conn| {
            conn.query_row(
                "SELECT MIN(next_execution) FROM triggers WHERE type = 'cron' AND enabled = 1",
                [],
                |r| r.get::<_, Option<i64>>(0),
            )
            .map(|ms| ms.map(from_millis))
        })
        .await
    }

    async fn claim_due_triggers(
        &self,
        now: Timestamp,
        owner: Uuid,
        lease_until: Timestamp,
        limit: u32,
        plan: ClaimPlanner,
    ) -> StoreResult<Vec<Firing>> {
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let due: Vec<Trigger> = tx
                .prepare_cached(&format!(
                    "SELECT {TRIGGER_COLUMNS} FROM triggers
                     WHERE type = 'cron' AND enabled = 1 AND next_execution <= ?1
                     ORDER BY next_execution LIMIT ?2"
                ))?
                .query_map(params![to_millis(&now), i64::from(limit)], trigger_from_row)?
                .collect::<rusqlite::Result<_>>()?;
            let mut firings = Vec::new();
            for mut trigger in due {
                let decision = plan(&trigger, now);
                if decision.missed > 0 {
                    insert_result(
                        &tx,
                        trig::missed_result(&trigger, now, decision.missed),
                        u32::MAX,
                    )?;
                }
                trigger.advance(&decision, now);
                if let Some(at) = decision.run_at {
                    let firing = Firing {
                        id: Uuid::new_v4(),
                        trigger: trigger.clone(),
                        scheduled_at: at,
                        is_cron: true,
                    };
                    insert_firing(
                        &tx,
                        &firing,
                        owner,
                        lease_until,
                        &trigger.cron_input(),
                        &trigger.chat_id_at(at),
                    )?;
                    firings.push(firing);
                }
                tx.prepare_cached(
                    "UPDATE triggers SET execution_count = ?2, last_executed = ?3, enabled = ?4,
                       next_execution = ?5 WHERE id = ?1",
                )?
                .execute(params![
                    trigger.id.to_string(),
                    trigger.execution_count,
                    trigger.last_executed.as_ref().map(to_millis),
                    trigger.enabled,
                    trigger.next_execution.as_ref().map(to_millis),
                ])?;
            }
            tx.commit()?;
            Ok(firings)
        })
        .await
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
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let claimed = tx
                .prepare_cached(&format!(
                    "UPDATE triggers SET execution_count = execution_count + 1, last_executed = ?2,
                       enabled = CASE WHEN max_executions IS NOT NULL
                                       AND execution_count + 1 >= max_executions
                                 THEN 0 ELSE enabled END
                     WHERE id = ?1 AND enabled = 1
                       AND (max_executions IS NULL OR execution_count < max_executions)
                     RETURNING {TRIGGER_COLUMNS}"
                ))?
                .query_row(
                    params![trigger.to_string(), to_millis(&now)],
                    trigger_from_row,
                )
                .optional()?;
            let Some(trigger) = claimed else {
                return Ok(None);
            };
            let firing = Firing {
                id: Uuid::new_v4(),
                trigger,
                scheduled_at: now,
                is_cron: false,
            };
            insert_firing(&tx, &firing, owner, lease_until, &input, &chat_id)?;
            tx.commit()?;
            Ok(Some(firing))
        })
        .await
    }

    async fn firing_exists(&self, firing: Uuid) -> StoreResult<bool> {
        self.read(move |conn| {
            conn.query_row(
                "SELECT 1 FROM trigger_firings WHERE id = ?1",
                [firing.to_string()],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
        })
        .await
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
        let ids: Vec<String> = firings.iter().map(Uuid::to_string).collect();
        self.call(move |conn| {
            let sql = format!(
                "UPDATE trigger_firings SET lease_until = ? WHERE owner = ? AND id IN ({})",
                placeholders(ids.len())
            );
            let mut values: Vec<rusqlite::types::Value> =
                vec![to_millis(&lease_until).into(), owner.to_string().into()];
            values.extend(ids.into_iter().map(rusqlite::types::Value::from));
            conn.execute(&sql, rusqlite::params_from_iter(values))?;
            Ok(())
        })
        .await
    }

    async fn finish_firing(
        &self,
        firing: Uuid,
        result: NewTriggerResult,
        mail: Option<NewMail>,
        keep: u32,
    ) -> StoreResult<Option<TriggerResult>> {
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let removed = tx
                .prepare_cached("DELETE FROM trigger_firings WHERE id = ?1")?
                .execute([firing.to_string()])?;
            if removed == 0 {
                // Deleted with its trigger, or expired and recorded by another replica.
                return Ok(None);
            }
            let trigger = result.trigger_id;
            let at = result.executed_at;
            let stored = insert_result(&tx, result, keep)?;
            if let Some(mail) = mail {
                insert_mail(&tx, trigger, &mail, at)?;
            }
            tx.commit()?;
            Ok(Some(stored))
        })
        .await
    }

    async fn expire_firings(&self, now: Timestamp, keep: u32) -> StoreResult<u64> {
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let expired: Vec<(String, i64, bool, String, String, String, Trigger)> = tx
                .prepare_cached(&format!(
                    "SELECT f.id, f.scheduled_at, f.is_cron, f.input, f.chat_id, c.name, {}
                     FROM trigger_firings f JOIN triggers t ON t.id = f.trigger_id
                     JOIN chatflows c ON c.id = t.chatflow_id
                     WHERE f.lease_until < ?1",
                    prefixed("t", TRIGGER_COLUMNS)
                ))?
                .query_map([to_millis(&now)], |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        trigger_at(r, 6)?,
                    ))
                })?
                .collect::<rusqlite::Result<_>>()?;
            let count = expired.len() as u64;
            for (id, scheduled, is_cron, input, chat_id, flow_name, trigger) in expired {
                tx.prepare_cached("DELETE FROM trigger_firings WHERE id = ?1")?
                    .execute([id])?;
                let mail = failure_mail(&trigger, &flow_name, now, &input, LEASE_EXPIRED);
                let result = trig::failed_result(
                    &trigger,
                    now,
                    is_cron.then(|| from_millis(scheduled)),
                    input,
                    chat_id,
                    LEASE_EXPIRED.to_owned(),
                );
                insert_result(&tx, result, keep)?;
                if let Some(mail) = mail {
                    insert_mail(&tx, trigger.id, &mail, now)?;
                }
            }
            tx.commit()?;
            Ok(count)
        })
        .await
    }

    async fn list_trigger_results(
        &self,
        trigger: Uuid,
        limit: u32,
    ) -> StoreResult<Vec<TriggerResult>> {
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {RESULT_COLUMNS} FROM trigger_results WHERE trigger_id = ?1
                 ORDER BY seq DESC LIMIT ?2"
            ))?
            .query_map(
                params![trigger.to_string(), i64::from(limit)],
                result_from_row,
            )?
            .collect()
        })
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
        let ids: Vec<String> = triggers.iter().map(Uuid::to_string).collect();
        self.read(move |conn| {
            let sql = format!(
                "SELECT {RESULT_COLUMNS} FROM (
                   SELECT *, ROW_NUMBER() OVER (PARTITION BY trigger_id ORDER BY seq DESC) AS n
                   FROM trigger_results WHERE trigger_id IN ({})
                 ) WHERE n <= {per_trigger} ORDER BY trigger_id, seq DESC",
                placeholders(ids.len())
            );
            let mut stmt = conn.prepare(&sql)?;
            stmt.query_map(rusqlite::params_from_iter(ids), result_from_row)?
                .collect()
        })
        .await
    }

    async fn prune_trigger_history(
        &self,
        before: Timestamp,
        deliveries_before: Timestamp,
    ) -> StoreResult<u64> {
        self.call(move |conn| {
            let results = conn.execute(
                "DELETE FROM trigger_results WHERE executed_at < ?1",
                [to_millis(&before)],
            )?;
            let deliveries = conn.execute(
                "DELETE FROM webhook_deliveries WHERE created_at < ?1",
                [to_millis(&deliveries_before)],
            )?;
            let mails = conn.execute(
                "DELETE FROM mail_outbox WHERE sent_at IS NOT NULL AND sent_at < ?1",
                [to_millis(&deliveries_before)],
            )?;
            Ok((results + deliveries + mails) as u64)
        })
        .await
    }

    async fn begin_delivery(
        &self,
        trigger: Uuid,
        delivery: &str,
        now: Timestamp,
    ) -> StoreResult<Delivery> {
        let delivery = delivery.to_owned();
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let inserted = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO webhook_deliveries (trigger_id, delivery_id, created_at)
                     VALUES (?1, ?2, ?3)",
                )?
                .execute(params![trigger.to_string(), delivery, to_millis(&now)])?;
            let state = if inserted == 1 {
                Delivery::New
            } else {
                let (status, body): (Option<i64>, Option<String>) = tx.query_row(
                    "SELECT status, body FROM webhook_deliveries WHERE trigger_id = ?1 AND delivery_id = ?2",
                    params![trigger.to_string(), delivery],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?;
                match (status, body) {
                    (Some(status), Some(body)) => Delivery::Answered {
                        status: u16::try_from(status).unwrap_or(200),
                        body,
                    },
                    _ => Delivery::InProgress,
                }
            };
            tx.commit()?;
            Ok(state)
        })
        .await
    }

    async fn finish_delivery(
        &self,
        trigger: Uuid,
        delivery: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()> {
        let (delivery, body) = (delivery.to_owned(), body.to_owned());
        self.call(move |conn| {
            conn.execute(
                "UPDATE webhook_deliveries SET status = ?3, body = ?4
                 WHERE trigger_id = ?1 AND delivery_id = ?2",
                params![trigger.to_string(), delivery, i64::from(status), body],
            )?;
            Ok(())
        })
        .await
    }

    async fn claim_mail(
        &self,
        now: Timestamp,
        claim_until: Timestamp,
    ) -> StoreResult<Vec<(OutboxMail, Option<Timestamp>)>> {
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let due: Vec<(OutboxMail, Option<Timestamp>)> = tx
                .prepare_cached(
                    "SELECT m.id, m.trigger_id, m.recipient, m.subject, m.body, m.attempts,
                       m.created_at,
                       (SELECT MAX(s.sent_at) FROM mail_outbox s WHERE s.trigger_id = m.trigger_id)
                     FROM mail_outbox m WHERE m.sent_at IS NULL AND m.next_attempt_at <= ?1
                     ORDER BY m.created_at LIMIT 500",
                )?
                .query_map([to_millis(&now)], |r| {
                    Ok((
                        OutboxMail {
                            id: uuid_at(r, 0)?,
                            trigger_id: uuid_at(r, 1)?,
                            recipient: r.get(2)?,
                            subject: r.get(3)?,
                            body: r.get(4)?,
                            attempts: r.get(5)?,
                            created_at: from_millis(r.get(6)?),
                        },
                        r.get::<_, Option<i64>>(7)?.map(from_millis),
                    ))
                })?
                .collect::<rusqlite::Result<_>>()?;
            for (mail, _) in &due {
                tx.prepare_cached("UPDATE mail_outbox SET next_attempt_at = ?2 WHERE id = ?1")?
                    .execute(params![mail.id.to_string(), to_millis(&claim_until)])?;
            }
            tx.commit()?;
            Ok(due)
        })
        .await
    }

    async fn mail_sent(&self, ids: &[Uuid], at: Timestamp) -> StoreResult<()> {
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            for id in ids {
                tx.prepare_cached("UPDATE mail_outbox SET sent_at = ?2 WHERE id = ?1")?
                    .execute(params![id, to_millis(&at)])?;
            }
            tx.commit()
        })
        .await
    }

    async fn mail_retry(&self, ids: &[Uuid], at: Timestamp, failed: bool) -> StoreResult<()> {
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            for id in ids {
                tx.prepare_cached(
                    "UPDATE mail_outbox SET next_attempt_at = ?2, attempts = attempts + ?3 WHERE id = ?1",
                )?
                .execute(params![id, to_millis(&at), i64::from(failed)])?;
            }
            tx.commit()
        })
        .await
    }

    async fn any_trigger_with_email(&self) -> StoreResult<bool> {
        self.read(|conn| {
            conn.query_row(
                "SELECT EXISTS (SELECT 1 FROM triggers WHERE notification_email IS NOT NULL)",
                [],
                |r| r.get(0),
            )
        })
        .await
    }

    async fn vector_store_version(&self, chatflow: Uuid, node_id: &str) -> StoreResult<i64> {
        let node_id = node_id.to_owned();
        self.read(move |conn| store_version(conn, chatflow, &node_id))
            .await
    }

    async fn list_vector_chunks(
        &self,
        chatflow: Uuid,
        node_id: &str,
    ) -> StoreResult<(i64, Vec<VectorChunk>)> {
        let node_id = node_id.to_owned();
        self.read(move |conn| {
            // One read transaction: the version and the chunks of one snapshot.
            let tx = conn.transaction()?;
            let version = store_version(&tx, chatflow, &node_id)?;
            let mut stmt = tx.prepare_cached(
                "SELECT id, content_hash, source, chat_id, page_content, metadata, embedding
                 FROM vector_chunks WHERE chatflow_id = ?1 AND node_id = ?2 ORDER BY seq",
            )?;
            let chunks = stmt
                .query_map(params![chatflow.to_string(), node_id], chunk_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            drop(stmt);
            tx.commit()?;
            Ok((version, chunks))
        })
        .await
    }

    async fn vector_chunk_keys(&self, chatflow: Uuid, node_id: &str) -> StoreResult<Vec<ChunkKey>> {
        let node_id = node_id.to_owned();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, content_hash, source, length(embedding) / 4 FROM vector_chunks
                 WHERE chatflow_id = ?1 AND node_id = ?2 ORDER BY seq",
            )?;
            stmt.query_map(params![chatflow.to_string(), node_id], |row| {
                Ok(ChunkKey {
                    id: uuid_at(row, 0)?,
                    content_hash: row.get(1)?,
                    source: row.get(2)?,
                    dims: usize::try_from(row.get::<_, i64>(3)?).unwrap_or(0),
                })
            })?
            .collect()
        })
        .await
    }

    async fn write_vectors(&self, write: VectorWrite) -> StoreResult<UpsertRecord> {
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let chatflow = write.chatflow_id.to_string();
            {
                let mut delete = tx.prepare_cached(
                    "DELETE FROM vector_chunks WHERE id = ?1 AND chatflow_id = ?2 AND node_id = ?3",
                )?;
                for id in &write.deleted {
                    delete.execute(params![id.to_string(), chatflow, write.node_id])?;
                }
                let mut insert = tx.prepare_cached(
                    "INSERT INTO vector_chunks (id, chatflow_id, node_id, content_hash, source,
                                                chat_id, page_content, metadata, embedding)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )?;
                for c in &write.added {
                    insert.execute(params![
                        c.id.to_string(),
                        chatflow,
                        write.node_id,
                        c.content_hash,
                        c.source,
                        c.chat_id,
                        c.page_content,
                        json_text(&c.metadata)?,
                        embedding_bytes(&c.embedding),
                    ])?;
                }
            }
            tx.execute(
                "INSERT INTO vector_stores (chatflow_id, node_id, version) VALUES (?1, ?2, 1)
                 ON CONFLICT (chatflow_id, node_id) DO UPDATE SET version = version + 1",
                params![chatflow, write.node_id],
            )?;
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
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    record.id.to_string(),
                    chatflow,
                    record.node_id,
                    count(record.counts.num_added),
                    count(record.counts.num_updated),
                    count(record.counts.num_skipped),
                    count(record.counts.num_deleted),
                    to_millis(&record.date),
                ],
            )?;
            tx.commit()?;
            Ok(record)
        })
        .await
    }

    async fn list_upsert_history(
        &self,
        chatflow: Uuid,
        limit: u32,
    ) -> StoreResult<Vec<UpsertRecord>> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, chatflow_id, node_id, num_added, num_updated, num_skipped,
                        num_deleted, created_at
                 FROM upsert_history WHERE chatflow_id = ?1
                 ORDER BY created_at DESC, id DESC LIMIT ?2",
            )?;
            stmt.query_map(params![chatflow.to_string(), limit], |row| {
                let count = |i| row.get::<_, i64>(i).map(|n| u64::try_from(n).unwrap_or(0));
                Ok(UpsertRecord {
                    id: uuid_at(row, 0)?,
                    chatflow_id: uuid_at(row, 1)?,
                    node_id: row.get(2)?,
                    counts: UpsertCounts {
                        num_added: count(3)?,
                        num_updated: count(4)?,
                        num_skipped: count(5)?,
                        num_deleted: count(6)?,
                    },
                    date: from_millis(row.get(7)?),
                })
            })?
            .collect()
        })
        .await
    }

    async fn get_execution(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Execution>> {
        self.read(move |conn| get_execution(conn, Some(workspace), id))
            .await
    }

    async fn find_public_execution(&self, id: Uuid) -> StoreResult<Option<Execution>> {
        self.read(move |conn| Ok(get_execution(conn, None, id)?.filter(|found| found.is_public)))
            .await
    }

    async fn latest_execution(
        &self,
        agentflow: Uuid,
        session_id: &str,
    ) -> StoreResult<Option<Execution>> {
        let session_id = session_id.to_owned();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {EXECUTION_COLUMNS} FROM executions e
                 WHERE e.agentflow_id = ?1 AND e.session_id = ?2
                 ORDER BY e.created_at DESC, e.seq DESC LIMIT 1"
            ))?;
            stmt.query_row(
                params![agentflow.to_string(), session_id],
                execution_from_row,
            )
            .optional()
        })
        .await
    }

    async fn list_executions(
        &self,
        workspace: Uuid,
        filter: &ExecutionFilter,
        page: Page,
    ) -> StoreResult<Listing<ListedExecution>> {
        let filter = filter.clone();
        self.read(move |conn| {
            let (conditions, params) =
                sql::execution_conditions(sql::Dialect::Sqlite, workspace, &filter);
            let mut args: Vec<Value> = params.into_iter().map(sqlite_value).collect();
            // The chatflow is joined for counting only when its name is filtered on.
            let name_join = if filter.agentflow_name.is_some() {
                "JOIN chatflows c ON c.id = e.agentflow_id"
            } else {
                ""
            };
            let total: i64 = conn
                .prepare_cached(&format!(
                    "SELECT COUNT(*) FROM executions e {name_join} WHERE {conditions}"
                ))?
                .query_row(rusqlite::params_from_iter(&args), |r| r.get(0))?;
            let n = args.len();
            args.push(Value::Integer(i64::from(page.limit)));
            args.push(Value::Integer(
                i64::try_from(page.offset()).unwrap_or(i64::MAX),
            ));
            let items = conn
                .prepare_cached(&format!(
                    "SELECT {EXECUTION_COLUMNS}, c.name FROM executions e
                     JOIN chatflows c ON c.id = e.agentflow_id
                     WHERE {conditions}
                     ORDER BY e.updated_at DESC, e.seq DESC LIMIT ?{} OFFSET ?{}",
                    n + 1,
                    n + 2
                ))?
                .query_map(rusqlite::params_from_iter(&args), |row| {
                    let execution = execution_from_row(row)?;
                    Ok(ListedExecution {
                        agentflow: AgentflowRef {
                            id: execution.agentflow_id,
                            name: row.get(EXECUTION_COLUMN_COUNT)?,
                        },
                        execution,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(Listing {
                items,
                total: u64::try_from(total).unwrap_or(0),
            })
        })
        .await
    }

    async fn set_execution_public(
        &self,
        workspace: Uuid,
        id: Uuid,
        public: bool,
    ) -> StoreResult<Option<Execution>> {
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let Some(mut found) = get_execution(&tx, Some(workspace), id)? else {
                return Ok(None);
            };
            found.is_public = public;
            found.updated_date = time::now();
            write_execution(&tx, &found)?;
            tx.commit()?;
            Ok(Some(found))
        })
        .await
    }

    async fn delete_executions(&self, workspace: Uuid, ids: &[Uuid]) -> StoreResult<u64> {
        let ids: Vec<String> = ids.iter().map(Uuid::to_string).collect();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let mut deleted = 0;
            for id in ids {
                deleted += tx
                    .prepare_cached("DELETE FROM executions WHERE id = ?1 AND workspace_id = ?2")?
                    .execute(params![id, workspace.to_string()])?;
            }
            tx.commit()?;
            Ok(deleted as u64)
        })
        .await
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
                "INSERT INTO chat_messages ({MESSAGE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
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
            ])
            .map_err(backend)?;
            written.messages.push(r);
        }
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
