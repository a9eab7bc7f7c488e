//! MCP over Streamable HTTP, and Flowise's routes publishing a chatflow to it.
//!
//! - `/api/v1/mcp-server/{id}` (get, post, put, delete, `/refresh`): a flow's
//!   publication and its token; the key needs `chatflows:write` (the answer
//!   shows the token, a credential to run the flow).
//! - `POST /api/v1/mcp/{chatflowId}`: Flowise's per-flow endpoint, with the
//!   flow's own bearer token, stateless.
//! - `POST /api/v1/mcp`: weir's workspace server, with a weir API key
//!   (`predictions:create`); `initialize` gives an `Mcp-Session-Id`, the
//!   conversation the session's calls share.
//!
//! Both speak the handshake versions and, chosen by an `MCP-Protocol-Version`
//! that is none of them, the per-request protocol (2026-07-28: no sessions,
//! each request's envelope in its `_meta`, errors with their mapped status).
//!
//! Every MCP answer is JSON-RPC, its errors included (`{"jsonrpc", "error",
//! "id"}`), as MCP clients read nothing else. A `tools/call` asking for progress
//! from a client that takes `text/event-stream` is answered as a stream: its
//! progress notifications, then its result; everything else as JSON. A page
//! (`Origin`) not in `MCP_CORS_ORIGINS` is refused (MCP's guard against DNS
//! rebinding).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::{BodyErrors, CommonErrors};
use crate::domain::{Chatflow, Permission};
use crate::http::AppState;
use crate::http::auth::{AuthUser, presented_key};
use crate::http::cors::Origins;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path};
use crate::services::mcp::Catalog;
use crate::services::mcp::protocol::{self, Endpoint, Incoming, ProtocolVersion, RoutingHeaders};
use crate::services::mcp::publication::{self, McpServerView, PublicationPatch};

/// Largest MCP message (Flowise's router declares 1 MB).
const MAX_MCP_BODY: usize = 1024 * 1024;
/// Longest `Mcp-Session-Id` taken (it becomes the conversation's `chatId`).
const MAX_SESSION_ID: usize = 256;
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
/// JSON-RPC code of an authentication failure (the MCP SDKs' and Flowise's).
const UNAUTHORIZED: i64 = -32001;
const SERVER_ERROR: i64 = -32000;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(
            get_publication,
            enable_publication,
            update_publication,
            disable_publication
        ))
        .routes(routes!(refresh_token))
        .merge(
            OpenApiRouter::new()
                .routes(routes!(
                    flow_endpoint,
                    flow_endpoint_session_end,
                    flow_endpoint_stream
                ))
                .routes(routes!(
                    workspace_endpoint,
                    workspace_session_end,
                    workspace_stream
                ))
                .layer(DefaultBodyLimit::max(MAX_MCP_BODY)),
        )
}

// ---------------------------------------------------------------- publication

/// `POST` and `PUT` bodies of `/mcp-server/{id}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct PublicationBody {
    /// 1–64 characters of `[a-zA-Z0-9_-]`; by default made of the flow's name.
    tool_name: Option<String>,
    /// What the tool does, for the calling model; by default `Execute the "<name>" flow`.
    description: Option<String>,
    /// `PUT` only: switch the publication on or off.
    enabled: Option<bool>,
}

impl From<PublicationBody> for PublicationPatch {
    fn from(body: PublicationBody) -> Self {
        PublicationPatch {
            tool_name: body.tool_name,
            description: body.description,
            enabled: body.enabled,
        }
    }
}

async fn owned_flow(state: &AppState, auth: &AuthUser, id: Uuid) -> ApiResult<Chatflow> {
    auth.require(Permission::ChatflowsWrite)?;
    state
        .store
        .get_chatflow(auth.workspace(), id)
        .await?
        .ok_or_else(|| ApiError::not_found("chatflow"))
}

/// A chatflow's MCP publication, with its endpoint's token (Flowise's blank
/// `{enabled: false, token: ""…}` for a flow never published).
#[utoipa::path(
    get,
    path = "/api/v1/mcp-server/{id}",
    tag = "mcp",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    responses(
        (status = 200, description = "The publication", body = McpServerView),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn get_publication(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<McpServerView>> {
    let flow = owned_flow(&state, &auth, id).await?;
    Ok(Json(publication::view(&state, &flow)?))
}

/// Publishes a chatflow as an MCP tool, with a new token; one already
/// published and on is answered as it is.
#[utoipa::path(
    post,
    path = "/api/v1/mcp-server/{id}",
    tag = "mcp",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    request_body = PublicationBody,
    responses(
        (status = 201, description = "The publication", body = McpServerView),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn enable_publication(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    body: Option<Json<PublicationBody>>,
) -> ApiResult<(StatusCode, Json<McpServerView>)> {
    let flow = owned_flow(&state, &auth, id).await?;
    let patch = body.map(|Json(b)| b).unwrap_or_default().into();
    let view = publication::enable(&state, &flow, patch).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Changes a publication's tool name, description or switch.
#[utoipa::path(
    put,
    path = "/api/v1/mcp-server/{id}",
    tag = "mcp",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    request_body = PublicationBody,
    responses(
        (status = 200, description = "The publication", body = McpServerView),
        (status = 404, description = "No such chatflow, or it was never published", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn update_publication(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<PublicationBody>,
) -> ApiResult<Json<McpServerView>> {
    let flow = owned_flow(&state, &auth, id).await?;
    Ok(Json(publication::update(&state, &flow, body.into()).await?))
}

/// Switches a publication off (kept, as Flowise does: enabling it again makes
/// a new token).
#[utoipa::path(
    delete,
    path = "/api/v1/mcp-server/{id}",
    tag = "mcp",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    responses(
        (status = 200, description = "`{\"message\": \"MCP server config disabled\"}`", body = Object),
        (status = 404, description = "No such chatflow, or it was never published", body = ErrorBody),
        CommonErrors
    )
)]
async fn disable_publication(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<axum::Json<Value>> {
    let flow = owned_flow(&state, &auth, id).await?;
    publication::disable(&state, &flow).await?;
    Ok(axum::Json(json!({"message": "MCP server config disabled"})))
}

/// Gives a publication a new token; the old one stops working at once.
#[utoipa::path(
    post,
    path = "/api/v1/mcp-server/{id}/refresh",
    tag = "mcp",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    responses(
        (status = 200, description = "The publication with its new token", body = McpServerView),
        (status = 404, description = "No such chatflow, or it was never published", body = ErrorBody),
        CommonErrors
    )
)]
async fn refresh_token(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<McpServerView>> {
    let flow = owned_flow(&state, &auth, id).await?;
    Ok(Json(publication::refresh(&state, &flow).await?))
}

// ------------------------------------------------------------------ transport

/// A refused MCP request: its status and its JSON-RPC error (id null).
struct Refusal {
    status: StatusCode,
    code: i64,
    message: String,
}

fn refuse(status: StatusCode, code: i64, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        code,
        message: message.into(),
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let body = protocol::error(Value::Null, self.code, self.message);
        (self.status, axum::Json(body)).into_response()
    }
}

/// What every MCP request is checked for before its body is read: the page it
/// comes from, the protocol version it names, and a JSON body.
fn check_request(state: &AppState, headers: &HeaderMap) -> Result<(), Refusal> {
    if let Some(origin) = headers.get(header::ORIGIN)
        && !Origins::parse(&state.config.mcp_cors_origins).admits(origin.as_bytes())
    {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            SERVER_ERROR,
            "Forbidden: this origin may not call the MCP endpoint (MCP_CORS_ORIGINS)",
        ));
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        return Err(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            protocol::INVALID_REQUEST,
            "Unsupported Media Type: the body must be JSON ('Content-Type: application/json')",
        ));
    }
    Ok(())
}

/// The per-request protocol's routing headers, when the request speaks it: an
/// `MCP-Protocol-Version` that is not a handshake version (an unknown one is
/// answered by the per-request checks, naming the version weir speaks). A
/// routing header sent twice is a 400.
fn per_request(headers: &HeaderMap) -> Result<Option<RoutingHeaders>, Refusal> {
    for name in [VERSION_HEADER, METHOD_HEADER, NAME_HEADER] {
        if headers.get_all(name).iter().count() > 1 {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                protocol::HEADER_MISMATCH,
                format!("the {name} header appears more than once"),
            ));
        }
    }
    let text = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or_default().to_owned())
    };
    let Some(version) = text(VERSION_HEADER) else {
        return Ok(None);
    };
    if ProtocolVersion::known(&version).is_some() {
        return Ok(None);
    }
    Ok(Some(RoutingHeaders {
        version,
        method: text(METHOD_HEADER),
        name: text(NAME_HEADER).and_then(|v| protocol::decode_header_value(&v)),
    }))
}

fn accepts_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"))
}

/// Answers a read body over `endpoint`: 400 for one that is not JSON-RPC, 202
/// when it holds no request, a stream for a call asking for progress (or that
/// may ask the person a flow's question) from a client that takes one, else JSON.
async fn respond(
    endpoint: Endpoint,
    headers: &HeaderMap,
    incoming: Result<Incoming, Value>,
) -> Response {
    let incoming = match incoming {
        Ok(incoming) => incoming,
        Err(error) => return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response(),
    };
    if !incoming.has_requests() {
        // Notifications and responses: taken, nothing to say.
        let _ = endpoint.answer_all(incoming).await;
        return StatusCode::ACCEPTED.into_response();
    }
    let streams = incoming.progress_token().is_some() || (incoming.is_call() && endpoint.elicits());
    if streams && accepts_stream(headers) {
        let Incoming::One(message) = incoming else {
            return StatusCode::ACCEPTED.into_response();
        };
        let (tx, rx) = mpsc::channel::<Value>(64);
        tokio::spawn(async move {
            if let Some(answer) = endpoint.answer(message, Some(tx.clone())).await {
                let _ = tx.send(answer).await;
            }
        });
        let events = futures_util::stream::unfold(rx, |mut rx| async move {
            let message = rx.recv().await?;
            let event = Event::default().event("message").data(message.to_string());
            Some((Ok::<_, std::convert::Infallible>(event), rx))
        });
        return Sse::new(events)
            .keep_alive(KeepAlive::default())
            .into_response();
    }
    let per_request = endpoint.per_request.is_some();
    match endpoint.answer_all(incoming).await {
        Some(answer) => {
            let status = answer
                .pointer("/error/code")
                .and_then(Value::as_i64)
                .filter(|_| per_request)
                .map_or(StatusCode::OK, |code| {
                    StatusCode::from_u16(protocol::per_request_status(code))
                        .unwrap_or(StatusCode::OK)
                });
            (status, axum::Json(answer)).into_response()
        }
        None => StatusCode::ACCEPTED.into_response(),
    }
}

// ------------------------------------------------------- Flowise's endpoint

/// A flow's publication, when `headers` carry its token; else the JSON-RPC
/// answer Flowise gives (401 without a bearer token or with a wrong one, 404
/// for a flow not published or switched off).
async fn published_flow(
    state: &AppState,
    headers: &HeaderMap,
    id: Uuid,
) -> Result<Arc<Chatflow>, Refusal> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let Some(token) = token else {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            UNAUTHORIZED,
            "Unauthorized: missing or invalid Authorization header. Use Bearer <token>.",
        ));
    };
    let flow = state.store.find_chatflow(id).await.map_err(|e| {
        tracing::error!(chatflow = %id, error = %e, "cannot read a chatflow for MCP");
        refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            SERVER_ERROR,
            "the server cannot answer now; retry",
        )
    })?;
    let Some(flow) = flow.filter(|f| f.mcp_server.as_ref().is_some_and(|c| c.enabled)) else {
        return Err(refuse(
            StatusCode::NOT_FOUND,
            SERVER_ERROR,
            "MCP server not found",
        ));
    };
    if !flow.mcp_server.as_ref().is_some_and(|c| c.accepts(token)) {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            UNAUTHORIZED,
            "Unauthorized",
        ));
    }
    Ok(flow)
}

/// Flowise's MCP endpoint of one published chatflow (Streamable HTTP,
/// stateless): JSON-RPC in, JSON-RPC out (or a stream of it). Authenticated by
/// the publication's own token (`Authorization: Bearer <token>`), not an API key.
#[utoipa::path(
    post,
    path = "/api/v1/mcp/{chatflowId}",
    tag = "mcp",
    security((), ("bearer" = [])),
    params(("chatflowId" = Uuid, Path, description = "Chatflow id")),
    request_body(content = Object, description = "A JSON-RPC message or batch"),
    responses(
        (status = 200, description = "The JSON-RPC answer, or a stream of messages ending with it",
         content((Object = "application/json"), (String = "text/event-stream"))),
        (status = 202, description = "Only notifications were sent"),
        (status = 400, description = "Not JSON-RPC, or (per request) an envelope that is missing, disagrees with the headers, or names a version weir does not speak", body = Object),
        (status = 401, description = "No token, or a wrong one", body = Object),
        (status = 403, description = "A page of an origin not in MCP_CORS_ORIGINS", body = Object),
        (status = 404, description = "The flow is not published, or switched off; per request, a method weir does not have", body = Object),
        (status = 415, description = "Not a JSON body", body = Object),
        (status = 413, description = "Over 1 MiB", body = ErrorBody),
    )
)]
async fn flow_endpoint(
    State(state): State<AppState>,
    Path(chatflow_id): Path<Uuid>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Refusal> {
    check_request(&state, &headers)?;
    let per_request = per_request(&headers)?;
    let flow = published_flow(&state, &headers, chatflow_id).await?;
    let name = flow
        .mcp_server
        .as_ref()
        .map(|c| c.tool_name_for(&flow.name))
        .unwrap_or_default();
    let endpoint = Endpoint {
        services: state,
        catalog: Catalog::Flow(flow),
        chat_id: None,
        server_name: format!("flowise-{name}"),
        kind: "flow",
        per_request,
    };
    Ok(respond(endpoint, &headers, Incoming::parse(&body)).await)
}

fn stateless_refusal(message: &str) -> Response {
    let mut response =
        refuse(StatusCode::METHOD_NOT_ALLOWED, SERVER_ERROR, message).into_response();
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    response
}

/// Flowise's endpoint keeps no sessions: there is none to end (405).
#[utoipa::path(
    delete,
    path = "/api/v1/mcp/{chatflowId}",
    tag = "mcp",
    security(()),
    params(("chatflowId" = Uuid, Path, description = "Chatflow id")),
    responses((status = 405, description = "Session termination is not supported", body = Object))
)]
async fn flow_endpoint_session_end() -> Response {
    stateless_refusal("Session termination is not supported in stateless mode.")
}

/// No stream of server-sent messages is offered (405): answers come on the POST.
#[utoipa::path(
    get,
    path = "/api/v1/mcp/{chatflowId}",
    tag = "mcp",
    security(()),
    params(("chatflowId" = Uuid, Path, description = "Chatflow id")),
    responses((status = 405, description = "No server-initiated stream", body = Object))
)]
async fn flow_endpoint_stream() -> Response {
    stateless_refusal("This server sends no messages of its own: POST requests to it.")
}

// ------------------------------------------------------- the workspace server

/// The key a workspace server call presents, with `predictions:create`; else
/// the JSON-RPC answer (401, 403).
async fn workspace_caller(state: &AppState, parts: &Parts) -> Result<AuthUser, Refusal> {
    let refused = |e: ApiError| {
        let status = e.status_code();
        let code = if status == StatusCode::UNAUTHORIZED {
            UNAUTHORIZED
        } else {
            SERVER_ERROR
        };
        refuse(status, code, e.to_string())
    };
    let Some(key) = presented_key(parts).map_err(refused)? else {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            UNAUTHORIZED,
            "Unauthorized: a weir API key is required ('Authorization: Bearer <key>')",
        ));
    };
    let auth = AuthUser::authenticate(state, &key).await.map_err(refused)?;
    auth.require(Permission::PredictionsCreate)
        .map_err(refused)?;
    Ok(auth)
}

/// The session a request names, if it is one weir can keep a conversation under.
fn session_of(headers: &HeaderMap) -> Result<Option<String>, Refusal> {
    let Some(value) = headers.get(SESSION_HEADER) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default();
    let visible = !text.is_empty() && text.bytes().all(|b| (0x21..=0x7e).contains(&b));
    if !visible || text.len() > MAX_SESSION_ID {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            protocol::INVALID_REQUEST,
            "Mcp-Session-Id must be 1 to 256 visible ASCII characters",
        ));
    }
    Ok(Some(text.to_owned()))
}

/// weir's MCP server of a workspace: every chatflow published and switched on
/// that the key may run is a tool (its form's fields as its arguments for a
/// form agentflow). Authenticated by a weir API key with `predictions:create`.
/// `initialize` answers an `Mcp-Session-Id`: calls that send it share one
/// conversation (its `chatId`); calls without one are each their own.
#[utoipa::path(
    post,
    path = "/api/v1/mcp",
    tag = "mcp",
    request_body(content = Object, description = "A JSON-RPC message or batch"),
    responses(
        (status = 200, description = "The JSON-RPC answer, or a stream of messages ending with it",
         content((Object = "application/json"), (String = "text/event-stream"))),
        (status = 202, description = "Only notifications were sent"),
        (status = 400, description = "Not JSON-RPC, a malformed session id, or (per request) an envelope that is missing, disagrees with the headers, or names a version weir does not speak", body = Object),
        (status = 401, description = "No API key, or an unknown one", body = Object),
        (status = 403, description = "The key lacks predictions:create, or a page of an origin not in MCP_CORS_ORIGINS", body = Object),
        (status = 404, description = "Per request (2026-07-28): a method weir does not have", body = Object),
        (status = 415, description = "Not a JSON body", body = Object),
        (status = 413, description = "Over 1 MiB", body = ErrorBody),
    )
)]
async fn workspace_endpoint(
    State(state): State<AppState>,
    parts: Parts,
    body: Bytes,
) -> Result<Response, Refusal> {
    let headers = &parts.headers;
    check_request(&state, headers)?;
    let per_request = per_request(headers)?;
    let auth = workspace_caller(&state, &parts).await?;
    // The per-request protocol has no sessions: each call is its own chat.
    let session = match per_request {
        Some(_) => None,
        None => session_of(headers)?,
    };
    let incoming = Incoming::parse(&body);
    let initialize = incoming
        .as_ref()
        .is_ok_and(|incoming| incoming.initialize().is_some());
    let new_session = (initialize && session.is_none()).then(|| Uuid::new_v4().to_string());
    let session = session.or_else(|| new_session.clone());
    let endpoint = Endpoint {
        services: state,
        catalog: Catalog::Workspace {
            workspace: auth.workspace(),
            key_id: auth.key.id,
        },
        chat_id: session,
        server_name: "weir".into(),
        kind: "workspace",
        per_request,
    };
    let mut response = respond(endpoint, headers, incoming).await;
    if let Some(id) = new_session.and_then(|id| HeaderValue::from_str(&id).ok()) {
        response.headers_mut().insert(SESSION_HEADER, id);
    }
    Ok(response)
}

/// Ends a session: its conversation stays in the chat history; weir forgets
/// only whether its client answers a flow's questions (204).
#[utoipa::path(
    delete,
    path = "/api/v1/mcp",
    tag = "mcp",
    responses(
        (status = 204, description = "The session is over"),
        (status = 401, description = "No API key, or an unknown one", body = Object),
    )
)]
async fn workspace_session_end(
    State(state): State<AppState>,
    parts: Parts,
) -> Result<StatusCode, Refusal> {
    workspace_caller(&state, &parts).await?;
    if let Ok(Some(session)) = session_of(&parts.headers) {
        state.elicitations.forget(&session);
    }
    Ok(StatusCode::NO_CONTENT)
}

/// No stream of server-sent messages is offered (405): answers come on the POST.
#[utoipa::path(
    get,
    path = "/api/v1/mcp",
    tag = "mcp",
    responses((status = 405, description = "No server-initiated stream", body = Object))
)]
async fn workspace_stream() -> Response {
    stateless_refusal("This server sends no messages of its own: POST requests to it.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_must_be_visible_ascii() {
        let mut headers = HeaderMap::new();
        assert_eq!(session_of(&headers).ok(), Some(None));
        headers.insert(SESSION_HEADER, HeaderValue::from_static("abc-123"));
        assert_eq!(session_of(&headers).ok(), Some(Some("abc-123".into())));
        headers.insert(SESSION_HEADER, HeaderValue::from_static("has space"));
        assert!(session_of(&headers).is_err());
    }
}
