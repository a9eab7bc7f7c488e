//! Landlock for a run: the whole view read-only, the run's directories and the
//! workspace's artifact directory read-write, TCP connect/bind denied with the network,
//! and (ABI ≥ 6) no signals to and no abstract-socket connections with processes outside
//! the run.
//!
//! `restrict` is called in the run's process after its ids are dropped and before
//! seccomp. It asks for ABI 7 in best-effort mode and reports what the kernel really
//! enforced (`RestrictionStatus`), so a downgrade is reported as `partial`, never
//! claimed.

use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, AccessNet, LandlockStatus, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};

use super::{Layer, NetworkMode, Plan};

/// The ABI whose rights are asked for (the newest this code was written against).
const WANTED: ABI = ABI::V7;

/// Restricts the calling thread (the run is single-threaded at this point).
pub fn restrict(plan: &Plan) -> Layer {
    match try_restrict(plan) {
        Ok(layer) => layer,
        Err(err) => Layer::unavailable(format!("landlock: {err}")),
    }
}

/// Restricts the calling process to no file access at all (and the same scopes as a
/// run): for a run's pid 1, which only reaps and writes on descriptors it holds.
pub fn deny_all() -> Layer {
    let restricted = Ruleset::default()
        .handle_access(AccessFs::from_all(WANTED))
        .and_then(|ruleset| ruleset.scope(Scope::from_all(WANTED)))
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| ruleset.restrict_self());
    match restricted {
        Ok(status) if status.ruleset == RulesetStatus::FullyEnforced => {
            Layer::enforced("no file access")
        }
        Ok(_) => Layer::partial("the kernel enforces only part of (no file access)"),
        Err(err) => Layer::unavailable(format!("landlock: {err}")),
    }
}

fn try_restrict(plan: &Plan) -> Result<Layer, landlock::RulesetError> {
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(WANTED))?;
    if plan.network == NetworkMode::Deny {
        ruleset = ruleset.handle_access(AccessNet::from_all(WANTED))?;
    }
    ruleset = ruleset.scope(Scope::from_all(WANTED))?;
    let existing = |paths: Vec<PathBuf>| -> Vec<PathBuf> {
        paths.into_iter().filter(|p| p.exists()).collect()
    };
    let read_only = existing(vec![PathBuf::from("/")]);
    let mut writable = vec![
        plan.work(),
        plan.home(),
        plan.tmp(),
        PathBuf::from("/dev/shm"),
        PathBuf::from("/dev/null"),
        PathBuf::from("/dev/zero"),
        PathBuf::from("/dev/full"),
    ];
    writable.extend(plan.writable.iter().cloned());
    if super::mounts::tmp_at_slash_tmp(plan) {
        writable.push(PathBuf::from("/tmp"));
    }
    let status = ruleset
        .create()?
        .add_rules(path_beneath_rules(read_only, AccessFs::from_read(WANTED)))?
        .add_rules(path_beneath_rules(
            existing(writable),
            AccessFs::from_all(WANTED),
        ))?
        .restrict_self()?;
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => format!("{effective_abi:?}"),
        LandlockStatus::NotEnabled => "not enabled".to_owned(),
        LandlockStatus::NotImplemented => "not implemented".to_owned(),
    };
    let covers = if plan.network != NetworkMode::Deny {
        "files read-only except the run's directories; signals and abstract sockets scoped"
    } else {
        "files read-only except the run's directories; TCP connect/bind denied; signals and \
         abstract sockets scoped"
    };
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => Layer::enforced(format!("ABI {abi}: {covers}")),
        RulesetStatus::PartiallyEnforced => Layer::partial(format!(
            "ABI {abi}: the kernel enforces only part of ({covers})"
        )),
        RulesetStatus::NotEnforced => {
            Layer::unavailable(format!("the kernel does not enforce Landlock ({abi})"))
        }
    })
}
