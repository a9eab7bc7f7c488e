//! Credentials: named sets of secret fields (`{name, credentialName, plainDataObj}`
//! in Flowise's shape) that nodes name by id instead of carrying keys.
//!
//! The fields are stored sealed (see `crate::sealing`); reads show which fields are
//! set, each as Flowise's redaction marker, never a value. An update that sends the
//! marker back keeps that field's stored value, as Flowise's editor expects.

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use super::time::{self, Timestamp};

/// What reads show instead of a field's value (Flowise's own marker, so its editor
/// sends it back for fields left unchanged).
pub const REDACTED: &str = "_FLOWISE_BLANK_07167752-1a71-43b1-bf8f-4f32252165db";

/// At most this many fields, each name at most [`MAX_FIELD_NAME`] bytes, all values
/// together at most [`MAX_DATA_BYTES`].
pub const MAX_FIELDS: usize = 50;
pub const MAX_FIELD_NAME: usize = 100;
pub const MAX_DATA_BYTES: usize = 64 * 1024;
pub const MAX_NAME: usize = 255;

/// The secret fields: name → value.
pub type Fields = Map<String, Value>;

/// A stored credential: its sealed fields and who may open them.
#[derive(Debug, Clone)]
pub struct SealedCredential {
    pub id: Uuid,
    pub workspace_id: Uuid,
    pub name: String,
    pub credential_name: String,
    /// The id of the key that sealed `data`.
    pub key_id: String,
    pub data: String,
    pub created_date: Timestamp,
    pub updated_date: Timestamp,
    /// Hosts (`host` or `host:port`, lower case) the fields may be sent to besides
    /// the provider's own (see `flow::destination`).
    pub allowed_hosts: Vec<String>,
}

impl SealedCredential {
    /// `allowed_hosts` as its column holds it: comma-separated.
    pub fn hosts_column(&self) -> String {
        self.allowed_hosts.join(",")
    }

    pub fn hosts_from_column(column: &str) -> Vec<String> {
        column
            .split(',')
            .filter(|h| !h.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// What the sealing binds the fields to: a sealed value opens only for its own
    /// record in its own workspace.
    pub fn context(&self) -> String {
        format!("credential/{}/{}", self.workspace_id, self.id)
    }
}

/// A credential as the API shows it. `plainDataObj` (on reads of one credential)
/// names the fields that are set, each valued [`REDACTED`].
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Credential {
    pub id: Uuid,
    pub name: String,
    pub credential_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub plain_data_obj: Option<Map<String, Value>>,
    /// Hosts besides the provider's own that the fields may be sent to.
    pub allowed_hosts: Vec<String>,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub created_date: Timestamp,
    #[serde(serialize_with = "time::serialize")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_date: Timestamp,
}

impl Credential {
    /// The public view of `sealed`; with `fields`, their names (values redacted).
    pub fn view(sealed: &SealedCredential, fields: Option<&Fields>) -> Self {
        Credential {
            id: sealed.id,
            name: sealed.name.clone(),
            credential_name: sealed.credential_name.clone(),
            plain_data_obj: fields.map(|f| {
                f.keys()
                    .map(|k| (k.clone(), Value::from(REDACTED)))
                    .collect()
            }),
            allowed_hosts: sealed.allowed_hosts.clone(),
            created_date: sealed.created_date,
            updated_date: sealed.updated_date,
        }
    }
}

/// At most this many `allowedHosts`.
pub const MAX_ALLOWED_HOSTS: usize = 20;

/// `allowedHosts` as written: each `host` or `host:port` (no scheme, path or
/// wildcard), lower-cased, duplicates dropped.
pub fn validate_allowed_hosts(hosts: Vec<String>) -> Result<Vec<String>, String> {
    if hosts.len() > MAX_ALLOWED_HOSTS {
        return Err(format!(
            "'allowedHosts' may list at most {MAX_ALLOWED_HOSTS} hosts"
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(hosts.len());
    for host in hosts {
        let host = host.trim().to_ascii_lowercase();
        let (name, port) = match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host.as_str(), None),
        };
        let name_ok = !name.is_empty()
            && name.len() <= 253
            && (name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
                || (name.starts_with('[') && name.ends_with(']')));
        let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
        if !name_ok || !port_ok {
            return Err(format!(
                "'allowedHosts' entries must be 'host' or 'host:port' (no scheme or path): \
                 '{host}' is not"
            ));
        }
        if !out.contains(&host) {
            out.push(host);
        }
    }
    Ok(out)
}

/// A display name: 1 to [`MAX_NAME`] characters once trimmed.
pub fn validate_name(name: &str) -> Result<(), String> {
    let trimmed = name.trim();
    if trimmed.is_empty() || trimmed.chars().count() > MAX_NAME {
        return Err(format!("'name' must have 1 to {MAX_NAME} characters"));
    }
    Ok(())
}

/// Flowise's credential type (`openAIApi`): letters, digits, `_` and `-`.
pub fn validate_credential_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > MAX_FIELD_NAME
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "'credentialName' must be 1 to {MAX_FIELD_NAME} letters, digits, '_' or '-' \
             (Flowise's credential type, such as openAIApi)"
        ));
    }
    Ok(())
}

/// Applies a write's `plainDataObj` to the stored `fields`: a string, number or
/// boolean sets a field (kept as text), [`REDACTED`] keeps the stored value, `null` or
/// `""` removes the field. Anything else, or too much, is refused.
pub fn apply_fields(fields: &mut Fields, update: Map<String, Value>) -> Result<(), String> {
    for (name, value) in update {
        if name.is_empty() || name.len() > MAX_FIELD_NAME {
            return Err(format!(
                "'plainDataObj' field names must have 1 to {MAX_FIELD_NAME} bytes"
            ));
        }
        let text = match value {
            Value::Null => None,
            Value::String(s) if s == REDACTED => {
                if !fields.contains_key(&name) {
                    return Err(format!(
                        "'plainDataObj.{name}' is the redaction marker but the credential has no \
                         such field to keep"
                    ));
                }
                continue;
            }
            Value::String(s) => Some(s),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Array(_) | Value::Object(_) => {
                return Err(format!(
                    "'plainDataObj.{name}' must be a string, a number or a boolean"
                ));
            }
        };
        match text.filter(|t| !t.is_empty()) {
            Some(t) => {
                fields.insert(name, Value::String(t));
            }
            None => {
                fields.remove(&name);
            }
        }
    }
    if fields.len() > MAX_FIELDS {
        return Err(format!(
            "'plainDataObj' may have at most {MAX_FIELDS} fields"
        ));
    }
    let size: usize = fields
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if size > MAX_DATA_BYTES {
        return Err(format!(
            "'plainDataObj' may hold at most {} KiB",
            MAX_DATA_BYTES / 1024
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn allowed_hosts_are_hosts_and_ports() {
        assert_eq!(
            validate_allowed_hosts(vec![
                " Gateway.Example:8443 ".into(),
                "gateway.example:8443".into(),
                "10.0.0.5".into(),
                "[::1]:8080".into(),
            ])
            .unwrap(),
            vec!["gateway.example:8443", "10.0.0.5", "[::1]:8080"]
        );
        for bad in [
            "https://x.example",
            "x.example/v1",
            "",
            "x.example:0",
            "x.example:99999",
            "*.example",
        ] {
            assert!(validate_allowed_hosts(vec![bad.into()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn writes_set_keep_and_remove_fields() {
        let mut fields = Fields::new();
        apply_fields(
            &mut fields,
            map(json!({"apiKey": "sk-1", "port": 5432, "ssl": true})),
        )
        .unwrap();
        assert_eq!(fields["port"], "5432");
        apply_fields(
            &mut fields,
            map(json!({"apiKey": REDACTED, "ssl": null, "port": ""})),
        )
        .unwrap();
        assert_eq!(Value::Object(fields.clone()), json!({"apiKey": "sk-1"}));
        assert!(apply_fields(&mut fields, map(json!({"other": REDACTED}))).is_err());
        assert!(apply_fields(&mut fields, map(json!({"nested": {"a": 1}}))).is_err());
        assert!(
            apply_fields(&mut fields, map(json!({"big": "x".repeat(MAX_DATA_BYTES)}))).is_err()
        );
    }

    #[test]
    fn names_are_checked() {
        assert!(validate_credential_name("openAIApi").is_ok());
        assert!(validate_credential_name("open ai").is_err());
        assert!(validate_name("  ").is_err());
        assert!(validate_name("My key").is_ok());
    }
}
