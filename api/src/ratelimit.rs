//! Per-chatflow rate limits (`apiConfig.rateLimit`, read with the chatflow:
//! [`crate::domain::ApiConfig`]).
//!
//! Fixed windows counted in the store, keyed by chatflow and caller (the API key,
//! else the client address): on PostgreSQL every replica shares the count.

use uuid::Uuid;

use crate::domain::RateLimit;
use crate::domain::time;
use crate::http::error::ApiError;
use crate::store::Store;

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
