//! From a graph to something runnable.
//!
//! [`Plan::build`] checks the whole graph once per chatflow version: every node
//! type is known, every input declared, required inputs present, references point
//! at nodes of the right kind. [`Plan::runnable`] then reads the ending chain, its
//! model, prompt and memory for one request, with `overrideConfig` applied.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::{Map, Value};

use super::FlowError;
use super::graph::{FlowGraph, FlowNode, reference, references};
use super::registry::{self, Category, InputKind, NodeSpec, NodeType};
use crate::llm::SamplingParams;

/// Keys of `overrideConfig` that are request settings, not node inputs.
const REQUEST_KEYS: &[&str] = &["sessionId", "vars", "chatId"];

/// Flowise's default system message of a conversation chain.
pub const DEFAULT_SYSTEM_MESSAGE: &str = "The following is a friendly conversation between a human and an AI. The AI is talkative and provides lots of specific details from its context. If the AI does not know the answer to a question, it truthfully says it does not know.";

#[derive(Debug)]
pub struct Plan {
    graph: FlowGraph,
}

/// The request's `overrideConfig` and what the chatflow allows of it.
#[derive(Debug, Default)]
pub struct Overrides<'a> {
    pub values: Option<&'a Map<String, Value>>,
    /// Sensitive inputs the chatflow's `apiConfig.overrideConfig.allow` lists.
    pub allowed: HashSet<String>,
}

/// Which provider a chat model node talks to, with its endpoint and key.
#[derive(Debug, Clone, PartialEq)]
pub enum Provider {
    OpenAi {
        base: String,
        api_key: Option<String>,
        model: String,
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

/// Everything one request runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Runnable {
    pub chain: ChainKind,
    pub chain_node: String,
    pub model: ModelSpec,
    pub prompt: Option<PromptSpec>,
    pub memory: Option<MemorySpec>,
    pub system_message: String,
}

impl Plan {
    pub fn build(flow_data: &str) -> Result<Self, FlowError> {
        let graph = FlowGraph::parse(flow_data)?;
        for node in &graph.nodes {
            validate_node(&graph, node)?;
        }
        let ending = graph.ending_node();
        let spec = spec_of(ending)?;
        if spec.category != Category::Chain {
            return Err(FlowError::invalid(format!(
                "the ending node {} ({}) cannot answer on its own; connect it to a chain \
                 such as llmChain or conversationChain",
                ending.id, ending.name
            )));
        }
        Ok(Plan { graph })
    }

    /// Whether the flow's answer can be streamed token by token (every chain weir
    /// runs can).
    pub fn is_streamable(&self) -> bool {
        true
    }

    pub fn runnable(&self, overrides: &Overrides<'_>) -> Result<Runnable, FlowError> {
        check_overrides(&self.graph, overrides)?;
        let chain = self.graph.ending_node();
        let chain_spec = spec_of(chain)?;
        let inputs = effective_inputs(&self.graph, chain, overrides);
        let model_node = self.anchor(chain, &inputs, "model")?;
        let model = model_spec(
            model_node,
            &effective_inputs(&self.graph, model_node, overrides),
        )?;
        let prompt_input = match chain_spec.node_type {
            NodeType::LlmChain => "prompt",
            _ => "chatPromptTemplate",
        };
        let prompt = match anchor_id(&inputs, prompt_input) {
            Some(_) => {
                let node = self.anchor(chain, &inputs, prompt_input)?;
                Some(prompt_spec(
                    node,
                    &effective_inputs(&self.graph, node, overrides),
                )?)
            }
            None => None,
        };
        let memory = match anchor_id(&inputs, "memory") {
            Some(_) => {
                let node = self.anchor(chain, &inputs, "memory")?;
                Some(memory_spec(
                    node,
                    &effective_inputs(&self.graph, node, overrides),
                )?)
            }
            None => None,
        };
        let system_message = text(&inputs, "systemMessagePrompt")
            .unwrap_or(DEFAULT_SYSTEM_MESSAGE)
            .to_owned();
        Ok(Runnable {
            chain: match chain_spec.node_type {
                NodeType::LlmChain => ChainKind::Llm,
                _ => ChainKind::Conversation,
            },
            chain_node: chain.id.clone(),
            model,
            prompt,
            memory,
            system_message,
        })
    }

    fn anchor<'g>(
        &'g self,
        node: &FlowNode,
        inputs: &Map<String, Value>,
        name: &str,
    ) -> Result<&'g FlowNode, FlowError> {
        anchor_id(inputs, name)
            .and_then(|id| self.graph.node(id))
            .ok_or_else(|| {
                FlowError::invalid(format!(
                    "node {} needs its '{name}' input connected",
                    node.id
                ))
            })
    }
}

fn spec_of(node: &FlowNode) -> Result<&'static NodeSpec, FlowError> {
    registry::spec(&node.name).ok_or_else(|| {
        FlowError::invalid(format!(
            "node {} is of type '{}', which weir does not implement",
            node.id, node.name
        ))
    })
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
    for (name, value) in &node.inputs {
        // Flowise keeps the credential id among the inputs.
        if name == "FLOWISE_CREDENTIAL_ID" || is_empty(value) {
            continue;
        }
        let Some(input) = spec.input(name) else {
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
                if target_spec.category != category {
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

/// 403 for an override of a sensitive input the chatflow does not allow.
fn check_overrides(graph: &FlowGraph, overrides: &Overrides<'_>) -> Result<(), FlowError> {
    let Some(values) = overrides.values else {
        return Ok(());
    };
    for key in values.keys() {
        if REQUEST_KEYS.contains(&key.as_str()) || overrides.allowed.contains(key) {
            continue;
        }
        let sensitive = graph.nodes.iter().any(|n| {
            registry::spec(&n.name)
                .and_then(|s| s.input(key))
                .is_some_and(|i| i.sensitive)
        });
        if sensitive {
            return Err(FlowError::forbidden(format!(
                "overrideConfig.{key} is not allowed: it is a key or an endpoint; the chatflow's \
                 apiConfig.overrideConfig.allow must list it"
            )));
        }
    }
    Ok(())
}

/// A node's inputs with the request's overrides applied: a plain value applies to
/// every node declaring that input; an object keyed by node ids targets nodes.
fn effective_inputs<'n>(
    graph: &FlowGraph,
    node: &'n FlowNode,
    overrides: &Overrides<'_>,
) -> Cow<'n, Map<String, Value>> {
    let Some(values) = overrides.values else {
        return Cow::Borrowed(&node.inputs);
    };
    let Some(spec) = registry::spec(&node.name) else {
        return Cow::Borrowed(&node.inputs);
    };
    let mut inputs = Cow::Borrowed(&node.inputs);
    for (key, value) in values {
        let Some(input) = spec.input(key) else {
            continue;
        };
        // Wiring is not a request's to change.
        if matches!(
            input.kind,
            InputKind::Anchor(_) | InputKind::Anchors(_) | InputKind::Ignored
        ) {
            continue;
        }
        let targeted = value
            .as_object()
            .filter(|o| !o.is_empty() && o.keys().all(|k| graph.contains(k)));
        let new = match targeted {
            Some(per_node) => match per_node.get(&node.id) {
                Some(v) => v.clone(),
                None => continue,
            },
            None => value.clone(),
        };
        inputs.to_mut().insert(key.clone(), new);
    }
    inputs
}

fn anchor_id<'a>(inputs: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    inputs.get(name).and_then(Value::as_str).and_then(reference)
}

fn text<'a>(inputs: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    inputs
        .get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn number(
    node: &FlowNode,
    inputs: &Map<String, Value>,
    name: &str,
) -> Result<Option<f64>, FlowError> {
    let bad = || FlowError::invalid(format!("node {} input '{name}' must be a number", node.id));
    match inputs.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_f64().map(Some).ok_or_else(bad),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| bad()),
        Some(_) => Err(bad()),
    }
}

fn integer(
    node: &FlowNode,
    inputs: &Map<String, Value>,
    name: &str,
) -> Result<Option<u64>, FlowError> {
    match number(node, inputs, name)? {
        None => Ok(None),
        Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= u32::MAX as f64 => Ok(Some(n as u64)),
        Some(_) => Err(FlowError::invalid(format!(
            "node {} input '{name}' must be a whole number of at least 0",
            node.id
        ))),
    }
}

fn json_object(
    node: &FlowNode,
    inputs: &Map<String, Value>,
    name: &str,
) -> Result<Map<String, Value>, FlowError> {
    let bad = || {
        FlowError::invalid(format!(
            "node {} input '{name}' must be a JSON object",
            node.id
        ))
    };
    match inputs.get(name) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(o)) => Ok(o.clone()),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(Map::new()),
        Some(Value::String(s)) => match serde_json::from_str(s) {
            Ok(Value::Object(o)) => Ok(o),
            _ => Err(bad()),
        },
        Some(_) => Err(bad()),
    }
}

/// Reads the key from the node, else from the server's environment.
fn key_from(inputs: &Map<String, Value>, input: &str, env: &str) -> Option<String> {
    text(inputs, input)
        .map(str::to_owned)
        .or_else(|| std::env::var(env).ok().filter(|k| !k.is_empty()))
}

fn base_url(inputs: &Map<String, Value>, names: &[&str], default: &str) -> String {
    names
        .iter()
        .find_map(|n| text(inputs, n))
        .unwrap_or(default)
        .trim_end_matches('/')
        .to_owned()
}

fn model_spec(node: &FlowNode, inputs: &Map<String, Value>) -> Result<ModelSpec, FlowError> {
    let spec = spec_of(node)?;
    let model_name = |default: &str| text(inputs, "modelName").unwrap_or(default).to_owned();
    let max_tokens = |names: &[&str]| -> Result<Option<u32>, FlowError> {
        for n in names {
            if let Some(v) = integer(node, inputs, n)? {
                return Ok(Some(u32::try_from(v).unwrap_or(u32::MAX)));
            }
        }
        Ok(None)
    };
    let mut params = SamplingParams {
        temperature: number(node, inputs, "temperature")?,
        top_p: number(node, inputs, "topP")?,
        max_tokens: None,
        seed: None,
    };
    let provider = match spec.node_type {
        NodeType::ChatOpenAI => {
            params.max_tokens = max_tokens(&["maxTokens"])?;
            params.seed = integer(node, inputs, "seed")?;
            Provider::OpenAi {
                base: base_url(
                    inputs,
                    &["basePath", "basepath"],
                    crate::llm::openai::DEFAULT_BASE,
                ),
                api_key: key_from(inputs, "openAIApiKey", "OPENAI_API_KEY"),
                model: model_name("gpt-4o-mini"),
            }
        }
        NodeType::ChatAnthropic => {
            params.max_tokens = max_tokens(&["maxTokensToSample", "maxTokens"])?;
            Provider::Anthropic {
                base: match text(inputs, "basePath") {
                    Some(b) => b.trim_end_matches('/').to_owned(),
                    None => std::env::var("ANTHROPIC_BASE_URL")
                        .ok()
                        .filter(|b| !b.is_empty())
                        .unwrap_or_else(|| crate::llm::anthropic::DEFAULT_BASE.to_owned())
                        .trim_end_matches('/')
                        .to_owned(),
                },
                api_key: key_from(inputs, "anthropicApiKey", "ANTHROPIC_API_KEY"),
                model: model_name("claude-3-5-haiku-latest"),
            }
        }
        NodeType::ChatOllama => {
            params.max_tokens = max_tokens(&["numPredict"])?;
            params.seed = integer(node, inputs, "seed")?;
            Provider::Ollama {
                base: base_url(inputs, &["baseUrl"], crate::llm::ollama::DEFAULT_BASE),
                model: model_name("llama3.2"),
            }
        }
        NodeType::ChatLocal => {
            params.max_tokens = max_tokens(&["maxTokens"])?;
            params.seed = integer(node, inputs, "seed")?;
            Provider::Local
        }
        _ => {
            return Err(FlowError::invalid(format!(
                "node {} ({}) is not a chat model",
                node.id, node.name
            )));
        }
    };
    Ok(ModelSpec {
        node_id: node.id.clone(),
        node_type: spec.name,
        provider,
        params,
    })
}

fn prompt_spec(node: &FlowNode, inputs: &Map<String, Value>) -> Result<PromptSpec, FlowError> {
    let spec = spec_of(node)?;
    let values = json_object(node, inputs, "promptValues")?;
    match spec.node_type {
        NodeType::PromptTemplate => Ok(PromptSpec::Text {
            template: text(inputs, "template").unwrap_or_default().to_owned(),
            values,
        }),
        NodeType::ChatPromptTemplate => Ok(PromptSpec::Chat {
            system: text(inputs, "systemMessagePrompt")
                .unwrap_or_default()
                .to_owned(),
            human: text(inputs, "humanMessagePrompt")
                .unwrap_or("{input}")
                .to_owned(),
            values,
        }),
        _ => Err(FlowError::invalid(format!(
            "node {} is not a prompt",
            node.id
        ))),
    }
}

fn memory_spec(node: &FlowNode, inputs: &Map<String, Value>) -> Result<MemorySpec, FlowError> {
    let spec = spec_of(node)?;
    let window = match spec.node_type {
        NodeType::BufferWindowMemory => {
            let k = integer(node, inputs, "k")?.unwrap_or(4);
            if k == 0 {
                return Err(FlowError::invalid(format!(
                    "node {} input 'k' must be at least 1",
                    node.id
                )));
            }
            Some(u32::try_from(k).unwrap_or(u32::MAX))
        }
        _ => None,
    };
    Ok(MemorySpec {
        node_id: node.id.clone(),
        window,
        session_id: text(inputs, "sessionId").map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    #[test]
    fn builds_a_conversation_chain() {
        let plan = Plan::build(&conversation(json!({
            "modelName": "gpt-x", "temperature": "0.2", "basePath": "http://127.0.0.1:9/v1/",
            "cache": "", "allowImageUploads": true
        })))
        .unwrap();
        let r = plan.runnable(&Overrides::default()).unwrap();
        assert_eq!(r.chain, ChainKind::Conversation);
        assert_eq!(r.system_message, "Be brief.");
        assert_eq!(r.memory.as_ref().and_then(|m| m.window), Some(3));
        assert_eq!(r.model.params.temperature, Some(0.2));
        match &r.model.provider {
            Provider::OpenAi { base, model, .. } => {
                assert_eq!(base, "http://127.0.0.1:9/v1");
                assert_eq!(model, "gpt-x");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn validation_names_node_and_input() {
        let err = Plan::build(&conversation(json!({"wat": "x"}))).unwrap_err();
        assert!(
            err.message.contains("chatOpenAI_0") && err.message.contains("'wat'"),
            "{err}"
        );
        let err = Plan::build(&conversation(json!({"temperature": "hot"})))
            .unwrap()
            .runnable(&Overrides::default())
            .unwrap_err();
        assert!(err.message.contains("temperature"), "{err}");
        let unknown = json!({"nodes": [node("toolAgent_0", "toolAgent", json!({}))], "edges": []});
        let err = Plan::build(&unknown.to_string()).unwrap_err();
        assert!(err.message.contains("toolAgent"), "{err}");
        let lonely = json!({"nodes": [node("chatLocal_0", "chatLocal", json!({}))], "edges": []});
        assert!(
            Plan::build(&lonely.to_string())
                .unwrap_err()
                .message
                .contains("chain")
        );
        let missing = json!({"nodes": [node("llmChain_0", "llmChain", json!({}))], "edges": []});
        assert!(
            Plan::build(&missing.to_string())
                .unwrap_err()
                .message
                .contains("'model'")
        );
    }

    #[test]
    fn overrides_apply_and_sensitive_ones_need_allowing() {
        let plan = Plan::build(&conversation(json!({"temperature": 0.9}))).unwrap();
        let values = json!({"temperature": 0.1, "systemMessagePrompt": {"conversationChain_0": "Hi."}, "sessionId": "s"});
        let values = values.as_object().unwrap();
        let r = plan
            .runnable(&Overrides {
                values: Some(values),
                allowed: HashSet::new(),
            })
            .unwrap();
        assert_eq!(r.model.params.temperature, Some(0.1));
        assert_eq!(r.system_message, "Hi.");

        let secret = json!({"basePath": "http://169.254.169.254/"});
        let secret = secret.as_object().unwrap();
        let err = plan
            .runnable(&Overrides {
                values: Some(secret),
                allowed: HashSet::new(),
            })
            .unwrap_err();
        assert_eq!(err.kind, super::super::FlowErrorKind::Forbidden);
        assert!(err.message.contains("basePath"));
        let allowed = HashSet::from(["basePath".to_owned()]);
        let r = plan
            .runnable(&Overrides {
                values: Some(secret),
                allowed,
            })
            .unwrap();
        assert!(
            matches!(r.model.provider, Provider::OpenAi { ref base, .. } if base == "http://169.254.169.254")
        );
    }
}
