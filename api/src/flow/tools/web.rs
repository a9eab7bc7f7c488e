//! `requests_get` and `requests_post`: an agent fetching a URL, with the SSRF
//! guard of a server whose chatflows may be public. Only http(s); only public
//! addresses ([`netguard::forbidden`]) unless `ALLOW_PRIVATE_REQUESTS` allows
//! more. The check happens where it cannot be dodged: IP literals (every
//! spelling) before each request and each redirect, DNS names inside the
//! client's resolver — the addresses checked are the ones connected to, so a
//! name that re-resolves elsewhere (DNS rebinding) gains nothing. No proxy.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use serde_json::{Value, json};

use super::ToolOutcome;
use crate::flow::component::{HttpMethod, RequestTool};
use crate::llm::http::root_cause;
use crate::netguard::{self, AddressPolicy};

const MAX_REDIRECTS: usize = 5;
/// Bytes of an answer read at most; the model gets `max_output` characters of it.
const MAX_BODY_BYTES: usize = 1 << 20;
const TIMEOUT: Duration = Duration::from_secs(30);

/// Resolves names and refuses those that lead to an address the policy refuses.
struct GuardedResolver {
    policy: Arc<AddressPolicy>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = Arc::clone(&self.policy);
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|e| format!("cannot resolve {host}: {e}"))?
                .collect();
            if let Some(why) = addrs.iter().find_map(|a| policy.refuse(a.ip())) {
                return Err(format!("refused: {host} resolves to {why}").into());
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The client of the request tools.
#[derive(Clone)]
pub struct WebClient {
    client: reqwest::Client,
    policy: Arc<AddressPolicy>,
}

impl WebClient {
    pub fn new(policy: AddressPolicy) -> Result<Self, String> {
        let policy = Arc::new(policy);
        let for_redirects = Arc::clone(&policy);
        let client = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            .timeout(TIMEOUT)
            .dns_resolver(Arc::new(GuardedResolver {
                policy: Arc::clone(&policy),
            }))
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= MAX_REDIRECTS {
                    return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
                }
                match check_url(&for_redirects, attempt.url()) {
                    Ok(()) => attempt.follow(),
                    Err(why) => attempt.error(format!("redirect {why}")),
                }
            }))
            .build()
            .map_err(|e| format!("cannot build the request tools' HTTP client: {e}"))?;
        Ok(WebClient { client, policy })
    }

    pub async fn call(&self, tool: &RequestTool, arguments: &Value) -> ToolOutcome {
        let url_text = match (&tool.url, argument(arguments, "url")) {
            (Some(fixed), _) => fixed.clone(),
            (None, Some(url)) => url,
            (None, None) => return ToolOutcome::error("give the 'url' to request"),
        };
        let url = match Url::parse(&url_text) {
            Ok(u) => u,
            Err(e) => return ToolOutcome::error(format!("'{url_text}' is not a URL: {e}")),
        };
        if let Err(why) = check_url(&self.policy, &url) {
            return ToolOutcome::error(why);
        }
        let mut request = match tool.method {
            HttpMethod::Get => self.client.get(url.clone()),
            HttpMethod::Post => {
                let body = tool
                    .body
                    .clone()
                    .or_else(|| {
                        arguments
                            .get("body")
                            .or_else(|| arguments.get("data"))
                            .cloned()
                    })
                    .unwrap_or(Value::Object(Default::default()));
                match body {
                    // A model may send JSON as text; other text goes as it is.
                    Value::String(text) => match serde_json::from_str::<Value>(&text) {
                        Ok(json) => self.client.post(url.clone()).json(&json),
                        Err(_) => self
                            .client
                            .post(url.clone())
                            .header(reqwest::header::CONTENT_TYPE, "text/plain; charset=utf-8")
                            .body(text),
                    },
                    other => self.client.post(url.clone()).json(&other),
                }
            }
        };
        for (name, value) in &tool.headers {
            let value = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            request = request.header(name.as_str(), value);
        }
        match request.send().await {
            Ok(response) => read(response, tool.max_output).await,
            // Not the URL: a fixed one may carry the flow author's credentials.
            Err(e) => ToolOutcome::error(format!("the request failed: {}", root_cause(&e))),
        }
    }
}

/// Bytes of a web page a document loader reads at most.
const MAX_PAGE_BYTES: usize = 8 << 20;

impl WebClient {
    /// A page for a document loader (`cheerioWebScraper`): GET through the same
    /// guard as the request tools; its final URL (after redirects) and its body.
    pub async fn fetch_page(&self, url: &Url) -> Result<(Url, bytes::Bytes), String> {
        check_url(&self.policy, url)?;
        let response = self
            .client
            .get(url.clone())
            .send()
            .await
            .map_err(|e| format!("the request failed: {}", root_cause(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("it answered HTTP {}", status.as_u16()));
        }
        let page = response.url().clone();
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| format!("the page broke off: {}", root_cause(&e)))?;
            if body.len() + chunk.len() > MAX_PAGE_BYTES {
                return Err(format!("the page is over {} MiB", MAX_PAGE_BYTES >> 20));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((page, bytes::Bytes::from(body)))
    }
}

impl WebClient {
    /// Whether the guard lets a request go to `url` at all: http(s), and no IP
    /// literal it refuses (a name is checked again where it is resolved).
    pub fn check(&self, url: &Url) -> Result<(), String> {
        check_url(&self.policy, url)
    }
}

/// A request an agentflow's HTTP node makes.
pub struct HttpCall {
    pub method: reqwest::Method,
    pub url: Url,
    pub headers: Vec<(String, String)>,
    /// Content type and bytes.
    pub body: Option<(String, Vec<u8>)>,
}

/// What came back (the body cut at 1 MiB).
pub struct HttpReply {
    pub status: u16,
    pub status_text: String,
    pub headers: serde_json::Map<String, Value>,
    pub body: Vec<u8>,
}

impl WebClient {
    /// One request through the same guard as the request tools. Any status is
    /// a reply; only a refused address or a failed connection is an error.
    pub async fn send(&self, call: HttpCall) -> Result<HttpReply, String> {
        check_url(&self.policy, &call.url)?;
        let mut request = self.client.request(call.method, call.url);
        for (name, value) in &call.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some((content_type, bytes)) = call.body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(bytes);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("the request failed: {}", root_cause(&e)))?;
        let status = response.status();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), Value::from(v.to_str().ok()?))))
            .collect();
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| format!("the answer broke off: {}", root_cause(&e)))?;
            let room = MAX_BODY_BYTES.saturating_sub(body.len());
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if room <= chunk.len() {
                break;
            }
        }
        Ok(HttpReply {
            status: status.as_u16(),
            status_text: status.canonical_reason().unwrap_or_default().to_owned(),
            headers,
            body,
        })
    }
}

/// Only http(s), and no IP literal the policy refuses (in any spelling).
fn check_url(policy: &AddressPolicy, url: &Url) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("refused: only http and https URLs ({url})"));
    }
    // The URL parser writes IP hosts in their normal form ([::1], 127.0.0.1);
    // `host_ip` also reads the legacy spellings a name could hide behind.
    let Some(host) = url.host_str() else {
        return Err(format!("refused: {url} has no host"));
    };
    let ip = netguard::host_ip(host);
    match ip.and_then(|ip| policy.refuse(ip)) {
        Some(why) => Err(format!("refused: {why}")),
        None => Ok(()),
    }
}

/// The answer's status and text, cut to `max_output` characters.
async fn read(response: reqwest::Response, max_output: usize) -> ToolOutcome {
    let status = response.status();
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => {
                let room = MAX_BODY_BYTES.saturating_sub(body.len());
                body.extend_from_slice(&bytes[..bytes.len().min(room)]);
                if room <= bytes.len() {
                    break;
                }
            }
            Err(e) => {
                return ToolOutcome::error(format!("the answer broke off: {}", root_cause(&e)));
            }
        }
    }
    let text = String::from_utf8_lossy(&body);
    let mut out: String = text.chars().take(max_output).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    if status.is_success() {
        ToolOutcome::text(out)
    } else {
        ToolOutcome::error(format!("HTTP {}: {out}", status.as_u16()))
    }
}

fn argument(arguments: &Value, name: &str) -> Option<String> {
    match arguments {
        // Flowise's tools take the URL itself as their input.
        Value::String(s) if name == "url" => Some(s.trim().to_owned()),
        other => other
            .get(name)
            .or_else(|| other.get("input"))
            .and_then(Value::as_str)
            .map(|s| s.trim().to_owned()),
    }
}

/// The arguments a model gives a request tool: what the node leaves open.
pub fn parameters(tool: &RequestTool) -> Value {
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    if tool.url.is_none() {
        properties.insert(
            "url".into(),
            json!({"type": "string", "description": "The URL to request."}),
        );
        required.push("url");
    }
    if tool.method == HttpMethod::Post && tool.body.is_none() {
        properties.insert(
            "body".into(),
            json!({"type": "object", "description": "The JSON body to send."}),
        );
    }
    json!({"type": "object", "properties": properties, "required": required})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_addresses_are_refused_in_every_spelling() {
        let policy = AddressPolicy::default();
        for url in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://[::1]:8080/x",
            "http://[::ffff:169.254.169.254]/",
            "http://169.254.169.254/latest/meta-data/",
            "file:///etc/passwd",
        ] {
            let url = Url::parse(url).unwrap();
            assert!(check_url(&policy, &url).is_err(), "{url}");
        }
        assert!(check_url(&policy, &Url::parse("https://example.com/").unwrap()).is_ok());
    }
}
