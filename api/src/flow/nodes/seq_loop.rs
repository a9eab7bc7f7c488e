//! `seqLoop`: sends a sequential flow back to the agent, LLM or tool node
//! named `loopToName` (matched as Flowise does: lower case, spaces as `_`).
//! The plan resolves the name; a name no node has is a 400.

use crate::flow::FlowError;
use crate::flow::component::{Component, SeqStep};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

pub struct SeqLoop;

static SPEC: NodeSpec = NodeSpec {
    name: "seqLoop",
    category: Category::Sequential,
    inputs: &[
        input("sequentialNode", K::Anchors(Category::Sequential)),
        required("loopToName", K::Text),
    ],
};

impl Node for SeqLoop {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, _node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Sequential(SeqStep::Loop))
    }
}
