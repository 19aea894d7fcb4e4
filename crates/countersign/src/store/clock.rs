//! One clock (issue #22): the time a store judges expiry and leases by, and the time it writes.
//!
//! Every writing [`crate::Store`] method takes the caller's `now` (the [`crate::Control`]'s
//! [`crate::Clock`]). What a store makes of it:
//!
//! - **PostgreSQL** judges by the *server's* clock: each writing transaction reads
//!   `clock_timestamp()` once, at its start (one per group-commit transaction), and every rule
//!   of the plan runs at that time. Hosts whose clocks disagree therefore reach one verdict on
//!   one store. The caller's `now` is only the origin of the instants the caller computed from
//!   it (an approval's `created_at` and `expires_at`, an effect's `lease_until`, an attempt's
//!   start): the store moves each of them by `store now − caller now` ([`rebase`]), so an
//!   approval expires its TTL after the *store* time it was opened at, a lease lasts its length
//!   in store time, and every timestamp written (records, receipts, outbox events) is in the
//!   store's one clock.
//! - **SQLite and memory** are reached from one host only, whose processes read one clock: the
//!   caller's `now` (the host clock under [`crate::SystemClock`]) is the store's time.
//!
//! Tests that move time shift the store's clock with [`crate::Store::shift_clock_for_tests`],
//! which every backend applies the same way (PostgreSQL adds it to the server's clock, SQLite
//! and memory to the caller's `now`), so one test runs on every backend.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::clock::Timestamp;
use crate::store::plan::Operation;

/// The two times a plan runs at.
///
/// `store` judges expiry and leases and dates everything written; `caller` is the caller's own
/// `now`, which judges only an approver token's `iat`, `nbf` and `exp` (SPEC 1.8): a token is
/// minted by the approval service's clock and verified by its verifier's, as before the store had
/// a clock of its own, so a service host ahead of the database is not refused its own tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Now {
    /// The store's time.
    pub(crate) store: Timestamp,
    /// The caller's time.
    pub(crate) caller: Timestamp,
}

impl Now {
    /// One time for both (a caller whose clock is the store's): the model test's.
    #[cfg(test)]
    pub(crate) fn at(time: Timestamp) -> Now {
        Now {
            store: time,
            caller: time,
        }
    }
}

/// A store's test-only clock offset, in milliseconds (0 unless a test shifted it).
#[derive(Debug, Default)]
pub(crate) struct TestOffset(AtomicI64);

impl TestOffset {
    /// The offset, in milliseconds.
    pub(crate) fn millis(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }

    /// Shift it by `millis` (negative: back).
    pub(crate) fn shift(&self, millis: i64) {
        self.0.fetch_add(millis, Ordering::SeqCst);
    }

    /// The caller's `now`, shifted: the time the SQLite and memory stores judge by.
    pub(crate) fn apply(&self, now: Timestamp) -> Timestamp {
        shift(now, self.millis())
    }
}

/// `time` moved by `millis` (saturating).
pub(crate) fn shift(time: Timestamp, millis: i64) -> Timestamp {
    Timestamp::from_millis(time.as_millis().saturating_add(millis))
}

/// `operation`, with every instant its caller computed from `caller` (its `now`) moved to the
/// same distance from `store`: an opened approval's `created_at`, `expires_at`, `answered_at`
/// and `consumed_at`, an effect claim's `lease_until`, an attempt context's `started_at`, and
/// every receipt draft's `attempt_started_at`. Durations (a TTL, a lease) are kept.
pub(crate) fn rebase(operation: &Operation, caller: Timestamp, store: Timestamp) -> Operation {
    let delta = store.as_millis().saturating_sub(caller.as_millis());
    let mut operation = operation.clone();
    let at = |time: &mut Timestamp| *time = shift(*time, delta);
    let draft = |draft: &mut crate::evidence::ReceiptDraft| {
        if let Some(started) = draft.attempt_started_at.as_mut() {
            at(started);
        }
    };
    let begin = |begin: &mut crate::store::BeginAttempt| {
        if let Some(effect) = begin.effect.as_mut() {
            at(&mut effect.lease_until);
        }
        if let Some(context) = begin.context.as_mut() {
            at(&mut context.started_at);
        }
        draft(&mut begin.refusal_draft);
    };
    match &mut operation {
        Operation::Open(new) => {
            let record = &mut new.record;
            at(&mut record.created_at);
            at(&mut record.expires_at);
            if let Some(time) = record.answered_at.as_mut() {
                at(time);
            }
            if let Some(time) = record.consumed_at.as_mut() {
                at(time);
            }
        }
        Operation::Begin(attempt) => begin(attempt),
        Operation::HandOff(hand_off) => {
            begin(&mut hand_off.begin);
            draft(&mut hand_off.draft);
        }
        Operation::Finish(finish) => draft(&mut finish.draft),
        Operation::Append(receipt) => draft(receipt),
        Operation::Answer(_)
        | Operation::Withdraw(_)
        | Operation::Expire(_)
        | Operation::Resolve(_) => {}
    }
    operation
}

/// A delivery's settlement with its retry time (computed by the sender from `caller`) moved
/// to the same distance from `store`.
pub(crate) fn settlement(
    settlement: crate::outbox::Settlement,
    caller: Timestamp,
    store: Timestamp,
) -> crate::outbox::Settlement {
    match settlement {
        crate::outbox::Settlement::Retry { at, error } => crate::outbox::Settlement::Retry {
            at: shift(at, store.as_millis().saturating_sub(caller.as_millis())),
            error,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::ReceiptDraft;

    #[test]
    fn rebase_moves_caller_instants_and_keeps_durations() {
        let caller = Timestamp::from_millis(1_000_000);
        let store = Timestamp::from_millis(400_000);
        let draft = ReceiptDraft {
            attempt_started_at: Some(Timestamp::from_millis(999_000)),
            ..ReceiptDraft::default()
        };
        let Operation::Append(moved) = rebase(&Operation::Append(draft), caller, store) else {
            panic!("rebase changed the operation's kind");
        };
        assert_eq!(
            moved.attempt_started_at,
            Some(Timestamp::from_millis(399_000))
        );
    }

    #[test]
    fn the_offset_adds_up_and_saturates() {
        let offset = TestOffset::default();
        offset.shift(60_000);
        offset.shift(-1_000);
        assert_eq!(offset.apply(Timestamp::from_millis(5)).as_millis(), 59_005);
        assert_eq!(
            shift(Timestamp::from_millis(i64::MAX), 1).as_millis(),
            i64::MAX
        );
    }
}
