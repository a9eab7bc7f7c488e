//! What the retrieval nodes share: building a loader (its files, splitter,
//! metadata and omitted keys), a splitter from its sizes, a vector store from
//! its embeddings and search settings, and the inputs Flowise puts on each.

use serde_json::{Map, Value};

use super::{InputSpec, K, input};
use crate::flow::FlowError;
use crate::flow::component::{Component, LoaderSpec, SplitterSpec, VectorStoreSpec};
use crate::flow::node::{Build, Category};
use crate::retrieval::index::SearchType;
use crate::retrieval::load::{self, LoaderKind};
use crate::retrieval::split::{Splitter, SplitterKind};

/// The inputs every loader has besides its own.
pub const LOADER_COMMON: [InputSpec; 3] = [
    input("textSplitter", K::Anchor(Category::TextSplitter)),
    input("metadata", K::Json),
    input("omitMetadataKeys", K::Text),
];

/// A loader reading `file_input`'s files (Flowise's data URLs; none is fine —
/// an upsert may send them).
pub fn file_loader(
    node: &Build<'_>,
    file_input: &str,
    kind: LoaderKind,
) -> Result<Component, FlowError> {
    let text = node.text(file_input);
    let files = match text {
        Some(text) => load::decode_file_input(text)
            .map_err(|e| node.invalid(format_args!("input '{file_input}' {e}")))?,
        None => Vec::new(),
    };
    Ok(Component::Loader(LoaderSpec {
        files,
        needs_upload: text.is_some_and(load::is_flowise_storage),
        ..loader(node, kind)?
    }))
}

/// A loader without files of its own (its text, a web page), with its splitter,
/// metadata and omitted keys.
pub fn loader(node: &Build<'_>, kind: LoaderKind) -> Result<LoaderSpec, FlowError> {
    let metadata: Map<String, Value> = node.json_object("metadata")?;
    let omit_keys = node
        .text("omitMetadataKeys")
        .map(|t| {
            t.split(',')
                .map(|k| k.trim().to_owned())
                .filter(|k| !k.is_empty())
                .collect()
        })
        .unwrap_or_default();
    Ok(LoaderSpec {
        node_id: node.id().to_owned(),
        kind,
        files: Vec::new(),
        splitter: node.splitter("textSplitter")?,
        metadata,
        omit_keys,
        needs_upload: false,
    })
}

/// A splitter node: its kind with `chunkSize` (default 1000; 0 is the default,
/// as in Flowise) and `chunkOverlap` (default 200), checked now so a bad
/// setting is a 400 when the flow is saved.
pub fn splitter(node: &Build<'_>, kind: SplitterKind) -> Result<Component, FlowError> {
    let size = match node.integer("chunkSize")? {
        None | Some(0) => 1000,
        Some(n) => n as usize,
    };
    let overlap = node.integer("chunkOverlap")?.unwrap_or(200) as usize;
    Splitter::new(kind.clone(), size, overlap).map_err(|e| node.invalid(e))?;
    Ok(Component::Splitter(SplitterSpec {
        kind,
        chunk_size: size,
        chunk_overlap: overlap,
    }))
}

/// The inputs of every vector store: its documents, embeddings, and search.
pub const STORE_COMMON: [InputSpec; 8] = [
    input("document", K::Anchors(Category::DocumentLoader)),
    input("embeddings", K::Anchor(Category::Embeddings)),
    input("topK", K::Integer),
    input("searchType", K::Text),
    input("fetchK", K::Integer),
    input("lambda", K::Number),
    input("recordManager", K::Ignored),
    input("fileUpload", K::Boolean),
];

/// Most chunks one search returns.
const MAX_TOP_K: u32 = 100;
/// Most candidates an MMR search weighs.
const MAX_FETCH_K: u32 = 1000;

pub fn vector_store(node: &Build<'_>, node_type: &'static str) -> Result<Component, FlowError> {
    // Bounded: these are overridable, and a search costs about fetchK x topK.
    let top_k = node.count("topK", 4, MAX_TOP_K)? as usize;
    let search = match node.text("searchType").unwrap_or("similarity") {
        "similarity" => SearchType::Similarity,
        "mmr" => {
            let lambda = node.number("lambda")?.unwrap_or(0.5);
            if !(0.0..=1.0).contains(&lambda) {
                return Err(node.invalid("input 'lambda' must be between 0 and 1"));
            }
            SearchType::Mmr {
                fetch_k: node.count("fetchK", 20, MAX_FETCH_K)? as usize,
                lambda: lambda as f32,
            }
        }
        "hybrid" => SearchType::Hybrid,
        other => {
            return Err(node.invalid(format_args!(
                "input 'searchType' is '{other}'; it must be similarity, mmr or hybrid"
            )));
        }
    };
    Ok(Component::VectorStore(VectorStoreSpec {
        node_id: node.id().to_owned(),
        node_type,
        embeddings: node.embeddings("embeddings")?,
        embeddings_node: node
            .references("embeddings")
            .first()
            .map_or_else(String::new, |id| (*id).to_owned()),
        top_k,
        search,
        file_upload: node.boolean("fileUpload")?,
        pgvector: false,
        rerank: None,
        document_store: None,
        fusion: None,
    }))
}

/// A Flowise document store's id in `selectedStore` (the editor writes `<id>`;
/// agentflows `<id>:<name>`).
pub fn selected_store(node: &Build<'_>) -> Result<uuid::Uuid, FlowError> {
    let written = node.text("selectedStore").unwrap_or_default();
    let id = written.split(':').next().unwrap_or_default().trim();
    uuid::Uuid::parse_str(id).map_err(|_| {
        node.invalid(format_args!(
            "input 'selectedStore' is '{written}', not a document store's id"
        ))
    })
}
