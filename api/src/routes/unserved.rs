//! Screens of Flowise's UI that weir does not serve yet: the marketplace's
//! templates, assistants, datasets, evaluations and evaluators answer an empty
//! list (with `X-Total-Count: 0`), so each screen shows its empty state instead
//! of an error. docs/ui.md lists them.

use axum::response::IntoResponse;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::CommonErrors;
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::extract::Json;
use crate::http::pagination::total_count;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(marketplace_templates))
        .routes(routes!(assistants))
        .routes(routes!(datasets))
        .routes(routes!(evaluations))
        .routes(routes!(evaluators))
}

/// Nothing yet: an empty list.
fn none() -> impl IntoResponse {
    (total_count(0), Json(Vec::<serde_json::Value>::new()))
}

/// The marketplace's templates: none on weir yet.
#[utoipa::path(get, path = "/api/v1/marketplaces/templates", tag = "ui",
    responses((status = 200, description = "An empty list", body = [Object]), CommonErrors))]
async fn marketplace_templates(_auth: AuthUser) -> impl IntoResponse {
    none()
}

/// OpenAI assistants: not on weir yet.
#[utoipa::path(get, path = "/api/v1/assistants", tag = "ui",
    responses((status = 200, description = "An empty list", body = [Object]), CommonErrors))]
async fn assistants(_auth: AuthUser) -> impl IntoResponse {
    none()
}

/// Evaluation datasets: not on weir yet.
#[utoipa::path(get, path = "/api/v1/datasets", tag = "ui",
    responses((status = 200, description = "An empty list", body = [Object]), CommonErrors))]
async fn datasets(_auth: AuthUser) -> impl IntoResponse {
    none()
}

/// Evaluations: not on weir yet.
#[utoipa::path(get, path = "/api/v1/evaluations", tag = "ui",
    responses((status = 200, description = "An empty list", body = [Object]), CommonErrors))]
async fn evaluations(_auth: AuthUser) -> impl IntoResponse {
    none()
}

/// Evaluators: not on weir yet.
#[utoipa::path(get, path = "/api/v1/evaluators", tag = "ui",
    responses((status = 200, description = "An empty list", body = [Object]), CommonErrors))]
async fn evaluators(_auth: AuthUser) -> impl IntoResponse {
    none()
}
