//! `llmChain`: a prompt filled in and sent to a model, no memory; with an
//! `outputParser` its answer is JSON.

use crate::flow::FlowError;
use crate::flow::component::{ChainKind, ChainSpec, Component};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

pub struct LlmChain;

static SPEC: NodeSpec = NodeSpec {
    name: "llmChain",
    category: Category::Chain,
    inputs: &[
        required("model", K::Anchor(Category::ChatModel)),
        required("prompt", K::Anchor(Category::Prompt)),
        input("outputParser", K::Anchor(Category::OutputParser)),
        input("inputModeration", K::Anchors(Category::Moderation)),
        input("chainName", K::Ignored),
    ],
};

impl Node for LlmChain {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Chain(ChainSpec {
            kind: ChainKind::Llm,
            node_id: node.id().to_owned(),
            model: node.required_model("model")?,
            prompt: node.prompt("prompt")?,
            memory: None,
            system_message: String::new(),
            output_parser: node.output_parser("outputParser")?,
        }))
    }
}
