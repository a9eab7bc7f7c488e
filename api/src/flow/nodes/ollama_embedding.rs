//! `ollamaEmbedding`: an Ollama server's embeddings (`/api/embed`).

use super::{K, base_url, input};
use crate::flow::FlowError;
use crate::flow::component::{Component, EmbeddingsSpec};
use crate::flow::node::{Build, Category, Node, NodeSpec, endpoint_url, required};

pub struct OllamaEmbedding;

static SPEC: NodeSpec = NodeSpec {
    name: "ollamaEmbedding",
    category: Category::Embeddings,
    inputs: &[
        endpoint_url("baseUrl"),
        required("modelName", K::Text),
        input("batchSize", K::Integer),
        input("numGpu", K::Ignored),
        input("numThread", K::Ignored),
        input("useMMap", K::Ignored),
    ],
};

impl Node for OllamaEmbedding {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Embeddings(EmbeddingsSpec::Ollama {
            base: base_url(node, &["baseUrl"], None, "http://localhost:11434"),
            model: node
                .text("modelName")
                .ok_or_else(|| node.invalid("needs its 'modelName'"))?
                .to_owned(),
            batch_size: node.count("batchSize", 64, 2048)? as usize,
        }))
    }
}
