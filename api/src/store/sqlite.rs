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
use rusqlite::{Connection, ErrorCode, OptionalExtension, Row, params};
use uuid::Uuid;

use super::migrations::{self, Migration};
use super::{Listing, Store, StoreError, StoreResult, conflict_as};
use crate::domain::time::{self, from_millis, to_millis};
use crate::domain::variable;
use crate::domain::{
    ApiKey, ChatMessageRecord, Chatflow, ChatflowPatch, ChatflowType, Lead, MessageRole, NewApiKey,
    NewChatMessage, NewChatflow, NewVariable, Page, Permission, Variable, VariablePatch,
    VariableType, Workspace,
};

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
                Ok::<_, StoreError>(conn)
            };
            let mut conn = open()?;
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

const CHATFLOW_COLUMNS: &str = "id, workspace_id, name, flow_data, deployed, is_public, apikeyid, \
     chatbot_config, api_config, category, type, created_at, updated_at";

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
        api_config: row.get(8)?,
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
            f.api_config,
            f.category,
            f.flow_type.as_str(),
            to_millis(&f.created_date),
            to_millis(&f.updated_date),
        ],
    )
}

const VARIABLE_COLUMNS: &str = "id, name, value, type, created_at, updated_at";

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

fn get_chatflow(conn: &Connection, ws: Uuid, id: Uuid) -> rusqlite::Result<Option<Chatflow>> {
    conn.query_row(
        &format!("SELECT {CHATFLOW_COLUMNS} FROM chatflows WHERE id = ?1 AND workspace_id = ?2"),
        params![id.to_string(), ws.to_string()],
        chatflow_from_row,
    )
    .optional()
}

fn get_variable(conn: &Connection, ws: Uuid, id: Uuid) -> rusqlite::Result<Option<Variable>> {
    conn.query_row(
        &format!("SELECT {VARIABLE_COLUMNS} FROM variables WHERE id = ?1 AND workspace_id = ?2"),
        params![id.to_string(), ws.to_string()],
        variable_from_row,
    )
    .optional()
}

fn list_page<T>(
    conn: &Connection,
    count_sql: &str,
    page_sql: &str,
    ws: Uuid,
    page: Page,
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Listing<T>> {
    let ws = ws.to_string();
    let total: i64 = conn.query_row(count_sql, [&ws], |r| r.get(0))?;
    let offset = i64::try_from(page.offset()).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached(page_sql)?;
    let items = stmt
        .query_map(params![ws, i64::from(page.limit), offset], map)?
        .collect::<rusqlite::Result<Vec<T>>>()?;
    Ok(Listing {
        items,
        total: u64::try_from(total).unwrap_or(0),
    })
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

const MESSAGE_COLUMNS: &str =
    "id, chatflow_id, chat_id, role, content, source_documents, used_tools, created_at";

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

    async fn list_chatflows(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Chatflow>> {
        self.read(move |conn| {
            list_page(
                conn,
                "SELECT COUNT(*) FROM chatflows WHERE workspace_id = ?1",
                &format!(
                    "SELECT {CHATFLOW_COLUMNS} FROM chatflows WHERE workspace_id = ?1
                     ORDER BY updated_at DESC, id LIMIT ?2 OFFSET ?3"
                ),
                workspace,
                page,
                chatflow_from_row,
            )
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
                workspace,
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

    async fn find_chatflow(&self, id: Uuid) -> StoreResult<Option<Chatflow>> {
        self.read(move |conn| {
            conn.query_row(
                &format!("SELECT {CHATFLOW_COLUMNS} FROM chatflows WHERE id = ?1"),
                [id.to_string()],
                chatflow_from_row,
            )
            .optional()
        })
        .await
    }

    async fn append_chat_messages(
        &self,
        messages: Vec<NewChatMessage>,
    ) -> StoreResult<Vec<ChatMessageRecord>> {
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let now = time::now();
            let mut records = Vec::with_capacity(messages.len());
            {
                let mut stmt = tx.prepare_cached(&format!(
                    "INSERT INTO chat_messages ({MESSAGE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
                ))?;
                for m in messages {
                    let r = m.into_record(Uuid::new_v4(), now);
                    stmt.execute(params![
                        r.id.to_string(),
                        r.chatflow_id.to_string(),
                        r.chat_id,
                        r.role.as_str(),
                        r.content,
                        r.source_documents,
                        r.used_tools,
                        to_millis(&r.created_date),
                    ])?;
                    records.push(r);
                }
            }
            tx.commit()?;
            Ok(records)
        })
        .await
    }

    async fn list_chat_messages(
        &self,
        chatflow: Uuid,
        chat_id: Option<&str>,
        last: Option<u32>,
    ) -> StoreResult<Vec<ChatMessageRecord>> {
        let chat_id = chat_id.map(str::to_owned);
        self.read(move |conn| {
            // The newest `last` rows, returned oldest first.
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {MESSAGE_COLUMNS} FROM (
                   SELECT seq, {MESSAGE_COLUMNS} FROM chat_messages
                   WHERE chatflow_id = ?1 AND (?2 IS NULL OR chat_id = ?2)
                   ORDER BY seq DESC LIMIT ?3
                 ) ORDER BY seq"
            ))?;
            let limit = last.map_or(-1, i64::from);
            stmt.query_map(
                params![chatflow.to_string(), chat_id, limit],
                message_from_row,
            )?
            .collect()
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
            conn.execute(
                "DELETE FROM chat_messages WHERE chatflow_id = ?1 AND (?2 IS NULL OR chat_id = ?2)",
                params![chatflow.to_string(), chat_id],
            )
            .map(|n| n as u64)
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
}
