//! API keys: how they are made, hashed and what they may do.
//!
//! A key is `weir_` followed by 43 random alphanumeric characters (about 256 bits).
//! Only its SHA-256 hash is ever stored; the plaintext exists once, in the answer
//! that creates it. Each key belongs to one workspace and carries a set of
//! [`Permission`]s.

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use rand::distr::Alphanumeric;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use utoipa::ToSchema;
use uuid::Uuid;

use super::time::Timestamp;

/// Recognisable prefix of every key (helps secret scanners and humans).
pub const KEY_PREFIX: &str = "weir_";
const KEY_RANDOM_CHARS: usize = 43;

/// What a key may do. Names are `area:action`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
pub enum Permission {
    #[serde(rename = "chatflows:read")]
    ChatflowsRead,
    #[serde(rename = "chatflows:write")]
    ChatflowsWrite,
    #[serde(rename = "predictions:create")]
    PredictionsCreate,
    #[serde(rename = "triggers:read")]
    TriggersRead,
    #[serde(rename = "triggers:write")]
    TriggersWrite,
    #[serde(rename = "credentials:read")]
    CredentialsRead,
    #[serde(rename = "credentials:write")]
    CredentialsWrite,
    #[serde(rename = "variables:read")]
    VariablesRead,
    #[serde(rename = "variables:write")]
    VariablesWrite,
    #[serde(rename = "tools:read")]
    ToolsRead,
    #[serde(rename = "tools:write")]
    ToolsWrite,
    #[serde(rename = "executions:read")]
    ExecutionsRead,
    #[serde(rename = "executions:write")]
    ExecutionsWrite,
    #[serde(rename = "documentStores:read")]
    DocumentStoresRead,
    #[serde(rename = "documentStores:write")]
    DocumentStoresWrite,
    #[serde(rename = "apikeys:manage")]
    ApikeysManage,
}

impl Permission {
    pub const ALL: [Permission; 16] = [
        Permission::ChatflowsRead,
        Permission::ChatflowsWrite,
        Permission::PredictionsCreate,
        Permission::TriggersRead,
        Permission::TriggersWrite,
        Permission::CredentialsRead,
        Permission::CredentialsWrite,
        Permission::VariablesRead,
        Permission::VariablesWrite,
        Permission::ToolsRead,
        Permission::ToolsWrite,
        Permission::ExecutionsRead,
        Permission::ExecutionsWrite,
        Permission::DocumentStoresRead,
        Permission::DocumentStoresWrite,
        Permission::ApikeysManage,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::ChatflowsRead => "chatflows:read",
            Permission::ChatflowsWrite => "chatflows:write",
            Permission::PredictionsCreate => "predictions:create",
            Permission::TriggersRead => "triggers:read",
            Permission::TriggersWrite => "triggers:write",
            Permission::CredentialsRead => "credentials:read",
            Permission::CredentialsWrite => "credentials:write",
            Permission::VariablesRead => "variables:read",
            Permission::VariablesWrite => "variables:write",
            Permission::ToolsRead => "tools:read",
            Permission::ToolsWrite => "tools:write",
            Permission::ExecutionsRead => "executions:read",
            Permission::ExecutionsWrite => "executions:write",
            Permission::DocumentStoresRead => "documentStores:read",
            Permission::DocumentStoresWrite => "documentStores:write",
            Permission::ApikeysManage => "apikeys:manage",
        }
    }

    /// Permissions stored as one space-separated text column.
    pub fn join(perms: &[Permission]) -> String {
        let mut out = String::new();
        for (i, p) in perms.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(p.as_str());
        }
        out
    }

    /// Inverse of [`Permission::join`]; unknown names (from a newer version) are skipped.
    pub fn split(text: &str) -> Vec<Permission> {
        text.split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Permission {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Permission::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Permission::ALL.iter().map(|p| p.as_str()).collect();
                format!("unknown permission '{s}' (known: {})", names.join(", "))
            })
    }
}

/// A stored key. The plaintext is not here: only its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub workspace_name: String,
    pub name: String,
    pub permissions: Vec<Permission>,
    pub key_hash: String,
    pub created_date: Timestamp,
    pub last_used_date: Option<Timestamp>,
}

impl ApiKey {
    pub fn has(&self, permission: Permission) -> bool {
        self.permissions.contains(&permission)
    }

    /// Constant-time check that `plaintext` is this key.
    pub fn matches(&self, plaintext: &str) -> bool {
        self.matches_hash(&hash_key(plaintext))
    }

    /// Constant-time check that `hash` (a presented key's [`hash_key`]) is this key's.
    pub fn matches_hash(&self, hash: &str) -> bool {
        hash.as_bytes().ct_eq(self.key_hash.as_bytes()).into()
    }
}

/// What it takes to store a new key.
#[derive(Debug, Clone)]
pub struct NewApiKey {
    pub workspace_id: Uuid,
    pub name: String,
    pub permissions: Vec<Permission>,
    pub key_hash: String,
}

/// A fresh random key: `(plaintext, sha256 hex)`.
pub fn generate_key() -> (String, String) {
    let mut plaintext = String::with_capacity(KEY_PREFIX.len() + KEY_RANDOM_CHARS);
    plaintext.push_str(KEY_PREFIX);
    plaintext.extend(
        rand::rng()
            .sample_iter(&Alphanumeric)
            .take(KEY_RANDOM_CHARS)
            .map(char::from),
    );
    let hash = hash_key(&plaintext);
    (plaintext, hash)
}

/// SHA-256 of a key as lowercase hex: what the store indexes.
pub fn hash_key(plaintext: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(plaintext.as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_prefixed_random_and_hashed() {
        let (a, hash_a) = generate_key();
        let (b, _) = generate_key();
        assert!(a.starts_with(KEY_PREFIX));
        assert_eq!(a.len(), KEY_PREFIX.len() + KEY_RANDOM_CHARS);
        assert_ne!(a, b);
        assert_eq!(hash_a, hash_key(&a));
        assert_eq!(hash_a.len(), 64);
        assert!(!hash_a.contains(&a));
    }

    #[test]
    fn sha256_matches_known_vector() {
        assert_eq!(
            hash_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn permissions_round_trip_through_text() {
        let text = Permission::join(&Permission::ALL);
        assert_eq!(Permission::split(&text), Permission::ALL.to_vec());
        assert!("chatflows:delete".parse::<Permission>().is_err());
        assert_eq!("tools:write".parse(), Ok(Permission::ToolsWrite));
        assert_eq!("executions:read".parse(), Ok(Permission::ExecutionsRead));
        assert_eq!("executions:write".parse(), Ok(Permission::ExecutionsWrite));
        for p in Permission::ALL {
            let json = serde_json::to_value(p).unwrap();
            assert_eq!(json, serde_json::Value::from(p.as_str()));
        }
    }
}
