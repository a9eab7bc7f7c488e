//! The runtime's one client-facing error type and its JSON form.
//!
//! Every failure that leaves the server is an `ApiError`: one variant per HTTP outcome,
//! one `status_code()`, and a `{"message": "..."}` body. Internal failures are logged
//! here with their detail and answered with a generic text, so a 500 never exposes paths,
//! interpreter state or installer internals. axum's own (plain-text) rejections are
//! converted by `From<JsonRejection>` and the router's fallbacks in `server`.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::pipeline;
use crate::storage::artifacts::ReadError;

/// Result alias of the handlers.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Malformed JSON, wrong types, invalid values (400).
    #[error("{0}")]
    BadRequest(String),
    /// Missing or wrong API key (401).
    #[error("missing or invalid API key")]
    Unauthorized,
    /// Unknown route or absent file (404).
    #[error("{0}")]
    NotFound(String),
    /// Route exists, method does not (405).
    #[error("method not allowed")]
    MethodNotAllowed,
    /// Body larger than the server accepts (413).
    #[error("request body too large")]
    PayloadTooLarge,
    /// Body is not `application/json` (415).
    #[error("expected a JSON body with `Content-Type: application/json`")]
    UnsupportedMediaType,
    /// What the pipeline refused: 400 invalid, 412 missing field, 413 code too large, 429
    /// busy (with `Retry-After`), 500 internal.
    #[error(transparent)]
    Execution(#[from] pipeline::Error),
    /// Anything else: logged with its detail, answered generically (500).
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        Self::Internal(detail.to_string())
    }

    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Execution(err) => match err {
                pipeline::Error::Invalid(_) => StatusCode::BAD_REQUEST,
                pipeline::Error::MissingField(_) => StatusCode::PRECONDITION_FAILED,
                pipeline::Error::CodeTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
                pipeline::Error::Busy
                | pipeline::Error::WorkspaceBusy
                | pipeline::Error::TooManyServers(_) => StatusCode::TOO_MANY_REQUESTS,
                pipeline::Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            },
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = match &self {
            Self::Internal(detail) | Self::Execution(pipeline::Error::Internal(detail)) => {
                tracing::error!(%detail, "internal error");
                "internal server error".to_owned()
            }
            other => other.to_string(),
        };
        let mut response =
            (self.status_code(), Json(json!({ "message": message }))).into_response();
        if matches!(
            self,
            Self::Execution(
                pipeline::Error::Busy
                    | pipeline::Error::WorkspaceBusy
                    | pipeline::Error::TooManyServers(_)
            )
        ) {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}

impl From<ReadError> for ApiError {
    fn from(err: ReadError) -> Self {
        match err {
            ReadError::Invalid(message) => Self::BadRequest(message),
            ReadError::NotFound(message) => Self::NotFound(message),
            ReadError::Internal(detail) => Self::Internal(detail),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => Self::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => Self::UnsupportedMediaType,
            _ => Self::BadRequest(rejection.body_text()),
        }
    }
}
