//! Rate-limit windows: SqliteStore's [`RateLimitStore`].

use super::*;

#[async_trait]
impl RateLimitStore for SqliteStore {
    async fn rate_limit_hit(
        &self,
        bucket: &str,
        window_start_ms: i64,
        window_ms: i64,
    ) -> StoreResult<u64> {
        let mut windows = self.rate_windows.lock().unwrap_or_else(|p| p.into_inner());
        if windows.len() >= RATE_WINDOWS_SWEEP_AT {
            let now = to_millis(&time::now());
            windows.retain(|_, (start, len, _)| *start + *len > now);
        }
        let entry = windows
            .entry(bucket.to_owned())
            .or_insert((window_start_ms, window_ms, 0));
        if entry.0 != window_start_ms {
            *entry = (window_start_ms, window_ms, 0);
        }
        entry.2 += 1;
        Ok(entry.2)
    }
}
