//! Per-chatflow rate limits (`apiConfig.rateLimit`, Flowise's shape:
//! `{status, limitMax, limitDuration (seconds), limitMsg}`, values possibly strings).
//!
//! Fixed windows counted in the store, keyed by chatflow and caller (the API key,
//! else the client address): on PostgreSQL every replica shares the count.

use serde_json::Value;
use uuid::Uuid;

use crate::domain::time;
use crate::http::error::ApiError;
use crate::store::Store;

const DEFAULT_MESSAGE: &str = "Too many requests, please try again later.";

#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    pub max: u64,
    pub window_secs: u64,
    pub message: String,
}

/// The chatflow's limit, if one is switched on and well-formed.
pub fn from_api_config(api_config: Option<&str>) -> Option<RateLimit> {
    let config: Value = serde_json::from_str(api_config?).ok()?;
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

/// Counts this call; a 429 with `Retry-After` when the caller is over the limit.
pub async fn check(
    store: &dyn Store,
    limit: &RateLimit,
    chatflow: Uuid,
    caller: &str,
) -> Result<(), ApiError> {
    let window_ms = i64::try_from(limit.window_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let now = time::to_millis(&time::now());
    let start = now - now.rem_euclid(window_ms);
    let hits = store
        .rate_limit_hit(&format!("{chatflow}:{caller}"), start, window_ms)
        .await?;
    if hits > limit.max {
        let retry_after = u64::try_from((start + window_ms - now + 999) / 1000).unwrap_or(1);
        return Err(ApiError::TooManyRequests {
            message: limit.message.clone(),
            retry_after: retry_after.max(1),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_flowise_shapes() {
        let l = from_api_config(Some(
            r#"{"rateLimit":{"status":true,"limitMax":"2","limitDuration":"60","limitMsg":"slow down"}}"#,
        ))
        .unwrap();
        assert_eq!(
            (l.max, l.window_secs, l.message.as_str()),
            (2, 60, "slow down")
        );
        assert!(
            from_api_config(Some(
                r#"{"rateLimit":{"status":false,"limitMax":2,"limitDuration":1}}"#
            ))
            .is_none()
        );
        assert!(
            from_api_config(Some(
                r#"{"rateLimit":{"status":true,"limitMax":"x","limitDuration":1}}"#
            ))
            .is_none()
        );
        assert!(from_api_config(Some("{}")).is_none());
        assert!(from_api_config(None).is_none());
        let default = from_api_config(Some(
            r#"{"rateLimit":{"status":"true","limitMax":1,"limitDuration":5}}"#,
        ))
        .unwrap();
        assert_eq!(default.message, DEFAULT_MESSAGE);
    }
}
