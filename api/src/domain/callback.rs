//! Callbacks: the POST a webhook call answered at once (`async` mode) gets when
//! its run ends, kept in a durable outbox until the receiver takes it.
//!
//! A callback is written with the firing it reports ([`NewCallback`]), given
//! its body when the firing ends ([`success_body`], [`stopped_body`],
//! [`error_body`]: Flowise 3.1's `{status, chatId, data | error}`), claimed by a
//! sender ([`OutboxCallback`]) and settled after each attempt
//! ([`CallbackAttempt`]). Its id is the idempotency key the receiver sees, the
//! same on every attempt. [`CallbackState`] is what a trigger's results show.

use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use super::time::{self, Timestamp};

/// A callback owed for a call accepted now.
#[derive(Debug, Clone)]
pub struct NewCallback {
    pub id: Uuid,
    pub url: String,
    /// The signing secret as the store keeps it (sealed).
    pub secret: Option<String>,
}

/// A callback due for an attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxCallback {
    pub id: Uuid,
    pub trigger_id: Uuid,
    pub url: String,
    /// Sealed, as stored.
    pub secret: Option<String>,
    pub body: String,
    /// Attempts made before this one.
    pub attempts: i64,
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptOutcome {
    Delivered,
    /// Failed; tried again at `at`.
    Retry {
        at: Timestamp,
        error: String,
    },
    /// Failed for the last time (or cannot ever succeed): no more attempts.
    GaveUp {
        error: String,
    },
}

/// One attempt, to record.
#[derive(Debug, Clone, PartialEq)]
pub struct CallbackAttempt {
    pub id: Uuid,
    pub at: Timestamp,
    pub outcome: AttemptOutcome,
}

/// Where a result's callback stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CallbackStatus {
    Pending,
    Delivered,
    Failed,
}

impl CallbackStatus {
    /// The status of a callback delivered or given up at those times (if ever).
    pub fn of(delivered_at: Option<Timestamp>, failed_at: Option<Timestamp>) -> Self {
        match (delivered_at, failed_at) {
            (Some(_), _) => CallbackStatus::Delivered,
            (None, Some(_)) => CallbackStatus::Failed,
            (None, None) => CallbackStatus::Pending,
        }
    }
}

/// A result's callback, as its trigger's results show it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallbackState {
    /// The idempotency key the receiver sees.
    pub id: Uuid,
    #[serde(skip)]
    pub result_id: Uuid,
    pub url: String,
    pub status: CallbackStatus,
    pub attempts: i64,
    pub last_error: Option<String>,
    #[serde(serialize_with = "time::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub delivered_at: Option<Timestamp>,
}

/// The body of a run that answered: its full synchronous answer as `data`.
pub fn success_body(chat_id: &str, answer: &Value) -> String {
    json!({"status": "SUCCESS", "chatId": chat_id, "data": answer}).to_string()
}

/// The body of an agentflow run that stopped for a person's answer.
pub fn stopped_body(
    chat_id: &str,
    text: &str,
    execution_id: Option<Uuid>,
    action: &Value,
) -> String {
    json!({
        "status": "STOPPED",
        "chatId": chat_id,
        "data": {"text": text, "executionId": execution_id, "action": action},
    })
    .to_string()
}

/// The body of a run that failed (or whose replica stopped while running it).
pub fn error_body(chat_id: &str, error: &str) -> String {
    json!({"status": "ERROR", "chatId": chat_id, "error": error}).to_string()
}
