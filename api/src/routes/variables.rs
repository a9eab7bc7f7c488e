//! `/api/v1/variables`: workspace variables (`$vars` of tool code), names unique
//! per workspace.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::{BodyErrors, CommonErrors};
use crate::domain::variable::validate_name;
use crate::domain::{NewVariable, Permission, Variable, VariablePatch, VariableType};
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query, required};
use crate::http::pagination::{PageQuery, total_count};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_variables, create_variable))
        .routes(routes!(get_variable, update_variable, delete_variable))
}

#[derive(Debug, Deserialize, ToSchema)]
struct VariableBody {
    /// Unique within the workspace (required on create).
    name: Option<String>,
    /// The value; for a `runtime` variable, the name of a server environment variable.
    value: Option<String>,
    /// `static` (default) or `runtime`.
    #[serde(rename = "type")]
    var_type: Option<VariableType>,
}

impl VariableBody {
    fn into_patch(self) -> ApiResult<VariablePatch> {
        if let Some(name) = &self.name {
            validate_name(name).map_err(ApiError::BadRequest)?;
        }
        Ok(VariablePatch {
            name: self.name,
            value: self.value,
            var_type: self.var_type,
        })
    }
}

/// Lists the workspace's variables by name.
#[utoipa::path(
    get,
    path = "/api/v1/variables",
    tag = "variables",
    params(PageQuery),
    responses(
        (status = 200, description = "One page of variables; the total is in X-Total-Count",
         body = [Variable], headers(("X-Total-Count" = u64, description = "Number of variables in all pages"))),
        CommonErrors
    )
)]
async fn list_variables(
    auth: AuthUser,
    State(state): State<AppState>,
    Query(query): Query<PageQuery>,
) -> ApiResult<impl IntoResponse> {
    auth.require(Permission::VariablesRead)?;
    let listing = state
        .store
        .list_variables(auth.workspace(), query.page()?)
        .await?;
    Ok((total_count(listing.total), Json(listing.items)))
}

/// Creates a variable.
#[utoipa::path(
    post,
    path = "/api/v1/variables",
    tag = "variables",
    request_body = VariableBody,
    responses(
        (status = 201, description = "The created variable", body = Variable),
        (status = 409, description = "A variable of that name exists", body = ErrorBody),
        (status = 412, description = "A required field is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn create_variable(
    auth: AuthUser,
    State(state): State<AppState>,
    Json(body): Json<VariableBody>,
) -> ApiResult<(StatusCode, Json<Variable>)> {
    auth.require(Permission::VariablesWrite)?;
    let patch = body.into_patch()?;
    let var = NewVariable {
        name: required(patch.name, "name")?,
        value: patch.value.unwrap_or_default(),
        var_type: patch.var_type.unwrap_or_default(),
    };
    let created = state.store.create_variable(auth.workspace(), var).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Reads one variable.
#[utoipa::path(
    get,
    path = "/api/v1/variables/{id}",
    tag = "variables",
    params(("id" = Uuid, Path, description = "Variable id")),
    responses(
        (status = 200, description = "The variable", body = Variable),
        (status = 404, description = "No such variable in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn get_variable(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Variable>> {
    auth.require(Permission::VariablesRead)?;
    state
        .store
        .get_variable(auth.workspace(), id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("variable"))
}

/// Changes the given fields of a variable.
#[utoipa::path(
    put,
    path = "/api/v1/variables/{id}",
    tag = "variables",
    params(("id" = Uuid, Path, description = "Variable id")),
    request_body = VariableBody,
    responses(
        (status = 200, description = "The updated variable", body = Variable),
        (status = 404, description = "No such variable in this workspace", body = ErrorBody),
        (status = 409, description = "A variable of that name exists", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn update_variable(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<VariableBody>,
) -> ApiResult<Json<Variable>> {
    auth.require(Permission::VariablesWrite)?;
    state
        .store
        .update_variable(auth.workspace(), id, body.into_patch()?)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("variable"))
}

/// Deletes a variable.
#[utoipa::path(
    delete,
    path = "/api/v1/variables/{id}",
    tag = "variables",
    params(("id" = Uuid, Path, description = "Variable id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such variable in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn delete_variable(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    auth.require(Permission::VariablesWrite)?;
    if state.store.delete_variable(auth.workspace(), id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("variable"))
    }
}
