//! `faiss`: Flowise's FAISS store. weir keeps the chunks in its own store and index (no FAISS library); `basePath` (where Flowise writes its index files) has no effect.

use super::documents::{self, STORE_COMMON};
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, concat};

pub struct Faiss;

const INPUTS: [InputSpec; 9] = concat(STORE_COMMON, [input("basePath", K::Ignored)]);

static SPEC: NodeSpec = NodeSpec {
    name: "faiss",
    category: Category::VectorStore,
    inputs: &INPUTS,
};

impl Node for Faiss {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        documents::vector_store(node, SPEC.name)
    }
}
