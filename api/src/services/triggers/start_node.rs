//! Flowise 3.1's own triggers on weir's engine: an agentflow whose Start node
//! has `startInputType: scheduleInput` owns one cron trigger, one with
//! `webhookTrigger` one webhook trigger (`ownedByChatflow`), made, changed and
//! removed when the chatflow is saved or deleted. So a Flowise-shaped
//! automation gets what every weir trigger has: exactly-once firing across
//! replicas, results, failure mail, metrics; and it shows in
//! `GET /api/v1/triggers`, where changing it is a 409 naming the chatflow.
//!
//! [`read`] turns the Start node into a [`StartTrigger`] when the chatflow is
//! saved: what cannot be read (a cron expression, a time zone or an end date
//! that is not one, no input mode, a response mode weir does not answer) is a
//! 400 and nothing is saved. What only keeps a schedule from running (an end
//! date in the past, no default input) saves it switched off, with the reason
//! in `GET /chatflows/:id/schedule/status` ([`StartSchedule::why_not_enabled`]).
//! [`sync`] then writes the trigger. At each firing of a schedule the Start node
//! says what the run is asked ([`ask_of`]); a webhook call is
//! [`super::start_webhook`]'s.

use serde_json::{Map, Value};
use uuid::Uuid;

use super::super::{ServiceError, ServiceResult, Services};
use super::schedule::{self, Schedule};
use super::start_webhook::StartWebhook;
use super::{schedule_of, secrets};
use crate::domain::time::{self, Timestamp};
use crate::domain::trigger::DEFAULT_TIMEOUT_SECS;
use crate::domain::{Chatflow, Trigger, TriggerType};
use crate::flow::graph::{FlowGraph, FlowNode};

/// What a scheduled run is asked (`scheduleInputMode`).
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleInput {
    /// `text`: `scheduleDefaultInput`.
    Text(String),
    /// `form`: the start form filled with `scheduleFormDefaults`.
    Form(Map<String, Value>),
    /// `none`: a blank question.
    Nothing,
}

/// What a chatflow's Start node makes it: a schedule or a webhook.
#[derive(Debug, Clone, PartialEq)]
pub enum StartTrigger {
    Schedule(StartSchedule),
    Webhook(StartWebhook),
}

impl StartTrigger {
    fn node_id(&self) -> &str {
        match self {
            StartTrigger::Schedule(s) => &s.node_id,
            StartTrigger::Webhook(w) => &w.node_id,
        }
    }

    fn kind(&self) -> TriggerType {
        match self {
            StartTrigger::Schedule(_) => TriggerType::Cron,
            StartTrigger::Webhook(_) => TriggerType::Webhook,
        }
    }
}

/// A Start node's schedule, read from the flow.
#[derive(Debug, Clone, PartialEq)]
pub struct StartSchedule {
    pub node_id: String,
    pub cron: String,
    pub timezone: String,
    pub ends_at: Option<Timestamp>,
    pub input: ScheduleInput,
    /// How many fields the start form declares (`scheduleFormInputTypes`).
    pub form_fields: usize,
}

impl StartSchedule {
    /// Why the schedule cannot run at `now` (Flowise's `canEnable` reasons), if so.
    pub fn why_not_enabled(&self, now: Timestamp) -> Option<&'static str> {
        if self.ends_at.is_some_and(|end| end <= now) {
            return Some("End date is in the past");
        }
        match &self.input {
            ScheduleInput::Text(text) if blank(text) => {
                Some("Default input is required to enable schedule")
            }
            ScheduleInput::Form(_) if self.form_fields == 0 => {
                Some("At least one form field must be defined to enable schedule")
            }
            _ => None,
        }
    }

    /// `scheduleInputMode` as Flowise writes it.
    pub fn input_mode(&self) -> &'static str {
        match self.input {
            ScheduleInput::Text(_) => "text",
            ScheduleInput::Form(_) => "form",
            ScheduleInput::Nothing => "none",
        }
    }
}

/// Flowise's editor leaves `<p></p>` in a rich text input it emptied.
fn blank(text: &str) -> bool {
    let text = text.trim();
    text.is_empty() || text == "<p></p>"
}

/// The Start node of an agentflow, if the flow has one.
fn start_node(graph: &FlowGraph) -> Option<&FlowNode> {
    graph.nodes.iter().find(|n| n.name == "startAgentflow")
}

/// A Start node's text input, trimmed; empty when absent.
pub(super) fn text(node: &FlowNode, name: &str) -> String {
    node.input_text(name).trim().to_owned()
}

/// The flow's trigger, when its Start node starts on a schedule or a webhook;
/// `Err` says what in the node cannot be read.
pub fn read(flow_data: &str) -> Result<Option<StartTrigger>, String> {
    let Ok(graph) = FlowGraph::parse(flow_data) else {
        // Not a flow weir reads; saving it is judged elsewhere.
        return Ok(None);
    };
    match start_node(&graph) {
        Some(node) => read_node(node),
        None => Ok(None),
    }
}

/// What an agentflow's Start node makes its chatflow: a schedule, a webhook
/// or nothing.
pub fn read_node(node: &FlowNode) -> Result<Option<StartTrigger>, String> {
    match text(node, "startInputType").as_str() {
        "scheduleInput" => read_schedule(node).map(|s| Some(StartTrigger::Schedule(s))),
        "webhookTrigger" => StartWebhook::read(node).map(|w| Some(StartTrigger::Webhook(w))),
        _ => Ok(None),
    }
}

/// The flow's schedule, when its Start node starts on one.
pub fn schedule(flow_data: &str) -> Result<Option<StartSchedule>, String> {
    Ok(match read(flow_data)? {
        Some(StartTrigger::Schedule(s)) => Some(s),
        _ => None,
    })
}

fn read_schedule(node: &FlowNode) -> Result<StartSchedule, String> {
    let cron = cron_of(node)?;
    let timezone = schedule::parse_zone(Some(&text(node, "scheduleTimezone")))?
        .name()
        .to_owned();
    Schedule::parse(&cron, Some(&timezone))?;
    let ends_at = match text(node, "scheduleEndDate") {
        end if end.is_empty() => None,
        end => Some(parse_end_date(&end)?),
    };
    let input = match text(node, "scheduleInputMode").as_str() {
        "" => {
            return Err(
                "Schedule Input Mode is required on the Start node when Start Input \
                        Type is Schedule."
                    .into(),
            );
        }
        "text" => ScheduleInput::Text(text(node, "scheduleDefaultInput")),
        "none" => ScheduleInput::Nothing,
        "form" => ScheduleInput::Form(form_defaults(node)?),
        other => {
            return Err(format!(
                "scheduleInputMode '{other}' is not one weir knows (text, form or none)"
            ));
        }
    };
    let form_fields = match node.inputs.get("scheduleFormInputTypes") {
        Some(Value::Array(rows)) => rows.len(),
        _ => 0,
    };
    Ok(StartSchedule {
        node_id: node.id.clone(),
        cron,
        timezone,
        ends_at,
        input,
        form_fields,
    })
}

/// `scheduleFormDefaults`: an object, given as JSON or JSON text.
fn form_defaults(node: &FlowNode) -> Result<Map<String, Value>, String> {
    match node.inputs.get("scheduleFormDefaults") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(o)) => Ok(o.clone()),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(Map::new()),
        Some(Value::String(s)) => match serde_json::from_str(s) {
            Ok(Value::Object(o)) => Ok(o),
            _ => Err("scheduleFormDefaults must be a JSON object".into()),
        },
        Some(_) => Err("scheduleFormDefaults must be a JSON object".into()),
    }
}

/// The cron expression: written (`cronExpression`, also when `scheduleType` is
/// absent, as Flowise reads it) or made from the picker's fields.
fn cron_of(node: &FlowNode) -> Result<String, String> {
    let kind = text(node, "scheduleType");
    if kind.is_empty() || kind == "cronExpression" {
        let cron = text(node, "scheduleCronExpression");
        if cron.is_empty() {
            return Err("the Start node's scheduleCronExpression is empty".into());
        }
        return Ok(cron);
    }
    if kind != "visualPicker" {
        return Err(format!(
            "scheduleType '{kind}' is not one weir knows (visualPicker or cronExpression)"
        ));
    }
    let (hour, minute) = match text(node, "scheduleOnTime") {
        t if t.is_empty() => (0, 0),
        t => parse_time(&t)?,
    };
    let list = |name: &str| -> Result<String, String> {
        let items: Vec<String> = text(node, name)
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if items.is_empty() {
            return Err(format!("the Start node's {name} names no day"));
        }
        Ok(items.join(","))
    };
    match text(node, "scheduleFrequency").as_str() {
        "hourly" => {
            let minute = match text(node, "scheduleOnMinute") {
                m if m.is_empty() => 0,
                m => m
                    .parse::<u32>()
                    .ok()
                    .filter(|m| *m < 60)
                    .ok_or("scheduleOnMinute must be a minute from 0 to 59")?,
            };
            Ok(format!("{minute} * * * *"))
        }
        "daily" => Ok(format!("{minute} {hour} * * *")),
        "weekly" => {
            // Flowise counts 1 (Monday) to 7 (Sunday); cron's Sunday is 0.
            let days = list("scheduleOnDayOfWeek")?
                .split(',')
                .map(|d| if d == "7" { "0" } else { d }.to_owned())
                .collect::<Vec<_>>()
                .join(",");
            Ok(format!("{minute} {hour} * * {days}"))
        }
        "monthly" => Ok(format!(
            "{minute} {hour} {} * *",
            list("scheduleOnDayOfMonth")?
        )),
        other => Err(format!(
            "scheduleFrequency '{other}' is not one weir knows (hourly, daily, weekly or monthly)"
        )),
    }
}

/// `"HH:mm"`.
fn parse_time(text: &str) -> Result<(u32, u32), String> {
    let bad = || format!("scheduleOnTime '{text}' is not a time (HH:mm)");
    let (h, m) = text.split_once(':').ok_or_else(bad)?;
    let h = h.trim().parse::<u32>().ok().filter(|h| *h < 24);
    let m = m.trim().parse::<u32>().ok().filter(|m| *m < 60);
    h.zip(m).ok_or_else(bad)
}

/// An ISO 8601 time, or a date (its midnight, UTC, as JavaScript reads one).
fn parse_end_date(text: &str) -> Result<Timestamp, String> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&chrono::Utc));
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc())
        .ok_or_else(|| format!("scheduleEndDate '{text}' is not a date (YYYY-MM-DD or ISO 8601)"))
}

/// Makes the chatflow's owned trigger match its Start node: created, changed or
/// removed. Called after the chatflow is written (its Start node was read
/// before, so only the store can fail here).
pub async fn sync(services: &Services, flow: &Chatflow) -> ServiceResult<()> {
    let wanted = read(&flow.flow_data).map_err(ServiceError::Invalid)?;
    let existing = services
        .store
        .owned_trigger(flow.workspace_id, flow.id)
        .await?;
    let now = time::now();
    // A Start node that changed kind makes a new trigger (a trigger's type is fixed).
    let existing = match existing {
        Some(owned)
            if wanted
                .as_ref()
                .is_none_or(|w| w.kind() != owned.trigger_type) =>
        {
            services
                .store
                .delete_trigger(flow.workspace_id, owned.id)
                .await?;
            None
        }
        other => other,
    };
    match (wanted, existing) {
        (None, _) => {}
        (Some(wanted), None) => {
            let mut trigger = Trigger {
                id: Uuid::new_v4(),
                workspace_id: flow.workspace_id,
                name: flow.name.clone(),
                chatflow_id: flow.id,
                node_id: String::new(),
                trigger_type: wanted.kind(),
                cron_expression: None,
                timezone: "UTC".into(),
                enabled: match &wanted {
                    StartTrigger::Schedule(s) => s.why_not_enabled(now).is_none(),
                    StartTrigger::Webhook(_) => true,
                },
                webhook_platform: None,
                webhook_secret: None,
                webhook_bot_token: None,
                trigger_message: None,
                execution_count: 0,
                max_executions: None,
                timeout: DEFAULT_TIMEOUT_SECS,
                last_executed: None,
                next_execution: None,
                notification_email: None,
                owned_by_chatflow: true,
                ends_at: None,
                respond_async: false,
                callback_url: None,
                callback_secret: None,
                created_date: now,
                updated_date: now,
            };
            apply(services, &mut trigger, &wanted, None, now)?;
            services
                .store
                .create_trigger(
                    secrets::seal(&services.keyring, &trigger)?,
                    services.config.workspace_max_triggers,
                )
                .await?;
        }
        (Some(wanted), Some(before)) => {
            let mut trigger = before.clone();
            trigger.name = flow.name.clone();
            // A schedule switched off stays off; one that cannot run is switched off.
            if let StartTrigger::Schedule(s) = &wanted {
                trigger.enabled = before.enabled && s.why_not_enabled(now).is_none();
            }
            apply(services, &mut trigger, &wanted, Some(&before), now)?;
            if trigger == before {
                return Ok(());
            }
            services.store.update_trigger(&trigger).await?;
        }
    }
    services.scheduler_wake.notify_one();
    Ok(())
}

/// Copies the Start node's settings onto the trigger: a webhook's node, or a
/// schedule with its next firing planned (kept when nothing about the schedule
/// changed, so an edit never skips a due firing).
fn apply(
    services: &Services,
    trigger: &mut Trigger,
    wanted: &StartTrigger,
    before: Option<&Trigger>,
    now: Timestamp,
) -> ServiceResult<()> {
    trigger.node_id = wanted.node_id().to_owned();
    if let StartTrigger::Schedule(wanted) = wanted {
        plan_schedule(services, trigger, wanted, before, now)?;
    }
    if before.is_none_or(|b| b != &*trigger) {
        trigger.updated_date = now;
    }
    Ok(())
}

fn plan_schedule(
    services: &Services,
    trigger: &mut Trigger,
    wanted: &StartSchedule,
    before: Option<&Trigger>,
    now: Timestamp,
) -> ServiceResult<()> {
    trigger.cron_expression = Some(wanted.cron.clone());
    trigger.timezone.clone_from(&wanted.timezone);
    trigger.ends_at = wanted.ends_at;
    trigger.trigger_message = match &wanted.input {
        ScheduleInput::Text(text) => Some(text.clone()),
        ScheduleInput::Form(_) | ScheduleInput::Nothing => None,
    };
    let schedule = schedule_of(trigger, services.config.trigger_min_interval_secs)?;
    let unchanged = before.is_some_and(|b| {
        b.cron_expression == trigger.cron_expression
            && b.timezone == trigger.timezone
            && b.enabled == trigger.enabled
            && b.ends_at == trigger.ends_at
            && b.next_execution.is_some()
    });
    trigger.next_execution = match schedule {
        _ if !trigger.enabled => None,
        Some(_) if unchanged => before.and_then(|b| b.next_execution),
        Some(schedule) => schedule.next_after(now).filter(|n| !trigger.ended_by(*n)),
        None => None,
    };
    Ok(())
}

/// Switches the chatflow's schedule on or off (`PATCH .../schedule/enabled`):
/// 404 without one, 400 with the reason when it cannot run.
pub async fn set_enabled(
    services: &Services,
    flow: &Chatflow,
    enabled: bool,
) -> ServiceResult<Trigger> {
    let before = services
        .store
        .owned_trigger(flow.workspace_id, flow.id)
        .await?
        .ok_or(ServiceError::NotFound("schedule record for this flow"))?;
    let wanted = schedule(&flow.flow_data)
        .map_err(ServiceError::Invalid)?
        .ok_or_else(|| {
            ServiceError::Invalid("Flow is not configured as a scheduled flow".into())
        })?;
    let now = time::now();
    if enabled && let Some(reason) = wanted.why_not_enabled(now) {
        return Err(ServiceError::Invalid(reason.into()));
    }
    let mut trigger = before.clone();
    trigger.enabled = enabled;
    apply(
        services,
        &mut trigger,
        &StartTrigger::Schedule(wanted),
        Some(&before),
        now,
    )?;
    if trigger != before {
        services.store.update_trigger(&trigger).await?;
        services.scheduler_wake.notify_one();
    }
    Ok(trigger)
}

/// What a firing of an owned trigger asks: the Start node's input as the
/// chatflow holds it now (question, form).
pub fn ask_of(flow_data: &str) -> Option<(String, Map<String, Value>)> {
    let wanted = schedule(flow_data).ok()??;
    Some(match wanted.input {
        ScheduleInput::Text(text) => (text, Map::new()),
        ScheduleInput::Form(form) => (" ".into(), form),
        ScheduleInput::Nothing => (" ".into(), Map::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(inputs: Value) -> String {
        serde_json::json!({
            "nodes": [{"id": "startAgentflow_0", "data": {
                "id": "startAgentflow_0", "name": "startAgentflow", "inputs": inputs}}],
            "edges": []
        })
        .to_string()
    }

    fn schedule(inputs: Value) -> Result<Option<StartSchedule>, String> {
        super::schedule(&flow(inputs))
    }

    #[test]
    fn the_visual_picker_becomes_a_cron_expression() {
        let cron = |extra: Value| {
            let mut inputs = serde_json::json!({
                "startInputType": "scheduleInput", "scheduleType": "visualPicker",
                "scheduleInputMode": "none"});
            if let (Value::Object(a), Value::Object(b)) = (&mut inputs, extra) {
                a.extend(b);
            }
            schedule(inputs).map(|s| s.map(|s| s.cron))
        };
        assert_eq!(
            cron(serde_json::json!({"scheduleFrequency": "hourly", "scheduleOnMinute": 15})),
            Ok(Some("15 * * * *".into()))
        );
        assert_eq!(
            cron(serde_json::json!({"scheduleFrequency": "daily", "scheduleOnTime": "09:30"})),
            Ok(Some("30 9 * * *".into()))
        );
        assert_eq!(
            cron(
                serde_json::json!({"scheduleFrequency": "weekly", "scheduleOnTime": "08:05",
                                    "scheduleOnDayOfWeek": "1,5,7"})
            ),
            Ok(Some("5 8 * * 1,5,0".into()))
        );
        assert_eq!(
            cron(
                serde_json::json!({"scheduleFrequency": "monthly", "scheduleOnTime": "00:00",
                                    "scheduleOnDayOfMonth": "1,15"})
            ),
            Ok(Some("0 0 1,15 * *".into()))
        );
        assert!(
            cron(serde_json::json!({"scheduleFrequency": "daily", "scheduleOnTime": "25:00"}))
                .is_err()
        );
        assert!(cron(serde_json::json!({"scheduleFrequency": "weekly"})).is_err());
    }

    #[test]
    fn what_cannot_be_read_is_an_error_and_what_cannot_run_a_reason() {
        let base = |extra: Value| {
            let mut inputs = serde_json::json!({
                "startInputType": "scheduleInput", "scheduleCronExpression": "0 9 * * 1-5",
                "scheduleInputMode": "text", "scheduleDefaultInput": "Report"});
            if let (Value::Object(a), Value::Object(b)) = (&mut inputs, extra) {
                a.extend(b);
            }
            schedule(inputs)
        };
        let ok = base(serde_json::json!({})).unwrap_or_default();
        assert_eq!(ok.as_ref().map(|s| s.input_mode()), Some("text"));
        assert!(base(serde_json::json!({"scheduleCronExpression": "every day"})).is_err());
        assert!(base(serde_json::json!({"scheduleTimezone": "Mars/Base"})).is_err());
        assert!(base(serde_json::json!({"scheduleEndDate": "soon"})).is_err());
        let missing = base(serde_json::json!({"scheduleInputMode": ""}));
        assert!(missing.is_err_and(|e| e.contains("Schedule Input Mode is required")));
        let now = time::now();
        let past = base(serde_json::json!({"scheduleEndDate": "2020-01-01"}))
            .ok()
            .flatten();
        assert_eq!(
            past.and_then(|s| s.why_not_enabled(now)),
            Some("End date is in the past")
        );
        let empty = base(serde_json::json!({"scheduleDefaultInput": "<p></p>"}))
            .ok()
            .flatten();
        assert_eq!(
            empty.and_then(|s| s.why_not_enabled(now)),
            Some("Default input is required to enable schedule")
        );
        // A chat-started agentflow has no schedule.
        assert_eq!(
            schedule(serde_json::json!({"startInputType": "chatInput"})),
            Ok(None)
        );
    }
}
