//! Namespaces and ids of a run: `unshare`, the id maps, dropping to an unprivileged
//! identity, and the loopback interface of a private network namespace.
//!
//! The intermediate child calls `unshare_for_run` (user, pid, ipc, uts and mount
//! namespaces, plus network when it is denied); its parent, which holds the privileges
//! of the outer namespace, writes the id maps (`write_id_maps`); the grandchild — pid 1
//! of the new pid namespace — becomes root of its user namespace to build its file-system
//! view (`become_namespace_root`) and then drops to the run's ids with no capabilities
//! (`drop_to_run_ids`). The runtime never lets user code run as root: without a user
//! namespace, a root runtime still switches the run to the workspace's unprivileged ids.

use nix::sched::{CloneFlags, unshare};
use nix::unistd::{Gid, Pid, Uid, setgroups, setresgid, setresuid};

use super::{Ids, Layer, NetworkMode};

/// The namespaces every run gets; `CLONE_NEWNET` is added when the network is denied
/// (with `public`, runs share their zygote's network namespace).
pub fn run_flags(network: NetworkMode) -> CloneFlags {
    let mut flags = CloneFlags::CLONE_NEWUSER
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS
        | CloneFlags::CLONE_NEWNS;
    if network.run_namespace() {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    flags
}

/// Moves the calling (single-threaded) process into new namespaces; the next child it
/// forks is pid 1 of the new pid namespace.
pub fn unshare_for_run(network: NetworkMode) -> Result<(), String> {
    unshare(run_flags(network)).map_err(|err| format!("unshare refused: {err}"))
}

/// Moves a zygote into user, mount and pid namespaces of its own (and a network
/// namespace when runs may not use the network), where it builds its view before
/// importing any of the workspace's code; the next child it forks is pid 1 of the new
/// pid namespace and goes on as the zygote.
pub fn unshare_for_zygote(network: NetworkMode) -> Result<(), String> {
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID;
    if network.zygote_namespace() {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|err| format!("unshare refused: {err}"))
}

/// Takes the mapped root identity of the caller's user namespace (capabilities there
/// only; on the host, the workspace's first id).
pub fn become_namespace_root() -> Result<(), String> {
    let (gid, uid) = (Gid::from_raw(0), Uid::from_raw(0));
    setgroups(&[]).map_err(|err| format!("setgroups: {err}"))?;
    setresgid(gid, gid, gid).map_err(|err| format!("setresgid(0): {err}"))?;
    setresuid(uid, uid, uid).map_err(|err| format!("setresuid(0): {err}"))?;
    Ok(())
}

/// Writes the uid and gid maps of `pid`, which has just unshared its user namespace:
/// the workspace's range at 0 when the runtime is root, else 0 → the runtime's own ids.
pub fn write_id_maps(pid: Pid, ids: &Ids) -> Result<(), String> {
    let proc = format!("/proc/{pid}");
    let count = if ids.range { super::ID_RANGE } else { 1 };
    if !ids.range {
        // An unprivileged writer must give up setgroups before it may write gid_map.
        std::fs::write(format!("{proc}/setgroups"), "deny")
            .map_err(|err| format!("cannot write setgroups: {err}"))?;
    }
    std::fs::write(
        format!("{proc}/uid_map"),
        format!("0 {} {count}\n", ids.base_uid),
    )
    .map_err(|err| format!("cannot write uid_map: {err}"))?;
    std::fs::write(
        format!("{proc}/gid_map"),
        format!("0 {} {count}\n", ids.base_gid),
    )
    .map_err(|err| format!("cannot write gid_map: {err}"))?;
    Ok(())
}

/// Drops to the run's identity: inside a user namespace the unprivileged uid/gid
/// `ids.inside` (mapped to the workspace's range) or, for an unprivileged runtime, the mapped root
/// with every capability removed; without a user namespace, the workspace's ids outside
/// (root runtime) or the runtime's own ids. Returns the identity layer.
pub fn drop_to_run_ids(ids: &Ids, in_user_namespace: bool) -> Layer {
    let result = if in_user_namespace && ids.range {
        drop_bounding_set();
        switch_ids(ids.inside, ids.inside)
            .and_then(|()| clear_capabilities())
            .map(|()| {
                format!(
                    "uid/gid {} in the run's user namespace ({} outside), no capabilities",
                    ids.inside,
                    ids.run_uid()
                )
            })
    } else if in_user_namespace {
        drop_bounding_set();
        clear_capabilities().map(|()| {
            format!(
                "the runtime's own uid {} mapped to root of the run's user namespace, no capabilities",
                ids.base_uid
            )
        })
    } else if nix::unistd::geteuid().is_root() {
        switch_ids(ids.run_uid(), ids.run_gid()).map(|()| {
            format!(
                "uid/gid {} (no user namespace: the workspace's ids on the host)",
                ids.run_uid()
            )
        })
    } else {
        return Layer::partial(format!(
            "runs as the runtime's own uid {} (no user namespace)",
            ids.base_uid
        ));
    };
    match result {
        Ok(detail) if still_privileged() => {
            Layer::partial(format!("{detail}; capabilities remain"))
        }
        Ok(detail) => Layer::enforced(detail),
        Err(err) => Layer::unavailable(err),
    }
}

fn switch_ids(uid: u32, gid: u32) -> Result<(), String> {
    let (uid, gid) = (Uid::from_raw(uid), Gid::from_raw(gid));
    setgroups(&[]).map_err(|err| format!("setgroups: {err}"))?;
    setresgid(gid, gid, gid).map_err(|err| format!("setresgid({gid}): {err}"))?;
    // Leaving root for a non-zero uid clears every capability.
    setresuid(uid, uid, uid).map_err(|err| format!("setresuid({uid}): {err}"))?;
    Ok(())
}

/// Keeps only CAP_SETUID, CAP_SETGID and CAP_SETFCAP (a zygote needs them, in its own
/// namespace, to write its children's id maps; mapping their root needs CAP_SETFCAP):
/// no mounts, no remounting its view writable, no DAC override.
pub fn keep_only_id_capabilities() -> Result<(), String> {
    // capability.h: CAP_SETGID = 6, CAP_SETUID = 7, CAP_SETFCAP = 31.
    const CAP_SETGID: u32 = 6;
    const CAP_SETUID: u32 = 7;
    const CAP_SETFCAP: u32 = 31;
    let keep = (1u32 << CAP_SETUID) | (1u32 << CAP_SETGID) | (1u32 << CAP_SETFCAP);
    for cap in 0..64 {
        if cap < 32 && keep & (1 << cap) != 0 {
            continue;
        }
        // SAFETY: prctl(PR_CAPBSET_DROP) takes a plain integer; EINVAL past the last
        // capability is expected.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
    }
    let header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let data = [
        CapData {
            effective: keep,
            permitted: keep,
            inheritable: 0,
        },
        CapData::default(),
    ];
    // SAFETY: capset(2) reads one header and two data structs of the v3 layout.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if rc != 0 {
        return Err(format!("capset: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Becomes root of the caller's user namespace (the workspace's first id on the host)
/// and gives up every capability: a process that only waits.
pub fn become_powerless() -> Result<(), String> {
    become_namespace_root()?;
    drop_bounding_set();
    clear_capabilities()
}

/// Removes every capability from the bounding set (ignored where CAP_SETPCAP is missing:
/// the capability sets are cleared anyway).
fn drop_bounding_set() {
    for cap in 0..64 {
        // SAFETY: prctl(PR_CAPBSET_DROP) takes a plain integer; errors (EINVAL past the
        // last capability, EPERM) are harmless here.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
    }
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;

/// Empties the effective, permitted and inheritable capability sets.
fn clear_capabilities() -> Result<(), String> {
    let header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: capset(2) reads one header and two data structs of the v3 layout.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if rc != 0 {
        return Err(format!("capset: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Whether any capability is left in the effective or permitted set.
fn still_privileged() -> bool {
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget(2) writes two data structs of the v3 layout.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    rc != 0 || data.iter().any(|d| d.effective != 0 || d.permitted != 0)
}

/// Brings up `lo` in a fresh network namespace (it starts down).
pub fn loopback_up() -> Result<(), String> {
    // SAFETY: a plain socket(2) call; the fd is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!("socket: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write the ifreq passed by pointer.
    let result = unsafe {
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request) < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            request.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS, &request) < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
    };
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(fd) };
    result.map_err(|err| format!("cannot bring up lo: {err}"))
}
