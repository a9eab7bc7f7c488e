//! The application: the router with its middleware ([`router`]) and [`serve`], which
//! runs the API together with this replica's background loops (the cron scheduler,
//! the failure-mail sender) and stops them all on shutdown.

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::middleware;
use tokio_util::sync::CancellationToken;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use utoipa_swagger_ui::SwaggerUi;

use crate::http::error::ApiError;
use crate::http::listener::{EdgeLimits, serve_connections};
use crate::http::slow_body::{BodyTimeout, cut_slow_bodies};
use crate::http::{AppState, MAX_BODY_BYTES, REQUEST_ID, json_errors};
use crate::http::{cors, observe, ui};
use crate::routes;
use crate::services::triggers;

/// The complete application: every `/api/v1` route, the OpenAPI document, the
/// Swagger UI, and the edge middleware.
pub fn router(state: AppState) -> Router {
    let (api, openapi) = routes::api().split_for_parts();
    let api = api
        .route("/metrics", axum::routing::get(observe::scrape))
        .route_layer(middleware::from_fn(observe::mark_route));
    let cors = cors::layer(&state.config.cors_origins, &state.config.mcp_cors_origins);
    let frame_ancestors = cors::frame_ancestors(&state.config.iframe_origins);
    let ui = ui::Ui::from_config(&state.config);
    api.merge(SwaggerUi::new("/api/v1/docs").url("/api/v1/openapi.json", openapi))
        .fallback(move |request: Request| ui::fallback(ui.clone(), request))
        .method_not_allowed_fallback(|| async {
            ApiError::MethodNotAllowed("method not allowed on this route".into())
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(
            BodyTimeout(std::time::Duration::from_secs(state.config.body_timeout_secs)),
            cut_slow_bodies,
        ))
        .layer(middleware::from_fn(json_errors))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request| {
                let id = req
                    .headers()
                    .get(&REQUEST_ID)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                tracing::debug_span!("request", request_id = %id, method = %req.method(), path = %req.uri().path())
            })
            // The span and the line per request are `debug`: at `info` they cost
            // a fifth of the prediction throughput (BENCHMARKS.md). Server errors
            // are logged with their request id by `json_errors` at any level.
            .on_response(DefaultOnResponse::new().level(tracing::Level::DEBUG)),
        )
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .layer(middleware::map_response(move |mut response: axum::response::Response| {
            let headers = response.headers_mut();
            let policy = cors::add_frame_ancestors(
                headers.get(axum::http::header::CONTENT_SECURITY_POLICY),
                &frame_ancestors,
            );
            headers.insert(axum::http::header::CONTENT_SECURITY_POLICY, policy);
            async move { response }
        }))
        .layer(cors)
        .layer(middleware::from_fn(observe::count))
        .with_state(state)
}

/// Serves the API on `listener` until `shutdown` resolves, then stops accepting
/// and lets in-flight requests finish — for at most `grace`, after which the
/// remaining connections (long streams) are dropped. The trigger loops run for as
/// long as the server does; firings still running at shutdown get the same grace.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: std::time::Duration,
) -> std::io::Result<()> {
    let cancel = CancellationToken::new();
    let background = triggers::start_background(&state, cancel.child_token());
    background.spawn(crate::services::aborts::run(
        state.clone(),
        cancel.child_token(),
    ));
    background.spawn(crate::services::uploads::run_sweeper(
        std::sync::Arc::clone(&state.uploads),
        cancel.child_token(),
    ));
    let stopping = Arc::new(tokio::sync::Notify::new());
    let signal = {
        let stopping = Arc::clone(&stopping);
        let cancel = cancel.clone();
        async move {
            shutdown.await;
            cancel.cancel();
            stopping.notify_one();
        }
    };
    let limits = EdgeLimits {
        max_connections: state.config.max_connections,
        header_read_timeout: std::time::Duration::from_secs(state.config.header_timeout_secs),
    };
    let server = serve_connections(listener, router(state), limits, signal);
    tokio::select! {
        () = server => {}
        () = async {
            stopping.notified().await;
            tokio::time::sleep(grace).await;
        } => {
            tracing::warn!(grace_secs = grace.as_secs(), "requests still running after the grace period; closing them");
        }
    }
    cancel.cancel();
    background.close();
    if tokio::time::timeout(grace, background.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            "trigger firings still running after the grace period; their leases will expire"
        );
    }
    Ok(())
}
