//! Cron schedules: SPEC.md's POSIX 5-field expressions in an IANA time zone, and
//! the instants they fire at.
//!
//! [`Schedule::parse`] accepts minute, hour, day-of-month, month and day-of-week
//! with `*`, ranges, steps (`*/15`, `1-30/7`), lists, month and weekday names in any
//! case, and Sunday as 0 or 7; when both day fields are restricted a day matching
//! either fires (the classic rule). Extensions of other cron dialects (seconds,
//! years, `L`, `W`, `#`, `?`, `@daily`) are refused, and so is an expression that
//! can never fire (`0 0 30 2 *`). [`Schedule::next_after`] is the one place next
//! times come from: `nextExecution`, the preview endpoint and the scheduler.
//!
//! The arithmetic is croner's (the design card's `cron` crate wants 6–7 fields with
//! seconds and numbers weekdays 1–7). Its DST rules are the ones weir documents: a
//! fixed local time skipped at spring-forward fires once, at the first instant
//! after the gap; a fixed local time that occurs twice at fall-back fires once, at
//! its first occurrence; schedules with a wildcard or step in the minute or hour
//! field fire at every real matching instant.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::domain::time::Timestamp;

/// Most fire times one preview may list.
pub const MAX_PREVIEW: usize = 50;

/// A validated cron expression in its time zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    zone: Tz,
}

const FIELD_NAMES: [&str; 5] = ["minute", "hour", "day-of-month", "month", "day-of-week"];
const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
/// Fire times [`Schedule::shortest_gap`] looks at: one more than a day's minutes.
pub const GAP_WINDOW: usize = 1441;

/// Days a month can have (February: 29, it does fire in leap years).
const MONTH_DAYS: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/// An IANA time zone name (`Europe/Berlin`); `UTC` when absent.
pub fn parse_zone(name: Option<&str>) -> Result<Tz, String> {
    match name.map(str::trim) {
        None | Some("") => Ok(Tz::UTC),
        Some(name) => name
            .parse::<Tz>()
            .map_err(|_| format!("'{name}' is not an IANA time zone (e.g. 'Europe/Berlin')")),
    }
}

impl Schedule {
    /// Validates `expression` (see the module docs) in `zone` (IANA name, default UTC).
    pub fn parse(expression: &str, zone: Option<&str>) -> Result<Self, String> {
        let zone = parse_zone(zone)?;
        let fields: Vec<&str> = expression.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "'{expression}' has {} fields; a cron expression has 5: minute hour \
                 day-of-month month day-of-week",
                fields.len()
            ));
        }
        for (field, name) in fields.iter().zip(FIELD_NAMES) {
            check_field(field, name)?;
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(&fields.join(" "))
            .map_err(|e| format!("'{expression}' is not a valid cron expression: {e}"))?;
        if !can_fire(fields[2], fields[3], fields[4])? {
            return Err(format!(
                "'{expression}' can never fire: no month in it has that day"
            ));
        }
        Ok(Schedule { cron, zone })
    }

    /// The first fire time strictly after `after`, or `None` when there is none
    /// before the year 5000.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let local = after.with_timezone(&self.zone);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|t: DateTime<Tz>| t.with_timezone(&Utc))
    }

    /// The shortest time between two of the next [`GAP_WINDOW`] fire times after
    /// `after` (a day of minutes: every pattern of the minute and hour fields shows
    /// in it); `None` when it fires at most once.
    pub fn shortest_gap(&self, after: Timestamp) -> Option<chrono::Duration> {
        let times = self.upcoming(after, GAP_WINDOW);
        times.windows(2).map(|pair| pair[1] - pair[0]).min()
    }

    /// The next `count` fire times after `after`.
    pub fn upcoming(&self, after: Timestamp, count: usize) -> Vec<Timestamp> {
        let mut out = Vec::with_capacity(count);
        let mut cursor = after;
        while out.len() < count {
            match self.next_after(cursor) {
                Some(t) => {
                    out.push(t);
                    cursor = t;
                }
                None => break,
            }
        }
        out
    }
}

/// Only the POSIX syntax: digits, names, `*`, `,`, `-`, `/`.
fn check_field(field: &str, name: &str) -> Result<(), String> {
    let names_allowed = name == "month" || name == "day-of-week";
    for c in field.chars() {
        let ok = c.is_ascii_digit()
            || matches!(c, '*' | ',' | '-' | '/')
            || (names_allowed && c.is_ascii_alphabetic());
        if !ok {
            return Err(format!(
                "the {name} field '{field}' has '{c}', which is not standard cron syntax \
                 (numbers, names, '*', ',', '-', '/')"
            ));
        }
    }
    if field.split(',').any(str::is_empty) {
        return Err(format!("the {name} field '{field}' has an empty list item"));
    }
    Ok(())
}

/// Whether some month of the month field has some day of the day-of-month field.
/// A restricted day-of-week field makes any month fire (the classic either-day rule).
fn can_fire(dom: &str, month: &str, dow: &str) -> Result<bool, String> {
    if !dow.starts_with('*') {
        return Ok(true);
    }
    let days = values(dom, 1, 31, &[])?;
    let months = values(month, 1, 12, &MONTHS)?;
    Ok(months
        .iter()
        .any(|&m| days.iter().any(|&d| d <= MONTH_DAYS[(m - 1) as usize])))
}

/// The values a field selects (for the can-it-fire check only: croner has already
/// accepted the syntax).
fn values(field: &str, min: u32, max: u32, names: &[&str]) -> Result<Vec<u32>, String> {
    let number = |text: &str| -> Result<u32, String> {
        let upper = text.to_ascii_uppercase();
        if let Some(i) = names.iter().position(|n| *n == upper) {
            return Ok(i as u32 + min);
        }
        text.parse::<u32>()
            .map_err(|_| format!("'{text}' is not a number"))
    };
    let mut out = Vec::new();
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, number(s)?.max(1)),
            None => (item, 1),
        };
        let (lo, hi) = if range == "*" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (number(a)?, number(b)?)
        } else {
            let v = number(range)?;
            (v, if step > 1 { max } else { v })
        };
        out.extend((lo..=hi.min(max)).step_by(step as usize));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(s: &str) -> Timestamp {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn shortest_gap_finds_the_closest_two_firings() {
        let gap = |expr: &str| {
            Schedule::parse(expr, Some("Europe/Berlin"))
                .unwrap()
                .shortest_gap(utc("2026-03-28T12:00:00Z"))
                .map(|d| d.num_seconds())
        };
        assert_eq!(gap("* * * * *"), Some(60));
        assert_eq!(gap("*/5 * * * *"), Some(300));
        assert_eq!(gap("0,1 * * * *"), Some(60));
        assert_eq!(gap("0 9,17 * * *"), Some(8 * 3600));
        assert_eq!(gap("0 0 1 1 *"), Some(365 * 86_400));
    }

    fn next(expr: &str, zone: &str, after: &str, n: usize) -> Vec<String> {
        Schedule::parse(expr, Some(zone))
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
            .upcoming(utc(after), n)
            .iter()
            .map(crate::domain::time::format)
            .collect()
    }

    #[test]
    fn steps_ranges_lists() {
        assert_eq!(
            next("*/15 * * * *", "UTC", "2026-01-01T00:00:00Z", 3),
            [
                "2026-01-01T00:15:00.000Z",
                "2026-01-01T00:30:00.000Z",
                "2026-01-01T00:45:00.000Z"
            ]
        );
        assert_eq!(
            next("0 0 1-30/7 * *", "UTC", "2026-01-01T00:00:00Z", 4),
            [
                "2026-01-08T00:00:00.000Z",
                "2026-01-15T00:00:00.000Z",
                "2026-01-22T00:00:00.000Z",
                "2026-01-29T00:00:00.000Z"
            ]
        );
        assert_eq!(
            next("5,10 9 * * *", "UTC", "2026-01-01T09:06:00Z", 2),
            ["2026-01-01T09:10:00.000Z", "2026-01-02T09:05:00.000Z"]
        );
    }

    #[test]
    fn names_in_any_case_and_sunday_as_0_or_7() {
        // 2026-03-01 is a Sunday.
        let sunday = ["2026-03-01T12:00:00.000Z"];
        assert_eq!(next("0 12 * * 0", "UTC", "2026-02-27T00:00:00Z", 1), sunday);
        assert_eq!(next("0 12 * * 7", "UTC", "2026-02-27T00:00:00Z", 1), sunday);
        assert_eq!(
            next("0 12 * * sun", "UTC", "2026-02-27T00:00:00Z", 1),
            sunday
        );
        assert_eq!(
            next("0 12 * mar Sun", "UTC", "2026-01-01T00:00:00Z", 1),
            sunday
        );
        assert_eq!(
            next("0 0 1 JAN-mar *", "UTC", "2026-01-02T00:00:00Z", 2),
            ["2026-02-01T00:00:00.000Z", "2026-03-01T00:00:00.000Z"]
        );
        assert_eq!(
            next("0 9 * * MON-FRI", "UTC", "2026-02-27T10:00:00Z", 1),
            ["2026-03-02T09:00:00.000Z"]
        );
    }

    #[test]
    fn both_day_fields_restricted_means_either() {
        // The 13th, or any Friday: 2026-02-06 is a Friday, 2026-02-13 too.
        assert_eq!(
            next("0 0 13 * 5", "UTC", "2026-02-01T00:00:00Z", 3),
            [
                "2026-02-06T00:00:00.000Z",
                "2026-02-13T00:00:00.000Z",
                "2026-02-20T00:00:00.000Z"
            ]
        );
        // Only the day-of-month restricted: that day alone.
        assert_eq!(
            next("0 0 13 * *", "UTC", "2026-02-01T00:00:00Z", 1),
            ["2026-02-13T00:00:00.000Z"]
        );
    }

    #[test]
    fn never_firing_and_malformed_expressions_are_refused() {
        let err = |e: &str| Schedule::parse(e, None).unwrap_err();
        assert!(err("0 0 30 2 *").contains("never fire"));
        assert!(err("0 0 31 4,6,9,11 *").contains("never fire"));
        assert!(Schedule::parse("0 0 29 2 *", None).is_ok());
        assert!(Schedule::parse("0 0 30 2 1", None).is_ok());
        assert!(err("* * * *").contains("5"));
        assert!(err("0 * * * * *").contains("6 fields"));
        assert!(err("0 0 L * *").contains("not standard"));
        assert!(err("0 0 ? * *").contains("not standard"));
        assert!(err("0 0 * * 5#3").contains("not standard"));
        assert!(err("@daily").contains("fields"));
        assert!(err("60 * * * *").contains("not a valid"));
        assert!(err("* 24 * * *").contains("not a valid"));
        assert!(err("1,,2 * * * *").contains("empty"));
        assert!(err("* * * * *x").contains("not a valid"));
        assert!(
            Schedule::parse("* * * * *", Some("Mars/Base"))
                .unwrap_err()
                .contains("IANA")
        );
    }

    #[test]
    fn new_york_spring_forward_and_fall_back() {
        // 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist.
        assert_eq!(
            next("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", 3),
            [
                "2026-03-08T07:00:00.000Z", // 03:00 EDT: the first instant after the gap
                "2026-03-09T06:30:00.000Z",
                "2026-03-10T06:30:00.000Z"
            ]
        );
        // 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
        assert_eq!(
            next("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", 2),
            [
                "2026-11-01T05:30:00.000Z", // the first 01:30 (EDT) only
                "2026-11-02T06:30:00.000Z"
            ]
        );
        // Every 30 minutes: each real instant, both 01:00 and both 01:30.
        assert_eq!(
            next(
                "*/30 * * * *",
                "America/New_York",
                "2026-11-01T04:45:00Z",
                5
            ),
            [
                "2026-11-01T05:00:00.000Z",
                "2026-11-01T05:30:00.000Z",
                "2026-11-01T06:00:00.000Z",
                "2026-11-01T06:30:00.000Z",
                "2026-11-01T07:00:00.000Z"
            ]
        );
    }

    #[test]
    fn berlin_spring_forward_and_fall_back() {
        // 2026-03-29: 02:00 CET jumps to 03:00 CEST.
        assert_eq!(
            next("15 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", 2),
            ["2026-03-29T01:00:00.000Z", "2026-03-30T00:15:00.000Z"]
        );
        // 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:15 happens twice.
        assert_eq!(
            next("15 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", 2),
            ["2026-10-25T00:15:00.000Z", "2026-10-26T01:15:00.000Z"]
        );
        // Hourly at :15 fires at both 02:15s.
        assert_eq!(
            next("15 * * * *", "Europe/Berlin", "2026-10-24T23:30:00Z", 3),
            [
                "2026-10-25T00:15:00.000Z",
                "2026-10-25T01:15:00.000Z",
                "2026-10-25T02:15:00.000Z"
            ]
        );
        let zone = parse_zone(Some("Europe/Berlin")).unwrap();
        let local = zone.with_ymd_and_hms(2026, 10, 25, 2, 15, 0);
        assert!(matches!(local, chrono::LocalResult::Ambiguous(..)));
    }

    #[test]
    fn preview_counts() {
        let s = Schedule::parse("0 * * * *", None).unwrap();
        assert_eq!(s.upcoming(utc("2026-01-01T00:00:00Z"), 50).len(), 50);
    }
}
