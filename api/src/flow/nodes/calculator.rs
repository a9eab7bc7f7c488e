//! `calculator`: arithmetic for agents, parsed by weir (never evaluated as code).

use crate::flow::FlowError;
use crate::flow::component::{Component, ToolKind, ToolSpec};
use crate::flow::node::{Build, Category, Node, NodeSpec};

pub struct Calculator;

static SPEC: NodeSpec = NodeSpec {
    name: "calculator",
    category: Category::Tool,
    inputs: &[],
};

impl Node for Calculator {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::Calculator,
        }))
    }
}
