//! [`PgTxn`]: one open PostgreSQL transaction, the reads a plan asks for (locked) and the
//! compare-and-set writes it decided (`store::plan`), as SQL.

use super::*;

/// Why [`PgTxn::run`] gave no plan to seal, and what it left in the transaction.
pub(crate) struct RunFailure {
    pub(crate) failure: PgFailure,
    /// Did the operation leave something behind that only a rollback clears: a row it wrote,
    /// or a statement that failed (after which PostgreSQL refuses every statement until the
    /// transaction, or the savepoint, is rolled back)? `false` when the plan refused after
    /// its reads alone, which leaves nothing but row locks.
    pub(crate) dirty: bool,
}

impl RunFailure {
    fn dirty(failure: PgFailure) -> RunFailure {
        RunFailure {
            failure,
            dirty: true,
        }
    }
}

impl From<RunFailure> for PgFailure {
    fn from(failed: RunFailure) -> PgFailure {
        failed.failure
    }
}

/// One open PostgreSQL transaction running plans.
///
/// Every row a plan reads is locked (`FOR UPDATE`); every write is a compare-and-set on the
/// prior state the plan expects, whose row count is checked: a count other than 1 means another
/// transaction got there first, and the whole transaction is rolled back and planned again
/// ([`PgFailure::Retry`]).
pub(crate) struct PgTxn {
    pub(super) transaction: Transaction<'static, Postgres>,
    /// May statements be named and cached ([`PostgresStore::persistent`])?
    pub(super) persistent: bool,
    /// Approval id → its raw `answers` column as read (or as this transaction wrote it): the
    /// compare-and-set of an update checks it with the expected state, so a row written by an
    /// older build (NULL `answers`) compares as stored.
    pub(super) read_answers: HashMap<String, Option<String>>,
    /// Has this transaction written anything?
    pub(super) wrote: bool,
    /// The transaction's id, as the last write returned it (`None` until one did).
    pub(super) txid: Option<i64>,
}

impl PgTxn {
    /// A transaction just begun, that has read and written nothing.
    pub(super) fn new(transaction: Transaction<'static, Postgres>, persistent: bool) -> PgTxn {
        PgTxn {
            transaction,
            persistent,
            read_answers: HashMap::new(),
            wrote: false,
            txid: None,
        }
    }

    /// Plan `operation` inside this transaction and apply its row writes and events. Its
    /// receipts are sealed and appended afterwards by [`PgTxn::append`], so that the chain head
    /// is locked last, for the shortest span (issue #21); the caller commits.
    pub(crate) async fn run(
        &mut self,
        operation: &Operation,
        now: plan::Now,
    ) -> Result<Unsealed, RunFailure> {
        let mut reads = Reads::default();
        let plan = loop {
            match plan::plan(operation, &reads, now) {
                Ok(plan) => break plan,
                Err(Halt::Read(read)) => {
                    reads.insert(self.fetch(&read).await.map_err(RunFailure::dirty)?);
                }
                Err(Halt::Fail(error)) => {
                    return Err(RunFailure {
                        failure: PgFailure::Store(error),
                        dirty: false,
                    });
                }
            }
        };
        let (writes, events, unsealed) = plan.split();
        for write in &writes {
            self.apply(write).await.map_err(RunFailure::dirty)?;
        }
        for event in &events {
            self.insert_event(event).await.map_err(RunFailure::dirty)?;
        }
        Ok(unsealed)
    }

    /// Lock a lane's head (only if some plan has receipts: [`PgTxn::lock_lane`]), seal every
    /// plan's receipts onto it in order, and append them all and move the head in one
    /// statement: one result per plan. When any plan cannot be sealed (a bug,
    /// [`StoreError::Corrupt`]) nothing is appended and the caller must roll the transaction
    /// back.
    pub(crate) async fn append(
        &mut self,
        pending: Vec<Unsealed>,
    ) -> Result<Vec<Result<Done, StoreError>>, PgFailure> {
        let (lane, start) = if pending.iter().any(Unsealed::has_receipts) {
            self.lock_lane().await?
        } else {
            (0, None)
        };
        let mut head = start.clone();
        let mut rows = Vec::new();
        let mut results = Vec::with_capacity(pending.len());
        for unsealed in pending {
            match unsealed.seal_in_lane(lane, head.clone()) {
                Ok((stored, done)) => {
                    if let Some(last) = stored.last() {
                        head = Some(ChainHead {
                            seq: last.seq,
                            hash: last.hash.clone(),
                        });
                    }
                    rows.extend(stored);
                    results.push(Ok(done));
                }
                Err(error) => results.push(Err(error)),
            }
        }
        if !rows.is_empty() && results.iter().all(Result::is_ok) {
            self.insert_receipts(lane, start.map_or(0, |head| head.seq), &rows)
                .await?;
        }
        Ok(results)
    }

    /// One read of a plan, locked until this transaction ends.
    async fn fetch(&mut self, read: &Read) -> Result<Fetched, PgFailure> {
        Ok(match read {
            Read::Approval(id) => {
                let row = sqlx::query(concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals WHERE id = $1 FOR UPDATE"
                ))
                .bind(id.as_str())
                .persistent(self.persistent)
                .fetch_optional(&mut *self.transaction)
                .await
                .map_err(classify)?;
                let record = match &row {
                    Some(row) => Some(self.remember(row)?),
                    None => None,
                };
                Fetched::Approval(id.clone(), record)
            }
            Read::ApprovalsForHash(hash) => {
                // The advisory lock on the hash makes a concurrent first request wait rather
                // than create a second one.
                sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
                    .bind(hash.as_str())
                    .persistent(self.persistent)
                    .execute(&mut *self.transaction)
                    .await
                    .map_err(classify)?;
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals WHERE action_hash = $1 FOR UPDATE"
                ))
                .bind(hash.as_str())
                .persistent(self.persistent)
                .fetch_all(&mut *self.transaction)
                .await
                .map_err(classify)?;
                let mut records = Vec::with_capacity(rows.len());
                for row in &rows {
                    records.push(self.remember(row)?);
                }
                Fetched::ApprovalsForHash(hash.clone(), records)
            }
            Read::Correlation(correlation) => {
                let id: Option<String> = sqlx::query_scalar(
                    "SELECT request_id FROM correlations WHERE framework = $1 AND run = $2 AND call_id = $3 FOR UPDATE",
                )
                .bind(&correlation.framework)
                .bind(correlation.run.as_deref().unwrap_or(""))
                .bind(&correlation.call_id)
                .persistent(self.persistent).fetch_optional(&mut *self.transaction)
                .await
                .map_err(classify)?;
                Fetched::Correlation(correlation.clone(), id.map(ApprovalId::from_stored))
            }
            Read::Effect(key) => {
                let row = sqlx::query(concat!(
                    "SELECT ",
                    effect_columns!(),
                    " FROM effects WHERE key = $1 FOR UPDATE"
                ))
                .bind(key.as_str())
                .persistent(self.persistent)
                .fetch_optional(&mut *self.transaction)
                .await
                .map_err(classify)?;
                Fetched::Effect(key.clone(), row.as_ref().map(effect_from_row).transpose()?)
            }
            Read::EffectHolder(key) => {
                let row =
                    sqlx::query("SELECT state, attempt_id FROM effects WHERE key = $1 FOR UPDATE")
                        .bind(key.as_str())
                        .persistent(self.persistent)
                        .fetch_optional(&mut *self.transaction)
                        .await
                        .map_err(classify)?;
                Fetched::EffectHolder(
                    key.clone(),
                    row.as_ref().map(effect_holder_from_row).transpose()?,
                )
            }
            Read::TokenRevoked(jti) => {
                let row = sqlx::query("SELECT 1 FROM revoked_tokens WHERE jti = $1")
                    .bind(jti)
                    .persistent(self.persistent)
                    .fetch_optional(&mut *self.transaction)
                    .await
                    .map_err(classify)?;
                Fetched::TokenRevoked(jti.clone(), row.is_some())
            }
        })
    }

    /// Decode an approval row and remember its raw `answers` for the compare-and-set.
    fn remember(&mut self, row: &PgRow) -> Result<ApprovalRecord, StoreError> {
        let record = approval_from_row(row)?;
        self.read_answers
            .insert(record.id.as_str().to_owned(), raw_answers(row)?);
        Ok(record)
    }

    /// One write of a plan, as a compare-and-set whose row count must be 1. Each returns the
    /// transaction's id (`txid_current()`, the top-level one even under a savepoint), which
    /// settles a lost `COMMIT` (`postgres/commit.rs`) without a round trip of its own.
    async fn apply(&mut self, write: &Write) -> Result<(), PgFailure> {
        self.wrote = true;
        let done = match write {
            Write::InsertApproval(record) => {
                let answers = stored::answers_text(&record.answers);
                let done = sqlx::query(concat!(
                    "INSERT INTO approvals (",
                    approval_columns!(),
                    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21) RETURNING txid_current()"
                ))
                .bind(record.id.as_str())
                .bind(record.action_hash.as_str())
                .bind(&record.action)
                .bind(record.arguments.as_str())
                .bind(&record.principal)
                .bind(&record.resource)
                .bind(&record.environment)
                .bind(&record.effect_key)
                .bind(&record.policy_hash)
                .bind(&record.entry_fingerprint)
                .bind(record.state.as_str())
                .bind(record.created_at.as_millis())
                .bind(record.expires_at.as_millis())
                .bind(record.answered_at.map(Timestamp::as_millis))
                .bind(&record.approver)
                .bind(&record.note)
                .bind(record.consumed_at.map(Timestamp::as_millis))
                .bind(&record.consumed_by)
                .bind(stored::rule_text(&record.rule))
                .bind(&answers)
                .bind(&record.run)
                .persistent(self.persistent).fetch_optional(&mut *self.transaction)
                .await;
                self.read_answers
                    .insert(record.id.as_str().to_owned(), Some(answers));
                done
            }
            Write::UpdateApproval { record, expected } => {
                let Some(expected_answers) = self.read_answers.get(record.id.as_str()).cloned()
                else {
                    return Err(PgFailure::Store(StoreError::Internal {
                        detail: format!("approval {} updated without being read", record.id),
                    }));
                };
                let answers = stored::answers_text(&record.answers);
                let done = sqlx::query(
                    "UPDATE approvals SET state = $2, answered_at = $3, approver = $4, note = $5, consumed_at = $6, consumed_by = $7, answers = $10 WHERE id = $1 AND state = $8 AND answers IS NOT DISTINCT FROM $9 RETURNING txid_current()",
                )
                .bind(record.id.as_str())
                .bind(record.state.as_str())
                .bind(record.answered_at.map(Timestamp::as_millis))
                .bind(&record.approver)
                .bind(&record.note)
                .bind(record.consumed_at.map(Timestamp::as_millis))
                .bind(&record.consumed_by)
                .bind(expected.state.as_str())
                .bind(&expected_answers)
                .bind(&answers)
                .persistent(self.persistent).fetch_optional(&mut *self.transaction)
                .await;
                self.read_answers
                    .insert(record.id.as_str().to_owned(), Some(answers));
                done
            }
            Write::PutCorrelation(mapping) => {
                // INVARIANT (first-write-wins): a new mapping that finds one (another transaction
                // mapped this call first) counts 0 rows: retry, and the re-run finds its request.
                let sql = if mapping.replace {
                    "INSERT INTO correlations (framework, run, call_id, request_id) VALUES ($1, $2, $3, $4) ON CONFLICT (framework, run, call_id) DO UPDATE SET request_id = excluded.request_id RETURNING txid_current()"
                } else {
                    "INSERT INTO correlations (framework, run, call_id, request_id) VALUES ($1, $2, $3, $4) ON CONFLICT (framework, run, call_id) DO NOTHING RETURNING txid_current()"
                };
                sqlx::query(sql)
                    .bind(&mapping.correlation.framework)
                    .bind(mapping.correlation.run.as_deref().unwrap_or(""))
                    .bind(&mapping.correlation.call_id)
                    .bind(mapping.id.as_str())
                    .persistent(self.persistent).fetch_optional(&mut *self.transaction)
                    .await
            }
            Write::ReserveEffect { record, expected } => {
                let attempts = i32::try_from(record.attempts).unwrap_or(i32::MAX);
                let query = match expected {
                    None => sqlx::query(concat!(
                        "INSERT INTO effects (",
                        effect_columns!(),
                        ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (key) DO NOTHING RETURNING txid_current()"
                    )),
                    Some(_) => sqlx::query(
                        "UPDATE effects SET state = $2, action_hash = $3, attempt_id = $4, attempts = $5, lease_until = $6, updated_at = $7, resolved_by = $8, detail = $9, attempt = $10 WHERE key = $1 AND state = $11 AND attempt_id = $12 RETURNING txid_current()",
                    ),
                };
                let mut query = query
                    .bind(record.key.as_str())
                    .bind(record.state.as_str())
                    .bind(&record.action_hash)
                    .bind(&record.attempt_id)
                    .bind(attempts)
                    .bind(record.lease_until.as_millis())
                    .bind(record.updated_at.as_millis())
                    .bind(&record.resolved_by)
                    .bind(&record.detail)
                    .bind(stored::attempt_text(record.attempt.as_ref()));
                if let Some(expected) = expected {
                    query = query
                        .bind(expected.state.as_str())
                        .bind(&expected.attempt_id);
                }
                query.persistent(self.persistent).fetch_optional(&mut *self.transaction).await
            }
            Write::SettleEffect(change) => {
                sqlx::query(
                    "UPDATE effects SET state = $4, detail = $5, resolved_by = $6, updated_at = $7 WHERE key = $1 AND state = $2 AND attempt_id = $3 RETURNING txid_current()",
                )
                .bind(change.key.as_str())
                .bind(change.expected.state.as_str())
                .bind(&change.expected.attempt_id)
                .bind(change.state.as_str())
                .bind(&change.detail)
                .bind(&change.resolved_by)
                .bind(change.updated_at.as_millis())
                .persistent(self.persistent).fetch_optional(&mut *self.transaction)
                .await
            }
        };
        // Each write touches one row by its key and returns it, so no row is a count other
        // than 1.
        let Some(row) = done.map_err(classify)? else {
            // INVARIANT (compare-and-set): another transaction claimed or changed the row since
            // it was read; the re-run reads what it did and decides again.
            return Err(PgFailure::Retry);
        };
        self.txid = Some(row.try_get(0).map_err(decode)?);
        Ok(())
    }

    /// A lane and its head, locked until this transaction ends: no other writer can read the
    /// same head (no fork) or skip a `seq` in it (no gap). The lowest lane no other transaction
    /// holds (`FOR UPDATE SKIP LOCKED`), so a lone writer keeps to lane 0 and concurrent ones
    /// spread over the others; when all [`LANES`] are held, a random one, waited for.
    async fn lock_lane(&mut self) -> Result<(u32, Option<ChainHead>), PgFailure> {
        let free = sqlx::query(
            "SELECT lane, seq, hash FROM lane_heads ORDER BY lane LIMIT 1 FOR UPDATE SKIP LOCKED",
        )
        .persistent(self.persistent)
        .fetch_optional(&mut *self.transaction)
        .await
        .map_err(classify)?;
        let row = match free {
            Some(row) => row,
            None => {
                let lane = i32::try_from(rand::random_range(0..LANES)).unwrap_or(0);
                sqlx::query("SELECT lane, seq, hash FROM lane_heads WHERE lane = $1 FOR UPDATE")
                    .bind(lane)
                    .persistent(self.persistent)
                    .fetch_optional(&mut *self.transaction)
                    .await
                    .map_err(classify)?
                    .ok_or_else(|| {
                        PgFailure::Store(corrupt(format!(
                            "the head row of lane {lane} is missing from `lane_heads`"
                        )))
                    })?
            }
        };
        let lane: i32 = row.try_get(0).map_err(decode)?;
        let seq: i64 = row.try_get(1).map_err(decode)?;
        let hash: String = row.try_get(2).map_err(decode)?;
        let lane = u32::try_from(lane).map_err(|_| corrupt(format!("lane {lane}")))?;
        if seq == 0 {
            return Ok((lane, None));
        }
        Ok((
            lane,
            Some(ChainHead {
                seq: u64::try_from(seq).map_err(|_| corrupt("negative seq".to_owned()))?,
                hash: ReceiptHash::from_stored(hash),
            }),
        ))
    }

    /// Append sealed receipts of `lane` (in chain order, the first following `head_seq`) and
    /// move the lane's head to the last, in one statement (the head must be locked by
    /// [`PgTxn::lock_lane`] in this transaction). Each row draws its `ticket` as it is
    /// inserted, after every read of the transaction (`postgres/log.rs`).
    async fn insert_receipts(
        &mut self,
        lane: u32,
        head_seq: u64,
        rows: &[StoredReceipt],
    ) -> Result<(), PgFailure> {
        self.wrote = true;
        let overflow = || corrupt("seq overflow".to_owned());
        let head_seq = i64::try_from(head_seq).map_err(|_| overflow())?;
        let mut seqs = Vec::with_capacity(rows.len());
        let (mut prev_hashes, mut hashes, mut bodies) = (
            Vec::with_capacity(rows.len()),
            Vec::with_capacity(rows.len()),
            Vec::with_capacity(rows.len()),
        );
        for row in rows {
            seqs.push(i64::try_from(row.seq).map_err(|_| overflow())?);
            prev_hashes.push(row.prev_hash.as_str());
            hashes.push(row.hash.as_str());
            bodies.push(row.body.as_str());
        }
        let (Some(&last_seq), Some(&last_hash)) = (seqs.last(), hashes.last()) else {
            return Ok(());
        };
        let moved = sqlx::query(
            "WITH appended AS (INSERT INTO receipts (lane, seq, prev_hash, hash, body) SELECT $8::integer, * FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[])) UPDATE lane_heads SET seq = $5, hash = $6 WHERE lane = $8 AND seq = $7 RETURNING txid_current()",
        )
        .bind(&seqs)
        .bind(&prev_hashes)
        .bind(&hashes)
        .bind(&bodies)
        .bind(last_seq)
        .bind(last_hash)
        .bind(head_seq)
        .bind(i32::try_from(lane).map_err(|_| overflow())?)
        .persistent(self.persistent)
        .fetch_optional(&mut *self.transaction)
        .await;
        let moved = match moved {
            Ok(moved) => moved,
            Err(error) if sqlstate(&error).as_deref() == Some("23505") => {
                // The head row is locked, so this is no race: the head and the log disagree.
                let numbers = if last_seq == head_seq + 1 {
                    format!("{last_seq}")
                } else {
                    format!("{} to {last_seq}", head_seq + 1)
                };
                return Err(PgFailure::Store(corrupt(format!(
                    "a receipt of lane {lane} numbered {numbers} (or one with the same previous hash) already exists although the lane's head is at {head_seq}: the receipts table was edited"
                ))));
            }
            Err(error) => return Err(classify(error)),
        };
        let Some(moved) = moved else {
            return Err(PgFailure::Retry);
        };
        self.txid = Some(moved.try_get(0).map_err(decode)?);
        Ok(())
    }
}
