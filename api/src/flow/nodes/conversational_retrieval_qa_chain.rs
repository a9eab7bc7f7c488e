//! `conversationalRetrievalQAChain`: a follow-up question is rephrased with the
//! history to stand alone, finds the chunks, and the model answers over them
//! with the conversation (`rephrasePrompt`, `responsePrompt`). Its sources are
//! returned when `returnSourceDocuments` is true (as in Flowise, not by
//! default). Without a memory node it remembers the session anyway, as
//! Flowise's chain does with its default buffer memory.

use super::{AGENT_IGNORED, K, input};
use crate::flow::FlowError;
use crate::flow::component::{Component, MemorySpec, RetrievalChainSpec, RetrievalKind};
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, concat, required};
use crate::flow::prompt::{REPHRASE_PROMPT, RESPONSE_PROMPT};

pub struct ConversationalRetrievalQaChain;

const INPUTS: [InputSpec; 9] = concat(
    [
        required("model", K::Anchor(Category::ChatModel)),
        required("vectorStoreRetriever", K::Anchor(Category::VectorStore)),
        input("memory", K::Anchor(Category::Memory)),
        input("returnSourceDocuments", K::Boolean),
        input("rephrasePrompt", K::Text),
        input("responsePrompt", K::Text),
        input("systemMessagePrompt", K::Ignored),
        input("chainOption", K::Ignored),
    ],
    [AGENT_IGNORED[0]],
);

static SPEC: NodeSpec = NodeSpec {
    name: "conversationalRetrievalQAChain",
    category: Category::Chain,
    inputs: &INPUTS,
};

/// The `memory` node, or (without one) the session's own history, as
/// Flowise's chains keep it with their default buffer memory.
pub(super) fn session_memory(node: &Build<'_>) -> Result<MemorySpec, FlowError> {
    Ok(node.memory("memory")?.unwrap_or_else(|| MemorySpec {
        node_id: node.id().to_owned(),
        window: None,
        session_id: None,
        label: None,
        redis: None,
    }))
}

impl Node for ConversationalRetrievalQaChain {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let memory = session_memory(node)?;
        Ok(Component::RetrievalChain(RetrievalChainSpec {
            kind: RetrievalKind::Conversational,
            node_id: node.id().to_owned(),
            model: node.required_model("model")?,
            store: node.vector_store("vectorStoreRetriever")?,
            memory: Some(memory),
            rephrase_prompt: node
                .text("rephrasePrompt")
                .unwrap_or(REPHRASE_PROMPT)
                .to_owned(),
            response_prompt: node
                .text("responsePrompt")
                .unwrap_or(RESPONSE_PROMPT)
                .to_owned(),
            return_sources: node.boolean("returnSourceDocuments")?,
        }))
    }
}
