//! The callback sender: delivers the outbox's callbacks (`domain::callback`),
//! the POST a webhook call answered at once (`async` mode) is owed when its run
//! ends.
//!
//! A callback is POSTed as JSON with `Idempotency-Key: <callback id>` (the same
//! on every attempt: delivery is at least once, the key lets the receiver drop
//! repeats) and, when it has a secret, `X-Flowise-Signature: sha256=<hex
//! HMAC-SHA256 of the body>` as Flowise 3.1 signs it. It goes through the
//! request tools' address guard (no loopback or private address unless
//! `ALLOW_PRIVATE_REQUESTS` allows it). A 2xx answer delivers it; anything else,
//! or no answer within [`TIMEOUT`], is tried again after 3 s, doubling, at most
//! 10 minutes apart, [`MAX_ATTEMPTS`] attempts in all (about 40 minutes); an
//! address the guard refuses is given up at once. [`run`] claims due callbacks
//! in batches (replicas skip each other's claims; a replica dying mid-send frees
//! them after [`CLAIM`]), sends a batch's callbacks concurrently and records
//! their attempts as they end (those ending together in one write). Attempts count in
//! `weir_trigger_callback_attempts_total{outcome}` and show in the trigger's
//! results.

use std::time::Duration;

use chrono::TimeDelta;
use futures_util::StreamExt;
use reqwest::Url;
use tokio_util::sync::CancellationToken;

use super::super::Services;
use crate::domain::callback::{AttemptOutcome, CallbackAttempt, NewCallback, OutboxCallback};
use crate::domain::time;
use crate::flow::tools::web::HttpCall;

/// Attempts before a callback is given up.
pub const MAX_ATTEMPTS: i64 = 12;
/// How long a receiver has to answer.
const TIMEOUT: Duration = Duration::from_secs(10);
/// How long a claim on a batch lasts (longer than a batch can take to send).
const CLAIM: TimeDelta = TimeDelta::seconds(60);
/// Callbacks claimed at once, and sent at once.
const BATCH: u32 = 256;
const CONCURRENCY: usize = 64;
/// Longest sleep between looks at the outbox.
const POLL: Duration = Duration::from_secs(2);

/// The sender loop (see the module docs).
pub async fn run(services: Services, cancel: CancellationToken) {
    loop {
        if cancel.is_cancelled() {
            break;
        }
        match deliver_due(&services).await {
            // A full batch: more may be due at once.
            Ok(claimed) if claimed == BATCH as usize => continue,
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "callback outbox unavailable"),
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(POLL) => {}
            () = services.callback_wake.notified() => {}
        }
    }
}

/// Sends one batch of due callbacks; how many were claimed.
async fn deliver_due(services: &Services) -> Result<usize, crate::store::StoreError> {
    let now = time::now();
    let due = services
        .store
        .claim_callbacks(now, now + CLAIM, BATCH)
        .await?;
    if due.is_empty() {
        return Ok(0);
    }
    let claimed = due.len();
    // Attempts are recorded as they end (those that ended together in one
    // write), not when the whole batch has: a replica killed mid-batch sends
    // again only what it had not recorded yet, not every callback it claimed.
    let mut ended = futures_util::stream::iter(due)
        .map(|callback| attempt(services, callback))
        .buffer_unordered(CONCURRENCY)
        .ready_chunks(CONCURRENCY);
    let metrics = crate::metrics::metrics();
    while let Some(attempts) = ended.next().await {
        for attempt in &attempts {
            metrics.callback_attempt(match &attempt.outcome {
                AttemptOutcome::Delivered => "delivered",
                AttemptOutcome::Retry { .. } => "retry",
                AttemptOutcome::GaveUp { .. } => "failed",
            });
        }
        services.store.settle_callbacks(&attempts).await?;
    }
    Ok(claimed)
}

/// One attempt at one callback.
async fn attempt(services: &Services, callback: OutboxCallback) -> CallbackAttempt {
    let outcome = match send(services, &callback).await {
        Ok(()) => AttemptOutcome::Delivered,
        Err(Failure::Final(error)) => AttemptOutcome::GaveUp { error },
        Err(Failure::Retry(error)) if callback.attempts + 1 >= MAX_ATTEMPTS => {
            AttemptOutcome::GaveUp { error }
        }
        Err(Failure::Retry(error)) => AttemptOutcome::Retry {
            at: time::now() + backoff(callback.attempts),
            error,
        },
    };
    if let AttemptOutcome::GaveUp { error } = &outcome {
        tracing::warn!(callback = %callback.id, trigger = %callback.trigger_id, error = %error,
            "a callback is given up");
    }
    CallbackAttempt {
        id: callback.id,
        at: time::now(),
        outcome,
    }
}

enum Failure {
    /// Worth another attempt.
    Retry(String),
    /// No attempt can succeed.
    Final(String),
}

async fn send(services: &Services, callback: &OutboxCallback) -> Result<(), Failure> {
    let url = Url::parse(&callback.url)
        .map_err(|e| Failure::Final(format!("the callback URL is not a URL: {e}")))?;
    let web = &services.tools.web;
    web.check(&url).map_err(Failure::Final)?;
    let mut headers = vec![("idempotency-key".to_owned(), callback.id.to_string())];
    if let Some(sealed) = &callback.secret {
        let secret = super::secrets::open_text(
            &services.keyring,
            &sealing_context(callback.trigger_id, callback.id),
            sealed,
        )
        .map_err(|e| Failure::Final(e.to_string()))?;
        headers.push((
            "x-flowise-signature".to_owned(),
            format!(
                "sha256={}",
                super::webhook::hmac_sha256_hex(secret.as_bytes(), callback.body.as_bytes())
            ),
        ));
    }
    let call = HttpCall {
        method: reqwest::Method::POST,
        url,
        headers,
        body: Some((
            "application/json".to_owned(),
            callback.body.clone().into_bytes(),
        )),
    };
    match tokio::time::timeout(TIMEOUT, web.send(call)).await {
        Err(_) => Err(Failure::Retry(format!(
            "no answer within {} s",
            TIMEOUT.as_secs()
        ))),
        Ok(Err(e)) => Err(Failure::Retry(e)),
        Ok(Ok(reply)) if (200..300).contains(&reply.status) => Ok(()),
        Ok(Ok(reply)) => Err(Failure::Retry(format!(
            "the receiver answered HTTP {}",
            reply.status
        ))),
    }
}

/// Whether callbacks may go to `url`: http(s), and no address the request
/// tools' guard refuses (names are checked again at each attempt, where they are
/// resolved). `Err` says why not.
pub fn check_url(services: &Services, url: &str) -> Result<(), String> {
    let parsed = http_url(url).ok_or("must be a valid http or https URL")?;
    services.tools.web.check(&parsed)
}

/// `url` parsed, when it is an http(s) URL.
pub fn http_url(url: &str) -> Option<Url> {
    Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
}

/// The callback a call of `trigger` answered at once is owed, its secret
/// sealed; `Err` says why the URL is refused.
pub fn owed(
    services: &Services,
    trigger: uuid::Uuid,
    url: &str,
    secret: Option<&str>,
) -> Result<NewCallback, OwedError> {
    check_url(services, url).map_err(OwedError::Url)?;
    let id = uuid::Uuid::new_v4();
    let secret = secret
        .map(|plain| {
            super::secrets::seal_text(&services.keyring, &sealing_context(trigger, id), plain)
        })
        .transpose()
        .map_err(OwedError::Sealing)?;
    Ok(NewCallback {
        id,
        url: url.to_owned(),
        secret,
    })
}

/// Why a callback cannot be owed.
#[derive(Debug)]
pub enum OwedError {
    /// The URL is refused (the text says why).
    Url(String),
    /// The secret cannot be sealed (weir's fault).
    Sealing(super::super::ServiceError),
}

/// What the secret of callback `id` of `trigger` is sealed for.
pub fn sealing_context(trigger: uuid::Uuid, id: uuid::Uuid) -> String {
    format!("callback/{trigger}/{id}/secret")
}

/// 3 s, 6 s, 12 s, … at most 10 minutes.
fn backoff(attempts: i64) -> TimeDelta {
    let secs = 3i64.saturating_mul(1 << attempts.clamp(0, 10));
    TimeDelta::seconds(secs.min(600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_ten_minutes() {
        assert_eq!(backoff(0).num_seconds(), 3);
        assert_eq!(backoff(1).num_seconds(), 6);
        assert_eq!(backoff(4).num_seconds(), 48);
        assert_eq!(backoff(11).num_seconds(), 600);
        let total: i64 = (0..MAX_ATTEMPTS - 1)
            .map(|a| backoff(a).num_seconds())
            .sum();
        assert!((1800..3600).contains(&total), "{total}");
    }
}
