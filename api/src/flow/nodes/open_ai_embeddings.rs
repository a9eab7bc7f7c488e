//! `openAIEmbeddings`: OpenAI's embeddings, or any OpenAI-compatible server's
//! (`basepath`). The key comes from the node, else `OPENAI_API_KEY`.

use super::{K, OPENAI, endpoint, input, model_name};
use crate::flow::FlowError;
use crate::flow::component::{Component, EmbeddingsSpec};
use crate::flow::node::{Build, Category, Node, NodeSpec, endpoint_url, sensitive};
use crate::llm::openai::{self, Auth};

pub struct OpenAiEmbeddings;

static SPEC: NodeSpec = NodeSpec {
    name: "openAIEmbeddings",
    category: Category::Embeddings,
    inputs: &[
        input("modelName", K::Text),
        input("dimensions", K::Integer),
        input("batchSize", K::Integer),
        input("stripNewLines", K::Boolean),
        endpoint_url("basepath"),
        endpoint_url("basePath"),
        sensitive("openAIApiKey", K::Text),
        input("credential", K::Ignored),
        input("timeout", K::Ignored),
        input("baseOptions", K::Ignored),
        input("encodingFormat", K::Ignored),
    ],
};

/// LlamaIndex's OpenAI embeddings in Flowise (`openAIEmbedding_LlamaIndex`):
/// the same embeddings.
pub struct OpenAiEmbeddingLlamaIndex;

static LLAMA_INDEX_SPEC: NodeSpec = NodeSpec {
    name: "openAIEmbedding_LlamaIndex",
    category: Category::Embeddings,
    inputs: SPEC.inputs,
};

impl Node for OpenAiEmbeddingLlamaIndex {
    fn spec(&self) -> &'static NodeSpec {
        &LLAMA_INDEX_SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        OpenAiEmbeddings.build(node)
    }
}

impl Node for OpenAiEmbeddings {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let (base, key) = endpoint(node, &OPENAI)?;
        Ok(Component::Embeddings(EmbeddingsSpec::OpenAi {
            base,
            auth: Auth::Bearer(key),
            model: model_name(node, "text-embedding-ada-002"),
            dimensions: dimensions(node)?,
            batch_size: node.count("batchSize", 512, 2048)? as usize,
            strip_newlines: node.value("stripNewLines").is_none()
                || node.boolean("stripNewLines")?,
            label: openai::PROVIDER,
        }))
    }
}

/// `dimensions`, when set (newer OpenAI models shorten their vectors).
pub fn dimensions(node: &Build<'_>) -> Result<Option<u32>, FlowError> {
    match node.integer("dimensions")? {
        None => Ok(None),
        Some(d) if (1..=65_536).contains(&d) => Ok(Some(d as u32)),
        Some(_) => Err(node.invalid("input 'dimensions' must be between 1 and 65536")),
    }
}
