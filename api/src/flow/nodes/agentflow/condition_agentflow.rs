//! `conditionAgentflow`: a table of comparisons; the first that holds picks the
//! branch (the last output when none does). The rows are resolved when the
//! node runs.

use super::{Read, step};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::component::step::StepKind;
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input};

pub struct ConditionAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "conditionAgentflow",
    category: Category::Decision,
    inputs: &[input("conditions", InputKind::Json)],
};

impl Node for ConditionAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        step(StepKind::Condition(Read::new(node).rows("conditions")?))
    }
}
