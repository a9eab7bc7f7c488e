//! `/api/v1/artifacts/{workspaceId}/{filename}`: files Python tools wrote,
//! streamed from the Python tool runtime with weir's own key check, so clients
//! never reach (or learn the address of) the runtime. A key of another
//! workspace gets 404, like every other resource.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::CommonErrors;
use crate::domain::Permission;
use crate::http::AppState;
use crate::http::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult, ErrorBody};
use crate::http::extract::Path;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_artifact))
}

/// Reads a file a Python tool wrote (the `url` of a prediction's `artifacts`).
#[utoipa::path(
    get,
    path = "/api/v1/artifacts/{workspace_id}/{filename}",
    tag = "predictions",
    params(
        ("workspace_id" = String, Path, description = "The workspace the tool ran in"),
        ("filename" = String, Path, description = "The artifact's file name")
    ),
    responses(
        (status = 200, description = "The file, with its content type"),
        (status = 404, description = "No such artifact in this workspace", body = ErrorBody),
        (status = 502, description = "The Python runtime cannot be reached", body = ErrorBody),
        CommonErrors
    )
)]
async fn get_artifact(
    auth: AuthUser,
    State(state): State<AppState>,
    Path((workspace, filename)): Path<(String, String)>,
) -> ApiResult<Response> {
    auth.require(Permission::PredictionsCreate)?;
    if workspace != auth.workspace().to_string() {
        return Err(ApiError::not_found("artifact"));
    }
    let upstream = state
        .tools
        .runtime
        .artifact(&workspace, &filename)
        .await
        .map_err(ApiError::BadGateway)?;
    match upstream.status().as_u16() {
        200 => {}
        404 => return Err(ApiError::not_found("artifact")),
        400 => {
            return Err(ApiError::BadRequest(format!(
                "'{filename}' is not a valid artifact name"
            )));
        }
        status => {
            return Err(ApiError::BadGateway(format!(
                "the Python runtime answered HTTP {status} for the artifact"
            )));
        }
    }
    let content_type = upstream
        .headers()
        .get(header::CONTENT_TYPE)
        .cloned()
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    let mut response = Response::new(Body::from_stream(upstream.bytes_stream()));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, content_type);
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // An HTML artifact cannot script weir's origin.
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox"),
    );
    *response.status_mut() = StatusCode::OK;
    Ok(response)
}
