//! The server's side of the zygotes: one warm process per workspace, started on demand,
//! replaced when it goes stale, and the one place runs are handed to them.
//!
//! `Pool::run` finds (or starts) the workspace's `Zygote`, sends it the run, waits for
//! the run's pid (`Event::Started`) and then for its exit or its timeout, killing the run
//! on timeout and when the request is dropped. A zygote is replaced transparently when it
//! has crashed (a run that could not start on it is retried once on a fresh one), after
//! `MAX_RUNS` runs, when the workspace's venv changed (`retire`, after an install), when
//! idle for `IDLE` (`sweep`), and in the background when runs import modules it has not
//! pre-imported (`learn`: the workspace's recent imports, bounded by `MAX_LEARNED`).
//! The zygote process itself is `zygote`; how one is launched is `Launcher`.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{Mutex as AsyncMutex, oneshot};

use crate::isolation::Plan;
use crate::sandbox::{HomeRecipe, ZygoteHome, make_home};
use crate::venvs::Venv;
use crate::zygote::{self, Event, SandboxSetup, Setup};

/// Runs a zygote serves before it is replaced.
pub const MAX_RUNS: u32 = 500;
/// A zygote unused this long is stopped.
pub const IDLE: Duration = Duration::from_secs(600);
/// Modules remembered per workspace for pre-importing.
pub const MAX_LEARNED: usize = 32;
/// How long a zygote may take to start (pre-imports included).
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long to wait for a killed run's exit to be reported.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// How zygote processes are started: this binary with `__zygote`, or — when the server is
/// hosted by a Python process (the wheel) — that interpreter calling
/// `weir_runtime._weir_runtime.zygote()`.
#[derive(Debug, Clone)]
pub struct Launcher {
    program: PathBuf,
    args: Vec<String>,
}

impl Launcher {
    /// `host_python` is `sys.executable` of the process hosting the server.
    pub fn detect(host_python: &str) -> io::Result<Self> {
        let exe = std::env::current_exe()?;
        let is_binary = exe
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("weir-pyruntime"));
        Ok(if is_binary {
            Self {
                program: exe,
                args: vec![zygote::ARG.to_owned()],
            }
        } else {
            Self {
                program: PathBuf::from(host_python),
                args: vec![
                    "-I".to_owned(),
                    "-c".to_owned(),
                    "import sys; from weir_runtime._weir_runtime import zygote; sys.exit(zygote())"
                        .to_owned(),
                ],
            }
        })
    }
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// The run's cgroup directories (the caller empties and removes them).
    pub cgroups: Vec<PathBuf>,
}

type Waiters = Mutex<HashMap<u64, Waiter>>;

type StartedTx = oneshot::Sender<Result<(i32, Vec<PathBuf>), String>>;

struct Waiter {
    started: Option<StartedTx>,
    exited: Option<oneshot::Sender<(Option<i32>, Option<i32>)>>,
}

/// One running zygote process.
pub struct Zygote {
    stdin: AsyncMutex<ChildStdin>,
    waiters: Arc<Waiters>,
    /// Cleared by the reader task when the process is gone.
    alive: Arc<AtomicBool>,
    next_id: AtomicU64,
    runs: AtomicU32,
    last_used: Mutex<Instant>,
    /// What the pool asked it to pre-import, and what it managed to.
    requested: Vec<String>,
    pub preloaded: Vec<String>,
    pub pid: u32,
    /// Held so that dropping the last handle kills the process.
    _child: Child,
    /// Its view's directory and delegated cgroups, removed after the process is killed.
    _home: Option<ZygoteHome>,
}

/// A started run: kill it with `pid`, wait with `exited`.
struct Started {
    pid: i32,
    cgroups: Vec<PathBuf>,
    exited: oneshot::Receiver<(Option<i32>, Option<i32>)>,
    /// Keeps the zygote process alive until the run is over, even once the pool has
    /// replaced it (dropping the last handle kills the process, and its runs with it).
    _zygote: Arc<Zygote>,
}

enum StartError {
    /// The zygote is gone: try a fresh one.
    Dead,
    Failed(String),
}

impl Zygote {
    /// Starts a zygote with `env` and `setup`, and waits until it is ready.
    pub async fn start(
        launcher: &Launcher,
        env: Vec<(String, String)>,
        setup: &Setup,
        home: Option<ZygoteHome>,
    ) -> io::Result<Self> {
        let mut child = Command::new(&launcher.program)
            .args(&launcher.args)
            .env_clear()
            .envs(env)
            .current_dir("/")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("no stdout"))?;
        let mut line = serde_json::to_vec(setup).map_err(io::Error::other)?;
        line.push(b'\n');
        stdin.write_all(&line).await?;
        let mut lines = BufReader::new(stdout).lines();
        if setup.view.is_some() {
            // The zygote enters its own user namespace first; its maps are written here.
            let line = tokio::time::timeout(START_TIMEOUT, lines.next_line())
                .await
                .map_err(|_| io::Error::other("the zygote did not start in time"))??
                .ok_or_else(|| {
                    io::Error::other("the zygote exited while starting (see the log)")
                })?;
            let mapped = match serde_json::from_str::<Event>(&line) {
                Ok(Event::Unshared { ok: true }) => {
                    let pid = child
                        .id()
                        .ok_or_else(|| io::Error::other("the zygote is gone"))?;
                    let ids = setup.sandbox.ids;
                    tokio::task::spawn_blocking(move || {
                        crate::isolation::namespaces::write_id_maps(
                            nix::unistd::Pid::from_raw(pid as i32),
                            &ids,
                        )
                    })
                    .await
                    .map_err(io::Error::other)?
                    .map_err(io::Error::other)?;
                    true
                }
                Ok(Event::Unshared { ok: false }) => false,
                _ => {
                    return Err(io::Error::other(format!("unexpected zygote line: {line}")));
                }
            };
            if mapped {
                let mut answer = serde_json::to_vec(&zygote::Command::Mapped { ok: true })
                    .map_err(io::Error::other)?;
                answer.push(b'\n');
                stdin.write_all(&answer).await?;
            }
        }
        let first = tokio::time::timeout(START_TIMEOUT, lines.next_line())
            .await
            .map_err(|_| io::Error::other("the zygote did not become ready in time"))??
            .ok_or_else(|| io::Error::other("the zygote exited while starting (see the log)"))?;
        let Ok(Event::Ready { pid, preloaded }) = serde_json::from_str(&first) else {
            return Err(io::Error::other(format!(
                "unexpected first zygote line: {first}"
            )));
        };
        let waiters: Arc<Waiters> = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        tokio::spawn(read_events(lines, waiters.clone(), alive.clone()));
        Ok(Self {
            stdin: AsyncMutex::new(stdin),
            waiters,
            alive,
            next_id: AtomicU64::new(1),
            runs: AtomicU32::new(0),
            last_used: Mutex::new(Instant::now()),
            requested: setup.preload.clone(),
            preloaded,
            pid,
            _child: child,
            _home: home,
        })
    }

    fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    async fn send(&self, command: &zygote::Command) -> io::Result<()> {
        let mut line = serde_json::to_vec(command).map_err(io::Error::other)?;
        line.push(b'\n');
        self.stdin.lock().await.write_all(&line).await
    }

    async fn start_run(self: &Arc<Self>, plan: Plan, spec: Value) -> Result<Started, StartError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (started_tx, started_rx) = oneshot::channel();
        let (exited_tx, exited_rx) = oneshot::channel();
        lock(&self.waiters).insert(
            id,
            Waiter {
                started: Some(started_tx),
                exited: Some(exited_tx),
            },
        );
        *lock(&self.last_used) = Instant::now();
        self.runs.fetch_add(1, Ordering::Relaxed);
        if self
            .send(&zygote::Command::Run { id, plan, spec })
            .await
            .is_err()
        {
            lock(&self.waiters).remove(&id);
            return Err(StartError::Dead);
        }
        match started_rx.await {
            Ok(Ok((pid, cgroups))) => Ok(Started {
                pid,
                cgroups,
                exited: exited_rx,
                _zygote: self.clone(),
            }),
            Ok(Err(message)) => Err(StartError::Failed(message)),
            Err(_) => Err(StartError::Dead),
        }
    }

    /// Asks the zygote to exit once its runs are over.
    async fn drain(&self) {
        // A zygote that is already gone needs no draining.
        let _ = self.send(&zygote::Command::Drain).await;
    }
}

/// Dispatches a zygote's events to the waiting runs; at EOF, fails them all.
async fn read_events(
    mut lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    waiters: Arc<Waiters>,
    alive: Arc<AtomicBool>,
) {
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(event) = serde_json::from_str::<Event>(&line) else {
            tracing::warn!(%line, "unexpected line from a zygote");
            continue;
        };
        let mut waiters = lock(&waiters);
        match event {
            Event::Started { id, pid, cgroups } => {
                if let Some(tx) = waiters.get_mut(&id).and_then(|w| w.started.take()) {
                    let _ = tx.send(Ok((pid, cgroups)));
                }
            }
            Event::Failed { id, message } => {
                if let Some(mut waiter) = waiters.remove(&id)
                    && let Some(tx) = waiter.started.take()
                {
                    let _ = tx.send(Err(message));
                }
            }
            Event::Exited { id, code, signal } => {
                if let Some(mut waiter) = waiters.remove(&id)
                    && let Some(tx) = waiter.exited.take()
                {
                    let _ = tx.send((code, signal));
                }
            }
            Event::Ready { .. } | Event::Unshared { .. } => {}
        }
    }
    alive.store(false, Ordering::Release);
    // Dropping the senders tells every waiting run that its zygote is gone.
    lock(&waiters).clear();
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Kills a run's process when dropped (timeout, cancelled request) unless disarmed.
struct KillOnDrop(Option<i32>);

impl KillOnDrop {
    fn kill(&self) {
        if let Some(pid) = self.0 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits for a started run's exit, killing it at `timeout` (and when dropped).
async fn wait(started: Started, timeout: Duration) -> io::Result<Exit> {
    let guard = KillOnDrop(Some(started.pid));
    // Removed (after killing what is left in them) even when the zygote dies mid-run.
    let cgroups = crate::isolation::cgroups::RunCgroup::adopt(started.cgroups);
    let mut exited = started.exited;
    let (status, timed_out) = match tokio::time::timeout(timeout, &mut exited).await {
        Ok(status) => (status, false),
        Err(_) => {
            guard.kill();
            let status = tokio::time::timeout(KILL_GRACE, exited)
                .await
                .unwrap_or(Ok((None, Some(libc::SIGKILL))));
            (status, true)
        }
    };
    let (code, signal) = match status {
        Ok(status) => status,
        Err(_) => {
            cgroups.kill_all();
            tokio::task::spawn_blocking(move || drop(cgroups));
            return Err(io::Error::other(
                "the workspace's zygote crashed during the run",
            ));
        }
    };
    // The run has exited: its pid may be reused, so it must not be signalled again.
    let mut guard = guard;
    guard.0 = None;
    Ok(Exit {
        code,
        signal,
        timed_out,
        cgroups: cgroups.into_dirs(),
    })
}

/// What a workspace's zygote is built from.
pub struct ZygoteSpec<'a> {
    pub workspace: &'a str,
    pub venv: &'a Venv,
    pub env: Vec<(String, String)>,
    pub sandbox: SandboxSetup,
    /// Its own view and delegated cgroups (`sandbox::make_home`).
    pub home: HomeRecipe,
}

/// The zygotes of all workspaces.
pub struct Pool {
    launcher: Launcher,
    zygotes: Mutex<HashMap<String, Arc<Zygote>>>,
    /// One start at a time per workspace.
    starting: Mutex<HashMap<String, Arc<AsyncMutex<()>>>>,
    /// Recent imports per workspace, most recent first.
    learned: Mutex<HashMap<String, Vec<String>>>,
    /// Workspaces whose replacement zygote is being started in the background.
    refreshing: Mutex<std::collections::HashSet<String>>,
    /// Workspaces whose warmer zygote failed to start: no more attempts until their
    /// zygote is replaced for another reason.
    frozen: Mutex<std::collections::HashSet<String>>,
}

impl Pool {
    pub fn new(launcher: Launcher) -> Self {
        Self {
            launcher,
            zygotes: Mutex::default(),
            starting: Mutex::default(),
            learned: Mutex::default(),
            refreshing: Mutex::default(),
            frozen: Mutex::default(),
        }
    }

    pub fn launcher(&self) -> &Launcher {
        &self.launcher
    }

    /// Number of zygotes running.
    pub fn len(&self) -> usize {
        lock(&self.zygotes).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `plan` in the workspace's zygote and waits for it, at most `timeout` once it
    /// has started.
    pub async fn run(
        self: &Arc<Self>,
        spec: &ZygoteSpec<'_>,
        plan: Plan,
        run: Value,
        timeout: Duration,
    ) -> io::Result<Exit> {
        let mut attempts = 0;
        let started = loop {
            attempts += 1;
            let zygote = self.zygote(spec).await?;
            match zygote.start_run(plan.clone(), run.clone()).await {
                Ok(started) => {
                    if zygote.runs.load(Ordering::Relaxed) >= MAX_RUNS {
                        self.retire_if(spec.workspace, &zygote).await;
                    }
                    break started;
                }
                Err(StartError::Dead) if attempts < 2 => {
                    tracing::warn!(
                        workspace = spec.workspace,
                        pid = zygote.pid,
                        "zygote gone: starting a new one"
                    );
                    self.retire_if(spec.workspace, &zygote).await;
                }
                Err(StartError::Dead) => {
                    return Err(io::Error::other("the workspace's zygote keeps dying"));
                }
                Err(StartError::Failed(message)) => return Err(io::Error::other(message)),
            }
        };
        wait(started, timeout).await
    }

    /// Runs `plan` on `zygote` (not one of the pool's: the start-up probe's).
    pub async fn run_on(
        zygote: Arc<Zygote>,
        plan: Plan,
        run: Value,
        timeout: Duration,
    ) -> io::Result<Exit> {
        match zygote.start_run(plan, run).await {
            Ok(started) => wait(started, timeout).await,
            Err(StartError::Dead) => Err(io::Error::other("the zygote exited")),
            Err(StartError::Failed(message)) => Err(io::Error::other(message)),
        }
    }

    /// The workspace's live zygote, started if needed.
    async fn zygote(self: &Arc<Self>, spec: &ZygoteSpec<'_>) -> io::Result<Arc<Zygote>> {
        if let Some(zygote) = self.live(spec.workspace) {
            return Ok(zygote);
        }
        let gate = lock(&self.starting)
            .entry(spec.workspace.to_owned())
            .or_default()
            .clone();
        let _gate = gate.lock().await;
        if let Some(zygote) = self.live(spec.workspace) {
            return Ok(zygote);
        }
        let zygote = match self.spawn(spec).await {
            Ok(zygote) => zygote,
            Err(err) if lock(&self.learned).contains_key(spec.workspace) => {
                // A pre-import can break a zygote (a module that starts a thread makes
                // forking unsafe): start a cold one and learn again from scratch.
                tracing::warn!(workspace = spec.workspace, %err, "zygote failed with pre-imports; starting a cold one");
                lock(&self.learned).remove(spec.workspace);
                self.spawn(spec).await?
            }
            Err(err) => return Err(err),
        };
        lock(&self.frozen).remove(spec.workspace);
        let zygote = Arc::new(zygote);
        lock(&self.zygotes).insert(spec.workspace.to_owned(), zygote.clone());
        Ok(zygote)
    }

    fn live(&self, workspace: &str) -> Option<Arc<Zygote>> {
        lock(&self.zygotes)
            .get(workspace)
            .filter(|z| z.alive())
            .cloned()
    }

    async fn spawn(&self, spec: &ZygoteSpec<'_>) -> io::Result<Zygote> {
        let preload = lock(&self.learned)
            .get(spec.workspace)
            .cloned()
            .unwrap_or_default();
        let recipe = spec.home.clone();
        let home = tokio::task::spawn_blocking(move || make_home(&recipe))
            .await
            .map_err(io::Error::other)??;
        let mut sandbox = spec.sandbox.clone();
        sandbox.cgroups = home.cgroups.clone();
        let setup = Setup {
            site_packages: Some(spec.venv.site_packages.clone()),
            venv_dir: Some(spec.venv.dir.clone()),
            executable: Some(spec.venv.python.clone()),
            preload,
            sandbox,
            view: home.view.clone(),
        };
        let started = Instant::now();
        let zygote = Zygote::start(&self.launcher, spec.env.clone(), &setup, Some(home)).await?;
        tracing::info!(
            workspace = spec.workspace,
            pid = zygote.pid,
            preloaded = ?zygote.preloaded,
            ms = started.elapsed().as_millis() as u64,
            "zygote ready"
        );
        Ok(zygote)
    }

    /// Retires the workspace's zygote (its venv changed): the next run starts a new one.
    pub async fn retire(&self, workspace: &str) {
        let old = lock(&self.zygotes).remove(workspace);
        if let Some(old) = old {
            old.drain().await;
        }
    }

    async fn retire_if(&self, workspace: &str, zygote: &Arc<Zygote>) {
        let removed = {
            let mut zygotes = lock(&self.zygotes);
            match zygotes.get(workspace) {
                Some(current) if Arc::ptr_eq(current, zygote) => zygotes.remove(workspace),
                _ => None,
            }
        };
        if let Some(old) = removed {
            old.drain().await;
        }
    }

    /// Records what a successful run imported; when the zygote did not pre-import all of
    /// it, a replacement that does is started in the background and swapped in.
    pub fn learn(self: &Arc<Self>, spec: ZygoteSpec<'_>, imports: &[String]) {
        if imports.is_empty() {
            return;
        }
        let preload = {
            let mut learned = lock(&self.learned);
            let list = learned.entry(spec.workspace.to_owned()).or_default();
            for name in imports.iter().rev() {
                list.retain(|n| n != name);
                list.insert(0, name.clone());
            }
            list.truncate(MAX_LEARNED);
            list.clone()
        };
        let Some(current) = self.live(spec.workspace) else {
            return;
        };
        let mut wanted = preload.clone();
        wanted.sort();
        let mut asked = current.requested.clone();
        asked.sort();
        if wanted == asked
            || lock(&self.frozen).contains(spec.workspace)
            || !lock(&self.refreshing).insert(spec.workspace.to_owned())
        {
            return;
        }
        let pool = self.clone();
        let workspace = spec.workspace.to_owned();
        let venv = spec.venv.clone();
        let env = spec.env;
        let sandbox = spec.sandbox;
        let home = spec.home;
        tokio::spawn(async move {
            let spec = ZygoteSpec {
                workspace: &workspace,
                venv: &venv,
                env,
                sandbox,
                home,
            };
            match pool.spawn(&spec).await {
                Ok(fresh) => {
                    let old = lock(&pool.zygotes).insert(workspace.clone(), Arc::new(fresh));
                    if let Some(old) = old {
                        old.drain().await;
                    }
                }
                Err(err) => {
                    tracing::warn!(workspace, %err, "cannot start a warmer zygote");
                    // Stop asking for one: the learned list is what this zygote has, and
                    // runs importing the troublesome module stay cold.
                    lock(&pool.learned).insert(workspace.clone(), current.requested.clone());
                    lock(&pool.frozen).insert(workspace.clone());
                }
            }
            lock(&pool.refreshing).remove(&workspace);
        });
    }

    /// Stops zygotes idle for longer than `IDLE`. Called periodically.
    pub async fn sweep(&self) {
        let idle: Vec<(String, Arc<Zygote>)> = lock(&self.zygotes)
            .iter()
            .filter(|(_, z)| !z.alive() || lock(&z.last_used).elapsed() > IDLE)
            .map(|(w, z)| (w.clone(), z.clone()))
            .collect();
        for (workspace, zygote) in idle {
            self.retire_if(&workspace, &zygote).await;
        }
    }
}
