//! `documentStore`: a chatflow's document loader reading the chunks of a
//! Flowise document store (`selectedStore`, its id) — already split, with their
//! metadata — so a flow's own vector store can be filled from them.

use crate::flow::FlowError;
use crate::flow::component::{Component, LoaderSpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, input, required};
use crate::retrieval::load::LoaderKind;

pub struct DocumentStoreLoader;

static SPEC: NodeSpec = NodeSpec {
    name: "documentStore",
    category: Category::DocumentLoader,
    inputs: &[
        required("selectedStore", K::Text),
        // Flowise's `document` or `text` output; weir's loaders give documents.
        input("output", K::Ignored),
    ],
};

impl Node for DocumentStoreLoader {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let store = super::documents::selected_store(node)?;
        Ok(Component::Loader(LoaderSpec {
            node_id: node.id().to_owned(),
            kind: LoaderKind::DocumentStore { store },
            files: Vec::new(),
            splitter: None,
            metadata: serde_json::Map::new(),
            omit_keys: Vec::new(),
            needs_upload: false,
        }))
    }
}
