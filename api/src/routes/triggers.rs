//! `/api/v1/triggers`: cron and webhook triggers of the caller's workspace — create,
//! read, list (paginated, newest first, optionally with recent results), update,
//! delete, their results, the schedule preview — and the webhook address
//! `POST /api/v1/triggers/webhook/:address` (the trigger's id, or a node id), which
//! takes no API key.
//!
//! Handlers only shape: the rules live in `services::triggers`. `webhookSecret`
//! and `webhookBotToken` are never returned; answers say whether they are set.

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::{BodyErrors, CommonErrors};
use crate::domain::trigger::webhook_url;
use crate::domain::{Permission, Trigger, TriggerResult, TriggerType, time};
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::http::pagination::{PageQuery, total_count};
use crate::services::triggers::{self, TriggerFields, webhook};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_triggers, create_trigger))
        .routes(routes!(preview_schedule))
        .routes(routes!(get_trigger, update_trigger, delete_trigger))
        .routes(routes!(list_results))
        .merge(
            OpenApiRouter::new()
                .routes(routes!(receive_webhook))
                .layer(DefaultBodyLimit::max(webhook::MAX_BODY_BYTES)),
        )
}

/// A trigger as answered: its fields, whether its secrets are set, its webhook
/// address, and (listing with `includeResults`) its recent results.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct TriggerView {
    #[serde(flatten)]
    trigger: Trigger,
    webhook_secret_configured: bool,
    webhook_bot_token_configured: bool,
    callback_secret_configured: bool,
    /// The full webhook address (webhook triggers).
    #[serde(skip_serializing_if = "Option::is_none")]
    webhook_url: Option<String>,
    /// The last results, newest first (`includeResults=true` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    recent_results: Option<Vec<TriggerResult>>,
}

fn view(trigger: Trigger, base: &str, recent_results: Option<Vec<TriggerResult>>) -> TriggerView {
    TriggerView {
        webhook_secret_configured: trigger.webhook_secret.is_some(),
        webhook_bot_token_configured: trigger.webhook_bot_token.is_some(),
        callback_secret_configured: trigger.callback_secret.is_some(),
        webhook_url: (trigger.trigger_type == TriggerType::Webhook)
            .then(|| webhook_url(base, trigger.id)),
        recent_results,
        trigger,
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// 1-based page number (default 1).
    page: Option<u32>,
    /// Items per page (default 20, at most 100).
    limit: Option<u32>,
    /// With `true`, each trigger carries `recentResults` (its last 5, newest first).
    include_results: Option<bool>,
}

/// Lists the workspace's triggers, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/triggers",
    tag = "triggers",
    params(ListQuery),
    responses(
        (status = 200, description = "One page of triggers; the total is in X-Total-Count",
         body = [TriggerView], headers(("X-Total-Count" = u64, description = "Number of triggers in all pages"))),
        CommonErrors
    )
)]
async fn list_triggers(
    auth: AuthUser,
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> ApiResult<impl IntoResponse> {
    auth.require(Permission::TriggersRead)?;
    let page = PageQuery {
        page: query.page,
        limit: query.limit,
    }
    .page()?;
    let listing = triggers::list(
        &state,
        auth.workspace(),
        page,
        query.include_results.unwrap_or(false),
    )
    .await?;
    let base = super::public_base_url(&state, &headers);
    let items: Vec<TriggerView> = listing
        .items
        .into_iter()
        .map(|t| view(t.trigger, &base, t.recent_results))
        .collect();
    Ok((total_count(listing.total), Json(items)))
}

/// Creates a trigger.
#[utoipa::path(
    post,
    path = "/api/v1/triggers",
    tag = "triggers",
    request_body = TriggerFields,
    responses(
        (status = 201, description = "The created trigger", body = TriggerView),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        (status = 409, description = "The webhook nodeId is taken", body = ErrorBody),
        (status = 412, description = "A required field is missing", body = ErrorBody),
        (status = 502, description = "Telegram refused the webhook registration", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn create_trigger(
    auth: AuthUser,
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(body): Json<TriggerFields>,
) -> ApiResult<(StatusCode, Json<TriggerView>)> {
    auth.require(Permission::TriggersWrite)?;
    let created = triggers::create(&state, auth.workspace(), body).await?;
    Ok((
        StatusCode::CREATED,
        Json(view(
            created,
            &super::public_base_url(&state, &headers),
            None,
        )),
    ))
}

/// Reads one trigger.
#[utoipa::path(
    get,
    path = "/api/v1/triggers/{id}",
    tag = "triggers",
    params(("id" = Uuid, Path, description = "Trigger id")),
    responses(
        (status = 200, description = "The trigger", body = TriggerView),
        (status = 404, description = "No such trigger in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn get_trigger(
    auth: AuthUser,
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<TriggerView>> {
    auth.require(Permission::TriggersRead)?;
    let trigger = triggers::get(&state, auth.workspace(), id).await?;
    Ok(Json(view(
        trigger,
        &super::public_base_url(&state, &headers),
        None,
    )))
}

/// Changes the given fields of a trigger (absent: unchanged; `null` clears an
/// optional field; an update without `enabled` keeps the current state).
#[utoipa::path(
    put,
    path = "/api/v1/triggers/{id}",
    tag = "triggers",
    params(("id" = Uuid, Path, description = "Trigger id")),
    request_body = TriggerFields,
    responses(
        (status = 200, description = "The whole updated trigger", body = TriggerView),
        (status = 404, description = "No such trigger in this workspace", body = ErrorBody),
        (status = 409, description = "Conflict (webhook nodeId taken, maxExecutions reached, or a field other than notificationEmail, timeout and maxExecutions of a trigger its chatflow owns)", body = ErrorBody),
        (status = 502, description = "Telegram refused the change", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn update_trigger(
    auth: AuthUser,
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<Uuid>,
    Json(body): Json<TriggerFields>,
) -> ApiResult<Json<TriggerView>> {
    auth.require(Permission::TriggersWrite)?;
    let updated = triggers::update(&state, auth.workspace(), id, body).await?;
    Ok(Json(view(
        updated,
        &super::public_base_url(&state, &headers),
        None,
    )))
}

/// Deletes a trigger: its schedule and webhook stop at once.
#[utoipa::path(
    delete,
    path = "/api/v1/triggers/{id}",
    tag = "triggers",
    params(("id" = Uuid, Path, description = "Trigger id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such trigger in this workspace", body = ErrorBody),
        (status = 409, description = "The trigger is its chatflow's (made by its Start node)", body = ErrorBody),
        CommonErrors
    )
)]
async fn delete_trigger(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    auth.require(Permission::TriggersWrite)?;
    triggers::remove(&state, auth.workspace(), id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ResultsQuery {
    /// How many results (default 10, at most 100).
    limit: Option<u32>,
}

/// A trigger's execution results, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/triggers/{id}/results",
    tag = "triggers",
    params(("id" = Uuid, Path, description = "Trigger id"), ResultsQuery),
    responses(
        (status = 200, description = "The results, newest first", body = [TriggerResult]),
        (status = 404, description = "No such trigger in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn list_results(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Query(query): Query<ResultsQuery>,
) -> ApiResult<Json<Vec<TriggerResult>>> {
    auth.require(Permission::TriggersRead)?;
    Ok(Json(
        triggers::results(&state, auth.workspace(), id, query.limit).await?,
    ))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct PreviewBody {
    /// A 5-field cron expression (required).
    cron_expression: Option<String>,
    /// IANA time zone (default UTC).
    timezone: Option<String>,
    /// Start after this time (ISO 8601; default now).
    from: Option<String>,
    /// How many times (default 5, at most 50).
    count: Option<usize>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct Preview {
    cron_expression: String,
    timezone: String,
    /// The next fire times, in UTC.
    next_executions: Vec<String>,
}

/// The next fire times of a cron expression, to check a schedule before saving it.
#[utoipa::path(
    post,
    path = "/api/v1/triggers/schedule-preview",
    tag = "triggers",
    request_body = PreviewBody,
    responses(
        (status = 200, description = "The next fire times", body = Preview),
        (status = 412, description = "cronExpression is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn preview_schedule(
    auth: AuthUser,
    Json(body): Json<PreviewBody>,
) -> ApiResult<Json<Preview>> {
    auth.require(Permission::TriggersRead)?;
    let times = triggers::preview(
        body.cron_expression.as_deref(),
        body.timezone.as_deref(),
        body.from.as_deref(),
        body.count,
    )?;
    Ok(Json(Preview {
        cron_expression: body.cron_expression.unwrap_or_default(),
        timezone: body.timezone.unwrap_or_else(|| "UTC".into()),
        next_executions: times.iter().map(time::format).collect(),
    }))
}

/// The webhook address of a trigger: runs its chatflow with the JSON body and
/// answers `{text, chatId, sourceDocuments, usedTools}`. No API key: a trigger
/// with a `webhookSecret` takes only signed calls (GitHub's `X-Hub-Signature-256`,
/// Standard Webhooks, Telegram's secret token). A repeated delivery id gets the
/// first answer again without a second run.
#[utoipa::path(
    post,
    path = "/api/v1/triggers/webhook/{address}",
    tag = "triggers",
    security(()),
    params(("address" = String, Path, description = "The trigger's id (its webhookUrl), or a node id: the one enabled webhook trigger on that node when no other trigger shares it")),
    request_body(content = Object, description = "Any JSON"),
    responses(
        (status = 200, description = "The chatflow's answer", body = Object),
        (status = 400, description = "The body is not JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong signature", body = ErrorBody),
        (status = 404, description = "No webhook trigger at this address", body = ErrorBody),
        (status = 409, description = "The trigger is disabled or reached maxExecutions, or the node id is shared by several triggers", body = ErrorBody),
        (status = 413, description = "Body over 16 MiB", body = ErrorBody),
        (status = 500, description = "The chatflow failed", body = ErrorBody),
        (status = 504, description = "The run went over the trigger's timeout", body = ErrorBody)
    )
)]
async fn receive_webhook(
    State(state): State<AppState>,
    Path(address): Path<String>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> ApiResult<Response> {
    // The address first: a call to none is answered before its body is read.
    let trigger = webhook::find(&state, &address).await?;
    let (headers, body) = read_call(&headers, body).await?;
    let call = webhook::Call { headers, body };
    let answer = webhook::handle(&state, trigger, call).await?;
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    Ok((status, axum::Json::<Value>(answer.body)).into_response())
}

/// A webhook call's headers (names in lower case, values that are text) and
/// its body, at most [`webhook::MAX_BODY_BYTES`] (413 beyond).
pub(super) async fn read_call(
    headers: &HeaderMap,
    body: axum::body::Body,
) -> ApiResult<(Vec<(String, String)>, bytes::Bytes)> {
    let too_large = || {
        ApiError::PayloadTooLarge(format!(
            "a webhook body may have at most {} MiB",
            webhook::MAX_BODY_BYTES / (1024 * 1024)
        ))
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > webhook::MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    let body = axum::body::to_bytes(body, webhook::MAX_BODY_BYTES)
        .await
        .map_err(|e| {
            if std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
            {
                too_large()
            } else {
                ApiError::BadRequest(format!("the webhook body could not be read: {e}"))
            }
        })?;
    let headers = headers
        .iter()
        .filter_map(|(name, value)| {
            value
                .to_str()
                .ok()
                .map(|v| (name.as_str().to_owned(), v.to_owned()))
        })
        .collect();
    Ok((headers, body))
}
