//! The Model Context Protocol over JSON-RPC 2.0, transport aside: one POST's
//! body read ([`Incoming`]: a message or a batch), and each message answered by
//! an [`Endpoint`] over its [`Catalog`].
//!
//! Two eras of the protocol. **The handshake** (2024-11-05 … 2025-11-25):
//! `initialize` (the version negotiated: the client's when weir speaks it, else
//! the newest weir speaks), then `ping`, `tools/list`, `tools/call`; the client's
//! notifications are taken and need no answer; `server/discover` is "method not
//! found" there, which tells a per-request client to fall back to the handshake.
//! On the workspace server, a client that declares `elicitation` is asked a
//! flow's questions ([`super::elicitation`]); its answers arrive as responses and
//! go to the call waiting for them.
//!
//! **Per request** (2026-07-28, chosen by the `MCP-Protocol-Version` header):
//! every request stands alone, its protocol version, client info and
//! capabilities in `params._meta`, the headers repeating the version, the method
//! (`Mcp-Method`) and a call's tool (`Mcp-Name`) — a request that disagrees with
//! itself is `-32020`, an unknown version `-32022` naming the one weir speaks.
//! `server/discover` says what weir speaks; every result carries `resultType`
//! and weir's `serverInfo` stamp, and `tools/list` a cache hint (`private`, a
//! minute). A flow that stops for a person's answer is an `InputRequiredResult`:
//! the question as a form elicitation, and a sealed `requestState` the client
//! sends back with `inputResponses` to go on. Errors carry the HTTP status the
//! specification maps them to (400, or 404 for an unknown method).
//!
//! Calls are counted in `/metrics` (`weir_mcp_calls`).

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::catalog::{self, Asker, Catalog, ProgressSink, Questions};
use crate::services::{ServiceError, Services};

/// The protocol versions weir speaks, newest first (the handshake era).
pub const VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The per-request protocol version weir speaks.
pub const PER_REQUEST_VERSION: &str = "2026-07-28";

const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";
const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";
const SERVER_INFO_META: &str = "io.modelcontextprotocol/serverInfo";
/// How long a per-request client may keep a tool listing (flows are published
/// and switched off at any time).
const LISTING_TTL_MS: u64 = 60_000;

/// A negotiated protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolVersion(pub &'static str);

impl ProtocolVersion {
    /// The version weir answers a client asking for `requested`.
    pub fn negotiate(requested: Option<&str>) -> Self {
        ProtocolVersion(
            VERSIONS
                .iter()
                .find(|v| Some(**v) == requested)
                .copied()
                .unwrap_or(VERSIONS[0]),
        )
    }

    /// A version a client names in `MCP-Protocol-Version`, if weir speaks it.
    pub fn known(header: &str) -> Option<Self> {
        VERSIONS
            .iter()
            .find(|v| **v == header)
            .copied()
            .map(ProtocolVersion)
    }
}

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const HEADER_MISMATCH: i64 = -32020;
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The HTTP status of a per-request answer carrying this error (the
/// specification's table; any other error is a 200).
pub fn per_request_status(code: i64) -> u16 {
    match code {
        PARSE_ERROR
        | INVALID_REQUEST
        | INVALID_PARAMS
        | HEADER_MISMATCH
        | UNSUPPORTED_PROTOCOL_VERSION => 400,
        METHOD_NOT_FOUND => 404,
        _ => 200,
    }
}

/// What a per-request (2026-07-28) request's headers say of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingHeaders {
    /// `MCP-Protocol-Version`.
    pub version: String,
    /// `Mcp-Method`.
    pub method: Option<String>,
    /// `Mcp-Name`, decoded (`=?base64?…?=` for a name not in visible ASCII).
    pub name: Option<String>,
}

/// A header value as the specification encodes names that are not visible
/// ASCII: `=?base64?<payload>?=`; any other value is itself.
pub fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine;
    match value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(payload) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(payload)
                .ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_owned()),
    }
}

/// The per-request checks, in the specification's order: the envelope in
/// `params._meta`, the headers agreeing with the body, a version weir speaks.
/// `Ok` with the client's capabilities.
fn check_envelope(
    routing: &RoutingHeaders,
    method: &str,
    params: &Map<String, Value>,
) -> Result<Value, (i64, String, Option<Value>)> {
    let Some(meta) = params.get("_meta").and_then(Value::as_object) else {
        return Err((
            INVALID_PARAMS,
            format!(
                "params._meta must be an object carrying '{PROTOCOL_VERSION_META}' and '{CLIENT_CAPABILITIES_META}'"
            ),
            None,
        ));
    };
    let missing: Vec<&str> = [PROTOCOL_VERSION_META, CLIENT_CAPABILITIES_META]
        .into_iter()
        .filter(|key| !meta.contains_key(*key))
        .collect();
    if !missing.is_empty() {
        return Err((
            INVALID_PARAMS,
            format!(
                "params._meta is missing the required envelope key(s): {}",
                missing.join(", ")
            ),
            None,
        ));
    }
    let version = &meta[PROTOCOL_VERSION_META];
    if version.as_str() != Some(routing.version.as_str()) {
        return Err((
            HEADER_MISMATCH,
            "mcp-protocol-version header does not match the request envelope's protocol version"
                .into(),
            None,
        ));
    }
    if routing.method.as_deref() != Some(method) {
        return Err((
            HEADER_MISMATCH,
            "mcp-method header does not match the request body's method".into(),
            None,
        ));
    }
    if method == "tools/call"
        && let Some(name) = params.get("name").filter(|n| !n.is_null())
        && routing.name.as_deref() != name.as_str()
    {
        return Err((
            HEADER_MISMATCH,
            "mcp-name header does not match the request body's 'name' parameter".into(),
            None,
        ));
    }
    if routing.version != PER_REQUEST_VERSION {
        return Err((
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version".into(),
            Some(json!({"supported": [PER_REQUEST_VERSION], "requested": routing.version})),
        ));
    }
    Ok(meta[CLIENT_CAPABILITIES_META].clone())
}

/// A JSON-RPC error answer (`id` null when the request's could not be read).
pub fn error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "error": {"code": code, "message": message.into()}, "id": id})
}

fn error_with_data(id: Value, code: i64, message: String, data: Option<Value>) -> Value {
    let mut answer = error(id, code, message);
    if let Some(data) = data {
        answer["error"]["data"] = data;
    }
    answer
}

fn answer(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "result": result, "id": id})
}

/// One POST's body.
#[derive(Debug)]
pub enum Incoming {
    One(Value),
    /// A JSON array of messages (2025-03-26's batching; later versions dropped
    /// it, and weir still takes it).
    Batch(Vec<Value>),
}

impl Incoming {
    /// The body read, or the parse error to answer.
    pub fn parse(body: &[u8]) -> Result<Self, Value> {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Array(items)) if items.is_empty() => Err(error(
                Value::Null,
                INVALID_REQUEST,
                "an empty batch holds no message",
            )),
            Ok(Value::Array(items)) => Ok(Incoming::Batch(items)),
            Ok(one) => Ok(Incoming::One(one)),
            Err(e) => Err(error(
                Value::Null,
                PARSE_ERROR,
                format!("the body is not JSON: {e}"),
            )),
        }
    }

    /// Whether any message is a request (and so needs an answer).
    pub fn has_requests(&self) -> bool {
        match self {
            Incoming::One(message) => is_request(message),
            Incoming::Batch(items) => items.iter().any(is_request),
        }
    }

    /// Whether this body is a single `tools/call` (whose answer may stream).
    pub fn is_call(&self) -> bool {
        matches!(self, Incoming::One(message)
            if message.get("method").and_then(Value::as_str) == Some("tools/call"))
    }

    /// The single request that is a `tools/call` asking for progress, if that
    /// is what this body is (its answer streams).
    pub fn progress_token(&self) -> Option<Value> {
        let Incoming::One(message) = self else {
            return None;
        };
        if message.get("method").and_then(Value::as_str) != Some("tools/call") {
            return None;
        }
        message
            .pointer("/params/_meta/progressToken")
            .filter(|t| t.is_string() || t.is_number())
            .cloned()
    }

    /// The `initialize` request's asked version, when this body is one.
    pub fn initialize(&self) -> Option<Option<&str>> {
        let Incoming::One(message) = self else {
            return None;
        };
        (message.get("method").and_then(Value::as_str) == Some("initialize")).then(|| {
            message
                .pointer("/params/protocolVersion")
                .and_then(Value::as_str)
        })
    }
}

fn is_request(message: &Value) -> bool {
    message.get("method").is_some() && message.get("id").is_some()
}

/// Answers MCP messages over one catalog of tools.
pub struct Endpoint {
    /// The server's services (a cheap clone: a streamed answer outlives its handler).
    pub services: Services,
    pub catalog: Catalog,
    /// The conversation calls belong to (the MCP session); each call its own
    /// when `None`.
    pub chat_id: Option<String>,
    /// `serverInfo.name`.
    pub server_name: String,
    /// Which server, for the metrics: `flow` or `workspace`.
    pub kind: &'static str,
    /// The per-request protocol's headers; `None` in the handshake era.
    pub per_request: Option<RoutingHeaders>,
}

impl Endpoint {
    /// Whether this session's client answers a flow's questions (so a call's
    /// answer streams, to carry them).
    pub fn elicits(&self) -> bool {
        self.kind == "workspace"
            && self
                .chat_id
                .as_deref()
                .is_some_and(|session| self.services.elicitations.supports(session))
    }

    /// Answers a whole body: `None` when nothing in it needs an answer.
    pub async fn answer_all(&self, incoming: Incoming) -> Option<Value> {
        match incoming {
            Incoming::One(message) => self.answer(message, None).await,
            Incoming::Batch(_) if self.per_request.is_some() => Some(error(
                Value::Null,
                INVALID_REQUEST,
                "a 2026-07-28 request is one JSON-RPC message, not a batch",
            )),
            Incoming::Batch(items) => {
                let mut answers = Vec::new();
                for message in items {
                    if let Some(answer) = self.answer(message, None).await {
                        answers.push(answer);
                    }
                }
                (!answers.is_empty()).then_some(Value::Array(answers))
            }
        }
    }

    /// Answers one message; a notification (or a response the client sent)
    /// needs none. Progress of a `tools/call` goes to `notifications`.
    pub async fn answer(
        &self,
        message: Value,
        notifications: Option<mpsc::Sender<Value>>,
    ) -> Option<Value> {
        let Value::Object(mut message) = message else {
            return Some(error(
                Value::Null,
                INVALID_REQUEST,
                "a message must be a JSON object",
            ));
        };
        let id = message.remove("id");
        let method = match message.remove("method") {
            Some(Value::String(method)) => method,
            // A response: to a question a call waits for (elicitation), or to
            // nothing weir asked.
            None if message.contains_key("result") || message.contains_key("error") => {
                if let Some(id) = &id {
                    self.services
                        .elicitations
                        .deliver(self.chat_id.as_deref(), id, message);
                }
                return None;
            }
            _ => {
                return Some(error(
                    id.unwrap_or(Value::Null),
                    INVALID_REQUEST,
                    "a request needs a 'method' string",
                ));
            }
        };
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return id.map(|id| error(id, INVALID_REQUEST, "'jsonrpc' must be \"2.0\""));
        }
        let Some(id) = id else {
            // Notifications (`notifications/initialized`, `…/cancelled`) need nothing.
            return None;
        };
        if !(id.is_string() || id.is_number()) {
            return Some(error(
                Value::Null,
                INVALID_REQUEST,
                "'id' must be a string or a number",
            ));
        }
        let params = match message.remove("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(params)) => params,
            Some(_) => {
                return Some(error(id, INVALID_PARAMS, "'params' must be an object"));
            }
        };
        let capabilities = match &self.per_request {
            None => None,
            Some(routing) => match check_envelope(routing, &method, &params) {
                Ok(capabilities) => Some(capabilities),
                Err((code, message, data)) => {
                    crate::metrics::metrics().mcp_call(self.kind, &method, false);
                    return Some(error_with_data(id, code, message, data));
                }
            },
        };
        let outcome = match capabilities {
            None => self.dispatch(&method, params, notifications).await,
            Some(capabilities) => {
                self.dispatch_per_request(&method, params, notifications, &capabilities)
                    .await
            }
        };
        crate::metrics::metrics().mcp_call(self.kind, &method, outcome.is_ok());
        Some(match outcome {
            Ok(result) => answer(id, result),
            Err((code, message)) => error(id, code, message),
        })
    }

    fn server_info(&self) -> Value {
        json!({"name": self.server_name, "version": env!("CARGO_PKG_VERSION")})
    }

    /// A per-request method: the handshake's own, each result marked
    /// `complete` (unless it asks for input) and stamped with weir's identity.
    async fn dispatch_per_request(
        &self,
        method: &str,
        params: Map<String, Value>,
        notifications: Option<mpsc::Sender<Value>>,
        capabilities: &Value,
    ) -> Result<Value, (i64, String)> {
        let mut result = match method {
            "server/discover" => json!({
                "supportedVersions": [PER_REQUEST_VERSION],
                "capabilities": {"tools": {"listChanged": false}},
                "cacheScope": "private",
                "ttlMs": LISTING_TTL_MS,
            }),
            "initialize" => {
                return Err((
                    METHOD_NOT_FOUND,
                    "Method not found: initialize (2026-07-28 has no handshake)".into(),
                ));
            }
            "tools/list" => {
                let mut listing = self.dispatch(method, params, None).await?;
                listing["cacheScope"] = json!("private");
                listing["ttlMs"] = json!(LISTING_TTL_MS);
                listing
            }
            "tools/call" => {
                let elicits = capabilities
                    .get("elicitation")
                    .is_some_and(Value::is_object);
                self.call(params, notifications, elicits).await?
            }
            _ => self.dispatch(method, params, notifications).await?,
        };
        if let Value::Object(result) = &mut result {
            result
                .entry("resultType")
                .or_insert_with(|| json!("complete"));
            let meta = result.entry("_meta").or_insert_with(|| json!({}));
            if let Value::Object(meta) = meta {
                meta.insert(SERVER_INFO_META.into(), self.server_info());
            }
        }
        Ok(result)
    }

    async fn dispatch(
        &self,
        method: &str,
        params: Map<String, Value>,
        notifications: Option<mpsc::Sender<Value>>,
    ) -> Result<Value, (i64, String)> {
        match method {
            "initialize" => {
                let version = ProtocolVersion::negotiate(
                    params.get("protocolVersion").and_then(Value::as_str),
                );
                let elicits = params
                    .get("capabilities")
                    .and_then(|c| c.get("elicitation"))
                    .is_some_and(Value::is_object);
                if let (true, "workspace", Some(session)) = (elicits, self.kind, &self.chat_id) {
                    self.services.elicitations.remember(session);
                }
                Ok(json!({
                    "protocolVersion": version.0,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": self.server_info(),
                }))
            }
            "ping" => Ok(json!({})),
            "tools/list" => {
                let tools = self.tools().await?;
                let listed: Vec<Value> = tools
                    .iter()
                    .map(|tool| {
                        json!({
                            "name": tool.name,
                            "description": tool.description,
                            "inputSchema": tool.input_schema(),
                        })
                    })
                    .collect();
                Ok(json!({"tools": listed}))
            }
            "tools/call" => self.call(params, notifications, false).await,
            _ => Err((METHOD_NOT_FOUND, format!("Method not found: {method}"))),
        }
    }

    /// A `tools/call`: the flow run, its progress to `notifications`; a
    /// person's question asked of the session's client (the handshake era's
    /// elicitation), answered as input required (`input_required`: a
    /// per-request client that takes elicitation), or else an `isError`
    /// naming the resume path.
    async fn call(
        &self,
        params: Map<String, Value>,
        notifications: Option<mpsc::Sender<Value>>,
        input_required: bool,
    ) -> Result<Value, (i64, String)> {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err((INVALID_PARAMS, "'name' must name a tool".into()));
        };
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(arguments)) => arguments.clone(),
            Some(_) => {
                return Err((INVALID_PARAMS, "'arguments' must be an object".into()));
            }
        };
        let tools = self.tools().await?;
        let Some(tool) = tools.iter().find(|tool| tool.name == name) else {
            return Err((INVALID_PARAMS, format!("Unknown tool: {name}")));
        };
        let resume = if self.per_request.is_some() {
            match catalog::resumed(&self.services, tool, &params) {
                Ok(resume) => resume,
                Err(result) => return Ok(result),
            }
        } else {
            None
        };
        let token = params
            .get("_meta")
            .and_then(|meta| meta.get("progressToken"));
        let questions = match (&notifications, &self.chat_id) {
            (Some(stream), Some(session)) if self.elicits() => Questions::Ask(Asker {
                elicitations: &self.services.elicitations,
                session,
                stream: stream.clone(),
            }),
            _ if input_required => Questions::Return,
            _ => Questions::Hint,
        };
        let progress = match (token, notifications) {
            (Some(token), Some(sink)) if token.is_string() || token.is_number() => {
                Some(ProgressSink::new(token.clone(), sink))
            }
            _ => None,
        };
        Ok(catalog::call(
            &self.services,
            tool,
            &arguments,
            self.chat_id.clone(),
            progress,
            questions,
            resume,
        )
        .await)
    }

    async fn tools(&self) -> Result<Vec<catalog::FlowTool>, (i64, String)> {
        self.catalog
            .tools(&self.services)
            .await
            .map_err(|e| match e {
                ServiceError::Invalid(message) => (INTERNAL_ERROR, message),
                other => {
                    tracing::error!(error = %other, "cannot list the MCP tools");
                    (
                        INTERNAL_ERROR,
                        "the tools cannot be listed now; retry".to_owned(),
                    )
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routing(version: &str, method: &str, name: Option<&str>) -> RoutingHeaders {
        RoutingHeaders {
            version: version.into(),
            method: Some(method.into()),
            name: name.map(str::to_owned),
        }
    }

    fn params(version: &str, extra: Value) -> Map<String, Value> {
        let mut params = json!({"_meta": {
            PROTOCOL_VERSION_META: version,
            CLIENT_CAPABILITIES_META: {"elicitation": {}},
        }});
        if let (Value::Object(p), Value::Object(e)) = (&mut params, extra) {
            p.extend(e);
        }
        match params {
            Value::Object(p) => p,
            _ => unreachable!(),
        }
    }

    #[test]
    fn per_request_envelopes_are_checked_in_the_specifications_order() {
        let ok = check_envelope(
            &routing(PER_REQUEST_VERSION, "tools/call", Some("t")),
            "tools/call",
            &params(PER_REQUEST_VERSION, json!({"name": "t"})),
        );
        assert_eq!(ok, Ok(json!({"elicitation": {}})));
        let code = |r: Result<Value, (i64, String, Option<Value>)>| r.err().map(|e| e.0);
        assert_eq!(
            code(check_envelope(
                &routing(PER_REQUEST_VERSION, "ping", None),
                "ping",
                &Map::new()
            )),
            Some(INVALID_PARAMS)
        );
        // The headers disagreeing win over an unknown version.
        assert_eq!(
            code(check_envelope(
                &routing("2099-01-01", "ping", None),
                "ping",
                &params(PER_REQUEST_VERSION, json!({}))
            )),
            Some(HEADER_MISMATCH)
        );
        assert_eq!(
            code(check_envelope(
                &routing(PER_REQUEST_VERSION, "tools/call", Some("u")),
                "tools/call",
                &params(PER_REQUEST_VERSION, json!({"name": "t"}))
            )),
            Some(HEADER_MISMATCH)
        );
        let unknown = check_envelope(
            &routing("2099-01-01", "ping", None),
            "ping",
            &params("2099-01-01", json!({})),
        );
        assert_eq!(
            unknown.err().and_then(|e| e.2),
            Some(json!({"supported": [PER_REQUEST_VERSION], "requested": "2099-01-01"}))
        );
        assert_eq!(per_request_status(METHOD_NOT_FOUND), 404);
        assert_eq!(per_request_status(HEADER_MISMATCH), 400);
        assert_eq!(per_request_status(INTERNAL_ERROR), 200);
    }

    #[test]
    fn header_values_may_be_base64() {
        assert_eq!(decode_header_value("plain").as_deref(), Some("plain"));
        assert_eq!(
            decode_header_value("=?base64?w6lsYW4=?=").as_deref(),
            Some("élan")
        );
        assert_eq!(decode_header_value("=?base64?***?="), None);
    }

    #[test]
    fn versions_are_negotiated() {
        assert_eq!(
            ProtocolVersion::negotiate(Some("2025-03-26")).0,
            "2025-03-26"
        );
        assert_eq!(
            ProtocolVersion::negotiate(Some("2099-01-01")).0,
            VERSIONS[0]
        );
        assert_eq!(ProtocolVersion::negotiate(None).0, VERSIONS[0]);
        assert!(ProtocolVersion::known("2026-07-28").is_none());
    }

    #[test]
    fn bodies_are_read() {
        assert!(Incoming::parse(b"{").is_err());
        assert!(Incoming::parse(b"[]").is_err());
        let batch = Incoming::parse(
            br#"[{"jsonrpc":"2.0","method":"notifications/initialized"},
                 {"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
        )
        .unwrap();
        assert!(batch.has_requests());
        let note =
            Incoming::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(!note.has_requests());
        let call = Incoming::parse(
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call",
                 "params":{"name":"x","_meta":{"progressToken":"p1"}}}"#,
        )
        .unwrap();
        assert_eq!(call.progress_token(), Some(json!("p1")));
    }
}
