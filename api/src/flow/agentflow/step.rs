//! Each agentflow node read into a typed [`Step`] for one request. Text inputs
//! stay as written (their variables are resolved when the node runs); models and
//! tools chosen inside a node (`llmModel` + `llmModelConfig`) are built by the
//! chat model and tool node types weir already has, with the request's
//! overrides — so every provider and tool works here as it does in a chatflow.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::wiring::Wiring;
use super::{DEFAULT_LOOP_COUNT, MAX_LOOP_COUNT};
use crate::flow::FlowError;
use crate::flow::component::{
    Component, ModelSpec, OutputField, ToolKind, ToolSpec, cell, output_fields,
};
use crate::flow::graph::{FlowGraph, FlowNode, credential_of};
use crate::flow::overrides::{Overrides, check_inner_overrides};
use crate::flow::registry::build_node;
use crate::llm::Role;

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub id: String,
    pub name: String,
    pub kind: StepKind,
}

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

/// Every node of the flow as a step.
pub fn build_steps(
    graph: &FlowGraph,
    wiring: &Wiring,
    overrides: &Overrides<'_>,
) -> Result<HashMap<String, Step>, FlowError> {
    let mut steps = HashMap::with_capacity(graph.nodes.len());
    for node in &graph.nodes {
        let read = Read {
            graph,
            node,
            overrides,
        };
        let kind = read.kind(wiring)?;
        steps.insert(
            node.id.clone(),
            Step {
                id: node.id.clone(),
                name: node.name.clone(),
                kind,
            },
        );
    }
    Ok(steps)
}

/// One node's inputs being read.
struct Read<'a> {
    graph: &'a FlowGraph,
    node: &'a FlowNode,
    overrides: &'a Overrides<'a>,
}

impl Read<'_> {
    fn invalid(&self, what: impl std::fmt::Display) -> FlowError {
        FlowError::invalid(format!("node {} ({}) {what}", self.node.id, self.node.name))
    }

    fn value(&self, name: &str) -> Option<&Value> {
        self.node.inputs.get(name).filter(|v| !v.is_null())
    }

    /// A text input as written (variables unresolved); empty when absent.
    fn text(&self, name: &str) -> String {
        match self.value(name) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::Bool(b)) => b.to_string(),
            _ => String::new(),
        }
    }

    fn flag(&self, name: &str) -> bool {
        matches!(self.value(name), Some(Value::Bool(true)))
            || matches!(self.value(name), Some(Value::String(s)) if s == "true")
    }

    /// An `array` input: its rows (Flowise writes `""` for none, and some inputs as JSON text).
    fn rows(&self, name: &str) -> Result<Vec<Map<String, Value>>, FlowError> {
        let parsed;
        let items = match self.value(name) {
            None => return Ok(Vec::new()),
            Some(Value::String(s)) if s.trim().is_empty() => return Ok(Vec::new()),
            Some(Value::String(s)) => {
                parsed = serde_json::from_str::<Value>(s).map_err(|e| {
                    self.invalid(format_args!("input '{name}' is not a list of rows: {e}"))
                })?;
                &parsed
            }
            Some(v) => v,
        };
        let Value::Array(items) = items else {
            return Err(self.invalid(format_args!("input '{name}' must be a list of rows")));
        };
        items
            .iter()
            .map(|row| match row {
                Value::Object(o) => Ok(o.clone()),
                _ => Err(self.invalid(format_args!(
                    "input '{name}' has a row that is not an object"
                ))),
            })
            .collect()
    }

    /// `{key, value}` rows (state updates, headers, query parameters).
    fn pairs(
        &self,
        name: &str,
        key: &str,
        value: &str,
    ) -> Result<Vec<(String, String)>, FlowError> {
        Ok(self
            .rows(name)?
            .iter()
            .filter_map(|row| {
                let k = row.get(key).and_then(Value::as_str)?.trim();
                (!k.is_empty()).then(|| (k.to_owned(), cell(row.get(value))))
            })
            .collect())
    }

    /// A component chosen inside the node: `<param>` names its type and
    /// `<param>Config` holds its inputs.
    fn component(&self, param: &str) -> Result<Option<Component>, FlowError> {
        let name = self.text(param);
        if name.trim().is_empty() {
            return Ok(None);
        }
        let (inputs, credential) = match self.value(&format!("{param}Config")) {
            Some(Value::Object(config)) => {
                (clean_config(config, param), credential_of(None, config))
            }
            _ => (Map::new(), None),
        };
        self.build_inner(param, name.trim(), inputs, credential)
            .map(Some)
    }

    fn build_inner(
        &self,
        what: &str,
        name: &str,
        inputs: Map<String, Value>,
        credential: Option<String>,
    ) -> Result<Component, FlowError> {
        let inner = FlowNode {
            id: self.node.id.clone(),
            name: name.to_owned(),
            label: self.node.label.clone(),
            inputs,
            credential,
            parent: None,
        };
        if let Some(spec) = crate::flow::registry::spec(name) {
            check_inner_overrides(spec, self.overrides)?;
        }
        build_node(self.graph, &inner, self.overrides).map_err(|e| {
            self.invalid(format_args!(
                "cannot use its '{what}' ({name}): {}",
                e.message
            ))
        })
    }

    fn model(&self, param: &str) -> Result<ModelSpec, FlowError> {
        match self.component(param)? {
            Some(Component::Model(model)) => Ok(model),
            Some(_) => Err(self.invalid(format_args!("input '{param}' must name a chat model"))),
            None => Err(self.invalid(format_args!("needs a chat model ('{param}')"))),
        }
    }

    fn talk(&self, prefix: &str) -> Result<Talk, FlowError> {
        let mut messages = Vec::new();
        let mut system = Vec::new();
        for row in self.rows(&format!("{prefix}Messages"))? {
            let content = cell(row.get("content"));
            let role = match row.get("role").and_then(Value::as_str).unwrap_or("") {
                "system" | "developer" => Role::System,
                "assistant" => Role::Assistant,
                "user" => Role::User,
                "" => continue,
                other => {
                    return Err(
                        self.invalid(format_args!("has a message of unknown role '{other}'"))
                    );
                }
            };
            if content.trim().is_empty() {
                continue;
            }
            if role == Role::System {
                system.push((role, content));
            } else {
                messages.push((role, content));
            }
        }
        system.extend(messages);
        // A missing switch is off, as in Flowise (its editor writes `true` by default).
        let memory = if !self.flag(&format!("{prefix}EnableMemory")) {
            Memory::Off
        } else {
            match self.text(&format!("{prefix}MemoryType")).as_str() {
                "" | "allMessages" => Memory::All,
                "windowSize" => {
                    let size = self.text(&format!("{prefix}MemoryWindowSize"));
                    let n = match size.trim() {
                        "" => 20,
                        s => s.parse::<u32>().map_err(|_| {
                            self.invalid("has a memory window size that is not a whole number")
                        })?,
                    };
                    Memory::Window(n.max(1))
                }
                "conversationSummary" => Memory::Summary,
                "conversationSummaryBuffer" => {
                    let limit = self.text(&format!("{prefix}MemoryMaxTokenLimit"));
                    Memory::SummaryBuffer(match limit.trim() {
                        "" => 2000,
                        n => n.parse::<u32>().map_err(|_| {
                            self.invalid("has a memory token limit that is not a whole number")
                        })?,
                    })
                }
                other => {
                    return Err(self.invalid(format_args!(
                        "uses the memory type '{other}', which weir does not know (allMessages, \
                         windowSize, conversationSummary or conversationSummaryBuffer)"
                    )));
                }
            }
        };
        let user_message = Some(self.text(&format!("{prefix}UserMessage")))
            .filter(|m| !m.trim().is_empty() && memory != Memory::Off);
        Ok(Talk {
            messages: system,
            memory,
            user_message,
            as_assistant: self.text(&format!("{prefix}ReturnResponseAs")) == "assistantMessage",
        })
    }

    /// A knowledge row's `documentStore` (`<id>:<name>`): in weir, the id of a
    /// chatflow of the workspace holding one vector store; and the name its
    /// search tool goes by.
    fn document_store(&self, row: &Map<String, Value>) -> Result<(uuid::Uuid, String), FlowError> {
        let written = cell(row.get("documentStore"));
        let (id, name) = written.split_once(':').unwrap_or((written.as_str(), ""));
        let chatflow = uuid::Uuid::parse_str(id.trim()).map_err(|_| {
            self.invalid(format_args!(
                "names the document store '{written}'; in weir a document store is a chatflow \
                 holding a vector store: write '<its id>:<a name>'"
            ))
        })?;
        // Tool names are call names: letters, digits, '_' and '-'.
        let mut tool: String = name
            .trim()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        if tool.trim_matches('_').is_empty() {
            let id = chatflow.simple().to_string();
            tool = format!("document_store_{}", id.get(..8).unwrap_or(&id));
        }
        Ok((chatflow, tool))
    }

    fn structured(&self, name: &str) -> Result<Vec<OutputField>, FlowError> {
        output_fields(&self.rows(name)?, |why| self.invalid(why))
    }

    fn kind(&self, wiring: &Wiring) -> Result<StepKind, FlowError> {
        let not_yet =
            |what: &str| Err(self.invalid(format_args!("{what}, which weir does not support yet")));
        Ok(match self.node.name.as_str() {
            "startAgentflow" => {
                let form_input = match self.text("startInputType").as_str() {
                    "" | "chatInput" => false,
                    "formInput" => true,
                    other => {
                        return Err(self.invalid(format_args!(
                            "starts on '{other}'; weir starts agentflows from a chat or a form \
                             (its triggers call them by cron or webhook)"
                        )));
                    }
                };
                StepKind::Start(Start {
                    form_input,
                    state: self.pairs("startState", "key", "value")?,
                    persist_state: self.flag("startPersistState"),
                    ephemeral_memory: self.flag("startEphemeralMemory"),
                })
            }
            "llmAgentflow" => StepKind::Llm(Llm {
                model: self.model("llmModel")?,
                talk: self.talk("llm")?,
                structured: self.structured("llmStructuredOutput")?,
                update_state: self.pairs("llmUpdateState", "key", "value")?,
            }),
            "agentAgentflow" => {
                if !self.rows("agentKnowledgeVSEmbeddings")?.is_empty() {
                    return Err(self.invalid(
                        "searches vector stores through their own connections \
                         (agentKnowledgeVSEmbeddings), which weir does not make; give it \
                         document stores (agentKnowledgeDocumentStores) — in weir, chatflows \
                         holding a vector store",
                    ));
                }
                let mut tools = Vec::new();
                let mut approval = Vec::new();
                for row in self.rows("agentKnowledgeDocumentStores")? {
                    let (chatflow, mut name) = self.document_store(&row)?;
                    // Tool names are call names: two stores of one name get two.
                    let taken = |n: &str, tools: &[ToolSpec]| {
                        tools.iter().any(|t| {
                            matches!(&t.kind, ToolKind::DocumentStore { name, .. } if name == n)
                        })
                    };
                    let stem = name.clone();
                    let mut n = 2;
                    while taken(&name, &tools) {
                        name = format!("{stem}_{n}");
                        n += 1;
                    }
                    let description = cell(row.get("docStoreDescription"));
                    tools.push(ToolSpec {
                        node_id: self.node.id.clone(),
                        kind: ToolKind::DocumentStore {
                            description: if description.trim().is_empty() {
                                format!("Searches the document store {name}.")
                            } else {
                                description
                            },
                            name,
                            chatflow,
                            return_sources: matches!(
                                row.get("returnSourceDocuments"),
                                Some(Value::Bool(true))
                            ),
                        },
                    });
                    approval.push(false);
                }
                for row in self.rows("agentTools")? {
                    let name = cell(row.get("agentSelectedTool"));
                    if name.trim().is_empty() {
                        continue;
                    }
                    let (config, credential) = match row.get("agentSelectedToolConfig") {
                        Some(Value::Object(c)) => {
                            (clean_config(c, "agentSelectedTool"), credential_of(None, c))
                        }
                        _ => (Map::new(), None),
                    };
                    match self.build_inner("agentSelectedTool", name.trim(), config, credential)? {
                        Component::Tool(tool) => {
                            tools.push(tool);
                            approval.push(matches!(
                                row.get("agentSelectedToolRequiresHumanInput"),
                                Some(Value::Bool(true))
                            ));
                        }
                        _ => {
                            return Err(self.invalid(format_args!("'{name}' is not a tool")));
                        }
                    }
                }
                if self.node.parent.is_some() && approval.iter().any(|a| *a) {
                    return Err(self.invalid(
                        "asks for approval before a tool inside an iteration; a block runs once \
                         per item without pausing",
                    ));
                }
                for built_in in [
                    "agentToolsBuiltInOpenAI",
                    "agentToolsBuiltInGemini",
                    "agentToolsBuiltInAnthropic",
                ] {
                    if self.value(built_in).is_some_and(|v| {
                        v.as_array().is_some_and(|a| !a.is_empty())
                            || v.as_str()
                                .is_some_and(|s| !s.trim().is_empty() && s != "[]")
                    }) {
                        return not_yet(&format!(
                            "uses the provider's built-in tools ('{built_in}')"
                        ));
                    }
                }
                StepKind::Agent(Agent {
                    model: self.model("agentModel")?,
                    talk: self.talk("agent")?,
                    tools,
                    approval,
                    structured: self.structured("agentStructuredOutput")?,
                    update_state: self.pairs("agentUpdateState", "key", "value")?,
                })
            }
            "toolAgentflow" => {
                let param = if self.text("toolAgentflowSelectedTool").trim().is_empty() {
                    "selectedTool"
                } else {
                    "toolAgentflowSelectedTool"
                };
                let tool = match self.component(param)? {
                    Some(Component::Tool(tool)) => tool,
                    Some(_) => return Err(self.invalid(format_args!("'{param}' is not a tool"))),
                    None => return Err(self.invalid("needs a tool ('toolAgentflowSelectedTool')")),
                };
                StepKind::Tool(ToolStep {
                    tool,
                    args: self.pairs("toolInputArgs", "inputArgName", "inputArgValue")?,
                    update_state: self.pairs("toolUpdateState", "key", "value")?,
                })
            }
            "conditionAgentflow" => StepKind::Condition(self.rows("conditions")?),
            "conditionAgentAgentflow" => {
                let scenarios: Vec<String> = self
                    .rows("conditionAgentScenarios")?
                    .iter()
                    .map(|row| cell(row.get("scenario")).trim().to_owned())
                    .collect();
                if scenarios.is_empty() || scenarios.iter().any(String::is_empty) {
                    return Err(self.invalid("needs its scenarios, none of them empty"));
                }
                let decisions = wiring.next(&self.node.id);
                if let Some(beyond) = decisions
                    .iter()
                    .find(|n| n.branch.is_some_and(|b| b >= scenarios.len()))
                {
                    return Err(self.invalid(format_args!(
                        "has an edge to {} from an output it does not have ({} scenarios)",
                        beyond.target,
                        scenarios.len()
                    )));
                }
                StepKind::ConditionAgent(ConditionAgent {
                    model: self.model("conditionAgentModel")?,
                    instructions: self.text("conditionAgentInstructions"),
                    input: self.text("conditionAgentInput"),
                    scenarios,
                    memory: self.flag("conditionAgentEnableMemory"),
                    system: Some(self.text("conditionAgentSystemPrompt")).filter(|s| {
                        self.flag("conditionAgentOverrideSystemPrompt") && !s.trim().is_empty()
                    }),
                })
            }
            "loopAgentflow" => {
                let target_text = self.text("loopBackToNode");
                // `<nodeId>-<label>`; ids never hold '-' but labels may.
                let target = target_text
                    .split('-')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                if !wiring.names.contains_key(&target) {
                    return Err(self.invalid(format_args!(
                        "loops back to '{target_text}', which is not a node of the flow"
                    )));
                }
                let max = match self.text("maxLoopCount").trim() {
                    "" => DEFAULT_LOOP_COUNT,
                    n => match n.parse::<f64>() {
                        Ok(n) if n >= 1.0 && n <= f64::from(MAX_LOOP_COUNT) => n as u32,
                        _ => {
                            return Err(self.invalid(format_args!(
                                "input 'maxLoopCount' must be a whole number from 1 to {MAX_LOOP_COUNT}"
                            )));
                        }
                    },
                };
                StepKind::Loop(LoopStep {
                    target,
                    max,
                    fallback: Some(self.text("fallbackMessage")).filter(|m| !m.trim().is_empty()),
                    update_state: self.pairs("loopUpdateState", "key", "value")?,
                })
            }
            "iterationAgentflow" => StepKind::Iteration {
                input: self.text("iterationInput"),
            },
            "directReplyAgentflow" => StepKind::DirectReply {
                message: self.text("directReplyMessage"),
            },
            "httpAgentflow" => self.http()?,
            "customFunctionAgentflow" => {
                return Err(self.invalid(
                    "runs JavaScript, which weir does not run; do the work in a Python tool \
                     (toolAgentflow with a stored tool) instead",
                ));
            }
            "retrieverAgentflow" => {
                let mut stores = Vec::new();
                for row in self.rows("retrieverKnowledgeDocumentStores")? {
                    stores.push(self.document_store(&row)?.0);
                }
                if stores.is_empty() {
                    return Err(self.invalid("names no document store to search"));
                }
                StepKind::Retriever(RetrieverStep {
                    stores,
                    query: self.text("retrieverQuery"),
                    with_metadata: self.text("outputFormat") == "textWithMetadata",
                    update_state: self.pairs("retrieverUpdateState", "key", "value")?,
                })
            }
            "humanInputAgentflow" => {
                if self.node.parent.is_some() {
                    return Err(self.invalid(
                        "waits for human input inside an iteration; a block runs once per item \
                         without pausing — put the human input before or after the iteration",
                    ));
                }
                let ask = match self.text("humanInputDescriptionType").as_str() {
                    "dynamic" => Ask::Model {
                        model: Box::new(self.model("humanInputModel")?),
                        prompt: self.text("humanInputModelPrompt"),
                    },
                    _ => Ask::Fixed(self.text("humanInputDescription")),
                };
                StepKind::HumanInput(HumanInput {
                    ask,
                    feedback: self.flag("humanInputEnableFeedback"),
                })
            }
            "executeFlowAgentflow" => {
                let selected = self.text("executeFlowSelectedFlow");
                let Ok(flow) = uuid::Uuid::parse_str(selected.trim()) else {
                    return Err(self.invalid(format_args!(
                        "input 'executeFlowSelectedFlow' must be a chatflow's id, not '{selected}'"
                    )));
                };
                StepKind::ExecuteFlow(ExecuteFlowStep {
                    flow,
                    input: self.text("executeFlowInput"),
                    override_config: match self.value("executeFlowOverrideConfig") {
                        Some(Value::Object(map)) => Value::Object(map.clone()).to_string(),
                        _ => self.text("executeFlowOverrideConfig"),
                    },
                    as_assistant: self.text("executeFlowReturnResponseAs") == "assistantMessage",
                    update_state: self.pairs("executeFlowUpdateState", "key", "value")?,
                })
            }
            _ => {
                return Err(FlowError::invalid(format!(
                    "node {} is of type '{}', which weir does not implement",
                    self.node.id, self.node.name
                )));
            }
        })
    }

    fn http(&self) -> Result<StepKind, FlowError> {
        let method = match self.text("method").to_ascii_uppercase().as_str() {
            "" | "GET" => reqwest::Method::GET,
            "POST" => reqwest::Method::POST,
            "PUT" => reqwest::Method::PUT,
            "PATCH" => reqwest::Method::PATCH,
            "DELETE" => reqwest::Method::DELETE,
            other => return Err(self.invalid(format_args!("uses an unknown method '{other}'"))),
        };
        let url = self.text("url");
        if url.trim().is_empty() {
            return Err(self.invalid("needs its 'url'"));
        }
        let body = match self.text("bodyType").as_str() {
            _ if method == reqwest::Method::GET => HttpBody::None,
            "" => HttpBody::None,
            "json" => HttpBody::Json(self.text("body")),
            "raw" => HttpBody::Raw(self.text("body")),
            "xWwwFormUrlencoded" => HttpBody::Form(self.pairs("body", "key", "value")?),
            other => {
                return Err(self.invalid(format_args!(
                    "sends a body of type '{other}', which weir does not support (json, raw or \
                     xWwwFormUrlencoded)"
                )));
            }
        };
        let response_json = match self.text("responseType").as_str() {
            "" | "json" => true,
            "text" => false,
            other => {
                return Err(self.invalid(format_args!(
                    "reads a response of type '{other}', which weir does not support (json or text)"
                )));
            }
        };
        Ok(StepKind::Http(HttpStep {
            method,
            url,
            headers: self.pairs("headers", "key", "value")?,
            query: self.pairs("queryParams", "key", "value")?,
            body,
            response_json,
            update_state: self.pairs("httpUpdateState", "key", "value")?,
        }))
    }
}

/// A tool's config without what only the editor uses.
fn clean_config(config: &Map<String, Value>, param: &str) -> Map<String, Value> {
    let mut inputs = config.clone();
    for editor_only in [param, "credential", "FLOWISE_CREDENTIAL_ID"] {
        inputs.remove(editor_only);
    }
    inputs
}
