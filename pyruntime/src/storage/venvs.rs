//! Per-workspace virtual environments: creation on demand and package installation.
//!
//! `Venvs` owns `PY_TOOL_VENVS/<workspace>/` and one async lock per workspace, so two
//! requests never create or install into the same venv at once. Venvs are created here
//! (`uv venv`, which runs no package code); installs are planned here and run in a
//! confined child (`Sandbox::install`: the build code of a source distribution is as
//! untrusted as tool code): `uv pip install --link-mode=copy` (a write through one venv
//! can never reach a cache) and `--compile-bytecode` (children run with
//! `PYTHONDONTWRITEBYTECODE`); without uv, `python -m venv --without-pip` and the base
//! interpreter's `pip --python`. What was installed is measured by comparing the venv's
//! distributions before and after, which works the same for both installers.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::process::Command;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::analysis::py;

/// Longest an installer may run before it is killed.
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(900);

#[derive(Debug, thiserror::Error)]
pub enum VenvError {
    /// The installer refused (unknown package, unsatisfiable constraint): the client's
    /// problem, reported with the installer's own words.
    #[error("package installation failed: {0}")]
    Install(String),
    /// Creating or inspecting the venv failed: the server's problem.
    #[error("{0}")]
    Internal(String),
}

/// The tool that creates venvs and installs into them.
#[derive(Debug, Clone)]
pub enum Installer {
    Uv { path: PathBuf, version: String },
    Pip,
}

/// One workspace's environment.
#[derive(Debug, Clone)]
pub struct Venv {
    pub dir: PathBuf,
    pub python: PathBuf,
    pub site_packages: PathBuf,
}

/// What one install did.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct InstallReport {
    /// `name==version` of every distribution added or changed.
    pub installed: Vec<String>,
    /// Requested specifiers whose distribution was present and left unchanged.
    #[serde(rename = "alreadySatisfied")]
    pub already_satisfied: Vec<String>,
}

pub struct Venvs {
    root: PathBuf,
    base_python: PathBuf,
    installer: Installer,
    /// One lock per workspace name, created on first use and kept (a few bytes each).
    locks: Mutex<HashMap<String, Arc<AsyncMutex<()>>>>,
}

impl Venvs {
    pub fn new(root: PathBuf, base_python: PathBuf, installer: Installer) -> Self {
        Self {
            root,
            base_python,
            installer,
            locks: Mutex::new(HashMap::new()),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn installer(&self) -> &Installer {
        &self.installer
    }

    /// Number of workspaces that have a venv.
    pub fn count(&self) -> usize {
        std::fs::read_dir(&self.root).map_or(0, |entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .filter(|e| e.path().join("pyvenv.cfg").is_file())
                .count()
        })
    }

    /// Waits for the workspace's lock. Hold it across `ensure` and `install`.
    pub async fn lock(&self, workspace: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self
                .locks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            locks.entry(workspace.to_owned()).or_default().clone()
        };
        lock.lock_owned().await
    }

    /// The workspace's venv if it exists (no lock needed to read it).
    pub fn existing(&self, workspace: &str) -> Option<Venv> {
        let dir = self.root.join(workspace);
        let python = dir.join("bin").join("python");
        if !python.exists() {
            return None;
        }
        let site_packages = find_site_packages(&dir)?;
        Some(Venv {
            dir,
            python,
            site_packages,
        })
    }

    /// The workspace's venv, created if absent. The caller holds `lock(workspace)`.
    pub async fn ensure(&self, workspace: &str) -> Result<Venv, VenvError> {
        if let Some(venv) = self.existing(workspace) {
            return Ok(venv);
        }
        let dir = self.root.join(workspace);
        tokio::fs::create_dir_all(&self.root).await.map_err(|e| {
            VenvError::Internal(format!("cannot create {}: {e}", self.root.display()))
        })?;
        if dir.exists() {
            // A half-created venv from an interrupted run: start over.
            tokio::fs::remove_dir_all(&dir).await.map_err(|e| {
                VenvError::Internal(format!("cannot remove {}: {e}", dir.display()))
            })?;
        }
        let mut command = match &self.installer {
            Installer::Uv { path, .. } => {
                let mut c = installer_command(path);
                c.args([
                    "venv",
                    "--no-project",
                    "--no-progress",
                    "--quiet",
                    "--python",
                ])
                .arg(&self.base_python)
                .arg(&dir);
                c
            }
            Installer::Pip => {
                let mut c = installer_command(&self.base_python);
                c.args(["-m", "venv", "--without-pip"]).arg(&dir);
                c
            }
        };
        tracing::info!(workspace, "creating virtual environment");
        run_installer(&mut command).await.map_err(|e| {
            VenvError::Internal(format!("creating the venv of {workspace} failed: {e}"))
        })?;
        self.existing(workspace).ok_or_else(|| {
            VenvError::Internal(format!(
                "the venv of {workspace} has no interpreter after creation"
            ))
        })
    }

    /// The installer's command line for `specs` into `venv`: program and arguments.
    pub fn install_command(&self, venv: &Venv, specs: &[String]) -> (PathBuf, Vec<String>) {
        let text = |p: &Path| p.to_string_lossy().into_owned();
        let (program, mut args) = match &self.installer {
            Installer::Uv { path, .. } => (
                path.clone(),
                vec![
                    "pip".to_owned(),
                    "install".to_owned(),
                    "--link-mode=copy".to_owned(),
                    "--compile-bytecode".to_owned(),
                    "--no-progress".to_owned(),
                    "--python".to_owned(),
                    text(&venv.python),
                ],
            ),
            Installer::Pip => (
                self.base_python.clone(),
                vec![
                    "-m".to_owned(),
                    "pip".to_owned(),
                    "--python".to_owned(),
                    text(&venv.python),
                    "install".to_owned(),
                    "--disable-pip-version-check".to_owned(),
                    "--no-input".to_owned(),
                ],
            ),
        };
        args.extend(specs.iter().cloned());
        (program, args)
    }

    /// Installs `specs` (validated requirement specifiers) into `venv`, running the
    /// installer through `run` (the sandbox: installs run build code of packages).
    /// The caller holds the workspace's lock.
    pub async fn install<F, Fut>(
        &self,
        venv: &Venv,
        specs: &[String],
        run: F,
    ) -> Result<InstallReport, VenvError>
    where
        F: FnOnce(PathBuf, Vec<String>) -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        if specs.is_empty() {
            return Ok(InstallReport::default());
        }
        let before = distributions(&venv.site_packages).await?;
        let (program, args) = self.install_command(venv, specs);
        tracing::info!(venv = %venv.dir.display(), ?specs, "installing packages");
        run(program, args).await.map_err(VenvError::Install)?;
        let after = distributions(&venv.site_packages).await?;

        let installed: Vec<String> = after
            .iter()
            .filter(|(name, version)| before.get(*name) != Some(*version))
            .map(|(name, version)| format!("{name}=={version}"))
            .collect();
        let already_satisfied = specs
            .iter()
            .filter(|spec| {
                crate::analysis::imports::parse_requirement(spec).is_ok_and(|r| {
                    before.contains_key(&r.name) && before.get(&r.name) == after.get(&r.name)
                })
            })
            .cloned()
            .collect();
        Ok(InstallReport {
            installed,
            already_satisfied,
        })
    }
}

/// Picks the installer: an explicit `PY_TOOL_UV`, else `uv` on PATH, else beside the
/// interpreter (a wheel install puts it there); `Pip` when none runs or when
/// `PY_TOOL_UV=none`.
pub async fn detect_installer(explicit: Option<&Path>, scripts_dir: &str) -> Installer {
    if explicit.is_some_and(|path| path == Path::new("none")) {
        return Installer::Pip;
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(path) = explicit {
        candidates.push(path.to_owned());
    }
    if let Some(paths) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&paths).map(|dir| dir.join("uv")));
    }
    if !scripts_dir.is_empty() {
        candidates.push(Path::new(scripts_dir).join("uv"));
    }
    for path in candidates {
        if !path.is_file() {
            continue;
        }
        let output = installer_command(&path).arg("--version").output().await;
        if let Ok(output) = output
            && output.status.success()
        {
            let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
            return Installer::Uv { path, version };
        }
    }
    Installer::Pip
}

/// `lib/python*/site-packages` of a venv, every component a real directory: the venv
/// belongs to the workspace's install ids, and the server's analysis must not be led
/// anywhere else by a link.
fn find_site_packages(venv_dir: &Path) -> Option<PathBuf> {
    let real_dir = |path: &Path| std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    let lib = venv_dir.join("lib");
    if !real_dir(&lib) {
        return None;
    }
    std::fs::read_dir(&lib)
        .ok()?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| entry.path().join("site-packages"))
        .find(|path| real_dir(path))
}

async fn distributions(site_packages: &Path) -> Result<BTreeMap<String, String>, VenvError> {
    let site = site_packages.to_string_lossy().into_owned();
    tokio::task::spawn_blocking(move || py::distributions(&site))
        .await
        .map_err(|e| VenvError::Internal(e.to_string()))?
        .map_err(|e| VenvError::Internal(e.to_string()))
}

/// An installer process: the server's environment without its secrets and without a
/// virtualenv of the caller's, no downloads of interpreters.
fn installer_command(program: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .env_remove("PY_TOOL_API_KEY")
        .env_remove("VIRTUAL_ENV")
        .env_remove("PYTHONHOME")
        .env_remove("PYTHONPATH")
        .env("UV_PYTHON_DOWNLOADS", "never")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Runs an installer to completion; on failure returns the tail of its output.
async fn run_installer(command: &mut Command) -> Result<(), String> {
    let output = tokio::time::timeout(INSTALL_TIMEOUT, command.output())
        .await
        .map_err(|_| {
            format!(
                "the installer did not finish within {} s",
                INSTALL_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| format!("the installer could not be started: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let text = if stderr.trim().is_empty() {
        stdout
    } else {
        stderr
    };
    Err(tail(text.trim(), 2000))
}

/// The last `max` bytes of `text`, cut at a character boundary.
pub fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_end_on_char_boundaries() {
        assert_eq!(tail("short", 10), "short");
        assert_eq!(tail("abcdef", 3), "…def");
        assert_eq!(tail("ééé", 3), "…é");
    }
}
