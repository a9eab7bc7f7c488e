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
    /// A required body field was not provided (412).
    #[error("`{0}` is required")]
    MissingField(&'static str),
    /// Body larger than the server accepts (413).
    #[error("request body too large")]
    PayloadTooLarge,
    /// `code` is longer than `PY_TOOL_MAX_CODE` (413).
    #[error("the code is larger than PY_TOOL_MAX_CODE ({} KiB)", .0 >> 10)]
    CodeTooLarge(u64),
    /// Body is not `application/json` (415).
    #[error("expected a JSON body with `Content-Type: application/json`")]
    UnsupportedMediaType,
    /// Every run slot is taken and the queue is full (429, with `Retry-After`).
    #[error("the runtime is busy: every run slot is taken and the queue is full; retry shortly")]
    Busy,
    /// The workspace already has its share of the queue waiting (429, with `Retry-After`).
    #[error(
        "this workspace has too many executions waiting (PY_TOOL_MAX_QUEUE_PER_WORKSPACE); \
         retry shortly"
    )]
    WorkspaceBusy,
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
            Self::MissingField(_) => StatusCode::PRECONDITION_FAILED,
            Self::PayloadTooLarge | Self::CodeTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Busy | Self::WorkspaceBusy => StatusCode::TOO_MANY_REQUESTS,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = match &self {
            Self::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                "internal server error".to_owned()
            }
            other => other.to_string(),
        };
        let mut response =
            (self.status_code(), Json(json!({ "message": message }))).into_response();
        if matches!(self, Self::Busy | Self::WorkspaceBusy) {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}

impl From<pipeline::Error> for ApiError {
    fn from(err: pipeline::Error) -> Self {
        match err {
            pipeline::Error::Invalid(message) => Self::BadRequest(message),
            pipeline::Error::MissingField(field) => Self::MissingField(field),
            pipeline::Error::CodeTooLarge(limit) => Self::CodeTooLarge(limit),
            pipeline::Error::Busy => Self::Busy,
            pipeline::Error::WorkspaceBusy => Self::WorkspaceBusy,
            pipeline::Error::Internal(detail) => Self::Internal(detail),
        }
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
