//! Stopping a chat's running prediction (`PUT /chatmessage/abort/:chatflow/:chat`)
//! on whichever replica runs it.
//!
//! Each replica keeps the predictions it runs in [`Aborts`], by (chatflow,
//! chat). A stop is written to the store (so every replica sees it) and applied
//! here at once; the [`run`] loop reads the stops other replicas wrote, every
//! [`POLL`] while this replica runs predictions (never when it runs none), and
//! stops the matching runs that started before the stop was asked. Stops are
//! kept [`KEEP`] and swept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::Services;
use crate::domain::time::{self, Timestamp};

/// How often a replica running predictions reads the stops asked elsewhere.
pub const POLL: Duration = Duration::from_millis(200);
/// How long a stop is kept before the sweep removes it.
const KEEP: Duration = Duration::from_secs(600);
/// Stops asked this long before the last read are read again (clocks of
/// replicas and commit order differ a little).
const OVERLAP: Duration = Duration::from_secs(2);

type ChatKey = (Uuid, String);

struct Running {
    id: u64,
    started: Timestamp,
    stop: CancellationToken,
}

/// The predictions this replica runs, by chat.
#[derive(Default)]
pub struct Aborts {
    running: Mutex<HashMap<ChatKey, Vec<Running>>>,
    next_id: std::sync::atomic::AtomicU64,
    /// Wakes the loop when the first prediction starts.
    started: Notify,
}

/// A running prediction's place in [`Aborts`]; leaves it when dropped.
pub struct Registration {
    aborts: Arc<Aborts>,
    key: ChatKey,
    id: u64,
    stop: CancellationToken,
}

impl Registration {
    /// Completes when the chat's prediction is asked to stop.
    pub async fn stopped(&self) {
        self.stop.cancelled().await;
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut running = self
            .aborts
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(runs) = running.get_mut(&self.key) {
            runs.retain(|r| r.id != self.id);
            if runs.is_empty() {
                running.remove(&self.key);
            }
        }
    }
}

impl Aborts {
    /// Registers a prediction of `chat` starting now.
    pub fn register(self: &Arc<Self>, chatflow: Uuid, chat: &str) -> Registration {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stop = CancellationToken::new();
        let key = (chatflow, chat.to_owned());
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let first = running.is_empty();
        running.entry(key.clone()).or_default().push(Running {
            id,
            started: time::now(),
            stop: stop.clone(),
        });
        drop(running);
        if first {
            self.started.notify_one();
        }
        Registration {
            aborts: Arc::clone(self),
            key,
            id,
            stop,
        }
    }

    /// Stops this replica's predictions of the chat that started by `asked`;
    /// how many were stopped.
    pub fn stop(&self, chatflow: Uuid, chat: &str, asked: Timestamp) -> usize {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(runs) = running.get(&(chatflow, chat.to_owned())) else {
            return 0;
        };
        let mut stopped = 0;
        for run in runs.iter().filter(|r| r.started <= asked) {
            if !run.stop.is_cancelled() {
                run.stop.cancel();
                stopped += 1;
            }
        }
        stopped
    }

    fn is_idle(&self) -> bool {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }
}

/// Asks the chat's running prediction to stop, wherever it runs: written to
/// the store for the other replicas, applied here at once.
pub async fn request(
    services: &Services,
    chatflow: Uuid,
    chat: &str,
) -> Result<(), crate::store::StoreError> {
    let asked = time::now();
    services.store.request_abort(chatflow, chat, asked).await?;
    services.aborts.stop(chatflow, chat, asked);
    Ok(())
}

/// This replica's loop: applies the stops other replicas wrote while it runs
/// predictions, and sweeps old stops.
pub async fn run(services: Services, cancel: CancellationToken) {
    let overlap = chrono::TimeDelta::from_std(OVERLAP).unwrap_or_default();
    let keep = chrono::TimeDelta::from_std(KEEP).unwrap_or_default();
    let mut last_read = time::now();
    let mut last_sweep = time::now();
    loop {
        if services.aborts.is_idle() {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = services.aborts.started.notified() => {}
                // A stop asked while nothing ran here concerns no run here.
                () = tokio::time::sleep(KEEP) => {}
            }
            last_read = time::now();
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(POLL) => {}
        }
        let now = time::now();
        match services.store.aborts_since(last_read - overlap).await {
            Ok(stops) => {
                last_read = now;
                for (chatflow, chat, asked) in stops {
                    services.aborts.stop(chatflow, &chat, asked);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the stops asked of running predictions")
            }
        }
        if now - last_sweep > keep {
            last_sweep = now;
            if let Err(e) = services.store.sweep_aborts(now - keep).await {
                tracing::warn!(error = %e, "cannot sweep old stops of predictions");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_reaches_the_runs_that_started_before_it() {
        let aborts = Arc::new(Aborts::default());
        let flow = Uuid::new_v4();
        let early = aborts.register(flow, "c");
        let asked = time::now();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let late = aborts.register(flow, "c");
        let other = aborts.register(flow, "d");
        assert_eq!(aborts.stop(flow, "c", asked), 1);
        early.stopped().await;
        assert!(!late.stop.is_cancelled() && !other.stop.is_cancelled());
        // Stopping again stops nothing more.
        assert_eq!(aborts.stop(flow, "c", asked), 0);
        drop((early, late, other));
        assert!(aborts.is_idle());
    }
}
