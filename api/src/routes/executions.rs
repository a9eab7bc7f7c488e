//! `/api/v1/executions`: the workspace's agentflow executions (read, share,
//! delete) and `/api/v1/public-executions/:id`, a shared execution read without a
//! key. Executions are made by the engine as agentflows run, never here.
//!
//! Where weir differs from Flowise (docs/api.md "Executions"): an unknown `state`
//! filter or a date that does not parse is a 400 (Flowise ignores an unknown
//! state); an unknown id is a 404 (Flowise answers 500); only
//! `isPublic` may be changed; listings page like every other weir list (default
//! 20, at most 100; Flowise's default is 12) and name each item's chatflow by
//! `{id, name}` instead of embedding it whole.

use axum::extract::State;
use chrono::NaiveTime;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::{BodyErrors, CommonErrors, end_of_day, parse_date, parse_uuid};
use crate::domain::{Execution, ExecutionFilter, ExecutionState, ListedExecution, Permission};
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query, required};
use crate::http::pagination::PageQuery;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_executions, delete_executions))
        .routes(routes!(get_execution, update_execution, delete_execution))
        .routes(routes!(get_public_execution))
}

/// The answer of a bulk delete without ids (Flowise's words).
const NO_IDS: &str = "No execution IDs provided";

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
struct ExecutionQuery {
    /// Only the execution of this id.
    #[param(value_type = Option<Uuid>)]
    id: Option<String>,
    /// Only executions of this chatflow.
    #[param(value_type = Option<Uuid>)]
    agentflow_id: Option<String>,
    /// Only executions of chatflows whose name contains this (case-insensitive).
    agentflow_name: Option<String>,
    /// Only executions of this session.
    session_id: Option<String>,
    /// Only executions in this state.
    #[param(value_type = Option<ExecutionState>)]
    state: Option<String>,
    /// Created at or after: ISO 8601 date-time, or a date (its start, UTC).
    start_date: Option<String>,
    /// Created at or before: ISO 8601 date-time, or a date (its end, UTC).
    end_date: Option<String>,
    /// 1-based page number (default 1).
    page: Option<u32>,
    /// Items per page (default 20, at most 100).
    limit: Option<u32>,
}

impl ExecutionQuery {
    /// The filter the parameters describe; an empty parameter is no filter.
    fn filter(self) -> ApiResult<ExecutionFilter> {
        let given = |value: Option<String>| value.filter(|v| !v.is_empty());
        Ok(ExecutionFilter {
            id: given(self.id).map(|v| parse_uuid("id", &v)).transpose()?,
            agentflow_id: given(self.agentflow_id)
                .map(|v| parse_uuid("agentflowId", &v))
                .transpose()?,
            agentflow_name: given(self.agentflow_name),
            session_id: given(self.session_id),
            state: given(self.state)
                .map(|v| v.parse().map_err(ApiError::BadRequest))
                .transpose()?,
            start_date: given(self.start_date)
                .map(|v| parse_date("startDate", &v, NaiveTime::MIN))
                .transpose()?,
            end_date: given(self.end_date)
                .map(|v| parse_date("endDate", &v, end_of_day()))
                .transpose()?,
        })
    }
}

/// One page of executions and the number across all pages.
#[derive(Debug, Serialize, ToSchema)]
struct ExecutionPage {
    data: Vec<ListedExecution>,
    total: u64,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UpdateExecution {
    /// Whether the execution can be read without a key at
    /// `/api/v1/public-executions/:id` (required; no other field may be sent).
    is_public: Option<bool>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DeleteExecutions {
    /// The executions to delete; ids not in the workspace are not counted.
    execution_ids: Option<Vec<Uuid>>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct Deleted {
    success: bool,
    deleted_count: u64,
}

/// Lists the workspace's executions, newest `updatedDate` first.
#[utoipa::path(
    get,
    path = "/api/v1/executions",
    tag = "executions",
    params(ExecutionQuery),
    responses(
        (status = 200, description = "One page of executions, each with its chatflow's id and name, and the total",
         body = ExecutionPage),
        CommonErrors
    )
)]
async fn list_executions(
    auth: AuthUser,
    State(state): State<AppState>,
    Query(query): Query<ExecutionQuery>,
) -> ApiResult<Json<ExecutionPage>> {
    auth.require(Permission::ExecutionsRead)?;
    let page = PageQuery {
        page: query.page,
        limit: query.limit,
    }
    .page()?;
    let filter = query.filter()?;
    let listing = state
        .store
        .list_executions(auth.workspace(), &filter, page)
        .await?;
    Ok(Json(ExecutionPage {
        data: listing.items,
        total: listing.total,
    }))
}

/// Reads one execution.
#[utoipa::path(
    get,
    path = "/api/v1/executions/{id}",
    tag = "executions",
    params(("id" = Uuid, Path, description = "Execution id")),
    responses(
        (status = 200, description = "The execution", body = Execution),
        (status = 404, description = "No such execution in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn get_execution(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Execution>> {
    auth.require(Permission::ExecutionsRead)?;
    state
        .store
        .get_execution(auth.workspace(), id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("execution"))
}

/// Shares an execution (or stops sharing it): only `isPublic` may change.
#[utoipa::path(
    put,
    path = "/api/v1/executions/{id}",
    tag = "executions",
    params(("id" = Uuid, Path, description = "Execution id")),
    request_body = UpdateExecution,
    responses(
        (status = 200, description = "The updated execution", body = Execution),
        (status = 404, description = "No such execution in this workspace", body = ErrorBody),
        (status = 412, description = "isPublic is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn update_execution(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<UpdateExecution>,
) -> ApiResult<Json<Execution>> {
    auth.require(Permission::ExecutionsWrite)?;
    let public = required(body.is_public, "isPublic")?;
    state
        .store
        .set_execution_public(auth.workspace(), id, public)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("execution"))
}

/// Deletes one execution.
#[utoipa::path(
    delete,
    path = "/api/v1/executions/{id}",
    tag = "executions",
    params(("id" = Uuid, Path, description = "Execution id")),
    responses(
        (status = 200, description = "Deleted", body = Deleted),
        (status = 404, description = "No such execution in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn delete_execution(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Deleted>> {
    auth.require(Permission::ExecutionsWrite)?;
    match state
        .store
        .delete_executions(auth.workspace(), &[id])
        .await?
    {
        0 => Err(ApiError::not_found("execution")),
        deleted_count => Ok(Json(Deleted {
            success: true,
            deleted_count,
        })),
    }
}

/// Deletes several executions: `{"executionIds": [...]}`.
#[utoipa::path(
    delete,
    path = "/api/v1/executions",
    tag = "executions",
    request_body = DeleteExecutions,
    responses(
        (status = 200, description = "How many of the ids were deleted", body = Deleted),
        CommonErrors,
        BodyErrors
    )
)]
async fn delete_executions(
    auth: AuthUser,
    State(state): State<AppState>,
    body: Option<Json<DeleteExecutions>>,
) -> ApiResult<Json<Deleted>> {
    auth.require(Permission::ExecutionsWrite)?;
    let ids = body
        .and_then(|Json(body)| body.execution_ids)
        .filter(|ids| !ids.is_empty())
        .ok_or_else(|| ApiError::BadRequest(NO_IDS.into()))?;
    let deleted_count = state
        .store
        .delete_executions(auth.workspace(), &ids)
        .await?;
    Ok(Json(Deleted {
        success: true,
        deleted_count,
    }))
}

/// Reads a shared execution without a key; its data shows no credential ids.
#[utoipa::path(
    get,
    path = "/api/v1/public-executions/{id}",
    tag = "executions",
    security(()),
    params(("id" = Uuid, Path, description = "Execution id")),
    responses(
        (status = 200, description = "The execution", body = Execution),
        (status = 404, description = "No such execution, or it is not public", body = ErrorBody),
        CommonErrors
    )
)]
async fn get_public_execution(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Execution>> {
    state
        .store
        .find_public_execution(id)
        .await?
        .map(|execution| Json(execution.public_view()))
        .ok_or_else(|| ApiError::not_found("execution"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The query string `pairs` as axum deserialises it.
    fn query(pairs: &[(&str, &str)]) -> ExecutionQuery {
        let text: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let uri: axum::http::Uri = format!("/x?{}", text.join("&")).parse().unwrap_or_default();
        match axum::extract::Query::<ExecutionQuery>::try_from_uri(&uri) {
            Ok(axum::extract::Query(q)) => q,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn empty_parameters_are_no_filter() {
        let filter = query(&[("id", ""), ("state", ""), ("sessionId", "")]).filter();
        assert_eq!(filter.ok(), Some(ExecutionFilter::default()));
    }

    #[test]
    fn states_and_ids_are_checked() {
        let err = query(&[("state", "DONE")])
            .filter()
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|m| m.contains("INPROGRESS") && m.contains("STOPPED")));
        assert!(query(&[("agentflowId", "x")]).filter().is_err());
        let f = query(&[("state", "FINISHED"), ("agentflowName", "Bot")]).filter();
        let f = f.unwrap_or_default();
        assert_eq!(f.state, Some(ExecutionState::Finished));
        assert_eq!(f.agentflow_name.as_deref(), Some("Bot"));
    }

    #[test]
    fn dates_are_iso_8601() {
        let f = query(&[
            ("startDate", "2025-05-01"),
            ("endDate", "2025-05-02T10:00:00%2B02:00"),
        ])
        .filter()
        .unwrap_or_default();
        let show =
            |t: Option<crate::domain::time::Timestamp>| t.map(|t| crate::domain::time::format(&t));
        assert_eq!(
            show(f.start_date).as_deref(),
            Some("2025-05-01T00:00:00.000Z")
        );
        assert_eq!(
            show(f.end_date).as_deref(),
            Some("2025-05-02T08:00:00.000Z")
        );
        let end = query(&[("endDate", "2025-05-01")])
            .filter()
            .unwrap_or_default();
        assert_eq!(
            show(end.end_date).as_deref(),
            Some("2025-05-01T23:59:59.999Z")
        );
        assert!(query(&[("startDate", "yesterday")]).filter().is_err());
        assert!(query(&[("endDate", "2025-13-01")]).filter().is_err());
    }
}
