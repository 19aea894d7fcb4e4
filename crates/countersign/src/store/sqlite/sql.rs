//! [`SqliteTxn`]: one `BEGIN IMMEDIATE` transaction ([`Immediate`]), the reads a plan asks for
//! and the writes it decided (`store::plan`), as SQL.

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

impl SqliteTxn<'_> {
    /// Plan `operation` inside this transaction and apply it (the caller commits).
    pub(super) fn run(
        &mut self,
        operation: &Operation,
        now: plan::Now,
    ) -> Result<Done, StoreError> {
        let plan = plan::plan_with(operation, now, |read| self.fetch(read))?;
        let head = if plan.has_receipts() {
            self.chain_head()?
        } else {
            None
        };
        let sealed = plan.seal(head)?;
        for write in &sealed.writes {
            self.apply(write)?;
        }
        for event in &sealed.events {
            let result = super::outbox::insert_event(self.transaction, event);
            self.check(result)?;
        }
        for receipt in &sealed.receipts {
            self.insert_receipt(receipt)?;
        }
        Ok(sealed.done)
    }

    /// One read of a plan.
    fn fetch(&mut self, read: &Read) -> Result<Fetched, StoreError> {
        let connection = self.transaction;
        let result = match read {
            Read::Approval(id) => connection
                .prepare_cached(&format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"
                ))
                .and_then(|mut statement| {
                    statement
                        .query_row(params![id.as_str()], approval_from_row)
                        .optional()
                })
                .map(|record| Fetched::Approval(id.clone(), record)),
            Read::ApprovalsForHash(hash) => connection
                .prepare_cached(&format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE action_hash = ?1"
                ))
                .and_then(|mut statement| {
                    statement
                        .query_map(params![hash.as_str()], approval_from_row)?
                        .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map(|records| Fetched::ApprovalsForHash(hash.clone(), records)),
            Read::Correlation(correlation) => connection
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
                })
                .map(|id| Fetched::Correlation(correlation.clone(), id.map(ApprovalId::from_stored))),
            Read::Effect(key) => connection
                .prepare_cached(&format!(
                    "SELECT {EFFECT_COLUMNS} FROM effects WHERE key = ?1"
                ))
                .and_then(|mut statement| {
                    statement
                        .query_row(params![key.as_str()], effect_from_row)
                        .optional()
                })
                .map(|record| Fetched::Effect(key.clone(), record)),
            Read::EffectHolder(key) => connection
                .prepare_cached("SELECT state, attempt_id FROM effects WHERE key = ?1")
                .and_then(|mut statement| {
                    statement
                        .query_row(params![key.as_str()], effect_holder_from_row)
                        .optional()
                })
                .map(|holder| Fetched::EffectHolder(key.clone(), holder)),
            Read::TokenRevoked(jti) => connection
                .prepare_cached("SELECT 1 FROM revoked_tokens WHERE jti = ?1")
                .and_then(|mut statement| statement.exists(params![jti]))
                .map(|revoked| Fetched::TokenRevoked(jti.clone(), revoked)),
        };
        self.check(result)
    }

    /// One write of a plan. The write lock is held since `BEGIN IMMEDIATE`, so an expectation
    /// that fails is a store changed under it: [`StoreError::Corrupt`].
    fn apply(&mut self, write: &Write) -> Result<(), StoreError> {
        let connection = self.transaction;
        let result = match write {
            Write::InsertApproval(record) => connection
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
                }),
            Write::UpdateApproval { record, expected } => connection
                .prepare_cached(
                    "UPDATE approvals SET state = ?2, answered_at = ?3, approver = ?4, note = ?5, consumed_at = ?6, consumed_by = ?7, answers = ?8 WHERE id = ?1 AND state = ?9",
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
                        expected.state.as_str(),
                    ])
                }),
            Write::PutCorrelation(mapping) => {
                // INVARIANT (first-write-wins): a plain INSERT fails on an existing mapping; only
                // a mapping whose request ended unused is replaced (the plan decides).
                let Mapping {
                    correlation, id, ..
                } = mapping;
                let sql = if mapping.replace {
                    "INSERT OR REPLACE INTO correlations (framework, run, call_id, request_id) VALUES (?1, ?2, ?3, ?4)"
                } else {
                    "INSERT INTO correlations (framework, run, call_id, request_id) VALUES (?1, ?2, ?3, ?4)"
                };
                connection.prepare_cached(sql).and_then(|mut statement| {
                    statement.execute(params![
                        correlation.framework,
                        correlation.run.as_deref().unwrap_or(""),
                        correlation.call_id,
                        id.as_str()
                    ])
                })
            }
            Write::ReserveEffect {
                record,
                expected: None,
            } => connection
                .prepare_cached(&format!(
                    "INSERT INTO effects ({EFFECT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                ))
                .and_then(|mut statement| statement.execute(EffectRow::of(record).params())),
            Write::ReserveEffect {
                record,
                expected: Some(expected),
            } => connection
                .prepare_cached(
                    "UPDATE effects SET state = ?2, action_hash = ?3, attempt_id = ?4, attempts = ?5, lease_until = ?6, updated_at = ?7, resolved_by = ?8, detail = ?9, attempt = ?10 WHERE key = ?1 AND state = ?11 AND attempt_id = ?12",
                )
                .and_then(|mut statement| {
                    let row = EffectRow::of(record);
                    let expected_state = expected.state.as_str();
                    let mut values: Vec<&dyn rusqlite::ToSql> = row.params().to_vec();
                    values.push(&expected_state);
                    values.push(&expected.attempt_id);
                    statement.execute(values.as_slice())
                }),
            Write::SettleEffect(change) => connection
                .prepare_cached(
                    "UPDATE effects SET state = ?4, detail = ?5, resolved_by = ?6, updated_at = ?7 WHERE key = ?1 AND state = ?2 AND attempt_id = ?3",
                )
                .and_then(|mut statement| {
                    statement.execute(params![
                        change.key.as_str(),
                        change.expected.state.as_str(),
                        change.expected.attempt_id,
                        change.state.as_str(),
                        change.detail,
                        change.resolved_by,
                        change.updated_at.as_millis(),
                    ])
                }),
        };
        match self.check(result)? {
            1 => Ok(()),
            rows => Err(StoreError::Corrupt {
                detail: format!("{write:?} touched {rows} rows under the write lock"),
            }),
        }
    }

    /// The newest receipt.
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

    /// Append a sealed receipt (its `seq` is the head's plus one).
    fn insert_receipt(&mut self, stored: &StoredReceipt) -> Result<(), StoreError> {
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
