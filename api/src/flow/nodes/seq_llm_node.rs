//! `seqLLMNode`: one model call as a step of a sequential flow. When a
//! `seqToolNode` names it, the model is offered that node's tools and its tool
//! calls go there.

use crate::flow::FlowError;
use crate::flow::component::{Component, SeqStep};
use crate::flow::node::{
    Build, Category, InputKind as K, InputSpec, Node, NodeSpec, concat, input,
};

pub struct SeqLlmNode;

const INPUTS: [InputSpec; 17] = concat(
    [
        input("llmNodeName", K::Text),
        input("systemMessagePrompt", K::Text),
        input("humanMessagePrompt", K::Text),
        input("sequentialNode", K::Anchors(Category::Sequential)),
        input("model", K::Anchor(Category::ChatModel)),
        input("promptValues", K::Json),
        input("llmStructuredOutput", K::Ignored),
    ],
    super::seq_agent::STEP_IGNORED,
);

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
