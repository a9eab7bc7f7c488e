//! Storage: one [`Store`] speaking in domain types, made of area traits —
//! [`KeyStore`], [`ChatflowStore`], [`ConversationStore`] (what runs write,
//! agent checkpoints, leads), [`ExecutionStore`], [`TriggerStore`],
//! [`VectorStore`], [`DocumentStoreStore`], [`CredentialStore`], [`VariableStore`], [`ToolStore`],
//! [`RateLimitStore`] — and two implementations, each a folder with a file per
//! area (`sqlite/chatflows.rs`, `postgres/triggers.rs` …) beside its `mod.rs`
//! (connections, migrations, row readers).
//!
//! - [`SqliteStore`] (`sqlite/`): the embedded default, one file, WAL mode; every
//!   rusqlite call runs on the blocking pool so async threads never wait on disk.
//! - [`PostgresStore`] (`postgres/`): deadpool-postgres, for several replicas
//!   sharing one database.
//! - [`CachedStore`] (`cached.rs`): the layer [`open`] puts in front of either —
//!   API keys and chatflows cached with a bounded lifetime, what runs write
//!   (conversation messages, execution records) committed in groups
//!   (`group_commit.rs`).
//! - [`redis_history`]: apart from the store, a conversation a flow's Redis
//!   memory node keeps in the user's Redis (Flowise's `RedisBackedChatMemory`).
//!
//! Callers hold an `Arc<dyn Store>`: every area's methods are callable on it
//! without naming the area trait. SQL lives only in the two backends and
//! `sql.rs`, which holds what they share (column lists, the executions filter).
//! A trigger's cron bookkeeping is the domain's (`Trigger::advance`); the
//! backends only persist it. Each backend embeds its numbered migrations
//! (`migrations/<backend>/NNNN_name.sql`) and applies the missing ones at open.
//! Every method is scoped by workspace where the record belongs to one, so a
//! resource of another workspace is simply "not found". Unique-constraint
//! violations come back as [`StoreError::Conflict`].

mod cached;
mod group_commit;
mod migrations;
mod postgres;
pub mod redis_history;
mod sql;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use crate::config::StoreLocation;
use crate::domain::callback::{CallbackAttempt, CallbackState, OutboxCallback};
use crate::domain::credential::SealedCredential;
use crate::domain::mcp::CustomMcpServer;
use crate::domain::time::Timestamp;
use crate::domain::{
    ApiKey, ChatMessageRecord, Chatflow, ChatflowPatch, ChatflowType, ChunkPage, ClaimPlan,
    Delivery, DocumentChunk, DocumentStore, DocumentStoreWrite, Execution, ExecutionFilter,
    ExecutionUpdate, Feedback, FeedbackFilter, Firing, Lead, ListedExecution, MessageFilter,
    NewApiKey, NewChatMessage, NewChatflow, NewExecution, NewLead, NewMail, NewTool,
    NewTriggerResult, NewVariable, OutboxMail, Page, StoredFile, Tool, ToolPatch, Trigger,
    TriggerResult, UpsertRecord, Variable, VariablePatch, VectorChunk, VectorWrite, WebhookClaim,
    Workspace,
};

/// Decides, inside the claiming transaction, what a due cron trigger does now.
pub type ClaimPlanner = fn(&Trigger, Timestamp) -> ClaimPlan;

pub use cached::CachedStore;
pub use postgres::{PostgresOptions, PostgresStore};
pub use sqlite::SqliteStore;

#[derive(Debug, Clone, thiserror::Error)]
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

/// An empty page (not derived: that would ask `T: Default`).
impl<T> Default for Listing<T> {
    fn default() -> Self {
        Listing {
            items: Vec::new(),
            total: 0,
        }
    }
}

/// Everything weir keeps, by area: each backend implements every area trait
/// (`sqlite/`, `postgres/`: a file per area) and says what it is.
pub trait Store:
    KeyStore
    + ChatflowStore
    + ConversationStore
    + RateLimitStore
    + VariableStore
    + CredentialStore
    + ToolStore
    + TriggerStore
    + VectorStore
    + DocumentStoreStore
    + ExecutionStore
    + Send
    + Sync
    + 'static
{
    /// Short name of the backend, for logs and health output.
    fn backend(&self) -> &'static str;
}

/// Workspaces and API keys (kept hashed).
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// The workspace of that name, created when absent.
    async fn ensure_workspace(&self, name: &str) -> StoreResult<Workspace>;

    async fn find_workspace(&self, name: &str) -> StoreResult<Option<Workspace>>;

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
}

/// Chatflows.
#[async_trait]
pub trait ChatflowStore: Send + Sync {
    async fn create_chatflow(&self, flow: NewChatflow) -> StoreResult<Chatflow>;

    async fn get_chatflow(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Chatflow>>;

    /// Newest `updatedDate` first; only those of `flow_type` when given. Shared, as
    /// listings are cached (see [`CachedStore`]).
    async fn list_chatflows(
        &self,
        workspace: Uuid,
        flow_type: Option<ChatflowType>,
        page: Page,
    ) -> StoreResult<Arc<Listing<Chatflow>>>;

    /// Every chatflow of the workspace, newest `updatedDate` first (page after
    /// page of [`ChatflowStore::list_chatflows`]).
    async fn all_chatflows(&self, workspace: Uuid) -> StoreResult<Vec<Chatflow>> {
        let mut all = Vec::new();
        let mut page = Page {
            page: 1,
            limit: Page::MAX_LIMIT,
        };
        loop {
            let listing = self.list_chatflows(workspace, None, page).await?;
            all.extend(listing.items.iter().cloned());
            if listing.items.is_empty() || all.len() as u64 >= listing.total {
                return Ok(all);
            }
            page.page += 1;
        }
    }

    async fn update_chatflow(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: ChatflowPatch,
    ) -> StoreResult<Option<Chatflow>>;

    async fn delete_chatflow(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool>;

    /// A chatflow by id whatever its workspace: public chatflows are reached
    /// without a key, and callers check access themselves. Shared, as the
    /// prediction path reads it on every request (see [`CachedStore`]).
    async fn find_chatflow(&self, id: Uuid) -> StoreResult<Option<Arc<Chatflow>>>;
    /// The workspace's chatflows that have an MCP publication (enabled or not),
    /// oldest first.
    async fn list_mcp_chatflows(&self, workspace: Uuid) -> StoreResult<Vec<Arc<Chatflow>>>;
}

/// What runs write (conversation messages, execution records), agent checkpoints and leads.
#[async_trait]
pub trait ConversationStore: Send + Sync {
    /// Applies each run's writes (see [`RunWrites`]), all or none per run. The
    /// runs share one transaction where they can; one run's failure is its own,
    /// the others still commit. One outcome per run, in order.
    async fn write_runs(&self, runs: Vec<RunWrites>) -> Vec<StoreResult<RunWritten>>;

    /// One run's writes, all or none. [`CachedStore`] commits them together
    /// with other runs' (`group_commit.rs`).
    async fn write_run(&self, writes: RunWrites) -> StoreResult<RunWritten> {
        only_outcome(
            self.write_runs(vec![writes]).await,
            "the store answered no run",
        )
    }

    /// Appends messages in order, all or none.
    async fn append_chat_messages(
        &self,
        messages: Vec<NewChatMessage>,
    ) -> StoreResult<Vec<ChatMessageRecord>> {
        let writes = RunWrites {
            messages,
            ..RunWrites::default()
        };
        Ok(self.write_run(writes).await?.messages)
    }

    /// Messages of a chatflow, oldest first; of one session when `chat_id` is given;
    /// only the last `last` when given.
    async fn list_chat_messages(
        &self,
        chatflow: Uuid,
        chat_id: Option<&str>,
        last: Option<u32>,
    ) -> StoreResult<Vec<ChatMessageRecord>>;

    /// The messages of a chatflow that `filter` takes, oldest first (newest
    /// first when `descending`).
    async fn query_chat_messages(
        &self,
        chatflow: Uuid,
        filter: &MessageFilter,
        descending: bool,
    ) -> StoreResult<Vec<ChatMessageRecord>>;

    /// A message, by its id alone (feedback names only the message).
    async fn find_chat_message(&self, id: Uuid) -> StoreResult<Option<ChatMessageRecord>>;

    /// Deletes the messages of a chatflow that `filter` takes (their ratings go
    /// with them) and the agent checkpoints of the chats they were in: clearing
    /// a chat clears its memory.
    async fn delete_chat_messages(
        &self,
        chatflow: Uuid,
        filter: &MessageFilter,
    ) -> StoreResult<u64>;

    /// Rates a message: the message's rating replaced when it has one (same id).
    async fn rate_message(&self, feedback: Feedback) -> StoreResult<Feedback>;

    async fn get_feedback(&self, id: Uuid) -> StoreResult<Option<Feedback>>;

    /// Changes a rating's `rating` and `content`; whether it still existed.
    async fn update_feedback(&self, feedback: &Feedback) -> StoreResult<bool>;

    async fn list_feedback(
        &self,
        chatflow: Uuid,
        filter: &FeedbackFilter,
    ) -> StoreResult<Vec<Feedback>>;

    /// The ratings of these messages of a chatflow.
    async fn feedback_of_messages(
        &self,
        chatflow: Uuid,
        messages: &[Uuid],
    ) -> StoreResult<Vec<Feedback>>;

    /// The checkpoint (JSON text) a session's last run of the chatflow ended with.
    async fn get_agent_checkpoint(
        &self,
        chatflow: Uuid,
        session_id: &str,
    ) -> StoreResult<Option<String>>;

    /// Keeps `checkpoint` as the session's, replacing the one before.
    async fn put_agent_checkpoint(
        &self,
        chatflow: Uuid,
        session_id: &str,
        checkpoint: &str,
    ) -> StoreResult<()>;

    /// Keeps a lead: one per address and chat (a lead of an address the chat
    /// left before takes the name and phone given, keeping its id).
    async fn create_lead(&self, lead: NewLead) -> StoreResult<Lead>;

    /// Asks the chat's running prediction to stop (the latest ask is kept).
    async fn request_abort(&self, chatflow: Uuid, chat_id: &str, at: Timestamp) -> StoreResult<()>;

    /// The stops asked at or after `since`: (chatflow, chat, when asked).
    async fn aborts_since(&self, since: Timestamp) -> StoreResult<Vec<(Uuid, String, Timestamp)>>;

    /// Forgets the stops asked before `before`.
    async fn sweep_aborts(&self, before: Timestamp) -> StoreResult<u64>;

    /// Counts `tokens` to the workspace's `day` (`YYYY-MM-DD`, UTC).
    async fn add_token_usage(&self, workspace: Uuid, day: &str, tokens: u64) -> StoreResult<()>;

    /// The tokens counted to the workspace's `day`.
    async fn token_usage(&self, workspace: Uuid, day: &str) -> StoreResult<u64>;

    async fn list_leads(&self, chatflow: Uuid) -> StoreResult<Vec<Lead>>;
}

/// Rate-limit windows.
#[async_trait]
pub trait RateLimitStore: Send + Sync {
    /// Counts one hit in the fixed window `[window_start_ms, +window_ms)` of `bucket`
    /// and returns the hits so far in that window, this one included. Shared by every
    /// replica on PostgreSQL; per process on SQLite.
    async fn rate_limit_hit(
        &self,
        bucket: &str,
        window_start_ms: i64,
        window_ms: i64,
    ) -> StoreResult<u64>;
}

/// Workspace variables.
#[async_trait]
pub trait VariableStore: Send + Sync {
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

/// Credentials: sealed by the services; the store never sees a field's value.
#[async_trait]
pub trait CredentialStore: Send + Sync {
    async fn create_credential(&self, credential: &SealedCredential) -> StoreResult<()>;

    async fn get_credential(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<SealedCredential>>;

    /// Those of `ids` that are in the workspace (a prediction's in one query).
    async fn get_credentials(
        &self,
        workspace: Uuid,
        ids: &[Uuid],
    ) -> StoreResult<Vec<SealedCredential>>;

    /// Ordered by name; only those of type `credential_name` when given.
    async fn list_credentials(
        &self,
        workspace: Uuid,
        credential_name: Option<&str>,
        page: Page,
    ) -> StoreResult<Listing<SealedCredential>>;

    /// Writes the name, type, sealed data and update time of `credential` if its
    /// sealed data is still `read_data` (what the writer read): `false` when it is
    /// gone or changed meanwhile.
    async fn update_credential(
        &self,
        credential: &SealedCredential,
        read_data: &str,
    ) -> StoreResult<bool>;

    async fn delete_credential(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool>;

    /// Every credential sealed by a key other than `key_id` (to reseal at start).
    async fn credentials_sealed_by_other_keys(
        &self,
        key_id: &str,
    ) -> StoreResult<Vec<SealedCredential>>;
}

/// Stored tools.
#[async_trait]
pub trait ToolStore: Send + Sync {
    /// Stores a validated tool; a name taken in the workspace is a conflict.
    async fn create_tool(&self, workspace: Uuid, tool: NewTool) -> StoreResult<Tool>;

    async fn get_tool(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Tool>>;

    /// Ordered by name.
    async fn list_tools(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Tool>>;

    /// `None` when there is no such tool in the workspace.
    async fn update_tool(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: ToolPatch,
    ) -> StoreResult<Option<Tool>>;

    async fn delete_tool(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool>;

    /// Stores a workspace's MCP server (its id and times already set).
    async fn create_mcp_server(&self, server: &CustomMcpServer) -> StoreResult<()>;

    async fn get_mcp_server(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<CustomMcpServer>>;

    /// Oldest first, without their `tools` (listings stay small).
    async fn list_mcp_servers(
        &self,
        workspace: Uuid,
        page: Page,
    ) -> StoreResult<Listing<CustomMcpServer>>;

    /// Writes every field of a stored server; `false` when it no longer exists.
    async fn update_mcp_server(&self, server: &CustomMcpServer) -> StoreResult<bool>;

    async fn delete_mcp_server(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool>;
}

/// Triggers, their firings and results, webhook deliveries (replay protection) and the failure-mail outbox.
#[async_trait]
pub trait TriggerStore: Send + Sync {
    /// Stores a new trigger (its id and times already set) if its workspace has
    /// fewer than `max_in_workspace` triggers (counted and written atomically; a
    /// conflict otherwise). A webhook `node_id` another webhook trigger of the
    /// workspace uses is a conflict.
    async fn create_trigger(&self, trigger: Trigger, max_in_workspace: u64)
    -> StoreResult<Trigger>;

    async fn get_trigger(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Trigger>>;

    /// The trigger a chatflow's Start node made (`ownedByChatflow`), if any.
    async fn owned_trigger(&self, workspace: Uuid, chatflow: Uuid) -> StoreResult<Option<Trigger>>;

    /// [`owned_trigger`](TriggerStore::owned_trigger), read for a call at the
    /// chatflow's webhook address: [`CachedStore`] answers it from memory, as
    /// fresh as its chatflows (a write through it at once, a write elsewhere
    /// within `STORE_CACHE_TTL_MS`). The claim checks `enabled` and the limits
    /// again, so a cached copy never runs what the stored trigger refuses.
    async fn owned_trigger_for_call(
        &self,
        workspace: Uuid,
        chatflow: Uuid,
    ) -> StoreResult<Option<Trigger>> {
        self.owned_trigger(workspace, chatflow).await
    }

    /// Newest `createdDate` first.
    async fn list_triggers(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Trigger>>;

    /// Writes the definition of `trigger` (everything but `executionCount` and
    /// `lastExecuted`, which only firings change) in one statement; `false` when it
    /// no longer exists.
    async fn update_trigger(&self, trigger: &Trigger) -> StoreResult<bool>;

    /// Deletes a trigger with its results, deliveries, outbox and firings (a
    /// claimed firing that has not started then never starts).
    async fn delete_trigger(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool>;

    /// The webhook triggers `address` names: the one of that id, else the two
    /// oldest webhook triggers (of any workspace, enabled or not) on that node id,
    /// so the caller can tell a unique node id from a shared one. Triggers a
    /// chatflow owns are not among them (their address is the chatflow's).
    /// Read for every call: [`CachedStore`] answers it from memory as it does
    /// [`owned_trigger_for_call`](TriggerStore::owned_trigger_for_call).
    async fn find_webhook_triggers(&self, address: &str) -> StoreResult<Vec<Trigger>>;

    /// Every trigger (any workspace) with a webhook secret or a bot token that does
    /// not start with `sealed_prefix` (`sealed:<current key id>:`): what resealing
    /// at start has to move.
    async fn triggers_with_secrets_not_sealed_by(
        &self,
        sealed_prefix: &str,
    ) -> StoreResult<Vec<Trigger>>;

    /// Writes `new`'s webhook secret and bot token if the stored ones are still
    /// `old`'s (`false` when they changed meanwhile, or the trigger is gone).
    async fn replace_trigger_secrets(&self, old: &Trigger, new: &Trigger) -> StoreResult<bool>;

    /// The earliest `nextExecution` of an enabled cron trigger.
    async fn next_cron_due(&self) -> StoreResult<Option<Timestamp>>;

    /// Claims up to `limit` enabled cron triggers due at `now`, in one transaction
    /// that other replicas skip past: per trigger, `plan` decides; a run becomes a
    /// firing row (unique per trigger and scheduled time) owned by `owner` until
    /// `lease_until`, with `executionCount` + 1, `lastExecuted` and — at
    /// `maxExecutions` — `enabled = false`; skipped times become one `missed`
    /// result; `nextExecution` moves on. Returns the firings to run.
    async fn claim_due_triggers(
        &self,
        now: Timestamp,
        owner: Uuid,
        lease_until: Timestamp,
        limit: u32,
        plan: ClaimPlanner,
    ) -> StoreResult<Vec<Firing>>;

    /// Claims one webhook execution of an enabled trigger under its
    /// `maxExecutions` (the same bookkeeping as a cron claim), with the
    /// callback it owes when there is one (written in the same transaction);
    /// `None` when the trigger is gone, disabled or exhausted.
    async fn claim_webhook_firing(
        &self,
        trigger: Uuid,
        now: Timestamp,
        owner: Uuid,
        lease_until: Timestamp,
        call: WebhookClaim,
    ) -> StoreResult<Option<Firing>> {
        let claim = FiringClaim {
            trigger,
            now,
            owner,
            lease_until,
            call,
        };
        self.claim_firing(claim).await
    }

    /// [`claim_webhook_firing`](TriggerStore::claim_webhook_firing) of one
    /// claim. [`CachedStore`] claims it together with other calls'
    /// (`group_commit.rs`).
    async fn claim_firing(&self, claim: FiringClaim) -> StoreResult<Option<Firing>> {
        only_outcome(
            self.claim_webhook_firings(vec![claim]).await,
            "no outcome for the claim",
        )
    }

    /// Claims each webhook call's firing as [`claim_webhook_firing`] does, in
    /// order (calls of one trigger past its `maxExecutions` get `None`), in
    /// one transaction where the backend can; one claim's failure is its own.
    /// One outcome per claim, in order.
    ///
    /// [`claim_webhook_firing`]: TriggerStore::claim_webhook_firing
    async fn claim_webhook_firings(
        &self,
        claims: Vec<FiringClaim>,
    ) -> Vec<StoreResult<Option<Firing>>>;

    /// Whether a claimed firing still exists (deleting its trigger removes it).
    async fn firing_exists(&self, firing: Uuid) -> StoreResult<bool>;

    /// Extends the lease of `owner`'s running firings.
    async fn renew_leases(
        &self,
        owner: Uuid,
        firings: &[Uuid],
        lease_until: Timestamp,
    ) -> StoreResult<()>;

    /// Ends a firing: removes its row and stores its result (the failure mail
    /// and the body of the callback the firing owes, when given) in one
    /// transaction, then keeps the trigger's newest `keep` results. `None` when
    /// the trigger was deleted meanwhile.
    async fn finish_firing(
        &self,
        firing: Uuid,
        result: NewTriggerResult,
        mail: Option<NewMail>,
        callback_body: Option<String>,
        keep: u32,
    ) -> StoreResult<Option<TriggerResult>> {
        let end = FiringEnd {
            firing,
            leased: true,
            result,
            mail,
            callback_body,
            keep,
        };
        self.end_firing(end).await
    }

    /// Ends one firing, leased ([`finish_firing`]) or not (see
    /// [`FiringEnd::leased`]). [`CachedStore`] ends it together with other
    /// firings (`group_commit.rs`).
    ///
    /// [`finish_firing`]: TriggerStore::finish_firing
    async fn end_firing(&self, end: FiringEnd) -> StoreResult<Option<TriggerResult>> {
        only_outcome(
            self.finish_firings(vec![end]).await,
            "no outcome for the firing",
        )
    }

    /// Ends each firing as [`finish_firing`] does, in one transaction where the
    /// backend can (each trigger's results trimmed once, after the batch's
    /// results are in); one end's failure is its own. One outcome per end, in
    /// order.
    ///
    /// [`finish_firing`]: TriggerStore::finish_firing
    async fn finish_firings(&self, ends: Vec<FiringEnd>)
    -> Vec<StoreResult<Option<TriggerResult>>>;

    /// Records every firing whose lease ran out before `now` as failed (its
    /// owner died; it is never re-run), with the failure mail when the trigger
    /// has an address and an error body for the callback it owes. Returns how
    /// many.
    async fn expire_firings(&self, now: Timestamp, keep: u32) -> StoreResult<u64>;

    /// A trigger's results, newest first, at most `limit`.
    async fn list_trigger_results(
        &self,
        trigger: Uuid,
        limit: u32,
    ) -> StoreResult<Vec<TriggerResult>>;

    /// Deletes those of `ids` that are results of `trigger`; how many went.
    async fn delete_trigger_results(&self, trigger: Uuid, ids: &[Uuid]) -> StoreResult<u64>;

    /// The newest `per_trigger` results of each of `triggers`, newest first.
    async fn recent_trigger_results(
        &self,
        triggers: &[Uuid],
        per_trigger: u32,
    ) -> StoreResult<Vec<TriggerResult>>;

    /// Deletes results executed before `before`, delivery records, sent mail
    /// and settled callbacks older than `deliveries_before`.
    async fn prune_trigger_history(
        &self,
        before: Timestamp,
        deliveries_before: Timestamp,
    ) -> StoreResult<u64>;

    /// Records a delivery id for a trigger, or tells what became of it.
    async fn begin_delivery(
        &self,
        trigger: Uuid,
        delivery: &str,
        now: Timestamp,
    ) -> StoreResult<Delivery>;

    /// Stores the answer given to a delivery, replayed for repeats.
    async fn finish_delivery(
        &self,
        trigger: Uuid,
        delivery: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()>;

    /// Mail due at `now` and not sent, claimed until `claim_until`; each with the
    /// time its trigger's last mail went out.
    async fn claim_mail(
        &self,
        now: Timestamp,
        claim_until: Timestamp,
    ) -> StoreResult<Vec<(OutboxMail, Option<Timestamp>)>>;

    async fn mail_sent(&self, ids: &[Uuid], at: Timestamp) -> StoreResult<()>;

    /// Puts mail back for a later attempt at `at` (`attempts` + 1 when `failed`).
    async fn mail_retry(&self, ids: &[Uuid], at: Timestamp, failed: bool) -> StoreResult<()>;

    /// Whether any trigger has a `notificationEmail`.
    async fn any_trigger_with_email(&self) -> StoreResult<bool>;

    /// Up to `limit` callbacks with a body, neither delivered nor given up, due
    /// at `now`; claimed until `claim_until` (replicas skip each other's
    /// claims, and a replica dying mid-send frees them).
    async fn claim_callbacks(
        &self,
        now: Timestamp,
        claim_until: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<OutboxCallback>>;

    /// Records attempts (each counts one), in one transaction.
    async fn settle_callbacks(&self, attempts: &[CallbackAttempt]) -> StoreResult<()>;

    /// The callbacks of those of `results` that owe one.
    async fn callbacks_of_results(&self, results: &[Uuid]) -> StoreResult<Vec<CallbackState>>;
}

/// Vector stores: chunks, versions, upsert history, and pgvector where it is in use.
#[async_trait]
pub trait VectorStore: Send + Sync {
    /// Makes pgvector search the `postgres` node's chunks when the database
    /// offers it and `wanted`: installs the extension if it is not (needs the
    /// right to), adds the vector column and fills it for chunks stored
    /// before. Called once, at the server's start; the server says the outcome.
    async fn enable_pgvector(&self, _wanted: bool) -> StoreResult<Pgvector> {
        Ok(Pgvector::NotPostgres)
    }

    /// Whether [`VectorStore::enable_pgvector`](crate::store::VectorStore::enable_pgvector) put pgvector in use.
    fn pgvector_in_use(&self) -> bool {
        false
    }

    /// The `k` chunks of a vector store node nearest to `vector` by cosine
    /// distance, searched by pgvector (each with its similarity, 1 - distance),
    /// nearest first; chunks attached to a chat are seen only from that chat.
    /// Only while [`VectorStore::pgvector_in_use`](crate::store::VectorStore::pgvector_in_use).
    async fn nearest_vector_chunks(
        &self,
        _chatflow: Uuid,
        _node_id: &str,
        _vector: &[f32],
        _k: usize,
        _chat_id: &str,
    ) -> StoreResult<Vec<(VectorChunk, f32)>> {
        Err(StoreError::Backend("pgvector is not in use".into()))
    }

    /// The version of a vector store node's chunks: 0 before its first write,
    /// then moved on by every write (caches of its index compare it).
    async fn vector_store_version(&self, chatflow: Uuid, node_id: &str) -> StoreResult<i64>;

    /// Every chunk of a vector store node, oldest first, with the version read
    /// in the same snapshot.
    async fn list_vector_chunks(
        &self,
        chatflow: Uuid,
        node_id: &str,
    ) -> StoreResult<(i64, Vec<VectorChunk>)>;

    /// Keys of a node's stored chunks (what an upsert plans with): no text, no vectors.
    async fn vector_chunk_keys(
        &self,
        chatflow: Uuid,
        node_id: &str,
    ) -> StoreResult<Vec<crate::domain::ChunkKey>>;

    /// Applies an upsert in one transaction: deletes, inserts, moves the store's
    /// version on and records the upsert. Returns the record.
    async fn write_vectors(&self, write: VectorWrite) -> StoreResult<UpsertRecord>;

    /// A chatflow's upserts, newest first, at most `limit`.
    async fn list_upsert_history(
        &self,
        chatflow: Uuid,
        limit: u32,
    ) -> StoreResult<Vec<UpsertRecord>>;
}

/// Flowise's document stores: their rows, their loaders' chunks and files.
/// Their vectors are kept by [`VectorStore`] under the store's id.
#[async_trait]
pub trait DocumentStoreStore: Send + Sync {
    async fn create_document_store(&self, store: &DocumentStore) -> StoreResult<()>;

    async fn get_document_store(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<DocumentStore>>;

    /// The workspace's stores, last changed first; one page, or all of them.
    async fn list_document_stores(
        &self,
        workspace: Uuid,
        page: Option<Page>,
    ) -> StoreResult<Listing<DocumentStore>>;

    /// Writes the store's row, its chunk change and a loader's files in one
    /// transaction; `false` when the store is gone.
    async fn save_document_store(&self, write: DocumentStoreWrite) -> StoreResult<bool>;

    /// Sets only a store's status (what an insert job writes when it ends, so a
    /// change made to the store meanwhile is kept); `false` when it is gone.
    async fn set_document_store_status(
        &self,
        id: Uuid,
        status: crate::domain::DocumentStoreStatus,
    ) -> StoreResult<bool>;

    /// Sets only the chatflows a store lists as using it.
    async fn set_document_store_users(&self, id: Uuid, where_used: &[Uuid]) -> StoreResult<bool>;

    /// Deletes a store with its chunks, files and vectors.
    async fn delete_document_store(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool>;

    /// A store's chunks (of one loader, or all), by loader and number; a window
    /// `(offset, limit)` of them or all, with the selection's count and characters.
    async fn document_chunks(
        &self,
        store: Uuid,
        loader: Option<Uuid>,
        window: Option<(u64, u64)>,
    ) -> StoreResult<ChunkPage>;

    /// The files a loader reads, by name.
    async fn loader_files(&self, store: Uuid, loader: Uuid) -> StoreResult<Vec<StoredFile>>;

    /// The store's chunks whose text is one of `contents`.
    async fn find_document_chunks(
        &self,
        store: Uuid,
        contents: Vec<String>,
    ) -> StoreResult<Vec<DocumentChunk>>;
}

/// Agentflow executions.
/// An execution is written with its run (`ConversationStore::write_run`).
#[async_trait]
pub trait ExecutionStore: ConversationStore + Send + Sync {
    /// Starts an execution: `INPROGRESS`, `executionData` `"[]"`, not public.
    async fn create_execution(&self, execution: &NewExecution) -> StoreResult<Execution> {
        let writes = RunWrites {
            start_execution: Some(execution.clone()),
            ..RunWrites::default()
        };
        self.write_run(writes)
            .await?
            .started
            .ok_or_else(|| StoreError::Backend("the store started no execution".into()))
    }

    /// Applies `update` (and moves `updatedDate` on) in one transaction; `None`
    /// when there is no such execution. Not scoped: the engine that runs it calls.
    async fn update_execution(
        &self,
        id: Uuid,
        update: ExecutionUpdate,
    ) -> StoreResult<Option<Execution>> {
        let writes = RunWrites {
            update_execution: Some((id, update)),
            ..RunWrites::default()
        };
        Ok(self.write_run(writes).await?.updated)
    }

    async fn get_execution(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Execution>>;

    /// The public execution of that id, whatever its workspace (read without a key).
    async fn find_public_execution(&self, id: Uuid) -> StoreResult<Option<Execution>>;

    /// The newest (by `createdDate`) execution of a chatflow's session: where a
    /// paused run resumes and whose state a new run carries on.
    async fn latest_execution(
        &self,
        agentflow: Uuid,
        session_id: &str,
    ) -> StoreResult<Option<Execution>>;

    /// The workspace's executions matching `filter`, newest `updatedDate` first,
    /// each with its chatflow's id and name.
    async fn list_executions(
        &self,
        workspace: Uuid,
        filter: &ExecutionFilter,
        page: Page,
    ) -> StoreResult<Listing<ListedExecution>>;

    /// Shares (or stops sharing) an execution; moves `updatedDate` on. `None` when
    /// there is no such execution in the workspace.
    async fn set_execution_public(
        &self,
        workspace: Uuid,
        id: Uuid,
        public: bool,
    ) -> StoreResult<Option<Execution>>;

    /// Deletes those of `ids` that are the workspace's; returns how many.
    async fn delete_executions(&self, workspace: Uuid, ids: &[Uuid]) -> StoreResult<u64>;
}

/// What one run writes, applied all or none in this order: the execution it
/// starts, the update of an execution, the conversation messages (in order),
/// the end of the trigger firing it answers.
#[derive(Debug, Clone, Default)]
pub struct RunWrites {
    /// Started `INPROGRESS`, `executionData` `"[]"`, not public; a
    /// [`StoreError::Conflict`] when the chatflow is not in the workspace.
    pub start_execution: Option<NewExecution>,
    /// Applied (moving `updatedDate` on) when the execution exists and the
    /// update applies to it (see [`ExecutionUpdate::applies_to`]).
    pub update_execution: Option<(Uuid, ExecutionUpdate)>,
    pub messages: Vec<NewChatMessage>,
    /// A webhook call's firing, ended with the run's answer in the run's own
    /// transaction rather than in a write of its own, as
    /// [`TriggerStore::end_firing`] ends it.
    pub end_firing: Option<FiringEnd>,
}

/// What [`RunWrites`] stored.
#[derive(Debug, Default)]
pub struct RunWritten {
    /// The execution started, when one was asked for.
    pub started: Option<Execution>,
    /// The execution as updated; `None` when there was none to update or the
    /// update did not apply.
    pub updated: Option<Execution>,
    pub messages: Vec<ChatMessageRecord>,
    /// The firing's result as stored; `None` when there was no firing to end,
    /// or it was gone (see [`TriggerStore::end_firing`]).
    pub firing_result: Option<TriggerResult>,
}

/// One webhook call's claim of a firing (see [`TriggerStore::claim_webhook_firing`]).
#[derive(Debug, Clone)]
pub struct FiringClaim {
    pub trigger: Uuid,
    pub now: Timestamp,
    /// The replica that runs the firing, holding it until `lease_until`.
    pub owner: Uuid,
    pub lease_until: Timestamp,
    pub call: WebhookClaim,
}

/// The end of one firing (see [`TriggerStore::end_firing`]).
#[derive(Debug, Clone)]
pub struct FiringEnd {
    pub firing: Uuid,
    /// Claimed with a row (a cron firing, a call answered at once, a trigger
    /// under `maxExecutions`): the end removes it, and stores nothing when it
    /// is gone. Otherwise (a call whose caller waits, on a trigger without a
    /// limit) nothing was written before the run: the end counts the
    /// execution (`executionCount`, `lastExecuted`) with its result, and
    /// stores nothing when the trigger is gone.
    pub leased: bool,
    pub result: NewTriggerResult,
    pub mail: Option<NewMail>,
    pub callback_body: Option<String>,
    /// How many of the trigger's newest results are kept.
    pub keep: u32,
}

/// What [`VectorStore::enable_pgvector`](crate::store::VectorStore::enable_pgvector) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pgvector {
    /// SQLite: vector stores are searched in weir's own index.
    NotPostgres,
    /// Turned off by configuration.
    Off,
    /// The database does not offer the extension.
    Unavailable,
    /// Offered but could not be installed or set up (the database's reason).
    Refused(String),
    /// In use: the extension's version, and how many chunks stored before were
    /// given their vectors now.
    Enabled { version: String, backfilled: u64 },
}

/// Opens the configured store, applies pending migrations, and puts the
/// hot-path layer ([`CachedStore`]: caches living at most `cache_ttl`, group
/// commit of runs' writes) in front of it.
pub async fn open(
    location: &StoreLocation,
    cache_ttl: std::time::Duration,
) -> StoreResult<Arc<dyn Store>> {
    let backend: Arc<dyn Store> = match location {
        StoreLocation::Sqlite(path) => Arc::new(SqliteStore::open(path).await?),
        StoreLocation::Postgres {
            url,
            schema,
            options,
        } => Arc::new(PostgresStore::connect(url, schema.as_deref(), *options).await?),
    };
    Ok(Arc::new(CachedStore::new(backend, cache_ttl)))
}

/// The outcome of a batch of one write (`missing` when the backend answered
/// none).
fn only_outcome<T>(mut outcomes: Vec<StoreResult<T>>, missing: &str) -> StoreResult<T> {
    outcomes
        .pop()
        .unwrap_or_else(|| Err(StoreError::Backend(missing.to_owned())))
}

/// Replaces a backend's generic conflict text with one a user understands.
fn conflict_as(message: String) -> impl FnOnce(StoreError) -> StoreError {
    move |e| match e {
        StoreError::Conflict(_) => StoreError::Conflict(message),
        other => other,
    }
}
