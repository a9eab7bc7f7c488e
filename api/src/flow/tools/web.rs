//! The request tools (GET, POST, PUT, DELETE): an agent calling a URL, with the SSRF
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
use crate::flow::component::{HttpMethod, RequestTool, WebScraperTool};
use crate::llm::http::root_cause;
use crate::netguard::{self, AddressPolicy};
use crate::retrieval::load::html;

const MAX_REDIRECTS: usize = 5;
/// Bytes of an answer read at most; the model gets `max_output` characters of it.
pub(super) const MAX_BODY_BYTES: usize = 1 << 20;
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
    pub(super) client: reqwest::Client,
    pub(super) policy: Arc<AddressPolicy>,
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
        let url_text = match arguments.get("queryParams") {
            Some(Value::Object(params)) if !tool.method.has_body() => {
                with_params(&url_text, params, tool.schema.as_ref())
            }
            _ => url_text,
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
            HttpMethod::Delete => self.client.delete(url.clone()),
            HttpMethod::Post | HttpMethod::Put => {
                let send = match tool.method {
                    HttpMethod::Put => self.client.put(url.clone()),
                    _ => self.client.post(url.clone()),
                };
                match request_body(tool, arguments) {
                    // A model may send JSON as text; other text goes as it is.
                    Value::String(text) => match serde_json::from_str::<Value>(&text) {
                        Ok(json) => send.json(&json),
                        Err(_) => send
                            .header(reqwest::header::CONTENT_TYPE, "text/plain; charset=utf-8")
                            .body(text),
                    },
                    other => send.json(&other),
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

/// The body a POST or PUT sends: the node's fixed body with what the model
/// gave over it (Flowise's merge), else what the model gave, else `{}`.
fn request_body(tool: &RequestTool, arguments: &Value) -> Value {
    let given = arguments
        .get("body")
        .or_else(|| arguments.get("data"))
        .filter(|v| !v.is_null())
        .cloned();
    match (tool.body.clone(), given) {
        (Some(Value::Object(mut fixed)), Some(Value::Object(given))) => {
            fixed.extend(given);
            Value::Object(fixed)
        }
        // A fixed body that is not an object stays as the author wrote it.
        (Some(fixed), _) => fixed,
        (None, Some(given)) => given,
        (None, None) => Value::Object(Default::default()),
    }
}

/// The URL with the model's `queryParams`: with a schema, a parameter `in:
/// "path"` replaces `:name` in the URL (or is appended as a path segment, as
/// Flowise does) and one `in: "query"` is added to the query; without one,
/// every parameter goes to the query. Parameters the schema does not name are
/// left out.
fn with_params(
    url: &str,
    params: &serde_json::Map<String, Value>,
    schema: Option<&serde_json::Map<String, Value>>,
) -> String {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut url = url.to_owned();
    let mut query = Vec::new();
    let mut segments = Vec::new();
    for (name, value) in params.iter().filter(|(_, v)| !v.is_null()) {
        let place = match schema {
            None => "query",
            Some(schema) => match schema.get(name).and_then(|c| c.get("in")) {
                Some(Value::String(place)) => place.as_str(),
                _ => continue,
            },
        };
        let value = text(value);
        match place {
            "path" => {
                let encoded = super::percent_encode(&value);
                match find_placeholder(&url, name) {
                    Some(at) => url.replace_range(at..at + name.len() + 1, &encoded),
                    None => segments.push(encoded),
                }
            }
            "query" => query.push((name.clone(), value)),
            _ => {}
        }
    }
    if !segments.is_empty() {
        let (base, rest) = match url.find(['?', '#']) {
            Some(at) => url.split_at(at),
            None => (url.as_str(), ""),
        };
        url = format!(
            "{}/{}{rest}",
            base.trim_end_matches('/'),
            segments.join("/")
        );
    }
    match Url::parse(&url) {
        Ok(mut parsed) if !query.is_empty() => {
            parsed.query_pairs_mut().extend_pairs(query);
            parsed.into()
        }
        _ => url,
    }
}

/// Where `:name` stands in a URL as a whole word (not `:names`).
fn find_placeholder(url: &str, name: &str) -> Option<usize> {
    let pattern = format!(":{name}");
    let mut from = 0;
    while let Some(found) = url[from..].find(&pattern) {
        let at = from + found;
        let after = url[at + pattern.len()..].chars().next();
        if !after.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return Some(at);
        }
        from = at + pattern.len();
    }
    None
}

/// Bytes of a web page a document loader reads at most.
const MAX_PAGE_BYTES: usize = 8 << 20;

impl WebClient {
    /// A page for a document loader (`cheerioWebScraper`): GET through the same
    /// guard as the request tools; its final URL (after redirects) and its body.
    pub async fn fetch_page(&self, url: &Url) -> Result<(Url, bytes::Bytes), String> {
        self.get_page(url, TIMEOUT)
            .await
            .map(|(page, _, body)| (page, body))
    }

    /// A page within `timeout`: where it ended up (after redirects), its
    /// content type, its bytes.
    async fn get_page(
        &self,
        url: &Url,
        timeout: Duration,
    ) -> Result<(Url, String, bytes::Bytes), String> {
        check_url(&self.policy, url)?;
        let response = self
            .client
            .get(url.clone())
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    format!("no answer within {} s", timeout.as_secs_f64())
                } else {
                    format!("the request failed: {}", root_cause(&e))
                }
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("it answered HTTP {}", status.as_u16()));
        }
        let page = response.url().clone();
        let kind = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| format!("the page broke off: {}", root_cause(&e)))?;
            if body.len() + chunk.len() > MAX_PAGE_BYTES {
                return Err(format!("the page is over {} MiB", MAX_PAGE_BYTES >> 20));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((page, kind, bytes::Bytes::from(body)))
    }
}

/// The web scraper tool's name (Flowise's).
pub const SCRAPER_NAME: &str = "web_scraper_tool";
/// Characters of one page's paragraphs a scrape reports at most.
const MAX_PAGE_TEXT: usize = 20_000;

impl WebClient {
    /// Flowise's web scraper tool: from `start`, pages breadth-first over their
    /// links on the same site up to `max_depth` levels (or the site's sitemap
    /// first), at most `max_pages`; each page's title, description and
    /// paragraph text (or why it could not be read) as a JSON array.
    pub async fn scrape(&self, tool: &WebScraperTool, start: &str) -> ToolOutcome {
        let Ok(first) = Url::parse(start) else {
            return ToolOutcome::text(
                json!({"error": "Input must be a single URL string."}).to_string(),
            );
        };
        if !matches!(first.scheme(), "http" | "https") {
            return ToolOutcome::text(
                json!({"error": "Invalid URL format or protocol"}).to_string(),
            );
        }
        let mut pages = Vec::new();
        let mut fell_back = false;
        if tool.sitemap {
            let listed = match first.join("/sitemap.xml") {
                Ok(sitemap) => match self.get_page(&sitemap, tool.timeout).await {
                    Ok((_, _, body)) => html::sitemap_locations(&String::from_utf8_lossy(&body)),
                    Err(_) => Vec::new(),
                },
                Err(_) => Vec::new(),
            };
            let mut seen = std::collections::HashSet::new();
            for location in listed {
                if pages.len() >= tool.max_pages {
                    break;
                }
                if seen.insert(location.clone()) {
                    let (report, _) = self.scrape_page(&location, tool.timeout, false).await;
                    pages.push(report);
                }
            }
            fell_back = pages.is_empty();
        }
        if !tool.sitemap || fell_back {
            pages = self.follow_links(first, tool).await;
        }
        let data = Value::Array(pages);
        ToolOutcome::text(if fell_back {
            json!({"warning": "Sitemap not found or empty; fell back to recursive scraping.",
                   "scrapedData": data})
            .to_string()
        } else {
            data.to_string()
        })
    }

    async fn follow_links(&self, first: Url, tool: &WebScraperTool) -> Vec<Value> {
        let mut pages = Vec::new();
        let mut seen = std::collections::HashSet::from([first.clone()]);
        let mut level = vec![first];
        for depth in 1..=tool.max_depth {
            let mut next = Vec::new();
            for url in level {
                if pages.len() >= tool.max_pages {
                    return pages;
                }
                let (report, links) = self
                    .scrape_page(url.as_str(), tool.timeout, depth < tool.max_depth)
                    .await;
                pages.push(report);
                next.extend(links.into_iter().filter(|l| seen.insert(l.clone())));
            }
            level = next;
        }
        pages
    }

    /// One page's report, and its same-site links when `links` asks for them.
    async fn scrape_page(&self, url: &str, timeout: Duration, links: bool) -> (Value, Vec<Url>) {
        let failed = |why: String| {
            (
                json!({"url": url, "title": "", "description": "", "body_text": "", "error": why}),
                Vec::new(),
            )
        };
        let Ok(parsed) = Url::parse(url) else {
            return failed("Invalid URL format or protocol".into());
        };
        let (page, kind, body) = match self.get_page(&parsed, timeout).await {
            Ok(got) => got,
            Err(why) => return failed(format!("Scraping Error: {why}")),
        };
        if !kind.contains("text/html") {
            return failed(format!("Skipped non-HTML content (Content-Type: {kind})"));
        }
        let text = String::from_utf8_lossy(&body);
        let summary = html::page_summary(&text);
        let body_text: String = summary.body_text.chars().take(MAX_PAGE_TEXT).collect();
        let found = if links {
            html::same_site_links(&text, &page)
        } else {
            Vec::new()
        };
        let report = json!({"url": url, "title": summary.title, "description": summary.description,
                            "body_text": body_text});
        (report, found)
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

impl WebClient {
    /// A GET whose answer is read as it comes (a server's event stream),
    /// through the same guard, for at most `lasting`; its status must be 2xx.
    pub async fn open_stream(
        &self,
        url: Url,
        headers: &[(String, String)],
        lasting: Duration,
    ) -> Result<reqwest::Response, String> {
        check_url(&self.policy, &url)?;
        let mut request = self.client.get(url).timeout(lasting);
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("the request failed: {}", root_cause(&e)))?;
        if !response.status().is_success() {
            return Err(format!("HTTP {}", response.status().as_u16()));
        }
        Ok(response)
    }
}

/// Only http(s), and no IP literal the policy refuses (in any spelling).
pub(super) fn check_url(policy: &AddressPolicy, url: &Url) -> Result<(), String> {
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
pub(super) async fn read(response: reqwest::Response, max_output: usize) -> ToolOutcome {
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

/// The arguments a model gives a request tool: what the node leaves open —
/// the URL, and Flowise 3's `queryParams` (GET, DELETE) or `body` (POST, PUT),
/// of the node's schema when it has one.
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
    let (field, description) = if tool.method.has_body() {
        ("body", "The JSON body to send.")
    } else {
        ("queryParams", "Query parameters for the request.")
    };
    match &tool.schema {
        Some(schema) => {
            let mut fields = serde_json::Map::new();
            let mut needed = Vec::new();
            for (name, config) in schema {
                let kind = match config.get("type").and_then(Value::as_str) {
                    // Flowise reads query and path values as text.
                    _ if !tool.method.has_body() => "string",
                    Some(kind @ ("number" | "boolean" | "object" | "array")) => kind,
                    _ => "string",
                };
                let mut field = json!({ "type": kind });
                if let Some(text) = config.get("description").and_then(Value::as_str) {
                    field["description"] = Value::from(text);
                }
                if config.get("required").and_then(Value::as_bool) == Some(true) {
                    needed.push(name.clone());
                }
                fields.insert(name.clone(), field);
            }
            properties.insert(
                field.into(),
                json!({"type": "object", "description": description,
                       "properties": fields, "required": needed}),
            );
            if tool.method.has_body() {
                required.push(field);
            }
        }
        None if tool.method.has_body() && tool.body.is_some() => {}
        None => {
            properties.insert(
                field.into(),
                json!({"type": "object", "description": description}),
            );
        }
    }
    json!({"type": "object", "properties": properties, "required": required})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_go_to_the_path_and_the_query() {
        let schema = json!({"id": {"in": "path"}, "ids": {"in": "path"}, "q": {"in": "query"}});
        let schema = schema.as_object();
        let params = json!({"id": "a/b", "q": "x y", "other": 1});
        let params = params.as_object().unwrap();
        assert_eq!(
            with_params("http://h/items/:ids/:id?v=1", params, schema),
            "http://h/items/:ids/a%2Fb?v=1&q=x+y"
        );
        assert_eq!(
            with_params("http://h/items/", params, schema),
            "http://h/items/a%2Fb?q=x+y"
        );
        // Without a schema, everything is a query parameter.
        assert_eq!(
            with_params("http://h/items", params, None),
            "http://h/items?id=a%2Fb&other=1&q=x+y"
        );
    }

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
