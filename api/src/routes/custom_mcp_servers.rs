//! `/api/v1/custom-mcp-servers`: a workspace's remote MCP servers (Flowise 3.1),
//! for its flows' `customMcpServerTool` nodes. Reading needs `tools:read`,
//! changing `tools:write`. The rules are [`crate::services::mcp_servers`]'.

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::{BodyErrors, CommonErrors};
use crate::domain::{Page, Permission};
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query};
use crate::services::mcp_servers::{self, McpServerInput, McpServerRecord};

/// Flowise's paging of this list: 50 by default, at most 500.
const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 500;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_servers, create_server))
        .routes(routes!(get_server, update_server, delete_server))
        .routes(routes!(server_tools))
        .routes(routes!(authorize_server))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ServerPage {
    /// 1-based page number (default 1).
    page: Option<u32>,
    /// Servers per page (default 50, at most 500).
    limit: Option<u32>,
}

/// `{data, total}`: one page of servers and how many there are.
#[derive(Serialize, ToSchema)]
struct ServerListing {
    data: Vec<McpServerRecord>,
    total: u64,
}

/// The workspace's MCP servers, oldest first, without their tools.
#[utoipa::path(
    get,
    path = "/api/v1/custom-mcp-servers",
    tag = "mcp",
    params(ServerPage),
    responses((status = 200, description = "One page of servers", body = ServerListing), CommonErrors)
)]
async fn list_servers(
    auth: AuthUser,
    State(state): State<AppState>,
    Query(query): Query<ServerPage>,
) -> ApiResult<Json<ServerListing>> {
    auth.require(Permission::ToolsRead)?;
    let page = query.page.unwrap_or(1);
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if page == 0 || limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::BadRequest(format!(
            "'page' must be 1 or more and 'limit' between 1 and {MAX_LIMIT}"
        )));
    }
    let listing = mcp_servers::list(&state, auth.workspace(), Page { page, limit }).await?;
    Ok(Json(ServerListing {
        data: listing.items,
        total: listing.total,
    }))
}

/// Adds a server (`PENDING` until authorized). The answer has no `authConfig`.
#[utoipa::path(
    post,
    path = "/api/v1/custom-mcp-servers",
    tag = "mcp",
    request_body = McpServerInput,
    responses(
        (status = 201, description = "The server", body = McpServerRecord),
        (status = 412, description = "`name` or `serverUrl` is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn create_server(
    auth: AuthUser,
    State(state): State<AppState>,
    Json(input): Json<McpServerInput>,
) -> ApiResult<(StatusCode, Json<McpServerRecord>)> {
    auth.require(Permission::ToolsWrite)?;
    let created = mcp_servers::create(&state, auth.workspace(), input).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// One server: its headers masked, its tools as authorized (JSON text).
#[utoipa::path(
    get,
    path = "/api/v1/custom-mcp-servers/{id}",
    tag = "mcp",
    params(("id" = Uuid, Path, description = "Server id")),
    responses(
        (status = 200, description = "The server", body = McpServerRecord),
        (status = 404, description = "No such server in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn get_server(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<McpServerRecord>> {
    auth.require(Permission::ToolsRead)?;
    Ok(Json(mcp_servers::get(&state, auth.workspace(), id).await?))
}

/// Changes a server. A masked URL or header value sent back keeps the stored one;
/// `authType: NONE` drops the headers; a new URL or new headers make it
/// `PENDING` until authorized again.
#[utoipa::path(
    put,
    path = "/api/v1/custom-mcp-servers/{id}",
    tag = "mcp",
    params(("id" = Uuid, Path, description = "Server id")),
    request_body = McpServerInput,
    responses(
        (status = 200, description = "The server", body = McpServerRecord),
        (status = 404, description = "No such server in this workspace", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn update_server(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(input): Json<McpServerInput>,
) -> ApiResult<Json<McpServerRecord>> {
    auth.require(Permission::ToolsWrite)?;
    Ok(Json(
        mcp_servers::update(&state, auth.workspace(), id, input).await?,
    ))
}

/// Removes a server: `{raw: [], affected}` (Flowise's answer).
#[utoipa::path(
    delete,
    path = "/api/v1/custom-mcp-servers/{id}",
    tag = "mcp",
    params(("id" = Uuid, Path, description = "Server id")),
    responses((status = 200, description = "`{raw: [], affected: 0 | 1}`", body = Object), CommonErrors)
)]
async fn delete_server(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<axum::Json<Value>> {
    auth.require(Permission::ToolsWrite)?;
    let affected = mcp_servers::delete(&state, auth.workspace(), id).await?;
    Ok(axum::Json(json!({"raw": [], "affected": affected})))
}

/// The tools the server listed when authorized (`[]` before).
#[utoipa::path(
    get,
    path = "/api/v1/custom-mcp-servers/{id}/tools",
    tag = "mcp",
    params(("id" = Uuid, Path, description = "Server id")),
    responses(
        (status = 200, description = "`[{name, description, inputSchema}]`", body = Vec<Object>),
        (status = 404, description = "No such server in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn server_tools(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<axum::Json<Value>> {
    auth.require(Permission::ToolsRead)?;
    Ok(axum::Json(
        mcp_servers::tools(&state, auth.workspace(), id).await?,
    ))
}

/// Reaches the server (Streamable HTTP, through the address guard, 15 s at
/// most) and lists its tools: `AUTHORIZED` with them, or `ERROR` and a 400.
/// An `OAUTH2` server without a working token answers `PENDING` and the
/// `authorizationUrl` the user opens to grant weir access; the authorization
/// server then sends the browser to `/api/v1/oauth2-credential/callback`, which
/// completes it (`PUBLIC_URL`, else the request's host, names weir there).
#[utoipa::path(
    post,
    path = "/api/v1/custom-mcp-servers/{id}/authorize",
    tag = "mcp",
    params(("id" = Uuid, Path, description = "Server id")),
    responses(
        (status = 200, description = "The server with its tools, or (`OAUTH2`) `PENDING` with its `authorizationUrl`", body = McpServerRecord),
        (status = 400, description = "`Failed to connect to Custom MCP server: …`", body = ErrorBody),
        (status = 404, description = "No such server in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn authorize_server(
    auth: AuthUser,
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<McpServerRecord>> {
    auth.require(Permission::ToolsWrite)?;
    let redirect_uri = format!(
        "{}{CALLBACK_PATH}",
        super::public_base_url(&state, &headers).trim_end_matches('/')
    );
    Ok(Json(
        mcp_servers::authorize(&state, auth.workspace(), id, &redirect_uri).await?,
    ))
}

/// Where authorization servers send the user back (`routes::oauth`).
const CALLBACK_PATH: &str = "/api/v1/oauth2-credential/callback";
