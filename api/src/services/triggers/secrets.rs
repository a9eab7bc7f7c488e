//! A webhook trigger's secrets at rest: its `webhookSecret`, its Telegram bot
//! token and its `callbackSecret` are stored sealed with the server's key, like credentials
//! (`crate::sealing`), each bound to its trigger and field.
//!
//! The store holds `sealed:<keyId>:<data>`; everything above it works with the
//! plain values: [`seal`] before a trigger is written, [`open`] after one is read
//! where its secrets are used. [`reseal_all`] runs at start: it seals values
//! stored in plain text by earlier versions (migrated in place) and moves values
//! sealed by a previous key (`WEIR_SECRET_KEY_PREVIOUS`) to the current one.

use super::super::{ServiceResult, Services};
use crate::domain::Trigger;
use crate::sealing::Keyring;

use crate::services::sealed::PREFIX;
pub use crate::services::sealed::{open_text, seal_text};

/// The fields sealed, by the name that binds each value to its field.
#[derive(Clone, Copy)]
enum Field {
    Secret,
    BotToken,
    CallbackSecret,
}

impl Field {
    fn context(self, trigger: &Trigger) -> String {
        let name = match self {
            Field::Secret => "webhookSecret",
            Field::BotToken => "webhookBotToken",
            Field::CallbackSecret => "callbackSecret",
        };
        format!("trigger/{}/{}/{name}", trigger.workspace_id, trigger.id)
    }
}

/// The stored form of `plain`.
fn seal_value(
    keyring: &Keyring,
    trigger: &Trigger,
    field: Field,
    plain: &str,
) -> ServiceResult<String> {
    seal_text(keyring, &field.context(trigger), plain)
}

/// The plain value of a stored one (plain text left by an earlier version reads
/// as it is).
fn open_value(
    keyring: &Keyring,
    trigger: &Trigger,
    field: Field,
    stored: &str,
) -> ServiceResult<String> {
    open_text(keyring, &field.context(trigger), stored)
}

/// `trigger` as the store keeps it: its secrets sealed.
pub fn seal(keyring: &Keyring, trigger: &Trigger) -> ServiceResult<Trigger> {
    let mut stored = trigger.clone();
    if let Some(secret) = &trigger.webhook_secret {
        stored.webhook_secret = Some(seal_value(keyring, trigger, Field::Secret, secret)?);
    }
    if let Some(token) = &trigger.webhook_bot_token {
        stored.webhook_bot_token = Some(seal_value(keyring, trigger, Field::BotToken, token)?);
    }
    if let Some(secret) = &trigger.callback_secret {
        stored.callback_secret = Some(seal_value(keyring, trigger, Field::CallbackSecret, secret)?);
    }
    Ok(stored)
}

/// `stored` with its secrets opened.
pub fn open(keyring: &Keyring, mut stored: Trigger) -> ServiceResult<Trigger> {
    if let Some(secret) = stored.webhook_secret.take() {
        stored.webhook_secret = Some(open_value(keyring, &stored, Field::Secret, &secret)?);
    }
    if let Some(token) = stored.webhook_bot_token.take() {
        stored.webhook_bot_token = Some(open_value(keyring, &stored, Field::BotToken, &token)?);
    }
    if let Some(secret) = stored.callback_secret.take() {
        stored.callback_secret = Some(open_value(
            keyring,
            &stored,
            Field::CallbackSecret,
            &secret,
        )?);
    }
    Ok(stored)
}

/// Seals every trigger secret stored in plain text and reseals those sealed by a
/// previous key (the store lists only triggers holding such a value). Returns how
/// many triggers changed; one whose secrets do not open is left as it is (and said
/// in the log), so a wrong setting loses nothing.
pub async fn reseal_all(services: &Services) -> ServiceResult<usize> {
    let keyring = &services.keyring;
    let current = format!("{PREFIX}{}:", keyring.current_id());
    let mut moved = 0;
    for stored in services
        .store
        .triggers_with_secrets_not_sealed_by(&current)
        .await?
    {
        let plain = match open(keyring, stored.clone()) {
            Ok(plain) => plain,
            Err(e) => {
                tracing::error!(trigger = %stored.id, workspace = %stored.workspace_id,
                    "cannot reseal a trigger's secrets: {e}");
                continue;
            }
        };
        let resealed = seal(keyring, &plain)?;
        if services
            .store
            .replace_trigger_secrets(&stored, &resealed)
            .await?
        {
            moved += 1;
        }
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{TriggerType, time};
    use uuid::Uuid;

    fn trigger() -> Trigger {
        Trigger {
            trigger_type: TriggerType::Webhook,
            cron_expression: None,
            webhook_platform: Some("telegram".into()),
            webhook_secret: Some("s3cret".into()),
            webhook_bot_token: Some("123:token".into()),
            timeout: 30,
            next_execution: None,
            ..Trigger::example(time::now())
        }
    }

    #[test]
    fn secrets_are_sealed_per_trigger_and_field() {
        let keyring = Keyring::with_key([7; 32]);
        let plain = trigger();
        let stored = seal(&keyring, &plain).unwrap();
        let secret = stored.webhook_secret.as_deref().unwrap();
        assert!(secret.starts_with(PREFIX) && !secret.contains("s3cret"));
        assert!(
            !stored
                .webhook_bot_token
                .as_deref()
                .unwrap()
                .contains("token")
        );
        let opened = open(&keyring, stored.clone()).unwrap();
        assert_eq!(opened.webhook_secret, plain.webhook_secret);
        assert_eq!(opened.webhook_bot_token, plain.webhook_bot_token);
        // A value moved to another field or trigger does not open.
        let mut swapped = stored.clone();
        swapped.webhook_secret = stored.webhook_bot_token.clone();
        assert!(open(&keyring, swapped).is_err());
        let mut elsewhere = stored;
        elsewhere.id = Uuid::new_v4();
        assert!(open(&keyring, elsewhere).is_err());
        // Plain text from an earlier version reads as it is, even when it looks a
        // little like the sealed form.
        for old in [
            "old-plain",
            "sealed:my:own-secret",
            "sealed:0123456789abcdef:not base64!",
        ] {
            assert_eq!(
                open_value(&keyring, &plain, Field::Secret, old).unwrap(),
                old
            );
        }
    }
}
