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
//!
//! A PASSIVE checkpoint never starts the log over: under a steady stream of
//! writes the writer has always appended more by the time one ends, so the
//! log only grows (almost 1 GB in 8 s of predictions on this machine), and
//! every append past the file's end costs the kernel fresh zeroed pages (a
//! fifth of all CPU in a perf profile of webhook calls). So once the log holds
//! [`RESTART_FRAMES`], the checkpoint is a RESTART: it copies the few frames
//! left, waits for readers still reading the log (new ones read the database
//! file once everything is copied), and the writer starts the log over from
//! its beginning, writing into pages the file already has: the log stays
//! within about [`RESTART_FRAMES`] however long the load lasts. The writer
//! waits for that, polling every [`BUSY_POLL`] rather than with SQLite's
//! sleeps of whole milliseconds.

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use rusqlite::Connection;

/// The shortest time between two checkpoints while writes keep coming.
const GAP: Duration = Duration::from_millis(20);

/// Frames in the log (4 KiB pages, so 256 MiB) past which a checkpoint starts
/// it over. A RESTART holds the writer for its copy and two syncs (4 to 20 ms
/// measured under load at 32 MiB), so it is kept rare: every few seconds under
/// the heaviest load this machine gives, never without writes.
const RESTART_FRAMES: i64 = 65_536;

/// How often a connection waiting for another's lock (the writer for a
/// RESTART, a RESTART for the writer) tries again.
const BUSY_POLL: Duration = Duration::from_micros(100);

/// Tries before a waiting connection gives up (SQLITE_BUSY): 5 s of polls.
const BUSY_TRIES: i32 = 50_000;

/// The busy handler of the connections that take the write lock.
pub(super) fn poll_when_busy(tries: i32) -> bool {
    std::thread::sleep(BUSY_POLL);
    tries < BUSY_TRIES
}

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
        let checkpoint = |mode: &str| {
            conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| {
                row.get::<_, i64>(1)
            })
        };
        let outcome = checkpoint("PASSIVE").and_then(|frames| match frames > RESTART_FRAMES {
            true => checkpoint("RESTART"),
            false => Ok(frames),
        });
        if let Err(e) = outcome {
            tracing::warn!(error = %e, "a WAL checkpoint failed; the next write tries again");
        }
        std::thread::sleep(GAP);
    }
}
