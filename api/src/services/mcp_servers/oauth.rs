//! OAuth for a workspace's MCP servers (`authType: OAUTH2`, weir's own): the
//! grant that `authorize` begins (the server's authorization server found,
//! weir registered there unless a client was given, a PKCE authorization URL
//! for the user's browser), that weir's callback completes (the code exchanged,
//! the tokens sealed with the server's record, its tools listed), and the
//! access token kept fresh for runs: refreshed before it ends, one refresh per
//! server at a time, so a rotated refresh token is spent once.
//!
//! The `state` sent to the authorization server is `mcp.<workspace>.<server>.<secret>`:
//! the secret (256 bits) is kept sealed with the server and compared in
//! constant time, used once, and good for ten minutes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use super::{ServiceError, ServiceResult, Services, oauth_of, seal_oauth, stored};
use crate::domain::mcp::{CustomMcpServer, MASK, McpServerStatus};
use crate::flow::FlowError;
use crate::flow::component::McpServer;
use crate::flow::tools::oauth::{
    self, OAuthClient, Pkce, TokenEndpoint, Tokens, checked_endpoint, discovery,
};

/// How long a begun authorization waits for the user.
const PENDING_SECS: i64 = 600;

/// A server's OAuth setup, kept sealed with it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthSetup {
    /// A client registered by hand at the authorization server (else weir
    /// registers itself there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The scope asked for (else the server's challenge's, else all it lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Where tokens come from, as the last authorization found them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantPlace>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
}

/// The authorization server, and weir as its client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantPlace {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    /// The protected resource tokens are asked for (RFC 8707).
    pub resource: String,
    pub client: OAuthClient,
    pub redirect_uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// An authorization the user has not finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    pub secret: String,
    pub verifier: String,
    pub expires_at: i64,
}

impl OAuthSetup {
    /// What a client sent as `authConfig` (`{clientId, clientSecret, scope}`),
    /// a masked secret meaning the stored one; the rest kept from `stored`
    /// while the client stays the same.
    pub fn given(auth_config: Option<&Value>, stored: &OAuthSetup) -> ServiceResult<OAuthSetup> {
        let Some(config) = auth_config else {
            return Ok(stored.clone());
        };
        if !config.is_object() {
            return Err(ServiceError::Invalid(
                "'authConfig' must be an object ({clientId, clientSecret, scope}) with authType OAUTH2"
                    .into(),
            ));
        }
        let text = |key: &str| {
            crate::flow::tools::oauth::setting_text(config.get(key))
                .map_err(|_| ServiceError::Invalid(format!("'authConfig.{key}' must be text")))
        };
        let client_id = text("clientId")?;
        let client_secret = match text("clientSecret")? {
            Some(secret) if secret == MASK => match &stored.client_secret {
                Some(kept) => Some(kept.clone()),
                None => {
                    return Err(ServiceError::Invalid(
                        "'authConfig.clientSecret' is masked but none is stored: give its value"
                            .into(),
                    ));
                }
            },
            other => other,
        };
        if client_secret.is_some() && client_id.is_none() {
            return Err(ServiceError::Invalid(
                "'authConfig.clientSecret' needs its 'clientId'".into(),
            ));
        }
        let scope = text("scope")?;
        let same = client_id == stored.client_id
            && client_secret == stored.client_secret
            && scope == stored.scope;
        Ok(if same {
            stored.clone()
        } else {
            OAuthSetup {
                client_id,
                client_secret,
                scope,
                ..OAuthSetup::default()
            }
        })
    }

    /// As a server's answer shows it: the client, never a secret or a token.
    pub fn shown(&self) -> Value {
        let client_id = self
            .client_id
            .clone()
            .or_else(|| self.grant.as_ref().map(|g| g.client.client_id.clone()));
        let mut shown = json!({
            "clientId": client_id,
            "scope": self.scope.clone().or_else(|| self.grant.as_ref().and_then(|g| g.scope.clone())),
            "registered": self.client_id.is_none() && self.grant.is_some(),
            "authorized": self.tokens.is_some(),
        });
        if self.client_secret.is_some() {
            shown["clientSecret"] = Value::String(MASK.into());
        }
        if let Some(issuer) = self.grant.as_ref().map(|g| g.issuer.clone()) {
            shown["issuer"] = Value::String(issuer);
        }
        if let Some(end) = self.tokens.as_ref().and_then(|t| t.expires_at)
            && let Some(at) = chrono::DateTime::from_timestamp(end, 0)
        {
            shown["expiresAt"] =
                Value::String(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        }
        shown
    }

    /// Forgets what was found for the old URL: another resource needs its own grant.
    pub fn forget_grant(&mut self) {
        self.grant = None;
        self.tokens = None;
        self.pending = None;
    }
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The `state` of an authorization of `server`.
fn state_of(server: &CustomMcpServer, secret: &str) -> String {
    format!("mcp.{}.{}.{secret}", server.workspace_id, server.id)
}

/// The workspace, server and secret a `state` names (`None`: not weir's MCP state).
pub fn parse_state(state: &str) -> Option<(Uuid, Uuid, &str)> {
    let rest = state.strip_prefix("mcp.")?;
    let mut parts = rest.splitn(3, '.');
    let workspace = parts.next()?.parse().ok()?;
    let server = parts.next()?.parse().ok()?;
    let secret = parts.next().filter(|s| !s.is_empty())?;
    Some((workspace, server, secret))
}

/// Begins an authorization: finds where tokens come from, registers weir
/// there when it must, and answers the URL the user opens. The setup gains
/// the grant's place and the pending authorization.
pub async fn begin(
    services: &Services,
    server: &CustomMcpServer,
    setup: &mut OAuthSetup,
    redirect_uri: &str,
) -> Result<String, String> {
    let web = &services.tools.web;
    let Some(challenge) = discovery::probe(web, &server.server_url).await? else {
        return Err("it answered without asking for a token: use authType NONE".into());
    };
    let protected = discovery::protected_resource(web, &server.server_url, &challenge).await?;
    let authority = discovery::authorization_server(web, &protected.authorization_server).await?;
    let authorization_endpoint = checked_endpoint(
        web,
        "authorization endpoint",
        &authority.authorization_endpoint,
    )?;
    checked_endpoint(web, "token endpoint", &authority.token_endpoint)?;
    let scope = setup
        .scope
        .clone()
        .or(challenge.scope)
        .or_else(|| (!protected.scopes.is_empty()).then(|| protected.scopes.join(" ")));
    let reusable = setup.grant.as_ref().filter(|g| {
        g.issuer == authority.issuer && g.redirect_uri == redirect_uri && setup.client_id.is_none()
    });
    let client = match (&setup.client_id, reusable) {
        (Some(client_id), _) => OAuthClient {
            client_id: client_id.clone(),
            client_secret: setup.client_secret.clone(),
            auth: if setup.client_secret.is_some() {
                discovery::chosen_auth(&authority)
            } else {
                oauth::ClientAuth::None
            },
        },
        (None, Some(grant)) => grant.client.clone(),
        (None, None) => {
            discovery::register(web, &authority, redirect_uri, scope.as_deref()).await?
        }
    };
    let pkce = Pkce::generate();
    let secret = oauth::random_secret();
    let url = oauth::authorization_url(
        &authorization_endpoint,
        &client.client_id,
        redirect_uri,
        &state_of(server, &secret),
        &pkce,
        scope.as_deref(),
        Some(&protected.resource),
    );
    setup.grant = Some(GrantPlace {
        issuer: authority.issuer,
        authorization_endpoint: authority.authorization_endpoint,
        token_endpoint: authority.token_endpoint,
        resource: protected.resource,
        client,
        redirect_uri: redirect_uri.to_owned(),
        scope,
    });
    setup.pending = Some(Pending {
        secret,
        verifier: pkce.verifier,
        expires_at: now() + PENDING_SECS,
    });
    Ok(url)
}

/// The server a callback's `state` names, with the authorization it is waiting
/// for taken from its setup — `None` when the state is not that one (used,
/// replaced, or never weir's), which leaves the waiting one in place.
async fn waiting(
    services: &Services,
    state: &str,
) -> ServiceResult<(CustomMcpServer, OAuthSetup, Pending)> {
    let unknown = || {
        ServiceError::Invalid(
            "this authorization is not one weir is waiting for (finished, replaced or unknown): \
             authorize the server again"
                .into(),
        )
    };
    let (workspace, id, secret) = parse_state(state).ok_or_else(unknown)?;
    let server = stored(services, workspace, id).await?;
    let mut setup = oauth_of(services, &server)?;
    let matches = setup
        .pending
        .as_ref()
        .is_some_and(|p| bool::from(p.secret.as_bytes().ct_eq(secret.as_bytes())));
    if !matches {
        return Err(unknown());
    }
    let pending = setup.pending.take().ok_or_else(unknown)?;
    Ok((server, setup, pending))
}

/// Completes an authorization with the code the user's browser brought back:
/// the tokens sealed, the tools listed (`AUTHORIZED`), or `ERROR` and why.
pub async fn complete(
    services: &Services,
    state: &str,
    code: &str,
) -> ServiceResult<CustomMcpServer> {
    let (mut server, mut setup, pending) = waiting(services, state).await?;
    let outcome = if pending.expires_at < now() {
        Err("the authorization took longer than ten minutes: authorize the server again".into())
    } else {
        match &setup.grant {
            None => Err("the authorization lost its place: authorize the server again".into()),
            Some(grant) => oauth::exchange_code(
                &services.tools.web,
                &TokenEndpoint {
                    url: &grant.token_endpoint,
                    client: &grant.client,
                    resource: Some(&grant.resource),
                    json_body: false,
                },
                code,
                &pending.verifier,
                &grant.redirect_uri,
            )
            .await
            .map_err(|e| format!("the code could not be exchanged for a token: {e}")),
        }
    };
    let outcome = match outcome {
        Ok(tokens) => {
            let bearer = tokens.access_token.clone();
            setup.tokens = Some(tokens);
            let remote = McpServer {
                url: server.server_url.clone(),
                headers: vec![bearer_header(&bearer)],
                grant: None,
            };
            super::list_tools(services, &mut server, &remote).await
        }
        Err(why) => Err(why),
    };
    server.sealed_auth = seal_oauth(services, &server, &setup)?;
    server.updated_date = crate::domain::time::now();
    if let Err(why) = outcome {
        return Err(super::unreached(services, &mut server, why).await);
    }
    services.store.update_mcp_server(&server).await?;
    Ok(server)
}

/// The user (or the authorization server) refused: the waiting authorization
/// ends, the server is `ERROR`.
pub async fn refused(
    services: &Services,
    state: &str,
    error: &str,
    description: Option<&str>,
) -> ServiceResult<CustomMcpServer> {
    let (mut server, setup, _) = waiting(services, state).await?;
    server.sealed_auth = seal_oauth(services, &server, &setup)?;
    server.status = McpServerStatus::Error;
    server.updated_date = crate::domain::time::now();
    services.store.update_mcp_server(&server).await?;
    let description = description.map(|d| format!(" ({d})")).unwrap_or_default();
    Err(ServiceError::Invalid(format!(
        "the authorization server did not grant access: {error}{description}"
    )))
}

pub fn bearer_header(token: &str) -> (String, String) {
    ("Authorization".to_owned(), format!("Bearer {token}"))
}

fn authorize_again(server: &CustomMcpServer, why: impl std::fmt::Display) -> ServiceError {
    FlowError::invalid(format!(
        "the MCP server '{}' ({}) needs authorizing again ({why}): \
         POST /api/v1/custom-mcp-servers/{}/authorize",
        server.name, server.id, server.id
    ))
    .into()
}

/// A good access token for `server`: the stored one, or a refreshed one (one
/// refresh per server at a time; a grant the authorization server no longer
/// honours makes the server `PENDING`, its tokens forgotten).
pub async fn access_token(services: &Services, server: &CustomMcpServer) -> ServiceResult<String> {
    let setup = oauth_of(services, server)?;
    let Some(tokens) = setup.tokens else {
        return Err(authorize_again(server, "it holds no token"));
    };
    if tokens.fresh_at(now()) {
        return Ok(tokens.access_token);
    }
    let lock = services.refreshes.of(server.id);
    let _refreshing = lock.lock().await;
    // Another call may have refreshed it while this one waited.
    let mut server = stored(services, server.workspace_id, server.id).await?;
    let mut setup = oauth_of(services, &server)?;
    let Some(tokens) = setup.tokens.clone() else {
        return Err(authorize_again(&server, "it holds no token"));
    };
    if tokens.fresh_at(now()) {
        return Ok(tokens.access_token);
    }
    let (Some(refresh_token), Some(grant)) = (tokens.refresh_token.as_deref(), &setup.grant) else {
        forget_tokens(services, &mut server, &mut setup).await?;
        return Err(authorize_again(
            &server,
            "its token ended and it has no refresh token",
        ));
    };
    let refreshed = oauth::refresh(
        &services.tools.web,
        &TokenEndpoint {
            url: &grant.token_endpoint,
            client: &grant.client,
            resource: Some(&grant.resource),
            json_body: false,
        },
        refresh_token,
    )
    .await;
    match refreshed {
        Ok(fresh) => {
            let token = fresh.access_token.clone();
            setup.tokens = Some(fresh);
            server.sealed_auth = seal_oauth(services, &server, &setup)?;
            server.updated_date = crate::domain::time::now();
            services.store.update_mcp_server(&server).await?;
            // The old token's session is of no more use.
            services.tools.mcp.forget(&McpServer {
                url: server.server_url.clone(),
                headers: vec![bearer_header(&tokens.access_token)],
                grant: None,
            });
            Ok(token)
        }
        Err(e) if e.needs_new_grant() => {
            forget_tokens(services, &mut server, &mut setup).await?;
            Err(authorize_again(&server, e))
        }
        Err(e) => Err(ServiceError::Upstream(format!(
            "the MCP server '{}' ({})'s token could not be refreshed: {e}",
            server.name, server.id
        ))),
    }
}

/// Stores `server` as `PENDING` with no tokens: only a new authorization helps.
async fn forget_tokens(
    services: &Services,
    server: &mut CustomMcpServer,
    setup: &mut OAuthSetup,
) -> ServiceResult<()> {
    setup.tokens = None;
    server.status = McpServerStatus::Pending;
    server.sealed_auth = seal_oauth(services, server, setup)?;
    services.store.update_mcp_server(server).await?;
    Ok(())
}

/// One refresh at a time per owner (a stored server): the second caller waits,
/// then finds the tokens the first one stored.
#[derive(Default)]
pub struct Refreshes {
    locks: Mutex<HashMap<uuid::Uuid, Arc<tokio::sync::Mutex<()>>>>,
}

impl Refreshes {
    /// The lock of `owner`'s refreshes.
    pub fn of(&self, owner: uuid::Uuid) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(locks.entry(owner).or_default())
    }

    /// Forgets `owner` (deleted).
    pub fn forget(&self, owner: uuid::Uuid) {
        self.locks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_names_its_server() {
        let (w, s) = (Uuid::new_v4(), Uuid::new_v4());
        let state = format!("mcp.{w}.{s}.abc_-x");
        assert_eq!(parse_state(&state), Some((w, s, "abc_-x")));
        assert_eq!(parse_state(&format!("mcp.{w}.{s}.")), None);
        assert_eq!(parse_state(&format!("cred.{w}.{s}.x")), None);
        assert_eq!(parse_state("mcp.x.y.z"), None);
    }

    #[test]
    fn a_new_client_starts_a_new_grant_and_a_masked_secret_keeps_the_stored_one() {
        let stored = OAuthSetup {
            client_id: Some("c".into()),
            client_secret: Some("s".into()),
            scope: None,
            tokens: Some(Tokens {
                access_token: "a".into(),
                refresh_token: None,
                expires_at: None,
                scope: None,
            }),
            ..OAuthSetup::default()
        };
        let same = OAuthSetup::given(
            Some(&json!({"clientId": "c", "clientSecret": MASK})),
            &stored,
        )
        .unwrap();
        assert_eq!(same, stored);
        let other = OAuthSetup::given(Some(&json!({"clientId": "d"})), &stored).unwrap();
        assert_eq!(other.client_id.as_deref(), Some("d"));
        assert!(other.tokens.is_none() && other.client_secret.is_none());
        assert!(
            OAuthSetup::given(Some(&json!({"clientSecret": "x"})), &OAuthSetup::default()).is_err()
        );
        assert!(
            OAuthSetup::given(
                Some(&json!({"clientId": "c", "clientSecret": MASK})),
                &OAuthSetup::default()
            )
            .is_err()
        );
        let shown = stored.shown();
        assert_eq!(shown["clientSecret"], MASK);
        assert_eq!(shown["authorized"], true);
        assert!(!shown.to_string().contains("\"a\""), "{shown}");
    }
}
