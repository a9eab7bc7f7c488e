//! `customFunctionAgentflow`: a JavaScript function in Flowise. weir runs no
//! JavaScript, so the node is known (its export loads up to it) and refused
//! with the way to do the same work.

use super::Read;
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input};

pub struct CustomFunctionAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "customFunctionAgentflow",
    category: Category::Step,
    inputs: &[
        input("customFunctionInputVariables", InputKind::Json),
        input("customFunctionJavascriptFunction", InputKind::Text),
        input("customFunctionUpdateState", InputKind::Json),
    ],
};

impl Node for CustomFunctionAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Err(Read::new(node).invalid(
            "runs JavaScript, which weir does not run; do the work in a Python tool \
             (toolAgentflow with a stored tool) instead",
        ))
    }
}
