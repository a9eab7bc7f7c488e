//! `POST /tools/mcp-stdio` and `GET /tools/mcp-stdio`: MCP servers that speak on
//! stdio (Flowise's `customMCP` with `{command, args, env}` and its npm-package MCP
//! nodes), run in the sandbox tool code runs in — never in the API's process or
//! with the runtime's privileges.
//!
//! A server is a long-lived run of the workspace's zygote whose code is a fixed
//! harness (`mcp_stdio.py`) that exec's the command with stdin and stdout on two
//! FIFOs in the run's work directory: the same namespaces, view, Landlock, seccomp,
//! cgroup, rlimits and network policy as a Python tool, for as long as it lives.
//! There is one server per workspace and configuration (command, arguments,
//! environment), started on first use, initialised here (so callers send only
//! requests), shared by every caller (request ids are the runtime's own), and
//! stopped after `PY_TOOL_MCP_IDLE` unused. A server found dead is started again
//! (`restarted` in the answer); one that dies while answering is an error the
//! caller reads. `npx <package>` runs the package from `PY_TOOL_NODE_PACKAGES`
//! when it is installed there; otherwise npx fetches it into the workspace's own
//! cache, through the run's network policy.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::{oneshot, watch};

use super::execute::{Executor, workspace_of};
use super::{Error, Result};
use crate::process::lock;
use crate::process::sandbox::{self, Job, Limits, Outcome, WorkspaceDirs};

/// The Python program that becomes the server.
pub const HARNESS: &str = include_str!("mcp_stdio.py");
/// The protocol version asked for when a server is initialised.
const PROTOCOL_VERSION: &str = "2025-06-18";
/// Time a server gets to start and answer `initialize` (npx may fetch the package).
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// A request's time when it names none.
const DEFAULT_TIMEOUT_SECS: f64 = 60.0;
/// Longest life of a server: then it ends and the next request starts it again.
const LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// A server's address-space limit (RLIMIT_AS). Runtimes such as V8 reserve far
/// more address space than they use (a 1 GiB limit makes Node.js fail to grow a
/// heap of a few dozen MiB), so what bounds a server's memory is the run's
/// cgroup (`PY_TOOL_MAX_MEM`) and, for Node.js, its heap limit (`NODE_OPTIONS`).
const ADDRESS_SPACE: u64 = 16 << 30;
/// Longest line (one JSON-RPC message) read from a server.
const MAX_MESSAGE: usize = 16 << 20;
/// Largest configuration (command, arguments and environment together).
const MAX_SPEC: usize = 64 << 10;
/// Bytes of a dead server's stderr its error shows.
const STDERR_TAIL: usize = 2000;
/// JSON-RPC error codes of what the runtime itself reports.
const TIMED_OUT: i64 = -32001;
const EXITED: i64 = -32002;

/// Body of `POST /tools/mcp-stdio`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StdioRequest {
    #[serde(alias = "workspace_id")]
    pub workspace_id: Option<String>,
    pub server: Option<ServerSpec>,
    /// A request method (`tools/list`, `tools/call`, …): never `initialize`, which
    /// the runtime sends itself, nor a notification.
    pub method: Option<String>,
    pub params: Option<Value>,
    /// Seconds to wait for the answer (the server's start not included).
    pub timeout: Option<f64>,
}

/// A stdio server as Flowise's `mcpServerConfig` names it.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ServerSpec {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// Response of `POST /tools/mcp-stdio`: the server's `result` or a JSON-RPC
/// `error` (the server's own, or the runtime's: -32001 no answer in time,
/// -32002 the server exited).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StdioResponse {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// This request started the server.
    pub started: bool,
    /// …and it had run before and died.
    pub restarted: bool,
    /// The server's `serverInfo` from `initialize`.
    pub server_info: Value,
    pub duration_ms: u64,
}

/// One running server, as `GET /tools/mcp-stdio` lists it (never its environment,
/// which may hold credentials; arguments that look like one masked).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerListing {
    pub command: String,
    pub args: Vec<String>,
    pub server_info: Value,
    /// Unix seconds.
    pub started_at: u64,
    pub idle_seconds: u64,
    /// Requests callers sent (not the runtime's own `initialize`).
    pub requests: u64,
    /// Times this configuration's server was started again after dying.
    pub restarts: u64,
}

/// The stdio servers of every workspace.
pub struct StdioServers {
    executor: Arc<Executor>,
    slots: Mutex<HashMap<Key, Arc<Slot>>>,
    idle: Duration,
    per_workspace: usize,
    node_packages: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    workspace: String,
    /// SHA-256 of the configuration's JSON.
    config: [u8; 32],
}

/// A configuration's place: its server (when one ran), and a gate so that two
/// first requests start one server.
#[derive(Default)]
struct Slot {
    gate: tokio::sync::Mutex<()>,
    current: Mutex<Option<Arc<Server>>>,
    restarts: AtomicU64,
}

impl Slot {
    fn current(&self) -> Option<Arc<Server>> {
        lock(&self.current).clone()
    }

    fn live(&self) -> Option<Arc<Server>> {
        self.current().filter(|server| server.alive())
    }
}

/// How a server ended.
#[derive(Debug, Clone)]
enum End {
    /// Stopped here (idle, or its reader failed): not a crash.
    Stopped,
    /// It exited or was killed on its own: why, in words.
    Died(String),
}

/// A running server: the write end of its stdin, the requests waiting for answers.
struct Server {
    command: String,
    args: Vec<String>,
    server_info: Mutex<Value>,
    started_at: SystemTime,
    writer: tokio::sync::Mutex<pipe::Sender>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    next_id: AtomicU64,
    requests: AtomicU64,
    in_flight: AtomicUsize,
    last_used: Mutex<Instant>,
    alive: AtomicBool,
    ended: watch::Receiver<Option<End>>,
    stop: Mutex<Option<oneshot::Sender<()>>>,
}

impl StdioServers {
    pub fn new(
        executor: Arc<Executor>,
        idle: Duration,
        per_workspace: usize,
        node_packages: Option<PathBuf>,
    ) -> Self {
        Self {
            executor,
            slots: Mutex::default(),
            idle,
            per_workspace: per_workspace.max(1),
            node_packages,
        }
    }

    /// Servers running now, every workspace together.
    pub fn running(&self) -> usize {
        lock(&self.slots)
            .values()
            .filter(|slot| slot.live().is_some())
            .count()
    }

    /// The running servers of `workspace`.
    pub fn list(&self, workspace: Option<String>) -> Result<Vec<ServerListing>> {
        let workspace = workspace_of(workspace, "workspaceId")?;
        let slots: Vec<Arc<Slot>> = lock(&self.slots)
            .iter()
            .filter(|(key, _)| key.workspace == workspace)
            .map(|(_, slot)| Arc::clone(slot))
            .collect();
        let mut listed: Vec<ServerListing> = slots
            .iter()
            .filter_map(|slot| Some((slot.live()?, slot.restarts.load(Ordering::Relaxed))))
            .map(|(server, restarts)| ServerListing {
                command: server.command.clone(),
                args: masked_args(&server.args),
                server_info: lock(&server.server_info).clone(),
                started_at: server
                    .started_at
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                idle_seconds: lock(&server.last_used).elapsed().as_secs(),
                requests: server.requests.load(Ordering::Relaxed),
                restarts,
            })
            .collect();
        listed.sort_by_key(|l| l.started_at);
        Ok(listed)
    }

    /// Sends one request to the workspace's server of this configuration, starting
    /// the server first when it is not running.
    pub async fn call(&self, request: StdioRequest) -> Result<StdioResponse> {
        let began = Instant::now();
        let workspace = workspace_of(request.workspace_id, "workspaceId")?;
        let spec = request.server.ok_or(Error::MissingField("server"))?;
        check_spec(&spec)?;
        let method = request.method.ok_or(Error::MissingField("method"))?;
        check_method(&method)?;
        let params = match request.params {
            None | Some(Value::Null) => None,
            Some(params @ (Value::Object(_) | Value::Array(_))) => Some(params),
            Some(_) => {
                return Err(Error::Invalid(
                    "`params` must be an object (or an array)".into(),
                ));
            }
        };
        let timeout =
            self.executor
                .timeout_or(request.timeout, DEFAULT_TIMEOUT_SECS, &mut Vec::new())?;
        let key = Key {
            config: Sha256::digest(
                serde_json::to_vec(&spec).map_err(|e| Error::Invalid(e.to_string()))?,
            )
            .into(),
            workspace,
        };
        let slot = self.slot(&key)?;
        let (server, started, restarted) = {
            let _gate = slot.gate.lock().await;
            match slot.current() {
                Some(server) if server.alive() => (server, false, false),
                previous => {
                    let restarted = previous.is_some_and(|p| matches!(p.end(), Some(End::Died(_))));
                    if restarted {
                        slot.restarts.fetch_add(1, Ordering::Relaxed);
                    }
                    match self.start(&key.workspace, &spec).await? {
                        Ok(server) => {
                            *lock(&slot.current) = Some(Arc::clone(&server));
                            (server, true, restarted)
                        }
                        Err(error) => {
                            return Ok(StdioResponse {
                                result: None,
                                error: Some(error),
                                started: true,
                                restarted,
                                server_info: Value::Null,
                                duration_ms: began.elapsed().as_millis() as u64,
                            });
                        }
                    }
                }
            }
        };
        server.requests.fetch_add(1, Ordering::Relaxed);
        let answer = server.request(&method, params, timeout).await;
        let (result, error) = match answer {
            Ok(result) => (Some(result), None),
            Err(error) => (None, Some(error)),
        };
        Ok(StdioResponse {
            result,
            error,
            started,
            restarted,
            server_info: lock(&server.server_info).clone(),
            duration_ms: began.elapsed().as_millis() as u64,
        })
    }

    /// The configuration's slot, made if new: refused when the workspace runs its
    /// share of servers already.
    fn slot(&self, key: &Key) -> Result<Arc<Slot>> {
        let mut slots = lock(&self.slots);
        if let Some(slot) = slots.get(key) {
            return Ok(Arc::clone(slot));
        }
        let running = slots
            .iter()
            .filter(|(k, slot)| k.workspace == key.workspace && slot.live().is_some())
            .count();
        if running >= self.per_workspace {
            return Err(Error::TooManyServers(self.per_workspace));
        }
        let slot = Arc::new(Slot::default());
        slots.insert(key.clone(), Arc::clone(&slot));
        Ok(slot)
    }

    /// Stops servers unused for longer than `PY_TOOL_MCP_IDLE` and forgets the
    /// configurations left without one. Called periodically.
    pub fn sweep(&self) {
        let mut slots = lock(&self.slots);
        slots.retain(|_, slot| {
            let Some(server) = slot.current() else {
                // Unless its first server is starting now.
                return slot.gate.try_lock().is_err();
            };
            if !server.alive() {
                // Kept a while, so that its next start counts as a restart.
                return server.idle() <= self.idle;
            }
            if server.in_flight.load(Ordering::Relaxed) == 0 && server.idle() > self.idle {
                tracing::info!(command = %server.command, "stopping an idle MCP server");
                server.shut();
            }
            true
        });
    }

    /// How often `sweep` should run.
    pub fn sweep_every(&self) -> Duration {
        (self.idle / 2).clamp(Duration::from_secs(1), Duration::from_secs(30))
    }

    /// Starts a server and initialises it: `Ok(Err(error))` when it died or did not
    /// answer (the error the caller reads); `Err` for the runtime's own failures.
    async fn start(
        &self,
        workspace: &str,
        spec: &ServerSpec,
    ) -> Result<Result<Arc<Server>, Value>> {
        let executor = &self.executor;
        let venv = executor.workspace_venv(workspace).await?;
        let cache = executor.cache_dir(workspace);
        let artifacts = executor.artifacts().workspace_dir(workspace);
        let max_mem = executor.max_mem();
        let limits = Limits {
            timeout: LIFETIME,
            max_mem: ADDRESS_SPACE.max(max_mem),
        };
        let no_params = Map::new();
        let job = Job {
            dirs: WorkspaceDirs {
                workspace,
                venv: &venv,
                artifacts: &artifacts,
                cache: &cache,
            },
            code: HARNESS,
            params: &no_params,
            limits,
        };
        let (run_dir, plan) = executor
            .sandbox()
            .prepare(&job)
            .await
            .map_err(Error::internal)?;
        let work = plan.work();
        let (stdin_path, stdout_path) = (work.join(".mcp-stdin"), work.join(".mcp-stdout"));
        let fifos = [stdin_path.clone(), stdout_path.clone()];
        let owner = (plan.ids.run_uid(), plan.ids.run_gid());
        tokio::task::spawn_blocking(move || make_fifos(&fifos, owner))
            .await
            .map_err(Error::internal)?
            .map_err(Error::internal)?;
        // Both ends read-write: neither open waits for the run, and a server that
        // has not opened its ends yet is no EOF.
        let writer = pipe::OpenOptions::new()
            .read_write(true)
            .open_sender(&stdin_path)
            .map_err(Error::internal)?;
        let reader = pipe::OpenOptions::new()
            .read_write(true)
            .open_receiver(&stdout_path)
            .map_err(Error::internal)?;
        let (command, args) = self.resolve(spec).await;
        let env = server_env(
            &ServerDirs {
                home: plan.home(),
                tmp: plan.tmp(),
                cache: cache.clone(),
                venv: venv.dir.clone(),
                node_packages: self.node_packages.clone(),
            },
            max_mem,
            &spec.env,
        );
        let params = json!({
            "weir_mcp": {
                "command": command,
                "args": args,
                "env": env,
                "stdin": stdin_path,
                "stdout": stdout_path,
            }
        });
        let Value::Object(params) = params else {
            return Err(Error::internal(
                "the harness's parameters are not an object",
            ));
        };

        let (ended_tx, ended) = watch::channel(None);
        let (stop_tx, stop_rx) = oneshot::channel();
        let server = Arc::new(Server {
            command: spec.command.clone(),
            args: spec.args.clone(),
            server_info: Mutex::new(Value::Null),
            started_at: SystemTime::now(),
            writer: tokio::sync::Mutex::new(writer),
            pending: Mutex::default(),
            next_id: AtomicU64::new(1),
            requests: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
            alive: AtomicBool::new(true),
            ended,
            stop: Mutex::new(Some(stop_tx)),
        });
        let running = Arc::clone(&server);
        let executor = Arc::clone(executor);
        let workspace = workspace.to_owned();
        tokio::spawn(async move {
            let job = Job {
                dirs: WorkspaceDirs {
                    workspace: &workspace,
                    venv: &venv,
                    artifacts: &artifacts,
                    cache: &cache,
                },
                code: HARNESS,
                params: &params,
                limits,
            };
            let memory = Limits { max_mem, ..limits };
            let end = tokio::select! {
                outcome = executor.sandbox().run(&job, &run_dir, plan) => {
                    End::Died(describe_end(outcome, &memory))
                }
                _ = stop_rx => End::Stopped,
            };
            if let End::Died(why) = &end {
                tracing::info!(workspace, command = %running.command, why, "an MCP server ended");
            }
            running.alive.store(false, Ordering::Relaxed);
            ended_tx.send_replace(Some(end));
            // Waiting requests learn it from their dropped answers.
            lock(&running.pending).clear();
            tokio::task::spawn_blocking(move || drop(run_dir));
        });
        tokio::spawn(read_answers(Arc::clone(&server), reader));

        let initialize = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "weir", "version": env!("CARGO_PKG_VERSION")},
        });
        match server
            .request("initialize", Some(initialize), START_TIMEOUT)
            .await
        {
            Ok(result) => {
                *lock(&server.server_info) = result.get("serverInfo").cloned().unwrap_or_default();
                let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
                if let Err(error) = server.send(&note).await {
                    server.shut();
                    return Ok(Err(error));
                }
                Ok(Ok(server))
            }
            Err(error) => {
                server.shut();
                Ok(Err(error))
            }
        }
    }

    /// The command that runs: `npx <package> …` becomes `node <its bin> …` when the
    /// package is installed in `PY_TOOL_NODE_PACKAGES`.
    async fn resolve(&self, spec: &ServerSpec) -> (String, Vec<String>) {
        let as_given = (spec.command.clone(), spec.args.clone());
        let Some(packages) = &self.node_packages else {
            return as_given;
        };
        if Path::new(&spec.command).file_name() != Some("npx".as_ref()) {
            return as_given;
        }
        let Some((package, rest)) = npx_package(&spec.args) else {
            return as_given;
        };
        let (name, version) = split_package(package);
        let dir = packages.join("node_modules").join(name);
        let Ok(manifest) = tokio::fs::read(dir.join("package.json")).await else {
            return as_given;
        };
        let Ok(manifest) = serde_json::from_slice::<Value>(&manifest) else {
            return as_given;
        };
        let installed = manifest.get("version").and_then(Value::as_str);
        if version.is_some_and(|wanted| wanted != "latest" && Some(wanted) != installed) {
            return as_given;
        }
        match package_bin(&manifest, name) {
            Some(bin) => {
                let mut args = vec![dir.join(bin).to_string_lossy().into_owned()];
                args.extend(rest.iter().cloned());
                ("node".to_owned(), args)
            }
            None => as_given,
        }
    }
}

impl Server {
    fn alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    fn end(&self) -> Option<End> {
        self.ended.borrow().clone()
    }

    fn idle(&self) -> Duration {
        lock(&self.last_used).elapsed()
    }

    /// Stops the server (its run is killed with its whole pid namespace).
    fn shut(&self) {
        if let Some(stop) = lock(&self.stop).take() {
            let _ = stop.send(());
        }
    }

    /// Writes one message to the server's stdin.
    async fn send(&self, message: &Value) -> std::result::Result<(), Value> {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        let mut writer = self.writer.lock().await;
        writer
            .write_all(&line)
            .await
            .map_err(|err| rpc_error(EXITED, format!("cannot write to the MCP server: {err}")))
    }

    /// One request and its answer: the result, or a JSON-RPC error object.
    async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> std::result::Result<Value, Value> {
        if let Some(end) = self.end() {
            return Err(ended_error(&end));
        }
        let _busy = InFlight::new(self);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer_tx, answer_rx) = oneshot::channel();
        lock(&self.pending).insert(id, answer_tx);
        let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        let exchange = async {
            self.send(&message).await?;
            answer_rx.await.map_err(|_| {
                let end = self.end().unwrap_or(End::Stopped);
                ended_error(&end)
            })
        };
        let answer = match tokio::time::timeout(timeout, exchange).await {
            Ok(answer) => answer?,
            Err(_) => {
                lock(&self.pending).remove(&id);
                let cancel = json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": id, "reason": "timed out"},
                });
                let _ = self.send(&cancel).await;
                return Err(rpc_error(
                    TIMED_OUT,
                    format!(
                        "the MCP server did not answer `{method}` within {} s",
                        timeout.as_secs_f64()
                    ),
                ));
            }
        };
        match answer {
            Value::Object(mut answer) => match answer.remove("error") {
                Some(error) => Err(error),
                None => Ok(answer.remove("result").unwrap_or(Value::Null)),
            },
            _ => Err(rpc_error(
                EXITED,
                "the MCP server's answer is not an object",
            )),
        }
    }
}

/// Counts a request in flight and marks the server used when it is over.
struct InFlight<'a>(&'a Server);

impl<'a> InFlight<'a> {
    fn new(server: &'a Server) -> Self {
        server.in_flight.fetch_add(1, Ordering::Relaxed);
        *lock(&server.last_used) = Instant::now();
        Self(server)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        *lock(&self.0.last_used) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Reads the server's stdout, one JSON-RPC message per line, until it ends:
/// answers go to their requests, the server's own requests are answered (`ping`;
/// anything else is a method weir does not offer), notifications and stray
/// output are dropped.
async fn read_answers(server: Arc<Server>, reader: pipe::Receiver) {
    let mut ended = server.ended.clone();
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = tokio::select! {
            read = read_line(&mut reader, &mut line) => read,
            _ = ended.wait_for(Option::is_some) => return,
        };
        match read {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(command = %server.command, "an MCP server wrote a line over 16 MiB: stopped");
                server.shut();
                return;
            }
            Err(err) => {
                tracing::warn!(command = %server.command, %err, "cannot read an MCP server's output: stopped");
                server.shut();
                return;
            }
        }
        let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let id = message.get("id").cloned();
        match (message.get("method").and_then(Value::as_str), id) {
            (None, Some(id)) => {
                let waiter = id.as_u64().and_then(|id| lock(&server.pending).remove(&id));
                if let Some(waiter) = waiter {
                    let _ = waiter.send(Value::Object(message));
                }
            }
            (Some(method), Some(id)) => {
                let answer = if method == "ping" {
                    json!({"jsonrpc": "2.0", "id": id, "result": {}})
                } else {
                    json!({"jsonrpc": "2.0", "id": id, "error": {
                        "code": -32601,
                        "message": format!("weir does not offer `{method}` to MCP servers"),
                    }})
                };
                let _ = server.send(&answer).await;
            }
            _ => {}
        }
    }
}

/// Reads up to a newline into `line` (without it): `Ok(false)` when the line is
/// too long. EOF cannot happen (the runtime holds a write end too).
async fn read_line(
    reader: &mut BufReader<pipe::Receiver>,
    line: &mut Vec<u8>,
) -> std::io::Result<bool> {
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => {
                line.extend_from_slice(&buffer[..at]);
                reader.consume(at + 1);
                return Ok(line.len() <= MAX_MESSAGE);
            }
            None => {
                let taken = buffer.len();
                line.extend_from_slice(buffer);
                reader.consume(taken);
                if line.len() > MAX_MESSAGE {
                    return Ok(false);
                }
            }
        }
    }
}

/// Why a server's run ended, in words, with the end of what it wrote to stderr.
fn describe_end(outcome: std::io::Result<Outcome>, limits: &Limits) -> String {
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(err) => return format!("its run failed: {err}"),
    };
    let how = match (outcome.exit_code, outcome.signal) {
        (_, Some(signal)) => sandbox::describe_signal(signal, limits, outcome.timed_out),
        (Some(code), None) => format!("it exited with code {code}"),
        (None, None) => "it ended".to_owned(),
    };
    let stderr = outcome.stderr.trim();
    if stderr.is_empty() {
        return how;
    }
    let tail = match stderr.char_indices().rev().nth(STDERR_TAIL) {
        Some((at, _)) => &stderr[at..],
        None => stderr,
    };
    format!("{how}; its stderr ends with: {tail}")
}

fn ended_error(end: &End) -> Value {
    match end {
        End::Stopped => rpc_error(EXITED, "the MCP server was stopped"),
        End::Died(why) => rpc_error(EXITED, format!("the MCP server exited: {why}")),
    }
}

fn rpc_error(code: i64, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into()})
}

/// The two FIFOs of a server's stdin and stdout, owned by the run's ids.
fn make_fifos(paths: &[PathBuf], (uid, gid): (u32, u32)) -> std::io::Result<()> {
    for path in paths {
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))?;
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
        }
    }
    Ok(())
}

/// The directories a server's environment names.
struct ServerDirs {
    home: PathBuf,
    tmp: PathBuf,
    /// The workspace's cache (npm's and uv's).
    cache: PathBuf,
    /// The workspace's venv: first on `PATH`, so `python` and the console scripts
    /// of what the workspace installed (a Python MCP server) are its own.
    venv: PathBuf,
    node_packages: Option<PathBuf>,
}

/// The server's environment: nothing of the runtime's but the proxy, certificate
/// and registry settings (as an install gets), `PATH` (the workspace's venv, the
/// npm packages installed ahead, the system), its home and temporary directory,
/// npm's and uv's caches in the workspace's cache, Node.js's heap limit (three
/// quarters of `max_mem`), then the configuration's own.
fn server_env(
    dirs: &ServerDirs,
    max_mem: u64,
    own: &BTreeMap<String, String>,
) -> Map<String, Value> {
    let text = |p: &Path| Value::String(p.to_string_lossy().into_owned());
    let mut env = sandbox::passed_env(|upper| {
        upper.starts_with("NPM_CONFIG_") || upper.starts_with("UV_INDEX")
    });
    let mut path = format!("{}:", dirs.venv.join("bin").to_string_lossy());
    if let Some(packages) = &dirs.node_packages {
        path.push_str(&packages.join("node_modules/.bin").to_string_lossy());
        path.push(':');
    }
    path.push_str("/usr/local/bin:/usr/bin:/bin");
    env.insert("PATH".into(), Value::String(path));
    env.insert("VIRTUAL_ENV".into(), text(&dirs.venv));
    env.insert("HOME".into(), text(&dirs.home));
    env.insert("TMPDIR".into(), text(&dirs.tmp));
    env.insert("LANG".into(), "C.UTF-8".into());
    let cache = &dirs.cache;
    env.insert("npm_config_cache".into(), text(&cache.join("npm")));
    env.insert("npm_config_update_notifier".into(), "false".into());
    env.insert("npm_config_fund".into(), "false".into());
    env.insert("npm_config_audit".into(), "false".into());
    env.insert("UV_CACHE_DIR".into(), text(&cache.join("uv")));
    env.insert("UV_TOOL_DIR".into(), text(&cache.join("uv-tools")));
    let heap_mib = (max_mem >> 20) * 3 / 4;
    env.insert(
        "NODE_OPTIONS".into(),
        Value::String(format!("--max-old-space-size={}", heap_mib.max(64))),
    );
    for (name, value) in own {
        env.insert(name.clone(), Value::String(value.clone()));
    }
    env
}

/// A server's arguments as a listing shows them: the value after a flag that
/// names a credential (`--management-token x`, `--api-key=x`) and the password of
/// a URL (`postgres://user:secret@db/x`) masked.
fn masked_args(args: &[String]) -> Vec<String> {
    const SECRET_WORDS: [&str; 5] = ["token", "key", "secret", "password", "auth"];
    let names_secret = |flag: &str| {
        let flag = flag.to_ascii_lowercase();
        flag.starts_with('-') && SECRET_WORDS.iter().any(|w| flag.contains(w))
    };
    let mut masked = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for arg in args {
        if std::mem::take(&mut hide_next) {
            masked.push("***".to_owned());
            continue;
        }
        if let Some((flag, _)) = arg.split_once('=')
            && names_secret(flag)
        {
            masked.push(format!("{flag}=***"));
            continue;
        }
        if names_secret(arg) {
            hide_next = true;
            masked.push(arg.clone());
            continue;
        }
        masked.push(mask_url_password(arg));
    }
    masked
}

/// `scheme://user:password@host…` with the password masked; other text as it is.
fn mask_url_password(arg: &str) -> String {
    let Some(scheme_end) = arg.find("://") else {
        return arg.to_owned();
    };
    let rest = &arg[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rfind('@') {
        Some(at) => match authority[..at].split_once(':') {
            Some((user, _)) => format!(
                "{}{user}:***{}",
                &arg[..scheme_end + 3],
                &arg[scheme_end + 3 + at..]
            ),
            None => arg.to_owned(),
        },
        None => arg.to_owned(),
    }
}

/// The package an `npx` command runs (`-p`/`--package`, else the first argument
/// that is not a flag) and the arguments after it.
fn npx_package(args: &[String]) -> Option<(&str, &[String])> {
    let mut at = 0;
    while at < args.len() {
        let arg = args[at].as_str();
        match arg {
            "-y" | "--yes" | "-q" | "--quiet" => at += 1,
            "-p" | "--package" => {
                // `npx -p <pkg> <bin> …`: the bin is the package's own here.
                let package = args.get(at + 1)?;
                return Some((package, args.get(at + 3..).unwrap_or_default()));
            }
            _ if arg.starts_with('-') => return None,
            _ => return Some((arg, &args[at + 1..])),
        }
    }
    None
}

/// `@scope/name@1.2.3` → (`@scope/name`, `1.2.3`).
fn split_package(spec: &str) -> (&str, Option<&str>) {
    let search_from = usize::from(spec.starts_with('@'));
    match spec[search_from..].find('@') {
        Some(at) => {
            let at = at + search_from;
            (&spec[..at], Some(&spec[at + 1..]))
        }
        None => (spec, None),
    }
}

/// The file a package's `bin` names for `name` (its only one, or the one named
/// after the package).
fn package_bin<'a>(manifest: &'a Value, name: &str) -> Option<&'a str> {
    match manifest.get("bin")? {
        Value::String(bin) => Some(bin),
        Value::Object(bins) => {
            let short = name.rsplit('/').next().unwrap_or(name);
            bins.get(short)
                .or_else(|| (bins.len() == 1).then(|| bins.values().next()).flatten())
                .and_then(Value::as_str)
        }
        _ => None,
    }
}

fn check_spec(spec: &ServerSpec) -> Result<()> {
    let command = spec.command.trim();
    if command.is_empty() {
        return Err(Error::Invalid("`server.command` must not be empty".into()));
    }
    let strings = std::iter::once(&spec.command)
        .chain(&spec.args)
        .chain(spec.env.keys())
        .chain(spec.env.values());
    let mut size = 0;
    for text in strings {
        if text.contains('\0') {
            return Err(Error::Invalid(
                "the server's command, arguments and environment must not hold NUL".into(),
            ));
        }
        size += text.len();
    }
    if size > MAX_SPEC {
        return Err(Error::Invalid(format!(
            "the server's command, arguments and environment exceed {} KiB",
            MAX_SPEC >> 10
        )));
    }
    if let Some(bad) = spec.env.keys().find(|name| !is_env_name(name)) {
        return Err(Error::Invalid(format!(
            "`{bad}` is not an environment variable name"
        )));
    }
    Ok(())
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_method(method: &str) -> Result<()> {
    if method.is_empty() || method.len() > 200 {
        return Err(Error::Invalid(
            "`method` must be 1 to 200 characters".into(),
        ));
    }
    if method == "initialize" || method.starts_with("notifications/") {
        return Err(Error::Invalid(format!(
            "`{method}` is the runtime's to send: name a request such as tools/list"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn npx_commands_name_their_package() {
        let args = strings(&[
            "-y",
            "@modelcontextprotocol/server-everything@1.0.0",
            "stdio",
        ]);
        let (package, rest) = npx_package(&args).unwrap();
        assert_eq!(package, "@modelcontextprotocol/server-everything@1.0.0");
        assert_eq!(rest, &strings(&["stdio"])[..]);
        let args = strings(&["--package", "pkg", "pkg-bin", "x"]);
        assert_eq!(npx_package(&args).unwrap(), ("pkg", &strings(&["x"])[..]));
        assert!(npx_package(&strings(&["--registry=x", "pkg"])).is_none());
        assert_eq!(
            split_package("@scope/name@1.2.3"),
            ("@scope/name", Some("1.2.3"))
        );
        assert_eq!(split_package("@scope/name"), ("@scope/name", None));
        assert_eq!(split_package("name@latest"), ("name", Some("latest")));
    }

    #[test]
    fn listed_arguments_hide_credentials() {
        let args = strings(&[
            "-y",
            "pkg",
            "--management-token",
            "m1",
            "--api-key=k1",
            "--space-id",
            "s",
            "postgres://me:pw@db:5432/x?sslmode=require",
            "https://example.com/a@b",
        ]);
        assert_eq!(
            masked_args(&args),
            strings(&[
                "-y",
                "pkg",
                "--management-token",
                "***",
                "--api-key=***",
                "--space-id",
                "s",
                "postgres://me:***@db:5432/x?sslmode=require",
                "https://example.com/a@b",
            ])
        );
    }

    #[test]
    fn a_package_bin_is_found() {
        let one = json!({"bin": {"mcp-server-everything": "dist/index.js"}});
        assert_eq!(
            package_bin(&one, "@modelcontextprotocol/server-everything"),
            Some("dist/index.js")
        );
        let named = json!({"bin": {"a": "a.js", "tool": "tool.js"}});
        assert_eq!(package_bin(&named, "tool"), Some("tool.js"));
        assert_eq!(package_bin(&json!({"bin": "cli.js"}), "x"), Some("cli.js"));
        assert_eq!(package_bin(&json!({}), "x"), None);
    }

    #[test]
    fn configurations_and_methods_are_checked() {
        let spec = |command: &str, env: &[(&str, &str)]| ServerSpec {
            command: command.into(),
            args: vec![],
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        assert!(check_spec(&spec("node", &[("TOKEN", "x")])).is_ok());
        assert!(check_spec(&spec(" ", &[])).is_err());
        assert!(check_spec(&spec("node", &[("1X", "x")])).is_err());
        assert!(check_spec(&spec("no\0de", &[])).is_err());
        assert!(check_method("tools/list").is_ok());
        assert!(check_method("initialize").is_err());
        assert!(check_method("notifications/initialized").is_err());
    }
}
