//! The plans of a request's life: open one (with the effect key's retry check and the framework
//! call's mapping), answer it, expire it.

use super::{Changes, Done, Halt, Mapping, Plan, Reads, Write, approval_draft};
use crate::ApprovalId;
use crate::approval::{
    AnswerPlan, ApprovalRecord, ApprovalState, ApproverFault, OpenPlan, RecordedAnswer,
    approver_of, plan_answer, plan_open,
};
use crate::approver::{Approver, Authentication, Channel, Credential, Ineligible, judge};
use crate::clock::Timestamp;
use crate::effect::{RetryDecision, retry_decision};
use crate::error::{AnswerError, StoreError};
use crate::evidence::{ReceiptDraft, ReceiptKind, ReceiptOutcome};
use crate::outbox::EventKind;
use crate::store::outbox::due_for_expiry;
use crate::store::{NewApproval, OpenOutcome, RecordAnswer};

/// [`crate::Store::open_approval`]: reads the effect record (if a key is given), the mapped
/// request (if a framework call is given), then every request for the action hash.
pub(super) fn open(mut changes: Changes, reads: &Reads, new: &NewApproval) -> Result<Plan, Halt> {
    let now = changes.now;
    if let Some(key) = &new.effect_key {
        let current = reads.effect(key)?;
        match retry_decision(current, now) {
            RetryDecision::Reserve => {}
            RetryDecision::LeaseExpired => {
                let before = current.ok_or_else(|| StoreError::Corrupt {
                    detail: "lease decision without a record".to_owned(),
                })?;
                let consumed = reads.consumed_approval(before)?;
                let record = changes.mark_lease_expired(before, consumed);
                return Ok(changes.done(Done::Opened(OpenOutcome::EffectRefused {
                    decision: RetryDecision::Ambiguous,
                    record,
                })));
            }
            decision => {
                let record = current.cloned().ok_or_else(|| StoreError::Corrupt {
                    detail: "refusal without a record".to_owned(),
                })?;
                return Ok(changes.done(Done::Opened(OpenOutcome::EffectRefused {
                    decision,
                    record,
                })));
            }
        }
    }
    let mapped = match &new.correlation {
        Some(correlation) => match reads.correlation(correlation)? {
            Some(id) => reads.approval(id)?,
            None => None,
        },
        None => None,
    };
    let remap = mapped.is_some();
    if let Some(record) = mapped
        && let Some(outcome) = correlated_outcome(record.clone(), new, now)
    {
        return Ok(changes.done(Done::Opened(outcome)));
    }
    let existing = reads.approvals_for_hash(&new.record.action_hash)?;
    let (plan, marks) = plan_open(
        existing,
        &new.record.entry_fingerprint,
        new.record.run.as_deref(),
        new.correlation.is_none(),
        now,
    );
    let mut marked = Vec::with_capacity(marks.len());
    for (id, state) in marks {
        if let Some(before) = existing.iter().find(|record| record.id == id) {
            marked.push(changes.mark_approval(before, state));
        }
    }
    // A request is handed back as read, before any mark this plan made (as it always was).
    let find = |id: &ApprovalId| {
        existing
            .iter()
            .find(|record| &record.id == id)
            .cloned()
            .ok_or_else(|| StoreError::Corrupt {
                detail: format!("approval {id} vanished"),
            })
    };
    let outcome = match plan {
        OpenPlan::UseGranted(id) => OpenOutcome::Granted(find(&id)?),
        OpenPlan::Existing(id) => OpenOutcome::Pending {
            record: find(&id)?,
            created: false,
        },
        OpenPlan::Denied(id) => OpenOutcome::Denied(find(&id)?),
        OpenPlan::Create => {
            changes
                .writes
                .push(Write::InsertApproval(new.record.clone()));
            changes.announce(&new.record, EventKind::Opened);
            if let Some(correlation) = &new.correlation {
                changes.writes.push(Write::PutCorrelation(Mapping {
                    correlation: correlation.clone(),
                    id: new.record.id.clone(),
                    replace: remap,
                }));
            }
            OpenOutcome::Pending {
                record: new.record.clone(),
                created: true,
            }
        }
    };
    Ok(changes.done(Done::Opened(outcome)))
}

/// [`crate::Store::expire_approval`] (issue #17's sweeper): a request still `pending` or
/// `granted` and past its `expires_at` is marked `expired`, with its receipt and event.
pub(super) fn expire(mut changes: Changes, reads: &Reads, id: &ApprovalId) -> Result<Plan, Halt> {
    let expired = match reads.approval(id)? {
        Some(record) if due_for_expiry(record, changes.now) => {
            Some(changes.mark_approval(record, ApprovalState::Expired))
        }
        _ => None,
    };
    Ok(changes.done(Done::Expired(expired)))
}

/// [`crate::Store::answer_approval`]: reads the request, then whether a token credential's id
/// is revoked. The result is the stored request after the answer.
pub(super) fn answer(
    mut changes: Changes,
    reads: &Reads,
    answer: &RecordAnswer,
) -> Result<Plan, Halt> {
    let now = changes.now;
    let before = reads.approval(&answer.request_id)?;
    let step = match credential_jti(&answer.approver) {
        Some(jti) if reads.token_revoked(&jti)? => {
            let (error, receipt) = revoked_token_refusal(
                before.cloned(),
                answer.request_id.clone(),
                &answer.channel,
                &jti,
            );
            AnswerStep::Refuse { error, receipt }
        }
        _ => answer_step(before.cloned(), answer.clone(), now, changes.caller),
    };
    let result = apply_answer_step(&mut changes, before, step, |_| EventKind::Answered)?;
    Ok(changes.done(Done::Answered(result)))
}

/// Add what an answer-shaped step (an answer, a withdrawal) writes: the updated request with
/// its `event` and receipt, nothing for a repeat, the expiry mark, or the refusal receipt.
/// Returns the request as it now stands, or the refusal.
pub(super) fn apply_answer_step(
    changes: &mut Changes,
    before: Option<&ApprovalRecord>,
    step: AnswerStep,
    event: impl FnOnce(&ApprovalRecord) -> EventKind,
) -> Result<Result<ApprovalRecord, AnswerError>, Halt> {
    Ok(match step {
        AnswerStep::Write { record, receipt } => {
            let before = before.ok_or_else(|| StoreError::Internal {
                detail: format!("approval {} written without being read", record.id),
            })?;
            changes.update_approval(before, record.clone());
            changes.announce(&record, event(&record));
            changes.receipt(receipt);
            Ok(record)
        }
        AnswerStep::Repeat(record) => Ok(record),
        AnswerStep::Expire { record, error } => {
            changes.mark_approval(&record, ApprovalState::Expired);
            Err(error)
        }
        AnswerStep::Refuse { error, receipt } => {
            if let Some(receipt) = receipt {
                changes.receipt(receipt);
            }
            Err(error)
        }
    })
}

/// What a framework call already mapped to `record` gets, or `None` when that request ended
/// without authorizing anything (expired, voided), so a new one is made and mapped instead.
/// A mapping to another action hash is a conflict: the call id is never the authority.
pub(crate) fn correlated_outcome(
    record: ApprovalRecord,
    new: &NewApproval,
    now: Timestamp,
) -> Option<OpenOutcome> {
    if record.action_hash != new.record.action_hash {
        return Some(OpenOutcome::CorrelationConflict(record));
    }
    let live = now < record.expires_at && record.entry_fingerprint == new.record.entry_fingerprint;
    match record.state {
        ApprovalState::Pending if live => Some(OpenOutcome::Pending {
            record,
            created: false,
        }),
        // A consumed request is handed back too: the take step refuses it (`consumed`), so
        // one framework call never runs twice on one approval.
        ApprovalState::Granted if live => Some(OpenOutcome::Granted(record)),
        ApprovalState::Consumed => Some(OpenOutcome::Granted(record)),
        ApprovalState::Denied if now < record.expires_at => Some(OpenOutcome::Denied(record)),
        _ => None,
    }
}

/// What an answer (or a withdrawal) does, decided from the stored request alone; added to the
/// plan by [`apply_answer_step`].
// Built once per answer and consumed at once; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum AnswerStep {
    /// Write the updated request and its answer receipt.
    Write {
        record: ApprovalRecord,
        receipt: ReceiptDraft,
    },
    /// An identical repeat: succeed, write nothing.
    Repeat(ApprovalRecord),
    /// Move the (pending, past its TTL) request to `expired` with its receipt, then refuse.
    Expire {
        record: ApprovalRecord,
        error: AnswerError,
    },
    /// Refuse, leaving the request as it was; write the refusal receipt if there is one (every
    /// refusal by the rule or the contract has one; an unknown request or a missing approver
    /// has nothing to attach it to).
    Refuse {
        error: AnswerError,
        receipt: Option<ReceiptDraft>,
    },
}

/// The receipt of an answer (counted, decisive or refused) by `approver`.
fn answer_draft(
    record: &ApprovalRecord,
    approver: Option<&Approver>,
    channel: &Channel,
    outcome: ReceiptOutcome,
    reason: &str,
) -> ReceiptDraft {
    let mut draft = approval_draft(record, ReceiptKind::Answer, outcome, reason);
    draft.channel = Some(channel.as_str().into_owned());
    draft.approvals_needed = Some(record.rule.quorum);
    draft.approvals_given = Some(record.approvals_given());
    if let Some(approver) = approver {
        draft.approver = Some(approver.id.to_string());
        draft.approver_groups = Some(approver.groups.clone());
        draft.authentication = Some(approver.authentication.as_str().to_owned());
    }
    draft
}

/// Decide what `answer` does to `record` at `now`, a token credential verified at
/// `verified_at` (the caller's time, [`super::Now`]). Order: the credential becomes an approver
/// (a token must verify); the decision must be one of the closed set; the stored rule judges
/// the approver; the echoed hash must be the request's; then the state machine
/// ([`plan_answer`]) with quorum.
pub(crate) fn answer_step(
    record: Option<ApprovalRecord>,
    answer: RecordAnswer,
    now: Timestamp,
    verified_at: Timestamp,
) -> AnswerStep {
    if let Err(error) = crate::approval::check_note(answer.note.as_deref()) {
        return AnswerStep::Refuse {
            error: error.into(),
            receipt: None,
        };
    }
    let Some(mut record) = record else {
        return AnswerStep::Refuse {
            error: AnswerError::Unknown {
                request_id: answer.request_id,
            },
            receipt: None,
        };
    };
    let channel = answer.channel;
    let refuse = |record: &ApprovalRecord, approver: Option<&Approver>, error: AnswerError| {
        let mut receipt = answer_draft(
            record,
            approver,
            &channel,
            ReceiptOutcome::Refused,
            error.reason(),
        );
        receipt.note = answer.note.clone();
        receipt.detail = Some(error.to_string());
        AnswerStep::Refuse {
            error,
            receipt: Some(receipt),
        }
    };
    let approver = match approver_of(&record.rule, &answer.approver, channel.clone(), verified_at) {
        Ok(approver) => approver,
        Err(ApproverFault::Anonymous) => {
            return AnswerStep::Refuse {
                error: AnswerError::NoApprover,
                receipt: None,
            };
        }
        Err(ApproverFault::Malformed(error)) => {
            return refuse(
                &record,
                None,
                AnswerError::InvalidApprover {
                    request_id: record.id.clone(),
                    error,
                },
            );
        }
        Err(ApproverFault::Unverified(detail)) => {
            let mut step = refuse(
                &record,
                None,
                AnswerError::NotAuthenticated {
                    request_id: record.id.clone(),
                    approver: None,
                    detail,
                },
            );
            // Only a token claims an authentication method; an unverified source claims none.
            if let (
                AnswerStep::Refuse {
                    receipt: Some(receipt),
                    ..
                },
                Credential::Token(_),
            ) = (&mut step, &answer.approver)
            {
                receipt.authentication = Some(Authentication::Token.as_str().to_owned());
            }
            return step;
        }
    };
    let decision = match answer.decision {
        Ok(decision) => decision,
        Err(invalid) => {
            let error = AnswerError::InvalidDecision {
                request_id: record.id.clone(),
                given: invalid.given,
            };
            return refuse(&record, Some(&approver), error);
        }
    };
    if let Err(ineligible) = judge(&record.rule, &record.principal, &approver) {
        let error = match ineligible {
            Ineligible::NotAuthenticated => AnswerError::NotAuthenticated {
                request_id: record.id.clone(),
                approver: Some(approver.id.to_string()),
                detail: format!(
                    "`{}` is asserted (typed, not verified) and the rule requires an authenticated approver",
                    approver.id
                ),
            },
            Ineligible::NotEntitled => AnswerError::NotEntitled {
                request_id: record.id.clone(),
                approver: approver.id.to_string(),
                approvers: record.rule.summary(),
                act: "answer",
            },
            Ineligible::SelfApproval { shared_group } => AnswerError::SelfApproval {
                request_id: record.id.clone(),
                approver: approver.id.to_string(),
                shared_group,
            },
        };
        return refuse(&record, Some(&approver), error);
    }
    let hash_confirmed = match &answer.shown_hash {
        Some(shown) if shown != &record.action_hash => {
            let error = AnswerError::Mismatch {
                request_id: record.id.clone(),
                shown: shown.as_str().to_owned(),
                action_hash: record.action_hash.clone(),
            };
            return refuse(&record, Some(&approver), error);
        }
        Some(_) => true,
        None if channel.requires_hash_echo() => {
            let error = AnswerError::Mismatch {
                request_id: record.id.clone(),
                shown: "(none)".to_owned(),
                action_hash: record.action_hash.clone(),
            };
            return refuse(&record, Some(&approver), error);
        }
        None => false,
    };
    // Issue #31: a revoked or cancelled request takes no answer, not even a repeat.
    match record.state {
        ApprovalState::Cancelled => {
            let error = AnswerError::Cancelled {
                request_id: record.id.clone(),
            };
            return refuse(&record, Some(&approver), error);
        }
        ApprovalState::Revoked => {
            let error = AnswerError::Revoked {
                request_id: record.id.clone(),
            };
            return refuse(&record, Some(&approver), error);
        }
        _ => {}
    }
    let recorded = RecordedAnswer {
        approver: approver.clone(),
        decision,
        answered_at: now,
        note: answer.note.clone(),
        hash_confirmed,
    };
    let (outcome, reason) = match plan_answer(&record, decision, &approver.id, now) {
        AnswerPlan::Decide { to } => {
            record.state = to;
            record.answered_at = Some(now);
            record.approver = Some(approver.id.to_string());
            record.note = answer.note;
            record.answers.push(recorded);
            match to {
                ApprovalState::Granted => (ReceiptOutcome::Granted, "approved"),
                _ => (ReceiptOutcome::Denied, "rejected"),
            }
        }
        AnswerPlan::Count { .. } => {
            record.answers.push(recorded);
            (ReceiptOutcome::Counted, "approved")
        }
        AnswerPlan::Repeat => return AnswerStep::Repeat(record),
        AnswerPlan::AlreadyDecided { state } => {
            let first = record.approver.clone().or_else(|| {
                record
                    .answers
                    .iter()
                    .find(|earlier| earlier.approver.id == approver.id)
                    .map(|earlier| earlier.approver.id.to_string())
            });
            let error = AnswerError::AlreadyDecided {
                request_id: record.id.clone(),
                state,
                approver: first,
            };
            return refuse(&record, Some(&approver), error);
        }
        AnswerPlan::Expire => {
            let error = AnswerError::Expired {
                request_id: record.id.clone(),
                expires_at: record.expires_at,
            };
            return AnswerStep::Expire { record, error };
        }
        AnswerPlan::Expired => {
            return AnswerStep::Refuse {
                error: AnswerError::Expired {
                    request_id: record.id.clone(),
                    expires_at: record.expires_at,
                },
                receipt: None,
            };
        }
    };
    let mut receipt = answer_draft(&record, Some(&approver), &channel, outcome, reason);
    receipt.note = record.answers.last().and_then(|latest| latest.note.clone());
    receipt.hash_confirmed = Some(hash_confirmed);
    AnswerStep::Write { record, receipt }
}

/// The deny-list id of a token credential, if it has one (issue #31).
pub(crate) fn credential_jti(credential: &Credential) -> Option<String> {
    match credential {
        Credential::Token(token) => crate::token::unverified_jti(token),
        _ => None,
    }
}

/// The refusal of an answer or revocation presenting a revoked token (issue #31):
/// `not_authenticated`, with a refusal receipt when the request exists.
pub(crate) fn revoked_token_refusal(
    record: Option<ApprovalRecord>,
    request_id: ApprovalId,
    channel: &Channel,
    jti: &str,
) -> (AnswerError, Option<ReceiptDraft>) {
    let Some(record) = record else {
        return (AnswerError::Unknown { request_id }, None);
    };
    let error = AnswerError::NotAuthenticated {
        request_id: record.id.clone(),
        approver: None,
        detail: format!(
            "the approver token `{jti}` was revoked (`countersign approver revoke`): ask for a new one"
        ),
    };
    let mut receipt = answer_draft(
        &record,
        None,
        channel,
        ReceiptOutcome::Refused,
        error.reason(),
    );
    receipt.authentication = Some(Authentication::Token.as_str().to_owned());
    receipt.detail = Some(error.to_string());
    (error, Some(receipt))
}
