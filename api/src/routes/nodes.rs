//! The node palette of Flowise's canvas: `GET /nodes` (every node type weir
//! runs, as Flowise's node definitions: [`crate::flow::catalog`]), one node, one
//! category, and `GET /node-icon/:name`, the image the canvas shows for a node
//! (loaded by `<img>`, so without a key, as in Flowise: icons are public).

use axum::extract::State;
use axum::http::HeaderValue;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS,
};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::CommonErrors;
use crate::flow::catalog::Catalog;
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path};
use crate::http::ui;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_nodes))
        .routes(routes!(get_node))
        .routes(routes!(nodes_in_category))
        .routes(routes!(node_icon))
}

/// The icon of a node Flowise's components have none for (weir's own nodes):
/// weir's mark, a weir across a stream.
const WEIR_ICON: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="14" fill="#1e6fd9"/><path d="M8 40c8-6 16-6 24 0s16 6 24 0" stroke="#fff" stroke-width="5" fill="none" stroke-linecap="round"/><path d="M14 28h36" stroke="#fff" stroke-width="6" stroke-linecap="round"/></svg>"##;

/// Every node type weir runs, as the canvas's palette lists it.
#[utoipa::path(get, path = "/api/v1/nodes", tag = "ui",
    responses((status = 200, description = "Flowise node definitions of every node type weir runs",
               body = [Object]), CommonErrors))]
async fn list_nodes(_auth: AuthUser) -> Json<&'static [Value]> {
    Json(Catalog::get().definitions())
}

/// One node type's definition.
#[utoipa::path(get, path = "/api/v1/nodes/{name}", tag = "ui",
    params(("name" = String, Path, description = "The node type (`chatOpenAI`)")),
    responses((status = 200, description = "The node's definition", body = Object),
              (status = 404, description = "weir runs no node of that name", body = ErrorBody),
              CommonErrors))]
async fn get_node(_auth: AuthUser, Path(name): Path<String>) -> ApiResult<Json<&'static Value>> {
    Catalog::get()
        .definition(&name)
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("weir runs no node named '{name}'")))
}

/// The definitions of one palette category (`Chat Models`).
#[utoipa::path(get, path = "/api/v1/nodes/category/{name}", tag = "ui",
    params(("name" = String, Path, description = "The category (`Chat Models`)")),
    responses((status = 200, description = "The category's node definitions (none: an empty list)",
               body = [Object]), CommonErrors))]
async fn nodes_in_category(_auth: AuthUser, Path(name): Path<String>) -> Json<Vec<&'static Value>> {
    Json(Catalog::get().in_category(&name))
}

/// A node's icon: Flowise's, from the components `scripts/fetch-ui` unpacked, or
/// weir's mark for a node it has none for.
#[utoipa::path(get, path = "/api/v1/node-icon/{name}", tag = "ui", security(()),
    params(("name" = String, Path, description = "The node type (`chatOpenAI`)")),
    responses((status = 200, description = "The image", content_type = "image/svg+xml"),
              (status = 404, description = "weir runs no node of that name", body = ErrorBody)))]
async fn node_icon(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Response> {
    let catalog = Catalog::get();
    if catalog.definition(&name).is_none() {
        return Err(ApiError::NotFound(format!(
            "weir runs no node named '{name}'"
        )));
    }
    let (body, content_type) = match catalog.icon(&name) {
        // The path is the catalog's (part of the binary), never the request's.
        Some(icon) => {
            match tokio::fs::read(state.config.ui_dir().join("components").join(icon)).await {
                Ok(bytes) => (bytes, ui::content_type(icon)),
                Err(_) => (WEIR_ICON.as_bytes().to_vec(), "image/svg+xml"),
            }
        }
        None => (WEIR_ICON.as_bytes().to_vec(), "image/svg+xml"),
    };
    Ok((
        [
            (CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=86400"),
            ),
            (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            // An SVG opened on its own must not run script on weir's origin.
            (
                CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; sandbox"),
            ),
        ],
        body,
    )
        .into_response())
}
