//! What the edge records of each request, and the scrape endpoint `GET /metrics`.
//!
//! [`mark_route`] runs inside routing and leaves the matched route template on the
//! answer; [`count`], outermost, records method, route (`unmatched` for none),
//! status and time to the answer's headers. Labels are route templates
//! (`/api/v1/prediction/{id}`), never raw paths, so the series stay few.
//! [`scrape`] answers the metrics to `Authorization: Bearer <METRICS_TOKEN>`;
//! without that setting it is off (404).

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::AppState;
use super::error::ApiError;
use crate::metrics::{self, metrics};

/// Copies the matched route onto the answer for [`count`].
pub async fn mark_route(req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().cloned();
    let mut response = next.run(req).await;
    if let Some(route) = route {
        response.extensions_mut().insert(route);
    }
    response
}

/// Records the answered request.
pub async fn count(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let response = next.run(req).await;
    let route = response
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str);
    metrics().request(
        method.as_str(),
        route,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// `GET /metrics`: every metric, as OpenMetrics text.
pub async fn scrape(State(state): State<AppState>, req: Request) -> Result<Response, ApiError> {
    let Some(token) = &state.config.metrics_token else {
        return Err(ApiError::NotFound(
            "metrics are off: set METRICS_TOKEN and scrape with it as a bearer token".into(),
        ));
    };
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !bool::from(presented.as_bytes().ct_eq(token.0.as_bytes())) {
        return Err(ApiError::Unauthorized(
            "GET /metrics needs 'Authorization: Bearer <METRICS_TOKEN>'".into(),
        ));
    }
    let mut response = metrics().encode().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(metrics::CONTENT_TYPE),
    );
    Ok(response)
}
