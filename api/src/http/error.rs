//! The one error type of the HTTP edge and its JSON body `{"message": "..."}`.
//!
//! Each variant is a client-visible outcome with one status code (DESIGN.md:
//! absent required field → 412, malformed or invalid → 400, conflict → 409, …).
//! Internal failures are logged (inside the request's span, so with its request
//! id) and answered with a generic text: internals never reach a client.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::flow::{FlowError, FlowErrorKind};
use crate::services::ServiceError;
use crate::store::StoreError;

pub type ApiResult<T, E = ApiError> = Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    Conflict(String),
    /// A required parameter was not provided.
    #[error("{0}")]
    MissingField(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{message}")]
    TooManyRequests { message: String, retry_after: u64 },
    /// A chatflow failed while running: the message says which node and why
    /// (it is about the user's flow, so it is shown).
    #[error("{0}")]
    FlowFailed(String),
    /// An external service the request needed failed (Telegram).
    #[error("{0}")]
    BadGateway(String),
    /// The work went over its time limit.
    #[error("{0}")]
    GatewayTimeout(String),
    /// Logged in full; the client sees a generic message.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The body of every error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Human-readable description of what went wrong.
    pub message: String,
}

impl ApiError {
    pub fn status_code(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::MissingField(_) => StatusCode::PRECONDITION_FAILED,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            ApiError::GatewayTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::FlowFailed(_) | ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// `"<field>" is required` as a 412.
    pub fn missing(field: &str) -> Self {
        ApiError::MissingField(format!("'{field}' is required"))
    }

    pub fn not_found(what: &str) -> Self {
        ApiError::NotFound(format!("{what} not found"))
    }
}

/// The JSON error response for a status and message: shared by [`ApiError`] and
/// the edge middleware that rewrites framework answers.
pub fn error_response(status: StatusCode, message: String) -> Response {
    (status, Json(ErrorBody { message })).into_response()
}

/// A failure the edge logs with the request's id ([`super::json_errors`] does, as
/// it sees both the request and the answer), attached to the error response.
#[derive(Debug, Clone)]
pub enum ToLog {
    /// A server error: logged at `error`, never shown to the client.
    Error(String),
    /// A chatflow that failed while running: logged at `warn`.
    FlowFailed(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status_code();
        match self {
            ApiError::Internal(detail) => {
                let mut response = error_response(
                    status,
                    "Internal server error; the server log has the details under this \
                     response's X-Request-Id"
                        .into(),
                );
                response.extensions_mut().insert(ToLog::Error(detail));
                response
            }
            ApiError::TooManyRequests {
                message,
                retry_after,
            } => {
                let mut response = error_response(status, message);
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
                response
            }
            ApiError::FlowFailed(message) => {
                let mut response = error_response(status, message.clone());
                response.extensions_mut().insert(ToLog::FlowFailed(message));
                response
            }
            other => error_response(status, other.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict(message) => ApiError::Conflict(message),
            StoreError::Backend(detail) => ApiError::Internal(detail),
        }
    }
}

impl From<FlowError> for ApiError {
    fn from(e: FlowError) -> Self {
        match e.kind {
            FlowErrorKind::Invalid => ApiError::BadRequest(e.message),
            FlowErrorKind::Forbidden => ApiError::Forbidden(e.message),
            FlowErrorKind::Failed => ApiError::FlowFailed(e.message),
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::Invalid(m) => ApiError::BadRequest(m),
            ServiceError::Missing(field) => ApiError::missing(field),
            ServiceError::NotFound(what) => ApiError::not_found(what),
            ServiceError::Conflict(m) => ApiError::Conflict(m),
            ServiceError::Unauthorized(m) => ApiError::Unauthorized(m),
            ServiceError::Upstream(m) => ApiError::BadGateway(m),
            ServiceError::Unsupported(m) => ApiError::UnsupportedMediaType(m),
            ServiceError::TooLarge(m) => ApiError::PayloadTooLarge(m),
            ServiceError::Timeout(m) => ApiError::GatewayTimeout(m),
            ServiceError::Busy(message) => ApiError::TooManyRequests {
                message,
                retry_after: 1,
            },
            ServiceError::OverBudget {
                message,
                retry_after,
            } => ApiError::TooManyRequests {
                message,
                retry_after,
            },
            ServiceError::Flow(e) => e.into(),
            ServiceError::Store(e) => e.into(),
            ServiceError::Internal(m) => ApiError::Internal(m),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let text = rejection.body_text();
        match rejection {
            JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType(
                "expected a JSON body with 'Content-Type: application/json'".into(),
            ),
            JsonRejection::BytesRejection(_)
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE =>
            {
                ApiError::PayloadTooLarge("request body is too large".into())
            }
            JsonRejection::JsonSyntaxError(_) => {
                ApiError::BadRequest(format!("malformed JSON: {}", strip_axum_prefix(&text)))
            }
            _ => ApiError::BadRequest(format!("invalid body: {}", strip_axum_prefix(&text))),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::BadRequest(format!(
            "invalid path parameter: {}",
            strip_axum_prefix(&rejection.body_text())
        ))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::BadRequest(format!(
            "invalid query parameter: {}",
            strip_axum_prefix(&rejection.body_text())
        ))
    }
}

/// axum prefixes its rejection texts with "Failed to …: "; keep what follows.
fn strip_axum_prefix(text: &str) -> &str {
    match text.split_once(": ") {
        Some((head, rest)) if head.starts_with("Failed to") => rest,
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_has_its_status() {
        assert_eq!(ApiError::missing("name").status_code(), 412);
        assert_eq!(ApiError::not_found("chatflow").status_code(), 404);
        assert_eq!(
            ApiError::from(StoreError::Conflict("x".into())).status_code(),
            409
        );
        assert_eq!(
            ApiError::from(StoreError::Backend("db down".into())).status_code(),
            500
        );
    }

    #[test]
    fn axum_prefixes_are_removed() {
        assert_eq!(
            strip_axum_prefix("Failed to parse the request body as JSON: EOF at line 1"),
            "EOF at line 1"
        );
        assert_eq!(strip_axum_prefix("plain: text"), "plain: text");
    }
}
