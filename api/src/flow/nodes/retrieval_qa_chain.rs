//! `retrievalQAChain`: the question finds a vector store's chunks, and the model
//! answers over them in one prompt; the chunks are the answer's sources.

use super::{AGENT_IGNORED, K};
use crate::flow::FlowError;
use crate::flow::component::{Component, RetrievalChainSpec, RetrievalKind};
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, concat, required};
use crate::flow::prompt::{REPHRASE_PROMPT, RESPONSE_PROMPT};

pub struct RetrievalQaChain;

const INPUTS: [InputSpec; 3] = concat(
    [
        required("model", K::Anchor(Category::ChatModel)),
        required("vectorStoreRetriever", K::Anchor(Category::VectorStore)),
    ],
    [AGENT_IGNORED[0]],
);

static SPEC: NodeSpec = NodeSpec {
    name: "retrievalQAChain",
    category: Category::Chain,
    inputs: &INPUTS,
};

impl Node for RetrievalQaChain {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::RetrievalChain(RetrievalChainSpec {
            kind: RetrievalKind::Qa,
            node_id: node.id().to_owned(),
            model: node.required_model("model")?,
            store: node.vector_store("vectorStoreRetriever")?,
            memory: None,
            rephrase_prompt: REPHRASE_PROMPT.to_owned(),
            response_prompt: RESPONSE_PROMPT.to_owned(),
            return_sources: true,
        }))
    }
}
