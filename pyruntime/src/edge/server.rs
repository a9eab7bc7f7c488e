//! The HTTP edge: router, API-key check, handlers, startup and graceful shutdown.
//!
//! Entry points: `run` (build a tokio runtime, serve until Ctrl-C/SIGTERM; used by the
//! binary and by the wheel's `serve`) and `serve` (an axum server on a bound listener,
//! stopping when `shutdown` resolves; tests call it). Handlers only extract, call the
//! `Executor` or `Artifacts`, and serialise. When `PY_TOOL_API_KEY` is set, a middleware
//! checks `Authorization: Bearer` in constant time before any body is read; /tools/health
//! stays open for liveness and shows its details only with the key or the metrics token. axum's plain-text rejections and fallbacks become JSON `ApiError`s.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;

use crate::analysis::py::{self, InterpreterInfo};
use crate::config::Config;
use crate::edge::error::{ApiError, Result};
use crate::edge::metrics;
use crate::isolation::cgroups::Cgroups;
use crate::isolation::disk::Disk;
use crate::isolation::network::Egress;
use crate::isolation::{Layer, Layers, NetworkMode, State as LayerState};
use crate::pipeline::execute::{
    ExecuteRequest, ExecuteResponse, Executor, InstallRequest, InstallResponse,
};
use crate::pipeline::javascript::JavaScriptRequest;
use crate::pipeline::mcp_stdio::{ServerListing, StdioRequest, StdioResponse, StdioServers};
use crate::process::launcher::Launcher;
use crate::process::pool::Pool;
use crate::process::sandbox::{self, Policy, Sandbox};
use crate::storage::artifacts::{self, Artifacts};
use crate::storage::venvs::{self, Installer, Venvs};

/// How long requests in flight may go on after Ctrl-C or SIGTERM.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Shared, cheaply cloned state of the handlers.
#[derive(Clone)]
pub struct AppState {
    executor: Arc<Executor>,
    /// The stdio MCP servers (`/tools/mcp-stdio`).
    mcp: Arc<StdioServers>,
    /// SHA-256 of `PY_TOOL_API_KEY`, compared in constant time; `None` = open.
    api_key_hash: Option<[u8; 32]>,
    /// SHA-256 of `PY_TOOL_METRICS_TOKEN`; `None`: `/metrics` is off.
    metrics_token_hash: Option<[u8; 32]>,
    python: Arc<InterpreterInfo>,
    max_mem: u64,
    max_timeout: u64,
    /// What the start-up probe's run applied to itself, plus the server-side cgroups.
    isolation: Arc<Isolation>,
}

/// The isolation layers as measured at start.
struct Isolation {
    layers: Layers,
    cgroups: Layer,
    /// How a zygote confines itself before importing a workspace's code.
    zygote: Layer,
    /// The bound on the disk a run fills (`PY_TOOL_RUN_DISK`).
    disk: Layer,
    required: bool,
    /// Layers `required` lets be missing (`PY_TOOL_OPTIONAL_LAYERS`).
    optional: Vec<&'static str>,
    /// What runs reach (`deny` where `public` cannot work).
    network: NetworkMode,
    max_concurrency: usize,
    max_queue: usize,
    max_queue_per_workspace: usize,
}

impl Isolation {
    /// Every layer, the run's own and the cgroups, as `(name, layer)`.
    fn all(&self) -> Vec<(&'static str, &Layer)> {
        let mut all: Vec<_> = self.layers.iter().into_iter().collect();
        all.push(("cgroups", &self.cgroups));
        all.push(("zygote", &self.zygote));
        all.push(("disk", &self.disk));
        all
    }
}

/// Builds the tokio runtime and serves `config` until Ctrl-C or SIGTERM.
pub fn run(config: Config) -> std::io::Result<()> {
    init_tracing();
    // Before the runtime's threads exist: they inherit it.
    crate::isolation::disk::own_namespace();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let shutdown = shutdown_signal()?;
        let listener = TcpListener::bind(SocketAddr::new(config.host, config.port)).await?;
        serve(config, listener, shutdown).await
    })
}

/// Serves on `listener` until `shutdown` resolves.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    config.check().map_err(std::io::Error::other)?;
    let state = prepare(&config).await?;
    let address = listener.local_addr()?;
    if !config.host.is_loopback() && config.key().is_none() {
        tracing::warn!(
            %address,
            "LISTENING ON A NON-LOOPBACK ADDRESS WITHOUT PY_TOOL_API_KEY: anyone who can reach \
             this port can run arbitrary code on this machine"
        );
    }
    tracing::info!(%address, python = %state.python.version, "weir-pyruntime listening");
    // A machine-readable line for supervisors and tests that start us on port 0.
    println!("weir-pyruntime listening on http://{address}");
    // After the signal, requests in flight get SHUTDOWN_GRACE to finish; then serve
    // returns, and dropping the runtime's tasks kills the children still running.
    let (stopping, mut stopped) = tokio::sync::watch::channel(false);
    let signal = async move {
        shutdown.await;
        // No receiver left only means serve already returned.
        let _ = stopping.send(true);
    };
    let server = axum::serve(listener, router(state)).with_graceful_shutdown(signal);
    let grace = async move {
        if stopped.wait_for(|stop| *stop).await.is_ok() {
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        result = server.into_future() => result,
        () = grace => {
            tracing::warn!("executions still running after the shutdown grace period: killing them");
            Ok(())
        }
    }
}

/// Interpreter facts, installer detection, directories.
async fn prepare(config: &Config) -> std::io::Result<AppState> {
    let python = tokio::task::spawn_blocking(py::interpreter)
        .await
        .map_err(std::io::Error::other)?
        .map_err(std::io::Error::other)?;
    let base_python = config
        .python
        .clone()
        .unwrap_or_else(|| python.executable.clone().into());
    let installer = venvs::detect_installer(config.uv.as_deref(), &python.scripts).await;
    if matches!(installer, Installer::Pip) {
        tracing::warn!("uv not found: falling back to `python -m venv` and pip (slower)");
    }
    // Shown read-only to every run: the interpreter, and the npm packages installed
    // ahead for stdio MCP servers.
    let node_packages = match &config.node_packages {
        Some(dir) => Some(std::path::absolute(dir)?),
        None => None,
    };
    let interpreter_dirs: Vec<std::path::PathBuf> = [&python.base_prefix]
        .into_iter()
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .chain(node_packages.clone().filter(|dir| dir.is_dir()))
        .collect();
    let private = [
        ("PY_TOOL_VENVS", Some(config.venvs.clone())),
        ("PY_TOOL_ARTIFACTS", Some(config.artifacts.clone())),
        ("WEIR_DATA_DIR", config.api_data_dir.clone()),
    ];
    refuse_visible_data(&private, &interpreter_dirs)?;
    tokio::fs::create_dir_all(&config.venvs).await?;
    tokio::fs::create_dir_all(&config.artifacts).await?;
    let venvs_root = std::path::absolute(&config.venvs)?;
    let artifacts = Artifacts::new(
        std::path::absolute(&config.artifacts)?,
        config.workspace_quota,
    );
    // Run directories left by a previous process that was killed mid-run.
    if let Err(err) = tokio::fs::remove_dir_all(artifacts.runs_dir()).await
        && err.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(%err, "cannot clean stale run directories");
    }
    let venvs = Venvs::new(venvs_root, base_python, installer);
    let (run_disk, runs) = (config.run_disk, artifacts.runs_dir());
    let disk = tokio::task::spawn_blocking(move || Disk::new(run_disk, &runs))
        .await
        .map_err(std::io::Error::other)?
        .map(Arc::new);

    let launcher = Launcher::detect(&python.host)?;
    let pool = Arc::new(Pool::new(launcher));
    let egress = match config.network {
        NetworkMode::Public => {
            let dir = artifacts.runs_dir().join(".network");
            match tokio::task::spawn_blocking(move || Egress::detect(&dir)).await {
                Ok(Ok(egress)) => Ok(Arc::new(egress)),
                Ok(Err(why)) => Err(why),
                Err(err) => Err(err.to_string()),
            }
        }
        _ => Err("not asked for".to_owned()),
    };
    let mut sandbox = Sandbox::new(
        pool.clone(),
        Cgroups::detect(),
        Policy {
            network: config.network,
            egress: egress.as_ref().ok().cloned(),
            require: config.require_isolation,
            interpreter_dirs,
            max_mem: config.max_mem,
            runs_root: artifacts.runs_dir(),
            runs_at_once: config.concurrency(),
            disk: disk.as_ref().ok().cloned(),
        },
    );
    let layers = sandbox
        .probe(&artifacts.runs_dir().join("probe"))
        .await
        .map_err(|err| std::io::Error::other(format!("isolation probe: {err}")))?;
    let zygote = sandbox
        .probe_zygote(&artifacts.runs_dir().join("probe"))
        .await;
    let mut layers = layers;
    if config.network == NetworkMode::Public {
        // The probe's run had no zygote of its own to share a namespace with: what
        // `public` runs get is what the confined probe zygote got.
        layers.network = match (&egress, zygote.state) {
            (Ok(_), LayerState::Enforced) => {
                Layer::enforced(crate::isolation::network::PUBLIC_LAYER)
            }
            (Ok(_), _) => {
                sandbox.without_egress();
                Layer::partial(format!(
                    "public needs a confined zygote ({}): runs have loopback only",
                    zygote.detail
                ))
            }
            (Err(why), _) => Layer::partial(format!(
                "public asked for, but {why}: runs have loopback only"
            )),
        };
    }
    let isolation = Isolation {
        layers,
        cgroups: sandbox.cgroups(),
        zygote,
        disk: match &disk {
            Ok(disk) => disk.layer(),
            Err(layer) => layer.clone(),
        },
        required: config.require_isolation,
        optional: config.optional_layers.names().to_vec(),
        network: sandbox.network(),
        max_concurrency: config.concurrency(),
        max_queue: config.queue(),
        max_queue_per_workspace: config.queue_per_workspace(),
    };
    for (name, layer) in isolation.all() {
        if layer.state == LayerState::Enforced {
            tracing::info!(layer = name, detail = %layer.detail, "isolation layer enforced");
        } else {
            tracing::warn!(layer = name, state = ?layer.state, detail = %layer.detail, "isolation layer missing");
        }
    }
    if config.require_isolation
        && let Some((name, layer)) = isolation.all().into_iter().find(|(name, layer)| {
            layer.state != LayerState::Enforced && !config.optional_layers.contains(name)
        })
    {
        return Err(std::io::Error::other(format!(
            "PY_TOOL_REQUIRE_ISOLATION=1 but the {name} layer is {:?}: {}",
            layer.state, layer.detail
        )));
    }
    // Expired artifacts are removed from time to time (and once now).
    let expiring = artifacts.clone();
    let ttl = config.artifact_ttl;
    tokio::spawn(async move {
        let every = (ttl / 2).clamp(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(3600),
        );
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let sweeping = expiring.clone();
            match tokio::task::spawn_blocking(move || sweeping.sweep(ttl)).await {
                Ok(Ok(0)) => {}
                Ok(Ok(removed)) => tracing::info!(removed, "expired artifacts removed"),
                Ok(Err(err)) => tracing::warn!(%err, "cannot sweep expired artifacts"),
                Err(err) => tracing::warn!(%err, "cannot sweep expired artifacts"),
            }
        }
    });
    // Idle zygotes are stopped from time to time.
    let sweeper = Arc::downgrade(&pool);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(30));
        loop {
            tick.tick().await;
            let Some(pool) = sweeper.upgrade() else {
                return;
            };
            pool.sweep().await;
        }
    });
    let executor = Arc::new(Executor::new(venvs, artifacts, sandbox, config));
    let mcp = Arc::new(StdioServers::new(
        Arc::clone(&executor),
        config.mcp_idle,
        config.mcp_servers_per_workspace,
        node_packages,
    ));
    // Idle stdio MCP servers are stopped from time to time.
    let servers = Arc::downgrade(&mcp);
    let every = mcp.sweep_every();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let Some(servers) = servers.upgrade() else {
                return;
            };
            servers.sweep();
        }
    });
    Ok(AppState {
        executor,
        mcp,
        api_key_hash: config.key().map(|key| Sha256::digest(key).into()),
        metrics_token_hash: config
            .metrics_token
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| Sha256::digest(t).into()),
        python: Arc::new(python),
        max_mem: config.max_mem,
        max_timeout: config.max_timeout,
        isolation: Arc::new(isolation),
    })
}

/// Refuses to start when a directory of data (every workspace's venvs or artifacts, the
/// API's database) lies below a path every run's view shows read-only: each run could
/// read every workspace's files.
fn refuse_visible_data(
    private: &[(&str, Option<std::path::PathBuf>)],
    interpreter_dirs: &[std::path::PathBuf],
) -> std::io::Result<()> {
    let shown: Vec<std::path::PathBuf> = crate::isolation::mounts::system_sources()
        .into_iter()
        .chain(interpreter_dirs.iter().cloned())
        .filter_map(|path| std::fs::canonicalize(path).ok())
        .collect();
    for (setting, dir) in private {
        let Some(dir) = dir else { continue };
        // Not there yet: where it will be.
        let Ok(real) = std::fs::canonicalize(dir).or_else(|_| std::path::absolute(dir)) else {
            continue;
        };
        if let Some(view) = shown.iter().find(|view| real.starts_with(view)) {
            return Err(std::io::Error::other(format!(
                "{setting} ({}) is below {}, which every run's view shows: move it elsewhere",
                real.display(),
                view.display()
            )));
        }
    }
    Ok(())
}

pub fn router(state: AppState) -> Router {
    let protected = Router::new()
        .route("/tools/execute-python", post(execute_python))
        .route("/tools/execute-javascript", post(execute_javascript))
        .route("/tools/install-packages", post(install_packages))
        .route("/tools/mcp-stdio", post(mcp_stdio).get(mcp_stdio_servers))
        .route(
            "/tools/artifacts/{workspace_id}/{filename}",
            get(get_artifact),
        )
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            require_api_key,
        ));
    Router::new()
        .route("/tools/health", get(health))
        .route("/tools/openapi.json", get(openapi))
        .route("/metrics", get(scrape))
        .merge(protected)
        .fallback(|| async { ApiError::NotFound("no such endpoint".to_owned()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(Config::MAX_BODY_BYTES))
        .with_state(state)
}

async fn require_api_key(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(expected) = &state.api_key_hash
        && !bearer_matches(&request, expected)
    {
        return ApiError::Unauthorized.into_response();
    }
    next.run(request).await
}

/// Whether the request's `Authorization: Bearer <token>` hashes to `expected`
/// (compared in constant time).
fn bearer_matches(request: &Request, expected: &[u8; 32]) -> bool {
    request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(|token| -> [u8; 32] { Sha256::digest(token.trim()).into() })
        .is_some_and(|given| bool::from(given.ct_eq(expected)))
}

async fn execute_python(
    State(state): State<AppState>,
    body: std::result::Result<Json<ExecuteRequest>, JsonRejection>,
) -> Result<Json<ExecuteResponse>> {
    counted(async {
        let Json(request) = body?;
        Ok(state.executor.execute(request).await?)
    })
    .await
}

async fn execute_javascript(
    State(state): State<AppState>,
    body: std::result::Result<Json<JavaScriptRequest>, JsonRejection>,
) -> Result<Json<ExecuteResponse>> {
    counted(async {
        let Json(request) = body?;
        Ok(state.executor.execute_javascript(request).await?)
    })
    .await
}

/// A run's answer, counted in the metrics by its outcome and duration.
async fn counted(
    run: impl std::future::Future<Output = Result<ExecuteResponse>>,
) -> Result<Json<ExecuteResponse>> {
    let started = std::time::Instant::now();
    let answer = run.await;
    let outcome = match &answer {
        Ok(run) if run.timed_out => "timeout",
        Ok(run) if run.success => "success",
        Ok(_) => "error",
        Err(e) if e.status_code().is_server_error() => "failed",
        Err(_) => "refused",
    };
    metrics::metrics().run(outcome, started.elapsed());
    answer.map(Json)
}

/// The OpenAPI document of every route and status (written by hand: the routes are
/// few; `scripts/test` fuzzes the server against it with schemathesis).
pub const OPENAPI: &str = include_str!("openapi.json");

async fn openapi() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        OPENAPI,
    )
        .into_response()
}

/// `GET /metrics`: the runtime's metrics, the gauges read now.
async fn scrape(State(state): State<AppState>, request: Request) -> Result<Response> {
    let Some(expected) = &state.metrics_token_hash else {
        return Err(ApiError::NotFound(
            "metrics are off: set PY_TOOL_METRICS_TOKEN and scrape with it as a bearer token"
                .to_owned(),
        ));
    };
    if !bearer_matches(&request, expected) {
        return Err(ApiError::Unauthorized);
    }
    let m = metrics::metrics();
    let (running, queued) = state.executor.admission().load();
    m.running.set(i64::try_from(running).unwrap_or(i64::MAX));
    m.queued.set(i64::try_from(queued).unwrap_or(i64::MAX));
    m.zygotes
        .set(i64::try_from(state.executor.sandbox().pool().len()).unwrap_or(i64::MAX));
    m.mcp_servers
        .set(i64::try_from(state.mcp.running()).unwrap_or(i64::MAX));
    for (layer, state) in state.isolation.all() {
        m.layers
            .get_or_create(&metrics::LayerLabels { layer })
            .set(i64::from(state.state == LayerState::Enforced));
    }
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(metrics::CONTENT_TYPE),
        )],
        m.encode(),
    )
        .into_response())
}

/// `POST /tools/mcp-stdio`: one request to a stdio MCP server, counted by outcome.
async fn mcp_stdio(
    State(state): State<AppState>,
    body: std::result::Result<Json<StdioRequest>, JsonRejection>,
) -> Result<Json<StdioResponse>> {
    let answer = async {
        let Json(request) = body?;
        Ok::<_, ApiError>(state.mcp.call(request).await?)
    }
    .await;
    let outcome = match &answer {
        Ok(answer) if answer.error.is_some() => "error",
        Ok(_) => "result",
        Err(e) if e.status_code().is_server_error() => "failed",
        Err(_) => "refused",
    };
    metrics::metrics().mcp_request(outcome);
    answer.map(Json)
}

#[derive(serde::Deserialize)]
struct WorkspaceQuery {
    #[serde(rename = "workspaceId")]
    workspace_id: Option<String>,
}

/// `GET /tools/mcp-stdio?workspaceId=`: the workspace's running stdio MCP servers.
async fn mcp_stdio_servers(
    State(state): State<AppState>,
    query: std::result::Result<
        axum::extract::Query<WorkspaceQuery>,
        axum::extract::rejection::QueryRejection,
    >,
) -> Result<Json<Value>> {
    let axum::extract::Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let servers: Vec<ServerListing> = state.mcp.list(query.workspace_id)?;
    Ok(Json(json!({ "servers": servers })))
}

async fn install_packages(
    State(state): State<AppState>,
    body: std::result::Result<Json<InstallRequest>, JsonRejection>,
) -> Result<Json<InstallResponse>> {
    let Json(request) = body?;
    Ok(Json(state.executor.install(request).await?))
}

async fn get_artifact(
    State(state): State<AppState>,
    path: std::result::Result<Path<(String, String)>, PathRejection>,
) -> Result<Response> {
    let Path((workspace_id, filename)) =
        path.map_err(|rejection| ApiError::BadRequest(rejection.body_text()))?;
    let bytes = state
        .executor
        .artifacts()
        .read(&workspace_id, &filename)
        .await?;
    let content_type = HeaderValue::from_str(&artifacts::mime_for(&filename))
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    Ok((
        [
            (header::CONTENT_TYPE, content_type),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            // HTML or SVG written by tool code must not run scripts in this origin.
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("sandbox"),
            ),
        ],
        bytes,
    )
        .into_response())
}

/// Liveness for anyone (`{"status": "ok"}`: what container health checks need);
/// the details — paths, the interpreter, load, limits and isolation layers — only
/// to a caller presenting the API key or the metrics token, since they map the
/// host for an attacker.
async fn health(State(state): State<AppState>, request: Request) -> Json<Value> {
    let trusted = match &state.api_key_hash {
        Some(key) => bearer_matches(&request, key),
        None => true,
    } || state
        .metrics_token_hash
        .as_ref()
        .is_some_and(|token| bearer_matches(&request, token));
    if !trusted {
        return Json(json!({"status": "ok"}));
    }
    let uv = match state.executor.venvs().installer() {
        Installer::Uv { path, version } => json!({
            "available": true,
            "path": path.display().to_string(),
            "version": version,
        }),
        Installer::Pip => json!({
            "available": false,
            "fallback": "python -m venv --without-pip + pip --python",
        }),
    };
    let isolation = &state.isolation;
    let layers: serde_json::Map<String, Value> = isolation
        .all()
        .into_iter()
        .map(|(name, layer)| (name.to_owned(), json!(layer)))
        .collect();
    let (running, queued) = state.executor.admission().load();
    Json(json!({
        "status": "ok",
        "python": {"version": state.python.version, "executable": state.python.executable},
        "uv": uv,
        "workspaces": state.executor.venvs().count(),
        "zygotes": state.executor.sandbox().pool().len(),
        "limits": {
            "defaultTimeoutSeconds": Config::DEFAULT_TIMEOUT_SECS,
            "maxTimeoutSeconds": state.max_timeout,
            "maxConcurrency": isolation.max_concurrency,
            "maxQueue": isolation.max_queue,
            "maxQueuePerWorkspace": isolation.max_queue_per_workspace,
        },
        "load": {"running": running, "queued": queued},
        "isolation": {
            "required": isolation.required,
            "optional": isolation.optional,
            "network": isolation.network.name(),
            "layers": layers,
            "childProcess": true,
            "scrubbedEnvironment": true,
            "rlimits": {
                "cpuSeconds": format!("timeout + {}", sandbox::CPU_GRACE_SECS),
                "addressSpaceBytes": state.max_mem,
                "fileSizeBytes": crate::isolation::FILE_SIZE_LIMIT,
                "coreBytes": 0,
                "processes": crate::isolation::PROCESS_LIMIT,
            },
            "outputCapBytes": sandbox::OUTPUT_CAP,
            "namespaces": isolation.layers.namespaces.state == LayerState::Enforced,
            "landlock": isolation.layers.landlock.state == LayerState::Enforced,
            "seccomp": isolation.layers.seccomp.state == LayerState::Enforced,
        },
    }))
}

/// Registers for Ctrl-C (SIGINT) and SIGTERM now — before the server announces itself, so
/// an early signal is never lost to the default action — and resolves on either.
/// Needs a tokio runtime.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {},
            _ = terminate.recv() => {},
        }
        tracing::info!("shutting down");
    })
}

/// Logs to stderr; `RUST_LOG` overrides the default `info`. A second call (the wheel's
/// `serve` run twice in one process) keeps the first subscriber.
fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Ignoring the error is right: it only says a subscriber is already installed.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::OPENAPI;

    #[test]
    fn the_openapi_document_names_every_route() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
        let paths: Vec<&str> = doc["paths"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for route in [
            "/tools/health",
            "/tools/openapi.json",
            "/tools/execute-python",
            "/tools/execute-javascript",
            "/tools/install-packages",
            "/tools/mcp-stdio",
            "/tools/artifacts/{workspace_id}/{filename}",
            "/metrics",
        ] {
            assert!(paths.contains(&route), "{route}");
        }
        assert_eq!(paths.len(), 8);
    }
}
