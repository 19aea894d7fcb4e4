//! The log of a PostgreSQL store: its receipts in [`LANES`] lanes, placed in one total order
//! after they commit (issue #21, SPEC 1.5, `docs/ARCHITECTURE.md` "Lanes").
//!
//! **Writing.** A transaction with receipts locks the lowest free lane's head row in
//! `lane_heads` (`sql.rs`, [`PgTxn::lock_lane`]) and chains its receipts in that lane, so
//! writers on several hosts do not all queue on one row lock. Each receipt row draws a
//! `ticket` from the sequence `receipt_tickets` as it is inserted, in the transaction's last
//! statement, after every read it made.
//!
//! **Placing.** [`PostgresStore::place`] gives every committed receipt not yet placed the next
//! positions in the log (`receipt_positions`, insert-only), in `ticket` order, under a
//! transaction advisory lock (one placer at a time per schema). Readers place before they read,
//! so [`Store::receipts`] returns every receipt committed before the call. Why the order holds:
//!
//! - *Each lane's receipts are placed in `seq` order.* A lane's next receipt is written by a
//!   transaction that locked the lane's head after the previous one committed, so it draws a
//!   higher ticket, and a snapshot that sees it sees the previous one too.
//! - *A receipt comes after every receipt its transaction saw.* If transaction B read what A
//!   wrote (B's reads wait on A's row locks, then see A's commit), A drew its tickets before it
//!   committed and B after, in its last statement; and any snapshot that sees B sees A. So A is
//!   placed before B, in the same placing (ticket order) or an earlier one.
//! - *A receipt placed later than one with a higher ticket* was not committed when that one was
//!   placed; neither saw the other, so either order is true to what happened.
//! - *A placer that crashes midway* leaves nothing: its positions commit in one transaction.
//!
//! Nothing here is trusted by verification: `verify` checks every lane's chain and that the
//! positions run from 1 without gaps ([`crate::evidence::Verifier`]). Reads join the positions
//! to the receipts with a left join, so a receipt deleted after it was placed is read as
//! [`StoredReceipt::missing`] at its place and named exactly, the newest one included.

use super::*;

/// How many lanes (head rows) a PostgreSQL store keeps: its schema's `lane_heads` holds lanes
/// 0 to 15. Sixteen is more than the commits one database flushes side by side on the machines
/// measured (docs/benchmarks.md, issue #21), and each costs one row.
pub(super) const LANES: u32 = 16;

/// The most receipts one placing transaction places; a larger backlog takes several.
const PLACE_BATCH: i64 = 10_000;

impl PostgresStore {
    /// Place every committed receipt not yet placed (see the module docs). Returns how many
    /// were placed.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`] when the store cannot be written (a read-only role, say): the
    /// message says that reading a log of several lanes needs `INSERT` on
    /// `receipt_positions`.
    pub(super) async fn place(&self) -> Result<u64, StoreError> {
        let mut placed = 0;
        loop {
            let batch = self
                .place_batch()
                .await
                .map_err(|error| StoreError::Backend {
                    message: format!(
                        "cannot place the receipts committed since the log was last read: {error} (reading the log of a PostgreSQL store places them first, which needs a writable primary and INSERT on `receipt_positions`)"
                    ),
                })?;
            placed += batch;
            if batch < u64::try_from(PLACE_BATCH).unwrap_or(u64::MAX) {
                return Ok(placed);
            }
        }
    }

    /// One placing transaction: at most [`PLACE_BATCH`] receipts.
    async fn place_batch(&self) -> Result<u64, sqlx::Error> {
        let mut transaction = self.begin_transaction().await?;
        let persistent = self.persistent();
        // Whatever the store's isolation: each statement must see what the placer before this
        // one committed while this one waited for the lock (at REPEATABLE READ or SERIALIZABLE
        // the snapshot would be taken before the wait).
        sqlx::raw_sql("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            .execute(&mut *transaction)
            .await?;
        sqlx::query(
            "SELECT pg_advisory_xact_lock(hashtextextended('countersign:place:' || current_schema(), 0))",
        )
        .persistent(persistent)
        .execute(&mut *transaction)
        .await?;
        // Each lane's last placed `seq` (an index lookup per lane), and the log's size.
        let placed = sqlx::query(
            "SELECT h.lane, COALESCE((SELECT max(p.seq) FROM receipt_positions p WHERE p.lane = h.lane), 0), (SELECT COALESCE(max(position), 0) FROM receipt_positions) FROM lane_heads h ORDER BY h.lane",
        )
        .persistent(persistent)
        .fetch_all(&mut *transaction)
        .await?;
        let size: i64 = match placed.first() {
            Some(row) => row.try_get(2)?,
            None => 0,
        };
        let lanes: Vec<i32> = placed
            .iter()
            .map(|row| row.try_get(0))
            .collect::<Result<_, _>>()?;
        let after: Vec<i64> = placed
            .iter()
            .map(|row| row.try_get(1))
            .collect::<Result<_, _>>()?;
        let fresh = sqlx::query(
            "SELECT r.lane, r.seq FROM receipts r JOIN UNNEST($1::integer[], $2::bigint[]) AS c(lane, placed) ON r.lane = c.lane AND r.seq > c.placed ORDER BY r.ticket NULLS FIRST, r.lane, r.seq LIMIT $3",
        )
        .bind(&lanes)
        .bind(&after)
        .bind(PLACE_BATCH)
        .persistent(persistent)
        .fetch_all(&mut *transaction)
        .await?;
        if fresh.is_empty() {
            transaction.rollback().await?;
            return Ok(0);
        }
        let fresh_lanes: Vec<i32> = fresh
            .iter()
            .map(|row| row.try_get(0))
            .collect::<Result<_, _>>()?;
        let fresh_seqs: Vec<i64> = fresh
            .iter()
            .map(|row| row.try_get(1))
            .collect::<Result<_, _>>()?;
        sqlx::query(
            "INSERT INTO receipt_positions (position, lane, seq) SELECT $1 + u.n, u.lane, u.seq FROM UNNEST($2::integer[], $3::bigint[]) WITH ORDINALITY AS u(lane, seq, n)",
        )
        .bind(size)
        .bind(&fresh_lanes)
        .bind(&fresh_seqs)
        .persistent(persistent)
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        Ok(u64::try_from(fresh.len()).unwrap_or(u64::MAX))
    }

    /// [`Store::receipts`]: place, then read by position. A place whose receipt row is gone
    /// (deleted after it was placed) is read as a [`StoredReceipt::missing`] receipt, so
    /// `verify` names exactly that receipt, even at the tail of the log.
    pub(super) async fn placed_receipts(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredReceipt>, StoreError> {
        self.place().await?;
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .read_rows(
                sqlx::query(
                    "SELECT p.position, p.lane, p.seq, r.prev_hash, r.hash, r.body, r.seq IS NULL FROM receipt_positions p LEFT JOIN receipts r ON r.lane = p.lane AND r.seq = p.seq WHERE p.position > $1 ORDER BY p.position LIMIT $2",
                )
                .bind(after)
                .bind(limit),
            )
            .await?;
        rows.iter().map(receipt_from_row).collect()
    }

    /// [`Store::chain_head`]: place, then the receipt at the highest position (its hash empty
    /// when its row is gone).
    pub(super) async fn placed_head(&self) -> Result<Option<ChainHead>, StoreError> {
        self.place().await?;
        let rows = self
            .read_rows(sqlx::query(
                "SELECT p.position, r.hash FROM receipt_positions p LEFT JOIN receipts r ON r.lane = p.lane AND r.seq = p.seq ORDER BY p.position DESC LIMIT 1",
            ))
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let position: i64 = row.try_get(0).map_err(decode)?;
        Ok(Some(ChainHead {
            seq: u64::try_from(position).map_err(|_| corrupt("negative position".to_owned()))?,
            hash: ReceiptHash::from_stored(
                row.try_get::<Option<String>, _>(1)
                    .map_err(decode)?
                    .unwrap_or_default(),
            ),
        }))
    }

    /// [`Store::stray_receipt`]: the first row of `receipts` outside lanes 0 to [`LANES`] − 1
    /// with no row in `receipt_positions`, and how many there are. Both ends of the primary
    /// key `(lane, seq)`, so an index range, whatever the log's length.
    pub(super) async fn stray(&self) -> Result<Option<crate::store::StrayReceipt>, StoreError> {
        let lanes = i32::try_from(LANES).map_err(|_| corrupt(format!("{LANES} lanes")))?;
        let rows = self
            .read_rows(
                sqlx::query(
                    "SELECT r.lane::bigint, r.seq, count(*) OVER () FROM receipts r WHERE (r.lane < 0 OR r.lane >= $1) AND NOT EXISTS (SELECT 1 FROM receipt_positions p WHERE p.lane = r.lane AND p.seq = r.seq) ORDER BY r.lane, r.seq LIMIT 1",
                )
                .bind(lanes),
            )
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let lane: i64 = row.try_get(0).map_err(decode)?;
        let seq: i64 = row.try_get(1).map_err(decode)?;
        let count: i64 = row.try_get(2).map_err(decode)?;
        Ok(Some(crate::store::StrayReceipt {
            lane,
            seq,
            count: u64::try_from(count).unwrap_or(0),
        }))
    }

    /// [`Store::anchor`]: every lane's head as `lane_heads` records it (lane 0's in `seq` and
    /// `hash`, [`GENESIS_HASH`](crate::evidence::GENESIS_HASH) when it is empty and another is
    /// not); `None` when no lane holds a receipt.
    pub(super) async fn lanes_anchor(&self) -> Result<Option<crate::evidence::Anchor>, StoreError> {
        let rows = self
            .read_rows(sqlx::query(
                "SELECT lane, seq, hash FROM lane_heads WHERE seq > 0 ORDER BY lane",
            ))
            .await?;
        let mut anchor = crate::evidence::Anchor {
            seq: 0,
            hash: crate::evidence::GENESIS_HASH.to_owned(),
            lanes: Vec::new(),
        };
        for row in &rows {
            let lane: i32 = row.try_get(0).map_err(decode)?;
            let seq: i64 = row.try_get(1).map_err(decode)?;
            let hash: String = row.try_get(2).map_err(decode)?;
            let lane = u32::try_from(lane).map_err(|_| corrupt(format!("lane {lane}")))?;
            let seq = u64::try_from(seq).map_err(|_| corrupt("negative seq".to_owned()))?;
            if lane == 0 {
                anchor.seq = seq;
                anchor.hash = hash;
            } else {
                anchor.lanes.push(crate::evidence::LaneHead {
                    lane,
                    seq,
                    hash: ReceiptHash::from_stored(hash),
                });
            }
        }
        Ok((!rows.is_empty()).then_some(anchor))
    }
}
