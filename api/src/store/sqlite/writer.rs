//! The store's one write connection, on a thread of its own.
//!
//! SQLite takes one writer at a time, so every write of the store goes through
//! one connection. It lives on a named thread (`weir-sqlite-w`) that runs the
//! writes sent to it one after the other, rather than behind a mutex on
//! tokio's blocking pool: no thread is woken from the pool (or spawned) per
//! write, the writer's CPU shows as one thread in `top` and in
//! `scripts/bench/scaling`'s busiest-thread column (the group commit sends it
//! one batch of runs at a time, so that is where a serial limit would show),
//! and the checkpointer is nudged from here after each write. A write that
//! panics is answered as a failed store task; the thread and the connection
//! (whose open transaction SQLite rolls back) carry on.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, Sender, channel};

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::checkpoint::Checkpointer;
use crate::store::{StoreError, StoreResult};

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// The handle writes are sent through; the thread ends when it is dropped.
pub(super) struct Writer {
    jobs: Sender<Job>,
}

impl Writer {
    /// Starts the writer thread over `conn`, nudging `checkpointer` after writes.
    pub(super) fn start(conn: Connection, checkpointer: Checkpointer) -> std::io::Result<Self> {
        let (jobs, queue) = channel();
        std::thread::Builder::new()
            .name("weir-sqlite-w".into())
            .spawn(move || run(conn, &queue, &checkpointer))?;
        Ok(Writer { jobs })
    }

    /// Runs `f` with the write connection, after the writes sent before it.
    pub(super) async fn call<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let _ = reply.send(f(conn));
        });
        self.jobs
            .send(job)
            .map_err(|_| StoreError::Backend("the store's writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Backend("store task failed: the write panicked".into()))?
            .map_err(super::backend)
    }
}

fn run(mut conn: Connection, queue: &Receiver<Job>, checkpointer: &Checkpointer) {
    while let Ok(job) = queue.recv() {
        if catch_unwind(AssertUnwindSafe(|| job(&mut conn))).is_err() {
            tracing::error!("a store write panicked; it was rolled back");
        }
        checkpointer.nudge();
    }
}
