//! Triggers: chatflows run on a cron schedule or by an incoming webhook.
//!
//! This module owns the definitions — [`create`], [`update`], [`remove`], [`get`],
//! [`list`] and the schedule [`preview`] — with every validation rule, and starts
//! the background loops ([`start_background`]). The rest, one concern a file:
//!
//! - [`schedule`]: POSIX 5-field cron expressions in IANA time zones (croner).
//! - [`scheduler`]: the claim loop every `weir serve` runs: due firings claimed
//!   exactly once across replicas, leases renewed and expired, history pruned.
//! - [`firing`]: one execution: the chatflow run under the trigger's timeout and
//!   its result (and failure mail) stored with the end of the firing.
//! - [`webhook`]: the webhook endpoint's logic: signatures (GitHub, Standard
//!   Webhooks, Telegram's secret token), replay protection, the synchronous run.
//! - [`telegram`]: the Bot API calls (setWebhook, deleteWebhook, sendMessage).
//! - [`secrets`]: webhook secrets and bot tokens sealed at rest.
//! - [`start_node`]: Flowise 3.1's schedule and webhook Start nodes, as a
//!   trigger their chatflow owns (made, changed and removed with the chatflow);
//!   [`start_webhook`] the webhook node's address, `/api/v1/webhook/:chatflowId`.
//! - [`mail`]: the failure-mail sender draining the outbox over SMTP.
//! - [`callbacks`]: the callback sender: a webhook call answered at once
//!   (`async` mode) gets its outcome POSTed, signed, from a durable outbox.
//!
//! An update is one statement: no firing ever sees it half applied. A firing reads
//! the trigger as claimed; deleting a trigger deletes its claimed firings, so one
//! claimed but not yet started never starts.

pub mod callbacks;
pub mod firing;
pub mod mail;
pub mod schedule;
pub mod scheduler;
pub mod secrets;
pub mod start_node;
pub mod start_webhook;
pub mod telegram;
pub mod webhook;

use std::collections::HashMap;

use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{ServiceError, ServiceResult, Services};
use crate::domain::trigger::{DEFAULT_TIMEOUT_SECS, MAX_TIMEOUT_SECS};
use crate::domain::{Page, Trigger, TriggerResult, TriggerType, is_email, time};
use crate::flow::graph::FlowGraph;
use crate::store::Listing;
use schedule::Schedule;

/// Results listed per trigger with `includeResults=true`.
pub const RECENT_RESULTS: u32 = 5;
/// Default and largest `limit` of a results listing.
pub const DEFAULT_RESULTS_LIMIT: u32 = 10;
pub const MAX_RESULTS_LIMIT: u32 = 100;

/// The fields of a create or update body. On update, absent means unchanged and
/// `null` clears an optional field.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TriggerFields {
    pub name: Option<String>,
    pub chatflow_id: Option<String>,
    pub node_id: Option<String>,
    /// `cron` or `webhook`.
    #[serde(rename = "type")]
    pub trigger_type: Option<String>,
    pub cron_expression: Option<String>,
    /// IANA time zone of the cron expression (default `UTC`).
    #[serde(default, deserialize_with = "crate::domain::nullable")]
    #[schema(value_type = Option<String>)]
    pub timezone: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::domain::nullable")]
    #[schema(value_type = Option<String>)]
    pub trigger_message: Option<Option<String>>,
    pub enabled: Option<bool>,
    #[serde(default, deserialize_with = "crate::domain::nullable")]
    #[schema(value_type = Option<String>)]
    pub webhook_platform: Option<Option<String>>,
    /// Write-only.
    #[serde(default, deserialize_with = "crate::domain::nullable")]
    #[schema(value_type = Option<String>)]
    pub webhook_secret: Option<Option<String>>,
    /// Write-only.
    #[serde(default, deserialize_with = "crate::domain::nullable")]
    #[schema(value_type = Option<String>)]
    pub webhook_bot_token: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::domain::nullable")]
    #[schema(value_type = Option<i64>)]
    pub max_executions: Option<Option<i64>>,
    /// Seconds, 1..=3600 (default 300).
    pub timeout: Option<i64>,
    #[serde(default, deserialize_with = "crate::domain::nullable")]
    #[schema(value_type = Option<String>)]
    pub notification_email: Option<Option<String>>,
    /// Webhook triggers: `sync` (the default: the run's answer) or `async` (202
    /// at once, the outcome POSTed to `callbackUrl`).
    pub response_mode: Option<String>,
    #[serde(default, deserialize_with = "crate::domain::nullable")]
    #[schema(value_type = Option<String>)]
    pub callback_url: Option<Option<String>>,
    /// Write-only: signs callbacks (`X-Flowise-Signature: sha256=<hex>`).
    #[serde(default, deserialize_with = "crate::domain::nullable")]
    #[schema(value_type = Option<String>)]
    pub callback_secret: Option<Option<String>>,
}

impl TriggerFields {
    /// Whether only how runs go is changed (`notificationEmail`, `timeout`,
    /// `maxExecutions`): what a trigger its chatflow owns may change here.
    fn only_run_settings(&self) -> bool {
        self.name.is_none()
            && self.chatflow_id.is_none()
            && self.node_id.is_none()
            && self.trigger_type.is_none()
            && self.cron_expression.is_none()
            && self.timezone.is_none()
            && self.trigger_message.is_none()
            && self.enabled.is_none()
            && self.webhook_platform.is_none()
            && self.webhook_secret.is_none()
            && self.webhook_bot_token.is_none()
            && self.response_mode.is_none()
            && self.callback_url.is_none()
            && self.callback_secret.is_none()
    }
}

/// A trigger with its recent results, for `includeResults=true`.
pub struct TriggerWithResults {
    pub trigger: Trigger,
    pub recent_results: Option<Vec<TriggerResult>>,
}

/// Starts this replica's loops: the scheduler, the failure-mail sender and the
/// callback sender. The
/// tracker also holds every firing they spawn, so shutdown can wait for them.
pub fn start_background(services: &Services, cancel: CancellationToken) -> TaskTracker {
    let tracker = TaskTracker::new();
    tracker.spawn(scheduler::run(
        services.clone(),
        cancel.clone(),
        tracker.clone(),
    ));
    tracker.spawn(mail::run(services.clone(), cancel.clone()));
    tracker.spawn(callbacks::run(services.clone(), cancel));
    tracker
}

/// A trigger of the workspace as stored (its secrets sealed: views show only
/// whether they are set, so reading never depends on the key that sealed them).
pub async fn get(services: &Services, workspace: Uuid, id: Uuid) -> ServiceResult<Trigger> {
    services
        .store
        .get_trigger(workspace, id)
        .await?
        .ok_or(ServiceError::NotFound("trigger"))
}

/// A trigger of the workspace with its secrets opened, for a change that uses them.
async fn get_opened(services: &Services, workspace: Uuid, id: Uuid) -> ServiceResult<Trigger> {
    let stored = get(services, workspace, id).await?;
    secrets::open(&services.keyring, stored).map_err(|e| {
        tracing::error!(trigger = %id, "{e}");
        ServiceError::Conflict(
            "this trigger's webhookSecret or webhookBotToken does not open with the server's \
             keys (was WEIR_SECRET_KEY changed without WEIR_SECRET_KEY_PREVIOUS?); delete the \
             trigger and create it again"
                .into(),
        )
    })
}

pub async fn list(
    services: &Services,
    workspace: Uuid,
    page: Page,
    include_results: bool,
) -> ServiceResult<Listing<TriggerWithResults>> {
    let listing = services.store.list_triggers(workspace, page).await?;
    let mut recent: HashMap<Uuid, Vec<TriggerResult>> = HashMap::new();
    if include_results {
        let ids: Vec<Uuid> = listing.items.iter().map(|t| t.id).collect();
        for result in services
            .store
            .recent_trigger_results(&ids, RECENT_RESULTS)
            .await?
        {
            recent.entry(result.trigger_id).or_default().push(result);
        }
    }
    Ok(Listing {
        total: listing.total,
        items: listing
            .items
            .into_iter()
            .map(|trigger| TriggerWithResults {
                recent_results: include_results
                    .then(|| recent.remove(&trigger.id).unwrap_or_default()),
                trigger,
            })
            .collect(),
    })
}

pub async fn results(
    services: &Services,
    workspace: Uuid,
    id: Uuid,
    limit: Option<u32>,
) -> ServiceResult<Vec<TriggerResult>> {
    let limit = limit.unwrap_or(DEFAULT_RESULTS_LIMIT);
    if !(1..=MAX_RESULTS_LIMIT).contains(&limit) {
        return Err(ServiceError::Invalid(format!(
            "'limit' must be between 1 and {MAX_RESULTS_LIMIT}"
        )));
    }
    let trigger = get(services, workspace, id).await?;
    let mut results = services
        .store
        .list_trigger_results(trigger.id, limit)
        .await?;
    // Only webhook calls answered at once owe callbacks.
    if trigger.trigger_type == TriggerType::Webhook {
        let ids: Vec<Uuid> = results.iter().map(|r| r.id).collect();
        for callback in services.store.callbacks_of_results(&ids).await? {
            if let Some(result) = results.iter_mut().find(|r| r.id == callback.result_id) {
                result.callback = Some(callback);
            }
        }
    }
    Ok(results)
}

/// The next `count` fire times of an expression (default 5, at most 50), after
/// `from` (default now).
pub fn preview(
    expression: Option<&str>,
    timezone: Option<&str>,
    from: Option<&str>,
    count: Option<usize>,
) -> ServiceResult<Vec<time::Timestamp>> {
    let expression = expression.ok_or(ServiceError::Missing("cronExpression"))?;
    let schedule = Schedule::parse(expression, timezone).map_err(ServiceError::Invalid)?;
    let count = count.unwrap_or(5);
    if !(1..=schedule::MAX_PREVIEW).contains(&count) {
        return Err(ServiceError::Invalid(format!(
            "'count' must be between 1 and {}",
            schedule::MAX_PREVIEW
        )));
    }
    let from = match from {
        Some(text) => chrono::DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&chrono::Utc))
            .map_err(|e| ServiceError::Invalid(format!("'from' is not an ISO 8601 time: {e}")))?,
        None => time::now(),
    };
    Ok(schedule.upcoming(from, count))
}

fn required<T>(value: Option<T>, field: &'static str) -> ServiceResult<T> {
    value.ok_or(ServiceError::Missing(field))
}

fn check_name(name: &str) -> ServiceResult<String> {
    let name = name.trim();
    if name.is_empty() || name.len() > 255 {
        return Err(ServiceError::Invalid(
            "'name' must be 1 to 255 characters".into(),
        ));
    }
    Ok(name.to_owned())
}

fn check_max_executions(max: Option<i64>) -> ServiceResult<Option<i64>> {
    match max {
        Some(n) if n < 1 => Err(ServiceError::Invalid(
            "'maxExecutions' must be at least 1".into(),
        )),
        other => Ok(other),
    }
}

fn check_timeout(timeout: i64) -> ServiceResult<i64> {
    if (1..=MAX_TIMEOUT_SECS).contains(&timeout) {
        Ok(timeout)
    } else {
        Err(ServiceError::Invalid(format!(
            "'timeout' must be between 1 and {MAX_TIMEOUT_SECS} seconds"
        )))
    }
}

fn check_email(email: Option<String>) -> ServiceResult<Option<String>> {
    match email.map(|e| e.trim().to_owned()) {
        Some(e) if e.is_empty() => Ok(None),
        Some(e) if is_email(&e) => Ok(Some(e)),
        Some(e) => Err(ServiceError::Invalid(format!(
            "'notificationEmail' is not an e-mail address: {e}"
        ))),
        None => Ok(None),
    }
}

fn check_platform(platform: Option<String>) -> ServiceResult<Option<String>> {
    match platform.map(|p| p.trim().to_ascii_lowercase()) {
        Some(p) if p.is_empty() => Ok(None),
        Some(p) if p.len() <= 32 && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') => {
            Ok(Some(p))
        }
        Some(p) => Err(ServiceError::Invalid(format!(
            "'webhookPlatform' must be a short name such as 'telegram', got '{p}'"
        ))),
        None => Ok(None),
    }
}

/// Telegram accepts 1–256 characters of `A-Za-z0-9_-` as a secret token.
fn is_telegram_secret(secret: &str) -> bool {
    (1..=256).contains(&secret.len())
        && secret
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The chatflow of the workspace, and `node_id` one of its nodes.
async fn check_target(
    services: &Services,
    workspace: Uuid,
    chatflow_id: &str,
    node_id: &str,
) -> ServiceResult<Uuid> {
    let id = Uuid::parse_str(chatflow_id.trim())
        .map_err(|_| ServiceError::Invalid(format!("'chatflowId' is not a UUID: {chatflow_id}")))?;
    let flow = services
        .store
        .get_chatflow(workspace, id)
        .await?
        .ok_or(ServiceError::NotFound("chatflow"))?;
    let graph = FlowGraph::parse(&flow.flow_data).map_err(|e| {
        ServiceError::Invalid(format!("the chatflow's flowData cannot be read: {e}"))
    })?;
    if !graph.contains(node_id) {
        return Err(ServiceError::Invalid(format!(
            "'nodeId' {node_id} is not a node of chatflow {id}"
        )));
    }
    Ok(id)
}

/// Secrets and the platform must agree: a bot token only for Telegram, and a
/// Telegram secret in the characters Telegram accepts (generated when absent).
fn settle_webhook_auth(trigger: &mut Trigger) -> ServiceResult<()> {
    if trigger.trigger_type == TriggerType::Cron {
        if trigger.webhook_secret.is_some()
            || trigger.webhook_bot_token.is_some()
            || trigger.webhook_platform.is_some()
        {
            return Err(ServiceError::Invalid(
                "webhookPlatform, webhookSecret and webhookBotToken are for webhook triggers"
                    .into(),
            ));
        }
        return Ok(());
    }
    if let Some(secret) = &trigger.webhook_secret
        && (secret.is_empty() || secret.len() > 1024)
    {
        return Err(ServiceError::Invalid(
            "'webhookSecret' must be 1 to 1024 characters".into(),
        ));
    }
    if !trigger.is_telegram() {
        if trigger.webhook_bot_token.is_some() {
            return Err(ServiceError::Invalid(
                "'webhookBotToken' needs webhookPlatform 'telegram'".into(),
            ));
        }
        return Ok(());
    }
    match &trigger.webhook_secret {
        Some(secret) if !is_telegram_secret(secret) => Err(ServiceError::Invalid(
            "a Telegram 'webhookSecret' must be 1 to 256 characters of A-Z, a-z, 0-9, _ and -"
                .into(),
        )),
        Some(_) => Ok(()),
        None if trigger.webhook_bot_token.is_some() => {
            trigger.webhook_secret = Some(telegram::generate_secret());
            Ok(())
        }
        None => Ok(()),
    }
}

/// `responseMode`: `sync` (false) or `async` (true).
fn check_response_mode(mode: Option<&str>) -> ServiceResult<bool> {
    match mode {
        None | Some("sync") => Ok(false),
        Some("async") => Ok(true),
        Some(other) => Err(ServiceError::Invalid(format!(
            "'responseMode' must be 'sync' or 'async', got '{other}'"
        ))),
    }
}

/// The async answer's settings agree: webhook triggers only, a callback only in
/// `async` mode, its URL one the request tools' address guard lets through.
fn check_callback(services: &Services, trigger: &Trigger) -> ServiceResult<()> {
    let asks_async = trigger.respond_async
        || trigger.callback_url.is_some()
        || trigger.callback_secret.is_some();
    if trigger.trigger_type == TriggerType::Cron && asks_async {
        return Err(ServiceError::Invalid(
            "responseMode, callbackUrl and callbackSecret are for webhook triggers".into(),
        ));
    }
    if !trigger.respond_async && trigger.callback_url.is_some() {
        return Err(ServiceError::Invalid(
            "'callbackUrl' needs responseMode 'async'".into(),
        ));
    }
    if trigger.callback_secret.is_some() && trigger.callback_url.is_none() {
        return Err(ServiceError::Invalid(
            "'callbackSecret' needs a callbackUrl".into(),
        ));
    }
    if let Some(secret) = &trigger.callback_secret
        && (secret.is_empty() || secret.len() > 1024)
    {
        return Err(ServiceError::Invalid(
            "'callbackSecret' must be 1 to 1024 characters".into(),
        ));
    }
    if let Some(url) = &trigger.callback_url {
        callbacks::check_url(services, url)
            .map_err(|why| ServiceError::Invalid(format!("'callbackUrl' {why}")))?;
    }
    Ok(())
}

/// The trigger's schedule, if it fires no sooner after a firing than
/// `min_interval_secs` (TRIGGER_MIN_INTERVAL_SECS).
fn schedule_of(trigger: &Trigger, min_interval_secs: u64) -> ServiceResult<Option<Schedule>> {
    match (trigger.trigger_type, &trigger.cron_expression) {
        (TriggerType::Cron, Some(expr)) => {
            let schedule =
                Schedule::parse(expr, Some(&trigger.timezone)).map_err(ServiceError::Invalid)?;
            // Every 5-field schedule keeps a minute between firings.
            if min_interval_secs > 60
                && let Some(gap) = schedule.shortest_gap(time::now())
                && u64::try_from(gap.num_seconds()).unwrap_or(0) < min_interval_secs
            {
                return Err(ServiceError::Invalid(format!(
                    "'{expr}' fires {} s after a firing at times; this server allows one firing \
                     every {min_interval_secs} s at most (TRIGGER_MIN_INTERVAL_SECS)",
                    gap.num_seconds()
                )));
            }
            Ok(Some(schedule))
        }
        (TriggerType::Cron, None) => Err(ServiceError::Missing("cronExpression")),
        (TriggerType::Webhook, Some(_)) => Err(ServiceError::Invalid(
            "'cronExpression' is for cron triggers".into(),
        )),
        (TriggerType::Webhook, None) => Ok(None),
    }
}

pub async fn create(
    services: &Services,
    workspace: Uuid,
    fields: TriggerFields,
) -> ServiceResult<Trigger> {
    let name = check_name(&required(fields.name, "name")?)?;
    let chatflow_id = required(fields.chatflow_id, "chatflowId")?;
    let node_id = required(fields.node_id, "nodeId")?.trim().to_owned();
    let kind = required(fields.trigger_type, "type")?;
    let trigger_type = TriggerType::parse(&kind).ok_or_else(|| {
        ServiceError::Invalid(format!("'type' must be 'cron' or 'webhook', got '{kind}'"))
    })?;
    if trigger_type == TriggerType::Cron && fields.cron_expression.is_none() {
        return Err(ServiceError::Missing("cronExpression"));
    }
    let timezone = schedule::parse_zone(fields.timezone.flatten().as_deref())
        .map_err(ServiceError::Invalid)?;
    let now = time::now();
    let mut trigger = Trigger {
        id: Uuid::new_v4(),
        workspace_id: workspace,
        name,
        chatflow_id: Uuid::nil(),
        node_id,
        trigger_type,
        cron_expression: fields.cron_expression.map(|e| e.trim().to_owned()),
        timezone: timezone.name().to_owned(),
        enabled: fields.enabled.unwrap_or(true),
        webhook_platform: check_platform(fields.webhook_platform.flatten())?,
        webhook_secret: fields.webhook_secret.flatten(),
        webhook_bot_token: fields.webhook_bot_token.flatten().filter(|t| !t.is_empty()),
        trigger_message: fields.trigger_message.flatten(),
        execution_count: 0,
        max_executions: check_max_executions(fields.max_executions.flatten())?,
        timeout: check_timeout(fields.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS))?,
        last_executed: None,
        next_execution: None,
        notification_email: check_email(fields.notification_email.flatten())?,
        owned_by_chatflow: false,
        ends_at: None,
        respond_async: check_response_mode(fields.response_mode.as_deref())?,
        callback_url: fields.callback_url.flatten(),
        callback_secret: fields.callback_secret.flatten(),
        created_date: now,
        updated_date: now,
    };
    let schedule = schedule_of(&trigger, services.config.trigger_min_interval_secs)?;
    settle_webhook_auth(&mut trigger)?;
    check_callback(services, &trigger)?;
    trigger.chatflow_id = check_target(services, workspace, &chatflow_id, &trigger.node_id).await?;
    if trigger.enabled
        && let Some(schedule) = &schedule
    {
        trigger.next_execution = schedule.next_after(now);
    }
    let registered = telegram::sync_registration(services, None, &trigger).await?;
    let stored = secrets::seal(&services.keyring, &trigger)?;
    match services
        .store
        .create_trigger(stored, services.config.workspace_max_triggers)
        .await
    {
        Ok(created) => {
            warn_if_no_smtp(services, &created);
            services.scheduler_wake.notify_one();
            secrets::open(&services.keyring, created)
        }
        Err(e) => {
            if let Some(trigger) = registered {
                telegram::unregister_quietly(services, &trigger).await;
            }
            Err(e.into())
        }
    }
}

pub async fn update(
    services: &Services,
    workspace: Uuid,
    id: Uuid,
    fields: TriggerFields,
) -> ServiceResult<Trigger> {
    let before = get_opened(services, workspace, id).await?;
    if before.owned_by_chatflow && !fields.only_run_settings() {
        refuse_owned(&before)?;
    }
    let mut t = before.clone();
    if let Some(kind) = &fields.trigger_type
        && TriggerType::parse(kind) != Some(t.trigger_type)
    {
        return Err(ServiceError::Invalid(
            "'type' cannot change; create a new trigger instead".into(),
        ));
    }
    if let Some(name) = fields.name {
        t.name = check_name(&name)?;
    }
    if let Some(expr) = fields.cron_expression {
        t.cron_expression = Some(expr.trim().to_owned());
    }
    if let Some(zone) = fields.timezone {
        t.timezone = schedule::parse_zone(zone.as_deref())
            .map_err(ServiceError::Invalid)?
            .name()
            .to_owned();
    }
    if let Some(message) = fields.trigger_message {
        t.trigger_message = message;
    }
    if let Some(platform) = fields.webhook_platform {
        t.webhook_platform = check_platform(platform)?;
    }
    if let Some(secret) = fields.webhook_secret {
        t.webhook_secret = secret;
    }
    if let Some(token) = fields.webhook_bot_token {
        t.webhook_bot_token = token.filter(|t| !t.is_empty());
    }
    if let Some(max) = fields.max_executions {
        t.max_executions = check_max_executions(max)?;
    }
    if let Some(timeout) = fields.timeout {
        t.timeout = check_timeout(timeout)?;
    }
    if let Some(email) = fields.notification_email {
        t.notification_email = check_email(email)?;
    }
    if let Some(mode) = fields.response_mode {
        t.respond_async = check_response_mode(Some(&mode))?;
    }
    if let Some(url) = fields.callback_url {
        t.callback_url = url;
    }
    if let Some(secret) = fields.callback_secret {
        t.callback_secret = secret;
    }
    if let Some(node) = fields.node_id {
        t.node_id = node.trim().to_owned();
    }
    let chatflow = fields
        .chatflow_id
        .unwrap_or_else(|| t.chatflow_id.to_string());
    if chatflow != before.chatflow_id.to_string() || t.node_id != before.node_id {
        t.chatflow_id = check_target(services, workspace, &chatflow, &t.node_id).await?;
    }
    if let Some(enabled) = fields.enabled {
        t.enabled = enabled;
    }
    if t.enabled && t.exhausted() {
        if fields.enabled == Some(true) {
            return Err(ServiceError::Conflict(format!(
                "the trigger has run {} of its {} maxExecutions; raise maxExecutions to enable it",
                t.execution_count,
                t.max_executions.unwrap_or_default()
            )));
        }
        t.enabled = false;
    }
    let schedule = schedule_of(&t, services.config.trigger_min_interval_secs)?;
    settle_webhook_auth(&mut t)?;
    check_callback(services, &t)?;
    let now = time::now();
    let schedule_changed = t.cron_expression != before.cron_expression
        || t.timezone != before.timezone
        || t.enabled != before.enabled;
    t.next_execution = match &schedule {
        _ if !t.enabled => None,
        // An unchanged schedule keeps its next time: a firing that is due right
        // now must not be skipped by an unrelated edit.
        Some(_) if !schedule_changed && before.next_execution.is_some() => before.next_execution,
        Some(schedule) => schedule.next_after(now),
        None => None,
    };
    t.updated_date = now;
    telegram::sync_registration(services, Some(&before), &t).await?;
    if !services
        .store
        .update_trigger(&secrets::seal(&services.keyring, &t)?)
        .await?
    {
        return Err(ServiceError::NotFound("trigger"));
    }
    warn_if_no_smtp(services, &t);
    services.scheduler_wake.notify_one();
    Ok(t)
}

pub async fn remove(services: &Services, workspace: Uuid, id: Uuid) -> ServiceResult<()> {
    let stored = get(services, workspace, id).await?;
    refuse_owned(&stored)?;
    if !services.store.delete_trigger(workspace, id).await? {
        return Err(ServiceError::NotFound("trigger"));
    }
    if stored.enabled && stored.webhook_bot_token.is_some() {
        // A token that no longer opens cannot unregister the bot; the trigger goes anyway.
        match secrets::open(&services.keyring, stored) {
            Ok(trigger) => telegram::unregister_quietly(services, &trigger).await,
            Err(e) => tracing::warn!(trigger = %id, "cannot unregister the Telegram bot: {e}"),
        }
    }
    services.scheduler_wake.notify_one();
    Ok(())
}

/// 409 for a trigger its chatflow's Start node made: the chatflow is where it
/// changes (only `notificationEmail`, `timeout` and `maxExecutions` change here).
fn refuse_owned(trigger: &Trigger) -> ServiceResult<()> {
    if trigger.owned_by_chatflow {
        return Err(ServiceError::Conflict(format!(
            "trigger {} was made by chatflow {}'s Start node: change it by saving the chatflow \
             (a schedule is switched on and off at /api/v1/chatflows/{}/schedule/enabled); \
             here only notificationEmail, timeout and maxExecutions change",
            trigger.id, trigger.chatflow_id, trigger.chatflow_id
        )));
    }
    Ok(())
}

fn warn_if_no_smtp(services: &Services, trigger: &Trigger) {
    if trigger.notification_email.is_some() && services.config.smtp_url.is_none() {
        tracing::warn!(
            trigger = %trigger.id,
            "notificationEmail set but no SMTP_URL: failure e-mail stays in the outbox unsent"
        );
    }
}
