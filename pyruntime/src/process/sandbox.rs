//! Runs tool code in a confined child of the workspace's zygote and reports how it ended.
//!
//! Entry point: `Sandbox::run`. Each execution gets a `RunDir` (working directory, home,
//! tmp, the mount points of its file-system view, and the files its stdout, stderr and
//! report go to) owned by the workspace's unprivileged ids, a cgroup with a pids and a
//! memory limit (`isolation::cgroups`, made by the zygote), and an `isolation::Plan` that
//! the child applies
//! to itself before any user code runs: namespaces, its own view of the file system, its
//! ids, rlimits (CPU = timeout + 2 s, address space = `PY_TOOL_MAX_MEM`, file size
//! 100 MiB, core 0, RLIMIT_NPROC 1024), Landlock and seccomp. The child is forked from
//! the workspace's zygote (`pool`), which holds a scrubbed environment (no server
//! secrets). A wall-clock timeout, the end of the run, and dropping the request all kill
//! the run's whole pid namespace. stdout and stderr are kept up to `OUTPUT_CAP` each.
//! `Sandbox::probe` runs one trivial execution at start: the layers it reports are what
//! `/tools/health` shows. `Sandbox::install` runs a package installer confined the same
//! way (a zygote's own view and cgroups are `home`). This module never interprets tool results beyond reading the
//! harness report; collecting artifacts is `artifacts`' job.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::io::Read;

use crate::storage::beneath::HeldDir;

use crate::isolation::cgroups::Cgroups;
use crate::isolation::disk::Disk;
use crate::isolation::network::Egress;
use crate::isolation::{
    FILE_SIZE_LIMIT, Ids, Layer, Layers, NetworkMode, OWN_DIRS, PROCESS_LIMIT, Plan, Rlimits,
    SPACE, UNLIMITED,
};
use crate::process::home::{HomeRecipe, make_home};
use crate::process::pool::{Held, Pool, Zygote, ZygoteSpec};
use crate::process::protocol::{SandboxSetup, Setup};
use crate::storage::venvs::Venv;

/// Bytes of stdout (and, separately, stderr) kept per run.
pub const OUTPUT_CAP: usize = 1 << 20;
/// CPU seconds granted beyond the wall-clock timeout (SPEC.md: timeout + 2 s).
pub const CPU_GRACE_SECS: u64 = 2;
/// Largest harness report read back.
const REPORT_CAP: u64 = 32 << 20;

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

    /// 5 s and 1 GiB, for unit tests.
    #[cfg(test)]
    pub fn for_tests() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            max_mem: 1 << 30,
        }
    }
}

/// A run's private directory tree, removed when dropped. The server reads it only
/// through `held`, opened when the tree was still its own alone (`beneath`).
pub struct RunDir {
    root: PathBuf,
    held: Arc<HeldDir>,
    /// The size of the tmpfs mounted at `root`, if any (see `disk`).
    disk: Option<u64>,
}

impl RunDir {
    /// Creates `<root>/space/{work,home,tmp}` (blocking), `space` a tmpfs of its own
    /// with `disk`; `root`'s parent must exist.
    fn make(root: PathBuf, disk: Option<&Disk>) -> io::Result<Self> {
        std::fs::create_dir(&root)?;
        let held = Arc::new(HeldDir::open(&root)?);
        let space = root.join(SPACE);
        std::fs::create_dir(&space)?;
        // Removed again (unmounted once `disk` is set) when anything below fails.
        let mut run_dir = Self {
            held,
            disk: None,
            root,
        };
        if let Some(disk) = disk {
            disk.mount_run(&space)?;
            run_dir.disk = Some(disk.limit());
        }
        for dir in OWN_DIRS {
            std::fs::create_dir(space.join(dir))?;
        }
        Ok(run_dir)
    }

    /// Creates `<base>/<uuid>/space/{work,home,tmp}` (blocking), on the host's disk.
    pub fn create(base: &Path) -> io::Result<Self> {
        Self::make(base.join(uuid::Uuid::new_v4().to_string()), None)
    }

    /// `create` under `scratch`, made if needed, off the async workers.
    async fn create_in(scratch: &Path) -> io::Result<Self> {
        let scratch = scratch.to_owned();
        tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&scratch)?;
            Self::create(&scratch)
        })
        .await
        .map_err(io::Error::other)?
    }

    /// One of `OWN_DIRS`, by path (for the run's spec).
    fn own(&self, dir: &str) -> PathBuf {
        self.root.join(SPACE).join(dir)
    }

    /// The child's working directory, where every file left is an artifact.
    pub fn work(&self) -> io::Result<HeldDir> {
        self.held.dir(OsStr::new(SPACE))?.dir(OsStr::new("work"))
    }

    /// Reads the run's stdout, stderr and report, and whether it filled its tmpfs (off
    /// the async workers).
    async fn outputs(&self) -> Outputs {
        let (held, disk) = (self.held.clone(), self.disk);
        tokio::task::spawn_blocking(move || Outputs::read(&held, disk))
            .await
            .unwrap_or_else(|err| Outputs {
                report_problem: Some(format!("the run's outputs are unreadable: {err}")),
                ..Outputs::default()
            })
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if self.disk.is_some()
            && let Err(err) = crate::isolation::disk::unmount(&self.root.join(SPACE))
        {
            tracing::warn!(dir = %self.root.display(), %err, "cannot unmount a run's tmpfs");
        }
        if let Err(err) = std::fs::remove_dir_all(&self.root)
            && err.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.root.display(), %err, "cannot remove run directory");
        }
    }
}

/// What to run.
pub struct Job<'a> {
    pub dirs: WorkspaceDirs<'a>,
    pub code: &'a str,
    pub params: &'a Map<String, Value>,
    pub limits: Limits,
}

/// A workspace and its directories as its runs see them.
#[derive(Debug, Clone, Copy)]
pub struct WorkspaceDirs<'a> {
    pub workspace: &'a str,
    pub venv: &'a Venv,
    /// The workspace's artifact directory: read-only in runs (files reach it only through
    /// `collect`, which counts them).
    pub artifacts: &'a Path,
    /// Persistent per-workspace cache (matplotlib's font cache lives here), writable.
    pub cache: &'a Path,
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
    /// The isolation layers the child applied before running the code.
    #[serde(default)]
    pub layers: Option<Layers>,
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
    /// The size of the run's disk space, when the run used all of it.
    pub disk_filled: Option<u64>,
    /// The run's stopped processes, torn down when this outcome is dropped (after its
    /// files are collected).
    pub held: Option<Held>,
}

/// Where runs happen: the zygotes, the cgroups, and the policy every run gets.
pub struct Sandbox {
    pool: Arc<Pool>,
    cgroups: Cgroups,
    /// What runs may reach: `PY_TOOL_NETWORK`, but `deny` where `public` was asked for and
    /// its egress does not work here.
    network: NetworkMode,
    /// `public` mode's egress (pasta and the filter), when it works here.
    egress: Option<Arc<Egress>>,
    /// `PY_TOOL_REQUIRE_ISOLATION=1`: a child refuses to run code when a layer is missing.
    require: bool,
    /// The interpreter's installation, visible read-only in every run.
    interpreter_dirs: Vec<PathBuf>,
    /// `PY_TOOL_MAX_MEM`: also each run's cgroup memory limit.
    max_mem: u64,
    /// Where run directories go (`<runs_root>/<workspace>/<run>`).
    runs_root: PathBuf,
    /// `PY_TOOL_MAX_CONCURRENCY`: how many runs one zygote may have at once.
    runs_at_once: usize,
    /// Set by `probe` when runs get their namespaces and view (see `zygote_views`).
    views: std::sync::atomic::AtomicBool,
    /// Each run's tmpfs and the workspaces' caches (root only).
    disk: Option<Arc<Disk>>,
}

/// What every run gets, from the configuration.
pub struct Policy {
    pub network: NetworkMode,
    pub egress: Option<Arc<Egress>>,
    pub require: bool,
    pub interpreter_dirs: Vec<PathBuf>,
    pub max_mem: u64,
    pub runs_root: PathBuf,
    pub runs_at_once: usize,
    pub disk: Option<Arc<Disk>>,
}

impl Sandbox {
    pub fn new(pool: Arc<Pool>, cgroups: Cgroups, policy: Policy) -> Self {
        let mut sandbox = Self {
            pool,
            cgroups,
            network: policy.network,
            egress: policy.egress,
            require: policy.require,
            interpreter_dirs: policy.interpreter_dirs,
            max_mem: policy.max_mem,
            runs_root: policy.runs_root,
            runs_at_once: policy.runs_at_once,
            views: std::sync::atomic::AtomicBool::new(false),
            disk: policy.disk,
        };
        if sandbox.egress.is_none() {
            sandbox.without_egress();
        }
        sandbox
    }

    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// The cgroup layer (server side).
    pub fn cgroups(&self) -> Layer {
        self.cgroups.layer()
    }

    /// What runs may reach (`public` only where its egress works; see `new`).
    pub fn network(&self) -> NetworkMode {
        self.network
    }

    /// Starts a one-shot zygote without a venv (the probes', an install's) in the home
    /// `recipe` describes.
    async fn start_bare_zygote(
        &self,
        recipe: HomeRecipe,
        env: Vec<(String, String)>,
    ) -> io::Result<Zygote> {
        let (ids, network) = (recipe.ids, recipe.network);
        let home = tokio::task::spawn_blocking(move || make_home(&recipe))
            .await
            .map_err(io::Error::other)??;
        let setup = Setup {
            site_packages: None,
            venv_dir: None,
            executable: None,
            preload: Vec::new(),
            sandbox: SandboxSetup {
                ids,
                network,
                cgroups: home.cgroups.clone(),
                keep_spare: false,
                view: None,
            },
            view: home.view.clone(),
        };
        Zygote::start(self.pool.launcher(), env, &setup, Some(home)).await
    }

    /// Gives up `public` (its zygotes cannot be confined here): runs get `deny`.
    pub fn without_egress(&mut self) {
        self.egress = None;
        if self.network == NetworkMode::Public {
            self.network = NetworkMode::Deny;
        }
    }

    /// The egress of a zygote whose runs are `public`.
    fn egress_for(&self, network: NetworkMode) -> Option<Arc<Egress>> {
        (network == NetworkMode::Public)
            .then(|| self.egress.clone())
            .flatten()
    }

    /// Installs need the internet whatever the mode; never the host: `public` where its
    /// egress works, else (as before `public` existed) the host's network.
    fn install_network(&self) -> NetworkMode {
        if self.egress.is_some() {
            NetworkMode::Public
        } else {
            NetworkMode::Allow
        }
    }

    /// The zygote of a workspace: its venv, its environment, its view (what every run's
    /// plan shows but the run's own directory).
    pub fn zygote_spec<'a>(&self, dirs: &WorkspaceDirs<'a>) -> ZygoteSpec<'a> {
        let limits = Limits {
            timeout: Duration::ZERO,
            max_mem: self.max_mem,
        };
        let template = self.plan_in(
            dirs,
            &limits,
            &self.runs_root.join(dirs.workspace).join("view-template"),
        );
        ZygoteSpec {
            workspace: dirs.workspace,
            venv: dirs.venv,
            env: zygote_env(Some(dirs.venv), dirs.cache),
            home: HomeRecipe {
                runs_dir: self.runs_root.join(dirs.workspace),
                read_only: template.read_only.clone(),
                writable: template.writable.clone(),
                ids: template.ids,
                cgroups: self.cgroups.spec(self.max_mem),
                view: self.zygote_views(),
                runs_at_once: self.runs_at_once,
                network: self.network,
                egress: self.egress_for(self.network),
                disk: self.disk.clone(),
            },
            sandbox: SandboxSetup {
                ids: template.ids,
                network: self.network,
                cgroups: None,
                keep_spare: true,
                // What a spare builds ahead.
                view: self.views_ahead().then_some(template),
            },
        }
    }

    /// Whether zygotes get namespaces and a view of their own: only once the start-up
    /// probe showed that runs get theirs (a kernel that refuses them refuses them to a
    /// zygote too, and the runtime must still start).
    fn zygote_views(&self) -> bool {
        self.views.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The plan of a run of `dirs`' workspace in `run_root`.
    fn plan_in(&self, dirs: &WorkspaceDirs<'_>, limits: &Limits, run_root: &Path) -> Plan {
        let mut read_only = self.interpreter_dirs.clone();
        read_only.push(dirs.venv.dir.clone());
        read_only.push(dirs.artifacts.to_owned());
        Plan {
            run_root: run_root.to_owned(),
            read_only,
            writable: vec![dirs.cache.to_owned()],
            ids: Ids::for_workspace(dirs.workspace),
            network: self.network,
            resolv_conf: None,
            rlimits: Rlimits {
                cpu_secs: limits.cpu_secs(),
                address_space: limits.max_mem,
                file_size: FILE_SIZE_LIMIT,
                processes: PROCESS_LIMIT,
            },
            require: self.require,
        }
    }

    /// Whether runs' views are built ahead by their zygote (`mounts::prepare_view`): where
    /// zygotes get a view of their own (as root, once the probe showed views work). The
    /// server then makes no skeleton for a run.
    fn views_ahead(&self) -> bool {
        self.zygote_views() && nix::unistd::geteuid().is_root()
    }

    /// Creates `job`'s run directory under `runs` with everything its plan needs (one
    /// trip to a blocking thread).
    pub async fn prepare(&self, job: &Job<'_>) -> io::Result<(RunDir, Plan)> {
        let workspace_runs = self.runs_root.join(job.dirs.workspace);
        let root = workspace_runs.join(uuid::Uuid::new_v4().to_string());
        let plan = self.plan_in(&job.dirs, &job.limits, &root);
        let prepared = plan.clone();
        let disk = self.disk.clone();
        let ahead = self.views_ahead();
        let (artifacts, cache) = (job.dirs.artifacts.to_owned(), job.dirs.cache.to_owned());
        tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&workspace_runs)?;
            std::fs::create_dir_all(&artifacts)?;
            if let Some(disk) = &disk {
                // Before the workspace's first zygote, whose view shows what is there.
                disk.cache(&cache)?;
            }
            let run_dir = RunDir::make(root, disk.as_deref())?;
            prepare_dirs(&prepared, !ahead)?;
            Ok::<_, io::Error>(run_dir)
        })
        .await
        .map_err(io::Error::other)?
        .map(|run_dir| (run_dir, plan))
    }

    /// Runs `job` in `run_dir` (from `prepare`) and waits for it (or its timeout).
    pub async fn run(&self, job: &Job<'_>, run_dir: &RunDir, plan: Plan) -> io::Result<Outcome> {
        let spec = json!({
            "code": job.code,
            "params": job.params,
            "home": run_dir.own("home"),
            "tmp": run_dir.own("tmp"),
        });
        let zygote = || self.zygote_spec(&job.dirs);
        let exit = self
            .pool
            .run(job.dirs.workspace, zygote, plan, spec, job.limits.timeout)
            .await?;
        let outputs = run_dir.outputs().await;
        Ok(Outcome {
            stdout: outputs.stdout,
            stderr: outputs.stderr,
            truncated: outputs.truncated,
            timed_out: exit.timed_out,
            exit_code: exit.code,
            signal: exit.signal,
            report: outputs.report,
            report_problem: outputs.report_problem,
            disk_filled: outputs.disk_filled,
            held: Some(exit.held),
        })
    }

    /// Runs `result = 1` in a bare zygote (no venv) and returns the layers it applied:
    /// what this kernel grants, measured rather than assumed.
    pub async fn probe(&self, scratch: &Path) -> io::Result<Layers> {
        let scratch_dir = scratch.to_owned();
        let run_dir = RunDir::create_in(scratch).await?;
        let writable = run_dir.root.join("artifacts");
        let cache = run_dir.root.join("cache");
        let plan = Plan {
            run_root: run_dir.root.clone(),
            read_only: self.interpreter_dirs.clone(),
            writable: vec![writable, cache.clone()],
            ids: Ids::for_workspace("probe"),
            network: self.network,
            resolv_conf: None,
            rlimits: Rlimits {
                cpu_secs: 10,
                address_space: 1 << 30,
                file_size: FILE_SIZE_LIMIT,
                processes: PROCESS_LIMIT,
            },
            require: false,
        };
        let prepared = plan.clone();
        tokio::task::spawn_blocking(move || prepare_dirs(&prepared, true))
            .await
            .map_err(io::Error::other)??;
        let recipe = HomeRecipe {
            runs_dir: scratch_dir.clone(),
            read_only: self.interpreter_dirs.clone(),
            writable: Vec::new(),
            ids: plan.ids,
            cgroups: None,
            view: false,
            runs_at_once: 1,
            network: self.network,
            egress: None,
            disk: None,
        };
        let zygote = self
            .start_bare_zygote(recipe, zygote_env(None, &cache))
            .await?;
        let spec = json!({
            "code": "result = 1",
            "params": {},
            "home": run_dir.own("home"),
            "tmp": run_dir.own("tmp"),
        });
        let exit = Pool::run_on(Arc::new(zygote), plan, spec, Duration::from_secs(30)).await?;
        let Outputs {
            report,
            report_problem: problem,
            stderr,
            ..
        } = run_dir.outputs().await;
        tokio::task::spawn_blocking(move || drop(run_dir));
        match report.and_then(|r| r.layers) {
            Some(layers) => {
                use crate::isolation::State;
                let views = layers.namespaces.state == State::Enforced
                    && layers.filesystem.state == State::Enforced;
                self.views
                    .store(views, std::sync::atomic::Ordering::Relaxed);
                Ok(layers)
            }
            None => Err(io::Error::other(format!(
                "the isolation probe failed (exit {:?}, signal {:?}): {} {}",
                exit.code,
                exit.signal,
                problem.unwrap_or_default(),
                stderr.trim()
            ))),
        }
    }
}

impl Sandbox {
    /// Starts one confined zygote (no venv, nothing of a workspace imported) and returns
    /// how it confined itself: what every workspace's zygote gets.
    pub async fn probe_zygote(&self, scratch: &Path) -> Layer {
        let ids = Ids::for_workspace("probe");
        let recipe = HomeRecipe {
            runs_dir: scratch.to_owned(),
            read_only: self.interpreter_dirs.clone(),
            writable: Vec::new(),
            ids,
            cgroups: self.cgroups.spec(self.max_mem),
            view: self.zygote_views(),
            runs_at_once: 1,
            network: self.network,
            egress: self.egress_for(self.network),
            disk: self.disk.clone(),
        };
        match self
            .start_bare_zygote(recipe, zygote_env(None, scratch))
            .await
        {
            Ok(zygote) => zygote.confinement.clone(),
            Err(err) => Layer::unavailable(format!("a confined zygote did not start: {err}")),
        }
    }
}

/// Address space, file size and memory of an install are not the tool's limits: wheels
/// hold files beyond 100 MiB and compilers need room.
const INSTALL_MEMORY: u64 = 4 << 30;

impl Sandbox {
    /// Runs an installer (`program` `args`) confined like a run — its namespaces, view,
    /// Landlock and seccomp — as the workspace's install ids, with the network, and with
    /// write access only to the venv and the workspace's installer cache (which runs never
    /// see). On failure returns the installer's last words.
    pub async fn install(
        &self,
        workspace: &str,
        venv: &Venv,
        scratch: &Path,
        installer_cache: &Path,
        program: PathBuf,
        args: Vec<String>,
    ) -> Result<(), String> {
        self.try_install(workspace, venv, scratch, installer_cache, program, args)
            .await
            .map_err(|err| match err {
                InstallFailure::Installer(text) => text,
                InstallFailure::Io(err) => format!("the installer could not run: {err}"),
            })
    }

    async fn try_install(
        &self,
        workspace: &str,
        venv: &Venv,
        scratch: &Path,
        installer_cache: &Path,
        program: PathBuf,
        args: Vec<String>,
    ) -> Result<(), InstallFailure> {
        let program = std::fs::canonicalize(&program)?;
        let program_dir = program
            .parent()
            .map(Path::to_owned)
            .ok_or_else(|| io::Error::other("the installer has no directory"))?;
        let run_dir = RunDir::create_in(scratch).await?;
        let mut read_only = self.interpreter_dirs.clone();
        read_only.push(program_dir);
        read_only.extend(local_find_links());
        let ids = Ids::for_workspace(workspace).for_install();
        let install_network = self.install_network();
        let plan = Plan {
            run_root: run_dir.root.clone(),
            read_only,
            writable: vec![venv.dir.clone(), installer_cache.to_owned()],
            ids,
            network: install_network,
            resolv_conf: None,
            rlimits: Rlimits {
                cpu_secs: crate::storage::venvs::INSTALL_TIMEOUT.as_secs() + CPU_GRACE_SECS,
                address_space: UNLIMITED,
                file_size: UNLIMITED,
                processes: PROCESS_LIMIT,
            },
            require: self.require,
        };
        let prepared = plan.clone();
        tokio::task::spawn_blocking(move || {
            // Everything an install writes belongs to the install ids; a venv made by the
            // server (or by an older version) is handed over once (before prepare_dirs
            // gives the top directories away).
            for dir in &prepared.writable {
                std::fs::create_dir_all(dir)?;
            }
            give_tree(&prepared.writable, prepared.ids)?;
            prepare_dirs(&prepared, true)
        })
        .await
        .map_err(io::Error::other)??;
        let mut exec = vec![program.to_string_lossy().into_owned()];
        exec.extend(args);
        let spec = json!({
            "exec": exec,
            "env": installer_env(venv, &run_dir, installer_cache),
            "home": run_dir.own("home"),
            "tmp": run_dir.own("tmp"),
        });
        let recipe = HomeRecipe {
            runs_dir: run_dir
                .root
                .parent()
                .map(Path::to_owned)
                .unwrap_or_default(),
            read_only: plan.read_only.clone(),
            writable: plan.writable.clone(),
            ids,
            cgroups: self.cgroups.spec(INSTALL_MEMORY),
            view: self.zygote_views(),
            runs_at_once: 1,
            network: install_network,
            egress: self.egress_for(install_network),
            disk: None,
        };
        let zygote = self
            .start_bare_zygote(recipe, zygote_env(None, installer_cache))
            .await?;
        let exit = Pool::run_on(
            Arc::new(zygote),
            plan,
            spec,
            crate::storage::venvs::INSTALL_TIMEOUT,
        )
        .await?;
        let Outputs { stdout, stderr, .. } = run_dir.outputs().await;
        tokio::task::spawn_blocking(move || drop(run_dir));
        if exit.code == Some(0) {
            return Ok(());
        }
        let text = if stderr.trim().is_empty() {
            stdout
        } else {
            stderr
        };
        let text = if exit.timed_out {
            format!(
                "the installer did not finish within {} s",
                crate::storage::venvs::INSTALL_TIMEOUT.as_secs()
            )
        } else if text.trim().is_empty() {
            format!(
                "the installer failed (exit {:?}, signal {:?})",
                exit.code, exit.signal
            )
        } else {
            crate::storage::venvs::tail(text.trim(), 2000)
        };
        Err(InstallFailure::Installer(text))
    }
}

enum InstallFailure {
    Installer(String),
    Io(io::Error),
}

impl From<io::Error> for InstallFailure {
    fn from(err: io::Error) -> Self {
        Self::Io(err)
    }
}

/// The installer's environment: no server secrets; the index, proxy and certificate
/// settings of the server's environment (`UV_*`, `PIP_*`, `*_PROXY`, `SSL_CERT_*`) pass.
fn installer_env(venv: &Venv, run_dir: &RunDir, cache: &Path) -> serde_json::Map<String, Value> {
    let path = |p: &Path| Value::String(p.to_string_lossy().into_owned());
    let mut env = passed_env(|upper| {
        upper.starts_with("UV_") || upper.starts_with("PIP_") || upper == "PYTHONHOME"
    });
    env.insert(
        "PATH".into(),
        Value::String(format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            venv.dir.join("bin").display()
        )),
    );
    env.insert("HOME".into(), path(&run_dir.root.join("home")));
    env.insert("TMPDIR".into(), path(&run_dir.root.join("tmp")));
    env.insert("LANG".into(), "C.UTF-8".into());
    env.insert("UV_CACHE_DIR".into(), path(&cache.join("uv")));
    env.insert("PIP_CACHE_DIR".into(), path(&cache.join("pip")));
    env.insert("UV_PYTHON_DOWNLOADS".into(), "never".into());
    env.insert("UV_NO_PROGRESS".into(), "1".into());
    env
}

/// The server's own environment variables a child that reaches the network may
/// have: proxies and certificate bundles, and those `also` names (given in upper
/// case). Nothing else of the server's environment (its keys) passes.
pub fn passed_env(also: impl Fn(&str) -> bool) -> serde_json::Map<String, Value> {
    let mut env = serde_json::Map::new();
    for (name, value) in std::env::vars() {
        let upper = name.to_ascii_uppercase();
        let passes = upper.ends_with("_PROXY")
            || upper.starts_with("SSL_CERT_")
            || upper == "REQUESTS_CA_BUNDLE"
            || upper == "NODE_EXTRA_CA_CERTS"
            || also(&upper);
        if passes {
            env.insert(name, Value::String(value));
        }
    }
    env
}

/// Local directories named by `UV_FIND_LINKS` / `PIP_FIND_LINKS` (a wheelhouse for
/// machines without an index): visible read-only to installs.
fn local_find_links() -> Vec<PathBuf> {
    ["UV_FIND_LINKS", "PIP_FIND_LINKS"]
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .flat_map(|value| {
            value
                .split([',', ' '])
                .map(|item| PathBuf::from(item.trim().trim_start_matches("file://")))
                .collect::<Vec<_>>()
        })
        .filter(|path| path.is_absolute() && path.is_dir())
        .collect()
}

/// Gives `dirs` (and, when the top is not theirs yet, everything below) to `ids`' ids.
fn give_tree(dirs: &[PathBuf], ids: Ids) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let (uid, gid) = (ids.run_uid(), ids.run_gid());
    fn walk(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
        std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
        let meta = std::fs::symlink_metadata(path)?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(path)? {
                walk(&entry?.path(), uid, gid)?;
            }
        }
        Ok(())
    }
    for dir in dirs {
        if std::fs::metadata(dir)?.uid() != uid {
            walk(dir, uid, gid)?;
        }
    }
    Ok(())
}

/// Creates the writable directories and (with `skeleton`) the mount points of the view, and gives the
/// run's own directories to the workspace's run ids. The run's directory itself is
/// handed to the workspace's first id last: from then on its zygote could change what is
/// inside, so nothing below is touched by path again (links are never followed).
fn prepare_dirs(plan: &Plan, skeleton: bool) -> io::Result<()> {
    for dir in &plan.writable {
        std::fs::create_dir_all(dir)?;
    }
    if skeleton {
        crate::isolation::mounts::skeleton(plan)?;
    }
    if nix::unistd::geteuid().is_root() {
        let (uid, gid) = (Some(plan.ids.run_uid()), Some(plan.ids.run_gid()));
        for dir in [plan.work(), plan.home(), plan.tmp()]
            .iter()
            .chain(&plan.writable)
        {
            std::os::unix::fs::lchown(dir, uid, gid)?;
        }
        // pid 1 (the workspace's first id on the host) creates the run's output files.
        std::os::unix::fs::lchown(
            &plan.run_root,
            Some(plan.ids.base_uid),
            Some(plan.ids.base_gid),
        )?;
    }
    Ok(())
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

/// A zygote's whole environment: only what Python and common libraries need, numeric
/// libraries at one thread (fork safety, a predictable address space), no server
/// secrets. HOME and TMPDIR are set per run by the harness.
fn zygote_env(venv: Option<&Venv>, cache_dir: &Path) -> Vec<(String, String)> {
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let bin = venv
        .map(|v| format!("{}:", path(&v.dir.join("bin"))))
        .unwrap_or_default();
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), format!("{bin}/usr/local/bin:/usr/bin:/bin")),
        ("HOME".into(), "/nonexistent".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("LC_ALL".into(), "C.UTF-8".into()),
        ("PYTHONIOENCODING".into(), "utf-8".into()),
        ("PYTHONUNBUFFERED".into(), "1".into()),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
        ("PYTHONNOUSERSITE".into(), "1".into()),
        ("MPLBACKEND".into(), "Agg".into()),
        ("MPLCONFIGDIR".into(), path(&cache_dir.join("matplotlib"))),
    ];
    for pool in [
        "OPENBLAS_NUM_THREADS",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
    ] {
        env.push((pool.into(), "1".into()));
    }
    if let Some(venv) = venv {
        env.push(("VIRTUAL_ENV".into(), path(&venv.dir)));
    }
    // The binary pins its interpreter's home (main.rs); its zygotes need the same.
    if let Some(home) = std::env::var_os("PYTHONHOME") {
        env.push(("PYTHONHOME".into(), home.to_string_lossy().into_owned()));
    }
    env
}

/// What a run wrote besides its artifacts.
#[derive(Debug, Default)]
struct Outputs {
    stdout: String,
    stderr: String,
    /// stdout or stderr was longer than `OUTPUT_CAP`.
    truncated: bool,
    report: Option<Report>,
    report_problem: Option<String>,
    /// With a tmpfs of `disk` bytes: its size, when the run left no byte or inode free.
    disk_filled: Option<u64>,
}

impl Outputs {
    /// Reads the run's files through its held directory (blocking).
    fn read(dir: &HeldDir, disk: Option<u64>) -> Self {
        let (stdout, out_truncated) = read_capped(dir, "stdout");
        let (stderr, err_truncated) = read_capped(dir, "stderr");
        let (report, report_problem) = read_report(dir);
        let filled = |limit| {
            let space = dir.dir(OsStr::new(SPACE)).ok()?.space().ok()?;
            (space.blocks_available() == 0 || space.files_available() == 0).then_some(limit)
        };
        Self {
            stdout,
            stderr,
            truncated: out_truncated || err_truncated,
            report,
            report_problem,
            disk_filled: disk.and_then(filled),
        }
    }
}

/// Reads at most `OUTPUT_CAP` bytes of a run's output file.
fn read_capped(dir: &HeldDir, name: &str) -> (String, bool) {
    let Ok(file) = dir.file(std::ffi::OsStr::new(name)) else {
        return (String::new(), false);
    };
    let mut bytes = Vec::new();
    if file
        .take(OUTPUT_CAP as u64 + 1)
        .read_to_end(&mut bytes)
        .is_err()
    {
        return (String::new(), false);
    }
    let truncated = bytes.len() > OUTPUT_CAP;
    bytes.truncate(OUTPUT_CAP);
    (String::from_utf8_lossy(&bytes).into_owned(), truncated)
}

/// Reads the harness report.
fn read_report(dir: &HeldDir) -> (Option<Report>, Option<String>) {
    let file = match dir.file(std::ffi::OsStr::new("report.json")) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return (None, None),
        Err(err) => return (None, Some(format!("the run's report is unreadable: {err}"))),
    };
    let mut bytes = Vec::new();
    if let Err(err) = file.take(REPORT_CAP + 1).read_to_end(&mut bytes) {
        return (None, Some(format!("the run's report is unreadable: {err}")));
    }
    if bytes.is_empty() {
        // The run ended before its harness wrote anything.
        return (None, None);
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
        Limits::for_tests()
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
