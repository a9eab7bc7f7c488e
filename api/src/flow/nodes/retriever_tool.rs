//! `retrieverTool`: a vector store offered to an agent as a tool; the model's
//! `input` finds chunks whose texts are the tool's output. With
//! `returnSourceDocuments` the chunks join the answer's `sourceDocuments`.

use crate::flow::FlowError;
use crate::flow::component::{Component, ToolKind, ToolSpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

pub struct RetrieverTool;

static SPEC: NodeSpec = NodeSpec {
    name: "retrieverTool",
    category: Category::Tool,
    inputs: &[
        input("name", K::Text),
        input("description", K::Text),
        required("retriever", K::Anchor(Category::VectorStore)),
        input("returnSourceDocuments", K::Boolean),
        input("retrieverToolMetadataFilter", K::Ignored),
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
                store: Box::new(node.vector_store("retriever")?),
                return_sources: node.boolean("returnSourceDocuments")?,
            },
        }))
    }
}
