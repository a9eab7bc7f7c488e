//! The run's view of the file system, built in its own mount namespace.
//!
//! Two halves. `skeleton` runs in the server (as the runtime's user, before the fork):
//! it creates `<run>/root/` with an empty mount point for everything the run will see
//! and the symlinks of the system layout (Debian's `/bin -> usr/bin`). `build_view` runs
//! in the run's pid 1, still holding the capabilities of its new user namespace and the
//! runtime's own uid (so directories such as a 0700 `/root` on the way to the interpreter
//! stay traversable): it binds read-only the system directories (an allowlist:
//! `system_sources`), the interpreter's installation and the workspace's venv, binds read-write the run's own directories and
//! the workspace's artifact directory and cache (each at its real path, so paths mean the
//! same inside and out), the few device nodes programs need, a `/dev/shm`, and a `/proc`
//! of the run's own pid namespace, then pivots into the skeleton, detaches the old root
//! and makes the new one read-only. Nothing else — other workspaces, the server's data
//! directory, other processes — exists inside.
//!
//! In a zygote with a view of its own the work is split so that little of it is left
//! for the run: the next run's pid 1 builds everything but the run's own directories in
//! a tmpfs root and pivots into it while it waits for a run (`prepare_view`, no skeleton
//! from the server), and `finish_view` binds the run's work, home and tmp once the plan
//! is known, detaches the zygote's view and makes the root read-only.

use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::statvfs::{FsFlags, statvfs};

use super::Plan;

/// System directories seen read-only (symlinks are recreated as symlinks): the programs
/// and libraries the interpreter and packages link. Never `/opt`, `/srv`, `/home` or
/// `/var`, where data lives.
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];
/// What of `/etc` a run sees: name resolution, certificates, time zone, the dynamic
/// loader's cache, MIME types and fonts. Not the rest (no accounts, no credentials, no
/// configuration of the host's services).
const ETC: &[&str] = &[
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "crypto-policies",
    "fonts",
    "gai.conf",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "pki",
    "protocols",
    "resolv.conf",
    "services",
    "ssl",
    "timezone",
];

/// Every host path a view shows read-only besides `read_only` (the interpreter's
/// installation and the workspace's venv): the runtime refuses to start when its data
/// would be below one of them.
pub fn system_sources() -> Vec<PathBuf> {
    let system = SYSTEM
        .iter()
        .map(|dir| Path::new(dir).to_owned())
        .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()));
    let etc = ETC
        .iter()
        .map(|name| Path::new("/etc").join(name))
        .filter(|path| path.exists());
    system.chain(etc).collect()
}
/// Device nodes bound from the host's `/dev`.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom"];

/// One bind mount of the view.
#[derive(Debug, Clone)]
struct Bind {
    source: PathBuf,
    target: PathBuf,
    writable: bool,
}

/// Every bind of `plan`'s view, in mount order.
fn binds(plan: &Plan) -> Vec<Bind> {
    let mut binds = shared_binds(plan);
    binds.extend(own_binds(plan));
    binds
}

/// The binds every run of a zygote shares: the system, the interpreter, the venv, the
/// workspace's directories and the devices (none below the run's own directory).
fn shared_binds(plan: &Plan) -> Vec<Bind> {
    let mut binds = Vec::new();
    let mut add = |source: &Path, target: &Path, writable| {
        binds.push(Bind {
            source: source.to_owned(),
            target: target.to_owned(),
            writable,
        });
    };
    let resolv = Path::new("/etc/resolv.conf");
    for path in system_sources() {
        if path != resolv || plan.resolv_conf.is_none() {
            add(&path, &path, false);
        }
    }
    if let Some(own) = &plan.resolv_conf {
        add(own, resolv, false);
    }
    for path in &plan.read_only {
        add(path, path, false);
    }
    for path in &plan.writable {
        add(path, path, true);
    }
    for name in DEVICES {
        let device = Path::new("/dev").join(name);
        add(&device, &device, true);
    }
    binds
}

/// The run's own binds: its work, home and tmp, and its tmp as `/tmp` too.
fn own_binds(plan: &Plan) -> Vec<Bind> {
    let mut binds: Vec<Bind> = [plan.work(), plan.home(), plan.tmp()]
        .into_iter()
        .map(|path| Bind {
            source: path.clone(),
            target: path,
            writable: true,
        })
        .collect();
    if tmp_at_slash_tmp(plan) {
        binds.push(Bind {
            source: plan.tmp(),
            target: PathBuf::from("/tmp"),
            writable: true,
        });
    }
    binds
}

/// The run's tmp is also `/tmp` unless one of its own paths lives under `/tmp` (then
/// `TMPDIR` alone points at it).
pub fn tmp_at_slash_tmp(plan: &Plan) -> bool {
    !plan
        .writable
        .iter()
        .chain([&plan.run_root])
        .any(|p| p.starts_with("/tmp"))
}

/// Creates the mount points of the view under `<run>/root`. Server side, blocking.
pub fn skeleton(plan: &Plan) -> std::io::Result<()> {
    layout(&plan.new_root(), &binds(plan))
}

/// The layout of a view under `root`: the system's symlinks, a mount point for each of
/// `binds`, `/dev`'s links, and the directories of `/dev/shm`, `/proc` and the old root.
fn layout(root: &Path, binds: &[Bind]) -> std::io::Result<()> {
    std::fs::create_dir_all(root)?;
    for dir in SYSTEM {
        let path = Path::new(dir);
        if let Ok(meta) = std::fs::symlink_metadata(path)
            && meta.file_type().is_symlink()
        {
            std::os::unix::fs::symlink(std::fs::read_link(path)?, inside(root, path))?;
        }
    }
    for bind in binds {
        mount_point(&bind.source, &inside(root, &bind.target))?;
    }
    let dev = root.join("dev");
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(link))?;
    }
    for dir in ["dev/shm", "proc", ".old"] {
        std::fs::create_dir_all(root.join(dir))?;
    }
    Ok(())
}

/// Builds the view and pivots into it; returns what it holds, for the layer's report.
pub fn build_view(plan: &Plan) -> Result<String, String> {
    let none: Option<&str> = None;
    // A slave, not private: the tmpfs the server mounts for a run after the zygote made
    // its view must still reach the view (see `disk`); nothing propagates back out.
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_SLAVE, none)
        .map_err(|err| format!("making / a slave: {err}"))?;
    let root = plan.new_root();
    mount(Some(&root), &root, none, MsFlags::MS_BIND, none)
        .map_err(|err| format!("the new root: {err}"))?;
    for bind in binds(plan) {
        mount_bind(&root, &bind)?;
    }
    mount_own_fs(&root)?;
    nix::unistd::pivot_root(&root, &root.join(".old"))
        .map_err(|err| format!("pivot_root: {err}"))?;
    nix::unistd::chdir("/").map_err(|err| format!("chdir /: {err}"))?;
    seal("the old root")?;
    Ok(described(plan))
}

/// How a built view reads in the filesystem layer.
fn described(plan: &Plan) -> String {
    format!(
        "pivot_root into a read-only view (system, interpreter, venv, the workspace's \
         artifacts); writable: the run's work, home and {} (its tmpfs), the workspace's \
         cache; /proc of the run's own pid namespace",
        if tmp_at_slash_tmp(plan) {
            "/tmp"
        } else {
            "tmp"
        }
    )
}

/// Where a run's root is built ahead: in a zygote's view, the empty directory its own
/// `pivot_root` left; after this run's `pivot_root`, where the zygote's view stays
/// until `finish_view`.
pub const AHEAD: &str = "/.old";

/// Builds ahead, before the run's plan exists, what every run of a zygote sees
/// (`template`: a plan with a placeholder directory): a tmpfs root with the system, the
/// interpreter, the venv and the workspace's directories bound, `/dev` and a `/proc` of
/// the run's pid namespace, and pivots into it, the zygote's view kept at `/.old`. Only
/// in a zygote with a view of its own. `finish_view` does the rest.
pub fn prepare_view(template: &Plan) -> Result<(), String> {
    let none: Option<&str> = None;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_SLAVE, none)
        .map_err(|err| format!("making / a slave: {err}"))?;
    let root = Path::new(AHEAD);
    mount(
        Some("tmpfs"),
        root,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755,size=1m,nr_inodes=4096"),
    )
    .map_err(|err| format!("the new root: {err}"))?;
    let shared = shared_binds(template);
    layout(root, &shared).map_err(|err| format!("the new root's layout: {err}"))?;
    for bind in &shared {
        mount_bind(root, bind)?;
    }
    mount_own_fs(root)?;
    nix::unistd::pivot_root(root, &root.join(".old"))
        .map_err(|err| format!("pivot_root: {err}"))?;
    nix::unistd::chdir("/").map_err(|err| format!("chdir /: {err}"))
}

/// Completes a view `prepare_view` built from `template` with `plan`'s own directories
/// (bound from the zygote's view, which then goes) and makes it read-only. The plan must
/// share the template's view (what `shared_binds` reads of it), or nothing is bound.
pub fn finish_view(plan: &Plan, template: &Plan) -> Result<String, String> {
    if (&plan.read_only, &plan.writable, &plan.resolv_conf)
        != (
            &template.read_only,
            &template.writable,
            &template.resolv_conf,
        )
    {
        return Err("the run's plan does not show what its zygote's view was built for".into());
    }
    let old = Path::new(AHEAD);
    for bind in own_binds(plan) {
        let from_old = Bind {
            source: inside(old, &bind.source),
            target: bind.target.clone(),
            writable: bind.writable,
        };
        mount_point(&from_old.source, &bind.target)
            .map_err(|err| format!("mount point {}: {err}", bind.target.display()))?;
        mount_bind(Path::new("/"), &from_old)?;
    }
    seal("the zygote's view")?;
    Ok(described(plan))
}

/// Detaches the old root (`old`, for the error), kept at `/.old` after `pivot_root`, and
/// makes the new root read-only.
fn seal(old: &str) -> Result<(), String> {
    let none: Option<&str> = None;
    umount2(AHEAD, MntFlags::MNT_DETACH).map_err(|err| format!("detaching {old}: {err}"))?;
    mount(
        none,
        "/",
        none,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV
            | locked_flags(Path::new("/")),
        none,
    )
    .map_err(|err| format!("read-only root: {err}"))
}

/// An empty directory, or an empty file, at `point` for `source` to be bound on.
fn mount_point(source: &Path, point: &Path) -> std::io::Result<()> {
    if std::fs::metadata(source)?.is_dir() {
        std::fs::create_dir_all(point)
    } else {
        if let Some(parent) = point.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::File::create(point).map(drop)
    }
}

/// The view's own file systems: a private `/dev/shm` and a `/proc` of the run's pid
/// namespace.
fn mount_own_fs(root: &Path) -> Result<(), String> {
    let none: Option<&str> = None;
    mount(
        Some("tmpfs"),
        &root.join("dev/shm"),
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("size=64m,mode=1777"),
    )
    .map_err(|err| format!("/dev/shm: {err}"))?;
    mount(
        Some("proc"),
        &root.join("proc"),
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        none,
    )
    .map_err(|err| format!("/proc of the run's pid namespace: {err}"))
}

/// `path` below `root`.
fn inside(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Binds one source at its mount point, read-only unless writable, never with set-uid
/// programs, keeping the flags the kernel locked on the source mount.
fn mount_bind(root: &Path, bind: &Bind) -> Result<(), String> {
    let point = inside(root, &bind.target);
    let none: Option<&str> = None;
    mount(
        Some(&bind.source),
        &point,
        none,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        none,
    )
    .map_err(|err| format!("bind {}: {err}", bind.source.display()))?;
    let mut flags =
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_NOSUID | locked_flags(&point);
    if !bind.writable {
        flags |= MsFlags::MS_RDONLY;
    }
    mount(none, &point, none, flags, none)
        .map_err(|err| format!("remount {}: {err}", bind.source.display()))
}

fn locked_flags(path: &Path) -> MsFlags {
    let Ok(stat) = statvfs(path) else {
        return MsFlags::empty();
    };
    let given = stat.flags();
    [
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
        (FsFlags::ST_RDONLY, MsFlags::MS_RDONLY),
    ]
    .into_iter()
    .filter(|(st, _)| given.contains(*st))
    .fold(MsFlags::empty(), |all, (_, ms)| all | ms)
}
