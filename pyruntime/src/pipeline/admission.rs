//! Admission of runs: at most `PY_TOOL_MAX_CONCURRENCY` at once, a bounded queue behind
//! them, and fairness between workspaces.
//!
//! `Admission::enter` returns a `Permit` at once when a slot is free and nobody waits,
//! else queues the caller in its workspace's line, or refuses with `Full` (the server
//! answers 429 with `Retry-After`) when its workspace already has
//! `PY_TOOL_MAX_QUEUE_PER_WORKSPACE` callers waiting or `PY_TOOL_MAX_QUEUE` callers wait
//! in all. A freed slot goes to the workspaces in turn (round robin over the workspaces
//! that wait, first come first served within one), so a workspace that floods the queue
//! gets the 429s and delays only itself. The permit is handed over directly, so a slot is
//! never lost to a race.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// The queue is full, or the caller's workspace holds its whole share of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    Queue,
    Workspace,
}

#[derive(Default)]
struct State {
    running: usize,
    queued: usize,
    /// Waiters per workspace.
    lines: HashMap<String, VecDeque<oneshot::Sender<Permit>>>,
    /// Workspaces with waiters, in serving order.
    turns: VecDeque<String>,
}

pub struct Admission {
    state: Arc<Mutex<State>>,
    max_running: usize,
    max_queued: usize,
    max_queued_per_workspace: usize,
}

/// A slot; dropping it hands the slot to the next waiter in turn.
pub struct Permit {
    state: Option<Arc<Mutex<State>>>,
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Admission {
    pub fn new(max_running: usize, max_queued: usize, max_queued_per_workspace: usize) -> Self {
        Self {
            state: Arc::default(),
            max_running: max_running.max(1),
            max_queued,
            max_queued_per_workspace,
        }
    }

    /// Waits for a slot for `workspace`, or refuses when the queue is full.
    pub async fn enter(&self, workspace: &str) -> Result<Permit, Full> {
        let receiver = {
            let mut state = lock(&self.state);
            if state.running < self.max_running && state.queued == 0 {
                state.running += 1;
                return Ok(Permit {
                    state: Some(self.state.clone()),
                });
            }
            if state.queued >= self.max_queued {
                return Err(Full::Queue);
            }
            let waiting = state.lines.get(workspace).map_or(0, VecDeque::len);
            if waiting >= self.max_queued_per_workspace {
                return Err(Full::Workspace);
            }
            let (sender, receiver) = oneshot::channel();
            let line = state.lines.entry(workspace.to_owned()).or_default();
            line.push_back(sender);
            if line.len() == 1 {
                state.turns.push_back(workspace.to_owned());
            }
            state.queued += 1;
            receiver
        };
        // The sender is only dropped with the whole admission state: treat it as full.
        receiver.await.map_err(|_| Full::Queue)
    }

    /// Runs in progress and callers waiting.
    pub fn load(&self) -> (usize, usize) {
        let state = lock(&self.state);
        (state.running, state.queued)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let Some(shared) = self.state.take() else {
            return;
        };
        let mut state = lock(&shared);
        loop {
            let Some(workspace) = state.turns.pop_front() else {
                state.running -= 1;
                return;
            };
            let (sender, more) = match state.lines.get_mut(&workspace) {
                Some(line) => (line.pop_front(), !line.is_empty()),
                None => (None, false),
            };
            if more {
                state.turns.push_back(workspace);
            } else {
                state.lines.remove(&workspace);
            }
            let Some(sender) = sender else { continue };
            state.queued -= 1;
            let permit = Permit {
                state: Some(shared.clone()),
            };
            match sender.send(permit) {
                Ok(()) => return,
                // The caller gave up waiting; its returned permit must not re-enter this
                // drop while the lock is held.
                Err(mut permit) => permit.state = None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_queue_refuses() {
        let admission = Admission::new(1, 1, 1);
        let first = admission.enter("a").await.expect("a free slot");
        let waiting = {
            let admission = &admission;
            async move { admission.enter("a").await }
        };
        tokio::pin!(waiting);
        assert!(
            futures_poll(&mut waiting).await.is_none(),
            "the second one waits"
        );
        assert_eq!(admission.enter("b").await.err(), Some(Full::Queue));
        drop(first);
        assert!(waiting.await.is_ok());
    }

    #[tokio::test]
    async fn slots_go_to_workspaces_in_turn() {
        let admission = Arc::new(Admission::new(1, 10, 10));
        let first = admission.enter("busy").await.expect("a free slot");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (i, workspace) in ["busy", "busy", "busy", "quiet"].into_iter().enumerate() {
            let queued = admission.clone();
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let permit = queued.enter(workspace).await.expect("queued");
                order.lock().expect("lock").push(workspace);
                drop(permit);
            }));
            // Queue them in a known order.
            while admission.load().1 < i + 1 {
                tokio::task::yield_now().await;
            }
        }
        drop(first);
        for task in tasks {
            task.await.expect("task");
        }
        let order = order.lock().expect("lock").clone();
        assert_eq!(order, vec!["busy", "quiet", "busy", "busy"]);
    }

    #[tokio::test]
    async fn a_flooding_workspace_gets_the_refusals() {
        let admission = Admission::new(1, 10, 2);
        let _running = admission.enter("flood").await.expect("a free slot");
        let mut waiting = Vec::new();
        for _ in 0..2 {
            let mut entering = Box::pin(admission.enter("flood"));
            assert!(futures_poll(&mut entering).await.is_none(), "queued");
            waiting.push(entering);
        }
        assert_eq!(admission.enter("flood").await.err(), Some(Full::Workspace));
        let mut quiet = Box::pin(admission.enter("quiet"));
        assert!(
            futures_poll(&mut quiet).await.is_none(),
            "another workspace still queues"
        );
        assert_eq!(admission.load(), (1, 3));
    }

    /// Polls a future once.
    async fn futures_poll<F: std::future::Future + Unpin>(future: &mut F) -> Option<F::Output> {
        use std::task::Poll;
        std::future::poll_fn(|cx| match std::pin::Pin::new(&mut *future).poll(cx) {
            Poll::Ready(value) => Poll::Ready(Some(value)),
            Poll::Pending => Poll::Ready(None),
        })
        .await
    }
}
