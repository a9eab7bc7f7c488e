//! `llmAgentflow`: one model call over the node's messages and, when enabled,
//! the conversation so far; optionally answering in structured fields.

use super::{Read, step};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::component::step::{Llm, StepKind};
use crate::flow::node::{Build, Category, InputKind, Node, NodeSpec, input, required};

pub struct LlmAgentflow;

static SPEC: NodeSpec = NodeSpec {
    name: "llmAgentflow",
    category: Category::Step,
    inputs: &[
        required("llmModel", InputKind::Text),
        input("llmModelConfig", InputKind::Json),
        input("llmMessages", InputKind::Json),
        input("llmEnableMemory", InputKind::Boolean),
        input("llmMemoryType", InputKind::Text),
        input("llmMemoryWindowSize", InputKind::Integer),
        input("llmMemoryMaxTokenLimit", InputKind::Integer),
        input("llmUserMessage", InputKind::Text),
        input("llmReturnResponseAs", InputKind::Text),
        input("llmStructuredOutput", InputKind::Json),
        input("llmUpdateState", InputKind::Json),
    ],
};

impl Node for LlmAgentflow {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let read = Read::new(node);
        step(StepKind::Llm(Llm {
            model: read.model("llmModel")?,
            talk: read.talk("llm")?,
            structured: read.structured("llmStructuredOutput")?,
            update_state: read.update_state("llm")?,
        }))
    }
}
