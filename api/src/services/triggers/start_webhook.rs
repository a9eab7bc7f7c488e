//! Flowise 3.1's webhook Start node (`startInputType: webhookTrigger`) and its
//! address, `/api/v1/webhook/:chatflowId`, on weir's trigger engine: the
//! chatflow owns a webhook trigger ([`super::start_node::sync`]), and each call
//! is checked as the node says, then run as a firing of that trigger (so it
//! leaves a result, counts in the metrics and respects the trigger's limits).
//!
//! A call with a delivery id (`Idempotency-Key`, `webhook-id` or
//! `X-GitHub-Delivery`) seen before for the chatflow gets the stored answer again
//! without a second run, as weir's own webhooks do.
//!
//! A call is checked in Flowise's order: the flow and its Start node (404), the
//! signature when `webhookEnableAuth` is on (401; HMAC-SHA256 over the raw body,
//! `sha256=<hex>` or bare hex, or a plain token; both compared in constant
//! time), then — unless it answers a paused run (`humanInput`) — the method
//! (405), the content type (415) and the validation rows (400 naming what is
//! missing or of the wrong type), all before anything runs. The run sees
//! `{{ $webhook.body.* }}`, `$webhook.headers.*` and `$webhook.query.*`
//! (credential headers redacted); its question follows `webhookInputMode`.
//! Answers are `sync` (the prediction's JSON), `stream` (the prediction's
//! Server-Sent Events, the run spawned so it ends and leaves its result even
//! when the caller goes away) or `async` (202 `{chatId, status: "PROCESSING"}`
//! at once, the run spawned, and its outcome POSTed to `callbackUrl` through
//! the callback outbox, [`super::callbacks`]).

use serde_json::{Map, Value, json};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use tokio::sync::mpsc;

use super::super::prediction::{self, HumanAnswer, PredictionEvent};
use super::super::{ServiceError, ServiceResult, Services};
use super::callbacks::OwedError;
use super::firing::{self, Ask, CallbackData, Outcome};
use super::start_node::{self, StartTrigger, text};
use super::webhook::{self, Answer};
use crate::domain::WebhookClaim;
use crate::domain::callback::NewCallback;
use crate::domain::time;
use crate::flow::component::cell;
use crate::flow::graph::FlowNode;

/// Headers a flow never sees (their values become `[REDACTED]`), as in Flowise.
const REDACTED_HEADERS: [&str; 7] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "x-auth-token",
    "x-amz-security-token",
];

/// The signature header when the node names none.
const DEFAULT_SIGNATURE_HEADER: &str = "x-webhook-signature";

/// What the run is asked (`webhookInputMode`).
#[derive(Debug, Clone, PartialEq)]
pub enum WebhookInput {
    /// `text`: `webhookDefaultInput`, its `{{ $webhook.* }}` resolved first.
    Text(String),
    /// `payload`: the call (`{body, headers, query}`) as JSON text.
    Payload,
    /// `none`: a blank question.
    Nothing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureKind {
    HmacSha256,
    PlainToken,
}

/// How a call is answered (`webhookResponseMode`).
#[derive(Clone, PartialEq)]
pub enum ResponseMode {
    /// The flow's answer as JSON.
    Sync,
    /// The run's events as Server-Sent Events.
    Stream,
    /// 202 at once; the outcome POSTed to `callback_url` (when there is one),
    /// signed with `callback_secret` (when there is one).
    Async {
        callback_url: Option<String>,
        callback_secret: Option<String>,
    },
}

impl std::fmt::Debug for ResponseMode {
    // The secret stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponseMode::Sync => f.write_str("Sync"),
            ResponseMode::Stream => f.write_str("Stream"),
            ResponseMode::Async { callback_url, .. } => f
                .debug_struct("Async")
                .field("callback_url", callback_url)
                .finish_non_exhaustive(),
        }
    }
}

/// A body field the validation rows require or type.
#[derive(Debug, Clone, PartialEq)]
pub struct BodyParam {
    pub name: String,
    /// `string`, `number`, `boolean`, `object`, `array[<type>]`.
    pub kind: String,
    pub required: bool,
}

/// A webhook Start node, read from the flow.
#[derive(Debug, Clone, PartialEq)]
pub struct StartWebhook {
    pub node_id: String,
    /// Upper case; any method when the node names none.
    pub method: Option<String>,
    pub content_type: String,
    pub input: WebhookInput,
    /// The header (lower case) and how it is checked, when auth is on.
    pub auth: Option<(String, SignatureKind)>,
    /// `webhookResponseMode`.
    pub mode: ResponseMode,
    /// `webhookEnableValidation` rows.
    pub required_headers: Vec<String>,
    pub required_query: Vec<String>,
    pub body_params: Vec<BodyParam>,
}

/// The Start node's rows of `name` (validation rows).
fn rows(node: &FlowNode, name: &str) -> Result<Vec<Map<String, Value>>, String> {
    node.input_rows(name)
        .map_err(|why| format!("the Start node's {why}"))
}

fn row_text(row: &Map<String, Value>, key: &str) -> String {
    cell(row.get(key)).trim().to_owned()
}

fn row_flag(row: &Map<String, Value>, key: &str) -> bool {
    matches!(row.get(key), Some(Value::Bool(true)))
        || matches!(row.get(key), Some(Value::String(s)) if s == "true")
}

impl StartWebhook {
    /// Reads a `webhookTrigger` Start node; `Err` says what cannot be read.
    pub fn read(node: &FlowNode) -> Result<Self, String> {
        let method = match text(node, "webhookMethod").to_ascii_uppercase() {
            m if m.is_empty() => None,
            m if ["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&m.as_str()) => Some(m),
            other => {
                return Err(format!(
                    "webhookMethod '{other}' is not one weir knows (GET, POST, PUT, PATCH, DELETE)"
                ));
            }
        };
        let content_type = match text(node, "webhookContentType") {
            c if c.is_empty() => "application/json".to_owned(),
            c => c.to_ascii_lowercase(),
        };
        let input = match text(node, "webhookInputMode").as_str() {
            "" | "text" => WebhookInput::Text(text(node, "webhookDefaultInput")),
            "payload" => WebhookInput::Payload,
            "none" => WebhookInput::Nothing,
            other => {
                return Err(format!(
                    "webhookInputMode '{other}' is not one weir knows (text, payload or none)"
                ));
            }
        };
        let auth = match node.input_flag("webhookEnableAuth") {
            false => None,
            true => {
                let header = match text(node, "webhookSignatureHeader").to_ascii_lowercase() {
                    h if h.is_empty() => DEFAULT_SIGNATURE_HEADER.to_owned(),
                    h => h,
                };
                let kind = match text(node, "webhookSignatureType").as_str() {
                    "" | "hmac-sha256" => SignatureKind::HmacSha256,
                    "plain-token" => SignatureKind::PlainToken,
                    other => {
                        return Err(format!(
                            "webhookSignatureType '{other}' is not one weir knows (hmac-sha256 \
                             or plain-token)"
                        ));
                    }
                };
                Some((header, kind))
            }
        };
        let mode = match text(node, "webhookResponseMode").as_str() {
            "" | "sync" => ResponseMode::Sync,
            "stream" => ResponseMode::Stream,
            "async" => {
                let callback_url = Some(text(node, "callbackUrl")).filter(|u| !u.is_empty());
                if let Some(url) = &callback_url
                    && super::callbacks::http_url(url).is_none()
                {
                    return Err("Invalid callbackUrl: must be a valid http or https URL".to_owned());
                }
                ResponseMode::Async {
                    callback_url,
                    callback_secret: Some(text(node, "callbackSecret")).filter(|s| !s.is_empty()),
                }
            }
            other => {
                return Err(format!(
                    "webhookResponseMode '{other}' is not one weir knows (sync, stream or async)"
                ));
            }
        };
        let validating = node.input_flag("webhookEnableValidation");
        let named = |name: &str| -> Result<Vec<Map<String, Value>>, String> {
            Ok(match validating {
                true => rows(node, name)?
                    .into_iter()
                    .filter(|row| !row_text(row, "name").is_empty())
                    .collect(),
                false => Vec::new(),
            })
        };
        let required = |rows: Vec<Map<String, Value>>, lower: bool| -> Vec<String> {
            rows.iter()
                .filter(|row| row_flag(row, "required"))
                .map(|row| match lower {
                    true => row_text(row, "name").to_ascii_lowercase(),
                    false => row_text(row, "name"),
                })
                .collect()
        };
        Ok(StartWebhook {
            node_id: node.id.clone(),
            method,
            content_type,
            input,
            auth,
            mode,
            required_headers: required(named("webhookHeaderParams")?, true),
            required_query: required(named("webhookQueryParams")?, false),
            body_params: named("webhookBodyParams")?
                .iter()
                .map(|row| BodyParam {
                    name: row_text(row, "name"),
                    kind: match row_text(row, "type") {
                        k if k.is_empty() => "string".to_owned(),
                        k => k,
                    },
                    required: row_flag(row, "required"),
                })
                .collect(),
        })
    }
}

/// What a call gets: an answer, or (`stream` mode) the run's events as they
/// happen, for the caller to frame as Server-Sent Events.
pub enum Reply {
    Answer(Answer),
    Stream(mpsc::Receiver<PredictionEvent>),
}

/// One call to `/api/v1/webhook/:chatflowId`: header names in lower case.
pub struct Call {
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub query: Vec<(String, String)>,
    pub body: bytes::Bytes,
}

impl Call {
    fn header(&self, name: &str) -> Option<&str> {
        webhook::header(&self.headers, name)
    }
}

fn error(status: u16, message: impl Into<String>) -> Answer {
    Answer {
        status,
        body: json!({"message": message.into()}),
    }
}

/// Handles a call (see the module docs): every outcome is an answer.
pub async fn handle(services: &Services, chatflow: Uuid, call: Call) -> ServiceResult<Reply> {
    let not_found = || error(404, format!("Chatflow {chatflow} not found"));
    let not_webhook = || {
        error(
            404,
            format!("Chatflow {chatflow} is not configured as a webhook trigger"),
        )
    };
    let Some(flow) = services.store.find_chatflow(chatflow).await? else {
        return Ok(Reply::Answer(not_found()));
    };
    // The flow's cached plan holds its graph: a call parses nothing the run
    // would parse again.
    let plan = services
        .plans
        .get(flow.id, flow.updated_date, &flow.flow_data)?;
    let Some(Ok(Some(StartTrigger::Webhook(start)))) =
        plan.agentflow_start().map(start_node::read_node)
    else {
        return Ok(Reply::Answer(not_webhook()));
    };
    let Some(trigger) = services
        .store
        .owned_trigger_for_call(flow.workspace_id, flow.id)
        .await?
        .filter(|t| t.trigger_type == crate::domain::TriggerType::Webhook)
    else {
        return Ok(Reply::Answer(not_webhook()));
    };
    let trigger = super::secrets::open(&services.keyring, trigger)?;
    if let Some((header, kind)) = &start.auth {
        let Some(secret) = trigger.webhook_secret.as_deref() else {
            return Ok(Reply::Answer(error(
                409,
                "Webhook signature verification is enabled but no secret has been generated. \
                 Generate one with POST /api/v1/chatflows/<id>/webhook-secret.",
            )));
        };
        let Some(signature) = call.header(header) else {
            crate::metrics::metrics().webhook_rejected.inc();
            return Ok(Reply::Answer(error(
                401,
                format!("Missing signature header: {header}"),
            )));
        };
        if !signature_matches(*kind, secret, &call.body, signature) {
            crate::metrics::metrics().webhook_rejected.inc();
            return Ok(Reply::Answer(error(401, "Invalid webhook signature")));
        }
    }
    let content_type = call
        .header("content-type")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let body = match parse_body(&content_type, &call.body) {
        Ok(body) => body,
        Err(why) => return Ok(Reply::Answer(error(400, why))),
    };
    let human_input = body.get("humanInput").filter(|h| h.is_object()).cloned();
    if human_input.is_none()
        && let Err(answer) = check(&start, &call, &content_type, &body)
    {
        return Ok(Reply::Answer(answer));
    }
    let query: Map<String, Value> = call
        .query
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let headers: Map<String, Value> = call
        .headers
        .iter()
        .map(|(name, value)| {
            let shown = match REDACTED_HEADERS.contains(&name.as_str()) {
                true => "[REDACTED]".to_owned(),
                false => value.clone(),
            };
            (name.clone(), Value::String(shown))
        })
        .collect();
    let chat_id = ["chatId", "sessionId"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_str))
        .filter(|id| !id.trim().is_empty())
        .map_or_else(|| Uuid::new_v4().to_string(), str::to_owned);
    let webhook = json!({"body": body, "headers": headers, "query": query});
    let question = match &start.input {
        WebhookInput::Text(template) => {
            let resolved = resolve_webhook(template, &webhook);
            match resolved.trim().is_empty() {
                true => " ".to_owned(),
                false => resolved,
            }
        }
        WebhookInput::Payload => webhook.to_string(),
        WebhookInput::Nothing => " ".to_owned(),
    };
    let human_input = human_input.map(|h| HumanAnswer {
        proceed: h.get("type").and_then(Value::as_str) != Some("reject"),
        start_node_id: h
            .get("startNodeId")
            .and_then(Value::as_str)
            .map(str::to_owned),
        feedback: h
            .get("feedback")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    });
    let mut flow_vars = Map::new();
    flow_vars.insert("webhook".into(), webhook);
    let ask = Ask {
        input: question,
        chat_id,
        flow_vars,
        human_input,
        live: None,
        callback: None,
        // Answered at once: the run's slot is taken now, or the sender is told
        // to retry (429) before anything is accepted.
        permit: match start.mode {
            ResponseMode::Async { .. } => Some(prediction::run_slot(services, flow.workspace_id)?),
            _ => None,
        },
    };
    let Some(delivery) = webhook::delivery_header(&call.headers) else {
        return run(services, trigger, ask, &start.mode).await;
    };
    if let Some(answer) = webhook::replayed(services, trigger.id, &delivery).await? {
        return Ok(Reply::Answer(answer));
    }
    let trigger_id = trigger.id;
    let reply = run(services, trigger, ask, &start.mode).await?;
    // What a repeat of this delivery gets: the same answer, or (a stream is not
    // kept) a 409 saying it was received.
    let kept = match &reply {
        Reply::Answer(answer) => answer.clone(),
        Reply::Stream(_) => error(
            409,
            format!("delivery {delivery} was already received (streamed answers are not replayed)"),
        ),
    };
    webhook::remember(services, trigger_id, &delivery, &kept).await;
    Ok(reply)
}

/// Makes a new secret for the chatflow's webhook (32 random bytes as hex, shown
/// once, sealed at rest like every trigger secret), or clears it (`None`).
/// 409 when the chatflow's Start node is not a webhook.
pub async fn set_secret(
    services: &Services,
    flow: &crate::domain::Chatflow,
    generate: bool,
) -> ServiceResult<Option<String>> {
    let mut trigger = services
        .store
        .owned_trigger(flow.workspace_id, flow.id)
        .await?
        .filter(|t| t.trigger_type == crate::domain::TriggerType::Webhook)
        .ok_or_else(|| {
            ServiceError::Conflict(format!(
                "Chatflow {} is not configured as a webhook trigger: its Start node's \
                 startInputType must be webhookTrigger",
                flow.id
            ))
        })?;
    let secret = generate.then(|| {
        let bytes: [u8; 32] = rand::random();
        crate::domain::to_hex(&bytes)
    });
    trigger.webhook_secret.clone_from(&secret);
    trigger.updated_date = time::now();
    if !services
        .store
        .update_trigger(&super::secrets::seal(&services.keyring, &trigger)?)
        .await?
    {
        return Err(ServiceError::NotFound("webhook trigger"));
    }
    Ok(secret)
}

/// Runs a checked call as a firing of the chatflow's trigger: awaited for its
/// answer, or (`stream`) spawned with its events handed to the caller.
async fn run(
    services: &Services,
    trigger: crate::domain::Trigger,
    mut ask: Ask,
    mode: &ResponseMode,
) -> ServiceResult<Reply> {
    let now = time::now();
    let callback = match mode {
        ResponseMode::Async {
            callback_url: Some(url),
            callback_secret,
        } => match new_callback(services, &trigger, url, callback_secret.as_deref()) {
            Ok(callback) => Some(callback),
            Err(answer) => return Ok(Reply::Answer(answer)),
        },
        _ => None,
    };
    ask.callback = callback.is_some().then_some(CallbackData::Prediction);
    let claim = WebhookClaim {
        input: ask.input.clone(),
        chat_id: ask.chat_id.clone(),
        callback,
    };
    let caller_waits = !matches!(mode, ResponseMode::Async { .. });
    let Some(firing) = firing::claim_call(services, &trigger, now, claim, caller_waits).await?
    else {
        return Ok(Reply::Answer(error(
            409,
            "the chatflow's webhook trigger is disabled or reached its maxExecutions",
        )));
    };
    match mode {
        ResponseMode::Sync => {}
        ResponseMode::Stream => {
            let (live, events) = mpsc::channel(64);
            ask.live = Some(live);
            spawn_run(services, firing, ask, now);
            return Ok(Reply::Stream(events));
        }
        ResponseMode::Async { .. } => {
            let accepted = json!({"chatId": ask.chat_id, "status": "PROCESSING"});
            spawn_run(services, firing, ask, now);
            return Ok(Reply::Answer(Answer {
                status: 202,
                body: accepted,
            }));
        }
    }
    let outcome = firing::execute(services, &firing, ask, now).await;
    Ok(Reply::Answer(match outcome {
        Outcome::Success(result) => Answer {
            status: 200,
            body: serde_json::to_value(&*result).unwrap_or(Value::Null),
        },
        Outcome::TimedOut(message) => error(504, message),
        Outcome::Failed(message) => error(500, message),
    }))
}

/// Runs a claimed call in the background. Streamed or answered at once, the
/// run is the firing's, not the connection's: it ends and leaves its result
/// (and, async, its callback, written with the firing) even when the caller
/// goes away.
fn spawn_run(services: &Services, firing: crate::domain::Firing, ask: Ask, now: time::Timestamp) {
    let services = services.clone();
    tokio::spawn(async move {
        firing::execute(&services, &firing, ask, now).await;
    });
}

/// The callback a call answered at once is owed: 400 when the address guard
/// refuses its URL.
fn new_callback(
    services: &Services,
    trigger: &crate::domain::Trigger,
    url: &str,
    secret: Option<&str>,
) -> Result<NewCallback, Answer> {
    super::callbacks::owed(services, trigger.id, url, secret).map_err(|e| match e {
        OwedError::Url(why) => error(400, format!("Invalid callbackUrl: {why}")),
        OwedError::Sealing(e) => {
            tracing::error!(error = %e, "cannot seal a callback secret");
            error(500, "internal error; the server log has the details")
        }
    })
}

/// The body as the flow sees it: JSON, a form (Flowise's `payload` field
/// unwrapped when it holds JSON), or text. An empty body is `{}`.
fn parse_body(content_type: &str, raw: &[u8]) -> Result<Value, String> {
    if raw.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Map::new()));
    }
    if content_type.starts_with("application/x-www-form-urlencoded") {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(raw)
            .map_err(|e| format!("the form body cannot be read: {e}"))?;
        let form: Map<String, Value> = pairs
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        if let Some(Value::String(payload)) = form.get("payload")
            && let Ok(parsed) = serde_json::from_str::<Value>(payload)
        {
            return Ok(parsed);
        }
        return Ok(Value::Object(form));
    }
    if content_type.starts_with("text/") {
        return Ok(Value::String(String::from_utf8_lossy(raw).into_owned()));
    }
    serde_json::from_slice(raw).map_err(|e| format!("the webhook body must be JSON: {e}"))
}

/// The method, the content type and the validation rows, in Flowise's order.
fn check(
    start: &StartWebhook,
    call: &Call,
    content_type: &str,
    body: &Value,
) -> Result<(), Answer> {
    if let Some(method) = &start.method
        && !call.method.eq_ignore_ascii_case(method)
    {
        return Err(error(
            405,
            format!(
                "Method {} not allowed. Expected {method}",
                call.method.to_ascii_uppercase()
            ),
        ));
    }
    let has_body = !call.body.iter().all(u8::is_ascii_whitespace);
    if has_body && !content_type.starts_with(&start.content_type) {
        return Err(error(
            415,
            format!(
                "Content-Type {content_type} not allowed. Expected {}",
                start.content_type
            ),
        ));
    }
    let missing_headers: Vec<&str> = start
        .required_headers
        .iter()
        .filter(|h| call.header(h).is_none())
        .map(String::as_str)
        .collect();
    if !missing_headers.is_empty() {
        return Err(error(
            400,
            format!("Missing required headers: {}", missing_headers.join(", ")),
        ));
    }
    let field = |name: &str| body.get(name).filter(|v| !v.is_null());
    let missing_body: Vec<&str> = start
        .body_params
        .iter()
        .filter(|p| p.required && field(&p.name).is_none())
        .map(|p| p.name.as_str())
        .collect();
    if !missing_body.is_empty() {
        return Err(error(
            400,
            format!(
                "Missing required webhook body parameters: {}",
                missing_body.join(", ")
            ),
        ));
    }
    let wrong: Vec<String> = start
        .body_params
        .iter()
        .filter_map(|p| {
            let value = field(&p.name)?;
            (!is_of_kind(value, &p.kind)).then(|| format!("{} (expected {})", p.name, p.kind))
        })
        .collect();
    if !wrong.is_empty() {
        return Err(error(
            400,
            format!("Invalid type for parameter(s): {}", wrong.join(", ")),
        ));
    }
    let missing_query: Vec<&str> = start
        .required_query
        .iter()
        .filter(|q| !call.query.iter().any(|(k, _)| k == *q))
        .map(String::as_str)
        .collect();
    if !missing_query.is_empty() {
        return Err(error(
            400,
            format!(
                "Missing required query parameters: {}",
                missing_query.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Flowise's type check of a body field: numbers may be numeric strings,
/// booleans the strings `true`/`false`, arrays are checked element by element.
fn is_of_kind(value: &Value, kind: &str) -> bool {
    if let Some(inner) = kind
        .strip_prefix("array[")
        .and_then(|k| k.strip_suffix(']'))
    {
        return value
            .as_array()
            .is_some_and(|items| items.iter().all(|item| is_of_kind(item, inner)));
    }
    match kind {
        "number" => match value {
            Value::Number(_) => true,
            Value::String(s) => !s.trim().is_empty() && s.trim().parse::<f64>().is_ok(),
            _ => false,
        },
        "boolean" => {
            matches!(value, Value::Bool(_))
                || matches!(value, Value::String(s) if s == "true" || s == "false")
        }
        "object" => value.is_object(),
        _ => value.is_string(),
    }
}

/// Whether the header's signature is the body's under `secret`.
fn signature_matches(kind: SignatureKind, secret: &str, body: &[u8], header: &str) -> bool {
    match kind {
        SignatureKind::PlainToken => bool::from(header.as_bytes().ct_eq(secret.as_bytes())),
        SignatureKind::HmacSha256 => {
            let expected = webhook::hmac_sha256_hex(secret.as_bytes(), body);
            let given = header.trim();
            let given = given.strip_prefix("sha256=").unwrap_or(given);
            bool::from(
                given
                    .to_ascii_lowercase()
                    .as_bytes()
                    .ct_eq(expected.as_bytes()),
            )
        }
    }
}

/// `{{ $webhook.<path> }}` in `template` replaced by the call's value (objects
/// as JSON text); an unknown path keeps its braces, as in Flowise.
pub fn resolve_webhook(template: &str, webhook: &Value) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open..].find("}}") else {
            break;
        };
        let inner = rest[open + 2..open + close].trim();
        out.push_str(&rest[..open]);
        let found = inner
            .strip_prefix("$webhook.")
            .and_then(|path| path.split('.').try_fold(webhook, |v, key| v.get(key)))
            .filter(|v| !v.is_null());
        match found {
            Some(Value::String(s)) => out.push_str(s),
            Some(other) => out.push_str(&other.to_string()),
            None => out.push_str(&rest[open..open + close + 2]),
        }
        rest = &rest[open + close + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_variables_resolve_and_unknown_ones_stay() {
        let call =
            json!({"body": {"user": {"name": "Ada"}, "n": 3}, "headers": {}, "query": {"q": "x"}});
        assert_eq!(
            resolve_webhook(
                "Hi {{ $webhook.body.user.name }} ({{$webhook.query.q}}), {{ $webhook.body.n }} \
                 {{ $webhook.body.missing }} {{ question }}",
                &call
            ),
            "Hi Ada (x), 3 {{ $webhook.body.missing }} {{ question }}"
        );
        assert_eq!(
            resolve_webhook("{{ $webhook.body.user }}", &call),
            r#"{"name":"Ada"}"#
        );
    }

    #[test]
    fn signatures_are_checked_as_flowise_makes_them() {
        let body = br#"{"a":1}"#;
        // RFC 4231's test case 2 shape: a known key and message.
        assert_eq!(
            super::super::webhook::hmac_sha256_hex(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let hex = super::super::webhook::hmac_sha256_hex(b"s3cret", body);
        let hmac = SignatureKind::HmacSha256;
        assert!(signature_matches(hmac, "s3cret", body, &hex));
        assert!(signature_matches(
            hmac,
            "s3cret",
            body,
            &format!("sha256={hex}")
        ));
        assert!(!signature_matches(hmac, "other", body, &hex));
        assert!(!signature_matches(hmac, "s3cret", b"{}", &hex));
        let plain = SignatureKind::PlainToken;
        assert!(signature_matches(plain, "tok", body, "tok"));
        assert!(!signature_matches(plain, "tok", body, "to"));
    }

    #[test]
    fn body_fields_are_typed_as_flowise_checks_them() {
        assert!(is_of_kind(&json!("12.5"), "number") && !is_of_kind(&json!(""), "number"));
        assert!(is_of_kind(&json!("true"), "boolean") && !is_of_kind(&json!("yes"), "boolean"));
        assert!(is_of_kind(&json!([1, "2"]), "array[number]"));
        assert!(!is_of_kind(&json!([1, "x"]), "array[number]"));
        assert!(is_of_kind(&json!({}), "object") && !is_of_kind(&json!([]), "object"));
        assert!(is_of_kind(&json!("x"), "string") && !is_of_kind(&json!(1), "string"));
    }

    #[test]
    fn forms_unwrap_flowise_payloads() {
        let form = "application/x-www-form-urlencoded";
        assert_eq!(
            parse_body(form, b"payload=%7B%22a%22%3A1%7D"),
            Ok(json!({"a": 1}))
        );
        assert_eq!(
            parse_body(form, b"name=Ada&x=1"),
            Ok(json!({"name": "Ada", "x": "1"}))
        );
        assert_eq!(parse_body("text/plain", b"hello"), Ok(json!("hello")));
        assert_eq!(parse_body("application/json", b""), Ok(json!({})));
        assert!(parse_body("application/json", b"{oops").is_err());
    }
}
