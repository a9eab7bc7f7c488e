//! Flowise's Agentflow V2 nodes, one module each: what every `*Agentflow`
//! node declares and the [`StepKind`] it builds. They sit here, beside the
//! chatflow node types, so the registry lists every node weir runs; running
//! the steps is `flow::agentflow`'s business.
//!
//! An agentflow node's own inputs are read as the flow wrote them (variables
//! unresolved until the node runs, and not a request's to override); the
//! models and tools chosen inside a node (`llmModel` + `llmModelConfig`) are
//! built by the chat model and tool node types, with the request's overrides,
//! so every provider and tool works here as in a chatflow.

pub mod agent_agentflow;
pub mod condition_agent_agentflow;
pub mod condition_agentflow;
pub mod custom_function_agentflow;
pub mod direct_reply_agentflow;
pub mod execute_flow_agentflow;
pub mod http_agentflow;
pub mod human_input_agentflow;
pub mod iteration_agentflow;
pub mod llm_agentflow;
pub mod loop_agentflow;
pub mod retriever_agentflow;
pub mod start_agentflow;
pub mod tool_agentflow;

use serde_json::{Map, Value};

use crate::flow::FlowError;
use crate::flow::component::step::{Memory, StepKind, Talk};
use crate::flow::component::{Component, ModelSpec, OutputField, cell, output_fields};
use crate::flow::graph::{FlowNode, credential_of};
use crate::flow::node::Build;
use crate::flow::overrides::check_inner_overrides;
use crate::llm::Role;

/// What an agentflow node's build answers.
fn step(kind: StepKind) -> Result<Component, FlowError> {
    Ok(Component::Step(Box::new(kind)))
}

/// One agentflow node's inputs being read.
struct Read<'a> {
    build: &'a Build<'a>,
    node: &'a FlowNode,
}

impl<'a> Read<'a> {
    fn new(build: &'a Build<'a>) -> Self {
        Read {
            build,
            node: build.written(),
        }
    }

    /// `<prefix>UpdateState` rows: the flow state keys the node sets.
    fn update_state(&self, prefix: &str) -> Result<Vec<(String, String)>, FlowError> {
        self.pairs(&format!("{prefix}UpdateState"), "key", "value")
    }

    fn invalid(&self, what: impl std::fmt::Display) -> FlowError {
        FlowError::invalid(format!("node {} ({}) {what}", self.node.id, self.node.name))
    }

    fn value(&self, name: &str) -> Option<&Value> {
        self.node.inputs.get(name).filter(|v| !v.is_null())
    }

    /// A text input as written (variables unresolved); empty when absent.
    fn text(&self, name: &str) -> String {
        self.node.input_text(name)
    }

    fn flag(&self, name: &str) -> bool {
        self.node.input_flag(name)
    }

    /// An `array` input: its rows.
    fn rows(&self, name: &str) -> Result<Vec<Map<String, Value>>, FlowError> {
        self.node.input_rows(name).map_err(|why| self.invalid(why))
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
        if let Some(spec) = self.build.spec_of(name) {
            check_inner_overrides(spec, self.build.overrides())?;
        }
        self.build.build_chosen(&inner).map_err(|e| {
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
}

/// A tool's config without what only the editor uses.
fn clean_config(config: &Map<String, Value>, param: &str) -> Map<String, Value> {
    let mut inputs = config.clone();
    for editor_only in [param, "credential", "FLOWISE_CREDENTIAL_ID"] {
        inputs.remove(editor_only);
    }
    inputs
}
