//! The Model Context Protocol over JSON-RPC 2.0, transport aside: one POST's
//! body read ([`Incoming`]: a message or a batch), and each message answered by
//! an [`Endpoint`] over its [`Catalog`].
//!
//! Methods: `initialize` (the version negotiated: the client's when weir speaks
//! it, else the newest weir speaks), `ping`, `tools/list`, `tools/call`; the
//! client's notifications are taken and need no answer. Anything else is
//! "method not found" — `server/discover` included, which tells a client of the
//! per-request protocol (2026-07-28) to fall back to the `initialize` handshake.
//! Calls are counted in `/metrics` (`weir_mcp_calls`). On the workspace server, a
//! client that declares `elicitation` is asked a flow's questions
//! ([`super::elicitation`]); its answers arrive as responses and go to the call
//! waiting for them.

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::catalog::{self, Asker, Catalog, ProgressSink};
use crate::services::{ServiceError, Services};

/// The protocol versions weir speaks, newest first (the handshake era).
pub const VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

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

/// A JSON-RPC error answer (`id` null when the request's could not be read).
pub fn error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "error": {"code": code, "message": message.into()}, "id": id})
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
        let outcome = self.dispatch(&method, params, notifications).await;
        crate::metrics::metrics().mcp_call(self.kind, &method, outcome.is_ok());
        Some(match outcome {
            Ok(result) => answer(id, result),
            Err((code, message)) => error(id, code, message),
        })
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
                    "serverInfo": {"name": self.server_name, "version": env!("CARGO_PKG_VERSION")},
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
            "tools/call" => {
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
                let token = params
                    .get("_meta")
                    .and_then(|meta| meta.get("progressToken"));
                let asker = match (&notifications, &self.chat_id) {
                    (Some(stream), Some(session)) if self.elicits() => Some(Asker {
                        elicitations: &self.services.elicitations,
                        session,
                        stream: stream.clone(),
                    }),
                    _ => None,
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
                    asker,
                )
                .await)
            }
            _ => Err((METHOD_NOT_FOUND, format!("Method not found: {method}"))),
        }
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
