//! A zygote's home on the server side: the directory its own view is built in (on a
//! tmpfs of its own where the server can mount one), the skeleton of that view, and the
//! cgroups delegated to it with limits in files that stay root's. Made before the zygote
//! starts (`make_home`), killed and removed when the zygote is gone (`ZygoteHome`'s drop).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crate::isolation::cgroups::{CgroupSpec, RunCgroup};
use crate::isolation::disk::Disk;
use crate::isolation::network::Egress;
use crate::isolation::{
    Ids, NetworkMode, OWN_DIRS, PROCESS_LIMIT, Plan, Rlimits, SPACE, UNLIMITED,
};
use crate::process::zygote::SPARES;

/// What a zygote's own view holds (see `zygote::Setup::view`).
#[derive(Debug, Clone)]
pub struct HomeRecipe {
    /// The workspace's run directories (every run's root is below it).
    pub runs_dir: PathBuf,
    pub read_only: Vec<PathBuf>,
    pub writable: Vec<PathBuf>,
    pub ids: Ids,
    /// Per-run cgroups, created by the zygote in a cgroup delegated to it.
    pub cgroups: Option<CgroupSpec>,
    /// Give the zygote a view of its own (only where runs' namespaces and views work).
    pub view: bool,
    /// Runs the zygote may have at once (its cgroup holds them all, and its spare).
    pub runs_at_once: usize,
    /// What its runs may reach.
    pub network: NetworkMode,
    /// With `public`: the egress the server attaches to the zygote's namespace.
    pub egress: Option<Arc<Egress>>,
    /// With a view: the zygote's own directories on a tmpfs (see `disk`).
    pub disk: Option<Arc<Disk>>,
}

/// A zygote's home on the server side: the directory its view is built in and the
/// cgroups delegated to it; killed and removed (off the async workers) when the zygote
/// is gone.
pub struct ZygoteHome {
    pub view: Option<Plan>,
    pub cgroups: Option<CgroupSpec>,
    /// The cgroups the zygote process itself is put in (by the server, at its start).
    pub leaves: Vec<PathBuf>,
    /// With `public` and a view: attached by the server to the zygote's namespace.
    pub egress: Option<Arc<Egress>>,
    dir: Option<PathBuf>,
    /// `dir` is a tmpfs.
    mounted: bool,
    delegated: Vec<PathBuf>,
}

impl Drop for ZygoteHome {
    fn drop(&mut self) {
        let dir = self.dir.take();
        let mounted = self.mounted;
        let delegated = std::mem::take(&mut self.delegated);
        let remove = move || {
            // Whatever the zygote or its runs left behind dies with its cgroups.
            crate::isolation::cgroups::kill_trees(&delegated);
            drop(RunCgroup::adopt(delegated));
            if let Some(dir) = dir {
                if mounted {
                    let _ = crate::isolation::disk::unmount(&dir.join(SPACE));
                }
                let _ = std::fs::remove_dir_all(dir);
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn_blocking(remove);
            }
            Err(_) => remove(),
        }
    }
}

/// Prepares a zygote's home (blocking): as root, the skeleton of its own view and a
/// cgroup under each of the runtime's, owned by the workspace's first id, in which the
/// zygote creates its runs' cgroups. Not root: no view of its own (the zygote is as
/// unprivileged as the runtime) and the runtime's cgroups as they are.
pub fn make_home(recipe: &HomeRecipe) -> io::Result<ZygoteHome> {
    std::fs::create_dir_all(&recipe.runs_dir)?;
    if !recipe.view || !nix::unistd::geteuid().is_root() || !recipe.ids.range {
        return Ok(ZygoteHome {
            view: None,
            cgroups: recipe.cgroups.clone(),
            leaves: Vec::new(),
            egress: None,
            dir: None,
            mounted: false,
            delegated: Vec::new(),
        });
    }
    let name = format!("zygote-{}", uuid::Uuid::new_v4());
    let dir = recipe.runs_dir.join(&name);
    let mut home = ZygoteHome {
        view: None,
        cgroups: None,
        leaves: Vec::new(),
        egress: recipe.egress.clone(),
        dir: Some(dir.clone()),
        mounted: false,
        delegated: Vec::new(),
    };
    let space = dir.join(SPACE);
    std::fs::create_dir_all(&space)?;
    if let Some(disk) = &recipe.disk {
        // What package code writes at import time is bounded like a run's writes.
        disk.mount_run(&space)?;
        home.mounted = true;
    }
    for sub in OWN_DIRS {
        std::fs::create_dir(space.join(sub))?;
    }
    for path in &recipe.writable {
        std::fs::create_dir_all(path)?;
    }
    let mut writable = recipe.writable.clone();
    writable.push(recipe.runs_dir.clone());
    if let Some(spec) = &recipe.cgroups {
        let owner = (
            Some(nix::unistd::Uid::from_raw(recipe.ids.base_uid)),
            Some(nix::unistd::Gid::from_raw(recipe.ids.base_gid)),
        );
        let mut parents = Vec::new();
        for (parent, files) in &spec.parents {
            let delegated = parent.join(&name);
            std::fs::create_dir(&delegated)?;
            home.delegated.push(delegated.clone());
            // The zygote's own leaf (cgroup v2 keeps processes out of inner cgroups), the
            // controllers its runs' cgroups need, and the files a delegation hands over.
            let leaf = delegated.join("zygote");
            std::fs::create_dir(&leaf)?;
            home.leaves.push(leaf);
            // Limits of the whole tree, in files that stay root's: the zygote owns its
            // runs' cgroups and could raise their limits, never these.
            for (file, value) in files {
                let limit = zygote_limit(file, value, recipe.runs_at_once);
                match std::fs::write(delegated.join(file), limit) {
                    Ok(()) => {}
                    Err(_) if file == "memory.swap.max" => {}
                    Err(err) => return Err(err),
                }
            }
            let subtree = delegated.join("cgroup.subtree_control");
            if subtree.exists() {
                std::fs::write(&subtree, "+pids +memory")?;
            }
            nix::unistd::chown(&delegated, owner.0, owner.1).map_err(io::Error::from)?;
            for file in ["cgroup.procs", "cgroup.threads", "cgroup.subtree_control"] {
                let path = delegated.join(file);
                if path.exists() {
                    nix::unistd::chown(&path, owner.0, owner.1).map_err(io::Error::from)?;
                }
            }
            // The zygote sees its cgroups at their real path, writable.
            writable.push(delegated.clone());
            parents.push((delegated, files.clone()));
        }
        home.cgroups = Some(CgroupSpec { parents });
    }
    let view = Plan {
        run_root: dir,
        read_only: recipe.read_only.clone(),
        writable,
        ids: recipe.ids,
        network: recipe.network,
        resolv_conf: recipe
            .egress
            .as_ref()
            .map(|egress| egress.resolv_conf().to_owned()),
        rlimits: Rlimits {
            cpu_secs: UNLIMITED,
            address_space: UNLIMITED,
            file_size: UNLIMITED,
            processes: PROCESS_LIMIT,
        },
        require: false,
    };
    crate::isolation::mounts::skeleton(&view)?;
    home.view = Some(view);
    Ok(home)
}

/// Memory a zygote itself may use besides its runs (its interpreter and pre-imports).
const ZYGOTE_MEMORY: u64 = 1 << 30;

/// A zygote's cgroup limit from one run's: room for `runs` runs and the spares (pids), or
/// for `runs` runs and the zygote itself (memory).
fn zygote_limit(file: &str, run_value: &str, runs: usize) -> String {
    let Ok(value) = run_value.parse::<u64>() else {
        return run_value.to_owned();
    };
    let runs = runs.max(1) as u64;
    match file {
        "pids.max" => value.saturating_mul(runs + SPARES as u64).to_string(),
        "memory.swap.max" => run_value.to_owned(),
        _ => value
            .saturating_mul(runs)
            .saturating_add(ZYGOTE_MEMORY)
            .to_string(),
    }
}
