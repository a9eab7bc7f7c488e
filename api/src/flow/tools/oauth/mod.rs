//! An OAuth 2.1 client for the servers weir reaches on a workspace's behalf (an
//! OAuth-protected MCP server, Pipedream's): the authorization-code grant with PKCE (S256)
//! and a `state` that names what is being authorized, the code exchange,
//! refresh, and the client-credentials grant. Every request goes through the
//! request tools' address guard, and an endpoint is `https` unless it is on a
//! loopback address. A refusal is text naming the server's `error` code and
//! description; a token never appears in an error or a log.
//!
//! [`discovery`] finds the endpoints for an MCP server and registers weir there.

pub mod discovery;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use reqwest::Url;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::web::{HttpCall, HttpReply, WebClient};

/// A random secret of 256 bits, URL-safe (a `state`, a PKCE verifier).
pub fn random_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A PKCE pair (RFC 7636, `S256`): the verifier kept, the challenge sent.
pub struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

impl Pkce {
    /// A fresh pair.
    pub fn generate() -> Self {
        let verifier = random_secret();
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        Pkce {
            verifier,
            challenge,
        }
    }
}

/// How a client proves itself at the token endpoint (RFC 7591's
/// `token_endpoint_auth_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuth {
    /// A public client: its id alone.
    None,
    ClientSecretPost,
    ClientSecretBasic,
}

impl ClientAuth {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "none" => Some(ClientAuth::None),
            "client_secret_post" => Some(ClientAuth::ClientSecretPost),
            "client_secret_basic" => Some(ClientAuth::ClientSecretBasic),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuth::None => "none",
            ClientAuth::ClientSecretPost => "client_secret_post",
            ClientAuth::ClientSecretBasic => "client_secret_basic",
        }
    }
}

/// A client of an authorization server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthClient {
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub auth: ClientAuth,
}

/// What a token endpoint granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tokens {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token ends (Unix seconds); none when the server said not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// How long before its end a token is refreshed: a call that starts with it
/// must not see it end on the way.
pub const REFRESH_MARGIN_SECS: i64 = 60;

impl Tokens {
    /// Whether the access token is still good for a while at `now`.
    pub fn fresh_at(&self, now: i64) -> bool {
        self.expires_at
            .is_none_or(|end| end - REFRESH_MARGIN_SECS > now)
    }
}

/// Why a token request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// The server answered with an OAuth error (`invalid_grant`: the grant is
    /// spent or revoked, and only a new authorization helps).
    Refused {
        code: String,
        description: Option<String>,
    },
    /// It could not be reached, or answered something that is not a token.
    Failed(String),
}

impl TokenError {
    /// Whether only a new authorization can help.
    pub fn needs_new_grant(&self) -> bool {
        matches!(self, TokenError::Refused { code, .. } if code == "invalid_grant" || code == "invalid_client" || code == "unauthorized_client")
    }
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::Refused {
                code,
                description: Some(description),
            } => write!(
                f,
                "the authorization server refused: {code} ({description})"
            ),
            TokenError::Refused { code, .. } => {
                write!(f, "the authorization server refused: {code}")
            }
            TokenError::Failed(why) => f.write_str(why),
        }
    }
}

/// A setting of an OAuth configuration that is not text.
#[derive(Debug)]
pub struct NotText;

/// A text setting of an OAuth configuration, trimmed: `None` when absent,
/// null or blank.
pub fn setting_text(value: Option<&Value>) -> Result<Option<String>, NotText> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_owned())),
        Some(_) => Err(NotText),
    }
}

/// The OAuth error an error answer's JSON body names (`error`, and
/// `error_description` when given: RFC 6749 §5.2, RFC 7591 §3.2.2), if any.
pub(crate) fn oauth_error(body: Option<&Value>) -> Option<TokenError> {
    let text = |key: &str| Some(body?.get(key)?.as_str()?.to_owned());
    Some(TokenError::Refused {
        code: text("error")?,
        description: text("error_description"),
    })
}

/// A token endpoint and the client that asks it.
pub struct TokenEndpoint<'a> {
    pub url: &'a str,
    pub client: &'a OAuthClient,
    /// The protected resource the token is for (RFC 8707), when known.
    pub resource: Option<&'a str>,
    /// Send the grant as JSON instead of a form (Pipedream's token endpoint
    /// documents JSON bodies).
    pub json_body: bool,
}

/// An endpoint URL checked: http(s) and `https` unless on loopback (OAuth 2.1
/// §1.5), and no address the guard refuses.
pub fn checked_endpoint(web: &WebClient, what: &str, url: &str) -> Result<Url, String> {
    let parsed = Url::parse(url).map_err(|e| format!("its {what} '{url}' is not a URL: {e}"))?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(name)) => name == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if parsed.scheme() != "https" && !(parsed.scheme() == "http" && loopback) {
        return Err(format!(
            "its {what} must be https (plain http only on loopback): {url}"
        ));
    }
    web.check(&parsed)
        .map_err(|why| format!("its {what} is {why}"))?;
    Ok(parsed)
}

/// The URL a user's browser is sent to, to grant `client` access.
pub fn authorization_url(
    endpoint: &Url,
    client_id: &str,
    redirect_uri: &str,
    state: &str,
    pkce: &Pkce,
    scope: Option<&str>,
    resource: Option<&str>,
) -> String {
    let mut url = endpoint.clone();
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("state", state)
            .append_pair("code_challenge", &pkce.challenge)
            .append_pair("code_challenge_method", "S256");
        if let Some(scope) = scope.filter(|s| !s.is_empty()) {
            query.append_pair("scope", scope);
        }
        if let Some(resource) = resource {
            query.append_pair("resource", resource);
        }
    }
    url.to_string()
}

/// Exchanges an authorization code (with its PKCE verifier).
pub async fn exchange_code(
    web: &WebClient,
    endpoint: &TokenEndpoint<'_>,
    code: &str,
    verifier: &str,
    redirect_uri: &str,
) -> Result<Tokens, TokenError> {
    let grant = [
        ("grant_type", "authorization_code"),
        ("code", code),
        ("code_verifier", verifier),
        ("redirect_uri", redirect_uri),
    ];
    request_tokens(web, endpoint, &grant, None).await
}

/// A new access token for a refresh token; a server that does not rotate
/// refresh tokens leaves the old one in use.
pub async fn refresh(
    web: &WebClient,
    endpoint: &TokenEndpoint<'_>,
    refresh_token: &str,
) -> Result<Tokens, TokenError> {
    let grant = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
    ];
    let mut tokens = request_tokens(web, endpoint, &grant, None).await?;
    if tokens.refresh_token.is_none() {
        tokens.refresh_token = Some(refresh_token.to_owned());
    }
    Ok(tokens)
}

/// A token for the client itself (the client-credentials grant).
pub async fn client_credentials(
    web: &WebClient,
    endpoint: &TokenEndpoint<'_>,
    scope: Option<&str>,
) -> Result<Tokens, TokenError> {
    request_tokens(
        web,
        endpoint,
        &[("grant_type", "client_credentials")],
        scope.filter(|s| !s.is_empty()),
    )
    .await
}

/// One token request, counted in `/metrics` by its grant and outcome.
async fn request_tokens(
    web: &WebClient,
    endpoint: &TokenEndpoint<'_>,
    grant: &[(&'static str, &str)],
    scope: Option<&str>,
) -> Result<Tokens, TokenError> {
    let kind = match grant.first() {
        Some(("grant_type", "authorization_code")) => "authorization_code",
        Some(("grant_type", "refresh_token")) => "refresh_token",
        _ => "client_credentials",
    };
    let outcome = send_token_request(web, endpoint, grant, scope).await;
    let label = match &outcome {
        Ok(_) => "ok",
        Err(TokenError::Refused { .. }) => "refused",
        Err(TokenError::Failed(_)) => "failed",
    };
    crate::metrics::metrics().oauth_token_request(kind, label);
    outcome
}

async fn send_token_request(
    web: &WebClient,
    endpoint: &TokenEndpoint<'_>,
    grant: &[(&str, &str)],
    scope: Option<&str>,
) -> Result<Tokens, TokenError> {
    let url = checked_endpoint(web, "token endpoint", endpoint.url).map_err(TokenError::Failed)?;
    let client = endpoint.client;
    let mut fields: Vec<(&str, &str)> = grant.to_vec();
    if let Some(scope) = scope {
        fields.push(("scope", scope));
    }
    if let Some(resource) = endpoint.resource {
        fields.push(("resource", resource));
    }
    let mut headers = vec![("Accept".to_owned(), "application/json".to_owned())];
    match (client.auth, client.client_secret.as_deref()) {
        (ClientAuth::ClientSecretBasic, Some(secret)) => {
            // RFC 6749 §2.3.1: both parts form-encoded before they are joined.
            let id: String =
                url::form_urlencoded::byte_serialize(client.client_id.as_bytes()).collect();
            let secret: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
            headers.push((
                "Authorization".to_owned(),
                format!("Basic {}", STANDARD.encode(format!("{id}:{secret}"))),
            ));
        }
        (ClientAuth::ClientSecretPost, Some(secret)) => {
            fields.push(("client_id", &client.client_id));
            fields.push(("client_secret", secret));
        }
        _ => fields.push(("client_id", &client.client_id)),
    }
    let body = if endpoint.json_body {
        let object: serde_json::Map<String, Value> = fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
            .collect();
        (
            "application/json".to_owned(),
            Value::Object(object).to_string().into_bytes(),
        )
    } else {
        let form = serde_urlencoded::to_string(&fields)
            .map_err(|e| TokenError::Failed(format!("cannot encode the token request: {e}")))?;
        (
            "application/x-www-form-urlencoded".to_owned(),
            form.into_bytes(),
        )
    };
    let reply = web
        .send(HttpCall {
            method: reqwest::Method::POST,
            url,
            headers,
            body: Some(body),
        })
        .await
        .map_err(|why| {
            TokenError::Failed(format!("the token endpoint cannot be reached: {why}"))
        })?;
    read_tokens(&reply, time_now())
}

fn time_now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A token endpoint's answer read as RFC 6749 §5.1 and §5.2 say.
fn read_tokens(reply: &HttpReply, now: i64) -> Result<Tokens, TokenError> {
    let body: Option<Value> = serde_json::from_slice(&reply.body).ok();
    let text = |key: &str| {
        body.as_ref()
            .and_then(|b| b.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if !(200..300).contains(&reply.status) {
        return Err(oauth_error(body.as_ref()).unwrap_or_else(|| {
            TokenError::Failed(format!(
                "the token endpoint answered {} {}",
                reply.status, reply.status_text
            ))
        }));
    }
    let Some(access_token) = text("access_token").filter(|t| !t.is_empty()) else {
        return Err(TokenError::Failed(
            "the token endpoint's answer has no access_token".into(),
        ));
    };
    if let Some(kind) = text("token_type")
        && !kind.eq_ignore_ascii_case("bearer")
    {
        return Err(TokenError::Failed(format!(
            "the token endpoint granted a '{kind}' token; weir sends Bearer tokens only"
        )));
    }
    let expires_in = body
        .as_ref()
        .and_then(|b| b.get("expires_in"))
        .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()));
    Ok(Tokens {
        access_token,
        refresh_token: text("refresh_token").filter(|t| !t.is_empty()),
        expires_at: expires_in.map(|secs| now.saturating_add(secs.max(0))),
        scope: text("scope"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn reply(status: u16, body: &str) -> HttpReply {
        HttpReply {
            status,
            status_text: String::new(),
            headers: serde_json::Map::new(),
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn pkce_challenge_is_the_verifiers_sha256() {
        let pkce = Pkce::generate();
        assert_eq!(pkce.verifier.len(), 43);
        // RFC 7636 appendix B's example.
        let known = URL_SAFE_NO_PAD.encode(Sha256::digest(
            b"dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
        ));
        assert_eq!(known, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
        assert_eq!(
            pkce.challenge,
            URL_SAFE_NO_PAD.encode(Sha256::digest(pkce.verifier.as_bytes()))
        );
        assert_ne!(Pkce::generate().verifier, pkce.verifier);
    }

    #[test]
    fn token_answers_are_read_as_rfc_6749_says() {
        let tokens = read_tokens(
            &reply(200, r#"{"access_token":"a","token_type":"bearer","expires_in":3600,"refresh_token":"r","scope":"mcp"}"#),
            1000,
        )
        .unwrap();
        assert_eq!(tokens.expires_at, Some(4600));
        assert_eq!(tokens.refresh_token.as_deref(), Some("r"));
        assert!(tokens.fresh_at(1000) && !tokens.fresh_at(4550));
        assert_eq!(
            read_tokens(
                &reply(
                    400,
                    r#"{"error":"invalid_grant","error_description":"spent"}"#
                ),
                0
            ),
            Err(TokenError::Refused {
                code: "invalid_grant".into(),
                description: Some("spent".into())
            })
        );
        assert!(
            read_tokens(&reply(400, r#"{"error":"invalid_grant"}"#), 0)
                .unwrap_err()
                .needs_new_grant()
        );
        assert!(matches!(
            read_tokens(&reply(502, "<html>"), 0),
            Err(TokenError::Failed(_))
        ));
        assert!(matches!(
            read_tokens(&reply(200, r#"{"access_token":"a","token_type":"mac"}"#), 0),
            Err(TokenError::Failed(_))
        ));
        let forever = read_tokens(&reply(200, r#"{"access_token":"a"}"#), 0).unwrap();
        assert!(forever.fresh_at(i64::MAX - 100));
    }

    #[test]
    fn the_authorization_url_carries_pkce_state_and_resource() {
        let pkce = Pkce::generate();
        let endpoint = Url::parse("https://as.example/authorize?tenant=1").unwrap();
        let url = authorization_url(
            &endpoint,
            "c 1",
            "https://weir.example/cb",
            "st",
            &pkce,
            Some("mcp read"),
            Some("https://mcp.example/mcp"),
        );
        let parsed = Url::parse(&url).unwrap();
        let pairs: HashMap<_, _> = parsed.query_pairs().into_owned().collect();
        assert_eq!(pairs["tenant"], "1");
        assert_eq!(pairs["client_id"], "c 1");
        assert_eq!(pairs["code_challenge"], pkce.challenge);
        assert_eq!(pairs["code_challenge_method"], "S256");
        assert_eq!(pairs["scope"], "mcp read");
        assert_eq!(pairs["resource"], "https://mcp.example/mcp");
        assert_eq!(pairs["state"], "st");
    }
}
