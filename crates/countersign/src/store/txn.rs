//! The read-decide-write sequences every embedded backend shares.
//!
//! A backend implements [`Txn`]: plain reads and writes inside one transaction it has already
//! opened (a locked in-memory state, a SQLite `BEGIN IMMEDIATE`). The functions here read, ask
//! the pure decision functions, and write; the backend commits when they return `Ok` and rolls
//! back otherwise. Each function is a pure function of what it reads, so a backend may run it
//! again after a busy database rolled it back.

use crate::approval::{
    AnswerPlan, ApprovalRecord, ApprovalState, OpenPlan, TakePlan, plan_answer, plan_open,
    plan_take,
};
use crate::clock::Timestamp;
use crate::effect::{EffectRecord, EffectState, RetryDecision, resolution_allowed, retry_decision};
use crate::error::{AnswerError, ResolveError, StoreError};
use crate::evidence::{
    self, ChainHead, Receipt, ReceiptDraft, ReceiptKind, ReceiptOutcome, StoredReceipt,
};
use crate::store::{
    BeginAttempt, BeginOutcome, BeginRefusal, FinishAttempt, NewApproval, OpenOutcome,
    RecordAnswer, ResolveEffect,
};
use crate::{ActionHash, ApprovalId, EffectKey};

/// Reads and writes inside one open transaction.
pub trait Txn {
    /// One approval request.
    fn approval(&mut self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError>;
    /// Every approval request bound to `hash`.
    fn approvals_for_hash(&mut self, hash: &ActionHash) -> Result<Vec<ApprovalRecord>, StoreError>;
    /// Insert a new request.
    fn insert_approval(&mut self, record: &ApprovalRecord) -> Result<(), StoreError>;
    /// Overwrite a request's mutable fields (state, answer, consumption).
    fn update_approval(&mut self, record: &ApprovalRecord) -> Result<(), StoreError>;
    /// One effect record.
    fn effect(&mut self, key: &EffectKey) -> Result<Option<EffectRecord>, StoreError>;
    /// Insert or overwrite an effect record.
    fn put_effect(&mut self, record: &EffectRecord) -> Result<(), StoreError>;
    /// Record an attempt's outcome on its effect: if `attempt_id` still holds the record `key`
    /// in `reserved`, move it to `state` with `detail`, updated at `now`, and return true;
    /// otherwise write nothing and return false (compare-and-set).
    ///
    /// The default reads the record and writes it back; a backend may do the same in one
    /// conditional update.
    fn complete_effect(
        &mut self,
        key: &EffectKey,
        attempt_id: &str,
        state: EffectState,
        detail: Option<&str>,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        match self.effect(key)? {
            Some(mut record)
                if record.attempt_id == attempt_id && record.state == EffectState::Reserved =>
            {
                record.state = state;
                record.updated_at = now;
                record.detail = detail.map(str::to_owned);
                self.put_effect(&record)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
    /// The newest receipt.
    fn chain_head(&mut self) -> Result<Option<ChainHead>, StoreError>;
    /// Append a sealed receipt (its `seq` is the head's plus one).
    fn insert_receipt(
        &mut self,
        stored: &StoredReceipt,
        receipt: &Receipt,
    ) -> Result<(), StoreError>;
}

/// Seal `draft` onto the chain and append it.
pub fn append<T: Txn + ?Sized>(
    txn: &mut T,
    draft: ReceiptDraft,
    now: Timestamp,
) -> Result<Receipt, StoreError> {
    let head = txn.chain_head()?;
    let (receipt, stored) =
        evidence::seal(draft, head.as_ref(), now).map_err(|error| StoreError::Corrupt {
            detail: format!("unsealable receipt: {error}"),
        })?;
    txn.insert_receipt(&stored, &receipt)?;
    Ok(receipt)
}

/// The receipt for a change to an approval request.
pub(crate) fn approval_draft(
    record: &ApprovalRecord,
    kind: ReceiptKind,
    outcome: ReceiptOutcome,
    reason: &str,
) -> ReceiptDraft {
    ReceiptDraft {
        kind: Some(kind),
        outcome: Some(outcome),
        reason: Some(reason.to_owned()),
        action: Some(record.action.clone()),
        action_hash: Some(record.action_hash.as_str().to_owned()),
        principal: Some(record.principal.clone()),
        resource: record.resource.clone(),
        environment: Some(record.environment.clone()),
        effect_key: record.effect_key.clone(),
        arguments: Some(record.arguments.clone()),
        approval_id: Some(record.id.as_str().to_owned()),
        approver: record.approver.clone(),
        note: record.note.clone(),
        policy_hash: Some(record.policy_hash.clone()),
        ..ReceiptDraft::default()
    }
}

/// Move a request to `expired` or `void`, with its receipt.
fn mark_approval<T: Txn + ?Sized>(
    txn: &mut T,
    mut record: ApprovalRecord,
    state: ApprovalState,
    now: Timestamp,
) -> Result<ApprovalRecord, StoreError> {
    record.state = state;
    txn.update_approval(&record)?;
    let (kind, outcome, reason) = match state {
        ApprovalState::Void => (
            ReceiptKind::ApprovalVoided,
            ReceiptOutcome::Voided,
            "policy_changed",
        ),
        _ => (
            ReceiptKind::ApprovalExpired,
            ReceiptOutcome::Expired,
            "expired",
        ),
    };
    append(txn, approval_draft(&record, kind, outcome, reason), now)?;
    Ok(record)
}

/// Record that a lapsed lease left an effect ambiguous, with its receipt.
fn mark_lease_expired<T: Txn + ?Sized>(
    txn: &mut T,
    mut record: EffectRecord,
    now: Timestamp,
) -> Result<EffectRecord, StoreError> {
    record.state = EffectState::Ambiguous;
    record.updated_at = now;
    record.detail = Some(format!(
        "the lease of attempt {} lapsed at {} with no outcome recorded",
        record.attempt_id, record.lease_until
    ));
    txn.put_effect(&record)?;
    let draft = ReceiptDraft {
        kind: Some(ReceiptKind::LeaseExpired),
        outcome: Some(ReceiptOutcome::Ambiguous),
        reason: Some("lease_expired".to_owned()),
        attempt_id: Some(record.attempt_id.clone()),
        action_hash: Some(record.action_hash.clone()),
        effect_key: Some(record.key.as_str().to_owned()),
        detail: record.detail.clone(),
        ..ReceiptDraft::default()
    };
    append(txn, draft, now)?;
    Ok(record)
}

/// [`crate::Store::open_approval`].
pub fn open_approval<T: Txn + ?Sized>(
    txn: &mut T,
    new: NewApproval,
    now: Timestamp,
) -> Result<OpenOutcome, StoreError> {
    if let Some(key) = &new.effect_key {
        let current = txn.effect(key)?;
        match retry_decision(current.as_ref(), now) {
            RetryDecision::Reserve => {}
            RetryDecision::LeaseExpired => {
                let record = current.ok_or_else(|| StoreError::Corrupt {
                    detail: "lease decision without a record".to_owned(),
                })?;
                let record = mark_lease_expired(txn, record, now)?;
                return Ok(OpenOutcome::EffectRefused {
                    decision: RetryDecision::Ambiguous,
                    record,
                });
            }
            decision => {
                let record = current.ok_or_else(|| StoreError::Corrupt {
                    detail: "refusal without a record".to_owned(),
                })?;
                return Ok(OpenOutcome::EffectRefused { decision, record });
            }
        }
    }
    let existing = txn.approvals_for_hash(&new.record.action_hash)?;
    let (plan, marks) = plan_open(&existing, &new.record.entry_fingerprint, now);
    for (id, state) in marks {
        if let Some(record) = existing.iter().find(|record| record.id == id) {
            mark_approval(txn, record.clone(), state, now)?;
        }
    }
    let find = |id: &ApprovalId| {
        existing
            .iter()
            .find(|record| &record.id == id)
            .cloned()
            .ok_or_else(|| StoreError::Corrupt {
                detail: format!("approval {id} vanished"),
            })
    };
    Ok(match plan {
        OpenPlan::UseGranted(id) => OpenOutcome::Granted(find(&id)?),
        OpenPlan::Existing(id) => OpenOutcome::Pending {
            record: find(&id)?,
            created: false,
        },
        OpenPlan::Denied(id) => OpenOutcome::Denied(find(&id)?),
        OpenPlan::Create => {
            txn.insert_approval(&new.record)?;
            OpenOutcome::Pending {
                record: new.record,
                created: true,
            }
        }
    })
}

/// [`crate::Store::answer_approval`]. Returns the stored request after the answer.
pub fn answer_approval<T: Txn + ?Sized>(
    txn: &mut T,
    answer: RecordAnswer,
    now: Timestamp,
) -> Result<Result<ApprovalRecord, AnswerError>, StoreError> {
    let Some(mut record) = txn.approval(&answer.request_id)? else {
        return Ok(Err(AnswerError::Unknown {
            request_id: answer.request_id,
        }));
    };
    match plan_answer(&record, answer.decision, &answer.approver, now) {
        AnswerPlan::Apply => {
            record.state = answer.decision.state();
            record.answered_at = Some(now);
            record.approver = Some(answer.approver);
            record.note = answer.note;
            txn.update_approval(&record)?;
            let (outcome, reason) = match record.state {
                ApprovalState::Granted => (ReceiptOutcome::Granted, "approved"),
                _ => (ReceiptOutcome::Denied, "rejected"),
            };
            append(
                txn,
                approval_draft(&record, ReceiptKind::Answer, outcome, reason),
                now,
            )?;
            Ok(Ok(record))
        }
        AnswerPlan::Repeat => Ok(Ok(record)),
        AnswerPlan::AlreadyDecided { state } => Ok(Err(AnswerError::AlreadyDecided {
            request_id: record.id,
            state,
            approver: record.approver,
        })),
        AnswerPlan::Expire => {
            let record = mark_approval(txn, record, ApprovalState::Expired, now)?;
            Ok(Err(AnswerError::Expired {
                request_id: record.id,
                expires_at: record.expires_at,
            }))
        }
        AnswerPlan::SelfApproval => Ok(Err(AnswerError::SelfApproval {
            request_id: record.id.clone(),
            approver: answer.approver.clone(),
        })),
        AnswerPlan::Expired => Ok(Err(AnswerError::Expired {
            request_id: record.id,
            expires_at: record.expires_at,
        })),
    }
}

/// [`crate::Store::begin_attempt`].
///
/// Returns `Ok(Err(..))` for a refusal whose marks and receipt must be committed, and never
/// leaves a consumed approval behind a refused reservation: the reservation is checked before
/// anything is consumed.
pub fn begin_attempt<T: Txn + ?Sized>(
    txn: &mut T,
    begin: BeginAttempt,
    now: Timestamp,
) -> Result<BeginOutcome, StoreError> {
    let refuse = |txn: &mut T, refusal: BeginRefusal| -> Result<BeginOutcome, StoreError> {
        let mut draft = begin
            .refusal_draft
            .clone()
            .with_outcome(ReceiptOutcome::Refused, Some(refusal.reason()));
        if let BeginRefusal::Approval {
            record: Some(record),
            ..
        } = &refusal
        {
            draft.approval_id = Some(record.id.as_str().to_owned());
            draft.approver = record.approver.clone();
            draft.note = record.note.clone();
            draft.approval_policy_hash = Some(record.policy_hash.clone());
        }
        let receipt = append(txn, draft, now)?;
        Ok(BeginOutcome::Refused {
            refusal,
            receipt: Box::new(receipt),
        })
    };

    // 1. The approval: may it be consumed?
    let mut to_consume = None;
    if let Some(presented) = &begin.approval {
        let record = txn.approval(&presented.id)?;
        match plan_take(
            record.as_ref(),
            &begin.action_hash,
            &presented.fingerprint,
            now,
        ) {
            TakePlan::Consume => to_consume = record,
            TakePlan::Refuse { refusal, mark } => {
                let record = match (record, mark) {
                    (Some(record), Some(state)) => Some(mark_approval(txn, record, state, now)?),
                    (record, _) => record,
                };
                return refuse(txn, BeginRefusal::Approval { refusal, record });
            }
        }
    }

    // 2. The effect key: may it be reserved? (Checked before anything is consumed, so a refused
    //    reservation leaves the approval granted.)
    let mut attempts = 1;
    if let Some(claim) = &begin.effect {
        let current = txn.effect(&claim.key)?;
        match retry_decision(current.as_ref(), now) {
            RetryDecision::Reserve => {
                attempts = current
                    .as_ref()
                    .map_or(1, |record| record.attempts.saturating_add(1));
            }
            RetryDecision::LeaseExpired => {
                let record = current.ok_or_else(|| StoreError::Corrupt {
                    detail: "lease decision without a record".to_owned(),
                })?;
                let record = mark_lease_expired(txn, record, now)?;
                return refuse(
                    txn,
                    BeginRefusal::Effect {
                        decision: RetryDecision::Ambiguous,
                        record,
                    },
                );
            }
            decision => {
                let record = current.ok_or_else(|| StoreError::Corrupt {
                    detail: "refusal without a record".to_owned(),
                })?;
                return refuse(txn, BeginRefusal::Effect { decision, record });
            }
        }
    }

    // 3. Consume and reserve.
    let consumed = match to_consume {
        Some(mut record) => {
            record.state = ApprovalState::Consumed;
            record.consumed_at = Some(now);
            record.consumed_by = Some(begin.attempt_id.clone());
            txn.update_approval(&record)?;
            Some(record)
        }
        None => None,
    };
    if let Some(claim) = begin.effect {
        txn.put_effect(&EffectRecord {
            key: claim.key,
            state: EffectState::Reserved,
            action_hash: begin.action_hash.as_str().to_owned(),
            attempt_id: begin.attempt_id.clone(),
            attempts,
            lease_until: claim.lease_until,
            updated_at: now,
            resolved_by: None,
            detail: None,
        })?;
    }
    Ok(BeginOutcome::Started { approval: consumed })
}

/// [`crate::Store::finish_attempt`].
pub fn finish_attempt<T: Txn + ?Sized>(
    txn: &mut T,
    finish: FinishAttempt,
    now: Timestamp,
) -> Result<Receipt, StoreError> {
    let mut draft = finish.draft;
    if let Some(key) = &finish.effect_key
        && !txn.complete_effect(
            key,
            &finish.attempt_id,
            finish.state,
            finish.detail.as_deref(),
            now,
        )?
    {
        match txn.effect(key)? {
            Some(record) => {
                // INVARIANT (no-release): a record this attempt no longer holds is never
                // overwritten; the receipt says what this attempt saw.
                let note = format!(
                    "this attempt's lease lapsed before its outcome was recorded; the effect stays `{}`",
                    record.state
                );
                draft.detail = Some(match draft.detail.take() {
                    Some(detail) => format!("{detail}; {note}"),
                    None => note,
                });
            }
            None => {
                return Err(StoreError::Corrupt {
                    detail: format!(
                        "effect `{key}` reserved by {} is missing",
                        finish.attempt_id
                    ),
                });
            }
        }
    }
    append(txn, draft, now)
}

/// [`crate::Store::resolve_effect`].
pub fn resolve_effect<T: Txn + ?Sized>(
    txn: &mut T,
    resolve: ResolveEffect,
    now: Timestamp,
) -> Result<Result<EffectRecord, ResolveError>, StoreError> {
    let Some(mut record) = txn.effect(&resolve.key)? else {
        return Ok(Err(ResolveError::Refused {
            effect_key: resolve.key,
            refusal: crate::effect::ResolveRefusal::Unknown,
        }));
    };
    if let Err(refusal) = resolution_allowed(&record, resolve.to, now) {
        return Ok(Err(ResolveError::Refused {
            effect_key: resolve.key,
            refusal,
        }));
    }
    record.state = resolve.to;
    record.updated_at = now;
    record.resolved_by = Some(resolve.resolver.clone());
    record.detail = resolve.note.clone();
    txn.put_effect(&record)?;
    let outcome = match resolve.to {
        EffectState::Committed => ReceiptOutcome::Committed,
        _ => ReceiptOutcome::Failed,
    };
    let draft = ReceiptDraft {
        kind: Some(ReceiptKind::Resolution),
        outcome: Some(outcome),
        reason: Some("resolved".to_owned()),
        attempt_id: Some(record.attempt_id.clone()),
        action_hash: Some(record.action_hash.clone()),
        effect_key: Some(record.key.as_str().to_owned()),
        approver: Some(resolve.resolver),
        note: resolve.note,
        ..ReceiptDraft::default()
    };
    append(txn, draft, now)?;
    Ok(Ok(record))
}
