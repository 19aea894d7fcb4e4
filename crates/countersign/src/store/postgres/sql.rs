//! [`PgTxn`]: the reads and compare-and-set writes of one open PostgreSQL transaction.

use super::*;

/// Reads and writes inside one open PostgreSQL transaction: the parallel of
/// [`crate::store::txn::Txn`], asynchronous, with compare-and-set writes.
///
/// It remembers the state of every row it read, so `put_effect` and `update_approval` can write
/// only if the row is still what was read (the row locks make that certain at READ COMMITTED;
/// the checked row counts make it certain whatever the locking).
pub(crate) struct PgTxn {
    pub(super) transaction: Transaction<'static, Postgres>,
    /// Effect key → `(state, attempt_id)` as read, or `None` when it had no record.
    pub(super) read_effects: HashMap<String, Option<(String, String)>>,
    /// Approval id → `(state, answers)` columns as read (or as this transaction wrote them).
    pub(super) read_approvals: HashMap<String, (String, Option<String>)>,
    /// Has this transaction written anything?
    pub(super) wrote: bool,
}

impl PgTxn {
    /// Is the approver token id `jti` on the deny-list (issue #31)?
    pub(crate) async fn token_revoked(&mut self, jti: &str) -> Result<bool, PgFailure> {
        let row = sqlx::query("SELECT 1 FROM revoked_tokens WHERE jti = $1")
            .bind(jti.to_owned())
            .fetch_optional(&mut *self.transaction)
            .await
            .map_err(classify)?;
        Ok(row.is_some())
    }

    /// One approval request, locked.
    pub(crate) async fn approval(
        &mut self,
        id: &ApprovalId,
    ) -> Result<Option<ApprovalRecord>, PgFailure> {
        let row = sqlx::query(concat!(
            "SELECT ",
            approval_columns!(),
            " FROM approvals WHERE id = $1 FOR UPDATE"
        ))
        .bind(id.as_str())
        .fetch_optional(&mut *self.transaction)
        .await
        .map_err(classify)?;
        let record = row.as_ref().map(approval_from_row).transpose()?;
        if let (Some(record), Some(row)) = (&record, &row) {
            self.read_approvals
                .insert(record.id.as_str().to_owned(), approval_version(row)?);
        }
        Ok(record)
    }

    /// Every approval request bound to `hash`, locked (with an advisory lock on the hash, so a
    /// concurrent first request waits rather than creating a second one).
    pub(crate) async fn approvals_for_hash(
        &mut self,
        hash: &ActionHash,
    ) -> Result<Vec<ApprovalRecord>, PgFailure> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(hash.as_str())
            .execute(&mut *self.transaction)
            .await
            .map_err(classify)?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            approval_columns!(),
            " FROM approvals WHERE action_hash = $1 FOR UPDATE"
        ))
        .bind(hash.as_str())
        .fetch_all(&mut *self.transaction)
        .await
        .map_err(classify)?;
        let mut records = Vec::with_capacity(rows.len());
        for row in &rows {
            let record = approval_from_row(row)?;
            self.read_approvals
                .insert(record.id.as_str().to_owned(), approval_version(row)?);
            records.push(record);
        }
        Ok(records)
    }

    /// The request a framework call is mapped to, locked.
    pub(crate) async fn correlation(
        &mut self,
        correlation: &Correlation,
    ) -> Result<Option<ApprovalId>, PgFailure> {
        let id: Option<String> = sqlx::query_scalar(
            "SELECT request_id FROM correlations WHERE framework = $1 AND run = $2 AND call_id = $3 FOR UPDATE",
        )
        .bind(&correlation.framework)
        .bind(correlation.run.as_deref().unwrap_or(""))
        .bind(&correlation.call_id)
        .fetch_optional(&mut *self.transaction)
        .await
        .map_err(classify)?;
        Ok(id.map(ApprovalId::from_stored))
    }

    /// Map a framework call to a request. A new mapping is `INSERT … ON CONFLICT DO NOTHING`
    /// whose row count must be 1 (another transaction mapping the same call first means retry:
    /// the re-run finds its request); `replace` overwrites a mapping whose request ended unused.
    pub(crate) async fn put_correlation(
        &mut self,
        correlation: &Correlation,
        id: &ApprovalId,
        replace: bool,
    ) -> Result<(), PgFailure> {
        self.wrote = true;
        let sql = if replace {
            "INSERT INTO correlations (framework, run, call_id, request_id) VALUES ($1, $2, $3, $4) ON CONFLICT (framework, run, call_id) DO UPDATE SET request_id = excluded.request_id"
        } else {
            "INSERT INTO correlations (framework, run, call_id, request_id) VALUES ($1, $2, $3, $4) ON CONFLICT (framework, run, call_id) DO NOTHING"
        };
        let result = sqlx::query(sql)
            .bind(&correlation.framework)
            .bind(correlation.run.as_deref().unwrap_or(""))
            .bind(&correlation.call_id)
            .bind(id.as_str())
            .execute(&mut *self.transaction)
            .await
            .map_err(classify)?;
        if result.rows_affected() != 1 {
            // INVARIANT (first-write-wins): another transaction mapped this call first.
            return Err(PgFailure::Retry);
        }
        Ok(())
    }

    /// Insert a new request.
    pub(crate) async fn insert_approval(
        &mut self,
        record: &ApprovalRecord,
    ) -> Result<(), PgFailure> {
        self.wrote = true;
        let answers = stored::answers_text(&record.answers);
        sqlx::query(concat!(
            "INSERT INTO approvals (",
            approval_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)"
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
        .execute(&mut *self.transaction)
        .await
        .map_err(classify)?;
        self.read_approvals.insert(
            record.id.as_str().to_owned(),
            (record.state.as_str().to_owned(), Some(answers)),
        );
        Ok(())
    }

    /// Overwrite a request's mutable fields, only if it is still in the state read.
    pub(crate) async fn update_approval(
        &mut self,
        record: &ApprovalRecord,
    ) -> Result<(), PgFailure> {
        let Some(expected) = self.read_approvals.get(record.id.as_str()).cloned() else {
            return Err(PgFailure::Store(StoreError::Internal {
                detail: format!("approval {} updated without being read", record.id),
            }));
        };
        self.wrote = true;
        let (expected_state, expected_answers) = expected;
        let answers = stored::answers_text(&record.answers);
        let result = sqlx::query(
            "UPDATE approvals SET state = $2, answered_at = $3, approver = $4, note = $5, consumed_at = $6, consumed_by = $7, answers = $10 WHERE id = $1 AND state = $8 AND answers IS NOT DISTINCT FROM $9",
        )
        .bind(record.id.as_str())
        .bind(record.state.as_str())
        .bind(record.answered_at.map(Timestamp::as_millis))
        .bind(&record.approver)
        .bind(&record.note)
        .bind(record.consumed_at.map(Timestamp::as_millis))
        .bind(&record.consumed_by)
        .bind(&expected_state)
        .bind(&expected_answers)
        .bind(&answers)
        .execute(&mut *self.transaction)
        .await
        .map_err(classify)?;
        if result.rows_affected() != 1 {
            // INVARIANT (compare-and-set): another transaction changed it since we read it.
            return Err(PgFailure::Retry);
        }
        self.read_approvals.insert(
            record.id.as_str().to_owned(),
            (record.state.as_str().to_owned(), Some(answers)),
        );
        Ok(())
    }

    /// One effect record, locked.
    pub(crate) async fn effect(
        &mut self,
        key: &EffectKey,
    ) -> Result<Option<EffectRecord>, PgFailure> {
        let row = sqlx::query(concat!(
            "SELECT ",
            effect_columns!(),
            " FROM effects WHERE key = $1 FOR UPDATE"
        ))
        .bind(key.as_str())
        .fetch_optional(&mut *self.transaction)
        .await
        .map_err(classify)?;
        let record = row.as_ref().map(effect_from_row).transpose()?;
        self.read_effects.insert(
            key.as_str().to_owned(),
            record.as_ref().map(|record| {
                (
                    record.state.as_str().to_owned(),
                    record.attempt_id.to_string(),
                )
            }),
        );
        Ok(record)
    }

    /// Insert or overwrite an effect record, only if it is still what was read: a claim of a
    /// free key is `INSERT … ON CONFLICT DO NOTHING`, an overwrite an `UPDATE … WHERE` the state
    /// and attempt read. A row count other than 1 means another transaction won: retry.
    pub(crate) async fn put_effect(&mut self, record: &EffectRecord) -> Result<(), PgFailure> {
        let Some(expected) = self.read_effects.get(record.key.as_str()).cloned() else {
            return Err(PgFailure::Store(StoreError::Internal {
                detail: format!("effect `{}` written without being read", record.key),
            }));
        };
        self.wrote = true;
        let attempts = i32::try_from(record.attempts).unwrap_or(i32::MAX);
        let result = match &expected {
            None => sqlx::query(concat!(
                "INSERT INTO effects (",
                effect_columns!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (key) DO NOTHING"
            ))
            .bind(record.key.as_str())
            .bind(record.state.as_str())
            .bind(&record.action_hash)
            .bind(&record.attempt_id)
            .bind(attempts)
            .bind(record.lease_until.as_millis())
            .bind(record.updated_at.as_millis())
            .bind(&record.resolved_by)
            .bind(&record.detail)
            .bind(stored::attempt_text(record.attempt.as_ref()))
            .execute(&mut *self.transaction)
            .await,
            Some((state, attempt_id)) => sqlx::query(
                "UPDATE effects SET state = $2, action_hash = $3, attempt_id = $4, attempts = $5, lease_until = $6, updated_at = $7, resolved_by = $8, detail = $9, attempt = $12 WHERE key = $1 AND state = $10 AND attempt_id = $11",
            )
            .bind(record.key.as_str())
            .bind(record.state.as_str())
            .bind(&record.action_hash)
            .bind(&record.attempt_id)
            .bind(attempts)
            .bind(record.lease_until.as_millis())
            .bind(record.updated_at.as_millis())
            .bind(&record.resolved_by)
            .bind(&record.detail)
            .bind(state)
            .bind(attempt_id)
            .bind(stored::attempt_text(record.attempt.as_ref()))
            .execute(&mut *self.transaction)
            .await,
        }
        .map_err(classify)?;
        if result.rows_affected() != 1 {
            // INVARIANT (compare-and-set): another attempt claimed or changed the key since we
            // read it; the re-run reads what it did and refuses with a typed decision.
            return Err(PgFailure::Retry);
        }
        self.read_effects.insert(
            record.key.as_str().to_owned(),
            Some((
                record.state.as_str().to_owned(),
                record.attempt_id.to_string(),
            )),
        );
        Ok(())
    }

    /// The chain head, locked until this transaction ends: no other writer can read the same
    /// head (no fork) or skip a position (no gap).
    pub(crate) async fn chain_head(&mut self) -> Result<Option<ChainHead>, PgFailure> {
        let row = sqlx::query("SELECT seq, hash FROM chain_head WHERE id = 1 FOR UPDATE")
            .fetch_optional(&mut *self.transaction)
            .await
            .map_err(classify)?;
        let Some(row) = row else {
            return Err(PgFailure::Store(corrupt(
                "the chain head row is missing".to_owned(),
            )));
        };
        let seq: i64 = row.try_get(0).map_err(decode)?;
        let hash: String = row.try_get(1).map_err(decode)?;
        if seq == 0 {
            return Ok(None);
        }
        Ok(Some(ChainHead {
            seq: u64::try_from(seq).map_err(|_| corrupt("negative seq".to_owned()))?,
            hash: ReceiptHash::from_stored(hash),
        }))
    }

    /// Append a sealed receipt and move the head to it (the head must be locked by
    /// [`PgTxn::chain_head`] in this transaction).
    pub(crate) async fn insert_receipt(
        &mut self,
        stored: &StoredReceipt,
        _receipt: &Receipt,
    ) -> Result<(), PgFailure> {
        self.wrote = true;
        let seq = i64::try_from(stored.seq).map_err(|_| corrupt("seq overflow".to_owned()))?;
        let inserted = sqlx::query(
            "INSERT INTO receipts (seq, prev_hash, hash, body) VALUES ($1, $2, $3, $4)",
        )
        .bind(seq)
        .bind(&stored.prev_hash)
        .bind(&stored.hash)
        .bind(&stored.body)
        .execute(&mut *self.transaction)
        .await;
        if let Err(error) = inserted {
            if sqlstate(&error).as_deref() == Some("23505") {
                // The head row is locked, so this is no race: the head and the log disagree.
                return Err(PgFailure::Store(corrupt(format!(
                    "receipt {seq} already exists although the chain head is at {}: the receipts table was edited; run `countersign receipts --verify`",
                    seq - 1
                ))));
            }
            return Err(classify(error));
        }
        let moved =
            sqlx::query("UPDATE chain_head SET seq = $1, hash = $2 WHERE id = 1 AND seq = $3")
                .bind(seq)
                .bind(&stored.hash)
                .bind(seq - 1)
                .execute(&mut *self.transaction)
                .await
                .map_err(classify)?;
        if moved.rows_affected() != 1 {
            return Err(PgFailure::Retry);
        }
        Ok(())
    }
}
