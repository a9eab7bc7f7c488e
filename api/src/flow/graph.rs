//! Reading a Flowise `flowData` graph: nodes with their `inputs`, references of
//! the form `{{nodeId.data.instance}}`, edges, and the ending node (the one whose
//! output no other node consumes).

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
    pub inputs: Map<String, Value>,
}

#[derive(Debug, Clone)]
pub struct FlowGraph {
    pub nodes: Vec<FlowNode>,
    index: HashMap<String, usize>,
    /// Id of the node whose output is the flow's answer.
    pub ending: String,
}

#[derive(Deserialize)]
struct RawGraph {
    nodes: Vec<RawNode>,
    #[serde(default)]
    edges: Vec<RawEdge>,
}

#[derive(Deserialize)]
struct RawNode {
    id: String,
    data: Option<RawData>,
}

#[derive(Deserialize)]
struct RawData {
    id: Option<String>,
    name: Option<String>,
    #[serde(default)]
    inputs: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
struct RawEdge {
    source: String,
    target: String,
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
            nodes.push(FlowNode {
                id: data.id.unwrap_or(node.id),
                name,
                inputs: data.inputs.unwrap_or_default(),
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
        // A node feeds another when an edge says so or an input references it.
        let mut consumed: HashSet<&str> = raw
            .edges
            .iter()
            .filter(|e| index.contains_key(&e.target))
            .map(|e| e.source.as_str())
            .collect();
        for n in &nodes {
            for value in n.inputs.values() {
                for r in references(value) {
                    consumed.insert(r);
                }
            }
        }
        let endings: Vec<&str> = nodes
            .iter()
            .map(|n| n.id.as_str())
            .filter(|id| !consumed.contains(id))
            .collect();
        let ending = match endings.as_slice() {
            [one] => (*one).to_owned(),
            [] => {
                return Err(FlowError::invalid(
                    "the flow has no ending node (it is a cycle)",
                ));
            }
            many => {
                return Err(FlowError::invalid(format!(
                    "the flow has {} ending nodes ({}); connect them so exactly one remains",
                    many.len(),
                    many.join(", ")
                )));
            }
        };
        Ok(FlowGraph {
            nodes,
            index,
            ending,
        })
    }

    pub fn node(&self, id: &str) -> Option<&FlowNode> {
        self.index.get(id).map(|&i| &self.nodes[i])
    }

    pub fn ending_node(&self) -> &FlowNode {
        // `ending` is always one of the nodes (checked in `parse`).
        self.node(&self.ending).unwrap_or(&self.nodes[0])
    }

    pub fn contains(&self, id: &str) -> bool {
        self.index.contains_key(id)
    }
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
        assert_eq!(g.ending, "llmChain_0");
        assert_eq!(g.nodes.len(), 2);
        assert_eq!(
            g.node("chatOpenAI_0").map(|n| n.name.as_str()),
            Some("chatOpenAI")
        );
    }

    #[test]
    fn rejects_ambiguous_or_empty_flows() {
        let two = flow(
            json!([
                {"id": "a", "data": {"name": "llmChain"}},
                {"id": "b", "data": {"name": "llmChain"}}
            ]),
            json!([]),
        );
        assert!(
            FlowGraph::parse(&two)
                .unwrap_err()
                .message
                .contains("2 ending nodes")
        );
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
            super::references(&json!(["{{a.data.instance}}", "x", "{{b.data.instance}}"])),
            vec!["a", "b"]
        );
    }
}
