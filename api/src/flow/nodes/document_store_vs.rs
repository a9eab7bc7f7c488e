//! `documentStoreVS`: a Flowise document store as a flow's vector store
//! (`selectedStore`, the store's id), searched with the store's own vector
//! store and embeddings settings, which are read when it is searched. It is
//! filled through `/api/v1/document-store`, never by a chatflow's upsert.

use crate::flow::FlowError;
use crate::flow::component::{Component, VectorStoreSpec};
use crate::flow::node::{Build, Category, InputKind as K, Node, NodeSpec, required};
use crate::retrieval::embed::EmbeddingsSpec;
use crate::retrieval::index::SearchType;

pub struct DocumentStoreVs;

static SPEC: NodeSpec = NodeSpec {
    name: "documentStoreVS",
    category: Category::VectorStore,
    inputs: &[required("selectedStore", K::Text)],
};

impl Node for DocumentStoreVs {
    fn spec(&self) -> &'static NodeSpec {
        &SPEC
    }

    fn build(&self, node: &Build<'_>) -> Result<Component, FlowError> {
        let store = super::documents::selected_store(node)?;
        Ok(Component::VectorStore(VectorStoreSpec {
            node_id: node.id().to_owned(),
            node_type: SPEC.name,
            // The store's own embeddings are used; this is never called.
            embeddings: EmbeddingsSpec::Local,
            embeddings_node: String::new(),
            top_k: 4,
            search: SearchType::Similarity,
            file_upload: false,
            pgvector: false,
            rerank: None,
            document_store: Some(store),
            fusion: None,
        }))
    }
}
