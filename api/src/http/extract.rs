//! Extractors of the edge: axum's `Json`, `Path` and `Query`, rejecting with
//! [`ApiError`] so that every malformed input is a JSON `{"message"}` answer.
//! Handlers use these instead of axum's.

use axum::extract::FromRequest;
use axum::extract::FromRequestParts;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

#[derive(FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct Json<T>(pub T);

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);

#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct Query<T>(pub T);

/// A required body field: absent or `null` is a 412 naming it.
pub fn required<T>(value: Option<T>, field: &str) -> Result<T, ApiError> {
    value.ok_or_else(|| ApiError::missing(field))
}
