//! WAL checkpoints off the writer's path.
//!
//! By default SQLite copies the write-ahead log back into the database file
//! inside the commit that takes the log past 1,000 pages, so the store's one
//! writer stops committing runs while it copies (a third of the writer's time
//! in a profile of the memory flow). Here the writer only appends to the log
//! (`wal_autocheckpoint = 0`) and nudges a thread of the store's own, with a
//! connection of its own, which runs a PASSIVE checkpoint: one that never waits
//! for readers or the writer, and never makes them wait. Under a stream of
//! writes it runs at most once per [`GAP`]; with no writes it sleeps. The
//! thread ends when the store is dropped; closing the last connection then
//! checkpoints what is left, as SQLite always does.

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use rusqlite::Connection;

/// The shortest time between two checkpoints while writes keep coming.
const GAP: Duration = Duration::from_millis(20);

/// The handle the writer nudges after each write.
pub(super) struct Checkpointer {
    nudge: SyncSender<()>,
}

impl Checkpointer {
    /// Starts the checkpoint thread over `conn` (a connection of its own).
    pub(super) fn start(conn: Connection) -> std::io::Result<Self> {
        let (nudge, nudged) = sync_channel(1);
        std::thread::Builder::new()
            .name("weir-checkpoint".into())
            .spawn(move || run(&conn, &nudged))?;
        Ok(Checkpointer { nudge })
    }

    /// Something was written: a checkpoint is due (one already due absorbs it).
    pub(super) fn nudge(&self) {
        match self.nudge.try_send(()) {
            Ok(()) | Err(TrySendError::Full(())) => {}
            Err(TrySendError::Disconnected(())) => {
                tracing::error!("the checkpoint thread has stopped; the write-ahead log grows");
            }
        }
    }
}

fn run(conn: &Connection, nudged: &Receiver<()>) {
    while nudged.recv().is_ok() {
        // (busy, log frames, frames copied): busy is normal under a write.
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "a WAL checkpoint failed; the next write tries again");
        }
        std::thread::sleep(GAP);
    }
}
