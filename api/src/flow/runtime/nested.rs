//! A flow running another flow (`executeFlowAgentflow`): the engine asks
//! through [`FlowCaller`], which the services floor implements (finding the
//! chatflow in the workspace, running it as a prediction on the same chat,
//! refusing past the run's depth limit).

use async_trait::async_trait;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::retrieval::Document;

/// Runs chatflows for `executeFlowAgentflow`.
#[async_trait]
pub trait FlowCaller: Send + Sync {
    /// The answer of `call.flow` (a chatflow of the caller's workspace), or why
    /// there is none.
    async fn call_flow(&self, call: FlowCall) -> Result<FlowAnswer, String>;
}

pub struct FlowCall {
    pub flow: Uuid,
    pub question: String,
    /// The caller's chat: the called flow's memory follows the same conversation.
    pub chat_id: String,
    pub override_config: Option<Map<String, Value>>,
}

#[derive(Debug, Default)]
pub struct FlowAnswer {
    /// The answer's text (an output parser's JSON in a fenced block).
    pub text: String,
    pub used_tools: Vec<Value>,
    pub artifacts: Vec<Value>,
    pub sources: Vec<Document>,
}
