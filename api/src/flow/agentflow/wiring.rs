//! An agentflow's graph, read once per chatflow version: where it starts, which
//! nodes follow each node (on which output, for a decision node), what each
//! node waits for before it runs, and the nodes inside each iteration block.
//!
//! Readiness follows Flowise: a node runs once every input it has from a plain
//! node has arrived and, for each decision node upstream (a condition, a
//! condition agent, a human input), at least one input from behind it — so a
//! node after an if/else runs once, on whichever branch was taken.

use std::collections::{HashMap, HashSet};

use crate::flow::FlowError;
use crate::flow::graph::{FlowGraph, FlowNode};
use crate::flow::node::{Category, unknown};
use crate::flow::registry;

/// A node that follows another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Next {
    pub target: String,
    /// For a decision node, the index of the output the edge leaves from.
    pub branch: Option<usize>,
}

/// What a node waits for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Waits {
    /// Sources that must all have run.
    pub all: Vec<String>,
    /// Per decision node upstream, the sources behind it: one of each group is enough.
    pub any: Vec<Vec<String>>,
}

#[derive(Debug, Default)]
pub struct Wiring {
    /// The start node of the top level.
    pub start: String,
    pub labels: HashMap<String, String>,
    /// Node types, by id.
    pub names: HashMap<String, String>,
    pub next: HashMap<String, Vec<Next>>,
    /// Sources of each node's incoming edges, in edge order (`previousNodeIds`).
    pub previous: HashMap<String, Vec<String>>,
    pub waits: HashMap<String, Waits>,
    /// An iteration node's block: its nodes, and those that start it.
    pub blocks: HashMap<String, Block>,
    /// Whether any input names `$vars`.
    pub reads_vars: bool,
}

#[derive(Debug, Default, Clone)]
pub struct Block {
    pub nodes: Vec<String>,
    pub starts: Vec<String>,
}

impl Wiring {
    pub fn build(graph: &FlowGraph) -> Result<Wiring, FlowError> {
        let mut wiring = Wiring::default();
        for node in &graph.nodes {
            let Some(spec) = registry::spec(&node.name) else {
                return Err(unknown(node));
            };
            if !spec.category.is_agentflow() {
                return Err(FlowError::invalid(format!(
                    "node {} is of type '{}', which is not an agentflow node; an agentflow \
                     holds only *Agentflow nodes (their models and tools are chosen inside them)",
                    node.id, node.name
                )));
            }
            wiring.labels.insert(node.id.clone(), node.label.clone());
            wiring.names.insert(node.id.clone(), node.name.clone());
            wiring.reads_vars |= node.inputs.values().any(mentions_vars);
        }
        for edge in &graph.edges {
            let branch = edge.branch();
            let next = wiring.next.entry(edge.source.clone()).or_default();
            let step = Next {
                target: edge.target.clone(),
                branch,
            };
            if !next.contains(&step) {
                next.push(step);
            }
            let previous = wiring.previous.entry(edge.target.clone()).or_default();
            if !previous.contains(&edge.source) {
                previous.push(edge.source.clone());
            }
        }
        for node in &graph.nodes {
            wiring
                .waits
                .insert(node.id.clone(), waits_of(graph, &wiring, &node.id));
            if let Some(parent) = &node.parent {
                let iteration = graph
                    .node(parent)
                    .filter(|p| p.name == "iterationAgentflow");
                if iteration.is_none() {
                    return Err(FlowError::invalid(format!(
                        "node {} sits inside '{parent}', which is not an iterationAgentflow node",
                        node.id
                    )));
                }
                wiring
                    .blocks
                    .entry(parent.clone())
                    .or_default()
                    .nodes
                    .push(node.id.clone());
            }
        }
        for (id, block) in &mut wiring.blocks {
            let inside: HashSet<&str> = block.nodes.iter().map(String::as_str).collect();
            for edge in &graph.edges {
                if inside.contains(edge.target.as_str()) != inside.contains(edge.source.as_str()) {
                    return Err(FlowError::invalid(format!(
                        "an edge joins {} and {}, across the border of iteration {id}; \
                         a block's nodes connect only to each other",
                        edge.source, edge.target
                    )));
                }
            }
            block.starts = block
                .nodes
                .iter()
                .filter(|n| wiring.previous.get(*n).is_none_or(Vec::is_empty))
                .cloned()
                .collect();
            if block.starts.is_empty() && !block.nodes.is_empty() {
                return Err(FlowError::invalid(format!(
                    "the nodes inside iteration {id} form a cycle with no first node"
                )));
            }
        }
        let starts: Vec<&FlowNode> = graph
            .nodes
            .iter()
            .filter(|n| n.parent.is_none())
            .filter(|n| wiring.previous.get(&n.id).is_none_or(Vec::is_empty))
            .collect();
        wiring.start = match starts.as_slice() {
            [one] if one.name == "startAgentflow" => one.id.clone(),
            [one] => {
                return Err(FlowError::invalid(format!(
                    "an agentflow begins at its startAgentflow node, but {} ({}) is the only \
                     node nothing leads to",
                    one.id, one.name
                )));
            }
            [] => {
                return Err(FlowError::invalid(
                    "the agentflow has no startAgentflow node (or every node has an incoming edge)",
                ));
            }
            many => {
                let ids: Vec<&str> = many.iter().map(|n| n.id.as_str()).collect();
                return Err(FlowError::invalid(format!(
                    "the agentflow has {} nodes that nothing leads to ({}); it must have exactly \
                     one, its startAgentflow — connect or remove the others",
                    ids.len(),
                    ids.join(", ")
                )));
            }
        };
        Ok(wiring)
    }

    pub fn label<'a>(&'a self, id: &'a str) -> &'a str {
        self.labels.get(id).map_or(id, String::as_str)
    }

    pub fn name(&self, id: &str) -> &str {
        self.names.get(id).map_or("", String::as_str)
    }

    pub fn previous(&self, id: &str) -> &[String] {
        self.previous.get(id).map_or(&[], Vec::as_slice)
    }

    pub fn next(&self, id: &str) -> &[Next] {
        self.next.get(id).map_or(&[], Vec::as_slice)
    }

    /// Whether the node ends a path (its text is streamed as the answer).
    pub fn is_last(&self, id: &str) -> bool {
        self.next(id).is_empty()
    }
}

/// What `id` waits for: plain sources all, and one source behind each decision.
fn waits_of(graph: &FlowGraph, wiring: &Wiring, id: &str) -> Waits {
    let mut waits = Waits::default();
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for source in wiring.previous(id) {
        match decision_above(graph, wiring, source) {
            Some(decision) => match groups.iter_mut().find(|(d, _)| *d == decision) {
                Some((_, sources)) => sources.push(source.clone()),
                None => groups.push((decision, vec![source.clone()])),
            },
            None => waits.all.push(source.clone()),
        }
    }
    waits.any = groups.into_iter().map(|(_, sources)| sources).collect();
    waits
}

/// The decision node `source` is behind: itself, or the first found going up
/// along first incoming edges (as Flowise looks for it).
fn decision_above(graph: &FlowGraph, wiring: &Wiring, source: &str) -> Option<String> {
    let mut seen = HashSet::new();
    let mut at = source;
    loop {
        if !seen.insert(at) {
            return None;
        }
        let name = graph.node(at).map(|n| n.name.as_str())?;
        if registry::spec(name).is_some_and(|s| s.category == Category::Decision) {
            return Some(at.to_owned());
        }
        at = wiring.previous(at).first()?;
    }
}

fn mentions_vars(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(s) => s.contains("$vars"),
        serde_json::Value::Array(items) => items.iter().any(mentions_vars),
        serde_json::Value::Object(map) => map.values().any(mentions_vars),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn graph(nodes: serde_json::Value, edges: serde_json::Value) -> FlowGraph {
        FlowGraph::parse(&json!({"nodes": nodes, "edges": edges}).to_string()).unwrap()
    }

    fn node(id: &str, name: &str) -> serde_json::Value {
        json!({"id": id, "data": {"id": id, "name": name, "label": id, "inputs": {}}})
    }

    fn edge(source: &str, handle: &str, target: &str) -> serde_json::Value {
        json!({"source": source, "sourceHandle": format!("{source}-output-{handle}"), "target": target})
    }

    #[test]
    fn a_join_after_a_condition_waits_for_one_branch() {
        let g = graph(
            json!([
                node("start", "startAgentflow"),
                node("cond", "conditionAgentflow"),
                node("a", "llmAgentflow"),
                node("b", "llmAgentflow"),
                node("join", "directReplyAgentflow")
            ]),
            json!([
                edge("start", "startAgentflow", "cond"),
                edge("cond", "0", "a"),
                edge("cond", "1", "b"),
                edge("a", "llmAgentflow", "join"),
                edge("b", "llmAgentflow", "join")
            ]),
        );
        let w = Wiring::build(&g).unwrap();
        assert_eq!(w.start, "start");
        assert_eq!(
            w.next("cond"),
            [
                Next {
                    target: "a".into(),
                    branch: Some(0)
                },
                Next {
                    target: "b".into(),
                    branch: Some(1)
                }
            ]
        );
        let join = &w.waits["join"];
        assert!(join.all.is_empty());
        assert_eq!(join.any, vec![vec!["a".to_owned(), "b".to_owned()]]);
        assert_eq!(w.waits["cond"].all, ["start"]);
    }

    #[test]
    fn exactly_one_start() {
        let two = graph(
            json!([node("s", "startAgentflow"), node("x", "llmAgentflow")]),
            json!([]),
        );
        let e = Wiring::build(&two).unwrap_err();
        assert!(e.message.contains("s, x"), "{}", e.message);
        let foreign = graph(json!([node("m", "chatOpenAI")]), json!([]));
        assert!(Wiring::build(&foreign).is_err());
    }
}
