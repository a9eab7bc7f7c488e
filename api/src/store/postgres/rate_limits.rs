//! Rate-limit windows: PostgresStore's [`RateLimitStore`].

use super::*;

#[async_trait]
impl RateLimitStore for PostgresStore {
    async fn rate_limit_hit(
        &self,
        bucket: &str,
        window_start_ms: i64,
        window_ms: i64,
    ) -> StoreResult<u64> {
        let expires = time::from_millis(window_start_ms.saturating_add(window_ms));
        let hits: i64 = self
            .query_opt(
                "INSERT INTO rate_limit_windows (bucket, window_start, hits, expires_at)
                 VALUES ($1, $2, 1, $3)
                 ON CONFLICT (bucket, window_start)
                 DO UPDATE SET hits = rate_limit_windows.hits + 1
                 RETURNING hits",
                &[&bucket, &window_start_ms, &expires],
                |row| row.try_get(0),
            )
            .await?
            .unwrap_or(1);
        if hits == 1 {
            // A new window began: sweep windows that ended (cheap, indexed).
            self.execute(
                "DELETE FROM rate_limit_windows WHERE expires_at < now()",
                &[],
            )
            .await?;
        }
        Ok(u64::try_from(hits).unwrap_or(0))
    }
}
