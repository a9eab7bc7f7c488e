//! Group commit of what requests write on the hot path.
//!
//! Every completed run stores its question and answer, an agentflow run
//! starts and then updates its execution record, and a trigger's firing is
//! claimed before its run and ended with its result. Committed one transaction
//! per write, that is several writes (and on PostgreSQL as many flushes of the
//! log, and on one trigger's row as many waits for its lock) per request; under
//! load most of the writer's time goes to committing. Here the requests hand
//! their writes to one writer task per kind ([`GroupCommit`]), which takes
//! everything queued while the previous commit was running and stores it with
//! one call of the backend's batch method (one transaction for all):
//! [`ConversationStore::write_runs`](crate::store::ConversationStore::write_runs),
//! [`TriggerStore::claim_webhook_firings`](crate::store::TriggerStore::claim_webhook_firings),
//! [`TriggerStore::finish_firings`](crate::store::TriggerStore::finish_firings).
//! A request is answered only after the transaction holding its writes has
//! committed, so nothing is acknowledged before it is as durable as the
//! backend's synchronous mode makes a commit (SQLite WAL with `synchronous =
//! NORMAL`: survives the process being killed; PostgreSQL: flushed before the
//! commit returns).
//!
//! One write's failure (say, text PostgreSQL refuses, or an execution of a
//! chatflow deleted meanwhile) fails only that write: the backends keep the
//! writes of a transaction apart.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::{Store, StoreError, StoreResult};

/// Most writes one transaction stores.
const MAX_BATCH: usize = 512;
/// Writes waiting for the writer before new ones wait to be queued.
const QUEUE: usize = 4096;

/// A backend's batch method: one outcome per write, in order.
pub type Commit<W, R> =
    fn(Arc<dyn Store>, Vec<W>) -> Pin<Box<dyn Future<Output = Vec<StoreResult<R>>> + Send>>;

/// One write and where its outcome goes.
struct Pending<W, R> {
    write: W,
    reply: oneshot::Sender<StoreResult<R>>,
}

/// The handle writes of one kind go through; the writer task ends when the
/// last handle is dropped, after storing what was queued.
pub struct GroupCommit<W, R> {
    queue: mpsc::Sender<Pending<W, R>>,
}

impl<W: Send + 'static, R: Send + 'static> GroupCommit<W, R> {
    /// Starts the writer, which stores each batch with `commit` over `store`.
    pub fn start(store: Arc<dyn Store>, commit: Commit<W, R>) -> Self {
        let (queue, pending) = mpsc::channel(QUEUE);
        tokio::spawn(write_loop(store, commit, pending));
        GroupCommit { queue }
    }

    /// Stores one write; returns once it is committed.
    pub async fn write(&self, write: W) -> StoreResult<R> {
        let stopped = || StoreError::Backend("the store's group writer has stopped".into());
        let (reply, outcome) = oneshot::channel();
        self.queue
            .send(Pending { write, reply })
            .await
            .map_err(|_| stopped())?;
        outcome.await.map_err(|_| stopped())?
    }
}

async fn write_loop<W, R>(
    store: Arc<dyn Store>,
    commit: Commit<W, R>,
    mut queue: mpsc::Receiver<Pending<W, R>>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let (writes, replies): (Vec<_>, Vec<_>) = batch
            .drain(..)
            .map(|pending: Pending<W, R>| (pending.write, pending.reply))
            .unzip();
        let outcomes = commit(Arc::clone(&store), writes).await;
        if outcomes.len() != replies.len() {
            tracing::error!(
                writes = replies.len(),
                outcomes = outcomes.len(),
                "the store answered a batch of writes with the wrong number of outcomes"
            );
        }
        let mut outcomes = outcomes.into_iter();
        for reply in replies {
            let outcome = outcomes.next().unwrap_or_else(|| {
                Err(StoreError::Backend(
                    "the store answered no outcome for the write".into(),
                ))
            });
            let _ = reply.send(outcome);
        }
    }
}
