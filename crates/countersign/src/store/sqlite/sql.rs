//! [`SqliteTxn`]: one `BEGIN IMMEDIATE` transaction ([`Immediate`]) and the reads and writes
//! the shared sequences in `store::txn` run through it.

use super::*;

/// One `BEGIN IMMEDIATE` transaction on a connection, rolled back when dropped uncommitted (as
/// rusqlite's `Transaction`, with BEGIN and COMMIT run as cached statements).
pub(super) struct Immediate<'c> {
    pub(super) connection: &'c Connection,
    open: bool,
}

impl<'c> Immediate<'c> {
    pub(super) fn begin(connection: &'c Connection) -> rusqlite::Result<Immediate<'c>> {
        connection.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Immediate {
            connection,
            open: true,
        })
    }

    /// Commit; on failure the transaction is rolled back when `self` drops.
    pub(super) fn commit(mut self) -> rusqlite::Result<()> {
        self.connection.prepare_cached("COMMIT")?.execute([])?;
        self.open = false;
        Ok(())
    }
}

impl Drop for Immediate<'_> {
    fn drop(&mut self) {
        if self.open && !self.connection.is_autocommit() {
            // A failed rollback leaves nothing to do: SQLite rolls back on close.
            let _ = self.connection.execute_batch("ROLLBACK");
        }
    }
}

pub(super) struct SqliteTxn<'a> {
    pub(super) transaction: &'a Connection,
    pub(super) busy: bool,
}

impl SqliteTxn<'_> {
    pub(super) fn check<R>(&mut self, result: rusqlite::Result<R>) -> Result<R, StoreError> {
        result.map_err(|error| {
            if is_busy(&error) {
                self.busy = true;
            }
            map_read_error(error)
        })
    }
}

impl Txn for SqliteTxn<'_> {
    fn token_revoked(&mut self, jti: &str) -> Result<bool, StoreError> {
        let result = self
            .transaction
            .prepare_cached("SELECT 1 FROM revoked_tokens WHERE jti = ?1")
            .and_then(|mut statement| statement.exists(params![jti]));
        self.check(result)
    }

    fn approval(&mut self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
        let result = self
            .transaction
            .prepare_cached(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"
            ))
            .and_then(|mut statement| {
                statement
                    .query_row(params![id.as_str()], approval_from_row)
                    .optional()
            });
        self.check(result)
    }

    fn approvals_for_hash(&mut self, hash: &ActionHash) -> Result<Vec<ApprovalRecord>, StoreError> {
        let result = self
            .transaction
            .prepare_cached(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE action_hash = ?1"
            ))
            .and_then(|mut statement| {
                statement
                    .query_map(params![hash.as_str()], approval_from_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            });
        self.check(result)
    }

    fn correlation(&mut self, correlation: &Correlation) -> Result<Option<ApprovalId>, StoreError> {
        let result = self
            .transaction
            .prepare_cached(
                "SELECT request_id FROM correlations WHERE framework = ?1 AND run = ?2 AND call_id = ?3",
            )
            .and_then(|mut statement| {
                statement
                    .query_row(
                        params![
                            correlation.framework,
                            correlation.run.as_deref().unwrap_or(""),
                            correlation.call_id
                        ],
                        |row| row.get::<_, String>(0),
                    )
                    .optional()
            });
        Ok(self.check(result)?.map(ApprovalId::from_stored))
    }

    fn put_correlation(
        &mut self,
        correlation: &Correlation,
        id: &ApprovalId,
        replace: bool,
    ) -> Result<(), StoreError> {
        // INVARIANT (first-write-wins): a plain INSERT fails on an existing mapping; only a
        // mapping whose request ended unused is replaced (`correlated_outcome` decides).
        let sql = if replace {
            "INSERT OR REPLACE INTO correlations (framework, run, call_id, request_id) VALUES (?1, ?2, ?3, ?4)"
        } else {
            "INSERT INTO correlations (framework, run, call_id, request_id) VALUES (?1, ?2, ?3, ?4)"
        };
        let result = self
            .transaction
            .prepare_cached(sql)
            .and_then(|mut statement| {
                statement.execute(params![
                    correlation.framework,
                    correlation.run.as_deref().unwrap_or(""),
                    correlation.call_id,
                    id.as_str()
                ])
            });
        self.check(result).map(drop)
    }

    fn insert_approval(&mut self, record: &ApprovalRecord) -> Result<(), StoreError> {
        let result = self
            .transaction
            .prepare_cached(&format!(
                "INSERT INTO approvals ({APPROVAL_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"
            ))
            .and_then(|mut statement| {
                statement.execute(params![
                    record.id.as_str(),
                    record.action_hash.as_str(),
                    record.action,
                    record.arguments.as_str(),
                    record.principal,
                    record.resource,
                    record.environment,
                    record.effect_key,
                    record.policy_hash,
                    record.entry_fingerprint,
                    record.state.as_str(),
                    record.created_at.as_millis(),
                    record.expires_at.as_millis(),
                    record.answered_at.map(Timestamp::as_millis),
                    record.approver,
                    record.note,
                    record.consumed_at.map(Timestamp::as_millis),
                    record.consumed_by,
                    stored::rule_text(&record.rule),
                    stored::answers_text(&record.answers),
                    record.run,
                ])
            });
        self.check(result).map(drop)
    }

    fn update_approval(&mut self, record: &ApprovalRecord) -> Result<(), StoreError> {
        let result = self
            .transaction
            .prepare_cached(
                "UPDATE approvals SET state = ?2, answered_at = ?3, approver = ?4, note = ?5, consumed_at = ?6, consumed_by = ?7, answers = ?8 WHERE id = ?1",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    record.id.as_str(),
                    record.state.as_str(),
                    record.answered_at.map(Timestamp::as_millis),
                    record.approver,
                    record.note,
                    record.consumed_at.map(Timestamp::as_millis),
                    record.consumed_by,
                    stored::answers_text(&record.answers),
                ])
            });
        match self.check(result)? {
            1 => Ok(()),
            rows => Err(StoreError::Corrupt {
                detail: format!("updating approval {} touched {rows} rows", record.id),
            }),
        }
    }

    fn effect(&mut self, key: &EffectKey) -> Result<Option<EffectRecord>, StoreError> {
        let result = self
            .transaction
            .prepare_cached(&format!(
                "SELECT {EFFECT_COLUMNS} FROM effects WHERE key = ?1"
            ))
            .and_then(|mut statement| {
                statement
                    .query_row(params![key.as_str()], effect_from_row)
                    .optional()
            });
        self.check(result)
    }

    fn put_effect(&mut self, record: &EffectRecord) -> Result<(), StoreError> {
        let result = self
            .transaction
            .prepare_cached(&format!(
                "INSERT OR REPLACE INTO effects ({EFFECT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
            ))
            .and_then(|mut statement| {
                statement.execute(params![
                    record.key.as_str(),
                    record.state.as_str(),
                    record.action_hash,
                    record.attempt_id,
                    record.attempts,
                    record.lease_until.as_millis(),
                    record.updated_at.as_millis(),
                    record.resolved_by,
                    record.detail,
                    stored::attempt_text(record.attempt.as_ref()),
                ])
            });
        self.check(result).map(drop)
    }

    fn complete_effect(
        &mut self,
        key: &EffectKey,
        attempt_id: &str,
        state: EffectState,
        detail: Option<&str>,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        // One conditional update instead of a read and a whole-row replace; the row count says
        // whether this attempt still held the reservation.
        let result = self
            .transaction
            .prepare_cached(
                "UPDATE effects SET state = ?3, detail = ?4, updated_at = ?5 WHERE key = ?1 AND attempt_id = ?2 AND state = 'reserved'",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    key.as_str(),
                    attempt_id,
                    state.as_str(),
                    detail,
                    now.as_millis(),
                ])
            });
        match self.check(result)? {
            0 => Ok(false),
            1 => Ok(true),
            rows => Err(StoreError::Corrupt {
                detail: format!("completing effect `{key}` touched {rows} rows"),
            }),
        }
    }

    fn chain_head(&mut self) -> Result<Option<ChainHead>, StoreError> {
        let result = self
            .transaction
            .prepare_cached("SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1")
            .and_then(|mut statement| {
                statement
                    .query_row([], |row| {
                        Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
                    })
                    .optional()
            });
        let head = self.check(result)?;
        head.map(|(seq, hash)| {
            Ok(ChainHead {
                seq: u64::try_from(seq).map_err(|_| StoreError::Corrupt {
                    detail: "negative seq".to_owned(),
                })?,
                hash: ReceiptHash::from_stored(hash),
            })
        })
        .transpose()
    }

    fn insert_event(&mut self, event: &crate::outbox::OutboxEvent) -> Result<(), StoreError> {
        let result = super::outbox::insert_event(self.transaction, event);
        self.check(result)
    }

    fn insert_receipt(
        &mut self,
        stored: &StoredReceipt,
        _receipt: &Receipt,
    ) -> Result<(), StoreError> {
        let seq = i64::try_from(stored.seq).map_err(|_| StoreError::Corrupt {
            detail: "seq overflow".to_owned(),
        })?;
        let result = self
            .transaction
            .prepare_cached(
                "INSERT INTO receipts (seq, prev_hash, hash, body) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut statement| {
                statement.execute(params![seq, stored.prev_hash, stored.hash, stored.body])
            });
        self.check(result).map(drop)
    }
}

pub(super) fn flatten<R>(
    result: Result<Result<R, StoreError>, StoreError>,
) -> Result<R, StoreError> {
    result.and_then(|inner| inner)
}
