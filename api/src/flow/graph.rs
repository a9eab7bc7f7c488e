//! Reading a Flowise `flowData` graph: nodes with their `inputs`, references of
//! the form `{{nodeId.data.instance}}`, and edges (with the output handle they
//! leave from, which names a condition's branch). Which node answers is the
//! plan's question, not the graph's.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::FlowError;

/// Node types that are drawn in the editor but never run.
const DECORATIVE: &[&str] = &["stickyNote", "stickyNoteAgentflow"];

#[derive(Debug, Clone)]
pub struct FlowNode {
    /// `chatOpenAI_0`
    pub id: String,
    /// The node type: `chatOpenAI`.
    pub name: String,
    /// What the editor shows (`data.label`); agentflow events name nodes by it.
    pub label: String,
    pub inputs: Map<String, Value>,
    /// The stored credential the node uses (`data.credential`, or the
    /// `credential` / `FLOWISE_CREDENTIAL_ID` input): its fields fill the inputs
    /// the node leaves blank.
    pub credential: Option<String>,
    /// The iteration node an agentflow node sits inside (`parentNode`).
    pub parent: Option<String>,
}

/// An agentflow node's inputs as Flowise writes them, read without a spec
/// (agentflow nodes, and the Start node's trigger settings).
impl FlowNode {
    /// A text input as written; numbers and booleans as text; empty when absent.
    pub fn input_text(&self, name: &str) -> String {
        match self.inputs.get(name) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::Bool(b)) => b.to_string(),
            _ => String::new(),
        }
    }

    /// A switch: `true`, or the text `"true"`.
    pub fn input_flag(&self, name: &str) -> bool {
        match self.inputs.get(name) {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s == "true",
            _ => false,
        }
    }

    /// An `array` input's rows (Flowise writes `""` for none, and some inputs
    /// as JSON text); `Err` says what is wrong with it.
    pub fn input_rows(&self, name: &str) -> Result<Vec<Map<String, Value>>, String> {
        let parsed;
        let items = match self.inputs.get(name) {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::String(s)) if s.trim().is_empty() => return Ok(Vec::new()),
            Some(Value::String(s)) => {
                parsed = serde_json::from_str::<Value>(s)
                    .map_err(|e| format!("input '{name}' is not a list of rows: {e}"))?;
                &parsed
            }
            Some(v) => v,
        };
        let Value::Array(items) = items else {
            return Err(format!("input '{name}' must be a list of rows"));
        };
        items
            .iter()
            .map(|row| match row {
                Value::Object(o) => Ok(o.clone()),
                _ => Err(format!("input '{name}' has a row that is not an object")),
            })
            .collect()
    }
}

/// The credential id a node's data or inputs name, if any.
pub fn credential_of(data_credential: Option<&str>, inputs: &Map<String, Value>) -> Option<String> {
    data_credential
        .into_iter()
        .chain(
            ["credential", "FLOWISE_CREDENTIAL_ID"]
                .iter()
                .filter_map(|k| inputs.get(*k).and_then(Value::as_str)),
        )
        .map(str::trim)
        .find(|id| !id.is_empty())
        .map(str::to_owned)
}

#[derive(Debug, Clone)]
pub struct FlowEdge {
    pub source: String,
    pub target: String,
    /// `seqCondition_0-output-yes-Condition`: which output of the source.
    pub source_handle: Option<String>,
}

impl FlowEdge {
    /// For an edge leaving an agentflow decision node, the index of the output
    /// it leaves from (`<source>-output-<index>`).
    pub fn branch(&self) -> Option<usize> {
        self.source_handle
            .as_deref()
            .and_then(|h| h.strip_prefix(self.source.as_str()))
            .and_then(|h| h.strip_prefix("-output-"))
            .and_then(|i| i.parse().ok())
    }
}

#[derive(Debug, Clone, Default)]
pub struct FlowGraph {
    pub nodes: Vec<FlowNode>,
    index: HashMap<String, usize>,
    /// Edges between nodes of the flow (those touching a decorative node dropped).
    pub edges: Vec<FlowEdge>,
}

#[derive(Deserialize)]
struct RawGraph {
    nodes: Vec<RawNode>,
    #[serde(default)]
    edges: Vec<RawEdge>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawNode {
    id: String,
    data: Option<RawData>,
    #[serde(default)]
    parent_node: Option<String>,
}

#[derive(Deserialize)]
struct RawData {
    id: Option<String>,
    name: Option<String>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    inputs: Option<Map<String, Value>>,
    #[serde(default)]
    credential: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEdge {
    source: String,
    target: String,
    #[serde(default)]
    source_handle: Option<String>,
}

impl FlowGraph {
    pub fn parse(flow_data: &str) -> Result<Self, FlowError> {
        let raw: RawGraph = serde_json::from_str(flow_data)
            .map_err(|e| FlowError::invalid(format!("flowData cannot be read: {e}")))?;
        let mut nodes = Vec::with_capacity(raw.nodes.len());
        for node in raw.nodes {
            let data = node
                .data
                .ok_or_else(|| FlowError::invalid(format!("node '{}' has no 'data'", node.id)))?;
            let name = data.name.ok_or_else(|| {
                FlowError::invalid(format!("node '{}' has no type ('data.name')", node.id))
            })?;
            if DECORATIVE.contains(&name.as_str()) {
                continue;
            }
            let id = data.id.unwrap_or(node.id);
            let inputs = data.inputs.unwrap_or_default();
            nodes.push(FlowNode {
                label: data.label.unwrap_or_else(|| id.clone()),
                id,
                name,
                credential: credential_of(data.credential.as_deref(), &inputs),
                inputs,
                parent: node.parent_node.filter(|p| !p.is_empty()),
            });
        }
        if nodes.is_empty() {
            return Err(FlowError::invalid("the flow has no nodes"));
        }
        let mut index = HashMap::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            if index.insert(n.id.clone(), i).is_some() {
                return Err(FlowError::invalid(format!(
                    "two nodes share the id '{}'",
                    n.id
                )));
            }
        }
        let edges = raw
            .edges
            .into_iter()
            .filter(|e| index.contains_key(&e.source) && index.contains_key(&e.target))
            .map(|e| FlowEdge {
                source: e.source,
                target: e.target,
                source_handle: e.source_handle,
            })
            .collect();
        Ok(FlowGraph {
            nodes,
            index,
            edges,
        })
    }

    /// Nodes whose output another node takes, by an edge or an input's reference.
    pub fn consumed(&self) -> HashSet<&str> {
        let mut consumed: HashSet<&str> = self.edges.iter().map(|e| e.source.as_str()).collect();
        for n in &self.nodes {
            for value in n.inputs.values() {
                consumed.extend(references(value));
            }
        }
        consumed
    }

    /// Nodes no other node consumes, in the flow's order.
    pub fn endings(&self) -> Vec<&FlowNode> {
        let consumed = self.consumed();
        self.nodes
            .iter()
            .filter(|n| !consumed.contains(n.id.as_str()))
            .collect()
    }

    pub fn node(&self, id: &str) -> Option<&FlowNode> {
        self.index.get(id).map(|&i| &self.nodes[i])
    }

    pub fn contains(&self, id: &str) -> bool {
        self.index.contains_key(id)
    }
}

/// Every `{{nodeId.data.instance}}` written inside `text` (a prompt value
/// that reads another node's result among other words): where it stands, and
/// the node id.
fn embedded(text: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find("{{").map(|i| from + i) {
        let Some(close) = text[open + 2..].find("}}").map(|i| open + 2 + i) else {
            break;
        };
        if let Some(id) = text[open + 2..close]
            .trim()
            .strip_suffix(".data.instance")
            .filter(|id| !id.is_empty())
        {
            found.push((open..close + 2, id));
        }
        from = close + 2;
    }
    found
}

/// The node ids `text` reads with `{{nodeId.data.instance}}`.
pub fn embedded_references(text: &str) -> Vec<&str> {
    embedded(text).into_iter().map(|(_, id)| id).collect()
}

/// `text` with each `{{nodeId.data.instance}}` whose node has a result
/// replaced by that result (the others left as written).
pub fn fill_references(text: &str, results: &HashMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut written = 0;
    for (span, id) in embedded(text) {
        if let Some(result) = results.get(id) {
            out.push_str(&text[written..span.start]);
            out.push_str(result);
            written = span.end;
        }
    }
    out.push_str(&text[written..]);
    out
}

/// The node id in `{{nodeId.data.instance}}`, if `text` is such a reference.
pub fn reference(text: &str) -> Option<&str> {
    let inner = text.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    let id = inner.trim().strip_suffix(".data.instance")?;
    (!id.is_empty() && !id.contains(['{', '}', ' '])).then_some(id)
}

/// Every node referenced by an input value (a reference or a list of them).
pub fn references(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => reference(s).into_iter().collect(),
        Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().and_then(reference))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flow(nodes: Value, edges: Value) -> String {
        json!({"nodes": nodes, "edges": edges}).to_string()
    }

    #[test]
    fn finds_the_ending_node_through_references_and_edges() {
        let data = flow(
            json!([
                {"id": "chatOpenAI_0", "data": {"id": "chatOpenAI_0", "name": "chatOpenAI", "inputs": {"modelName": "gpt"}}},
                {"id": "llmChain_0", "data": {"id": "llmChain_0", "name": "llmChain", "inputs": {"model": "{{chatOpenAI_0.data.instance}}"}}},
                {"id": "note", "data": {"id": "note", "name": "stickyNote", "inputs": {}}}
            ]),
            json!([{"source": "chatOpenAI_0", "target": "llmChain_0"}]),
        );
        let g = FlowGraph::parse(&data).unwrap();
        let endings: Vec<_> = g.endings().iter().map(|n| n.id.as_str()).collect();
        assert_eq!(endings, ["llmChain_0"]);
        assert_eq!(g.nodes.len(), 2);
        assert_eq!(
            g.node("chatOpenAI_0").map(|n| n.name.as_str()),
            Some("chatOpenAI")
        );
    }

    #[test]
    fn rejects_empty_or_unreadable_flows() {
        assert!(FlowGraph::parse(&flow(json!([]), json!([]))).is_err());
        assert!(FlowGraph::parse("{").is_err());
        let nameless = flow(json!([{"id": "a", "data": {}}]), json!([]));
        assert!(FlowGraph::parse(&nameless).is_err());
    }

    #[test]
    fn references() {
        assert_eq!(
            reference("{{chatOpenAI_0.data.instance}}"),
            Some("chatOpenAI_0")
        );
        assert_eq!(reference(" {{ a.data.instance }} "), Some("a"));
        assert_eq!(reference("{{question}}"), None);
        assert_eq!(reference("plain"), None);
        assert_eq!(
            super::embedded_references(
                "schema: {{customFunction_0.data.instance}} for {{question}} and {{ f_1.data.instance }}"
            ),
            ["customFunction_0", "f_1"]
        );
        assert!(super::embedded_references("{{ open").is_empty());
        let results = std::collections::HashMap::from([("f_1".to_owned(), "one".to_owned())]);
        assert_eq!(
            super::fill_references(
                "a {{ f_1.data.instance }} b {{g.data.instance}} {{",
                &results
            ),
            "a one b {{g.data.instance}} {{"
        );
        assert_eq!(
            super::references(&json!(["{{a.data.instance}}", "x", "{{b.data.instance}}"])),
            vec!["a", "b"]
        );
    }
}
