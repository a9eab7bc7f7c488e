//! `memoryVectorStore`: Flowise's in-memory store. In weir its chunks persist in weir's store like every vector store's (Flowise loses them on restart).

use super::documents::{self, STORE_COMMON};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, Node, NodeSpec};

pub struct MemoryVectorStore;

static SPEC: NodeSpec = NodeSpec {
    name: "memoryVectorStore",
    category: Category::VectorStore,
    inputs: &STORE_COMMON,
};

impl Node for MemoryVectorStore {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        documents::vector_store(node, SPEC.name)
    }
}
