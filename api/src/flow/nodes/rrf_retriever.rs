//! `RRFRetriever`: Flowise's reciprocal-rank-fusion retriever around a vector
//! store — a model writes `queryCount` other versions of the question, the
//! question and each version are searched, and the lists are fused by
//! reciprocal rank (`c`, default 60), keeping `topK`. Taken wherever a vector
//! store's retriever is (retrieval chains, `retrieverTool`).

use crate::flow::FlowError;
use crate::flow::component::{Component, FusionSpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};

pub struct RrfRetriever;

/// Versions of the question a model writes at most.
const MAX_QUERIES: u32 = 10;
/// Chunks kept at most.
const MAX_TOP_K: u32 = 100;

static SPEC: NodeSpec = NodeSpec {
    name: "RRFRetriever",
    category: Category::Retriever,
    inputs: &[
        required("vectorStore", K::Anchor(Category::VectorStore)),
        required("model", K::Anchor(Category::ChatModel)),
        input("queryCount", K::Integer),
        input("topK", K::Integer),
        input("c", K::Number),
    ],
};

impl Node for RrfRetriever {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let mut store = node.vector_store("vectorStore")?;
        if store.rerank.is_some() || store.fusion.is_some() {
            return Err(node
                .invalid("cannot fuse what a reranker or another RRF retriever already reorders"));
        }
        let c = node.number("c")?.unwrap_or(60.0);
        if !(c.is_finite() && c >= 0.0) {
            return Err(node.invalid("input 'c' must be a number of 0 or more"));
        }
        let top_k = match node.integer("topK")? {
            None | Some(0) => None,
            Some(n) => Some(n.min(u64::from(MAX_TOP_K)) as usize),
        };
        store.fusion = Some(Box::new(FusionSpec {
            model: node.required_model("model")?,
            query_count: node.count("queryCount", 4, MAX_QUERIES)? as usize,
            top_k,
            c,
        }));
        Ok(Component::VectorStore(store))
    }
}
