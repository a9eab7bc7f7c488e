//! Storage: one [`Store`] trait speaking in domain types, two implementations.
//!
//! - [`SqliteStore`] (`sqlite.rs`): the embedded default, one file, WAL mode; every
//!   rusqlite call runs on the blocking pool so async threads never wait on disk.
//! - [`PostgresStore`] (`postgres.rs`): deadpool-postgres, for several replicas
//!   sharing one database.
//!
//! SQL lives only in those two files. Each backend embeds its numbered migrations
//! (`migrations/<backend>/NNNN_name.sql`) and applies the missing ones at open.
//! Every method is scoped by workspace where the record belongs to one, so a
//! resource of another workspace is simply "not found". Unique-constraint
//! violations come back as [`StoreError::Conflict`].

mod migrations;
mod postgres;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use crate::config::StoreLocation;
use crate::domain::{
    ApiKey, ChatMessageRecord, Chatflow, ChatflowPatch, Lead, NewApiKey, NewChatMessage,
    NewChatflow, NewVariable, Page, Variable, VariablePatch, Workspace,
};

pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule was broken; the text says which, in user terms.
    #[error("{0}")]
    Conflict(String),
    /// The backend failed (I/O, connection, SQL). Logged, never shown to clients.
    #[error("store backend failure: {0}")]
    Backend(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A page of records plus the total count across all pages.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing<T> {
    pub items: Vec<T>,
    pub total: u64,
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Short name of the backend, for logs and health output.
    fn backend(&self) -> &'static str;

    // Workspaces
    /// The workspace of that name, created when absent.
    async fn ensure_workspace(&self, name: &str) -> StoreResult<Workspace>;
    async fn find_workspace(&self, name: &str) -> StoreResult<Option<Workspace>>;

    // API keys
    async fn create_api_key(&self, key: NewApiKey) -> StoreResult<ApiKey>;
    /// The key whose SHA-256 hash is `hash`, if it exists (not revoked).
    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>>;
    /// Keys of one workspace, or of all when `workspace` is `None` (CLI only).
    async fn list_api_keys(&self, workspace: Option<Uuid>) -> StoreResult<Vec<ApiKey>>;
    /// Revokes (deletes) a key; `false` when there is no such key in scope.
    async fn delete_api_key(&self, workspace: Option<Uuid>, id: Uuid) -> StoreResult<bool>;
    async fn count_api_keys(&self) -> StoreResult<u64>;
    /// Records a use of the key (coarse: callers throttle how often).
    async fn touch_api_key(&self, id: Uuid) -> StoreResult<()>;

    // Chatflows
    async fn create_chatflow(&self, flow: NewChatflow) -> StoreResult<Chatflow>;
    async fn get_chatflow(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Chatflow>>;
    /// Newest `updatedDate` first.
    async fn list_chatflows(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Chatflow>>;
    async fn update_chatflow(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: ChatflowPatch,
    ) -> StoreResult<Option<Chatflow>>;
    async fn delete_chatflow(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool>;
    /// A chatflow by id whatever its workspace: public chatflows are reached
    /// without a key, and callers check access themselves.
    async fn find_chatflow(&self, id: Uuid) -> StoreResult<Option<Chatflow>>;

    // Conversation memory
    /// Appends messages in order, all or none.
    async fn append_chat_messages(
        &self,
        messages: Vec<NewChatMessage>,
    ) -> StoreResult<Vec<ChatMessageRecord>>;
    /// Messages of a chatflow, oldest first; of one session when `chat_id` is given;
    /// only the last `last` when given.
    async fn list_chat_messages(
        &self,
        chatflow: Uuid,
        chat_id: Option<&str>,
        last: Option<u32>,
    ) -> StoreResult<Vec<ChatMessageRecord>>;
    /// Deletes a chatflow's messages (one session's when `chat_id` is given).
    async fn delete_chat_messages(&self, chatflow: Uuid, chat_id: Option<&str>)
    -> StoreResult<u64>;

    // Leads
    async fn create_lead(&self, chatflow: Uuid, chat_id: &str, email: &str) -> StoreResult<Lead>;
    async fn list_leads(&self, chatflow: Uuid) -> StoreResult<Vec<Lead>>;

    // Rate limits
    /// Counts one hit in the fixed window `[window_start_ms, +window_ms)` of `bucket`
    /// and returns the hits so far in that window, this one included. Shared by every
    /// replica on PostgreSQL; per process on SQLite.
    async fn rate_limit_hit(
        &self,
        bucket: &str,
        window_start_ms: i64,
        window_ms: i64,
    ) -> StoreResult<u64>;

    // Variables
    async fn create_variable(&self, workspace: Uuid, var: NewVariable) -> StoreResult<Variable>;
    async fn get_variable(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Variable>>;
    /// Ordered by name.
    async fn list_variables(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Variable>>;
    async fn update_variable(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: VariablePatch,
    ) -> StoreResult<Option<Variable>>;
    async fn delete_variable(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool>;
}

/// Opens the configured store and applies pending migrations.
pub async fn open(location: &StoreLocation) -> StoreResult<Arc<dyn Store>> {
    Ok(match location {
        StoreLocation::Sqlite(path) => Arc::new(SqliteStore::open(path).await?),
        StoreLocation::Postgres { url, schema } => {
            Arc::new(PostgresStore::connect(url, schema.as_deref()).await?)
        }
    })
}

/// Replaces a backend's generic conflict text with one a user understands.
fn conflict_as(message: String) -> impl FnOnce(StoreError) -> StoreError {
    move |e| match e {
        StoreError::Conflict(_) => StoreError::Conflict(message),
        other => other,
    }
}
