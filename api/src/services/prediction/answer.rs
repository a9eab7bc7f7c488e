//! What a run reports ([`PredictionEvent`]s on a channel) and the folded
//! answer ([`PredictionResult`]: the JSON response body, the SSE `metadata`).

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use utoipa::ToSchema;
use uuid::Uuid;

pub use crate::flow::runtime::Progress;

use crate::flow::FlowEvent;
use crate::services::{ServiceError, ServiceResult};

/// The folded answer (the JSON response body, and the SSE `metadata`).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PredictionResult {
    pub text: String,
    /// The answer as JSON when an output parser read it (Flowise's `json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
    pub question: String,
    pub chat_id: String,
    pub chat_message_id: Uuid,
    pub session_id: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub source_documents: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub used_tools: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub agent_reasoning: Vec<Value>,
    /// Files tools wrote, served by weir at their `url` (with a key of the workspace).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Value>,
    /// An agentflow run's execution record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<Uuid>,
    /// What each node of an agentflow did: the JSON text of the execution
    /// record, serialised once for both.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub agent_flow_executed_data: Option<Box<RawValue>>,
    /// What a stopped agentflow run waits for (answer it with `humanInput`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<Value>,
    /// The run was stopped (`PUT /chatmessage/abort`): `text` is what it had
    /// answered by then.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub aborted: bool,
    /// The label of the flow's memory node (`Buffer Memory`…), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_type: Option<String>,
    /// The tokens the run's model calls read and wrote, in all and per node
    /// (absent when no model was called).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_metadata: Option<UsageMetadata>,
    /// What the models thought before answering, when they said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_content: Option<ReasonContent>,
    /// The questions a person would likely ask next, as a JSON string of the
    /// list (Flowise's form), when the chatflow's follow-up prompts are on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follow_up_prompts: Option<String>,
    /// The state an agentflow (or a sequential flow) ended with.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub flow_variables: Option<serde_json::Map<String, Value>>,
}

/// A model's reasoning as Flowise keeps it (`reasonContent`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasonContent {
    pub thinking: String,
    /// Whole seconds the models thought.
    pub thinking_duration: u64,
}

impl ReasonContent {
    pub fn of(thought: &crate::flow::runtime::Thought) -> Self {
        ReasonContent {
            thinking: thought.text.clone(),
            thinking_duration: thought.seconds,
        }
    }
}

/// Tokens of a run (LangChain's `usage_metadata` names, as Flowise passes them on).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct UsageMetadata {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// Each node that called a model, in the order of its first call.
    pub nodes: Vec<NodeUsageMetadata>,
}

/// One node's share of [`UsageMetadata`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct NodeUsageMetadata {
    #[serde(rename = "nodeId")]
    pub node_id: String,
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
}

impl UsageMetadata {
    /// The run's sum of its nodes' usage; `None` when no model reported any.
    pub fn of(nodes: &[crate::flow::runtime::NodeUsage]) -> Option<Self> {
        if nodes.is_empty() {
            return None;
        }
        let nodes: Vec<NodeUsageMetadata> = nodes
            .iter()
            .map(|n| NodeUsageMetadata {
                node_id: n.node_id.clone(),
                model: n.model.clone(),
                input_tokens: n.usage.input_tokens,
                output_tokens: n.usage.output_tokens,
                total_tokens: n.usage.total(),
            })
            .collect();
        let input_tokens = nodes.iter().map(|n| n.input_tokens).sum();
        let output_tokens = nodes.iter().map(|n| n.output_tokens).sum();
        Some(UsageMetadata {
            input_tokens,
            output_tokens,
            total_tokens: input_tokens + output_tokens,
            nodes,
        })
    }
}

#[derive(Debug)]
pub enum PredictionEvent {
    Token(String),
    /// An agentflow's progress (only when streaming).
    Progress(Progress),
    Done(Box<PredictionResult>),
    /// The run failed; the message names the node and the cause.
    Error(String),
}

impl From<FlowEvent> for PredictionEvent {
    fn from(event: FlowEvent) -> Self {
        match event {
            FlowEvent::Token(t) => PredictionEvent::Token(t),
            FlowEvent::Progress(p) => PredictionEvent::Progress(p),
        }
    }
}

/// A started run: its events, and what is already known of the answer.
pub struct Prediction {
    pub events: mpsc::Receiver<PredictionEvent>,
    pub chat_id: String,
    /// Whether the flow's answer can stream (not with an output parser: a
    /// streaming request is answered with JSON, as Flowise does).
    pub streamable: bool,
    /// The run's task (a caller that gives up on the answer may stop it at once).
    pub task: tokio::task::AbortHandle,
}

impl Prediction {
    /// Folds the events into the whole answer (the JSON response, a trigger's result).
    pub async fn answer(mut self) -> ServiceResult<PredictionResult> {
        while let Some(event) = self.events.recv().await {
            match event {
                PredictionEvent::Token(_) | PredictionEvent::Progress(_) => {}
                PredictionEvent::Done(result) => return Ok(*result),
                PredictionEvent::Error(message) => {
                    return Err(ServiceError::Flow(crate::flow::FlowError::failed(message)));
                }
            }
        }
        Err(ServiceError::Internal(
            "the run ended without an answer".into(),
        ))
    }
}
