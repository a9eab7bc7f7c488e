//! `GET /api/v1/oauth2-credential/callback` (Flowise's path): where an
//! authorization server sends the user's browser back with a code. It needs no
//! API key — the `state` weir made names what is being authorized and carries a
//! one-time secret — and answers a small page for that browser saying what was
//! authorized; a failure is weir's JSON error like any other (the browser shows
//! its message). Only weir's MCP servers (`authType: OAUTH2`) are
//! authorized here today.

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::AppState;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::Query;
use crate::services::mcp_servers::{self, oauth};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(callback))
}

/// What an authorization server sends back (RFC 6749 §4.1.2, §4.1.2.1).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct CallbackQuery {
    /// The authorization code.
    code: Option<String>,
    /// The `state` weir sent.
    state: Option<String>,
    /// Why access was not granted (`access_denied`, …).
    error: Option<String>,
    error_description: Option<String>,
}

/// Completes an authorization a `POST /api/v1/custom-mcp-servers/{id}/authorize`
/// began: the code is exchanged for tokens (sealed with the server), the
/// server's tools are listed, and it is `AUTHORIZED`. The answer is a page
/// for the user's browser.
#[utoipa::path(
    get,
    path = "/api/v1/oauth2-credential/callback",
    tag = "mcp",
    security(()),
    params(CallbackQuery),
    responses(
        (status = 200, description = "Authorized: a page saying so", content_type = "text/html", body = String),
        (status = 400, description = "Not authorized (refused, expired, not the waiting state, the code not exchanged)", body = ErrorBody),
        (status = 404, description = "The server the state names is gone", body = ErrorBody),
        (status = 502, description = "The server could not be reached", body = ErrorBody)
    )
)]
async fn callback(
    State(state): State<AppState>,
    Query(query): Query<CallbackQuery>,
) -> ApiResult<Response> {
    let sent_state = query
        .state
        .as_deref()
        .filter(|s| oauth::parse_state(s).is_some())
        .ok_or_else(|| {
            ApiError::BadRequest("this authorization is not one weir is waiting for".into())
        })?;
    let server = match (&query.error, &query.code) {
        (Some(error), _) => {
            oauth::refused(
                &state,
                sent_state,
                error,
                query.error_description.as_deref(),
            )
            .await?
        }
        (None, Some(code)) if !code.is_empty() => oauth::complete(&state, sent_state, code).await?,
        (None, _) => {
            return Err(ApiError::BadRequest(
                "the authorization server's answer has neither a code nor an error".into(),
            ));
        }
    };
    let record = mcp_servers::shown(&state, server)?;
    Ok(page(&format!(
        "weir may now use the MCP server '{}' ({} tools). You can close this window.",
        record.name, record.tool_count
    )))
}

/// The page for the user's browser, nothing in it but text.
fn page(text: &str) -> Response {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>weir: authorized</title></head>\
         <body><h1>Authorized</h1><p>{}</p></body></html>",
        escape(text)
    );
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
