//! `localEmbeddings` (weir's own): the embedded all-MiniLM-L6-v2 — 384
//! dimensions, no key, no network. `scripts/fetch-models` puts it in place.

use crate::flow::FlowError;
use crate::flow::component::{Component, EmbeddingsSpec};
use crate::flow::node::{Build, Category, Node, NodeSpec};

pub struct LocalEmbeddings;

static SPEC: NodeSpec = NodeSpec {
    name: "localEmbeddings",
    category: Category::Embeddings,
    inputs: &[],
};

impl Node for LocalEmbeddings {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, _node: &Build<'_>) -> Result<Component, FlowError> {
        Ok(Component::Embeddings(EmbeddingsSpec::Local))
    }
}
