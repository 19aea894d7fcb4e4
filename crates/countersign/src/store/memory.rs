//! The in-memory store: one process, nothing on disk. For tests, examples and benchmarks of the
//! kernel's own overhead.
//!
//! Each operation holds one mutex for its whole read-decide-write sequence and keeps an undo
//! log, so an operation that fails part-way leaves nothing behind.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::ActionHash;
use crate::approval::{ApprovalId, ApprovalRecord, ApprovalState, Correlation};
use crate::clock::Timestamp;
use crate::effect::{EffectKey, EffectRecord, EffectState};
use crate::error::{AnswerError, ResolveError, StoreError};
use crate::evidence::{ChainHead, Receipt, ReceiptDraft, StoredReceipt};
use crate::store::txn::{self, Txn};
use crate::store::{
    BeginAttempt, BeginOutcome, FinishAttempt, HandOff, HandOffOutcome, NewApproval, OpenOutcome,
    RecordAnswer, ResolveEffect, Store,
};

#[derive(Default)]
struct State {
    approvals: HashMap<ApprovalId, ApprovalRecord>,
    approval_order: Vec<ApprovalId>,
    by_hash: HashMap<ActionHash, Vec<ApprovalId>>,
    effects: BTreeMap<EffectKey, EffectRecord>,
    receipts: Vec<StoredReceipt>,
    correlations: HashMap<Correlation, ApprovalId>,
    /// Issue #31: revoked approver token ids.
    revoked_tokens: std::collections::HashSet<String>,
}

enum Undo {
    InsertedApproval(ApprovalId),
    UpdatedApproval(ApprovalRecord),
    PutEffect(EffectKey, Option<EffectRecord>),
    InsertedReceipt,
    PutCorrelation(Correlation, Option<ApprovalId>),
}

struct MemoryTxn<'a> {
    state: &'a mut State,
    undo: Vec<Undo>,
}

impl MemoryTxn<'_> {
    fn rollback(mut self) {
        while let Some(undo) = self.undo.pop() {
            match undo {
                Undo::InsertedApproval(id) => {
                    if let Some(record) = self.state.approvals.remove(&id)
                        && let Some(ids) = self.state.by_hash.get_mut(&record.action_hash)
                    {
                        ids.retain(|other| *other != id);
                    }
                    self.state.approval_order.retain(|other| *other != id);
                }
                Undo::UpdatedApproval(previous) => {
                    self.state.approvals.insert(previous.id.clone(), previous);
                }
                Undo::PutEffect(key, previous) => match previous {
                    Some(previous) => {
                        self.state.effects.insert(key, previous);
                    }
                    None => {
                        self.state.effects.remove(&key);
                    }
                },
                Undo::InsertedReceipt => {
                    self.state.receipts.pop();
                }
                Undo::PutCorrelation(correlation, previous) => match previous {
                    Some(previous) => {
                        self.state.correlations.insert(correlation, previous);
                    }
                    None => {
                        self.state.correlations.remove(&correlation);
                    }
                },
            }
        }
    }
}

impl Txn for MemoryTxn<'_> {
    fn token_revoked(&mut self, jti: &str) -> Result<bool, StoreError> {
        Ok(self.state.revoked_tokens.contains(jti))
    }

    fn approval(&mut self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
        Ok(self.state.approvals.get(id).cloned())
    }

    fn approvals_for_hash(&mut self, hash: &ActionHash) -> Result<Vec<ApprovalRecord>, StoreError> {
        let ids = self
            .state
            .by_hash
            .get(hash)
            .map(Vec::as_slice)
            .unwrap_or_default();
        Ok(ids
            .iter()
            .filter_map(|id| self.state.approvals.get(id).cloned())
            .collect())
    }

    fn correlation(&mut self, correlation: &Correlation) -> Result<Option<ApprovalId>, StoreError> {
        Ok(self.state.correlations.get(correlation).cloned())
    }

    fn put_correlation(
        &mut self,
        correlation: &Correlation,
        id: &ApprovalId,
        replace: bool,
    ) -> Result<(), StoreError> {
        let previous = self.state.correlations.get(correlation).cloned();
        if previous.is_some() && !replace {
            return Err(StoreError::Backend {
                message: format!("framework call {correlation:?} is already mapped"),
            });
        }
        self.state
            .correlations
            .insert(correlation.clone(), id.clone());
        self.undo
            .push(Undo::PutCorrelation(correlation.clone(), previous));
        Ok(())
    }

    fn insert_approval(&mut self, record: &ApprovalRecord) -> Result<(), StoreError> {
        if self.state.approvals.contains_key(&record.id) {
            return Err(StoreError::Backend {
                message: format!("approval {} exists", record.id),
            });
        }
        self.state
            .approvals
            .insert(record.id.clone(), record.clone());
        self.state.approval_order.push(record.id.clone());
        self.state
            .by_hash
            .entry(record.action_hash.clone())
            .or_default()
            .push(record.id.clone());
        self.undo.push(Undo::InsertedApproval(record.id.clone()));
        Ok(())
    }

    fn update_approval(&mut self, record: &ApprovalRecord) -> Result<(), StoreError> {
        let Some(previous) = self
            .state
            .approvals
            .insert(record.id.clone(), record.clone())
        else {
            self.state.approvals.remove(&record.id);
            return Err(StoreError::Corrupt {
                detail: format!("approval {} vanished", record.id),
            });
        };
        self.undo.push(Undo::UpdatedApproval(previous));
        Ok(())
    }

    fn effect(&mut self, key: &EffectKey) -> Result<Option<EffectRecord>, StoreError> {
        Ok(self.state.effects.get(key).cloned())
    }

    fn put_effect(&mut self, record: &EffectRecord) -> Result<(), StoreError> {
        let previous = self
            .state
            .effects
            .insert(record.key.clone(), record.clone());
        self.undo
            .push(Undo::PutEffect(record.key.clone(), previous));
        Ok(())
    }

    fn chain_head(&mut self) -> Result<Option<ChainHead>, StoreError> {
        Ok(self.state.receipts.last().map(|last| ChainHead {
            seq: last.seq,
            hash: last.hash.clone(),
        }))
    }

    fn insert_receipt(
        &mut self,
        stored: &StoredReceipt,
        _receipt: &Receipt,
    ) -> Result<(), StoreError> {
        self.state.receipts.push(stored.clone());
        self.undo.push(Undo::InsertedReceipt);
        Ok(())
    }
}

/// The in-memory store. Cheap to create; everything is lost when it is dropped.
#[derive(Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// Run one operation atomically: on `Err` (outer or inner) every write is undone.
    fn with_txn<R, E>(
        &self,
        operation: impl FnOnce(&mut MemoryTxn<'_>) -> Result<Result<R, E>, StoreError>,
    ) -> Result<Result<R, E>, StoreError> {
        // A poisoned lock means a panic inside an operation, which keeps the undo log's
        // guarantee only up to the panic: refuse rather than continue on doubtful state.
        let mut state = self.state.lock().map_err(|_| StoreError::Internal {
            detail: "the in-memory store is poisoned by an earlier panic".to_owned(),
        })?;
        let mut txn = MemoryTxn {
            state: &mut state,
            undo: Vec::new(),
        };
        let result = operation(&mut txn);
        if !matches!(result, Ok(Ok(_))) {
            txn.rollback();
        }
        result
    }

    fn read<R>(&self, read: impl FnOnce(&State) -> R) -> Result<R, StoreError> {
        let state = self.state.lock().map_err(|_| StoreError::Internal {
            detail: "the in-memory store is poisoned by an earlier panic".to_owned(),
        })?;
        Ok(read(&state))
    }
}

fn flatten<R>(result: Result<Result<R, StoreError>, StoreError>) -> Result<R, StoreError> {
    result.and_then(|inner| inner)
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn open_approval(
        &self,
        new: NewApproval,
        now: Timestamp,
    ) -> Result<OpenOutcome, StoreError> {
        flatten(self.with_txn(|txn| Ok(txn::open_approval(txn, new, now))))
    }

    async fn answer_approval(
        &self,
        answer: RecordAnswer,
        now: Timestamp,
    ) -> Result<ApprovalRecord, AnswerError> {
        // An AnswerError refusal may still carry a committed mark (expiry): keep those writes.
        let mut state = self.state.lock().map_err(|_| StoreError::Internal {
            detail: "the in-memory store is poisoned by an earlier panic".to_owned(),
        })?;
        let mut txn = MemoryTxn {
            state: &mut state,
            undo: Vec::new(),
        };
        match txn::answer_approval(&mut txn, answer, now) {
            Ok(result) => result,
            Err(error) => {
                txn.rollback();
                Err(error.into())
            }
        }
    }

    async fn withdraw_approval(
        &self,
        withdrawal: crate::approval::withdraw::Withdrawal,
        now: Timestamp,
    ) -> Result<ApprovalRecord, AnswerError> {
        // A refusal may still carry a committed mark (expiry): keep those writes.
        let mut state = self.state.lock().map_err(|_| StoreError::Internal {
            detail: "the in-memory store is poisoned by an earlier panic".to_owned(),
        })?;
        let mut txn = MemoryTxn {
            state: &mut state,
            undo: Vec::new(),
        };
        match txn::withdraw_approval(&mut txn, withdrawal, now) {
            Ok(result) => result,
            Err(error) => {
                txn.rollback();
                Err(error.into())
            }
        }
    }

    async fn approval(&self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
        self.read(|state| state.approvals.get(id).cloned())
    }

    async fn correlated(
        &self,
        correlation: &Correlation,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.read(|state| {
            state
                .correlations
                .get(correlation)
                .and_then(|id| state.approvals.get(id))
                .cloned()
        })
    }

    async fn approvals(
        &self,
        filter: Option<ApprovalState>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.read(|state| {
            state
                .approval_order
                .iter()
                .filter_map(|id| state.approvals.get(id))
                .filter(|record| filter.is_none_or(|wanted| record.state == wanted))
                .cloned()
                .collect()
        })
    }

    async fn begin_attempt(
        &self,
        begin: BeginAttempt,
        now: Timestamp,
    ) -> Result<BeginOutcome, StoreError> {
        flatten(self.with_txn(|txn| Ok(txn::begin_attempt(txn, begin, now))))
    }

    async fn finish_attempt(
        &self,
        finish: FinishAttempt,
        now: Timestamp,
    ) -> Result<Receipt, StoreError> {
        flatten(self.with_txn(|txn| Ok(txn::finish_attempt(txn, finish, now))))
    }

    async fn hand_off(
        &self,
        hand_off: HandOff,
        now: Timestamp,
    ) -> Result<HandOffOutcome, StoreError> {
        flatten(self.with_txn(|txn| Ok(txn::hand_off(txn, hand_off, now))))
    }

    async fn append_receipt(
        &self,
        draft: ReceiptDraft,
        now: Timestamp,
    ) -> Result<Receipt, StoreError> {
        flatten(self.with_txn(|txn| Ok(txn::append(txn, draft, now))))
    }

    async fn effect(&self, key: &EffectKey) -> Result<Option<EffectRecord>, StoreError> {
        self.read(|state| state.effects.get(key).cloned())
    }

    async fn effects(&self, filter: Option<EffectState>) -> Result<Vec<EffectRecord>, StoreError> {
        self.read(|state| {
            state
                .effects
                .values()
                .filter(|record| filter.is_none_or(|wanted| record.state == wanted))
                .cloned()
                .collect()
        })
    }

    async fn resolve_effect(
        &self,
        resolve: ResolveEffect,
        now: Timestamp,
    ) -> Result<EffectRecord, ResolveError> {
        match self.with_txn(|txn| txn::resolve_effect(txn, resolve, now)) {
            Ok(result) => result,
            Err(error) => Err(error.into()),
        }
    }

    async fn receipts(
        &self,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredReceipt>, StoreError> {
        self.read(|state| {
            let start = usize::try_from(after_seq)
                .unwrap_or(usize::MAX)
                .min(state.receipts.len());
            state.receipts[start..]
                .iter()
                .take(limit)
                .cloned()
                .collect()
        })
    }

    async fn revoke_token(
        &self,
        jti: &str,
        by: &str,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let _ = (by, reason, now);
        let mut state = self.state.lock().map_err(|_| StoreError::Internal {
            detail: "the in-memory store is poisoned by an earlier panic".to_owned(),
        })?;
        Ok(state.revoked_tokens.insert(jti.to_owned()))
    }

    async fn token_revoked(&self, jti: &str) -> Result<bool, StoreError> {
        self.read(|state| state.revoked_tokens.contains(jti))
    }

    async fn chain_head(&self) -> Result<Option<ChainHead>, StoreError> {
        self.read(|state| {
            state.receipts.last().map(|last| ChainHead {
                seq: last.seq,
                hash: last.hash.clone(),
            })
        })
    }
}
