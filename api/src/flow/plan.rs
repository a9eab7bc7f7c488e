//! From a graph to something runnable.
//!
//! [`Plan::build`] checks the whole graph once per chatflow version: every node
//! type is known, every input declared, required inputs present, references point
//! at nodes of the right kind, and the flow has one answer — a chain or agent
//! that nothing consumes, a supervisor with its workers, or a sequential graph
//! from its `seqStart`. [`Plan::runnable`] then builds that answer's components
//! for one request, with `overrideConfig` applied.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};
use uuid::Uuid;

use super::FlowError;
use super::agentflow::step::{Step, build_steps};
use super::agentflow::{AgentflowSpec, Wiring};
use super::component::{
    AgentSpec, ChainSpec, Component, CsvAgentSpec, FunctionSpec, LoaderSpec, MemorySpec, ModelSpec,
    ModerationSpec, PromptSpec, RetrievalChainSpec, Routing, SeqStep, SqlChainSpec, SupervisorSpec,
    ToolKind, ToolSpec, VectorStoreSpec, WorkerSpec,
};
use super::graph::{FlowGraph, FlowNode, embedded_references, fill_references, references};
use super::node::{Category, InputKind, NodeSpec, unknown};
use super::overrides::{Overrides, not_overridable};
use super::registry;
use super::registry::build_node;
use crate::config::ProviderSettings;

/// Whether a flow's text names the session's history in any spelling a
/// template reads (`chat_history`, `$flow.chatHistory`, the editor's escaped
/// `chat\_history`).
fn mentions_chat_history(flow_data: &str) -> bool {
    let text = flow_data.replace('\\', "");
    text.contains("chat_history") || text.contains("chatHistory")
}

/// Keys of `overrideConfig` that are request settings, not node inputs.
const REQUEST_KEYS: &[&str] = &["sessionId", "chatId"];

#[derive(Debug)]
pub struct Plan {
    graph: FlowGraph,
    shape: Shape,
    /// Whether answers can stream: not when the flow has an output parser
    /// (anywhere, as in Flowise), whose answer is whole JSON.
    streamable: bool,
    /// The stored credentials the nodes name ([`credential_ids`]).
    credential_ids: Vec<String>,
    /// Whether files attached to a prediction go to a vector store for the chat
    /// ([`Runnable::upload_store`] of the flow built without overrides).
    takes_chat_files: bool,
    /// An agentflow's steps as built without overrides and credentials: the
    /// same for every request that sends none, so built once.
    plain_steps: OnceLock<Arc<HashMap<String, Step>>>,
    /// Whether the flow's text mentions `chat_history` anywhere (an agentflow
    /// then reads its session's history whatever its nodes are).
    mentions_chat_history: bool,
}

/// The credentials a graph's nodes name, each once ([`super::destination::credential_uses`]).
fn credential_ids(graph: &FlowGraph) -> Vec<String> {
    let mut ids: Vec<String> = super::destination::credential_uses(graph)
        .into_iter()
        .map(|used| used.credential)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Which nodes answer.
#[derive(Debug)]
enum Shape {
    /// A chain or an agent.
    Single(String),
    MultiAgent {
        supervisor: String,
        workers: Vec<String>,
    },
    Sequential(Arc<SeqGraph>),
    /// Vector stores nothing reads: the flow is filled by upserts and answers nothing.
    StoreOnly,
    /// Flowise's Agentflow V2: `*Agentflow` nodes from a `startAgentflow`.
    Agentflow(Arc<Wiring>),
}

/// The wiring of a sequential flow: where it starts and, per node, where it goes.
#[derive(Debug, Default)]
pub struct SeqGraph {
    pub start: String,
    /// Next nodes of each node: `(branch, node)`; the branch is set for the
    /// outputs of a condition.
    pub next: HashMap<String, Vec<(Option<String>, String)>>,
    /// The tool node that serves an LLM node's tool calls.
    pub tool_node_of: HashMap<String, String>,
    /// Where each `seqLoop` goes back to.
    pub loop_target: HashMap<String, String>,
    /// Nodes that wait for several steps before them ("merge in"): each runs
    /// once all of these have run since it last did.
    pub joins: HashMap<String, Vec<String>>,
    /// Each node's place in the flow: results of steps that ran together are
    /// applied in this order.
    pub order: HashMap<String, usize>,
}

/// Everything one request runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Runnable {
    pub answer: Answer,
    /// Where the conversation is remembered, if anywhere.
    pub memory: Option<MemorySpec>,
    /// Checks of the question before anything runs (the answering node's `inputModeration`).
    pub moderation: Vec<ModerationSpec>,
    /// Nodes whose results other nodes read, in the order they run (each
    /// after the steps it reads): run before the answer.
    pub ahead: Vec<StepAhead>,
}

/// A node whose result other nodes read (`{{<id>.data.instance}}` in their
/// prompt values), run before the answer: a `customFunction`, or an
/// `llmChain` whose prediction (its `outputPrediction` anchor) feeds another
/// node, as in Flowise's Prompt Chaining template.
#[derive(Debug, Clone, PartialEq)]
pub enum StepAhead {
    Function(FunctionSpec),
    Chain(Box<ChainSpec>),
}

impl StepAhead {
    pub fn node_id(&self) -> &str {
        match self {
            StepAhead::Function(function) => &function.node_id,
            StepAhead::Chain(chain) => &chain.node_id,
        }
    }

    /// The nodes whose results this step reads.
    fn reads(&self) -> Vec<&str> {
        let values = match self {
            StepAhead::Function(function) => &function.variables,
            StepAhead::Chain(chain) => match &chain.prompt {
                Some(PromptSpec::Text { values, .. } | PromptSpec::Chat { values, .. }) => values,
                None => return Vec::new(),
            },
        };
        values
            .values()
            .filter_map(Value::as_str)
            .flat_map(embedded_references)
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Chain(ChainSpec),
    Agent(AgentSpec),
    MultiAgent {
        supervisor: SupervisorSpec,
        workers: Vec<WorkerSpec>,
    },
    Sequential(SequentialSpec),
    Retrieval(RetrievalChainSpec),
    Agentflow(AgentflowSpec),
    CsvAgent(CsvAgentSpec),
    /// A `customFunction` as the ending node: its result is the answer.
    Function(FunctionSpec),
    SqlChain(SqlChainSpec),
}

/// What an upsert fills: a vector store node and the loaders connected to it.
#[derive(Debug, Clone, PartialEq)]
pub struct UpsertTarget {
    pub store: VectorStoreSpec,
    pub loaders: Vec<LoaderSpec>,
}

#[derive(Debug, Clone)]
pub struct SequentialSpec {
    pub model: ModelSpec,
    /// Agent memory: each session's run begins at its last checkpoint.
    pub checkpoints: bool,
    pub steps: HashMap<String, SeqStep>,
    pub graph: Arc<SeqGraph>,
}

impl SequentialSpec {
    /// Whether a step runs JavaScript (in the Python runtime): a state update
    /// or a condition function.
    pub fn runs_javascript(&self) -> bool {
        self.steps.values().any(|s| match s {
            SeqStep::Agent(a) | SeqStep::Llm(a) => a.update_code.is_some(),
            SeqStep::ToolNode { update_code, .. } => update_code.is_some(),
            SeqStep::Condition { routing, .. } => matches!(routing, Routing::Code(_)),
            SeqStep::StateCode(_) => true,
            SeqStep::ConditionAgent(c) => matches!(c.routing, Routing::Code(_)),
            _ => false,
        })
    }
}

impl PartialEq for SequentialSpec {
    fn eq(&self, other: &Self) -> bool {
        self.model == other.model
            && self.checkpoints == other.checkpoints
            && self.steps == other.steps
            && Arc::ptr_eq(&self.graph, &other.graph)
    }
}

impl Runnable {
    /// Every tool the run may call.
    pub fn tools(&self) -> Vec<&ToolSpec> {
        match &self.answer {
            Answer::Chain(_)
            | Answer::Retrieval(_)
            | Answer::CsvAgent(_)
            | Answer::Function(_)
            | Answer::SqlChain(_) => Vec::new(),
            Answer::Agent(a) => a.tools.iter().collect(),
            Answer::MultiAgent { workers, .. } => workers.iter().flat_map(|w| &w.tools).collect(),
            Answer::Sequential(s) => s
                .steps
                .values()
                .flat_map(|step| match step {
                    SeqStep::Agent(a) | SeqStep::Llm(a) => a.tools.iter().collect(),
                    SeqStep::ToolNode { tools, .. } => tools.iter().collect(),
                    _ => Vec::new(),
                })
                .collect(),
            Answer::Agentflow(flow) => flow.tools().collect(),
        }
    }

    /// Whether the run reads workspace variables (`$vars`): Python tools, an
    /// agentflow that names them, a sequential step's JavaScript, or an MCP
    /// server's config that names them.
    pub fn reads_vars(&self) -> bool {
        self.uses_python()
            || super::tools::read_vars(self.tools())
            || self.runs_functions()
            || matches!(&self.answer, Answer::CsvAgent(_))
            || matches!(&self.answer, Answer::Agentflow(f) if f.reads_vars())
            || matches!(&self.answer, Answer::Sequential(s) if s.runs_javascript())
    }

    /// Whether the run needs its workspace's tool environment: tools, `$vars`,
    /// the Python runtime, or an agentflow's document stores.
    pub fn needs_tool_env(&self) -> bool {
        !self.tools().is_empty()
            || self.reads_vars()
            || matches!(&self.answer, Answer::Agentflow(f)
                if f.searches_document_stores() || f.runs_javascript())
    }

    /// Whether the run calls a `customFunction` (JavaScript in the runtime).
    pub fn runs_functions(&self) -> bool {
        self.ahead
            .iter()
            .any(|step| matches!(step, StepAhead::Function(_)))
            || matches!(self.answer, Answer::Function(_))
    }

    /// The runnable with each result of a step ahead (by node id) written
    /// where its nodes read it: `{{<id>.data.instance}}` in their prompt values.
    pub fn with_results(&self, results: &HashMap<String, String>) -> Runnable {
        let mut filled = self.clone();
        let fill = |values: &mut Map<String, Value>| fill_results(values, results);
        match &mut filled.answer {
            Answer::Chain(chain) => fill_chain(chain, results),
            Answer::Function(function) => fill(&mut function.variables),
            Answer::MultiAgent { workers, .. } => {
                for worker in workers {
                    fill(&mut worker.values);
                }
            }
            Answer::Sequential(spec) => {
                for step in spec.steps.values_mut() {
                    match step {
                        SeqStep::Agent(a) | SeqStep::Llm(a) => fill(&mut a.values),
                        SeqStep::ConditionAgent(c) => fill(&mut c.step.values),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        filled
    }

    /// Whether this is a sequential flow whose sessions resume checkpoints.
    pub fn checkpoints(&self) -> bool {
        matches!(&self.answer, Answer::Sequential(s) if s.checkpoints)
    }

    /// The agentflow this runs, if it is one.
    pub fn agentflow(&self) -> Option<&AgentflowSpec> {
        match &self.answer {
            Answer::Agentflow(flow) => Some(flow),
            _ => None,
        }
    }

    /// Ids of the workspace's Python tools the run uses (read before it starts).
    pub fn stored_tools(&self) -> Vec<Uuid> {
        super::tools::stored_ids(self.tools()).0
    }

    /// The vector store that takes a prediction's attached files for its chat
    /// (`fileUpload`): the retrieval chain's, else the first retriever tool's.
    pub fn upload_store(&self) -> Option<&VectorStoreSpec> {
        if let Answer::Retrieval(chain) = &self.answer
            && chain.store.file_upload
        {
            return Some(&chain.store);
        }
        self.tools().into_iter().find_map(|t| match &t.kind {
            ToolKind::Retriever { store, .. } if store.file_upload => Some(&**store),
            _ => None,
        })
    }

    /// Whether any Python tool (or JavaScript of an OpenAPI tool's own) may
    /// run, so workspace variables are needed.
    pub fn uses_python(&self) -> bool {
        self.tools().iter().any(|t| match &t.kind {
            ToolKind::Python(_) => true,
            ToolKind::OpenApi(operation) => operation.custom_code.is_some(),
            _ => false,
        })
    }
}

impl Plan {
    pub fn build(flow_data: &str, settings: &ProviderSettings) -> Result<Self, FlowError> {
        let graph = FlowGraph::parse(flow_data)?;
        let streamable = !graph.nodes.iter().any(|node| {
            registry::spec(&node.name).is_some_and(|spec| spec.category == Category::OutputParser)
        });
        let shape = if graph.nodes.iter().any(|n| n.name == "startAgentflow") {
            Shape::Agentflow(Arc::new(Wiring::build(&graph)?))
        } else {
            for node in &graph.nodes {
                validate_node(&graph, node)?;
            }
            shape(&graph)?
        };
        let mut plan = Plan {
            credential_ids: credential_ids(&graph),
            graph,
            shape,
            streamable,
            takes_chat_files: false,
            plain_steps: OnceLock::new(),
            mentions_chat_history: mentions_chat_history(flow_data),
        };
        // Building once without overrides finds what only building can (an agent
        // on a model that cannot call tools), at 400 like every other flaw.
        if !matches!(plan.shape, Shape::StoreOnly) {
            plan.takes_chat_files = plan
                .runnable(&Overrides::new(settings))?
                .upload_store()
                .is_some();
        }
        Ok(plan)
    }

    /// The credentials the flow's nodes name, each once (found at build).
    pub fn credential_ids(&self) -> &[String] {
        &self.credential_ids
    }

    /// Ids of the flow's vector store nodes, in flow order.
    pub fn vector_stores(&self) -> Vec<&str> {
        self.graph
            .nodes
            .iter()
            .filter(|n| {
                registry::spec(&n.name).is_some_and(|s| s.category == Category::VectorStore)
            })
            .map(|n| n.id.as_str())
            .collect()
    }

    /// The vector store an upsert fills — `stop_node_id`, or the flow's only
    /// one — built with its loaders (their files decoded).
    pub fn upsert_target(
        &self,
        stop_node_id: Option<&str>,
        overrides: &Overrides<'_>,
    ) -> Result<UpsertTarget, FlowError> {
        check_overrides(&self.graph, overrides)?;
        let node = self.store_node(stop_node_id)?;
        let build = super::node::Build::new(registry::node, &self.graph, node, overrides)?;
        Ok(UpsertTarget {
            store: self.store_spec(node, overrides)?,
            loaders: build.loaders("document")?,
        })
    }

    /// The flow's only vector store, built (no loader read): what a search
    /// of it as a document store needs.
    pub fn only_vector_store(
        &self,
        overrides: &Overrides<'_>,
    ) -> Result<VectorStoreSpec, FlowError> {
        self.store_spec(self.store_node(None)?, overrides)
    }

    fn store_spec(
        &self,
        node: &FlowNode,
        overrides: &Overrides<'_>,
    ) -> Result<VectorStoreSpec, FlowError> {
        match build_node(&self.graph, node, overrides)? {
            Component::VectorStore(store) => Ok(store),
            _ => Err(FlowError::invalid(format!(
                "node {} is not a vector store",
                node.id
            ))),
        }
    }

    /// The vector store node `stop_node_id` names, or the flow's only one.
    fn store_node(&self, stop_node_id: Option<&str>) -> Result<&FlowNode, FlowError> {
        let stores = self.vector_stores();
        let id = match (stop_node_id, stores.as_slice()) {
            (Some(id), _) if stores.contains(&id) => id,
            (Some(id), _) => {
                return Err(FlowError::invalid(format!(
                    "stopNodeId '{id}' is not a vector store of this flow (its vector stores: {})",
                    if stores.is_empty() {
                        "none".to_owned()
                    } else {
                        stores.join(", ")
                    }
                )));
            }
            (None, [one]) => *one,
            (None, []) => {
                return Err(FlowError::invalid(
                    "the flow has no vector store to upsert to; add one (memoryVectorStore, \
                     faiss or postgres) with its document loaders and embeddings",
                ));
            }
            (None, many) => {
                return Err(FlowError::invalid(format!(
                    "the flow has {} vector stores ({}); name the one to fill in stopNodeId",
                    many.len(),
                    many.join(", ")
                )));
            }
        };
        self.graph
            .node(id)
            .ok_or_else(|| FlowError::invalid(format!("node {id} is not in the flow")))
    }

    /// Whether answers can stream (see the field).
    pub fn is_streamable(&self) -> bool {
        self.streamable
    }

    /// An agentflow's start node (its input type and form), if this is an agentflow.
    pub fn agentflow_start(&self) -> Option<&FlowNode> {
        match &self.shape {
            Shape::Agentflow(wiring) => self.graph.node(&wiring.start),
            _ => None,
        }
    }

    /// Whether files attached to a prediction go to a vector store for the chat.
    pub fn takes_chat_files(&self) -> bool {
        self.takes_chat_files
    }

    /// Whether the flow's models see pictures sent with a question: one of its
    /// chat models (a node, or one chosen inside an agentflow node) has
    /// Flowise's `allowImageUploads` on, and is of a type that sends pictures
    /// (not the embedded model, which reads text only).
    pub fn takes_images(&self) -> bool {
        const VISION: &str = "allowImageUploads";
        let seeing_model = |name: &str| {
            registry::spec(name)
                .and_then(|s| s.input(VISION))
                .is_some_and(|input| input.kind == InputKind::Boolean)
        };
        let on = |v: Option<&serde_json::Value>| match v {
            Some(serde_json::Value::Bool(on)) => *on,
            Some(serde_json::Value::String(s)) => s == "true",
            _ => false,
        };
        self.graph.nodes.iter().any(|node| {
            (seeing_model(&node.name) && node.input_flag(VISION))
                || node.inputs.iter().any(|(key, config)| {
                    // `llmModel` names the model, `llmModelConfig` holds its inputs.
                    let chosen = key
                        .strip_suffix("Config")
                        .and_then(|param| node.inputs.get(param))
                        .and_then(serde_json::Value::as_str);
                    chosen.is_some_and(seeing_model) && on(config.get(VISION))
                })
        })
    }

    pub fn runnable(&self, overrides: &Overrides<'_>) -> Result<Runnable, FlowError> {
        check_overrides(&self.graph, overrides)?;
        let mut runnable = self.answer(overrides)?;
        runnable.ahead = self.ahead(overrides)?;
        let answering = match &self.shape {
            Shape::Single(id) => Some(id.as_str()),
            Shape::MultiAgent { supervisor, .. } => Some(supervisor.as_str()),
            Shape::Sequential(graph) => Some(graph.start.as_str()),
            Shape::StoreOnly | Shape::Agentflow(_) => None,
        };
        if let Some(node) = answering.and_then(|id| self.graph.node(id)) {
            let build = super::node::Build::new(registry::node, &self.graph, node, overrides)?;
            for component in build.anchors("inputModeration")? {
                if let Component::Moderation(check) = component {
                    runnable.moderation.push(check);
                }
            }
        }
        Ok(runnable)
    }

    /// The flow's steps ahead of its answer (see [`StepAhead`]; never its
    /// ending node), built, each after the steps it reads.
    fn ahead(&self, overrides: &Overrides<'_>) -> Result<Vec<StepAhead>, FlowError> {
        let answering = match &self.shape {
            Shape::Single(id) => Some(id.as_str()),
            _ => None,
        };
        // An edge from a chain's `llmChain` anchor hands over the chain itself
        // (to a chain tool); any other edge leaving it reads its prediction.
        let predicts = |node: &FlowNode| {
            self.graph.edges.iter().any(|edge| {
                edge.source == node.id
                    && !edge
                        .source_handle
                        .as_deref()
                        .is_some_and(|handle| handle.contains("-output-llmChain-"))
            })
        };
        let mut pending = Vec::new();
        for node in &self.graph.nodes {
            let ahead = match node.name.as_str() {
                "customFunction" => true,
                "llmChain" => predicts(node),
                _ => false,
            };
            if !ahead || Some(node.id.as_str()) == answering {
                continue;
            }
            match build_node(&self.graph, node, overrides)? {
                Component::Function(function) => pending.push(StepAhead::Function(function)),
                Component::Chain(chain) => pending.push(StepAhead::Chain(Box::new(chain))),
                _ => {}
            }
        }
        let mut ordered: Vec<StepAhead> = Vec::with_capacity(pending.len());
        while !pending.is_empty() {
            // A step is ready once every step ahead it reads has run.
            let ready = pending.iter().position(|step| {
                step.reads().iter().all(|id| {
                    ordered.iter().any(|done| done.node_id() == *id)
                        || !pending.iter().any(|other| other.node_id() == *id)
                })
            });
            let Some(ready) = ready else {
                return Err(FlowError::invalid(format!(
                    "the nodes {} read each other's results in a circle",
                    pending
                        .iter()
                        .map(StepAhead::node_id)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            };
            ordered.push(pending.remove(ready));
        }
        Ok(ordered)
    }

    /// An agentflow's steps for a request: built for it when it brings
    /// overrides or the flow names credentials, else the plan's shared ones.
    fn agentflow_steps(
        &self,
        overrides: &Overrides<'_>,
    ) -> Result<Arc<HashMap<String, Step>>, FlowError> {
        let plain = overrides.values.is_none_or(Map::is_empty)
            && overrides.credentials.is_none()
            && self.credential_ids.is_empty();
        if !plain {
            return Ok(Arc::new(build_steps(&self.graph, overrides)?));
        }
        if let Some(steps) = self.plain_steps.get() {
            return Ok(Arc::clone(steps));
        }
        let steps = Arc::new(build_steps(&self.graph, overrides)?);
        Ok(Arc::clone(self.plain_steps.get_or_init(|| steps)))
    }

    /// The answering part of the runnable.
    fn answer(&self, overrides: &Overrides<'_>) -> Result<Runnable, FlowError> {
        let build = |id: &str| -> Result<Component, FlowError> {
            let node = self
                .graph
                .node(id)
                .ok_or_else(|| FlowError::invalid(format!("node {id} is not in the flow")))?;
            build_node(&self.graph, node, overrides)
        };
        match &self.shape {
            Shape::Single(id) => match build(id)? {
                Component::Chain(chain) => Ok(Runnable {
                    moderation: Vec::new(),
                    ahead: Vec::new(),
                    memory: chain.memory.clone(),
                    answer: Answer::Chain(chain),
                }),
                Component::Agent(agent) => Ok(Runnable {
                    moderation: Vec::new(),
                    ahead: Vec::new(),
                    memory: agent.memory.clone(),
                    answer: Answer::Agent(agent),
                }),
                Component::RetrievalChain(chain) => Ok(Runnable {
                    moderation: Vec::new(),
                    ahead: Vec::new(),
                    memory: chain.memory.clone(),
                    answer: Answer::Retrieval(chain),
                }),
                Component::SqlChain(chain) => Ok(Runnable {
                    moderation: Vec::new(),
                    ahead: Vec::new(),
                    memory: None,
                    answer: Answer::SqlChain(chain),
                }),
                Component::Function(function) => Ok(Runnable {
                    moderation: Vec::new(),
                    ahead: Vec::new(),
                    memory: None,
                    answer: Answer::Function(function),
                }),
                Component::CsvAgent(agent) => Ok(Runnable {
                    moderation: Vec::new(),
                    ahead: Vec::new(),
                    memory: None,
                    answer: Answer::CsvAgent(agent),
                }),
                _ => Err(FlowError::invalid(format!(
                    "node {id} cannot answer on its own"
                ))),
            },
            Shape::MultiAgent {
                supervisor,
                workers,
            } => {
                let Component::Supervisor(supervisor) = build(supervisor)? else {
                    return Err(FlowError::invalid("the supervisor did not build"));
                };
                let workers = workers
                    .iter()
                    .map(|id| match build(id)? {
                        Component::Worker(w) => Ok(w),
                        _ => Err(FlowError::invalid(format!("node {id} is not a worker"))),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                for (i, w) in workers.iter().enumerate() {
                    if let Some(twin) = workers[..i]
                        .iter()
                        .find(|o| o.name.eq_ignore_ascii_case(&w.name))
                    {
                        return Err(FlowError::invalid(format!(
                            "workers {} and {} are both named '{}'; the supervisor routes by name",
                            twin.node_id, w.node_id, w.name
                        )));
                    }
                }
                Ok(Runnable {
                    moderation: Vec::new(),
                    ahead: Vec::new(),
                    memory: supervisor.memory.clone(),
                    answer: Answer::MultiAgent {
                        supervisor,
                        workers,
                    },
                })
            }
            Shape::StoreOnly => Err(FlowError::invalid(
                "the flow only stores documents (its ending nodes are vector stores): fill it \
                 with POST /api/v1/vector/upsert/<chatflow id>, and connect a chain such as \
                 retrievalQAChain to ask it questions",
            )),
            Shape::Agentflow(wiring) => {
                let spec = AgentflowSpec {
                    steps: self.agentflow_steps(overrides)?,
                    wiring: Arc::clone(wiring),
                };
                // Every agentflow's turns are stored; the session's history is
                // read only for a run that uses it (its nodes choose what).
                let memory =
                    (self.mentions_chat_history || spec.reads_history()).then(|| MemorySpec {
                        node_id: wiring.start.clone(),
                        window: None,
                        session_id: None,
                        label: None,
                        redis: None,
                    });
                Ok(Runnable {
                    moderation: Vec::new(),
                    ahead: Vec::new(),
                    memory,
                    answer: Answer::Agentflow(spec),
                })
            }
            Shape::Sequential(graph) => {
                let mut steps = HashMap::with_capacity(graph.next.len());
                let mut start = None;
                for node in &self.graph.nodes {
                    if spec_of(node)?.category != Category::Sequential {
                        continue;
                    }
                    let Component::Sequential(step) = build(&node.id)? else {
                        continue;
                    };
                    if let SeqStep::Start {
                        model,
                        memory,
                        checkpoints,
                    } = &step
                    {
                        start = Some((model.clone(), memory.clone(), *checkpoints));
                    }
                    steps.insert(node.id.clone(), step);
                }
                let (model, memory, checkpoints) =
                    start.ok_or_else(|| FlowError::invalid("the flow has no seqStart"))?;
                Ok(Runnable {
                    moderation: Vec::new(),
                    ahead: Vec::new(),
                    memory,
                    answer: Answer::Sequential(SequentialSpec {
                        model,
                        checkpoints,
                        steps,
                        graph: Arc::clone(graph),
                    }),
                })
            }
        }
    }
}

/// Writes each result over its `{{<id>.data.instance}}` in a chain's prompt values.
pub fn fill_chain(chain: &mut ChainSpec, results: &HashMap<String, String>) {
    if let Some(PromptSpec::Text { values, .. } | PromptSpec::Chat { values, .. }) =
        &mut chain.prompt
    {
        fill_results(values, results);
    }
}

/// Writes each result over its `{{<id>.data.instance}}` in these values.
fn fill_results(values: &mut Map<String, Value>, results: &HashMap<String, String>) {
    for value in values.values_mut() {
        if let Value::String(text) = value
            && text.contains(".data.instance")
        {
            *text = fill_references(text, results);
        }
    }
}

fn spec_of(node: &FlowNode) -> Result<&'static NodeSpec, FlowError> {
    registry::spec(&node.name).ok_or_else(|| unknown(node))
}

/// Which nodes answer, from the node types present.
fn shape(graph: &FlowGraph) -> Result<Shape, FlowError> {
    let of_type =
        |name: &str| -> Vec<&FlowNode> { graph.nodes.iter().filter(|n| n.name == name).collect() };
    let starts = of_type("seqStart");
    if !starts.is_empty() {
        if starts.len() > 1 {
            return Err(FlowError::invalid(
                "a sequential flow has exactly one seqStart",
            ));
        }
        return sequential(graph, &starts[0].id).map(|g| Shape::Sequential(Arc::new(g)));
    }
    if graph.nodes.iter().any(|n| n.name.starts_with("seq")) {
        return Err(FlowError::invalid(
            "the flow has sequential nodes but no seqStart to begin from",
        ));
    }
    let supervisors = of_type("supervisor");
    if !supervisors.is_empty() {
        if supervisors.len() > 1 {
            return Err(FlowError::invalid(
                "a multi-agent flow has exactly one supervisor",
            ));
        }
        let supervisor = supervisors[0].id.clone();
        let workers: Vec<String> = of_type("worker")
            .into_iter()
            .filter(|w| {
                w.inputs
                    .get("supervisor")
                    .is_some_and(|v| references(v).contains(&supervisor.as_str()))
            })
            .map(|w| w.id.clone())
            .collect();
        if workers.is_empty() {
            return Err(FlowError::invalid(format!(
                "supervisor {supervisor} has no workers; connect at least one worker to it"
            )));
        }
        return Ok(Shape::MultiAgent {
            supervisor,
            workers,
        });
    }
    if let Some(worker) = of_type("worker").first() {
        return Err(FlowError::invalid(format!(
            "worker {} needs a supervisor",
            worker.id
        )));
    }
    // A vector store nothing reads is filled by upserts, not an answer.
    let all_endings = graph.endings();
    let is_store =
        |n: &FlowNode| registry::spec(&n.name).is_some_and(|s| s.category == Category::VectorStore);
    let endings: Vec<&FlowNode> = all_endings
        .iter()
        .copied()
        .filter(|n| !is_store(n))
        .collect();
    if endings.is_empty() && !all_endings.is_empty() {
        return Ok(Shape::StoreOnly);
    }
    let ending = match endings.as_slice() {
        [one] => *one,
        [] => {
            return Err(FlowError::invalid(
                "the flow has no ending node (it is a cycle)",
            ));
        }
        many => {
            let ids: Vec<&str> = many.iter().map(|n| n.id.as_str()).collect();
            return Err(FlowError::invalid(format!(
                "the flow has {} ending nodes ({}); connect them so exactly one remains",
                many.len(),
                ids.join(", ")
            )));
        }
    };
    if !spec_of(ending)?.category.answers() {
        return Err(FlowError::invalid(format!(
            "the ending node {} ({}) cannot answer on its own; connect it to a chain \
             such as llmChain or conversationChain, or to an agent such as toolAgent",
            ending.id, ending.name
        )));
    }
    Ok(Shape::Single(ending.id.clone()))
}

/// The wiring of a sequential flow: a node goes to each node that lists it in
/// `sequentialNode`; a condition's branch is the output handle of its edge.
fn sequential(graph: &FlowGraph, start: &str) -> Result<SeqGraph, FlowError> {
    let mut seq = SeqGraph {
        start: start.to_owned(),
        ..SeqGraph::default()
    };
    let name_of = |id: &str| graph.node(id).map_or("", |n| n.name.as_str());
    let is_condition = |id: &str| matches!(name_of(id), "seqCondition" | "seqConditionAgent");
    // Loop targets are named as Flowise names graph nodes: lower case, spaces as `_`.
    let normalised = |name: &str| name.trim().to_lowercase().replace(char::is_whitespace, "_");
    let mut by_name: HashMap<String, String> = HashMap::new();
    for (index, node) in graph.nodes.iter().enumerate() {
        seq.order.insert(node.id.clone(), index);
        let label = match node.name.as_str() {
            "seqAgent" => node.inputs.get("agentName"),
            "seqLLMNode" => node.inputs.get("llmNodeName"),
            "seqToolNode" => node.inputs.get("toolNodeName"),
            _ => None,
        };
        if let Some(label) = label.and_then(Value::as_str) {
            by_name
                .entry(normalised(label))
                .or_insert_with(|| node.id.clone());
        }
    }
    for node in &graph.nodes {
        if node.name == "seqToolNode"
            && let Some(llm) = node.inputs.get("llmNode").map(references)
            && let Some(llm) = llm.first()
        {
            seq.tool_node_of.insert((*llm).to_owned(), node.id.clone());
        }
        if node.name == "seqLoop" {
            let wanted = node
                .inputs
                .get("loopToName")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let target = by_name.get(&normalised(wanted)).ok_or_else(|| {
                FlowError::invalid(format!(
                    "node {} (seqLoop) loops to '{wanted}', which names no agent, LLM or tool \
                     node of the flow",
                    node.id
                ))
            })?;
            seq.loop_target.insert(node.id.clone(), target.clone());
        }
        let Some(previous) = node.inputs.get("sequentialNode") else {
            continue;
        };
        let mut plain = Vec::new();
        for from in references(previous) {
            let branch = if is_condition(from) {
                let handle = graph
                    .edges
                    .iter()
                    .find(|e| e.source == from && e.target == node.id)
                    .and_then(|e| e.source_handle.as_deref())
                    .and_then(|h| branch_of(from, h));
                Some(handle.ok_or_else(|| {
                    FlowError::invalid(format!(
                        "node {} follows condition {from}, but no edge says from which of its \
                         outputs",
                        node.id
                    ))
                })?)
            } else {
                if name_of(from) != "seqStart" && !plain.contains(&from) {
                    plain.push(from);
                }
                None
            };
            let next = seq.next.entry(from.to_owned()).or_default();
            if !next.contains(&(branch.clone(), node.id.clone())) {
                next.push((branch, node.id.clone()));
            }
        }
        // As in Flowise: a step after two or more steps runs once after all of them.
        if plain.len() > 1 && matches!(node.name.as_str(), "seqAgent" | "seqLLMNode" | "seqLoop") {
            seq.joins.insert(
                node.id.clone(),
                plain.into_iter().map(str::to_owned).collect(),
            );
        }
    }
    for next in seq.next.values_mut() {
        next.sort_by_key(|(_, id)| seq.order.get(id).copied().unwrap_or(usize::MAX));
    }
    if !seq.next.contains_key(start) {
        return Err(FlowError::invalid(format!(
            "nothing follows {start}; connect a seqAgent or seqLLMNode to it"
        )));
    }
    Ok(seq)
}

/// `seqCondition_0-output-Yes-Condition` → `Yes`.
fn branch_of(condition: &str, handle: &str) -> Option<String> {
    let rest = handle.strip_prefix(condition)?.strip_prefix("-output-")?;
    let name = match rest.rfind('-') {
        Some(i) => &rest[..i],
        None => rest,
    };
    (!name.is_empty()).then(|| name.to_owned())
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn validate_node(graph: &FlowGraph, node: &FlowNode) -> Result<(), FlowError> {
    let spec = spec_of(node)?;
    if spec.category.is_agentflow() {
        return Err(FlowError::invalid(format!(
            "node {} ({}) is an agentflow node, in a flow without a startAgentflow node; an \
             agentflow begins at its startAgentflow",
            node.id, node.name
        )));
    }
    for (name, value) in &node.inputs {
        // Flowise keeps the credential id among the inputs.
        if name == "FLOWISE_CREDENTIAL_ID" || is_empty(value) {
            continue;
        }
        // Flowise keys some editor state by node: `selectedConditionFunctionTab_seqCondition_0`.
        let declared = name
            .strip_suffix(node.id.as_str())
            .and_then(|n| n.strip_suffix('_'))
            .filter(|base| spec.input(base).is_some())
            .unwrap_or(name);
        let Some(input) = spec.input(declared) else {
            return Err(FlowError::invalid(format!(
                "node {} ({}) has an input '{name}' that weir does not know",
                node.id, node.name
            )));
        };
        if let InputKind::Anchor(category) | InputKind::Anchors(category) = input.kind {
            for id in references(value) {
                let target = graph.node(id).ok_or_else(|| {
                    FlowError::invalid(format!(
                        "node {} input '{name}' refers to a node '{id}' that is not in the flow",
                        node.id
                    ))
                })?;
                let target_spec = spec_of(target)?;
                if !target_spec.category.fits(category) {
                    return Err(FlowError::invalid(format!(
                        "node {} input '{name}' expects a {category:?} node, but {} is a {:?}",
                        node.id, target.id, target_spec.category
                    )));
                }
                if category == Category::Unsupported {
                    return Err(FlowError::invalid(format!(
                        "node {} input '{name}' is connected to {} ({}), which weir does not run",
                        node.id, target.id, target.name
                    )));
                }
            }
        }
    }
    for input in spec.inputs.iter().filter(|i| i.required) {
        if node.inputs.get(input.name).is_none_or(is_empty) {
            return Err(FlowError::invalid(format!(
                "node {} ({}) is missing its required input '{}'",
                node.id, node.name, input.name
            )));
        }
    }
    Ok(())
}

/// A Flowise document store's configs as a graph of nodes — its loaders with
/// their splitters, and its vector store with its embeddings when one is set —
/// checked and built as a flow's nodes are, so a store takes exactly the inputs
/// those nodes take in a chatflow.
pub struct StoreGraph {
    graph: FlowGraph,
    /// The node whose `document` input names the loaders: the vector store, or
    /// a node of no type while the store has none.
    holder: String,
    credential_ids: Vec<String>,
}

/// What a [`StoreGraph`] builds to.
pub struct StoreParts {
    pub loaders: Vec<LoaderSpec>,
    pub store: Option<VectorStoreSpec>,
}

/// The node id a document store's vector store takes in its graph: the id its
/// vectors are kept under.
pub const STORE_VECTOR_NODE: &str = crate::domain::document_store::VECTOR_NODE;

impl StoreGraph {
    /// The graph of `loaders` of a document store (each `<loaderId>_<n>` with
    /// its splitter `<splitterId>_<n>`), held by the store's vector store (node
    /// [`STORE_VECTOR_NODE`], with its embeddings) when `with_vector_store` —
    /// which needs both configured — else by a node of no type.
    pub fn of_store(
        store: &crate::domain::DocumentStore,
        loaders: &[&crate::domain::DocumentLoader],
        with_vector_store: bool,
    ) -> Result<Self, FlowError> {
        // Flowise writes a config's credential among its inputs as `credential`.
        fn node(
            id: &str,
            name: &str,
            mut inputs: Map<String, Value>,
            credential: Option<&str>,
        ) -> Value {
            let written = match inputs.remove("credential") {
                Some(Value::String(id)) => Some(id),
                _ => None,
            };
            let credential = credential.or(written.as_deref());
            serde_json::json!({"id": id, "data": {
                "id": id, "name": name, "label": name, "inputs": inputs, "credential": credential,
            }})
        }
        let reference = |id: &str| Value::from(format!("{{{{{id}.data.instance}}}}"));
        let mut nodes = Vec::new();
        let mut documents = Vec::new();
        for (i, loader) in loaders.iter().enumerate() {
            let id = format!("{}_{i}", loader.loader_id);
            let mut inputs = loader.loader_config.clone();
            if let Some(splitter) = loader.splitter_id.as_deref().filter(|s| !s.is_empty()) {
                let splitter_id = format!("{splitter}_{i}");
                inputs.insert("textSplitter".into(), reference(&splitter_id));
                let config = loader.splitter_config.clone().unwrap_or_default();
                nodes.push(node(&splitter_id, splitter, config, None));
            }
            nodes.push(node(
                &id,
                &loader.loader_id,
                inputs,
                loader.credential.as_deref(),
            ));
            documents.push(reference(&id));
        }
        let holder = if with_vector_store {
            let (Some(vector), Some(embedding)) =
                (&store.vector_store_config, &store.embedding_config)
            else {
                return Err(FlowError::invalid(
                    "the document store has no vector store and embeddings configured: save them \
                     first (POST /api/v1/document-store/vectorstore/save)",
                ));
            };
            let embedding_id = format!("{}_0", embedding.name);
            nodes.push(node(
                &embedding_id,
                &embedding.name,
                embedding.config.clone(),
                None,
            ));
            let mut inputs = vector.config.clone();
            inputs.insert("document".into(), Value::Array(documents));
            inputs.insert("embeddings".into(), reference(&embedding_id));
            nodes.push(node(STORE_VECTOR_NODE, &vector.name, inputs, None));
            STORE_VECTOR_NODE
        } else {
            let mut inputs = Map::new();
            inputs.insert("document".into(), Value::Array(documents));
            nodes.push(node(
                "documentStoreLoaders",
                "documentStoreLoaders",
                inputs,
                None,
            ));
            "documentStoreLoaders"
        };
        let flow_data = serde_json::json!({"nodes": nodes, "edges": []}).to_string();
        Self::parse(&flow_data, holder)
    }

    pub fn parse(flow_data: &str, holder: &str) -> Result<Self, FlowError> {
        let graph = FlowGraph::parse(flow_data)?;
        for node in &graph.nodes {
            if node.id != holder || registry::spec(&node.name).is_some() {
                validate_node(&graph, node)?;
            }
        }
        if !graph.contains(holder) {
            return Err(FlowError::invalid(format!(
                "node {holder} is not in the store's graph"
            )));
        }
        Ok(StoreGraph {
            credential_ids: credential_ids(&graph),
            graph,
            holder: holder.to_owned(),
        })
    }

    /// The credentials the nodes name, each once.
    pub fn credential_ids(&self) -> &[String] {
        &self.credential_ids
    }

    pub fn parts(&self, overrides: &Overrides<'_>) -> Result<StoreParts, FlowError> {
        let node = self
            .graph
            .node(&self.holder)
            .ok_or_else(|| FlowError::invalid("the store's graph lost its holder node"))?;
        let loaders = super::node::Build::new(registry::node, &self.graph, node, overrides)?
            .loaders("document")?;
        let store = match registry::spec(&node.name) {
            None => None,
            Some(_) => match build_node(&self.graph, node, overrides)? {
                Component::VectorStore(store) => Some(store),
                _ => {
                    return Err(FlowError::invalid(format!(
                        "{} is not a vector store",
                        node.name
                    )));
                }
            },
        };
        Ok(StoreParts { loaders, store })
    }
}

/// 403 for an override of a sensitive input the chatflow does not allow.
fn check_overrides(graph: &FlowGraph, overrides: &Overrides<'_>) -> Result<(), FlowError> {
    let Some(values) = overrides.values else {
        return Ok(());
    };
    for (key, value) in values {
        if key == "vars" && !value.is_object() {
            return Err(FlowError::invalid(
                "overrideConfig.vars must be an object of variable values",
            ));
        }
        if REQUEST_KEYS.contains(&key.as_str()) || overrides.allowed.contains(key) {
            continue;
        }
        if key == "vars" {
            return Err(FlowError::forbidden(
                "overrideConfig.vars is not allowed: tool code reads these variables; the \
                 chatflow's apiConfig.overrideConfig.allow must list \"vars\"",
            ));
        }
        let sensitive = graph.nodes.iter().any(|n| {
            registry::spec(&n.name)
                .and_then(|s| s.input(key))
                .is_some_and(|i| i.sensitive)
        });
        if sensitive {
            return Err(not_overridable(key));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::LazyLock;

    use super::*;

    static SETTINGS: LazyLock<ProviderSettings> = LazyLock::new(ProviderSettings::default);

    fn plan_of(flow_data: &str) -> Result<Plan, FlowError> {
        Plan::build(flow_data, &SETTINGS)
    }

    fn no_overrides() -> Overrides<'static> {
        Overrides::new(&SETTINGS)
    }
    use crate::flow::component::{ChainKind, Provider};
    use crate::llm::openai::Auth;
    use serde_json::json;

    #[test]
    fn the_history_is_found_in_every_spelling_a_template_reads() {
        for text in [
            r#"{"m": "{{ chat_history }}"}"#,
            r#"{"m": "{{ chat\\_history }}"}"#,
            r#"{"m": "{{ $flow.chatHistory }}"}"#,
        ] {
            assert!(mentions_chat_history(text), "{text}");
        }
        assert!(!mentions_chat_history(r#"{"m": "{{ question }}"}"#));
    }

    fn node(id: &str, name: &str, inputs: Value) -> Value {
        json!({"id": id, "data": {"id": id, "name": name, "inputs": inputs}})
    }

    fn conversation(model_inputs: Value) -> String {
        json!({"nodes": [
            node("chatOpenAI_0", "chatOpenAI", model_inputs),
            node("bufferWindowMemory_0", "bufferWindowMemory", json!({"k": "3"})),
            node("conversationChain_0", "conversationChain", json!({
                "model": "{{chatOpenAI_0.data.instance}}",
                "memory": "{{bufferWindowMemory_0.data.instance}}",
                "systemMessagePrompt": "Be brief."
            }))
        ], "edges": []})
        .to_string()
    }

    fn chain(r: &Runnable) -> &ChainSpec {
        match &r.answer {
            Answer::Chain(c) => c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn builds_a_conversation_chain() {
        let plan = plan_of(&conversation(json!({
            "modelName": "gpt-x", "temperature": "0.2", "basePath": "http://127.0.0.1:9/v1/",
            "cache": "", "allowImageUploads": true
        })))
        .unwrap();
        let r = plan.runnable(&no_overrides()).unwrap();
        let c = chain(&r);
        assert_eq!(c.kind, ChainKind::Conversation);
        assert_eq!(c.system_message, "Be brief.");
        assert_eq!(r.memory.as_ref().and_then(|m| m.window), Some(3));
        assert_eq!(c.model.params.temperature, Some(0.2));
        match &c.model.provider {
            Provider::OpenAi { base, model, .. } => {
                assert_eq!(base, "http://127.0.0.1:9/v1");
                assert_eq!(model, "gpt-x");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_chain_whose_prediction_feeds_a_prompt_runs_ahead_of_the_answer() {
        // Flowise's Prompt Chaining template: llmChain_0's outputPrediction is
        // a prompt value of the prompt llmChain_1 answers with.
        let model = |id: &str| node(id, "chatOpenAI", json!({"modelName": "gpt-x"}));
        let prompt = |id: &str, values: Value| {
            node(
                id,
                "promptTemplate",
                json!({"template": "Do {objective} after {result}",
                                              "promptValues": values.to_string()}),
            )
        };
        let flow = json!({"nodes": [
            model("chatOpenAI_0"), model("chatOpenAI_1"),
            prompt("promptTemplate_0", json!({"objective": "{{question}}", "result": "nothing"})),
            prompt("promptTemplate_1", json!({"objective": "{{question}}",
                                              "result": "{{llmChain_0.data.instance}}"})),
            node("llmChain_0", "llmChain", json!({"model": "{{chatOpenAI_0.data.instance}}",
                                                  "prompt": "{{promptTemplate_0.data.instance}}"})),
            node("llmChain_1", "llmChain", json!({"model": "{{chatOpenAI_1.data.instance}}",
                                                  "prompt": "{{promptTemplate_1.data.instance}}"}))
        ], "edges": [
            {"source": "llmChain_0", "target": "promptTemplate_1",
             "sourceHandle": "llmChain_0-output-outputPrediction-string|json"},
            {"source": "promptTemplate_1", "target": "llmChain_1"}
        ]});
        let r = plan_of(&flow.to_string())
            .unwrap()
            .runnable(&no_overrides())
            .unwrap();
        assert_eq!(chain(&r).node_id, "llmChain_1");
        assert_eq!(
            r.ahead.iter().map(StepAhead::node_id).collect::<Vec<_>>(),
            ["llmChain_0"]
        );
        assert!(!r.runs_functions());
        let results = HashMap::from([("llmChain_0".to_owned(), "step one".to_owned())]);
        let filled = r.with_results(&results);
        match &chain(&filled).prompt {
            Some(PromptSpec::Text { values, .. }) => assert_eq!(values["result"], "step one"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn validation_names_node_and_input() {
        let err = plan_of(&conversation(json!({"wat": "x"}))).unwrap_err();
        assert!(
            err.message.contains("chatOpenAI_0") && err.message.contains("'wat'"),
            "{err}"
        );
        let err = plan_of(&conversation(json!({"temperature": "hot"}))).unwrap_err();
        assert!(err.message.contains("temperature"), "{err}");
        let unknown = json!({"nodes": [node("mystery_0", "mystery", json!({}))], "edges": []});
        let err = plan_of(&unknown.to_string()).unwrap_err();
        assert!(err.message.contains("mystery"), "{err}");
        let lonely = json!({"nodes": [node("chatLocal_0", "chatLocal", json!({}))], "edges": []});
        assert!(
            plan_of(&lonely.to_string())
                .unwrap_err()
                .message
                .contains("chain")
        );
        let missing = json!({"nodes": [node("llmChain_0", "llmChain", json!({}))], "edges": []});
        assert!(
            plan_of(&missing.to_string())
                .unwrap_err()
                .message
                .contains("'model'")
        );
        let two = json!({"nodes": [
            node("a", "llmChain", json!({})), node("b", "llmChain", json!({}))
        ], "edges": []});
        assert!(
            plan_of(&two.to_string())
                .unwrap_err()
                .message
                .contains("required input")
        );
    }

    #[test]
    fn agents_need_a_model_that_calls_tools() {
        let flow = json!({"nodes": [
            node("chatLocal_0", "chatLocal", json!({})),
            node("calculator_0", "calculator", json!({})),
            node("toolAgent_0", "toolAgent", json!({
                "model": "{{chatLocal_0.data.instance}}",
                "tools": ["{{calculator_0.data.instance}}"]
            }))
        ], "edges": []});
        let err = plan_of(&flow.to_string()).unwrap_err();
        assert!(err.message.contains("cannot call tools"), "{err}");
        let flow = flow.to_string().replace("chatLocal", "chatOllama");
        let r = plan_of(&flow).unwrap().runnable(&no_overrides()).unwrap();
        match r.answer {
            Answer::Agent(a) => {
                assert_eq!(a.tools.len(), 1);
                assert_eq!(a.max_iterations, 10);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn multi_agent_and_sequential_shapes() {
        let sup = json!({"nodes": [
            node("m", "chatOpenAI", json!({})),
            node("s", "supervisor", json!({"model": "{{m.data.instance}}"})),
            node("w1", "worker", json!({"workerName": "A", "workerPrompt": "a", "supervisor": "{{s.data.instance}}"})),
            node("w2", "worker", json!({"workerName": "B", "workerPrompt": "b", "supervisor": "{{s.data.instance}}"}))
        ], "edges": []});
        let r = plan_of(&sup.to_string())
            .unwrap()
            .runnable(&no_overrides())
            .unwrap();
        assert!(matches!(r.answer, Answer::MultiAgent { ref workers, .. } if workers.len() == 2));

        let seq = json!({"nodes": [
            node("m", "chatOpenAI", json!({})),
            node("start", "seqStart", json!({"model": "{{m.data.instance}}"})),
            node("agent", "seqAgent", json!({"agentName": "A", "sequentialNode": ["{{start.data.instance}}"]})),
            node("cond", "seqCondition", json!({"sequentialNode": ["{{agent.data.instance}}"],
                "conditionUI": "[{\"variable\":\"$flow.output.content\",\"operation\":\"Contains\",\"value\":\"yes\",\"output\":\"Yes\"}]"})),
            node("yes", "seqEnd", json!({"sequentialNode": ["{{cond.data.instance}}"]})),
            node("no", "seqEnd", json!({"sequentialNode": ["{{cond.data.instance}}"]}))
        ], "edges": [
            {"source": "cond", "target": "yes", "sourceHandle": "cond-output-Yes-Condition"},
            {"source": "cond", "target": "no", "sourceHandle": "cond-output-End-Condition"}
        ]});
        let plan = plan_of(&seq.to_string()).unwrap();
        let Answer::Sequential(spec) = plan.runnable(&no_overrides()).unwrap().answer else {
            panic!("not sequential");
        };
        let branches = &spec.graph.next["cond"];
        assert!(branches.contains(&(Some("Yes".into()), "yes".into())));
        assert!(branches.contains(&(Some("End".into()), "no".into())));
        assert_eq!(
            branch_of("c", "c-output-my-branch-Condition").as_deref(),
            Some("my-branch")
        );
    }

    #[test]
    fn overrides_apply_and_sensitive_ones_need_allowing() {
        let plan = plan_of(&conversation(json!({"temperature": 0.9}))).unwrap();
        let values = json!({"temperature": 0.1, "systemMessagePrompt": {"conversationChain_0": "Hi."}, "sessionId": "s"});
        let values = values.as_object().unwrap();
        let r = plan
            .runnable(&Overrides {
                values: Some(values),
                allowed: &HashSet::new(),
                credentials: None,
                settings: &SETTINGS,
            })
            .unwrap();
        assert_eq!(chain(&r).model.params.temperature, Some(0.1));
        assert_eq!(chain(&r).system_message, "Hi.");

        let secret = json!({"basePath": "http://169.254.169.254/"});
        let secret = secret.as_object().unwrap();
        let err = plan
            .runnable(&Overrides {
                values: Some(secret),
                allowed: &HashSet::new(),
                credentials: None,
                settings: &SETTINGS,
            })
            .unwrap_err();
        assert_eq!(err.kind, super::super::FlowErrorKind::Forbidden);
        assert!(err.message.contains("basePath"));
        let allowed = HashSet::from(["basePath".to_owned()]);
        let r = plan
            .runnable(&Overrides {
                values: Some(secret),
                allowed: &allowed,
                credentials: None,
                settings: &SETTINGS,
            })
            .unwrap();
        assert!(matches!(
            chain(&r).model.provider,
            Provider::OpenAi { ref base, ref auth, .. }
                if base == "http://169.254.169.254" && matches!(auth, Auth::Bearer(_))
        ));
    }
}
