//! The process side: every child process the server starts and talks to.
//!
//! `sandbox` turns one execution into a run (its directory, plan and outcome) and an
//! install into a confined installer run; `pool` keeps one warm `zygote` per workspace
//! and hands runs to it; `protocol` owns every message between server and zygote and what
//! the server believes of them; `home` prepares a zygote's own view and cgroups;
//! `launcher` says how a child of this runtime is started; `analysts` are the worker
//! processes that analyse tool code. Below: `isolation`, `storage`, `analysis`.

pub mod analysts;
pub mod home;
pub mod launcher;
pub mod pool;
pub mod protocol;
pub mod sandbox;
pub mod zygote;

/// A mutex's guard, whether or not a thread panicked while holding it: the state
/// it guards (maps of children, waiters, servers) stays usable, and a server that
/// stopped serving over one panicked request would be worse.
pub fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
