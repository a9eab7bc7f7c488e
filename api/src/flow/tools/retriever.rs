//! Searching a vector store from a run: the [`Retriever`] every retrieval node
//! and the `retrieverTool` go through. The engine keeps nothing: the services
//! floor implements it over the stored chunks (cached indexes, the question
//! embedded with the store's own embeddings).

use async_trait::async_trait;

use super::{FlowContext, ToolOutcome};
use crate::flow::FlowError;
use crate::flow::component::VectorStoreSpec;
use crate::retrieval::Document;

#[async_trait]
pub trait Retriever: Send + Sync {
    /// The best chunks of `flow`'s chatflow's store for `query`, best first (at
    /// most its `topK`); chunks attached to one chat are found only from that chat.
    async fn retrieve(
        &self,
        store: &VectorStoreSpec,
        query: &str,
        flow: &FlowContext,
    ) -> Result<Vec<Document>, FlowError>;

    /// The best chunks of a *document store* for `query`: weir's name for a
    /// chatflow of the workspace that holds one vector store (filled with the
    /// upsert API), searched as that chatflow would (never its per-chat files).
    async fn retrieve_document_store(
        &self,
        chatflow: uuid::Uuid,
        workspace: &str,
        query: &str,
    ) -> Result<Vec<Document>, FlowError>;
}

/// The chunks' texts as the model reads them: separated by a blank line.
pub fn context(documents: &[Document]) -> String {
    documents
        .iter()
        .map(|d| d.page_content.as_str())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// What a retriever tool searches.
pub enum Searched<'a> {
    /// A vector store of the running chatflow.
    Store(&'a VectorStoreSpec),
    /// A document store (another chatflow's vector store) of the workspace.
    DocumentStore {
        chatflow: uuid::Uuid,
        workspace: &'a str,
    },
}

/// A retriever tool's call: the chunks' texts, and the chunks themselves when
/// they join the answer's sources.
pub async fn search(
    retriever: &dyn Retriever,
    searched: Searched<'_>,
    query: &str,
    flow: &FlowContext,
    return_sources: bool,
) -> ToolOutcome {
    if query.trim().is_empty() {
        return ToolOutcome::error("the search needs an 'input' text");
    }
    let found = match searched {
        Searched::Store(store) => retriever.retrieve(store, query, flow).await,
        Searched::DocumentStore {
            chatflow,
            workspace,
        } => {
            retriever
                .retrieve_document_store(chatflow, workspace, query)
                .await
        }
    };
    match found {
        Ok(documents) => ToolOutcome {
            output: if documents.is_empty() {
                "No documents found.".to_owned()
            } else {
                context(&documents)
            },
            sources: if return_sources {
                documents
            } else {
                Vec::new()
            },
            ..ToolOutcome::default()
        },
        Err(e) => ToolOutcome::error(e.message),
    }
}
