//! Chatflows: the Flowise-compatible record (COMPAT.md "Chatflow records") and the
//! rules its JSON-text fields obey.
//!
//! `flowData`, `chatbotConfig` and `apiConfig` are kept as JSON *text*, exactly as
//! Flowise stores and returns them; they are checked to parse when written so that
//! nothing unreadable is ever stored.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::api_config::ApiConfig;
use super::mcp::McpServerConfig;
use super::time::{self, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum ChatflowType {
    #[default]
    Chatflow,
    Agentflow,
    Multiagent,
    Assistant,
}

impl ChatflowType {
    pub fn as_str(self) -> &'static str {
        match self {
            ChatflowType::Chatflow => "CHATFLOW",
            ChatflowType::Agentflow => "AGENTFLOW",
            ChatflowType::Multiagent => "MULTIAGENT",
            ChatflowType::Assistant => "ASSISTANT",
        }
    }

    /// Inverse of [`ChatflowType::as_str`]; a value this version does not know reads
    /// as a plain chatflow.
    pub fn parse_stored(s: &str) -> Self {
        match s {
            "AGENTFLOW" => ChatflowType::Agentflow,
            "MULTIAGENT" => ChatflowType::Multiagent,
            "ASSISTANT" => ChatflowType::Assistant,
            _ => ChatflowType::Chatflow,
        }
    }
}

/// A stored chatflow, serialised with Flowise's field names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Chatflow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub name: String,
    /// The graph as JSON text: `{"nodes": [...], "edges": [...], "viewport": {...}}`.
    pub flow_data: String,
    pub deployed: bool,
    pub is_public: bool,
    /// When set, only this API key may run predictions on the chatflow.
    pub apikeyid: Option<String>,
    /// JSON text.
    pub chatbot_config: Option<String>,
    /// JSON text; `rateLimit` and `overrideConfig` live here (read once, with
    /// the chatflow).
    #[schema(value_type = Option<String>)]
    pub api_config: Option<ApiConfig>,
    pub category: Option<String>,
    #[serde(rename = "type")]
    pub flow_type: ChatflowType,
    /// Its publication as an MCP tool (`/api/v1/mcp-server/<id>`); never in the
    /// chatflow's JSON, as it holds the endpoint's token.
    #[serde(skip)]
    pub mcp_server: Option<McpServerConfig>,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_date: Timestamp,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_date: Timestamp,
}

impl Chatflow {
    /// The sensitive inputs its `apiConfig` lets requests override.
    pub fn allowed_overrides(&self) -> &HashSet<String> {
        match &self.api_config {
            Some(config) => config.allowed_overrides(),
            None => super::api_config::nothing_allowed(),
        }
    }
}

/// A validated chatflow to insert.
#[derive(Debug, Clone)]
pub struct NewChatflow {
    pub workspace_id: Uuid,
    pub name: String,
    pub flow_data: String,
    pub deployed: bool,
    pub is_public: bool,
    pub apikeyid: Option<String>,
    pub chatbot_config: Option<String>,
    pub api_config: Option<String>,
    pub category: Option<String>,
    pub flow_type: ChatflowType,
}

impl NewChatflow {
    pub fn into_chatflow(self, id: Uuid, now: Timestamp) -> Chatflow {
        Chatflow {
            id,
            workspace_id: self.workspace_id,
            name: self.name,
            flow_data: self.flow_data,
            deployed: self.deployed,
            is_public: self.is_public,
            apikeyid: self.apikeyid,
            chatbot_config: self.chatbot_config,
            api_config: self.api_config.map(ApiConfig::new),
            category: self.category,
            flow_type: self.flow_type,
            mcp_server: None,
            created_date: now,
            updated_date: now,
        }
    }
}

/// Validated changes to a chatflow: `None` leaves a field alone, `Some(None)` clears
/// a nullable one.
#[derive(Debug, Clone, Default)]
pub struct ChatflowPatch {
    pub name: Option<String>,
    pub flow_data: Option<String>,
    pub deployed: Option<bool>,
    pub is_public: Option<bool>,
    pub apikeyid: Option<Option<String>>,
    pub chatbot_config: Option<Option<String>>,
    pub api_config: Option<Option<String>>,
    pub category: Option<Option<String>>,
    pub flow_type: Option<ChatflowType>,
    pub mcp_server: Option<Option<McpServerConfig>>,
}

impl ChatflowPatch {
    /// Applies the patch and stamps `updated_date`.
    pub fn apply(self, flow: &mut Chatflow, now: Timestamp) {
        fn set<T>(slot: &mut T, value: Option<T>) {
            if let Some(v) = value {
                *slot = v;
            }
        }
        set(&mut flow.name, self.name);
        set(&mut flow.flow_data, self.flow_data);
        set(&mut flow.deployed, self.deployed);
        set(&mut flow.is_public, self.is_public);
        set(&mut flow.apikeyid, self.apikeyid);
        set(&mut flow.chatbot_config, self.chatbot_config);
        set(
            &mut flow.api_config,
            self.api_config.map(|c| c.map(ApiConfig::new)),
        );
        set(&mut flow.category, self.category);
        set(&mut flow.flow_type, self.flow_type);
        set(&mut flow.mcp_server, self.mcp_server);
        flow.updated_date = now;
    }
}

/// Checks that `flowData` is a JSON object with `nodes` and `edges` arrays.
pub fn validate_flow_data(text: &str) -> Result<(), String> {
    #[derive(Deserialize)]
    #[expect(dead_code, reason = "only the shape is checked")]
    struct Graph {
        nodes: Vec<serde::de::IgnoredAny>,
        edges: Vec<serde::de::IgnoredAny>,
    }
    serde_json::from_str::<Graph>(text)
        .map(|_| ())
        .map_err(|e| format!("flowData must be a JSON object with 'nodes' and 'edges' arrays: {e}"))
}

/// Checks that a JSON-text field (`chatbotConfig`, `apiConfig`) holds a JSON object.
pub fn validate_config_object(field: &str, text: &str) -> Result<(), String> {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
        .map(|_| ())
        .map_err(|e| format!("{field} must be a JSON object: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_data_needs_nodes_and_edges() {
        assert!(validate_flow_data(r#"{"nodes":[],"edges":[]}"#).is_ok());
        assert!(validate_flow_data(r#"{"nodes":[{"id":"a"}],"edges":[],"viewport":{}}"#).is_ok());
        assert!(validate_flow_data(r#"{"nodes":[]}"#).is_err());
        assert!(validate_flow_data(r#"{"nodes":{},"edges":[]}"#).is_err());
        assert!(validate_flow_data("not json").is_err());
        assert!(validate_flow_data("[]").is_err());
    }

    #[test]
    fn config_must_be_an_object() {
        assert!(validate_config_object("apiConfig", r#"{"rateLimit":{}}"#).is_ok());
        assert!(validate_config_object("apiConfig", "[1]").is_err());
        assert!(validate_config_object("apiConfig", "{").is_err());
    }

    #[test]
    fn patch_changes_only_given_fields_and_can_clear() {
        let now = time::now();
        let mut flow = NewChatflow {
            workspace_id: Uuid::nil(),
            name: "a".into(),
            flow_data: r#"{"nodes":[],"edges":[]}"#.into(),
            deployed: false,
            is_public: false,
            apikeyid: None,
            chatbot_config: None,
            api_config: None,
            category: Some("x".into()),
            flow_type: ChatflowType::Chatflow,
        }
        .into_chatflow(Uuid::new_v4(), now);
        let patch = ChatflowPatch {
            name: Some("b".into()),
            category: Some(None),
            ..Default::default()
        };
        patch.apply(&mut flow, now);
        assert_eq!(flow.name, "b");
        assert_eq!(flow.category, None);
        assert!(!flow.deployed);
    }
}
