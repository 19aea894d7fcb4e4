//! Deliberately broken stores: each wraps a real store and breaks one method, and each must fail
//! the kit case named for it. That is how the kit proves it can fail.
//!
//! Every type here weakens a guarantee on purpose; never use one outside the kit's own tests.

use std::sync::Arc;
use std::time::Duration;

use countersign::effect::{RetryDecision, retry_decision};
use countersign::error::{AnswerError, ResolveError, StoreError};
use countersign::evidence::{self, ChainHead, Receipt, ReceiptDraft, StoredReceipt};
use countersign::store::{
    BeginAttempt, BeginOutcome, BeginRefusal, FinishAttempt, NewApproval, OpenOutcome,
    RecordAnswer, ResolveEffect, Store,
};
use countersign::{
    ApprovalId, ApprovalRecord, ApprovalState, EffectKey, EffectRecord, EffectState, Timestamp,
};

use super::{Fresh, KitError, StoreBackend};

/// Which method is broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Check-then-act: the reservation is decided on a read made before the transaction, and a
    /// refusal from the real store is ignored when that stale read said "free".
    NonAtomicReservation,
    /// The approval take does not check the action hash: an approval for one action authorizes
    /// another.
    UncheckedApprovalHash,
    /// Receipts are appended by reading the head, then writing, without holding the head lock
    /// (the write goes through a second, unlocked path; SQLite only).
    UnlockedChainAppend,
    /// A lapsed lease is released (resolved `failed`) instead of staying ambiguous.
    ReleasedLapsedLease,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 4] = [
        Fault::NonAtomicReservation,
        Fault::UncheckedApprovalHash,
        Fault::UnlockedChainAppend,
        Fault::ReleasedLapsedLease,
    ];

    /// The fixture's name.
    pub fn name(self) -> &'static str {
        match self {
            Fault::NonAtomicReservation => "danger-non-atomic-reservation",
            Fault::UncheckedApprovalHash => "danger-unchecked-approval-hash",
            Fault::UnlockedChainAppend => "danger-unlocked-chain-append",
            Fault::ReleasedLapsedLease => "danger-released-lapsed-lease",
        }
    }

    /// The kit case (`suite/name`) this fault must fail.
    pub fn must_fail(self) -> &'static str {
        match self {
            Fault::NonAtomicReservation => "reservation/one_winner_among_threads",
            Fault::UncheckedApprovalHash => "approvals/binding_to_one_hash",
            Fault::UnlockedChainAppend => "evidence/chain_intact_under_concurrent_writers",
            Fault::ReleasedLapsedLease => {
                "reservation/lapsed_lease_becomes_ambiguous_and_is_never_released"
            }
        }
    }
}

/// A backend whose stores have `fault`. Wraps the SQLite backend (the fault needs a real store
/// with other handles and, for [`Fault::UnlockedChainAppend`], a file to write to directly).
pub struct DangerBrokenBackend {
    inner: Arc<dyn StoreBackend>,
    fault: Fault,
}

impl DangerBrokenBackend {
    /// `inner`'s stores, broken by `fault`.
    pub fn new(inner: Arc<dyn StoreBackend>, fault: Fault) -> DangerBrokenBackend {
        DangerBrokenBackend { inner, fault }
    }

    fn wrap(&self, url: &str, store: Arc<dyn Store>) -> Arc<dyn Store> {
        Arc::new(DangerBrokenStore {
            inner: store,
            fault: self.fault,
            sqlite_path: url
                .strip_prefix("sqlite:")
                .map(|path| path.split('?').next().unwrap_or(path).to_owned()),
        })
    }
}

#[async_trait::async_trait]
impl StoreBackend for DangerBrokenBackend {
    fn name(&self) -> String {
        format!("{} ({})", self.fault.name(), self.inner.name())
    }

    fn cross_process(&self) -> Result<(), String> {
        Err(
            "a broken fixture lives in this process only: worker processes open the real store"
                .to_owned(),
        )
    }

    fn durable(&self) -> Result<(), String> {
        self.inner.durable()
    }

    async fn fresh(&self, case_path: &str) -> Result<Fresh, KitError> {
        let fresh = self.inner.fresh(case_path).await?;
        let store = self.wrap(&fresh.url, Arc::clone(&fresh.store));
        Ok(fresh.with_store(store))
    }

    async fn reopen(&self, fresh: &Fresh) -> Result<Arc<dyn Store>, KitError> {
        let store = self.inner.reopen(fresh).await?;
        Ok(self.wrap(&fresh.url, store))
    }
}

/// A real store with one method broken.
struct DangerBrokenStore {
    inner: Arc<dyn Store>,
    fault: Fault,
    sqlite_path: Option<String>,
}

impl DangerBrokenStore {
    async fn unlocked_append(
        &self,
        draft: ReceiptDraft,
        now: Timestamp,
    ) -> Result<Receipt, StoreError> {
        let Some(path) = &self.sqlite_path else {
            return self.inner.append_receipt(draft, now).await;
        };
        // Read the head, let others run, then write: two writers can read the same head.
        let head = self.inner.chain_head().await?;
        tokio::time::sleep(Duration::from_millis(1)).await;
        let (receipt, stored) =
            evidence::seal(draft, head.as_ref(), now).map_err(|error| StoreError::Corrupt {
                detail: error.to_string(),
            })?;
        let connection = rusqlite::Connection::open(path).map_err(|error| StoreError::Backend {
            message: error.to_string(),
        })?;
        connection
            .busy_timeout(Duration::from_secs(5))
            .map_err(|error| StoreError::Backend {
                message: error.to_string(),
            })?;
        connection
            .execute(
                "INSERT INTO receipts (seq, prev_hash, hash, body) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![
                    stored.seq as i64,
                    stored.prev_hash,
                    stored.hash,
                    stored.body
                ],
            )
            .map_err(|error| StoreError::Backend {
                message: error.to_string(),
            })?;
        Ok(receipt)
    }
}

#[async_trait::async_trait]
impl Store for DangerBrokenStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn lanes(&self) -> u32 {
        self.inner.lanes()
    }

    async fn stray_receipt(&self) -> Result<Option<countersign::store::StrayReceipt>, StoreError> {
        self.inner.stray_receipt().await
    }

    async fn store_now(&self, now: Timestamp) -> Result<Timestamp, StoreError> {
        self.inner.store_now(now).await
    }

    fn shift_clock_for_tests(&self, millis: i64) -> Result<(), StoreError> {
        self.inner.shift_clock_for_tests(millis)
    }

    async fn open_approval(
        &self,
        new: NewApproval,
        now: Timestamp,
    ) -> Result<OpenOutcome, StoreError> {
        self.inner.open_approval(new, now).await
    }

    async fn answer_approval(
        &self,
        answer: RecordAnswer,
        now: Timestamp,
    ) -> Result<ApprovalRecord, AnswerError> {
        self.inner.answer_approval(answer, now).await
    }

    async fn approval(&self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
        self.inner.approval(id).await
    }

    async fn correlated(
        &self,
        correlation: &countersign::approval::Correlation,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.inner.correlated(correlation).await
    }

    async fn approvals(
        &self,
        state: Option<ApprovalState>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.inner.approvals(state).await
    }

    async fn hand_off(
        &self,
        hand_off: countersign::store::HandOff,
        now: Timestamp,
    ) -> Result<countersign::store::HandOffOutcome, StoreError> {
        self.inner.hand_off(hand_off, now).await
    }

    async fn begin_attempt(
        &self,
        mut begin: BeginAttempt,
        now: Timestamp,
    ) -> Result<BeginOutcome, StoreError> {
        match self.fault {
            Fault::NonAtomicReservation => {
                let looked_free = match &begin.effect {
                    Some(claim) => {
                        let current = self.inner.effect(&claim.key).await?;
                        retry_decision(current.as_ref(), now) == RetryDecision::Reserve
                    }
                    None => false,
                };
                tokio::time::sleep(Duration::from_millis(5)).await;
                let outcome = self.inner.begin_attempt(begin, now).await?;
                match outcome {
                    BeginOutcome::Refused {
                        refusal: BeginRefusal::Effect { .. },
                        ..
                    } if looked_free => Ok(BeginOutcome::Started { approval: None }),
                    other => Ok(other),
                }
            }
            Fault::UncheckedApprovalHash => {
                if let Some(presented) = &begin.approval
                    && let Some(record) = self.inner.approval(&presented.id).await?
                {
                    begin.action_hash = record.action_hash;
                }
                self.inner.begin_attempt(begin, now).await
            }
            Fault::ReleasedLapsedLease => {
                let outcome = self.inner.begin_attempt(begin.clone(), now).await?;
                match (&outcome, &begin.effect) {
                    (
                        BeginOutcome::Refused {
                            refusal:
                                BeginRefusal::Effect {
                                    decision: RetryDecision::Ambiguous,
                                    ..
                                },
                            ..
                        },
                        Some(claim),
                    ) => {
                        let resolve = ResolveEffect {
                            key: claim.key.clone(),
                            to: EffectState::Failed,
                            resolver: countersign::store::Resolver::Person {
                                credential: "danger-broken-store".into(),
                                channel: countersign::approver::Channel::Api,
                            },
                            note: None,
                        };
                        if self.inner.resolve_effect(resolve, now).await.is_ok() {
                            return self.inner.begin_attempt(begin, now).await;
                        }
                        Ok(outcome)
                    }
                    _ => Ok(outcome),
                }
            }
            Fault::UnlockedChainAppend => self.inner.begin_attempt(begin, now).await,
        }
    }

    async fn finish_attempt(
        &self,
        finish: FinishAttempt,
        now: Timestamp,
    ) -> Result<Receipt, StoreError> {
        self.inner.finish_attempt(finish, now).await
    }

    async fn append_receipt(
        &self,
        draft: ReceiptDraft,
        now: Timestamp,
    ) -> Result<Receipt, StoreError> {
        match self.fault {
            Fault::UnlockedChainAppend => self.unlocked_append(draft, now).await,
            _ => self.inner.append_receipt(draft, now).await,
        }
    }

    async fn effect(&self, key: &EffectKey) -> Result<Option<EffectRecord>, StoreError> {
        self.inner.effect(key).await
    }

    async fn effects(&self, state: Option<EffectState>) -> Result<Vec<EffectRecord>, StoreError> {
        self.inner.effects(state).await
    }

    async fn resolve_effect(
        &self,
        resolve: ResolveEffect,
        now: Timestamp,
    ) -> Result<EffectRecord, ResolveError> {
        self.inner.resolve_effect(resolve, now).await
    }

    async fn receipts(
        &self,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredReceipt>, StoreError> {
        self.inner.receipts(after_seq, limit).await
    }

    async fn chain_head(&self) -> Result<Option<ChainHead>, StoreError> {
        self.inner.chain_head().await
    }
}
