//! Group commit of what runs write.
//!
//! Every completed run stores its question and answer, and an agentflow run
//! starts and then updates its execution record. Committed one transaction per
//! write, that is several writes (and on PostgreSQL as many flushes of the log)
//! per prediction; under load most of the writer's time goes to committing.
//! Here the runs hand their writes ([`RunWrites`]) to one writer task, which
//! takes everything queued while the previous commit was running and stores it
//! with [`ConversationStore::write_runs`](crate::store::ConversationStore::write_runs): one transaction for all. A run is answered only
//! after the transaction holding its writes has committed, so nothing is
//! acknowledged before it is as durable as the backend's synchronous mode makes
//! a commit (SQLite WAL with `synchronous = NORMAL`: survives the process being
//! killed; PostgreSQL: flushed before the commit returns).
//!
//! One run's failure (say, text PostgreSQL refuses, or an execution of a
//! chatflow deleted meanwhile) fails only that run: the backends keep the runs
//! of a transaction apart.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::{RunWrites, RunWritten, Store, StoreError, StoreResult};

/// Most runs one transaction stores.
const MAX_BATCH: usize = 512;
/// Runs waiting for the writer before new ones wait to be queued.
const QUEUE: usize = 4096;

/// One run's writes and where their outcome goes.
struct Pending {
    writes: RunWrites,
    reply: oneshot::Sender<StoreResult<RunWritten>>,
}

/// The handle runs write through; the writer task ends when the last handle is
/// dropped, after storing what was queued.
pub struct GroupCommit {
    queue: mpsc::Sender<Pending>,
}

impl GroupCommit {
    /// Starts the writer over `store` (which does the actual writes).
    pub fn start(store: Arc<dyn Store>) -> Self {
        let (queue, pending) = mpsc::channel(QUEUE);
        tokio::spawn(write_loop(store, pending));
        GroupCommit { queue }
    }

    /// Stores one run's writes (all or none); returns once they are committed.
    pub async fn write(&self, writes: RunWrites) -> StoreResult<RunWritten> {
        let stopped = || StoreError::Backend("the run writer has stopped".into());
        let (reply, outcome) = oneshot::channel();
        self.queue
            .send(Pending { writes, reply })
            .await
            .map_err(|_| stopped())?;
        outcome.await.map_err(|_| stopped())?
    }
}

async fn write_loop(store: Arc<dyn Store>, mut queue: mpsc::Receiver<Pending>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let (writes, replies): (Vec<_>, Vec<_>) = batch
            .drain(..)
            .map(|run: Pending| (run.writes, run.reply))
            .unzip();
        let outcomes = store.write_runs(writes).await;
        if outcomes.len() != replies.len() {
            tracing::error!(
                runs = replies.len(),
                outcomes = outcomes.len(),
                "the store answered a batch of runs with the wrong number of outcomes"
            );
        }
        let mut outcomes = outcomes.into_iter();
        for reply in replies {
            let outcome = outcomes.next().unwrap_or_else(|| {
                Err(StoreError::Backend(
                    "the store answered no outcome for the run".into(),
                ))
            });
            let _ = reply.send(outcome);
        }
    }
}
