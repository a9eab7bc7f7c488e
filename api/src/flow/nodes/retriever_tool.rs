//! `retrieverTool`: a retriever offered to an agent as a tool. Accepted so flows
//! load; weir has no retrievers yet, so calling it fails with a clear message.

use crate::flow::FlowError;
use crate::flow::component::{Component, ToolKind, ToolSpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input};

pub struct RetrieverTool;

static SPEC: NodeSpec = NodeSpec {
    name: "retrieverTool",
    category: Category::Tool,
    inputs: &[
        input("name", K::Text),
        input("description", K::Text),
        input("retriever", K::Anchor(Category::Unsupported)),
        input("returnSourceDocuments", K::Ignored),
    ],
};

impl Node for RetrieverTool {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let name = node.text("name").unwrap_or("retriever").to_owned();
        crate::domain::tool::validate_tool_name(&name)
            .map_err(|e| node.invalid(format_args!("input 'name': {e}")))?;
        Ok(Component::Tool(ToolSpec {
            node_id: node.id().to_owned(),
            kind: ToolKind::Retriever {
                name,
                description: node
                    .text("description")
                    .unwrap_or("Searches documents.")
                    .to_owned(),
            },
        }))
    }
}
