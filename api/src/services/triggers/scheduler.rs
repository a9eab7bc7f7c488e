//! The cron scheduler every `weir serve` runs.
//!
//! [`run`] loops until cancelled: it records firings whose owner died (their
//! lease ran out) as failed, claims due triggers in batches — one transaction per
//! batch that other replicas skip past, so each firing happens exactly once across
//! replicas — spawns each claimed firing, renews the leases of the firings this
//! replica runs, prunes old history now and then, and sleeps until
//! [`CLAIM_AHEAD`] before the earliest `nextExecution` in the store, a trigger
//! change on this replica, or the poll interval (which bounds how late a change
//! made on another replica is seen).
//!
//! Firings are claimed up to [`CLAIM_AHEAD`] before they are due, and each waits
//! for its scheduled time once claimed: claiming thousands of triggers due in the
//! same second takes a good part of a second, which would otherwise make the last
//! of them that late.
//!
//! Missed runs: a scheduled time up to [`LATE_LIMIT`] late still runs; older ones
//! (no replica was up) are skipped and recorded as one `missed` result with their
//! count; `nextExecution` moves to the first future time. A backlog is never
//! replayed.

use std::time::Duration;

use chrono::TimeDelta;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::super::Services;
use super::firing;
use super::schedule::Schedule;
use crate::domain::time::Timestamp;
use crate::domain::{ClaimPlan, Trigger, time};

/// How late a scheduled time may be and still run.
pub const LATE_LIMIT: TimeDelta = TimeDelta::seconds(60);
/// Triggers claimed per transaction.
const CLAIM_BATCH: u32 = 1000;
/// How long before its time a firing is claimed. Under the shortest lease
/// (3 s), so a claimed firing starts, and has its lease renewed, well before
/// the lease could run out; a trigger changed in this window keeps the firing
/// already claimed, as one changed while it runs does.
pub const CLAIM_AHEAD: Duration = Duration::from_secs(1);
/// Parsed schedules kept per thread for the claim planner.
const SCHEDULE_CACHE: usize = 4096;
/// Longest sleep between looks at the store.
const POLL: Duration = Duration::from_secs(5);
/// How often old results, delivery ids and sent mail are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(600);
/// Delivery ids are remembered this long (replays within it get the stored answer).
pub const DELIVERY_MEMORY: TimeDelta = TimeDelta::hours(24);
/// Missed times counted one by one at most; beyond, the count says "at least".
const MAX_MISSED_COUNTED: i64 = 100_000;

/// What a due trigger does at `now` (see the module docs), never running or
/// scheduling a time after its end date. Runs inside the claiming transaction.
pub fn plan(trigger: &Trigger, now: Timestamp) -> ClaimPlan {
    let mut planned = plan_schedule(trigger, now);
    if planned.run_at.is_some_and(|at| trigger.ended_by(at)) {
        planned.run_at = None;
    }
    planned.next = planned.next.filter(|next| !trigger.ended_by(*next));
    planned
}

fn plan_schedule(trigger: &Trigger, now: Timestamp) -> ClaimPlan {
    let schedule = trigger
        .cron_expression
        .as_deref()
        .and_then(|expr| cached_schedule(expr, &trigger.timezone));
    let (Some(schedule), Some(mut due)) = (schedule, trigger.next_execution) else {
        return ClaimPlan {
            run_at: None,
            missed: 0,
            next: None,
        };
    };
    let mut run_at = None;
    let mut missed = 0;
    while due <= now {
        if now - due <= LATE_LIMIT {
            if run_at.is_some() {
                missed += 1;
            }
            run_at = Some(due);
        } else {
            missed += 1;
        }
        if missed >= MAX_MISSED_COUNTED {
            return ClaimPlan {
                run_at,
                missed,
                next: schedule.next_after(now),
            };
        }
        match schedule.next_after(due) {
            Some(next) => due = next,
            None => {
                return ClaimPlan {
                    run_at,
                    missed,
                    next: None,
                };
            }
        }
    }
    ClaimPlan {
        run_at,
        missed,
        next: Some(due),
    }
}

/// [`plan`], counting the runs it records as missed (`weir_trigger_missed_runs`).
fn plan_counted(trigger: &Trigger, now: Timestamp) -> ClaimPlan {
    let planned = plan(trigger, now);
    if planned.missed > 0 {
        crate::metrics::metrics()
            .missed_runs
            .inc_by(u64::try_from(planned.missed).unwrap_or(0));
    }
    planned
}

thread_local! {
    /// Schedules by (expression, zone): thousands of triggers due at once mostly
    /// share a few expressions, and parsing is the planner's largest cost.
    static SCHEDULES: std::cell::RefCell<std::collections::HashMap<(String, String), Option<Schedule>>> =
        std::cell::RefCell::default();
}

fn cached_schedule(expression: &str, zone: &str) -> Option<Schedule> {
    SCHEDULES.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(found) = cache.get(&(expression.to_owned(), zone.to_owned())) {
            return found.clone();
        }
        if cache.len() >= SCHEDULE_CACHE {
            cache.clear();
        }
        let parsed = Schedule::parse(expression, Some(zone)).ok();
        cache.insert((expression.to_owned(), zone.to_owned()), parsed.clone());
        parsed
    })
}

/// The scheduler loop (see the module docs). Firings it starts go into `tracker`.
pub async fn run(services: Services, cancel: CancellationToken, tracker: TaskTracker) {
    let lease = TimeDelta::seconds(i64::from(services.config.trigger_lease_secs));
    let renew_every = Duration::from_secs(u64::from(services.config.trigger_lease_secs) / 3);
    let mut last_renew = tokio::time::Instant::now();
    let mut last_prune: Option<tokio::time::Instant> = None;
    tracing::info!(replica = %services.replica_id, "trigger scheduler started");
    loop {
        if cancel.is_cancelled() {
            break;
        }
        let now = time::now();
        let horizon = now + TimeDelta::from_std(CLAIM_AHEAD).unwrap_or_default();
        let keep = services.config.trigger_results_keep;
        match services.store.expire_firings(now, keep).await {
            Ok(0) => {}
            Ok(n) => {
                tracing::warn!(count = n, "firings of a stopped replica recorded as failed");
                services.mail_wake.notify_one();
            }
            Err(e) => tracing::error!(error = %e, "cannot expire trigger firings"),
        }
        // Everything due is claimed before any of it runs, so the claims do not
        // queue behind the store writes of the firings they start.
        let claiming = std::time::Instant::now();
        let mut due = Vec::new();
        loop {
            let claimed = services
                .store
                .claim_due_triggers(
                    horizon,
                    services.replica_id,
                    now + lease,
                    CLAIM_BATCH,
                    plan_counted,
                )
                .await;
            match claimed {
                Ok(firings) => {
                    let full = firings.len() as u32 == CLAIM_BATCH;
                    due.extend(firings);
                    if !full {
                        break;
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot claim due triggers");
                    break;
                }
            }
        }
        if !due.is_empty() {
            let ms = claiming.elapsed().as_millis() as u64;
            tracing::debug!(count = due.len(), ms, "claimed due firings");
        }
        for firing in due {
            let services = services.clone();
            tracker.spawn(async move {
                let started = on_time(firing.scheduled_at).await;
                // Deleting a trigger deletes its claimed firings: `run_cron`
                // starts one that waited for its time only if it is still there.
                firing::run_cron(services, firing, started).await;
            });
        }
        if last_renew.elapsed() >= renew_every {
            last_renew = tokio::time::Instant::now();
            let ids = services.running.ids();
            if let Err(e) = services
                .store
                .renew_leases(services.replica_id, &ids, time::now() + lease)
                .await
            {
                tracing::error!(error = %e, "cannot renew firing leases");
            }
        }
        if last_prune.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
            last_prune = Some(tokio::time::Instant::now());
            let now = time::now();
            let max_age = TimeDelta::days(i64::from(services.config.trigger_results_max_age_days));
            if let Err(e) = services
                .store
                .prune_trigger_history(now - max_age, now - DELIVERY_MEMORY)
                .await
            {
                tracing::error!(error = %e, "cannot prune trigger history");
            }
        }
        let mut wait = POLL.min(renew_every);
        match services.store.next_cron_due().await {
            Ok(Some(next)) => {
                let until = (next - time::now()).to_std().unwrap_or_default();
                wait = wait.min(until.saturating_sub(CLAIM_AHEAD));
            }
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "cannot read the next due trigger"),
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(wait) => {}
            () = services.scheduler_wake.notified() => {}
        }
    }
    tracing::info!("trigger scheduler stopped");
}

/// Waits until `at` (at once when it has passed); returns the time it goes on,
/// never before `at`.
async fn on_time(at: Timestamp) -> Timestamp {
    loop {
        let now = time::now();
        match (at - now).to_std() {
            Ok(left) if !left.is_zero() => tokio::time::sleep(left).await,
            _ => return now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        chrono::DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&chrono::Utc))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn trigger(expr: &str, next: &str) -> Trigger {
        Trigger {
            cron_expression: Some(expr.into()),
            ..Trigger::example(at(next))
        }
    }

    #[tokio::test]
    async fn a_firing_claimed_ahead_goes_on_at_its_time_not_before() {
        let at = time::now() + TimeDelta::milliseconds(120);
        let started = on_time(at).await;
        assert!(started >= at, "{started} < {at}");
        assert!(
            started - at < TimeDelta::milliseconds(100),
            "{started} - {at}"
        );
        // A time that has passed goes on at once.
        let past = time::now() - TimeDelta::seconds(5);
        assert!(on_time(past).await - past >= TimeDelta::seconds(5));
    }

    #[test]
    fn on_time_runs_and_moves_on() {
        let t = trigger("* * * * *", "2026-01-01T00:01:00Z");
        let p = plan(&t, at("2026-01-01T00:01:00.200Z"));
        assert_eq!(p.run_at, Some(at("2026-01-01T00:01:00Z")));
        assert_eq!(p.missed, 0);
        assert_eq!(p.next, Some(at("2026-01-01T00:02:00Z")));
    }

    #[test]
    fn up_to_a_minute_late_still_runs() {
        let t = trigger("0 * * * *", "2026-01-01T01:00:00Z");
        let p = plan(&t, at("2026-01-01T01:00:59Z"));
        assert_eq!(p.run_at, Some(at("2026-01-01T01:00:00Z")));
        assert_eq!(p.missed, 0);
    }

    #[test]
    fn a_backlog_is_counted_not_replayed() {
        // Down from 00:01 to 00:10:30: 00:01..00:09 missed, 00:10 runs (30 s late).
        let t = trigger("* * * * *", "2026-01-01T00:01:00Z");
        let p = plan(&t, at("2026-01-01T00:10:30Z"));
        assert_eq!(p.run_at, Some(at("2026-01-01T00:10:00Z")));
        assert_eq!(p.missed, 9);
        assert_eq!(p.next, Some(at("2026-01-01T00:11:00Z")));
        // Hourly, down for three hours past the last one: nothing runs now.
        let t = trigger("0 * * * *", "2026-01-01T01:00:00Z");
        let p = plan(&t, at("2026-01-01T03:30:00Z"));
        assert_eq!(p.run_at, None);
        assert_eq!(p.missed, 3);
        assert_eq!(p.next, Some(at("2026-01-01T04:00:00Z")));
    }
}
