//! The calls around a conversation that Flowise's clients make: its stored
//! messages (`/api/v1/chatmessage/:id`, listed and deleted with Flowise's
//! filters, in Flowise's field names), stopping a chat's running prediction
//! (`/api/v1/chatmessage/abort`), ratings of answers (`/api/v1/feedback`) and
//! the contacts visitors leave (`/api/v1/leads`).
//!
//! Access: the workspace's keys list and delete (`chatflows:read`,
//! `chatflows:write`). A chat's visitor rates answers and leaves a lead under
//! the prediction's rule ([`super::flow_access`]: anyone for a public chatflow),
//! and so does a stop of a chat's prediction;
//! a caller without a key of the chatflow's workspace rates only messages of
//! the chat it names, changes only ratings whose id it was given, and is
//! rate-limited ([`VISITOR_LIMIT`]).

use axum::extract::{RawQuery, State};
use axum::http::request::Parts;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::flow_access::{admit, caller};
use super::{BodyErrors, CommonErrors, end_of_day, parse_date, parse_uuid};
use crate::domain::time::{self, Timestamp};
use crate::domain::{
    ChatMessageRecord, ChatType, Chatflow, Feedback, FeedbackFilter, Lead, MessageFilter,
    MessageRole, NewLead, Permission, RateLimit, Rating, is_email,
};
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::ratelimit;

/// Ratings and leads a caller without a workspace key may send per chatflow
/// and client address.
pub static VISITOR_LIMIT: std::sync::LazyLock<RateLimit> = std::sync::LazyLock::new(|| RateLimit {
    max: 30,
    window_secs: 60,
    message: "Too many ratings or leads from this address; retry in a minute".into(),
});

/// Longest `chatId`, name, phone number and feedback text taken.
const MAX_CHAT_ID: usize = 256;
const MAX_NAME: usize = 256;
const MAX_PHONE: usize = 64;
const MAX_FEEDBACK: usize = 10_000;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_messages, delete_messages))
        .routes(routes!(list_internal_messages))
        .routes(routes!(abort_prediction))
        .routes(routes!(rate_answer))
        .routes(routes!(rate_answer_of_chatflow, list_feedback))
        .routes(routes!(update_feedback))
        .routes(routes!(create_lead))
        .routes(routes!(create_lead_slash))
        .routes(routes!(list_leads))
}

/// A stored message in Flowise's shape (`GET /chatmessage`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ChatMessage {
    id: Uuid,
    role: MessageRole,
    /// The chatflow (Flowise's spelling, all lowercase).
    chatflowid: Uuid,
    /// Deprecated: weir's earlier name of `chatflowid`, sent until weir 2.
    #[serde(rename = "chatflowId")]
    #[schema(deprecated)]
    chatflow_id: Uuid,
    content: String,
    chat_type: ChatType,
    chat_id: String,
    /// The same as `chatId`: weir keys a conversation by one id.
    session_id: String,
    memory_type: Option<String>,
    execution_id: Option<Uuid>,
    #[schema(value_type = Option<Object>)]
    source_documents: Option<Value>,
    #[schema(value_type = Option<Object>)]
    used_tools: Option<Value>,
    #[schema(value_type = Option<Object>)]
    file_annotations: Option<Value>,
    #[schema(value_type = Option<Object>)]
    agent_reasoning: Option<Value>,
    #[schema(value_type = Option<Object>)]
    artifacts: Option<Value>,
    #[schema(value_type = Option<Object>)]
    action: Option<Value>,
    #[schema(value_type = Option<Object>)]
    file_uploads: Option<Value>,
    /// JSON text of the suggested next questions (a string, as Flowise sends it).
    follow_up_prompts: Option<String>,
    /// The address a visitor's question came with (`leadEmail`).
    lead_email: Option<String>,
    /// An answer's tokens, in all and per node (as the prediction answered them).
    #[schema(value_type = Option<Object>)]
    usage_metadata: Option<Value>,
    /// What the models thought before answering: `{thinking, thinkingDuration}`.
    #[schema(value_type = Option<Object>)]
    reason_content: Option<Value>,
    /// Whether the answer was cut short by `PUT /chatmessage/abort`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    aborted: bool,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    created_date: Timestamp,
    /// The answer's rating (null when unrated); present only with `feedback=true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    feedback: Option<Option<Feedback>>,
}

/// JSON text as its value; text that is not JSON stays a string.
fn json_of(text: Option<String>) -> Option<Value> {
    text.map(|t| serde_json::from_str(&t).unwrap_or(Value::String(t)))
}

impl ChatMessage {
    fn of(record: ChatMessageRecord, feedback: Option<Option<Feedback>>) -> Self {
        let mut details = match json_of(record.details) {
            Some(Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        let mut take = |key: &str| details.remove(key).filter(|v| !v.is_null());
        let follow_up_prompts = take("followUpPrompts").map(|v| match v {
            Value::String(s) => s,
            other => other.to_string(),
        });
        let lead_email = take("leadEmail").and_then(|v| v.as_str().map(str::to_owned));
        let usage_metadata = take("usageMetadata");
        let reason_content = take("reasonContent");
        ChatMessage {
            reason_content,
            lead_email,
            usage_metadata,
            id: record.id,
            role: record.role,
            chatflowid: record.chatflow_id,
            chatflow_id: record.chatflow_id,
            content: record.content,
            chat_type: record.chat_type,
            session_id: record.chat_id.clone(),
            chat_id: record.chat_id,
            memory_type: record.memory_type,
            execution_id: record.execution_id,
            source_documents: json_of(record.source_documents),
            used_tools: json_of(record.used_tools),
            file_annotations: take("fileAnnotations"),
            agent_reasoning: take("agentReasoning"),
            artifacts: take("artifacts"),
            action: take("action"),
            file_uploads: take("fileUploads"),
            follow_up_prompts,
            aborted: take("aborted").is_some_and(|v| v == Value::Bool(true)),
            created_date: record.created_date,
            feedback,
        }
    }
}

/// Flowise's message filters (`GET` and `DELETE /chatmessage/:id`).
#[derive(Debug, Default, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code, non_snake_case)]
struct MessageQuery {
    /// Chat types: one value, repeated, or a JSON array (`["EXTERNAL","WEBHOOK"]`).
    #[param(value_type = Option<Vec<ChatType>>)]
    chatType: Option<String>,
    /// `ASC` (default, oldest first) or `DESC`.
    order: Option<String>,
    /// One chat's messages.
    chatId: Option<String>,
    /// The same as `chatId` (weir keys a conversation by one id).
    sessionId: Option<String>,
    /// Messages written with this memory (its label, e.g. `Buffer Memory`).
    memoryType: Option<String>,
    /// One message.
    #[param(value_type = Option<Uuid>)]
    messageId: Option<String>,
    /// Created at or after: ISO 8601 date-time, or a date (its start, UTC).
    startDate: Option<String>,
    /// Created at or before: ISO 8601 date-time, or a date (its end, UTC).
    endDate: Option<String>,
    /// `true`: each message carries its rating (`feedback`, null when unrated).
    feedback: Option<bool>,
    /// Only answers rated so (`THUMBS_UP`, `THUMBS_DOWN`; repeated or a JSON
    /// array), each with the question before it.
    #[param(value_type = Option<Vec<Rating>>)]
    feedbackType: Option<String>,
    /// With `feedback=true`: the page of chats (1-based; each page holds
    /// `limit` whole chats, as Flowise pages them).
    page: Option<u32>,
    /// With `feedback=true`: chats per page.
    limit: Option<u32>,
}

/// What the filters ask, read from the query string (values may repeat).
#[derive(Debug, Default)]
struct MessageAsk {
    filter: MessageFilter,
    descending: bool,
    with_feedback: bool,
    /// (page, chats per page), with `feedback=true`.
    chats_page: Option<(u32, u32)>,
}

/// One value or several: repeated, comma-free JSON array text, or plain.
fn values_of<T: std::str::FromStr<Err = String>>(field: &str, raw: &str) -> ApiResult<Vec<T>> {
    let items: Vec<String> = if raw.trim_start().starts_with('[') {
        serde_json::from_str(raw).map_err(|_| {
            ApiError::BadRequest(format!(
                "'{field}' must be a value or a JSON array of values"
            ))
        })?
    } else {
        vec![raw.to_owned()]
    };
    items
        .iter()
        .map(|v| v.parse().map_err(ApiError::BadRequest))
        .collect()
}

/// `ASC` (oldest first) or `DESC`, in any case: whether newest come first.
fn descending(field: &str, value: &str) -> ApiResult<bool> {
    match value.to_ascii_uppercase().as_str() {
        "ASC" => Ok(false),
        "DESC" => Ok(true),
        _ => Err(ApiError::BadRequest(format!(
            "'{field}' must be ASC or DESC"
        ))),
    }
}

fn truthy(value: &str) -> bool {
    matches!(value, "true" | "1" | "yes")
}

impl MessageAsk {
    fn parse(raw: Option<&str>) -> ApiResult<Self> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw.unwrap_or_default())
            .map_err(|e| ApiError::BadRequest(format!("malformed query string: {e}")))?;
        let mut ask = MessageAsk::default();
        let (mut page, mut limit) = (None, None);
        let number = |field: &str, v: &str| {
            v.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                ApiError::BadRequest(format!("'{field}' must be a positive integer"))
            })
        };
        for (key, value) in pairs {
            if value.is_empty() {
                continue;
            }
            let f = &mut ask.filter;
            match key.as_str() {
                "chatType" => f
                    .chat_types
                    .extend(values_of::<ChatType>("chatType", &value)?),
                "feedbackType" => f
                    .feedback_types
                    .extend(values_of::<Rating>("feedbackType", &value)?),
                "order" => ask.descending = descending("order", &value)?,
                "chatId" | "sessionId" => {
                    if f.chat_id.as_ref().is_some_and(|c| *c != value) {
                        return Err(ApiError::BadRequest(
                            "'chatId' and 'sessionId' name one conversation in weir; they differ"
                                .into(),
                        ));
                    }
                    f.chat_id = Some(value);
                }
                "memoryType" => f.memory_type = Some(value),
                "messageId" => f.message_id = Some(parse_uuid("messageId", &value)?),
                "startDate" => {
                    f.start_date = Some(parse_date("startDate", &value, chrono::NaiveTime::MIN)?)
                }
                "endDate" => f.end_date = Some(parse_date("endDate", &value, end_of_day())?),
                "feedback" => ask.with_feedback = truthy(&value),
                "page" => page = Some(number("page", &value)?),
                "limit" => limit = Some(number("limit", &value)?),
                // Flowise's other parameters (hardDelete, isClearFromViewMessageDialog,
                // apiKey) ask nothing of weir's store.
                _ => {}
            }
        }
        if ask.with_feedback && (page.is_some() || limit.is_some()) {
            ask.chats_page = Some((page.unwrap_or(1), limit.unwrap_or(10).min(1000)));
        }
        Ok(ask)
    }
}

/// Keeps the `page`-th run of `per_page` whole chats, in the order their
/// first messages come.
fn page_of_chats(
    messages: Vec<ChatMessageRecord>,
    page: u32,
    per_page: u32,
) -> Vec<ChatMessageRecord> {
    let mut seen = std::collections::HashSet::new();
    let chats: Vec<&str> = messages
        .iter()
        .map(|m| m.chat_id.as_str())
        .filter(|chat| seen.insert(*chat))
        .collect();
    let skip = (page as usize - 1).saturating_mul(per_page as usize);
    let kept: std::collections::HashSet<String> = chats
        .into_iter()
        .skip(skip)
        .take(per_page as usize)
        .map(str::to_owned)
        .collect();
    messages
        .into_iter()
        .filter(|m| kept.contains(&m.chat_id))
        .collect()
}

/// Messages of a chatflow's conversations, in Flowise's shape and filters.
#[utoipa::path(
    get,
    path = "/api/v1/chatmessage/{id}",
    tag = "chat",
    params(("id" = Uuid, Path, description = "Chatflow id"), MessageQuery),
    responses(
        (status = 200, description = "The messages", body = [ChatMessage]),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn list_messages(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Vec<ChatMessage>>> {
    let ask = MessageAsk::parse(query.as_deref())?;
    messages_of(&state, &auth, id, ask).await
}

/// The history of the canvas's chat panel: the chatflow's `INTERNAL` messages,
/// with the same filters (Flowise's `/internal-chatmessage/:id`).
#[utoipa::path(
    get,
    path = "/api/v1/internal-chatmessage/{id}",
    tag = "chat",
    params(("id" = Uuid, Path, description = "Chatflow id"), MessageQuery),
    responses(
        (status = 200, description = "The messages of the canvas's chats", body = [ChatMessage]),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn list_internal_messages(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Vec<ChatMessage>>> {
    let mut ask = MessageAsk::parse(query.as_deref())?;
    ask.filter.chat_types = vec![ChatType::Internal];
    messages_of(&state, &auth, id, ask).await
}

async fn messages_of(
    state: &AppState,
    auth: &AuthUser,
    id: Uuid,
    ask: MessageAsk,
) -> ApiResult<Json<Vec<ChatMessage>>> {
    auth.require(Permission::ChatflowsRead)?;
    let flow = super::chatflows::find(state, auth, id).await?;
    let mut messages = state
        .store
        .query_chat_messages(flow.id, &ask.filter, ask.descending)
        .await?;
    if let Some((page, per_page)) = ask.chats_page {
        messages = page_of_chats(messages, page, per_page);
    }
    if !ask.with_feedback {
        return Ok(Json(
            messages
                .into_iter()
                .map(|m| ChatMessage::of(m, None))
                .collect(),
        ));
    }
    let ids: Vec<Uuid> = messages.iter().map(|m| m.id).collect();
    let mut ratings: std::collections::HashMap<Uuid, Feedback> = state
        .store
        .feedback_of_messages(flow.id, &ids)
        .await?
        .into_iter()
        .map(|f| (f.message_id, f))
        .collect();
    Ok(Json(
        messages
            .into_iter()
            .map(|m| {
                let rating = ratings.remove(&m.id);
                ChatMessage::of(m, Some(rating))
            })
            .collect(),
    ))
}

/// What a deletion removed (TypeORM's `DeleteResult`, as Flowise answers).
#[derive(Debug, Serialize, ToSchema)]
struct DeletedMessages {
    /// Always empty (Flowise passes the driver's raw answer).
    #[schema(value_type = Vec<Object>)]
    raw: [(); 0],
    /// How many messages were deleted.
    affected: u64,
}

/// Deletes a chatflow's messages that the filters take (every one without
/// filters), with their ratings; the chats that lose messages lose their agent
/// memory, and a chat deleted by `chatId` (or every chat) its uploaded files.
#[utoipa::path(
    delete,
    path = "/api/v1/chatmessage/{id}",
    tag = "chat",
    params(("id" = Uuid, Path, description = "Chatflow id"), MessageQuery),
    responses(
        (status = 200, description = "How many messages were deleted", body = DeletedMessages),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn delete_messages(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<DeletedMessages>> {
    auth.require(Permission::ChatflowsWrite)?;
    let ask = MessageAsk::parse(query.as_deref())?;
    let flow = super::chatflows::find(&state, &auth, id).await?;
    let affected = state
        .store
        .delete_chat_messages(flow.id, &ask.filter)
        .await?;
    // A whole chat (or every chat) deleted takes its files with it.
    if ask.filter.takes_whole_chats() {
        state
            .uploads
            .forget(flow.workspace_id, flow.id, ask.filter.chat_id.as_deref())
            .await;
    }
    Ok(Json(DeletedMessages { raw: [], affected }))
}

/// Flowise's answer to an abort.
#[derive(Debug, Serialize, ToSchema)]
struct Aborted {
    /// `200`.
    status: u16,
    /// `Chat message aborted`.
    message: &'static str,
}

/// Stops the chat's running prediction, on whichever replica runs it: its
/// stream ends with `abort` then `end`, the answer so far is stored marked
/// `aborted`, and an agentflow's execution ends `STOPPED`. Answered at once,
/// whether or not a prediction of the chat was running.
#[utoipa::path(
    put,
    path = "/api/v1/chatmessage/abort/{id}/{chatId}",
    tag = "chat",
    security((), ("bearer" = []), ("apiKey" = [])),
    params(
        ("id" = Uuid, Path, description = "Chatflow id"),
        ("chatId" = String, Path, description = "The chat whose prediction stops")
    ),
    responses(
        (status = 200, description = "Asked to stop", body = Aborted),
        (status = 404, description = "No such chatflow", body = ErrorBody),
        (status = 429, description = "Over the visitors' limit", body = ErrorBody),
        CommonErrors
    )
)]
async fn abort_prediction(
    State(state): State<AppState>,
    Path((id, chat_id)): Path<(Uuid, String)>,
    parts: Parts,
) -> ApiResult<Json<Aborted>> {
    if chat_id.len() > MAX_CHAT_ID {
        return Err(ApiError::BadRequest(format!(
            "'chatId' must be at most {MAX_CHAT_ID} characters"
        )));
    }
    let (flow, _) = visit(&state, &parts, id).await?;
    crate::services::aborts::request(&state, flow.id, &chat_id).await?;
    Ok(Json(Aborted {
        status: 200,
        message: "Chat message aborted",
    }))
}

/// A rating of an answer (Flowise's body; `chatflowid` and `chatId` are the
/// message's when absent and must match it when given).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct RateBody {
    /// The rated answer (required).
    message_id: Option<String>,
    /// `THUMBS_UP` or `THUMBS_DOWN` (required).
    rating: Option<Rating>,
    /// What the visitor wrote about the answer.
    content: Option<String>,
    /// The answer's chat; required of callers without a workspace key.
    chat_id: Option<String>,
    #[serde(alias = "chatflowId")]
    chatflowid: Option<String>,
}

/// Whether the caller holds a key of the chatflow's workspace that may read it.
fn is_member(auth: Option<&AuthUser>, flow: &Chatflow) -> bool {
    auth.is_some_and(|a| {
        a.workspace() == flow.workspace_id && a.require(Permission::ChatflowsRead).is_ok()
    })
}

/// The chatflow a visitor's call is about, checked as a prediction would be
/// (key, origin) and counted against [`VISITOR_LIMIT`] for non-members;
/// whether the caller is a member of its workspace.
async fn visit(
    state: &AppState,
    parts: &Parts,
    flow_id: Uuid,
) -> ApiResult<(std::sync::Arc<Chatflow>, bool)> {
    let (flow, auth) = admit(state, parts, flow_id).await?;
    let member = is_member(auth.as_ref(), &flow);
    if !member {
        let who = caller(parts, auth.as_ref(), state.config.trust_proxy);
        ratelimit::check(
            &*state.store,
            &VISITOR_LIMIT,
            flow.id,
            &format!("visitor:{who}"),
        )
        .await?;
    }
    Ok((flow, member))
}

fn check_content(content: Option<String>) -> ApiResult<Option<String>> {
    match content {
        Some(c) if c.chars().count() > MAX_FEEDBACK => Err(ApiError::BadRequest(format!(
            "'content' must be at most {MAX_FEEDBACK} characters"
        ))),
        Some(c) if c.is_empty() => Ok(None),
        other => Ok(other),
    }
}

async fn rate(
    state: &AppState,
    parts: &Parts,
    path_flow: Option<Uuid>,
    body: RateBody,
) -> ApiResult<Json<Feedback>> {
    let message_id = body
        .message_id
        .filter(|m| !m.is_empty())
        .ok_or_else(|| ApiError::BadRequest("Message ID is required".into()))?;
    let rating = body.rating.ok_or_else(|| {
        ApiError::BadRequest("'rating' is required: THUMBS_UP or THUMBS_DOWN".into())
    })?;
    let content = check_content(body.content)?;
    let not_found = || ApiError::NotFound(format!("Message with ID {message_id} not found"));
    let id = Uuid::parse_str(&message_id).map_err(|_| not_found())?;
    let message = state
        .store
        .find_chat_message(id)
        .await?
        .ok_or_else(not_found)?;
    let named_flow = match body.chatflowid.filter(|f| !f.is_empty()) {
        Some(text) => Some(parse_uuid("chatflowid", &text)?),
        None => path_flow,
    };
    if named_flow.is_some_and(|f| f != message.chatflow_id) {
        return Err(ApiError::BadRequest(
            "Inconsistent chatflow ID: the message is not of this chatflow".into(),
        ));
    }
    // Who may ask the chatflow may rate its answers; a message of a flow the
    // caller may not use is one it cannot see.
    let (flow, member) = match visit(state, parts, message.chatflow_id).await {
        Err(ApiError::NotFound(_)) => return Err(not_found()),
        other => other?,
    };
    let chat = body.chat_id.filter(|c| !c.is_empty());
    if chat.is_none() && !member {
        return Err(ApiError::BadRequest(
            "'chatId' is required: a visitor rates answers of the chat it names".into(),
        ));
    }
    if chat.is_some_and(|c| c != message.chat_id) {
        return Err(ApiError::BadRequest(
            "Inconsistent chat ID: the message is not of this chat".into(),
        ));
    }
    if message.role != MessageRole::Api {
        return Err(ApiError::BadRequest(
            "only answers (apiMessage) can be rated".into(),
        ));
    }
    let feedback = state
        .store
        .rate_message(Feedback {
            id: Uuid::new_v4(),
            chatflow_id: flow.id,
            chat_id: message.chat_id,
            message_id: message.id,
            rating,
            content,
            created_date: time::now(),
        })
        .await?;
    crate::metrics::metrics().feedback(&flow.id.to_string(), rating.as_str());
    Ok(Json(feedback))
}

/// Rates an answer; rating it again replaces its rating (same id).
#[utoipa::path(
    post,
    path = "/api/v1/feedback",
    tag = "chat",
    security((), ("bearer" = []), ("apiKey" = [])),
    request_body = RateBody,
    responses(
        (status = 200, description = "The rating", body = Feedback),
        (status = 404, description = "No such message (or not one this caller may rate)", body = ErrorBody),
        (status = 429, description = "Over the visitors' limit", body = ErrorBody),
        BodyErrors,
        CommonErrors
    )
)]
async fn rate_answer(
    State(state): State<AppState>,
    parts: Parts,
    Json(body): Json<RateBody>,
) -> ApiResult<Json<Feedback>> {
    rate(&state, &parts, None, body).await
}

/// Rates an answer of this chatflow (the path the chat widget posts to).
#[utoipa::path(
    post,
    path = "/api/v1/feedback/{id}",
    tag = "chat",
    security((), ("bearer" = []), ("apiKey" = [])),
    params(("id" = Uuid, Path, description = "Chatflow id")),
    request_body = RateBody,
    responses(
        (status = 200, description = "The rating", body = Feedback),
        (status = 404, description = "No such message (or not one this caller may rate)", body = ErrorBody),
        (status = 429, description = "Over the visitors' limit", body = ErrorBody),
        BodyErrors,
        CommonErrors
    )
)]
async fn rate_answer_of_chatflow(
    State(state): State<AppState>,
    Path(id): Path<String>,
    parts: Parts,
    Json(body): Json<RateBody>,
) -> ApiResult<Json<Feedback>> {
    // Flowise ignores the path; an id that is a UUID names the chatflow here.
    let flow = Uuid::parse_str(&id).ok();
    rate(&state, &parts, flow, body).await
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
struct FeedbackQuery {
    /// One chat's ratings.
    chat_id: Option<String>,
    /// `ASC` (default, oldest first) or `DESC`.
    sort_order: Option<String>,
    /// Flowise's other name of `sortOrder`.
    order: Option<String>,
    /// Given at or after: ISO 8601 date-time, or a date.
    start_date: Option<String>,
    /// Given at or before: ISO 8601 date-time, or a date.
    end_date: Option<String>,
}

/// Ratings of a chatflow's answers.
#[utoipa::path(
    get,
    path = "/api/v1/feedback/{id}",
    tag = "chat",
    params(("id" = Uuid, Path, description = "Chatflow id"), FeedbackQuery),
    responses(
        (status = 200, description = "The ratings", body = [Feedback]),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn list_feedback(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Query(query): Query<FeedbackQuery>,
) -> ApiResult<Json<Vec<Feedback>>> {
    auth.require(Permission::ChatflowsRead)?;
    let given = |v: Option<String>| v.filter(|v| !v.is_empty());
    let descending = match given(query.sort_order.or(query.order)) {
        Some(order) => descending("sortOrder", &order)?,
        None => false,
    };
    let filter = FeedbackFilter {
        chat_id: given(query.chat_id),
        start_date: given(query.start_date)
            .map(|v| parse_date("startDate", &v, chrono::NaiveTime::MIN))
            .transpose()?,
        end_date: given(query.end_date)
            .map(|v| parse_date("endDate", &v, end_of_day()))
            .transpose()?,
        descending,
    };
    let flow = super::chatflows::find(&state, &auth, id).await?;
    Ok(Json(state.store.list_feedback(flow.id, &filter).await?))
}

/// A change of a rating: its `rating` and `content`; the other fields, when
/// sent, must be the rating's own (a rating does not move to another message).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct UpdateFeedbackBody {
    rating: Option<Rating>,
    content: Option<String>,
    message_id: Option<String>,
    chat_id: Option<String>,
    #[serde(alias = "chatflowId")]
    chatflowid: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
struct StatusOk {
    /// `OK`.
    status: &'static str,
}

/// Changes a rating (the widget sends the visitor's comment this way).
#[utoipa::path(
    put,
    path = "/api/v1/feedback/{id}",
    tag = "chat",
    security((), ("bearer" = []), ("apiKey" = [])),
    params(("id" = Uuid, Path, description = "Rating id")),
    request_body = UpdateFeedbackBody,
    responses(
        (status = 200, description = "Changed", body = StatusOk),
        (status = 404, description = "No such rating", body = ErrorBody),
        BodyErrors,
        CommonErrors
    )
)]
async fn update_feedback(
    State(state): State<AppState>,
    Path(id): Path<String>,
    parts: Parts,
    Json(body): Json<UpdateFeedbackBody>,
) -> ApiResult<Json<StatusOk>> {
    let not_found = || ApiError::NotFound(format!("Feedback with ID {id} not found"));
    let feedback_id = Uuid::parse_str(&id).map_err(|_| not_found())?;
    let mut feedback = state
        .store
        .get_feedback(feedback_id)
        .await?
        .ok_or_else(not_found)?;
    match visit(&state, &parts, feedback.chatflow_id).await {
        Err(ApiError::NotFound(_)) => return Err(not_found()),
        other => other?,
    };
    let differs =
        |given: Option<String>, own: String| given.is_some_and(|g| !g.is_empty() && g != own);
    if differs(body.message_id, feedback.message_id.to_string())
        || differs(body.chat_id, feedback.chat_id.clone())
        || differs(body.chatflowid, feedback.chatflow_id.to_string())
    {
        return Err(ApiError::BadRequest(
            "a rating stays with its message: messageId, chatId and chatflowid cannot change"
                .into(),
        ));
    }
    if let Some(rating) = body.rating {
        feedback.rating = rating;
    }
    if body.content.is_some() {
        feedback.content = check_content(body.content)?;
    }
    if !state.store.update_feedback(&feedback).await? {
        return Err(not_found());
    }
    if body.rating.is_some() {
        crate::metrics::metrics()
            .feedback(&feedback.chatflow_id.to_string(), feedback.rating.as_str());
    }
    Ok(Json(StatusOk { status: "OK" }))
}

/// A visitor's contact (Flowise's lead form): at least one of name, e-mail
/// and phone; empty fields count as absent.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct LeadBody {
    /// The chatflow (required).
    #[serde(alias = "chatflowId")]
    chatflowid: Option<String>,
    /// The chat the contact was left in (a new id when absent).
    chat_id: Option<String>,
    name: Option<String>,
    email: Option<String>,
    phone: Option<String>,
}

impl LeadBody {
    fn into_lead(self, chatflow: Uuid) -> ApiResult<NewLead> {
        let given = |v: Option<String>| v.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let (name, email, phone) = (given(self.name), given(self.email), given(self.phone));
        if name.is_none() && email.is_none() && phone.is_none() {
            return Err(ApiError::BadRequest(
                "a lead needs a name, an email or a phone number".into(),
            ));
        }
        if name.as_ref().is_some_and(|n| n.chars().count() > MAX_NAME) {
            return Err(ApiError::BadRequest(format!(
                "'name' must be at most {MAX_NAME} characters"
            )));
        }
        if email.as_ref().is_some_and(|e| !is_email(e)) {
            return Err(ApiError::BadRequest(
                "'email' is not an e-mail address".into(),
            ));
        }
        let phone_ok = |p: &str| {
            p.len() <= MAX_PHONE
                && p.chars().filter(char::is_ascii_digit).count() >= 3
                && p.chars()
                    .all(|c| c.is_ascii_digit() || " +-().".contains(c))
        };
        if phone.as_ref().is_some_and(|p| !phone_ok(p)) {
            return Err(ApiError::BadRequest(format!(
                "'phone' must be a phone number (digits, spaces and + - ( ) ., at most {MAX_PHONE})"
            )));
        }
        let chat_id = given(self.chat_id).unwrap_or_else(|| Uuid::new_v4().to_string());
        if chat_id.len() > MAX_CHAT_ID {
            return Err(ApiError::BadRequest(format!(
                "'chatId' must be at most {MAX_CHAT_ID} characters"
            )));
        }
        Ok(NewLead {
            chatflow_id: chatflow,
            chat_id,
            name,
            email,
            phone,
        })
    }
}

async fn leave_lead(state: &AppState, parts: &Parts, body: LeadBody) -> ApiResult<Json<Lead>> {
    let flow = body
        .chatflowid
        .as_deref()
        .filter(|f| !f.is_empty())
        .ok_or_else(|| ApiError::missing("chatflowid"))?;
    let flow = parse_uuid("chatflowid", flow)?;
    let (flow, _) = visit(state, parts, flow).await?;
    let lead = body.into_lead(flow.id)?;
    Ok(Json(state.store.create_lead(lead).await?))
}

/// Keeps a visitor's contact (the chat widget's lead form).
#[utoipa::path(
    post,
    path = "/api/v1/leads",
    tag = "chat",
    security((), ("bearer" = []), ("apiKey" = [])),
    request_body = LeadBody,
    responses(
        (status = 200, description = "The lead", body = Lead),
        (status = 404, description = "No such chatflow", body = ErrorBody),
        (status = 412, description = "`chatflowid` is missing", body = ErrorBody),
        (status = 429, description = "Over the visitors' limit", body = ErrorBody),
        BodyErrors,
        CommonErrors
    )
)]
async fn create_lead(
    State(state): State<AppState>,
    parts: Parts,
    Json(body): Json<LeadBody>,
) -> ApiResult<Json<Lead>> {
    leave_lead(&state, &parts, body).await
}

/// The same, at the path the chat widget posts to (with a trailing slash).
#[utoipa::path(
    post,
    path = "/api/v1/leads/",
    tag = "chat",
    security((), ("bearer" = []), ("apiKey" = [])),
    request_body = LeadBody,
    responses(
        (status = 200, description = "The lead", body = Lead),
        (status = 404, description = "No such chatflow", body = ErrorBody),
        (status = 412, description = "`chatflowid` is missing", body = ErrorBody),
        (status = 429, description = "Over the visitors' limit", body = ErrorBody),
        BodyErrors,
        CommonErrors
    )
)]
async fn create_lead_slash(
    State(state): State<AppState>,
    parts: Parts,
    Json(body): Json<LeadBody>,
) -> ApiResult<Json<Lead>> {
    leave_lead(&state, &parts, body).await
}

/// Leads left with a chatflow's conversations.
#[utoipa::path(
    get,
    path = "/api/v1/leads/{id}",
    tag = "chat",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    responses(
        (status = 200, description = "The leads, oldest first", body = [Lead]),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn list_leads(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Vec<Lead>>> {
    auth.require(Permission::ChatflowsRead)?;
    let flow = super::chatflows::find(&state, &auth, id).await?;
    Ok(Json(state.store.list_leads(flow.id).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_read_flowise_spellings() {
        let ask = MessageAsk::parse(Some(
            "chatType=%5B%22EXTERNAL%22%2C%22WEBHOOK%22%5D&chatType=MCP&order=desc&sessionId=s\
             &feedback=true&feedbackType=THUMBS_UP&page=2&limit=5&hardDelete=true",
        ))
        .unwrap();
        assert_eq!(
            ask.filter.chat_types,
            vec![ChatType::External, ChatType::Webhook, ChatType::Mcp]
        );
        assert!(ask.descending && ask.with_feedback);
        assert_eq!(ask.filter.chat_id.as_deref(), Some("s"));
        assert_eq!(ask.filter.feedback_types, vec![Rating::ThumbsUp]);
        assert_eq!(ask.chats_page, Some((2, 5)));
        for bad in [
            "chatType=CHAT",
            "order=up",
            "messageId=x",
            "chatId=a&sessionId=b",
            "page=0",
        ] {
            assert_eq!(
                MessageAsk::parse(Some(bad)).unwrap_err().status_code(),
                400,
                "{bad}"
            );
        }
        // Paging is Flowise's: only with feedback.
        assert_eq!(MessageAsk::parse(Some("page=2")).unwrap().chats_page, None);
    }

    #[test]
    fn leads_need_a_valid_contact() {
        let body = |name: &str, email: &str, phone: &str| LeadBody {
            chatflowid: None,
            chat_id: None,
            name: Some(name.into()),
            email: Some(email.into()),
            phone: Some(phone.into()),
        };
        let flow = Uuid::nil();
        let lead = body("Ada", "", "+44 20 7946 0958").into_lead(flow).unwrap();
        assert_eq!(lead.email, None);
        assert_eq!(lead.phone.as_deref(), Some("+44 20 7946 0958"));
        assert!(body("", "", "").into_lead(flow).is_err());
        assert!(body("", "nope", "").into_lead(flow).is_err());
        assert!(body("", "", "call me").into_lead(flow).is_err());
    }
}
