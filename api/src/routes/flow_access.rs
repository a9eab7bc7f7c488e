//! Who may use a chatflow through its public doors (a prediction, and what a
//! chat's visitor does beside it: rating answers, leaving a lead): a chatflow
//! with `apikeyid` takes only that key; a public chatflow takes anyone; otherwise
//! a key of the chatflow's workspace with `predictions:create`. A page embedding
//! the chat must be of an origin the chatflow's `chatbotConfig` allows.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ConnectInfo;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use uuid::Uuid;

use crate::domain::{Chatflow, Permission};
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::cors;
use crate::http::error::{ApiError, ApiResult};

/// Who is asking, for the rate limit: the key, else the client's address.
pub fn caller(request: &Parts, auth: Option<&AuthUser>, trust_proxy: bool) -> String {
    if let Some(auth) = auth {
        return format!("key:{}", auth.key.id);
    }
    if trust_proxy
        && let Some(forwarded) = request
            .headers
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    {
        return format!("ip:{forwarded}");
    }
    request
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| format!("ip:{}", addr.ip()))
        .unwrap_or_else(|| "ip:unknown".to_owned())
}

/// The caller's key (or the UI's session) when one is presented (public
/// chatflows take callers without one).
pub async fn caller_key(state: &AppState, parts: &Parts) -> ApiResult<Option<AuthUser>> {
    AuthUser::from_parts(state, parts).await
}

/// The chatflow, if this caller may run it.
pub async fn authorize(
    state: &AppState,
    id: Uuid,
    auth: Option<&AuthUser>,
) -> ApiResult<Arc<Chatflow>> {
    let not_found = || ApiError::not_found("chatflow");
    let flow = state.store.find_chatflow(id).await?.ok_or_else(not_found)?;
    if let Some(only) = flow.apikeyid.as_deref() {
        let Some(auth) = auth else {
            return Err(ApiError::Unauthorized(
                "this chatflow requires its API key".into(),
            ));
        };
        if auth.key.id.to_string() != only {
            return Err(ApiError::Forbidden(
                "this chatflow accepts only the API key assigned to it".into(),
            ));
        }
        // Binding narrows who may run the flow; it grants nothing the key lacks.
        auth.require(Permission::PredictionsCreate)?;
        return Ok(flow);
    }
    if flow.is_public {
        return Ok(flow);
    }
    let Some(auth) = auth else {
        return Err(ApiError::Unauthorized(
            "an API key is required: 'Authorization: Bearer <key>' or '?apiKey=<key>'".into(),
        ));
    };
    if auth.workspace() != flow.workspace_id {
        return Err(not_found());
    }
    auth.require(Permission::PredictionsCreate)?;
    Ok(flow)
}

/// Refuses a page whose origin the chatflow's `chatbotConfig.allowedOrigins` leaves out.
fn check_origin(flow: &Chatflow, headers: &HeaderMap) -> ApiResult<()> {
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    if cors::origin_allowed_by_chatflow(flow.chatbot_config.as_deref(), origin) {
        Ok(())
    } else {
        Err(ApiError::Forbidden(
            "This site is not allowed to access this chatbot".into(),
        ))
    }
}

/// The chatflow, when this caller may use it from where it asks (its key, and
/// the embedding page's origin); with the key the caller presented, if any.
pub async fn admit(
    state: &AppState,
    parts: &Parts,
    id: Uuid,
) -> ApiResult<(Arc<Chatflow>, Option<AuthUser>)> {
    let auth = caller_key(state, parts).await?;
    let flow = authorize(state, id, auth.as_ref()).await?;
    check_origin(&flow, &parts.headers)?;
    Ok((flow, auth))
}
