//! What a prediction asks: the question, its session, the history and files
//! it brings, its overrides, and a person's answer to a stopped agentflow run.

use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::domain::MessageRole;

/// A prior turn sent with the request.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct HistoryItem {
    pub message: String,
    /// `userMessage` or `apiMessage`.
    #[serde(rename = "type")]
    pub role: MessageRole,
}

/// A file attached to a prediction: what document loaders read.
pub use crate::retrieval::load::FileData as Upload;

/// A picture sent with the question, for a chat model that sees
/// (`allowImageUploads`); its type checked against its bytes.
#[derive(Debug, Clone)]
pub struct ImageUpload {
    pub name: String,
    pub mime: &'static str,
    pub bytes: bytes::Bytes,
}

/// The pictures a vision model takes, by their first bytes: `image/png`,
/// `image/jpeg`, `image/gif` or `image/webp`; `None` for anything else.
pub fn image_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// A validated prediction request.
#[derive(Debug, Default)]
pub struct PredictionRequest {
    pub question: String,
    pub chat_id: Option<String>,
    pub history: Vec<HistoryItem>,
    pub override_config: Option<Map<String, Value>>,
    pub lead_email: Option<String>,
    pub uploads: Vec<Upload>,
    /// Pictures for the chat model (the widget's image uploads).
    pub images: Vec<ImageUpload>,
    /// `$flow` values prompts may use (`{{$flow.body}}` of a webhook call).
    pub flow_vars: Map<String, Value>,
    /// An agentflow's form values (`$form`).
    pub form: Map<String, Value>,
    /// Whether the caller follows the run live (agentflow progress events).
    pub streaming: bool,
    /// A person's answer to an agentflow run that stopped for it.
    pub human_input: Option<HumanAnswer>,
    /// Where the conversation came from (stored with its messages).
    pub chat_type: crate::domain::ChatType,
    /// How many flows deep this run is (0: a client's or a trigger's; more when
    /// an agentflow's `executeFlowAgentflow` runs it).
    pub depth: u32,
    /// The workspace's run slot, taken before the run was accepted (a webhook
    /// call answered at once takes it before its 202, so nothing accepted can
    /// find the workspace full); otherwise the run takes one when it starts.
    pub permit: Option<crate::services::in_flight::Permit>,
}

/// `humanInput` of a prediction: go on with (or reject) a stopped agentflow run.
#[derive(Debug, Clone, Default)]
pub struct HumanAnswer {
    pub proceed: bool,
    /// The node the run waits at; the stopped run's own when absent.
    pub start_node_id: Option<String>,
    pub feedback: String,
}
