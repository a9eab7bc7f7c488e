//! `seqToolNode`: runs the tool calls its LLM node (`llmNode`) made, then goes on
//! to its next node (usually back to that LLM node).

use crate::flow::FlowError;
use crate::flow::component::{Component, SeqStep};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

pub struct SeqToolNode;

static SPEC: NodeSpec = NodeSpec {
    name: "seqToolNode",
    category: Category::Sequential,
    inputs: &[
        input("toolNodeName", K::Text),
        input("tools", K::Anchors(Category::Tool)),
        required("llmNode", K::Anchor(Category::Sequential)),
        input("interrupt", K::Ignored),
        input("approvalPrompt", K::Ignored),
        input("approveButtonText", K::Ignored),
        input("rejectButtonText", K::Ignored),
        input("updateStateMemoryUI", K::Json),
        input("updateStateMemoryCode", K::Text),
        input("updateStateMemory", K::Ignored),
        input("selectedUpdateStateMemoryTab", K::Ignored),
    ],
};

impl Node for SeqToolNode {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let llm_node = node
            .references("llmNode")
            .first()
            .map(|s| (*s).to_owned())
            .ok_or_else(|| node.invalid("needs its 'llmNode' input connected"))?;
        let (update_state, update_code) = super::seq_agent::update_state(node)?;
        Ok(Component::Sequential(SeqStep::ToolNode {
            name: node.text("toolNodeName").unwrap_or("Tools").to_owned(),
            tools: node.tools("tools")?,
            llm_node,
            update_state,
            update_code,
        }))
    }
}
