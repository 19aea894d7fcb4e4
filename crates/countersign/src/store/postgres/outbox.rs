//! The outbox (issue #17) in PostgreSQL: the `outbox` and `deliveries` tables of schema
//! version 4. A claim is one transaction: the fan-out inserts rows with `ON CONFLICT DO
//! NOTHING` (two replicas may fan out at once), the due rows are chosen with `FOR UPDATE OF d
//! SKIP LOCKED` and leased with a compare-and-set on the lease, so two `countersign serve`
//! replicas on one database never hold one delivery at once.

use super::*;

use std::future::Future;

use crate::outbox::{
    ClaimedDelivery, Delivery, DeliveryState, EventKind, OutboxEvent, Settlement, StoredEvent,
};
use crate::store::DeliveryClaim;

use super::clock::server_now;

/// The columns [`delivery_from_row`] reads, from `deliveries d JOIN outbox o`.
macro_rules! delivery_columns {
    () => {
        "d.id, o.id, o.kind, d.request_id, d.endpoint, d.state, d.attempts, d.next_at, d.window_start, d.last_error, d.delivered_at, o.created_at, d.reference"
    };
}

fn delivery_from_row(row: &PgRow) -> Result<Delivery, StoreError> {
    let kind: String = row.try_get(2).map_err(decode)?;
    let state: String = row.try_get(5).map_err(decode)?;
    let millis = |index: usize| -> Result<Timestamp, StoreError> {
        Ok(Timestamp::from_millis(row.try_get(index).map_err(decode)?))
    };
    Ok(Delivery {
        id: u64::try_from(row.try_get::<i64, _>(0).map_err(decode)?)
            .map_err(|_| corrupt("negative delivery id".to_owned()))?,
        event_id: row.try_get(1).map_err(decode)?,
        kind: EventKind::parse(&kind).ok_or_else(|| corrupt(format!("event kind `{kind}`")))?,
        request_id: crate::outbox::read_request_id(row.try_get(3).map_err(decode)?),
        endpoint: row.try_get(4).map_err(decode)?,
        state: DeliveryState::parse(&state)
            .ok_or_else(|| corrupt(format!("delivery state `{state}`")))?,
        attempts: u32::try_from(row.try_get::<i32, _>(6).map_err(decode)?).unwrap_or(0),
        next_attempt_at: millis(7)?,
        window_start: millis(8)?,
        last_error: row.try_get(9).map_err(decode)?,
        delivered_at: row
            .try_get::<Option<i64>, _>(10)
            .map_err(decode)?
            .map(Timestamp::from_millis),
        event_at: millis(11)?,
        reference: row.try_get(12).map_err(decode)?,
    })
}

fn event_from_row(row: &PgRow) -> Result<StoredEvent, StoreError> {
    let kind: String = row.try_get(2).map_err(decode)?;
    Ok(StoredEvent {
        seq: u64::try_from(row.try_get::<i64, _>(0).map_err(decode)?)
            .map_err(|_| corrupt("negative event seq".to_owned()))?,
        event: OutboxEvent {
            id: row.try_get(1).map_err(decode)?,
            kind: EventKind::parse(&kind).ok_or_else(|| corrupt(format!("event kind `{kind}`")))?,
            request_id: crate::outbox::read_request_id(row.try_get(3).map_err(decode)?),
            created_at: Timestamp::from_millis(row.try_get(4).map_err(decode)?),
            body: row.try_get(5).map_err(decode)?,
        },
    })
}

impl PgTxn {
    /// Append one event to the outbox, in the change's own transaction.
    pub(crate) async fn insert_event(&mut self, event: &OutboxEvent) -> Result<(), PgFailure> {
        self.wrote = true;
        sqlx::query(
            "INSERT INTO outbox (id, kind, request_id, created_at, body) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&event.id)
        .bind(event.kind.as_str())
        .bind(crate::outbox::stored_request_id(event.request_id.as_ref()))
        .bind(event.created_at.as_millis())
        .bind(&event.body)
        .persistent(self.persistent).execute(&mut *self.transaction)
        .await
        .map_err(classify)?;
        Ok(())
    }
}

impl PostgresStore {
    /// Run `attempt` again while it conflicts (serialization failure, deadlock), within the
    /// retry budget.
    async fn outbox_retrying<R, F, Fut>(&self, mut attempt: F) -> Result<R, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<R, sqlx::Error>>,
    {
        let started = Instant::now();
        let mut delay = Duration::from_millis(2);
        loop {
            match attempt().await {
                Ok(done) => return Ok(done),
                Err(error)
                    if is_conflict(&error) && started.elapsed() < self.options.retry_budget =>
                {
                    tokio::time::sleep(crate::store::jitter(delay)).await;
                    delay = (delay * 2).min(Duration::from_millis(200));
                }
                Err(error) => return Err(backend(&error)),
            }
        }
    }

    async fn outbox_begin(&self) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        self.begin_transaction().await
    }

    /// The time a claim judges by, read inside its transaction `tx` (the caller's `now` in
    /// this crate's model test only).
    async fn claim_now(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        now: Timestamp,
    ) -> Result<Timestamp, sqlx::Error> {
        #[cfg(test)]
        if self.caller_clock.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(self.offset.apply(now));
        }
        let _ = now;
        let millis: i64 = sqlx::query_scalar(super::clock::SERVER_NOW)
            .bind(self.offset.millis())
            .persistent(self.persistent())
            .fetch_one(&mut **tx)
            .await?;
        Ok(Timestamp::from_millis(millis))
    }

    /// [`crate::Store::events`].
    pub(super) async fn outbox_events(
        &self,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let rows = self
            .read_rows(
                sqlx::query(
                    "SELECT seq, id, kind, request_id, created_at, body FROM outbox WHERE seq > $1 ORDER BY seq LIMIT $2",
                )
                .bind(i64::try_from(after_seq).unwrap_or(i64::MAX))
                .bind(i64::try_from(limit).unwrap_or(i64::MAX)),
            )
            .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// [`crate::Store::append_event`]: one statement, committed on its own.
    pub(super) async fn outbox_append(&self, event: &OutboxEvent) -> Result<(), StoreError> {
        self.outbox_retrying(|| {
            self.execute_one(
                sqlx::query(
                    "INSERT INTO outbox (id, kind, request_id, created_at, body) VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(&event.id)
                .bind(event.kind.as_str())
                .bind(crate::outbox::stored_request_id(event.request_id.as_ref()))
                .bind(event.created_at.as_millis())
                .bind(&event.body),
            )
        })
        .await
        .map(drop)
    }

    /// [`crate::Store::last_event`] (the index `outbox_by_kind`, schema version 5).
    pub(super) async fn outbox_last_event(
        &self,
        kind: EventKind,
    ) -> Result<Option<StoredEvent>, StoreError> {
        let rows = self
            .read_rows(
                sqlx::query(
                    "SELECT seq, id, kind, request_id, created_at, body FROM outbox WHERE kind = $1 ORDER BY seq DESC LIMIT 1",
                )
                .bind(kind.as_str()),
            )
            .await?;
        rows.first().map(event_from_row).transpose()
    }

    /// [`crate::Store::claim_deliveries`].
    pub(super) async fn outbox_claim(
        &self,
        claim: &DeliveryClaim,
        now: Timestamp,
    ) -> Result<Vec<ClaimedDelivery>, StoreError> {
        let rows = self.outbox_retrying(|| self.try_claim(claim, now)).await?;
        let lease_until = now.plus(claim.lease);
        rows.iter()
            .map(|row| {
                Ok(ClaimedDelivery {
                    delivery: delivery_from_row(row)?,
                    body: row.try_get(13).map_err(decode)?,
                    lease_until,
                })
            })
            .collect()
    }

    async fn try_claim(
        &self,
        claim: &DeliveryClaim,
        now: Timestamp,
    ) -> Result<Vec<PgRow>, sqlx::Error> {
        let mut tx = self.outbox_begin().await?;
        // One clock (issue #22): due times and leases are the server's.
        let now = self.claim_now(&mut tx, now).await?;
        for endpoint in &claim.endpoints {
            sqlx::query(
                "INSERT INTO deliveries (event_seq, endpoint, request_id, state, attempts, next_at, window_start)
                 SELECT seq, $1, request_id, 'pending', 0, created_at, created_at FROM outbox
                 WHERE created_at >= $2
                   AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = outbox.seq AND d.endpoint = $1)
                 ORDER BY seq
                 ON CONFLICT (event_seq, endpoint) DO NOTHING",
            )
            .bind(endpoint)
            .bind(claim.since.as_millis())
            .persistent(self.persistent()).execute(&mut *tx)
            .await?;
        }
        // INVARIANT (request-order): an earlier event of the same request still pending for
        // this endpoint holds the later ones back. INVARIANT (one-sender): rows another
        // replica is claiming are skipped, and the lease is a compare-and-set.
        let due: Vec<i64> = sqlx::query_scalar(
            "SELECT d.id FROM deliveries d
             WHERE d.endpoint = ANY($1) AND d.state = 'pending' AND d.next_at <= $2
               AND (d.lease_until IS NULL OR d.lease_until <= $2)
               AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.endpoint = d.endpoint
                   AND e.request_id = d.request_id AND e.event_seq < d.event_seq AND e.state = 'pending')
             ORDER BY d.event_seq, d.id LIMIT $3
             FOR UPDATE OF d SKIP LOCKED",
        )
        .bind(&claim.endpoints)
        .bind(now.as_millis())
        .bind(i64::try_from(claim.limit).unwrap_or(i64::MAX))
        .persistent(self.persistent()).fetch_all(&mut *tx)
        .await?;
        let lease_until = now.plus(claim.lease).as_millis();
        let mut claimed = Vec::with_capacity(due.len());
        for id in due {
            let leased = sqlx::query(
                "UPDATE deliveries SET lease_owner = $2, lease_until = $3
                 WHERE id = $1 AND state = 'pending' AND (lease_until IS NULL OR lease_until <= $4)",
            )
            .bind(id)
            .bind(&claim.owner)
            .bind(lease_until)
            .bind(now.as_millis())
            .persistent(self.persistent()).execute(&mut *tx)
            .await?;
            if leased.rows_affected() != 1 {
                continue;
            }
            let row = sqlx::query(concat!(
                "SELECT ",
                delivery_columns!(),
                ", o.body FROM deliveries d JOIN outbox o ON o.seq = d.event_seq WHERE d.id = $1"
            ))
            .bind(id)
            .persistent(self.persistent())
            .fetch_one(&mut *tx)
            .await?;
            claimed.push(row);
        }
        tx.commit().await?;
        Ok(claimed)
    }

    /// [`crate::Store::settle_delivery`]: a compare-and-set on the lease's owner.
    pub(super) async fn outbox_settle(
        &self,
        id: u64,
        owner: &str,
        settlement: &Settlement,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let (state, next_at, error, delivered, reference) = match settlement {
            Settlement::Delivered { reference } => (
                DeliveryState::Delivered,
                None,
                None,
                true,
                reference.clone(),
            ),
            Settlement::Retry { at, error } => (
                DeliveryState::Pending,
                Some(at.as_millis()),
                Some(error.clone()),
                false,
                None,
            ),
            Settlement::Failed { error } => (
                DeliveryState::Failed,
                None,
                Some(error.clone()),
                false,
                None,
            ),
        };
        let id = i64::try_from(id).unwrap_or(i64::MAX);
        self.outbox_retrying(|| {
            self.execute_one(
                sqlx::query(
                    // One clock (issue #22): the retry time the sender computed from its `now`
                    // ($8) moves to the same distance from the server's; delivered at the server's.
                    concat!(
                        "UPDATE deliveries SET state = $3, attempts = attempts + 1,
                     next_at = COALESCE($4 - $8 + ",
                        server_now!("$9"),
                        ", next_at),
                     last_error = $5,
                     delivered_at = CASE WHEN $6 THEN ",
                        server_now!("$9"),
                        " END, reference = $7,
                     lease_owner = NULL, lease_until = NULL
                 WHERE id = $1 AND state = 'pending' AND lease_owner = $2"
                    ),
                )
                .bind(id)
                .bind(owner)
                .bind(state.as_str())
                .bind(next_at)
                .bind(error.clone())
                .bind(delivered)
                .bind(reference.clone())
                .bind(now.as_millis())
                .bind(self.offset.millis()),
            )
        })
        .await
        .map(|done| done.rows_affected() == 1)
    }

    /// [`crate::Store::deliveries`], newest first.
    pub(super) async fn outbox_deliveries(
        &self,
        state: Option<DeliveryState>,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let rows = self
            .read_rows(
                sqlx::query(concat!(
                    "SELECT ",
                    delivery_columns!(),
                    " FROM deliveries d JOIN outbox o ON o.seq = d.event_seq WHERE ($1::text IS NULL OR d.state = $1) ORDER BY d.id DESC LIMIT $2"
                ))
                .bind(state.map(DeliveryState::as_str))
                .bind(i64::try_from(limit).unwrap_or(i64::MAX)),
            )
            .await?;
        rows.iter().map(delivery_from_row).collect()
    }

    /// [`crate::Store::delivery_reference`].
    pub(super) async fn outbox_reference(
        &self,
        request_id: &ApprovalId,
        endpoint: &str,
    ) -> Result<Option<String>, StoreError> {
        let rows = self
            .read_rows(
                sqlx::query(
                    "SELECT reference FROM deliveries WHERE request_id = $1 AND endpoint = $2 AND reference IS NOT NULL ORDER BY event_seq LIMIT 1",
                )
                .bind(request_id.as_str().to_owned())
                .bind(endpoint.to_owned()),
            )
            .await?;
        rows.first()
            .map(|row| row.try_get(0).map_err(decode))
            .transpose()
    }

    /// [`crate::Store::redeliver`], due at once by the server's clock (the caller's `now` is
    /// not needed).
    pub(super) async fn outbox_redeliver(&self, id: u64) -> Result<Option<Delivery>, StoreError> {
        let id = i64::try_from(id).unwrap_or(i64::MAX);
        self.outbox_retrying(|| {
            self.execute_one(
                sqlx::query(
                    // Due now by the server's clock (issue #22).
                    concat!(
                        "UPDATE deliveries SET state = 'pending', next_at = ",
                        server_now!("$2"),
                        ", window_start = ",
                        server_now!("$2"),
                        ", lease_owner = NULL, lease_until = NULL WHERE id = $1"
                    ),
                )
                .bind(id)
                .bind(self.offset.millis()),
            )
        })
        .await?;
        let rows = self
            .read_rows(
                sqlx::query(concat!(
                    "SELECT ",
                    delivery_columns!(),
                    " FROM deliveries d JOIN outbox o ON o.seq = d.event_seq WHERE d.id = $1"
                ))
                .bind(id),
            )
            .await?;
        rows.first().map(delivery_from_row).transpose()
    }

    /// [`crate::Store::prune_outbox`].
    pub(super) async fn outbox_prune(&self, before: Timestamp) -> Result<u64, StoreError> {
        self.outbox_retrying(|| async {
            let mut tx = self.outbox_begin().await?;
            sqlx::query(
                "DELETE FROM deliveries WHERE event_seq IN (SELECT seq FROM outbox WHERE created_at < $1
                     AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = outbox.seq AND d.state <> 'delivered'))",
            )
            .bind(before.as_millis())
            .persistent(self.persistent()).execute(&mut *tx)
            .await?;
            let gone = sqlx::query(
                "DELETE FROM outbox WHERE created_at < $1 AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = outbox.seq)",
            )
            .bind(before.as_millis())
            .persistent(self.persistent()).execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(gone.rows_affected())
        })
        .await
    }
}
