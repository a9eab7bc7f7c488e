//! `conditionAgentAgentflow`: a model picks which scenario the input fits; each
//! scenario is a branch.

use super::{Read, step};
use crate::flow::FlowError;
use crate::flow::component::step::{ConditionAgent, StepKind};
use crate::flow::component::{Component, cell};
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input, required};

pub struct ConditionAgentAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "conditionAgentAgentflow",
    category: Category::Decision,
    inputs: &[
        required("conditionAgentModel", InputKind::Text),
        input("conditionAgentModelConfig", InputKind::Json),
        input("conditionAgentInstructions", InputKind::Text),
        input("conditionAgentInput", InputKind::Text),
        required("conditionAgentScenarios", InputKind::Json),
        input("conditionAgentEnableMemory", InputKind::Boolean),
        input("conditionAgentOverrideSystemPrompt", InputKind::Boolean),
        input("conditionAgentSystemPrompt", InputKind::Text),
    ],
};

impl Node for ConditionAgentAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let read = Read::new(node);
        let scenarios: Vec<String> = read
            .rows("conditionAgentScenarios")?
            .iter()
            .map(|row| cell(row.get("scenario")).trim().to_owned())
            .collect();
        if scenarios.is_empty() || scenarios.iter().any(String::is_empty) {
            return Err(read.invalid("needs its scenarios, none of them empty"));
        }
        let beyond = node.graph().edges.iter().find(|edge| {
            edge.source == read.node.id && edge.branch().is_some_and(|b| b >= scenarios.len())
        });
        if let Some(edge) = beyond {
            return Err(read.invalid(format_args!(
                "has an edge to {} from an output it does not have ({} scenarios)",
                edge.target,
                scenarios.len()
            )));
        }
        step(StepKind::ConditionAgent(ConditionAgent {
            model: read.model("conditionAgentModel")?,
            instructions: read.text("conditionAgentInstructions"),
            input: read.text("conditionAgentInput"),
            scenarios,
            memory: read.flag("conditionAgentEnableMemory"),
            system: Some(read.text("conditionAgentSystemPrompt")).filter(|s| {
                read.flag("conditionAgentOverrideSystemPrompt") && !s.trim().is_empty()
            }),
        }))
    }
}
