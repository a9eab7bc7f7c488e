//! How weir finds out where to get a token for an MCP server (the MCP
//! authorization specification, 2025-06-18 and later): the server's `401` names
//! its protected-resource metadata (RFC 9728; else the well-known addresses
//! under its URL are tried), which names its authorization server, whose
//! metadata (RFC 8414, else OpenID Connect discovery) names the endpoints. A
//! server without protected-resource metadata (the 2025-03-26 specification)
//! is its own authorization server. weir registers itself as a client (RFC
//! 7591) where none was registered by hand.
//!
//! Checks that keep a token where it belongs: the metadata's `resource` is the
//! server's own origin and a prefix of its URL, the authorization server's
//! `issuer` is the one named, and an authorization server that does not offer
//! PKCE with `S256` is refused.

use reqwest::Url;
use serde_json::{Value, json};

use super::{ClientAuth, OAuthClient, checked_endpoint};
use crate::flow::tools::web::{HttpCall, HttpReply, WebClient};

/// What a server's `401` asked for (`WWW-Authenticate: Bearer …`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Challenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
}

/// The protected resource and the authorization server it trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    /// The resource identifier tokens are asked for (RFC 8707).
    pub resource: String,
    pub authorization_server: String,
    pub scopes: Vec<String>,
}

/// An authorization server's endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthServer {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    pub auth_methods: Vec<String>,
    pub scopes: Vec<String>,
}

async fn get_json(web: &WebClient, url: &str) -> Result<Option<Value>, String> {
    let parsed = Url::parse(url).map_err(|e| format!("'{url}' is not a URL: {e}"))?;
    let reply = web
        .send(HttpCall {
            method: reqwest::Method::GET,
            url: parsed,
            headers: vec![("Accept".into(), "application/json".into())],
            body: None,
        })
        .await?;
    if !(200..300).contains(&reply.status) {
        return Ok(None);
    }
    Ok(serde_json::from_slice(&reply.body).ok())
}

/// Asks the server to start a session without a token: `Some` with what its
/// `401` asked for, `None` when it answered anything else.
pub async fn probe(web: &WebClient, server_url: &str) -> Result<Option<Challenge>, String> {
    let url = Url::parse(server_url).map_err(|e| format!("it is not a URL: {e}"))?;
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": super::super::mcp::initialize_params(),
    });
    let reply = web
        .send(HttpCall {
            method: reqwest::Method::POST,
            url,
            headers: vec![(
                "Accept".into(),
                "application/json, text/event-stream".into(),
            )],
            body: Some((
                "application/json".into(),
                initialize.to_string().into_bytes(),
            )),
        })
        .await?;
    Ok((reply.status == 401).then(|| challenge_of(&reply)))
}

fn challenge_of(reply: &HttpReply) -> Challenge {
    let header = reply
        .headers
        .get("www-authenticate")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Challenge {
        resource_metadata: auth_param(header, "resource_metadata"),
        scope: auth_param(header, "scope"),
    }
}

/// One parameter of a `WWW-Authenticate` challenge (`name="value"` or
/// `name=token`).
fn auth_param(header: &str, name: &str) -> Option<String> {
    let mut rest = header;
    while let Some(at) = rest.find(name) {
        let before_ok = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| c == ' ' || c == ',');
        let after = rest[at + name.len()..].trim_start();
        if before_ok && let Some(value) = after.strip_prefix('=') {
            let value = value.trim_start();
            if let Some(quoted) = value.strip_prefix('"') {
                let mut out = String::new();
                let mut chars = quoted.chars();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => out.extend(chars.next()),
                        '"' => return Some(out),
                        c => out.push(c),
                    }
                }
                return None;
            }
            let end = value.find([',', ' ']).unwrap_or(value.len());
            return Some(value[..end].to_owned());
        }
        rest = &rest[at + name.len()..];
    }
    None
}

/// The origin of a URL (`scheme://host[:port]`).
fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// The path of a URL without its trailing `/` (`""` for the root).
fn path_of(url: &Url) -> &str {
    url.path().trim_end_matches('/')
}

/// The server's protected-resource metadata, found where its challenge says,
/// else at the well-known addresses for its URL and its root.
pub async fn protected_resource(
    web: &WebClient,
    server_url: &str,
    challenge: &Challenge,
) -> Result<Protected, String> {
    let server = Url::parse(server_url).map_err(|e| format!("it is not a URL: {e}"))?;
    let mut candidates = Vec::new();
    if let Some(hinted) = &challenge.resource_metadata {
        candidates.push(hinted.clone());
    }
    let root = format!("{}/.well-known/oauth-protected-resource", origin(&server));
    if !path_of(&server).is_empty() {
        candidates.push(format!("{root}{}", path_of(&server)));
    }
    candidates.push(root);
    for candidate in candidates {
        let Some(metadata) = get_json(web, &candidate).await? else {
            continue;
        };
        let resource = metadata
            .get("resource")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("its resource metadata ({candidate}) names no 'resource'"))?;
        let named = Url::parse(resource)
            .map_err(|_| format!("its resource metadata names '{resource}', not a URL"))?;
        if origin(&named) != origin(&server) || !server.path().starts_with(path_of(&named)) {
            return Err(format!(
                "its resource metadata is for '{resource}', not for this server"
            ));
        }
        let authorization_server = metadata
            .get("authorization_servers")
            .and_then(Value::as_array)
            .and_then(|servers| servers.iter().find_map(Value::as_str))
            .ok_or_else(|| "its resource metadata names no authorization server".to_owned())?;
        return Ok(Protected {
            resource: resource.to_owned(),
            authorization_server: authorization_server.to_owned(),
            scopes: strings(&metadata, "scopes_supported"),
        });
    }
    // The 2025-03-26 specification: the server's origin is its own authorization server.
    Ok(Protected {
        resource: server_url.to_owned(),
        authorization_server: origin(&server),
        scopes: Vec::new(),
    })
}

fn strings(value: &Value, key: &str) -> Vec<String> {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The authorization server's metadata (RFC 8414 §3, then OpenID Connect
/// discovery, in the order the MCP specification gives).
pub async fn authorization_server(web: &WebClient, issuer: &str) -> Result<AuthServer, String> {
    let parsed = Url::parse(issuer)
        .map_err(|e| format!("its authorization server '{issuer}' is not a URL: {e}"))?;
    let base = origin(&parsed);
    let path = path_of(&parsed);
    let candidates = if path.is_empty() {
        vec![
            format!("{base}/.well-known/oauth-authorization-server"),
            format!("{base}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{base}/.well-known/oauth-authorization-server{path}"),
            format!("{base}/.well-known/openid-configuration{path}"),
            format!("{base}{path}/.well-known/openid-configuration"),
        ]
    };
    for candidate in candidates {
        let Some(metadata) = get_json(web, &candidate).await? else {
            continue;
        };
        let text = |key: &str| metadata.get(key).and_then(Value::as_str).map(str::to_owned);
        let named = text("issuer").unwrap_or_default();
        if named.trim_end_matches('/') != issuer.trim_end_matches('/') {
            return Err(format!(
                "its authorization server's metadata names the issuer '{named}', not '{issuer}'"
            ));
        }
        if !strings(&metadata, "code_challenge_methods_supported")
            .iter()
            .any(|m| m == "S256")
        {
            return Err(format!(
                "its authorization server ({issuer}) does not offer PKCE with S256, which OAuth 2.1 requires"
            ));
        }
        let endpoint = |key: &str| {
            text(key).ok_or_else(|| format!("its authorization server's metadata has no '{key}'"))
        };
        return Ok(AuthServer {
            issuer: named,
            authorization_endpoint: endpoint("authorization_endpoint")?,
            token_endpoint: endpoint("token_endpoint")?,
            registration_endpoint: text("registration_endpoint"),
            auth_methods: strings(&metadata, "token_endpoint_auth_methods_supported"),
            scopes: strings(&metadata, "scopes_supported"),
        });
    }
    Err(format!(
        "its authorization server ({issuer}) publishes no metadata (RFC 8414 or OpenID Connect)"
    ))
}

/// How weir asks to authenticate: with a secret in the body where the server
/// allows it, else in the header, else as a public client.
pub fn chosen_auth(server: &AuthServer) -> ClientAuth {
    let offers = |m: &str| server.auth_methods.iter().any(|o| o == m);
    if server.auth_methods.is_empty()
        || offers("client_secret_basic") && !offers("client_secret_post")
    {
        // RFC 8414 §2: absent means client_secret_basic.
        ClientAuth::ClientSecretBasic
    } else if offers("client_secret_post") {
        ClientAuth::ClientSecretPost
    } else {
        ClientAuth::None
    }
}

/// Registers weir with the authorization server (RFC 7591), for `redirect_uri`.
pub async fn register(
    web: &WebClient,
    server: &AuthServer,
    redirect_uri: &str,
    scope: Option<&str>,
) -> Result<OAuthClient, String> {
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(format!(
            "its authorization server ({}) does not register clients itself: \
             register weir there and give 'authConfig.clientId' (and 'clientSecret')",
            server.issuer
        ));
    };
    let url = checked_endpoint(web, "registration endpoint", endpoint)?;
    let auth = chosen_auth(server);
    let mut metadata = json!({
        "client_name": "weir",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": auth.as_str(),
        "application_type": "web",
    });
    if let Some(scope) = scope.filter(|s| !s.is_empty()) {
        metadata["scope"] = Value::String(scope.to_owned());
    }
    let reply = web
        .send(HttpCall {
            method: reqwest::Method::POST,
            url,
            headers: vec![("Accept".into(), "application/json".into())],
            body: Some(("application/json".into(), metadata.to_string().into_bytes())),
        })
        .await?;
    let body: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
    if !(200..300).contains(&reply.status) {
        let why = super::oauth_error(Some(&body))
            .map_or_else(|| "no error code".to_owned(), |e| e.to_string());
        return Err(format!(
            "its authorization server would not register weir ({}): {why}",
            reply.status
        ));
    }
    let client_id = body
        .get("client_id")
        .and_then(Value::as_str)
        .ok_or("its authorization server registered weir without a client_id")?;
    let client_secret = body
        .get("client_secret")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let granted = body
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .and_then(ClientAuth::parse)
        .unwrap_or(auth);
    Ok(OAuthClient {
        client_id: client_id.to_owned(),
        auth: if client_secret.is_none() {
            ClientAuth::None
        } else {
            granted
        },
        client_secret,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_names_its_metadata_and_scope() {
        let header = r#"Bearer error="invalid_token", error_description="Authentication required", resource_metadata="http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp", scope="mcp read""#;
        assert_eq!(
            auth_param(header, "resource_metadata").as_deref(),
            Some("http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(auth_param(header, "scope").as_deref(), Some("mcp read"));
        assert_eq!(
            auth_param("Bearer realm=x, scope=files", "scope").as_deref(),
            Some("files")
        );
        assert_eq!(
            auth_param("Bearer realm=\"a \\\"b\\\"\"", "realm").as_deref(),
            Some("a \"b\"")
        );
        assert_eq!(auth_param("Bearer xscope=1", "scope"), None);
        assert_eq!(auth_param("Bearer", "scope"), None);
    }

    #[test]
    fn weir_authenticates_as_the_server_offers() {
        let server = |methods: &[&str]| AuthServer {
            issuer: String::new(),
            authorization_endpoint: String::new(),
            token_endpoint: String::new(),
            registration_endpoint: None,
            auth_methods: methods.iter().map(|m| (*m).to_owned()).collect(),
            scopes: Vec::new(),
        };
        assert_eq!(chosen_auth(&server(&[])), ClientAuth::ClientSecretBasic);
        assert_eq!(
            chosen_auth(&server(&["client_secret_post", "client_secret_basic"])),
            ClientAuth::ClientSecretPost
        );
        assert_eq!(
            chosen_auth(&server(&["client_secret_basic"])),
            ClientAuth::ClientSecretBasic
        );
        assert_eq!(chosen_auth(&server(&["none"])), ClientAuth::None);
    }
}
