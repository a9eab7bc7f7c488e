//! `/api/v1/artifacts/{workspaceId}/{filename}`: files Python tools wrote,
//! streamed from the Python tool runtime with weir's own key check, so clients
//! never reach (or learn the address of) the runtime. A key of another
//! workspace gets 404, like every other resource.
//!
//! Artifacts are written by user code, so they are untrusted content on weir's own
//! origin: every one is served with `Content-Security-Policy: sandbox` (no script,
//! no same-origin access; the edge layer adds `frame-ancestors` to it) and
//! `X-Content-Type-Options: nosniff`, and the types a browser would render as an
//! active document (HTML, SVG, XML) are downloads unless `ARTIFACTS_INLINE_HTML`
//! is set.

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
use crate::services::uploads::safe_segment;

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
    let active = is_active_document(&content_type);
    headers.insert(header::CONTENT_TYPE, content_type);
    confine(headers);
    if active && !state.config.artifacts_inline_html {
        headers.insert(header::CONTENT_DISPOSITION, attachment(&filename));
    }
    *response.status_mut() = StatusCode::OK;
    Ok(response)
}

/// Whether a browser would render `content_type` as a document that can run script.
/// Keeps a served file from running as a page of weir's origin: no type
/// sniffing, and a sandbox should a browser render it.
pub(super) fn confine(headers: &mut axum::http::HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox"),
    );
}

fn is_active_document(content_type: &HeaderValue) -> bool {
    let essence = content_type
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "text/html" | "application/xhtml+xml" | "text/xml" | "application/xml" | "text/xsl"
    ) || essence.ends_with("+xml")
}

/// `Content-Disposition: attachment` with the file name, made of the characters a
/// quoted header value carries safely (uploads' path-segment rule).
pub(super) fn attachment(filename: &str) -> HeaderValue {
    let safe = safe_segment(filename);
    HeaderValue::from_str(&format!("attachment; filename=\"{safe}\""))
        .unwrap_or(HeaderValue::from_static("attachment"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_that_can_script_are_recognised() {
        for active in [
            "text/html; charset=utf-8",
            "TEXT/HTML",
            "image/svg+xml",
            "application/xhtml+xml",
            "text/xml",
        ] {
            assert!(
                is_active_document(&HeaderValue::from_static(active)),
                "{active}"
            );
        }
        for passive in ["text/csv", "image/png", "application/json", "text/plain"] {
            assert!(
                !is_active_document(&HeaderValue::from_static(passive)),
                "{passive}"
            );
        }
    }

    #[test]
    fn attachment_names_are_quoted_safely() {
        assert_eq!(
            attachment("report.html"),
            "attachment; filename=\"report.html\""
        );
        assert_eq!(
            attachment("a\"b\u{e9}.svg"),
            "attachment; filename=\"a_b_.svg\""
        );
    }
}
