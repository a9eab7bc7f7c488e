//! The services floor: what running a chatflow and automating it needs, below the
//! HTTP edge and above the engine and the store.
//!
//! [`Services`] is one cheap-to-clone handle (store, configuration, plan cache,
//! model providers, trigger signals). The prediction route, the webhook route and
//! the cron scheduler all call into the same services with it; nothing here takes
//! an HTTP type. Failures are [`ServiceError`]s, which the edge maps to statuses.
//!
//! - [`prediction`]: asking a chatflow a question (sessions, memory, the run);
//!   with [`prediction::agentflow`], what an agentflow run keeps between
//!   requests (executions, state, a stopped run taken up), and
//!   [`prediction::subflow`], a chatflow run for another's
//!   `executeFlowAgentflow` node.
//! - [`triggers`]: cron and webhook triggers — definitions, schedule, firing,
//!   webhook verification, Telegram, failure e-mail,
//!   callbacks.
//! - [`vectors`]: vector stores — upserts, and the searches runs make.
//! - [`document_stores`]: Flowise's document stores — loaders, chunks a person
//!   edits, and their vector store.
//! - [`credentials`]: credentials sealed at rest and opened for the runs that use them.
//! - [`in_flight`]: the bound on a workspace's predictions running at once.
//! - [`uploads`]: the files chats bring, kept within a quota and swept.
//! - [`aborts`]: stopping a chat's running prediction on whichever replica runs it.
//! - [`token_budget`]: a workspace's daily token budget.
//! - [`sealed`]: values kept sealed with the server's key, in their text form.
//! - [`mcp`]: chatflows published as MCP tools, and the protocol clients call them by.
//! - [`mcp_servers`]: a workspace's remote MCP servers (`/custom-mcp-servers`), for its flows.

pub mod aborts;
pub mod credentials;
pub mod document_stores;
pub mod in_flight;
pub mod load_methods;
pub mod mcp;
pub mod mcp_servers;
pub mod prediction;
pub mod sealed;
pub mod token_budget;
pub mod triggers;
pub mod uploads;
pub mod vectors;

use std::sync::Arc;

use tokio::sync::Notify;
use uuid::Uuid;

use crate::config::Config;
use crate::flow::tools::ToolClients;
use crate::flow::tools::python::RuntimeClient;
use crate::flow::tools::sql::SqlClient;
use crate::flow::tools::web::WebClient;
use crate::flow::{FlowError, PlanCache};
use crate::llm::connect::Models;
use crate::store::{Store, StoreError};

/// What every service call can reach: a handle to the [`ServiceSet`], cheap to
/// clone — one reference count, however many services there are (axum clones
/// the state for every extraction of every request, and a prediction keeps one).
#[derive(Clone)]
pub struct Services(Arc<ServiceSet>);

impl std::ops::Deref for Services {
    type Target = ServiceSet;

    fn deref(&self) -> &ServiceSet {
        &self.0
    }
}

/// The services themselves, shared by every handle.
pub struct ServiceSet {
    pub store: Arc<dyn Store>,
    pub config: Arc<Config>,
    /// Validated flow plans, per chatflow version.
    pub plans: Arc<PlanCache>,
    /// Chat model providers (one pooled HTTP client) and the embedded model.
    pub models: Models,
    /// What agents' tools reach: the guarded web client, the Python runtime and
    /// the vector stores.
    pub tools: ToolClients,
    /// Embedding models (providers and the embedded one).
    pub embeddings: crate::retrieval::embed::Embeddings,
    /// Vector store indexes built from the stored chunks.
    pub indexes: Arc<vectors::IndexCache>,
    /// Searches of vector stores (also the agents' retriever, in `tools`).
    pub search: Arc<vectors::VectorSearch>,
    /// Wakes this replica's cron scheduler when a trigger changes here, so a new
    /// schedule is seen at once rather than at the next poll.
    pub scheduler_wake: Arc<Notify>,
    /// Wakes the failure-mail sender when a message enters the outbox.
    pub mail_wake: Arc<Notify>,
    /// Wakes the callback sender when a callback in the outbox gets its body.
    pub callback_wake: Arc<Notify>,
    /// This process, as the owner of the firings it runs (their lease).
    pub replica_id: Uuid,
    /// Firings this replica is running (their leases are renewed).
    pub running: Arc<triggers::firing::RunningFirings>,
    /// The keys credentials are sealed with.
    pub keyring: Arc<crate::sealing::Keyring>,
    /// Predictions running per workspace on this server.
    pub in_flight: Arc<in_flight::InFlight>,
    /// The files chats brought, kept for the flows that take them.
    pub uploads: Arc<uploads::Uploads>,
    /// The predictions this replica runs, for stopping them.
    pub aborts: Arc<aborts::Aborts>,
    /// MCP sessions whose clients answer a flow's questions, and the questions
    /// waiting for them.
    pub elicitations: Arc<mcp::elicitation::Elicitations>,
    /// Token refreshes under way, one per OAuth-protected MCP server.
    pub refreshes: Arc<mcp_servers::oauth::Refreshes>,
}

impl Services {
    pub fn new(store: Arc<dyn Store>, config: Config) -> Result<Self, String> {
        let http = crate::llm::http::client().map_err(|e| e.message)?;
        if let Some(authorities) = &config.redis_tls_ca_file {
            crate::store::redis_history::trust(authorities)?;
        }
        let local = crate::llm::embedded::Embedded::new(config.models_dir());
        let embeddings =
            crate::retrieval::embed::Embeddings::new(http.clone(), config.models_dir());
        let indexes = Arc::new(vectors::IndexCache::new(config.store_cache_ttl()));
        let keyring = crate::sealing::Keyring::load(
            config.secret_key.as_ref().map(|k| k.0.as_str()),
            config
                .secret_key_previous
                .as_ref()
                .map_or("", |k| k.0.as_str()),
            &config.data_dir,
        )?;
        let keyring = Arc::new(keyring);
        let in_flight = in_flight::InFlight::new(config.workspace_max_predictions);
        let providers = Arc::new(config.providers.clone());
        let plans = Arc::new(PlanCache::new(Arc::clone(&providers)));
        let uploads = Arc::new(uploads::Uploads::new(
            config.data_dir.join("uploads"),
            config.workspace_upload_quota,
            std::time::Duration::from_secs(u64::from(config.upload_ttl_days) * 86_400),
        ));
        let models = Models {
            http: http.clone(),
            local: Arc::new(local),
        };
        let search = Arc::new(vectors::VectorSearch {
            store: Arc::clone(&store),
            embeddings: embeddings.clone(),
            indexes: Arc::clone(&indexes),
            plans: Arc::clone(&plans),
            providers,
            keyring: Arc::clone(&keyring),
            models: models.clone(),
        });
        let web = WebClient::new(config.allow_private_requests.clone())?;
        let runtime = RuntimeClient::new(
            http.clone(),
            &config.python_runtimes(),
            config.py_tool_api_key.as_ref().map(|k| k.0.clone()),
        );
        let tools = ToolClients {
            mcp: crate::flow::tools::mcp::McpClient::new(web.clone(), runtime.clone()),
            web,
            runtime,
            retriever: Arc::clone(&search) as Arc<dyn crate::flow::tools::retriever::Retriever>,
            sql: SqlClient::new(
                config.allow_private_requests.clone(),
                config
                    .sql_database_dir
                    .clone()
                    .unwrap_or_else(|| config.data_dir.join("sql")),
                std::time::Duration::from_millis(config.sql_query_timeout_ms),
            ),
        };
        Ok(Services(Arc::new(ServiceSet {
            store,
            config: Arc::new(config),
            plans,
            models,
            tools,
            embeddings,
            indexes,
            search,
            scheduler_wake: Arc::default(),
            mail_wake: Arc::default(),
            callback_wake: Arc::default(),
            replica_id: Uuid::new_v4(),
            running: Arc::default(),
            keyring,
            in_flight,
            uploads,
            aborts: Arc::default(),
            elicitations: Arc::default(),
            refreshes: Arc::default(),
        })))
    }
}

/// Why a service call failed, in terms the edge maps to one status each.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Malformed or invalid input (400).
    #[error("{0}")]
    Invalid(String),
    /// A required field is absent (412).
    #[error("'{0}' is required")]
    Missing(&'static str),
    /// No such resource in scope (404).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The operation conflicts with stored state (409).
    #[error("{0}")]
    Conflict(String),
    /// A webhook's signature is missing or wrong (401).
    #[error("{0}")]
    Unauthorized(String),
    /// An external service (Telegram) refused or failed (502).
    #[error("{0}")]
    Upstream(String),
    /// A file or body of a type weir does not take (415).
    #[error("{0}")]
    Unsupported(String),
    /// The run went over its time limit (504).
    #[error("{0}")]
    Timeout(String),
    /// More than a limit allows to be kept (413).
    #[error("{0}")]
    TooLarge(String),
    /// The workspace has as much running as it may; retry in a moment (429).
    #[error("{0}")]
    Busy(String),
    /// The workspace has used what a budget allows; retry after `retry_after`
    /// seconds (429).
    #[error("{message}")]
    OverBudget { message: String, retry_after: u64 },
    /// The chatflow could not be built or failed while running.
    #[error("{0}")]
    Flow(FlowError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Anything else; logged, never shown.
    #[error("{0}")]
    Internal(String),
}

pub type ServiceResult<T> = Result<T, ServiceError>;

impl From<FlowError> for ServiceError {
    fn from(e: FlowError) -> Self {
        ServiceError::Flow(e)
    }
}
