//! The HTTP edge: shared state, the router with its middleware, and [`serve`].
//!
//! Middleware, outermost first: a request id (`X-Request-Id`, generated unless the
//! client sent one, and echoed back), a tracing span per request carrying that id
//! (the path only: query strings may hold API keys), a body-size limit, and a last
//! guard that turns any non-JSON error answer produced by the framework into the
//! `{"message"}` body every client can rely on.

pub mod auth;
pub mod error;
pub mod extract;
pub mod pagination;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderName, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use utoipa_swagger_ui::SwaggerUi;

use crate::config::Config;
use crate::flow::PlanCache;
use crate::flow::run::Models;
use crate::routes;
use crate::store::Store;
use error::{ApiError, error_response};

/// Largest accepted request body (flowData of big flows fits comfortably).
pub const MAX_BODY_BYTES: usize = 5 * 1024 * 1024;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// What every handler can reach; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub config: Arc<Config>,
    /// Validated flow plans, per chatflow version.
    pub plans: Arc<PlanCache>,
    /// Chat model providers (one pooled HTTP client) and the embedded model.
    pub models: Models,
}

impl AppState {
    pub fn new(store: Arc<dyn Store>, config: Config) -> Result<Self, String> {
        let http = crate::llm::http::client().map_err(|e| e.message)?;
        let local = crate::llm::embedded::Embedded::new(config.models_dir());
        Ok(AppState {
            store,
            config: Arc::new(config),
            plans: Arc::default(),
            models: Models {
                http,
                local: Arc::new(local),
            },
        })
    }
}

/// The complete application: every `/api/v1` route, the OpenAPI document, the
/// Swagger UI, and the edge middleware.
pub fn router(state: AppState) -> Router {
    let (api, openapi) = routes::api().split_for_parts();
    api.merge(SwaggerUi::new("/api/v1/docs").url("/api/v1/openapi.json", openapi))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .method_not_allowed_fallback(|| async {
            ApiError::MethodNotAllowed("method not allowed on this route".into())
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(json_errors))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request| {
                let id = req
                    .headers()
                    .get(&REQUEST_ID)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                tracing::info_span!("request", request_id = %id, method = %req.method(), path = %req.uri().path())
            })
            .on_response(DefaultOnResponse::new().level(tracing::Level::INFO)),
        )
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .with_state(state)
}

/// Rewrites an error answer that is not JSON (a framework rejection) into
/// `{"message": <reason>}` with the same status.
async fn json_errors(req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return response;
    }
    let message = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "request body is too large".to_owned(),
        other => other
            .canonical_reason()
            .unwrap_or("request failed")
            .to_owned(),
    };
    let mut rewritten = error_response(status, message);
    for (name, value) in response.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rewritten.headers_mut().insert(name.clone(), value.clone());
        }
    }
    rewritten
}

/// Serves the API on `listener` until `shutdown` resolves, then stops accepting
/// and lets in-flight requests finish — for at most `grace`, after which the
/// remaining connections (long streams) are dropped.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: std::time::Duration,
) -> std::io::Result<()> {
    let stopping = Arc::new(tokio::sync::Notify::new());
    let signal = {
        let stopping = Arc::clone(&stopping);
        async move {
            shutdown.await;
            stopping.notify_one();
        }
    };
    let server = axum::serve(
        listener,
        router(state).into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(signal);
    tokio::select! {
        result = server => result,
        () = async {
            stopping.notified().await;
            tokio::time::sleep(grace).await;
        } => {
            tracing::warn!(grace_secs = grace.as_secs(), "requests still running after the grace period; closing them");
            Ok(())
        }
    }
}
