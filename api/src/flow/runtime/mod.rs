//! What every run kind shares, importing nothing above it: the events a run
//! sends ([`FlowEvent`], [`Progress`]), what it starts from ([`RunInput`]) and
//! produces ([`RunOutput`]), what it reaches ([`RunContext`]), where its tokens
//! go ([`Tokens`]), one model call ([`model_step`]) and how a run fails
//! ([`RunError`]).
//!
//! - [`tool_loop`]: the tool-calling loop every agent uses (chatflow agents,
//!   workers, sequential agents, agentflow agent nodes).
//! - [`structured`]: an answer forced into an object of named keys.
//! - [`nested`]: the trait through which a flow runs another flow.
//! - [`limits`]: what keeps an agentflow run from running away.
//! - [`paused`]: what a paused agentflow run carries to its next request, and
//!   what an agentflow run did.
//!
//! Chatflows ([`super::chatflow`]) and agentflows ([`super::agentflow`]) are
//! built on this floor and never import each other; [`super::engine`] is the
//! one place that knows both.

pub mod limits;
pub mod nested;
pub mod paused;
pub mod structured;
pub mod tool_loop;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

pub use limits::Limits;
pub use nested::FlowCaller;
pub use paused::{Outcome, Resume};

use super::FlowError;
use super::component::ModelSpec;
use super::tools::{FlowContext, ToolClients, ToolEnv};
use crate::domain::ExecutionState;
use crate::llm::connect::Models;
use crate::llm::{ChatMessage, ChatModel, ChatRequest, Delta, LlmError, Role, ToolCall};

/// What a run emits, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum FlowEvent {
    Token(String),
    /// How an agentflow run is going (sent only when the caller asked for progress).
    Progress(Progress),
}

/// Flowise's agentflow events.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// `agentFlowEvent`: the run's status (`INPROGRESS`, `FINISHED`, `ERROR`...).
    Flow(ExecutionState),
    /// `nextAgentFlow`: a node started, finished or failed.
    Node {
        node_id: String,
        node_label: String,
        status: ExecutionState,
        error: Option<String>,
    },
    /// `agentFlowExecutedData`: every node run so far.
    Executed(Value),
    /// `calledTools`: the calls a model made, sent before the tools run
    /// (`[{tool, toolInput, toolOutput: ""}]`).
    CalledTools(Value),
    /// `nextAgent`: the agent a supervisor handed the conversation to.
    NextAgent(String),
    /// `agentReasoning`: the team's steps so far, after each step.
    AgentReasoning(Value),
    /// `thinking`: a piece of the answering model's reasoning.
    Thinking(String),
    /// `thinking` with its `duration`: the model has stopped thinking, after
    /// this many seconds.
    Thought { seconds: u64 },
}

/// The conversation a run starts from.
#[derive(Debug, Clone, Default)]
pub struct RunInput {
    pub question: String,
    /// Earlier turns, oldest first: stored memory, then the request's `history`.
    pub history: Vec<ChatMessage>,
    /// `$flow` values a prompt value may name as `{{$flow.<key>}}` (a webhook's
    /// `body` and `headers`).
    pub flow_vars: serde_json::Map<String, Value>,
    /// An agentflow's form values (`$form`), for a form-input start.
    pub form: serde_json::Map<String, Value>,
    /// The flow state the session's last agentflow run ended with.
    pub persisted_state: Option<serde_json::Map<String, Value>>,
    /// A paused agentflow run going on with a person's decision.
    pub resume: Option<Resume>,
    /// Pictures sent with the question, for models that see.
    pub images: Vec<crate::llm::Image>,
}

impl RunInput {
    /// The question as the user's turn, with the pictures it came with.
    pub fn question_turn(&self) -> ChatMessage {
        ChatMessage::user_with_images(self.question.clone(), self.images.clone())
    }
    /// The history as `Human: …` / `AI: …` lines (`{{chat_history}}`).
    pub fn history_text(&self) -> String {
        self.history
            .iter()
            .map(|m| {
                let who = if m.role == Role::User { "Human" } else { "AI" };
                format!("{who}: {}", m.content)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// What a run produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunOutput {
    pub text: String,
    /// `{tool, toolInput, toolOutput}` per call, in order.
    pub used_tools: Vec<Value>,
    /// One item per agent step of a multi-agent or sequential flow.
    pub agent_reasoning: Vec<Value>,
    pub artifacts: Vec<Value>,
    /// Chunks the answer drew on (`sourceDocuments`).
    pub source_documents: Vec<crate::retrieval::Document>,
    /// What an agentflow run did, node by node.
    pub agentflow: Option<Outcome>,
    /// The answer as JSON, when an output parser read it (`text` then holds it
    /// in a fenced block).
    pub json: Option<Value>,
    /// Where the session's next run begins (a sequential flow with agent memory).
    pub checkpoint: Option<Checkpoint>,
    /// Answer tokens streamed to the caller.
    pub tokens_streamed: u64,
    /// What the run's model calls cost, node by node.
    pub usage: Vec<NodeUsage>,
    /// What the run's models thought before answering (Flowise's `reasonContent`).
    pub thinking: Option<Thought>,
}

/// A run's reasoning: its models' thinking, and for how long they thought.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Thought {
    pub text: String,
    pub seconds: u64,
}

/// A sequential flow's session as its last run left it (agent memory): kept
/// by the services floor as JSON, read back at the session's next run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint {
    #[serde(default)]
    pub state: serde_json::Map<String, Value>,
    #[serde(default)]
    pub messages: Vec<crate::llm::ChatMessage>,
}

/// What one run reaches: models, tools, and the request's context for tools.
pub struct RunContext<'a> {
    pub models: &'a Models,
    pub tools: &'a ToolClients,
    pub env: ToolEnv,
    pub flow: FlowContext,
    /// Whether the caller follows the run live (agentflow progress events are
    /// built only then).
    pub progress: bool,
    /// Runs other chatflows of the workspace (`executeFlowAgentflow`).
    pub flows: Option<&'a dyn FlowCaller>,
    /// An agentflow run's limits.
    pub limits: Limits,
    /// Where the answer's streamed text is also kept, for a run that may be
    /// stopped midway (its partial answer is stored).
    pub transcript: Option<&'a std::sync::Mutex<String>>,
    /// What the run's model calls cost and thought.
    pub ledger: ModelLedger,
}

/// What one node's model calls cost in a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeUsage {
    pub node_id: String,
    /// The model, as the node names it (`embedded` for the embedded model).
    pub model: String,
    pub usage: crate::llm::Usage,
}

/// What a run's model calls cost and thought: the tokens they read and wrote,
/// summed per node (nodes in the order of their first call), and their
/// reasoning, in the order they thought.
#[derive(Debug, Default)]
pub struct ModelLedger {
    nodes: std::sync::Mutex<Vec<NodeUsage>>,
    thinking: std::sync::Mutex<Option<Thought>>,
}

impl ModelLedger {
    /// Keeps one call's reasoning.
    pub fn thought(&self, text: &str, seconds: u64) {
        let mut kept = self
            .thinking
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let thought = kept.get_or_insert_with(Thought::default);
        if !thought.text.is_empty() {
            thought.text.push_str("\n\n");
        }
        thought.text.push_str(text);
        thought.seconds += seconds;
    }

    /// The reasoning so far; the ledger forgets it.
    pub fn take_thinking(&self) -> Option<Thought> {
        self.thinking
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    pub fn add(&self, spec: &ModelSpec, usage: crate::llm::Usage) {
        if usage == crate::llm::Usage::default() {
            return;
        }
        let mut nodes = self
            .nodes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match nodes.iter_mut().find(|n| n.node_id == spec.node_id) {
            Some(node) => {
                node.usage.input_tokens += usage.input_tokens;
                node.usage.output_tokens += usage.output_tokens;
            }
            None => nodes.push(NodeUsage {
                node_id: spec.node_id.clone(),
                model: spec.provider.model_name().to_owned(),
                usage,
            }),
        }
    }

    /// What one node's model calls used so far in the run.
    pub fn node_usage(&self, node_id: &str) -> crate::llm::Usage {
        self.nodes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|n| n.node_id == node_id)
            .map(|n| n.usage)
            .unwrap_or_default()
    }

    /// The nodes' usage so far; the ledger forgets it.
    pub fn take_usage(&self) -> Vec<NodeUsage> {
        std::mem::take(
            &mut *self
                .nodes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

impl RunContext<'_> {
    /// Runs the body of an async JavaScript function with these globals in the
    /// Python runtime's sandbox, in the run's workspace and within its
    /// `SANDBOX_TIMEOUT`: what it returned, or why it failed.
    pub(crate) async fn run_javascript(
        &self,
        code: &str,
        globals: serde_json::Map<String, Value>,
    ) -> Result<Value, String> {
        self.tools
            .runtime
            .run_javascript(
                code,
                globals,
                Some(self.limits.code_timeout.as_secs_f64()),
                &self.env.workspace_id,
            )
            .await
    }

    /// The model of a node, or the failure naming it.
    pub(crate) async fn model(&self, spec: &ModelSpec) -> Result<Arc<dyn ChatModel>, RunError> {
        self.models
            .chat_model(&spec.provider)
            .await
            .map_err(|e| model_failed(spec, &e))
    }
}

/// A node's model failed: the message names the node and the cause.
fn model_failed(spec: &ModelSpec, e: &LlmError) -> RunError {
    RunError::Flow(FlowError::failed(format!(
        "node {} ({}) failed: {}",
        spec.node_id, spec.node_type, e.message
    )))
}

/// Where tokens go: the caller's channel, in the caller's event type.
pub struct Tokens<'a, E> {
    events: &'a mpsc::Sender<E>,
    sent: AtomicU64,
    transcript: Option<&'a std::sync::Mutex<String>>,
}

impl<'a, E> Tokens<'a, E> {
    pub fn new(
        events: &'a mpsc::Sender<E>,
        transcript: Option<&'a std::sync::Mutex<String>>,
    ) -> Self {
        Tokens {
            events,
            sent: AtomicU64::new(0),
            transcript,
        }
    }

    /// Answer tokens sent so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

impl<E: From<FlowEvent>> Tokens<'_, E> {
    pub async fn send(&self, token: String) -> Result<(), RunError> {
        self.sent.fetch_add(1, Ordering::Relaxed);
        if let Some(transcript) = self.transcript {
            transcript
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push_str(&token);
        }
        self.events
            .send(FlowEvent::Token(token).into())
            .await
            .map_err(|_| RunError::Cancelled)
    }

    /// Whether nobody listens any more (the client went away).
    pub fn is_closed(&self) -> bool {
        self.events.is_closed()
    }

    pub async fn progress(&self, progress: Progress) -> Result<(), RunError> {
        self.events
            .send(FlowEvent::Progress(progress).into())
            .await
            .map_err(|_| RunError::Cancelled)
    }
}

/// What one model call gave: its text, its tool calls, whether a blank-line
/// separator token was streamed before the text, and what it thought first.
pub struct Step {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub separated: bool,
    pub thinking: Option<crate::llm::Thinking>,
}

impl Step {
    /// The assistant turn that made this step's tool calls, with its thinking
    /// (Anthropic wants it back with the calls' results).
    pub fn calls_turn(&self) -> ChatMessage {
        ChatMessage {
            thinking: self.thinking.clone(),
            ..ChatMessage::tool_calls(self.text.clone(), self.calls.clone())
        }
    }
}

/// One model call, collected. With `tokens`, its text streams as it arrives
/// (after a `"\n\n"` token when `separate`: a later step of an agent whose
/// earlier text was already sent). Every runner calls its models through here.
pub async fn model_step<E: From<FlowEvent>>(
    spec: &ModelSpec,
    model: &dyn ChatModel,
    request: ChatRequest,
    tokens: Option<&Tokens<'_, E>>,
    separate: bool,
    ledger: &ModelLedger,
) -> Result<Step, RunError> {
    let mut stream = model
        .stream(request)
        .await
        .map_err(|e| model_failed(spec, &e))?;
    let mut step = Step {
        text: String::new(),
        calls: Vec::new(),
        separated: false,
        thinking: None,
    };
    // Counted once the call ends, also when it fails midway: what was used was used.
    let mut usage = crate::llm::Usage::default();
    let mut thinking = Thinking::default();
    let outcome = read_step(
        spec,
        &mut stream,
        &mut step,
        (&mut usage, &mut thinking),
        tokens,
        separate,
    )
    .await;
    ledger.add(spec, usage);
    if let Some(seconds) = thinking.seconds {
        ledger.thought(&thinking.text.text, seconds);
    }
    // A signature goes back with the calls also when no reasoning was shown.
    if thinking.seconds.is_some() || thinking.text.signature.is_some() {
        step.thinking = Some(thinking.text);
    }
    outcome.map(|()| step)
}

/// One call's reasoning as it streams: its text, when it began, and for how
/// long it went on once it ended.
#[derive(Default)]
struct Thinking {
    text: crate::llm::Thinking,
    began: Option<std::time::Instant>,
    seconds: Option<u64>,
}

impl Thinking {
    /// The reasoning has ended (the answer began, or the call ended): for how
    /// many whole seconds it went on (as Flowise counts), once.
    fn end(&mut self) -> Option<u64> {
        let began = self.began.take()?;
        let seconds = began.elapsed().as_secs_f64().round() as u64;
        self.seconds = Some(seconds);
        Some(seconds)
    }
}

async fn read_step<E: From<FlowEvent>>(
    spec: &ModelSpec,
    stream: &mut crate::llm::DeltaStream,
    step: &mut Step,
    (usage, thinking): (&mut crate::llm::Usage, &mut Thinking),
    tokens: Option<&Tokens<'_, E>>,
    separate: bool,
) -> Result<(), RunError> {
    while let Some(delta) = stream.next().await {
        let delta = delta.map_err(|e| model_failed(spec, &e))?;
        if matches!(delta, Delta::Text(_) | Delta::ToolCall(_))
            && let Some(seconds) = thinking.end()
            && let Some(tokens) = tokens
        {
            tokens.progress(Progress::Thought { seconds }).await?;
        }
        match delta {
            Delta::Thinking(piece) => {
                thinking.began.get_or_insert_with(std::time::Instant::now);
                thinking.text.text.push_str(&piece);
                if let Some(tokens) = tokens {
                    tokens.progress(Progress::Thinking(piece)).await?;
                }
            }
            Delta::ThinkingSignature(signature) => {
                thinking
                    .text
                    .signature
                    .get_or_insert_with(String::new)
                    .push_str(&signature);
            }
            Delta::Text(piece) => {
                step.text.push_str(&piece);
                if let Some(tokens) = tokens {
                    if separate && !step.separated {
                        step.separated = true;
                        tokens.send("\n\n".to_owned()).await?;
                    }
                    tokens.send(piece).await?;
                }
            }
            Delta::ToolCall(call) => step.calls.push(call),
            Delta::Usage(report) => *usage = usage.latest(report),
        }
    }
    if let Some(seconds) = thinking.end()
        && let Some(tokens) = tokens
    {
        tokens.progress(Progress::Thought { seconds }).await?;
    }
    Ok(())
}

#[derive(Debug)]
pub enum RunError {
    Flow(FlowError),
    /// Nobody listens any more (the client disconnected).
    Cancelled,
}

impl From<FlowError> for RunError {
    fn from(e: FlowError) -> Self {
        RunError::Flow(e)
    }
}
