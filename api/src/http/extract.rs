//! Extractors of the edge: axum's `Json`, `Path` and `Query`, rejecting with
//! [`ApiError`] so that every malformed input is a JSON `{"message"}` answer.
//! Handlers use these instead of axum's. `Option<Json<T>>` is a body that may be
//! absent (no `Content-Type`): `None` then, while a body that is there must parse.

use axum::extract::{FromRequest, FromRequestParts, OptionalFromRequest, Request};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use super::error::ApiError;

#[derive(FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct Json<T>(pub T);

impl<T, S> OptionalFromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Option<Self>, ApiError> {
        let body = <axum::Json<T> as OptionalFromRequest<S>>::from_request(req, state).await?;
        Ok(body.map(|axum::Json(value)| Json(value)))
    }
}

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
