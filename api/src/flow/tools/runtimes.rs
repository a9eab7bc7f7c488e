//! Which Python tool runtime a workspace's runs go to, when `PYTHON_RUNTIME`
//! names several.
//!
//! A workspace is placed by rendezvous (highest-random-weight) hashing over the
//! runtimes' addresses: every replica of weir given the same list places it on
//! the same runtime, with no coordination, so its virtual environment, warm
//! interpreter and stdio MCP servers stay on one host. Removing a runtime from
//! the list moves only the workspaces it held; adding one takes a fair share.
//!
//! A runtime that fails its health check (`GET /tools/health`, every
//! `PYTHON_RUNTIME_HEALTH_MS`), or refuses a connection, is skipped: its
//! workspaces go to their next choice (the same one on every replica) until it
//! answers again, and then move back, to the environments they already have.
//! Only a refused connection is retried elsewhere, since such a request never
//! reached a runtime; a run that timed out or broke halfway is never repeated.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::metrics::metrics;

/// One runtime of the list.
struct Member {
    /// `http://host:port`, without trailing slash.
    base: String,
    /// Whether its last health check (or call) found it answering.
    up: AtomicBool,
}

/// The runtimes of `PYTHON_RUNTIME`, shared by every clone.
#[derive(Clone)]
pub struct Runtimes {
    members: Arc<[Member]>,
}

impl Runtimes {
    /// The runtimes at `bases` (at least one), all assumed up until checked.
    pub fn new(bases: &[String]) -> Self {
        let members: Arc<[Member]> = bases
            .iter()
            .map(|base| Member {
                base: base.trim_end_matches('/').to_owned(),
                up: AtomicBool::new(true),
            })
            .collect();
        for member in members.iter() {
            metrics().python_runtime_up(&member.base, true);
        }
        Runtimes { members }
    }

    /// Every runtime's address, in the configured order.
    pub fn bases(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|m| m.base.as_str())
    }

    /// The runtimes in the order `workspace` tries them: the ones answering by
    /// falling rendezvous weight, then the ones seen down (so that with every
    /// runtime down the call still goes somewhere and says why it failed).
    pub fn order(&self, workspace: &str) -> Vec<&str> {
        let mut ranked: Vec<(bool, u64, &str)> = self
            .members
            .iter()
            .map(|m| {
                let up = m.up.load(Ordering::Relaxed);
                (up, weight(&m.base, workspace), m.base.as_str())
            })
            .collect();
        ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        ranked.into_iter().map(|(_, _, base)| base).collect()
    }

    /// Records what a call or a health check saw of the runtime at `base`.
    pub fn saw(&self, base: &str, answering: bool) {
        let Some(member) = self.members.iter().find(|m| m.base == base) else {
            return;
        };
        let was = member.up.swap(answering, Ordering::Relaxed);
        if was != answering {
            metrics().python_runtime_up(base, answering);
            if answering {
                tracing::info!(
                    runtime = base,
                    "the Python runtime answers again; its workspaces move back"
                );
            } else {
                tracing::warn!(
                    runtime = base,
                    "the Python runtime is down; its workspaces move to the next runtime"
                );
            }
        }
    }

    /// Checks every runtime's health every `interval` until the process ends;
    /// with a single runtime there is nothing to move, so nothing is checked.
    pub async fn watch(self, client: reqwest::Client, interval: Duration) {
        if self.members.len() < 2 {
            return;
        }
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let timeout = interval.min(Duration::from_secs(2));
            let checks = self.members.iter().map(|m| {
                let client = &client;
                async move {
                    let answered = health(client, &m.base, timeout).await.is_ok();
                    (m.base.as_str(), answered)
                }
            });
            for (base, answered) in futures_util::future::join_all(checks).await {
                self.saw(base, answered);
            }
        }
    }
}

/// Whether the runtime at `base` answers `GET /tools/health` within `timeout`;
/// why not, when it does not.
pub async fn health(client: &reqwest::Client, base: &str, timeout: Duration) -> Result<(), String> {
    let url = format!("{base}/tools/health");
    match client.get(&url).timeout(timeout).send().await {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => Err(format!("{url} answered HTTP {}", r.status().as_u16())),
        Err(e) => Err(format!(
            "{url} cannot be reached: {}",
            crate::llm::http::root_cause(&e)
        )),
    }
}

/// The rendezvous weight of `workspace` on the runtime at `base`: FNV-1a over
/// both (a separator between them), finished with SplitMix64's mixer so close
/// inputs spread. Fixed here, not `std`'s hasher, so that every build and every
/// replica agrees.
fn weight(base: &str, workspace: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in base.bytes().chain([0xff]).chain(workspace.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Runtimes {
        Runtimes::new(&[
            "http://a:8000".into(),
            "http://b:8000".into(),
            "http://c:8000".into(),
        ])
    }

    #[test]
    fn workspaces_spread_and_stay_put() {
        let runtimes = three();
        let mut counts = std::collections::HashMap::new();
        for i in 0..3000 {
            let ws = format!("workspace-{i}");
            let placed = runtimes.order(&ws)[0].to_owned();
            assert_eq!(runtimes.order(&ws)[0], placed, "placement is stable");
            *counts.entry(placed).or_insert(0) += 1;
        }
        for (base, n) in counts {
            assert!((800..1200).contains(&n), "{base} got {n} of 3000");
        }
    }

    #[test]
    fn a_runtime_down_moves_only_its_workspaces_and_they_come_back() {
        let runtimes = three();
        let before: Vec<String> = (0..600)
            .map(|i| runtimes.order(&format!("w{i}"))[0].to_owned())
            .collect();
        runtimes.saw("http://b:8000", false);
        for (i, was) in before.iter().enumerate() {
            let now = runtimes.order(&format!("w{i}"))[0];
            if was == "http://b:8000" {
                // the next choice, the same one every replica computes
                assert_ne!(now, "http://b:8000");
            } else {
                assert_eq!(now, was, "a workspace not on b does not move");
            }
        }
        runtimes.saw("http://b:8000", true);
        for (i, was) in before.iter().enumerate() {
            assert_eq!(runtimes.order(&format!("w{i}"))[0], was);
        }
    }

    #[test]
    fn with_every_runtime_down_a_call_still_has_somewhere_to_go() {
        let runtimes = three();
        for base in ["http://a:8000", "http://b:8000", "http://c:8000"] {
            runtimes.saw(base, false);
        }
        assert_eq!(runtimes.order("w").len(), 3);
    }
}
