//! What an agentflow run did ([`Outcome`]: its executed items, status and
//! state) and what a paused run carries when a person's answer lets it go on
//! ([`Resume`]). Plain data: the services floor stores it, the agentflow
//! executor reads it.

use serde_json::{Map, Value};

use crate::domain::ExecutionState;

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `agentFlowExecutedData`.
    pub executed: Vec<Value>,
    /// `FINISHED`, `STOPPED` (waiting for a person), `TERMINATED` (a limit
    /// stopped it) or `ERROR`.
    pub status: ExecutionState,
    /// The flow state at the end.
    pub state: Map<String, Value>,
    /// Why the run failed (status `ERROR`): the message names the node.
    pub error: Option<String>,
    /// What a stopped run waits for (Flowise's `action`).
    pub action: Option<Value>,
}

/// A paused run going on: what it had done, where it stopped, and the answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    /// The stopped execution's items (`agentFlowExecutedData`).
    pub executed: Vec<Value>,
    /// The human input node the run goes on from.
    pub node_id: String,
    pub proceed: bool,
    pub feedback: String,
}

impl Resume {
    /// The node a stopped execution waits at (its last `STOPPED` item).
    pub fn waiting_node(executed: &[Value]) -> Option<&str> {
        executed
            .iter()
            .rev()
            .find(|item| {
                item.get("status").and_then(Value::as_str) == Some(ExecutionState::Stopped.as_str())
            })
            .and_then(|item| item.get("nodeId").and_then(Value::as_str))
    }
}
