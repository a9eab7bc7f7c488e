//! `currentDateTime`: tells an agent the current date and time (UTC).

use crate::flow::FlowError;
use crate::flow::component::{Component, ToolKind, ToolSpec};
use crate::flow::node::{Build, Category, Node, NodeSpec};

pub struct CurrentDateTime;

static SPEC: NodeSpec = NodeSpec {
    name: "currentDateTime",
    category: Category::Tool,
    inputs: &[],
};

impl Node for CurrentDateTime {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::CurrentDateTime,
        }))
    }
}
