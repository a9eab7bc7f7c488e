//! What Flowise's canvas knows of node types: `GET /nodes` (every node type weir
//! runs, as Flowise's node definitions: [`crate::flow::catalog`]), one node, one
//! category; the options only the server knows (`POST /node-load-method/:name`);
//! the credential types the nodes take (`/components-credentials`); and the
//! icons of nodes and credential types (loaded by `<img>`, so without a key, as
//! in Flowise: icons are public).

use axum::extract::State;
use axum::http::HeaderValue;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS,
};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{BodyErrors, CommonErrors};
use crate::domain::Permission;
use crate::flow::catalog::Catalog;
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::{Json, Path};
use crate::http::ui;
use crate::services::load_methods;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_nodes))
        .routes(routes!(get_node))
        .routes(routes!(nodes_in_category))
        .routes(routes!(node_icon))
        .routes(routes!(load_method))
        .routes(routes!(list_credential_types))
        .routes(routes!(get_credential_types))
        .routes(routes!(credential_icon))
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
    Ok(icon(&state, catalog.icon(&name)).await)
}

/// A credential type's icon: that of a node taking it (as Flowise shows it).
#[utoipa::path(get, path = "/api/v1/components-credentials-icon/{name}", tag = "ui", security(()),
    params(("name" = String, Path, description = "The credential type (`openAIApi`)")),
    responses((status = 200, description = "The image", content_type = "image/svg+xml"),
              (status = 404, description = "No node weir runs takes that credential type", body = ErrorBody)))]
async fn credential_icon(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let catalog = Catalog::get();
    if catalog.credential(&name).is_none() {
        return Err(ApiError::NotFound(format!(
            "no node weir runs takes a credential of type '{name}'"
        )));
    }
    Ok(icon(&state, catalog.credential_icon(&name)).await)
}

/// The image at `path` in the unpacked components, or weir's mark.
async fn icon(state: &AppState, path: Option<&str>) -> Response {
    let (body, content_type) = match path {
        // The path is the catalog's (part of the binary), never the request's.
        Some(icon) => {
            match tokio::fs::read(state.config.ui_dir().join("components").join(icon)).await {
                Ok(bytes) => (bytes, ui::content_type(icon)),
                Err(_) => (WEIR_ICON.as_bytes().to_vec(), "image/svg+xml"),
            }
        }
        None => (WEIR_ICON.as_bytes().to_vec(), "image/svg+xml"),
    };
    (
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
        .into_response()
}

/// The options of a node's input that only the server knows (models, tools,
/// stores, flows, the flow's state keys): Flowise's load methods.
#[utoipa::path(post, path = "/api/v1/node-load-method/{name}", tag = "ui",
    params(("name" = String, Path, description = "The node type (`chatOpenAI`)")),
    request_body(content = Object, description = "The node's data with `loadMethod`, and the canvas's `previousNodes`, `currentNode`"),
    responses((status = 200, description = "The options: `{label, name, description?, imageSrc?}`", body = [Object]),
              (status = 400, description = "weir does not answer that load method", body = ErrorBody),
              (status = 404, description = "weir runs no node of that name", body = ErrorBody),
              (status = 412, description = "`loadMethod` is missing", body = ErrorBody),
              CommonErrors, BodyErrors))]
async fn load_method(
    auth: AuthUser,
    State(state): State<AppState>,
    Path(name): Path<String>,
    Json(body): Json<Value>,
) -> ApiResult<Json<Vec<Value>>> {
    let method = body
        .get("loadMethod")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::missing("loadMethod"))?;
    Ok(Json(
        load_methods::load(
            &state,
            auth.workspace(),
            &name,
            method,
            &body,
            auth.key.has(Permission::CredentialsRead),
        )
        .await?,
    ))
}

/// The credential types weir's nodes take, with their fields (Flowise's definitions).
#[utoipa::path(get, path = "/api/v1/components-credentials", tag = "ui",
    responses((status = 200, description = "Every credential type a node weir runs takes", body = [Object]),
              CommonErrors))]
async fn list_credential_types(_auth: AuthUser) -> Json<Vec<&'static Value>> {
    Json(Catalog::get().credentials().collect())
}

/// One credential type, or several joined by `&` (as Flowise's credential dialog asks).
#[utoipa::path(get, path = "/api/v1/components-credentials/{name}", tag = "ui",
    params(("name" = String, Path, description = "A credential type (`openAIApi`), or several joined by `&`")),
    responses((status = 200, description = "The type (an object), or the types (a list) when several were asked", body = Object),
              (status = 404, description = "No node weir runs takes that credential type", body = ErrorBody),
              CommonErrors))]
async fn get_credential_types(_auth: AuthUser, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    let catalog = Catalog::get();
    let find = |one: &str| {
        catalog.credential(one).cloned().ok_or_else(|| {
            ApiError::NotFound(format!(
                "no node weir runs takes a credential of type '{one}'"
            ))
        })
    };
    if name.contains('&') {
        let types: Result<Vec<Value>, ApiError> = name.split('&').map(find).collect();
        return Ok(Json(Value::Array(types?)));
    }
    find(&name).map(Json)
}
