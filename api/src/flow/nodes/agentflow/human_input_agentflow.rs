//! `humanInputAgentflow`: the run pauses for a person to proceed or reject
//! (two branches), with what they are asked written in the node or by a model.

use super::{Read, step};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::component::step::{Ask, HumanInput, StepKind};
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input};

pub struct HumanInputAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "humanInputAgentflow",
    category: Category::Decision,
    inputs: &[
        input("humanInputDescriptionType", InputKind::Text),
        input("humanInputDescription", InputKind::Text),
        input("humanInputModel", InputKind::Text),
        input("humanInputModelConfig", InputKind::Json),
        input("humanInputModelPrompt", InputKind::Text),
        input("humanInputEnableFeedback", InputKind::Boolean),
    ],
};

impl Node for HumanInputAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let read = Read::new(node);
        if read.node.parent.is_some() {
            return Err(read.invalid(
                "waits for human input inside an iteration; a block runs once per item \
                 without pausing — put the human input before or after the iteration",
            ));
        }
        let ask = match read.text("humanInputDescriptionType").as_str() {
            "dynamic" => Ask::Model {
                model: Box::new(read.model("humanInputModel")?),
                prompt: read.text("humanInputModelPrompt"),
            },
            _ => Ask::Fixed(read.text("humanInputDescription")),
        };
        step(StepKind::HumanInput(HumanInput {
            ask,
            feedback: read.flag("humanInputEnableFeedback"),
        }))
    }
}
