//! Domain types: the records weir keeps (workspaces, API keys, chatflows, credentials, variables,
//! Python tools, conversation messages, leads, triggers and their results
//! (with the callbacks they owe),
//! agentflow executions) and the rules that hold for them whatever the store or the
//! HTTP edge.
//!
//! Nothing here performs I/O. The store persists these types, the routes validate
//! input into them and serialise them out.

pub mod api_config;
pub mod apikey;
pub mod callback;
pub mod chatflow;
pub mod credential;
pub mod document_store;
pub mod execution;
pub mod mcp;
pub mod message;
pub mod time;
pub mod tool;
pub mod trigger;
pub mod variable;
pub mod vector;

pub use api_config::{ApiConfig, RateLimit};
pub use apikey::{ApiKey, NewApiKey, Permission};
pub use chatflow::{Chatflow, ChatflowPatch, ChatflowType, NewChatflow};
pub use document_store::{
    ChunkChange, ChunkPage, ComponentConfig, DocumentChunk, DocumentLoader, DocumentStore,
    DocumentStoreStatus, DocumentStoreWrite, LoaderFile, StoredFile,
};
pub use execution::{
    AgentflowRef, Execution, ExecutionFilter, ExecutionState, ExecutionUpdate, ListedExecution,
    NewExecution,
};
pub use message::{
    ChatMessageRecord, ChatType, Feedback, FeedbackFilter, Lead, MessageFilter, MessageRole,
    NewChatMessage, NewLead, Rating,
};
pub use tool::{FieldType, NewTool, Tool, ToolField, ToolPatch};
pub use trigger::{
    ClaimPlan, Delivery, Firing, NewMail, NewTriggerResult, OutboxMail, ResultStatus, Trigger,
    TriggerResult, TriggerType, WebhookClaim,
};
pub use variable::{NewVariable, Variable, VariablePatch, VariableType};
pub use vector::{ChunkKey, UpsertCounts, UpsertRecord, VectorChunk, VectorWrite};

use uuid::Uuid;

/// A tenant: every key and every resource belongs to exactly one workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    pub id: Uuid,
    pub name: String,
}

/// The workspace created on first start and used when none is named.
pub const DEFAULT_WORKSPACE: &str = "default";

/// One page of a list, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub page: u32,
    pub limit: u32,
}

impl Page {
    pub const DEFAULT_LIMIT: u32 = 20;
    pub const MAX_LIMIT: u32 = 100;

    pub fn offset(self) -> u64 {
        u64::from(self.page.saturating_sub(1)) * u64::from(self.limit)
    }
}

impl Default for Page {
    fn default() -> Self {
        Page {
            page: 1,
            limit: Self::DEFAULT_LIMIT,
        }
    }
}

/// `bytes` as lower-case hex.
pub fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        })
}

/// A plausible e-mail address: one `@`, a dotted domain, no spaces, at most 254 bytes.
pub fn is_email(text: &str) -> bool {
    match text.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.contains('@')
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !text.chars().any(|c| c.is_whitespace() || c.is_control())
                && text.len() <= 254
        }
        None => false,
    }
}

/// Patch helper: tells "field absent" (`None`) from "field set to null" (`Some(None)`).
pub(crate) fn nullable<'de, T, D>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    T: serde::Deserialize<'de>,
    D: serde::Deserializer<'de>,
{
    serde::Deserialize::deserialize(deserializer).map(Some)
}
