//! `googleGenerativeAiEmbeddings`: Gemini's embeddings (`batchEmbedContents`),
//! where the chat node finds its endpoint and key.

use super::{GEMINI, K, endpoint, input};
use crate::flow::FlowError;
use crate::flow::component::{Component, EmbeddingsSpec};
use crate::flow::node::{Build, Category, Node, NodeSpec, endpoint_url, sensitive};

pub struct GoogleGenerativeAiEmbedding;

static SPEC: NodeSpec = NodeSpec {
    name: "googleGenerativeAiEmbeddings",
    category: Category::Embeddings,
    inputs: &[
        input("modelName", K::Text),
        input("taskType", K::Text),
        input("dimensions", K::Integer),
        input("batchSize", K::Integer),
        endpoint_url("baseUrl"),
        sensitive("googleGenerativeAPIKey", K::Text),
        input("stripNewLines", K::Ignored),
    ],
};

/// Gemini's embedding task types.
const TASK_TYPES: [&str; 8] = [
    "TASK_TYPE_UNSPECIFIED",
    "RETRIEVAL_QUERY",
    "RETRIEVAL_DOCUMENT",
    "SEMANTIC_SIMILARITY",
    "CLASSIFICATION",
    "CLUSTERING",
    "QUESTION_ANSWERING",
    "FACT_VERIFICATION",
];

impl Node for GoogleGenerativeAiEmbedding {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let (base, api_key) = endpoint(node, &GEMINI)?;
        let task_type = match node.text("taskType") {
            None => None,
            Some(task) if TASK_TYPES.contains(&task) => Some(task.to_owned()),
            Some(other) => {
                return Err(node.invalid(format_args!("has an unknown 'taskType' {other}")));
            }
        };
        Ok(Component::Embeddings(EmbeddingsSpec::Gemini {
            base,
            api_key,
            model: node
                .text("modelName")
                .unwrap_or("text-embedding-004")
                .to_owned(),
            task_type,
            dimensions: super::open_ai_embeddings::dimensions(node)?,
            // Gemini takes at most 100 texts a request.
            batch_size: node.count("batchSize", 100, 100)? as usize,
        }))
    }
}
