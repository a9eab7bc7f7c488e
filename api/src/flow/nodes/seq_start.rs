//! `seqStart`: where a sequential-agents flow begins; its model is every later
//! node's unless that node has its own; with an agent memory, a session's run
//! begins at its last checkpoint.

use crate::flow::FlowError;
use crate::flow::component::{Component, SeqStep};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

pub struct SeqStart;

static SPEC: NodeSpec = NodeSpec {
    name: "seqStart",
    category: Category::Sequential,
    inputs: &[
        required("model", K::Anchor(Category::ChatModel)),
        input("agentMemory", K::Anchor(Category::Memory)),
        input("state", K::Anchor(Category::Sequential)),
        input("inputModeration", K::Anchors(Category::Moderation)),
    ],
};

impl Node for SeqStart {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let model = node.required_model("model")?;
        super::tool_agent::refuse_local(node, &model.provider)?;
        let (memory, checkpoints) = match node.anchor("agentMemory")? {
            None => (None, false),
            Some(Component::Checkpointer) => (None, true),
            Some(Component::Memory(memory)) => (Some(memory), false),
            Some(_) => return Err(node.invalid("input 'agentMemory' must be an agent memory")),
        };
        Ok(Component::Sequential(SeqStep::Start {
            model,
            memory,
            checkpoints,
        }))
    }
}
