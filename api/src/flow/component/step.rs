//! What agentflow nodes build: a typed [`StepKind`] per node, its text inputs
//! as written (their variables are resolved when the node runs) and its models
//! and tools already built with the request's overrides. Plain data, as every
//! component is; `flow::agentflow` runs it.

use serde_json::{Map, Value};

use super::{ModelSpec, OutputField, ToolSpec};
use crate::llm::Role;

/// How often a loop node may send the run back, when it does not say.
pub const DEFAULT_LOOP_COUNT: u32 = 5;
/// The most a loop node may ask for.
pub const MAX_LOOP_COUNT: u32 = 100;

#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    Start(Start),
    Llm(Llm),
    Agent(Agent),
    Tool(ToolStep),
    /// Rows of Flowise's condition table, resolved when the node runs.
    Condition(Vec<Map<String, Value>>),
    ConditionAgent(ConditionAgent),
    Loop(LoopStep),
    Iteration {
        input: String,
    },
    DirectReply {
        message: String,
    },
    Http(HttpStep),
    HumanInput(HumanInput),
    ExecuteFlow(ExecuteFlowStep),
    Retriever(RetrieverStep),
    CustomFunction(CustomFunctionStep),
}

/// `customFunctionAgentflow`: JavaScript run in the Python runtime's sandbox.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomFunctionStep {
    /// The body of an async function.
    pub code: String,
    /// `(name, value as written)`: the global `$<name>`, its value resolved when
    /// the node runs.
    pub variables: Vec<(String, String)>,
    pub update_state: Vec<(String, String)>,
}

/// `retrieverAgentflow`: document stores searched with a query.
#[derive(Debug, Clone, PartialEq)]
pub struct RetrieverStep {
    /// The chatflows (of the workspace) whose vector stores are searched.
    pub stores: Vec<uuid::Uuid>,
    /// `retrieverQuery` as written (the question when empty).
    pub query: String,
    /// `outputFormat: textWithMetadata`: the chunks as JSON, not their texts.
    pub with_metadata: bool,
    pub update_state: Vec<(String, String)>,
}

/// `executeFlowAgentflow`: another chatflow of the workspace, asked `input`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecuteFlowStep {
    pub flow: uuid::Uuid,
    pub input: String,
    /// `executeFlowOverrideConfig` as written (a JSON object once resolved).
    pub override_config: String,
    pub as_assistant: bool,
    pub update_state: Vec<(String, String)>,
}

/// A pause for a person's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct HumanInput {
    /// What the person is asked: written in the node, or by a model.
    pub ask: Ask,
    pub feedback: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    Fixed(String),
    Model {
        model: Box<ModelSpec>,
        prompt: String,
    },
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Start {
    pub form_input: bool,
    /// `startState` rows: the flow state every run begins with.
    pub state: Vec<(String, String)>,
    pub persist_state: bool,
    pub ephemeral_memory: bool,
}

/// How a model node builds its conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Talk {
    /// `llmMessages` rows, system rows first.
    pub messages: Vec<(Role, String)>,
    pub memory: Memory,
    /// A user message added after the memory (`llmUserMessage`).
    pub user_message: Option<String>,
    /// The answer joins the run's chat history as the assistant's (else as a user's, Flowise's default).
    pub as_assistant: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    Off,
    All,
    /// The last `n` exchanges.
    Window(u32),
    /// Everything before summarised by the node's model (`conversationSummary`).
    Summary,
    /// The oldest messages summarised once the history is over this many tokens
    /// (`conversationSummaryBuffer`).
    SummaryBuffer(u32),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Llm {
    pub model: ModelSpec,
    pub talk: Talk,
    pub structured: Vec<OutputField>,
    pub update_state: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub model: ModelSpec,
    pub talk: Talk,
    pub tools: Vec<ToolSpec>,
    /// Per tool, whether a person approves each call first.
    pub approval: Vec<bool>,
    /// `agentStructuredOutput`: the final answer converted to these keys.
    pub structured: Vec<OutputField>,
    pub update_state: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolStep {
    pub tool: ToolSpec,
    /// `toolInputArgs`: argument name and its (templated) value.
    pub args: Vec<(String, String)>,
    pub update_state: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConditionAgent {
    pub model: ModelSpec,
    pub instructions: String,
    pub input: String,
    pub scenarios: Vec<String>,
    pub memory: bool,
    pub system: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LoopStep {
    pub target: String,
    pub max: u32,
    pub fallback: Option<String>,
    pub update_state: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HttpStep {
    pub method: reqwest::Method,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub query: Vec<(String, String)>,
    pub body: HttpBody,
    pub response_json: bool,
    pub update_state: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum HttpBody {
    None,
    Json(String),
    Raw(String),
    Form(Vec<(String, String)>),
}
