//! Committing, and settling a commit whose connection was lost (issue #22, the lost COMMIT).

use std::time::Duration;

use sqlx::Row;

use super::{PgFailure, PgTxn, PostgresStore, classify};
use crate::error::StoreError;

impl PostgresStore {
    /// Commit `pg`'s transaction (one operation's, or a group's). A connection lost during
    /// `COMMIT` is settled by reading the status of the transaction whose id its writes returned
    /// (`txid_status`; [`PgTxn::txid`], read here only when none did) on another
    /// connection: committed, aborted ([`PgFailure::Retry`]), or, when that cannot be read,
    /// [`StoreError::OutcomeUnknown`] naming `operation`.
    pub(super) async fn commit_settled(
        &self,
        pg: PgTxn,
        operation: &'static str,
    ) -> Result<(), PgFailure> {
        let PgTxn {
            mut transaction,
            wrote,
            txid,
            ..
        } = pg;
        if !wrote {
            return transaction.commit().await.map_err(classify);
        }
        let txid: i64 = match txid {
            Some(txid) => txid,
            // Only events written (a write returns the id, `PgTxn::apply`).
            None => sqlx::query_scalar("SELECT txid_current()")
                .persistent(self.persistent())
                .fetch_one(&mut *transaction)
                .await
                .map_err(classify)?,
        };
        match transaction.commit().await {
            Ok(()) => Ok(()),
            Err(error @ sqlx::Error::Database(_)) => Err(classify(error)),
            Err(_) => match self.settle(txid).await {
                Some(true) => Ok(()),
                Some(false) => Err(PgFailure::Retry),
                None => Err(PgFailure::Store(StoreError::OutcomeUnknown { operation })),
            },
        }
    }

    /// Did transaction `txid` commit? `None` when the server cannot tell us.
    async fn settle(&self, txid: i64) -> Option<bool> {
        for _ in 0..50 {
            let rows = self
                .fetch_rows(sqlx::query("SELECT txid_status($1)").bind(txid))
                .await
                .ok()?;
            let status: Option<String> = rows.first()?.try_get(0).ok()?;
            match status.as_deref() {
                Some("committed") => return Some(true),
                Some("aborted") => return Some(false),
                Some("in progress") => tokio::time::sleep(Duration::from_millis(20)).await,
                _ => return None,
            }
        }
        None
    }
}
