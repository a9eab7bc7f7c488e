//! A conversation kept in Redis, as Flowise's `RedisBackedChatMemory` keeps it:
//! one list per session (its key the session id), the newest message at its
//! head (`LPUSH`), each message LangChain's stored form
//! (`{"type": "human"|"ai", "data": {"content": …}}`), the list expiring
//! `sessionTTL` seconds after its last message when set.
//!
//! The client is the few commands this needs, spoken in RESP over one TCP
//! connection per use (`redis://[user:password@]host:port[/db]`, or
//! `rediss://` for TLS: the server's certificate checked against the public
//! roots and `REDIS_TLS_CA_FILE`'s, see [`trust`]), or as Upstash's REST API
//! takes them (`POST {url}` of the command as a JSON array, a bearer token;
//! `upstashRedisBackedChatMemory`).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_rustls::rustls;

/// A connection, a command and its reply each wait at most this long.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Longest reply line or bulk string read.
const MAX_REPLY: usize = 16 << 20;

/// Where a session's messages are kept.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisHistory {
    server: Server,
    /// Seconds the list lives after its last message.
    pub ttl: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
enum Server {
    Resp {
        host: String,
        port: u16,
        user: Option<String>,
        password: Option<String>,
        db: Option<u32>,
        /// `rediss://`: TLS, the certificate checked for `host`.
        tls: bool,
    },
    /// Upstash's REST API: its URL and token.
    Rest { url: String, token: String },
}

/// One message of the kept conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub human: bool,
    pub content: String,
}

impl RedisHistory {
    /// From a `redis://` URL; `Err` says what is wrong with it.
    pub fn from_url(url: &str, ttl: Option<u64>) -> Result<Self, String> {
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("'{url}' is not a URL: {e}"))?;
        let tls = match parsed.scheme() {
            "redis" => false,
            "rediss" => true,
            other => {
                return Err(format!(
                    "a Redis URL starts with redis:// (or rediss:// for TLS), not {other}://"
                ));
            }
        };
        let host = parsed
            .host_str()
            .ok_or_else(|| format!("'{url}' names no host"))?
            .trim_matches(['[', ']'])
            .to_owned();
        let decode = |s: &str| percent_decode(s).filter(|s| !s.is_empty());
        let db = match parsed.path().trim_matches('/') {
            "" => None,
            n => Some(
                n.parse()
                    .map_err(|_| format!("'{n}' is not a Redis database number"))?,
            ),
        };
        Ok(RedisHistory {
            server: Server::Resp {
                host,
                port: parsed.port().unwrap_or(6379),
                user: decode(parsed.username()),
                password: parsed.password().and_then(decode),
                db,
                tls,
            },
            ttl,
        })
    }

    /// An Upstash database through its REST API (`https://…upstash.io`).
    pub fn upstash(url: &str, token: &str, ttl: Option<u64>) -> Result<Self, String> {
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("'{url}' is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("Upstash's REST URL is http(s), not '{url}'"));
        }
        Ok(RedisHistory {
            server: Server::Rest {
                url: url.trim_end_matches('/').to_owned(),
                token: token.to_owned(),
            },
            ttl,
        })
    }

    /// The session's messages, oldest first; the last `last` of them when set.
    pub async fn read(&self, session: &str, last: Option<usize>) -> Result<Vec<Kept>, String> {
        // The head is the newest: the `last` newest are the list's first ones.
        let stop = match last {
            Some(0) => return Ok(Vec::new()),
            Some(n) => (n - 1).to_string(),
            None => "-1".to_owned(),
        };
        let mut conn = self.connect().await?;
        let reply = conn.command(&["LRANGE", session, "0", &stop]).await?;
        let Reply::Array(items) = reply else {
            return Err("Redis answered LRANGE with something else than a list".into());
        };
        let mut kept = Vec::with_capacity(items.len());
        for item in items.into_iter().rev() {
            let Reply::Bulk(Some(text)) = item else {
                continue;
            };
            let Ok(message) = serde_json::from_slice::<Value>(&text) else {
                continue;
            };
            let human = match message.get("type").and_then(Value::as_str) {
                Some("human") => true,
                Some("ai") => false,
                _ => continue,
            };
            let content = message
                .pointer("/data/content")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            kept.push(Kept { human, content });
        }
        Ok(kept)
    }

    /// Adds an exchange to the session (the question, then the answer).
    pub async fn append(&self, session: &str, question: &str, answer: &str) -> Result<(), String> {
        let stored = |kind: &str, content: &str| {
            json!({"type": kind, "data": {"content": content, "additional_kwargs": {}}}).to_string()
        };
        let mut conn = self.connect().await?;
        conn.command(&[
            "LPUSH",
            session,
            &stored("human", question),
            &stored("ai", answer),
        ])
        .await?;
        if let Some(ttl) = self.ttl {
            conn.command(&["EXPIRE", session, &ttl.to_string()]).await?;
        }
        Ok(())
    }

    async fn connect(&self) -> Result<Connection, String> {
        let (host, port, user, password, db, tls) = match &self.server {
            Server::Resp {
                host,
                port,
                user,
                password,
                db,
                tls,
            } => (host, port, user, password, db, *tls),
            Server::Rest { url, token } => {
                return Ok(Connection::Rest {
                    url: url.clone(),
                    token: token.clone(),
                });
            }
        };
        let address = format!("{host}:{port}");
        let stream = tokio::time::timeout(TIMEOUT, TcpStream::connect(&address))
            .await
            .map_err(|_| format!("Redis at {address} did not answer in time"))?
            .map_err(|e| format!("cannot reach Redis at {address}: {e}"))?;
        let stream: Box<dyn Io> = if tls {
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|_| format!("'{host}' cannot name a TLS server"))?;
            let connector = tokio_rustls::TlsConnector::from(tls_config()?);
            let secured = tokio::time::timeout(TIMEOUT, connector.connect(name, stream))
                .await
                .map_err(|_| format!("Redis at {address} did not finish TLS in time"))?
                .map_err(|e| format!("TLS to Redis at {address} failed: {e}"))?;
            Box::new(secured)
        } else {
            Box::new(stream)
        };
        let mut conn = Connection::Resp(BufReader::new(stream));
        if let Some(password) = password {
            match user {
                Some(user) => conn.command(&["AUTH", user, password]).await?,
                None => conn.command(&["AUTH", password]).await?,
            };
        }
        if let Some(db) = db {
            conn.command(&["SELECT", &db.to_string()]).await?;
        }
        Ok(conn)
    }
}

/// `%xx` escapes of a URL's user or password undone.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A reply of Redis (a status or a number is only a success here).
#[derive(Debug, PartialEq)]
enum Reply {
    Done,
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

/// A connection's byte stream: plain TCP, or TLS over it.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Certificate authorities trusted besides the public roots (`REDIS_TLS_CA_FILE`).
static EXTRA_ROOTS: OnceLock<Vec<rustls::pki_types::CertificateDer<'static>>> = OnceLock::new();

/// Trusts the certificate authorities of this PEM file for `rediss://`
/// connections, besides the public roots; read once at start.
pub fn trust(pem_file: &std::path::Path) -> Result<(), String> {
    use rustls::pki_types::pem::PemObject;
    let certificates = rustls::pki_types::CertificateDer::pem_file_iter(pem_file)
        .and_then(|found| found.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{} holds no readable certificates: {e}", pem_file.display()))?;
    if certificates.is_empty() {
        return Err(format!("{} holds no certificates", pem_file.display()));
    }
    // Set once, at start: a second call keeps the first file's.
    let _first = EXTRA_ROOTS.set(certificates);
    Ok(())
}

/// TLS settings of `rediss://` connections (one per process): the public roots
/// and those [`trust`] added, TLS 1.2 or 1.3.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            for certificate in EXTRA_ROOTS.get().into_iter().flatten() {
                roots
                    .add(certificate.clone())
                    .map_err(|e| format!("REDIS_TLS_CA_FILE: {e}"))?;
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS cannot be set up: {e}"))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}

enum Connection {
    Resp(BufReader<Box<dyn Io>>),
    Rest { url: String, token: String },
}

impl Connection {
    /// Sends one command; its reply, or Redis's error as `Err`.
    async fn command(&mut self, parts: &[&str]) -> Result<Reply, String> {
        let stream = match self {
            Connection::Resp(stream) => stream,
            Connection::Rest { url, token } => return rest_command(url, token, parts).await,
        };
        let mut request = format!("*{}\r\n", parts.len()).into_bytes();
        for part in parts {
            request.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
            request.extend_from_slice(part.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        tokio::time::timeout(TIMEOUT, async {
            stream
                .get_mut()
                .write_all(&request)
                .await
                .map_err(|e| format!("Redis connection broke: {e}"))?;
            reply(stream).await
        })
        .await
        .map_err(|_| format!("Redis did not answer {} in time", parts[0]))?
    }
}

/// The client of Upstash's REST API (one per process).
fn rest_client() -> &'static reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .timeout(TIMEOUT)
            .build()
            .unwrap_or_default()
    })
}

/// One command through Upstash's REST API: `{"result": …}` or `{"error": …}`.
async fn rest_command(url: &str, token: &str, parts: &[&str]) -> Result<Reply, String> {
    let response = rest_client()
        .post(url)
        .bearer_auth(token)
        .json(&parts)
        .send()
        .await
        .map_err(|e| {
            format!(
                "cannot reach Upstash at {url}: {}",
                crate::llm::http::root_cause(&e)
            )
        })?;
    let status = response.status();
    let answer: Value = response
        .json()
        .await
        .map_err(|e| format!("Upstash answered something not JSON (HTTP {status}): {e}"))?;
    if let Some(error) = answer.get("error").and_then(Value::as_str) {
        return Err(format!("Upstash refused: {error}"));
    }
    if !status.is_success() {
        return Err(format!("Upstash failed (HTTP {status})"));
    }
    Ok(match answer.get("result") {
        Some(Value::Array(items)) => Reply::Array(
            items
                .iter()
                .map(|i| Reply::Bulk(i.as_str().map(|s| s.as_bytes().to_vec())))
                .collect(),
        ),
        Some(Value::String(s)) => Reply::Bulk(Some(s.as_bytes().to_vec())),
        _ => Reply::Done,
    })
}

/// One RESP reply.
async fn reply(stream: &mut BufReader<Box<dyn Io>>) -> Result<Reply, String> {
    let line = line(stream).await?;
    let (kind, rest) = line.split_at(1);
    match kind {
        "+" | ":" => Ok(Reply::Done),
        "-" => Err(format!("Redis refused: {rest}")),
        "$" => {
            let len: i64 = rest
                .parse()
                .map_err(|_| "Redis sent an unreadable length")?;
            if len < 0 {
                return Ok(Reply::Bulk(None));
            }
            let len = usize::try_from(len).map_err(|_| "bad length")?;
            if len > MAX_REPLY {
                return Err("Redis sent a value too large to read".into());
            }
            let mut data = vec![0; len + 2];
            stream
                .read_exact(&mut data)
                .await
                .map_err(|e| format!("Redis connection broke: {e}"))?;
            data.truncate(len);
            Ok(Reply::Bulk(Some(data)))
        }
        "*" => {
            let count: i64 = rest.parse().map_err(|_| "Redis sent an unreadable count")?;
            let mut items = Vec::with_capacity(usize::try_from(count.max(0)).unwrap_or(0));
            for _ in 0..count.max(0) {
                items.push(Box::pin(reply(stream)).await?);
            }
            Ok(Reply::Array(items))
        }
        _ => Err("Redis sent something that is not RESP".into()),
    }
}

async fn line(stream: &mut BufReader<Box<dyn Io>>) -> Result<String, String> {
    let mut line = Vec::new();
    let read = stream
        .take(MAX_REPLY as u64)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| format!("Redis connection broke: {e}"))?;
    if read == 0 || !line.ends_with(b"\r\n") {
        return Err("Redis closed the connection".into());
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| "Redis sent a line that is not UTF-8".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_read() {
        let h =
            RedisHistory::from_url("redis://bob:p%40ss@cache.internal:6380/2", Some(60)).unwrap();
        assert_eq!(
            h.server,
            Server::Resp {
                host: "cache.internal".into(),
                port: 6380,
                user: Some("bob".into()),
                password: Some("p@ss".into()),
                db: Some(2),
                tls: false,
            }
        );
        let secure = RedisHistory::from_url("rediss://x", None).unwrap();
        assert!(matches!(secure.server, Server::Resp { tls: true, .. }));
        assert!(RedisHistory::from_url("http://x", None).is_err());
        let plain = RedisHistory::from_url("redis://127.0.0.1", None).unwrap();
        assert!(matches!(
            plain.server,
            Server::Resp {
                port: 6379,
                user: None,
                password: None,
                ..
            }
        ));
        assert!(RedisHistory::upstash("ftp://x", "t", None).is_err());
    }
}
