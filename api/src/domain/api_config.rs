//! A chatflow's `apiConfig` (JSON text, kept as written) and what weir reads
//! from it, parsed once when the chatflow is read: the rate limit
//! (`rateLimit`) and the sensitive inputs requests may override
//! (`overrideConfig.allow`). The text and its reading cannot disagree: an
//! [`ApiConfig`] is only made from its text.

use std::collections::HashSet;
use std::sync::LazyLock;

use serde::{Serialize, Serializer};
use serde_json::Value;

/// `apiConfig` and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiConfig {
    text: String,
    rate_limit: Option<RateLimit>,
    allowed_overrides: HashSet<String>,
}

impl ApiConfig {
    /// Reads the text (what is not JSON, or not of Flowise's shape, says nothing).
    pub fn new(text: String) -> Self {
        let parsed = serde_json::from_str::<Value>(&text).ok();
        let rate_limit = parsed.as_ref().and_then(rate_limit);
        let allowed_overrides = parsed
            .as_ref()
            .and_then(|v| v.pointer("/overrideConfig/allow"))
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        ApiConfig {
            text,
            rate_limit,
            allowed_overrides,
        }
    }

    /// The JSON text as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The rate limit it switches on.
    pub fn rate_limit(&self) -> Option<&RateLimit> {
        self.rate_limit.as_ref()
    }

    /// `overrideConfig.allow`: sensitive inputs a request may override.
    pub fn allowed_overrides(&self) -> &HashSet<String> {
        &self.allowed_overrides
    }
}

/// The allow list of a chatflow without `apiConfig`: nothing.
pub fn nothing_allowed() -> &'static HashSet<String> {
    static NOTHING: LazyLock<HashSet<String>> = LazyLock::new(HashSet::new);
    &NOTHING
}

/// Serialised as the text (Flowise's `apiConfig` is a JSON string).
impl Serialize for ApiConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

const DEFAULT_MESSAGE: &str = "Too many requests, please try again later.";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    pub max: u64,
    pub window_secs: u64,
    pub message: String,
}

/// The limit `config` switches on, if it is well-formed (Flowise's shape:
/// `{status, limitMax, limitDuration (seconds), limitMsg}`, values possibly strings).
fn rate_limit(config: &Value) -> Option<RateLimit> {
    let limit = config.get("rateLimit")?;
    let on = match limit.get("status") {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    };
    let number = |name: &str| -> Option<u64> {
        match limit.get(name)? {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    };
    let max = number("limitMax")?;
    let window_secs = number("limitDuration")?;
    if !on || window_secs == 0 {
        return None;
    }
    let message = limit
        .get("limitMsg")
        .and_then(Value::as_str)
        .filter(|m| !m.trim().is_empty())
        .unwrap_or(DEFAULT_MESSAGE)
        .to_owned();
    Some(RateLimit {
        max,
        window_secs,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Option<RateLimit> {
        ApiConfig::new(text.to_owned()).rate_limit().cloned()
    }

    #[test]
    fn the_allow_list_is_read() {
        let config = ApiConfig::new(r#"{"overrideConfig":{"allow":["basePath"]}}"#.into());
        assert!(config.allowed_overrides().contains("basePath"));
        assert!(ApiConfig::new("{}".into()).allowed_overrides().is_empty());
        assert!(
            ApiConfig::new("not json".into())
                .allowed_overrides()
                .is_empty()
        );
        assert_eq!(
            config.text(),
            r#"{"overrideConfig":{"allow":["basePath"]}}"#
        );
    }

    #[test]
    fn reads_flowise_shapes() {
        let l = parsed(
            r#"{"rateLimit":{"status":true,"limitMax":"2","limitDuration":"60","limitMsg":"slow down"}}"#,
        )
        .unwrap();
        assert_eq!(
            (l.max, l.window_secs, l.message.as_str()),
            (2, 60, "slow down")
        );
        let off = r#"{"rateLimit":{"status":false,"limitMax":2,"limitDuration":1}}"#;
        assert!(parsed(off).is_none());
        let bad = r#"{"rateLimit":{"status":true,"limitMax":"x","limitDuration":1}}"#;
        assert!(parsed(bad).is_none());
        assert!(parsed("{}").is_none());
        assert!(parsed("not json").is_none());
        let default =
            parsed(r#"{"rateLimit":{"status":"true","limitMax":1,"limitDuration":5}}"#).unwrap();
        assert_eq!(default.message, DEFAULT_MESSAGE);
    }
}
