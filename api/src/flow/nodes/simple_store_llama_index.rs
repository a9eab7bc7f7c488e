//! `simpleStoreLlamaIndex`: LlamaIndex's SimpleStore, a local vector store for
//! the LlamaIndex engines (`contextChatEngine`). weir keeps the chunks in its
//! own store and index, as for every vector store; `basePath` (where LlamaIndex
//! persists its files) has no effect, and `model` (the LlamaIndex service
//! context's chat model) is the engine's to use, not the store's.

use super::documents::{self, STORE_COMMON};
use super::{K, input};
use crate::flow::FlowError;
use crate::flow::component::Component;
use crate::flow::node::{Build, Category, InputSpec, Node, NodeSpec, concat};

pub struct SimpleStoreLlamaIndex;

const INPUTS: [InputSpec; 10] = concat(
    STORE_COMMON,
    [
        input("basePath", K::Ignored),
        input("model", K::Anchor(Category::ChatModel)),
    ],
);

static SPEC: NodeSpec = NodeSpec {
    name: "simpleStoreLlamaIndex",
    category: Category::VectorStore,
    inputs: &INPUTS,
};

impl Node for SimpleStoreLlamaIndex {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        documents::vector_store(node, SPEC.name)
    }
}
