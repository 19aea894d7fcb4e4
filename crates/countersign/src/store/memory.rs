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
use crate::outbox::{
    ClaimedDelivery, Delivery, DeliveryState, OutboxEvent, Settlement, StoredEvent,
};
use crate::store::txn::{self, Txn};
use crate::store::{
    BeginAttempt, BeginOutcome, DeliveryClaim, FinishAttempt, HandOff, HandOffOutcome, NewApproval,
    OpenOutcome, RecordAnswer, ResolveEffect, Store,
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
    /// Issue #17: the outbox, oldest first, and the next event's `seq`.
    events: Vec<StoredEvent>,
    next_event_seq: u64,
    /// Issue #17: deliveries, in the order they were made (ids from 1).
    deliveries: Vec<MemoryDelivery>,
    next_delivery_id: u64,
}

/// A delivery and the lease on it.
struct MemoryDelivery {
    delivery: Delivery,
    event_seq: u64,
    lease_owner: Option<String>,
    lease_until: Option<Timestamp>,
}

enum Undo {
    InsertedApproval(ApprovalId),
    UpdatedApproval(ApprovalRecord),
    PutEffect(EffectKey, Option<EffectRecord>),
    InsertedReceipt,
    PutCorrelation(Correlation, Option<ApprovalId>),
    InsertedEvent,
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
                Undo::InsertedEvent => {
                    self.state.events.pop();
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

    fn insert_event(&mut self, event: &OutboxEvent) -> Result<(), StoreError> {
        self.state.next_event_seq += 1;
        self.state.events.push(StoredEvent {
            seq: self.state.next_event_seq,
            event: event.clone(),
        });
        self.undo.push(Undo::InsertedEvent);
        Ok(())
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

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, State>, StoreError> {
        self.state.lock().map_err(|_| StoreError::Backend {
            message: "the in-memory store is poisoned by an earlier panic".to_owned(),
        })
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

    async fn expire_approval(
        &self,
        id: &ApprovalId,
        now: Timestamp,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        flatten(self.with_txn(|txn| Ok(txn::expire_approval(txn, id, now))))
    }

    async fn events(&self, after_seq: u64, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        self.read(|state| {
            state
                .events
                .iter()
                .filter(|stored| stored.seq > after_seq)
                .take(limit)
                .cloned()
                .collect()
        })
    }

    async fn claim_deliveries(
        &self,
        claim: DeliveryClaim,
        now: Timestamp,
    ) -> Result<Vec<ClaimedDelivery>, StoreError> {
        let mut state = self.lock()?;
        let state = &mut *state;
        for endpoint in &claim.endpoints {
            for stored in state
                .events
                .iter()
                .filter(|stored| stored.event.created_at >= claim.since)
            {
                let known = state.deliveries.iter().any(|held| {
                    held.event_seq == stored.seq && &held.delivery.endpoint == endpoint
                });
                if !known {
                    state.next_delivery_id += 1;
                    let id = state.next_delivery_id;
                    state.deliveries.push(MemoryDelivery {
                        delivery: Delivery {
                            id,
                            event_id: stored.event.id.clone(),
                            kind: stored.event.kind,
                            request_id: stored.event.request_id.clone(),
                            endpoint: endpoint.clone(),
                            state: DeliveryState::Pending,
                            attempts: 0,
                            next_attempt_at: stored.event.created_at,
                            window_start: stored.event.created_at,
                            last_error: None,
                            delivered_at: None,
                            reference: None,
                            event_at: stored.event.created_at,
                        },
                        event_seq: stored.seq,
                        lease_owner: None,
                        lease_until: None,
                    });
                }
            }
        }
        let mut due: Vec<usize> = (0..state.deliveries.len())
            .filter(|&index| {
                let held = &state.deliveries[index];
                claim.endpoints.contains(&held.delivery.endpoint)
                    && held.delivery.state == DeliveryState::Pending
                    && held.delivery.next_attempt_at <= now
                    && held.lease_until.is_none_or(|until| until <= now)
                    // INVARIANT (request-order): an earlier event of the same request still
                    // pending for this endpoint holds this one back.
                    && !state.deliveries.iter().any(|earlier| {
                        earlier.delivery.endpoint == held.delivery.endpoint
                            && earlier.delivery.request_id == held.delivery.request_id
                            && earlier.event_seq < held.event_seq
                            && earlier.delivery.state == DeliveryState::Pending
                    })
            })
            .collect();
        due.sort_by_key(|&index| (state.deliveries[index].event_seq, index));
        due.truncate(claim.limit);
        let lease_until = now.plus(claim.lease);
        let mut claimed = Vec::new();
        for index in due {
            let held = &mut state.deliveries[index];
            held.lease_owner = Some(claim.owner.clone());
            held.lease_until = Some(lease_until);
            let body = state
                .events
                .iter()
                .find(|stored| stored.seq == held.event_seq)
                .map(|stored| stored.event.body.clone())
                .unwrap_or_default();
            claimed.push(ClaimedDelivery {
                delivery: held.delivery.clone(),
                body,
                lease_until,
            });
        }
        Ok(claimed)
    }

    async fn settle_delivery(
        &self,
        id: u64,
        owner: &str,
        settlement: Settlement,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut state = self.lock()?;
        let Some(held) = state.deliveries.iter_mut().find(|held| {
            held.delivery.id == id
                && held.delivery.state == DeliveryState::Pending
                && held.lease_owner.as_deref() == Some(owner)
        }) else {
            return Ok(false);
        };
        held.lease_owner = None;
        held.lease_until = None;
        held.delivery.attempts = held.delivery.attempts.saturating_add(1);
        match settlement {
            Settlement::Delivered { reference } => {
                held.delivery.state = DeliveryState::Delivered;
                held.delivery.delivered_at = Some(now);
                held.delivery.reference = reference;
            }
            Settlement::Retry { at, error } => {
                held.delivery.next_attempt_at = at;
                held.delivery.last_error = Some(error);
            }
            Settlement::Failed { error } => {
                held.delivery.state = DeliveryState::Failed;
                held.delivery.last_error = Some(error);
            }
        }
        Ok(true)
    }

    async fn deliveries(
        &self,
        filter: Option<DeliveryState>,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        self.read(|state| {
            state
                .deliveries
                .iter()
                .rev()
                .filter(|held| filter.is_none_or(|wanted| held.delivery.state == wanted))
                .take(limit)
                .map(|held| held.delivery.clone())
                .collect()
        })
    }

    async fn delivery_reference(
        &self,
        request_id: &ApprovalId,
        endpoint: &str,
    ) -> Result<Option<String>, StoreError> {
        self.read(|state| {
            let mut found: Vec<&MemoryDelivery> = state
                .deliveries
                .iter()
                .filter(|held| {
                    &held.delivery.request_id == request_id
                        && held.delivery.endpoint == endpoint
                        && held.delivery.reference.is_some()
                })
                .collect();
            found.sort_by_key(|held| held.event_seq);
            found
                .first()
                .and_then(|held| held.delivery.reference.clone())
        })
    }

    async fn redeliver(&self, id: u64, now: Timestamp) -> Result<Option<Delivery>, StoreError> {
        let mut state = self.lock()?;
        Ok(state
            .deliveries
            .iter_mut()
            .find(|held| held.delivery.id == id)
            .map(|held| {
                held.delivery.state = DeliveryState::Pending;
                held.delivery.next_attempt_at = now;
                held.delivery.window_start = now;
                held.lease_owner = None;
                held.lease_until = None;
                held.delivery.clone()
            }))
    }

    async fn prune_outbox(&self, before: Timestamp) -> Result<u64, StoreError> {
        let mut state = self.lock()?;
        let state = &mut *state;
        let deliveries = &state.deliveries;
        let gone: Vec<u64> = state
            .events
            .iter()
            .filter(|stored| {
                stored.event.created_at < before
                    && deliveries.iter().all(|held| {
                        held.event_seq != stored.seq
                            || held.delivery.state == DeliveryState::Delivered
                    })
            })
            .map(|stored| stored.seq)
            .collect();
        state.events.retain(|stored| !gone.contains(&stored.seq));
        state
            .deliveries
            .retain(|held| !gone.contains(&held.event_seq));
        Ok(gone.len() as u64)
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
