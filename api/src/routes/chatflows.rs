//! `/api/v1/chatflows`: create, read, list (paginated, newest first), update and
//! delete chatflow records in the caller's workspace.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::{BodyErrors, CommonErrors, JsonText};
use crate::domain::chatflow::{validate_config_object, validate_flow_data};
use crate::domain::{Chatflow, ChatflowPatch, ChatflowType, NewChatflow, Permission, nullable};
use crate::flow::catalog;
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query, required};
use crate::http::pagination::{PageQuery, total_count};
use crate::http::session;
use crate::services::credentials;
use crate::services::document_stores;
use crate::services::prediction::follow_up::FollowUpSetting;
use crate::services::triggers::start_node;
use crate::store::Listing;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_chatflows, create_chatflow))
        .routes(routes!(get_chatflow, update_chatflow, delete_chatflow))
        .routes(routes!(has_changed))
}

/// Fields of a chatflow as sent by clients; on update every field is optional.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ChatflowBody {
    /// Display name (required on create).
    name: Option<String>,
    /// The graph: JSON text or object with `nodes` and `edges` (required on create).
    flow_data: Option<JsonText>,
    deployed: Option<bool>,
    is_public: Option<bool>,
    /// Id of the only API key allowed to run predictions; null clears it.
    #[serde(default, deserialize_with = "nullable")]
    apikeyid: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    chatbot_config: Option<Option<JsonText>>,
    #[serde(default, deserialize_with = "nullable")]
    api_config: Option<Option<JsonText>>,
    #[serde(default, deserialize_with = "nullable")]
    category: Option<Option<String>>,
    #[serde(rename = "type")]
    flow_type: Option<ChatflowType>,
}

impl ChatflowBody {
    /// Validates every given field into a patch.
    async fn into_patch(self, state: &AppState, auth: &AuthUser) -> ApiResult<ChatflowPatch> {
        let workspace = auth.workspace();
        let name = self.name.map(|n| n.trim().to_owned());
        if name.as_deref() == Some("") {
            return Err(ApiError::BadRequest("'name' must not be empty".into()));
        }
        let flow_data = self.flow_data.map(|t| t.0);
        if let Some(text) = &flow_data {
            validate_flow_data(text).map_err(ApiError::BadRequest)?;
            start_node::read(text).map_err(ApiError::BadRequest)?;
            credentials::check_saved_flow(
                &*state.store,
                workspace,
                text,
                auth.key.has(Permission::CredentialsRead),
                &state.config.providers.provider_key_hosts,
            )
            .await?;
            check_stored_tools(state, workspace, text).await?;
        }
        let config = |field: &str, value: Option<Option<JsonText>>| -> ApiResult<_> {
            let value = value.map(|v| v.map(|t| t.0));
            if let Some(Some(text)) = &value {
                validate_config_object(field, text).map_err(ApiError::BadRequest)?;
            }
            Ok(value)
        };
        let chatbot_config = config("chatbotConfig", self.chatbot_config)?;
        if let Some(Some(text)) = &chatbot_config {
            check_follow_ups(text, auth)?;
        }
        let api_config = config("apiConfig", self.api_config)?;
        let apikeyid = match self.apikeyid {
            Some(Some(id)) if !id.trim().is_empty() => {
                Some(Some(check_key_id(state, workspace, id.trim()).await?))
            }
            Some(_) => Some(None),
            None => None,
        };
        Ok(ChatflowPatch {
            name,
            flow_data,
            deployed: self.deployed,
            is_public: self.is_public,
            apikeyid,
            chatbot_config,
            api_config,
            category: self.category,
            flow_type: self.flow_type,
            mcp_server: None,
        })
    }
}

/// Every stored tool a flow's `customTool` nodes select must be a tool of the
/// workspace: said when the flow is saved, not when it first runs. A flow that
/// does not build yet is left to its run to report.
async fn check_stored_tools(state: &AppState, workspace: Uuid, flow_data: &str) -> ApiResult<()> {
    let settings = &state.config.providers;
    let Ok(plan) = crate::flow::Plan::build(flow_data, settings) else {
        return Ok(());
    };
    let Ok(runnable) = plan.runnable(&crate::flow::Overrides::new(settings)) else {
        return Ok(());
    };
    for id in runnable.stored_tools() {
        if state.store.get_tool(workspace, id).await?.is_none() {
            return Err(ApiError::BadRequest(format!(
                "the flow selects tool {id} ('selectedTool' of a customTool), which is not a \
                 tool of this workspace: create it first (POST /api/v1/tools), or give the node \
                 its definition (customToolName, customToolSchema and a Python customToolFunc)"
            )));
        }
    }
    Ok(())
}

/// `chatbotConfig.followUpPrompts`, when on, must name a provider weir runs and
/// its model; naming a credential takes `credentials:read`, as a flow's node does.
fn check_follow_ups(chatbot_config: &str, auth: &AuthUser) -> ApiResult<()> {
    let setting =
        FollowUpSetting::of(Some(chatbot_config)).map_err(|e| ApiError::BadRequest(e.message))?;
    if setting
        .as_ref()
        .and_then(FollowUpSetting::credential)
        .is_some()
        && !auth.key.has(Permission::CredentialsRead)
    {
        return Err(ApiError::Forbidden(
            "chatbotConfig.followUpPrompts names a stored credential: saving it needs the \
             'credentials:read' permission"
                .into(),
        ));
    }
    Ok(())
}

/// A chatflow of the caller's workspace; 404 `Chatflow <id> not found` (Flowise's
/// words) otherwise.
pub(super) async fn find(state: &AppState, auth: &AuthUser, id: Uuid) -> ApiResult<Chatflow> {
    state
        .store
        .get_chatflow(auth.workspace(), id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("Chatflow {id} not found")))
}

/// `apikeyid` must name a key of the same workspace.
async fn check_key_id(state: &AppState, workspace: Uuid, id: &str) -> ApiResult<String> {
    let bad = || {
        ApiError::BadRequest(format!(
            "'apikeyid' {id} is not an API key of this workspace"
        ))
    };
    let id = Uuid::parse_str(id).map_err(|_| bad())?;
    let keys = state.store.list_api_keys(Some(workspace)).await?;
    if keys.iter().any(|k| k.id == id) {
        Ok(id.to_string())
    } else {
        Err(bad())
    }
}

/// The records of a (cached, shared) page, serialised without copying them.
struct PageItems(Arc<Listing<Chatflow>>);

impl Serialize for PageItems {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.items.serialize(serializer)
    }
}

/// `?type=&page=&limit=` of the chatflow list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only chatflows of this type (`CHATFLOW`, `AGENTFLOW`, `MULTIAGENT`, `ASSISTANT`).
    #[serde(rename = "type")]
    #[param(value_type = Option<String>)]
    flow_type: Option<ChatflowType>,
    /// 1-based page number (default 1).
    page: Option<u32>,
    /// Items per page (default 20, at most 100).
    limit: Option<u32>,
}

/// Lists the workspace's chatflows, newest `updatedDate` first (of one type when
/// `type` is given).
#[utoipa::path(
    get,
    path = "/api/v1/chatflows",
    tag = "chatflows",
    params(ListQuery),
    responses(
        (status = 200, description = "One page of chatflows; the total is in X-Total-Count",
         body = [Chatflow], headers(("X-Total-Count" = u64, description = "Number of chatflows in all pages"))),
        CommonErrors
    )
)]
async fn list_chatflows(
    auth: AuthUser,
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> ApiResult<Response> {
    auth.require(Permission::ChatflowsRead)?;
    let page = PageQuery {
        page: query.page,
        limit: query.limit,
    }
    .page()?;
    let listing = state
        .store
        .list_chatflows(auth.workspace(), query.flow_type, page)
        .await?;
    Ok((total_count(listing.total), Json(PageItems(listing))).into_response())
}

/// Creates a chatflow.
#[utoipa::path(
    post,
    path = "/api/v1/chatflows",
    tag = "chatflows",
    request_body = ChatflowBody,
    responses(
        (status = 201, description = "The created chatflow", body = Chatflow),
        (status = 412, description = "A required field is missing", body = ErrorBody),
        (status = 409, description = "Its schedule Start node's trigger would pass the workspace's trigger allowance (the chatflow is saved without it)", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn create_chatflow(
    auth: AuthUser,
    State(state): State<AppState>,
    Json(body): Json<ChatflowBody>,
) -> ApiResult<(StatusCode, Json<Chatflow>)> {
    auth.require(Permission::ChatflowsWrite)?;
    let workspace = auth.workspace();
    required(body.name.as_ref(), "name")?;
    required(body.flow_data.as_ref(), "flowData")?;
    let patch = body.into_patch(&state, &auth).await?;
    let flow = NewChatflow {
        workspace_id: workspace,
        name: required(patch.name, "name")?,
        flow_data: required(patch.flow_data, "flowData")?,
        deployed: patch.deployed.unwrap_or(false),
        is_public: patch.is_public.unwrap_or(false),
        apikeyid: patch.apikeyid.flatten(),
        chatbot_config: patch.chatbot_config.flatten(),
        api_config: patch.api_config.flatten(),
        category: patch.category.flatten(),
        flow_type: patch.flow_type.unwrap_or_default(),
    };
    let created = state.store.create_chatflow(flow).await?;
    start_node::sync(&state, &created).await?;
    document_stores::track_use(&state, workspace, created.id, Some(&created.flow_data)).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Reads one chatflow.
#[utoipa::path(
    get,
    path = "/api/v1/chatflows/{id}",
    tag = "chatflows",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    responses(
        (status = 200, description = "The chatflow", body = Chatflow),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn get_chatflow(
    auth: AuthUser,
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Chatflow>> {
    auth.require(Permission::ChatflowsRead)?;
    let mut flow = state
        .store
        .get_chatflow(auth.workspace(), id)
        .await?
        .ok_or_else(|| ApiError::not_found("chatflow"))?;
    // Flowise's canvas draws nodes from what only it writes: a flow written
    // by hand is shown with it filled in (stored as written until saved).
    if session::from_ui(&headers)
        && let Some(dressed) = catalog::dress::dress(&flow.flow_data)
    {
        flow.flow_data = dressed;
    }
    Ok(Json(flow))
}

/// Changes the given fields of a chatflow.
#[utoipa::path(
    put,
    path = "/api/v1/chatflows/{id}",
    tag = "chatflows",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    request_body = ChatflowBody,
    responses(
        (status = 200, description = "The updated chatflow", body = Chatflow),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        (status = 409, description = "Its schedule Start node's trigger would pass the workspace's trigger allowance (the chatflow is saved without it)", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn update_chatflow(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Json(body): Json<ChatflowBody>,
) -> ApiResult<Json<Chatflow>> {
    auth.require(Permission::ChatflowsWrite)?;
    let patch = body.into_patch(&state, &auth).await?;
    let rescheduled = patch.flow_data.is_some() || patch.name.is_some();
    let updated = state
        .store
        .update_chatflow(auth.workspace(), id, patch)
        .await?
        .ok_or_else(|| ApiError::not_found("chatflow"))?;
    if rescheduled {
        start_node::sync(&state, &updated).await?;
        document_stores::track_use(&state, updated.workspace_id, id, Some(&updated.flow_data))
            .await?;
    }
    Ok(Json(updated))
}

/// Deletes a chatflow.
#[utoipa::path(
    delete,
    path = "/api/v1/chatflows/{id}",
    tag = "chatflows",
    params(("id" = Uuid, Path, description = "Chatflow id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn delete_chatflow(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    auth.require(Permission::ChatflowsWrite)?;
    if state.store.delete_chatflow(auth.workspace(), id).await? {
        state.uploads.forget(auth.workspace(), id, None).await;
        document_stores::track_use(&state, auth.workspace(), id, None).await?;
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("chatflow"))
    }
}

/// Whether the chatflow was saved since `updatedDate` (the time the asker
/// loaded it): Flowise's canvas asks before it saves, and offers not to
/// overwrite a newer version.
#[utoipa::path(
    get,
    path = "/api/v1/chatflows/has-changed/{id}/{updatedDate}",
    tag = "chatflows",
    params(("id" = Uuid, Path, description = "Chatflow id"),
           ("updatedDate" = String, Path, description = "The `updatedDate` the caller holds (ISO 8601)")),
    responses(
        (status = 200, description = "`{\"hasChanged\": bool}`", body = Object),
        (status = 404, description = "No such chatflow in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn has_changed(
    auth: AuthUser,
    State(state): State<AppState>,
    Path((id, held)): Path<(Uuid, String)>,
) -> ApiResult<Json<serde_json::Value>> {
    auth.require(Permission::ChatflowsRead)?;
    let held = super::parse_date("updatedDate", &held, chrono::NaiveTime::MIN)?;
    let flow = find(&state, &auth, id).await?;
    // Compared to the millisecond: the precision the date is served with.
    let changed = flow.updated_date.timestamp_millis() > held.timestamp_millis();
    Ok(Json(serde_json::json!({ "hasChanged": changed })))
}
