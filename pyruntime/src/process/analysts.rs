//! Analysis of tool code outside the server: template substitution and import detection
//! run in worker processes, never in the server's own interpreter.
//!
//! A 1 MiB body can keep CPython's tokenizer and `ast` busy for seconds and hundreds of
//! MiB, holding the interpreter's lock. So each analysis goes to an *analyst*: a process
//! of its own (`weir-pyruntime __analyze`, or the wheel's interpreter calling
//! `_weir_runtime.analyst()`), with a scrubbed environment, an address-space limit
//! (`MEMORY`), a lower priority and a parent-death signal, serving one request at a time
//! as one JSON line in, one out. A request that takes longer than
//! `PY_TOOL_ANALYSIS_TIMEOUT` kills its analyst (a 400 for the caller); idle analysts are
//! kept for the next request. A workspace holds at most one analyst at a time, and at
//! most `max_workers` analyses run at once, so a pathological body delays only its own
//! workspace. `worker_main` is the analyst's side.

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::sync::{Arc, Mutex};

use super::lock;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{Mutex as AsyncMutex, Semaphore};

use crate::analysis::templates::{self, Replacement};
use crate::process::launcher::Launcher;

/// Address-space limit of an analyst.
pub const MEMORY: u64 = 1 << 30;
/// Largest answer read back (the substituted code, its warnings and imports).
const MAX_ANSWER: u64 = 64 << 20;
/// Analysts kept idle.
const MAX_IDLE: usize = 4;

/// What an analyst is asked: the code and its templates, resolved by the server
/// (`templates::plan`, no interpreter needed), with the warnings so far.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub code: String,
    pub replacements: Vec<Replacement>,
    pub warnings: Vec<String>,
}

/// What it answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum Answer {
    Done(Analysed),
    Failed { error: String },
}

/// The code after substitution, the warnings, and its non-stdlib imports.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Analysed {
    pub code: String,
    pub warnings: Vec<String>,
    pub imported: Vec<String>,
}

/// Why an analysis gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// The code is too large or too complex to analyse in time (or memory): the caller's.
    #[error("{0}")]
    Refused(String),
    /// The analyst could not be started or broke down for another reason.
    #[error("the code analyser failed: {0}")]
    Failed(String),
}

/// One analyst process.
struct Analyst {
    _child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// The analysts of the server.
pub struct Analysts {
    launcher: Launcher,
    timeout: Duration,
    idle: Arc<Mutex<Vec<Analyst>>>,
    /// Bounds the analyses running at once (so the analysts alive are at most this
    /// many, plus `MAX_IDLE`).
    workers: Semaphore,
    /// One analysis at a time per workspace.
    gates: Mutex<HashMap<String, Arc<AsyncMutex<()>>>>,
}

impl Analysts {
    pub fn new(launcher: Launcher, timeout: Duration, max_workers: usize) -> Self {
        Self {
            launcher,
            timeout,
            idle: Arc::default(),
            workers: Semaphore::new(max_workers.max(1)),
            gates: Mutex::default(),
        }
    }

    /// Substitutes the templates of `request.code` and finds its imports.
    pub async fn analyse(
        &self,
        workspace: &str,
        request: &Request,
    ) -> Result<Analysed, AnalysisError> {
        let gate = lock(&self.gates)
            .entry(workspace.to_owned())
            .or_default()
            .clone();
        let _turn = gate.lock().await;
        let _running = self
            .workers
            .acquire()
            .await
            .map_err(|err| AnalysisError::Failed(err.to_string()))?;
        let idle = lock(&self.idle).pop();
        let mut analyst = match idle {
            Some(analyst) => analyst,
            None => spawn(&self.launcher).await?,
        };
        self.refill();
        let mut line =
            serde_json::to_vec(request).map_err(|e| AnalysisError::Failed(e.to_string()))?;
        line.push(b'\n');
        let exchange = async {
            analyst.stdin.write_all(&line).await?;
            let mut answer = Vec::new();
            (&mut analyst.stdout)
                .take(MAX_ANSWER + 1)
                .read_until(b'\n', &mut answer)
                .await?;
            Ok::<_, io::Error>(answer)
        };
        let answer = match tokio::time::timeout(self.timeout, exchange).await {
            // Dropping the analyst kills it.
            Err(_) => {
                return Err(AnalysisError::Refused(format!(
                    "the code could not be analysed within {} s (PY_TOOL_ANALYSIS_TIMEOUT): \
                     it is too large or too deeply nested",
                    self.timeout.as_secs_f64()
                )));
            }
            Ok(Err(err)) => return Err(AnalysisError::Failed(err.to_string())),
            Ok(Ok(answer)) if answer.is_empty() => {
                // The analyst died on this code (its memory limit, most likely).
                return Err(AnalysisError::Refused(
                    "the code could not be analysed: the analyser ran out of memory".to_owned(),
                ));
            }
            Ok(Ok(answer)) => answer,
        };
        let answer: Answer = serde_json::from_slice(&answer)
            .map_err(|err| AnalysisError::Failed(format!("unreadable answer: {err}")))?;
        self.keep(analyst);
        match answer {
            Answer::Done(analysed) => Ok(analysed),
            Answer::Failed { error } => Err(AnalysisError::Refused(format!(
                "the code could not be analysed: {error}"
            ))),
        }
    }

    /// Keeps a healthy analyst for the next request (beyond `MAX_IDLE`, it is dropped,
    /// which kills it).
    fn keep(&self, analyst: Analyst) {
        let mut idle = lock(&self.idle);
        if idle.len() < MAX_IDLE {
            idle.push(analyst);
        }
    }

    /// Starts a spare in the background when none is idle, so that the next request
    /// (another workspace's, say) finds an analyser whose interpreter is ready.
    pub fn refill(&self) {
        if !lock(&self.idle).is_empty() {
            return;
        }
        let idle = self.idle.clone();
        let launcher = self.launcher.clone();
        tokio::spawn(async move {
            if let Ok(analyst) = spawn(&launcher).await {
                let mut idle = lock(&idle);
                if idle.len() < MAX_IDLE {
                    idle.push(analyst);
                }
            }
        });
    }
}

async fn spawn(launcher: &Launcher) -> Result<Analyst, AnalysisError> {
    let (program, args) = launcher.analyst();
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(std::env::var_os("PYTHONHOME").map(|home| ("PYTHONHOME", home)))
        .env("LC_ALL", "C.UTF-8")
        .current_dir("/")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|err| AnalysisError::Failed(format!("cannot start an analyser: {err}")))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    match (stdin, stdout) {
        (Some(stdin), Some(stdout)) => Ok(Analyst {
            _child: child,
            stdin,
            stdout: BufReader::new(stdout),
        }),
        _ => Err(AnalysisError::Failed(
            "an analyser without pipes".to_owned(),
        )),
    }
}

/// The analyst process: limits itself, then answers requests on stdin until EOF. The
/// interpreter must be initialised.
pub fn worker_main() -> std::process::ExitCode {
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_AS, MEMORY, MEMORY);
    // SAFETY: nice(2) takes a plain integer.
    unsafe { libc::nice(10) };
    // Compiles the analysis module now, before the first request waits for it.
    let _ = crate::analysis::py::imports("");
    let stdin = io::stdin();
    let mut stdout = io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else {
            break;
        };
        let answer = match serde_json::from_str::<Request>(&line) {
            Ok(request) => answer(request),
            Err(err) => Answer::Failed {
                error: format!("bad request: {err}"),
            },
        };
        let mut out =
            serde_json::to_vec(&answer).unwrap_or_else(|_| b"{\"error\":\"unencodable\"}".to_vec());
        out.push(b'\n');
        if stdout
            .write_all(&out)
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
    std::process::ExitCode::SUCCESS
}

/// The interpreter's part of preparing code: substitute, then find the imports.
fn answer(request: Request) -> Answer {
    let substituted = match templates::apply(&request.code, &request.replacements, request.warnings)
    {
        Ok(substituted) => substituted,
        Err(err) => {
            return Answer::Failed {
                error: err.to_string(),
            };
        }
    };
    match crate::analysis::py::imports(&substituted.code) {
        Ok(imported) => Answer::Done(Analysed {
            code: substituted.code,
            warnings: substituted.warnings,
            imported,
        }),
        Err(err) => Answer::Failed {
            error: err.to_string(),
        },
    }
}
