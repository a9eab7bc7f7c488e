//! `/api/v1/apikey`: list, create and revoke the workspace's API keys (needs
//! `apikeys:manage`). The plaintext of a key appears once, in the create answer.
//! A key can only grant permissions it holds itself.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::{BodyErrors, CommonErrors};
use crate::domain::apikey::generate_key;
use crate::domain::time::{self, Timestamp};
use crate::domain::{ApiKey, NewApiKey, Permission};
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path, Query, required};
use crate::http::pagination::{PageQuery, total_count};
use crate::http::session;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_keys, create_key))
        .routes(routes!(delete_key))
}

/// A key as listed: never the key itself.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct KeyView {
    id: Uuid,
    key_name: String,
    workspace: String,
    permissions: Vec<Permission>,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    created_date: Timestamp,
    #[serde(serialize_with = "time::serialize_opt")]
    #[schema(value_type = Option<String>, format = DateTime)]
    last_used_date: Option<Timestamp>,
    /// Only for Flowise's UI (`x-request-from: internal`): what its keys page shows.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    ui: Option<KeyForUi>,
}

/// What Flowise's keys page reads of a key.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct KeyForUi {
    /// The key itself is never stored: a mask stands in for it.
    api_key: &'static str,
    #[serde(serialize_with = "time::serialize")]
    created_at: Timestamp,
    /// The chatflows that take only this key.
    chat_flows: Vec<KeyFlow>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct KeyFlow {
    flow_name: String,
    category: Option<String>,
    #[serde(serialize_with = "time::serialize")]
    updated_date: Timestamp,
}

impl From<ApiKey> for KeyView {
    fn from(k: ApiKey) -> Self {
        KeyView {
            id: k.id,
            key_name: k.name,
            workspace: k.workspace_name,
            permissions: k.permissions,
            created_date: k.created_date,
            last_used_date: k.last_used_date,
            ui: None,
        }
    }
}

/// The create answer: the listing fields plus the plaintext key, shown this once.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct CreatedKey {
    #[serde(flatten)]
    key: KeyView,
    /// The key itself. It is not stored and cannot be shown again.
    api_key: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct CreateKey {
    /// Display name of the key (required).
    key_name: Option<String>,
    /// Permissions to grant; default: all of the caller's except `apikeys:manage`.
    permissions: Option<Vec<Permission>>,
}

/// Lists the workspace's keys (without the keys themselves).
#[utoipa::path(
    get,
    path = "/api/v1/apikey",
    tag = "apikeys",
    params(PageQuery),
    responses((status = 200, description = "The workspace's keys (all of them unless `page` or `limit` is given); the total is in X-Total-Count",
               body = [KeyView], headers(("X-Total-Count" = u64, description = "Number of keys in all pages"))), CommonErrors)
)]
async fn list_keys(
    auth: AuthUser,
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<PageQuery>,
) -> ApiResult<impl IntoResponse> {
    auth.require(Permission::ApikeysManage)?;
    let keys = state.store.list_api_keys(Some(auth.workspace())).await?;
    let total = keys.len() as u64;
    // Every key unless a page is asked for (a workspace holds few).
    let page = if query.page.is_some() || query.limit.is_some() {
        Some(query.page()?)
    } else {
        None
    };
    let (skip, take) = page.map_or((0, usize::MAX), |p| {
        (
            usize::try_from(p.offset()).unwrap_or(usize::MAX),
            p.limit as usize,
        )
    });
    let mut views: Vec<KeyView> = keys
        .into_iter()
        .skip(skip)
        .take(take)
        .map(KeyView::from)
        .collect();
    if session::from_ui(&headers) {
        let flows = state.store.all_chatflows(auth.workspace()).await?;
        for view in &mut views {
            let id = view.id.to_string();
            view.ui = Some(KeyForUi {
                api_key: "weir_••••••••••••••••",
                created_at: view.created_date,
                chat_flows: flows
                    .iter()
                    .filter(|f| f.apikeyid.as_deref() == Some(id.as_str()))
                    .map(|f| KeyFlow {
                        flow_name: f.name.clone(),
                        category: f.category.clone(),
                        updated_date: f.updated_date,
                    })
                    .collect(),
            });
        }
    }
    Ok((total_count(total), Json(views)))
}

/// Creates a key in the caller's workspace and shows its plaintext once.
#[utoipa::path(
    post,
    path = "/api/v1/apikey",
    tag = "apikeys",
    request_body = CreateKey,
    responses(
        (status = 201, description = "The new key, with its plaintext", body = CreatedKey),
        (status = 412, description = "keyName is missing", body = ErrorBody),
        CommonErrors,
        BodyErrors
    )
)]
async fn create_key(
    auth: AuthUser,
    State(state): State<AppState>,
    Json(body): Json<CreateKey>,
) -> ApiResult<(StatusCode, Json<CreatedKey>)> {
    auth.require(Permission::ApikeysManage)?;
    let name = required(body.key_name, "keyName")?.trim().to_owned();
    if name.is_empty() {
        return Err(ApiError::BadRequest("'keyName' must not be empty".into()));
    }
    let mut permissions = match body.permissions {
        Some(p) => p,
        None => auth
            .key
            .permissions
            .iter()
            .copied()
            .filter(|p| *p != Permission::ApikeysManage)
            .collect(),
    };
    permissions.sort();
    permissions.dedup();
    if let Some(p) = permissions.iter().find(|p| !auth.key.has(**p)) {
        return Err(ApiError::Forbidden(format!(
            "cannot grant '{p}': this API key does not hold it"
        )));
    }
    let (plaintext, key_hash) = generate_key();
    let key = state
        .store
        .create_api_key(NewApiKey {
            workspace_id: auth.workspace(),
            name,
            permissions,
            key_hash,
        })
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedKey {
            key: key.into(),
            api_key: plaintext,
        }),
    ))
}

/// Revokes a key of the workspace; it stops working at once. A key may revoke
/// only keys it could have minted: one holding a permission the caller lacks is
/// a 403 (an `apikeys:manage`-only key cannot take the workspace's full key away).
#[utoipa::path(
    delete,
    path = "/api/v1/apikey/{id}",
    tag = "apikeys",
    params(("id" = Uuid, Path, description = "Key id")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403, description = "The key holds a permission the caller lacks", body = ErrorBody),
        (status = 404, description = "No such key in this workspace", body = ErrorBody),
        CommonErrors
    )
)]
async fn delete_key(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    auth.require(Permission::ApikeysManage)?;
    // Permissions of a stored key never change, so checking before deleting is not racy.
    let target = state
        .store
        .list_api_keys(Some(auth.workspace()))
        .await?
        .into_iter()
        .find(|k| k.id == id)
        .ok_or_else(|| ApiError::not_found("API key"))?;
    if let Some(p) = target.permissions.iter().find(|p| !auth.key.has(**p)) {
        return Err(ApiError::Forbidden(format!(
            "cannot revoke a key holding '{p}': this API key does not hold it"
        )));
    }
    if state
        .store
        .delete_api_key(Some(auth.workspace()), id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("API key"))
    }
}
