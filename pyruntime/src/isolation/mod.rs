//! OS isolation of one tool run: what each run is confined by, and how each layer reports
//! itself.
//!
//! A run is applied its layers in the child, before any user code runs, in this order:
//! namespaces (`namespaces`: user, pid, ipc, uts, mount, and network when it is denied),
//! the file-system view (`mounts`: read-only system, interpreter and venv; writable run
//! directories and the workspace's artifact directory; a `/proc` of the run's own pid
//! namespace), the run's unprivileged ids, rlimits, Landlock (`landlock`), and last a
//! seccomp denylist with no_new_privs (`seccomp`). Per-run cgroups (`cgroups`) are set up
//! by the server before the child is released. Every layer reports `enforced`, `partial`
//! or `unavailable` with a reason, and a layer that failed is reported, never claimed.
//! The fork and the order of calls live in `zygote`; this module owns the plan a run is
//! given (`Plan`) and the report it gives back (`Layers`).

pub mod cgroups;
pub mod disk;
pub mod landlock;
pub mod mounts;
pub mod namespaces;
pub mod network;
pub mod seccomp;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use network::NetworkMode;

/// Uid (and gid) a run has inside its user namespace when the runtime runs as root: an
/// ordinary unprivileged id, mapped to the workspace's own range outside.
pub const RUN_ID_INSIDE: u32 = 1000;
/// Uid (and gid) of the workspace's package installs: the owner of its venv, which runs
/// (`RUN_ID_INSIDE`) can read but not change.
pub const INSTALL_ID_INSIDE: u32 = 2000;
/// Size of the id range mapped per workspace (as root).
pub const ID_RANGE: u32 = 65536;
/// First outside id of the workspace ranges, above every id a distribution hands out.
const ID_BASE: u32 = 0x0010_0000;
/// Number of workspace ranges (they end below 2^32 - 1, the invalid id).
const ID_SLOTS: u32 = 0xF000;

/// How far one layer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Enforced,
    Partial,
    Unavailable,
}

/// One layer's state with the reason when it is not fully enforced (or what it covers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layer {
    pub state: State,
    pub detail: String,
}

impl Layer {
    pub fn enforced(detail: impl Into<String>) -> Self {
        Self {
            state: State::Enforced,
            detail: detail.into(),
        }
    }

    pub fn partial(detail: impl Into<String>) -> Self {
        Self {
            state: State::Partial,
            detail: detail.into(),
        }
    }

    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self {
            state: State::Unavailable,
            detail: detail.into(),
        }
    }
}

impl Default for Layer {
    fn default() -> Self {
        Self::unavailable("not applied")
    }
}

/// The layers a child applied to itself, reported with every run (and by the start-up
/// probe, which is what `/tools/health` shows).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layers {
    /// user, pid, ipc, uts and mount namespaces.
    pub namespaces: Layer,
    /// The run's view of the file system (mount namespace + pivot_root).
    pub filesystem: Layer,
    /// Network: a namespace with loopback only when denied, the host's when allowed.
    pub network: Layer,
    pub landlock: Layer,
    pub seccomp: Layer,
    /// The run's ids: an unprivileged uid/gid, no capabilities.
    pub identity: Layer,
}

impl Layers {
    /// `(name, layer)` for every layer, in the order they are applied.
    pub fn iter(&self) -> [(&'static str, &Layer); 6] {
        [
            ("namespaces", &self.namespaces),
            ("filesystem", &self.filesystem),
            ("network", &self.network),
            ("identity", &self.identity),
            ("landlock", &self.landlock),
            ("seccomp", &self.seccomp),
        ]
    }

    /// The first layer that is not enforced, as `name: detail`.
    pub fn first_missing(&self) -> Option<String> {
        self.iter()
            .into_iter()
            .find(|(_, layer)| layer.state != State::Enforced)
            .map(|(name, layer)| format!("{name}: {}", layer.detail))
    }
}

/// The ids a workspace's runs have outside their user namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ids {
    /// First id of the range mapped to 0.. inside (root), or the runtime's own uid.
    pub base_uid: u32,
    pub base_gid: u32,
    /// Whether a whole range is mapped (the runtime runs as root) or only its own ids.
    pub range: bool,
    /// The id the child takes inside the range (`RUN_ID_INSIDE` or `INSTALL_ID_INSIDE`).
    pub inside: u32,
}

impl Ids {
    /// The ids of `workspace`: a range of its own when the runtime is root, else the
    /// runtime's own ids (the only ones an unprivileged process may map).
    pub fn for_workspace(workspace: &str) -> Self {
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        if uid != 0 {
            return Self {
                base_uid: uid,
                base_gid: gid,
                range: false,
                inside: RUN_ID_INSIDE,
            };
        }
        let base = ID_BASE + (fnv1a(workspace.as_bytes()) % ID_SLOTS) * ID_RANGE;
        Self {
            base_uid: base,
            base_gid: base,
            range: true,
            inside: RUN_ID_INSIDE,
        }
    }

    /// The same workspace's ids for its package installs.
    pub fn for_install(self) -> Self {
        Self {
            inside: INSTALL_ID_INSIDE,
            ..self
        }
    }

    /// The uid that owns what a run writes, seen from outside.
    pub fn run_uid(&self) -> u32 {
        if self.range {
            self.base_uid + self.inside
        } else {
            self.base_uid
        }
    }

    pub fn run_gid(&self) -> u32 {
        if self.range {
            self.base_gid + self.inside
        } else {
            self.base_gid
        }
    }
}

/// FNV-1a: a stable hash (the std hasher is randomised per process).
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |hash, &byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

/// The rlimits of a run (the existing ones, for root too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rlimits {
    pub cpu_secs: u64,
    pub address_space: u64,
    pub file_size: u64,
    pub processes: u64,
}

/// RLIMIT_FSIZE: the largest file a run may write.
pub const FILE_SIZE_LIMIT: u64 = 100 << 20;
/// RLIMIT_NPROC: processes (threads included) of the run's uid. Runs never have root's
/// exemption: they run as the workspace's unprivileged ids.
pub const PROCESS_LIMIT: u64 = 1024;
/// `RLIM_INFINITY`.
pub const UNLIMITED: u64 = u64::MAX;

/// Below a run's (or a zygote's) directory: where its own writable directories are, on
/// one file system (the run's tmpfs, see `disk`).
pub const SPACE: &str = "space";
/// A run's own writable directories, in `SPACE`: its working directory, home and tmp.
pub const OWN_DIRS: [&str; 3] = ["work", "home", "tmp"];

/// Everything a child needs to confine itself, sent by the server with each run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// The run's private directory: `space/` (its `OWN_DIRS`, on the run's tmpfs when
    /// there is one), `root/` (the mount point of its new root), and the stdout, stderr
    /// and report files (never on the tmpfs: a run that fills it still reports).
    pub run_root: PathBuf,
    /// Read-only inside the run besides the system directories: the interpreter's
    /// installation, the workspace's venv and artifact directory.
    pub read_only: Vec<PathBuf>,
    /// Writable inside the run besides its own directories: the workspace's cache.
    pub writable: Vec<PathBuf>,
    pub ids: Ids,
    /// What the run may reach (`network`).
    pub network: NetworkMode,
    /// The file shown as `/etc/resolv.conf` instead of the host's (a `public` zygote's
    /// view: pasta's DNS forwarder).
    #[serde(default)]
    pub resolv_conf: Option<PathBuf>,
    pub rlimits: Rlimits,
    /// Refuse to run user code when a layer is not enforced.
    pub require: bool,
}

impl Plan {
    pub fn work(&self) -> PathBuf {
        self.run_root.join(SPACE).join("work")
    }

    pub fn home(&self) -> PathBuf {
        self.run_root.join(SPACE).join("home")
    }

    pub fn tmp(&self) -> PathBuf {
        self.run_root.join(SPACE).join("tmp")
    }

    pub fn new_root(&self) -> PathBuf {
        self.run_root.join("root")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_ranges_are_stable_and_below_the_invalid_id() {
        let a = fnv1a(b"default") % ID_SLOTS;
        assert_eq!(a, fnv1a(b"default") % ID_SLOTS);
        let highest = ID_BASE as u64 + (ID_SLOTS as u64 - 1) * ID_RANGE as u64 + ID_RANGE as u64;
        assert!(highest < u32::MAX as u64);
        assert_ne!(fnv1a(b"ws-a") % ID_SLOTS, fnv1a(b"ws-b") % ID_SLOTS);
    }

    #[test]
    fn the_first_missing_layer_is_named() {
        let mut layers = Layers {
            namespaces: Layer::enforced("user, pid"),
            filesystem: Layer::enforced("view"),
            network: Layer::enforced("host"),
            identity: Layer::enforced("uid"),
            landlock: Layer::partial("ABI 3"),
            seccomp: Layer::unavailable("no"),
        };
        assert_eq!(layers.first_missing().as_deref(), Some("landlock: ABI 3"));
        layers.landlock = Layer::enforced("ABI 7");
        layers.seccomp = Layer::enforced("denylist");
        assert_eq!(layers.first_missing(), None);
    }
}
