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
//! The zygote process itself is `zygote`; how one is launched is `launcher`; every
//! message between them is `protocol`.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::lock;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, Command};
use tokio::sync::{Mutex as AsyncMutex, mpsc, oneshot};

use crate::isolation::network::Connection;
use crate::isolation::{Layer, Plan};
use crate::process::home::{HomeRecipe, ZygoteHome, make_home};
use crate::process::launcher::Launcher;
use crate::process::protocol::{
    self, Awaiting, Command as ZygoteCommand, Event, EventLines, RunEvent, SandboxSetup, Setup,
    encode, excerpt,
};
use crate::storage::venvs::Venv;

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

/// How a run ended.
#[derive(Debug)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// The run's processes, held stopped by the zygote until this is dropped.
    pub held: Held,
}

/// A finished run whose processes the zygote keeps, stopped, until the server has read
/// what it left (outputs, artifacts): dropping this asks the zygote to tear them down,
/// so that the teardown of a large process does not delay the answer.
pub struct Held {
    _teardown: KillOnDrop,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Held")
    }
}

type Waiters = Mutex<HashMap<u64, Waiter>>;

type StartedTx = oneshot::Sender<Result<(), String>>;

struct Waiter {
    started: Option<StartedTx>,
    exited: Option<oneshot::Sender<(Option<i32>, Option<i32>)>>,
}

/// One running zygote process.
pub struct Zygote {
    /// Lines for its stdin, written in order by a task of their own (so that a dropped
    /// request can ask for its run's end without awaiting).
    commands: mpsc::UnboundedSender<Vec<u8>>,
    waiters: Arc<Waiters>,
    /// Cleared by the reader task when the process is gone or retired.
    alive: Arc<AtomicBool>,
    next_id: AtomicU64,
    runs: AtomicU32,
    last_used: Mutex<Instant>,
    /// What the pool asked it to pre-import, and what it managed to.
    requested: Vec<String>,
    pub preloaded: Vec<String>,
    /// How the zygote says it confined itself (believed only for the start-up probe's
    /// zygote, which runs nothing of a workspace).
    pub confinement: Layer,
    /// The server's own child (the keeper of the zygote's namespaces): the only pid the
    /// server ever signals.
    pub pid: u32,
    /// Killed when dropped, or at once when the zygote breaks the protocol.
    process: Arc<Mutex<Child>>,
    /// With `public`: its pasta, killed with it.
    _egress: Option<Connection>,
    /// Its view's directory and cgroups, killed and removed after the process.
    _home: Option<ZygoteHome>,
}

/// A started run: wait with `exited`; kill it by asking its zygote.
struct Started {
    exited: oneshot::Receiver<(Option<i32>, Option<i32>)>,
    /// Asks for the run's end when dropped; its handle keeps the zygote process alive
    /// until the run is over, even once the pool has replaced it (dropping the last
    /// handle kills the process, and its runs with it).
    guard: KillOnDrop,
}

enum StartError {
    /// The zygote is gone: try a fresh one.
    Dead,
    Failed(String),
}

/// How long a zygote may take to say that a run started.
const START_RUN_TIMEOUT: Duration = Duration::from_secs(30);

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
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("the zygote is gone"))?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("no stdout"))?;
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(log_stderr(stderr, pid));
        }
        stdin.write_all(&encode(setup)?).await?;
        let mut lines = EventLines::new(stdout);
        let mut connection = None;
        if setup.view.is_some() {
            // The zygote enters its own namespaces first; its maps are written, and it is
            // put in its cgroups, here, before it goes on.
            let line = tokio::time::timeout(START_TIMEOUT, lines.next())
                .await
                .map_err(|_| io::Error::other("the zygote did not start in time"))??
                .ok_or_else(|| {
                    io::Error::other("the zygote exited while starting (see the log)")
                })?;
            match serde_json::from_str::<Event>(&line) {
                Ok(Event::Unshared { ok: true }) => {
                    let ids = setup.sandbox.ids;
                    let leaves = home.as_ref().map(|h| h.leaves.clone()).unwrap_or_default();
                    let egress = home.as_ref().and_then(|h| h.egress.clone());
                    tokio::task::spawn_blocking(move || {
                        crate::isolation::cgroups::place(pid, &leaves)
                            .map_err(|err| format!("the zygote's cgroup: {err}"))?;
                        crate::isolation::namespaces::write_id_maps(
                            nix::unistd::Pid::from_raw(pid as i32),
                            &ids,
                        )
                    })
                    .await
                    .map_err(io::Error::other)?
                    .map_err(io::Error::other)?;
                    if let Some(egress) = egress {
                        connection = Some(egress.attach(pid).await.map_err(io::Error::other)?);
                    }
                    stdin
                        .write_all(&encode(&ZygoteCommand::Mapped { ok: true })?)
                        .await?;
                }
                Ok(Event::Unshared { ok: false }) => {
                    return Err(io::Error::other(
                        "the zygote could not enter its namespaces (see the log)",
                    ));
                }
                _ => {
                    return Err(io::Error::other(format!(
                        "unexpected zygote line: {}",
                        excerpt(&line)
                    )));
                }
            }
        }
        let first = tokio::time::timeout(START_TIMEOUT, lines.next())
            .await
            .map_err(|_| io::Error::other("the zygote did not become ready in time"))??
            .ok_or_else(|| io::Error::other("the zygote exited while starting (see the log)"))?;
        let Ok(Event::Ready {
            preloaded,
            confinement,
        }) = serde_json::from_str(&first)
        else {
            return Err(io::Error::other(format!(
                "unexpected first zygote line: {}",
                excerpt(&first)
            )));
        };
        let waiters: Arc<Waiters> = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let process = Arc::new(Mutex::new(child));
        let (commands, queue) = mpsc::unbounded_channel();
        tokio::spawn(write_commands(stdin, queue));
        tokio::spawn(read_events(
            lines,
            waiters.clone(),
            alive.clone(),
            process.clone(),
            pid,
        ));
        Ok(Self {
            commands,
            waiters,
            alive,
            next_id: AtomicU64::new(1),
            runs: AtomicU32::new(0),
            last_used: Mutex::new(Instant::now()),
            requested: setup.preload.clone(),
            preloaded,
            confinement,
            pid,
            process,
            _egress: connection,
            _home: home,
        })
    }

    fn alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Queues `command` for the zygote; `false` when it is gone.
    fn send(&self, command: &ZygoteCommand) -> bool {
        encode(command).is_ok_and(|line| self.commands.send(line).is_ok())
    }

    /// Kills the zygote and everything it started (its pid namespace and cgroups go
    /// with it), and fails its waiting runs.
    fn retire_now(&self, why: &str) {
        tracing::warn!(pid = self.pid, why, "zygote killed");
        kill(&self.process, &self.alive);
    }

    async fn start_run(self: &Arc<Self>, plan: Plan, spec: Value) -> Result<Started, StartError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (started_tx, started_rx) = oneshot::channel();
        let (exited_tx, exited_rx) = oneshot::channel();
        {
            let mut waiters = lock(&self.waiters);
            // Under the lock the reader clears them with: no waiter is left behind.
            if !self.alive() {
                return Err(StartError::Dead);
            }
            waiters.insert(
                id,
                Waiter {
                    started: Some(started_tx),
                    exited: Some(exited_tx),
                },
            );
        }
        *lock(&self.last_used) = Instant::now();
        self.runs.fetch_add(1, Ordering::Relaxed);
        if !self.send(&ZygoteCommand::Run { id, plan, spec }) {
            lock(&self.waiters).remove(&id);
            return Err(StartError::Dead);
        }
        // From here a dropped request asks for the run's end (sent after the run).
        let mut guard = KillOnDrop {
            run: Some((self.clone(), id)),
        };
        let outcome = match tokio::time::timeout(START_RUN_TIMEOUT, started_rx).await {
            Ok(Ok(Ok(()))) => {
                return Ok(Started {
                    exited: exited_rx,
                    guard,
                });
            }
            Ok(Ok(Err(message))) => Err(StartError::Failed(message)),
            Ok(Err(_)) => Err(StartError::Dead),
            Err(_) => {
                self.retire_now("a run did not start in time");
                Err(StartError::Failed(
                    "the workspace's zygote did not start the run in time".to_owned(),
                ))
            }
        };
        guard.run = None;
        outcome
    }

    /// Asks the zygote to exit once its runs are over.
    fn drain(&self) {
        // A zygote that is already gone needs no draining.
        self.send(&ZygoteCommand::Drain);
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        // The reader task holds the process too: the last handle kills it here (its pid
        // namespace, and with it everything it started, goes with it).
        kill(&self.process, &self.alive);
    }
}

/// SIGKILL to the server's own child (never reaped before this, so its pid is its own).
fn kill(process: &Mutex<Child>, alive: &AtomicBool) {
    alive.store(false, Ordering::Release);
    let _ = lock(process).start_kill();
}

/// Lines of a zygote's stderr logged per second; the rest are counted and dropped.
const STDERR_LINES_PER_SECOND: u32 = 20;

/// Passes a zygote's stderr to the log, never trusting it: each line cut short and
/// escaped, marked with the zygote's pid, and at most `STDERR_LINES_PER_SECOND` a second
/// (its own pipe: it cannot touch the server's stderr, nor block it).
async fn log_stderr(stderr: ChildStderr, pid: u32) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    let mut window = Instant::now();
    let (mut logged, mut dropped) = (0u32, 0u64);
    loop {
        line.clear();
        match (&mut reader).take(4096).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if window.elapsed() >= Duration::from_secs(1) {
            if dropped > 0 {
                tracing::warn!(pid, dropped, "zygote stderr: lines dropped");
            }
            (window, logged, dropped) = (Instant::now(), 0, 0);
        }
        logged += 1;
        if logged > STDERR_LINES_PER_SECOND {
            dropped += 1;
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        tracing::warn!(pid, line = %excerpt(text.trim_end()), "zygote stderr");
    }
}

/// Writes queued commands to a zygote's stdin until the zygote or the last handle is
/// gone (then stdin closes, and the zygote kills its runs and exits).
async fn write_commands(mut stdin: ChildStdin, mut queue: mpsc::UnboundedReceiver<Vec<u8>>) {
    while let Some(line) = queue.recv().await {
        if stdin.write_all(&line).await.is_err() {
            return;
        }
    }
}

/// Dispatches a zygote's events to the waiting runs. A line that is malformed, too long,
/// or out of turn (a run the server never started, or started twice) retires the
/// zygote: it is killed, and its runs fail. At EOF, fails them all.
async fn read_events(
    mut lines: EventLines,
    waiters: Arc<Waiters>,
    alive: Arc<AtomicBool>,
    process: Arc<Mutex<Child>>,
    pid: u32,
) {
    loop {
        let line = match lines.next().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(err) => {
                tracing::warn!(pid, %err, "zygote retired: it broke the protocol");
                kill(&process, &alive);
                break;
            }
        };
        if let Err(why) = dispatch(&line, &mut lock(&waiters)) {
            tracing::warn!(pid, line = %excerpt(&line), why, "zygote retired: it broke the protocol");
            kill(&process, &alive);
            break;
        }
    }
    // Dropping the senders tells every waiting run that its zygote is gone; `start_run`
    // checks `alive` under the same lock.
    let mut waiters = lock(&waiters);
    alive.store(false, Ordering::Release);
    waiters.clear();
}

/// Applies one event line to the waiting runs, or says why it is not believed.
fn dispatch(line: &str, waiters: &mut HashMap<u64, Waiter>) -> Result<(), &'static str> {
    let awaiting = |id| {
        waiters.get(&id).map(|w| match w.started {
            Some(_) => Awaiting::Start,
            None => Awaiting::Exit,
        })
    };
    match protocol::believe(line, awaiting)? {
        RunEvent::Started { id } => {
            if let Some(tx) = waiters.get_mut(&id).and_then(|w| w.started.take()) {
                let _ = tx.send(Ok(()));
            }
        }
        RunEvent::Failed { id, message } => {
            if let Some(tx) = waiters.remove(&id).and_then(|w| w.started) {
                let _ = tx.send(Err(message));
            }
        }
        RunEvent::Exited { id, code, signal } => {
            if let Some(tx) = waiters.remove(&id).and_then(|mut w| w.exited.take()) {
                let _ = tx.send((code, signal));
            }
        }
    }
    Ok(())
}

/// Asks the zygote to kill a run when dropped (timeout, cancelled request) unless the
/// run is over.
struct KillOnDrop {
    run: Option<(Arc<Zygote>, u64)>,
}

impl KillOnDrop {
    fn kill(&self) {
        if let Some((zygote, id)) = &self.run {
            zygote.send(&ZygoteCommand::Kill { id: *id });
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits for a started run's exit, killing it at `timeout` (and when dropped): the
/// zygote is asked to, and killed itself when it has not within `KILL_GRACE`.
async fn wait(started: Started, timeout: Duration) -> io::Result<Exit> {
    let Started { mut exited, guard } = started;
    let (status, timed_out) = match tokio::time::timeout(timeout, &mut exited).await {
        Ok(status) => (status, false),
        Err(_) => {
            guard.kill();
            match tokio::time::timeout(KILL_GRACE, exited).await {
                Ok(status) => (status, true),
                Err(_) => {
                    if let Some((zygote, _)) = &guard.run {
                        zygote.retire_now("a run outlived its timeout");
                    }
                    (Ok((None, Some(libc::SIGKILL))), true)
                }
            }
        }
    };
    let (code, signal) = match status {
        Ok(status) => status,
        Err(_) => {
            return Err(io::Error::other(
                "the workspace's zygote crashed during the run",
            ));
        }
    };
    Ok(Exit {
        code,
        signal,
        timed_out,
        held: Held { _teardown: guard },
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
    pub async fn run<'a>(
        self: &Arc<Self>,
        workspace: &str,
        spec: impl Fn() -> ZygoteSpec<'a>,
        plan: Plan,
        run: Value,
        timeout: Duration,
    ) -> io::Result<Exit> {
        let mut attempts = 0;
        let started = loop {
            attempts += 1;
            let zygote = self.zygote(workspace, &spec).await?;
            match zygote.start_run(plan.clone(), run.clone()).await {
                Ok(started) => {
                    if zygote.runs.load(Ordering::Relaxed) >= MAX_RUNS {
                        self.retire_if(workspace, &zygote).await;
                    }
                    break started;
                }
                Err(StartError::Dead) if attempts < 2 => {
                    tracing::warn!(
                        workspace,
                        pid = zygote.pid,
                        "zygote gone: starting a new one"
                    );
                    self.retire_if(workspace, &zygote).await;
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

    /// The workspace's live zygote, started (from `spec`, only then built) if needed.
    async fn zygote<'a>(
        self: &Arc<Self>,
        workspace: &str,
        spec: &impl Fn() -> ZygoteSpec<'a>,
    ) -> io::Result<Arc<Zygote>> {
        if let Some(zygote) = self.live(workspace) {
            return Ok(zygote);
        }
        let gate = lock(&self.starting)
            .entry(workspace.to_owned())
            .or_default()
            .clone();
        let _gate = gate.lock().await;
        if let Some(zygote) = self.live(workspace) {
            return Ok(zygote);
        }
        let spec = spec();
        let spec = &spec;
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
        if home.view.is_none() {
            // Runs' views are built ahead only inside a zygote's own view.
            sandbox.view = None;
        }
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
            old.drain();
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
            old.drain();
        }
    }

    /// Records what a successful run imported; when the zygote did not pre-import all of
    /// it, a replacement that does (from `spec`, only then built) is started in the
    /// background and swapped in.
    pub fn learn<'a>(
        self: &Arc<Self>,
        workspace: &str,
        imports: &[String],
        spec: impl FnOnce() -> ZygoteSpec<'a>,
    ) {
        if imports.is_empty() {
            return;
        }
        let preload = {
            let mut learned = lock(&self.learned);
            let list = learned.entry(workspace.to_owned()).or_default();
            for name in imports.iter().rev() {
                list.retain(|n| n != name);
                list.insert(0, name.clone());
            }
            list.truncate(MAX_LEARNED);
            list.clone()
        };
        let Some(current) = self.live(workspace) else {
            return;
        };
        let mut wanted = preload.clone();
        wanted.sort();
        let mut asked = current.requested.clone();
        asked.sort();
        if wanted == asked
            || lock(&self.frozen).contains(workspace)
            || !lock(&self.refreshing).insert(workspace.to_owned())
        {
            return;
        }
        let spec = spec();
        let pool = self.clone();
        let workspace = workspace.to_owned();
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
                        old.drain();
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
