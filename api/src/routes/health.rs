//! Liveness: `GET /api/v1/ping` answers `pong` without a key.

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(ping))
}

/// Health check; needs no API key.
#[utoipa::path(
    get,
    path = "/api/v1/ping",
    tag = "health",
    security(()),
    responses((status = 200, description = "The server is up", body = String, content_type = "text/plain"))
)]
async fn ping() -> &'static str {
    "pong"
}
