//! `directReplyAgentflow`: answers with its message, no model involved.

use super::{Read, step};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::component::step::StepKind;
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input};

pub struct DirectReplyAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "directReplyAgentflow",
    category: Category::Step,
    inputs: &[input("directReplyMessage", InputKind::Text)],
};

impl Node for DirectReplyAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        step(StepKind::DirectReply {
            message: Read::new(node).text("directReplyMessage"),
        })
    }
}
