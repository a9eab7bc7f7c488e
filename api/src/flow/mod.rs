//! The chatflow engine: reads a Flowise-format graph, validates it against the
//! node registry, and runs it as a stream of events.
//!
//! Its parts, lowest floor first (each imports only parts below it; the test
//! `api/tests/floors.rs` enforces it, docs/architecture.md draws it):
//!
//! - [`graph`]: `flowData` → nodes, references, edges; [`prompt`] templates;
//!   [`output_parser`]s; [`spec`]: what a node type declares (its inputs).
//! - [`component`]: what nodes build (models, prompts, memories, tools, agents);
//!   [`destination`]: where keys may be sent (provider keys, credentials).
//! - [`overrides`]: what a request may change, the opened credentials and the
//!   server's provider settings; [`tools`]: what agents call (calculator, web
//!   requests, Python tools).
//! - [`node`]: the [`node::Node`] trait every node type implements and
//!   [`node::Build`] — its docs say how to add one; [`nodes`]: one module per
//!   node type; [`registry`] lists them and builds one.
//! - [`runtime`]: what every run kind shares (events, run input and output,
//!   the tool loop, structured output, the nested-flow trait).
//! - [`agentflow`]: the agentflow run kind (Flowise's Agentflow V2).
//! - [`plan`]: a validated graph ([`Plan`]), cached per chatflow version, and the
//!   [`Runnable`] built from it for one request (overrides applied).
//! - [`chatflow`]: the chatflow run kind — chains, agents, multi-agent and
//!   sequential flows — sending [`FlowEvent`]s as tokens arrive.
//! - [`engine`]: the one place that knows both run kinds (moderation, dispatch).
//!
//! The engine does no storage: callers load memory, stored tools and variables,
//! and persist messages. JSON answers are the folded event stream, so streaming
//! and non-streaming share one path.

pub mod agentflow;
pub mod catalog;
pub mod chatflow;
pub mod component;
pub mod destination;
pub mod engine;
pub mod graph;
pub mod node;
pub mod nodes;
pub mod output_parser;
pub mod overrides;
pub mod plan;
pub mod prompt;
pub mod registry;
pub mod runtime;
pub mod spec;
pub mod tools;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

pub use overrides::{CredentialFields, OpenedCredential, Overrides};
pub use plan::{Plan, Runnable};
pub use runtime::{FlowEvent, RunContext, RunInput, RunOutput};

use crate::config::ProviderSettings;
use crate::domain::time::Timestamp;

/// Why a flow could not be built or run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowError {
    pub kind: FlowErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowErrorKind {
    /// The flow or the request is wrong (400).
    Invalid,
    /// The request tried to override what the chatflow does not allow (403).
    Forbidden,
    /// A node failed while running (500, with the message).
    Failed,
}

impl FlowError {
    pub fn invalid(message: impl Into<String>) -> Self {
        FlowError {
            kind: FlowErrorKind::Invalid,
            message: message.into(),
        }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        FlowError {
            kind: FlowErrorKind::Forbidden,
            message: message.into(),
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        FlowError {
            kind: FlowErrorKind::Failed,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for FlowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Plans most recently used are kept; beyond this many the cache starts over.
const PLAN_CACHE_CAPACITY: usize = 1024;

/// Validated plans by chatflow id, valid for one `updatedDate`: an update makes
/// the next request build (and validate) anew.
pub struct PlanCache {
    plans: Mutex<HashMap<Uuid, (Timestamp, Arc<Plan>)>>,
    /// The server's provider settings, which checking a plan builds with.
    settings: Arc<ProviderSettings>,
}

impl PlanCache {
    pub fn new(settings: Arc<ProviderSettings>) -> Self {
        PlanCache {
            plans: Mutex::default(),
            settings,
        }
    }

    pub fn get(
        &self,
        id: Uuid,
        version: Timestamp,
        flow_data: &str,
    ) -> Result<Arc<Plan>, FlowError> {
        {
            let plans = self.plans.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((v, plan)) = plans.get(&id)
                && *v == version
            {
                return Ok(Arc::clone(plan));
            }
        }
        // Built outside the lock: parsing a big flow must not stall other requests.
        let plan = Arc::new(Plan::build(flow_data, &self.settings)?);
        let mut plans = self.plans.lock().unwrap_or_else(|p| p.into_inner());
        if plans.len() >= PLAN_CACHE_CAPACITY {
            plans.clear();
        }
        plans.insert(id, (version, Arc::clone(&plan)));
        Ok(plan)
    }
}
