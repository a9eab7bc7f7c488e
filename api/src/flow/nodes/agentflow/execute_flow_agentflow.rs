//! `executeFlowAgentflow`: asks another chatflow of the workspace, with
//! overrides of its own.

use serde_json::Value;

use super::{Read, step};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::component::step::{ExecuteFlowStep, StepKind};
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input, required};

pub struct ExecuteFlowAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "executeFlowAgentflow",
    category: Category::Step,
    inputs: &[
        required("executeFlowSelectedFlow", InputKind::Text),
        input("executeFlowInput", InputKind::Text),
        input("executeFlowOverrideConfig", InputKind::Json),
        input("executeFlowReturnResponseAs", InputKind::Text),
        input("executeFlowUpdateState", InputKind::Json),
    ],
};

impl Node for ExecuteFlowAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let read = Read::new(node);
        let selected = read.text("executeFlowSelectedFlow");
        let Ok(flow) = uuid::Uuid::parse_str(selected.trim()) else {
            return Err(read.invalid(format_args!(
                "input 'executeFlowSelectedFlow' must be a chatflow's id, not '{selected}'"
            )));
        };
        step(StepKind::ExecuteFlow(ExecuteFlowStep {
            flow,
            input: read.text("executeFlowInput"),
            override_config: match read.value("executeFlowOverrideConfig") {
                Some(Value::Object(map)) => Value::Object(map.clone()).to_string(),
                _ => read.text("executeFlowOverrideConfig"),
            },
            as_assistant: read.text("executeFlowReturnResponseAs") == "assistantMessage",
            update_state: read.update_state("executeFlow")?,
        }))
    }
}
