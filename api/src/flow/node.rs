//! What a node type is to the engine: one small trait, [`Node`].
//!
//! A node declares its inputs ([`NodeSpec`]: names, kinds, which are required,
//! which are keys or endpoints) and what it produces ([`Category`]), and builds
//! its [`Component`] from its inputs through a [`Build`] — which applies the
//! request's overrides and builds the nodes its anchors reference. Components
//! are plain data (specs); running them is the run kinds' business
//! (`chatflow`, `agentflow`, on `runtime`).
//!
//! The declarations themselves live in [`super::spec`] (re-exported here for
//! the node modules); [`super::registry`] lists the node types and builds one.
//!
//! To add a node: write `nodes/<name>.rs` with a unit struct implementing
//! [`Node`], and list it in `registry::NODES`. Validation (unknown or misplaced
//! inputs, required ones, anchor categories) and overrides come for free.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::FlowError;
use super::component::{
    Component, EmbeddingsSpec, LoaderSpec, MemorySpec, ModelSpec, PromptSpec, SplitterSpec,
    ToolSpec, VectorStoreSpec,
};
use super::graph::{FlowGraph, FlowNode, reference, references};
use super::output_parser::OutputParserSpec;
use super::overrides::Overrides;
use crate::config::ProviderSettings;

pub use super::spec::{
    Category, InputKind, InputSpec, NodeSpec, concat, endpoint_url, input, required, sensitive,
};

/// Finds a node type by its name: the registry's lookup, handed to [`Build`]
/// (the registry lists the node modules, which build on this one).
pub type NodeTypes = fn(&str) -> Option<&'static dyn Node>;

/// A node type.
pub trait Node: Sync {
    fn spec(&self) -> &'static NodeSpec;

    /// Builds this node's component for one request.
    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError>;
}

/// One node being built: its inputs with the request's overrides applied, and
/// the way to the nodes it references.
pub struct Build<'a> {
    types: NodeTypes,
    graph: &'a FlowGraph,
    node: &'a FlowNode,
    inputs: Cow<'a, Map<String, Value>>,
    overrides: &'a Overrides<'a>,
}

impl<'a> Build<'a> {
    /// The node's inputs for this request. A node naming a credential has it
    /// checked against the endpoints the node chose (`flow::destination`) before
    /// the credential's fields fill its blank inputs (as Flowise reads them: the
    /// node's input when set, else the credential's field of that name).
    pub fn new(
        types: NodeTypes,
        graph: &'a FlowGraph,
        node: &'a FlowNode,
        overrides: &'a Overrides<'a>,
    ) -> Result<Self, FlowError> {
        let spec = types(&node.name).map(|t| t.spec());
        let mut inputs = match spec {
            Some(spec) => effective_inputs(spec, graph, node, overrides),
            None => Cow::Borrowed(&node.inputs),
        };
        if let Some((id, opened)) = node
            .credential
            .as_deref()
            .and_then(|id| Some((id, overrides.credentials?.get(id)?)))
        {
            if let Some(spec) = spec {
                super::destination::check_node(
                    spec,
                    &node.id,
                    &inputs,
                    opened.policy(id, &overrides.settings.provider_key_hosts),
                )?;
            }
            for (name, value) in &opened.fields {
                let blank = inputs
                    .get(name)
                    .is_none_or(|v| v.is_null() || v.as_str().is_some_and(|s| s.trim().is_empty()));
                if blank {
                    inputs.to_mut().insert(name.clone(), value.clone());
                }
            }
        }
        Ok(Build {
            types,
            graph,
            node,
            inputs,
            overrides,
        })
    }

    /// The server's provider settings (keys, endpoints), which a node without
    /// its own falls back on.
    pub fn settings(&self) -> &'a ProviderSettings {
        self.overrides.settings
    }

    /// Whether the node names a stored credential: then it brings its own keys,
    /// and the server's never stand in for them.
    pub fn uses_credential(&self) -> bool {
        self.node.credential.is_some()
    }

    /// Whether the node names a credential this build has not opened: a flow
    /// checked before a run (the plan's first build), whose credential fields
    /// reach only a run.
    pub fn credential_unopened(&self) -> bool {
        self.uses_credential() && self.overrides.credentials.is_none()
    }

    /// `chatOpenAI_0`
    pub fn id(&self) -> &'a str {
        &self.node.id
    }

    /// The node as the flow wrote it, before the request's overrides. An
    /// agentflow node reads its own inputs so: a request changes only the
    /// models and tools chosen inside it ([`Build::build_chosen`]).
    pub fn written(&self) -> &'a FlowNode {
        self.node
    }

    pub fn graph(&self) -> &'a FlowGraph {
        self.graph
    }

    pub fn overrides(&self) -> &'a Overrides<'a> {
        self.overrides
    }

    /// What a node type declares, for a type named inside this node.
    pub fn spec_of(&self, name: &str) -> Option<&'static NodeSpec> {
        (self.types)(name).map(|t| t.spec())
    }

    /// Builds a node that is not in the graph: a model or tool chosen inside
    /// an agentflow node, its inputs taken from that node's config.
    pub fn build_chosen(&self, chosen: &FlowNode) -> Result<Component, FlowError> {
        let kind = (self.types)(&chosen.name).ok_or_else(|| unknown(chosen))?;
        kind.build(&Build::new(self.types, self.graph, chosen, self.overrides)?)
    }

    /// A FlowError naming this node.
    pub fn invalid(&self, what: impl std::fmt::Display) -> FlowError {
        FlowError::invalid(format!("node {} ({}) {what}", self.node.id, self.node.name))
    }

    pub fn value(&self, name: &str) -> Option<&Value> {
        self.inputs.get(name).filter(|v| !v.is_null())
    }

    /// A text input, trimmed; `None` when absent or blank.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.inputs
            .get(name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }

    /// The first of several names (Flowise renamed inputs between versions).
    pub fn text_of(&self, names: &[&str]) -> Option<&str> {
        names.iter().find_map(|n| self.text(n))
    }

    pub fn number(&self, name: &str) -> Result<Option<f64>, FlowError> {
        let bad = || self.invalid(format_args!("input '{name}' must be a number"));
        match self.inputs.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n.as_f64().map(Some).ok_or_else(bad),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| bad()),
            Some(_) => Err(bad()),
        }
    }

    pub fn integer(&self, name: &str) -> Result<Option<u64>, FlowError> {
        match self.number(name)? {
            None => Ok(None),
            Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= u32::MAX as f64 => Ok(Some(n as u64)),
            Some(_) => Err(self.invalid(format_args!(
                "input '{name}' must be a whole number of at least 0"
            ))),
        }
    }

    /// An integer input within `1..=max`, or `default`.
    pub fn count(&self, name: &str, default: u32, max: u32) -> Result<u32, FlowError> {
        match self.integer(name)? {
            None => Ok(default),
            Some(n) if (1..=u64::from(max)).contains(&n) => Ok(n as u32),
            Some(_) => {
                Err(self.invalid(format_args!("input '{name}' must be between 1 and {max}")))
            }
        }
    }

    pub fn boolean(&self, name: &str) -> Result<bool, FlowError> {
        match self.inputs.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) => match s.trim() {
                "" | "false" => Ok(false),
                "true" => Ok(true),
                _ => Err(self.invalid(format_args!("input '{name}' must be true or false"))),
            },
            Some(_) => Err(self.invalid(format_args!("input '{name}' must be true or false"))),
        }
    }

    /// A JSON input given as JSON or as JSON text; `None` when absent or blank.
    pub fn json(&self, name: &str) -> Result<Option<Value>, FlowError> {
        match self.inputs.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) => serde_json::from_str(s)
                .map(Some)
                .map_err(|e| self.invalid(format_args!("input '{name}' is not valid JSON: {e}"))),
            Some(other) => Ok(Some(other.clone())),
        }
    }

    pub fn json_object(&self, name: &str) -> Result<Map<String, Value>, FlowError> {
        match self.json(name)? {
            None => Ok(Map::new()),
            Some(Value::Object(o)) => Ok(o),
            Some(_) => Err(self.invalid(format_args!("input '{name}' must be a JSON object"))),
        }
    }

    /// Ids of the nodes an input references.
    pub fn references(&self, name: &str) -> Vec<&str> {
        self.inputs.get(name).map(references).unwrap_or_default()
    }

    /// Builds the node an anchor input references, if it is connected.
    pub fn anchor(&self, name: &str) -> Result<Option<Component>, FlowError> {
        let Some(id) = self
            .inputs
            .get(name)
            .and_then(Value::as_str)
            .and_then(reference)
        else {
            return Ok(None);
        };
        self.build_node(id).map(Some)
    }

    /// Builds every node a list anchor references, in order.
    pub fn anchors(&self, name: &str) -> Result<Vec<Component>, FlowError> {
        self.references(name)
            .into_iter()
            .map(|id| self.build_node(id))
            .collect()
    }

    fn build_node(&self, id: &str) -> Result<Component, FlowError> {
        let target = self.graph.node(id).ok_or_else(|| {
            self.invalid(format_args!(
                "refers to a node '{id}' that is not in the flow"
            ))
        })?;
        let kind = (self.types)(&target.name).ok_or_else(|| unknown(target))?;
        kind.build(&Build::new(self.types, self.graph, target, self.overrides)?)
    }

    pub fn model(&self, name: &str) -> Result<Option<ModelSpec>, FlowError> {
        match self.anchor(name)? {
            None => Ok(None),
            Some(Component::Model(m)) => Ok(Some(m)),
            Some(_) => Err(self.invalid(format_args!("input '{name}' must be a chat model"))),
        }
    }

    pub fn required_model(&self, name: &str) -> Result<ModelSpec, FlowError> {
        self.model(name)?
            .ok_or_else(|| self.invalid(format_args!("needs its '{name}' input connected")))
    }

    pub fn output_parser(&self, name: &str) -> Result<Option<OutputParserSpec>, FlowError> {
        match self.anchor(name)? {
            None => Ok(None),
            Some(Component::OutputParser(p)) => Ok(Some(p)),
            Some(_) => Err(self.invalid(format_args!("input '{name}' must be an output parser"))),
        }
    }

    pub fn prompt(&self, name: &str) -> Result<Option<PromptSpec>, FlowError> {
        match self.anchor(name)? {
            None => Ok(None),
            Some(Component::Prompt(p)) => Ok(Some(p)),
            Some(_) => Err(self.invalid(format_args!("input '{name}' must be a prompt"))),
        }
    }

    pub fn memory(&self, name: &str) -> Result<Option<MemorySpec>, FlowError> {
        match self.anchor(name)? {
            None => Ok(None),
            Some(Component::Memory(m)) => Ok(Some(m)),
            Some(_) => Err(self.invalid(format_args!("input '{name}' must be a memory"))),
        }
    }

    pub fn embeddings(&self, name: &str) -> Result<EmbeddingsSpec, FlowError> {
        match self.anchor(name)? {
            Some(Component::Embeddings(e)) => Ok(e),
            Some(_) => Err(self.invalid(format_args!("input '{name}' must be an embeddings node"))),
            None => Err(self.invalid(format_args!("needs its '{name}' input connected"))),
        }
    }

    pub fn splitter(&self, name: &str) -> Result<Option<SplitterSpec>, FlowError> {
        match self.anchor(name)? {
            None => Ok(None),
            Some(Component::Splitter(s)) => Ok(Some(s)),
            Some(_) => Err(self.invalid(format_args!("input '{name}' must be a text splitter"))),
        }
    }

    pub fn vector_store(&self, name: &str) -> Result<VectorStoreSpec, FlowError> {
        match self.anchor(name)? {
            Some(Component::VectorStore(v)) => Ok(v),
            Some(_) => Err(self.invalid(format_args!("input '{name}' must be a vector store"))),
            None => Err(self.invalid(format_args!("needs its '{name}' input connected"))),
        }
    }

    /// The document loaders a list input references, built (files decoded).
    pub fn loaders(&self, name: &str) -> Result<Vec<LoaderSpec>, FlowError> {
        self.anchors(name)?
            .into_iter()
            .map(|c| match c {
                Component::Loader(l) => Ok(l),
                _ => Err(self.invalid(format_args!("input '{name}' takes document loaders only"))),
            })
            .collect()
    }

    /// The tools an input names; a toolkit gives each of its tools.
    pub fn tools(&self, name: &str) -> Result<Vec<ToolSpec>, FlowError> {
        let mut tools = Vec::new();
        for component in self.anchors(name)? {
            match component {
                Component::Tool(t) => tools.push(t),
                Component::Toolkit(kit) => tools.extend(kit),
                _ => return Err(self.invalid(format_args!("input '{name}' takes tools only"))),
            }
        }
        Ok(tools)
    }
}

/// A node's inputs with the request's overrides applied: a plain value applies to
/// every node declaring that input; an object keyed by node ids targets nodes.
fn effective_inputs<'n>(
    spec: &NodeSpec,
    graph: &FlowGraph,
    node: &'n FlowNode,
    overrides: &Overrides<'_>,
) -> Cow<'n, Map<String, Value>> {
    let Some(values) = overrides.values else {
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

/// The error for a node whose type weir does not implement.
pub fn unknown(node: &FlowNode) -> FlowError {
    FlowError::invalid(format!(
        "node {} is of type '{}', which weir does not implement",
        node.id, node.name
    ))
}
