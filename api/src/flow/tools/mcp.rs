//! MCP servers' tools (Flowise's `customMCP`): a remote server's tools listed and
//! called over Streamable HTTP — or the legacy HTTP+SSE transport when a server
//! refuses it (`mcp_legacy`) — through the request tools' address guard (no
//! loopback or private address unless `ALLOW_PRIVATE_REQUESTS` allows it); a
//! stdio server's through the Python runtime (`/tools/mcp-stdio`), which runs
//! it in its sandbox, one per workspace and configuration, and owns its session.
//!
//! A server's listing is kept for [`LISTING_TTL`] per server (its URL and
//! headers); its session (`initialize`, then `Mcp-Session-Id` on every request)
//! is opened on first use and reused, opened again once when the server has
//! forgotten it (404). A call's output is Flowise's: the JSON text of the
//! result's `content`; a result with `isError` is an `Error: …` the model reads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Url;
use serde_json::{Map, Value, json};

use super::ToolOutcome;
use super::mcp_legacy::{LegacySession, event_end, parse_event};
use super::oauth::{self, ClientAuth, OAuthClient, TokenEndpoint, Tokens};
use super::python::RuntimeClient;
use super::web::{HttpCall, WebClient};
use crate::flow::component::{ClientCredentials, McpEndpoint, McpServer, StdioMcpServer};

/// How long a server's tool listing is reused.
pub const LISTING_TTL: Duration = Duration::from_secs(60);
/// Longest tool name a model is offered (Flowise's `CUSTOM_MCP_TOOL_NAME_MAX_LENGTH`).
const MAX_TOOL_NAME: usize = 128;
/// Longest tool description (Flowise's `CUSTOM_MCP_TOOL_DESCRIPTION_MAX_LENGTH`).
const MAX_DESCRIPTION: usize = 1024;
/// The protocol version weir asks for; a server may answer an older one.
const PROTOCOL_VERSION: &str = "2025-11-25";

/// What weir's `initialize` says of itself: the protocol it speaks, no client
/// capabilities, its name and version.
pub(crate) fn initialize_params() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "weir", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// A tool of a server, as offered to a model.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTool {
    /// The name the model calls (cleaned to `[a-zA-Z0-9_-]`, at most 128).
    pub name: String,
    /// The server's own name for it.
    pub remote_name: String,
    pub description: String,
    pub input_schema: Value,
}

/// Reads a `customMCP` node's `mcpServerConfig`: `{"url", "headers"}` (Streamable
/// HTTP) or `{"command", "args", "env"}` (stdio). JSON, or the looser form
/// Flowise's editor takes (unquoted keys, single quotes: read as YAML's flow
/// style), with `{{$vars.<name>}}` in its strings filled from `vars` (a reference
/// to no variable is left as written).
pub fn read_config(text: &str, vars: &Map<String, Value>) -> Result<McpEndpoint, String> {
    let mut value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(json_error) => {
            serde_norway::from_str(text).map_err(|_| format!("it is not JSON: {json_error}"))?
        }
    };
    fill_variables(&mut value, vars);
    let Value::Object(config) = value else {
        return Err("it must be a JSON object ({\"url\": …})".into());
    };
    let text_of = |key: &str| config.get(key).and_then(Value::as_str).map(str::trim);
    if let Some(url) = text_of("url").filter(|u| !u.is_empty()) {
        if !url.contains("{{") {
            let parsed = Url::parse(url).map_err(|e| format!("'url' is not a URL: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err("'url' must be an http or https URL".into());
            }
        }
        let mut headers = Vec::new();
        match config.get("headers") {
            None | Some(Value::Null) => {}
            Some(Value::Object(given)) => {
                for (name, value) in given {
                    let Some(value) = value.as_str() else {
                        return Err(format!("header '{name}' must be text"));
                    };
                    headers.push((name.clone(), value.to_owned()));
                }
            }
            Some(_) => return Err("'headers' must be an object of header names and values".into()),
        }
        return Ok(McpEndpoint::Remote(McpServer {
            url: url.to_owned(),
            headers,
            grant: read_grant(config.get("oauth"))?,
        }));
    }
    let Some(command) = text_of("command").filter(|c| !c.is_empty()) else {
        return Err("it needs a 'url' (or a 'command')".into());
    };
    let args = match config.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => Ok(text.clone()),
                Value::Number(_) | Value::Bool(_) => Ok(item.to_string()),
                _ => Err("'args' must be a list of text".to_owned()),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("'args' must be a list of text".into()),
    };
    let mut env = std::collections::BTreeMap::new();
    match config.get("env") {
        None | Some(Value::Null) => {}
        Some(Value::Object(given)) => {
            for (name, value) in given {
                let value = match value {
                    Value::String(text) => text.clone(),
                    Value::Number(_) | Value::Bool(_) => value.to_string(),
                    _ => return Err(format!("environment variable '{name}' must be text")),
                };
                env.insert(name.clone(), value);
            }
        }
        Some(_) => return Err("'env' must be an object of variable names and values".into()),
    }
    Ok(McpEndpoint::Stdio(StdioMcpServer {
        command: command.to_owned(),
        args,
        env,
    }))
}

/// A config's `oauth` (weir's): `{"tokenUrl", "clientId", "clientSecret",
/// "scope"?, "tokenBody"?: "form" | "json"}`, a client-credentials grant whose
/// token weir fetches, keeps until a minute before it ends, and sends as a Bearer.
fn read_grant(oauth: Option<&Value>) -> Result<Option<ClientCredentials>, String> {
    let oauth = match oauth {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(oauth)) => oauth,
        Some(_) => {
            return Err(
                "'oauth' must be an object ({\"tokenUrl\", \"clientId\", \"clientSecret\"})".into(),
            );
        }
    };
    let text = |key: &str| {
        super::oauth::setting_text(oauth.get(key))
            .map_err(|_| format!("'oauth.{key}' must be text"))
    };
    let needed = |key: &str| text(key)?.ok_or_else(|| format!("'oauth' needs its '{key}'"));
    if let Some(grant) = text("grant")?
        && grant != "client_credentials"
    {
        return Err(format!(
            "'oauth.grant' '{grant}' is not one weir runs in a config (client_credentials); \
             a server a user authorizes is kept in /custom-mcp-servers with authType OAUTH2"
        ));
    }
    let token_url = needed("tokenUrl")?;
    if !token_url.contains("{{") {
        let parsed =
            Url::parse(&token_url).map_err(|e| format!("'oauth.tokenUrl' is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("'oauth.tokenUrl' must be an http or https URL".into());
        }
    }
    let json_body = match text("tokenBody")?.as_deref() {
        None | Some("form") => false,
        Some("json") => true,
        Some(other) => return Err(format!("'oauth.tokenBody' is form or json, not '{other}'")),
    };
    Ok(Some(ClientCredentials {
        token_url,
        client_id: needed("clientId")?,
        client_secret: needed("clientSecret")?,
        scope: text("scope")?,
        json_body,
    }))
}

/// Fills `{{$vars.<name>}}` in every string of a config (numbers and other
/// values as their JSON text).
fn fill_variables(value: &mut Value, vars: &Map<String, Value>) {
    match value {
        Value::String(text) if text.contains("{{$vars.") => {
            let mut filled = String::with_capacity(text.len());
            let mut rest = text.as_str();
            while let Some(at) = rest.find("{{$vars.") {
                filled.push_str(&rest[..at]);
                let after = &rest[at + "{{$vars.".len()..];
                let end = after.find("}}");
                let found = end.and_then(|end| Some((end, vars.get(&after[..end])?)));
                match found {
                    Some((end, Value::String(v))) => {
                        filled.push_str(v);
                        rest = &after[end + 2..];
                    }
                    Some((end, other)) => {
                        filled.push_str(&other.to_string());
                        rest = &after[end + 2..];
                    }
                    None => {
                        filled.push_str("{{$vars.");
                        rest = after;
                    }
                }
            }
            filled.push_str(rest);
            *text = filled;
        }
        Value::Array(items) => items.iter_mut().for_each(|v| fill_variables(v, vars)),
        Value::Object(map) => map.values_mut().for_each(|v| fill_variables(v, vars)),
        _ => {}
    }
}

#[derive(Debug, Clone)]
struct Session {
    id: Option<String>,
    version: String,
    /// Set when the server speaks the legacy HTTP+SSE transport.
    legacy: Option<Arc<LegacySession>>,
}

#[derive(Default)]
struct Known {
    sessions: HashMap<String, Session>,
    listings: HashMap<String, (Instant, Arc<Vec<RemoteTool>>)>,
    /// Client-credentials tokens, by token URL, client and scope.
    grant_tokens: HashMap<String, Tokens>,
}

/// The MCP client of a server process; cheap to clone.
#[derive(Clone)]
pub struct McpClient {
    web: WebClient,
    /// Where stdio servers run.
    runtime: RuntimeClient,
    known: Arc<Mutex<Known>>,
}

/// A server as a map key: its URL and headers (the same URL with other
/// credentials is another server).
fn server_key(server: &McpServer) -> String {
    let mut key = server.url.clone();
    for (name, value) in &server.headers {
        key.push('\n');
        key.push_str(name);
        key.push(':');
        key.push_str(value);
    }
    if let Some(grant) = &server.grant {
        key.push_str("\noauth:");
        key.push_str(&grant_key(grant));
    }
    key
}

/// A grant as a map key (the secret left out: one client has one token).
fn grant_key(grant: &ClientCredentials) -> String {
    format!(
        "{}\n{}\n{}",
        grant.token_url,
        grant.client_id,
        grant.scope.as_deref().unwrap_or_default()
    )
}

/// An endpoint as a key of listings: a remote server's (shared by every
/// workspace that names it so), or the workspace's own stdio server's.
fn endpoint_key(server: &McpEndpoint, workspace: &str) -> String {
    match server {
        McpEndpoint::Remote(remote) => server_key(remote),
        McpEndpoint::Stdio(stdio) => format!(
            "stdio\n{workspace}\n{}",
            serde_json::to_string(stdio).unwrap_or_default()
        ),
    }
}

impl McpClient {
    pub fn new(web: WebClient, runtime: RuntimeClient) -> Self {
        McpClient {
            web,
            runtime,
            known: Arc::default(),
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets what is known of a server (its listing and session): the next
    /// use reaches it anew.
    pub fn forget(&self, server: &McpServer) {
        let key = server_key(server);
        let mut known = self.known();
        known.listings.remove(&key);
        known.sessions.remove(&key);
    }

    /// A remote server's tools (cached for [`LISTING_TTL`]).
    pub async fn remote_tools(&self, server: &McpServer) -> Result<Arc<Vec<RemoteTool>>, String> {
        self.tools(&McpEndpoint::Remote(server.clone()), "").await
    }

    /// The server's tools (cached for [`LISTING_TTL`]); a stdio server is
    /// `workspace`'s.
    pub async fn tools(
        &self,
        server: &McpEndpoint,
        workspace: &str,
    ) -> Result<Arc<Vec<RemoteTool>>, String> {
        let key = endpoint_key(server, workspace);
        let cached = self.known().listings.get(&key).cloned();
        if let Some((at, tools)) = cached
            && at.elapsed() < LISTING_TTL
        {
            return Ok(tools);
        }
        let mut tools = Vec::new();
        let mut cursor: Option<Value> = None;
        loop {
            let params = match &cursor {
                Some(cursor) => json!({"cursor": cursor}),
                None => json!({}),
            };
            let result = self
                .request_to(server, workspace, "tools/list", params)
                .await?;
            for tool in result
                .get("tools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let Some(remote_name) = tool.get("name").and_then(Value::as_str) else {
                    continue;
                };
                tools.push(RemoteTool {
                    name: clean_name(remote_name),
                    remote_name: remote_name.to_owned(),
                    description: clean_description(
                        tool.get("description")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                    ),
                    input_schema: tool
                        .get("inputSchema")
                        .filter(|s| s.is_object())
                        .cloned()
                        .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                });
            }
            cursor = result.get("nextCursor").filter(|c| !c.is_null()).cloned();
            if cursor.is_none() {
                break;
            }
        }
        let tools = Arc::new(tools);
        self.known()
            .listings
            .insert(key, (Instant::now(), Arc::clone(&tools)));
        Ok(tools)
    }

    /// Calls `tool` with the model's arguments (a stdio server: `workspace`'s).
    pub async fn call(
        &self,
        server: &McpEndpoint,
        workspace: &str,
        tool: &str,
        arguments: &Value,
    ) -> ToolOutcome {
        let arguments = match arguments {
            Value::Object(_) => arguments.clone(),
            Value::Null => json!({}),
            // A model that sends a bare string means the one input.
            other => json!({"input": other}),
        };
        let params = json!({"name": tool, "arguments": arguments});
        match self
            .request_to(server, workspace, "tools/call", params)
            .await
        {
            Ok(result) => {
                let content = result.get("content").cloned().unwrap_or(json!([]));
                let text = content.to_string();
                if result.get("isError").and_then(Value::as_bool) == Some(true) {
                    ToolOutcome::error(text)
                } else {
                    ToolOutcome::text(text)
                }
            }
            Err(why) => ToolOutcome::error(format!("the MCP server failed: {why}")),
        }
    }

    /// One request to a server: a remote one in its session, a stdio one through
    /// the runtime (which keeps the server's session), counted in `/metrics`.
    async fn request_to(
        &self,
        server: &McpEndpoint,
        workspace: &str,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        match server {
            McpEndpoint::Remote(remote) if remote.grant.is_some() => {
                let authorized = self.with_grant_token(remote).await?;
                self.request(&authorized, method, params).await
            }
            McpEndpoint::Remote(remote) => self.request(remote, method, params).await,
            McpEndpoint::Stdio(stdio) => {
                let started = Instant::now();
                let answer = self
                    .runtime
                    .mcp_stdio(workspace, stdio, method, params)
                    .await;
                crate::metrics::metrics().mcp_server_request(
                    &stdio_label(stdio),
                    answer.is_ok(),
                    started.elapsed(),
                );
                answer
            }
        }
    }

    /// The server with its grant's token as a Bearer (fetched, or kept from
    /// before while it is good for another minute).
    async fn with_grant_token(&self, server: &McpServer) -> Result<McpServer, String> {
        let Some(grant) = &server.grant else {
            return Ok(server.clone());
        };
        let key = grant_key(grant);
        let now = chrono::Utc::now().timestamp();
        let kept = self.known().grant_tokens.get(&key).cloned();
        let token = match kept.filter(|t| t.fresh_at(now)) {
            Some(token) => token.access_token,
            None => {
                let client = OAuthClient {
                    client_id: grant.client_id.clone(),
                    client_secret: Some(grant.client_secret.clone()),
                    auth: ClientAuth::ClientSecretPost,
                };
                let tokens = oauth::client_credentials(
                    &self.web,
                    &TokenEndpoint {
                        url: &grant.token_url,
                        client: &client,
                        resource: None,
                        json_body: grant.json_body,
                    },
                    grant.scope.as_deref(),
                )
                .await
                .map_err(|e| format!("no token for the MCP server: {e}"))?;
                let token = tokens.access_token.clone();
                let mut known = self.known();
                // A token that ended is of no more use to its sessions.
                if let Some(old) = known.grant_tokens.insert(key, tokens) {
                    let bearer = format!("Bearer {}", old.access_token);
                    known.sessions.retain(|k, _| !k.contains(&bearer));
                }
                token
            }
        };
        let mut headers = server.headers.clone();
        headers.retain(|(name, _)| !name.eq_ignore_ascii_case("authorization"));
        headers.push(("Authorization".into(), format!("Bearer {token}")));
        Ok(McpServer {
            url: server.url.clone(),
            headers,
            grant: None,
        })
    }

    /// One request in the server's session (opened on first use, and again
    /// once when the server has forgotten it).
    async fn request(
        &self,
        server: &McpServer,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let key = server_key(server);
        let mut fresh = false;
        let cached = self.known().sessions.get(&key).cloned();
        let session = match cached {
            Some(session) => session,
            None => {
                fresh = true;
                let session = self.open(server).await?;
                self.known().sessions.insert(key.clone(), session.clone());
                session
            }
        };
        match self
            .send(server, Some(&session), method, params.clone())
            .await
        {
            Err(Refused::SessionGone) if !fresh => {
                let session = self.open(server).await?;
                self.known().sessions.insert(key, session.clone());
                self.send(server, Some(&session), method, params)
                    .await
                    .map_err(Refused::into_text)
            }
            other => other.map_err(Refused::into_text),
        }
    }

    /// `initialize`, then `notifications/initialized`.
    async fn open(&self, server: &McpServer) -> Result<Session, String> {
        let params = initialize_params();
        let (reply, id) = self
            .post(server, None, rpc(1, "initialize", params.clone()))
            .await?;
        if matches!(reply.status, 400 | 404 | 405) {
            return self.open_legacy(server, params).await;
        }
        let result = answer_of(reply, 1, false).map_err(Refused::into_text)?;
        let session = Session {
            id,
            version: negotiated(&result),
            legacy: None,
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.post(server, Some(&session), note).await?;
        Ok(session)
    }

    /// The legacy HTTP+SSE transport, for a server that refused Streamable HTTP.
    async fn open_legacy(&self, server: &McpServer, params: Value) -> Result<Session, String> {
        let legacy = LegacySession::open(&self.web, server)
            .await
            .map_err(|why| format!("Streamable HTTP was refused, and HTTP+SSE too: {why}"))?;
        let answer = legacy.request(&self.web, "initialize", params).await?;
        let result = result_of(answer).map_err(Refused::into_text)?;
        legacy
            .notify(&self.web, "notifications/initialized")
            .await?;
        Ok(Session {
            id: None,
            version: negotiated(&result),
            legacy: Some(Arc::new(legacy)),
        })
    }

    /// One request of the session, counted in `/metrics` by server.
    async fn send(
        &self,
        server: &McpServer,
        session: Option<&Session>,
        method: &str,
        params: Value,
    ) -> Result<Value, Refused> {
        let started = Instant::now();
        let answer = match session.and_then(|s| s.legacy.as_ref()) {
            Some(legacy) if !legacy.is_open() => Err(Refused::SessionGone),
            Some(legacy) => match legacy.request(&self.web, method, params).await {
                Ok(answer) => result_of(answer),
                Err(_) if !legacy.is_open() => Err(Refused::SessionGone),
                Err(why) => Err(Refused::Other(why)),
            },
            None => match self.post(server, session, rpc(2, method, params)).await {
                Ok((reply, _)) => answer_of(reply, 2, session.is_some_and(|s| s.id.is_some())),
                Err(why) => Err(Refused::Other(why)),
            },
        };
        crate::metrics::metrics().mcp_server_request(
            &metric_label(&server.url),
            answer.is_ok(),
            started.elapsed(),
        );
        answer
    }

    /// One POST; its JSON-RPC messages and the session id it gave.
    async fn post(
        &self,
        server: &McpServer,
        session: Option<&Session>,
        body: Value,
    ) -> Result<(Reply, Option<String>), String> {
        let url = Url::parse(&server.url)
            .map_err(|e| format!("the MCP server's URL '{}' is not a URL: {e}", server.url))?;
        let mut headers = server.headers.clone();
        headers.push((
            "Accept".into(),
            "application/json, text/event-stream".into(),
        ));
        if let Some(session) = session {
            headers.push(("MCP-Protocol-Version".into(), session.version.clone()));
            if let Some(id) = &session.id {
                headers.push(("Mcp-Session-Id".into(), id.clone()));
            }
        }
        let reply = self
            .web
            .send(HttpCall {
                method: reqwest::Method::POST,
                url,
                headers,
                body: Some(("application/json".into(), body.to_string().into_bytes())),
            })
            .await?;
        let session_id = reply
            .headers
            .get("mcp-session-id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let is_stream = reply
            .headers
            .get("content-type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let messages = if reply.body.is_empty() {
            Vec::new()
        } else if is_stream {
            stream_messages(&reply.body)
        } else {
            match serde_json::from_slice::<Value>(&reply.body) {
                Ok(Value::Array(items)) => items,
                Ok(one) => vec![one],
                Err(_) => Vec::new(),
            }
        };
        Ok((
            Reply {
                status: reply.status,
                messages,
                text: String::from_utf8_lossy(&reply.body)
                    .chars()
                    .take(300)
                    .collect(),
            },
            session_id,
        ))
    }
}

struct Reply {
    status: u16,
    messages: Vec<Value>,
    text: String,
}

enum Refused {
    /// The server no longer knows the session (404 with a session).
    SessionGone,
    Other(String),
}

impl Refused {
    fn into_text(self) -> String {
        match self {
            Refused::SessionGone => "the server forgot the session".into(),
            Refused::Other(text) => text,
        }
    }
}

/// A server as `/metrics` names it: its host and port.
fn metric_label(url: &str) -> String {
    match Url::parse(url) {
        Ok(url) => match (url.host_str(), url.port_or_known_default()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            _ => "unknown".to_owned(),
        },
        Err(_) => "unknown".to_owned(),
    }
}

/// A stdio server as `/metrics` names it: `stdio:` and its command, with the
/// package an `npx`/`uvx` runs.
fn stdio_label(server: &StdioMcpServer) -> String {
    let command = server.command.rsplit('/').next().unwrap_or(&server.command);
    let mut label = format!("stdio:{command}");
    if matches!(command, "npx" | "uvx")
        && let Some(package) = server.args.iter().find(|a| !a.starts_with('-'))
    {
        label.push(' ');
        label.push_str(package);
    }
    label
}

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The result of request `id` in a reply, or why there is none; a 404 to a
/// request in a session means the session is gone.
fn answer_of(reply: Reply, id: u64, in_session: bool) -> Result<Value, Refused> {
    if reply.status == 404 && in_session {
        return Err(Refused::SessionGone);
    }
    let answer = reply
        .messages
        .into_iter()
        .find(|m| m.get("id").and_then(Value::as_u64) == Some(id));
    match answer {
        Some(answer) => result_of(answer),
        None if !(200..300).contains(&reply.status) => Err(Refused::Other(format!(
            "HTTP {}: {}",
            reply.status, reply.text
        ))),
        None => Err(Refused::Other("the server sent no answer".into())),
    }
}

/// The result of an answer, or the error it carries.
fn result_of(mut answer: Value) -> Result<Value, Refused> {
    if let Some(error) = answer.get("error") {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        return Err(Refused::Other(format!("the server answered: {message}")));
    }
    Ok(answer
        .as_object_mut()
        .and_then(|a| a.remove("result"))
        .unwrap_or(Value::Object(Map::new())))
}

/// The protocol version an `initialize` result names.
fn negotiated(result: &Value) -> String {
    result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or(PROTOCOL_VERSION)
        .to_owned()
}

/// The JSON messages of an SSE body (a stream the server ended after its answer).
fn stream_messages(body: &[u8]) -> Vec<Value> {
    let mut messages = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let end = event_end(rest).unwrap_or(rest.len());
        let (_, data) = parse_event(&String::from_utf8_lossy(&rest[..end]));
        if let Ok(message) = serde_json::from_str(&data) {
            messages.push(message);
        }
        rest = &rest[end..];
    }
    messages
}

/// A tool name a model may call: `[a-zA-Z0-9_-]`, other characters `_`, at most 128.
fn clean_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_TOOL_NAME)
        .collect()
}

/// A description without control or zero-width characters, at most 1024.
fn clean_description(text: &str) -> String {
    let hidden = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}' | '\u{feff}')
    };
    text.chars()
        .filter(|c| !hidden(*c))
        .take(MAX_DESCRIPTION)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_descriptions_are_cleaned() {
        assert_eq!(clean_name("get weather.now"), "get_weather_now");
        assert_eq!(clean_name(&"x".repeat(200)).len(), 128);
        assert_eq!(clean_description("a\u{200b}b\u{7}c\nd"), "abc\nd");
    }

    #[test]
    fn configs_are_read_with_variables() {
        let mut vars = Map::new();
        vars.insert("token".into(), json!("s3cret"));
        vars.insert("port".into(), json!(8080));
        let config = read_config(
            r#"{"url": "http://mcp.example:{{$vars.port}}/mcp",
                "headers": {"Authorization": "Bearer {{$vars.token}}", "X": "{{$vars.none}}"}}"#,
            &vars,
        )
        .unwrap();
        assert_eq!(
            config,
            McpEndpoint::Remote(McpServer {
                url: "http://mcp.example:8080/mcp".into(),
                headers: vec![
                    ("Authorization".into(), "Bearer s3cret".into()),
                    ("X".into(), "{{$vars.none}}".into()),
                ],
                grant: None,
            })
        );
        // Flowise's editor takes unquoted keys and single quotes.
        assert!(matches!(
            read_config("{url: 'https://mcp.example/mcp'}", &vars),
            Ok(McpEndpoint::Remote(_))
        ));
        assert_eq!(
            read_config(
                r#"{"command": "npx", "args": ["-y", "x", 3], "env": {"TOKEN": "{{$vars.token}}"}}"#,
                &vars
            ),
            Ok(McpEndpoint::Stdio(StdioMcpServer {
                command: "npx".into(),
                args: vec!["-y".into(), "x".into(), "3".into()],
                env: [("TOKEN".to_owned(), "s3cret".to_owned())].into(),
            }))
        );
        assert!(read_config(r#"{"command": "npx", "args": "x"}"#, &vars).is_err());
        assert!(read_config(r#"{"command": "npx", "env": {"A": {}}}"#, &vars).is_err());
        assert!(read_config(r#"{"url": "file:///etc/passwd"}"#, &vars).is_err());
        assert!(read_config("[1]", &vars).is_err());
        assert!(read_config(r#"{"headers": {}}"#, &vars).is_err());
        // A client-credentials grant.
        let Ok(McpEndpoint::Remote(granted)) = read_config(
            r#"{"url": "https://mcp.example/mcp", "oauth": {"tokenUrl": "https://as.example/token",
                "clientId": "c", "clientSecret": "{{$vars.token}}", "tokenBody": "json"}}"#,
            &vars,
        ) else {
            panic!("a grant is read");
        };
        let grant = granted.grant.unwrap();
        assert_eq!(
            (grant.client_secret.as_str(), grant.json_body),
            ("s3cret", true)
        );
        assert!(!format!("{grant:?}").contains("s3cret"));
        for bad in [
            r#"{"url": "https://m.example", "oauth": {"tokenUrl": "https://a.example/t", "clientId": "c"}}"#,
            r#"{"url": "https://m.example", "oauth": {"tokenUrl": "ftp://a.example/t", "clientId": "c", "clientSecret": "s"}}"#,
            r#"{"url": "https://m.example", "oauth": {"grant": "authorization_code"}}"#,
            r#"{"url": "https://m.example", "oauth": "x"}"#,
        ] {
            assert!(read_config(bad, &vars).is_err(), "{bad}");
        }
    }

    #[test]
    fn stream_bodies_are_read() {
        let body = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n: ping\n\ndata: {\"a\":\ndata: 1}\n";
        let messages = stream_messages(body);
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[1], json!({"a": 1}));
    }
}
