//! Per-run cgroups: a pids and a memory limit that hold for every process of a run, root
//! included, nested under the runtime's own cgroup.
//!
//! `Cgroups::detect` (at start) finds where the runtime sits: cgroup v1 `pids` and
//! `memory` hierarchies (this machine kind: a hybrid with the controllers on v1) or a v2
//! hierarchy with both controllers delegated, and creates `weir-pyruntime-<pid>/` under
//! its own cgroup there. `spec` tells a zygote where to make one child cgroup per run
//! with `pids.max` and the memory limit (`CgroupSpec::place`, before the run's first
//! process is released); the server adopts the run's cgroups when the run starts, and
//! `RunCgroup`'s drop removes the directories once the run is gone. Without either, runs keep only their rlimits and the layer says why.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Layer;

/// Tasks (processes and threads) one run may have at once.
pub const PIDS_MAX: u64 = 256;

#[derive(Debug)]
enum Kind {
    V1 { pids: PathBuf, memory: PathBuf },
    V2 { dir: PathBuf },
    None { reason: String },
}

/// The runtime's own parent cgroup(s) for runs.
#[derive(Debug)]
pub struct Cgroups {
    kind: Kind,
}

/// One run's cgroup directories, removed on drop.
#[derive(Debug)]
pub struct RunCgroup {
    dirs: Vec<PathBuf>,
}

impl RunCgroup {
    /// Kills every process still in the run's cgroups.
    pub fn kill_all(&self) {
        kill_in(&self.dirs);
    }
}

/// Kills every process in the cgroups `dirs`.
pub fn kill_in(dirs: &[PathBuf]) {
    for dir in dirs {
        let kill = dir.join("cgroup.kill");
        if kill.exists() {
            let _ = std::fs::write(&kill, "1");
            continue;
        }
        let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
            continue;
        };
        for pid in text.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Kills every process in the cgroup trees `dirs`, subtrees included: `cgroup.kill`
/// where the kernel has it, else each process listed (cgroup v1). Server side, on
/// directories the server created (in cgroupfs, which holds no symbolic links).
pub fn kill_trees(dirs: &[PathBuf]) {
    for dir in dirs {
        if dir.join("cgroup.kill").exists() {
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
            continue;
        }
        kill_in(std::slice::from_ref(dir));
        kill_trees(&subdirs(dir));
    }
}

/// The cgroups directly below `dir` (none when it is unreadable or gone).
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// Moves process `pid` (the server's own child, not yet running anything of a
/// workspace) into each of `dirs`. Server side.
pub fn place(pid: u32, dirs: &[PathBuf]) -> io::Result<()> {
    for dir in dirs {
        std::fs::write(dir.join("cgroup.procs"), pid.to_string())?;
    }
    Ok(())
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        let dirs = std::mem::take(&mut self.dirs);
        if dirs.is_empty() {
            return;
        }
        // Removal may wait for the run's last processes: never on an async worker.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn_blocking(move || remove(&dirs));
            }
            Err(_) => remove(&dirs),
        }
    }
}

/// Removes run cgroup directories (and any cgroup left below them, deepest first),
/// retrying while their last processes leave.
fn remove(dirs: &[PathBuf]) {
    for dir in dirs {
        remove(&subdirs(dir));
        for attempt in 0..50 {
            match std::fs::remove_dir(dir) {
                Ok(()) => break,
                Err(err) if err.kind() == io::ErrorKind::NotFound => break,
                Err(err) if attempt == 49 => {
                    tracing::warn!(dir = %dir.display(), %err, "cannot remove a run's cgroup");
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
    }
}

impl Cgroups {
    /// Finds the runtime's cgroups and creates its parent directory for runs.
    pub fn detect() -> Self {
        let kind = match detect_kind() {
            Ok(kind) => kind,
            Err(reason) => Kind::None { reason },
        };
        Self { kind }
    }

    /// The layer as `/tools/health` reports it.
    pub fn layer(&self) -> Layer {
        match &self.kind {
            Kind::V1 { .. } => Layer::enforced(format!(
                "cgroup v1 pids (max {PIDS_MAX}) and memory controllers, one cgroup per run \
                 under the runtime's own"
            )),
            Kind::V2 { .. } => Layer::enforced(format!(
                "cgroup v2 pids (max {PIDS_MAX}) and memory, one cgroup per run under the \
                 runtime's own"
            )),
            Kind::None { reason } => Layer::unavailable(format!(
                "{reason}; runs are limited by rlimits only (RLIMIT_NPROC, RLIMIT_AS)"
            )),
        }
    }

    /// What a zygote needs to create one cgroup per run itself: the parent directories
    /// and the limit files to write in each child; `None` without cgroups.
    pub fn spec(&self, memory_bytes: u64) -> Option<CgroupSpec> {
        let parents = match &self.kind {
            Kind::None { .. } => return None,
            Kind::V1 { pids, memory } => vec![
                (
                    pids.clone(),
                    vec![("pids.max".to_owned(), PIDS_MAX.to_string())],
                ),
                (
                    memory.clone(),
                    vec![("memory.limit_in_bytes".to_owned(), memory_bytes.to_string())],
                ),
            ],
            Kind::V2 { dir } => vec![(
                dir.clone(),
                vec![
                    ("pids.max".to_owned(), PIDS_MAX.to_string()),
                    ("memory.max".to_owned(), memory_bytes.to_string()),
                    ("memory.swap.max".to_owned(), "0".to_owned()),
                ],
            )],
        };
        Some(CgroupSpec { parents })
    }
}

/// Where and how a zygote creates per-run cgroups (sent in its setup).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CgroupSpec {
    /// Parent directory → limit files (name, value) of each child.
    pub parents: Vec<(PathBuf, Vec<(String, String)>)>,
}

impl CgroupSpec {
    /// Creates child `name` under every parent with its limits; the run's first process
    /// then joins it itself (`join`). Zygote side; on error, whatever was created is
    /// removed.
    pub fn create(&self, name: &str) -> io::Result<RunCgroup> {
        let run = RunCgroup { dirs: Vec::new() };
        let mut run = run;
        for (parent, files) in &self.parents {
            let dir = parent.join(name);
            std::fs::create_dir(&dir)?;
            run.dirs.push(dir.clone());
            for (file, value) in files {
                match std::fs::write(dir.join(file), value) {
                    Ok(()) => {}
                    // memory.swap.max is absent without swap accounting: not a failure.
                    Err(_) if file == "memory.swap.max" => {}
                    Err(err) => return Err(err),
                }
            }
        }
        Ok(run)
    }
}

/// Whether no process is left in any of `dirs` (then a new run may use them).
pub fn is_empty(dirs: &[PathBuf]) -> bool {
    dirs.iter().all(|dir| {
        std::fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|procs| procs.trim().is_empty())
    })
}

/// Moves the calling process into each of `dirs` (a cgroup v1 attach waits for an RCU
/// grace period: done by the run's own process, it never holds up its zygote).
pub fn join(dirs: &[PathBuf]) -> io::Result<()> {
    for dir in dirs {
        std::fs::write(dir.join("cgroup.procs"), "0")?;
    }
    Ok(())
}

impl RunCgroup {
    /// The cgroups a zygote created for a run (named in its `Started` event).
    pub fn adopt(dirs: Vec<PathBuf>) -> Self {
        Self { dirs }
    }

    /// The run's cgroup directories.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Hands the directories over (to the server) instead of removing them on drop.
    pub fn into_dirs(mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.dirs)
    }
}

/// Parent directories `weir-pyruntime-<pid>` under the runtime's own cgroups.
fn detect_kind() -> Result<Kind, String> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|err| format!("cannot read /proc/self/cgroup: {err}"))?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|err| format!("cannot read /proc/self/mountinfo: {err}"))?;
    let name = format!("weir-pyruntime-{}", std::process::id());
    let v1 = |controller: &str| -> Option<PathBuf> {
        let path = own.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == controller)
                .then(|| path.to_owned())
        })?;
        let mount = mounts.lines().find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut fs = right.split_whitespace();
            let (fstype, _, options) = (fs.next()?, fs.next()?, fs.next()?);
            (fstype == "cgroup" && options.split(',').any(|o| o == controller))
                .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
        })?;
        Some(mount.join(path.trim_start_matches('/')))
    };
    let mut problems = Vec::new();
    if let (Some(pids), Some(memory)) = (v1("pids"), v1("memory")) {
        let (pids, memory) = (pids.join(&name), memory.join(&name));
        match make_parent(&pids).and_then(|()| make_parent(&memory)) {
            Ok(()) => return Ok(Kind::V1 { pids, memory }),
            Err(err) => problems.push(format!("cgroup v1 pids/memory not writable: {err}")),
        }
    } else {
        problems.push("no cgroup v1 pids and memory hierarchies".to_owned());
    }
    let v2_path = own
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::to_owned);
    let v2_mount = mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2")
            .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    });
    if let (Some(path), Some(mount)) = (v2_path, v2_mount) {
        let own_dir = mount.join(path.trim_start_matches('/'));
        let controllers =
            std::fs::read_to_string(own_dir.join("cgroup.controllers")).unwrap_or_default();
        let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
        if has("pids") && has("memory") {
            let dir = own_dir.join(&name);
            let enabled = make_parent(&dir)
                .and_then(|()| std::fs::write(dir.join("cgroup.subtree_control"), "+pids +memory"));
            match enabled {
                Ok(()) => return Ok(Kind::V2 { dir }),
                Err(err) => problems.push(format!("cgroup v2 not delegated to the runtime: {err}")),
            }
        } else {
            problems.push(format!(
                "cgroup v2 at {} has no pids and memory controllers",
                own_dir.display()
            ));
        }
    }
    Err(problems.join("; "))
}

/// Removes the run cgroups of runtimes that are gone (`weir-pyruntime-<pid>` with no such
/// process): a runtime killed mid-run, or run cgroups whose removal was cut short by a
/// shutdown. Whatever is still in them (a zygote or run that outlived its runtime) is
/// killed first.
fn sweep_stale(parent_of_ours: &Path) {
    let Ok(entries) = std::fs::read_dir(parent_of_ours) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("weir-pyruntime-") else {
            continue;
        };
        if Path::new("/proc").join(pid).exists() {
            continue;
        }
        let stale = [entry.path()];
        kill_trees(&stale);
        remove(&stale);
    }
}

fn make_parent(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent() {
        sweep_stale(parent);
    }
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        let dirs = match &self.kind {
            Kind::V1 { pids, memory } => vec![pids.clone(), memory.clone()],
            Kind::V2 { dir } => vec![dir.clone()],
            Kind::None { .. } => return,
        };
        for dir in dirs {
            let _ = std::fs::remove_dir(dir);
        }
    }
}
