//! `toolAgentflow`: one tool called with arguments the node writes (no model
//! choosing them).

use super::{Read, step};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::component::step::{StepKind, ToolStep};
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input};

pub struct ToolAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "toolAgentflow",
    category: Category::Step,
    inputs: &[
        input("toolAgentflowSelectedTool", InputKind::Text),
        input("toolAgentflowSelectedToolConfig", InputKind::Json),
        // The names of Flowise's first versions of the node.
        input("selectedTool", InputKind::Text),
        input("selectedToolConfig", InputKind::Json),
        input("toolInputArgs", InputKind::Json),
        input("toolUpdateState", InputKind::Json),
    ],
};

impl Node for ToolAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let read = Read::new(node);
        let param = if read.text("toolAgentflowSelectedTool").trim().is_empty() {
            "selectedTool"
        } else {
            "toolAgentflowSelectedTool"
        };
        let tool = match read.component(param)? {
            Some(Component::Tool(tool)) => tool,
            Some(_) => return Err(read.invalid(format_args!("'{param}' is not a tool"))),
            None => return Err(read.invalid("needs a tool ('toolAgentflowSelectedTool')")),
        };
        step(StepKind::Tool(ToolStep {
            tool,
            args: read.pairs("toolInputArgs", "inputArgName", "inputArgValue")?,
            update_state: read.update_state("tool")?,
        }))
    }
}
