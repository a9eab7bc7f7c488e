//! A workspace's daily token budget (`WORKSPACE_TOKEN_BUDGET_DAILY`): the tokens
//! its runs' model calls read and wrote are counted per UTC day in the store
//! (so every replica counts to the same day), and a run is refused before it
//! starts once the day's count has reached the budget. Without a budget nothing
//! is counted or read.
//!
//! A run that starts under the budget finishes even if it goes over: the
//! budget bounds what the workspace starts, not what a started run may say.

use chrono::{Duration, Utc};
use uuid::Uuid;

use super::{ServiceError, ServiceResult, Services};

/// The UTC day `YYYY-MM-DD` tokens count to now.
fn today() -> String {
    Utc::now().format("%Y-%m-%d").to_string()
}

/// Seconds until the next UTC midnight (at least 1).
fn until_midnight() -> u64 {
    let now = Utc::now();
    let midnight = (now.date_naive() + Duration::days(1))
        .and_hms_opt(0, 0, 0)
        .map(|m| m.and_utc());
    midnight
        .and_then(|m| u64::try_from((m - now).num_seconds()).ok())
        .unwrap_or(1)
        .max(1)
}

/// Refuses a run of a workspace that has used its budget for today.
pub async fn check(services: &Services, workspace: Uuid) -> ServiceResult<()> {
    let Some(budget) = services.config.workspace_token_budget_daily else {
        return Ok(());
    };
    let used = services.store.token_usage(workspace, &today()).await?;
    if used >= budget {
        return Err(ServiceError::OverBudget {
            message: format!(
                "the workspace has used {used} tokens today, its daily budget of {budget} \
                 (WORKSPACE_TOKEN_BUDGET_DAILY); it starts again at midnight UTC"
            ),
            retry_after: until_midnight(),
        });
    }
    Ok(())
}

/// Counts a finished run's tokens to the workspace's day (when a budget is set).
/// A failure is logged: the run has answered already.
pub async fn record(services: &Services, workspace: Uuid, tokens: u64) {
    if services.config.workspace_token_budget_daily.is_none() || tokens == 0 {
        return;
    }
    if let Err(e) = services
        .store
        .add_token_usage(workspace, &today(), tokens)
        .await
    {
        tracing::error!(workspace = %workspace, error = %e, "cannot count a run's tokens to the workspace's budget");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn midnight_is_within_a_day() {
        let left = until_midnight();
        assert!((1..=86_400).contains(&left), "{left}");
        assert_eq!(today().len(), 10);
    }
}
