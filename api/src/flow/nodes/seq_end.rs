//! `seqEnd`: where a path of a sequential flow ends; the last step's output is
//! the answer.

use crate::flow::FlowError;
use crate::flow::component::{Component, SeqStep};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input};

pub struct SeqEnd;

static SPEC: NodeSpec = NodeSpec {
    name: "seqEnd",
    category: Category::Sequential,
    inputs: &[input("sequentialNode", K::Anchors(Category::Sequential))],
};

impl Node for SeqEnd {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, _node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Sequential(SeqStep::End))
    }
}
