//! Flowise's document stores: a named set of document loaders whose documents are
//! split into chunks a person can read and edit, then embedded into a vector
//! store that flows search (`/api/v1/document-store/*`).
//!
//! A store's loaders, its configs (`{name, config}` of the vector store,
//! embeddings and record manager nodes) and the chatflows that use it are kept
//! as JSON beside the row; its chunks are rows of their own, numbered from 1
//! per loader; the files a loader reads are kept apart from its config, which
//! names them as Flowise does (`FILE-STORAGE::["a.pdf"]`). The status moves as
//! Flowise's does: `EMPTY` when made, `SYNC` once every loader is processed,
//! `UPSERTING` while its chunks are embedded, `UPSERTED` after.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::time::Timestamp;

/// Flowise's `DocumentStoreStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum DocumentStoreStatus {
    Empty,
    Sync,
    Syncing,
    Stale,
    New,
    Upserting,
    Upserted,
}

impl DocumentStoreStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Empty => "EMPTY",
            Self::Sync => "SYNC",
            Self::Syncing => "SYNCING",
            Self::Stale => "STALE",
            Self::New => "NEW",
            Self::Upserting => "UPSERTING",
            Self::Upserted => "UPSERTED",
        }
    }

    /// The stored text; an unknown one reads as `STALE` (it needs processing again).
    pub fn parse_stored(text: &str) -> Self {
        serde_json::from_value(Value::from(text)).unwrap_or(Self::Stale)
    }
}

/// A vector store, embeddings or record manager as a store configures it:
/// the node type and its inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentConfig {
    pub name: String,
    #[serde(default)]
    pub config: Map<String, Value>,
}

/// One document loader of a store (Flowise's loader object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentLoader {
    pub id: Uuid,
    /// The loader's node type (`pdfFile`, `textFile`, `plainText` …).
    pub loader_id: String,
    #[serde(default)]
    pub loader_name: String,
    /// The loader node's inputs; uploaded files appear as `FILE-STORAGE::[names]`.
    #[serde(default)]
    pub loader_config: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub splitter_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub splitter_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub splitter_config: Option<Map<String, Value>>,
    #[serde(default)]
    pub total_chunks: u64,
    #[serde(default)]
    pub total_chars: u64,
    pub status: DocumentStoreStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// The files the loader reads: `{id, name, mimePrefix, size, status, uploaded}`.
    #[serde(default)]
    pub files: Vec<LoaderFile>,
    /// What the loader reads, for people: its file names, URL or text's start.
    #[serde(default)]
    pub source: String,
}

/// A file a loader reads, as Flowise lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoaderFile {
    pub id: Uuid,
    pub name: String,
    pub mime_prefix: String,
    pub size: u64,
    pub status: DocumentStoreStatus,
    pub uploaded: Timestamp,
}

/// A document store as kept.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentStore {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub name: String,
    pub description: String,
    pub status: DocumentStoreStatus,
    pub loaders: Vec<DocumentLoader>,
    /// Chatflows that read the store.
    pub where_used: Vec<Uuid>,
    pub vector_store_config: Option<ComponentConfig>,
    pub embedding_config: Option<ComponentConfig>,
    pub record_manager_config: Option<ComponentConfig>,
    pub created_date: Timestamp,
    pub updated_date: Timestamp,
}

impl DocumentStore {
    pub fn loader(&self, id: Uuid) -> Option<&DocumentLoader> {
        self.loaders.iter().find(|l| l.id == id)
    }

    pub fn loader_mut(&mut self, id: Uuid) -> Option<&mut DocumentLoader> {
        self.loaders.iter_mut().find(|l| l.id == id)
    }

    /// Flowise's view of the status: `STALE` while any loader is not processed.
    pub fn shown_status(&self) -> DocumentStoreStatus {
        if self
            .loaders
            .iter()
            .any(|l| l.status != DocumentStoreStatus::Sync)
        {
            DocumentStoreStatus::Stale
        } else {
            self.status
        }
    }
}

/// One chunk of a loader's documents, numbered from 1 within the loader.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentChunk {
    pub id: Uuid,
    pub store_id: Uuid,
    /// The loader the chunk came from (Flowise's `docId`).
    pub loader_id: Uuid,
    pub chunk_no: u64,
    pub page_content: String,
    pub metadata: Map<String, Value>,
}

/// A file kept for a loader.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// What a save does to the store's chunks and files, in the same transaction as
/// its row.
#[derive(Debug, Clone, Default)]
pub enum ChunkChange {
    #[default]
    None,
    /// A loader's chunks become these (processing it).
    Replace {
        loader: Uuid,
        chunks: Vec<DocumentChunk>,
    },
    /// A loader is gone: its chunks and files with it.
    RemoveLoader(Uuid),
    /// One chunk's text and metadata changed.
    Edit(DocumentChunk),
    /// One chunk deleted.
    Remove(Uuid),
}

/// One write of a store: its row, a change to its chunks, and (when set) the
/// files one loader now reads, replacing the ones it read before.
#[derive(Debug, Clone)]
pub struct DocumentStoreWrite {
    pub store: DocumentStore,
    pub chunks: ChunkChange,
    pub files: Option<(Uuid, Vec<StoredFile>)>,
}

/// A page of a store's chunks, with what the whole selection counts.
#[derive(Debug, Clone, Default)]
pub struct ChunkPage {
    pub chunks: Vec<DocumentChunk>,
    pub total: u64,
    pub characters: u64,
}

/// What a chunk's text is found by (`content_key`): the first 16 bytes of its
/// SHA-256, in hex.
pub fn content_key(text: &str) -> String {
    use sha2::Digest;
    super::to_hex(&sha2::Sha256::digest(text.as_bytes())[..16])
}

/// The chunks' owner in the vector tables: a document store's vectors are kept
/// under its id and this node id, beside chatflows' vector store nodes.
pub const VECTOR_NODE: &str = "documentStore";
