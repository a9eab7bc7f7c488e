//! `/api/v1/document-store/*`: Flowise's document stores — stores, their
//! loaders (preview, save, process, delete), chunks (paged, edited, deleted),
//! the vector store they are embedded into (save, insert, query, delete), and
//! the upsert and refresh API — in Flowise's shapes.
//!
//! Reading needs `documentStores:read`, every change `documentStores:write`
//! (the upsert and refresh API too: Flowise asks only for a key). The work is
//! `services::document_stores`'.

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::vectors::{Upload, read_upload};
use super::{BodyErrors, CommonErrors};
use crate::domain::time;
use crate::domain::{
    ChunkPage, ComponentConfig, DocumentChunk, DocumentLoader, DocumentStore, DocumentStoreStatus,
    Permission,
};
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::services::document_stores::{
    self as stores, CHUNKS_PER_PAGE, Inserted, LoaderRequest, QueryAnswer, UpsertApiRequest,
    VectorConfigRequest,
};
use crate::services::vectors::UpsertAnswer;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_stores, create_store))
        .routes(routes!(get_store, update_store, delete_store))
        .routes(routes!(delete_loader))
        .routes(routes!(preview_loader))
        .routes(routes!(save_loader))
        .routes(routes!(process_loader))
        // One path for a page and a chunk: `item` is the page number, or the chunk's id.
        .routes(routes!(list_chunks, edit_chunk, delete_chunk))
        .routes(routes!(save_vector_store))
        .routes(routes!(update_vector_store))
        .routes(routes!(insert_vectors))
        .routes(routes!(query_vectors))
        .routes(routes!(delete_vectors))
        .routes(routes!(refresh_store))
        .routes(routes!(list_components))
        .routes(routes!(upsert_configs))
        .routes(routes!(generate_tool_description))
        // The upsert's limit is VECTOR_UPSERT_MAX_BYTES, enforced as it is read.
        .merge(
            OpenApiRouter::new()
                .routes(routes!(upsert_store))
                .layer(DefaultBodyLimit::disable()),
        )
}

/// A store as Flowise shows it (its DTO): configs and loaders as objects,
/// `STALE` while a loader is not processed, chunk and character totals.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct StoreView {
    id: Uuid,
    name: String,
    description: String,
    status: DocumentStoreStatus,
    #[schema(value_type = Vec<Object>)]
    loaders: Value,
    /// Chatflow ids (`[{id, name}]` when one store is read).
    #[schema(value_type = Vec<Object>)]
    where_used: Value,
    #[schema(value_type = Option<Object>)]
    vector_store_config: Value,
    #[schema(value_type = Option<Object>)]
    embedding_config: Value,
    #[schema(value_type = Option<Object>)]
    record_manager_config: Value,
    workspace_id: Uuid,
    #[schema(value_type = String, format = DateTime)]
    created_date: String,
    #[schema(value_type = String, format = DateTime)]
    updated_date: String,
    total_chunks: u64,
    total_chars: u64,
}

impl StoreView {
    /// Flowise's DTO.
    fn of(store: &DocumentStore) -> Self {
        let config = |c: &Option<ComponentConfig>| match c {
            None => Value::Null,
            Some(c) => serde_json::to_value(c).unwrap_or_default(),
        };
        StoreView {
            id: store.id,
            name: store.name.clone(),
            description: store.description.clone(),
            status: store.shown_status(),
            loaders: serde_json::to_value(&store.loaders).unwrap_or_default(),
            where_used: serde_json::to_value(&store.where_used).unwrap_or_default(),
            vector_store_config: config(&store.vector_store_config),
            embedding_config: config(&store.embedding_config),
            record_manager_config: config(&store.record_manager_config),
            workspace_id: store.workspace_id,
            created_date: time::format(&store.created_date),
            updated_date: time::format(&store.updated_date),
            total_chunks: store.loaders.iter().map(|l| l.total_chunks).sum(),
            total_chars: store.loaders.iter().map(|l| l.total_chars).sum(),
        }
    }
}

/// A store as kept (Flowise's entity): its JSON fields as JSON text, the
/// status as stored. What creating it and saving its vector store answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct RawStoreView {
    id: Uuid,
    name: String,
    description: String,
    status: DocumentStoreStatus,
    /// The loaders, as JSON text.
    loaders: String,
    /// Chatflow ids, as JSON text.
    where_used: String,
    /// `{name, config}` as JSON text.
    vector_store_config: Option<String>,
    embedding_config: Option<String>,
    record_manager_config: Option<String>,
    workspace_id: Uuid,
    #[schema(value_type = String, format = DateTime)]
    created_date: String,
    #[schema(value_type = String, format = DateTime)]
    updated_date: String,
}

impl RawStoreView {
    fn of(store: &DocumentStore) -> Self {
        let text = |value: Value| value.to_string();
        let config = |c: &Option<ComponentConfig>| {
            c.as_ref()
                .map(|c| text(serde_json::to_value(c).unwrap_or_default()))
        };
        RawStoreView {
            id: store.id,
            name: store.name.clone(),
            description: store.description.clone(),
            status: store.status,
            loaders: text(serde_json::to_value(&store.loaders).unwrap_or_default()),
            where_used: text(serde_json::to_value(&store.where_used).unwrap_or_default()),
            vector_store_config: config(&store.vector_store_config),
            embedding_config: config(&store.embedding_config),
            record_manager_config: config(&store.record_manager_config),
            workspace_id: store.workspace_id,
            created_date: time::format(&store.created_date),
            updated_date: time::format(&store.updated_date),
        }
    }
}

/// A chunk as Flowise keeps it (`metadata` as JSON text).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ChunkView {
    id: Uuid,
    /// The loader it came from.
    doc_id: Uuid,
    store_id: Uuid,
    chunk_no: u64,
    page_content: String,
    /// JSON text, as Flowise stores it.
    metadata: String,
}

impl From<DocumentChunk> for ChunkView {
    fn from(c: DocumentChunk) -> Self {
        ChunkView {
            id: c.id,
            doc_id: c.loader_id,
            store_id: c.store_id,
            chunk_no: c.chunk_no,
            page_content: c.page_content,
            metadata: Value::Object(c.metadata).to_string(),
        }
    }
}

/// One page of a store's chunks (Flowise's shape).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ChunkPageView {
    chunks: Vec<ChunkView>,
    /// Chunks in all pages of the selection.
    count: u64,
    /// The loader, when one was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    file: Option<Value>,
    current_page: u64,
    store_name: String,
    description: String,
    workspace_id: Uuid,
    /// The loader asked for, or `all`.
    doc_id: String,
    /// Characters of the selection's chunks.
    characters: u64,
}

impl ChunkPageView {
    fn of(
        store: &DocumentStore,
        loader: Option<&DocumentLoader>,
        page: ChunkPage,
        number: u64,
    ) -> Self {
        ChunkPageView {
            chunks: page.chunks.into_iter().map(ChunkView::from).collect(),
            count: page.total,
            file: loader.map(|l| serde_json::to_value(l).unwrap_or_default()),
            current_page: number,
            store_name: store.name.clone(),
            description: store.description.clone(),
            workspace_id: store.workspace_id,
            doc_id: loader.map_or_else(|| "all".to_owned(), |l| l.id.to_string()),
            characters: page.characters,
        }
    }
}

async fn store_of(state: &AppState, auth: &AuthUser, id: Uuid) -> ApiResult<DocumentStore> {
    state
        .store
        .get_document_store(auth.workspace(), id)
        .await?
        .ok_or_else(|| ApiError::not_found("document store"))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct StoreBody {
    /// Required on create.
    name: Option<String>,
    description: Option<String>,
    /// `{name, config}` (or its JSON text).
    #[schema(value_type = Option<Object>)]
    vector_store_config: Option<Value>,
    #[schema(value_type = Option<Object>)]
    embedding_config: Option<Value>,
    #[schema(value_type = Option<Object>)]
    record_manager_config: Option<Value>,
    /// Chatflow ids (or their JSON text).
    #[schema(value_type = Option<Vec<String>>)]
    where_used: Option<Value>,
    /// Not taken here: loaders are changed through `/loader/*`.
    #[schema(value_type = Option<Object>)]
    loaders: Option<Value>,
}

impl StoreBody {
    /// Applies the fields sent to `store`.
    fn apply(self, store: &mut DocumentStore) -> ApiResult<()> {
        if let Some(name) = self.name {
            if name.trim().is_empty() {
                return Err(ApiError::BadRequest("'name' must not be empty".into()));
            }
            store.name = name;
        }
        if let Some(description) = self.description {
            store.description = description;
        }
        if let Some(loaders) = stores::read_config("loaders", self.loaders)?
            && loaders.as_array().is_none_or(|l| !l.is_empty())
        {
            return Err(ApiError::BadRequest(
                "loaders are changed through /api/v1/document-store/loader/save, process and \
                 delete, not by writing the store"
                    .into(),
            ));
        }
        for (slot, field, value) in [
            (
                &mut store.vector_store_config,
                "vectorStoreConfig",
                self.vector_store_config,
            ),
            (
                &mut store.embedding_config,
                "embeddingConfig",
                self.embedding_config,
            ),
            (
                &mut store.record_manager_config,
                "recordManagerConfig",
                self.record_manager_config,
            ),
        ] {
            if let Some(value) = value {
                *slot = stores::read_component(field, Some(value))?;
            }
        }
        if let Some(used) = stores::read_config("whereUsed", self.where_used)? {
            store.where_used = serde_json::from_value(used).map_err(|e| {
                ApiError::BadRequest(format!("'whereUsed' must be a list of chatflow ids: {e}"))
            })?;
        }
        Ok(())
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// With `limit`: answer `{total, data}` for that 1-based page.
    page: Option<u32>,
    limit: Option<u32>,
}

/// Lists the workspace's document stores, last changed first.
#[utoipa::path(
    get,
    path = "/api/v1/document-store/store",
    tag = "document-store",
    params(ListQuery),
    responses(
        (status = 200, description = "Every store (an array), or `{total, data}` when `page` and `limit` are sent", body = [StoreView]),
        CommonErrors
    )
)]
async fn list_stores(
    auth: AuthUser,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> ApiResult<Response> {
    auth.require(Permission::DocumentStoresRead)?;
    let page = match (query.page, query.limit) {
        (Some(page), Some(limit)) => Some(
            crate::http::pagination::PageQuery {
                page: Some(page),
                limit: Some(limit),
            }
            .page()?,
        ),
        _ => None,
    };
    let listing = state
        .store
        .list_document_stores(auth.workspace(), page)
        .await?;
    let views: Vec<StoreView> = listing.items.iter().map(StoreView::of).collect();
    Ok(match page {
        Some(_) => Json(serde_json::json!({"total": listing.total, "data": views})).into_response(),
        None => Json(views).into_response(),
    })
}

/// Creates a document store (`EMPTY`), answered as the stored entity.
#[utoipa::path(
    post,
    path = "/api/v1/document-store/store",
    tag = "document-store",
    request_body = StoreBody,
    responses(
        (status = 200, description = "The store as kept (JSON fields as text, as Flowise answers)", body = RawStoreView),
        (status = 412, description = "'name' is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn create_store(
    auth: AuthUser,
    State(state): State<AppState>,
    Json(body): Json<StoreBody>,
) -> ApiResult<Json<RawStoreView>> {
    auth.require(Permission::DocumentStoresWrite)?;
    let name = body
        .name
        .clone()
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| ApiError::missing("name"))?;
    let mut store = stores::new_store(auth.workspace(), name, String::new());
    body.apply(&mut store)?;
    state.store.create_document_store(&store).await?;
    Ok(Json(RawStoreView::of(&store)))
}

/// Reads one store, `whereUsed` as the chatflows' `{id, name}`.
#[utoipa::path(
    get,
    path = "/api/v1/document-store/store/{id}",
    tag = "document-store",
    params(("id" = Uuid, Path, description = "Document store id")),
    responses(
        (status = 200, description = "The store", body = StoreView),
        (status = 404, description = "No such store in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn get_store(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<StoreView>> {
    auth.require(Permission::DocumentStoresRead)?;
    let store = store_of(&state, &auth, id).await?;
    let mut view = StoreView::of(&store);
    let mut used = Vec::new();
    for flow in &store.where_used {
        if let Some(found) = state.store.get_chatflow(auth.workspace(), *flow).await? {
            used.push(serde_json::json!({"id": found.id, "name": found.name}));
        }
    }
    view.where_used = Value::Array(used);
    Ok(Json(view))
}

/// Changes a store's name, description, configs or `whereUsed`.
#[utoipa::path(
    put,
    path = "/api/v1/document-store/store/{id}",
    tag = "document-store",
    params(("id" = Uuid, Path, description = "Document store id")),
    request_body = StoreBody,
    responses(
        (status = 200, description = "The store", body = StoreView),
        (status = 404, description = "No such store in this workspace", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn update_store(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<StoreBody>,
) -> ApiResult<Json<StoreView>> {
    auth.require(Permission::DocumentStoresWrite)?;
    let mut store = store_of(&state, &auth, id).await?;
    body.apply(&mut store)?;
    store.updated_date = time::now();
    let write = crate::domain::DocumentStoreWrite {
        store,
        chunks: crate::domain::ChunkChange::None,
        files: None,
    };
    let store = write.store.clone();
    if !state.store.save_document_store(write).await? {
        return Err(ApiError::not_found("document store"));
    }
    Ok(Json(StoreView::of(&store)))
}

/// Deletes a store with its loaders, chunks, files and vectors.
#[utoipa::path(
    delete,
    path = "/api/v1/document-store/store/{id}",
    tag = "document-store",
    params(("id" = Uuid, Path, description = "Document store id")),
    responses(
        (status = 200, description = "`{deleted: 1}`"),
        (status = 404, description = "No such store in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn delete_store(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Value>> {
    auth.require(Permission::DocumentStoresWrite)?;
    if state
        .store
        .delete_document_store(auth.workspace(), id)
        .await?
    {
        state
            .indexes
            .forget(id, crate::domain::document_store::VECTOR_NODE);
        Ok(Json(serde_json::json!({"deleted": 1})))
    } else {
        Err(ApiError::not_found("document store"))
    }
}

/// Deletes a loader with its chunks, files and vectors.
#[utoipa::path(
    delete,
    path = "/api/v1/document-store/loader/{id}/{loaderId}",
    tag = "document-store",
    params(
        ("id" = Uuid, Path, description = "Document store id"),
        ("loaderId" = Uuid, Path, description = "Loader id"),
    ),
    responses(
        (status = 200, description = "The store", body = StoreView),
        (status = 404, description = "No such store or loader", body = ErrorBody),
        CommonErrors
    )
)]
async fn delete_loader(
    auth: AuthUser,
    State(state): State<AppState>,
    Path((id, loader)): Path<(Uuid, Uuid)>,
) -> ApiResult<Json<StoreView>> {
    auth.require(Permission::DocumentStoresWrite)?;
    let store = stores::delete_loader(&state, auth.workspace(), id, loader).await?;
    Ok(Json(StoreView::of(&store)))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct PreviewBody {
    #[serde(flatten)]
    loader: LoaderRequest,
    /// Chunks to show; -1 for all (default 20).
    preview_chunk_count: Option<i64>,
}

/// Previews a loader's chunks without keeping anything (web loaders read at most 3 pages).
#[utoipa::path(
    post,
    path = "/api/v1/document-store/loader/preview",
    tag = "document-store",
    request_body = PreviewBody,
    responses(
        (status = 200, description = "`{chunks: [{pageContent, metadata}], totalChunks, previewChunkCount}`"),
        (status = 412, description = "A required field is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn preview_loader(
    auth: AuthUser,
    State(state): State<AppState>,
    Json(body): Json<PreviewBody>,
) -> ApiResult<Json<Value>> {
    auth.require(Permission::DocumentStoresWrite)?;
    let count = body.preview_chunk_count.unwrap_or(20);
    let (mut chunks, total) = stores::preview(&state, auth.workspace(), &body.loader).await?;
    if count >= 0 {
        chunks.truncate(usize::try_from(count).unwrap_or(usize::MAX));
    }
    // As Flowise: how many chunks the preview shows (the UI says "1 of 1 Chunks").
    let shown = chunks.len();
    Ok(Json(serde_json::json!({
        "chunks": chunks,
        "totalChunks": total,
        "previewChunkCount": shown,
    })))
}

/// Saves a loader (its files kept apart from its config), not yet processed (`SYNCING`).
#[utoipa::path(
    post,
    path = "/api/v1/document-store/loader/save",
    tag = "document-store",
    request_body = LoaderRequest,
    responses(
        (status = 200, description = "The loader"),
        (status = 404, description = "No such store", body = ErrorBody),
        (status = 412, description = "'storeId' or 'loaderId' is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn save_loader(
    auth: AuthUser,
    State(state): State<AppState>,
    Json(body): Json<LoaderRequest>,
) -> ApiResult<Json<DocumentLoader>> {
    auth.require(Permission::DocumentStoresWrite)?;
    Ok(Json(
        stores::save_loader(&state, auth.workspace(), &body).await?,
    ))
}

/// Saves the loader the body describes (if it does), then reads and splits its
/// documents into the store's chunks, replacing its earlier ones.
#[utoipa::path(
    post,
    path = "/api/v1/document-store/loader/process/{loaderId}",
    tag = "document-store",
    params(("loaderId" = Uuid, Path, description = "Loader id")),
    request_body = LoaderRequest,
    responses(
        (status = 200, description = "The loader's first page of chunks", body = ChunkPageView),
        (status = 404, description = "No such store or loader", body = ErrorBody),
        (status = 412, description = "A required field is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn process_loader(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(loader): Path<Uuid>,
    Json(body): Json<LoaderRequest>,
) -> ApiResult<Json<ChunkPageView>> {
    auth.require(Permission::DocumentStoresWrite)?;
    let (store, page) = stores::process_loader(&state, auth.workspace(), loader, &body).await?;
    Ok(Json(ChunkPageView::of(
        &store,
        store.loader(loader),
        page,
        1,
    )))
}

/// One page (50 chunks) of a store's chunks, of one loader or `all`.
#[utoipa::path(
    get,
    path = "/api/v1/document-store/chunks/{storeId}/{docId}/{item}",
    tag = "document-store",
    params(
        ("storeId" = Uuid, Path, description = "Document store id"),
        ("docId" = String, Path, description = "A loader id, or `all`"),
        ("item" = u64, Path, description = "1-based page"),
    ),
    responses(
        (status = 200, description = "The page", body = ChunkPageView),
        (status = 404, description = "No such store or loader", body = ErrorBody),
        CommonErrors
    )
)]
async fn list_chunks(
    auth: AuthUser,
    State(state): State<AppState>,
    Path((id, file, page)): Path<(Uuid, String, u64)>,
) -> ApiResult<Json<ChunkPageView>> {
    auth.require(Permission::DocumentStoresRead)?;
    let store = store_of(&state, &auth, id).await?;
    let loader = if file == "all" {
        None
    } else {
        let loader = Uuid::parse_str(&file)
            .map_err(|_| ApiError::BadRequest("'docId' must be a loader id or 'all'".into()))?;
        Some(loader)
    };
    chunk_page(&state, store, loader, page.max(1)).await
}

async fn chunk_page(
    state: &AppState,
    store: DocumentStore,
    loader: Option<Uuid>,
    page: u64,
) -> ApiResult<Json<ChunkPageView>> {
    let shown = match loader {
        None => None,
        Some(id) => Some(
            store
                .loader(id)
                .ok_or_else(|| ApiError::not_found("loader"))?,
        ),
    };
    let window = ((page - 1).saturating_mul(CHUNKS_PER_PAGE), CHUNKS_PER_PAGE);
    let chunks = state
        .store
        .document_chunks(store.id, loader, Some(window))
        .await?;
    Ok(Json(ChunkPageView::of(&store, shown, chunks, page)))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ChunkBody {
    page_content: Option<String>,
    /// An object, or its JSON text.
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
}

/// Changes a chunk's text and metadata; in a store whose chunks are embedded,
/// its vector is made anew first (a failed embedding changes nothing).
#[utoipa::path(
    put,
    path = "/api/v1/document-store/chunks/{storeId}/{docId}/{item}",
    tag = "document-store",
    params(
        ("storeId" = Uuid, Path, description = "Document store id"),
        ("docId" = Uuid, Path, description = "Loader id"),
        ("item" = Uuid, Path, description = "Chunk id"),
    ),
    request_body = ChunkBody,
    responses(
        (status = 200, description = "The loader's first page of chunks", body = ChunkPageView),
        (status = 404, description = "No such store, loader or chunk", body = ErrorBody),
        (status = 502, description = "The embeddings provider failed; nothing changed", body = ErrorBody),
        (status = 412, description = "A required field is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn edit_chunk(
    auth: AuthUser,
    State(state): State<AppState>,
    Path((id, loader, chunk)): Path<(Uuid, Uuid, Uuid)>,
    Json(body): Json<ChunkBody>,
) -> ApiResult<Json<ChunkPageView>> {
    auth.require(Permission::DocumentStoresWrite)?;
    let text = body
        .page_content
        .ok_or_else(|| ApiError::missing("pageContent"))?;
    let metadata = stores::read_object("metadata", body.metadata)?.unwrap_or_default();
    stores::change_chunk(
        &state,
        auth.workspace(),
        id,
        loader,
        chunk,
        Some((text, metadata)),
    )
    .await?;
    let store = store_of(&state, &auth, id).await?;
    chunk_page(&state, store, Some(loader), 1).await
}

/// Deletes a chunk (and its vector, in a store whose chunks are embedded).
#[utoipa::path(
    delete,
    path = "/api/v1/document-store/chunks/{storeId}/{docId}/{item}",
    tag = "document-store",
    params(
        ("storeId" = Uuid, Path, description = "Document store id"),
        ("docId" = Uuid, Path, description = "Loader id"),
        ("item" = Uuid, Path, description = "Chunk id"),
    ),
    responses(
        (status = 200, description = "The loader's first page of chunks", body = ChunkPageView),
        (status = 404, description = "No such store, loader or chunk", body = ErrorBody),
        (status = 412, description = "A required field is missing", body = ErrorBody),
        CommonErrors
    )
)]
async fn delete_chunk(
    auth: AuthUser,
    State(state): State<AppState>,
    Path((id, loader, chunk)): Path<(Uuid, Uuid, Uuid)>,
) -> ApiResult<Json<ChunkPageView>> {
    auth.require(Permission::DocumentStoresWrite)?;
    stores::change_chunk(&state, auth.workspace(), id, loader, chunk, None).await?;
    let store = store_of(&state, &auth, id).await?;
    chunk_page(&state, store, Some(loader), 1).await
}

/// Saves the store's vector store, embeddings and record manager (each not
/// sent is cleared), checked by building them.
#[utoipa::path(
    post,
    path = "/api/v1/document-store/vectorstore/save",
    tag = "document-store",
    request_body = VectorConfigRequest,
    responses(
        (status = 200, description = "The store as kept", body = RawStoreView),
        (status = 404, description = "No such store", body = ErrorBody),
        (status = 412, description = "A required field is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn save_vector_store(
    auth: AuthUser,
    State(state): State<AppState>,
    Json(body): Json<VectorConfigRequest>,
) -> ApiResult<Json<RawStoreView>> {
    auth.require(Permission::DocumentStoresWrite)?;
    let store = stores::save_vector_config(&state, auth.workspace(), body, true).await?;
    Ok(Json(RawStoreView::of(&store)))
}

/// Changes only the store's vector store.
#[utoipa::path(
    post,
    path = "/api/v1/document-store/vectorstore/update",
    tag = "document-store",
    request_body = VectorConfigRequest,
    responses(
        (status = 200, description = "The store as kept", body = RawStoreView),
        (status = 404, description = "No such store", body = ErrorBody),
        (status = 412, description = "A required field is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn update_vector_store(
    auth: AuthUser,
    State(state): State<AppState>,
    Json(body): Json<VectorConfigRequest>,
) -> ApiResult<Json<RawStoreView>> {
    auth.require(Permission::DocumentStoresWrite)?;
    let only_vector_store = VectorConfigRequest {
        store_id: body.store_id,
        vector_store_name: body.vector_store_name,
        vector_store_config: body.vector_store_config,
        ..VectorConfigRequest::default()
    };
    let store =
        stores::save_vector_config(&state, auth.workspace(), only_vector_store, false).await?;
    Ok(Json(RawStoreView::of(&store)))
}

/// An insert's answer, or 202 while it goes on as a job.
fn inserted(result: Inserted, store: Uuid, doc_id: Option<Uuid>) -> Response {
    let (status, mut body) = match result {
        Inserted::Done(answer) => (
            StatusCode::OK,
            serde_json::to_value(&answer).unwrap_or_default(),
        ),
        Inserted::Running => (
            StatusCode::ACCEPTED,
            serde_json::json!({"status": "UPSERTING", "storeId": store}),
        ),
    };
    if let (Some(doc), Some(map)) = (doc_id, body.as_object_mut()) {
        map.insert("docId".into(), Value::from(doc.to_string()));
    }
    (status, Json(body)).into_response()
}

/// Embeds the store's chunks (of `docId`, or all) into its vector store, after
/// saving the configs sent. Unchanged chunks are not embedded again; vectors
/// of chunks no longer there are deleted.
#[utoipa::path(
    post,
    path = "/api/v1/document-store/vectorstore/insert",
    tag = "document-store",
    request_body = VectorConfigRequest,
    responses(
        (status = 200, description = "What the insert added, updated, skipped and deleted", body = UpsertAnswer),
        (status = 202, description = "Still embedding after the body timeout: `{status: UPSERTING, storeId}`; the store's status says when it ends"),
        (status = 404, description = "No such store or loader", body = ErrorBody),
        (status = 409, description = "An insert of this store is running", body = ErrorBody),
        (status = 502, description = "The embeddings provider failed; nothing was stored", body = ErrorBody),
        (status = 412, description = "A required field is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn insert_vectors(
    auth: AuthUser,
    State(state): State<AppState>,
    Json(body): Json<VectorConfigRequest>,
) -> ApiResult<Response> {
    auth.require(Permission::DocumentStoresWrite)?;
    let store = body.store_id.ok_or_else(|| ApiError::missing("storeId"))?;
    let result = stores::insert(&state, auth.workspace(), body).await?;
    Ok(inserted(result, store, None))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct QueryBody {
    store_id: Option<Uuid>,
    query: Option<String>,
    /// The vector store's inputs for this query: `topK`, `searchType`
    /// (`similarity`, `mmr`, `hybrid`), `fetchK`, `lambda`.
    #[schema(value_type = Option<Object>)]
    inputs: Option<Map<String, Value>>,
}

/// Searches the store's vectors: `{timeTaken, docs: [{pageContent, metadata, id, chunkNo, score}]}`.
#[utoipa::path(
    post,
    path = "/api/v1/document-store/vectorstore/query",
    tag = "document-store",
    request_body = QueryBody,
    responses(
        (status = 200, description = "The best chunks", body = QueryAnswer),
        (status = 404, description = "No such store", body = ErrorBody),
        (status = 412, description = "A required field is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn query_vectors(
    auth: AuthUser,
    State(state): State<AppState>,
    Json(body): Json<QueryBody>,
) -> ApiResult<Json<QueryAnswer>> {
    auth.require(Permission::DocumentStoresRead)?;
    let store = body.store_id.ok_or_else(|| ApiError::missing("storeId"))?;
    let query = body.query.unwrap_or_default();
    Ok(Json(
        stores::query(&state, auth.workspace(), store, &query, body.inputs).await?,
    ))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
struct DocQuery {
    /// Only this loader's vectors.
    doc_id: Option<Uuid>,
}

/// Deletes the store's vectors (of `docId`, or all); its chunks stay.
#[utoipa::path(
    delete,
    path = "/api/v1/document-store/vectorstore/{storeId}",
    tag = "document-store",
    params(("storeId" = Uuid, Path, description = "Document store id"), DocQuery),
    responses(
        (status = 200, description = "`{numDeleted}`"),
        (status = 404, description = "No such store", body = ErrorBody),
        CommonErrors
    )
)]
async fn delete_vectors(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Query(query): Query<DocQuery>,
) -> ApiResult<Json<Value>> {
    auth.require(Permission::DocumentStoresWrite)?;
    let deleted = stores::delete_vectors(&state, auth.workspace(), id, query.doc_id).await?;
    Ok(Json(serde_json::json!({"numDeleted": deleted})))
}

/// Fills a store from a request: uploaded files (multipart `files`) or a loader
/// config become a loader (or replace `docId`'s), which is processed and
/// inserted. Fields: `docId`, `replaceExisting`, `createNewDocStore`,
/// `docStore` `{name, description}`, `loader`, `splitter`, `vectorStore`,
/// `embedding`, `recordManager` (`{name, config}`), `metadata`.
#[utoipa::path(
    post,
    path = "/api/v1/document-store/upsert/{id}",
    tag = "document-store",
    params(("id" = Uuid, Path, description = "Document store id")),
    responses(
        (status = 200, description = "The insert's result with `docId`, the loader", body = UpsertAnswer),
        (status = 202, description = "Still embedding after the body timeout"),
        (status = 404, description = "No such store or loader", body = ErrorBody),
        (status = 413, description = "Body over VECTOR_UPSERT_MAX_BYTES", body = ErrorBody),
        CommonErrors
    )
)]
async fn upsert_store(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    request: Request,
) -> ApiResult<Response> {
    auth.require(Permission::DocumentStoresWrite)?;
    let mut fields = Map::new();
    let mut files = Vec::new();
    match read_upload(&state, request).await? {
        Upload::Empty => {}
        Upload::Json(Value::Object(body)) => fields = body,
        Upload::Json(_) => return Err(ApiError::BadRequest("the body must be an object".into())),
        Upload::Form {
            fields: form,
            files: sent,
        } => {
            files = sent;
            for (name, text) in form {
                // Object fields come as JSON text in a form.
                let value = match name.as_str() {
                    "metadata" | "docStore" | "loader" | "splitter" | "vectorStore"
                    | "embedding" | "recordManager" => {
                        serde_json::from_str(&text).map_err(|e| {
                            ApiError::BadRequest(format!("form field '{name}' must be JSON: {e}"))
                        })?
                    }
                    _ => Value::String(text),
                };
                fields.insert(name, value);
            }
        }
    }
    let request = upsert_request(fields, files)?;
    let (result, doc, store) = stores::upsert(&state, auth.workspace(), id, request).await?;
    Ok(inserted(result, store, Some(doc)))
}

fn upsert_request(
    mut fields: Map<String, Value>,
    files: Vec<crate::retrieval::load::FileData>,
) -> ApiResult<UpsertApiRequest> {
    let flag = |v: Option<Value>| match v {
        Some(Value::Bool(b)) => b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    };
    let doc_id = match fields.remove("docId") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(
            Uuid::parse_str(&s)
                .map_err(|_| ApiError::BadRequest("'docId' must be a loader id".into()))?,
        ),
        Some(_) => return Err(ApiError::BadRequest("'docId' must be a loader id".into())),
    };
    let metadata = stores::read_object("metadata", fields.remove("metadata"))?;
    let doc_store = stores::read_config("docStore", fields.remove("docStore"))?;
    let text = |key: &str| {
        doc_store
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    Ok(UpsertApiRequest {
        doc_id,
        metadata,
        replace_existing: flag(fields.remove("replaceExisting")),
        create_new_doc_store: flag(fields.remove("createNewDocStore")),
        doc_store_name: text("name"),
        doc_store_description: text("description"),
        loader: stores::read_component("loader", fields.remove("loader"))?,
        splitter: stores::read_component("splitter", fields.remove("splitter"))?,
        vector_store: stores::read_component("vectorStore", fields.remove("vectorStore"))?,
        embedding: stores::read_component("embedding", fields.remove("embedding"))?,
        record_manager: stores::read_component("recordManager", fields.remove("recordManager"))?,
        files,
    })
}

#[derive(Debug, Default, Deserialize, ToSchema)]
struct RefreshBody {
    /// `[{docId}]`: the loaders to process again (all when absent or empty).
    #[schema(value_type = Option<Vec<Object>>)]
    items: Option<Vec<Map<String, Value>>>,
}

/// Processes the store's loaders again and inserts them; chunks that did not
/// change are not embedded again.
#[utoipa::path(
    post,
    path = "/api/v1/document-store/refresh/{id}",
    tag = "document-store",
    params(("id" = Uuid, Path, description = "Document store id")),
    request_body = RefreshBody,
    responses(
        (status = 200, description = "One insert result per loader"),
        (status = 404, description = "No such store or loader", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn refresh_store(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    body: Option<Json<RefreshBody>>,
) -> ApiResult<Json<Vec<Value>>> {
    auth.require(Permission::DocumentStoresWrite)?;
    let items = body.and_then(|Json(b)| b.items).unwrap_or_default();
    let loaders = if items.is_empty() {
        None
    } else {
        let mut ids = Vec::with_capacity(items.len());
        for item in items {
            let id = item
                .get("docId")
                .and_then(Value::as_str)
                .and_then(|s| Uuid::parse_str(s).ok())
                .ok_or_else(|| {
                    ApiError::BadRequest("each item needs a 'docId' (a loader id)".into())
                })?;
            ids.push(id);
        }
        Some(ids)
    };
    let results = stores::refresh(&state, auth.workspace(), id, loaders).await?;
    Ok(Json(
        results
            .into_iter()
            .map(|r| match r {
                Inserted::Done(answer) => serde_json::to_value(&answer).unwrap_or_default(),
                Inserted::Running => serde_json::json!({"status": "UPSERTING", "storeId": id}),
            })
            .collect(),
    ))
}

/// What an upsert of a loader may set (`POST /upsert/:id`'s `loader`,
/// `splitter`, `vectorStore`, `embedding` configs), node by node.
#[utoipa::path(
    get,
    path = "/api/v1/document-store/store-configs/{id}/{loaderId}",
    tag = "document-store",
    params(
        ("id" = Uuid, Path, description = "Document store id"),
        ("loaderId" = Uuid, Path, description = "Loader id"),
    ),
    responses(
        (status = 200, description = "`[{node, nodeId, label, name, type}]`; a loader's files are `name: files`"),
        (status = 404, description = "No such store in this workspace, or no such loader", body = ErrorBody),
        CommonErrors
    )
)]
async fn upsert_configs(
    auth: AuthUser,
    State(state): State<AppState>,
    Path((id, loader)): Path<(Uuid, Uuid)>,
) -> ApiResult<Json<Vec<Value>>> {
    auth.require(Permission::DocumentStoresRead)?;
    Ok(Json(
        stores::upsert_configs(&state, auth.workspace(), id, loader).await?,
    ))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ToolDescriptionBody {
    /// The chat model that writes it: `{name, credential?, inputs}` (a chat
    /// model node's type, its credential's id, its inputs).
    #[schema(value_type = Option<Object>)]
    selected_chat_model: Option<Value>,
}

/// A description of the store for a retriever tool, written by the chosen
/// chat model from the store's first four chunks: `{content}`.
#[utoipa::path(
    post,
    path = "/api/v1/document-store/generate-tool-desc/{id}",
    tag = "document-store",
    params(("id" = Uuid, Path, description = "Document store id")),
    request_body = ToolDescriptionBody,
    responses(
        (status = 200, description = "`{content}`"),
        (status = 400, description = "The model cannot be built from its settings", body = ErrorBody),
        (status = 404, description = "No such store in this workspace, or it has no chunks", body = ErrorBody),
        (status = 412, description = "No chat model was chosen", body = ErrorBody),
        (status = 502, description = "The model's provider failed", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn generate_tool_description(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<ToolDescriptionBody>,
) -> ApiResult<Json<Value>> {
    auth.require(Permission::DocumentStoresRead)?;
    let selected = body
        .selected_chat_model
        .filter(Value::is_object)
        .ok_or_else(|| ApiError::missing("selectedChatModel"))?;
    let names_credential = selected.get("credential").is_some_and(|c| !c.is_null())
        || selected
            .get("inputs")
            .and_then(|i| i.get("FLOWISE_CREDENTIAL_ID"))
            .is_some_and(|c| !c.is_null());
    if names_credential {
        auth.require(Permission::CredentialsRead)?;
    }
    let content = stores::tool_description(&state, auth.workspace(), id, &selected).await?;
    Ok(Json(serde_json::json!({ "content": content })))
}

/// The node types a store may name, by part: `loaders`, `embeddings`,
/// `vectorstore`, `recordmanager` (weir runs no record manager node: its
/// vector writes de-duplicate by each chunk's hash).
#[utoipa::path(
    get,
    path = "/api/v1/document-store/components/{part}",
    tag = "document-store",
    params(("part" = String, Path, description = "loaders, embeddings, vectorstore or recordmanager")),
    responses(
        (status = 200, description = "The node definitions, as `GET /api/v1/nodes` gives them (`name`, `label`, `category`, `inputs`…)"),
        (status = 404, description = "No such part", body = ErrorBody),
        CommonErrors
    )
)]
async fn list_components(auth: AuthUser, Path(part): Path<String>) -> ApiResult<Json<Vec<Value>>> {
    auth.require(Permission::DocumentStoresRead)?;
    use crate::flow::node::Category;
    let category = match part.as_str() {
        "loaders" => Some(Category::DocumentLoader),
        "embeddings" => Some(Category::Embeddings),
        "vectorstore" => Some(Category::VectorStore),
        "recordmanager" => None,
        _ => return Err(ApiError::not_found("component list")),
    };
    let Some(category) = category else {
        return Ok(Json(Vec::new()));
    };
    let catalog = crate::flow::catalog::Catalog::get();
    Ok(Json(
        crate::flow::registry::specs()
            // Flowise lists neither its store-in-a-store nor its memory store here.
            .filter(|s| {
                s.category == category && !matches!(s.name, "documentStoreVS" | "documentStore")
            })
            // Flowise answers its node definitions (the UI's pickers show their
            // labels and icons); every node weir runs has one in the catalog.
            .filter_map(|s| catalog.definition(s.name).cloned())
            .collect(),
    ))
}
