//! The hot-path layer over a backend: what every prediction would otherwise read
//! or write on its own.
//!
//! [`CachedStore`] wraps a [`Store`] and serves six reads from memory — API keys
//! by hash, chatflows by id, pages of a workspace's chatflows, a workspace's
//! chatflows published over MCP, and the triggers a webhook call is addressed
//! to (a chatflow's own, weir's by address) — and sends what runs and firings
//! write (conversation messages, execution records, webhook claims, firing
//! ends) through a [`GroupCommit`] per kind. Everything else passes straight
//! through.
//!
//! The caches never weaken what a write promises:
//! - A write through this store (revoking a key, creating, updating or deleting a
//!   chatflow or a trigger) takes effect at once for every later request of this process: the entry is
//!   dropped, and a read that started before the write cannot put its stale copy
//!   back (each cache has a generation, bumped by every invalidation; a fill from
//!   an older generation is discarded).
//! - A write made elsewhere (another replica on the same PostgreSQL, `weir keys
//!   revoke` from the command line) is seen once the entry is older than the
//!   time to live (`STORE_CACHE_TTL_MS`, default 1,000 ms): that is the bound on
//!   how long a revoked key or an old chatflow may still be used there.
//! - Every cache is bounded (entries past [`CAPACITY`] evict the stalest).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use uuid::Uuid;

use super::group_commit::GroupCommit;
use super::{
    ChatflowStore, ConversationStore, CredentialStore, DocumentStoreStore, ExecutionStore,
    KeyStore, RateLimitStore, ToolStore, TriggerStore, VariableStore, VectorStore,
};
use super::{ClaimPlanner, Listing, RunWrites, RunWritten, Store, StoreResult};
use super::{FiringClaim, FiringEnd};
use crate::domain::callback::{CallbackAttempt, CallbackState, OutboxCallback};
use crate::domain::credential::SealedCredential;
use crate::domain::mcp::CustomMcpServer;
use crate::domain::time::{self, Timestamp};
use crate::domain::vector::ChunkKey;
use crate::domain::{
    ApiKey, ChatMessageRecord, Chatflow, ChatflowPatch, ChatflowType, ChunkPage, Delivery,
    DocumentChunk, DocumentStore, DocumentStoreWrite, Execution, ExecutionFilter, Feedback,
    FeedbackFilter, Firing, Lead, ListedExecution, MessageFilter, NewApiKey, NewChatflow, NewLead,
    NewTool, NewVariable, OutboxMail, Page, StoredFile, Tool, ToolPatch, Trigger, TriggerResult,
    UpsertRecord, Variable, VariablePatch, VectorChunk, VectorWrite, Workspace,
};

/// Entries each cache holds at most.
pub const CAPACITY: usize = 4096;

/// A bounded map whose entries expire, with a generation that invalidations bump.
struct TtlCache<K, V> {
    ttl: Duration,
    state: Mutex<CacheState<K, V>>,
}

struct CacheState<K, V> {
    entries: HashMap<K, (Instant, V)>,
    generation: u64,
}

impl<K: Hash + Eq + Clone, V: Clone> TtlCache<K, V> {
    fn new(ttl: Duration) -> Self {
        TtlCache {
            ttl,
            state: Mutex::new(CacheState {
                entries: HashMap::new(),
                generation: 0,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CacheState<K, V>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The fresh entry for `key`, or the generation a fill must come from.
    fn get<Q>(&self, key: &Q) -> Result<V, u64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let state = self.state();
        match state.entries.get(key) {
            Some((at, value)) if at.elapsed() < self.ttl => Ok(value.clone()),
            _ => Err(state.generation),
        }
    }

    /// The fresh entry for `key`, else what `load` reads (kept when found, unless
    /// an invalidation came in between).
    async fn get_or_load<Q, E>(
        &self,
        key: &Q,
        load: impl Future<Output = Result<Option<V>, E>>,
    ) -> Result<Option<V>, E>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let generation = match self.get(key) {
            Ok(value) => return Ok(Some(value)),
            Err(generation) => generation,
        };
        let loaded = load.await?;
        if let Some(value) = &loaded {
            self.fill(key.to_owned(), value.clone(), generation);
        }
        Ok(loaded)
    }

    /// Keeps `value` unless something was invalidated since `generation` was read.
    fn fill(&self, key: K, value: V, generation: u64) {
        if self.ttl.is_zero() {
            return;
        }
        let mut state = self.state();
        if state.generation != generation {
            return;
        }
        if state.entries.len() >= CAPACITY && !state.entries.contains_key(&key) {
            let ttl = self.ttl;
            state.entries.retain(|_, (at, _)| at.elapsed() < ttl);
            let stalest = state
                .entries
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone());
            if let Some(stalest) = stalest.filter(|_| state.entries.len() >= CAPACITY) {
                state.entries.remove(&stalest);
            }
        }
        state.entries.insert(key, (Instant::now(), value));
    }

    /// Drops every entry `doomed` selects and fails the fills already under way.
    fn invalidate(&self, doomed: impl Fn(&K, &V) -> bool) {
        let mut state = self.state();
        state.generation += 1;
        state.entries.retain(|key, (_, value)| !doomed(key, value));
    }

    /// Changes the cached values `edit` selects, in place.
    fn update(&self, edit: impl Fn(&mut V)) {
        let mut state = self.state();
        for (_, value) in state.entries.values_mut() {
            edit(value);
        }
    }
}

/// A chatflow listing's cache key: workspace, type filter, page and limit.
type ListingKey = (Uuid, Option<ChatflowType>, u32, u32);

/// A [`Store`] with the hot-path reads cached and conversation writes grouped.
pub struct CachedStore {
    inner: Arc<dyn Store>,
    /// Keys by the SHA-256 hash of their secret.
    keys: TtlCache<String, ApiKey>,
    chatflows: TtlCache<Uuid, Arc<Chatflow>>,
    /// Pages of a workspace's chatflows, by (workspace, page, limit).
    listings: TtlCache<ListingKey, Arc<Listing<Chatflow>>>,
    /// A workspace's chatflows published over MCP (its MCP server reads them
    /// on every request).
    mcp_listings: TtlCache<Uuid, Arc<Vec<Arc<Chatflow>>>>,
    /// The chatflows' own triggers, by (workspace, chatflow), for calls.
    owned_triggers: TtlCache<(Uuid, Uuid), Trigger>,
    /// weir's webhook triggers by the address a call names.
    webhook_triggers: TtlCache<String, Arc<Vec<Trigger>>>,
    /// Runs' messages and execution records, committed in groups.
    writes: GroupCommit<RunWrites, RunWritten>,
    /// Webhook calls' claims of firings, committed in groups.
    claims: GroupCommit<FiringClaim, Option<Firing>>,
    /// Firings' ends with their results, committed in groups.
    ends: GroupCommit<FiringEnd, Option<TriggerResult>>,
}

impl CachedStore {
    /// Wraps `inner`; entries live at most `ttl` (zero turns caching off, the
    /// group commit stays). Must be called inside the Tokio runtime.
    pub fn new(inner: Arc<dyn Store>, ttl: Duration) -> Self {
        CachedStore {
            writes: GroupCommit::start(Arc::clone(&inner), |store, runs| {
                Box::pin(async move { store.write_runs(runs).await })
            }),
            claims: GroupCommit::start(Arc::clone(&inner), |store, claims| {
                Box::pin(async move { store.claim_webhook_firings(claims).await })
            }),
            ends: GroupCommit::start(Arc::clone(&inner), |store, ends| {
                Box::pin(async move { store.finish_firings(ends).await })
            }),
            owned_triggers: TtlCache::new(ttl),
            webhook_triggers: TtlCache::new(ttl),
            inner,
            keys: TtlCache::new(ttl),
            chatflows: TtlCache::new(ttl),
            listings: TtlCache::new(ttl),
            mcp_listings: TtlCache::new(ttl),
        }
    }
}

impl CachedStore {
    /// Runs a store `write` with what it changes forgotten before and after it:
    /// no request may use the old record once the write returns, and none that
    /// read it before can cache it again.
    async fn around<T>(forget: impl Fn(), write: impl Future<Output = T>) -> T {
        forget();
        let written = write.await;
        forget();
        written
    }

    /// Forgets every cached trigger (trigger writes are rare; a chatflow's
    /// save or delete changes or removes the trigger it owns).
    fn forget_triggers(&self) {
        self.owned_triggers.invalidate(|_, _| true);
        self.webhook_triggers.invalidate(|_, _| true);
    }

    /// Forgets a chatflow and the cached pages of its workspace's listing.
    fn forget_chatflow(&self, workspace: Uuid, id: Option<Uuid>) {
        if let Some(id) = id {
            self.chatflows.invalidate(|_, flow| flow.id == id);
        }
        self.listings
            .invalidate(|(ws, _, _, _), _| *ws == workspace);
        self.mcp_listings.invalidate(|ws, _| *ws == workspace);
        self.forget_triggers();
    }
}

#[async_trait]
impl Store for CachedStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
}

#[async_trait]
impl KeyStore for CachedStore {
    async fn ensure_workspace(&self, name: &str) -> StoreResult<Workspace> {
        self.inner.ensure_workspace(name).await
    }

    async fn find_workspace(&self, name: &str) -> StoreResult<Option<Workspace>> {
        self.inner.find_workspace(name).await
    }

    async fn create_api_key(&self, key: NewApiKey) -> StoreResult<ApiKey> {
        self.inner.create_api_key(key).await
    }

    async fn find_api_key_by_hash(&self, hash: &str) -> StoreResult<Option<ApiKey>> {
        self.keys
            .get_or_load(hash, self.inner.find_api_key_by_hash(hash))
            .await
    }

    async fn list_api_keys(&self, workspace: Option<Uuid>) -> StoreResult<Vec<ApiKey>> {
        self.inner.list_api_keys(workspace).await
    }

    async fn delete_api_key(&self, workspace: Option<Uuid>, id: Uuid) -> StoreResult<bool> {
        let forget = || self.keys.invalidate(|_, key| key.id == id);
        Self::around(forget, self.inner.delete_api_key(workspace, id)).await
    }

    async fn count_api_keys(&self) -> StoreResult<u64> {
        self.inner.count_api_keys().await
    }

    async fn touch_api_key(&self, id: Uuid) -> StoreResult<()> {
        let now = time::now();
        self.keys.update(|key| {
            if key.id == id {
                key.last_used_date = Some(now);
            }
        });
        self.inner.touch_api_key(id).await
    }
}

#[async_trait]
impl ChatflowStore for CachedStore {
    async fn create_chatflow(&self, flow: NewChatflow) -> StoreResult<Chatflow> {
        let workspace = flow.workspace_id;
        let forget = || self.forget_chatflow(workspace, None);
        Self::around(forget, self.inner.create_chatflow(flow)).await
    }

    async fn get_chatflow(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Chatflow>> {
        self.inner.get_chatflow(workspace, id).await
    }

    async fn list_chatflows(
        &self,
        workspace: Uuid,
        flow_type: Option<ChatflowType>,
        page: Page,
    ) -> StoreResult<Arc<Listing<Chatflow>>> {
        let load = async {
            self.inner
                .list_chatflows(workspace, flow_type, page)
                .await
                .map(Some)
        };
        let listing = self
            .listings
            .get_or_load(&(workspace, flow_type, page.page, page.limit), load)
            .await?;
        Ok(listing.unwrap_or_default())
    }

    async fn update_chatflow(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: ChatflowPatch,
    ) -> StoreResult<Option<Chatflow>> {
        let forget = || self.forget_chatflow(workspace, Some(id));
        Self::around(forget, self.inner.update_chatflow(workspace, id, patch)).await
    }

    async fn delete_chatflow(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        let forget = || self.forget_chatflow(workspace, Some(id));
        Self::around(forget, self.inner.delete_chatflow(workspace, id)).await
    }

    async fn find_chatflow(&self, id: Uuid) -> StoreResult<Option<Arc<Chatflow>>> {
        self.chatflows
            .get_or_load(&id, self.inner.find_chatflow(id))
            .await
    }

    async fn list_mcp_chatflows(&self, workspace: Uuid) -> StoreResult<Vec<Arc<Chatflow>>> {
        let load = async {
            let flows = self.inner.list_mcp_chatflows(workspace).await?;
            Ok::<_, crate::store::StoreError>(Some(Arc::new(flows)))
        };
        let listed = self.mcp_listings.get_or_load(&workspace, load).await?;
        Ok(listed.map(|flows| (*flows).clone()).unwrap_or_default())
    }
}

#[async_trait]
impl ConversationStore for CachedStore {
    async fn write_runs(&self, runs: Vec<RunWrites>) -> Vec<StoreResult<RunWritten>> {
        self.inner.write_runs(runs).await
    }

    async fn write_run(&self, writes: RunWrites) -> StoreResult<RunWritten> {
        self.writes.write(writes).await
    }

    async fn list_chat_messages(
        &self,
        chatflow: Uuid,
        chat_id: Option<&str>,
        last: Option<u32>,
    ) -> StoreResult<Vec<ChatMessageRecord>> {
        self.inner.list_chat_messages(chatflow, chat_id, last).await
    }

    async fn query_chat_messages(
        &self,
        chatflow: Uuid,
        filter: &MessageFilter,
        descending: bool,
    ) -> StoreResult<Vec<ChatMessageRecord>> {
        self.inner
            .query_chat_messages(chatflow, filter, descending)
            .await
    }

    async fn find_chat_message(&self, id: Uuid) -> StoreResult<Option<ChatMessageRecord>> {
        self.inner.find_chat_message(id).await
    }

    async fn delete_chat_messages(
        &self,
        chatflow: Uuid,
        filter: &MessageFilter,
    ) -> StoreResult<u64> {
        self.inner.delete_chat_messages(chatflow, filter).await
    }

    async fn rate_message(&self, feedback: Feedback) -> StoreResult<Feedback> {
        self.inner.rate_message(feedback).await
    }

    async fn get_feedback(&self, id: Uuid) -> StoreResult<Option<Feedback>> {
        self.inner.get_feedback(id).await
    }

    async fn update_feedback(&self, feedback: &Feedback) -> StoreResult<bool> {
        self.inner.update_feedback(feedback).await
    }

    async fn list_feedback(
        &self,
        chatflow: Uuid,
        filter: &FeedbackFilter,
    ) -> StoreResult<Vec<Feedback>> {
        self.inner.list_feedback(chatflow, filter).await
    }

    async fn feedback_of_messages(
        &self,
        chatflow: Uuid,
        messages: &[Uuid],
    ) -> StoreResult<Vec<Feedback>> {
        self.inner.feedback_of_messages(chatflow, messages).await
    }

    async fn get_agent_checkpoint(
        &self,
        chatflow: Uuid,
        session_id: &str,
    ) -> StoreResult<Option<String>> {
        self.inner.get_agent_checkpoint(chatflow, session_id).await
    }

    async fn put_agent_checkpoint(
        &self,
        chatflow: Uuid,
        session_id: &str,
        checkpoint: &str,
    ) -> StoreResult<()> {
        self.inner
            .put_agent_checkpoint(chatflow, session_id, checkpoint)
            .await
    }

    async fn create_lead(&self, lead: NewLead) -> StoreResult<Lead> {
        self.inner.create_lead(lead).await
    }

    async fn request_abort(&self, chatflow: Uuid, chat_id: &str, at: Timestamp) -> StoreResult<()> {
        self.inner.request_abort(chatflow, chat_id, at).await
    }

    async fn aborts_since(&self, since: Timestamp) -> StoreResult<Vec<(Uuid, String, Timestamp)>> {
        self.inner.aborts_since(since).await
    }

    async fn sweep_aborts(&self, before: Timestamp) -> StoreResult<u64> {
        self.inner.sweep_aborts(before).await
    }

    async fn add_token_usage(&self, workspace: Uuid, day: &str, tokens: u64) -> StoreResult<()> {
        self.inner.add_token_usage(workspace, day, tokens).await
    }

    async fn token_usage(&self, workspace: Uuid, day: &str) -> StoreResult<u64> {
        self.inner.token_usage(workspace, day).await
    }

    async fn list_leads(&self, chatflow: Uuid) -> StoreResult<Vec<Lead>> {
        self.inner.list_leads(chatflow).await
    }
}

#[async_trait]
impl RateLimitStore for CachedStore {
    async fn rate_limit_hit(
        &self,
        bucket: &str,
        window_start_ms: i64,
        window_ms: i64,
    ) -> StoreResult<u64> {
        self.inner
            .rate_limit_hit(bucket, window_start_ms, window_ms)
            .await
    }
}

#[async_trait]
impl VariableStore for CachedStore {
    async fn create_variable(&self, workspace: Uuid, var: NewVariable) -> StoreResult<Variable> {
        self.inner.create_variable(workspace, var).await
    }

    async fn get_variable(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Variable>> {
        self.inner.get_variable(workspace, id).await
    }

    async fn list_variables(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Variable>> {
        self.inner.list_variables(workspace, page).await
    }

    async fn update_variable(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: VariablePatch,
    ) -> StoreResult<Option<Variable>> {
        self.inner.update_variable(workspace, id, patch).await
    }

    async fn delete_variable(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.inner.delete_variable(workspace, id).await
    }
}

#[async_trait]
impl DocumentStoreStore for CachedStore {
    async fn create_document_store(&self, store: &DocumentStore) -> StoreResult<()> {
        self.inner.create_document_store(store).await
    }

    async fn get_document_store(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<DocumentStore>> {
        self.inner.get_document_store(workspace, id).await
    }

    async fn list_document_stores(
        &self,
        workspace: Uuid,
        page: Option<Page>,
    ) -> StoreResult<Listing<DocumentStore>> {
        self.inner.list_document_stores(workspace, page).await
    }

    async fn save_document_store(&self, write: DocumentStoreWrite) -> StoreResult<bool> {
        self.inner.save_document_store(write).await
    }

    async fn set_document_store_status(
        &self,
        id: Uuid,
        status: crate::domain::DocumentStoreStatus,
    ) -> StoreResult<bool> {
        self.inner.set_document_store_status(id, status).await
    }

    async fn set_document_store_users(&self, id: Uuid, where_used: &[Uuid]) -> StoreResult<bool> {
        self.inner.set_document_store_users(id, where_used).await
    }

    async fn delete_document_store(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.inner.delete_document_store(workspace, id).await
    }

    async fn document_chunks(
        &self,
        store: Uuid,
        loader: Option<Uuid>,
        window: Option<(u64, u64)>,
    ) -> StoreResult<ChunkPage> {
        self.inner.document_chunks(store, loader, window).await
    }

    async fn loader_files(&self, store: Uuid, loader: Uuid) -> StoreResult<Vec<StoredFile>> {
        self.inner.loader_files(store, loader).await
    }

    async fn find_document_chunks(
        &self,
        store: Uuid,
        contents: Vec<String>,
    ) -> StoreResult<Vec<DocumentChunk>> {
        self.inner.find_document_chunks(store, contents).await
    }
}

#[async_trait]
impl CredentialStore for CachedStore {
    async fn create_credential(&self, credential: &SealedCredential) -> StoreResult<()> {
        self.inner.create_credential(credential).await
    }

    async fn get_credential(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<SealedCredential>> {
        self.inner.get_credential(workspace, id).await
    }

    async fn get_credentials(
        &self,
        workspace: Uuid,
        ids: &[Uuid],
    ) -> StoreResult<Vec<SealedCredential>> {
        self.inner.get_credentials(workspace, ids).await
    }

    async fn list_credentials(
        &self,
        workspace: Uuid,
        credential_name: Option<&str>,
        page: Page,
    ) -> StoreResult<Listing<SealedCredential>> {
        self.inner
            .list_credentials(workspace, credential_name, page)
            .await
    }

    async fn update_credential(
        &self,
        credential: &SealedCredential,
        read_data: &str,
    ) -> StoreResult<bool> {
        self.inner.update_credential(credential, read_data).await
    }

    async fn delete_credential(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.inner.delete_credential(workspace, id).await
    }

    async fn credentials_sealed_by_other_keys(
        &self,
        key_id: &str,
    ) -> StoreResult<Vec<SealedCredential>> {
        self.inner.credentials_sealed_by_other_keys(key_id).await
    }
}

#[async_trait]
impl ToolStore for CachedStore {
    async fn create_tool(&self, workspace: Uuid, tool: NewTool) -> StoreResult<Tool> {
        self.inner.create_tool(workspace, tool).await
    }

    async fn get_tool(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Tool>> {
        self.inner.get_tool(workspace, id).await
    }

    async fn list_tools(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Tool>> {
        self.inner.list_tools(workspace, page).await
    }

    async fn update_tool(
        &self,
        workspace: Uuid,
        id: Uuid,
        patch: ToolPatch,
    ) -> StoreResult<Option<Tool>> {
        self.inner.update_tool(workspace, id, patch).await
    }

    async fn delete_tool(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.inner.delete_tool(workspace, id).await
    }

    async fn create_mcp_server(&self, server: &CustomMcpServer) -> StoreResult<()> {
        self.inner.create_mcp_server(server).await
    }

    async fn get_mcp_server(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<CustomMcpServer>> {
        self.inner.get_mcp_server(workspace, id).await
    }

    async fn list_mcp_servers(
        &self,
        workspace: Uuid,
        page: Page,
    ) -> StoreResult<Listing<CustomMcpServer>> {
        self.inner.list_mcp_servers(workspace, page).await
    }

    async fn update_mcp_server(&self, server: &CustomMcpServer) -> StoreResult<bool> {
        self.inner.update_mcp_server(server).await
    }

    async fn delete_mcp_server(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        self.inner.delete_mcp_server(workspace, id).await
    }
}

#[async_trait]
impl TriggerStore for CachedStore {
    async fn create_trigger(
        &self,
        trigger: Trigger,
        max_in_workspace: u64,
    ) -> StoreResult<Trigger> {
        let forget = || self.forget_triggers();
        Self::around(forget, self.inner.create_trigger(trigger, max_in_workspace)).await
    }

    async fn get_trigger(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Trigger>> {
        self.inner.get_trigger(workspace, id).await
    }

    async fn owned_trigger(&self, workspace: Uuid, chatflow: Uuid) -> StoreResult<Option<Trigger>> {
        self.inner.owned_trigger(workspace, chatflow).await
    }

    async fn owned_trigger_for_call(
        &self,
        workspace: Uuid,
        chatflow: Uuid,
    ) -> StoreResult<Option<Trigger>> {
        self.owned_triggers
            .get_or_load(
                &(workspace, chatflow),
                self.inner.owned_trigger(workspace, chatflow),
            )
            .await
    }

    async fn list_triggers(&self, workspace: Uuid, page: Page) -> StoreResult<Listing<Trigger>> {
        self.inner.list_triggers(workspace, page).await
    }

    async fn update_trigger(&self, trigger: &Trigger) -> StoreResult<bool> {
        let forget = || self.forget_triggers();
        Self::around(forget, self.inner.update_trigger(trigger)).await
    }

    async fn delete_trigger(&self, workspace: Uuid, id: Uuid) -> StoreResult<bool> {
        let forget = || self.forget_triggers();
        Self::around(forget, self.inner.delete_trigger(workspace, id)).await
    }

    async fn find_webhook_triggers(&self, address: &str) -> StoreResult<Vec<Trigger>> {
        let load = async {
            let found = self.inner.find_webhook_triggers(address).await?;
            Ok::<_, crate::store::StoreError>((!found.is_empty()).then(|| Arc::new(found)))
        };
        let found = self.webhook_triggers.get_or_load(address, load).await?;
        Ok(found.map(|found| (*found).clone()).unwrap_or_default())
    }

    async fn triggers_with_secrets_not_sealed_by(
        &self,
        sealed_prefix: &str,
    ) -> StoreResult<Vec<Trigger>> {
        self.inner
            .triggers_with_secrets_not_sealed_by(sealed_prefix)
            .await
    }

    async fn replace_trigger_secrets(&self, old: &Trigger, new: &Trigger) -> StoreResult<bool> {
        let forget = || self.forget_triggers();
        Self::around(forget, self.inner.replace_trigger_secrets(old, new)).await
    }

    async fn next_cron_due(&self) -> StoreResult<Option<Timestamp>> {
        self.inner.next_cron_due().await
    }

    async fn claim_due_triggers(
        &self,
        now: Timestamp,
        owner: Uuid,
        lease_until: Timestamp,
        limit: u32,
        plan: ClaimPlanner,
    ) -> StoreResult<Vec<Firing>> {
        self.inner
            .claim_due_triggers(now, owner, lease_until, limit, plan)
            .await
    }

    async fn claim_firing(&self, claim: FiringClaim) -> StoreResult<Option<Firing>> {
        let claimed = self.claims.write(claim).await?;
        if claimed.as_ref().is_some_and(|f| !f.trigger.enabled) {
            // The claim took its last execution: no cached copy may say it is on.
            self.forget_triggers();
        }
        Ok(claimed)
    }

    async fn claim_webhook_firings(
        &self,
        claims: Vec<FiringClaim>,
    ) -> Vec<StoreResult<Option<Firing>>> {
        self.inner.claim_webhook_firings(claims).await
    }

    async fn firing_exists(&self, firing: Uuid) -> StoreResult<bool> {
        self.inner.firing_exists(firing).await
    }

    async fn renew_leases(
        &self,
        owner: Uuid,
        firings: &[Uuid],
        lease_until: Timestamp,
    ) -> StoreResult<()> {
        self.inner.renew_leases(owner, firings, lease_until).await
    }

    async fn end_firing(&self, end: FiringEnd) -> StoreResult<Option<TriggerResult>> {
        self.ends.write(end).await
    }

    async fn finish_firings(
        &self,
        ends: Vec<FiringEnd>,
    ) -> Vec<StoreResult<Option<TriggerResult>>> {
        self.inner.finish_firings(ends).await
    }

    async fn expire_firings(&self, now: Timestamp, keep: u32) -> StoreResult<u64> {
        self.inner.expire_firings(now, keep).await
    }

    async fn list_trigger_results(
        &self,
        trigger: Uuid,
        limit: u32,
    ) -> StoreResult<Vec<TriggerResult>> {
        self.inner.list_trigger_results(trigger, limit).await
    }

    async fn delete_trigger_results(&self, trigger: Uuid, ids: &[Uuid]) -> StoreResult<u64> {
        self.inner.delete_trigger_results(trigger, ids).await
    }

    async fn recent_trigger_results(
        &self,
        triggers: &[Uuid],
        per_trigger: u32,
    ) -> StoreResult<Vec<TriggerResult>> {
        self.inner
            .recent_trigger_results(triggers, per_trigger)
            .await
    }

    async fn prune_trigger_history(
        &self,
        before: Timestamp,
        deliveries_before: Timestamp,
    ) -> StoreResult<u64> {
        self.inner
            .prune_trigger_history(before, deliveries_before)
            .await
    }

    async fn begin_delivery(
        &self,
        trigger: Uuid,
        delivery: &str,
        now: Timestamp,
    ) -> StoreResult<Delivery> {
        self.inner.begin_delivery(trigger, delivery, now).await
    }

    async fn finish_delivery(
        &self,
        trigger: Uuid,
        delivery: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()> {
        self.inner
            .finish_delivery(trigger, delivery, status, body)
            .await
    }

    async fn claim_mail(
        &self,
        now: Timestamp,
        claim_until: Timestamp,
    ) -> StoreResult<Vec<(OutboxMail, Option<Timestamp>)>> {
        self.inner.claim_mail(now, claim_until).await
    }

    async fn mail_sent(&self, ids: &[Uuid], at: Timestamp) -> StoreResult<()> {
        self.inner.mail_sent(ids, at).await
    }

    async fn mail_retry(&self, ids: &[Uuid], at: Timestamp, failed: bool) -> StoreResult<()> {
        self.inner.mail_retry(ids, at, failed).await
    }

    async fn any_trigger_with_email(&self) -> StoreResult<bool> {
        self.inner.any_trigger_with_email().await
    }

    async fn claim_callbacks(
        &self,
        now: Timestamp,
        claim_until: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<OutboxCallback>> {
        self.inner.claim_callbacks(now, claim_until, limit).await
    }

    async fn settle_callbacks(&self, attempts: &[CallbackAttempt]) -> StoreResult<()> {
        self.inner.settle_callbacks(attempts).await
    }

    async fn callbacks_of_results(&self, results: &[Uuid]) -> StoreResult<Vec<CallbackState>> {
        self.inner.callbacks_of_results(results).await
    }
}

#[async_trait]
impl VectorStore for CachedStore {
    async fn enable_pgvector(&self, wanted: bool) -> StoreResult<super::Pgvector> {
        self.inner.enable_pgvector(wanted).await
    }

    fn pgvector_in_use(&self) -> bool {
        self.inner.pgvector_in_use()
    }

    async fn nearest_vector_chunks(
        &self,
        chatflow: Uuid,
        node_id: &str,
        vector: &[f32],
        k: usize,
        chat_id: &str,
    ) -> StoreResult<Vec<(VectorChunk, f32)>> {
        self.inner
            .nearest_vector_chunks(chatflow, node_id, vector, k, chat_id)
            .await
    }

    async fn vector_store_version(&self, chatflow: Uuid, node_id: &str) -> StoreResult<i64> {
        self.inner.vector_store_version(chatflow, node_id).await
    }

    async fn list_vector_chunks(
        &self,
        chatflow: Uuid,
        node_id: &str,
    ) -> StoreResult<(i64, Vec<VectorChunk>)> {
        self.inner.list_vector_chunks(chatflow, node_id).await
    }

    async fn vector_chunk_keys(&self, chatflow: Uuid, node_id: &str) -> StoreResult<Vec<ChunkKey>> {
        self.inner.vector_chunk_keys(chatflow, node_id).await
    }

    async fn write_vectors(&self, write: VectorWrite) -> StoreResult<UpsertRecord> {
        self.inner.write_vectors(write).await
    }

    async fn list_upsert_history(
        &self,
        chatflow: Uuid,
        limit: u32,
    ) -> StoreResult<Vec<UpsertRecord>> {
        self.inner.list_upsert_history(chatflow, limit).await
    }
}

#[async_trait]
impl ExecutionStore for CachedStore {
    async fn get_execution(&self, workspace: Uuid, id: Uuid) -> StoreResult<Option<Execution>> {
        self.inner.get_execution(workspace, id).await
    }

    async fn find_public_execution(&self, id: Uuid) -> StoreResult<Option<Execution>> {
        self.inner.find_public_execution(id).await
    }

    async fn latest_execution(
        &self,
        agentflow: Uuid,
        session_id: &str,
    ) -> StoreResult<Option<Execution>> {
        self.inner.latest_execution(agentflow, session_id).await
    }

    async fn list_executions(
        &self,
        workspace: Uuid,
        filter: &ExecutionFilter,
        page: Page,
    ) -> StoreResult<Listing<ListedExecution>> {
        self.inner.list_executions(workspace, filter, page).await
    }

    async fn set_execution_public(
        &self,
        workspace: Uuid,
        id: Uuid,
        public: bool,
    ) -> StoreResult<Option<Execution>> {
        self.inner.set_execution_public(workspace, id, public).await
    }

    async fn delete_executions(&self, workspace: Uuid, ids: &[Uuid]) -> StoreResult<u64> {
        self.inner.delete_executions(workspace, ids).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_invalidation_fails_older_fills() {
        let cache: TtlCache<u32, &str> = TtlCache::new(Duration::from_millis(50));
        let generation = cache.get(&1).err().unwrap_or(u64::MAX);
        cache.fill(1, "one", generation);
        assert_eq!(cache.get(&1), Ok("one"));

        // A fill that began before an invalidation is discarded.
        let before = cache.get(&2).err().unwrap_or(u64::MAX);
        cache.invalidate(|_, v| *v == "one");
        assert!(cache.get(&1).is_err());
        cache.fill(2, "two", before);
        assert!(cache.get(&2).is_err());

        let now = cache.get(&3).err().unwrap_or(u64::MAX);
        cache.fill(3, "three", now);
        std::thread::sleep(Duration::from_millis(60));
        assert!(
            cache.get(&3).is_err(),
            "an entry older than the TTL is not served"
        );
    }

    #[test]
    fn a_zero_ttl_caches_nothing() {
        let cache: TtlCache<u32, u32> = TtlCache::new(Duration::ZERO);
        let generation = cache.get(&1).err().unwrap_or(u64::MAX);
        cache.fill(1, 1, generation);
        assert!(cache.get(&1).is_err());
    }

    #[test]
    fn a_full_cache_evicts_the_stalest_entry() {
        let cache: TtlCache<usize, usize> = TtlCache::new(Duration::from_secs(60));
        for i in 0..CAPACITY {
            let generation = cache.get(&i).err().unwrap_or(u64::MAX);
            cache.fill(i, i, generation);
        }
        let generation = cache.get(&CAPACITY).err().unwrap_or(u64::MAX);
        cache.fill(CAPACITY, CAPACITY, generation);
        assert!(cache.get(&0).is_err(), "the oldest entry made room");
        assert_eq!(cache.get(&CAPACITY), Ok(CAPACITY));
        assert_eq!(cache.get(&1), Ok(1));
    }
}
