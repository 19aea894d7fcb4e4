//! Time: the [`Timestamp`] every record carries and the [`Clock`] the [`crate::Control`] reads.
//!
//! All expiry decisions compare against one clock, with no implicit skew allowance (case B32):
//! an approval whose `expires_at` is at or before `now` is expired.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// A point in time: milliseconds since the Unix epoch, UTC.
///
/// Displayed and serialized as RFC 3339 with millisecond precision (`2026-11-30T10:46:23.000Z`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The timestamp `millis` milliseconds after the Unix epoch.
    pub const fn from_millis(millis: i64) -> Timestamp {
        Timestamp(millis)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// This timestamp plus `duration` (saturating).
    pub fn plus(self, duration: Duration) -> Timestamp {
        let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(millis))
    }

    /// RFC 3339, UTC, millisecond precision.
    pub fn to_rfc3339(self) -> String {
        match chrono::DateTime::from_timestamp_millis(self.0) {
            Some(time) => time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            // Out of chrono's range (about ±262,000 years): show the raw number rather than fail.
            None => format!("@{}ms", self.0),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        chrono::DateTime::parse_from_rfc3339(&text)
            .map(|time| Timestamp(time.timestamp_millis()))
            .map_err(|error| serde::de::Error::custom(format!("bad timestamp `{text}`: {error}")))
    }
}

/// The source of "now" for a [`crate::Control`].
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The host's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A clock that only moves when told to: for tests, the conformance kit and demos.
///
/// Clones share one time.
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: Timestamp) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(start.0)))
    }

    /// Move the clock forward by `duration`.
    pub fn advance(&self, duration: Duration) {
        let millis = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(millis, Ordering::SeqCst);
    }

    /// Set the clock to `time` (which may be earlier: a clock jumping back).
    pub fn set(&self, time: Timestamp) {
        self.0.store(time.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339_with_millis() {
        assert_eq!(
            Timestamp::from_millis(0).to_rfc3339(),
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(
            Timestamp::from_millis(1_764_499_583_123).to_string(),
            "2025-11-30T10:46:23.123Z"
        );
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(Timestamp::from_millis(1_000));
        assert_eq!(clock.now(), Timestamp::from_millis(1_000));
        clock.advance(Duration::from_secs(2));
        assert_eq!(clock.now(), Timestamp::from_millis(3_000));
        clock.set(Timestamp::from_millis(500));
        assert_eq!(clock.now(), Timestamp::from_millis(500));
    }

    #[test]
    fn timestamp_round_trips_through_serde() {
        let time = Timestamp::from_millis(1_764_499_583_123);
        let text = serde_json::to_string(&time).unwrap();
        assert_eq!(serde_json::from_str::<Timestamp>(&text).unwrap(), time);
    }
}

/// The duration units Countersign reads, wherever a duration is written (a policy's
/// `approval_ttl`, a command's `--ttl` or `--call-timeout`): milliseconds, seconds, minutes,
/// hours, days and weeks, abbreviated or spelled out. humantime, which parses them, also reads
/// `M` as months and `y` as years; those are refused, since `10M` is easily meant as minutes.
pub const DURATION_UNITS: &[&str] = &[
    "ms", "msec", "s", "sec", "secs", "second", "seconds", "m", "min", "mins", "minute", "minutes",
    "h", "hr", "hrs", "hour", "hours", "d", "day", "days", "w", "week", "weeks",
];

/// What is wrong with the units of a duration ([`check_duration_units`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationUnitProblem {
    /// A number is followed by a unit not in [`DURATION_UNITS`] (the unit, as written).
    Unknown(String),
    /// A number has no unit at all (`30`).
    Missing,
}

/// Check that every number in the duration `text` (humantime's syntax: numbers, each with a
/// unit, optionally separated by spaces; a number may have a fraction, `1.5h`) is followed by
/// one of [`DURATION_UNITS`]. Text that is not numbers and units at all is left for the parser
/// to refuse.
///
/// # Errors
///
/// The first [`DurationUnitProblem`] met.
pub fn check_duration_units(text: &str) -> Result<(), DurationUnitProblem> {
    let mut rest = text.trim();
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_end == 0 {
            return Ok(());
        }
        let after = rest[number_end..].trim_start();
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c.is_whitespace())
            .unwrap_or(after.len());
        let unit = &after[..unit_end];
        if unit.is_empty() {
            return Err(DurationUnitProblem::Missing);
        }
        if !DURATION_UNITS.contains(&unit) {
            return Err(DurationUnitProblem::Unknown(unit.to_owned()));
        }
        rest = after[unit_end..].trim_start();
    }
    Ok(())
}

#[cfg(test)]
mod duration_tests {
    use super::*;

    #[test]
    fn only_the_listed_units_are_read() {
        for fine in ["15m", "1h 30m", "1h30m", "1.5h", "200ms", "2 days", "1w"] {
            assert_eq!(check_duration_units(fine), Ok(()), "{fine}");
        }
        for (text, unit) in [
            ("1M", "M"),
            ("1y", "y"),
            ("5us", "us"),
            ("2months", "months"),
        ] {
            assert_eq!(
                check_duration_units(text),
                Err(DurationUnitProblem::Unknown(unit.to_owned())),
                "{text}"
            );
        }
        assert_eq!(
            check_duration_units("30"),
            Err(DurationUnitProblem::Missing)
        );
        assert_eq!(check_duration_units("soon"), Ok(()), "left for the parser");
    }
}
