//! `/api/v1/chatflows/:id/schedule/*`: Flowise 3.1's schedule routes over the
//! trigger an agentflow's schedule Start node owns (`services::triggers::start_node`).
//! The record and its logs are shown in Flowise's shapes (`ScheduleRecord`,
//! `ScheduleTriggerLog`), read from weir's trigger and its results.

use axum::extract::{RawQuery, State};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::{BodyErrors, CommonErrors};
use crate::domain::time;
use crate::domain::{Permission, ResultStatus, Trigger, TriggerResult};
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path};
use crate::services::triggers::start_node::{self, ScheduleInput, StartSchedule};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(schedule_status))
        .routes(routes!(set_schedule_enabled))
        .routes(routes!(trigger_logs, delete_trigger_logs))
}

/// Flowise's `ScheduleRecord`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ScheduleRecord {
    id: Uuid,
    /// Always `AGENTFLOW`.
    trigger_type: &'static str,
    target_id: Uuid,
    node_id: String,
    cron_expression: Option<String>,
    timezone: String,
    enabled: bool,
    /// `text`, `form` or `none`.
    schedule_input_mode: Option<&'static str>,
    default_input: Option<String>,
    /// The form's defaults as JSON text (form mode).
    default_form: Option<String>,
    last_run_at: Option<String>,
    next_run_at: Option<String>,
    end_date: Option<String>,
    workspace_id: Uuid,
    created_date: String,
    updated_date: String,
}

impl ScheduleRecord {
    fn new(trigger: Trigger, schedule: Option<&StartSchedule>) -> Self {
        let stamp = |t: Option<time::Timestamp>| t.map(|t| time::format(&t));
        ScheduleRecord {
            id: trigger.id,
            trigger_type: "AGENTFLOW",
            target_id: trigger.chatflow_id,
            node_id: trigger.node_id,
            cron_expression: trigger.cron_expression,
            timezone: trigger.timezone,
            enabled: trigger.enabled,
            schedule_input_mode: schedule.map(StartSchedule::input_mode),
            default_input: trigger.trigger_message,
            default_form: schedule.and_then(|s| match &s.input {
                ScheduleInput::Form(form) => Some(Value::Object(form.clone()).to_string()),
                _ => None,
            }),
            last_run_at: stamp(trigger.last_executed),
            next_run_at: stamp(trigger.next_execution),
            end_date: stamp(trigger.ends_at),
            workspace_id: trigger.workspace_id,
            created_date: time::format(&trigger.created_date),
            updated_date: time::format(&trigger.updated_date),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ScheduleStatus {
    enabled: bool,
    can_enable: bool,
    /// Why the schedule cannot run, when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    record: Option<ScheduleRecord>,
}

/// Whether the chatflow's schedule runs, and why it cannot when it cannot.
#[utoipa::path(
    get,
    path = "/api/v1/chatflows/{id}/schedule/status",
    tag = "schedules",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    responses(
        (status = 200, description = "The schedule's state", body = ScheduleStatus),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn schedule_status(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<ScheduleStatus>> {
    auth.require(Permission::ChatflowsRead)?;
    let flow = super::chatflows::find(&state, &auth, id).await?;
    let trigger = state.store.owned_trigger(auth.workspace(), id).await?;
    let schedule = start_node::schedule(&flow.flow_data);
    let reason = match &schedule {
        Err(e) => Some(e.clone()),
        Ok(None) => Some("Flow is not configured as a scheduled flow".to_owned()),
        Ok(Some(s)) => s.why_not_enabled(time::now()).map(str::to_owned),
    };
    let schedule = schedule.ok().flatten();
    Ok(Json(ScheduleStatus {
        enabled: trigger.as_ref().is_some_and(|t| t.enabled),
        can_enable: reason.is_none(),
        reason,
        record: trigger.map(|t| ScheduleRecord::new(t, schedule.as_ref())),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
struct EnabledBody {
    enabled: Value,
}

/// Switches the chatflow's schedule on or off.
#[utoipa::path(
    patch,
    path = "/api/v1/chatflows/{id}/schedule/enabled",
    tag = "schedules",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    request_body = EnabledBody,
    responses(
        (status = 200, description = "The updated record", body = ScheduleRecord),
        (status = 400, description = "Not a boolean, or the schedule cannot run (the reason)", body = ErrorBody),
        (status = 404, description = "No such chatflow, or it has no schedule", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn set_schedule_enabled(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<EnabledBody>,
) -> ApiResult<Json<ScheduleRecord>> {
    auth.require(Permission::ChatflowsWrite)?;
    let Value::Bool(enabled) = body.enabled else {
        return Err(ApiError::BadRequest("\"enabled\" must be a boolean".into()));
    };
    let flow = super::chatflows::find(&state, &auth, id).await?;
    let trigger = start_node::set_enabled(&state, &flow, enabled).await?;
    let schedule = start_node::schedule(&flow.flow_data).ok().flatten();
    Ok(Json(ScheduleRecord::new(trigger, schedule.as_ref())))
}

/// Flowise's `ScheduleTriggerLog`, from a trigger result.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct TriggerLog {
    id: Uuid,
    schedule_record_id: Uuid,
    trigger_type: &'static str,
    target_id: Uuid,
    /// weir keeps the run's `chatId` instead (its executions are found by it).
    execution_id: Option<String>,
    chat_id: Option<String>,
    /// `SUCCEEDED`, `FAILED` or `SKIPPED` (times missed while no replica ran).
    status: &'static str,
    error: Option<String>,
    elapsed_time_ms: Option<i64>,
    scheduled_at: Option<String>,
    workspace_id: Uuid,
    created_date: String,
}

fn log_status(status: ResultStatus) -> &'static str {
    match status {
        ResultStatus::Success => "SUCCEEDED",
        ResultStatus::Failed => "FAILED",
        ResultStatus::Missed => "SKIPPED",
    }
}

#[derive(Debug, Serialize, ToSchema)]
struct TriggerLogs {
    data: Vec<TriggerLog>,
    total: usize,
    page: usize,
    limit: usize,
}

/// `page` (from 1), `limit` (1 to 100, default 20) and `status` (repeated or
/// comma-separated) of a trigger-logs query.
fn logs_query(raw: Option<&str>) -> ApiResult<(usize, usize, Vec<String>)> {
    let (mut page, mut limit, mut statuses) = (1, 20, Vec::new());
    for pair in raw.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let number = || {
            value
                .parse::<usize>()
                .map_err(|_| ApiError::BadRequest(format!("'{key}' must be a whole number")))
        };
        match key {
            "page" => page = number()?.max(1),
            "limit" => limit = number()?.clamp(1, 100),
            "status" => statuses.extend(
                value
                    .split([',', ' '])
                    .filter(|s| !s.is_empty())
                    .map(|s| s.replace("%2C", ",").to_ascii_uppercase()),
            ),
            _ => {}
        }
    }
    Ok((page, limit, statuses))
}

/// The schedule's runs, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/chatflows/{id}/schedule/trigger-logs",
    tag = "schedules",
    params(
        ("id" = Uuid, Path, description = "Chatflow id"),
        ("page" = Option<usize>, Query, description = "Page, from 1"),
        ("limit" = Option<usize>, Query, description = "Per page, 1 to 100 (default 20)"),
        ("status" = Option<String>, Query, description = "SUCCEEDED, FAILED or SKIPPED (repeat for several)")
    ),
    responses(
        (status = 200, description = "One page of the schedule's runs", body = TriggerLogs),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn trigger_logs(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<TriggerLogs>> {
    auth.require(Permission::ChatflowsRead)?;
    let (page, limit, statuses) = logs_query(query.as_deref())?;
    super::chatflows::find(&state, &auth, id).await?;
    let Some(trigger) = state.store.owned_trigger(auth.workspace(), id).await? else {
        return Ok(Json(TriggerLogs {
            data: Vec::new(),
            total: 0,
            page,
            limit,
        }));
    };
    // Results are kept per trigger up to TRIGGER_RESULTS_KEEP: all of them fit.
    let results: Vec<TriggerResult> = state
        .store
        .list_trigger_results(trigger.id, state.config.trigger_results_keep)
        .await?
        .into_iter()
        .filter(|r| statuses.is_empty() || statuses.iter().any(|s| s == log_status(r.status)))
        .collect();
    let total = results.len();
    let data = results
        .into_iter()
        .skip((page - 1).saturating_mul(limit))
        .take(limit)
        .map(|r| TriggerLog {
            id: r.id,
            schedule_record_id: trigger.id,
            trigger_type: "AGENTFLOW",
            target_id: trigger.chatflow_id,
            execution_id: None,
            chat_id: r.chat_id,
            status: log_status(r.status),
            error: r.error,
            elapsed_time_ms: None,
            scheduled_at: r.scheduled_at.map(|t| time::format(&t)),
            workspace_id: trigger.workspace_id,
            created_date: time::format(&r.executed_at),
        })
        .collect();
    Ok(Json(TriggerLogs {
        data,
        total,
        page,
        limit,
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DeleteLogsBody {
    /// Ids of the logs to delete.
    #[schema(value_type = Vec<String>)]
    log_ids: Value,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DeletedLogs {
    success: bool,
    deleted_logs: u64,
    /// Always 0: a log is a trigger result, which owns no execution (an
    /// agentflow run's execution stays in `/api/v1/executions`).
    deleted_executions: u64,
}

/// Deletes some of the schedule's logs.
#[utoipa::path(
    delete,
    path = "/api/v1/chatflows/{id}/schedule/trigger-logs",
    tag = "schedules",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    request_body = DeleteLogsBody,
    responses(
        (status = 200, description = "How many went", body = DeletedLogs),
        (status = 400, description = "logIds is not a list of strings", body = ErrorBody),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn delete_trigger_logs(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<DeleteLogsBody>,
) -> ApiResult<Json<DeletedLogs>> {
    auth.require(Permission::ChatflowsWrite)?;
    let not_strings = || ApiError::BadRequest("logIds must be a string[]".into());
    let Value::Array(items) = body.log_ids else {
        return Err(not_strings());
    };
    let mut ids = Vec::with_capacity(items.len());
    for item in &items {
        // An id that is not a UUID names no log.
        let text = item.as_str().ok_or_else(not_strings)?;
        if let Ok(id) = Uuid::parse_str(text) {
            ids.push(id);
        }
    }
    super::chatflows::find(&state, &auth, id).await?;
    let deleted = match state.store.owned_trigger(auth.workspace(), id).await? {
        Some(trigger) if !ids.is_empty() => {
            state.store.delete_trigger_results(trigger.id, &ids).await?
        }
        _ => 0,
    };
    Ok(Json(DeletedLogs {
        success: true,
        deleted_logs: deleted,
        deleted_executions: 0,
    }))
}
