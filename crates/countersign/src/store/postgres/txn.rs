//! The read-decide-write sequences of the PostgreSQL store: function by function the parallel
//! of [`crate::store::txn`], asynchronous, over `PgTxn` (`store/postgres/sql.rs`).
//!
//! Keep the two files in step: each function here reads what its twin reads, asks the same pure
//! decision function, and writes what its twin writes. A run that returns
//! `PgFailure::Retry` is rolled back and run again from the start (each function is a pure
//! function of what it reads, so that is safe).

use crate::ApprovalId;
use crate::approval::{ApprovalRecord, ApprovalState, OpenPlan, TakePlan, plan_open, plan_take};
use crate::clock::Timestamp;
use crate::effect::{EffectRecord, EffectState, RetryDecision, retry_decision};
use crate::error::{AnswerError, ResolveError, StoreError};
use crate::evidence::{self, Receipt, ReceiptDraft, ReceiptKind, ReceiptOutcome};
use crate::outbox::{EventKind, approval_event};
use crate::store::outbox::{due_for_expiry, withdrawal_event};
use crate::store::postgres::{PgFailure, PgTxn};
use crate::store::txn::{
    AnswerStep, ResolveStep, answer_step, approval_draft, correlated_outcome, effect_draft,
    record_consumed, reservation, resolve_step,
};
use crate::store::{
    BeginAttempt, BeginOutcome, BeginRefusal, FinishAttempt, HandOff, HandOffOutcome, NewApproval,
    OpenOutcome, RecordAnswer, ResolveEffect,
};

/// One store operation, kept whole so a conflicted run can be run again.
// One value per store call, moved once: boxing the attempt would cost an allocation per call
// for no saving.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Operation {
    OpenApproval(NewApproval),
    AnswerApproval(RecordAnswer),
    BeginAttempt(BeginAttempt),
    FinishAttempt(FinishAttempt),
    HandOff(HandOff),
    Append(ReceiptDraft),
    ResolveEffect(ResolveEffect),
    Withdraw(crate::approval::withdraw::Withdrawal),
    Expire(ApprovalId),
}

impl Operation {
    /// Its name, for [`StoreError::OutcomeUnknown`].
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Operation::OpenApproval(_) => "open_approval",
            Operation::AnswerApproval(_) => "answer_approval",
            Operation::BeginAttempt(_) => "begin_attempt",
            Operation::FinishAttempt(_) => "finish_attempt",
            Operation::HandOff(_) => "hand_off",
            Operation::Append(_) => "append_receipt",
            Operation::ResolveEffect(_) => "resolve_effect",
            Operation::Withdraw(_) => "withdraw_approval",
            Operation::Expire(_) => "expire_approval",
        }
    }
}

/// What an operation returned (committed whatever it is: refusals carry marks and receipts).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Done {
    Opened(OpenOutcome),
    Answered(Result<ApprovalRecord, AnswerError>),
    Begun(BeginOutcome),
    HandedOff(HandOffOutcome),
    Receipt(Box<Receipt>),
    Resolved(Result<EffectRecord, ResolveError>),
    Expired(Option<ApprovalRecord>),
}

/// The error for a result of the wrong shape (a bug of ours).
pub(crate) fn wrong_result() -> StoreError {
    StoreError::Internal {
        detail: "the PostgreSQL store returned the wrong result for an operation".to_owned(),
    }
}

/// Run one operation in `txn`.
pub(crate) async fn run(
    txn: &mut PgTxn,
    operation: &Operation,
    now: Timestamp,
) -> Result<Done, PgFailure> {
    Ok(match operation {
        Operation::OpenApproval(new) => Done::Opened(open_approval(txn, new.clone(), now).await?),
        Operation::AnswerApproval(answer) => {
            Done::Answered(answer_approval(txn, answer.clone(), now).await?)
        }
        Operation::BeginAttempt(begin) => {
            Done::Begun(begin_attempt(txn, begin.clone(), now).await?)
        }
        Operation::FinishAttempt(finish) => {
            Done::Receipt(Box::new(finish_attempt(txn, finish.clone(), now).await?))
        }
        Operation::HandOff(hand_off) => {
            Done::HandedOff(self::hand_off(txn, hand_off.clone(), now).await?)
        }
        Operation::Append(draft) => Done::Receipt(Box::new(append(txn, draft.clone(), now).await?)),
        Operation::ResolveEffect(resolve) => {
            Done::Resolved(resolve_effect(txn, resolve.clone(), now).await?)
        }
        Operation::Withdraw(withdrawal) => {
            Done::Answered(withdraw_approval(txn, withdrawal.clone(), now).await?)
        }
        Operation::Expire(id) => Done::Expired(expire_approval(txn, id, now).await?),
    })
}

/// Seal `draft` onto the chain and append it (the head stays locked until commit).
pub(crate) async fn append(
    txn: &mut PgTxn,
    draft: ReceiptDraft,
    now: Timestamp,
) -> Result<Receipt, PgFailure> {
    let head = txn.chain_head().await?;
    let (receipt, stored) =
        evidence::seal(draft, head.as_ref(), now).map_err(|error| StoreError::Corrupt {
            detail: format!("unsealable receipt: {error}"),
        })?;
    txn.insert_receipt(&stored, &receipt).await?;
    Ok(receipt)
}

/// Write the outbox event `kind` for `record` as it now stands: the twin of `announce`.
async fn announce(
    txn: &mut PgTxn,
    record: &ApprovalRecord,
    kind: EventKind,
    now: Timestamp,
) -> Result<(), PgFailure> {
    txn.insert_event(&approval_event(record, kind, now)).await
}

/// Move a request to `expired` or `void`, with its receipt.
async fn mark_approval(
    txn: &mut PgTxn,
    mut record: ApprovalRecord,
    state: ApprovalState,
    now: Timestamp,
) -> Result<ApprovalRecord, PgFailure> {
    record.state = state;
    txn.update_approval(&record).await?;
    let event = match state {
        ApprovalState::Void => EventKind::Voided,
        _ => EventKind::Expired,
    };
    announce(txn, &record, event, now).await?;
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
    append(txn, approval_draft(&record, kind, outcome, reason), now).await?;
    Ok(record)
}

/// Record that a lapsed lease left an effect ambiguous, with its receipt.
async fn mark_lease_expired(
    txn: &mut PgTxn,
    mut record: EffectRecord,
    now: Timestamp,
) -> Result<EffectRecord, PgFailure> {
    record.state = EffectState::Ambiguous;
    record.updated_at = now;
    record.detail = Some(format!(
        "the lease of attempt {} lapsed at {} with no outcome recorded",
        record.attempt_id, record.lease_until
    ));
    txn.put_effect(&record).await?;
    let approval = consumed_approval(txn, &record).await?;
    let draft = effect_draft(
        &record,
        approval.as_ref(),
        ReceiptKind::LeaseExpired,
        ReceiptOutcome::Ambiguous,
        "lease_expired",
    );
    append(txn, draft, now).await?;
    Ok(record)
}

/// The approval an effect record's attempt consumed, if its context names one.
async fn consumed_approval(
    txn: &mut PgTxn,
    record: &EffectRecord,
) -> Result<Option<ApprovalRecord>, PgFailure> {
    match record
        .attempt
        .as_ref()
        .and_then(|context| context.approval_id.as_deref())
    {
        Some(id) => txn.approval(&ApprovalId::from_stored(id.to_owned())).await,
        None => Ok(None),
    }
}

/// [`crate::Store::open_approval`].
pub(crate) async fn open_approval(
    txn: &mut PgTxn,
    new: NewApproval,
    now: Timestamp,
) -> Result<OpenOutcome, PgFailure> {
    if let Some(key) = &new.effect_key {
        let current = txn.effect(key).await?;
        match retry_decision(current.as_ref(), now) {
            RetryDecision::Reserve => {}
            RetryDecision::LeaseExpired => {
                let record = current.ok_or_else(|| StoreError::Corrupt {
                    detail: "lease decision without a record".to_owned(),
                })?;
                let record = mark_lease_expired(txn, record, now).await?;
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
    let mapped = match &new.correlation {
        Some(correlation) => match txn.correlation(correlation).await? {
            Some(id) => txn.approval(&id).await?,
            None => None,
        },
        None => None,
    };
    let remap = mapped.is_some();
    if let Some(record) = mapped
        && let Some(outcome) = correlated_outcome(record, &new, now)
    {
        return Ok(outcome);
    }
    let existing = txn.approvals_for_hash(&new.record.action_hash).await?;
    let (plan, marks) = plan_open(
        &existing,
        &new.record.entry_fingerprint,
        new.record.run.as_deref(),
        new.correlation.is_none(),
        now,
    );
    for (id, state) in marks {
        if let Some(record) = existing.iter().find(|record| record.id == id) {
            mark_approval(txn, record.clone(), state, now).await?;
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
            txn.insert_approval(&new.record).await?;
            announce(txn, &new.record, EventKind::Opened, now).await?;
            if let Some(correlation) = &new.correlation {
                txn.put_correlation(correlation, &new.record.id, remap)
                    .await?;
            }
            OpenOutcome::Pending {
                record: new.record,
                created: true,
            }
        }
    })
}

/// [`crate::Store::answer_approval`]. Returns the stored request after the answer.
pub(crate) async fn answer_approval(
    txn: &mut PgTxn,
    answer: RecordAnswer,
    now: Timestamp,
) -> Result<Result<ApprovalRecord, AnswerError>, PgFailure> {
    let record = txn.approval(&answer.request_id).await?;
    let revoked = match crate::store::txn::credential_jti(&answer.approver) {
        Some(jti) if txn.token_revoked(&jti).await? => Some(jti),
        _ => None,
    };
    let step = match revoked {
        Some(jti) => {
            let (error, receipt) = crate::store::txn::revoked_token_refusal(
                record,
                answer.request_id,
                &answer.channel,
                &jti,
            );
            AnswerStep::Refuse { error, receipt }
        }
        None => answer_step(record, answer, now),
    };
    match step {
        AnswerStep::Write { record, receipt } => {
            txn.update_approval(&record).await?;
            announce(txn, &record, EventKind::Answered, now).await?;
            append(txn, receipt, now).await?;
            Ok(Ok(record))
        }
        AnswerStep::Repeat(record) => Ok(Ok(record)),
        AnswerStep::Expire { record, error } => {
            mark_approval(txn, record, ApprovalState::Expired, now).await?;
            Ok(Err(error))
        }
        AnswerStep::Refuse { error, receipt } => {
            if let Some(receipt) = receipt {
                append(txn, receipt, now).await?;
            }
            Ok(Err(error))
        }
    }
}

/// [`crate::Store::expire_approval`]: the twin of [`crate::store::txn::expire_approval`].
pub(crate) async fn expire_approval(
    txn: &mut PgTxn,
    id: &ApprovalId,
    now: Timestamp,
) -> Result<Option<ApprovalRecord>, PgFailure> {
    match txn.approval(id).await? {
        Some(record) if due_for_expiry(&record, now) => Ok(Some(
            mark_approval(txn, record, ApprovalState::Expired, now).await?,
        )),
        _ => Ok(None),
    }
}

/// [`crate::Store::withdraw_approval`]: the twin of [`crate::store::txn::withdraw_approval`].
pub(crate) async fn withdraw_approval(
    txn: &mut PgTxn,
    withdrawal: crate::approval::withdraw::Withdrawal,
    now: Timestamp,
) -> Result<Result<ApprovalRecord, AnswerError>, PgFailure> {
    use crate::store::withdraw::{WithdrawStep, withdraw_step};
    let record = txn.approval(&withdrawal.request_id).await?;
    if let Some((approver, channel)) = withdrawal.kind.credential()
        && let Some(jti) = crate::store::txn::credential_jti(approver)
        && txn.token_revoked(&jti).await?
    {
        let (error, receipt) = crate::store::txn::revoked_token_refusal(
            record,
            withdrawal.request_id.clone(),
            channel,
            &jti,
        );
        if let Some(mut receipt) = receipt {
            receipt.kind = Some(match withdrawal.kind {
                crate::approval::withdraw::WithdrawalKind::Revoke { .. } => {
                    ReceiptKind::ApprovalRevoked
                }
                _ => ReceiptKind::ApprovalCancelled,
            });
            append(txn, receipt, now).await?;
        }
        return Ok(Err(error));
    }
    match withdraw_step(record, withdrawal, now) {
        WithdrawStep::Write { record, receipt } => {
            txn.update_approval(&record).await?;
            announce(txn, &record, withdrawal_event(&record), now).await?;
            append(txn, receipt, now).await?;
            Ok(Ok(record))
        }
        WithdrawStep::Repeat(record) => Ok(Ok(record)),
        WithdrawStep::Expire { record, error } => {
            mark_approval(txn, record, ApprovalState::Expired, now).await?;
            Ok(Err(error))
        }
        WithdrawStep::Refuse { error, receipt } => {
            if let Some(receipt) = receipt {
                append(txn, receipt, now).await?;
            }
            Ok(Err(error))
        }
    }
}

/// Write the refusal receipt of [`begin_attempt`] (the closure `refuse` of its twin).
async fn refuse(
    txn: &mut PgTxn,
    begin: &BeginAttempt,
    refusal: BeginRefusal,
    now: Timestamp,
) -> Result<BeginOutcome, PgFailure> {
    let mut draft = begin
        .refusal_draft
        .clone()
        .with_outcome(ReceiptOutcome::Refused, Some(refusal.reason()));
    if let BeginRefusal::Approval {
        record: Some(record),
        ..
    } = &refusal
    {
        draft.approval_id = Some(record.id.clone());
        draft.approver = record.approver.clone();
        draft.note = record.note.clone();
        draft.approval_policy_hash = Some(record.policy_hash.clone());
    }
    let receipt = append(txn, draft, now).await?;
    Ok(BeginOutcome::Refused {
        refusal,
        receipt: Box::new(receipt),
    })
}

/// [`crate::Store::begin_attempt`]: the reservation is checked before anything is consumed, so
/// a refused reservation leaves the approval granted.
pub(crate) async fn begin_attempt(
    txn: &mut PgTxn,
    begin: BeginAttempt,
    now: Timestamp,
) -> Result<BeginOutcome, PgFailure> {
    // 1. The approval: may it be consumed?
    let mut to_consume = None;
    if let Some(presented) = &begin.approval {
        let record = txn.approval(&presented.id).await?;
        match plan_take(
            record.as_ref(),
            &begin.action_hash,
            &presented.fingerprint,
            presented.run.as_deref(),
            now,
        ) {
            TakePlan::Consume => to_consume = record,
            TakePlan::Refuse { refusal, mark } => {
                let record = match (record, mark) {
                    (Some(record), Some(state)) => {
                        Some(mark_approval(txn, record, state, now).await?)
                    }
                    (record, _) => record,
                };
                return refuse(txn, &begin, BeginRefusal::Approval { refusal, record }, now).await;
            }
        }
    }

    // 2. The effect key: may it be reserved?
    let mut attempts = 1;
    if let Some(claim) = &begin.effect {
        let current = txn.effect(&claim.key).await?;
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
                let record = mark_lease_expired(txn, record, now).await?;
                return refuse(
                    txn,
                    &begin,
                    BeginRefusal::Effect {
                        decision: RetryDecision::Ambiguous,
                        record,
                    },
                    now,
                )
                .await;
            }
            decision => {
                let record = current.ok_or_else(|| StoreError::Corrupt {
                    detail: "refusal without a record".to_owned(),
                })?;
                return refuse(txn, &begin, BeginRefusal::Effect { decision, record }, now).await;
            }
        }
    }

    // 3. Consume and reserve.
    let consumed = match to_consume {
        Some(mut record) => {
            record.state = ApprovalState::Consumed;
            record.consumed_at = Some(now);
            record.consumed_by = Some(begin.attempt_id.clone());
            txn.update_approval(&record).await?;
            announce(txn, &record, EventKind::Consumed, now).await?;
            Some(record)
        }
        None => None,
    };
    if let Some(claim) = begin.effect {
        txn.put_effect(&reservation(
            claim,
            &begin.action_hash,
            &begin.attempt_id,
            attempts,
            begin.context,
            consumed.as_ref(),
            now,
        ))
        .await?;
    }
    Ok(BeginOutcome::Started { approval: consumed })
}

/// [`crate::Store::finish_attempt`].
pub(crate) async fn finish_attempt(
    txn: &mut PgTxn,
    finish: FinishAttempt,
    now: Timestamp,
) -> Result<Receipt, PgFailure> {
    let mut draft = finish.draft;
    if let Some(key) = &finish.effect_key {
        match txn.effect(key).await? {
            Some(mut record)
                if record.attempt_id == finish.attempt_id
                    && record.state == EffectState::Reserved =>
            {
                record.state = finish.state;
                record.updated_at = now;
                record.detail = finish.detail.clone();
                txn.put_effect(&record).await?;
            }
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
                return Err(PgFailure::Store(StoreError::Corrupt {
                    detail: format!(
                        "effect `{key}` reserved by {} is missing",
                        finish.attempt_id
                    ),
                }));
            }
        }
    }
    append(txn, draft, now).await
}

/// [`crate::Store::hand_off`]: the twin of [`crate::store::txn::hand_off`].
pub(crate) async fn hand_off(
    txn: &mut PgTxn,
    hand_off: HandOff,
    now: Timestamp,
) -> Result<HandOffOutcome, PgFailure> {
    let HandOff {
        begin,
        mut draft,
        detail,
    } = hand_off;
    let attempt_id = begin.attempt_id.clone();
    let key = begin.effect.as_ref().map(|claim| claim.key.clone());
    match begin_attempt(txn, begin, now).await? {
        BeginOutcome::Refused { refusal, receipt } => {
            Ok(HandOffOutcome::Refused { refusal, receipt })
        }
        BeginOutcome::Started { approval } => {
            if let Some(record) = &approval {
                record_consumed(&mut draft, record);
            }
            if let Some(key) = &key {
                // INVARIANT (hand-off-ambiguous): see the twin.
                match txn.effect(key).await? {
                    Some(mut record)
                        if record.attempt_id == attempt_id
                            && record.state == EffectState::Reserved =>
                    {
                        record.state = EffectState::Ambiguous;
                        record.updated_at = now;
                        record.detail = Some(detail.clone());
                        txn.put_effect(&record).await?;
                    }
                    _ => {
                        return Err(PgFailure::Store(StoreError::Corrupt {
                            detail: format!(
                                "effect `{key}` reserved by {attempt_id} was not held in the same transaction"
                            ),
                        }));
                    }
                }
                draft.detail = Some(detail);
            }
            let receipt = append(txn, draft, now).await?;
            Ok(HandOffOutcome::HandedOff {
                approval,
                receipt: Box::new(receipt),
            })
        }
    }
}

/// [`crate::Store::resolve_effect`].
pub(crate) async fn resolve_effect(
    txn: &mut PgTxn,
    resolve: ResolveEffect,
    now: Timestamp,
) -> Result<Result<EffectRecord, ResolveError>, PgFailure> {
    let record = txn.effect(&resolve.key).await?;
    let approval = match &record {
        Some(record) => consumed_approval(txn, record).await?,
        None => None,
    };
    match resolve_step(record, approval.as_ref(), resolve, now) {
        ResolveStep::Write { record, receipt } => {
            txn.put_effect(&record).await?;
            append(txn, receipt, now).await?;
            Ok(Ok(record))
        }
        ResolveStep::Refuse { error, receipt } => {
            if let Some(receipt) = receipt {
                append(txn, receipt, now).await?;
            }
            Ok(Err(error))
        }
    }
}
