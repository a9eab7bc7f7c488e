//! The failure-mail sender: drains the outbox over SMTP (`SMTP_URL`, `SMTP_FROM`).
//!
//! A failed execution of a trigger with a `notificationEmail` puts a message in
//! the outbox in the same transaction as its result. [`run`] claims due messages
//! (replicas skip each other's claims), sends at most one mail per trigger per
//! [`MAIL_INTERVAL`] — failures in between are summarised in the next mail — and
//! retries a failed delivery with exponential backoff (5 s doubling, at most 10
//! minutes). Without `SMTP_URL` the outbox is kept unsent and that is said once
//! at start.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::TimeDelta;
use lettre::message::Mailbox;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use tokio_util::sync::CancellationToken;

use super::super::Services;
use crate::domain::OutboxMail;
use crate::domain::time::{self, Timestamp};

/// At most one mail per trigger this often.
pub const MAIL_INTERVAL: TimeDelta = TimeDelta::minutes(10);
/// How long a claim on outbox rows lasts (a replica dying mid-send frees them).
const CLAIM: TimeDelta = TimeDelta::seconds(120);
/// Longest sleep between looks at the outbox.
const POLL: Duration = Duration::from_secs(5);

/// The sender loop (see the module docs).
pub async fn run(services: Services, cancel: CancellationToken) {
    let Some(url) = services.config.smtp_url.clone() else {
        if let Ok(true) = services.store.any_trigger_with_email().await {
            tracing::warn!(
                "notificationEmail set but no SMTP_URL: failure e-mail stays in the outbox unsent"
            );
        }
        return;
    };
    let transport = match AsyncSmtpTransport::<Tokio1Executor>::from_url(&url) {
        Ok(builder) => builder.timeout(Some(Duration::from_secs(20))).build(),
        Err(e) => {
            tracing::error!(error = %e, "SMTP_URL cannot be used; failure e-mail is not sent");
            return;
        }
    };
    let from: Mailbox = match services.config.smtp_from.parse() {
        Ok(from) => from,
        Err(e) => {
            tracing::error!(error = %e, "SMTP_FROM is not an address; failure e-mail is not sent");
            return;
        }
    };
    loop {
        if cancel.is_cancelled() {
            break;
        }
        let mut wait = POLL;
        if let Err(e) = send_due(&services, &transport, &from, &mut wait).await {
            tracing::error!(error = %e, "failure-mail outbox unavailable");
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(wait) => {}
            () = services.mail_wake.notified() => {}
        }
    }
}

async fn send_due(
    services: &Services,
    transport: &AsyncSmtpTransport<Tokio1Executor>,
    from: &Mailbox,
    wait: &mut Duration,
) -> Result<(), crate::store::StoreError> {
    let now = time::now();
    let claimed = services.store.claim_mail(now, now + CLAIM).await?;
    let mut by_trigger: BTreeMap<_, (Vec<OutboxMail>, Option<Timestamp>)> = BTreeMap::new();
    for (mail, last_sent) in claimed {
        let entry = by_trigger.entry(mail.trigger_id).or_default();
        entry.1 = last_sent;
        entry.0.push(mail);
    }
    for (_, (mails, last_sent)) in by_trigger {
        let ids: Vec<_> = mails.iter().map(|m| m.id).collect();
        if let Some(last) = last_sent
            && last + MAIL_INTERVAL > now
        {
            // Too soon after the last mail: these wait and go out together.
            let at = last + MAIL_INTERVAL;
            services.store.mail_retry(&ids, at, false).await?;
            continue;
        }
        let attempts = mails.iter().map(|m| m.attempts).max().unwrap_or(0);
        match compose(from, &mails) {
            Ok(message) => match transport.send(message).await {
                Ok(_) => {
                    services.store.mail_sent(&ids, time::now()).await?;
                    tracing::info!(count = ids.len(), "failure e-mail sent");
                }
                Err(e) => {
                    let delay = backoff(attempts);
                    tracing::warn!(error = %e, retry_in_secs = delay.num_seconds(), "cannot send failure e-mail; will retry");
                    services.store.mail_retry(&ids, now + delay, true).await?;
                    *wait = (*wait).min(delay.to_std().unwrap_or(POLL));
                }
            },
            Err(e) => {
                tracing::error!(error = %e, "a failure e-mail cannot be built; dropped");
                services.store.mail_sent(&ids, time::now()).await?;
            }
        }
    }
    Ok(())
}

/// 5 s, 10 s, 20 s, … at most 10 minutes.
fn backoff(attempts: i64) -> TimeDelta {
    let secs = 5i64.saturating_mul(1 << attempts.clamp(0, 10));
    TimeDelta::seconds(secs.min(600))
}

/// One mail for a trigger's pending failures: the first in full, the others listed.
fn compose(from: &Mailbox, mails: &[OutboxMail]) -> Result<Message, String> {
    let first = mails.first().ok_or("no mail")?;
    let to: Mailbox = first
        .recipient
        .parse()
        .map_err(|e| format!("recipient: {e}"))?;
    let mut body = first.body.clone();
    let subject = if mails.len() > 1 {
        body.push_str(&format!(
            "\n{} more failure(s) since, not mailed one by one:\n",
            mails.len() - 1
        ));
        for more in &mails[1..] {
            let error = more
                .body
                .lines()
                .find_map(|l| l.strip_prefix("Error: "))
                .unwrap_or("");
            body.push_str(&format!("- {}: {error}\n", time::format(&more.created_at)));
        }
        format!("{} (and {} more)", first.subject, mails.len() - 1)
    } else {
        first.subject.clone()
    };
    Message::builder()
        .from(from.clone())
        .to(to)
        .subject(subject)
        .body(body)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn backoff_doubles_up_to_ten_minutes() {
        assert_eq!(backoff(0).num_seconds(), 5);
        assert_eq!(backoff(1).num_seconds(), 10);
        assert_eq!(backoff(3).num_seconds(), 40);
        assert_eq!(backoff(20).num_seconds(), 600);
    }

    #[test]
    fn later_failures_are_summarised() {
        let mail = |error: &str| OutboxMail {
            id: Uuid::new_v4(),
            trigger_id: Uuid::nil(),
            recipient: "ops@example.com".into(),
            subject: "weir: trigger 't' failed".into(),
            body: format!("Trigger: t\nError: {error}\n"),
            attempts: 0,
            created_at: time::now(),
        };
        let from: Mailbox = "weir <weir@localhost>".parse().unwrap();
        let message = compose(&from, &[mail("first"), mail("second"), mail("third")]).unwrap();
        let text = String::from_utf8(message.formatted()).unwrap();
        assert!(text.contains("(and 2 more)"), "{text}");
        assert!(text.contains("Error: first"), "{text}");
        assert!(text.contains(": second"), "{text}");
        assert!(text.contains(": third"), "{text}");
    }
}
