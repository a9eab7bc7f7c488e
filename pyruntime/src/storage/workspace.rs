//! Workspace identifiers: the one rule for names that become directory names.
//!
//! A workspace id names `PY_TOOL_VENVS/<id>` and `PY_TOOL_ARTIFACTS/<id>`, so it is
//! checked here before any path is built from it: 1 to 64 characters of
//! `[A-Za-z0-9_-]` (no dots, so no `..` and no hidden directories such as `.runs`).

/// Workspace used when a request names none.
pub const DEFAULT_WORKSPACE: &str = "default";

/// Whether `id` is an acceptable workspace id.
pub fn is_valid(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The error text for an invalid id.
pub fn invalid_message(field: &str) -> String {
    format!("`{field}` must be 1 to 64 characters of letters, digits, `_` or `-`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_ids_only() {
        for good in ["default", "ws_1", "A-b-9", &"x".repeat(64)] {
            assert!(is_valid(good), "{good}");
        }
        for bad in ["", "..", ".runs", "a/b", "a b", "é", "a\0", &"x".repeat(65)] {
            assert!(!is_valid(bad), "{bad:?}");
        }
    }
}
