//! A chatflow published as an MCP tool (Flowise's `mcpServerConfig`): whether it
//! is on, the tool's name and description, and the bearer token of its own
//! endpoint (`POST /api/v1/mcp/<chatflowId>`).
//!
//! The token is kept twice, neither in plain text: its SHA-256 (what a call is
//! checked against, in constant time) and sealed with the server's key (what
//! `GET /mcp-server/<id>` shows the flow's owner, as Flowise's dialog does). The
//! record is stored as JSON text in the chatflow's row, so the endpoint reads it
//! with the chatflow (one cached read) and it is gone with the chatflow.

use rand::Rng;
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use super::apikey::hash_key;

/// Longest tool name (Flowise's rule).
pub const MAX_TOOL_NAME: usize = 64;

/// A chatflow's MCP publication, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerConfig {
    pub enabled: bool,
    /// SHA-256 (hex) of the endpoint's bearer token.
    pub token_hash: String,
    /// The token sealed with the server's key (`sealed:<keyId>:<data>`).
    pub sealed_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl McpServerConfig {
    /// The stored JSON text; `None` for text an earlier or foreign writer left
    /// unreadable (read as "not published").
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }

    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Whether `presented` is the endpoint's token (compared in constant time).
    pub fn accepts(&self, presented: &str) -> bool {
        hash_key(presented)
            .as_bytes()
            .ct_eq(self.token_hash.as_bytes())
            .into()
    }

    /// The tool's name: the one given, else one made of the flow's name.
    pub fn tool_name_for(&self, flow_name: &str) -> String {
        match &self.tool_name {
            Some(name) if !name.is_empty() => name.clone(),
            _ => default_tool_name(flow_name),
        }
    }

    /// The tool's description: the one given, else Flowise's default.
    pub fn description_for(&self, flow_name: &str) -> String {
        match &self.description {
            Some(text) if !text.trim().is_empty() => text.clone(),
            _ => default_description(flow_name),
        }
    }
}

/// A tool's description when none was given (Flowise's).
pub fn default_description(flow_name: &str) -> String {
    format!("Execute the \"{flow_name}\" flow")
}

/// A new endpoint token: 32 hex characters from 16 random bytes (Flowise's form).
pub fn new_token() -> String {
    let bytes: [u8; 16] = rand::rng().random();
    super::to_hex(&bytes)
}

/// Flowise's rule for a tool name: 1–64 characters of `[a-zA-Z0-9_-]`.
pub fn validate_tool_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_TOOL_NAME {
        return Err(format!(
            "'toolName' must be 1 to {MAX_TOOL_NAME} characters long"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err("'toolName' may hold only letters, digits, '_' and '-' ([a-zA-Z0-9_-])".into());
    }
    Ok(())
}

/// A tool name made of a flow's name (Flowise's): lowercased, every other
/// character `_`, runs of `_` collapsed, trimmed of `_`, at most 64 characters,
/// `chatflow_tool` when nothing is left.
pub fn default_tool_name(flow_name: &str) -> String {
    let mut name = String::with_capacity(flow_name.len());
    for c in flow_name.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
            c
        } else {
            '_'
        };
        if c == '_' && name.ends_with('_') {
            continue;
        }
        name.push(c);
    }
    let trimmed = name.trim_matches('_');
    let cut: String = trimmed.chars().take(MAX_TOOL_NAME).collect();
    if cut.is_empty() {
        "chatflow_tool".to_owned()
    } else {
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_made_of_flow_names() {
        assert_eq!(default_tool_name("My Support Bot!"), "my_support_bot");
        assert_eq!(default_tool_name("  __a--b__  "), "a--b");
        assert_eq!(default_tool_name("Ünïcode ✓"), "n_code");
        assert_eq!(default_tool_name("!!!"), "chatflow_tool");
        assert_eq!(default_tool_name(&"x".repeat(80)).len(), 64);
    }

    #[test]
    fn tool_name_rules() {
        assert!(validate_tool_name("search_docs-2").is_ok());
        for bad in ["", "has space", "dot.name", &"a".repeat(65)] {
            assert!(validate_tool_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_are_checked_by_hash() {
        let token = new_token();
        assert_eq!(token.len(), 32);
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(token, new_token());
        let config = McpServerConfig {
            enabled: true,
            token_hash: hash_key(&token),
            sealed_token: String::new(),
            tool_name: None,
            description: None,
        };
        assert!(config.accepts(&token));
        assert!(!config.accepts("0123"));
        assert_eq!(McpServerConfig::parse(&config.to_text()), Some(config));
        assert_eq!(McpServerConfig::parse("{"), None);
    }

    #[test]
    fn server_headers_follow_the_rules() {
        let headers = |v: serde_json::Value| v.as_object().cloned().unwrap();
        assert_eq!(
            validate_headers(&headers(serde_json::json!({"Authorization": "Bearer x"}))),
            Ok(vec![("Authorization".into(), "Bearer x".into())])
        );
        for bad in [
            serde_json::json!({"Host": "x"}),
            serde_json::json!({"bad name": "x"}),
            serde_json::json!({"X-A": 1}),
            serde_json::json!({"X-A": "a\r\nB: c"}),
        ] {
            assert!(validate_headers(&headers(bad.clone())).is_err(), "{bad}");
        }
        assert_eq!(
            masked_url("https://mcp.example:8443/v1/mcp?key=s3cret"),
            "https://mcp.example:8443/************"
        );
    }
}

// ------------------------------------------------------ a workspace's MCP servers

/// What a stored server's `authConfig` is (Flowise's `authType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum McpAuthType {
    #[default]
    None,
    CustomHeaders,
    /// weir's: tokens from the server's OAuth authorization server, granted
    /// once through the API (`authorize`), sealed, and refreshed.
    #[serde(rename = "OAUTH2")]
    OAuth2,
}

impl McpAuthType {
    pub fn as_str(self) -> &'static str {
        match self {
            McpAuthType::None => "NONE",
            McpAuthType::CustomHeaders => "CUSTOM_HEADERS",
            McpAuthType::OAuth2 => "OAUTH2",
        }
    }

    pub fn parse_stored(text: &str) -> Self {
        match text {
            "CUSTOM_HEADERS" => McpAuthType::CustomHeaders,
            "OAUTH2" => McpAuthType::OAuth2,
            _ => McpAuthType::None,
        }
    }
}

/// Whether a stored server was reached (`authorize`) and listed its tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum McpServerStatus {
    #[default]
    Pending,
    Authorized,
    Error,
}

impl McpServerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            McpServerStatus::Pending => "PENDING",
            McpServerStatus::Authorized => "AUTHORIZED",
            McpServerStatus::Error => "ERROR",
        }
    }

    pub fn parse_stored(text: &str) -> Self {
        match text {
            "AUTHORIZED" => McpServerStatus::Authorized,
            "ERROR" => McpServerStatus::Error,
            _ => McpServerStatus::Pending,
        }
    }
}

/// A remote MCP server a workspace keeps (Flowise's `CustomMcpServer`), for its
/// flows' `customMcpServerTool` nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomMcpServer {
    pub id: uuid::Uuid,
    pub workspace_id: uuid::Uuid,
    pub name: String,
    pub server_url: String,
    pub icon_src: Option<String>,
    pub color: Option<String>,
    pub auth_type: McpAuthType,
    /// `{"headers": {...}}` sealed with the server's key (`sealed:<keyId>:<data>`).
    pub sealed_auth: Option<String>,
    /// The server's `tools/list` answer (JSON text), once authorized.
    pub tools: Option<String>,
    pub tool_count: u32,
    pub status: McpServerStatus,
    pub created_date: super::time::Timestamp,
    pub updated_date: super::time::Timestamp,
}

/// What a masked value is shown as (a header value, the URL's path).
pub const MASK: &str = "************";
/// Most headers a stored server sends.
pub const MAX_HEADERS: usize = 25;
/// Longest header value.
pub const MAX_HEADER_VALUE: usize = 2048;

/// Headers no server configuration may set: hop-by-hop ones and those the
/// HTTP client owns.
const RESERVED_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
];

/// A server's headers checked (Flowise's rules): at most 25, names of RFC 7230
/// token characters and not reserved, values text of at most 2048 characters
/// without line breaks.
pub fn validate_headers(
    headers: &serde_json::Map<String, serde_json::Value>,
) -> Result<Vec<(String, String)>, String> {
    if headers.len() > MAX_HEADERS {
        return Err(format!("at most {MAX_HEADERS} headers may be set"));
    }
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    let mut checked = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        if name.is_empty() || !name.bytes().all(token) {
            return Err(format!("'{name}' is not a header name"));
        }
        if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(format!("the header '{name}' may not be set"));
        }
        let Some(value) = value.as_str() else {
            return Err(format!("the header '{name}' must have a text value"));
        };
        if value.len() > MAX_HEADER_VALUE || value.contains(['\r', '\n', '\0']) {
            return Err(format!(
                "the header '{name}' must be at most {MAX_HEADER_VALUE} characters on one line"
            ));
        }
        checked.push((name.clone(), value.to_owned()));
    }
    Ok(checked)
}

/// A server URL as shown: its origin, the rest masked (it may hold a key).
pub fn masked_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => format!("{}/{MASK}", parsed.origin().ascii_serialization()),
        Err(_) => MASK.to_owned(),
    }
}
