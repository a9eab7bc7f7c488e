//! The zygote: one warm interpreter per workspace that forks a confined child per run.
//!
//! A zygote is this crate's code in a process of its own (`weir-pyruntime __zygote`, or
//! the wheel's interpreter calling `_weir_runtime.zygote()`), started by `pool` with a
//! scrubbed environment that holds no secrets. `serve` reads one `Setup` line; as root's
//! zygote it first enters a user and mount namespace of its own (`confine_zygote`: the
//! server writes its id maps, the zygote pivots into its read-only view and becomes root
//! of that namespace only), then prepares the embedded CPython (`harness.prepare`: the
//! workspace's venv on the path, BLAS and OpenMP pools at one thread through the
//! environment, the workspace's usual modules pre-imported), answers `Event::Ready`, and
//! serves `Command`s on stdin, events on stdout, one JSON object per line. It stays
//! single-threaded, and asserts it before each fork (`/proc/self/task` has one entry).
//!
//! A run is three processes, forked through CPython's `os.fork` (which wraps them in
//! `PyOS_BeforeFork`/`PyOS_AfterFork_*`), all made ahead, as `SPARES` next runs'
//! `Spare`s, so that a run finds them waiting: the intermediate child joins the run's
//! cgroups and unshares its namespaces on its own while the zygote goes on serving
//! (`begin_spare`); when it says so, the zygote writes its id maps (`finish_spare`), and
//! it forks pid 1 of the new pid namespace, which builds the view ahead
//! (`mounts::prepare_view`, with the setup's template), forks the runner (pid 1 ignores
//! its own signals, so tool code must not be pid 1), confines itself for good (the run's
//! ids, no file access, seccomp) and reaps. The runner waits for the plan. A run sends it
//! the plan; it points stdout, stderr and the report (fd 3) at the run's files, finishes
//! the view, drops to the run's ids, applies rlimits, Landlock and seccomp, runs the tool
//! code (`harness.child_main`), stops whatever the code left running and says it is done
//! on a status pipe once its report is written, then stops itself. The intermediate
//! passes that word to the zygote (`report_end`: the zygote reports `Event::Exited` at
//! once); a run that left no word is reported from the intermediate's exit. A finished
//! run's processes are held, stopped, until the server has read what the run left and
//! sends `Command::Kill` (or `HELD_AT_MOST`): tearing down three copies of the
//! interpreter would otherwise take the processor the answer needs. Spares are made
//! again once no run is left running (while runs go on, one per run, up to `SPARES`).
//! Killing the intermediate kills the run: pid 1 has a parent-death signal, and the
//! death of a pid namespace's pid 1 takes every other process of it. EOF on stdin kills
//! every run and ends the zygote; `Command::Drain` ends it once its runs are over.

use std::collections::{HashMap, VecDeque};
use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use pyo3::prelude::*;
use pyo3::types::PyModule;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::isolation::{self, Ids, Layer, Layers, NetworkMode, Plan, namespaces};
use crate::process::protocol::{self, Command, Event, SandboxSetup, Setup};

/// How long a finished run's stopped processes wait for the server to let them go.
const HELD_AT_MOST: Duration = Duration::from_secs(5);
/// Finished runs' cgroups kept for reuse.
const MAX_RECYCLED: usize = 8;
/// The next runs' processes a workspace zygote keeps ready or in the making.
pub const SPARES: usize = 2;

/// How a run's network layer reads with `allow`.
const ALLOWED: &str = "allowed (PY_TOOL_NETWORK=allow): the host's network, unfiltered";

/// File descriptor on which the run's harness writes its report.
pub const REPORT_FD: i32 = 3;

const HARNESS: &str = include_str!("harness.py");
const HELPERS: &str = include_str!("../../../python/weir_runtime/helpers.py");

/// A run's plan and spec as handed to its waiting pid 1.
#[derive(Serialize)]
struct RunOrder<'a> {
    plan: &'a Plan,
    spec: &'a Value,
}

#[derive(Deserialize)]
struct OwnedRunOrder {
    plan: Plan,
    spec: Value,
}

/// Runs a zygote until its stdin closes. The interpreter must be initialised.
pub fn main() -> std::process::ExitCode {
    match serve() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("weir-pyruntime zygote: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Keeps fd `REPORT_FD` taken (by /dev/null, close-on-exec) so that nothing the
/// interpreter opens lands on the number a run's report is later written to. Call before
/// initialising the interpreter.
pub fn reserve_report_fd() {
    if let Ok(null) = File::open("/dev/null") {
        let fd = null.as_raw_fd();
        if fd != REPORT_FD {
            // SAFETY: dup3 onto a fixed number, then the original is closed by drop.
            unsafe { libc::dup3(fd, REPORT_FD, libc::O_CLOEXEC) };
        } else {
            std::mem::forget(null);
        }
    }
}

struct Zygote {
    harness: Py<PyModule>,
    fork: Py<PyAny>,
    seccomp: Result<seccompiler::BpfProgram, String>,
    events: File,
    signals: SignalFd,
    /// Intermediate pid → its run.
    children: HashMap<i32, Child>,
    /// Cgroups of finished runs, reused once empty (creating and removing a memory
    /// cgroup per run leaves the kernel with dying cgroups that slow every later one).
    recycled: Vec<Vec<PathBuf>>,
    draining: bool,
    sandbox: SandboxSetup,
    /// The next runs' processes, ready and waiting for their plans (oldest first).
    spares: VecDeque<Spare>,
    /// The next runs' processes, still getting ready (oldest first).
    pending: Vec<PendingSpare>,
    /// Numbers the cgroups this zygote creates.
    spares_made: u64,
    /// The zygote is in its own user namespace: its children's ids map onto its own.
    nested: bool,
}

/// A spare whose intermediate process is still joining its cgroups and unsharing.
struct PendingSpare {
    pid: i32,
    from_child: OwnedFd,
    to_child: OwnedFd,
    plan: OwnedFd,
    ended: OwnedFd,
    cgroups: isolation::cgroups::RunCgroup,
}

/// A run's intermediate process and pid 1, forked in advance: namespaces unshared, id
/// maps written and cgroups joined. pid 1 waits for the plan on `plan`.
struct Spare {
    pid: i32,
    plan: OwnedFd,
    ended: OwnedFd,
    cgroups: Vec<PathBuf>,
}

/// A run in progress, by its intermediate process.
struct Child {
    id: u64,
    cgroups: Vec<PathBuf>,
    /// Where the intermediate says how the run ended as soon as it knows (before its own,
    /// slower, exit); `None` once read or closed.
    ended: Option<OwnedFd>,
    /// `Event::Exited` was sent from `ended`: the exit itself only cleans up.
    reported: bool,
    /// Since when the reported run's processes are held, stopped, waiting for the server
    /// to have read the run (`Command::Kill`) or for `HELD_AT_MOST`; `None` once let go.
    held_since: Option<Instant>,
}

/// The zygote's whole life; `main` and the wheel's `zygote()` report its error.
pub fn serve() -> Result<(), String> {
    // Events go to a private copy of stdout; fd 1 then points at stderr, so that nothing
    // the interpreter prints can corrupt the protocol.
    let events = dup_high(1)?;
    // SAFETY: dup2 of stderr onto stdout, both open.
    unsafe { libc::dup2(2, 1) };
    let mut input = LineReader::default();
    let setup_line = input.blocking_line().ok_or("no setup line on stdin")?;
    let setup: Setup =
        serde_json::from_str(&setup_line).map_err(|err| format!("bad setup line: {err}"))?;
    let mut events = File::from(events);
    // With a view, the zygote is in its own user namespace (or has exited).
    let nested = setup.view.is_some();
    let confinement = match &setup.view {
        Some(view) => confine_zygote(view, setup.sandbox.network, &mut input, &mut events)?,
        None => {
            Layer::unavailable("no view of its own: the zygote is as privileged as the runtime")
        }
    };

    // What CPython's own start-up does (an embedded interpreter skips it): a full pipe or
    // an oversized file is an OSError in Python, not a fatal signal.
    for ignored in [Signal::SIGPIPE, Signal::SIGXFSZ] {
        // SAFETY: setting a signal to SIG_IGN installs no handler code.
        let _ = unsafe { nix::sys::signal::signal(ignored, nix::sys::signal::SigHandler::SigIgn) };
    }
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), None).map_err(|e| e.to_string())?;
    let signals = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(|e| format!("signalfd: {e}"))?;

    let (harness, fork, preloaded) = Python::attach(|py| prepare_python(py, &setup))
        .map_err(|err| format!("preparing the interpreter: {err}"))?;
    let mut zygote = Zygote {
        harness,
        fork,
        seccomp: isolation::seccomp::build(),
        events,
        signals,
        children: HashMap::new(),
        recycled: Vec::new(),
        draining: false,
        sandbox: setup.sandbox.clone(),
        spares: VecDeque::new(),
        pending: Vec::new(),
        spares_made: 0,
        nested,
    };
    zygote.emit(&Event::Ready {
        preloaded,
        confinement,
    })?;
    // The first run finds its processes ready too (one set: a second would take the
    // processor from it; the rest follow once it is over).
    zygote.top_up(1);
    zygote.run_loop(&mut input)
}

/// Confines the zygote before any of the workspace's code is imported, as a run is
/// confined: its own user, mount and pid namespaces (the server writes the id maps and
/// has already put the process in the zygote's cgroup), its read-only view, root of its
/// user namespace only (unprivileged on the host) with no capability but those that
/// write its runs' id maps, no_new_privs and the zygote's seccomp filter. The process
/// that unshared stays outside the pid namespace as its keeper (`keep`); the zygote goes
/// on as pid 1 of the namespace, so that everything it or a package's import code starts
/// dies with it. Returns the layer.
/// A zygote that cannot confine itself exits: the server gives it a view only where the
/// start-up probe showed that namespaces work.
fn confine_zygote(
    view: &Plan,
    network: NetworkMode,
    input: &mut LineReader,
    events: &mut File,
) -> Result<Layer, String> {
    let server = nix::unistd::getppid();
    let unshared = namespaces::unshare_for_zygote(network);
    emit(
        events,
        &Event::Unshared {
            ok: unshared.is_ok(),
        },
    )?;
    // Never on without them: as root's zygote it would import the workspace's code as
    // the host's root (a workspace could exhaust the user namespaces to force that).
    unshared.map_err(|err| format!("no namespaces of its own: {err}"))?;
    let answer = input.blocking_line().ok_or("no answer to unshared")?;
    match serde_json::from_str::<Command>(&answer) {
        Ok(Command::Mapped { ok: true }) => {}
        _ => return Err("the server could not map the zygote's ids".to_owned()),
    }
    let pid = Python::attach(|py| -> PyResult<i32> {
        py.import("os")?.getattr("fork")?.call0()?.extract()
    })
    .map_err(|err| format!("fork: {err}"))?;
    if pid != 0 {
        // SAFETY: the keeper reads no command and writes no event: closing its copies
        // lets the server see the zygote's end as soon as pid 1 is gone.
        unsafe {
            libc::close(events.as_raw_fd());
            libc::close(0);
        }
        keep(Pid::from_raw(pid), server);
    }
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    isolation::mounts::build_view(view).map_err(|err| format!("the zygote's view: {err}"))?;
    namespaces::become_namespace_root()?;
    namespaces::keep_only_id_capabilities()?;
    // Changing ids cleared the parent-death signal: pid 1 dies with its keeper.
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    nix::sys::prctl::set_no_new_privs().map_err(|err| format!("no_new_privs: {err}"))?;
    let seccomp = isolation::seccomp::build_for_zygote()
        .map(|program| isolation::seccomp::apply(&program))
        .unwrap_or_else(Layer::unavailable);
    let mut detail = format!(
        "own user, mount and pid namespaces{} (everything it starts dies with it), a \
         read-only view, no capability but writing its runs' id maps, no_new_privs",
        if network.zygote_namespace() {
            " and network namespace"
        } else {
            ""
        },
    );
    let layer = if seccomp.state == isolation::State::Enforced {
        detail.push_str(
            ", the zygote's seccomp denylist; cgroup: the server's, killed whole on retire",
        );
        Layer::enforced(detail)
    } else {
        Layer::partial(format!("{detail}; no seccomp filter: {}", seccomp.detail))
    };
    Ok(layer)
}

/// The keeper: the process that unshared the zygote's namespaces, outside its pid
/// namespace. Unprivileged (the workspace's first id, no capability), it waits for the
/// zygote (pid 1 inside, which dies with it) and ends the same way. Never returns.
fn keep(zygote: Pid, server: Pid) -> ! {
    if let Err(err) = namespaces::become_powerless() {
        eprintln!("weir-pyruntime zygote keeper: {err}");
    }
    // Dies with the server (changing ids cleared the signal), and so does the zygote.
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    if nix::unistd::getppid() != server {
        // SAFETY: _exit(2); the server is already gone.
        unsafe { libc::_exit(70) }
    }
    loop {
        let code = match waitpid(zygote, None) {
            Ok(WaitStatus::Exited(_, code)) => code,
            Ok(WaitStatus::Signaled(_, signal, _)) => 128 + signal as i32,
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => 71,
        };
        // SAFETY: _exit(2); the keeper has nothing to flush.
        unsafe { libc::_exit(code) }
    }
}

fn prepare_python(
    py: Python<'_>,
    setup: &Setup,
) -> PyResult<(Py<PyModule>, Py<PyAny>, Vec<String>)> {
    let source = CString::new(HARNESS)?;
    let harness = PyModule::from_code(py, &source, c"<weir-harness>", c"weir_harness")?;
    let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());
    let preloaded: Vec<String> = harness
        .getattr("prepare")?
        .call1((
            path(&setup.site_packages),
            path(&setup.venv_dir),
            path(&setup.executable),
            HELPERS,
            setup.preload.clone(),
        ))?
        .extract()?;
    let fork = py.import("os")?.getattr("fork")?.unbind();
    Ok((harness.unbind(), fork, preloaded))
}

impl Zygote {
    /// What this zygote's runs may reach: `public` needs the zygote's own namespace (a
    /// zygote without one gives its runs a namespace of their own instead: `deny`).
    fn run_network(&self) -> NetworkMode {
        match self.sandbox.network {
            NetworkMode::Public if !self.nested => NetworkMode::Deny,
            mode => mode,
        }
    }

    fn emit(&mut self, event: &Event) -> Result<(), String> {
        emit(&mut self.events, event)
    }

    fn run_loop(&mut self, input: &mut LineReader) -> Result<(), String> {
        loop {
            if self.draining && self.children.is_empty() {
                return Ok(());
            }
            let ending: Vec<i32> = self
                .children
                .iter()
                .filter(|(_, child)| child.ended.is_some())
                .map(|(pid, _)| *pid)
                .collect();
            let (stdin_ready, child_ready, spares_ready, ended) = {
                let stdin = std::io::stdin();
                let mut fds = vec![
                    PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
                    PollFd::new(self.signals.as_fd(), PollFlags::POLLIN),
                ];
                for pending in &self.pending {
                    fds.push(PollFd::new(pending.from_child.as_fd(), PollFlags::POLLIN));
                }
                for pid in &ending {
                    if let Some(fd) = self.children.get(pid).and_then(|c| c.ended.as_ref()) {
                        fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
                    }
                }
                let timeout = self
                    .children
                    .values()
                    .filter_map(|child| child.held_since)
                    .min()
                    .map_or(PollTimeout::NONE, |at| {
                        let left = (at + HELD_AT_MOST).saturating_duration_since(Instant::now());
                        PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX)
                    });
                match poll(&mut fds, timeout) {
                    Ok(_) => {}
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(err) => return Err(format!("poll: {err}")),
                }
                let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
                let spares = 2 + self.pending.len();
                let spares_ready: Vec<bool> = fds[2..spares].iter().map(ready).collect();
                let ended: Vec<i32> = fds[spares..]
                    .iter()
                    .zip(&ending)
                    .filter(|(fd, _)| ready(fd))
                    .map(|(_, pid)| *pid)
                    .collect();
                (ready(&fds[0]), ready(&fds[1]), spares_ready, ended)
            };
            for pid in ended {
                self.report_end(pid)?;
            }
            // Finished from the newest, so that the indices of the others stay valid.
            for (index, _) in spares_ready.iter().enumerate().rev().filter(|(_, r)| **r) {
                let pending = self.pending.remove(index);
                match self.finish_spare(pending) {
                    Ok(spare) => self.spares.push_back(spare),
                    Err(err) => eprintln!("weir-pyruntime zygote: no spare: {err}"),
                }
            }
            self.release_expired();
            if child_ready {
                self.reap()?;
            }
            // Spares are made once no run is left running (the zygote is then free again
            // by the time the next run comes); while runs go on, as many as there are
            // runs (up to `SPARES`), so that one run alone keeps the processor.
            let running = self
                .children
                .values()
                .filter(|child| !child.reported)
                .count();
            self.top_up(if running == 0 {
                SPARES
            } else {
                running.min(SPARES)
            });
            if stdin_ready {
                match input.read_available() {
                    Ok(true) => {}
                    Ok(false) => {
                        // The server is gone or let go of us: nothing may outlive it.
                        self.kill_all();
                        return Ok(());
                    }
                    Err(err) => return Err(format!("reading commands: {err}")),
                }
                while let Some(line) = input.next_line() {
                    self.handle(&line)?;
                }
            }
        }
    }

    fn handle(&mut self, line: &str) -> Result<(), String> {
        let command: Command =
            serde_json::from_str(line).map_err(|err| format!("bad command: {err}"))?;
        match command {
            // Only meaningful during start-up.
            Command::Mapped { .. } => Ok(()),
            Command::Drain => {
                self.draining = true;
                self.drop_spare();
                Ok(())
            }
            Command::Kill { id } => {
                if let Some((pid, child)) = self.children.iter_mut().find(|(_, c)| c.id == id) {
                    kill_run(*pid, child);
                }
                Ok(())
            }
            Command::Run { id, plan, spec } => {
                match self.start(&plan, &spec) {
                    Ok((pid, cgroups, ended)) => {
                        let child = Child {
                            id,
                            cgroups,
                            ended: Some(ended),
                            reported: false,
                            held_since: None,
                        };
                        self.children.insert(pid, child);
                        self.emit(&Event::Started { id })?;
                    }
                    Err(message) => self.emit(&Event::Failed { id, message })?,
                }
                Ok(())
            }
        }
    }

    fn reap(&mut self) -> Result<(), String> {
        while let Ok(Some(_)) = self.signals.read_signal() {}
        loop {
            let status = match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => return Ok(()),
                Ok(status) => status,
            };
            let (pid, code, signal) = match status {
                WaitStatus::Exited(pid, code) => (pid, Some(code), None),
                WaitStatus::Signaled(pid, signal, _) => (pid, None, Some(signal as i32)),
                _ => continue,
            };
            if let Some(Child {
                id,
                cgroups,
                reported,
                ..
            }) = self.children.remove(&pid.as_raw())
            {
                // Whatever the run left in its cgroups dies before they are reused.
                isolation::cgroups::kill_in(&cgroups);
                if !reported {
                    self.emit(&Event::Exited { id, code, signal })?;
                }
                if !cgroups.is_empty() {
                    self.recycled.push(cgroups);
                    if self.recycled.len() > MAX_RECYCLED {
                        drop(isolation::cgroups::RunCgroup::adopt(
                            self.recycled.remove(0),
                        ));
                    }
                }
            } else if let Some(index) = self.spares.iter().position(|s| s.pid == pid.as_raw()) {
                // A spare died unused: its cgroups go, the next run makes a new one.
                if let Some(spare) = self.spares.remove(index) {
                    drop(isolation::cgroups::RunCgroup::adopt(spare.cgroups));
                }
            }
        }
    }

    /// Reads how a run ended from its intermediate's word (`E<code>` or `S<signal>`) and
    /// tells the server at once; the intermediate's exit then only cleans up. No word (the
    /// pipe closed): the exit says it.
    fn report_end(&mut self, pid: i32) -> Result<(), String> {
        let Some(child) = self.children.get_mut(&pid) else {
            return Ok(());
        };
        let Some(fd) = child.ended.take() else {
            return Ok(());
        };
        let mut word = [0u8; 16];
        let read = nix::unistd::read(&fd, &mut word).unwrap_or(0);
        let word = String::from_utf8_lossy(&word[..read]);
        let (code, signal) = match parse_end(word.trim_end()) {
            Some(end) => end,
            None => return Ok(()),
        };
        child.reported = true;
        child.held_since = Some(Instant::now());
        let id = child.id;
        self.emit(&Event::Exited { id, code, signal })
    }

    /// Tears down the finished runs the server has not let go of in time.
    fn release_expired(&mut self) {
        for (pid, child) in &mut self.children {
            if child
                .held_since
                .is_some_and(|at| at.elapsed() >= HELD_AT_MOST)
            {
                kill_run(*pid, child);
            }
        }
    }

    fn kill_all(&mut self) {
        for pid in self.children.keys() {
            let _ = nix::sys::signal::kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        self.drop_spare();
        for dirs in std::mem::take(&mut self.recycled) {
            drop(isolation::cgroups::RunCgroup::adopt(dirs));
        }
    }

    /// Kills the spares (ready or not), waits for them, and removes their cgroups.
    fn drop_spare(&mut self) {
        for pending in std::mem::take(&mut self.pending) {
            let pid = Pid::from_raw(pending.pid);
            let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
            let _ = waitpid(pid, None);
            drop(pending);
        }
        for spare in std::mem::take(&mut self.spares) {
            let pid = Pid::from_raw(spare.pid);
            let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
            let _ = waitpid(pid, None);
            drop(isolation::cgroups::RunCgroup::adopt(spare.cgroups));
        }
    }

    /// Starts spares until `count` are ready or in the making (workspace zygotes only):
    /// making one waits for the kernel (joining a cgroup, unsharing), so back-to-back
    /// runs would wait for a single one.
    fn top_up(&mut self, count: usize) {
        if !self.sandbox.keep_spare || self.draining {
            return;
        }
        while self.spares.len() + self.pending.len() < count {
            match self.begin_spare() {
                Ok(pending) => self.pending.push(pending),
                Err(err) => {
                    eprintln!("weir-pyruntime zygote: no spare: {err}");
                    return;
                }
            }
        }
    }

    /// Hands `plan` to the spare (made now if there is none). Returns the run's
    /// intermediate pid, its cgroups and where it says how the run ended.
    fn start(&mut self, plan: &Plan, spec: &Value) -> Result<(i32, Vec<PathBuf>, OwnedFd), String> {
        let spare = match self.spares.pop_front() {
            Some(spare) => spare,
            None if !self.pending.is_empty() => {
                let pending = self.pending.remove(0);
                self.finish_spare(pending)?
            }
            None => self.make_spare()?,
        };
        let command = serde_json::to_vec(&RunOrder { plan, spec })
            .map_err(|err| format!("encoding the plan: {err}"))?;
        let mut pipe = File::from(spare.plan);
        if let Err(err) = pipe.write_all(&command) {
            let _ = nix::sys::signal::kill(Pid::from_raw(spare.pid), Signal::SIGKILL);
            drop(isolation::cgroups::RunCgroup::adopt(spare.cgroups));
            return Err(format!("the run's processes are gone: {err}"));
        }
        Ok((spare.pid, spare.cgroups, spare.ended))
    }

    /// Forks the next run's intermediate process (which unshares its namespaces and forks
    /// pid 1), writes its id maps, puts it in new cgroups, and releases it.
    fn make_spare(&mut self) -> Result<Spare, String> {
        let pending = self.begin_spare()?;
        self.finish_spare(pending)
    }

    /// Creates the next run's cgroups and forks its intermediate process, which joins
    /// them and unshares its namespaces on its own; `finish_spare` (when it says it is
    /// ready) writes its maps and releases it.
    fn begin_spare(&mut self) -> Result<PendingSpare, String> {
        let mut cgroups = isolation::cgroups::RunCgroup::adopt(Vec::new());
        let reusable = self
            .recycled
            .iter()
            .position(|dirs| isolation::cgroups::is_empty(dirs));
        if let Some(index) = reusable {
            cgroups = isolation::cgroups::RunCgroup::adopt(self.recycled.remove(index));
        } else if let Some(spec) = &self.sandbox.cgroups {
            self.spares_made += 1;
            let name = format!("z{}-{}", std::process::id(), self.spares_made);
            cgroups = spec
                .create(&name)
                .map_err(|err| format!("cannot create the run's cgroup {name}: {err}"))?;
        }
        let cgroup_dirs = cgroups.dirs().to_vec();
        let threads = std::fs::read_dir("/proc/self/task")
            .map(|d| d.count())
            .unwrap_or(0);
        if threads != 1 {
            // Forking with a second thread alive can deadlock the child: stop serving.
            eprintln!("weir-pyruntime zygote: {threads} threads at fork time; exiting");
            std::process::exit(70);
        }
        let (from_child, to_parent) = pipe()?;
        let (from_parent, to_child) = pipe()?;
        let (plan_read, plan_write) = pipe()?;
        let (ended_read, ended_write) = pipe()?;
        let pid = Python::attach(|py| -> PyResult<i32> { self.fork.call0(py)?.extract(py) })
            .map_err(|err| format!("fork: {err}"))?;
        if pid == 0 {
            drop((from_child, to_child, plan_write, ended_read));
            std::mem::forget(cgroups);
            let pipes = Pipes {
                to_parent,
                from_parent,
                plan: plan_read,
                ended: ended_write,
            };
            self.intermediate(&cgroup_dirs, pipes);
        }
        drop((to_parent, from_parent, plan_read, ended_write));
        Ok(PendingSpare {
            pid,
            from_child,
            to_child,
            plan: plan_write,
            ended: ended_read,
            cgroups,
        })
    }

    /// Waits for a pending spare to have unshared, writes its id maps and releases it.
    fn finish_spare(&mut self, pending: PendingSpare) -> Result<Spare, String> {
        let PendingSpare {
            pid,
            from_child,
            to_child,
            plan: plan_write,
            ended,
            cgroups,
        } = pending;
        let child = Pid::from_raw(pid);
        let answer = read_byte(&from_child);
        if answer.is_none() {
            let _ = waitpid(child, None);
            return Err("the run's intermediate process died while starting".to_owned());
        }
        let unshared = answer == Some(1);
        let mut release = 0u8;
        if unshared {
            let ids = if self.nested {
                // The zygote's own namespace already maps the workspace's range at 0.
                Ids {
                    base_uid: 0,
                    base_gid: 0,
                    ..self.sandbox.ids
                }
            } else {
                self.sandbox.ids
            };
            match namespaces::write_id_maps(child, &ids) {
                Ok(()) => release |= 1,
                Err(err) => eprintln!("weir-pyruntime zygote: {err}"),
            }
        }
        let _ = nix::unistd::write(&to_child, &[release]);
        Ok(Spare {
            pid,
            plan: plan_write,
            ended,
            cgroups: cgroups.into_dirs(),
        })
    }

    /// The intermediate child: unshares, waits for its maps and cgroups, forks pid 1 and
    /// exits the way the run ended. Never returns.
    fn intermediate(&self, cgroups: &[PathBuf], pipes: Pipes) -> ! {
        let Pipes {
            to_parent,
            from_parent,
            plan,
            ended,
        } = pipes;
        let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
        let mut all = SigSet::empty();
        all.add(Signal::SIGCHLD);
        let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&all), None);
        // SAFETY: closing, in this child only, the zygote's protocol and signal
        // descriptors and the other spares' pipes (a plan is read to its end: a copy of
        // another spare's write end here would keep that spare waiting forever). The
        // owners never drop them here: this process never returns.
        unsafe {
            libc::close(self.events.as_raw_fd());
            libc::close(self.signals.as_raw_fd());
            for pending in &self.pending {
                for fd in [
                    &pending.from_child,
                    &pending.to_child,
                    &pending.plan,
                    &pending.ended,
                ] {
                    libc::close(fd.as_raw_fd());
                }
            }
            for spare in &self.spares {
                libc::close(spare.plan.as_raw_fd());
                libc::close(spare.ended.as_raw_fd());
            }
            for fd in self.children.values().filter_map(|c| c.ended.as_ref()) {
                libc::close(fd.as_raw_fd());
            }
        }
        if let Err(err) = isolation::cgroups::join(cgroups) {
            eprintln!("weir-pyruntime: cannot join the run's cgroups: {err}");
            exit_now(71);
        }
        let unshared = namespaces::unshare_for_run(self.run_network());
        // A change of credentials (the new user namespace) clears the parent-death signal,
        // and makes the process undumpable: its /proc files would then belong to the
        // host's root, and a zygote in a namespace of its own could not write its maps.
        let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
        let _ = nix::sys::prctl::set_dumpable(true);
        let _ = nix::unistd::write(&to_parent, &[u8::from(unshared.is_ok())]);
        let maps_written = read_byte(&from_parent) == Some(1);
        drop((to_parent, from_parent));
        let Ok((status_read, status_write)) = pipe() else {
            exit_now(71);
        };
        let pid = Python::attach(|py| -> PyResult<i32> { self.fork.call0(py)?.extract(py) });
        match pid {
            Ok(0) => {
                drop((status_read, ended));
                self.pid_one(plan, unshared, maps_written, status_write)
            }
            Ok(pid) => {
                drop((status_write, plan));
                mirror_exit(Pid::from_raw(pid), status_read, ended)
            }
            Err(err) => {
                eprintln!("weir-pyruntime: fork: {err}");
                exit_now(71);
            }
        }
    }

    /// pid 1 of a spare: builds the run's view ahead, forks the runner ahead (the process
    /// that will run the tool code: pid 1 of a namespace ignores its own signals, so the
    /// code must not be pid 1), confines itself for good and reaps until the runner exits.
    /// Both forks and pid 1's own confinement happen before there is a run.
    fn pid_one(
        &self,
        plan: OwnedFd,
        unshared: Result<(), String>,
        maps_written: bool,
        status: OwnedFd,
    ) -> ! {
        let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
        let _ = nix::unistd::setsid();
        // While no run is waiting for us: its view, but for its own directories.
        let ahead = match (&self.sandbox.view, &unshared) {
            (Some(template), Ok(())) if maps_written => {
                Some(isolation::mounts::prepare_view(template).map(|()| template))
            }
            _ => None,
        };
        let in_user_namespace = unshared.is_ok() && maps_written;
        let runner = Python::attach(|py| -> PyResult<i32> { self.fork.call0(py)?.extract(py) });
        match runner {
            Ok(0) => {
                // The code's own session and process group, as a fresh process would have.
                let _ = nix::unistd::setsid();
                self.runner(plan, unshared, maps_written, ahead, status)
            }
            Ok(pid) => {
                drop(plan);
                // pid 1 only reaps and reports from here on: it keeps no right the run's
                // code could borrow (its ids, no file at all, the run's seccomp filter).
                let _ = namespaces::drop_to_run_ids(&self.sandbox.ids, in_user_namespace);
                let _ = isolation::landlock::deny_all();
                if let Ok(program) = &self.seccomp {
                    let _ = isolation::seccomp::apply(program);
                }
                // Changing ids cleared the parent-death signal.
                let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
                init(Pid::from_raw(pid), status)
            }
            Err(err) => {
                eprintln!("weir-pyruntime: fork: {err}");
                exit_now(71);
            }
        }
    }

    /// The runner, forked ahead by pid 1: waits for the run's plan, points stdout, stderr
    /// and the report at the run's files, and goes on with `run`.
    fn runner(
        &self,
        plan: OwnedFd,
        unshared: Result<(), String>,
        maps_written: bool,
        ahead: Option<Result<&Plan, String>>,
        status: OwnedFd,
    ) -> ! {
        let mut bytes = Vec::new();
        if std::io::Read::read_to_end(&mut File::from(plan), &mut bytes).is_err() {
            exit_now(71);
        }
        let Ok(mut order) = serde_json::from_slice::<OwnedRunOrder>(&bytes) else {
            // The zygote went away (or dropped the spare) without a run for us.
            exit_now(71);
        };
        // The namespaces were made from the zygote's setup: the plan must say the same.
        order.plan.ids = self.sandbox.ids;
        order.plan.network = self.run_network();
        // With the view built ahead, the run's directory is still reachable in the
        // zygote's view, below the new root.
        let base = match &ahead {
            Some(Ok(_)) => Path::new(isolation::mounts::AHEAD),
            _ => Path::new("/"),
        };
        if let Err(err) = redirect(&order.plan, base) {
            eprintln!("weir-pyruntime: cannot prepare the run's files: {err}");
            exit_now(71);
        }
        self.run(
            &order.plan,
            &order.spec.to_string(),
            unshared,
            maps_written,
            ahead,
            status,
        )
    }

    /// The runner with its plan: finishes the run's view, confines itself layer by layer
    /// and runs the tool code, whose end it reports on `status` once its report is written.
    fn run(
        &self,
        plan: &Plan,
        spec: &str,
        unshared: Result<(), String>,
        maps_written: bool,
        ahead: Option<Result<&Plan, String>>,
        status: OwnedFd,
    ) -> ! {
        let mut layers = Layers::default();
        // Only in a pid namespace of its own may the run's end stop "every other process"
        // (kill -1) and wait to be torn down with the namespace.
        let own_pid_namespace = unshared.is_ok();
        let in_user_namespace = match unshared {
            Ok(()) if maps_written => true,
            Ok(()) => {
                layers.namespaces = Layer::unavailable("the id maps could not be written");
                false
            }
            Err(err) => {
                layers.namespaces = Layer::unavailable(err);
                false
            }
        };
        if in_user_namespace {
            layers.namespaces = Layer::enforced(if plan.network.run_namespace() {
                "user, pid (the run is pid 1), ipc, uts, mount, network"
            } else {
                "user, pid (the run is pid 1), ipc, uts, mount"
            });
            let _ = nix::unistd::sethostname("weir-run");
            layers.network = match plan.network {
                NetworkMode::Allow => Layer::enforced(ALLOWED),
                NetworkMode::Public => Layer::enforced(isolation::network::PUBLIC_LAYER),
                NetworkMode::Deny => match namespaces::loopback_up() {
                    Ok(()) => Layer::enforced("denied: a network namespace with loopback only"),
                    Err(err) => Layer::partial(format!("denied: a network namespace ({err})")),
                },
            };
            let view = match ahead {
                Some(Ok(template)) => isolation::mounts::finish_view(plan, template),
                Some(Err(err)) => Err(err),
                None => isolation::mounts::build_view(plan),
            };
            layers.filesystem = match view {
                Ok(detail) => Layer::enforced(detail),
                Err(err) => Layer::unavailable(format!("the run's view could not be built: {err}")),
            };
        } else {
            layers.filesystem = Layer::unavailable("no mount namespace");
            layers.network = match plan.network {
                NetworkMode::Allow => Layer::enforced(ALLOWED),
                NetworkMode::Public => Layer::unavailable(
                    "public, but no namespaces: the host's network (Landlock does not filter \
                     addresses)",
                ),
                NetworkMode::Deny => Layer::unavailable(
                    "denied, but no network namespace (Landlock still denies TCP)",
                ),
            };
        }
        layers.identity = namespaces::drop_to_run_ids(&plan.ids, in_user_namespace);
        if let Err(err) = apply_rlimits(plan) {
            eprintln!("weir-pyruntime: cannot set the run's limits: {err}");
            exit_now(71);
        }
        if let Err(err) = nix::unistd::chdir(&plan.work()) {
            eprintln!("weir-pyruntime: cannot enter the working directory: {err}");
            exit_now(71);
        }
        layers.landlock = isolation::landlock::restrict(plan);
        layers.seccomp = match &self.seccomp {
            Ok(program) => isolation::seccomp::apply(program),
            Err(err) => Layer::unavailable(err.clone()),
        };
        let layers_json = serde_json::to_string(&layers).unwrap_or_else(|_| "{}".to_owned());
        let runner_pid = nix::unistd::getpid();
        let result = Python::attach(|py| -> PyResult<()> {
            let harness = self.harness.bind(py);
            match layers.first_missing() {
                Some(missing) if plan.require => {
                    harness.getattr("refuse")?.call1((layers_json, missing))?;
                }
                _ => {
                    harness.getattr("child_main")?.call1((spec, layers_json))?;
                }
            }
            Ok(())
        });
        if let Err(err) = result {
            eprintln!("weir-pyruntime: the harness failed: {err}");
            exit_now(1);
        }
        // The run is over once its report is written: say so before this (possibly large)
        // process is torn down. Only the runner itself, not a process the code forked.
        if nix::unistd::getpid() == runner_pid {
            flush_python();
            if own_pid_namespace {
                // Whatever the code left running stops before the server reads the run.
                // SAFETY: kill(2) of every process this one may signal in the run's pid
                // namespace (never its pid 1, nor this process).
                unsafe { libc::kill(-1, libc::SIGSTOP) };
            }
            let _ = nix::unistd::write(&status, b"E0\n");
            if own_pid_namespace {
                // Held, stopped, until the zygote tears the namespace down once the server
                // has read the run: tearing down this large process now would take the
                // processor the answer needs.
                let _ = nix::sys::signal::raise(Signal::SIGSTOP);
            }
        }
        exit_now(0);
    }
}

/// Kills a run (its intermediate, and with it the namespace) and whatever is left in its
/// cgroups; a held run is let go.
fn kill_run(intermediate: i32, child: &mut Child) {
    let _ = nix::sys::signal::kill(Pid::from_raw(intermediate), Signal::SIGKILL);
    isolation::cgroups::kill_in(&child.cgroups);
    child.held_since = None;
}

/// Flushes Python's streams and leaves without running finalizers (a forked child must
/// not flush or delete what belongs to the zygote).
fn exit_now(code: i32) -> ! {
    flush_python();
    // SAFETY: _exit(2) ends the process at once; nothing is shared with the parent.
    unsafe { libc::_exit(code) }
}

/// Flushes Python's stdout and stderr.
fn flush_python() {
    Python::attach(|py| {
        if let Ok(sys) = py.import("sys") {
            for name in ["stdout", "stderr"] {
                if let Ok(stream) = sys.getattr(name) {
                    let _ = stream.call_method0("flush");
                }
            }
        }
    });
}

/// pid 1's loop: reaps every process of the namespace until `runner` exits, then
/// writes how it ended (`E<code>` or `S<signal>`) on `status` and exits, which ends
/// every process left in the namespace.
fn init(runner: Pid, status: OwnedFd) -> ! {
    loop {
        let ended = match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == runner => format!("E{code}\n"),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == runner => {
                format!("S{}\n", signal as i32)
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => "E71\n".to_owned(),
        };
        let _ = nix::unistd::write(&status, ended.as_bytes());
        // SAFETY: _exit(2) ends pid 1 (and so the namespace) at once.
        unsafe { libc::_exit(0) }
    }
}

/// Waits for pid 1 of the run and ends this process the way the runner ended (read from
/// `status`), or the way pid 1 ended when it left no word (killed from outside).
fn mirror_exit(child: Pid, status: OwnedFd, ended: OwnedFd) -> ! {
    // The first line only: the runner and pid 1 may both speak, and a process the code
    // left behind may hold the pipe open.
    let mut word = Vec::with_capacity(16);
    let mut byte = [0u8; 1];
    while word.len() < 16 {
        match nix::unistd::read(&status, &mut byte) {
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => word.push(byte[0]),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        }
    }
    let reported = String::from_utf8_lossy(&word).into_owned();
    let (code, signal) = match parse_end(&reported) {
        // Reported: the zygote hears it at once, and kills this process (pid 1 dies with
        // it, and the namespace with pid 1; the zygote empties the run's cgroups) once the
        // server has read the run.
        Some(_) => {
            let _ = nix::unistd::write(&ended, format!("{reported}\n").as_bytes());
            // The zygote kills this process (and so the run) when the server has read the
            // run; it reports nothing more.
            loop {
                // SAFETY: pause(2) only waits for a signal.
                unsafe { libc::pause() };
            }
        }
        None => loop {
            match waitpid(child, None) {
                Ok(WaitStatus::Exited(_, code)) => break (Some(code), None),
                Ok(WaitStatus::Signaled(_, signal, _)) => break (None, Some(signal as i32)),
                Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => break (Some(71), None),
            }
        },
    };
    if let Some(signal) = signal {
        // SAFETY: restoring the default action and raising the same signal on this
        // process (not a pid 1: it takes effect).
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
            libc::_exit(128 + signal)
        }
    }
    // SAFETY: see exit_now; this process has nothing to flush.
    unsafe { libc::_exit(code.unwrap_or(71)) }
}

/// Writes one event line to the server.
fn emit(events: &mut File, event: &Event) -> Result<(), String> {
    let line = protocol::encode(event).map_err(|e| e.to_string())?;
    events
        .write_all(&line)
        .map_err(|err| format!("the server is gone: {err}"))
}

/// How a run ended, from its word: `E<code>` or `S<signal>`.
fn parse_end(word: &str) -> Option<(Option<i32>, Option<i32>)> {
    match (word.get(..1), word.get(1..).map(str::parse::<i32>)) {
        (Some("E"), Some(Ok(code))) => Some((Some(code), None)),
        (Some("S"), Some(Ok(signal))) => Some((None, Some(signal))),
        _ => None,
    }
}

/// The pipes between the zygote and a spare's intermediate process.
struct Pipes {
    /// "Unshared" (one byte).
    to_parent: OwnedFd,
    /// "Maps written" (one byte).
    from_parent: OwnedFd,
    /// The run's plan, for pid 1.
    plan: OwnedFd,
    /// How the run ended, as soon as the intermediate knows.
    ended: OwnedFd,
}

/// Points stdin at `/dev/null` and stdout, stderr and the report at the run's files,
/// found below `base`.
fn redirect(plan: &Plan, base: &Path) -> std::io::Result<()> {
    let create = |name: &str| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(
                base.join(plan.run_root.strip_prefix("/").unwrap_or(&plan.run_root))
                    .join(name),
            )
    };
    let null = File::open("/dev/null")?;
    let stdout = create("stdout")?;
    let stderr = create("stderr")?;
    let report = create("report.json")?;
    for (file, target) in [(null, 0), (stdout, 1), (stderr, 2), (report, REPORT_FD)] {
        if file.as_raw_fd() == target {
            // Already in place: closing it would undo the redirection.
            std::mem::forget(file);
            continue;
        }
        // SAFETY: dup2 onto the standard numbers (and the report's); the source is
        // closed when `file` drops.
        if unsafe { libc::dup2(file.as_raw_fd(), target) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn apply_rlimits(plan: &Plan) -> nix::Result<()> {
    use nix::sys::resource::{Resource, setrlimit};
    let limits = plan.rlimits;
    setrlimit(Resource::RLIMIT_CPU, limits.cpu_secs, limits.cpu_secs + 1)?;
    setrlimit(
        Resource::RLIMIT_AS,
        limits.address_space,
        limits.address_space,
    )?;
    setrlimit(Resource::RLIMIT_FSIZE, limits.file_size, limits.file_size)?;
    setrlimit(Resource::RLIMIT_CORE, 0, 0)?;
    setrlimit(Resource::RLIMIT_NPROC, limits.processes, limits.processes)?;
    Ok(())
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|err| format!("pipe: {err}"))
}

fn read_byte(fd: &OwnedFd) -> Option<u8> {
    let mut byte = [0u8; 1];
    loop {
        match nix::unistd::read(fd, &mut byte) {
            Ok(1) => return Some(byte[0]),
            Err(nix::errno::Errno::EINTR) => continue,
            _ => return None,
        }
    }
}

/// A close-on-exec duplicate of `fd` numbered 10 or above.
fn dup_high(fd: i32) -> Result<OwnedFd, String> {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) returns a new descriptor we then own.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
    if new < 0 {
        return Err(format!("dup: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `new` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Splits stdin into lines without blocking more than one read.
#[derive(Default)]
struct LineReader {
    buffer: Vec<u8>,
}

impl LineReader {
    /// Reads what is available; `false` at EOF.
    fn read_available(&mut self) -> std::io::Result<bool> {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match nix::unistd::read(std::io::stdin(), &mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.buffer.extend_from_slice(&chunk[..n]);
                    return Ok(true);
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(err) => return Err(err.into()),
            }
        }
    }

    fn next_line(&mut self) -> Option<String> {
        let end = self.buffer.iter().position(|&b| b == b'\n')?;
        let line: Vec<u8> = self.buffer.drain(..=end).collect();
        Some(String::from_utf8_lossy(&line[..end]).into_owned())
    }

    fn blocking_line(&mut self) -> Option<String> {
        loop {
            if let Some(line) = self.next_line() {
                return Some(line);
            }
            if !self.read_available().ok()? {
                return None;
            }
        }
    }
}
