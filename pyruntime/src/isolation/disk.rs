//! The disk a run can fill: its work, home and tmp live on a tmpfs of `PY_TOOL_RUN_DISK`
//! bytes the server mounts at the run's directory, and the workspace's cache on one of
//! its own; a run that fills its space gets `ENOSPC`, never the host's disk.
//!
//! Mounts made by a root server must not outlive it, nor show on the host: at start the
//! server thread takes a mount namespace of its own (`own_namespace`, before any other
//! thread exists), a slave of the host's, so everything mounted below goes when the server
//! and its zygotes go, however they end. Runs are forked by zygotes started long before
//! the run's tmpfs exists, so the runs directory is made a shared mount (`Disk::new`):
//! a tmpfs mounted below it propagates into each zygote's view (a slave, as its own
//! namespace is a less privileged one), and from there into the run's namespace when the
//! run unshares. Unmounting propagates the same way. Without root none of this is
//! possible: runs write to host directories and the layer says so.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};

use super::Layer;

/// Inodes of one tmpfs (files and directories a run may create).
const INODES: u64 = 65_536;

/// How `own_namespace` went: `Err` says why there is none.
static OWN_NAMESPACE: OnceLock<Result<(), String>> = OnceLock::new();

/// Moves the calling thread into a mount namespace of its own, a slave of the host's:
/// call before the threads that will mount are created (they inherit it). Only root
/// can; otherwise the reason is kept for the layer's report.
pub fn own_namespace() {
    OWN_NAMESPACE.get_or_init(|| {
        if !nix::unistd::geteuid().is_root() {
            return Err("the runtime is not root: runs write to host directories".to_owned());
        }
        unshare(CloneFlags::CLONE_NEWNS)
            .map_err(|err| format!("no mount namespace of the server's own: {err}"))?;
        let none: Option<&str> = None;
        mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_SLAVE, none)
            .map_err(|err| format!("the server's mounts cannot be kept from the host: {err}"))
    });
}

/// The server's disk bounds: where runs and caches get their tmpfs, and how large.
#[derive(Debug)]
pub struct Disk {
    /// `PY_TOOL_RUN_DISK`: bytes of one run's tmpfs, and of a workspace's cache.
    limit: u64,
    /// Caches already on their tmpfs.
    caches: Mutex<HashSet<PathBuf>>,
}

impl Disk {
    /// Makes `runs` (created if needed) a shared mount of its own, so that the tmpfs of a
    /// run reaches the zygotes' views. Blocking. `Err` is the layer to report instead.
    pub fn new(limit: u64, runs: &Path) -> Result<Self, Layer> {
        let owned = OWN_NAMESPACE
            .get()
            .cloned()
            .unwrap_or_else(|| Err("the server has no mount namespace of its own".to_owned()));
        owned.map_err(Layer::unavailable)?;
        share(runs).map_err(|err| {
            Layer::unavailable(format!(
                "the runs directory cannot be shared with zygotes: {err}"
            ))
        })?;
        Ok(Self {
            limit,
            caches: Mutex::default(),
        })
    }

    /// How the layer reads when enforced.
    pub fn layer(&self) -> Layer {
        Layer::enforced(format!(
            "each run's work, home and tmp on a tmpfs of {} MiB ({INODES} inodes); the \
             workspace's cache on one of its own; the artifact directory read-only",
            self.limit >> 20
        ))
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Mounts a run's tmpfs at `dir` (an empty directory the server just made). Blocking.
    pub fn mount_run(&self, dir: &Path) -> std::io::Result<()> {
        mount_tmpfs(dir, self.limit)
    }

    /// Puts the workspace's cache `dir` on its tmpfs, once per server. Blocking; before
    /// the workspace's zygote starts, which sees the cache as it is then.
    pub fn cache(&self, dir: &Path) -> std::io::Result<()> {
        let mut caches = self
            .caches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if caches.contains(dir) {
            return Ok(());
        }
        std::fs::create_dir_all(dir)?;
        mount_tmpfs(dir, self.limit)?;
        caches.insert(dir.to_owned());
        Ok(())
    }
}

/// Detaches the tmpfs at `dir` (its pages are freed once nothing holds it open).
pub fn unmount(dir: &Path) -> std::io::Result<()> {
    umount2(dir, MntFlags::MNT_DETACH).map_err(std::io::Error::from)
}

fn mount_tmpfs(dir: &Path, size: u64) -> std::io::Result<()> {
    mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(format!("size={size},nr_inodes={INODES},mode=0755").as_str()),
    )
    .map_err(std::io::Error::from)
}

/// `dir` bound onto itself, cut from the peer group it came from, then shared: a peer
/// group of its own whose mounts reach the slaves made of it.
fn share(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let none: Option<&str> = None;
    mount(Some(dir), dir, none, MsFlags::MS_BIND, none)?;
    mount(none, dir, none, MsFlags::MS_PRIVATE, none)?;
    Ok(mount(none, dir, none, MsFlags::MS_SHARED, none)?)
}
