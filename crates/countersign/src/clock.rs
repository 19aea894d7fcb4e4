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
