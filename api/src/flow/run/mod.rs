//! Running a [`Runnable`]: chains, agents, multi-agent and sequential flows,
//! each sending the answer's tokens as [`FlowEvent`]s the moment they are known
//! and returning the whole [`RunOutput`] (text, tools used, agent steps,
//! artifacts) when done.
//!
//! - [`chain`]: one model call over a prompt or a conversation.
//! - [`agent`]: the tool-calling loop every agent shares.
//! - [`multiagent`]: a supervisor routing between workers.
//! - [`sequential`]: a graph of agent, LLM, tool and condition steps.
//! - [`retrieval`]: chains that answer over a vector store's chunks.
//!
//! A closed event channel means the client is gone: the run stops and the
//! provider stream is dropped, which cancels the provider call.

pub mod agent;
pub mod chain;
pub mod csv_agent;
pub mod multiagent;
pub mod retrieval;
pub mod sequential;

use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

use super::FlowError;
use super::component::{ModelSpec, Provider};
use super::plan::{Answer, Runnable};
use super::tools::{FlowContext, ToolClients, ToolEnv};
use crate::llm::anthropic::AnthropicChat;
use crate::llm::ollama::OllamaChat;
use crate::llm::openai::OpenAiChat;
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
    Flow(&'static str),
    /// `nextAgentFlow`: a node started, finished or failed.
    Node {
        node_id: String,
        node_label: String,
        status: &'static str,
        error: Option<String>,
    },
    /// `agentFlowExecutedData`: every node run so far.
    Executed(Value),
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
    pub resume: Option<crate::flow::agentflow::Resume>,
}

impl RunInput {
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
    pub agentflow: Option<crate::flow::agentflow::exec::Outcome>,
    /// The answer as JSON, when an output parser read it (`text` then holds it
    /// in a fenced block).
    pub json: Option<Value>,
    /// Where the session's next run begins (a sequential flow with agent memory).
    pub checkpoint: Option<Checkpoint>,
    /// Answer tokens streamed to the caller.
    pub tokens_streamed: u64,
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

/// Where chat models come from: the shared HTTP client for providers, and the
/// embedded model.
#[derive(Clone)]
pub struct Models {
    pub http: reqwest::Client,
    pub local: Arc<dyn LocalModels>,
}

/// Access to the embedded model, loaded on first use.
#[async_trait::async_trait]
pub trait LocalModels: Send + Sync {
    async fn chat(&self) -> Result<Arc<dyn ChatModel>, LlmError>;
}

impl Models {
    async fn chat_model(&self, provider: &Provider) -> Result<Arc<dyn ChatModel>, LlmError> {
        Ok(match provider {
            Provider::OpenAi {
                base,
                auth,
                model,
                label,
            } => Arc::new(OpenAiChat {
                client: self.http.clone(),
                base: base.clone(),
                auth: auth.clone(),
                model: model.clone(),
                provider: label,
            }),
            Provider::Anthropic {
                base,
                api_key,
                model,
            } => Arc::new(AnthropicChat {
                client: self.http.clone(),
                base: base.clone(),
                api_key: api_key.clone(),
                model: model.clone(),
            }),
            Provider::Ollama { base, model } => Arc::new(OllamaChat {
                client: self.http.clone(),
                base: base.clone(),
                model: model.clone(),
            }),
            Provider::Local => self.local.chat().await?,
        })
    }
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
    pub flows: Option<&'a dyn crate::flow::agentflow::subflow::FlowCaller>,
    /// An agentflow run's limits.
    pub limits: crate::flow::agentflow::Limits,
}

impl RunContext<'_> {
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
    sent: std::sync::atomic::AtomicU64,
}

impl<E: From<FlowEvent>> Tokens<'_, E> {
    pub async fn send(&self, token: String) -> Result<(), RunError> {
        self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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

/// What one model call gave: its text, its tool calls, and whether a blank-line
/// separator token was streamed before the text.
pub struct Step {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub separated: bool,
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
) -> Result<Step, RunError> {
    let mut stream = model
        .stream(request)
        .await
        .map_err(|e| model_failed(spec, &e))?;
    let mut step = Step {
        text: String::new(),
        calls: Vec::new(),
        separated: false,
    };
    while let Some(delta) = stream.next().await {
        match delta.map_err(|e| model_failed(spec, &e))? {
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
        }
    }
    Ok(step)
}

/// Runs the flow. Tokens go to `events` as they come, converted into the
/// caller's own event type (no relay between channels).
pub async fn run<E: From<FlowEvent> + Send>(
    runnable: &Runnable,
    input: &RunInput,
    ctx: &RunContext<'_>,
    events: &mpsc::Sender<E>,
) -> Result<RunOutput, RunError> {
    let tokens = Tokens {
        events,
        sent: std::sync::atomic::AtomicU64::new(0),
    };
    let mut output = answer(runnable, input, ctx, &tokens).await?;
    output.tokens_streamed = tokens.sent.into_inner();
    Ok(output)
}

async fn answer<E: From<FlowEvent> + Send>(
    runnable: &Runnable,
    input: &RunInput,
    ctx: &RunContext<'_>,
    tokens: &Tokens<'_, E>,
) -> Result<RunOutput, RunError> {
    if let Some(denied) = moderate(runnable, input, ctx).await? {
        tokens.send(denied.clone()).await?;
        return Ok(RunOutput {
            text: denied,
            ..RunOutput::default()
        });
    }
    match &runnable.answer {
        Answer::Chain(chain) => chain::run(chain, input, ctx, tokens).await,
        Answer::Agent(spec) => agent::run(spec, input, ctx, tokens).await,
        Answer::MultiAgent {
            supervisor,
            workers,
        } => multiagent::run(supervisor, workers, input, ctx, tokens).await,
        Answer::Sequential(spec) => sequential::run(spec, input, ctx, tokens).await,
        Answer::Retrieval(chain) => retrieval::run(chain, input, ctx, tokens).await,
        Answer::Agentflow(flow) => {
            crate::flow::agentflow::exec::run(flow, input, ctx, tokens).await
        }
        Answer::CsvAgent(spec) => csv_agent::run(spec, input, ctx, tokens).await,
    }
}

/// The answer to a question the flow's moderation denies (Flowise answers it
/// as the text, 200), or `None` when it passes.
async fn moderate(
    runnable: &Runnable,
    input: &RunInput,
    ctx: &RunContext<'_>,
) -> Result<Option<String>, RunError> {
    let question = input.question.to_lowercase();
    for check in &runnable.moderation {
        match &check.model {
            None => {
                if check
                    .deny
                    .iter()
                    .any(|entry| question.contains(&entry.to_lowercase()))
                {
                    return Ok(Some(check.message.clone()));
                }
            }
            Some(spec) => {
                let model = ctx.model(spec).await?;
                for entry in &check.deny {
                    let ask = format!(
                        "Are these two sentences similar to each other? Only return Yes or No.\n\
                         First sentence: {}\nSecond sentence: {entry}",
                        input.question
                    );
                    let request = ChatRequest::text(
                        vec![ChatMessage::new(Role::User, ask)],
                        spec.params.clone(),
                    );
                    let step = model_step::<FlowEvent>(spec, &*model, request, None, false).await?;
                    if step.text.to_lowercase().contains("yes") {
                        return Ok(Some(check.message.clone()));
                    }
                }
            }
        }
    }
    Ok(None)
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
