//! The plans of an attempt: begin it (consume the approval, reserve the effect key), finish it
//! (record the outcome), or hand it off (both at once, the key left `ambiguous`).

use super::{Changes, Done, EffectVersion, Halt, Plan, Reads, Reply, Settlement, Write};
use crate::ActionHash;
use crate::approval::{ApprovalRecord, ApprovalState, TakePlan, plan_take};
use crate::effect::{AttemptContext, EffectRecord, EffectState, RetryDecision, retry_decision};
use crate::error::StoreError;
use crate::evidence::{ReceiptDraft, ReceiptOutcome};
use crate::id::AttemptId;
use crate::outbox::EventKind;
use crate::store::{BeginAttempt, BeginRefusal, EffectClaim, FinishAttempt, HandOff};

/// How a begin ended: started (with the consumed approval), or refused (its receipt is the
/// plan's last).
enum Begun {
    Started(Option<ApprovalRecord>),
    Refused(BeginRefusal),
}

/// [`crate::Store::begin_attempt`]: reads the presented approval, then the effect record (and,
/// when its lease lapsed, the approval its attempt consumed).
///
/// A refusal's marks and receipt are committed, and a refused reservation never leaves a
/// consumed approval behind: the reservation is checked before anything is consumed.
pub(super) fn begin(
    mut changes: Changes,
    reads: &Reads,
    begin: &BeginAttempt,
) -> Result<Plan, Halt> {
    Ok(match begin_changes(&mut changes, reads, begin)? {
        Begun::Started(approval) => {
            changes.done(Done::Begun(crate::store::BeginOutcome::Started {
                approval,
            }))
        }
        Begun::Refused(refusal) => changes.reply(Reply::BeginRefused(refusal)),
    })
}

fn begin_changes(
    changes: &mut Changes,
    reads: &Reads,
    begin: &BeginAttempt,
) -> Result<Begun, Halt> {
    let now = changes.now;
    // 1. The approval: may it be consumed?
    let mut to_consume = None;
    if let Some(presented) = &begin.approval {
        let record = reads.approval(&presented.id)?;
        match plan_take(
            record,
            &begin.action_hash,
            &presented.fingerprint,
            presented.run.as_deref(),
            now,
        ) {
            TakePlan::Consume => to_consume = record,
            TakePlan::Refuse { refusal, mark } => {
                let record = match (record, mark) {
                    (Some(record), Some(state)) => Some(changes.mark_approval(record, state)),
                    (record, _) => record.cloned(),
                };
                return Ok(refuse(
                    changes,
                    begin,
                    BeginRefusal::Approval { refusal, record },
                ));
            }
        }
    }

    // 2. The effect key: may it be reserved? (Checked before anything is consumed, so a refused
    //    reservation leaves the approval granted.)
    let mut reserve = None;
    if let Some(claim) = &begin.effect {
        let current = reads.effect(&claim.key)?;
        match retry_decision(current, now) {
            RetryDecision::Reserve => {
                reserve = Some((
                    claim,
                    current.map_or(1, |record| record.attempts.saturating_add(1)),
                    current.map(EffectVersion::of),
                ));
            }
            RetryDecision::LeaseExpired => {
                let before = current.ok_or_else(|| StoreError::Corrupt {
                    detail: "lease decision without a record".to_owned(),
                })?;
                let consumed = reads.consumed_approval(before)?;
                let record = changes.mark_lease_expired(before, consumed);
                let refusal = BeginRefusal::Effect {
                    decision: RetryDecision::Ambiguous,
                    record,
                };
                return Ok(refuse(changes, begin, refusal));
            }
            decision => {
                let record = current.cloned().ok_or_else(|| StoreError::Corrupt {
                    detail: "refusal without a record".to_owned(),
                })?;
                return Ok(refuse(
                    changes,
                    begin,
                    BeginRefusal::Effect { decision, record },
                ));
            }
        }
    }

    // 3. Consume and reserve.
    let consumed = to_consume.map(|before| {
        let mut record = before.clone();
        record.state = ApprovalState::Consumed;
        record.consumed_at = Some(now);
        record.consumed_by = Some(begin.attempt_id.clone());
        changes.update_approval(before, record.clone());
        changes.announce(&record, EventKind::Consumed);
        record
    });
    if let Some((claim, attempts, expected)) = reserve {
        let record = reservation(
            claim,
            &begin.action_hash,
            &begin.attempt_id,
            attempts,
            begin.context.clone(),
            consumed.as_ref(),
            now,
        );
        changes
            .writes
            .push(Write::ReserveEffect { record, expected });
    }
    Ok(Begun::Started(consumed))
}

/// Add the refusal receipt of `begin` (its `refusal_draft`, naming the request it refused).
fn refuse(changes: &mut Changes, begin: &BeginAttempt, refusal: BeginRefusal) -> Begun {
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
    changes.receipt(draft);
    Begun::Refused(refusal)
}

/// Fill `draft` with what an attempt that consumed `record` records about it: the request, its
/// decisive approver and note, the policy it was requested under and who granted it.
fn record_consumed(draft: &mut ReceiptDraft, record: &ApprovalRecord) {
    draft.approval_id = Some(record.id.clone());
    draft.approver = record.approver.clone();
    draft.note = record.note.clone();
    draft.approval_policy_hash = Some(record.policy_hash.clone());
    draft.approvers = Some(record.granted_by().into_iter().cloned().collect());
}

/// The effect record an attempt's reservation writes.
fn reservation(
    claim: &EffectClaim,
    action_hash: &ActionHash,
    attempt_id: &AttemptId,
    attempts: u32,
    context: Option<AttemptContext>,
    consumed: Option<&ApprovalRecord>,
    now: crate::clock::Timestamp,
) -> EffectRecord {
    let attempt = context.map(|mut context| {
        if let Some(approval) = consumed {
            context.approval_id = Some(approval.id.clone());
            // The consumed approval's rule says who may resolve; no copy is needed.
            context.resolvers = None;
        }
        context
    });
    EffectRecord {
        key: claim.key.clone(),
        state: EffectState::Reserved,
        action_hash: action_hash.clone(),
        attempt_id: attempt_id.clone(),
        attempts,
        lease_until: claim.lease_until,
        updated_at: now,
        resolved_by: None,
        detail: None,
        attempt,
    }
}

/// [`crate::Store::hand_off`]: [`begin`], then (if it started) the reserved key left
/// `ambiguous` and the `handed_off` receipt, in the one transaction.
pub(super) fn hand_off(
    mut changes: Changes,
    reads: &Reads,
    hand_off: &HandOff,
) -> Result<Plan, Halt> {
    match begin_changes(&mut changes, reads, &hand_off.begin)? {
        Begun::Refused(refusal) => Ok(changes.reply(Reply::HandOffRefused(refusal))),
        Begun::Started(approval) => {
            let mut draft = hand_off.draft.clone();
            if let Some(record) = &approval {
                record_consumed(&mut draft, record);
            }
            if hand_off.begin.effect.is_some() {
                // INVARIANT (hand-off-ambiguous): a handed-off effect may have happened, so it
                // is never left `reserved` (a lapse would say the same later) nor `committed`.
                let reserved = changes.writes.iter_mut().find_map(|write| match write {
                    Write::ReserveEffect { record, .. } => Some(record),
                    _ => None,
                });
                let Some(record) = reserved else {
                    return Err(StoreError::Internal {
                        detail: "a started hand-off reserved no effect key".to_owned(),
                    }
                    .into());
                };
                record.state = EffectState::Ambiguous;
                record.detail = Some(hand_off.detail.clone());
                draft.detail = Some(hand_off.detail.clone());
            }
            changes.receipt(draft);
            Ok(changes.reply(Reply::HandedOff(approval)))
        }
    }
}

/// [`crate::Store::finish_attempt`]: reads who holds the effect key, moves it to the outcome if this
/// attempt still holds it, and appends the receipt (which says so when it no longer does).
pub(super) fn finish(
    mut changes: Changes,
    reads: &Reads,
    finish: &FinishAttempt,
) -> Result<Plan, Halt> {
    let mut draft = finish.draft.clone();
    if let Some(key) = &finish.effect_key {
        match reads.effect_holder(key)? {
            Some(holder)
                if holder.attempt_id == finish.attempt_id
                    && holder.state == EffectState::Reserved =>
            {
                // A reserved record has no resolver: only a reservation writes `reserved`.
                changes.writes.push(Write::SettleEffect(Settlement {
                    key: key.clone(),
                    expected: holder,
                    state: finish.state,
                    detail: finish.detail.clone(),
                    resolved_by: None,
                    updated_at: changes.now,
                }));
            }
            Some(holder) => {
                // INVARIANT (no-release): a record this attempt no longer holds is never
                // overwritten; the receipt says what this attempt saw.
                let note = format!(
                    "this attempt's lease lapsed before its outcome was recorded; the effect stays `{}`",
                    holder.state
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
                }
                .into());
            }
        }
    }
    changes.receipt(draft);
    Ok(changes.reply(Reply::Receipt))
}
