//! Flowise 3.1's webhook front door: `/api/v1/webhook/:chatflowId` (no API
//! key: the node's signature settings guard it) and the chatflow's webhook
//! secret, `POST`/`DELETE /api/v1/chatflows/:id/webhook-secret`. The checks and
//! the run are `services::triggers::start_webhook`'s.

use axum::extract::{DefaultBodyLimit, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::CommonErrors;
use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path};
use crate::services::triggers::{start_webhook, webhook};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_webhook_secret, delete_webhook_secret))
        .merge(
            OpenApiRouter::new()
                .routes(routes!(call_webhook))
                .layer(DefaultBodyLimit::max(webhook::MAX_BODY_BYTES)),
        )
}

/// Calls a Flowise agentflow whose Start node is a webhook: the call is
/// checked as the node says (method, content type, signature, required
/// fields), then the flow runs and its answer comes back as JSON (what a
/// prediction answers), or as Server-Sent Events when the node's
/// `webhookResponseMode` is `stream`.
#[utoipa::path(
    method(get, post, put, patch, delete),
    path = "/api/v1/webhook/{id}",
    tag = "webhooks",
    security(()),
    params(("id" = Uuid, Path, description = "The chatflow's id")),
    request_body(content = Object, description = "JSON, a form (Flowise's `payload` field is unwrapped) or text"),
    responses(
        (status = 200, description = "The flow's answer (JSON, or an event stream in stream mode)", body = Object),
        (status = 400, description = "A required field is missing or of the wrong type, or the body cannot be read", body = ErrorBody),
        (status = 401, description = "Missing or wrong signature", body = ErrorBody),
        (status = 404, description = "No such chatflow, or its Start node is not a webhook", body = ErrorBody),
        (status = 405, description = "Not the node's method", body = ErrorBody),
        (status = 409, description = "Signatures are on but no secret was generated, or the trigger may not run", body = ErrorBody),
        (status = 413, description = "Body over 16 MiB", body = ErrorBody),
        (status = 415, description = "Not the node's content type", body = ErrorBody),
        (status = 500, description = "The flow failed", body = ErrorBody),
        (status = 504, description = "The run went over the trigger's timeout", body = ErrorBody)
    )
)]
async fn call_webhook(
    State(state): State<AppState>,
    method: Method,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: axum::body::Body,
) -> ApiResult<Response> {
    let Ok(id) = Uuid::parse_str(&id) else {
        return Err(ApiError::NotFound(format!("Chatflow {id} not found")));
    };
    let (headers, body) = super::triggers::read_call(&headers, body).await?;
    let query = serde_urlencoded::from_str::<Vec<(String, String)>>(query.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::BadRequest(format!("the query string cannot be read: {e}")))?;
    let call = start_webhook::Call {
        method: method.as_str().to_owned(),
        headers,
        query,
        body,
    };
    match start_webhook::handle(&state, id, call).await? {
        start_webhook::Reply::Answer(answer) => {
            let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
            Ok((status, axum::Json::<Value>(answer.body)).into_response())
        }
        start_webhook::Reply::Stream(events) => crate::http::sse::stream_answer(events).await,
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct WebhookSecret {
    /// 64 hex characters; shown this once.
    webhook_secret: String,
}

/// Makes (or replaces) the secret webhook calls are signed with; shown once.
#[utoipa::path(
    post,
    path = "/api/v1/chatflows/{id}/webhook-secret",
    tag = "webhooks",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    responses(
        (status = 200, description = "The new secret", body = WebhookSecret),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        (status = 409, description = "The chatflow's Start node is not a webhook", body = ErrorBody),
        CommonErrors
    )
)]
async fn create_webhook_secret(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<WebhookSecret>> {
    auth.require(Permission::ChatflowsWrite)?;
    let flow = super::chatflows::find(&state, &auth, id).await?;
    let secret = start_webhook::set_secret(&state, &flow, true)
        .await?
        .ok_or_else(|| ApiError::Internal("no secret was made".into()))?;
    Ok(Json(WebhookSecret {
        webhook_secret: secret,
    }))
}

/// Removes the webhook's secret (signed calls then fail until a new one is made).
#[utoipa::path(
    delete,
    path = "/api/v1/chatflows/{id}/webhook-secret",
    tag = "webhooks",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        (status = 409, description = "The chatflow's Start node is not a webhook", body = ErrorBody),
        CommonErrors
    )
)]
async fn delete_webhook_secret(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    auth.require(Permission::ChatflowsWrite)?;
    let flow = super::chatflows::find(&state, &auth, id).await?;
    start_webhook::set_secret(&state, &flow, false).await?;
    Ok(StatusCode::NO_CONTENT)
}
