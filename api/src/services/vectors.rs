//! Vector stores: filling them ([`upsert`]) and searching them ([`VectorSearch`],
//! the engine's retriever).
//!
//! An upsert builds the target store's loaders (an uploaded file goes to the
//! loader of its type), loads and splits, and compares each chunk's hash —
//! embeddings model, text and metadata — with what is stored: a known chunk is
//! skipped, a new one embedded; with `cleanup`, stored chunks the upsert no
//! longer has are deleted (`incremental`: of the sources it names; `full`: all).
//! Embedding happens before anything is written, and the write is one
//! transaction, so a failed upsert leaves the store as it was.
//!
//! Searches use an index per store built from its chunks and kept in memory;
//! a write here drops it at once, and another replica's write is seen when the
//! index is older than `STORE_CACHE_TTL_MS` and the store's version moved on.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{ServiceError, ServiceResult, Services};
use crate::domain::{Chatflow, UpsertCounts, VectorChunk, VectorWrite};
use crate::flow::component::{LoaderSpec, VectorStoreSpec};
use crate::flow::plan::{StoreGraph, StoreParts};
use crate::flow::tools::FlowContext;
use crate::flow::tools::retriever::Retriever;
use crate::flow::{FlowError, Overrides};
use crate::retrieval::Document;
use crate::retrieval::embed::Embeddings;
use crate::retrieval::index::{Entry, Index, Query, SearchType};
use crate::retrieval::load::{self, FileData};
use crate::retrieval::split::Splitter;
use crate::store::Store;

/// Which stored chunks an upsert removes when they are not in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Cleanup {
    #[default]
    None,
    /// Chunks of the sources (`metadata.source`) this upsert loaded.
    Incremental,
    /// Every chunk of the store.
    Full,
}

impl Cleanup {
    pub fn parse(text: &str) -> Option<Cleanup> {
        match text {
            "" | "none" => Some(Cleanup::None),
            "incremental" => Some(Cleanup::Incremental),
            "full" => Some(Cleanup::Full),
            _ => None,
        }
    }
}

#[derive(Debug, Default)]
pub struct UpsertRequest {
    pub stop_node_id: Option<String>,
    pub override_config: Option<Map<String, Value>>,
    pub cleanup: Cleanup,
    /// Uploaded files; each goes to the loader of its type.
    pub files: Vec<FileData>,
    /// Files attached to a prediction: their chunks carry `metadata.chatId` and
    /// only that chat's searches find them.
    pub chat_id: Option<String>,
}

/// What an upsert did: the answer of `POST /api/v1/vector/upsert/:id`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpsertAnswer {
    #[serde(flatten)]
    pub counts: UpsertCounts,
    /// The chunks added, as stored.
    #[schema(value_type = Vec<Object>)]
    pub added_docs: Vec<Document>,
}

/// Fills a chatflow's vector store.
pub async fn upsert(
    state: &Services,
    flow: &Chatflow,
    request: UpsertRequest,
) -> ServiceResult<UpsertAnswer> {
    let plan = state
        .plans
        .get(flow.id, flow.updated_date, &flow.flow_data)?;
    let credentials = super::credentials::open_for_run(
        &*state.store,
        &state.keyring,
        flow.workspace_id,
        plan.credential_ids(),
    )
    .await?;
    let overrides = Overrides {
        values: request.override_config.as_ref(),
        allowed: flow.allowed_overrides(),
        credentials: credentials.as_ref(),
        settings: &state.config.providers,
    };
    let target = plan.upsert_target(request.stop_node_id.as_deref(), &overrides)?;
    if target.store.document_store.is_some() {
        return Err(ServiceError::Invalid(format!(
            "node {} is a document store, filled through /api/v1/document-store (its loaders, \
             or POST /api/v1/document-store/upsert/:id), not by a chatflow's upsert",
            target.store.node_id
        )));
    }
    let mut loaders = target.loaders;
    if request.chat_id.is_some() {
        // A chat's files only: not the loaders' own files or text again.
        for loader in &mut loaders {
            loader.files.clear();
            loader.needs_upload = false;
        }
    }
    route_files(&mut loaders, request.files)?;
    if request.chat_id.is_some() {
        loaders.retain(|l| !l.files.is_empty());
    }

    for loader in &mut loaders {
        if let crate::retrieval::load::LoaderKind::Web { url, crawl, .. } = &loader.kind {
            loader.files = fetch_pages(state, &loader.node_id, url, *crawl).await?;
        }
    }
    let mut documents = Vec::new();
    for loader in &loaders {
        if let crate::retrieval::load::LoaderKind::DocumentStore { store } = &loader.kind {
            documents
                .extend(stored_chunks(state, flow.workspace_id, *store, &loader.node_id).await?);
            continue;
        }
        documents.extend(load_documents(loader).await?);
    }
    if let Some(chat) = &request.chat_id {
        for d in &mut documents {
            d.metadata
                .insert("chatId".into(), Value::from(chat.as_str()));
        }
    }
    let written = Written {
        owner: flow.id,
        cleanup: request.cleanup,
        chat_id: request.chat_id,
        group_key: "source",
    };
    store_documents(state, &target.store, documents, written).await
}

/// A document store's chunks as documents (a `documentStore` loader's).
async fn stored_chunks(
    state: &Services,
    workspace: Uuid,
    store: Uuid,
    node_id: &str,
) -> ServiceResult<Vec<Document>> {
    if state
        .store
        .get_document_store(workspace, store)
        .await?
        .is_none()
    {
        return Err(ServiceError::Invalid(format!(
            "node {node_id}: there is no document store {store} in this workspace"
        )));
    }
    Ok(state
        .store
        .document_chunks(store, None, None)
        .await?
        .chunks
        .into_iter()
        .map(|c| Document::new(c.page_content, c.metadata))
        .collect())
}

/// Where [`store_documents`] writes, and what it deletes.
pub struct Written {
    /// The chunks' owner: the chatflow, or a document store.
    pub owner: Uuid,
    pub cleanup: Cleanup,
    /// Set for a chat's own files (see [`UpsertRequest::chat_id`]).
    pub chat_id: Option<String>,
    /// The metadata key chunks are grouped by for an incremental cleanup
    /// (`source`; a document store's `docId`, its loader).
    pub group_key: &'static str,
}

/// Stores `documents` in `store`: each chunk already there (same embeddings,
/// text and metadata) is skipped, new ones are embedded, and `cleanup` says
/// which stored ones no longer there are deleted — all in one write, after
/// every embedding is made.
pub async fn store_documents(
    state: &Services,
    store: &VectorStoreSpec,
    documents: Vec<Document>,
    written: Written,
) -> ServiceResult<UpsertAnswer> {
    let Written {
        owner,
        cleanup,
        chat_id,
        group_key,
    } = written;
    let source_of = |d: &Document| -> Option<String> {
        d.metadata
            .get(group_key)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let fingerprint = store.embeddings.fingerprint();
    let chunks = tokio::task::spawn_blocking(move || hashed(&fingerprint, documents))
        .await
        .map_err(|e| ServiceError::Internal(format!("the upsert task failed: {e}")))?;

    let stored = state.store.vector_chunk_keys(owner, &store.node_id).await?;
    let stored_hashes: HashSet<&str> = stored.iter().map(|k| k.content_hash.as_str()).collect();
    let mut counts = UpsertCounts::default();
    let mut seen = HashSet::new();
    let mut added = Vec::new();
    for (hash, document) in chunks {
        if !seen.insert(hash.clone()) || stored_hashes.contains(hash.as_str()) {
            counts.num_skipped += 1;
        } else {
            added.push((hash, document));
        }
    }
    let added_sources: Vec<Option<String>> = added.iter().map(|(_, d)| source_of(d)).collect();
    let sources: HashSet<Option<&str>> = added_sources
        .iter()
        .map(Option::as_deref)
        .chain(
            stored
                .iter()
                .filter(|k| seen.contains(&k.content_hash))
                .map(|k| k.source.as_deref()),
        )
        .collect();
    let deleted: Vec<&crate::domain::ChunkKey> = stored
        .iter()
        .filter(|k| !seen.contains(&k.content_hash))
        .filter(|k| match cleanup {
            Cleanup::None => false,
            Cleanup::Full => true,
            Cleanup::Incremental => sources.contains(&k.source.as_deref()),
        })
        .collect();
    // A source whose chunks changed: as many as replace old ones count as updated.
    let mut per_source: HashMap<Option<&str>, (u64, u64)> = HashMap::new();
    for source in &added_sources {
        per_source.entry(source.as_deref()).or_default().0 += 1;
    }
    for k in &deleted {
        per_source.entry(k.source.as_deref()).or_default().1 += 1;
    }
    for (new, gone) in per_source.values() {
        let updated = (*new).min(*gone);
        counts.num_updated += updated;
        counts.num_added += new - updated;
        counts.num_deleted += gone - updated;
    }

    let texts: Vec<String> = added.iter().map(|(_, d)| d.page_content.clone()).collect();
    let vectors = state
        .embeddings
        .embed(&store.embeddings, &texts)
        .await
        .map_err(|e| {
            ServiceError::Upstream(format!(
                "node {} could not embed the documents, so nothing was stored: {}",
                store.embeddings_node, e.message
            ))
        })?;
    if vectors.len() != added.len() {
        return Err(ServiceError::Upstream(
            "the embeddings provider sent a vector count that does not match the documents; \
             nothing was stored"
                .into(),
        ));
    }
    if let Some(dims) = vectors.first().map(Vec::len) {
        let deleted_ids: HashSet<Uuid> = deleted.iter().map(|k| k.id).collect();
        if let Some(kept) = stored
            .iter()
            .find(|k| k.dims != dims && !deleted_ids.contains(&k.id))
        {
            return Err(ServiceError::Invalid(format!(
                "the store holds chunks embedded in {} dimensions, and node {} gives {dims}: \
                 its embeddings model changed; upsert again with cleanup \"full\" to replace them",
                kept.dims, store.embeddings_node
            )));
        }
    }
    let deleted_ids: Vec<Uuid> = deleted.iter().map(|k| k.id).collect();
    let mut new_chunks = Vec::with_capacity(added.len());
    let mut added_docs = Vec::with_capacity(added.len());
    for (((hash, document), embedding), source) in added.into_iter().zip(vectors).zip(added_sources)
    {
        new_chunks.push(VectorChunk {
            id: Uuid::now_v7(),
            content_hash: hash,
            source,
            chat_id: chat_id.clone(),
            page_content: document.page_content.clone(),
            metadata: document.metadata.clone(),
            embedding,
        });
        added_docs.push(document);
    }
    state
        .store
        .write_vectors(VectorWrite {
            chatflow_id: owner,
            node_id: store.node_id.clone(),
            added: new_chunks,
            deleted: deleted_ids,
            counts,
        })
        .await
        .map_err(|e| match e {
            crate::store::StoreError::Conflict(_) => ServiceError::Conflict(
                "another upsert to this vector store stored some of these chunks meanwhile; \
                 nothing of this one was stored — send it again"
                    .into(),
            ),
            other => other.into(),
        })?;
    state.indexes.forget(owner, &store.node_id);
    Ok(UpsertAnswer { counts, added_docs })
}

/// A web loader's pages: the first must answer (a 400 naming it otherwise);
/// with `crawl`, same-site pages it links to, breadth first, up to that many
/// pages in all (one that fails is left out).
pub async fn fetch_pages(
    state: &Services,
    node_id: &str,
    url: &str,
    crawl: Option<usize>,
) -> ServiceResult<Vec<FileData>> {
    let start = reqwest::Url::parse(url)
        .map_err(|e| ServiceError::Invalid(format!("node {node_id}: '{url}' is not a URL: {e}")))?;
    let (page, body) = state.tools.web.fetch_page(&start).await.map_err(|why| {
        ServiceError::Invalid(format!("node {node_id} could not read {url}: {why}"))
    })?;
    let limit = crawl.unwrap_or(1).max(1);
    let mut seen: HashSet<reqwest::Url> = [start, page.clone()].into();
    let mut queue = std::collections::VecDeque::new();
    let mut pages = Vec::new();
    let mut fetched = Some((page, body));
    while let Some((page, body)) = fetched.take() {
        if crawl.is_some() {
            let html = String::from_utf8_lossy(&body);
            for link in crate::retrieval::load::html::same_site_links(&html, &page) {
                if seen.insert(link.clone()) {
                    queue.push_back(link);
                }
            }
        }
        pages.push(FileData {
            name: page.to_string(),
            bytes: body,
        });
        while pages.len() < limit {
            let Some(next) = queue.pop_front() else {
                break;
            };
            match state.tools.web.fetch_page(&next).await {
                Ok(answer) => {
                    fetched = Some(answer);
                    break;
                }
                Err(why) => {
                    tracing::info!(node = node_id, page = %next, %why, "a crawled page was left out")
                }
            }
        }
    }
    Ok(pages)
}

/// Gives each uploaded file to the loader of its type; a loader that receives
/// files reads them instead of its own.
fn route_files(loaders: &mut [LoaderSpec], files: Vec<FileData>) -> ServiceResult<()> {
    let mut routed: HashMap<usize, Vec<FileData>> = HashMap::new();
    for file in files {
        let Some(i) = loaders.iter().position(|l| l.kind.accepts(&file.name)) else {
            let kinds: Vec<&str> = loaders.iter().map(|l| l.node_id.as_str()).collect();
            return Err(ServiceError::Unsupported(format!(
                "file '{}' is of a type no document loader of this store reads (its loaders: {})",
                file.name,
                if kinds.is_empty() {
                    "none".to_owned()
                } else {
                    kinds.join(", ")
                }
            )));
        };
        routed.entry(i).or_default().push(file);
    }
    for (i, files) in routed {
        loaders[i].files = files;
        loaders[i].needs_upload = false;
    }
    match loaders.iter().find(|l| l.needs_upload) {
        Some(l) => Err(ServiceError::Invalid(format!(
            "node {} names files kept in a Flowise server's storage, which weir cannot read; \
             send them in 'files' of this upsert (multipart/form-data)",
            l.node_id
        ))),
        None => Ok(()),
    }
}

/// Text one upsert may load (all files together), and what splitting it may make
/// (overlap repeats text): bounds on the memory one request can take.
const MAX_LOADED_BYTES: usize = 256 * 1024 * 1024;
const MAX_SPLIT_BYTES: usize = 1024 * 1024 * 1024;

/// A loader's documents, split and with its metadata applied (Flowise's order:
/// split, then merge the node's metadata, then leave out `omitMetadataKeys`).
pub async fn load_documents(loader: &LoaderSpec) -> ServiceResult<Vec<Document>> {
    let documents = load::load(&loader.kind, &loader.files)
        .await
        .map_err(|e| ServiceError::Invalid(format!("node {}: {}", loader.node_id, e.0)))?;
    let loaded: usize = documents.iter().map(|d| d.page_content.len()).sum();
    if loaded > MAX_LOADED_BYTES {
        return Err(ServiceError::Invalid(format!(
            "node {} loaded {} MiB of text; one upsert takes at most {} MiB: send fewer files at once",
            loader.node_id,
            loaded >> 20,
            MAX_LOADED_BYTES >> 20
        )));
    }
    if let Some(s) = &loader.splitter {
        // Each chunk repeats up to `overlap` of the previous one.
        let step = s.chunk_size.saturating_sub(s.chunk_overlap).max(1);
        let expected = loaded.saturating_mul(s.chunk_size) / step;
        if expected > MAX_SPLIT_BYTES {
            return Err(ServiceError::Invalid(format!(
                "node {}: chunks of {} with an overlap of {} would repeat this text about {}x; \
                 lower the overlap or send less text",
                loader.node_id,
                s.chunk_size,
                s.chunk_overlap,
                s.chunk_size / step
            )));
        }
    }
    let splitter = match &loader.splitter {
        Some(s) => Some(
            Splitter::new(s.kind.clone(), s.chunk_size, s.chunk_overlap)
                .map_err(|e| ServiceError::Invalid(format!("node {}: {e}", loader.node_id)))?,
        ),
        None => None,
    };
    let metadata = loader.metadata.clone();
    let omit = loader.omit_keys.clone();
    tokio::task::spawn_blocking(move || {
        let documents = match splitter {
            Some(s) => s.split_documents(&documents),
            None => documents,
        };
        documents
            .into_iter()
            .map(|mut d| {
                if omit.iter().any(|k| k == "*") {
                    d.metadata = metadata.clone();
                } else {
                    d.metadata
                        .extend(metadata.iter().map(|(k, v)| (k.clone(), v.clone())));
                    for key in &omit {
                        d.metadata.remove(key);
                    }
                }
                d
            })
            .collect()
    })
    .await
    .map_err(|e| ServiceError::Internal(format!("the split task failed: {e}")))
}

/// Each chunk with its hash: SHA-256 of the embeddings' fingerprint, the text and
/// the metadata (keys sorted at every level, so the order they came in does not matter).
fn hashed(fingerprint: &str, documents: Vec<Document>) -> Vec<(String, Document)> {
    documents
        .into_iter()
        .map(|d| {
            let mut h = Sha256::new();
            h.update(fingerprint.as_bytes());
            h.update([0]);
            h.update(d.page_content.as_bytes());
            h.update([0]);
            canonical_object(&d.metadata, &mut h);
            (crate::domain::to_hex(&h.finalize()), d)
        })
        .collect()
}

fn canonical(value: &Value, h: &mut Sha256) {
    match value {
        Value::Object(map) => canonical_object(map, h),
        Value::Array(items) => {
            h.update(b"[");
            for item in items {
                canonical(item, h);
                h.update(b",");
            }
            h.update(b"]");
        }
        other => h.update(other.to_string().as_bytes()),
    }
}

fn canonical_object(map: &Map<String, Value>, h: &mut Sha256) {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    h.update(b"{");
    for k in keys {
        h.update(serde_json::to_string(k).unwrap_or_default().as_bytes());
        h.update(b":");
        canonical(&map[k], h);
        h.update(b",");
    }
    h.update(b"}");
}

/// The retriever runs use: indexes built from the stored chunks, the question
/// embedded with the store's embeddings.
pub struct VectorSearch {
    pub store: Arc<dyn Store>,
    pub embeddings: Embeddings,
    pub indexes: Arc<IndexCache>,
    /// Document stores are other chatflows: their plans, as predictions use them.
    pub plans: Arc<crate::flow::PlanCache>,
    /// The server's provider settings, which the stores' embeddings fall back on.
    pub providers: Arc<crate::config::ProviderSettings>,
    /// Opens the credentials a document store's embeddings name.
    pub keyring: Arc<crate::sealing::Keyring>,
    /// The chat models an RRF retriever asks for versions of the question,
    /// and the shared client (`models.http`) rerank services are called with.
    pub models: crate::llm::connect::Models,
}

#[async_trait::async_trait]
impl Retriever for VectorSearch {
    async fn retrieve_document_store(
        &self,
        chatflow: Uuid,
        workspace: &str,
        query: &str,
    ) -> Result<Vec<Document>, FlowError> {
        self.document_store(chatflow, workspace, query).await
    }

    async fn retrieve(
        &self,
        store: &VectorStoreSpec,
        query: &str,
        flow: &FlowContext,
    ) -> Result<Vec<Document>, FlowError> {
        Ok(self
            .search_scored(store, query, flow)
            .await?
            .into_iter()
            .map(|(d, _)| d)
            .collect())
    }
}

impl VectorSearch {
    /// The store's best chunks for `query`, each with its score: the search's
    /// (cosine similarity, or the fused rank score of `hybrid`), or the rerank
    /// model's relevance where the store is reranked.
    pub async fn search_scored(
        &self,
        store: &VectorStoreSpec,
        query: &str,
        flow: &FlowContext,
    ) -> Result<Vec<(Document, f32)>, FlowError> {
        if let Some(fusion) = &store.fusion {
            let base = VectorStoreSpec {
                fusion: None,
                ..store.clone()
            };
            return self.fused(&base, fusion, query, flow).await;
        }
        let Some(id) = store.document_store else {
            return self.scored(store, query, flow).await;
        };
        // `documentStoreVS`: the store's own vector store, and its vectors.
        let missing = || {
            FlowError::failed(format!(
                "node {}: there is no document store {id} in this workspace",
                store.node_id
            ))
        };
        let workspace = Uuid::parse_str(&flow.workspace_id).map_err(|_| missing())?;
        let found = self
            .store
            .get_document_store(workspace, id)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "cannot read a document store");
                FlowError::failed("the document store could not be read")
            })?
            .ok_or_else(missing)?;
        let mut resolved = self.flowise_store_spec(&found).await?;
        resolved.rerank = store.rerank.clone();
        let context = FlowContext {
            chatflow_id: id,
            // Searched from no chat: a store holds no chat's files.
            session_id: String::new(),
            ..flow.clone()
        };
        self.scored(&resolved, query, &context).await
    }

    /// An RRF retriever's search: the question and the model's versions of
    /// it searched side by side, the lists fused by reciprocal rank (a chunk
    /// scores the sum of `1 / (c + rank)`, ranks from 1; its score is kept in
    /// `metadata.relevance_score`).
    async fn fused(
        &self,
        base: &VectorStoreSpec,
        fusion: &crate::flow::component::FusionSpec,
        query: &str,
        flow: &FlowContext,
    ) -> Result<Vec<(Document, f32)>, FlowError> {
        let mut queries = vec![query.to_owned()];
        queries.extend(self.versions(fusion, query).await?);
        let lists = futures_util::future::try_join_all(
            queries
                .iter()
                .map(|q| Box::pin(self.search_scored(base, q, flow))),
        )
        .await?;
        let mut fused: Vec<(Document, f64)> = Vec::new();
        for list in lists {
            for (rank, (document, _)) in list.into_iter().enumerate() {
                let score = 1.0 / (fusion.c + rank as f64 + 1.0);
                match fused
                    .iter_mut()
                    .find(|(d, _)| d.page_content == document.page_content)
                {
                    Some((_, total)) => *total += score,
                    None => fused.push((document, score)),
                }
            }
        }
        fused.sort_by(|a, b| b.1.total_cmp(&a.1));
        fused.truncate(fusion.top_k.unwrap_or(base.top_k));
        Ok(fused
            .into_iter()
            .map(|(mut d, score)| {
                d.metadata
                    .insert("relevance_score".into(), Value::from(score));
                (d, score as f32)
            })
            .collect())
    }

    /// The model's other versions of the question, one a line (Flowise's
    /// prompt), at most `query_count`.
    async fn versions(
        &self,
        fusion: &crate::flow::component::FusionSpec,
        query: &str,
    ) -> Result<Vec<String>, FlowError> {
        use futures_util::StreamExt;
        let model = &fusion.model;
        let failed = |why: String| {
            FlowError::failed(format!(
                "node {} ({}) could not write versions of the question: {why}",
                model.node_id, model.node_type
            ))
        };
        let client = self
            .models
            .chat_model(&model.provider)
            .await
            .map_err(|e| failed(e.message))?;
        let prompt = format!(
            "You are an AI language model assistant. Your task is to generate {} different \
             versions of the given user question to retrieve relevant documents from a vector \
             database. By generating multiple perspectives on the user question, your goal is to \
             help the user overcome some of the limitations of distance-based similarity search. \
             Provide these alternative questions separated by newlines.\nOriginal question: {query}",
            fusion.query_count
        );
        let request = crate::llm::ChatRequest::text(
            vec![crate::llm::ChatMessage::new(crate::llm::Role::User, prompt)],
            model.params.clone(),
        );
        let mut stream = client
            .stream(request)
            .await
            .map_err(|e| failed(e.message))?;
        let mut text = String::new();
        while let Some(delta) = stream.next().await {
            if let crate::llm::Delta::Text(piece) = delta.map_err(|e| failed(e.message))? {
                text.push_str(&piece);
            }
        }
        Ok(text
            .lines()
            .map(|l| {
                l.trim()
                    .trim_start_matches(|c: char| {
                        c.is_ascii_digit() || c == '.' || c == '-' || c == ')'
                    })
                    .trim()
            })
            .filter(|l| !l.is_empty())
            .take(fusion.query_count)
            .map(str::to_owned)
            .collect())
    }

    async fn scored(
        &self,
        store: &VectorStoreSpec,
        query: &str,
        flow: &FlowContext,
    ) -> Result<Vec<(Document, f32)>, FlowError> {
        let hits = self.search(store, query, flow).await?;
        match &store.rerank {
            None => Ok(hits),
            Some(rerank) => crate::retrieval::rerank::rerank(
                &self.models.http,
                rerank,
                query,
                hits.into_iter().map(|(d, _)| d).collect(),
            )
            .await
            .map(|documents| {
                documents
                    .into_iter()
                    .map(|d| {
                        let relevance = d.metadata.get("relevance_score").and_then(Value::as_f64);
                        (d, relevance.unwrap_or_default() as f32)
                    })
                    .collect()
            })
            .map_err(|e| {
                FlowError::failed(format!(
                    "node {} ({}) could not rerank: {}",
                    store.node_id, store.node_type, e.message
                ))
            }),
        }
    }
}

impl VectorSearch {
    /// The store's best chunks for `query` (pgvector's or weir's index).
    async fn search(
        &self,
        store: &VectorStoreSpec,
        query: &str,
        flow: &FlowContext,
    ) -> Result<Vec<(Document, f32)>, FlowError> {
        let failed = |what: String| {
            FlowError::failed(format!(
                "node {} ({}) {what}",
                store.node_id, store.node_type
            ))
        };
        if store.pgvector && store.search != SearchType::Hybrid && self.store.pgvector_in_use() {
            return self.search_pgvector(store, query, flow, failed).await;
        }
        let index = self
            .indexes
            .get(&*self.store, flow.chatflow_id, &store.node_id)
            .await
            .map_err(|e| failed(format!("cannot read its chunks: {e}")))?;
        if index.is_empty() {
            return Ok(Vec::new());
        }
        let vector = self.embed_question(store, query, failed).await?;
        let (top_k, search) = (store.top_k, store.search);
        let (text, chat) = (query.to_owned(), flow.session_id.clone());
        let run = move |index: &Index| {
            index
                .search(&Query {
                    vector: &vector,
                    text: &text,
                    top_k,
                    search,
                    chat_id: Some(&chat),
                })
                .map(|hits| {
                    hits.into_iter()
                        .map(|(d, score)| (d.clone(), score))
                        .collect::<Vec<_>>()
                })
        };
        // A search is CPU work (milliseconds on a large store): not on an async thread.
        let hits = tokio::task::spawn_blocking(move || run(&index))
            .await
            .map_err(|e| failed(format!("the search task failed: {e}")))?
            .map_err(failed)?;
        Ok(hits)
    }
}

impl VectorSearch {
    async fn document_store(
        &self,
        chatflow: Uuid,
        workspace: &str,
        query: &str,
    ) -> Result<Vec<Document>, FlowError> {
        let missing = || {
            FlowError::failed(format!(
                "there is no document store {chatflow} in this workspace"
            ))
        };
        let workspace = Uuid::parse_str(workspace).map_err(|_| missing())?;
        let found = self
            .store
            .get_document_store(workspace, chatflow)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "cannot read a document store");
                FlowError::failed("the document store could not be read")
            })?;
        if let Some(store) = found {
            return self.flowise_document_store(&store, query).await;
        }
        let flow = self
            .store
            .get_chatflow(workspace, chatflow)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "cannot read a document store's chatflow");
                FlowError::failed("the document store could not be read")
            })?
            .ok_or_else(missing)?;
        let plan = self
            .plans
            .get(flow.id, flow.updated_date, &flow.flow_data)
            .map_err(|e| {
                FlowError::failed(format!(
                    "document store '{}' ({chatflow}) is not a flow weir runs: {}",
                    flow.name, e.message
                ))
            })?;
        let credentials = super::credentials::open_for_run(
            &*self.store,
            &self.keyring,
            flow.workspace_id,
            plan.credential_ids(),
        )
        .await
        .map_err(|e| match e {
            ServiceError::Invalid(why) => FlowError::failed(format!(
                "document store '{}' ({chatflow}): {why}",
                flow.name
            )),
            other => {
                tracing::error!(error = %other, "cannot open a document store's credentials");
                FlowError::failed("the document store's credentials could not be opened")
            }
        })?;
        let overrides = Overrides {
            credentials: credentials.as_ref(),
            ..Overrides::new(&self.providers)
        };
        let store = plan.only_vector_store(&overrides).map_err(|e| {
            FlowError::failed(format!(
                "document store '{}' ({chatflow}) must hold one vector store: {}",
                flow.name, e.message
            ))
        })?;
        // Searched as its own chatflow, from no chat: never a chat's attached files.
        let context = FlowContext {
            input: query.to_owned(),
            chatflow_id: flow.id,
            ..FlowContext::default()
        };
        self.retrieve(&store, query, &context).await
    }

    /// A Flowise document store searched with its vector store's settings.
    async fn flowise_document_store(
        &self,
        store: &crate::domain::DocumentStore,
        query: &str,
    ) -> Result<Vec<Document>, FlowError> {
        let vector_store = self.flowise_store_spec(store).await?;
        let context = FlowContext {
            input: query.to_owned(),
            chatflow_id: store.id,
            workspace_id: store.workspace_id.to_string(),
            ..FlowContext::default()
        };
        self.retrieve(&vector_store, query, &context).await
    }

    /// The vector store a Flowise document store is searched with: its own,
    /// once its chunks are inserted.
    async fn flowise_store_spec(
        &self,
        store: &crate::domain::DocumentStore,
    ) -> Result<VectorStoreSpec, FlowError> {
        let named = |why: String| {
            FlowError::failed(format!(
                "document store '{}' ({}): {why}",
                store.name, store.id
            ))
        };
        if store.status != crate::domain::DocumentStoreStatus::Upserted {
            return Err(named(
                "its chunks are not in its vector store yet; insert them first \
                 (POST /api/v1/document-store/vectorstore/insert)"
                    .into(),
            ));
        }
        self.store_vector_spec(store, None)
            .await
            .map_err(|e| match e {
                ServiceError::Invalid(why) => named(why),
                ServiceError::Flow(e) => named(e.message),
                other => {
                    tracing::error!(error = %other, "cannot build a document store's vector store");
                    named("its vector store could not be built".into())
                }
            })
    }

    /// A Flowise document store's vector store, built from its configs (its
    /// credentials opened, `values` over its inputs); no loader is built.
    pub async fn store_vector_spec(
        &self,
        store: &crate::domain::DocumentStore,
        values: Option<&Map<String, Value>>,
    ) -> ServiceResult<VectorStoreSpec> {
        let graph = StoreGraph::of_store(store, &[], true)?;
        build_store_parts(
            &*self.store,
            &self.keyring,
            &self.providers,
            store.workspace_id,
            &graph,
            values,
        )
        .await?
        .store
        .ok_or_else(|| ServiceError::Internal("a store's graph built no vector store".into()))
    }

    async fn embed_question(
        &self,
        store: &VectorStoreSpec,
        query: &str,
        failed: impl Fn(String) -> FlowError,
    ) -> Result<Vec<f32>, FlowError> {
        self.embeddings
            .embed(&store.embeddings, &[query.to_owned()])
            .await
            .map_err(|e| {
                failed(format!(
                    "cannot embed the question with {}: {}",
                    store.embeddings_node, e.message
                ))
            })?
            .pop()
            .ok_or_else(|| failed("got no embedding for the question".into()))
    }

    /// A `postgres` node's search by pgvector: the `topK` nearest, or for
    /// `mmr` its `fetchK` nearest, picked from in weir's index as from the
    /// whole store (MMR looks no further than those).
    async fn search_pgvector(
        &self,
        store: &VectorStoreSpec,
        query: &str,
        flow: &FlowContext,
        failed: impl Fn(String) -> FlowError,
    ) -> Result<Vec<(Document, f32)>, FlowError> {
        let vector = self.embed_question(store, query, &failed).await?;
        let k = match store.search {
            SearchType::Mmr { fetch_k, .. } => fetch_k.max(store.top_k),
            _ => store.top_k,
        };
        let nearest = self
            .store
            .nearest_vector_chunks(
                flow.chatflow_id,
                &store.node_id,
                &vector,
                k,
                &flow.session_id,
            )
            .await
            .map_err(|e| {
                // The database's own words stay in the log.
                tracing::error!(node = %store.node_id, error = %e, "a pgvector search failed");
                failed(format!(
                    "cannot search its chunks (were they embedded by other embeddings than \
                     {}? an upsert with full cleanup starts the store afresh)",
                    store.embeddings_node
                ))
            })?;
        if !matches!(store.search, SearchType::Mmr { .. }) || nearest.is_empty() {
            return Ok(nearest
                .into_iter()
                .map(|(c, similarity)| (Document::new(c.page_content, c.metadata), similarity))
                .collect());
        }
        let documents = nearest
            .into_iter()
            .map(|(c, _)| Entry {
                document: Document::new(c.page_content, c.metadata),
                embedding: c.embedding,
                chat_id: None,
            })
            .collect::<Vec<_>>();
        // At most fetchK (<= 1,000) rows: cheap enough for this thread.
        let index = Index::new(documents).map_err(&failed)?;
        let picked = index
            .search(&Query {
                vector: &vector,
                text: query,
                top_k: store.top_k,
                search: store.search,
                chat_id: None,
            })
            .map_err(&failed)?;
        Ok(picked
            .into_iter()
            .map(|(d, score)| (d.clone(), score))
            .collect())
    }
}

/// Builds a document store's graph with the credentials its nodes name opened
/// (a document store's own, or a flow's `overrides` of its inputs applied).
pub async fn build_store_parts(
    store: &dyn Store,
    keyring: &crate::sealing::Keyring,
    providers: &crate::config::ProviderSettings,
    workspace: Uuid,
    graph: &StoreGraph,
    values: Option<&Map<String, Value>>,
) -> ServiceResult<StoreParts> {
    let credentials =
        super::credentials::open_for_run(store, keyring, workspace, graph.credential_ids()).await?;
    let overrides = Overrides {
        values,
        credentials: credentials.as_ref(),
        ..Overrides::new(providers)
    };
    Ok(graph.parts(&overrides)?)
}

/// Indexes kept at most; beyond this many the cache starts over.
const INDEX_CACHE_CAPACITY: usize = 256;

/// Built indexes per (chatflow, vector store node).
pub struct IndexCache {
    ttl: Duration,
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    cached: HashMap<(Uuid, String), Cached>,
    /// Moved on by every write here: an index built from a read that began
    /// before a write is not kept.
    generations: HashMap<(Uuid, String), u64>,
}

struct Cached {
    checked: Instant,
    version: i64,
    index: Arc<Index>,
}

impl IndexCache {
    pub fn new(ttl: Duration) -> Self {
        IndexCache {
            ttl,
            entries: Mutex::new(Entries::default()),
        }
    }

    /// Drops a store's index (this replica wrote to it).
    pub fn forget(&self, chatflow: Uuid, node_id: &str) {
        let key = (chatflow, node_id.to_owned());
        let mut entries = self.lock();
        entries.cached.remove(&key);
        *entries.generations.entry(key).or_default() += 1;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The store's index: cached while younger than the TTL, or while the
    /// store's version has not moved; else built anew from the stored chunks.
    pub async fn get(
        &self,
        store: &dyn Store,
        chatflow: Uuid,
        node_id: &str,
    ) -> Result<Arc<Index>, String> {
        let key = (chatflow, node_id.to_owned());
        let (known, generation) = {
            let entries = self.lock();
            let known = entries.cached.get(&key).map(|c| {
                (
                    c.checked.elapsed() < self.ttl,
                    c.version,
                    Arc::clone(&c.index),
                )
            });
            (
                known,
                entries.generations.get(&key).copied().unwrap_or_default(),
            )
        };
        if let Some((true, _, index)) = known {
            return Ok(index);
        }
        if let Some((false, version, index)) = &known {
            let now = store
                .vector_store_version(chatflow, node_id)
                .await
                .map_err(|e| e.to_string())?;
            if now == *version {
                if let Some(c) = self.lock().cached.get_mut(&key) {
                    c.checked = Instant::now();
                }
                return Ok(Arc::clone(index));
            }
        }
        let (version, chunks) = store
            .list_vector_chunks(chatflow, node_id)
            .await
            .map_err(|e| e.to_string())?;
        let index = tokio::task::spawn_blocking(move || {
            Index::new(
                chunks
                    .into_iter()
                    .map(|c| Entry {
                        document: Document::new(c.page_content, c.metadata),
                        embedding: c.embedding,
                        chat_id: c.chat_id,
                    })
                    .collect(),
            )
        })
        .await
        .map_err(|e| format!("the index task failed: {e}"))??;
        let index = Arc::new(index);
        let mut entries = self.lock();
        if entries.generations.get(&key).copied().unwrap_or_default() == generation {
            if entries.cached.len() >= INDEX_CACHE_CAPACITY {
                entries.cached.clear();
            }
            entries.cached.insert(
                key,
                Cached {
                    checked: Instant::now(),
                    version,
                    index: Arc::clone(&index),
                },
            );
        }
        Ok(index)
    }
}
