//! `?page=&limit=` of list endpoints (SPEC.md limits: page default 1, limit default
//! 20, at most 100) and the `X-Total-Count` header carrying the total.

use axum::http::{HeaderName, HeaderValue};
use serde::Deserialize;
use utoipa::IntoParams;

use super::error::ApiError;
use crate::domain::Page;

pub const TOTAL_COUNT: HeaderName = HeaderName::from_static("x-total-count");

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// 1-based page number (default 1).
    pub page: Option<u32>,
    /// Items per page (default 20, at most 100).
    pub limit: Option<u32>,
}

impl PageQuery {
    pub fn page(&self) -> Result<Page, ApiError> {
        let page = self.page.unwrap_or(1);
        let limit = self.limit.unwrap_or(Page::DEFAULT_LIMIT);
        if page == 0 {
            return Err(ApiError::BadRequest("'page' must be 1 or more".into()));
        }
        if limit == 0 || limit > Page::MAX_LIMIT {
            return Err(ApiError::BadRequest(format!(
                "'limit' must be between 1 and {}",
                Page::MAX_LIMIT
            )));
        }
        Ok(Page { page, limit })
    }
}

/// The `X-Total-Count` header for a listing.
pub fn total_count(total: u64) -> [(HeaderName, HeaderValue); 1] {
    [(TOTAL_COUNT, HeaderValue::from(total))]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(page: Option<u32>, limit: Option<u32>) -> PageQuery {
        PageQuery { page, limit }
    }

    #[test]
    fn defaults_and_bounds() {
        assert_eq!(q(None, None).page().ok(), Some(Page { page: 1, limit: 20 }));
        assert_eq!(
            q(Some(3), Some(100)).page().ok(),
            Some(Page {
                page: 3,
                limit: 100
            })
        );
        assert!(q(Some(0), None).page().is_err());
        assert!(q(None, Some(0)).page().is_err());
        assert!(q(None, Some(101)).page().is_err());
    }
}
