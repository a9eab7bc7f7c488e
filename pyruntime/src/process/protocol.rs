//! Every message between the server and a zygote, and what the server believes of them.
//!
//! One JSON object per line each way: the zygote reads a `Setup`, then `Command`s, on its
//! stdin, and writes `Event`s on its stdout. The server trusts nothing a zygote writes
//! (package code runs in it): a line longer than `MAX_EVENT_LINE`, cut off, not UTF-8,
//! not an event, or out of turn — a run the server never sent, a run started twice, an
//! exit of a run that never started, a start-up event after start — is refused by
//! `EventLines` or `believe`, and the pool retires the zygote. No event names a pid, a
//! path or a cgroup: the server acts only on what it made itself.

use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::ChildStdout;

use crate::isolation::cgroups::CgroupSpec;
use crate::isolation::{Ids, Layer, NetworkMode, Plan};

/// Longest line a zygote may write (its events are short; a failure message is capped).
pub const MAX_EVENT_LINE: usize = 64 << 10;
/// Longest failure message of a zygote passed on.
const MAX_FAILURE_MESSAGE: usize = 2000;

/// The first line a zygote reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Setup {
    /// The workspace venv's site-packages (none: the probe's bare interpreter).
    pub site_packages: Option<PathBuf>,
    pub venv_dir: Option<PathBuf>,
    /// What tool code sees as `sys.executable`.
    pub executable: Option<PathBuf>,
    /// Modules to import before the first fork.
    pub preload: Vec<String>,
    /// What every run of this zygote gets before its plan arrives.
    pub sandbox: SandboxSetup,
    /// The zygote's own view (user and mount namespaces, read-only system, interpreter
    /// and venv), entered before any of the workspace's code is imported; `None` when the
    /// runtime is not root (the zygote is then as unprivileged as the runtime).
    pub view: Option<Plan>,
}

/// The part of a run's confinement that is the same for every run of a zygote, so that
/// the next run's processes can be made ready in advance (`Spare`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxSetup {
    pub ids: Ids,
    /// What runs may reach (`public`: the zygote's own network namespace, which the
    /// server connects to the outside before the zygote goes on).
    pub network: NetworkMode,
    /// Per-run cgroups, created by the zygote; `None` without cgroups.
    pub cgroups: Option<CgroupSpec>,
    /// Keep a spare ready after each run (workspace zygotes; not one-shot ones).
    pub keep_spare: bool,
    /// What every run's view shows but its own directories (a plan whose run directory is
    /// a placeholder): a spare builds it ahead (`mounts::prepare_view`). Only for a
    /// zygote with a view of its own.
    #[serde(default)]
    pub view: Option<Plan>,
}

/// What the server asks of a zygote.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Command {
    /// Fork a confined child for one run.
    Run { id: u64, plan: Plan, spec: Value },
    /// Kill run `id` (its timeout passed, or its request is gone).
    Kill { id: u64 },
    /// Accept no more runs; exit when the running ones are over.
    Drain,
    /// The answer to `Event::Unshared`: whether the zygote's id maps were written.
    Mapped { ok: bool },
}

/// What a zygote tells the server. Nothing in it is believed beyond what it says about
/// the zygote's own runs: it names no pid, path or cgroup the server would act on (the
/// server kills a run by asking the zygote, and the zygote itself when it does not
/// comply), and `pool` retires a zygote whose line is malformed or out of turn.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase", deny_unknown_fields)]
pub enum Event {
    /// The zygote entered its own user namespace (`ok`) and waits for its id maps.
    Unshared { ok: bool },
    Ready {
        preloaded: Vec<String>,
        /// How the zygote confined itself before importing anything (the start-up probe's
        /// zygote, which imports nothing of a workspace, is what `/tools/health` shows).
        confinement: Layer,
    },
    /// The run has its plan.
    Started { id: u64 },
    /// The run could not be started.
    Failed { id: u64, message: String },
    Exited {
        id: u64,
        code: Option<i32>,
        signal: Option<i32>,
    },
}

/// What the server still waits to hear about a run it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaiting {
    /// `Started` or `Failed`.
    Start,
    /// `Exited`.
    Exit,
}

/// An event about one of the server's runs, believed because it came in turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEvent {
    Started {
        id: u64,
    },
    /// The failure message, cut to `MAX_FAILURE_MESSAGE` characters.
    Failed {
        id: u64,
        message: String,
    },
    Exited {
        id: u64,
        code: Option<i32>,
        signal: Option<i32>,
    },
}

/// Parses a line a running zygote wrote and checks it against `awaiting` (what the
/// server waits to hear about the run it names, `None` for a run it does not wait for);
/// the reason when it is not believed.
pub fn believe(
    line: &str,
    awaiting: impl FnOnce(u64) -> Option<Awaiting>,
) -> Result<RunEvent, &'static str> {
    let event = serde_json::from_str::<Event>(line).map_err(|_| "not an event")?;
    match event {
        Event::Started { id } => match awaiting(id) {
            Some(Awaiting::Start) => Ok(RunEvent::Started { id }),
            _ => Err("started: no such run waiting to start"),
        },
        Event::Failed { id, message } => match awaiting(id) {
            Some(Awaiting::Start) => Ok(RunEvent::Failed {
                id,
                message: message.chars().take(MAX_FAILURE_MESSAGE).collect(),
            }),
            _ => Err("failed: no such run waiting to start"),
        },
        Event::Exited { id, code, signal } => match awaiting(id) {
            Some(Awaiting::Exit) => Ok(RunEvent::Exited { id, code, signal }),
            _ => Err("exited: no such run started"),
        },
        Event::Ready { .. } | Event::Unshared { .. } => Err("a start-up event after start"),
    }
}

/// One message as its line.
pub fn encode<T: serde::Serialize>(message: &T) -> io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(message).map_err(io::Error::other)?;
    line.push(b'\n');
    Ok(line)
}

/// A zygote's line as it may appear in the log: short, printable.
pub fn excerpt(line: &str) -> String {
    line.chars()
        .take(200)
        .flat_map(char::escape_default)
        .collect()
}

/// A zygote's stdout as lines of at most `MAX_EVENT_LINE` bytes.
pub struct EventLines {
    reader: BufReader<ChildStdout>,
    line: Vec<u8>,
}

impl EventLines {
    pub fn new(stdout: ChildStdout) -> Self {
        Self {
            reader: BufReader::new(stdout),
            line: Vec::new(),
        }
    }

    /// The next line; `None` at EOF; an error for an overlong, cut off or non-UTF-8 line.
    pub async fn next(&mut self) -> io::Result<Option<String>> {
        self.line.clear();
        let read = (&mut self.reader)
            .take(MAX_EVENT_LINE as u64 + 1)
            .read_until(b'\n', &mut self.line)
            .await?;
        if read == 0 {
            return Ok(None);
        }
        if self.line.pop() != Some(b'\n') {
            return Err(io::Error::other(if read > MAX_EVENT_LINE {
                "a zygote line is too long"
            } else {
                "the zygote's last line is cut off"
            }));
        }
        String::from_utf8(std::mem::take(&mut self.line))
            .map(Some)
            .map_err(|_| io::Error::other("a zygote line is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_events_in_turn_are_believed() {
        let waiting = |id| (id == 1).then_some(Awaiting::Start);
        let running = |id| (id == 1).then_some(Awaiting::Exit);
        assert_eq!(
            believe(r#"{"event":"started","id":1}"#, waiting),
            Ok(RunEvent::Started { id: 1 })
        );
        assert!(believe(r#"{"event":"started","id":2}"#, waiting).is_err());
        assert!(believe(r#"{"event":"started","id":1}"#, running).is_err());
        assert!(
            believe(
                r#"{"event":"exited","id":1,"code":0,"signal":null}"#,
                waiting
            )
            .is_err()
        );
        assert_eq!(
            believe(
                r#"{"event":"exited","id":1,"code":0,"signal":null}"#,
                running
            ),
            Ok(RunEvent::Exited {
                id: 1,
                code: Some(0),
                signal: None
            })
        );
        assert!(believe(r#"{"event":"ready","preloaded":[],"confinement":{"state":"enforced","detail":"x"}}"#, running).is_err());
        assert!(
            believe(r#"{"event":"started","id":1,"pid":4242}"#, waiting).is_err(),
            "unknown fields"
        );
        assert!(believe("not json", waiting).is_err());
    }

    #[test]
    fn failure_messages_are_cut() {
        let line = serde_json::to_string(&Event::Failed {
            id: 1,
            message: "x".repeat(10_000),
        })
        .unwrap_or_default();
        match believe(&line, |_| Some(Awaiting::Start)) {
            Ok(RunEvent::Failed { message, .. }) => assert_eq!(message.len(), MAX_FAILURE_MESSAGE),
            other => panic!("{other:?}"),
        }
    }
}
