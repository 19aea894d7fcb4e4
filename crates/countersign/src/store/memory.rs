//! The in-memory store: one process, nothing on disk. For tests, examples and benchmarks of the
//! kernel's own overhead.
//!
//! Each operation holds one mutex for its whole plan ([`crate::store::plan`]): it reads from
//! the maps, checks every write's expected prior state, then applies them all, so an operation
//! that fails leaves nothing behind.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::ActionHash;
use crate::approval::{ApprovalId, ApprovalRecord, ApprovalState, Correlation};
use crate::clock::Timestamp;
use crate::effect::{EffectKey, EffectRecord, EffectState};
use crate::error::{AnswerError, ResolveError, StoreError};
use crate::evidence::{ChainHead, Receipt, ReceiptDraft, StoredReceipt};
use crate::outbox::{ClaimedDelivery, Delivery, DeliveryState, Settlement, StoredEvent};
use crate::store::plan::{
    self, ApprovalVersion, Done, EffectVersion, Fetched, Operation, Read, Write,
};
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

impl State {
    /// One read of a plan (see [`crate::store::plan`]).
    fn fetch(&self, read: &Read) -> Fetched {
        match read {
            Read::Approval(id) => Fetched::Approval(id.clone(), self.approvals.get(id).cloned()),
            Read::ApprovalsForHash(hash) => {
                let ids = self
                    .by_hash
                    .get(hash)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let records = ids
                    .iter()
                    .filter_map(|id| self.approvals.get(id).cloned())
                    .collect();
                Fetched::ApprovalsForHash(hash.clone(), records)
            }
            Read::Correlation(correlation) => Fetched::Correlation(
                correlation.clone(),
                self.correlations.get(correlation).cloned(),
            ),
            Read::Effect(key) => Fetched::Effect(key.clone(), self.effects.get(key).cloned()),
            Read::EffectHolder(key) => {
                Fetched::EffectHolder(key.clone(), self.effects.get(key).map(EffectVersion::of))
            }
            Read::TokenRevoked(jti) => {
                Fetched::TokenRevoked(jti.clone(), self.revoked_tokens.contains(jti))
            }
        }
    }

    fn head(&self) -> Option<ChainHead> {
        self.receipts.last().map(|last| ChainHead {
            seq: last.seq,
            hash: last.hash.clone(),
        })
    }

    /// Is the row `write` changes still in the state it expects? (Checked for every write of a
    /// plan before any is applied, so a plan is applied whole or not at all.)
    fn check(&self, write: &Write) -> Result<(), StoreError> {
        let holds = match write {
            Write::InsertApproval(record) => !self.approvals.contains_key(&record.id),
            Write::UpdateApproval { record, expected } => self
                .approvals
                .get(&record.id)
                .is_some_and(|current| &ApprovalVersion::of(current) == expected),
            Write::PutCorrelation(mapping) => {
                mapping.replace || !self.correlations.contains_key(&mapping.correlation)
            }
            Write::ReserveEffect { record, expected } => {
                self.effects.get(&record.key).map(EffectVersion::of) == *expected
            }
            Write::SettleEffect(settlement) => self
                .effects
                .get(&settlement.key)
                .is_some_and(|current| EffectVersion::of(current) == settlement.expected),
        };
        if holds {
            Ok(())
        } else {
            Err(StoreError::Corrupt {
                detail: format!(
                    "the in-memory store changed under its own lock: {write:?} does not hold"
                ),
            })
        }
    }

    /// Apply one checked write.
    fn apply(&mut self, write: Write) {
        match write {
            Write::InsertApproval(record) => {
                self.approval_order.push(record.id.clone());
                self.by_hash
                    .entry(record.action_hash.clone())
                    .or_default()
                    .push(record.id.clone());
                self.approvals.insert(record.id.clone(), record);
            }
            Write::UpdateApproval { record, .. } => {
                self.approvals.insert(record.id.clone(), record);
            }
            Write::PutCorrelation(mapping) => {
                self.correlations.insert(mapping.correlation, mapping.id);
            }
            Write::ReserveEffect { record, .. } => {
                self.effects.insert(record.key.clone(), record);
            }
            Write::SettleEffect(settlement) => {
                if let Some(record) = self.effects.get_mut(&settlement.key) {
                    settlement.apply(record);
                }
            }
        }
    }

    /// Plan `operation` over this state and apply it whole.
    fn run(&mut self, operation: &Operation, now: plan::Now) -> Result<Done, StoreError> {
        let plan = plan::plan_with(operation, now, |read| Ok::<_, StoreError>(self.fetch(read)))?;
        let head = if plan.has_receipts() {
            self.head()
        } else {
            None
        };
        let sealed = plan.seal(head)?;
        for write in &sealed.writes {
            self.check(write)?;
        }
        for write in sealed.writes {
            self.apply(write);
        }
        for event in sealed.events {
            self.next_event_seq += 1;
            self.events.push(StoredEvent {
                seq: self.next_event_seq,
                event,
            });
        }
        // One lane: each receipt's place in the log is its `seq`.
        self.receipts
            .extend(sealed.receipts.into_iter().map(|mut receipt| {
                receipt.position = receipt.seq;
                receipt
            }));
        Ok(sealed.done)
    }
}

/// The in-memory store. Cheap to create; everything is lost when it is dropped.
#[derive(Default)]
pub struct MemoryStore {
    state: Mutex<State>,
    /// A test's clock offset ([`Store::shift_clock_for_tests`]).
    offset: crate::store::clock::TestOffset,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// Run one operation: plan it and apply it under the store's one lock.
    fn run(&self, operation: Operation, now: Timestamp) -> Result<Done, StoreError> {
        // One host, one clock: the caller's `now` is the store's time (issue #22), moved only
        // by a test's offset.
        let judged = self.offset.apply(now);
        let operation = if judged == now {
            operation
        } else {
            crate::store::clock::rebase(&operation, now, judged)
        };
        // A poisoned lock means a panic inside an operation: refuse rather than continue on
        // doubtful state.
        self.lock()?.run(
            &operation,
            plan::Now {
                store: judged,
                caller: now,
            },
        )
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

#[async_trait::async_trait]
impl Store for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn store_now(&self, now: Timestamp) -> Result<Timestamp, StoreError> {
        Ok(self.offset.apply(now))
    }

    fn shift_clock_for_tests(&self, millis: i64) -> Result<(), StoreError> {
        self.offset.shift(millis);
        Ok(())
    }

    async fn open_approval(
        &self,
        new: NewApproval,
        now: Timestamp,
    ) -> Result<OpenOutcome, StoreError> {
        self.run(Operation::Open(new), now)?.opened()
    }

    async fn answer_approval(
        &self,
        answer: RecordAnswer,
        now: Timestamp,
    ) -> Result<ApprovalRecord, AnswerError> {
        self.run(Operation::Answer(answer), now)?.answered()
    }

    async fn withdraw_approval(
        &self,
        withdrawal: crate::approval::withdraw::Withdrawal,
        now: Timestamp,
    ) -> Result<ApprovalRecord, AnswerError> {
        self.run(Operation::Withdraw(withdrawal), now)?.answered()
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
        self.run(Operation::Begin(begin), now)?.begun()
    }

    async fn finish_attempt(
        &self,
        finish: FinishAttempt,
        now: Timestamp,
    ) -> Result<Receipt, StoreError> {
        self.run(Operation::Finish(finish), now)?.receipt()
    }

    async fn hand_off(
        &self,
        hand_off: HandOff,
        now: Timestamp,
    ) -> Result<HandOffOutcome, StoreError> {
        self.run(Operation::HandOff(hand_off), now)?.handed_off()
    }

    async fn append_receipt(
        &self,
        draft: ReceiptDraft,
        now: Timestamp,
    ) -> Result<Receipt, StoreError> {
        self.run(Operation::Append(draft), now)?.receipt()
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
        self.run(Operation::Resolve(resolve), now)?.resolved()
    }

    async fn receipts(&self, after: u64, limit: usize) -> Result<Vec<StoredReceipt>, StoreError> {
        self.read(|state| {
            let start = usize::try_from(after)
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
        self.run(Operation::Expire(id.clone()), now)?.expired()
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
        let caller_lease_until = now.plus(claim.lease);
        let now = self.offset.apply(now);
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
                lease_until: caller_lease_until,
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
        let settlement = crate::store::clock::settlement(settlement, now, self.offset.apply(now));
        let now = self.offset.apply(now);
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
                held.delivery.last_error = None;
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
                    held.delivery.request_id.as_ref() == Some(request_id)
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
        let now = self.offset.apply(now);
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
        self.read(State::head)
    }

    async fn append_event(&self, event: &crate::outbox::OutboxEvent) -> Result<(), StoreError> {
        let mut state = self.lock()?;
        state.next_event_seq += 1;
        let seq = state.next_event_seq;
        state.events.push(StoredEvent {
            seq,
            event: event.clone(),
        });
        Ok(())
    }

    async fn last_event(
        &self,
        kind: crate::outbox::EventKind,
    ) -> Result<Option<StoredEvent>, StoreError> {
        self.read(|state| {
            state
                .events
                .iter()
                .rev()
                .find(|stored| stored.event.kind == kind)
                .cloned()
        })
    }
}
