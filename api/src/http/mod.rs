//! The HTTP edge: the state handlers reach, the auth extractor, the one error type,
//! extractors with JSON rejections, pagination, and the edge middleware.
//!
//! Middleware, outermost first (assembled by [`crate::app::router`]): a request id
//! (`X-Request-Id`, generated unless the client sent one, and echoed back), a tracing
//! span per request carrying that id (the path only: query strings may hold API
//! keys; `debug` level, like the line per answered request, as both cost a fifth of
//! the prediction throughput at `info`), a body-size limit, and a last guard
//! ([`json_errors`]) that logs server errors with the request id and turns any
//! non-JSON error answer produced by the framework into the `{"message"}` body every
//! client can rely on. [`slow_body`] cuts bodies that do not arrive in time;
//! outermost of all, [`observe::count`] records each answer in the metrics.

pub mod auth;
pub mod cors;
pub mod error;
pub mod extract;
pub mod listener;
pub mod observe;
pub mod pagination;
pub mod session;
pub mod slow_body;
pub mod sse;
pub mod ui;
pub mod ui_tools_page;

use axum::extract::Request;
use axum::http::{HeaderName, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use error::{ToLog, error_response};

/// Largest accepted request body (flowData of big flows fits comfortably).
pub const MAX_BODY_BYTES: usize = 5 * 1024 * 1024;

/// The request-id header, set on every request and answer.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// What every handler can reach: the services handle (cheap to clone).
pub use crate::services::Services as AppState;

/// Logs the failures handlers answered with ([`ToLog`]), with the request's id, and
/// rewrites an error answer that is not JSON (a framework rejection) into
/// `{"message": <reason>}` with the same status.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let request_id = req.headers().get(REQUEST_ID).cloned();
    let mut response = next.run(req).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    if let Some(failure) = response.extensions_mut().remove::<ToLog>() {
        let request_id = request_id
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-");
        match failure {
            ToLog::Error(detail) => {
                tracing::error!(request_id, status = status.as_u16(), error = %detail, "request failed");
            }
            ToLog::FlowFailed(message) => {
                tracing::warn!(request_id, error = %message, "chatflow failed");
            }
        }
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return response;
    }
    let message = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "request body is too large".to_owned(),
        other => other
            .canonical_reason()
            .unwrap_or("request failed")
            .to_owned(),
    };
    let mut rewritten = error_response(status, message);
    for (name, value) in response.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rewritten.headers_mut().insert(name.clone(), value.clone());
        }
    }
    rewritten
}
