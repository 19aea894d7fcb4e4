//! The plan of taking it back (issue #31): what a [`Withdrawal`] does to a stored request, with
//! the transitions and refusals listed in [`crate::approval::withdraw`]. It lives in the store
//! layer, beside the answer's plan, because its refusals are [`AnswerError`]s (the error module
//! knows the approval vocabulary) and its steps are an answer's ([`AnswerStep`]).

pub(crate) use super::approval::AnswerStep;
use super::approval::{apply_answer_step, credential_jti, revoked_token_refusal};
use super::{Changes, Done, Halt, Plan, Reads, approval_draft};
use crate::approval::withdraw::{DEFAULT_OPERATOR, VoidCause, Withdrawal, WithdrawalKind};
use crate::approval::{AnswerDecision, ApprovalRecord, ApprovalState, ApproverFault, approver_of};
use crate::approver::{Approver, Authentication, Channel, Credential, judge_resolver};
use crate::clock::Timestamp;
use crate::error::AnswerError;
use crate::evidence::{ReceiptDraft, ReceiptKind, ReceiptOutcome};
use crate::store::outbox::withdrawal_event;

fn draft(
    record: &ApprovalRecord,
    kind: ReceiptKind,
    outcome: ReceiptOutcome,
    reason: &str,
    who: &str,
    channel: &Channel,
    note: Option<&String>,
) -> ReceiptDraft {
    let mut draft = approval_draft(record, kind, outcome, reason);
    draft.approver = Some(who.to_owned());
    draft.note = note.cloned();
    draft.channel = Some(channel.as_str().into_owned());
    draft.approvals_needed = Some(record.rule.quorum);
    draft.approvals_given = Some(record.approvals_given());
    draft
}

fn with_approver(mut draft: ReceiptDraft, approver: &Approver) -> ReceiptDraft {
    draft.approver_groups = Some(approver.groups.clone());
    draft.authentication = Some(approver.authentication.as_str().to_owned());
    draft
}

/// The refusal for a request in `state` that cannot be taken back.
fn state_refusal(record: &ApprovalRecord) -> AnswerError {
    let request_id = record.id.clone();
    match record.state {
        ApprovalState::Consumed => AnswerError::Consumed { request_id },
        ApprovalState::Revoked => AnswerError::Revoked { request_id },
        ApprovalState::Cancelled => AnswerError::Cancelled { request_id },
        state => AnswerError::NotRevocable { request_id, state },
    }
}

/// Refuse `error`, changing nothing, with a `kind` receipt naming `who` (and, when known,
/// the approver's groups and authentication).
fn refusal(
    record: &ApprovalRecord,
    approver: Option<&Approver>,
    who: &str,
    channel: &Channel,
    note: Option<&String>,
    kind: ReceiptKind,
    error: AnswerError,
) -> AnswerStep {
    let mut receipt = draft(
        record,
        kind,
        ReceiptOutcome::Refused,
        error.reason(),
        who,
        channel,
        note,
    );
    if let Some(approver) = approver {
        receipt = with_approver(receipt, approver);
    }
    receipt.detail = Some(error.to_string());
    AnswerStep::Refuse {
        error,
        receipt: Some(receipt),
    }
}

/// The approver `credential` names, judged as an answer's would be; the refusal step when it
/// names nobody (`no_approver`, nothing written) or does not verify (`not_authenticated`,
/// with a `kind` receipt).
fn identify(
    record: &ApprovalRecord,
    credential: &Credential,
    channel: &Channel,
    kind: ReceiptKind,
    note: Option<&String>,
    now: Timestamp,
) -> Result<Approver, Box<AnswerStep>> {
    match approver_of(&record.rule, credential, channel.clone(), now) {
        Ok(approver) => Ok(approver),
        Err(ApproverFault::Anonymous) => Err(Box::new(AnswerStep::Refuse {
            error: AnswerError::NoApprover,
            receipt: None,
        })),
        Err(ApproverFault::Malformed(error)) => {
            let error = AnswerError::InvalidApprover {
                request_id: record.id.clone(),
                error,
            };
            Err(Box::new(refusal(
                record,
                None,
                "(malformed)",
                channel,
                note,
                kind,
                error,
            )))
        }
        Err(ApproverFault::Unverified(detail)) => {
            let error = AnswerError::NotAuthenticated {
                request_id: record.id.clone(),
                approver: None,
                detail,
            };
            let mut step = refusal(record, None, "(unverified)", channel, note, kind, error);
            if let (
                AnswerStep::Refuse {
                    receipt: Some(receipt),
                    ..
                },
                Credential::Token(_),
            ) = (&mut step, credential)
            {
                receipt.approver = None;
                receipt.authentication = Some(Authentication::Token.as_str().to_owned());
            }
            Err(Box::new(step))
        }
    }
}

/// Cancel `record` as `who` (the operator, or an entitled resolver `approver`): `cancelled`
/// with its receipt; a repeat writes nothing; a request past its TTL expires first.
fn cancel(
    mut record: ApprovalRecord,
    who: &str,
    approver: Option<&Approver>,
    channel: &Channel,
    note: Option<&String>,
    now: Timestamp,
) -> AnswerStep {
    let kind = ReceiptKind::ApprovalCancelled;
    let live = matches!(
        record.state,
        ApprovalState::Pending | ApprovalState::Granted
    );
    if live && now >= record.expires_at {
        let error = AnswerError::Expired {
            request_id: record.id.clone(),
            expires_at: record.expires_at,
        };
        return AnswerStep::Expire { record, error };
    }
    match record.state {
        ApprovalState::Pending | ApprovalState::Granted => {
            record.state = ApprovalState::Cancelled;
            let mut receipt = draft(
                &record,
                kind,
                ReceiptOutcome::Cancelled,
                "cancelled",
                who,
                channel,
                note,
            );
            if let Some(approver) = approver {
                receipt = with_approver(receipt, approver);
            }
            AnswerStep::Write { record, receipt }
        }
        ApprovalState::Cancelled => AnswerStep::Repeat(record),
        _ => {
            let error = state_refusal(&record);
            refusal(&record, approver, who, channel, note, kind, error)
        }
    }
}

/// The receipt reason of a voiding for `cause`.
fn void_reason(cause: VoidCause) -> crate::error::Reason {
    match cause {
        VoidCause::ToolChanged => crate::error::Reason::ToolChanged,
    }
}

/// Void `record` as `operator` for `cause` (issue #27): `void` with its receipt; a repeat
/// writes nothing; a request past its TTL expires first; any other state is refused.
fn void(
    mut record: ApprovalRecord,
    operator: &str,
    cause: VoidCause,
    note: Option<&String>,
    now: Timestamp,
) -> AnswerStep {
    let kind = ReceiptKind::ApprovalVoided;
    let channel = Channel::Api;
    match record.state {
        ApprovalState::Pending | ApprovalState::Granted if now >= record.expires_at => {
            let error = AnswerError::Expired {
                request_id: record.id.clone(),
                expires_at: record.expires_at,
            };
            AnswerStep::Expire { record, error }
        }
        ApprovalState::Pending | ApprovalState::Granted => {
            record.state = ApprovalState::Void;
            let receipt = draft(
                &record,
                kind,
                ReceiptOutcome::Voided,
                void_reason(cause).as_str(),
                operator,
                &channel,
                note,
            );
            AnswerStep::Write { record, receipt }
        }
        ApprovalState::Void => AnswerStep::Repeat(record),
        _ => {
            let error = state_refusal(&record);
            refusal(&record, None, operator, &channel, note, kind, error)
        }
    }
}

/// Who may cancel `record` as a resolver, for a `not_entitled` message.
fn resolvers_summary(record: &ApprovalRecord) -> String {
    let patterns = record.rule.resolver_patterns();
    let who = if patterns.is_empty() || patterns.iter().any(|pattern| pattern == "*") {
        "anyone but the requester".to_owned()
    } else {
        patterns.join(", ")
    };
    format!("{who} (its resolvers, who alone may cancel it there)")
}

/// Decide what `withdrawal` does to `record` at `now`, a token credential verified at
/// `verified_at` (the caller's time, [`super::Now`]; see the [module docs](self)).
pub(crate) fn withdraw_step(
    record: Option<ApprovalRecord>,
    withdrawal: Withdrawal,
    now: Timestamp,
    verified_at: Timestamp,
) -> AnswerStep {
    if let Err(error) = crate::approval::check_note(withdrawal.reason.as_deref()) {
        return AnswerStep::Refuse {
            error: error.into(),
            receipt: None,
        };
    }
    let Some(mut record) = record else {
        return AnswerStep::Refuse {
            error: AnswerError::Unknown {
                request_id: withdrawal.request_id,
            },
            receipt: None,
        };
    };
    let note = withdrawal.reason.as_ref();
    let live = matches!(
        record.state,
        ApprovalState::Pending | ApprovalState::Granted
    );
    match withdrawal.kind {
        WithdrawalKind::Cancel { operator, channel } => {
            let operator = if operator.trim().is_empty() {
                DEFAULT_OPERATOR.to_owned()
            } else {
                operator
            };
            cancel(record, &operator, None, &channel, note, now)
        }
        WithdrawalKind::Void { operator, cause } => {
            let operator = if operator.trim().is_empty() {
                DEFAULT_OPERATOR.to_owned()
            } else {
                operator
            };
            void(record, &operator, cause, note, now)
        }
        WithdrawalKind::CancelAsResolver {
            resolver: credential,
            channel,
        } => {
            let kind = ReceiptKind::ApprovalCancelled;
            let approver = match identify(&record, &credential, &channel, kind, note, verified_at) {
                Ok(approver) => approver,
                Err(step) => return *step,
            };
            if judge_resolver(&record.rule, &record.principal, &approver).is_err() {
                let error = AnswerError::NotEntitled {
                    request_id: record.id.clone(),
                    approver: approver.id.to_string(),
                    approvers: resolvers_summary(&record),
                    act: "cancel",
                };
                return refusal(
                    &record,
                    Some(&approver),
                    &approver.id,
                    &channel,
                    note,
                    kind,
                    error,
                );
            }
            cancel(
                record,
                &approver.id.clone(),
                Some(&approver),
                &channel,
                note,
                now,
            )
        }
        WithdrawalKind::Revoke {
            approver: credential,
            channel,
        } => {
            let kind = ReceiptKind::ApprovalRevoked;
            let refuse = |record: &ApprovalRecord,
                          approver: Option<&Approver>,
                          who: &str,
                          error: AnswerError| {
                refusal(record, approver, who, &channel, note, kind, error)
            };
            let approver = match identify(&record, &credential, &channel, kind, note, verified_at) {
                Ok(approver) => approver,
                Err(step) => return *step,
            };
            let gave_yes = record.answers.iter().any(|answer| {
                answer.approver.id == approver.id && answer.decision == AnswerDecision::Approve
            });
            let resolver = judge_resolver(&record.rule, &record.principal, &approver).is_ok();
            // Someone with no yes to take back and no say over the request is refused as such
            // before anything about its state is said (found by a first-time user: another
            // team's request answered 409 naming its state, where reading it answered 404).
            if !gave_yes && !resolver {
                let error = AnswerError::NotEntitled {
                    request_id: record.id.clone(),
                    approver: approver.id.to_string(),
                    approvers: record.rule.summary(),
                    act: "revoke",
                };
                return refuse(&record, Some(&approver), &approver.id, error);
            }
            let entitled = gave_yes || (record.state == ApprovalState::Granted && resolver);
            if live && now >= record.expires_at {
                let error = AnswerError::Expired {
                    request_id: record.id.clone(),
                    expires_at: record.expires_at,
                };
                return AnswerStep::Expire { record, error };
            }
            if !live {
                let error = state_refusal(&record);
                return refuse(&record, Some(&approver), &approver.id, error);
            }
            if !entitled {
                let error = if record.state == ApprovalState::Pending {
                    AnswerError::NotRevocable {
                        request_id: record.id.clone(),
                        state: record.state,
                    }
                } else {
                    AnswerError::NotEntitled {
                        request_id: record.id.clone(),
                        approver: approver.id.to_string(),
                        approvers: record.rule.summary(),
                        act: "revoke",
                    }
                };
                return refuse(&record, Some(&approver), &approver.id, error);
            }
            let outcome = if record.state == ApprovalState::Granted {
                record.state = ApprovalState::Revoked;
                ReceiptOutcome::Revoked
            } else {
                // INVARIANT (quorum-count): a pending request's count is its `answers`' yeses;
                // withdrawing this approver's yes lowers it by exactly one.
                record.answers.retain(|answer| {
                    !(answer.approver.id == approver.id
                        && answer.decision == AnswerDecision::Approve)
                });
                ReceiptOutcome::Withdrawn
            };
            let receipt = with_approver(
                draft(
                    &record,
                    kind,
                    outcome,
                    "revoked",
                    &approver.id,
                    &channel,
                    note,
                ),
                &approver,
            );
            AnswerStep::Write { record, receipt }
        }
    }
}

/// [`crate::Store::withdraw_approval`]: reads the request, then whether a token credential's id
/// is revoked. The result is the stored request after the withdrawal.
pub(super) fn withdraw(
    mut changes: Changes,
    reads: &Reads,
    withdrawal: &Withdrawal,
) -> Result<Plan, Halt> {
    let before = reads.approval(&withdrawal.request_id)?;
    if let Some((approver, channel)) = withdrawal.kind.credential()
        && let Some(jti) = credential_jti(approver)
        && reads.token_revoked(&jti)?
    {
        let (error, receipt) = revoked_token_refusal(
            before.cloned(),
            withdrawal.request_id.clone(),
            channel,
            &jti,
        );
        if let Some(mut receipt) = receipt {
            receipt.kind = Some(match withdrawal.kind {
                WithdrawalKind::Revoke { .. } => ReceiptKind::ApprovalRevoked,
                _ => ReceiptKind::ApprovalCancelled,
            });
            changes.receipt(receipt);
        }
        return Ok(changes.done(Done::Answered(Err(error))));
    }
    let step = withdraw_step(
        before.cloned(),
        withdrawal.clone(),
        changes.now,
        changes.caller,
    );
    let result = apply_answer_step(&mut changes, before, step, withdrawal_event)?;
    Ok(changes.done(Done::Answered(result)))
}
