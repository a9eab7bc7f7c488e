//! `conversationChain`: a system message, the conversation so far (memory), and
//! the question.

use crate::flow::FlowError;
use crate::flow::component::{ChainKind, ChainSpec, Component};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

pub struct ConversationChain;

/// Flowise's default system message of a conversation chain.
pub const DEFAULT_SYSTEM_MESSAGE: &str = "The following is a friendly conversation between a human and an AI. The AI is talkative and provides lots of specific details from its context. If the AI does not know the answer to a question, it truthfully says it does not know.";

static SPEC: NodeSpec = NodeSpec {
    name: "conversationChain",
    category: Category::Chain,
    inputs: &[
        required("model", K::Anchor(Category::ChatModel)),
        input("memory", K::Anchor(Category::Memory)),
        input("chatPromptTemplate", K::Anchor(Category::Prompt)),
        input("systemMessagePrompt", K::Text),
        input("inputModeration", K::Anchors(Category::Moderation)),
    ],
};

impl Node for ConversationChain {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        conversation(node, DEFAULT_SYSTEM_MESSAGE)
    }
}

/// A conversation chain from a node's `model`, `memory`, `chatPromptTemplate`
/// and `systemMessagePrompt` (else `default_system`).
pub(super) fn conversation(node: &Build<'_>, default_system: &str) -> Result<Component, FlowError> {
    Ok(Component::Chain(ChainSpec {
        kind: ChainKind::Conversation,
        node_id: node.id().to_owned(),
        model: node.required_model("model")?,
        prompt: node.prompt("chatPromptTemplate")?,
        memory: node.memory("memory")?,
        system_message: node
            .text("systemMessagePrompt")
            .unwrap_or(default_system)
            .to_owned(),
        output_parser: None,
    }))
}
