//! The seccomp filter of a run: an errno-returning denylist, installed last, with
//! no_new_privs.
//!
//! An allowlist breaks CPython and numpy in practice (new glibc and library versions use
//! syscalls nobody listed); a denylist of the syscalls that reach the kernel's riskiest
//! surfaces or out of the sandbox does not. Denied with EPERM: ptrace,
//! process_vm_readv/writev, bpf, perf_event_open, userfaultfd, io_uring_*, the keyring
//! calls, mount and the new mount API, pivot_root, chroot, unshare, setns, `clone` with
//! any CLONE_NEW* flag, open_by_handle_at, kexec and module loading, swapon/off, acct,
//! quotactl, the TIOCSTI and TIOCLINUX ioctls. `clone3` answers ENOSYS so glibc falls back
//! to `clone` (EPERM would break pthread_create), and so do x32 syscalls; seccompiler's
//! architecture check kills a process that calls through a foreign ABI (int 0x80).
//! `build` compiles once (in the zygote); `apply` installs it in the run.
//!
//! A zygote has a filter of its own (`build_for_zygote`), installed before it imports
//! anything of its workspace: the same denylist but for what its runs' processes still
//! need before their own filter (unshare and the mount calls that build a run's view);
//! a run then has both.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, sock_filter,
};

use super::Layer;

/// First syscall number of the x32 ABI (`__X32_SYSCALL_BIT`).
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// `clone3`'s number on x86_64 and aarch64 (not in every libc crate version's tables).
const SYS_CLONE3: i64 = 435;

/// Syscalls denied outright.
#[cfg(target_arch = "x86_64")]
fn denied() -> Vec<i64> {
    vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_lookup_dcookie,
        libc::SYS_uselib,
        libc::SYS_iopl,
        libc::SYS_ioperm,
    ]
}

#[cfg(not(target_arch = "x86_64"))]
fn denied() -> Vec<i64> {
    Vec::new()
}

/// The CLONE_NEW* flags `clone` may not carry (`clone3` passes flags behind a pointer,
/// which seccomp cannot read: it is answered ENOSYS instead).
const CLONE_NEW_FLAGS: &[i32] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// What a zygote's runs do before their own filter: make their namespaces and view.
#[cfg(target_arch = "x86_64")]
const RUN_SETUP: &[i64] = &[
    libc::SYS_unshare,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
];

#[cfg(not(target_arch = "x86_64"))]
const RUN_SETUP: &[i64] = &[];

/// Compiles a run's filter (EPERM denylist, preceded by the ENOSYS answers).
pub fn build() -> Result<BpfProgram, String> {
    build_denying(denied())
}

/// Compiles a zygote's filter: a run's, but for `RUN_SETUP`.
pub fn build_for_zygote() -> Result<BpfProgram, String> {
    let mut denied = denied();
    denied.retain(|nr| !RUN_SETUP.contains(nr));
    build_denying(denied)
}

fn build_denying(denied: Vec<i64>) -> Result<BpfProgram, String> {
    if !cfg!(target_arch = "x86_64") {
        return Err("the denylist is written for x86_64 only".to_owned());
    }
    let error = |err: seccompiler::BackendError| err.to_string();
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        denied.into_iter().map(|nr| (nr, Vec::new())).collect();
    let clone_rules = CLONE_NEW_FLAGS
        .iter()
        .map(|&flag| {
            let flag = flag as u64;
            SeccompRule::new(vec![SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )?])
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(error)?;
    rules.insert(libc::SYS_clone, clone_rules);
    let ioctl_rules = [libc::TIOCSTI, libc::TIOCLINUX]
        .iter()
        .map(|&request| {
            SeccompRule::new(vec![SeccompCondition::new(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                request,
            )?])
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(error)?;
    rules.insert(libc::SYS_ioctl, ioctl_rules);
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|err: seccompiler::BackendError| err.to_string())?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(error)?;
    let denylist: BpfProgram = filter.try_into().map_err(error)?;
    let mut program = enosys_prefix();
    program.extend(denylist);
    Ok(program)
}

/// `clone3` and x32 syscalls → ENOSYS, before the denylist.
fn enosys_prefix() -> BpfProgram {
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JMP_JEQ_K: u16 = 0x15;
    const BPF_JMP_JGE_K: u16 = 0x35;
    const BPF_JMP_JA: u16 = 0x05;
    const BPF_RET_K: u16 = 0x06;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        op(BPF_LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        op(BPF_JMP_JEQ_K, 2, 0, SYS_CLONE3 as u32),
        op(BPF_JMP_JGE_K, 1, 0, X32_SYSCALL_BIT),
        op(BPF_JMP_JA, 0, 0, 1),
        op(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
    ]
}

/// Installs `program` on the calling thread (no_new_privs first).
pub fn apply(program: &BpfProgram) -> Layer {
    match seccompiler::apply_filter(program) {
        Ok(()) => Layer::enforced(
            "denylist with errno (ptrace, process_vm_*, bpf, perf_event_open, userfaultfd, \
             io_uring, keyrings, mount API, unshare/setns/clone(CLONE_NEW*), \
             open_by_handle_at, kexec/modules, TIOCSTI; clone3 and x32 → ENOSYS); no_new_privs",
        ),
        Err(err) => Layer::unavailable(format!("seccomp: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_with_its_prefix() {
        let program = build().expect("the denylist compiles");
        assert!(program.len() > 40);
        assert_eq!(program[1].k, 435);
        assert_eq!(program[4].k, SECCOMP_RET_ERRNO | libc::ENOSYS as u32);
    }

    #[test]
    fn a_zygote_filter_lets_runs_set_up_but_nothing_else() {
        let run = build().expect("the run's filter compiles");
        let zygote = build_for_zygote().expect("the zygote's filter compiles");
        assert!(zygote.len() < run.len());
        let denied_to_zygote =
            |nr: i64| zygote.iter().any(|op| op.code == 0x15 && op.k == nr as u32);
        assert!(denied_to_zygote(libc::SYS_ptrace));
        assert!(denied_to_zygote(libc::SYS_setns));
        assert!(!denied_to_zygote(libc::SYS_mount));
        assert!(!denied_to_zygote(libc::SYS_unshare));
    }
}
