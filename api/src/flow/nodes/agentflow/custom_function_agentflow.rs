//! `customFunctionAgentflow`: Flowise's JavaScript function node. Its code (the
//! body of an async function) runs in the Python runtime's sandbox through its
//! JavaScript executor — never in the API process — with Flowise's globals:
//! `$input`, `$vars`, `$flow` and one `$<name>` per input variable row.

use super::{Read, step};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::component::step::{CustomFunctionStep, StepKind};
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
        let read = Read::new(node);
        let code = read.text("customFunctionJavascriptFunction");
        if code.trim().is_empty() {
            return Err(read.invalid("has no JavaScript function to run"));
        }
        crate::flow::nodes::javascript::refuse_node_modules(
            node,
            "customFunctionJavascriptFunction",
            &code,
        )?;
        let variables = read.pairs(
            "customFunctionInputVariables",
            "variableName",
            "variableValue",
        )?;
        if let Some((name, _)) = variables
            .iter()
            .find(|(name, _)| !crate::flow::nodes::javascript::is_js_identifier(name))
        {
            return Err(read.invalid(format_args!(
                "has an input variable '{name}' that is not a JavaScript name"
            )));
        }
        step(StepKind::CustomFunction(CustomFunctionStep {
            code,
            variables,
            update_state: read.update_state("customFunction")?,
        }))
    }
}
