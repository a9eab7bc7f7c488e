//! The PostgreSQL store (deadpool-postgres + tokio-postgres): the backend for
//! several replicas sharing one database.
//!
//! An optional schema (`DATABASE_SCHEMA`) is created at connect and set as the
//! `search_path` of every pooled connection, so installations and test runs can
//! share a database. Migrations run under an advisory lock, so replicas starting
//! together apply each one exactly once. Statements are prepared once per
//! connection (`prepare_cached`).

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::error::SqlState;
use tokio_postgres::{NoTls, Row};
use uuid::Uuid;

use super::migrations::{self, Migration};
use super::{Listing, Store, StoreError, StoreResult, conflict_as};
use crate::domain::time;
use crate::domain::variable;
use crate::domain::{
    ApiKey, ChatMessageRecord, Chatflow, ChatflowPatch, ChatflowType, Lead, MessageRole, NewApiKey,
    NewChatMessage, NewChatflow, NewVariable, Page, Permission, Variable, VariablePatch,
    VariableType, Workspace,
};

/// Connections kept per replica.
const POOL_SIZE: usize = 16;

#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
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
        let store = PostgresStore { pool };
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

    async fn list_page<T>(
        &self,
        count_sql: &str,
        page_sql: &str,
        workspace: Uuid,
        page: Page,
        map: fn(&Row) -> PgResult<T>,
    ) -> StoreResult<Listing<T>> {
        let client = self.client().await?;
        let count = client.prepare_cached(count_sql).await.map_err(backend)?;
        let total: i64 = client
            .query_one(&count, &[&workspace])
            .await
            .and_then(|r| r.try_get(0))
            .map_err(backend)?;
        let offset = i64::try_from(page.offset()).unwrap_or(i64::MAX);
        let stmt = client.prepare_cached(page_sql).await.map_err(backend)?;
        let rows = client
            .query(&stmt, &[&workspace, &i64::from(page.limit), &offset])
            .await
            .map_err(backend)?;
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

const CHATFLOW_COLUMNS: &str = "id, workspace_id, name, flow_data, deployed, is_public, apikeyid, \
     chatbot_config, api_config, category, type, created_at, updated_at";

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
        api_config: row.try_get(8)?,
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
                &f.api_config,
                &f.category,
                &f.flow_type.as_str(),
                &f.created_date,
                &f.updated_date,
            ],
        )
        .await
}

const VARIABLE_COLUMNS: &str = "id, name, value, type, created_at, updated_at";

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

fn workspace_from_row(row: &Row) -> PgResult<Workspace> {
    Ok(Workspace {
        id: row.try_get(0)?,
        name: row.try_get(1)?,
    })
}

const MESSAGE_COLUMNS: &str =
    "id, chatflow_id, chat_id, role, content, source_documents, used_tools, created_at";

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

    async fn list_chatflows(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Chatflow>> {
        self.list_page(
            "SELECT COUNT(*) FROM chatflows WHERE workspace_id = $1",
            &format!(
                "SELECT {CHATFLOW_COLUMNS} FROM chatflows WHERE workspace_id = $1
                 ORDER BY updated_at DESC, id LIMIT $2 OFFSET $3"
            ),
            workspace,
            page,
            chatflow_from_row,
        )
        .await
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
            workspace,
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

    async fn find_chatflow(&self, id: Uuid) -> StoreResult<Option<Chatflow>> {
        self.query_opt(
            &format!("SELECT {CHATFLOW_COLUMNS} FROM chatflows WHERE id = $1"),
            &[&id],
            chatflow_from_row,
        )
        .await
    }

    async fn append_chat_messages(
        &self,
        messages: Vec<NewChatMessage>,
    ) -> StoreResult<Vec<ChatMessageRecord>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(backend)?;
        let stmt = tx
            .prepare_cached(&format!(
                "INSERT INTO chat_messages ({MESSAGE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
            ))
            .await
            .map_err(backend)?;
        let now = time::now();
        let mut records = Vec::with_capacity(messages.len());
        for m in messages {
            let r = m.into_record(Uuid::new_v4(), now);
            tx.execute(
                &stmt,
                &[
                    &r.id,
                    &r.chatflow_id,
                    &r.chat_id,
                    &r.role.as_str(),
                    &r.content,
                    &r.source_documents,
                    &r.used_tools,
                    &r.created_date,
                ],
            )
            .await
            .map_err(backend)?;
            records.push(r);
        }
        tx.commit().await.map_err(backend)?;
        Ok(records)
    }

    async fn list_chat_messages(
        &self,
        chatflow: Uuid,
        chat_id: Option<&str>,
        last: Option<u32>,
    ) -> StoreResult<Vec<ChatMessageRecord>> {
        let limit: Option<i64> = last.map(i64::from);
        self.query_all(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM (
                   SELECT seq, {MESSAGE_COLUMNS} FROM chat_messages
                   WHERE chatflow_id = $1 AND ($2::text IS NULL OR chat_id = $2)
                   ORDER BY seq DESC LIMIT $3
                 ) recent ORDER BY seq"
            ),
            &[&chatflow, &chat_id, &limit],
            message_from_row,
        )
        .await
    }

    async fn delete_chat_messages(
        &self,
        chatflow: Uuid,
        chat_id: Option<&str>,
    ) -> StoreResult<u64> {
        self.execute(
            "DELETE FROM chat_messages WHERE chatflow_id = $1 AND ($2::text IS NULL OR chat_id = $2)",
            &[&chatflow, &chat_id],
        )
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
}
