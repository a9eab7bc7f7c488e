//! What Flowise's canvas shows of each node type weir runs: its node definition
//! (Flowise's `INodeData`, served by `GET /api/v1/nodes`), built from the node's
//! [`NodeSpec`] so that the palette offers exactly the nodes weir runs and every
//! input it shows is one the engine takes.
//!
//! The spec decides *what* is advertised: the node, its inputs (those declared
//! without effect are left out), which are required, which are anchors and of
//! what category. Two data files decide how it looks:
//! - `weir-nodes.json`: every node's label and description in weir's words (and
//!   the category of nodes Flowise does not have);
//! - `flowise-nodes.json`: what Flowise's own components show of the nodes it has
//!   (input labels, types, options, defaults, icons, credential types), generated
//!   from the pinned `flowise-components` package by `scripts/gen-node-catalog`.
//!
//! Anchors wire by type name, as in Flowise: an input anchor's type must be one of
//! the producing node's base classes. A node's base classes are its own type plus
//! every anchor type that asks for its category anywhere in the registry (and for
//! the categories it [fits](Category::fits)), so a node from the palette connects
//! wherever the engine would take it, and to nodes of flows exported from Flowise.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::{Map, Value, json};

pub mod dress;

use super::registry;
use super::spec::{Category, InputKind, InputSpec, NodeSpec};

/// Flowise's presentation of its nodes (generated; see the module doc).
const FLOWISE_NODES: &str = include_str!("flowise-nodes.json");
/// weir's labels and descriptions of its nodes.
const WEIR_NODES: &str = include_str!("weir-nodes.json");

/// The load methods (`POST /node-load-method/:name`, `services::load_methods`)
/// weir answers; an input whose options come from another is shown as typed text.
pub const ANSWERED_LOAD_METHODS: &[&str] = &[
    "listModels",
    "listEmbeddings",
    "listVectorStores",
    "listTools",
    "listStores",
    "listFlows",
    "listRuntimeStateKeys",
    "listPreviousNodes",
    "listActions",
    "listServers",
    "listEndpoints",
    "listToolInputArgs",
];

#[derive(Deserialize)]
struct FlowiseCatalog {
    nodes: HashMap<String, FlowiseNode>,
    #[serde(default)]
    credentials: HashMap<String, Value>,
}

/// One model of a provider's list (Flowise's `models.json`).
#[derive(Debug, Clone, Deserialize)]
pub struct ModelOption {
    pub label: String,
    pub name: String,
}

#[derive(Deserialize)]
struct FlowiseNode {
    #[serde(default)]
    version: Option<f64>,
    #[serde(rename = "type", default)]
    node_type: Option<String>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    icon: Option<String>,
    #[serde(rename = "credentialNames", default)]
    credential_names: Vec<String>,
    #[serde(default)]
    inputs: Vec<Map<String, Value>>,
    #[serde(default)]
    outputs: Vec<Value>,
    #[serde(default)]
    color: Option<String>,
    #[serde(rename = "hideInput", default)]
    hide_input: Option<bool>,
    #[serde(rename = "hideOutput", default)]
    hide_output: Option<bool>,
    #[serde(default)]
    models: Vec<ModelOption>,
}

#[derive(Deserialize)]
struct WeirNode {
    label: String,
    description: String,
    #[serde(default)]
    category: Option<String>,
}

/// Every node type's definition, and where each one's icon is.
pub struct Catalog {
    definitions: Vec<Value>,
    by_name: HashMap<&'static str, usize>,
    /// The icon file of each node, relative to the `flowise-components`
    /// package's root (`dist/nodes/chatmodels/ChatOpenAI/openai.svg`).
    icons: HashMap<&'static str, String>,
    /// The models each provider node offers.
    models: HashMap<&'static str, Vec<ModelOption>>,
    /// The credential types weir's nodes take (Flowise's definitions: label and
    /// fields), by name, sorted.
    credentials: BTreeMap<String, Value>,
    /// The node whose icon stands for each credential type.
    credential_icons: HashMap<String, &'static str>,
}

impl Catalog {
    /// The catalog, built once from the registry and the data files.
    pub fn get() -> &'static Catalog {
        static CATALOG: OnceLock<Catalog> = OnceLock::new();
        CATALOG.get_or_init(|| build(registry::specs()))
    }

    /// Every definition, in registry order.
    pub fn definitions(&self) -> &[Value] {
        &self.definitions
    }

    pub fn definition(&self, name: &str) -> Option<&Value> {
        self.by_name.get(name).map(|&i| &self.definitions[i])
    }

    /// The definitions of one Flowise category (`Chat Models`).
    pub fn in_category(&self, category: &str) -> Vec<&Value> {
        self.definitions
            .iter()
            .filter(|d| d.get("category").and_then(Value::as_str) == Some(category))
            .collect()
    }

    /// The node's icon inside the `flowise-components` package, if it has one.
    pub fn icon(&self, name: &str) -> Option<&str> {
        self.icons.get(name).map(String::as_str)
    }

    /// The models a provider node offers (none for a node without a list).
    pub fn models(&self, node: &str) -> &[ModelOption] {
        self.models.get(node).map_or(&[], Vec::as_slice)
    }

    /// Every credential type weir's nodes take.
    pub fn credentials(&self) -> impl Iterator<Item = &Value> {
        self.credentials.values()
    }

    pub fn credential(&self, name: &str) -> Option<&Value> {
        self.credentials.get(name)
    }

    /// The icon of a credential type: that of the first node taking it.
    pub fn credential_icon(&self, name: &str) -> Option<&str> {
        self.credential_icons
            .get(name)
            .and_then(|node| self.icon(node))
    }
}

fn build(specs: impl Iterator<Item = &'static NodeSpec>) -> Catalog {
    // Both files are part of the binary and checked by the tests below: a
    // broken one is a build defect, and an empty catalog is what it would show.
    let mut flowise: FlowiseCatalog =
        serde_json::from_str(FLOWISE_NODES).unwrap_or(FlowiseCatalog {
            nodes: HashMap::new(),
            credentials: HashMap::new(),
        });
    let weir: HashMap<String, WeirNode> = serde_json::from_str(WEIR_NODES).unwrap_or_default();
    let specs: Vec<&'static NodeSpec> = specs
        .filter(|s| s.category != Category::Unsupported)
        .collect();
    let wiring = Wiring::new(&specs, &flowise);
    let mut catalog = Catalog {
        definitions: Vec::with_capacity(specs.len()),
        by_name: HashMap::new(),
        icons: HashMap::new(),
        models: HashMap::new(),
        credentials: std::mem::take(&mut flowise.credentials)
            .into_iter()
            .collect(),
        credential_icons: HashMap::new(),
    };
    for spec in specs {
        let theirs = flowise.nodes.get(spec.name);
        let ours = weir.get(spec.name);
        if let Some(theirs) = theirs {
            if let Some(icon) = theirs.icon.clone() {
                catalog.icons.insert(spec.name, icon);
                for credential in &theirs.credential_names {
                    catalog
                        .credential_icons
                        .entry(credential.clone())
                        .or_insert(spec.name);
                }
            }
            if !theirs.models.is_empty() {
                catalog.models.insert(spec.name, theirs.models.clone());
            }
        }
        catalog.by_name.insert(spec.name, catalog.definitions.len());
        catalog
            .definitions
            .push(definition(spec, theirs, ours, &wiring));
    }
    catalog
}

/// Which type names wire into anchors of which category.
struct Wiring {
    /// Per category, the type names its input anchors use.
    accepted: HashMap<Category, BTreeSet<String>>,
    /// The category of the node whose own type is this name (`ChatOpenAI`).
    node_types: HashMap<String, Category>,
}

impl Wiring {
    /// Per category: weir's own name for it, and every type Flowise's
    /// definition gives an input asking for it ([`Wiring::anchor_type`]).
    fn new(specs: &[&'static NodeSpec], flowise: &FlowiseCatalog) -> Self {
        let mut wiring = Wiring {
            accepted: HashMap::new(),
            node_types: specs
                .iter()
                .filter(|s| !s.category.is_agentflow())
                .map(|s| (node_type(s, flowise.nodes.get(s.name)), s.category))
                .collect(),
        };
        for spec in specs {
            for input in spec.inputs {
                let Some(category) = anchor_category(input) else {
                    continue;
                };
                let theirs = flowise
                    .nodes
                    .get(spec.name)
                    .and_then(|n| n.inputs.iter().find(|i| input_name(i) == Some(input.name)))
                    .and_then(|i| i.get("type"))
                    .and_then(Value::as_str);
                let members = wiring.members(category, theirs);
                let set = wiring.accepted.entry(category).or_default();
                set.insert(own_anchor_type(category).to_owned());
                set.extend(members);
            }
        }
        wiring
    }

    /// The members of Flowise's type for an anchor of `category` (a union
    /// `A | B` has several) that weir takes there: a member that is the own type
    /// of a node of another category (`CustomFunction` where a sequential
    /// agent takes no function) is left out.
    fn members(&self, category: Category, flowise_type: Option<&str>) -> Vec<String> {
        flowise_type
            .filter(|t| !is_param_type(t))
            .into_iter()
            .flat_map(|t| t.split('|'))
            .map(str::trim)
            .filter(|m| {
                self.node_types
                    .get(*m)
                    .is_none_or(|owner| owner.fits(category))
            })
            .map(str::to_owned)
            .collect()
    }

    /// The type an anchor of `category` is advertised with: Flowise's (exports
    /// wire by it), less what weir does not take there; weir's own otherwise.
    fn anchor_type(&self, category: Category, flowise_type: Option<&str>) -> String {
        let members = self.members(category, flowise_type);
        if members.is_empty() {
            own_anchor_type(category).to_owned()
        } else {
            members.join(" | ")
        }
    }
}

/// Flowise's type name of a node (`ChatOpenAI`), or weir's for its own nodes.
fn node_type(spec: &NodeSpec, theirs: Option<&FlowiseNode>) -> String {
    theirs
        .and_then(|n| n.node_type.clone())
        .unwrap_or_else(|| pascal(spec.name))
}

fn definition(
    spec: &NodeSpec,
    theirs: Option<&FlowiseNode>,
    ours: Option<&WeirNode>,
    wiring: &Wiring,
) -> Value {
    let node_type = node_type(spec, theirs);
    let label = ours.map_or_else(|| humanize(spec.name), |o| o.label.clone());
    let category = theirs
        .and_then(|n| n.category.clone())
        .or_else(|| ours.and_then(|o| o.category.clone()))
        .unwrap_or_else(|| default_category(spec.category).to_owned());
    let mut base_classes: Vec<String> = vec![node_type.clone()];
    // Agentflow nodes follow each other by edges, not anchors: their own type only.
    for (category, names) in wiring
        .accepted
        .iter()
        .filter(|_| !spec.category.is_agentflow())
    {
        if spec.category.fits(*category) {
            for name in names {
                if !base_classes.contains(name) {
                    base_classes.push(name.clone());
                }
            }
        }
    }
    let inputs = advertised_inputs(spec, theirs, wiring);
    let mut definition = json!({
        "label": label,
        "name": spec.name,
        "version": theirs.and_then(|n| n.version).unwrap_or(1.0),
        "type": node_type,
        "icon": format!("{}.svg", spec.name),
        "category": category,
        "description": ours.map(|o| o.description.as_str()).unwrap_or(""),
        "baseClasses": base_classes,
        "inputs": inputs,
        "outputs": outputs(spec, theirs),
        "filePath": "",
    });
    if let (Some(theirs), Some(object)) = (theirs, definition.as_object_mut()) {
        if !theirs.credential_names.is_empty() {
            object.insert(
                "credential".into(),
                json!({
                    "label": "Connect Credential",
                    "name": "credential",
                    "type": "credential",
                    "credentialNames": theirs.credential_names,
                }),
            );
        }
        if let Some(color) = &theirs.color {
            object.insert("color".into(), json!(color));
        }
        if let Some(hide) = theirs.hide_input {
            object.insert("hideInput".into(), json!(hide));
        }
        if let Some(hide) = theirs.hide_output {
            object.insert("hideOutput".into(), json!(hide));
        }
    }
    definition
}

/// The inputs the canvas shows: every input the spec declares with effect, in
/// Flowise's order where Flowise has the node (then weir's own), dressed as
/// Flowise dresses it when it does.
fn advertised_inputs(spec: &NodeSpec, theirs: Option<&FlowiseNode>, wiring: &Wiring) -> Vec<Value> {
    let declared: Vec<&InputSpec> = spec
        .inputs
        .iter()
        .filter(|i| i.kind != InputKind::Ignored && !is_credential_input(i.name))
        .collect();
    let mut ordered: Vec<(&InputSpec, Option<&Map<String, Value>>)> = Vec::new();
    if let Some(theirs) = theirs {
        for presented in &theirs.inputs {
            if let Some(input) = declared
                .iter()
                .find(|i| input_name(presented) == Some(i.name))
            {
                ordered.push((input, Some(presented)));
            }
        }
    }
    for input in &declared {
        if !ordered.iter().any(|(i, _)| i.name == input.name) {
            ordered.push((input, None));
        }
    }
    ordered
        .into_iter()
        .map(|(input, presented)| advertised_input(input, presented, wiring))
        .collect()
}

fn advertised_input(
    input: &InputSpec,
    presented: Option<&Map<String, Value>>,
    wiring: &Wiring,
) -> Value {
    let mut out: BTreeMap<String, Value> = BTreeMap::new();
    if let Some(presented) = presented {
        for (key, value) in presented {
            out.insert(key.clone(), value.clone());
        }
    }
    out.insert("name".into(), json!(input.name));
    out.entry("label".into())
        .or_insert_with(|| json!(humanize(input.name)));
    out.insert("optional".into(), json!(!input.required));
    let presented_type = out.get("type").and_then(Value::as_str).map(str::to_owned);
    match (anchor_category(input), presented_type.as_deref()) {
        (Some(category), presented) => {
            out.insert(
                "type".into(),
                json!(wiring.anchor_type(category, presented)),
            );
            out.insert(
                "list".into(),
                json!(matches!(input.kind, InputKind::Anchors(_))),
            );
            out.remove("default");
            out.remove("options");
        }
        (None, Some(presented)) if fits_kind(input.kind, presented) => {
            // Options loaded from the server need a load method weir answers;
            // until it does, the value is typed in.
            if matches!(presented, "asyncOptions" | "asyncMultiOptions")
                && !ANSWERED_LOAD_METHODS
                    .contains(&out.get("loadMethod").and_then(Value::as_str).unwrap_or(""))
            {
                out.insert("type".into(), json!("string"));
                out.remove("loadMethod");
            }
        }
        (None, _) => {
            out.insert("type".into(), json!(param_type(input)));
            out.remove("options");
            out.remove("loadMethod");
        }
    }
    Value::Object(out.into_iter().collect())
}

/// Flowise's outputs of an agentflow node (its branches); chatflow nodes have
/// one output, built by the canvas from their base classes.
fn outputs(spec: &NodeSpec, theirs: Option<&FlowiseNode>) -> Vec<Value> {
    if spec.category.is_agentflow() {
        theirs.map(|n| n.outputs.clone()).unwrap_or_default()
    } else {
        Vec::new()
    }
}

fn anchor_category(input: &InputSpec) -> Option<Category> {
    match input.kind {
        InputKind::Anchor(category) | InputKind::Anchors(category) => Some(category),
        _ => None,
    }
}

fn input_name(presented: &Map<String, Value>) -> Option<&str> {
    presented.get("name").and_then(Value::as_str)
}

/// The credential is the node's `credential` field on the canvas, not an input.
fn is_credential_input(name: &str) -> bool {
    matches!(name, "credential" | "FLOWISE_CREDENTIAL_ID")
}

/// Whether Flowise's input type is a parameter (typed in) rather than an anchor.
fn is_param_type(flowise_type: &str) -> bool {
    matches!(
        flowise_type,
        "string"
            | "number"
            | "boolean"
            | "password"
            | "json"
            | "code"
            | "date"
            | "file"
            | "folder"
            | "options"
            | "multiOptions"
            | "asyncOptions"
            | "asyncMultiOptions"
            | "datagrid"
            | "tabs"
            | "array"
            | "conditionFunction"
    )
}

/// Whether a value Flowise's input type produces is one weir's declared kind takes.
fn fits_kind(kind: InputKind, flowise_type: &str) -> bool {
    match kind {
        InputKind::Text => matches!(
            flowise_type,
            "string" | "password" | "code" | "options" | "asyncOptions" | "date" | "file"
        ),
        InputKind::Number | InputKind::Integer => flowise_type == "number",
        InputKind::Boolean => flowise_type == "boolean",
        InputKind::Json => matches!(
            flowise_type,
            "json"
                | "array"
                | "datagrid"
                | "code"
                | "string"
                | "multiOptions"
                | "asyncMultiOptions"
                | "tabs"
                | "conditionFunction"
        ),
        _ => false,
    }
}

/// The canvas input type for a declared kind, where Flowise has no presentation.
fn param_type(input: &InputSpec) -> &'static str {
    match input.kind {
        InputKind::Text if input.sensitive && !input.endpoint => "password",
        InputKind::Number | InputKind::Integer => "number",
        InputKind::Boolean => "boolean",
        InputKind::Json => "json",
        _ => "string",
    }
}

/// weir's anchor type name for a category (Flowise's usual one).
fn own_anchor_type(category: Category) -> &'static str {
    match category {
        Category::ChatModel => "BaseChatModel",
        Category::Prompt => "BasePromptTemplate",
        Category::Chain => "BaseChain",
        Category::Memory => "BaseMemory",
        Category::Tool => "Tool",
        Category::Agent => "AgentExecutor",
        Category::Supervisor => "Supervisor",
        Category::Worker => "Worker",
        Category::Sequential => "Sequential",
        Category::Embeddings => "Embeddings",
        Category::TextSplitter => "TextSplitter",
        Category::DocumentLoader => "Document",
        Category::VectorStore => "BaseRetriever",
        Category::Retriever => "BaseRetriever",
        Category::Moderation => "Moderation",
        Category::OutputParser => "BaseLLMOutputParser",
        Category::Function => "CustomFunction",
        Category::Unsupported | Category::Step | Category::Decision => "Unsupported",
    }
}

/// The palette group of a node weir has and Flowise does not name.
fn default_category(category: Category) -> &'static str {
    match category {
        Category::ChatModel => "Chat Models",
        Category::Prompt => "Prompts",
        Category::Chain => "Chains",
        Category::Memory => "Memory",
        Category::Tool => "Tools",
        Category::Agent => "Agents",
        Category::Supervisor | Category::Worker => "Multi Agents",
        Category::Sequential => "Sequential Agents",
        Category::Embeddings => "Embeddings",
        Category::TextSplitter => "Text Splitters",
        Category::DocumentLoader => "Document Loaders",
        Category::VectorStore => "Vector Stores",
        Category::Retriever => "Retrievers",
        Category::Moderation => "Moderation",
        Category::OutputParser => "Output Parsers",
        Category::Function => "Utilities",
        Category::Step | Category::Decision => "Agent Flows",
        Category::Unsupported => "Unsupported",
    }
}

/// `chatOpenAI` → `ChatOpenAI`.
fn pascal(name: &str) -> String {
    let mut chars = name.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// `maxTokens` → `Max Tokens`.
fn humanize(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut previous_lower = false;
    for (i, c) in name.chars().enumerate() {
        if i == 0 {
            out.extend(c.to_uppercase());
        } else if c == '_' {
            out.push(' ');
        } else {
            if c.is_uppercase() && previous_lower {
                out.push(' ');
            }
            out.push(c);
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    out
}

#[cfg(test)]
mod tests;
