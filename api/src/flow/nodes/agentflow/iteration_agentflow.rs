//! `iterationAgentflow`: the nodes inside its block run once per item of a
//! list.

use super::{Read, step};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::component::step::StepKind;
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input};

pub struct IterationAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "iterationAgentflow",
    category: Category::Step,
    inputs: &[input("iterationInput", InputKind::Text)],
};

impl Node for IterationAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        step(StepKind::Iteration {
            input: Read::new(node).text("iterationInput"),
        })
    }
}
