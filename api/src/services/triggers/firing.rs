//! One execution of a trigger: the chatflow asked the trigger's question as a
//! prediction is (same plan, memory and events), under the trigger's timeout, and
//! the result stored in the same transaction that ends the firing.
//!
//! Entry points: [`run_cron`] for a claimed cron firing (spawned by the scheduler),
//! [`claim_call`], which claims a webhook call's firing (with a row and a lease,
//! or, for a caller that waits on a trigger without limits, none), and
//! [`execute`], which the webhook path awaits for its answer. A firing's lease
//! is renewed by the scheduler for as long as it is in [`RunningFirings`]. A run
//! over the timeout is cancelled (its event channel is dropped, which stops the
//! provider call) and recorded as failed; a failed run with a `notificationEmail`
//! puts its mail in the outbox with its result.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};
use uuid::Uuid;

use tokio::sync::mpsc;

use super::super::prediction::{
    self, FiringEndSlot, HumanAnswer, Prediction, PredictionEvent, PredictionRequest,
    PredictionResult,
};
use super::super::{ServiceError, Services};
use crate::domain::callback;
use crate::domain::trigger::{
    NewTriggerResult, failed_result, failure_mail, non_empty, succeeded_result,
};
use crate::domain::{ChatType, Firing, Trigger, WebhookClaim, time};
use crate::store::{FiringEnd, StoreResult};

/// Firings this replica is running; the scheduler renews their leases.
#[derive(Default)]
pub struct RunningFirings(Mutex<HashSet<Uuid>>);

impl RunningFirings {
    /// Adds a firing until the returned guard drops.
    fn track(self: &Arc<Self>, id: Uuid) -> Tracked {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(id);
        Tracked {
            set: Arc::clone(self),
            id,
        }
    }

    pub fn ids(&self) -> Vec<Uuid> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .copied()
            .collect()
    }
}

/// Removes its firing from the running set when dropped (also on panic or cancel).
struct Tracked {
    set: Arc<RunningFirings>,
    id: Uuid,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.set
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
    }
}

/// How an execution ended.
#[derive(Debug)]
pub enum Outcome {
    Success(Box<PredictionResult>),
    Failed(String),
    TimedOut(String),
}

/// What a firing asks and remembers.
pub struct Ask {
    pub input: String,
    pub chat_id: String,
    /// `$flow` values for prompts (`{{$flow.body}}`, `{{$flow.headers}}`).
    pub flow_vars: Map<String, Value>,
    /// A person's answer to a run that stopped for it (Flowise's webhook resume).
    pub human_input: Option<HumanAnswer>,
    /// Where the run's events go as they happen (a Flowise webhook's `stream`
    /// mode); the result is stored either way.
    pub live: Option<mpsc::Sender<PredictionEvent>>,
    /// The callback the firing owes (a webhook call answered at once): its body
    /// is written with the result.
    pub callback: Option<CallbackData>,
    /// The run slot taken when the call was accepted (async mode).
    pub permit: Option<crate::services::in_flight::Permit>,
}

/// What a callback's `data` holds when the run answered: the answer the same
/// call would have got synchronously from its front door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackData {
    /// Flowise's webhook address: the full prediction answer.
    Prediction,
    /// weir's trigger webhook: `{text, chatId, sourceDocuments, usedTools}`.
    Trigger,
}

impl CallbackData {
    /// The callback body of an execution that ended with `outcome`.
    fn body(self, outcome: &Outcome, chat_id: &str) -> String {
        match outcome {
            Outcome::Success(answer) => match &answer.action {
                Some(action) => {
                    callback::stopped_body(chat_id, &answer.text, answer.execution_id, action)
                }
                None => callback::success_body(
                    chat_id,
                    &match self {
                        CallbackData::Prediction => {
                            serde_json::to_value(&**answer).unwrap_or(Value::Null)
                        }
                        CallbackData::Trigger => trigger_answer(answer, chat_id),
                    },
                ),
            },
            Outcome::Failed(error) | Outcome::TimedOut(error) => {
                callback::error_body(chat_id, error)
            }
        }
    }
}

/// A weir trigger webhook's answer to a run that answered.
pub fn trigger_answer(result: &PredictionResult, chat_id: &str) -> Value {
    serde_json::json!({
        "text": result.text,
        "chatId": chat_id,
        "sourceDocuments": non_empty(&result.source_documents),
        "usedTools": non_empty(&result.used_tools),
    })
}

/// Runs a claimed cron firing handed to execution at `started` (right after its
/// claim committed: `executedAt` minus the scheduled time is the scheduler's lag),
/// unless its trigger was deleted since the claim.
pub async fn run_cron(services: Services, firing: Firing, started: time::Timestamp) {
    match services.store.firing_exists(firing.id).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::info!(trigger = %firing.trigger.id, "trigger deleted before its firing started");
            return;
        }
        Err(e) => {
            // Running without knowing would risk a deleted trigger's run; the
            // lease expires and records the firing as failed instead.
            tracing::error!(trigger = %firing.trigger.id, error = %e, "cannot check a claimed firing");
            return;
        }
    }
    let ask = Ask {
        input: firing.trigger.cron_input(),
        chat_id: firing.trigger.chat_id_at(firing.scheduled_at),
        flow_vars: Map::new(),
        human_input: None,
        live: None,
        callback: None,
        permit: None,
    };
    let lag = (started - firing.scheduled_at).to_std().unwrap_or_default();
    crate::metrics::metrics()
        .firing_lag_seconds
        .observe(lag.as_secs_f64());
    let outcome = execute(&services, &firing, ask, started).await;
    match outcome {
        Outcome::Success(_) => {
            tracing::info!(trigger = %firing.trigger.id, scheduled = %time::format(&firing.scheduled_at), "trigger fired")
        }
        Outcome::Failed(e) | Outcome::TimedOut(e) => {
            tracing::warn!(trigger = %firing.trigger.id, error = %e, "trigger execution failed")
        }
    }
}

/// Runs the chatflow for a claimed firing and stores its result, executed at
/// `started` (nothing when the trigger was deleted meanwhile, or the firing's
/// lease ran out and another replica recorded it); returns the outcome.
///
/// A firing owing no callback is ended by the run itself when it answers, in
/// the write that stores its messages ([`FiringEndSlot`]); every other end is
/// a write of its own here.
pub async fn execute(
    services: &Services,
    firing: &Firing,
    ask: Ask,
    started: time::Timestamp,
) -> Outcome {
    // Only a leased firing has a row whose lease the scheduler renews.
    let _tracked = firing.leased.then(|| services.running.track(firing.id));
    let trigger = &firing.trigger;
    let scheduled_at = firing.is_cron.then_some(firing.scheduled_at);
    let keep = services.config.trigger_results_keep;
    // A run that answers ends the firing in its own write: the answer is filled in.
    let answered = ask.callback.is_none().then(|| {
        let result = succeeded_result(
            trigger,
            started,
            scheduled_at,
            ask.input.clone(),
            ask.chat_id.clone(),
        );
        FiringEndSlot::new(end_of(firing, result, keep))
    });
    let flow = match services.store.find_chatflow(trigger.chatflow_id).await {
        Ok(Some(flow)) if flow.workspace_id == trigger.workspace_id => Ok(flow),
        Ok(_) => Err("the trigger's chatflow no longer exists".to_owned()),
        Err(e) => {
            tracing::error!(error = %e, "cannot load a trigger's chatflow");
            Err("the chatflow could not be loaded (store failure)".to_owned())
        }
    };
    let flow_name = flow.as_ref().map_or("-", |f| f.name.as_str()).to_owned();
    let outcome = match flow {
        Err(e) => Outcome::Failed(e),
        Ok(flow) => {
            // A Start node's schedule asks what the node says now (a webhook
            // call brings its own question).
            let (question, form) = match (trigger.owned_by_chatflow && firing.is_cron)
                .then(|| super::start_node::ask_of(&flow.flow_data))
                .flatten()
            {
                Some(asked) => asked,
                None => (ask.input.clone(), Map::new()),
            };
            let request = PredictionRequest {
                question,
                form,
                chat_id: Some(ask.chat_id.clone()),
                flow_vars: ask.flow_vars,
                human_input: ask.human_input,
                streaming: ask.live.is_some(),
                permit: ask.permit,
                firing_end: answered.clone(),
                chat_type: if firing.is_cron {
                    ChatType::Scheduled
                } else {
                    ChatType::Webhook
                },
                ..Default::default()
            };
            let limit = Duration::from_secs(u64::try_from(trigger.timeout).unwrap_or(1));
            let live = ask.live;
            let run = async {
                let running = prediction::start(services, &flow, request).await?;
                match live {
                    None => running.answer().await,
                    Some(live) => answer_live(running, live).await,
                }
            };
            match tokio::time::timeout(limit, run).await {
                Err(_) => Outcome::TimedOut(format!(
                    "the run went over the trigger's timeout of {} s and was cancelled",
                    trigger.timeout
                )),
                Ok(Ok(result)) => Outcome::Success(Box::new(result)),
                Ok(Err(ServiceError::Flow(e))) => Outcome::Failed(e.message),
                Ok(Err(ServiceError::Busy(message))) => Outcome::Failed(message),
                Ok(Err(ServiceError::OverBudget { message, .. })) => Outcome::Failed(message),
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "trigger run failed inside weir");
                    Outcome::Failed(
                        "internal error while running the chatflow; see the server log".into(),
                    )
                }
            }
        }
    };
    crate::metrics::metrics().firing(
        if firing.is_cron { "cron" } else { "webhook" },
        matches!(outcome, Outcome::Success(_)),
    );
    if let Some(slot) = &answered
        && !slot.take().await
    {
        return outcome;
    }
    let now = started;
    let callback_body = ask.callback.map(|data| data.body(&outcome, &ask.chat_id));
    let has_callback = callback_body.is_some();
    let (result, mail) = match &outcome {
        Outcome::Success(answer) => (
            NewTriggerResult {
                output: Some(answer.text.clone()),
                source_documents: non_empty(&answer.source_documents),
                used_tools: non_empty(&answer.used_tools),
                ..succeeded_result(trigger, now, scheduled_at, ask.input, ask.chat_id)
            },
            None,
        ),
        Outcome::Failed(error) | Outcome::TimedOut(error) => {
            let mail = failure_mail(trigger, &flow_name, now, &ask.input, error);
            (
                failed_result(
                    trigger,
                    now,
                    scheduled_at,
                    ask.input,
                    ask.chat_id,
                    error.clone(),
                ),
                mail,
            )
        }
    };
    let has_mail = mail.is_some();
    let end = FiringEnd {
        mail,
        callback_body,
        ..end_of(firing, result, keep)
    };
    let stored = match services.store.end_firing(end).await {
        Ok(stored) => stored.is_some(),
        Err(e) => {
            tracing::error!(trigger = %trigger.id, error = %e, "cannot store a trigger result");
            false
        }
    };
    if has_mail && stored {
        services.mail_wake.notify_one();
    }
    if has_callback && stored {
        services.callback_wake.notify_one();
    }
    outcome
}

/// The end of `firing` with `result`, owing no mail or callback.
fn end_of(firing: &Firing, result: NewTriggerResult, keep: u32) -> FiringEnd {
    FiringEnd {
        firing: firing.id,
        leased: firing.leased,
        result,
        mail: None,
        callback_body: None,
        keep,
    }
}

/// Claims the firing of a webhook call to `trigger` (as read for the call)
/// accepted at `now`; `None` when the trigger is disabled or exhausted (or
/// gone).
///
/// A call whose caller waits for the answer (`caller_waits`: sync and stream
/// answers), on a trigger without `maxExecutions`, owing no callback, writes
/// nothing before it runs: its end counts the execution with its result, in
/// one group-committed write (see [`FiringEnd::leased`]). What a row claimed
/// ahead would add is a failed result should this replica die mid-run, and
/// the caller sees that death itself. Every other call is claimed with a row
/// and a lease before it runs (a limit must be taken before the run, and an
/// answer given at once promises an outcome later).
pub async fn claim_call(
    services: &Services,
    trigger: &Trigger,
    now: time::Timestamp,
    call: WebhookClaim,
    caller_waits: bool,
) -> StoreResult<Option<Firing>> {
    if caller_waits && trigger.max_executions.is_none() && call.callback.is_none() {
        return Ok(trigger.enabled.then(|| Firing {
            id: Uuid::new_v4(),
            trigger: trigger.clone(),
            scheduled_at: now,
            is_cron: false,
            leased: false,
        }));
    }
    let lease = now + chrono::TimeDelta::seconds(i64::from(services.config.trigger_lease_secs));
    services
        .store
        .claim_webhook_firing(trigger.id, now, services.replica_id, lease, call)
        .await
}

/// Folds the run's events into its answer while handing each to `live`. A
/// caller that stopped listening does not stop the run: a trigger's run ends
/// and leaves its result either way.
async fn answer_live(
    mut running: Prediction,
    live: mpsc::Sender<PredictionEvent>,
) -> Result<PredictionResult, ServiceError> {
    let mut listening = true;
    while let Some(event) = running.events.recv().await {
        let (forward, outcome) = match event {
            PredictionEvent::Done(result) => {
                let answer = (*result).clone();
                (PredictionEvent::Done(result), Some(Ok(answer)))
            }
            PredictionEvent::Error(message) => (
                PredictionEvent::Error(message.clone()),
                Some(Err(ServiceError::Flow(crate::flow::FlowError::failed(
                    message,
                )))),
            ),
            other => (other, None),
        };
        if listening && live.send(forward).await.is_err() {
            listening = false;
        }
        if let Some(outcome) = outcome {
            return outcome;
        }
    }
    Err(ServiceError::Internal(
        "the run ended without an answer".into(),
    ))
}
