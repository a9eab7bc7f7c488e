//! `POST /api/v1/vector/upsert/:id` (fill a chatflow's vector store: JSON, or
//! multipart with files in `files`) and `GET /api/v1/upsert-history/:id`.
//!
//! Upserting needs `chatflows:write` (it changes what the chatflow answers from);
//! reading the history `chatflows:read`. The body limit is
//! `VECTOR_UPSERT_MAX_BYTES` (default 50 MiB), checked before the body is read.

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Request, State};
use axum::http::{StatusCode, header};
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::CommonErrors;
use crate::domain::{Chatflow, Permission, UpsertRecord};
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::retrieval::load::FileData;
use crate::services::vectors::{self, Cleanup, UpsertAnswer, UpsertRequest};

/// Most files one upsert may send.
const MAX_FILES: usize = 100;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        // The limit is the configured one, enforced in the handler.
        .routes(routes!(upsert))
        .layer(DefaultBodyLimit::disable())
        .merge(OpenApiRouter::new().routes(routes!(upsert_history)))
}

/// The upsert request (JSON, or multipart fields beside `files`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct UpsertBody {
    /// The vector store node to fill; needed when the flow has several.
    stop_node_id: Option<String>,
    /// Node input names → values for this upsert (as for predictions).
    override_config: Option<Map<String, Value>>,
    /// `none` (default), `incremental` (delete stored chunks of the sources this
    /// upsert loaded that it no longer has) or `full` (every stored chunk it no
    /// longer has).
    cleanup: Option<String>,
}

/// Fills a chatflow's vector store from its document loaders, or from uploaded
/// files (each to the loader of its type). Chunks already stored are skipped.
#[utoipa::path(
    post,
    path = "/api/v1/vector/upsert/{id}",
    tag = "vectors",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    request_body(content((UpsertBody = "application/json"), (UpsertBody = "multipart/form-data"))),
    responses(
        (status = 200, description = "What the upsert added, updated, skipped and deleted", body = UpsertAnswer),
        (status = 404, description = "No such chatflow", body = ErrorBody),
        (status = 413, description = "Body over VECTOR_UPSERT_MAX_BYTES", body = ErrorBody),
        (status = 415, description = "A file no loader of the store reads", body = ErrorBody),
        (status = 502, description = "The embeddings provider failed; nothing was stored", body = ErrorBody),
        CommonErrors
    )
)]
async fn upsert(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    request: Request,
) -> ApiResult<Json<UpsertAnswer>> {
    auth.require(Permission::ChatflowsWrite)?;
    let flow = chatflow(&state, &auth, id).await?;
    let (body, files) = match read_upload(&state, request).await? {
        Upload::Empty => (UpsertBody::default(), Vec::new()),
        Upload::Json(value) => {
            let body = serde_json::from_value(value)
                .map_err(|e| ApiError::BadRequest(format!("the upsert body is not valid: {e}")))?;
            (body, Vec::new())
        }
        Upload::Form { fields, files } => (form_body(fields)?, files),
    };
    let cleanup = match body.cleanup.as_deref() {
        None => Cleanup::None,
        Some(text) => Cleanup::parse(text).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "cleanup is '{text}'; it must be none, incremental or full"
            ))
        })?,
    };
    let answer = vectors::upsert(
        &state,
        &flow,
        UpsertRequest {
            stop_node_id: body.stop_node_id.filter(|s| !s.is_empty()),
            override_config: body.override_config,
            cleanup,
            files,
            chat_id: None,
        },
    )
    .await?;
    Ok(Json(answer))
}

/// An upload's body: none, JSON, or a multipart form's text fields and files.
pub(super) enum Upload {
    Empty,
    Json(Value),
    Form {
        fields: Vec<(String, String)>,
        files: Vec<FileData>,
    },
}

/// Reads an upload within `VECTOR_UPSERT_MAX_BYTES` (413 over it, checked from
/// the declared length before anything is read): JSON, multipart (files in
/// `files` or any field with a file name, at most 100), or no body at all.
pub(super) async fn read_upload(state: &AppState, request: Request) -> ApiResult<Upload> {
    let limit = usize::try_from(state.config.vector_upsert_max_bytes).unwrap_or(usize::MAX);
    let too_large = || {
        ApiError::PayloadTooLarge(format!(
            "the upload is over VECTOR_UPSERT_MAX_BYTES ({limit} bytes)"
        ))
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let is_multipart = content_type.is_some_and(|v| v.starts_with("multipart/form-data"));
    let has_type = content_type.is_some();
    let request = request.map(|body| Body::new(http_body_util::Limited::new(body, limit)));
    if is_multipart {
        let form = Multipart::from_request(request, state).await.map_err(|e| {
            ApiError::BadRequest(format!("malformed multipart body: {}", e.body_text()))
        })?;
        read_multipart(form, too_large).await
    } else if !has_type {
        Ok(Upload::Empty)
    } else {
        let Json(body) = Json::<Value>::from_request(request, state).await?;
        Ok(Upload::Json(body))
    }
}

async fn read_multipart(
    mut form: Multipart,
    too_large: impl Fn() -> ApiError,
) -> ApiResult<Upload> {
    let bad = |e: axum::extract::multipart::MultipartError| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ApiError::BadRequest(format!("malformed multipart body: {}", e.body_text()))
        }
    };
    let mut fields = Vec::new();
    let mut files = Vec::new();
    while let Some(field) = form.next_field().await.map_err(&bad)? {
        let name = field.name().unwrap_or_default().to_owned();
        if name == "files" || field.file_name().is_some() {
            if files.len() == MAX_FILES {
                return Err(ApiError::BadRequest(format!(
                    "at most {MAX_FILES} files may be sent in one upload"
                )));
            }
            let file_name = field.file_name().unwrap_or("upload").to_owned();
            let bytes = field.bytes().await.map_err(&bad)?;
            files.push(FileData {
                name: file_name,
                bytes,
            });
            continue;
        }
        let text = field.text().await.map_err(&bad)?;
        fields.push((name, text));
    }
    Ok(Upload::Form { fields, files })
}

/// A multipart upsert's fields: any field besides the request's own overrides
/// the node input of that name (as Flowise does).
fn form_body(fields: Vec<(String, String)>) -> ApiResult<UpsertBody> {
    let mut body = UpsertBody::default();
    for (name, text) in fields {
        match name.as_str() {
            "stopNodeId" => body.stop_node_id = Some(text),
            "cleanup" => body.cleanup = Some(text),
            "overrideConfig" => {
                body.override_config = Some(serde_json::from_str(&text).map_err(|e| {
                    ApiError::BadRequest(format!(
                        "form field 'overrideConfig' must be a JSON object: {e}"
                    ))
                })?);
            }
            _ => {
                body.override_config
                    .get_or_insert_with(Map::new)
                    .insert(name, Value::String(text));
            }
        }
    }
    Ok(body)
}

/// The chatflow of the caller's workspace (another's is "not found").
async fn chatflow(state: &AppState, auth: &AuthUser, id: Uuid) -> ApiResult<Chatflow> {
    state
        .store
        .get_chatflow(auth.workspace(), id)
        .await?
        .ok_or_else(|| ApiError::not_found("chatflow"))
}

#[derive(Debug, Deserialize, IntoParams)]
struct HistoryQuery {
    /// Most records returned (1 to 1000, default 100).
    limit: Option<u32>,
}

/// Lists a chatflow's upserts, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/upsert-history/{id}",
    tag = "vectors",
    params(("id" = Uuid, Path, description = "Chatflow id"), HistoryQuery),
    responses(
        (status = 200, description = "Past upserts, newest first", body = [UpsertRecord]),
        (status = 404, description = "No such chatflow", body = ErrorBody),
        CommonErrors
    )
)]
async fn upsert_history(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Query(query): Query<HistoryQuery>,
) -> ApiResult<Json<Vec<UpsertRecord>>> {
    auth.require(Permission::ChatflowsRead)?;
    let flow = chatflow(&state, &auth, id).await?;
    let limit = match query.limit {
        None => 100,
        Some(n @ 1..=1000) => n,
        Some(_) => {
            return Err(ApiError::BadRequest(
                "limit must be between 1 and 1000".into(),
            ));
        }
    };
    Ok(Json(state.store.list_upsert_history(flow.id, limit).await?))
}
