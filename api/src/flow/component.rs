//! What nodes build: plain, cloneable specs of models, prompts, memories, tools,
//! chains and agents, with the request's overrides already applied. The run
//! turns them into provider calls and tool calls; nothing here does I/O.

use std::sync::Arc;

use serde_json::{Map, Value};
use uuid::Uuid;

use crate::domain::tool::ToolField;
use crate::llm::SamplingParams;

/// A node's product.
#[derive(Debug, Clone, PartialEq)]
pub enum Component {
    Model(ModelSpec),
    Prompt(PromptSpec),
    Memory(MemorySpec),
    Tool(ToolSpec),
    Chain(ChainSpec),
    Agent(AgentSpec),
    Supervisor(SupervisorSpec),
    Worker(WorkerSpec),
    Sequential(SeqStep),
}

/// Which provider a chat model node talks to, with its endpoint and key.
#[derive(Debug, Clone, PartialEq)]
pub enum Provider {
    OpenAi {
        base: String,
        auth: crate::llm::openai::Auth,
        model: String,
        /// Who this is in error messages (`the OpenAI-compatible provider`, `Mistral AI`).
        label: &'static str,
    },
    Anthropic {
        base: String,
        api_key: Option<String>,
        model: String,
    },
    Ollama {
        base: String,
        model: String,
    },
    Local,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub node_id: String,
    pub node_type: &'static str,
    pub provider: Provider,
    pub params: SamplingParams,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PromptSpec {
    /// One user message.
    Text {
        template: String,
        values: Map<String, Value>,
    },
    /// A system and a human message.
    Chat {
        system: String,
        human: String,
        values: Map<String, Value>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct MemorySpec {
    pub node_id: String,
    /// Keep only the last `k` exchanges (`bufferWindowMemory`).
    pub window: Option<u32>,
    /// A fixed session from the node, instead of the request's chatId.
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainKind {
    Llm,
    Conversation,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChainSpec {
    pub kind: ChainKind,
    pub node_id: String,
    pub model: ModelSpec,
    pub prompt: Option<PromptSpec>,
    pub memory: Option<MemorySpec>,
    pub system_message: String,
}

/// A tool an agent may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub node_id: String,
    pub kind: ToolKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ToolKind {
    Calculator,
    CurrentDateTime,
    Request(RequestTool),
    Python(PythonTool),
    /// Accepted so flows load; fails when called until retrievers exist.
    Retriever {
        name: String,
        description: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpMethod {
    Get,
    Post,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RequestTool {
    pub method: HttpMethod,
    pub name: String,
    pub description: String,
    /// A fixed URL from the node; else the model gives one.
    pub url: Option<String>,
    pub headers: Map<String, Value>,
    /// A fixed body from the node (POST); else the model gives one.
    pub body: Option<Value>,
    pub max_output: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PythonTool {
    pub source: PythonSource,
    /// Seconds; the runtime's default when `None`.
    pub timeout: Option<f64>,
    /// The tool's output is the answer (Flowise's `returnDirect`).
    pub return_direct: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PythonSource {
    /// A definition written in the node.
    Inline(Arc<PythonDefinition>),
    /// A tool of the workspace (`/api/v1/tools`), read when the run starts.
    Stored(Uuid),
}

#[derive(Debug, Clone, PartialEq)]
pub struct PythonDefinition {
    pub name: String,
    pub description: String,
    pub schema: Vec<ToolField>,
    pub code: String,
    pub requirements: Vec<String>,
}

/// The three agent node types differ in their prompts in Flowise; here all of
/// them run on native tool calling.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    pub node_id: String,
    pub name: String,
    pub model: ModelSpec,
    pub tools: Vec<ToolSpec>,
    pub memory: Option<MemorySpec>,
    pub system_message: String,
    pub max_iterations: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SupervisorSpec {
    pub node_id: String,
    pub name: String,
    pub prompt: String,
    pub model: ModelSpec,
    pub memory: Option<MemorySpec>,
    pub recursion_limit: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSpec {
    pub node_id: String,
    pub name: String,
    pub prompt: String,
    /// `promptValues` for `{placeholders}` of the prompt (none: the prompt as written).
    pub values: Map<String, Value>,
    /// The worker's own model; the supervisor's when `None`.
    pub model: Option<ModelSpec>,
    pub tools: Vec<ToolSpec>,
    /// The supervisor node it reports to.
    pub supervisor: String,
    pub max_iterations: u32,
}

/// A node of a sequential-agents graph. Its place in the graph (predecessors,
/// branches) is the plan's; this is what the node itself does.
#[derive(Debug, Clone, PartialEq)]
pub enum SeqStep {
    Start {
        model: ModelSpec,
        memory: Option<MemorySpec>,
    },
    Agent(SeqAgent),
    Llm(SeqAgent),
    ToolNode {
        name: String,
        tools: Vec<ToolSpec>,
        /// The LLM node whose tool calls this node runs.
        llm_node: String,
    },
    Condition {
        name: String,
        rows: Vec<ConditionRow>,
    },
    End,
}

/// A `seqAgent` (tool-calling loop) or `seqLLMNode` (one model call).
#[derive(Debug, Clone, PartialEq)]
pub struct SeqAgent {
    pub name: String,
    pub system: String,
    pub human: String,
    pub values: Map<String, Value>,
    pub model: Option<ModelSpec>,
    pub tools: Vec<ToolSpec>,
    pub max_iterations: u32,
}

/// One row of a `seqCondition`: when `variable` `operation` `value`, take `output`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionRow {
    pub variable: String,
    pub operation: String,
    pub value: String,
    pub output: String,
}
