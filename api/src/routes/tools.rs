//! `/api/v1/tools`: the workspace's Python tools (name, description, argument
//! schema, code, package requirements), names unique per workspace.
//!
//! Every field sent is checked by the rules of [`crate::domain::tool`] before
//! anything is stored, on create and on update alike; a tool is only defined
//! here, the Python runtime runs it.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::{BodyErrors, CommonErrors};
use crate::domain::tool::{parse_schema, validate_requirement, validate_tool_name};
use crate::domain::{NewTool, Permission, Tool, ToolField, ToolPatch, nullable};
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query, required};
use crate::http::pagination::{PageQuery, total_count};
use crate::http::session;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_tools, create_tool))
        .routes(routes!(get_tool, update_tool, delete_tool))
}

#[derive(Debug, Deserialize, ToSchema)]
struct ToolBody {
    /// The name a model calls: 1 to 64 of `A-Z a-z 0-9 _ -`, unique within the
    /// workspace (required on create).
    name: Option<String>,
    /// What the model is told the tool does (default `""`).
    description: Option<String>,
    /// The arguments: a list of fields, or its JSON text as Flowise stores it
    /// (default `[]`; `null` or `""` is `[]`).
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<Vec<ToolField>>)]
    schema: Option<Option<Value>>,
    /// The Python code (required on create, not blank). Also taken as `func`, the
    /// field Flowise's tools page sends.
    #[serde(alias = "func")]
    code: Option<String>,
    /// PEP 508 package specifiers without URLs or options (default `[]`).
    requirements: Option<Vec<String>>,
}

impl ToolBody {
    /// The validated fields that were sent.
    fn into_patch(self) -> ApiResult<ToolPatch> {
        if let Some(name) = &self.name {
            validate_tool_name(name).map_err(ApiError::BadRequest)?;
        }
        if let Some(code) = &self.code
            && code.trim().is_empty()
        {
            return Err(ApiError::BadRequest("code must not be blank".into()));
        }
        let schema = self
            .schema
            .map(|value| parse_schema(&value.unwrap_or(Value::Null)))
            .transpose()
            .map_err(ApiError::BadRequest)?;
        if let Some(requirements) = &self.requirements {
            for spec in requirements {
                validate_requirement(spec).map_err(ApiError::BadRequest)?;
            }
        }
        Ok(ToolPatch {
            name: self.name,
            description: self.description,
            schema,
            code: self.code,
            requirements: self.requirements,
        })
    }
}

/// Lists the workspace's tools by name.
#[utoipa::path(
    get,
    path = "/api/v1/tools",
    tag = "tools",
    params(PageQuery),
    responses(
        (status = 200, description = "One page of tools; the total is in X-Total-Count",
         body = [Tool], headers(("X-Total-Count" = u64, description = "Number of tools in all pages"))),
        CommonErrors
    )
)]
async fn list_tools(
    auth: AuthUser,
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<PageQuery>,
) -> ApiResult<Response> {
    auth.require(Permission::ToolsRead)?;
    let listing = state
        .store
        .list_tools(auth.workspace(), query.page()?)
        .await?;
    if session::from_ui(&headers) {
        let items: Vec<Value> = listing.items.iter().map(for_ui).collect();
        return Ok((total_count(listing.total), Json(items)).into_response());
    }
    Ok((total_count(listing.total), Json(listing.items)).into_response())
}

/// Creates a tool.
#[utoipa::path(
    post,
    path = "/api/v1/tools",
    tag = "tools",
    request_body = ToolBody,
    responses(
        (status = 201, description = "The created tool", body = Tool),
        (status = 409, description = "A tool of that name exists", body = ErrorBody),
        (status = 412, description = "A required field is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn create_tool(
    auth: AuthUser,
    State(state): State<AppState>,
    Json(body): Json<ToolBody>,
) -> ApiResult<(StatusCode, Json<Tool>)> {
    auth.require(Permission::ToolsWrite)?;
    let patch = body.into_patch()?;
    let tool = NewTool {
        name: required(patch.name, "name")?,
        code: required(patch.code, "code")?,
        description: patch.description.unwrap_or_default(),
        schema: patch.schema.unwrap_or_default(),
        requirements: patch.requirements.unwrap_or_default(),
    };
    let created = state.store.create_tool(auth.workspace(), tool).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Reads one tool.
#[utoipa::path(
    get,
    path = "/api/v1/tools/{id}",
    tag = "tools",
    params(("id" = Uuid, Path, description = "Tool id")),
    responses(
        (status = 200, description = "The tool", body = Tool),
        (status = 404, description = "No such tool in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn get_tool(
    auth: AuthUser,
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<Uuid>,
) -> ApiResult<Response> {
    auth.require(Permission::ToolsRead)?;
    let tool = state
        .store
        .get_tool(auth.workspace(), id)
        .await?
        .ok_or_else(|| ApiError::not_found("tool"))?;
    if session::from_ui(&headers) {
        return Ok(Json(for_ui(&tool)).into_response());
    }
    Ok(Json(tool).into_response())
}

/// A tool as Flowise's tools page reads it: its code also as `func` (weir's
/// tools are Python, shown as they are in the page's editor) and its schema as
/// JSON text, as Flowise stores it.
fn for_ui(tool: &Tool) -> Value {
    let schema = serde_json::to_string(&tool.schema).unwrap_or_else(|_| "[]".into());
    let mut value = serde_json::to_value(tool).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.insert("func".into(), Value::String(tool.code.clone()));
        object.insert("schema".into(), Value::String(schema));
    }
    value
}

/// Changes the given fields of a tool (each checked as on create).
#[utoipa::path(
    put,
    path = "/api/v1/tools/{id}",
    tag = "tools",
    params(("id" = Uuid, Path, description = "Tool id")),
    request_body = ToolBody,
    responses(
        (status = 200, description = "The updated tool", body = Tool),
        (status = 404, description = "No such tool in this workspace", body = ErrorBody),
        (status = 409, description = "A tool of that name exists", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn update_tool(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<ToolBody>,
) -> ApiResult<Json<Tool>> {
    auth.require(Permission::ToolsWrite)?;
    state
        .store
        .update_tool(auth.workspace(), id, body.into_patch()?)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("tool"))
}

/// Deletes a tool.
#[utoipa::path(
    delete,
    path = "/api/v1/tools/{id}",
    tag = "tools",
    params(("id" = Uuid, Path, description = "Tool id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such tool in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn delete_tool(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    auth.require(Permission::ToolsWrite)?;
    if state.store.delete_tool(auth.workspace(), id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("tool"))
    }
}
