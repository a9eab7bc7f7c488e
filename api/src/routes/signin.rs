//! Signing in to Flowise's UI with a weir API key: `POST /auth/login` takes the
//! key as the password (the e-mail is only shown back), answers the user the UI
//! keeps (the key's name, workspace and permissions) and sets the session cookie
//! ([`crate::http::session`]); `POST /account/logout` clears it. Around them, what
//! the UI asks before anyone signs in: `GET /settings` (weir is the open-source
//! platform, so the UI hides enterprise screens and checks no roles) and `POST
//! /auth/resolve` (where to go: the sign-in page). There are no users: the key is
//! the identity, and the session can do exactly what its key can.

use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::header::SET_COOKIE;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::{BodyErrors, CommonErrors};
use crate::domain::Permission;
use crate::domain::time::{self, Timestamp};
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path};
use crate::http::session;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(login))
        .routes(routes!(logout))
        .routes(routes!(resolve))
        .routes(routes!(settings))
        .routes(routes!(refresh))
        .routes(routes!(permissions))
}

#[derive(Deserialize, ToSchema)]
struct Login {
    /// Shown back as the user's e-mail; any value.
    #[serde(default)]
    email: Option<String>,
    /// A weir API key.
    #[serde(default)]
    password: Option<String>,
}

/// The signed-in user as Flowise's UI keeps it.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct SignedIn {
    /// The API key's id.
    id: Uuid,
    email: String,
    /// The API key's name.
    name: String,
    status: &'static str,
    role: &'static str,
    #[serde(rename = "isSSO")]
    is_sso: bool,
    active_organization_id: Uuid,
    active_workspace_id: Uuid,
    active_workspace: String,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    last_login: Timestamp,
    is_organization_admin: bool,
    assigned_workspaces: Vec<AssignedWorkspace>,
    /// The key's permissions.
    permissions: Vec<Permission>,
    #[schema(value_type = Object)]
    features: serde_json::Value,
}

#[derive(Serialize, ToSchema)]
struct AssignedWorkspace {
    id: Uuid,
    name: String,
}

/// Signs in to the UI: `password` is a weir API key. Sets the session cookie.
#[utoipa::path(post, path = "/api/v1/auth/login", tag = "ui", request_body = Login,
    responses((status = 200, body = SignedIn, description = "Signed in; the session cookie is set"),
              (status = 400, body = ErrorBody, description = "A malformed body"),
              (status = 401, body = ErrorBody, description = "Not a valid API key"),
              (status = 500, body = ErrorBody, description = "Server-side failure"),
              BodyErrors))]
async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(body): Json<Login>,
) -> ApiResult<Response> {
    let key = body
        .password
        .as_deref()
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| {
            ApiError::Unauthorized("sign in with a weir API key as the password".into())
        })?;
    let auth = AuthUser::authenticate(&state, key)
        .await
        .map_err(|e| match e {
            ApiError::Unauthorized(_) => {
                ApiError::Unauthorized("that is not a valid weir API key".into())
            }
            other => other,
        })?;
    let ttl = Duration::from_secs(state.config.ui_session_hours * 3600);
    let cookie = session::issue(&state.keyring, &auth.key.key_hash, ttl)
        .ok()
        .and_then(|value| {
            let secure = session::over_https(
                &headers,
                state.config.trust_proxy,
                state.config.public_url.as_deref(),
            );
            session::set_cookie(&value, ttl, secure)
        })
        .ok_or_else(|| ApiError::Internal("could not seal the session".into()))?;
    let key = auth.key;
    let user = SignedIn {
        id: key.id,
        email: body
            .email
            .filter(|e| !e.trim().is_empty())
            .unwrap_or_else(|| key.name.clone()),
        name: key.name,
        status: "ACTIVE",
        role: "owner",
        is_sso: false,
        active_organization_id: key.workspace_id,
        active_workspace_id: key.workspace_id,
        active_workspace: key.workspace_name.clone(),
        last_login: time::now(),
        is_organization_admin: true,
        assigned_workspaces: vec![AssignedWorkspace {
            id: key.workspace_id,
            name: key.workspace_name,
        }],
        permissions: key.permissions,
        features: json!({}),
    };
    Ok(([(SET_COOKIE, cookie)], axum::Json(user)).into_response())
}

/// Signs out of the UI: clears the session cookie.
#[utoipa::path(post, path = "/api/v1/account/logout", tag = "ui",
    responses((status = 200, description = "The session cookie is cleared")))]
async fn logout() -> Response {
    (
        [(SET_COOKIE, session::clear_cookie())],
        axum::Json(json!({"message": "signed out"})),
    )
        .into_response()
}

/// Where the UI goes before signing in: always its sign-in page.
#[utoipa::path(post, path = "/api/v1/auth/resolve", tag = "ui",
    responses((status = 200, description = "`{\"redirectUrl\": \"/signin\"}`")))]
async fn resolve() -> axum::Json<serde_json::Value> {
    axum::Json(json!({"redirectUrl": "/signin"}))
}

/// The platform the UI runs against: open source (no organisations, roles or billing).
#[utoipa::path(get, path = "/api/v1/settings", tag = "ui",
    responses((status = 200, description = "`{\"PLATFORM_TYPE\": \"open source\"}`")))]
async fn settings() -> axum::Json<serde_json::Value> {
    axum::Json(json!({"PLATFORM_TYPE": "open source"}))
}

/// Sessions are not refreshed: when one expires the UI signs in again.
#[utoipa::path(post, path = "/api/v1/auth/refreshToken", tag = "ui",
    responses((status = 401, body = ErrorBody, description = "Always: sign in again")))]
async fn refresh() -> ApiError {
    ApiError::Unauthorized("sessions are not refreshed; sign in again".into())
}

/// The permissions a key can hold, grouped by what they cover (Flowise's
/// permission map, `{area: [{key, value}]}`), for the UI's key and role dialogs:
/// weir's own names, so a key made in the UI holds weir's permissions.
#[utoipa::path(get, path = "/api/v1/auth/permissions/{type}", tag = "ui",
    params(("type" = String, Path, description = "What asks (`API_KEY`, `ROLE`): the same map for each")),
    responses((status = 200, description = "`{area: [{key, value}]}`", body = Object), CommonErrors))]
async fn permissions(
    _auth: AuthUser,
    Path(_kind): Path<String>,
) -> axum::Json<serde_json::Map<String, serde_json::Value>> {
    let mut map = serde_json::Map::new();
    for permission in Permission::ALL {
        let name = permission.as_str();
        let (area, action) = name.split_once(':').unwrap_or((name, name));
        let mut label = action.to_owned();
        if let Some(first) = label.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        let entry = map
            .entry(area.to_owned())
            .or_insert_with(|| serde_json::Value::Array(Vec::new()));
        if let serde_json::Value::Array(list) = entry {
            list.push(json!({"key": name, "value": label}));
        }
    }
    axum::Json(map)
}
