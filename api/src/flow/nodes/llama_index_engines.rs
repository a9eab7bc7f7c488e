//! LlamaIndex's chat engine in Flowise, run as the LangChain chain it matches:
//! `simpleChatEngine` (a system message, memory, the question: a conversation
//! chain).

use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

/// LlamaIndex's default system message of a chat engine, as Flowise shows it.
const DEFAULT_SYSTEM_MESSAGE: &str = "You are a helpful assistant";

pub struct SimpleChatEngine;

static SIMPLE: NodeSpec = NodeSpec {
    name: "simpleChatEngine",
    category: Category::Chain,
    inputs: &[
        required("model", K::Anchor(Category::ChatModel)),
        input("memory", K::Anchor(Category::Memory)),
        input("systemMessagePrompt", K::Text),
    ],
};

impl Node for SimpleChatEngine {
    fn spec(&self) -> &'static NodeSpec {
        &SIMPLE
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        super::conversation_chain::conversation(node, DEFAULT_SYSTEM_MESSAGE)
    }
}
