//! API-key authentication: the [`AuthUser`] extractor.
//!
//! A key arrives as `Authorization: Bearer <key>`, a bare `Authorization: <key>`
//! (Flowise clients send that) or the query parameter `apiKey=<key>`. It is hashed
//! and looked up by hash; the stored hash is compared in constant time. No key or
//! an unknown key is a 401; a known key without the permission a route needs is a
//! 403 (see [`AuthUser::require`]).
//!
//! Flowise's UI, signed in, presents no key: its calls carry the session cookie
//! ([`super::session`]), which stands for the key it signed in with.

use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::Deserialize;
use uuid::Uuid;

use super::AppState;
use super::error::ApiError;
use super::session::{self, SessionError};
use crate::domain::apikey::hash_key;
use crate::domain::{ApiKey, Permission, time};

/// `last_used` is written at most this often per key, so authentication does not
/// turn every read into a write.
const TOUCH_INTERVAL: Duration = Duration::from_secs(60);

/// The authenticated caller: its key and that key's workspace.
#[derive(Debug, Clone)]
pub struct AuthUser {
    pub key: ApiKey,
}

impl AuthUser {
    pub fn workspace(&self) -> Uuid {
        self.key.workspace_id
    }

    /// 403 unless the key carries `permission`.
    pub fn require(&self, permission: Permission) -> Result<&Self, ApiError> {
        if self.key.has(permission) {
            Ok(self)
        } else {
            Err(ApiError::Forbidden(format!(
                "this API key lacks the '{permission}' permission"
            )))
        }
    }
}

#[derive(Deserialize)]
struct KeyParam {
    #[serde(rename = "apiKey")]
    api_key: Option<String>,
}

/// The key as presented by the client, if any.
pub fn presented_key(parts: &Parts) -> Result<Option<String>, ApiError> {
    if let Some(value) = parts.headers.get(AUTHORIZATION) {
        let value = value
            .to_str()
            .map_err(|_| ApiError::Unauthorized("malformed Authorization header".into()))?
            .trim();
        let key = match value.split_once(' ') {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
            Some(_) => {
                return Err(ApiError::Unauthorized(
                    "unsupported Authorization scheme; use 'Bearer <API key>'".into(),
                ));
            }
            None => value,
        };
        if !key.is_empty() {
            return Ok(Some(key.to_owned()));
        }
    }
    if parts.uri.query().is_some()
        && let Ok(axum::extract::Query(KeyParam { api_key: Some(key) })) =
            axum::extract::Query::<KeyParam>::try_from_uri(&parts.uri)
        && !key.is_empty()
    {
        return Ok(Some(key));
    }
    Ok(None)
}

impl AuthUser {
    /// Authenticates a presented key against the store.
    pub async fn authenticate(state: &AppState, presented: &str) -> Result<Self, ApiError> {
        Self::authenticate_hash(state, &hash_key(presented)).await
    }

    /// The caller a request authenticates as: its key, else the UI's session;
    /// `None` when it presents neither.
    pub async fn from_parts(state: &AppState, parts: &Parts) -> Result<Option<Self>, ApiError> {
        if let Some(key) = presented_key(parts)? {
            return Self::authenticate(state, &key).await.map(Some);
        }
        let Some(cookie) = session::presented(parts) else {
            return Ok(None);
        };
        let hash = session::open(&state.keyring, cookie).map_err(|e| match e {
            SessionError::Expired => {
                ApiError::Unauthorized("your session has expired; sign in again".into())
            }
            SessionError::Invalid => {
                ApiError::Unauthorized("invalid session; sign in again".into())
            }
        })?;
        Self::authenticate_hash(state, &hash)
            .await
            .map_err(|e| match e {
                ApiError::Unauthorized(_) => ApiError::Unauthorized(
                    "the session's API key was revoked; sign in again".into(),
                ),
                other => other,
            })
            .map(Some)
    }

    /// Authenticates the key with hash `hash` (a presented key's, or a session's).
    async fn authenticate_hash(state: &AppState, hash: &str) -> Result<Self, ApiError> {
        let invalid = || ApiError::Unauthorized("invalid API key".into());
        let key = state
            .store
            .find_api_key_by_hash(hash)
            .await?
            .ok_or_else(invalid)?;
        if !key.matches_hash(hash) {
            return Err(invalid());
        }
        let stale = key
            .last_used_date
            .is_none_or(|at| (time::now() - at).to_std().unwrap_or_default() >= TOUCH_INTERVAL);
        if stale {
            let store = state.store.clone();
            let id = key.id;
            tokio::spawn(async move {
                if let Err(e) = store.touch_api_key(id).await {
                    tracing::warn!(error = %e, "could not record API key use");
                }
            });
        }
        Ok(AuthUser { key })
    }
}

impl FromRequestParts<AppState> for AuthUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        AuthUser::from_parts(state, parts).await?.ok_or_else(|| {
            ApiError::Unauthorized(
                "an API key is required: 'Authorization: Bearer <key>' or '?apiKey=<key>'".into(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn parts(auth: Option<&str>, uri: &str) -> Parts {
        let mut req = Request::builder().uri(uri);
        if let Some(a) = auth {
            req = req.header(AUTHORIZATION, a);
        }
        req.body(())
            .map(|r| r.into_parts().0)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn key_sources() {
        let got = |auth, uri| presented_key(&parts(auth, uri)).ok().flatten();
        assert_eq!(
            got(Some("Bearer weir_abc"), "/x").as_deref(),
            Some("weir_abc")
        );
        assert_eq!(
            got(Some("bearer  weir_abc "), "/x").as_deref(),
            Some("weir_abc")
        );
        assert_eq!(got(Some("weir_abc"), "/x").as_deref(), Some("weir_abc"));
        assert_eq!(got(None, "/x?apiKey=weir_q&a=1").as_deref(), Some("weir_q"));
        assert_eq!(got(None, "/x?page=1").as_deref(), None);
        assert_eq!(got(None, "/x").as_deref(), None);
        assert!(presented_key(&parts(Some("Basic dXNlcg=="), "/x")).is_err());
    }
}
