//! Retrieval: documents in, sources out. The parts of the engine that turn
//! files and text into searchable chunks and find the chunks a question needs:
//!
//! - [`load`]: loaders — bytes of a file (or a node's text) → [`Document`]s.
//! - [`split`]: text splitters — documents → chunks, with `metadata.loc.lines`,
//!   boundaries identical to LangChain's for the same settings.
//! - [`embed`]: embedding models — the embedded all-MiniLM-L6-v2 and the
//!   OpenAI-compatible and Ollama providers — behind one [`embed::Embedder`].
//! - [`index`]: one vector store's chunks in memory, searched by similarity,
//!   MMR or weir's hybrid (BM25 fused with vectors by reciprocal rank).
//! - [`rerank`]: rerank services (Cohere's wire, Jina, Voyage) reordering what
//!   a search found.
//!
//! Nothing here touches the store: the services floor loads chunks into an
//! index and persists what an upsert adds or removes.

pub mod embed;
pub mod index;
pub mod load;
pub mod rerank;
pub mod split;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A piece of text and what is known of where it came from — what loaders
/// produce, splitters cut, stores keep and answers cite (`sourceDocuments`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Document {
    pub page_content: String,
    #[serde(default)]
    pub metadata: Map<String, Value>,
}

impl Document {
    pub fn new(page_content: impl Into<String>, metadata: Map<String, Value>) -> Self {
        Document {
            page_content: page_content.into(),
            metadata,
        }
    }
}
