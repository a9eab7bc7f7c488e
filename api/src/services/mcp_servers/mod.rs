//! A workspace's remote MCP servers (Flowise 3.1's `/custom-mcp-servers`): kept
//! with their headers sealed, shown masked, *authorized* (reached, and their
//! tools listed and kept), and opened for the runs whose `customMcpServerTool`
//! nodes name them.
//!
//! Flowise's rules: the URL is http(s) and passes the address guard; at most 25
//! headers, no hop-by-hop or reserved ones, values of at most 2048 characters; a
//! URL is shown as its origin and `/************`, a header value as
//! `************`, and sending either back unchanged keeps the stored one.
//!
//! weir adds `authType: OAUTH2` ([`oauth`]): tokens granted once through the
//! API and the user's browser, sealed with the server, refreshed for runs.

pub mod oauth;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use super::sealed::{open_text, seal_text};
use super::{ServiceError, ServiceResult, Services};
use crate::domain::mcp::{
    CustomMcpServer, MASK, McpAuthType, McpServerStatus, masked_url, validate_headers,
};
use crate::domain::{Page, time};
use crate::flow::FlowError;
use crate::flow::component::{McpEndpoint, McpServer};
use crate::store::Listing;
use oauth::OAuthSetup;

/// How long `authorize` waits for a server (Flowise's `CUSTOM_MCP_AUTHORIZE_TIMEOUT_MS`).
const AUTHORIZE_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest tool listing kept (Flowise's `CUSTOM_MCP_TOOLS_MAX_BYTES`).
const MAX_TOOLS_BYTES: usize = 512 * 1024;

/// A stored server as Flowise answers it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerRecord {
    pub id: Uuid,
    pub name: String,
    /// The origin, the rest masked.
    pub server_url: String,
    pub icon_src: Option<String>,
    pub color: Option<String>,
    pub auth_type: McpAuthType,
    /// `{headers: {name: "************"}}` (one server's answer only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub auth_config: Option<Value>,
    /// The server's tools as `authorize` listed them (JSON text; one server's answer only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<String>,
    /// `OAUTH2`, from `authorize`: where the user grants weir access (weir's
    /// callback then completes the authorization).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authorization_url: Option<String>,
    pub tool_count: u32,
    pub status: McpServerStatus,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_date: time::Timestamp,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_date: time::Timestamp,
    pub workspace_id: Uuid,
}

/// What a client sends to create or change a server.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerInput {
    pub name: Option<String>,
    pub server_url: Option<String>,
    pub icon_src: Option<String>,
    pub color: Option<String>,
    pub auth_type: Option<McpAuthType>,
    /// `{"headers": {"Authorization": "Bearer …"}}` with `authType: CUSTOM_HEADERS`;
    /// `{clientId?, clientSecret?, scope?}` with `OAUTH2` (a client registered
    /// by hand; without one weir registers itself).
    #[schema(value_type = Option<Object>)]
    pub auth_config: Option<Value>,
}

fn sealing_context(server: &CustomMcpServer) -> String {
    format!(
        "customMcpServer/{}/{}/authConfig",
        server.workspace_id, server.id
    )
}

/// A server's `authConfig` as shown: header names with masked values, or the
/// OAuth client (never a secret or a token).
fn shown_auth(services: &Services, server: &CustomMcpServer) -> ServiceResult<Option<Value>> {
    Ok(match server.auth_type {
        McpAuthType::None => None,
        McpAuthType::CustomHeaders => Some(masked_headers(&headers_of(services, server)?)),
        McpAuthType::OAuth2 => Some(oauth_of(services, server)?.shown()),
    })
}

fn masked_headers(headers: &[(String, String)]) -> Value {
    let masked: Map<String, Value> = headers
        .iter()
        .map(|(name, _)| (name.clone(), Value::String(MASK.into())))
        .collect();
    json!({"headers": masked})
}

/// The record as shown; `auth_config` (one server's answer) comes with its tools.
fn record(server: CustomMcpServer, auth_config: Option<Value>, detail: bool) -> McpServerRecord {
    let auth_config = if detail { auth_config } else { None };
    McpServerRecord {
        id: server.id,
        name: server.name,
        server_url: masked_url(&server.server_url),
        icon_src: server.icon_src,
        color: server.color,
        auth_type: server.auth_type,
        auth_config,
        tools: if detail { server.tools } else { None },
        authorization_url: None,
        tool_count: server.tool_count,
        status: server.status,
        created_date: server.created_date,
        updated_date: server.updated_date,
        workspace_id: server.workspace_id,
    }
}

/// A server's stored `authConfig`, opened (`{}` when none).
fn auth_of(services: &Services, server: &CustomMcpServer) -> ServiceResult<Value> {
    let Some(sealed) = &server.sealed_auth else {
        return Ok(json!({}));
    };
    let plain = open_text(&services.keyring, &sealing_context(server), sealed)?;
    serde_json::from_str(&plain)
        .map_err(|e| ServiceError::Internal(format!("a stored MCP server's authConfig: {e}")))
}

/// A server's OAuth setup, opened (empty when it has none).
fn oauth_of(services: &Services, server: &CustomMcpServer) -> ServiceResult<OAuthSetup> {
    match auth_of(services, server)?.get_mut("oauth").map(Value::take) {
        None => Ok(OAuthSetup::default()),
        Some(setup) => serde_json::from_value(setup)
            .map_err(|e| ServiceError::Internal(format!("a stored MCP server's OAuth setup: {e}"))),
    }
}

fn seal_oauth(
    services: &Services,
    server: &CustomMcpServer,
    setup: &OAuthSetup,
) -> ServiceResult<Option<String>> {
    let plain = json!({"oauth": setup}).to_string();
    seal_text(&services.keyring, &sealing_context(server), &plain).map(Some)
}

/// A server's stored headers, opened.
fn headers_of(
    services: &Services,
    server: &CustomMcpServer,
) -> ServiceResult<Vec<(String, String)>> {
    let config = auth_of(services, server)?;
    let headers = config
        .get("headers")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    Ok(headers
        .into_iter()
        .filter_map(|(name, value)| Some((name, value.as_str()?.to_owned())))
        .collect())
}

/// The URL, checked: http(s), and no address the guard refuses.
fn check_url(services: &Services, url: &str) -> ServiceResult<String> {
    let url = url.trim();
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| ServiceError::Invalid(format!("'serverUrl' is not a URL: {e}")))?;
    services
        .tools
        .web
        .check(&parsed)
        .map_err(|why| ServiceError::Invalid(format!("'serverUrl' is {why}")))?;
    Ok(url.to_owned())
}

/// The headers of `auth_config` (`{headers}`), a masked value replaced by the
/// stored one of that name.
fn given_headers(
    auth_config: Option<&Value>,
    stored: &[(String, String)],
) -> ServiceResult<Vec<(String, String)>> {
    let Some(headers) = auth_config.and_then(|c| c.get("headers")) else {
        return Ok(Vec::new());
    };
    let Some(headers) = headers.as_object() else {
        return Err(ServiceError::Invalid(
            "'authConfig.headers' must be an object of header names and values".into(),
        ));
    };
    let mut checked = validate_headers(headers).map_err(ServiceError::Invalid)?;
    for (name, value) in &mut checked {
        if value == MASK {
            match stored.iter().find(|(n, _)| n == name) {
                Some((_, kept)) => value.clone_from(kept),
                None => {
                    return Err(ServiceError::Invalid(format!(
                        "the header '{name}' is masked but none is stored: give its value"
                    )));
                }
            }
        }
    }
    Ok(checked)
}

fn seal_headers(
    services: &Services,
    server: &CustomMcpServer,
    headers: &[(String, String)],
) -> ServiceResult<Option<String>> {
    if headers.is_empty() {
        return Ok(None);
    }
    let map: Map<String, Value> = headers
        .iter()
        .map(|(n, v)| (n.clone(), Value::String(v.clone())))
        .collect();
    let plain = json!({"headers": map}).to_string();
    seal_text(&services.keyring, &sealing_context(server), &plain).map(Some)
}

pub async fn create(
    services: &Services,
    workspace: Uuid,
    input: McpServerInput,
) -> ServiceResult<McpServerRecord> {
    let name = input
        .name
        .filter(|n| !n.trim().is_empty())
        .ok_or(ServiceError::Missing("name"))?;
    let url = check_url(
        services,
        input
            .server_url
            .as_deref()
            .ok_or(ServiceError::Missing("serverUrl"))?,
    )?;
    let auth_type = input.auth_type.unwrap_or_default();
    let headers = match auth_type {
        McpAuthType::CustomHeaders => given_headers(input.auth_config.as_ref(), &[])?,
        McpAuthType::None | McpAuthType::OAuth2 => Vec::new(),
    };
    let setup = match auth_type {
        McpAuthType::OAuth2 => Some(OAuthSetup::given(
            input.auth_config.as_ref(),
            &OAuthSetup::default(),
        )?),
        McpAuthType::None | McpAuthType::CustomHeaders => None,
    };
    let now = time::now();
    let mut server = CustomMcpServer {
        id: Uuid::new_v4(),
        workspace_id: workspace,
        name,
        server_url: url,
        icon_src: input.icon_src,
        color: input.color,
        auth_type,
        sealed_auth: None,
        tools: None,
        tool_count: 0,
        status: McpServerStatus::Pending,
        created_date: now,
        updated_date: now,
    };
    server.sealed_auth = match &setup {
        Some(setup) => seal_oauth(services, &server, setup)?,
        None => seal_headers(services, &server, &headers)?,
    };
    services.store.create_mcp_server(&server).await?;
    Ok(record(server, None, false))
}

async fn stored(services: &Services, workspace: Uuid, id: Uuid) -> ServiceResult<CustomMcpServer> {
    services
        .store
        .get_mcp_server(workspace, id)
        .await?
        .ok_or(ServiceError::NotFound("MCP server"))
}

/// One server, its headers masked, its tools as listed.
pub async fn get(services: &Services, workspace: Uuid, id: Uuid) -> ServiceResult<McpServerRecord> {
    let server = stored(services, workspace, id).await?;
    let shown = shown_auth(services, &server)?;
    Ok(record(server, shown, true))
}

pub async fn list(
    services: &Services,
    workspace: Uuid,
    page: Page,
) -> ServiceResult<Listing<McpServerRecord>> {
    let listing = services.store.list_mcp_servers(workspace, page).await?;
    Ok(Listing {
        total: listing.total,
        items: listing
            .items
            .into_iter()
            .map(|s| record(s, None, false))
            .collect(),
    })
}

/// The tools `authorize` listed (`[]` before).
pub async fn tools(services: &Services, workspace: Uuid, id: Uuid) -> ServiceResult<Value> {
    let server = stored(services, workspace, id).await?;
    Ok(server
        .tools
        .as_deref()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_else(|| json!([])))
}

/// Changes a server. **Decision**: a new URL, new headers or another OAuth
/// client make it `PENDING` again, its tools (and tokens) forgotten, until it
/// is authorized anew.
pub async fn update(
    services: &Services,
    workspace: Uuid,
    id: Uuid,
    input: McpServerInput,
) -> ServiceResult<McpServerRecord> {
    let mut server = stored(services, workspace, id).await?;
    let headers = headers_of(services, &server)?;
    let setup = oauth_of(services, &server)?;
    let mut reached_anew = false;
    if let Some(name) = input.name.filter(|n| !n.trim().is_empty()) {
        server.name = name;
    }
    if let Some(url) = input.server_url
        && url != masked_url(&server.server_url)
    {
        let url = check_url(services, &url)?;
        reached_anew |= url != server.server_url;
        server.server_url = url;
    }
    if input.icon_src.is_some() {
        server.icon_src = input.icon_src;
    }
    if input.color.is_some() {
        server.color = input.color;
    }
    let auth_type = input.auth_type.unwrap_or(server.auth_type);
    reached_anew |= auth_type != server.auth_type;
    match auth_type {
        McpAuthType::OAuth2 => {
            let kept = if server.auth_type == McpAuthType::OAuth2 {
                setup
            } else {
                OAuthSetup::default()
            };
            let mut given = OAuthSetup::given(input.auth_config.as_ref(), &kept)?;
            if reached_anew {
                given.forget_grant();
            }
            reached_anew |= given != kept;
            server.sealed_auth = seal_oauth(services, &server, &given)?;
        }
        McpAuthType::None | McpAuthType::CustomHeaders => {
            let new_headers = match auth_type {
                McpAuthType::CustomHeaders if input.auth_config.is_some() => {
                    given_headers(input.auth_config.as_ref(), &headers)?
                }
                McpAuthType::CustomHeaders if server.auth_type == McpAuthType::CustomHeaders => {
                    headers.clone()
                }
                _ => Vec::new(),
            };
            if new_headers != headers || server.auth_type == McpAuthType::OAuth2 {
                reached_anew = true;
                server.sealed_auth = seal_headers(services, &server, &new_headers)?;
            }
        }
    }
    server.auth_type = auth_type;
    if reached_anew {
        server.status = McpServerStatus::Pending;
        server.tools = None;
        server.tool_count = 0;
    }
    server.updated_date = time::now();
    if !services.store.update_mcp_server(&server).await? {
        return Err(ServiceError::NotFound("MCP server"));
    }
    let shown = shown_auth(services, &server)?;
    Ok(record(server, shown, true))
}

/// Lists the server's tools at `remote` (15 s at most) and keeps them:
/// `AUTHORIZED`, or why not (the caller stores the server either way).
async fn list_tools(
    services: &Services,
    server: &mut CustomMcpServer,
    remote: &McpServer,
) -> Result<(), String> {
    services.tools.mcp.forget(remote);
    let listed = match tokio::time::timeout(
        AUTHORIZE_TIMEOUT,
        services.tools.mcp.remote_tools(remote),
    )
    .await
    {
        Ok(listed) => listed?,
        Err(_) => {
            return Err(format!(
                "no answer within {} s",
                AUTHORIZE_TIMEOUT.as_secs()
            ));
        }
    };
    let listing: Vec<Value> = listed
        .iter()
        .map(|t| json!({"name": t.remote_name, "description": t.description, "inputSchema": t.input_schema}))
        .collect();
    let text = Value::Array(listing).to_string();
    if text.len() > MAX_TOOLS_BYTES {
        return Err(format!(
            "its tool listing is over {} KiB",
            MAX_TOOLS_BYTES / 1024
        ));
    }
    server.tools = Some(text);
    server.tool_count = u32::try_from(listed.len()).unwrap_or(u32::MAX);
    server.status = McpServerStatus::Authorized;
    Ok(())
}

/// Reaches the server and lists its tools: `AUTHORIZED` with them kept, or
/// `ERROR` and a 400 saying why. An `OAUTH2` server without a working token
/// answers `PENDING` with the `authorizationUrl` the user opens; weir's
/// callback (`redirect_uri`) then completes it.
pub async fn authorize(
    services: &Services,
    workspace: Uuid,
    id: Uuid,
    redirect_uri: &str,
) -> ServiceResult<McpServerRecord> {
    let mut server = stored(services, workspace, id).await?;
    if server.auth_type == McpAuthType::OAuth2 {
        return authorize_oauth(services, server, redirect_uri).await;
    }
    server.updated_date = time::now();
    let remote = McpServer {
        url: server.server_url.clone(),
        headers: headers_of(services, &server)?,
        grant: None,
    };
    if let Err(why) = list_tools(services, &mut server, &remote).await {
        return Err(unreached(services, &mut server, why).await);
    }
    services.store.update_mcp_server(&server).await?;
    let shown = shown_auth(services, &server)?;
    Ok(record(server, shown, true))
}

/// `authorize` of an `OAUTH2` server: a working token (refreshed if it must
/// be) lists the tools at once; without one, a new grant begins.
async fn authorize_oauth(
    services: &Services,
    server: CustomMcpServer,
    redirect_uri: &str,
) -> ServiceResult<McpServerRecord> {
    let (workspace, id) = (server.workspace_id, server.id);
    if let Ok(token) = oauth::access_token(services, &server).await {
        // Read again: a refresh stored the server with its new tokens.
        let mut server = stored(services, workspace, id).await?;
        let remote = McpServer {
            url: server.server_url.clone(),
            headers: vec![oauth::bearer_header(&token)],
            grant: None,
        };
        if list_tools(services, &mut server, &remote).await.is_ok() {
            server.updated_date = time::now();
            services.store.update_mcp_server(&server).await?;
            let shown = shown_auth(services, &server)?;
            return Ok(record(server, shown, true));
        }
    }
    let mut server = stored(services, workspace, id).await?;
    let mut setup = oauth_of(services, &server)?;
    server.updated_date = time::now();
    match oauth::begin(services, &server, &mut setup, redirect_uri).await {
        Ok(url) => {
            server.sealed_auth = seal_oauth(services, &server, &setup)?;
            server.status = McpServerStatus::Pending;
            services.store.update_mcp_server(&server).await?;
            let shown = shown_auth(services, &server)?;
            let mut answer = record(server, shown, true);
            answer.authorization_url = Some(url);
            Ok(answer)
        }
        Err(why) => Err(unreached(services, &mut server, why).await),
    }
}

/// Stores `server` as `ERROR` once weir could not reach it (`why`); returns
/// the caller's 400, in Flowise's words.
async fn unreached(services: &Services, server: &mut CustomMcpServer, why: String) -> ServiceError {
    server.status = McpServerStatus::Error;
    if let Err(e) = services.store.update_mcp_server(server).await {
        return e.into();
    }
    ServiceError::Invalid(format!("Failed to connect to Custom MCP server: {why}"))
}

/// The record of a server, as the callback that completed its authorization
/// shows it.
pub fn shown(services: &Services, server: CustomMcpServer) -> ServiceResult<McpServerRecord> {
    let auth = shown_auth(services, &server)?;
    Ok(record(server, auth, true))
}

pub async fn delete(services: &Services, workspace: Uuid, id: Uuid) -> ServiceResult<u64> {
    let deleted = services.store.delete_mcp_server(workspace, id).await?;
    if deleted {
        services.refreshes.forget(id);
    }
    Ok(u64::from(deleted))
}

/// A server a run's `customMcpServerTool` names, its headers opened (an
/// `OAUTH2` server's access token, refreshed when it is about to end); it
/// must be authorized.
pub async fn open(
    services: &Services,
    workspace: Uuid,
    id: Uuid,
) -> ServiceResult<Arc<McpEndpoint>> {
    let server = services
        .store
        .get_mcp_server(workspace, id)
        .await?
        .ok_or_else(|| {
            FlowError::invalid(format!(
                "the flow uses MCP server {id}, which is not a server of this workspace"
            ))
        })?;
    if server.status != McpServerStatus::Authorized {
        return Err(FlowError::invalid(format!(
            "the flow uses MCP server '{}' ({id}), which is not authorized: \
             POST /api/v1/custom-mcp-servers/{id}/authorize",
            server.name
        ))
        .into());
    }
    let headers = match server.auth_type {
        McpAuthType::OAuth2 => vec![oauth::bearer_header(
            &oauth::access_token(services, &server).await?,
        )],
        McpAuthType::None | McpAuthType::CustomHeaders => headers_of(services, &server)?,
    };
    Ok(Arc::new(McpEndpoint::Remote(McpServer {
        url: server.server_url,
        headers,
        grant: None,
    })))
}
