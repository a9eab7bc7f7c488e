//! Triggers (SPEC.md "Trigger") and their execution results.
//!
//! A trigger runs a chatflow on a cron schedule or when its webhook address is
//! called. `webhook_secret` and `webhook_bot_token` are write-only: they are kept
//! for verification and Telegram calls, and never serialised. Times are UTC with
//! milliseconds.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::time::{self, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TriggerType {
    Cron,
    Webhook,
}

impl TriggerType {
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerType::Cron => "cron",
            TriggerType::Webhook => "webhook",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "cron" => Some(TriggerType::Cron),
            "webhook" => Some(TriggerType::Webhook),
            _ => None,
        }
    }
}

/// The platform whose webhook conventions apply.
pub const TELEGRAM: &str = "telegram";

/// Default run time limit, in seconds (SPEC.md).
pub const DEFAULT_TIMEOUT_SECS: i64 = 300;
/// Longest run time limit a trigger may set.
pub const MAX_TIMEOUT_SECS: i64 = 3600;

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Trigger {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub name: String,
    pub chatflow_id: Uuid,
    pub node_id: String,
    #[serde(rename = "type")]
    pub trigger_type: TriggerType,
    pub cron_expression: Option<String>,
    /// IANA time zone the cron expression is read in.
    pub timezone: String,
    pub enabled: bool,
    pub webhook_platform: Option<String>,
    #[serde(skip)]
    pub webhook_secret: Option<String>,
    #[serde(skip)]
    pub webhook_bot_token: Option<String>,
    pub trigger_message: Option<String>,
    pub execution_count: i64,
    pub max_executions: Option<i64>,
    /// Seconds.
    pub timeout: i64,
    #[serde(serialize_with = "time::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_executed: Option<Timestamp>,
    #[serde(serialize_with = "time::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_execution: Option<Timestamp>,
    pub notification_email: Option<String>,
    /// Made from its chatflow's Start node (Flowise 3.1's `scheduleInput`):
    /// changed and removed with the chatflow, never through `/triggers`.
    pub owned_by_chatflow: bool,
    /// No firing after this time: the trigger switches itself off.
    #[serde(rename = "endDate", serialize_with = "time::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub ends_at: Option<Timestamp>,
    /// A webhook answered at once (`responseMode: async`, 202) rather than with
    /// the run's answer; the outcome goes to `callback_url` when there is one.
    #[serde(rename = "responseMode", serialize_with = "serialize_response_mode")]
    #[schema(value_type = String, example = "sync")]
    pub respond_async: bool,
    pub callback_url: Option<String>,
    /// Signs callbacks (`X-Flowise-Signature`); write-only, sealed at rest.
    #[serde(skip)]
    pub callback_secret: Option<String>,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_date: Timestamp,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_date: Timestamp,
}

/// `sync` or `async`, as stored and shown.
fn response_mode_name(respond_async: bool) -> &'static str {
    if respond_async { "async" } else { "sync" }
}

fn serialize_response_mode<S: serde::Serializer>(
    respond_async: &bool,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(response_mode_name(*respond_async))
}

impl Trigger {
    /// `sync` or `async`, as stored and shown.
    pub fn response_mode(&self) -> &'static str {
        response_mode_name(self.respond_async)
    }

    pub fn is_telegram(&self) -> bool {
        self.webhook_platform.as_deref() == Some(TELEGRAM)
    }

    /// Whether `maxExecutions` is reached.
    pub fn exhausted(&self) -> bool {
        self.max_executions
            .is_some_and(|max| self.execution_count >= max)
    }

    /// What a cron claim does to the trigger, as `plan` decided at `now`: a
    /// run counts one execution (and switches off a trigger that reached its
    /// `maxExecutions`); the next scheduled time is kept only while it is on.
    pub fn advance(&mut self, plan: &ClaimPlan, now: Timestamp) {
        if plan.run_at.is_some() {
            self.execution_count += 1;
            self.last_executed = Some(now);
            if self.exhausted() {
                self.enabled = false;
            }
        }
        // A schedule past its end date is over.
        if self.ends_at.is_some() && plan.next.is_none() {
            self.enabled = false;
        }
        self.next_execution = if self.enabled { plan.next } else { None };
    }

    /// Whether `at` is after the schedule's end date.
    pub fn ended_by(&self, at: Timestamp) -> bool {
        self.ends_at.is_some_and(|end| at > end)
    }

    /// `trigger-<first 8 hex digits of the id>-<epoch ms>`: the session of one firing.
    pub fn chat_id_at(&self, at: Timestamp) -> String {
        let id = self.id.simple().to_string();
        format!("trigger-{}-{}", &id[..8], time::to_millis(&at))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ResultStatus {
    Success,
    Failed,
    /// Scheduled times that passed while no replica was up, recorded once.
    Missed,
}

impl ResultStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ResultStatus::Success => "success",
            ResultStatus::Failed => "failed",
            ResultStatus::Missed => "missed",
        }
    }

    pub fn parse_stored(s: &str) -> Self {
        match s {
            "success" => ResultStatus::Success,
            "missed" => ResultStatus::Missed,
            _ => ResultStatus::Failed,
        }
    }
}

/// One execution of a trigger (SPEC.md "Trigger execution result") plus its
/// status and error.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriggerResult {
    pub id: Uuid,
    pub trigger_id: Uuid,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub executed_at: Timestamp,
    /// The cron time this execution was for (`null` for webhook calls).
    #[serde(serialize_with = "time::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub scheduled_at: Option<Timestamp>,
    pub input: String,
    pub output: Option<String>,
    pub source_documents: Option<Value>,
    pub used_tools: Option<Value>,
    pub chat_id: Option<String>,
    pub status: ResultStatus,
    pub error: Option<String>,
    /// For `missed`: how many scheduled times were skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed_count: Option<i64>,
    /// The callback this execution owes (a webhook call in `async` mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback: Option<super::callback::CallbackState>,
}

/// A result about to be stored.
#[derive(Debug, Clone)]
pub struct NewTriggerResult {
    pub trigger_id: Uuid,
    pub executed_at: Timestamp,
    pub scheduled_at: Option<Timestamp>,
    pub input: String,
    pub output: Option<String>,
    pub source_documents: Option<Value>,
    pub used_tools: Option<Value>,
    pub chat_id: Option<String>,
    pub status: ResultStatus,
    pub error: Option<String>,
    pub missed_count: Option<i64>,
}

impl NewTriggerResult {
    pub fn into_result(self, id: Uuid) -> TriggerResult {
        TriggerResult {
            id,
            trigger_id: self.trigger_id,
            executed_at: self.executed_at,
            scheduled_at: self.scheduled_at,
            input: self.input,
            output: self.output,
            source_documents: self.source_documents,
            used_tools: self.used_tools,
            chat_id: self.chat_id,
            status: self.status,
            error: self.error,
            missed_count: self.missed_count,
            callback: None,
        }
    }
}

/// A claimed firing: the trigger as it was at the claim and the firing's row id.
#[derive(Debug, Clone)]
pub struct Firing {
    pub id: Uuid,
    pub trigger: Trigger,
    /// The cron time (for webhook calls: the moment the call was accepted).
    pub scheduled_at: Timestamp,
    pub is_cron: bool,
    /// Whether a row was written for it before it ran (see
    /// [`FiringEnd::leased`](crate::store::FiringEnd::leased)).
    pub leased: bool,
}

/// A webhook call to claim a firing for: what it asks, its conversation, and
/// the callback it is owed when answered at once (`async` mode).
#[derive(Debug, Clone)]
pub struct WebhookClaim {
    pub input: String,
    pub chat_id: String,
    pub callback: Option<super::callback::NewCallback>,
}

/// What the scheduler decided for one due trigger, inside the claiming transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimPlan {
    /// The scheduled time to run now, if one is recent enough.
    pub run_at: Option<Timestamp>,
    /// Older scheduled times skipped (recorded as one `missed` result).
    pub missed: i64,
    /// The first scheduled time after now.
    pub next: Option<Timestamp>,
}

/// A failure e-mail waiting in the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxMail {
    pub id: Uuid,
    pub trigger_id: Uuid,
    pub recipient: String,
    pub subject: String,
    pub body: String,
    pub attempts: i64,
    pub created_at: Timestamp,
}

/// A mail to put in the outbox with a failed result.
#[derive(Debug, Clone)]
pub struct NewMail {
    pub recipient: String,
    pub subject: String,
    pub body: String,
}

/// The stored answer to a webhook delivery, replayed for a repeated delivery id.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// First time this id is seen: it is now recorded as in progress.
    New,
    /// Seen and answered: the status and body to send again.
    Answered { status: u16, body: String },
    /// Seen and still running.
    InProgress,
}

/// The items as a JSON array, `None` when there are none (a result's `null`).
pub fn non_empty(items: &[Value]) -> Option<Value> {
    (!items.is_empty()).then(|| Value::Array(items.to_vec()))
}

/// The failure e-mail of one execution: names the trigger, its chatflow, the time,
/// the input and the error.
pub fn failure_mail(
    trigger: &Trigger,
    chatflow_name: &str,
    at: Timestamp,
    input: &str,
    error: &str,
) -> Option<NewMail> {
    let recipient = trigger.notification_email.clone()?;
    Some(NewMail {
        recipient,
        subject: format!("weir: trigger '{}' failed", trigger.name),
        body: format!(
            "Trigger: {} ({})\nChatflow: {} ({})\nTime: {}\nInput: {}\nError: {}\n",
            trigger.name,
            trigger.id,
            chatflow_name,
            trigger.chatflow_id,
            time::format(&at),
            input,
            error
        ),
    })
}

/// The conflict of a webhook `nodeId` another webhook trigger of the workspace
/// already uses.
pub fn address_taken(node_id: &str) -> String {
    format!("nodeId '{node_id}' already receives another webhook trigger of this workspace")
}

/// The conflict of a workspace that has as many triggers as it may.
pub fn quota_reached(max: u64) -> String {
    format!(
        "the workspace has {max} triggers, the most it may have (WORKSPACE_MAX_TRIGGERS); \
         delete one first"
    )
}

/// The full webhook address of a trigger on a server reached at `base`: its own
/// id, which no other trigger can take.
pub fn webhook_url(base: &str, trigger: Uuid) -> String {
    format!("{base}/api/v1/triggers/webhook/{trigger}")
}

/// The error recorded for a firing whose replica stopped while running it.
pub const LEASE_EXPIRED: &str =
    "the replica running this execution stopped before it finished; it is not run again";

impl Trigger {
    /// The question a cron firing asks: `triggerMessage`, or a line naming the
    /// trigger when it has none.
    pub fn cron_input(&self) -> String {
        match self.trigger_message.as_deref().map(str::trim) {
            Some(text) if !text.is_empty() => text.to_owned(),
            _ => format!("Scheduled run of trigger '{}'", self.name),
        }
    }
}

/// The one result recording `count` scheduled times skipped while no replica ran.
pub fn missed_result(trigger: &Trigger, now: Timestamp, count: i64) -> NewTriggerResult {
    NewTriggerResult {
        trigger_id: trigger.id,
        executed_at: now,
        scheduled_at: trigger.next_execution,
        input: trigger.cron_input(),
        output: None,
        source_documents: None,
        used_tools: None,
        chat_id: None,
        status: ResultStatus::Missed,
        error: Some(format!(
            "{count} scheduled run(s) from {} on passed while no server was running; \
             they are skipped, not replayed",
            trigger
                .next_execution
                .as_ref()
                .map_or_else(|| "-".to_owned(), time::format)
        )),
        missed_count: Some(count),
    }
}

/// A successful execution's result, without the answer (`output`, its sources and
/// tools), which the caller fills in.
pub fn succeeded_result(
    trigger: &Trigger,
    executed_at: Timestamp,
    scheduled_at: Option<Timestamp>,
    input: String,
    chat_id: String,
) -> NewTriggerResult {
    NewTriggerResult {
        trigger_id: trigger.id,
        executed_at,
        scheduled_at,
        input,
        output: None,
        source_documents: None,
        used_tools: None,
        chat_id: Some(chat_id),
        status: ResultStatus::Success,
        error: None,
        missed_count: None,
    }
}

/// A failed execution's result.
pub fn failed_result(
    trigger: &Trigger,
    executed_at: Timestamp,
    scheduled_at: Option<Timestamp>,
    input: String,
    chat_id: String,
    error: String,
) -> NewTriggerResult {
    NewTriggerResult {
        status: ResultStatus::Failed,
        error: Some(error),
        ..succeeded_result(trigger, executed_at, scheduled_at, input, chat_id)
    }
}

/// A trigger for tests to adjust: a cron trigger of fresh ids, every minute in
/// UTC, enabled, due at `now`.
#[cfg(test)]
impl Trigger {
    pub(crate) fn example(now: Timestamp) -> Trigger {
        Trigger {
            id: Uuid::new_v4(),
            workspace_id: Uuid::new_v4(),
            name: "t".into(),
            chatflow_id: Uuid::new_v4(),
            node_id: "n".into(),
            trigger_type: TriggerType::Cron,
            cron_expression: Some("* * * * *".into()),
            timezone: "UTC".into(),
            enabled: true,
            webhook_platform: None,
            webhook_secret: None,
            webhook_bot_token: None,
            trigger_message: None,
            execution_count: 0,
            max_executions: None,
            timeout: DEFAULT_TIMEOUT_SECS,
            last_executed: None,
            next_execution: Some(now),
            notification_email: None,
            owned_by_chatflow: false,
            ends_at: None,
            respond_async: false,
            callback_url: None,
            callback_secret: None,
            created_date: now,
            updated_date: now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(max_executions: Option<i64>) -> Trigger {
        Trigger {
            max_executions,
            ..Trigger::example(time::now())
        }
    }

    #[test]
    fn a_claim_counts_a_run_and_switches_off_an_exhausted_trigger() {
        let now = time::now();
        let next = Some(now + chrono::TimeDelta::seconds(60));
        let ran = ClaimPlan {
            run_at: Some(now),
            missed: 0,
            next,
        };
        let mut t = cron(Some(2));
        t.advance(&ran, now);
        assert_eq!((t.execution_count, t.enabled), (1, true));
        assert_eq!((t.last_executed, t.next_execution), (Some(now), next));
        t.advance(&ran, now);
        assert_eq!(
            (t.execution_count, t.enabled, t.next_execution),
            (2, false, None)
        );

        // Nothing recent enough to run: only the next time moves.
        let mut t = cron(None);
        let skipped = ClaimPlan {
            run_at: None,
            missed: 3,
            next,
        };
        t.advance(&skipped, now);
        assert_eq!(
            (t.execution_count, t.last_executed, t.next_execution),
            (0, None, next)
        );
    }
}
