//! Agentflows (Flowise's Agentflow V2): a graph of `*Agentflow` nodes run by a
//! state-carrying executor instead of a chain of components.
//!
//! - [`wiring`]: the graph once per chatflow version — where it starts, what
//!   follows each node on which output, what each node waits for, and the
//!   nodes inside each iteration block.
//! - [`step`]: each node built into a typed [`Step`] for one request, by its
//!   registered node type (`flow/nodes/agentflow/`, one module each; its model
//!   and tools built with the request's overrides).
//! - [`template`]: `{{ question }}`, `{{ $flow.state.x }}`, `{{ llmAgentflow_0 }}`
//!   and the other variables of a node's text inputs.
//! - [`condition`]: the condition node's comparison table.
//! - [`exec`]: the executor — ready nodes run together, their results applied in
//!   order; branches, loops, iterations and the run's limits.
//! - [`nodes`]: what each kind of step does when it runs; [`agent`] the agent
//!   node, [`subflow`] the node that runs another chatflow.
//!
//! As in Flowise, nothing flows along edges: a node reads earlier nodes through
//! variables, the flow state and the run's chat history; edges only say what
//! runs next.

pub mod agent;
pub mod condition;
pub mod exec;
pub mod nodes;
pub mod step;
pub mod subflow;
pub mod template;
pub mod wiring;

use std::collections::HashMap;
use std::sync::Arc;

pub use step::{Step, StepKind};
pub use wiring::Wiring;

/// Tool-calling steps an agent node takes at most.
pub const AGENT_MAX_ITERATIONS: u32 = 10;

/// An agentflow built for one request.
#[derive(Debug, Clone)]
pub struct AgentflowSpec {
    pub wiring: Arc<Wiring>,
    /// Shared by the requests of a plan that bring no overrides.
    pub steps: Arc<HashMap<String, Step>>,
}

impl PartialEq for AgentflowSpec {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.wiring, &other.wiring) && self.steps == other.steps
    }
}

impl AgentflowSpec {
    /// The start node's settings.
    pub fn start(&self) -> Option<&step::Start> {
        self.steps.values().find_map(|s| match &s.kind {
            StepKind::Start(start) => Some(start),
            _ => None,
        })
    }

    /// Whether a run reads the session's earlier turns: a model node with
    /// memory, or a node whose tools, person or flow see the conversation.
    /// (`{{ chat_history }}` in a text is the plan's to see.)
    pub fn reads_history(&self) -> bool {
        self.steps.values().any(|s| match &s.kind {
            StepKind::Llm(llm) => llm.talk.memory != step::Memory::Off,
            StepKind::ConditionAgent(agent) => agent.memory,
            StepKind::Agent(_)
            | StepKind::Tool(_)
            | StepKind::HumanInput(_)
            | StepKind::ExecuteFlow(_) => true,
            StepKind::Start(_)
            | StepKind::Condition(_)
            | StepKind::Loop(_)
            | StepKind::Iteration { .. }
            | StepKind::DirectReply { .. }
            | StepKind::Http(_)
            | StepKind::Retriever(_) => false,
            // Flowise's `$flow.chatHistory`.
            StepKind::CustomFunction(f) => f.code.contains("chatHistory"),
        })
    }

    /// Every tool a node of the flow may call.
    pub fn tools(&self) -> impl Iterator<Item = &crate::flow::component::ToolSpec> {
        self.steps.values().flat_map(|s| match &s.kind {
            StepKind::Agent(agent) => agent.tools.iter().collect::<Vec<_>>(),
            StepKind::Tool(tool) => vec![&tool.tool],
            _ => Vec::new(),
        })
    }

    /// Whether a stopped run may wait at `id` (a human input or an agent node).
    pub fn can_wait_at(&self, id: &str) -> bool {
        matches!(
            self.steps.get(id).map(|s| &s.kind),
            Some(StepKind::HumanInput(_) | StepKind::Agent(_))
        )
    }

    /// Whether any text input names a workspace variable (`{{ $vars.x }}`), so
    /// the caller must load them.
    pub fn reads_vars(&self) -> bool {
        self.wiring.reads_vars
    }

    /// Whether a node runs JavaScript (in the Python runtime).
    pub fn runs_javascript(&self) -> bool {
        self.steps
            .values()
            .any(|s| matches!(s.kind, StepKind::CustomFunction(_)))
    }

    /// Whether a retriever node searches document stores (of the workspace).
    pub fn searches_document_stores(&self) -> bool {
        self.steps
            .values()
            .any(|s| matches!(s.kind, StepKind::Retriever(_)))
    }
}
