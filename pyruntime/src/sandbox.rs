//! Runs tool code in a sandboxed child process and reports how it ended.
//!
//! Entry point: `run`. Each execution gets a `RunDir` (working directory, home, tmp,
//! the harness files) and a child — the workspace venv's `python` running `harness.py` —
//! in its own session and process group, with RLIMIT_CPU = timeout + 2 s,
//! RLIMIT_AS = `PY_TOOL_MAX_MEM`, RLIMIT_FSIZE = 100 MiB, RLIMIT_CORE = 0 and
//! RLIMIT_NPROC = 1024 (not enforced for root), and an
//! environment built from scratch (no server secrets). A wall-clock timeout, the end of
//! the run, and dropping the request all kill the whole process group. stdout and stderr
//! are captured up to `OUTPUT_CAP` each. This module never interprets tool results beyond
//! reading the harness report; collecting artifacts is `artifacts`' job.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

const HARNESS: &str = include_str!("harness.py");
const HELPERS: &str = include_str!("../../python/weir_runtime/helpers.py");

/// RLIMIT_FSIZE: the largest file a run may write.
pub const FILE_SIZE_LIMIT: u64 = 100 << 20;
/// Bytes of stdout (and, separately, stderr) kept per run.
pub const OUTPUT_CAP: usize = 1 << 20;
/// RLIMIT_NPROC: processes (threads included) of the runtime's user while a run forks.
/// The kernel ignores it for root, so it stops fork bombs only when the runtime runs as an
/// unprivileged user, as it should.
pub const PROCESS_LIMIT: u64 = 1024;
/// CPU seconds granted beyond the wall-clock timeout (SPEC.md: timeout + 2 s).
pub const CPU_GRACE_SECS: u64 = 2;
/// Largest harness report read back.
const REPORT_CAP: u64 = 32 << 20;
/// How long to wait for the output pipes after the process group is gone.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Whether RLIMIT_NPROC binds children: the kernel does not apply it to root.
pub fn process_limit_enforced() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() != 0 }
}

/// Limits of one run.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub timeout: Duration,
    pub max_mem: u64,
}

impl Limits {
    pub fn cpu_secs(&self) -> u64 {
        self.timeout.as_secs_f64().ceil() as u64 + CPU_GRACE_SECS
    }
}

/// A run's private directory tree, removed when dropped.
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    /// Creates `<base>/<uuid>/{work,home,tmp,harness/weir_runtime}` with the harness files.
    pub fn create(base: &Path) -> io::Result<Self> {
        let root = base.join(uuid::Uuid::new_v4().to_string());
        let run = Self { root };
        for dir in [run.work(), run.root.join("home"), run.root.join("tmp")] {
            std::fs::create_dir_all(dir)?;
        }
        let package = run.harness_dir().join("weir_runtime");
        std::fs::create_dir_all(&package)?;
        std::fs::write(run.harness_dir().join("harness.py"), HARNESS)?;
        std::fs::write(package.join("__init__.py"), HELPERS)?;
        Ok(run)
    }

    /// The child's working directory: every file left here is an artifact.
    pub fn work(&self) -> PathBuf {
        self.root.join("work")
    }

    fn harness_dir(&self) -> PathBuf {
        self.root.join("harness")
    }

    fn report_path(&self) -> PathBuf {
        self.root.join("report.json")
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_dir_all(&self.root)
            && err.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.root.display(), %err, "cannot remove run directory");
        }
    }
}

/// What to run.
pub struct Job<'a> {
    pub python: &'a Path,
    pub venv_dir: &'a Path,
    /// Persistent per-workspace cache (matplotlib's font cache lives here).
    pub cache_dir: &'a Path,
    pub code: &'a str,
    pub params: &'a Map<String, Value>,
    pub limits: Limits,
}

/// The error the harness reports for an exception of the tool.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
pub struct ToolError {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    pub traceback: String,
}

/// Which entry the harness used.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
pub struct Entry {
    pub kind: String,
    pub name: Option<String>,
}

/// The harness's report (`harness.py` documents its shape).
#[derive(Debug, Clone, Deserialize)]
pub struct Report {
    pub entry: Entry,
    pub result: Value,
    pub output: Option<String>,
    pub error: Option<ToolError>,
}

/// How a run ended.
#[derive(Debug)]
pub struct Outcome {
    pub stdout: String,
    pub stderr: String,
    pub truncated: bool,
    pub timed_out: bool,
    /// Exit code, or `None` when a signal ended the process.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The harness report; `None` when the process died before writing it.
    pub report: Option<Report>,
    /// A report that exists but cannot be used (too large, malformed).
    pub report_problem: Option<String>,
}

/// Runs `job` in `run_dir` and waits for it (or its timeout).
pub async fn run(job: &Job<'_>, run_dir: &RunDir) -> io::Result<Outcome> {
    let spec_path = run_dir.root.join("spec.json");
    let report_path = run_dir.report_path();
    let spec = json!({
        "code": job.code,
        "params": job.params,
        "resultPath": report_path,
    });
    tokio::fs::write(&spec_path, spec.to_string()).await?;
    tokio::fs::create_dir_all(job.cache_dir.join("matplotlib")).await?;

    let mut command = Command::new(job.python);
    command
        .arg("-s")
        .arg(run_dir.harness_dir().join("harness.py"))
        .arg(&spec_path)
        .current_dir(run_dir.work())
        .env_clear()
        .envs(child_env(job, run_dir))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let limits = RlimitValues::new(job.limits);
    // SAFETY: the closure runs between fork and exec and only calls the async-signal-
    // safe functions setsid(2) and setrlimit(2) on values computed before the fork.
    unsafe {
        command.pre_exec(move || limits.apply());
    }

    let mut child = command.spawn()?;
    let group = child.id().map(|pid| ProcessGroup(pid as libc::pid_t));
    let stdout = capture(child.stdout.take());
    let stderr = capture(child.stderr.take());

    let (status, timed_out) = match tokio::time::timeout(job.limits.timeout, child.wait()).await {
        Ok(status) => (status?, false),
        Err(_) => {
            if let Some(group) = &group {
                group.kill();
            }
            (child.wait().await?, true)
        }
    };
    // Whatever the code left running in the background dies with the run.
    if let Some(group) = &group {
        group.kill();
    }
    let (stdout, out_truncated) = stdout.finish().await;
    let (stderr, err_truncated) = stderr.finish().await;

    let (report, report_problem) = read_report(&report_path).await;
    use std::os::unix::process::ExitStatusExt;
    Ok(Outcome {
        stdout,
        stderr,
        truncated: out_truncated || err_truncated,
        timed_out,
        exit_code: status.code(),
        signal: status.signal(),
        report,
        report_problem,
    })
}

/// Why a process that was ended by `signal` died, in words for the user.
pub fn describe_signal(signal: i32, limits: &Limits, timed_out: bool) -> String {
    let timeout = limits.timeout.as_secs_f64();
    match signal {
        _ if timed_out => format!("killed after the wall-clock timeout of {timeout} s"),
        libc::SIGXCPU => format!(
            "stopped by the CPU time limit of {} s (SIGXCPU)",
            limits.cpu_secs()
        ),
        libc::SIGXFSZ => format!(
            "stopped by the file size limit of {} MiB (SIGXFSZ)",
            FILE_SIZE_LIMIT >> 20
        ),
        libc::SIGKILL => {
            "killed by SIGKILL (possibly the kernel's out-of-memory killer)".to_owned()
        }
        libc::SIGSEGV | libc::SIGBUS | libc::SIGABRT => format!(
            "crashed with {} (possibly the memory limit of {} MiB)",
            signal_name(signal),
            limits.max_mem >> 20
        ),
        other => format!("killed by {}", signal_name(other)),
    }
}

fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return format!("signal {signal}"),
    };
    name.to_owned()
}

/// The child's whole environment: only what Python and common libraries need.
fn child_env(job: &Job<'_>, run_dir: &RunDir) -> Vec<(String, String)> {
    let path = |p: PathBuf| p.to_string_lossy().into_owned();
    let bin = path(job.venv_dir.join("bin"));
    vec![
        ("PATH".into(), format!("{bin}:/usr/local/bin:/usr/bin:/bin")),
        ("HOME".into(), path(run_dir.root.join("home"))),
        ("TMPDIR".into(), path(run_dir.root.join("tmp"))),
        ("VIRTUAL_ENV".into(), path(job.venv_dir.to_owned())),
        ("LANG".into(), "C.UTF-8".into()),
        ("LC_ALL".into(), "C.UTF-8".into()),
        ("PYTHONIOENCODING".into(), "utf-8".into()),
        ("PYTHONUNBUFFERED".into(), "1".into()),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
        ("PYTHONNOUSERSITE".into(), "1".into()),
        ("MPLBACKEND".into(), "Agg".into()),
        (
            "MPLCONFIGDIR".into(),
            path(job.cache_dir.join("matplotlib")),
        ),
        // One thread per numeric library keeps the address space (RLIMIT_AS) predictable.
        ("OPENBLAS_NUM_THREADS".into(), "1".into()),
        ("OMP_NUM_THREADS".into(), "1".into()),
        ("MKL_NUM_THREADS".into(), "1".into()),
    ]
}

/// rlimit values computed before the fork.
#[derive(Clone, Copy)]
struct RlimitValues {
    cpu: u64,
    mem: u64,
}

impl RlimitValues {
    fn new(limits: Limits) -> Self {
        Self {
            cpu: limits.cpu_secs(),
            mem: limits.max_mem,
        }
    }

    /// Runs in the child between fork and exec.
    fn apply(self) -> io::Result<()> {
        // SAFETY: setsid and setrlimit are async-signal-safe and take plain values.
        unsafe {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            for (resource, soft, hard) in [
                (libc::RLIMIT_CPU, self.cpu, self.cpu + 1),
                (libc::RLIMIT_AS, self.mem, self.mem),
                (libc::RLIMIT_FSIZE, FILE_SIZE_LIMIT, FILE_SIZE_LIMIT),
                (libc::RLIMIT_CORE, 0, 0),
                (libc::RLIMIT_NPROC, PROCESS_LIMIT, PROCESS_LIMIT),
            ] {
                let limit = libc::rlimit {
                    rlim_cur: soft as libc::rlim_t,
                    rlim_max: hard as libc::rlim_t,
                };
                if libc::setrlimit(resource, &limit) == -1 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

/// The child's process group (its pid, as the child called setsid). Killed on drop, so
/// a cancelled request leaves nothing running.
struct ProcessGroup(libc::pid_t);

impl ProcessGroup {
    fn kill(&self) {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory involved.
        unsafe {
            libc::kill(-self.0, libc::SIGKILL);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A pipe being read into a capped buffer by a background task.
struct Capture {
    buffer: Arc<Mutex<(Vec<u8>, bool)>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

fn capture(pipe: Option<impl AsyncRead + Unpin + Send + 'static>) -> Capture {
    let buffer = Arc::new(Mutex::new((Vec::new(), false)));
    let task = pipe.map(|mut pipe| {
        let buffer = buffer.clone();
        tokio::spawn(async move {
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                let n = match pipe.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let mut guard = buffer
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let (data, truncated) = &mut *guard;
                let room = OUTPUT_CAP.saturating_sub(data.len());
                data.extend_from_slice(&chunk[..n.min(room)]);
                if n > room {
                    *truncated = true;
                }
            }
        })
    });
    Capture { buffer, task }
}

impl Capture {
    /// Waits (briefly) for the pipe to close, then returns the text and truncation flag.
    async fn finish(mut self) -> (String, bool) {
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(DRAIN_GRACE, &mut task).await.is_err()
        {
            // Something escaped the process group and still holds the pipe.
            task.abort();
        }
        let guard = self
            .buffer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (String::from_utf8_lossy(&guard.0).into_owned(), guard.1)
    }
}

/// Reads the harness report; the file is the child's, so no symlink is followed.
async fn read_report(path: &Path) -> (Option<Report>, Option<String>) {
    let opened = tokio::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .await;
    let file = match opened {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return (None, None),
        Err(err) => return (None, Some(format!("the run's report is unreadable: {err}"))),
    };
    let mut bytes = Vec::new();
    let read = file.take(REPORT_CAP + 1).read_to_end(&mut bytes).await;
    if let Err(err) = read {
        return (None, Some(format!("the run's report is unreadable: {err}")));
    }
    if bytes.len() as u64 > REPORT_CAP {
        return (
            None,
            Some(format!(
                "the result is larger than {} MiB",
                REPORT_CAP >> 20
            )),
        );
    }
    match serde_json::from_slice(&bytes) {
        Ok(report) => (Some(report), None),
        Err(err) => (None, Some(format!("the run's report is unreadable: {err}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            timeout: Duration::from_secs(5),
            max_mem: 1 << 30,
        }
    }

    #[test]
    fn cpu_limit_is_timeout_plus_grace() {
        assert_eq!(limits().cpu_secs(), 7);
        let fractional = Limits {
            timeout: Duration::from_millis(1500),
            max_mem: 1,
        };
        assert_eq!(fractional.cpu_secs(), 4);
    }

    #[test]
    fn signals_are_explained() {
        let l = limits();
        assert!(describe_signal(libc::SIGKILL, &l, true).contains("timeout of 5 s"));
        assert!(describe_signal(libc::SIGXCPU, &l, false).contains("CPU time limit of 7 s"));
        assert!(describe_signal(libc::SIGXFSZ, &l, false).contains("100 MiB"));
        assert!(describe_signal(libc::SIGSEGV, &l, false).contains("memory limit of 1024 MiB"));
        assert!(describe_signal(libc::SIGKILL, &l, false).contains("out-of-memory"));
        assert_eq!(
            describe_signal(libc::SIGUSR1, &l, false),
            "killed by signal 10"
        );
    }
}
