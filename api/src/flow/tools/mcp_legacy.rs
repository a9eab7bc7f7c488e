//! MCP's legacy transport, HTTP+SSE (protocol 2024-11-05), which `customMCP`
//! falls back to when a server refuses Streamable HTTP with a 4xx (as the
//! specification's backwards compatibility asks, and Flowise does): a GET opens
//! the server's event stream, whose first `endpoint` event names where to POST
//! messages; each answer comes back on the stream as a `message` event.
//!
//! Its event framing (`event_end`, `parse_event`) also reads Streamable HTTP's
//! SSE answers. The stream is read by a task of its own, which hands each answer to the
//! request waiting for its id; the task ends with the stream, and with the
//! session (dropping it aborts the task). The POST address must be of the
//! stream's origin and passes the address guard like every request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::Url;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::web::{HttpCall, WebClient};
use crate::flow::component::McpServer;

/// How long one request waits for its answer on the stream.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the server has to name its POST address.
const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(15);
/// The most a stream stays open.
const STREAM_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// Largest event buffered from the stream.
const MAX_EVENT_BYTES: usize = 4 << 20;

type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// An open legacy session.
pub struct LegacySession {
    post_to: Url,
    headers: Vec<(String, String)>,
    waiting: Waiting,
    next_id: AtomicU64,
    open: Arc<AtomicBool>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for LegacySession {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl std::fmt::Debug for LegacySession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LegacySession")
            .field("post_to", &self.post_to.as_str())
            .finish_non_exhaustive()
    }
}

fn lock(waiting: &Waiting) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Value>>> {
    waiting.lock().unwrap_or_else(|p| p.into_inner())
}

impl LegacySession {
    /// Opens the server's stream and waits for its POST address.
    pub async fn open(web: &WebClient, server: &McpServer) -> Result<Self, String> {
        let url = Url::parse(&server.url).map_err(|e| format!("not a URL: {e}"))?;
        let mut headers = server.headers.clone();
        headers.push(("Accept".into(), "text/event-stream".into()));
        let response = web
            .open_stream(url.clone(), &headers, STREAM_LIFETIME)
            .await?;
        let waiting: Waiting = Arc::default();
        let open = Arc::new(AtomicBool::new(true));
        let (endpoint_tx, endpoint_rx) = oneshot::channel::<String>();
        let reader = tokio::spawn(read_stream(
            response,
            Arc::clone(&waiting),
            Arc::clone(&open),
            endpoint_tx,
        ));
        let endpoint = match tokio::time::timeout(ENDPOINT_TIMEOUT, endpoint_rx).await {
            Ok(Ok(endpoint)) => endpoint,
            _ => {
                reader.abort();
                return Err("the server's event stream named no endpoint to post to".into());
            }
        };
        let post_to = url
            .join(endpoint.trim())
            .map_err(|e| format!("the server's endpoint '{endpoint}' is not a URL: {e}"))?;
        if post_to.origin() != url.origin() {
            reader.abort();
            return Err(format!(
                "the server's endpoint {post_to} is not of its own origin"
            ));
        }
        headers.pop();
        Ok(LegacySession {
            post_to,
            headers,
            waiting,
            next_id: AtomicU64::new(1),
            open,
            reader,
        })
    }

    /// Whether the stream is still open (answers can still come).
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    /// Sends a request and waits for its answer on the stream: the whole
    /// JSON-RPC message (with `result` or `error`).
    pub async fn request(
        &self,
        web: &WebClient,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(id, tx);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if let Err(why) = self.post(web, &message).await {
            lock(&self.waiting).remove(&id);
            return Err(why);
        }
        match tokio::time::timeout(ANSWER_TIMEOUT, rx).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err("the server's event stream ended before its answer".into()),
            Err(_) => {
                lock(&self.waiting).remove(&id);
                Err(format!("no answer within {} s", ANSWER_TIMEOUT.as_secs()))
            }
        }
    }

    /// Sends a notification (no answer comes).
    pub async fn notify(&self, web: &WebClient, method: &str) -> Result<(), String> {
        self.post(web, &json!({"jsonrpc": "2.0", "method": method}))
            .await
    }

    async fn post(&self, web: &WebClient, message: &Value) -> Result<(), String> {
        let reply = web
            .send(HttpCall {
                method: reqwest::Method::POST,
                url: self.post_to.clone(),
                headers: self.headers.clone(),
                body: Some(("application/json".into(), message.to_string().into_bytes())),
            })
            .await?;
        if (200..300).contains(&reply.status) {
            Ok(())
        } else {
            Err(format!(
                "HTTP {}: {}",
                reply.status,
                String::from_utf8_lossy(&reply.body)
                    .chars()
                    .take(300)
                    .collect::<String>()
            ))
        }
    }
}

/// Reads the stream: the `endpoint` event once, then every `message` to the
/// request waiting for its id. Waiting requests learn of the stream's end by
/// their senders being dropped.
async fn read_stream(
    response: reqwest::Response,
    waiting: Waiting,
    open: Arc<AtomicBool>,
    endpoint: oneshot::Sender<String>,
) {
    let mut endpoint = Some(endpoint);
    let mut stream = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::new();
    'stream: while let Some(Ok(chunk)) = stream.next().await {
        buffer.extend_from_slice(&chunk);
        while let Some(end) = event_end(&buffer) {
            let event: Vec<u8> = buffer.drain(..end).collect();
            let (name, data) = parse_event(&String::from_utf8_lossy(&event));
            match name.as_str() {
                "endpoint" => {
                    if let Some(tx) = endpoint.take() {
                        let _ = tx.send(data);
                    }
                }
                "message" | "" => {
                    let Ok(message) = serde_json::from_str::<Value>(&data) else {
                        continue;
                    };
                    let id = message.get("id").and_then(Value::as_u64);
                    if let Some(tx) = id.and_then(|id| lock(&waiting).remove(&id)) {
                        let _ = tx.send(message);
                    }
                }
                _ => {}
            }
        }
        if buffer.len() > MAX_EVENT_BYTES {
            break 'stream;
        }
    }
    open.store(false, Ordering::Relaxed);
    lock(&waiting).clear();
}

/// Where the first whole event of `buffer` ends (after its blank line).
pub(super) fn event_end(buffer: &[u8]) -> Option<usize> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// An event's name and its data lines joined.
pub(super) fn parse_event(text: &str) -> (String, String) {
    let mut name = String::new();
    let mut data = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("event:") {
            name = rest.trim().to_owned();
        } else if let Some(rest) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        }
    }
    (name, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_cut_and_read() {
        let buffer =
            b"event: endpoint\r\ndata: /messages/?session_id=1\r\n\r\nevent: message\ndata: {}";
        let end = event_end(buffer).unwrap();
        let (name, data) = parse_event(&String::from_utf8_lossy(&buffer[..end]));
        assert_eq!(
            (name.as_str(), data.as_str()),
            ("endpoint", "/messages/?session_id=1")
        );
        assert_eq!(
            event_end(&buffer[end..]),
            None,
            "the second event is not whole yet"
        );
    }
}
