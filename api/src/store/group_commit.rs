//! Group commit of conversation messages.
//!
//! Every completed run stores its question and answer. Committed one transaction
//! per run, that is one write (and on PostgreSQL one flush of the log) per
//! prediction; under load most of the writer's time goes to committing. Here the
//! runs hand their messages to one writer task, which takes everything queued
//! while the previous commit was running and stores it in one transaction. A run
//! is answered only after the transaction holding its messages has committed, so
//! nothing is acknowledged before it is as durable as the backend's synchronous
//! mode makes a commit (SQLite WAL with `synchronous = NORMAL`: survives the
//! process being killed; PostgreSQL: flushed before the commit returns).
//!
//! When a combined commit fails and it held several runs, each run is retried on
//! its own, so one unstorable message (say, text PostgreSQL refuses) fails only
//! its own run.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::{Store, StoreError, StoreResult};
use crate::domain::{ChatMessageRecord, NewChatMessage};

/// Most runs one transaction stores.
const MAX_BATCH: usize = 512;
/// Runs waiting for the writer before new ones wait to be queued.
const QUEUE: usize = 4096;

type Reply = oneshot::Sender<StoreResult<Vec<ChatMessageRecord>>>;

/// One run's messages and where its outcome goes.
struct Pending {
    messages: Vec<NewChatMessage>,
    reply: Reply,
}

/// The handle runs append through; the writer task ends when the last handle is
/// dropped, after storing what was queued.
pub struct GroupCommit {
    queue: mpsc::Sender<Pending>,
}

impl GroupCommit {
    /// Starts the writer over `store` (which does the actual inserts).
    pub fn start(store: Arc<dyn Store>) -> Self {
        let (queue, pending) = mpsc::channel(QUEUE);
        tokio::spawn(write_loop(store, pending));
        GroupCommit { queue }
    }

    /// Appends one run's messages (in order, all or none) once they are committed.
    pub async fn append(
        &self,
        messages: Vec<NewChatMessage>,
    ) -> StoreResult<Vec<ChatMessageRecord>> {
        let stopped = || StoreError::Backend("the message writer has stopped".into());
        let (reply, outcome) = oneshot::channel();
        self.queue
            .send(Pending { messages, reply })
            .await
            .map_err(|_| stopped())?;
        outcome.await.map_err(|_| stopped())?
    }
}

async fn write_loop(store: Arc<dyn Store>, mut queue: mpsc::Receiver<Pending>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        commit(&*store, &mut batch).await;
    }
}

/// Stores `batch` (emptying it) in one transaction, falling back to one per run.
async fn commit(store: &dyn Store, batch: &mut Vec<Pending>) {
    if batch.len() > 1 {
        let counts: Vec<usize> = batch.iter().map(|run| run.messages.len()).collect();
        // Copies, so that the runs can still be stored one by one if this fails.
        let all: Vec<NewChatMessage> = batch
            .iter()
            .flat_map(|run| run.messages.iter().cloned())
            .collect();
        match store.append_chat_messages(all).await {
            Ok(records) => {
                let mut records = records.into_iter();
                for (run, count) in batch.drain(..).zip(counts) {
                    let _ = run.reply.send(Ok(records.by_ref().take(count).collect()));
                }
                return;
            }
            Err(e) => {
                tracing::warn!(runs = batch.len(), error = %e, "group commit failed; storing each run on its own");
            }
        }
    }
    for run in batch.drain(..) {
        let _ = run
            .reply
            .send(store.append_chat_messages(run.messages).await);
    }
}
