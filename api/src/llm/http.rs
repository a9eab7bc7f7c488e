//! What the HTTP providers share: the one pooled client, reading a streamed body
//! line by line, and turning a provider's failure into words a user can act on
//! (a 401 from a provider is the provider's key, not ours).

use std::time::Duration;

use std::collections::VecDeque;

use bytes::{Buf, BytesMut};
use futures_util::{Stream, StreamExt};

use super::{Delta, DeltaStream, LlmError, ToolCallParts};

/// The client every provider call goes through: one connection pool per process.
pub fn client() -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        // Between two reads of a streamed answer; a whole answer may take longer.
        .read_timeout(Duration::from_secs(120))
        .pool_idle_timeout(Duration::from_secs(90))
        .build()
        .map_err(|e| LlmError::new(format!("cannot build the HTTP client: {e}")))
}

/// Sends a request, and for a non-2xx answer reads the provider's own message.
pub async fn send(
    provider: &str,
    endpoint: &str,
    request: reqwest::RequestBuilder,
) -> Result<reqwest::Response, LlmError> {
    let started = std::time::Instant::now();
    let sent = request.send().await;
    let answered = sent.as_ref().is_ok_and(|r| r.status().is_success());
    crate::metrics::metrics().provider_call(provider, answered, started.elapsed());
    let response = sent.map_err(|e| {
        let why = if e.is_timeout() {
            "timed out".to_owned()
        } else if e.is_connect() {
            format!("connection failed ({})", root_cause(&e))
        } else {
            root_cause(&e)
        };
        LlmError::new(format!("cannot reach {provider} at {endpoint}: {why}"))
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = response.text().await.unwrap_or_default();
    let detail = provider_message(&body);
    let what = match status.as_u16() {
        401 | 403 => format!(
            "{provider} rejected the API key configured for it (HTTP {})",
            status.as_u16()
        ),
        404 => format!("{provider} does not know that model or endpoint (HTTP 404)"),
        429 => format!("{provider} is rate limiting or out of quota (HTTP 429)"),
        s if s >= 500 => format!("{provider} failed (HTTP {s})"),
        s => format!("{provider} refused the request (HTTP {s})"),
    };
    Err(LlmError::new(if detail.is_empty() {
        what
    } else {
        format!("{what}: {detail}")
    }))
}

/// The human part of a provider error body: `{"error": {"message"}}` (OpenAI,
/// Anthropic), `{"error": "..."}` (Ollama), or the text itself, shortened.
fn provider_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let text = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("error"))
                .or_else(|| v.get("message"))
        })
        .and_then(|m| m.as_str())
        .unwrap_or(body)
        .trim();
    let mut short: String = text.chars().take(300).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// The body of a streamed answer as lines (without the line break).
pub fn lines(
    provider: &'static str,
    response: reqwest::Response,
) -> impl Stream<Item = Result<String, LlmError>> + Send + 'static {
    let body = response.bytes_stream();
    futures_util::stream::unfold(
        (body, BytesMut::new(), false),
        move |(mut body, mut buf, mut done)| async move {
            loop {
                if let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line = buf.split_to(pos + 1);
                    let text = String::from_utf8_lossy(&line[..pos]);
                    let text = text.strip_suffix('\r').unwrap_or(&text).to_owned();
                    return Some((Ok(text), (body, buf, done)));
                }
                if done {
                    if buf.is_empty() {
                        return None;
                    }
                    let text = String::from_utf8_lossy(&buf).into_owned();
                    buf.advance(buf.len());
                    return Some((Ok(text), (body, buf, done)));
                }
                match body.next().await {
                    Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                    Some(Err(e)) => {
                        done = true;
                        buf.clear();
                        let err = LlmError::new(format!(
                            "{provider} stream broke off: {}",
                            root_cause(&e)
                        ));
                        return Some((Err(err), (body, buf, done)));
                    }
                    None => done = true,
                }
            }
        },
    )
}

/// Server-Sent Events of a provider: `(event name, data)` per event. Only `event:`
/// and `data:` fields matter to the providers weir speaks to.
pub fn sse_events(
    provider: &'static str,
    response: reqwest::Response,
) -> impl Stream<Item = Result<(String, String), LlmError>> + Send + 'static {
    lines(provider, response)
        .scan((String::new(), String::new()), |(event, data), line| {
            let out = match line {
                Err(e) => Some(Some(Err(e))),
                Ok(line) if line.is_empty() => {
                    if data.is_empty() && event.is_empty() {
                        Some(None)
                    } else {
                        Some(Some(Ok((std::mem::take(event), std::mem::take(data)))))
                    }
                }
                Ok(line) => {
                    if let Some(v) = line.strip_prefix("data:") {
                        if !data.is_empty() {
                            data.push('\n');
                        }
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    } else if let Some(v) = line.strip_prefix("event:") {
                        *event = v.trim().to_owned();
                    }
                    Some(None)
                }
            };
            futures_util::future::ready(out)
        })
        .filter_map(futures_util::future::ready)
}

/// A provider's answer as [`Delta`]s. `step` reads one wire event, pushing text
/// into `out` and tool-call fragments into the parts, and says whether the answer
/// ended; assembled tool calls follow the last text, whether the answer ended by
/// its own marker or by the end of the body.
pub fn deltas<S, T, F>(events: S, step: F) -> DeltaStream
where
    S: Stream<Item = Result<T, LlmError>> + Send + 'static,
    T: Send + 'static,
    F: FnMut(T, &mut ToolCallParts, &mut Vec<Delta>) -> Result<bool, LlmError> + Send + 'static,
{
    struct State<S, F> {
        events: S,
        step: F,
        parts: ToolCallParts,
        ready: VecDeque<Delta>,
        scratch: Vec<Delta>,
        ended: bool,
    }
    let state = State {
        events: Box::pin(events),
        step,
        parts: ToolCallParts::default(),
        ready: VecDeque::new(),
        scratch: Vec::new(),
        ended: false,
    };
    futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(delta) = s.ready.pop_front() {
                return Some((Ok(delta), s));
            }
            if s.ended {
                return None;
            }
            let finished = match s.events.next().await {
                None => true,
                Some(Err(e)) => {
                    s.ended = true;
                    return Some((Err(e), s));
                }
                Some(Ok(event)) => match (s.step)(event, &mut s.parts, &mut s.scratch) {
                    Ok(finished) => finished,
                    Err(e) => {
                        s.ended = true;
                        return Some((Err(e), s));
                    }
                },
            };
            s.ready.extend(s.scratch.drain(..));
            if finished {
                s.ended = true;
                s.ready
                    .extend(s.parts.finish().into_iter().map(Delta::ToolCall));
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_messages_are_extracted() {
        assert_eq!(
            provider_message(r#"{"error":{"message":"Incorrect API key","type":"x"}}"#),
            "Incorrect API key"
        );
        assert_eq!(
            provider_message(r#"{"error":"model 'x' not found"}"#),
            "model 'x' not found"
        );
        assert_eq!(provider_message("Bad Gateway"), "Bad Gateway");
        assert_eq!(provider_message(&"x".repeat(400)).chars().count(), 301);
    }
}
