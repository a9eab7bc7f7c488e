//! The webhook endpoint's logic: `POST /api/v1/triggers/webhook/:address` runs the
//! trigger's chatflow with the call's JSON, synchronously unless the trigger
//! answers at once.
//!
//! [`find`] resolves the address before the body is read. The trigger's id (what
//! `webhookUrl` gives) is the canonical address and a capability. The node id is
//! an alias kept for integrations written against the spec's address: it reaches a
//! trigger only when exactly one webhook trigger in the whole store (every
//! workspace, enabled or not) carries that node id and that trigger is enabled; a
//! node id two triggers share is a 409 naming the id form, so one workspace can
//! never receive calls meant for another's trigger on a common node id
//! (`conversationChain_0` is in every Flowise export). [`handle`] verifies the call when the trigger
//! has a `webhookSecret` — GitHub's `X-Hub-Signature-256`, Standard Webhooks'
//! `webhook-id`/`webhook-timestamp`/`webhook-signature`, or Telegram's
//! `X-Telegram-Bot-Api-Secret-Token` — comparing in constant time over raw bytes,
//! then runs the flow once per delivery: a delivery id seen before for that
//! trigger (`webhook-id`, `X-GitHub-Delivery`, `Idempotency-Key`, Telegram's
//! `update_id`) gets the
//! stored answer again without a second run, for [`DELIVERY_MEMORY`].
//!
//! The question is the body as compact JSON text (Telegram: `message.text`); the
//! body and the headers (minus credentials) are the run's `$flow.body` and
//! `$flow.headers`. Every call that runs the flow leaves a result. A trigger
//! with `responseMode: async` answers 202 `{chatId, status: "PROCESSING"}` once
//! the call is claimed, runs it in the background and, with a `callbackUrl`,
//! has its outcome POSTed there through the callback outbox
//! ([`super::callbacks`]); a repeated delivery gets the 202 again.
//!
//! [`DELIVERY_MEMORY`]: super::scheduler::DELIVERY_MEMORY

use crate::domain::to_hex;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value, json};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::super::{ServiceError, ServiceResult, Services};
use super::callbacks::OwedError;
use super::firing::{self, Ask, CallbackData, Outcome};
use super::telegram;
use crate::domain::time::{self, Timestamp};
use crate::domain::{Delivery, Trigger, WebhookClaim};

type HmacSha256 = Hmac<Sha256>;

/// Largest webhook body.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// How far a Standard Webhooks timestamp may be from now.
const TIMESTAMP_TOLERANCE_SECS: i64 = 300;
/// Headers never handed to the flow: they carry credentials.
const HIDDEN_HEADERS: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-telegram-bot-api-secret-token",
];

/// One incoming call: header names in lower case, the raw body.
pub struct Call {
    pub headers: Vec<(String, String)>,
    pub body: bytes::Bytes,
}

impl Call {
    fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

/// The value of header `name` (lower case) among a call's headers.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// The answer to send (and to replay for a repeated delivery).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Answer {
    fn error(status: u16, message: impl Into<String>) -> Self {
        Answer {
            status,
            body: json!({"message": message.into()}),
        }
    }
}

/// The webhook trigger at `address` (see the module docs): 404 when there is
/// none, or when a node id names a disabled trigger; 409 when a node id is shared.
pub async fn find(services: &Services, address: &str) -> ServiceResult<Trigger> {
    let mut found = services.store.find_webhook_triggers(address).await?;
    let by_id = found
        .first()
        .is_some_and(|t| Some(t.id) == uuid::Uuid::parse_str(address).ok());
    let trigger = match found.len() {
        _ if by_id => found.swap_remove(0),
        0 => return Err(ServiceError::NotFound("webhook trigger")),
        1 if found[0].enabled => found.swap_remove(0),
        1 => return Err(ServiceError::NotFound("webhook trigger")),
        _ => {
            return Err(ServiceError::Conflict(format!(
                "more than one webhook trigger is on node '{address}': call the trigger's own \
                 address, /api/v1/triggers/webhook/<triggerId> (its webhookUrl)"
            )));
        }
    };
    super::secrets::open(&services.keyring, trigger)
}

/// Handles a call to `trigger` (see the module docs). `Err` is for calls that
/// never reached a run: failed verification (401), a body that is not JSON (400).
pub async fn handle(services: &Services, trigger: Trigger, call: Call) -> ServiceResult<Answer> {
    verify(&trigger, &call, time::now()).map_err(|why| {
        crate::metrics::metrics().webhook_rejected.inc();
        ServiceError::Unauthorized(why)
    })?;
    let body: Value = serde_json::from_slice(&call.body)
        .map_err(|e| ServiceError::Invalid(format!("the webhook body must be JSON: {e}")))?;
    // Answered at once: the run's slot is taken before anything is accepted
    // (or recorded as a delivery), so a full workspace is a 429 the sender retries.
    let permit = trigger
        .respond_async
        .then(|| super::super::prediction::run_slot(services, trigger.workspace_id))
        .transpose()?;
    let delivery = delivery_id(&trigger, &call, &body);
    if let Some(id) = &delivery
        && let Some(answer) = replayed(services, trigger.id, id).await?
    {
        return Ok(answer);
    }
    let trigger_id = trigger.id;
    let answer = run(services, trigger, &call, body, permit).await;
    if let Some(id) = &delivery {
        remember(services, trigger_id, id, &answer).await;
    }
    Ok(answer)
}

/// Records delivery `id` of a trigger as begun; the stored answer when it was
/// seen and answered before (`None`: new, run it), 409 while it is running.
pub async fn replayed(
    services: &Services,
    trigger: uuid::Uuid,
    id: &str,
) -> ServiceResult<Option<Answer>> {
    match services
        .store
        .begin_delivery(trigger, id, time::now())
        .await?
    {
        Delivery::New => Ok(None),
        Delivery::Answered { status, body } => Ok(Some(Answer {
            status,
            body: serde_json::from_str(&body).unwrap_or(Value::Null),
        })),
        Delivery::InProgress => Err(ServiceError::Conflict(format!(
            "delivery {id} is being processed"
        ))),
    }
}

/// Keeps `answer` as what a repeat of delivery `id` gets.
pub async fn remember(services: &Services, trigger: uuid::Uuid, id: &str, answer: &Answer) {
    if let Err(e) = services
        .store
        .finish_delivery(trigger, id, answer.status, &answer.body.to_string())
        .await
    {
        tracing::error!(trigger = %trigger, error = %e, "cannot store a webhook answer");
    }
}

/// Runs the flow for a verified call.
async fn run(
    services: &Services,
    trigger: Trigger,
    call: &Call,
    body: Value,
    permit: Option<crate::services::in_flight::Permit>,
) -> Answer {
    if !trigger.enabled {
        return not_runnable(&trigger);
    }
    let now = time::now();
    let (input, chat_id, telegram_chat) = if trigger.is_telegram() {
        let text = body.pointer("/message/text").and_then(Value::as_str);
        let chat = body.pointer("/message/chat/id").cloned();
        match (text, chat) {
            (Some(text), Some(chat)) => (
                text.to_owned(),
                format!("telegram-{}", chat_id_text(&chat)),
                Some(chat),
            ),
            _ => {
                return Answer {
                    status: 200,
                    body: json!({"ok": true, "ignored": "the update carries no message text"}),
                };
            }
        }
    } else {
        (body.to_string(), trigger.chat_id_at(now), None)
    };
    let headers: Map<String, Value> = call
        .headers
        .iter()
        .filter(|(name, _)| !HIDDEN_HEADERS.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), Value::String(value.clone())))
        .collect();
    let mut flow_vars = Map::new();
    flow_vars.insert("body".into(), body);
    flow_vars.insert("headers".into(), Value::Object(headers));
    let callback = match (&trigger.callback_url, trigger.respond_async) {
        (Some(url), true) => {
            match super::callbacks::owed(
                services,
                trigger.id,
                url,
                trigger.callback_secret.as_deref(),
            ) {
                Ok(callback) => Some(callback),
                Err(OwedError::Url(why)) => {
                    return Answer::error(
                        409,
                        format!("the trigger's callbackUrl is refused now: {why}"),
                    );
                }
                Err(OwedError::Sealing(e)) => return internal(e),
            }
        }
        _ => None,
    };
    let owes_callback = callback.is_some();
    let call = WebhookClaim {
        input: input.clone(),
        chat_id: chat_id.clone(),
        callback,
    };
    let claimed = firing::claim_call(services, &trigger, now, call, !trigger.respond_async).await;
    let firing = match claimed {
        Ok(Some(firing)) => firing,
        Ok(None) => {
            return match services
                .store
                .get_trigger(trigger.workspace_id, trigger.id)
                .await
            {
                Ok(Some(current)) => not_runnable(&current),
                Ok(None) => Answer::error(404, "webhook trigger not found"),
                Err(e) => internal(e),
            };
        }
        Err(e) => return internal(e),
    };
    let ask = Ask {
        input,
        chat_id: chat_id.clone(),
        flow_vars,
        human_input: None,
        live: None,
        callback: owes_callback.then_some(CallbackData::Trigger),
        permit,
    };
    if !trigger.respond_async {
        return execute(services, &trigger, &firing, ask, now, telegram_chat).await;
    }
    let accepted = Answer {
        status: 202,
        body: json!({"chatId": chat_id, "status": "PROCESSING"}),
    };
    let services = services.clone();
    // The firing is claimed (with its callback, when there is one): the run
    // ends, and its outcome is called back, even if this replica dies.
    tokio::spawn(async move {
        execute(&services, &trigger, &firing, ask, now, telegram_chat).await;
    });
    accepted
}

/// Runs a claimed call, sends Telegram its answer, and says what the caller
/// gets back.
async fn execute(
    services: &Services,
    trigger: &Trigger,
    firing: &crate::domain::Firing,
    ask: Ask,
    now: Timestamp,
    telegram_chat: Option<Value>,
) -> Answer {
    let chat_id = ask.chat_id.clone();
    let outcome = firing::execute(services, firing, ask, now).await;
    match outcome {
        Outcome::Success(result) => {
            if let (Some(chat), Some(token)) = (&telegram_chat, &trigger.webhook_bot_token)
                && let Err(e) = telegram::send_message(services, token, chat, &result.text).await
            {
                tracing::warn!(trigger = %trigger.id, error = %e, "cannot send the answer to Telegram");
            }
            Answer {
                status: 200,
                body: firing::trigger_answer(&result, &chat_id),
            }
        }
        Outcome::TimedOut(message) => Answer::error(504, message),
        Outcome::Failed(message) => Answer::error(500, message),
    }
}

fn internal(e: impl std::fmt::Display) -> Answer {
    tracing::error!(error = %e, "webhook call failed inside weir");
    Answer::error(500, "internal error; the server log has the details")
}

/// 409 for a trigger that may not run: disabled, or at its `maxExecutions`.
fn not_runnable(trigger: &Trigger) -> Answer {
    if trigger.exhausted() {
        Answer::error(
            409,
            format!(
                "the trigger reached its maxExecutions ({})",
                trigger.max_executions.unwrap_or_default()
            ),
        )
    } else {
        Answer::error(409, "the trigger is disabled")
    }
}

fn chat_id_text(chat: &Value) -> String {
    match chat {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The sender's delivery id, when the platform gives one.
fn delivery_id(trigger: &Trigger, call: &Call, body: &Value) -> Option<String> {
    if trigger.is_telegram() {
        return body.get("update_id").map(|id| format!("update-{id}"));
    }
    delivery_header(&call.headers)
}

/// The delivery id a sender puts on a call (`webhook-id`, `X-GitHub-Delivery` or
/// `Idempotency-Key`), the same on its retries.
pub fn delivery_header(headers: &[(String, String)]) -> Option<String> {
    ["webhook-id", "x-github-delivery", "idempotency-key"]
        .iter()
        .find_map(|name| header(headers, name))
        .filter(|id| !id.is_empty() && id.len() <= 256)
        .map(str::to_owned)
}

/// Checks the call against the trigger's secret; `Err` says what is wrong.
pub fn verify(trigger: &Trigger, call: &Call, now: Timestamp) -> Result<(), String> {
    let Some(secret) = trigger.webhook_secret.as_deref() else {
        return Ok(());
    };
    if trigger.is_telegram() {
        let presented = call
            .header("x-telegram-bot-api-secret-token")
            .ok_or("missing X-Telegram-Bot-Api-Secret-Token")?;
        return if bool::from(presented.as_bytes().ct_eq(secret.as_bytes())) {
            Ok(())
        } else {
            Err("wrong X-Telegram-Bot-Api-Secret-Token".into())
        };
    }
    if let Some(signatures) = call.header("webhook-signature") {
        let id = call.header("webhook-id").ok_or("missing webhook-id")?;
        let stamp = call
            .header("webhook-timestamp")
            .ok_or("missing webhook-timestamp")?;
        return verify_standard(secret, id, stamp, &call.body, signatures, now);
    }
    if let Some(signature) = call.header("x-hub-signature-256") {
        return verify_github(secret, &call.body, signature);
    }
    Err(
        "this webhook requires a signature: X-Hub-Signature-256 (sha256=<hex HMAC>) or \
         Standard Webhooks' webhook-signature"
            .into(),
    )
}

/// The lower-case hex HMAC-SHA256 of `body` under `key` (GitHub's and Flowise's
/// signatures).
pub fn hmac_sha256_hex(key: &[u8], body: &[u8]) -> String {
    let Ok(mut mac) = HmacSha256::new_from_slice(key) else {
        // HMAC takes keys of any length.
        return String::new();
    };
    mac.update(body);
    to_hex(&mac.finalize().into_bytes())
}

/// GitHub: `sha256=<hex HMAC-SHA256(secret, body)>`.
pub fn verify_github(secret: &str, body: &[u8], header: &str) -> Result<(), String> {
    let hex = header
        .trim()
        .strip_prefix("sha256=")
        .ok_or("X-Hub-Signature-256 must look like sha256=<hex>")?;
    let presented = decode_hex(hex).ok_or("X-Hub-Signature-256 is not hex")?;
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).map_err(|e| e.to_string())?;
    mac.update(body);
    mac.verify_slice(&presented)
        .map_err(|_| "wrong X-Hub-Signature-256".to_owned())
}

/// Standard Webhooks: `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`,
/// several space-separated signatures allowed; the key is the secret's base64
/// (after an optional `whsec_` prefix), or its bytes when it is not base64.
pub fn verify_standard(
    secret: &str,
    id: &str,
    timestamp: &str,
    body: &[u8],
    signatures: &str,
    now: Timestamp,
) -> Result<(), String> {
    let sent: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| "webhook-timestamp is not a number")?;
    if (now.timestamp() - sent).abs() > TIMESTAMP_TOLERANCE_SECS {
        return Err("webhook-timestamp is more than 5 minutes away from now".into());
    }
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    let key = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap_or_else(|_| secret.as_bytes().to_vec());
    let mut mac = HmacSha256::new_from_slice(&key).map_err(|e| e.to_string())?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.trim().as_bytes());
    mac.update(b".");
    mac.update(body);
    let expected = mac.finalize().into_bytes();
    let matched = signatures
        .split_whitespace()
        .filter_map(|s| s.strip_prefix("v1,"))
        .filter_map(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .fold(false, |found, sig| {
            found | bool::from(sig.as_slice().ct_eq(expected.as_slice()))
        });
    if matched {
        Ok(())
    } else {
        Err("no webhook-signature matches".into())
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn githubs_published_test_vector() {
        let header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(
            verify_github("It's a Secret to Everybody", b"Hello, World!", header),
            Ok(())
        );
        assert!(verify_github("It's a Secret to Everybody", b"Hello, World?", header).is_err());
        assert!(verify_github("another secret", b"Hello, World!", header).is_err());
        assert!(verify_github("s", b"x", "sha1=00").is_err());
        assert!(verify_github("s", b"x", "sha256=zz").is_err());
    }

    #[test]
    fn standard_webhooks_specification_example() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let stamp = "1614265330";
        let body = br#"{"test": 2432232314}"#;
        let signature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        let then = time::from_millis(1_614_265_330_000);
        assert_eq!(
            verify_standard(secret, id, stamp, body, signature, then),
            Ok(())
        );
        // Several signatures, one of them right.
        let several = format!("v1,bm9wZQ== {signature}");
        assert_eq!(
            verify_standard(secret, id, stamp, body, &several, then),
            Ok(())
        );
        // Too old, wrong body, wrong id.
        let later = time::from_millis(1_614_265_330_000 + 301_000);
        assert!(verify_standard(secret, id, stamp, body, signature, later).is_err());
        assert!(verify_standard(secret, id, stamp, b"{}", signature, then).is_err());
        assert!(verify_standard(secret, "msg_other", stamp, body, signature, then).is_err());
    }
}
