//! Each agentflow node built into a [`Step`] for one request. The node types
//! are registered like every other (`flow/nodes/agentflow/`, one module each):
//! a node's type builds its [`StepKind`], the data this run kind executes.

use std::collections::HashMap;

use crate::flow::FlowError;
use crate::flow::component::Component;
pub use crate::flow::component::step::*;
use crate::flow::graph::FlowGraph;
use crate::flow::overrides::Overrides;
use crate::flow::registry::build_node;

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub id: String,
    pub name: String,
    pub kind: StepKind,
}

/// Every node of the flow as a step ([`super::Wiring`] has checked that each
/// is an agentflow node).
pub fn build_steps(
    graph: &FlowGraph,
    overrides: &Overrides<'_>,
) -> Result<HashMap<String, Step>, FlowError> {
    let mut steps = HashMap::with_capacity(graph.nodes.len());
    for node in &graph.nodes {
        let Component::Step(kind) = build_node(graph, node, overrides)? else {
            return Err(FlowError::invalid(format!(
                "node {} ({}) is not an agentflow node",
                node.id, node.name
            )));
        };
        steps.insert(
            node.id.clone(),
            Step {
                id: node.id.clone(),
                name: node.name.clone(),
                kind: *kind,
            },
        );
    }
    Ok(steps)
}
