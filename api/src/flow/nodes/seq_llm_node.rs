//! `seqLLMNode`: one model call as a step of a sequential flow. When a
//! `seqToolNode` names it, the model is offered that node's tools and its tool
//! calls go there.

use crate::flow::FlowError;
use crate::flow::component::{Component, SeqStep};
use crate::flow::node::{Build, Category, InputKind as K, InputSpec, Node, NodeSpec, input};

pub struct SeqLlmNode;

const INPUTS: [InputSpec; 17] = {
    let own = [
        input("llmNodeName", K::Text),
        input("systemMessagePrompt", K::Text),
        input("humanMessagePrompt", K::Text),
        input("sequentialNode", K::Anchors(Category::Sequential)),
        input("model", K::Anchor(Category::ChatModel)),
        input("promptValues", K::Json),
        input("llmStructuredOutput", K::Ignored),
    ];
    let mut out = [input("", K::Ignored); 17];
    let mut i = 0;
    while i < own.len() {
        out[i] = own[i];
        i += 1;
    }
    while i < 17 {
        out[i] = super::seq_agent::STEP_IGNORED[i - own.len()];
        i += 1;
    }
    out
};

static SPEC: NodeSpec = NodeSpec {
    name: "seqLLMNode",
    category: Category::Sequential,
    inputs: &INPUTS,
};

impl Node for SeqLlmNode {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Sequential(SeqStep::Llm(super::seq_agent::step(
            node,
            "llmNodeName",
            "LLM",
        )?)))
    }
}
