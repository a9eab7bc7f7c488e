//! Telegram's Bot API: registering a trigger's webhook (`setWebhook` on create and
//! enable, `deleteWebhook` on disable and delete) and answering chats
//! (`sendMessage`, split at Telegram's 4,096-character limit).
//!
//! The API's base URL is `TELEGRAM_API_URL`, so tests talk to a fake on loopback.
//! A bot token is part of every Bot API URL: errors are reported without URLs and
//! the token never reaches a log line.

use rand::Rng;
use serde_json::{Value, json};

use super::super::{ServiceError, ServiceResult, Services};
use crate::domain::Trigger;
use crate::domain::trigger::webhook_url;

/// Longest text one Telegram message may carry.
pub const MESSAGE_LIMIT: usize = 4096;

/// A fresh secret token: 48 characters of `A-Za-z0-9`.
pub fn generate_secret() -> String {
    rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(48)
        .map(char::from)
        .collect()
}

/// One Bot API call; `Err` carries Telegram's description (or why it could not be
/// reached), never the URL.
async fn call(
    services: &Services,
    token: &str,
    method: &str,
    body: Value,
) -> Result<Value, String> {
    let url = format!(
        "{}/bot{token}/{method}",
        services.config.telegram_api_url.trim_end_matches('/')
    );
    let response = services
        .models
        .http
        .post(url)
        .json(&body)
        .timeout(std::time::Duration::from_secs(15))
        .send()
        .await
        .map_err(|e| format!("Telegram could not be reached: {}", e.without_url()))?;
    let status = response.status();
    let reply: Value = response.json().await.map_err(|e| {
        format!(
            "Telegram answered {status} with an unreadable body: {}",
            e.without_url()
        )
    })?;
    if reply.get("ok").and_then(Value::as_bool) == Some(true) {
        Ok(reply)
    } else {
        Err(reply
            .get("description")
            .and_then(Value::as_str)
            .map_or_else(|| format!("Telegram answered {status}"), str::to_owned))
    }
}

/// Brings Telegram in line with a trigger that goes from `before` to `after`:
/// registers the webhook when the trigger becomes (or stays, with changed
/// address, secret or token) an enabled Telegram bot, removes it when it stops
/// being one. Returns the trigger registered, if a registration was made. A
/// refusal is a 502 naming Telegram's description; nothing is stored then.
pub async fn sync_registration(
    services: &Services,
    before: Option<&Trigger>,
    after: &Trigger,
) -> ServiceResult<Option<Trigger>> {
    let active = |t: &Trigger| t.enabled && t.is_telegram() && t.webhook_bot_token.is_some();
    let was = before.filter(|b| active(b));
    if active(after) {
        let unchanged = was.is_some_and(|b| {
            b.webhook_bot_token == after.webhook_bot_token
                && b.webhook_secret == after.webhook_secret
                && b.node_id == after.node_id
        });
        if unchanged {
            return Ok(None);
        }
        let Some(public) = services.config.public_url.as_deref() else {
            return Err(ServiceError::Invalid(
                "registering a Telegram webhook needs PUBLIC_URL (the address Telegram calls)"
                    .into(),
            ));
        };
        let token = after.webhook_bot_token.as_deref().unwrap_or_default();
        call(
            services,
            token,
            "setWebhook",
            json!({
                "url": webhook_url(public, after.id),
                "secret_token": after.webhook_secret,
                "allowed_updates": ["message"],
            }),
        )
        .await
        .map_err(|e| ServiceError::Upstream(format!("Telegram refused setWebhook: {e}")))?;
        // A different token left behind: its bot should stop calling us.
        if let Some(old) = was
            && old.webhook_bot_token != after.webhook_bot_token
        {
            unregister_quietly(services, old).await;
        }
        return Ok(Some(after.clone()));
    }
    if let Some(old) = was {
        let token = old.webhook_bot_token.as_deref().unwrap_or_default();
        call(services, token, "deleteWebhook", json!({}))
            .await
            .map_err(|e| ServiceError::Upstream(format!("Telegram refused deleteWebhook: {e}")))?;
    }
    Ok(None)
}

/// `deleteWebhook` for a trigger going away; a failure is logged, not returned.
pub async fn unregister_quietly(services: &Services, trigger: &Trigger) {
    if !(trigger.is_telegram() && trigger.webhook_bot_token.is_some()) {
        return;
    }
    let token = trigger.webhook_bot_token.as_deref().unwrap_or_default();
    if let Err(e) = call(services, token, "deleteWebhook", json!({})).await {
        tracing::warn!(trigger = %trigger.id, error = %e, "Telegram deleteWebhook failed");
    }
}

/// Sends `text` to a chat, in pieces of at most [`MESSAGE_LIMIT`] characters.
pub async fn send_message(
    services: &Services,
    token: &str,
    chat_id: &Value,
    text: &str,
) -> Result<(), String> {
    for piece in split_message(text) {
        call(
            services,
            token,
            "sendMessage",
            json!({"chat_id": chat_id, "text": piece}),
        )
        .await?;
    }
    Ok(())
}

/// Pieces of at most [`MESSAGE_LIMIT`] characters (never splitting a character);
/// an empty text is one empty piece, which Telegram refuses, so it becomes "…".
pub fn split_message(text: &str) -> Vec<String> {
    if text.is_empty() {
        return vec!["…".to_owned()];
    }
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(MESSAGE_LIMIT)
        .map(|c| c.iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_answers_are_split_at_the_limit() {
        let text = "é".repeat(MESSAGE_LIMIT * 2 + 10);
        let pieces = split_message(&text);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces[0].chars().count(), MESSAGE_LIMIT);
        assert_eq!(pieces[2].chars().count(), 10);
        assert_eq!(pieces.concat(), text);
        assert_eq!(split_message("hi"), ["hi"]);
    }

    #[test]
    fn generated_secrets_suit_telegram() {
        let s = generate_secret();
        assert_eq!(s.len(), 48);
        assert!(s.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(s, generate_secret());
    }
}
