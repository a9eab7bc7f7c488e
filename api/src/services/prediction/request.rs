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
    /// The trigger firing this run answers, ended with the run's answer in its
    /// own write (see [`FiringEndSlot`]).
    pub firing_end: Option<FiringEndSlot>,
}

/// The end of a trigger firing that a run answers, waiting to be stored.
///
/// A run that answers stores it in the same transaction as its messages (the
/// result's output, `sourceDocuments` and `usedTools` filled from the answer),
/// so a webhook call or a cron firing costs one write, not two. When the run
/// stores nothing (it failed, its write was refused, or the trigger stopped
/// waiting for it), the trigger ends the firing itself: it takes the end with
/// [`FiringEndSlot::take`], which waits while the run's write is in flight,
/// and a run that finds the end taken writes its answer without it. So the
/// firing is ended exactly once, also when the trigger's timeout runs out as
/// the run writes or before a late run writes.
#[derive(Debug, Clone)]
pub struct FiringEndSlot {
    /// The end as the run stores it: a success, its output not filled in.
    pub answered: crate::store::FiringEnd,
    state: std::sync::Arc<tokio::sync::Mutex<EndState>>,
}

/// Who ended a firing, if anyone has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum EndState {
    #[default]
    Open,
    /// The run committed it with its answer.
    StoredByRun,
    /// The trigger ends it with a write of its own.
    TakenByTrigger,
}

impl FiringEndSlot {
    pub fn new(answered: crate::store::FiringEnd) -> Self {
        FiringEndSlot {
            answered,
            state: Default::default(),
        }
    }

    /// Held by the run while it writes its answer with the end (when the
    /// state is [`EndState::Open`]); set to [`EndState::StoredByRun`] once
    /// that write has committed.
    pub(super) async fn hold(&self) -> tokio::sync::MutexGuard<'_, EndState> {
        self.state.lock().await
    }

    /// Takes the end for the trigger to write: `false` when the run already
    /// stored it (waiting for a write in flight to be over), and from then on
    /// the run stores its answer without it.
    pub async fn take(&self) -> bool {
        let mut state = self.state.lock().await;
        if *state == EndState::StoredByRun {
            return false;
        }
        *state = EndState::TakenByTrigger;
        true
    }
}

/// `humanInput` of a prediction: go on with (or reject) a stopped agentflow run.
#[derive(Debug, Clone, Default)]
pub struct HumanAnswer {
    pub proceed: bool,
    /// The node the run waits at; the stopped run's own when absent.
    pub start_node_id: Option<String>,
    pub feedback: String,
}
