//! The store's clock on PostgreSQL (issue #22, "one clock"; see `store/clock.rs`): the
//! server's, read once at the start of each writing transaction (one read per group-commit
//! transaction), so that hosts whose clocks disagree judge expiry and leases alike.
//!
//! The read is one unnamed-or-named statement like any other (`.persistent(...)`), inside the
//! transaction: it needs no session state and runs unchanged behind a transaction pooler.

use super::*;

/// The server's clock in Unix milliseconds plus a test offset (`$1`, 0 outside tests).
/// `clock_timestamp()` is the time the statement runs (`now()` would be the transaction's start,
/// which is the same instant here: this is a transaction's first statement).
pub(super) const SERVER_NOW: &str =
    "SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint + $1";

/// [`SERVER_NOW`] as an expression inside another statement, its offset bound as the
/// parameter this macro is given (`server_now!("$9")`).
macro_rules! server_now {
    ($offset:literal) => {
        concat!(
            "((extract(epoch from clock_timestamp()) * 1000)::bigint + ",
            $offset,
            "::bigint)"
        )
    };
}
pub(super) use server_now;

impl PgTxn {
    /// The server's clock, plus `offset` milliseconds, read inside this transaction.
    pub(super) async fn server_now(&mut self, offset: i64) -> Result<Timestamp, PgFailure> {
        let millis: i64 = sqlx::query_scalar(SERVER_NOW)
            .bind(offset)
            .persistent(self.persistent)
            .fetch_one(&mut *self.transaction)
            .await
            .map_err(classify)?;
        Ok(Timestamp::from_millis(millis))
    }
}

impl PostgresStore {
    /// The store's time for the transaction `pg` (read inside it), or `None` in the crate's own
    /// tests that judge by the caller's clock ([`PostgresStore::judge_by_caller_clock`]).
    pub(super) async fn transaction_now(
        &self,
        pg: &mut PgTxn,
    ) -> Result<Option<Timestamp>, PgFailure> {
        #[cfg(test)]
        if self.caller_clock.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(None);
        }
        pg.server_now(self.offset.millis()).await.map(Some)
    }

    /// The times one operation whose caller passed `caller` is planned at in a transaction
    /// whose store time is `store`, and the operation with its caller's instants moved there.
    pub(super) fn judged(
        &self,
        operation: &Operation,
        caller: Timestamp,
        store: Option<Timestamp>,
    ) -> (Operation, plan::Now) {
        let judged = store.unwrap_or_else(|| self.offset.apply(caller));
        (
            crate::store::clock::rebase(operation, caller, judged),
            plan::Now {
                store: judged,
                caller,
            },
        )
    }

    /// [`crate::Store::store_now`]: the server's clock plus the test offset.
    pub(super) async fn read_store_now(&self, caller: Timestamp) -> Result<Timestamp, StoreError> {
        #[cfg(test)]
        if self.caller_clock.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(self.offset.apply(caller));
        }
        let _ = caller;
        let rows = self
            .fetch_rows(sqlx::query(SERVER_NOW).bind(self.offset.millis()))
            .await
            .map_err(|error| backend(&error))?;
        let millis: i64 = rows
            .first()
            .ok_or_else(|| corrupt("the server returned no time".to_owned()))?
            .try_get(0)
            .map_err(decode)?;
        Ok(Timestamp::from_millis(millis))
    }

    /// Judge by each caller's `now` (plus the offset) instead of the server's clock: only for
    /// this crate's own tests that compare the store with a model at exact caller times
    /// (`store/plan/model.rs`). Compiled into test builds of this crate only: no URL, option or
    /// other crate reaches it.
    #[cfg(test)]
    pub(crate) fn judge_by_caller_clock(&self) {
        self.caller_clock
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}
