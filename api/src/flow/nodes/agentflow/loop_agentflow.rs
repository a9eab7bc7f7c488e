//! `loopAgentflow`: sends the run back to an earlier node, at most a number of
//! times, then answers with its fallback message.

use super::{Read, step};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::component::step::{DEFAULT_LOOP_COUNT, LoopStep, MAX_LOOP_COUNT, StepKind};
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input, required};

pub struct LoopAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "loopAgentflow",
    category: Category::Step,
    inputs: &[
        required("loopBackToNode", InputKind::Text),
        input("maxLoopCount", InputKind::Integer),
        input("fallbackMessage", InputKind::Text),
        input("loopUpdateState", InputKind::Json),
    ],
};

impl Node for LoopAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let read = Read::new(node);
        let target_text = read.text("loopBackToNode");
        // `<nodeId>-<label>`; ids never hold '-' but labels may.
        let target = target_text
            .split('-')
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned();
        if node.graph().node(&target).is_none() {
            return Err(read.invalid(format_args!(
                "loops back to '{target_text}', which is not a node of the flow"
            )));
        }
        let max = match read.text("maxLoopCount").trim() {
            "" => DEFAULT_LOOP_COUNT,
            n => match n.parse::<f64>() {
                Ok(n) if n >= 1.0 && n <= f64::from(MAX_LOOP_COUNT) => n as u32,
                _ => {
                    return Err(read.invalid(format_args!(
                        "input 'maxLoopCount' must be a whole number from 1 to {MAX_LOOP_COUNT}"
                    )));
                }
            },
        };
        step(StepKind::Loop(LoopStep {
            target,
            max,
            fallback: Some(read.text("fallbackMessage")).filter(|m| !m.trim().is_empty()),
            update_state: read.update_state("loop")?,
        }))
    }
}
