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
struct Bind {
    source: PathBuf,
    target: PathBuf,
    writable: bool,
}

/// Every bind of `plan`'s view, in mount order.
fn binds(plan: &Plan) -> Vec<Bind> {
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
    for path in [plan.work(), plan.home(), plan.tmp()]
        .iter()
        .chain(&plan.writable)
    {
        add(path, path, true);
    }
    if tmp_at_slash_tmp(plan) {
        add(&plan.tmp(), Path::new("/tmp"), true);
    }
    for name in DEVICES {
        let device = Path::new("/dev").join(name);
        add(&device, &device, true);
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
    let root = plan.new_root();
    std::fs::create_dir_all(&root)?;
    for dir in SYSTEM {
        let path = Path::new(dir);
        if let Ok(meta) = std::fs::symlink_metadata(path)
            && meta.file_type().is_symlink()
        {
            std::os::unix::fs::symlink(std::fs::read_link(path)?, inside(&root, path))?;
        }
    }
    for bind in binds(plan) {
        let point = inside(&root, &bind.target);
        if std::fs::metadata(&bind.source)?.is_dir() {
            std::fs::create_dir_all(&point)?;
        } else {
            if let Some(parent) = point.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::File::create(&point)?;
        }
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
    .map_err(|err| format!("/proc of the run's pid namespace: {err}"))?;

    nix::unistd::pivot_root(&root, &root.join(".old"))
        .map_err(|err| format!("pivot_root: {err}"))?;
    nix::unistd::chdir("/").map_err(|err| format!("chdir /: {err}"))?;
    umount2("/.old", MntFlags::MNT_DETACH)
        .map_err(|err| format!("detaching the old root: {err}"))?;
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
    .map_err(|err| format!("read-only root: {err}"))?;
    Ok(format!(
        "pivot_root into a read-only view (system, interpreter, venv); writable: the run's \
         work, home and {}, the workspace's artifacts and cache; /proc of the run's own pid \
         namespace",
        if tmp_at_slash_tmp(plan) {
            "/tmp"
        } else {
            "tmp"
        }
    ))
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
