//! Flowise's document stores on weir's retrieval engine: what
//! `/api/v1/document-store/*` does between the edge and the store.
//!
//! A store's loaders, splitter and vector store are the same nodes a chatflow
//! holds, built from the store's configs as a small graph (`StoreGraph`), so a
//! store takes exactly the inputs those nodes take and their checks with them.
//! Processing a loader reads and splits its documents into chunks kept with the
//! store (numbered from 1, editable); inserting embeds the chunks into the
//! store's vectors (kept under the store's id) through the upsert path of
//! chatflows, so a chunk already embedded — same embeddings, text and metadata
//! (`docId`, the loader, added as Flowise does) — is never embedded again, and
//! the vectors end equal to the chunks: those of chunks no longer there are
//! deleted in the same write. An insert runs as a job of its own: the request
//! waits for it at most the edge's body timeout, then answers that it goes on,
//! and the store's status (`UPSERTING`, then `UPSERTED`) tells the rest.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::vectors::{self, Cleanup, UpsertAnswer, Written};
use super::{ServiceError, ServiceResult, Services};
use crate::domain::document_store::VECTOR_NODE;
use crate::domain::time;
use crate::domain::{
    ChunkChange, ChunkPage, ComponentConfig, DocumentChunk, DocumentLoader, DocumentStore,
    DocumentStoreStatus, DocumentStoreWrite, LoaderFile, StoredFile, VectorWrite,
};
use crate::flow::FlowError;
use crate::flow::component::{LoaderSpec, VectorStoreSpec};
use crate::flow::plan::{StoreGraph, StoreParts};
use crate::flow::tools::FlowContext;
use crate::retrieval::Document;
use crate::retrieval::load::{self, FileData, LoaderKind};

/// Chunks in one page of `GET /chunks/:store/:file/:page` (Flowise's size).
pub const CHUNKS_PER_PAGE: u64 = 50;

/// Pages a web loader reads in a preview (Flowise's limit).
const PREVIEW_PAGES: usize = 3;

/// A loader as preview, save and process requests send it.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoaderRequest {
    pub store_id: Option<Uuid>,
    /// The loader's id (a new one is made when absent).
    pub id: Option<Uuid>,
    /// The loader's node type (`pdfFile`, `textFile`, `plainText` …).
    pub loader_id: Option<String>,
    pub loader_name: Option<String>,
    /// The loader node's inputs; files as Flowise's data URLs.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub loader_config: Map<String, Value>,
    /// The splitter's node type, e.g. `recursiveCharacterTextSplitter`.
    pub splitter_id: Option<String>,
    pub splitter_name: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub splitter_config: Option<Map<String, Value>>,
    /// A credential of the workspace the loader reads with.
    pub credential: Option<String>,
}

/// The vector store, embeddings and record manager a store is saved with.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VectorConfigRequest {
    pub store_id: Option<Uuid>,
    pub embedding_name: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub embedding_config: Option<Value>,
    pub vector_store_name: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub vector_store_config: Option<Value>,
    pub record_manager_name: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub record_manager_config: Option<Value>,
    /// With `insert`: only this loader's chunks.
    pub doc_id: Option<Uuid>,
    /// With `insert`: configs not sent are cleared (as `save` always does).
    #[serde(default)]
    pub is_strict_save: bool,
}

/// What an insert answered: its result, or that it goes on as a job.
pub enum Inserted {
    Done(UpsertAnswer),
    Running,
}

/// A chunk found by a query, with the chunk it came from.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FoundChunk {
    pub page_content: String,
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    /// The stored chunk's id (a fresh id when the chunk has changed since it was embedded).
    pub id: Uuid,
    /// Its number within its loader; -1 when the chunk has changed since.
    pub chunk_no: i64,
    /// The search's score (cosine similarity, the fused rank of `hybrid`, or
    /// a reranker's relevance): weir's addition.
    pub score: f32,
}

/// A query's answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueryAnswer {
    /// Milliseconds the search took.
    pub time_taken: u64,
    pub docs: Vec<FoundChunk>,
}

/// What `POST /upsert/:id` sends beside its files.
#[derive(Debug, Clone, Default)]
pub struct UpsertApiRequest {
    pub doc_id: Option<Uuid>,
    pub metadata: Option<Map<String, Value>>,
    pub replace_existing: bool,
    pub create_new_doc_store: bool,
    pub doc_store_name: Option<String>,
    pub doc_store_description: Option<String>,
    pub loader: Option<ComponentConfig>,
    pub splitter: Option<ComponentConfig>,
    pub vector_store: Option<ComponentConfig>,
    pub embedding: Option<ComponentConfig>,
    pub record_manager: Option<ComponentConfig>,
    pub files: Vec<FileData>,
}

/// A new, empty store (`EMPTY`).
pub fn new_store(workspace: Uuid, name: String, description: String) -> DocumentStore {
    let now = time::now();
    DocumentStore {
        id: Uuid::new_v4(),
        workspace_id: workspace,
        name,
        description,
        status: DocumentStoreStatus::Empty,
        loaders: Vec::new(),
        where_used: Vec::new(),
        vector_store_config: None,
        embedding_config: None,
        record_manager_config: None,
        created_date: now,
        updated_date: now,
    }
}

/// A config as Flowise sends it: an object, its JSON text, or nothing
/// (`null`, `""`, `{}` as text).
pub fn read_config(name: &str, value: Option<Value>) -> ServiceResult<Option<Value>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(Value::String(text)) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| ServiceError::Invalid(format!("'{name}' is not JSON: {e}"))),
        Some(other) => Ok(Some(other)),
    }
}

/// A `{name, config}` (or its JSON text), or nothing.
pub fn read_component(field: &str, value: Option<Value>) -> ServiceResult<Option<ComponentConfig>> {
    match read_config(field, value)? {
        None => Ok(None),
        Some(v) => serde_json::from_value(v)
            .map(Some)
            .map_err(|e| ServiceError::Invalid(format!("'{field}' must be {{name, config}}: {e}"))),
    }
}

/// A JSON object (or its JSON text), or nothing.
pub fn read_object(field: &str, value: Option<Value>) -> ServiceResult<Option<Map<String, Value>>> {
    match read_config(field, value)? {
        None => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(ServiceError::Invalid(format!(
            "'{field}' must be an object"
        ))),
    }
}

/// A `{name, config}` config, or a bare node type beside its inputs.
fn component(
    field: &str,
    name: Option<String>,
    config: Option<Value>,
) -> ServiceResult<Option<ComponentConfig>> {
    let config = read_config(field, config)?;
    let inputs = match config {
        None => Map::new(),
        // Flowise's saved `{name, config}` sent back as it was read.
        Some(Value::Object(mut o)) if o.contains_key("config") && o.contains_key("name") => {
            let name = name.or_else(|| o.get("name").and_then(Value::as_str).map(str::to_owned));
            let inputs = match o.remove("config") {
                Some(Value::Object(inputs)) => inputs,
                _ => Map::new(),
            };
            return Ok(name.filter(|n| !n.is_empty()).map(|name| ComponentConfig {
                name,
                config: inputs,
            }));
        }
        Some(Value::Object(o)) => o,
        Some(_) => {
            return Err(ServiceError::Invalid(format!(
                "'{field}' must be an object"
            )));
        }
    };
    Ok(name
        .filter(|n| !n.trim().is_empty())
        .map(|name| ComponentConfig {
            name,
            config: inputs,
        }))
}

async fn get(state: &Services, workspace: Uuid, id: Uuid) -> ServiceResult<DocumentStore> {
    state
        .store
        .get_document_store(workspace, id)
        .await?
        .ok_or(ServiceError::NotFound("document store"))
}

async fn save(state: &Services, write: DocumentStoreWrite) -> ServiceResult<()> {
    if state.store.save_document_store(write).await? {
        Ok(())
    } else {
        Err(ServiceError::NotFound("document store"))
    }
}

/// Writes the store's row alone.
async fn save_row(state: &Services, mut store: DocumentStore) -> ServiceResult<DocumentStore> {
    store.updated_date = time::now();
    save(
        state,
        DocumentStoreWrite {
            store: store.clone(),
            chunks: ChunkChange::None,
            files: None,
        },
    )
    .await?;
    Ok(store)
}

/// The loader a request describes, over the stored one of the same id.
fn loader_of(
    request: &LoaderRequest,
    stored: Option<&DocumentLoader>,
) -> ServiceResult<DocumentLoader> {
    let loader_id = request
        .loader_id
        .clone()
        .filter(|l| !l.trim().is_empty())
        .or_else(|| stored.map(|l| l.loader_id.clone()))
        .ok_or(ServiceError::Missing("loaderId"))?;
    if loader_id == "documentStore"
        || crate::flow::registry::spec(&loader_id)
            .is_none_or(|s| s.category != crate::flow::node::Category::DocumentLoader)
    {
        return Err(ServiceError::Invalid(format!(
            "'{loader_id}' is not a document loader weir runs (see docs/nodes.md)"
        )));
    }
    let splitter_id = request.splitter_id.clone().filter(|s| !s.trim().is_empty());
    Ok(DocumentLoader {
        id: request
            .id
            .or(stored.map(|l| l.id))
            .unwrap_or_else(Uuid::new_v4),
        loader_name: request
            .loader_name
            .clone()
            .unwrap_or_else(|| loader_id.clone()),
        loader_id,
        loader_config: request.loader_config.clone(),
        splitter_name: splitter_id
            .as_ref()
            .map(|s| request.splitter_name.clone().unwrap_or_else(|| s.clone())),
        splitter_config: splitter_id
            .as_ref()
            .map(|_| request.splitter_config.clone().unwrap_or_default()),
        splitter_id,
        total_chunks: 0,
        total_chars: 0,
        status: DocumentStoreStatus::Syncing,
        credential: request.credential.clone().filter(|c| !c.is_empty()),
        files: stored.map(|l| l.files.clone()).unwrap_or_default(),
        source: String::new(),
    })
}

/// Takes the files written into a loader's inputs (Flowise's data URLs) out of
/// them, leaving Flowise's reference to kept files in their place.
fn take_files(loader: &mut DocumentLoader) -> ServiceResult<Option<Vec<FileData>>> {
    let mut taken = Vec::new();
    for (name, value) in loader.loader_config.iter_mut() {
        let Some(text) = value.as_str() else {
            continue;
        };
        let text = text.trim();
        let holds_files =
            text.starts_with("data:") || (text.starts_with('[') && text.contains("\"data:"));
        if !holds_files {
            continue;
        }
        let files = load::decode_file_input(text)
            .map_err(|e| ServiceError::Invalid(format!("input '{name}' {e}")))?;
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        *value = Value::from(format!(
            "FILE-STORAGE::{}",
            serde_json::to_string(&names).unwrap_or_default()
        ));
        taken.extend(files);
    }
    Ok((!taken.is_empty()).then_some(taken))
}

/// What a loader reads, for people: its files, its URL, or its text's start.
fn source_of(loader: &DocumentLoader) -> String {
    if !loader.files.is_empty() {
        return loader
            .files
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
    }
    for key in ["url", "text"] {
        if let Some(text) = loader.loader_config.get(key).and_then(Value::as_str) {
            return text.chars().take(100).collect();
        }
    }
    String::new()
}

fn listed(files: &[FileData]) -> Vec<LoaderFile> {
    let now = time::now();
    files
        .iter()
        .map(|f| LoaderFile {
            id: Uuid::new_v4(),
            name: f.name.clone(),
            mime_prefix: mime_prefix(&f.name).to_owned(),
            size: f.bytes.len() as u64,
            status: DocumentStoreStatus::Syncing,
            uploaded: now,
        })
        .collect()
}

fn mime_prefix(name: &str) -> &'static str {
    match load::extension(name).as_str() {
        "pdf" | "docx" | "json" | "jsonl" => "application",
        _ => "text",
    }
}

/// Builds a store's graph and its parts, flow errors as 400s naming the store.
async fn parts(
    state: &Services,
    store: &DocumentStore,
    loaders: &[&DocumentLoader],
    with_vector_store: bool,
    values: Option<&Map<String, Value>>,
) -> ServiceResult<StoreParts> {
    let graph = StoreGraph::of_store(store, loaders, with_vector_store).map_err(invalid)?;
    vectors::build_store_parts(
        &*state.store,
        &state.keyring,
        &state.config.providers,
        store.workspace_id,
        &graph,
        values,
    )
    .await
    .map_err(|e| match e {
        ServiceError::Flow(e) => invalid(e),
        other => other,
    })
}

fn invalid(e: FlowError) -> ServiceError {
    ServiceError::Invalid(e.message)
}

/// A loader's documents, split: its files are `files`, or the ones kept for it.
async fn load_loader(
    state: &Services,
    store: &DocumentStore,
    loader: &DocumentLoader,
    files: Option<Vec<FileData>>,
    max_pages: Option<usize>,
) -> ServiceResult<Vec<Document>> {
    let built = parts(state, store, &[loader], false, None).await?;
    let mut spec: LoaderSpec = built
        .loaders
        .into_iter()
        .next()
        .ok_or_else(|| ServiceError::Internal("a store's graph built no loader".into()))?;
    if spec.needs_upload {
        let files = match files {
            Some(files) => files,
            None => state
                .store
                .loader_files(store.id, loader.id)
                .await?
                .into_iter()
                .map(|f| FileData {
                    name: f.name,
                    bytes: f.bytes.into(),
                })
                .collect(),
        };
        if files.is_empty() {
            return Err(ServiceError::Invalid(format!(
                "loader {} ({}) names files that were never uploaded to weir; send them \
                 (as data URLs in its config, or to POST /api/v1/document-store/upsert/:id)",
                loader.id, loader.loader_id
            )));
        }
        spec.files = files;
        spec.needs_upload = false;
    }
    if let LoaderKind::Web { url, crawl, .. } = &spec.kind {
        let crawl = match max_pages {
            Some(most) => Some(crawl.unwrap_or(1).min(most)),
            None => *crawl,
        };
        spec.files = vectors::fetch_pages(state, &spec.node_id, url, crawl).await?;
    }
    vectors::load_documents(&spec).await
}

/// `POST /loader/preview`: a loader's first chunks (all for `count` -1) and
/// how many it makes, nothing kept.
pub async fn preview(
    state: &Services,
    workspace: Uuid,
    request: &LoaderRequest,
) -> ServiceResult<(Vec<Document>, usize)> {
    let store = match request.store_id {
        Some(id) => get(state, workspace, id).await?,
        None => new_store(workspace, String::new(), String::new()),
    };
    let stored = request.id.and_then(|id| store.loader(id));
    let loader = loader_of(request, stored)?;
    let documents = load_loader(state, &store, &loader, None, Some(PREVIEW_PAGES)).await?;
    let total = documents.len();
    Ok((documents, total))
}

/// `POST /loader/save`: keeps a loader's config and files, not yet processed.
pub async fn save_loader(
    state: &Services,
    workspace: Uuid,
    request: &LoaderRequest,
) -> ServiceResult<DocumentLoader> {
    let store_id = request.store_id.ok_or(ServiceError::Missing("storeId"))?;
    let mut store = get(state, workspace, store_id).await?;
    let stored = request.id.and_then(|id| store.loader(id)).cloned();
    let mut loader = loader_of(request, stored.as_ref())?;
    let files = take_files(&mut loader)?;
    if let Some(files) = &files {
        loader.files = listed(files);
    }
    loader.source = source_of(&loader);
    if let Some(stored) = &stored {
        loader.total_chunks = stored.total_chunks;
        loader.total_chars = stored.total_chars;
    }
    match store.loader_mut(loader.id) {
        Some(slot) => *slot = loader.clone(),
        None => store.loaders.push(loader.clone()),
    }
    store.updated_date = time::now();
    let files = files.map(|files| {
        (
            loader.id,
            files
                .into_iter()
                .map(|f| StoredFile {
                    name: f.name,
                    bytes: f.bytes.to_vec(),
                })
                .collect(),
        )
    });
    save(
        state,
        DocumentStoreWrite {
            store,
            chunks: ChunkChange::None,
            files,
        },
    )
    .await?;
    Ok(loader)
}

/// `POST /loader/process/:loader`: saves the loader when the request describes
/// it, then reads and splits its documents into the store's chunks (replacing
/// the loader's earlier ones). Answers the store and the loader's first page.
pub async fn process_loader(
    state: &Services,
    workspace: Uuid,
    loader_id: Uuid,
    request: &LoaderRequest,
) -> ServiceResult<(DocumentStore, ChunkPage)> {
    let store_id = request.store_id.ok_or(ServiceError::Missing("storeId"))?;
    if request.loader_id.is_some() {
        let request = LoaderRequest {
            id: Some(loader_id),
            ..request.clone()
        };
        save_loader(state, workspace, &request).await?;
    }
    let store = process(state, workspace, store_id, loader_id).await?;
    let page = state
        .store
        .document_chunks(store.id, Some(loader_id), Some((0, CHUNKS_PER_PAGE)))
        .await?;
    Ok((store, page))
}

/// Reads and splits one saved loader into the store's chunks.
async fn process(
    state: &Services,
    workspace: Uuid,
    store_id: Uuid,
    loader_id: Uuid,
) -> ServiceResult<DocumentStore> {
    let store = get(state, workspace, store_id).await?;
    let loader = store
        .loader(loader_id)
        .ok_or(ServiceError::NotFound("loader"))?
        .clone();
    let documents = load_loader(state, &store, &loader, None, None).await?;
    // Read again: the loading took time, and the row is written whole.
    let mut store = get(state, workspace, store_id).await?;
    let chunks: Vec<DocumentChunk> = documents
        .into_iter()
        .enumerate()
        .map(|(i, d)| DocumentChunk {
            id: Uuid::new_v4(),
            store_id,
            loader_id,
            chunk_no: i as u64 + 1,
            page_content: d.page_content,
            metadata: d.metadata,
        })
        .collect();
    let Some(slot) = store.loader_mut(loader_id) else {
        return Err(ServiceError::NotFound("loader"));
    };
    slot.total_chunks = chunks.len() as u64;
    slot.total_chars = chunks
        .iter()
        .map(|c| c.page_content.chars().count() as u64)
        .sum();
    slot.status = DocumentStoreStatus::Sync;
    for file in &mut slot.files {
        file.status = DocumentStoreStatus::Sync;
    }
    // An insert running goes on; its end sets the status.
    if store.status != DocumentStoreStatus::Upserting
        && store
            .loaders
            .iter()
            .all(|l| l.status == DocumentStoreStatus::Sync)
    {
        store.status = DocumentStoreStatus::Sync;
    }
    store.updated_date = time::now();
    save(
        state,
        DocumentStoreWrite {
            store: store.clone(),
            chunks: ChunkChange::Replace {
                loader: loader_id,
                chunks,
            },
            files: None,
        },
    )
    .await?;
    Ok(store)
}

/// `DELETE /loader/:store/:loader`: the loader with its chunks, files and vectors.
pub async fn delete_loader(
    state: &Services,
    workspace: Uuid,
    store_id: Uuid,
    loader_id: Uuid,
) -> ServiceResult<DocumentStore> {
    let mut store = get(state, workspace, store_id).await?;
    if store.loader(loader_id).is_none() {
        return Err(ServiceError::NotFound("loader"));
    }
    store.loaders.retain(|l| l.id != loader_id);
    store.updated_date = time::now();
    save(
        state,
        DocumentStoreWrite {
            store: store.clone(),
            chunks: ChunkChange::RemoveLoader(loader_id),
            files: None,
        },
    )
    .await?;
    drop_vectors(state, store_id, Some(loader_id)).await?;
    Ok(store)
}

/// Changes one chunk (`Some` text and metadata) or deletes it (`None`). In a
/// store whose chunks are embedded the vectors follow first — the new text
/// embedded, the old vector gone — so a failed embedding changes nothing.
pub async fn change_chunk(
    state: &Services,
    workspace: Uuid,
    store_id: Uuid,
    loader_id: Uuid,
    chunk_id: Uuid,
    edit: Option<(String, Map<String, Value>)>,
) -> ServiceResult<()> {
    let mut store = get(state, workspace, store_id).await?;
    if store.loader(loader_id).is_none() {
        return Err(ServiceError::NotFound("loader"));
    }
    let mut chunks = state
        .store
        .document_chunks(store_id, Some(loader_id), None)
        .await?
        .chunks;
    let at = chunks
        .iter()
        .position(|c| c.id == chunk_id)
        .ok_or(ServiceError::NotFound("chunk"))?;
    let change = match edit {
        Some((text, metadata)) => {
            if text.trim().is_empty() {
                return Err(ServiceError::Invalid(
                    "'pageContent' must not be empty (delete the chunk instead)".into(),
                ));
            }
            chunks[at].page_content = text;
            chunks[at].metadata = metadata;
            ChunkChange::Edit(chunks[at].clone())
        }
        None => {
            chunks.remove(at);
            ChunkChange::Remove(chunk_id)
        }
    };
    if store.status == DocumentStoreStatus::Upserted {
        embed(state, &store, Some(loader_id), &chunks).await?;
    }
    if let Some(slot) = store.loader_mut(loader_id) {
        slot.total_chunks = chunks.len() as u64;
        slot.total_chars = chunks
            .iter()
            .map(|c| c.page_content.chars().count() as u64)
            .sum();
    }
    store.updated_date = time::now();
    save(
        state,
        DocumentStoreWrite {
            store,
            chunks: change,
            files: None,
        },
    )
    .await
}

/// Sets a store's vector store, embeddings and record manager: those the
/// request names (all of them, the others cleared, when `strict`), checked by
/// building them. The status becomes `SYNC` unless the store is `UPSERTED`.
pub async fn save_vector_config(
    state: &Services,
    workspace: Uuid,
    request: VectorConfigRequest,
    strict: bool,
) -> ServiceResult<DocumentStore> {
    let store_id = request.store_id.ok_or(ServiceError::Missing("storeId"))?;
    let store = get(state, workspace, store_id).await?;
    configure(state, store, request, strict).await
}

/// Sets the configs `request` sends on `store` (see [`save_vector_config`]).
async fn configure(
    state: &Services,
    mut store: DocumentStore,
    request: VectorConfigRequest,
    strict: bool,
) -> ServiceResult<DocumentStore> {
    let sent = [
        (
            &mut store.embedding_config,
            component(
                "embeddingConfig",
                request.embedding_name,
                request.embedding_config,
            )?,
        ),
        (
            &mut store.vector_store_config,
            component(
                "vectorStoreConfig",
                request.vector_store_name,
                request.vector_store_config,
            )?,
        ),
        (
            &mut store.record_manager_config,
            component(
                "recordManagerConfig",
                request.record_manager_name,
                request.record_manager_config,
            )?,
        ),
    ];
    for (slot, config) in sent {
        if strict || config.is_some() {
            *slot = config;
        }
    }
    if store
        .vector_store_config
        .as_ref()
        .is_some_and(|c| c.name == "documentStoreVS")
    {
        return Err(ServiceError::Invalid(
            "a document store's vector store cannot be another document store".into(),
        ));
    }
    if store.vector_store_config.is_some() != store.embedding_config.is_some() {
        return Err(ServiceError::Invalid(
            "a document store needs both a vector store and an embeddings model, or neither".into(),
        ));
    }
    if store.vector_store_config.is_some() {
        vector_store(state, &store, None).await?;
    }
    // An insert running keeps its status; its end sets the next one.
    if !matches!(
        store.status,
        DocumentStoreStatus::Upserted | DocumentStoreStatus::Upserting
    ) {
        store.status = DocumentStoreStatus::Sync;
    }
    save_row(state, store).await
}

/// `POST /vectorstore/insert`: saves the configs the request sends, then
/// embeds the store's chunks (of `docId`, or all) as a job the request waits
/// for at most the edge's body timeout.
pub async fn insert(
    state: &Services,
    workspace: Uuid,
    request: VectorConfigRequest,
) -> ServiceResult<Inserted> {
    let doc_id = request.doc_id;
    let strict = request.is_strict_save;
    let store_id = request.store_id.ok_or(ServiceError::Missing("storeId"))?;
    let store = get(state, workspace, store_id).await?;
    refuse_while_upserting(&store)?;
    let store = configure(state, store, request, strict).await?;
    start_insert(state, store, doc_id).await
}

/// A 409 while the store's chunks are being inserted.
fn refuse_while_upserting(store: &DocumentStore) -> ServiceResult<()> {
    if store.status == DocumentStoreStatus::Upserting {
        return Err(ServiceError::Conflict(
            "the document store's chunks are being inserted; wait for its status to leave \
             UPSERTING"
                .into(),
        ));
    }
    Ok(())
}

async fn start_insert(
    state: &Services,
    mut store: DocumentStore,
    doc_id: Option<Uuid>,
) -> ServiceResult<Inserted> {
    if store.vector_store_config.is_none() {
        return Err(ServiceError::Invalid(
            "the document store has no vector store and embeddings configured; save them first \
             (POST /api/v1/document-store/vectorstore/save)"
                .into(),
        ));
    }
    refuse_while_upserting(&store)?;
    if let Some(doc) = doc_id
        && store.loader(doc).is_none()
    {
        return Err(ServiceError::NotFound("loader"));
    }
    let before = store.status;
    store.status = DocumentStoreStatus::Upserting;
    let store = save_row(state, store).await?;
    let job_state = state.clone();
    let job = tokio::spawn(async move {
        let state = job_state;
        let outcome = insert_chunks(&state, &store, doc_id).await;
        let status = match &outcome {
            Ok(_) => DocumentStoreStatus::Upserted,
            Err(e) => {
                tracing::info!(store = %store.id, error = %e, "a document store's insert failed");
                before
            }
        };
        // The status alone: whatever was changed in the store meanwhile stays.
        if let Err(e) = state
            .store
            .set_document_store_status(store.id, status)
            .await
        {
            tracing::error!(store = %store.id, error = %e, "cannot record an insert's end");
        }
        outcome
    });
    let wait = Duration::from_secs(state.config.body_timeout_secs);
    match tokio::time::timeout(wait, job).await {
        Ok(Ok(outcome)) => outcome.map(Inserted::Done),
        Ok(Err(e)) => Err(ServiceError::Internal(format!(
            "the insert job failed: {e}"
        ))),
        Err(_) => Ok(Inserted::Running),
    }
}

/// Embeds the chunks into the store's vectors (those of `loader`, or all).
async fn insert_chunks(
    state: &Services,
    store: &DocumentStore,
    loader: Option<Uuid>,
) -> ServiceResult<UpsertAnswer> {
    let chunks = state
        .store
        .document_chunks(store.id, loader, None)
        .await?
        .chunks;
    embed(state, store, loader, &chunks).await
}

/// Makes the store's vectors (of `loader`, or all) those of `chunks`.
async fn embed(
    state: &Services,
    store: &DocumentStore,
    loader: Option<Uuid>,
    chunks: &[DocumentChunk],
) -> ServiceResult<UpsertAnswer> {
    if chunks.is_empty() {
        let num_deleted = drop_vectors(state, store.id, loader).await?;
        return Ok(UpsertAnswer {
            counts: crate::domain::UpsertCounts {
                num_deleted,
                ..Default::default()
            },
            added_docs: Vec::new(),
        });
    }
    let vector_store = vector_store(state, store, None).await?;
    let documents = chunks
        .iter()
        .map(|c| {
            let mut metadata = c.metadata.clone();
            metadata.insert("docId".into(), Value::from(c.loader_id.to_string()));
            Document::new(c.page_content.clone(), metadata)
        })
        .collect();
    let written = Written {
        owner: store.id,
        cleanup: if loader.is_some() {
            Cleanup::Incremental
        } else {
            Cleanup::Full
        },
        chat_id: None,
        group_key: "docId",
    };
    vectors::store_documents(state, &vector_store, documents, written).await
}

/// The store's vector store, built (with `values` over its inputs).
async fn vector_store(
    state: &Services,
    store: &DocumentStore,
    values: Option<&Map<String, Value>>,
) -> ServiceResult<VectorStoreSpec> {
    state
        .search
        .store_vector_spec(store, values)
        .await
        .map_err(|e| match e {
            ServiceError::Flow(e) => invalid(e),
            other => other,
        })
}

/// Deletes the store's vectors (of one loader, or all); how many went.
async fn drop_vectors(state: &Services, store: Uuid, loader: Option<Uuid>) -> ServiceResult<u64> {
    let keys = state.store.vector_chunk_keys(store, VECTOR_NODE).await?;
    let loader = loader.map(|l| l.to_string());
    let deleted: Vec<Uuid> = keys
        .iter()
        .filter(|k| loader.is_none() || k.source == loader)
        .map(|k| k.id)
        .collect();
    if deleted.is_empty() {
        return Ok(0);
    }
    let counts = crate::domain::UpsertCounts {
        num_deleted: deleted.len() as u64,
        ..Default::default()
    };
    state
        .store
        .write_vectors(VectorWrite {
            chatflow_id: store,
            node_id: VECTOR_NODE.to_owned(),
            added: Vec::new(),
            deleted,
            counts,
        })
        .await?;
    state.indexes.forget(store, VECTOR_NODE);
    Ok(counts.num_deleted)
}

/// `DELETE /vectorstore/:store`: the store's vectors (of `docId`, or all).
pub async fn delete_vectors(
    state: &Services,
    workspace: Uuid,
    store_id: Uuid,
    loader: Option<Uuid>,
) -> ServiceResult<u64> {
    let mut store = get(state, workspace, store_id).await?;
    refuse_while_upserting(&store)?;
    let deleted = drop_vectors(state, store_id, loader).await?;
    if loader.is_none() && store.status == DocumentStoreStatus::Upserted {
        store.status = DocumentStoreStatus::Sync;
        save_row(state, store).await?;
    }
    Ok(deleted)
}

/// `POST /vectorstore/query`: the store's best chunks for `query`, searched
/// with its vector store's settings (`inputs` over its inputs: `topK`,
/// `searchType` with `hybrid`, `fetchK`, `lambda`).
pub async fn query(
    state: &Services,
    workspace: Uuid,
    store_id: Uuid,
    query: &str,
    inputs: Option<Map<String, Value>>,
) -> ServiceResult<QueryAnswer> {
    if query.trim().is_empty() {
        return Err(ServiceError::Missing("query"));
    }
    let store = get(state, workspace, store_id).await?;
    let Some(config) = &store.vector_store_config else {
        return Err(ServiceError::Invalid(
            "the document store has no vector store configured".into(),
        ));
    };
    let values = match inputs {
        None => None,
        Some(inputs) => Some(query_overrides(&config.name, inputs)?),
    };
    let started = Instant::now();
    let vector_store = vector_store(state, &store, values.as_ref()).await?;
    let context = FlowContext {
        input: query.to_owned(),
        chatflow_id: store.id,
        workspace_id: workspace.to_string(),
        ..FlowContext::default()
    };
    let hits = state
        .search
        .search_scored(&vector_store, query, &context)
        .await?;
    let texts: Vec<String> = hits.iter().map(|(d, _)| d.page_content.clone()).collect();
    let known = state.store.find_document_chunks(store.id, texts).await?;
    let time_taken = started.elapsed().as_millis() as u64;
    let docs = hits
        .into_iter()
        .map(|(document, score)| {
            let doc_id = document.metadata.get("docId").and_then(Value::as_str);
            let chunk = known.iter().find(|c| {
                c.page_content == document.page_content
                    && doc_id.is_none_or(|d| c.loader_id.to_string() == d)
            });
            FoundChunk {
                id: chunk.map_or_else(Uuid::new_v4, |c| c.id),
                chunk_no: chunk.map_or(-1, |c| c.chunk_no as i64),
                page_content: document.page_content,
                metadata: document.metadata,
                score,
            }
        })
        .collect();
    Ok(QueryAnswer { time_taken, docs })
}

/// A query's `inputs`, aimed at the store's vector store node alone; keys and
/// endpoints (sensitive inputs) are not a query's to change.
fn query_overrides(
    vector_store: &str,
    inputs: Map<String, Value>,
) -> ServiceResult<Map<String, Value>> {
    let spec = crate::flow::registry::spec(vector_store).ok_or_else(|| {
        ServiceError::Invalid(format!("'{vector_store}' is not a vector store weir runs"))
    })?;
    let mut values = Map::new();
    for (key, value) in inputs {
        let Some(input) = spec.input(&key) else {
            return Err(ServiceError::Invalid(format!(
                "'{key}' is not an input of {vector_store}"
            )));
        };
        if input.sensitive {
            return Err(ServiceError::Invalid(format!(
                "'{key}' of {vector_store} cannot be changed by a query; save it in the \
                 store's vectorStoreConfig"
            )));
        }
        let mut per_node = Map::new();
        per_node.insert(VECTOR_NODE.to_owned(), value);
        values.insert(key, Value::Object(per_node));
    }
    Ok(values)
}

/// The loader node a file goes to by its extension.
fn loader_for_file(name: &str) -> &'static str {
    match load::extension(name).as_str() {
        "pdf" => "pdfFile",
        "docx" => "docxFile",
        "csv" => "csvFile",
        "json" => "jsonFile",
        "jsonl" => "jsonlinesFile",
        _ => "textFile",
    }
}

/// The input a file loader reads its files from.
fn file_input(loader: &str) -> Option<&'static str> {
    Some(match loader {
        "pdfFile" => "pdfFile",
        "docxFile" => "docxFile",
        "csvFile" => "csvFile",
        "jsonFile" => "jsonFile",
        "jsonlinesFile" => "jsonlinesFile",
        "textFile" => "txtFile",
        _ => return None,
    })
}

/// `GET /store-configs/:id/:loaderId`: what an upsert of this loader may set,
/// node by node (its loader, splitter, the store's vector store and
/// embeddings), in Flowise's rows `{node, nodeId, label, name, type}`; a
/// loader's file input is `files`, as the upsert API takes files.
pub async fn upsert_configs(
    state: &Services,
    workspace: Uuid,
    store_id: Uuid,
    loader_id: Uuid,
) -> ServiceResult<Vec<Value>> {
    use crate::flow::node::InputKind;
    let store = get(state, workspace, store_id).await?;
    let loader = store
        .loader(loader_id)
        .ok_or(ServiceError::NotFound("document loader"))?;
    let mut names = vec![loader.loader_id.as_str()];
    names.extend(loader.splitter_id.as_deref());
    names.extend(store.vector_store_config.as_ref().map(|c| c.name.as_str()));
    names.extend(store.embedding_config.as_ref().map(|c| c.name.as_str()));
    let files = file_input(&loader.loader_id);
    let mut rows = Vec::new();
    for spec in names.into_iter().filter_map(crate::flow::registry::spec) {
        for input in spec.inputs {
            let kind = match input.kind {
                InputKind::Text => "string",
                InputKind::Number | InputKind::Integer => "number",
                InputKind::Boolean => "boolean",
                InputKind::Json => "json",
                InputKind::Anchor(_) | InputKind::Anchors(_) | InputKind::Ignored => continue,
            };
            let (name, kind) = if Some(input.name) == files {
                ("files", "file")
            } else {
                (input.name, kind)
            };
            rows.push(serde_json::json!({
                "node": spec.name, "nodeId": format!("{}_0", spec.name),
                "label": input.name, "name": name, "type": kind,
            }));
        }
    }
    Ok(rows)
}

/// Chunks of a store a tool description is written from (Flowise's four).
const DESCRIBED_CHUNKS: u64 = 4;

/// What weir asks a model for a store's tool description (`{context}`: the
/// store's first chunks).
const TOOL_DESCRIPTION_PROMPT: &str = "Below are the first passages of a knowledge base. \
    Write a description of it for a search tool that an AI agent will read to decide when \
    to search this knowledge base: in two or three sentences, say what it covers and which \
    questions it answers. Answer with the description alone.\n\nPassages:\n{context}";

/// `POST /generate-tool-desc/:id`: a model — a chat model node as Flowise's
/// dialog names it, `{name, credential?, inputs}` — writes a description of
/// the store for a retriever tool, from its first four chunks.
pub async fn tool_description(
    state: &Services,
    workspace: Uuid,
    store_id: Uuid,
    selected: &Value,
) -> ServiceResult<String> {
    use crate::flow::graph::{FlowNode, credential_of};
    use crate::flow::overrides::Overrides;
    use crate::flow::runtime::{FlowEvent, ModelLedger, model_step};
    use crate::llm::{ChatMessage, ChatRequest, Role};
    let store = get(state, workspace, store_id).await?;
    let name = selected
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.trim().is_empty())
        .ok_or(ServiceError::Missing("selectedChatModel.name"))?;
    let inputs = match selected.get("inputs") {
        Some(Value::Object(inputs)) => inputs.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => {
            return Err(ServiceError::Invalid(
                "'selectedChatModel.inputs' must be an object".into(),
            ));
        }
    };
    let chunks = state
        .store
        .document_chunks(store.id, None, Some((0, DESCRIBED_CHUNKS)))
        .await?;
    if chunks.chunks.is_empty() {
        return Err(ServiceError::NotFound("document store chunks"));
    }
    let node = FlowNode {
        id: format!("{name}_0"),
        name: name.to_owned(),
        label: name.to_owned(),
        credential: credential_of(selected.get("credential").and_then(Value::as_str), &inputs),
        inputs,
        parent: None,
    };
    let ids: Vec<String> = node.credential.iter().cloned().collect();
    let opened =
        super::credentials::open_for_run(&*state.store, &state.keyring, workspace, &ids).await?;
    let overrides = Overrides {
        credentials: opened.as_ref(),
        ..Overrides::new(&state.config.providers)
    };
    let spec = crate::flow::registry::standalone_model(&node, &overrides).map_err(invalid)?;
    let model = state
        .models
        .chat_model(&spec.provider)
        .await
        .map_err(|e| ServiceError::Invalid(e.message))?;
    let context: Vec<&str> = chunks
        .chunks
        .iter()
        .map(|c| c.page_content.as_str())
        .collect();
    let ask = TOOL_DESCRIPTION_PROMPT.replace("{context}", &context.join("\n"));
    let request = ChatRequest::text(vec![ChatMessage::new(Role::User, ask)], spec.params.clone());
    let said = model_step::<FlowEvent>(
        &spec,
        &*model,
        request,
        None,
        false,
        &ModelLedger::default(),
    )
    .await
    .map_err(|e| match e {
        crate::flow::runtime::RunError::Flow(e) => ServiceError::Upstream(e.message),
        crate::flow::runtime::RunError::Cancelled => {
            ServiceError::Upstream("the model call was cancelled".into())
        }
    })?;
    Ok(said.text.trim().to_owned())
}

/// `POST /upsert/:id`: a loader made or replaced from the request (its files,
/// or another loader's config), processed, and the store's chunks of it
/// inserted. Answers the insert and the loader's id.
pub async fn upsert(
    state: &Services,
    workspace: Uuid,
    store_id: Uuid,
    request: UpsertApiRequest,
) -> ServiceResult<(Inserted, Uuid, Uuid)> {
    let mut store = get(state, workspace, store_id).await?;
    let base = match request.doc_id {
        Some(id) => Some(
            store
                .loader(id)
                .cloned()
                .ok_or(ServiceError::NotFound("loader"))?,
        ),
        None => None,
    };
    if request.create_new_doc_store {
        let mut new = new_store(
            workspace,
            request
                .doc_store_name
                .clone()
                .unwrap_or_else(|| format!("{} (copy)", store.name)),
            request
                .doc_store_description
                .clone()
                .unwrap_or_else(|| store.description.clone()),
        );
        new.vector_store_config = store.vector_store_config.clone();
        new.embedding_config = store.embedding_config.clone();
        new.record_manager_config = store.record_manager_config.clone();
        state.store.create_document_store(&new).await?;
        store = new;
    }
    let loader_type = request
        .loader
        .as_ref()
        .map(|l| l.name.clone())
        .or_else(|| base.as_ref().map(|b| b.loader_id.clone()))
        .or_else(|| {
            request
                .files
                .first()
                .map(|f| loader_for_file(&f.name).to_owned())
        })
        .ok_or_else(|| {
            ServiceError::Invalid("Loader not configured: send 'loader' or files".into())
        })?;
    let mut config = base
        .as_ref()
        .filter(|b| b.loader_id == loader_type)
        .map(|b| b.loader_config.clone())
        .unwrap_or_default();
    if let Some(loader) = &request.loader {
        config.extend(loader.config.clone());
    }
    if let Some(metadata) = &request.metadata {
        config.insert("metadata".into(), Value::Object(metadata.clone()));
    }
    let has_files = !request.files.is_empty();
    if has_files {
        let input = file_input(&loader_type).ok_or_else(|| {
            ServiceError::Unsupported(format!("loader {loader_type} does not read uploaded files"))
        })?;
        let names: Vec<&str> = request.files.iter().map(|f| f.name.as_str()).collect();
        config.insert(
            input.into(),
            Value::from(format!(
                "FILE-STORAGE::{}",
                serde_json::to_string(&names).unwrap_or_default()
            )),
        );
    }
    let splitter = request.splitter.clone().or_else(|| {
        base.as_ref().and_then(|b| {
            b.splitter_id.clone().map(|name| ComponentConfig {
                name,
                config: b.splitter_config.clone().unwrap_or_default(),
            })
        })
    });
    let loader_id = match (
        &base,
        request.replace_existing && !request.create_new_doc_store,
    ) {
        (Some(base), true) => base.id,
        _ => Uuid::new_v4(),
    };
    let loader_request = LoaderRequest {
        store_id: Some(store.id),
        id: Some(loader_id),
        loader_id: Some(loader_type.clone()),
        loader_name: base.as_ref().map(|b| b.loader_name.clone()),
        loader_config: config,
        splitter_name: splitter.as_ref().map(|s| s.name.clone()),
        splitter_id: splitter.as_ref().map(|s| s.name.clone()),
        splitter_config: splitter.map(|s| s.config),
        credential: base.as_ref().and_then(|b| b.credential.clone()),
    };
    // Checked before anything is kept: the loader must build.
    let checked = loader_of(&loader_request, None)?;
    parts(state, &store, &[&checked], false, None).await?;
    save_loader(state, workspace, &loader_request).await?;
    if has_files {
        let files = request
            .files
            .iter()
            .map(|f| StoredFile {
                name: f.name.clone(),
                bytes: f.bytes.to_vec(),
            })
            .collect();
        let mut now = get(state, workspace, store.id).await?;
        if let Some(slot) = now.loader_mut(loader_id) {
            slot.files = listed(&request.files);
            slot.source = source_of(slot);
        }
        now.updated_date = time::now();
        save(
            state,
            DocumentStoreWrite {
                store: now,
                chunks: ChunkChange::None,
                files: Some((loader_id, files)),
            },
        )
        .await?;
    }
    process(state, workspace, store.id, loader_id).await?;
    let configs = VectorConfigRequest {
        store_id: Some(store.id),
        vector_store_name: request.vector_store.as_ref().map(|c| c.name.clone()),
        vector_store_config: request.vector_store.map(|c| Value::Object(c.config)),
        embedding_name: request.embedding.as_ref().map(|c| c.name.clone()),
        embedding_config: request.embedding.map(|c| Value::Object(c.config)),
        record_manager_name: request.record_manager.as_ref().map(|c| c.name.clone()),
        record_manager_config: request.record_manager.map(|c| Value::Object(c.config)),
        doc_id: Some(loader_id),
        is_strict_save: false,
    };
    let inserted = insert(state, workspace, configs).await?;
    Ok((inserted, loader_id, store.id))
}

/// `POST /refresh/:id`: every loader (or those `loaders` name) processed again
/// and inserted; unchanged chunks are not embedded again.
pub async fn refresh(
    state: &Services,
    workspace: Uuid,
    store_id: Uuid,
    loaders: Option<Vec<Uuid>>,
) -> ServiceResult<Vec<Inserted>> {
    let store = get(state, workspace, store_id).await?;
    let ids: Vec<Uuid> = match loaders {
        Some(ids) => {
            for id in &ids {
                if store.loader(*id).is_none() {
                    return Err(ServiceError::NotFound("loader"));
                }
            }
            ids
        }
        None => store.loaders.iter().map(|l| l.id).collect(),
    };
    let mut results = Vec::with_capacity(ids.len());
    for id in ids {
        let store = process(state, workspace, store_id, id).await?;
        results.push(start_insert(state, store, Some(id)).await?);
    }
    Ok(results)
}

/// Keeps each store's `whereUsed` (Flowise's bookkeeping): after `chatflow` is
/// saved, the stores its flow names (by id, in any node: `documentStoreVS`,
/// `documentStore`, agentflow knowledge) list it and the others do not; after
/// it is deleted (`flow_data` `None`), none does.
pub async fn track_use(
    state: &Services,
    workspace: Uuid,
    chatflow: Uuid,
    flow_data: Option<&str>,
) -> ServiceResult<()> {
    let stores = state.store.list_document_stores(workspace, None).await?;
    for mut store in stores.items {
        let id = store.id.to_string();
        let uses = flow_data.is_some_and(|data| data.contains(&id));
        let listed = store.where_used.contains(&chatflow);
        if uses == listed {
            continue;
        }
        if uses {
            store.where_used.push(chatflow);
        } else {
            store.where_used.retain(|c| *c != chatflow);
        }
        // The list alone (a store deleted meanwhile is simply not written).
        state
            .store
            .set_document_store_users(store.id, &store.where_used)
            .await?;
    }
    Ok(())
}
