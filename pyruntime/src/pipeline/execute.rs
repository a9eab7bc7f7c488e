//! The execution pipeline behind `/tools/execute-python` and `/tools/install-packages`.
//!
//! `Executor::execute` validates a request, substitutes templates (`templates`), detects
//! imports (`py`), installs what is missing under the workspace lock (`imports`,
//! `venvs`), waits for a slot (`admission`: 429 when the queue is full), runs the code in
//! a confined child of the workspace's zygote (`sandbox`), collects the files it wrote
//! (`artifacts`) and shapes the response. An install retires the workspace's zygote (its
//! venv changed); a successful run teaches the pool what the workspace imports. Anything the user's code did is a successful
//! response with `success: false`; only bad input and infrastructure failures are
//! `pipeline::Error`s. HTTP concerns (routing, auth, extraction, statuses) stay in the edge.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::analysis::imports::{self, Requirement};
use crate::analysis::py;
use crate::analysis::templates::{self, Variables};
use crate::config::Config;
use crate::pipeline::admission::{Admission, Full};
use crate::pipeline::{Error, Result};
use crate::process::analysts::{AnalysisError, Analysts, Request as AnalysisRequest};
use crate::process::sandbox::{
    self, Entry, Job, Limits, Outcome, Sandbox, ToolError, WorkspaceDirs,
};
use crate::storage::artifacts::{Artifact, Artifacts};
use crate::storage::venvs::{InstallReport, Venv, VenvError, Venvs};
use crate::storage::workspace;

/// Body of `POST /tools/execute-python`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteRequest {
    pub code: Option<String>,
    pub variables: Option<Value>,
    pub requirements: Option<Vec<String>>,
    pub timeout: Option<f64>,
    #[serde(alias = "workspace_id")]
    pub workspace_id: Option<String>,
}

/// Response of `POST /tools/execute-python`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteResponse {
    pub success: bool,
    pub result: Value,
    pub output: String,
    pub stdout: String,
    pub stderr: String,
    pub error: Option<ToolError>,
    pub artifacts: Vec<Artifact>,
    pub installed_packages: Vec<String>,
    pub warnings: Vec<String>,
    pub duration_ms: u64,
    pub timed_out: bool,
    pub truncated: bool,
    pub entry: Option<Entry>,
    pub workspace_id: String,
}

/// Body of `POST /tools/install-packages`.
#[derive(Debug, Deserialize)]
pub struct InstallRequest {
    pub packages: Option<Vec<String>>,
    #[serde(alias = "workspaceId")]
    pub workspace_id: Option<String>,
}

/// Response of `POST /tools/install-packages`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallResponse {
    pub success: bool,
    pub workspace_id: String,
    #[serde(flatten)]
    pub report: InstallReport,
}

pub struct Executor {
    venvs: Venvs,
    artifacts: Artifacts,
    sandbox: Sandbox,
    /// Caps the runs alive at once (`PY_TOOL_MAX_CONCURRENCY`) and the queue behind them.
    admission: Admission,
    max_mem: u64,
    max_timeout: u64,
    /// Largest `code` analysed and run (`PY_TOOL_MAX_CODE`).
    max_code: u64,
    /// Where code is analysed (never in this process).
    analysts: Analysts,
}

impl Executor {
    pub fn new(venvs: Venvs, artifacts: Artifacts, sandbox: Sandbox, config: &Config) -> Self {
        let analysts = Analysts::new(
            sandbox.pool().launcher().clone(),
            Duration::from_secs_f64(config.analysis_timeout.clamp(0.1, 3600.0)),
            config.concurrency(),
        );
        analysts.refill();
        Self {
            analysts,
            venvs,
            artifacts,
            sandbox,
            admission: Admission::new(
                config.concurrency(),
                config.queue(),
                config.queue_per_workspace(),
            ),
            max_mem: config.max_mem,
            max_timeout: config.max_timeout,
            max_code: config.max_code,
        }
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    pub fn admission(&self) -> &Admission {
        &self.admission
    }

    /// Runs JavaScript as the harness's Python execution (see `javascript`);
    /// QuickJS may take half of the run's memory limit.
    pub async fn execute_javascript(
        &self,
        request: super::javascript::JavaScriptRequest,
    ) -> Result<ExecuteResponse> {
        let workspace = workspace_of(request.workspace_id.clone(), "workspaceId")?;
        let installed = self.venvs.existing(&workspace).is_some_and(|venv| {
            venv.site_packages
                .join(super::javascript::ENGINE_INSTALLED)
                .is_dir()
        });
        let run = request.into_execution(self.max_mem / 2, self.max_code, installed)?;
        self.execute(run).await
    }

    pub fn venvs(&self) -> &Venvs {
        &self.venvs
    }

    /// The workspace's venv, created if it has none yet (under the workspace lock).
    pub async fn workspace_venv(&self, workspace: &str) -> Result<Venv> {
        let _guard = self.venvs.lock(workspace).await;
        self.venvs.ensure(workspace).await.map_err(venv_error)
    }

    /// The workspace's cache (installers', npm's and uv's): writable in its runs.
    pub fn cache_dir(&self, workspace: &str) -> std::path::PathBuf {
        self.venvs.root().join(".cache").join(workspace)
    }

    /// `PY_TOOL_MAX_MEM`.
    pub fn max_mem(&self) -> u64 {
        self.max_mem
    }

    pub fn artifacts(&self) -> &Artifacts {
        &self.artifacts
    }

    pub async fn execute(&self, request: ExecuteRequest) -> Result<ExecuteResponse> {
        let started = Instant::now();
        let workspace = workspace_of(request.workspace_id, "workspaceId")?;
        let code = request.code.ok_or(Error::MissingField("code"))?;
        if code.len() as u64 > self.max_code {
            return Err(Error::CodeTooLarge(self.max_code));
        }
        let variables = Variables::from_json(request.variables).map_err(Error::Invalid)?;
        let requirements = parse_requirements(request.requirements.unwrap_or_default())?;
        let mut warnings = Vec::new();
        let limits = Limits {
            timeout: self.timeout(request.timeout, &mut warnings)?,
            max_mem: self.max_mem,
        };
        let params = variables.params.clone();

        let (replacements, template_warnings) =
            templates::plan(&code, &variables, chrono::Utc::now());
        let analysed = self
            .analysts
            .analyse(
                &workspace,
                &AnalysisRequest {
                    code,
                    replacements,
                    warnings: template_warnings,
                },
            )
            .await
            .map_err(|err| match err {
                AnalysisError::Refused(message) => Error::Invalid(message),
                AnalysisError::Failed(_) => Error::internal(err),
            })?;
        warnings.extend(analysed.warnings);
        let analysed_at = started.elapsed();
        let (code, imported) = (analysed.code, analysed.imported);
        let (venv, installed) = self
            .prepare_venv(&workspace, &requirements, imported.clone())
            .await?;
        tracing::debug!(
            workspace,
            analyse_us = analysed_at.as_micros() as u64,
            venv_us = (started.elapsed() - analysed_at).as_micros() as u64,
            "execution timings"
        );
        let cache_dir = self.cache_dir(&workspace);
        let artifacts_dir = self.artifacts.workspace_dir(&workspace);
        let dirs = WorkspaceDirs {
            workspace: &workspace,
            venv: &venv,
            artifacts: &artifacts_dir,
            cache: &cache_dir,
        };
        let job = Job {
            dirs,
            code: &code,
            params: &params,
            limits,
        };
        let (outcome, artifacts) = self
            .run_and_collect(&job, &workspace, &mut warnings)
            .await?;

        let mut response = shape(outcome, &limits, warnings);
        if response.success {
            let spec = || self.sandbox.zygote_spec(&dirs);
            self.sandbox.pool().learn(&workspace, &imported, spec);
        }
        response.artifacts = artifacts;
        response.installed_packages = installed;
        response.duration_ms = started.elapsed().as_millis() as u64;
        response.workspace_id = workspace;
        tracing::info!(
            workspace = %response.workspace_id,
            success = response.success,
            timed_out = response.timed_out,
            duration_ms = response.duration_ms,
            "execution finished"
        );
        Ok(response)
    }

    /// Under the workspace lock: the venv, created if needed, with every missing import
    /// and requirement installed. Returns the venv and what was installed.
    async fn prepare_venv(
        &self,
        workspace: &str,
        requirements: &[Requirement],
        imported: Vec<String>,
    ) -> Result<(Venv, Vec<String>)> {
        let _guard = self.venvs.lock(workspace).await;
        let venv = self.venvs.ensure(workspace).await.map_err(venv_error)?;
        if imported.is_empty() && requirements.is_empty() {
            return Ok((venv, Vec::new()));
        }
        let site = venv.site_packages.to_string_lossy().into_owned();
        let needs_versions = !requirements.is_empty();
        let (missing, present) = blocking(move || {
            let missing = py::missing_modules(&site, &imported)?;
            // Installed versions matter only when something may be installed.
            let present = if needs_versions || !missing.is_empty() {
                py::distributions(&site)?
            } else {
                Default::default()
            };
            Ok::<_, py::PyFailure>((missing, present))
        })
        .await?
        .map_err(Error::internal)?;
        let specs = imports::plan(requirements, &missing, &present);
        let report = self.install_into(workspace, &venv, &specs).await?;
        Ok((venv, report.installed))
    }

    /// Runs `job` in a fresh run directory (waiting for a free slot first), then keeps
    /// the files it wrote.
    async fn run_and_collect(
        &self,
        job: &Job<'_>,
        workspace: &str,
        warnings: &mut Vec<String>,
    ) -> Result<(Outcome, Vec<Artifact>)> {
        let started = Instant::now();
        let (run_dir, plan) = self.sandbox.prepare(job).await.map_err(Error::internal)?;
        let prepared_at = started.elapsed();
        let outcome = {
            let _slot = self
                .admission
                .enter(workspace)
                .await
                .map_err(|full| match full {
                    Full::Queue => Error::Busy,
                    Full::Workspace => Error::WorkspaceBusy,
                })?;
            self.sandbox
                .run(job, &run_dir, plan)
                .await
                .map_err(Error::internal)?
        };
        let ran_at = started.elapsed();
        let artifacts = self.artifacts.clone();
        let owner = workspace.to_owned();
        let (collected, run_dir) = blocking(move || {
            let collected = match run_dir.work() {
                Ok(work) => artifacts.collect(&owner, &work),
                // Not the server's failure: a process of the workspace replaced it.
                Err(_) => Ok((Vec::new(), vec![WORK_REPLACED.to_owned()])),
            };
            (collected, run_dir)
        })
        .await?;
        tracing::debug!(
            workspace,
            prepare_us = prepared_at.as_micros() as u64,
            admit_and_run_us = (ran_at - prepared_at).as_micros() as u64,
            collect_us = (started.elapsed() - ran_at).as_micros() as u64,
            "run and collect timings"
        );
        // Removing the tree takes a while: after the response, off the async workers.
        tokio::task::spawn_blocking(move || drop(run_dir));
        let (kept, artifact_warnings) = collected.map_err(Error::internal)?;
        warnings.extend(artifact_warnings);
        Ok((outcome, kept))
    }

    pub async fn install(&self, request: InstallRequest) -> Result<InstallResponse> {
        let workspace = workspace_of(request.workspace_id, "workspace_id")?;
        let packages = request.packages.ok_or(Error::MissingField("packages"))?;
        let requirements = parse_requirements(packages)?;
        let specs: Vec<String> = requirements.into_iter().map(|r| r.spec).collect();
        let _guard = self.venvs.lock(&workspace).await;
        let venv = self.venvs.ensure(&workspace).await.map_err(venv_error)?;
        let report = self.install_into(&workspace, &venv, &specs).await?;
        Ok(InstallResponse {
            success: true,
            workspace_id: workspace,
            report,
        })
    }

    /// Installs `specs` into the workspace's venv through the sandbox, and retires the
    /// workspace's zygote when anything changed. The caller holds the workspace's lock.
    async fn install_into(
        &self,
        workspace: &str,
        venv: &Venv,
        specs: &[String],
    ) -> Result<crate::storage::venvs::InstallReport> {
        let scratch = self.artifacts.installs_dir().join(workspace);
        let cache = self.venvs.root().join(".installer-cache").join(workspace);
        let report = self
            .venvs
            .install(venv, specs, |program, args| {
                self.sandbox
                    .install(workspace, venv, &scratch, &cache, program, args)
            })
            .await
            .map_err(venv_error)?;
        if !report.installed.is_empty() {
            self.sandbox.pool().retire(workspace).await;
        }
        Ok(report)
    }

    /// The run's timeout: default 30 s, capped at `PY_TOOL_MAX_TIMEOUT` (with a warning).
    fn timeout(&self, requested: Option<f64>, warnings: &mut Vec<String>) -> Result<Duration> {
        self.timeout_or(requested, Config::DEFAULT_TIMEOUT_SECS, warnings)
    }

    /// A request's `timeout` (`default` seconds when it names none), capped at
    /// `PY_TOOL_MAX_TIMEOUT` (with a warning).
    pub fn timeout_or(
        &self,
        requested: Option<f64>,
        default: f64,
        warnings: &mut Vec<String>,
    ) -> Result<Duration> {
        let seconds = requested.unwrap_or(default);
        if !seconds.is_finite() || seconds <= 0.0 {
            return Err(Error::Invalid(
                "`timeout` must be a positive number of seconds".to_owned(),
            ));
        }
        let max = self.max_timeout as f64;
        if seconds > max {
            warnings.push(format!("timeout {seconds} s was capped at {max} s"));
            return Ok(Duration::from_secs_f64(max));
        }
        Ok(Duration::from_secs_f64(seconds))
    }
}

/// The warning of a run whose working directory was swapped (for a link) while it ran.
const WORK_REPLACED: &str = "the run's working directory was replaced while it ran (by a process of this workspace); \
     no artifacts were kept";

/// Turns the child's outcome into the response (artifacts, installs, timing filled later).
fn shape(outcome: Outcome, limits: &Limits, mut warnings: Vec<String>) -> ExecuteResponse {
    let Outcome {
        stdout,
        stderr,
        truncated,
        timed_out,
        exit_code,
        signal,
        report,
        report_problem,
        disk_filled,
        held: _,
    } = outcome;
    let printed = stdout.trim_end().to_owned();
    let (entry, result, output, error) = match report {
        Some(report) if !timed_out => {
            let (result, output) = if report.entry.kind == "stdout" && report.error.is_none() {
                (Value::String(printed.clone()), printed.clone())
            } else {
                let output = report.output.unwrap_or_else(|| printed.clone());
                (report.result, output)
            };
            (Some(report.entry), result, output, report.error)
        }
        _ => {
            let (kind, message) = if timed_out {
                (
                    "TimeoutError",
                    format!(
                        "the execution did not finish within {} s and was killed",
                        limits.timeout.as_secs_f64()
                    ),
                )
            } else if let Some(signal) = signal {
                ("Killed", sandbox::describe_signal(signal, limits, false))
            } else if let Some(problem) = report_problem {
                ("ResultError", problem)
            } else {
                (
                    "ProcessExit",
                    format!(
                        "the process exited with status {} before returning a result",
                        exit_code.unwrap_or(-1)
                    ),
                )
            };
            let error = ToolError {
                kind: kind.to_owned(),
                message,
                traceback: String::new(),
            };
            (None, Value::Null, String::new(), Some(error))
        }
    };
    if let Some(error) = &error {
        if error.kind == "MemoryError" {
            warnings.push(format!(
                "the memory limit of {} MiB was reached",
                limits.max_mem >> 20
            ));
        }
        if error.message.contains("File too large") {
            warnings.push(format!(
                "a file reached the file size limit of {} MiB",
                crate::isolation::FILE_SIZE_LIMIT >> 20
            ));
        }
    }
    if let Some(size) = disk_filled {
        warnings.push(format!(
            "the run used all of its disk space of {} MiB (PY_TOOL_RUN_DISK)",
            size >> 20
        ));
    }
    if truncated {
        warnings.push(format!(
            "output was cut at {} MiB per stream",
            sandbox::OUTPUT_CAP >> 20
        ));
    }
    ExecuteResponse {
        success: error.is_none() && !timed_out,
        result,
        output,
        stdout,
        stderr,
        error,
        artifacts: Vec::new(),
        installed_packages: Vec::new(),
        warnings,
        duration_ms: 0,
        timed_out,
        truncated,
        entry,
        workspace_id: String::new(),
    }
}

pub(super) fn workspace_of(id: Option<String>, field: &str) -> Result<String> {
    let id = id.unwrap_or_else(|| workspace::DEFAULT_WORKSPACE.to_owned());
    if workspace::is_valid(&id) {
        Ok(id)
    } else {
        Err(Error::Invalid(workspace::invalid_message(field)))
    }
}

fn parse_requirements(specs: Vec<String>) -> Result<Vec<Requirement>> {
    if specs.len() > 100 {
        return Err(Error::Invalid(
            "at most 100 packages per request".to_owned(),
        ));
    }
    specs
        .iter()
        .map(|spec| imports::parse_requirement(spec).map_err(Error::Invalid))
        .collect()
}

fn venv_error(err: VenvError) -> Error {
    match err {
        VenvError::Install(_) => Error::Invalid(err.to_string()),
        VenvError::Internal(detail) => Error::Internal(detail),
    }
}

/// Runs blocking work (the interpreter, file copies) off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(Error::internal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits() -> Limits {
        Limits::for_tests()
    }

    fn outcome(report: Option<sandbox::Report>) -> Outcome {
        Outcome {
            stdout: "printed\n".to_owned(),
            stderr: String::new(),
            truncated: false,
            timed_out: false,
            exit_code: Some(0),
            signal: None,
            report,
            report_problem: None,
            disk_filled: None,
            held: None,
        }
    }

    fn report(
        kind: &str,
        result: Value,
        output: Option<&str>,
        error: Option<ToolError>,
    ) -> sandbox::Report {
        sandbox::Report {
            entry: Entry {
                kind: kind.to_owned(),
                name: None,
            },
            result,
            output: output.map(str::to_owned),
            error,
            layers: None,
        }
    }

    #[test]
    fn printed_output_is_the_result_of_a_stdout_entry() {
        let response = shape(
            outcome(Some(report("stdout", Value::Null, None, None))),
            &limits(),
            vec![],
        );
        assert!(response.success);
        assert_eq!(response.result, json!("printed"));
        assert_eq!(response.output, "printed");
    }

    #[test]
    fn a_function_returning_none_outputs_what_it_printed() {
        let response = shape(
            outcome(Some(report("function", Value::Null, None, None))),
            &limits(),
            vec![],
        );
        assert_eq!(response.result, Value::Null);
        assert_eq!(response.output, "printed");
    }

    #[test]
    fn timeouts_signals_and_exits_become_errors() {
        let mut timed_out = outcome(None);
        timed_out.timed_out = true;
        timed_out.signal = Some(libc::SIGKILL);
        let response = shape(timed_out, &limits(), vec![]);
        assert!(!response.success && response.timed_out);
        assert_eq!(
            response.error.map(|e| e.kind),
            Some("TimeoutError".to_owned())
        );

        let mut killed = outcome(None);
        killed.signal = Some(libc::SIGXFSZ);
        let error = shape(killed, &limits(), vec![]).error;
        assert!(error.is_some_and(|e| e.kind == "Killed" && e.message.contains("file size limit")));

        let mut exited = outcome(None);
        exited.exit_code = Some(3);
        let error = shape(exited, &limits(), vec![]).error;
        assert!(error.is_some_and(|e| e.kind == "ProcessExit" && e.message.contains("status 3")));
    }

    #[test]
    fn memory_and_file_size_errors_add_warnings() {
        let memory = ToolError {
            kind: "MemoryError".to_owned(),
            message: String::new(),
            traceback: String::new(),
        };
        let response = shape(
            outcome(Some(report("function", Value::Null, None, Some(memory)))),
            &limits(),
            vec![],
        );
        assert!(!response.success);
        assert_eq!(
            response.warnings,
            vec!["the memory limit of 1024 MiB was reached".to_owned()]
        );
    }
}
