//! Predictions running per workspace on this server (`WORKSPACE_MAX_PREDICTIONS`),
//! so one workspace cannot take every model call and worker of a replica.
//!
//! A run holds a [`Permit`] from before its memory is loaded until its task ends
//! (answered, failed, or stopped because its client went away). A workspace at
//! its bound is answered 429 at once: nothing waits in a queue.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

/// The counts of one server.
#[derive(Debug)]
pub struct InFlight {
    limit: u64,
    running: Mutex<HashMap<Uuid, u64>>,
}

/// One running prediction of a workspace; dropping it ends the count.
#[derive(Debug)]
pub struct Permit {
    owner: Arc<InFlight>,
    workspace: Uuid,
}

impl InFlight {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(InFlight {
            limit,
            running: Mutex::default(),
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// A permit for one more prediction of `workspace`, unless it has `limit`.
    pub fn try_acquire(self: &Arc<Self>, workspace: Uuid) -> Option<Permit> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let count = running.entry(workspace).or_default();
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        crate::metrics::metrics().in_flight.inc();
        Some(Permit {
            owner: Arc::clone(self),
            workspace,
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        crate::metrics::metrics().in_flight.dec();
        let mut running = self.owner.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = running.get_mut(&self.workspace) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                running.remove(&self.workspace);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_each_workspace_and_frees_on_drop() {
        let counts = InFlight::new(2);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let first = counts.try_acquire(a).unwrap();
        let _second = counts.try_acquire(a).unwrap();
        assert!(counts.try_acquire(a).is_none());
        assert!(counts.try_acquire(b).is_some());
        drop(first);
        assert!(counts.try_acquire(a).is_some());
    }
}
