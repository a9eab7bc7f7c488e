//! `customFunction` (Flowise's "Custom JS Function" utility): the body of an
//! async JavaScript function, run in the Python runtime's sandbox — never in
//! weir's process. Its result either fills `{{<id>.data.instance}}` in the
//! prompt values of the nodes it is connected to (its `output` anchor), or, as
//! the flow's ending node, is the answer.

use serde_json::Value;

use crate::flow::FlowError;
use crate::flow::component::{Component, FunctionSpec};
use crate::flow::graph::embedded_references;
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

pub struct CustomFunction;

static SPEC: NodeSpec = NodeSpec {
    name: "customFunction",
    category: Category::Function,
    inputs: &[
        input("functionInputVariables", K::Json),
        input("functionName", K::Text),
        required("javascriptFunction", K::Text),
    ],
};

impl Node for CustomFunction {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let variables = node.json_object("functionInputVariables")?;
        for (name, value) in &variables {
            if !super::javascript::is_js_identifier(name) {
                return Err(node.invalid(format_args!(
                    "input variable '{name}' cannot be a JavaScript global ($name): use letters, \
                     digits, _ and $"
                )));
            }
            let Value::String(text) = value else {
                continue;
            };
            for id in embedded_references(text) {
                // The steps that run ahead (`flow::plan::StepAhead`).
                let runs_ahead = node.graph().node(id).is_some_and(|n| {
                    (n.name == SPEC.name || n.name == "llmChain") && n.id != node.id()
                });
                if !runs_ahead {
                    return Err(node.invalid(format_args!(
                        "input variable '{name}' reads node {id}; weir passes only another \
                         customFunction's or an llmChain's result between chatflow nodes"
                    )));
                }
            }
        }
        let code = node.text("javascriptFunction").unwrap_or_default();
        super::javascript::refuse_node_modules(node, "javascriptFunction", code)?;
        Ok(Component::Function(FunctionSpec {
            node_id: node.id().to_owned(),
            code: code.to_owned(),
            variables,
        }))
    }
}
