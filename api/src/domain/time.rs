//! Timestamps: UTC with millisecond precision, written as ISO 8601 with a `Z`
//! (SPEC.md, general conventions). Values are truncated to milliseconds when made,
//! so what a store gives back equals what was written.

use chrono::{DateTime, SubsecRound, Utc};
use serde::Serializer;

pub type Timestamp = DateTime<Utc>;

/// The current time, truncated to milliseconds.
pub fn now() -> Timestamp {
    Utc::now().trunc_subsecs(3)
}

/// `2026-11-21T08:12:29.123Z`
pub fn format(ts: &Timestamp) -> String {
    ts.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Serde `serialize_with` for a timestamp.
pub fn serialize<S: Serializer>(ts: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&ts.format("%Y-%m-%dT%H:%M:%S%.3fZ"))
}

/// Serde `serialize_with` for an optional timestamp (`null` when absent).
pub fn serialize_opt<S: Serializer>(ts: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    match ts {
        Some(ts) => serialize(ts, s),
        None => s.serialize_none(),
    }
}

/// Milliseconds since the epoch (the SQLite representation).
pub fn to_millis(ts: &Timestamp) -> i64 {
    ts.timestamp_millis()
}

pub fn from_millis(ms: i64) -> Timestamp {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_milliseconds_and_z() {
        let ts = from_millis(1_700_000_000_123);
        assert_eq!(format(&ts), "2023-11-14T22:13:20.123Z");
        let zero = from_millis(1_700_000_000_000);
        assert_eq!(format(&zero), "2023-11-14T22:13:20.000Z");
    }

    #[test]
    fn now_has_no_sub_millisecond_part() {
        let ts = now();
        assert_eq!(from_millis(to_millis(&ts)), ts);
    }
}
