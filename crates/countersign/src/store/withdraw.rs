//! The pure decision of taking it back (issue #31): what a [`Withdrawal`] does to a stored
//! request, with the transitions and refusals listed in [`crate::approval::withdraw`].
//! `store::txn::withdraw_approval` and its PostgreSQL twin apply it inside one transaction.
//! It lives in the store layer, beside `store::txn::answer_step`, because its refusals are
//! [`AnswerError`]s (the error module knows the approval vocabulary).

use crate::approval::withdraw::{DEFAULT_OPERATOR, Withdrawal, WithdrawalKind};
use crate::approval::{AnswerDecision, ApprovalRecord, ApprovalState, ApproverFault, approver_of};
use crate::approver::{Approver, Authentication, Channel, Credential, judge_resolver};
use crate::clock::Timestamp;
use crate::error::AnswerError;
use crate::evidence::{ReceiptDraft, ReceiptKind, ReceiptOutcome};
use crate::store::txn::approval_draft;

/// What a withdrawal does, decided from the stored request alone.
// Built once per withdrawal and consumed at once; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum WithdrawStep {
    /// Write the updated request and its receipt.
    Write {
        record: ApprovalRecord,
        receipt: ReceiptDraft,
    },
    /// A repeated cancellation: succeed, write nothing.
    Repeat(ApprovalRecord),
    /// Mark the request (past its TTL) `expired` with its receipt, then refuse.
    Expire {
        record: ApprovalRecord,
        error: AnswerError,
    },
    /// Refuse, changing nothing; write the refusal receipt if there is one.
    Refuse {
        error: AnswerError,
        receipt: Option<ReceiptDraft>,
    },
}

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

/// Decide what `withdrawal` does to `record` at `now` (see the [module docs](self)).
pub(crate) fn withdraw_step(
    record: Option<ApprovalRecord>,
    withdrawal: Withdrawal,
    now: Timestamp,
) -> WithdrawStep {
    let Some(mut record) = record else {
        return WithdrawStep::Refuse {
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
            let kind = ReceiptKind::ApprovalCancelled;
            if live && now >= record.expires_at {
                let error = AnswerError::Expired {
                    request_id: record.id.clone(),
                    expires_at: record.expires_at,
                };
                return WithdrawStep::Expire { record, error };
            }
            match record.state {
                ApprovalState::Pending | ApprovalState::Granted => {
                    record.state = ApprovalState::Cancelled;
                    let receipt = draft(
                        &record,
                        kind,
                        ReceiptOutcome::Cancelled,
                        "cancelled",
                        &operator,
                        &channel,
                        note,
                    );
                    WithdrawStep::Write { record, receipt }
                }
                ApprovalState::Cancelled => WithdrawStep::Repeat(record),
                _ => {
                    let error = state_refusal(&record);
                    let mut receipt = draft(
                        &record,
                        kind,
                        ReceiptOutcome::Refused,
                        error.reason(),
                        &operator,
                        &channel,
                        note,
                    );
                    receipt.detail = Some(error.to_string());
                    WithdrawStep::Refuse {
                        error,
                        receipt: Some(receipt),
                    }
                }
            }
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
                let mut receipt = draft(
                    record,
                    kind,
                    ReceiptOutcome::Refused,
                    error.reason(),
                    who,
                    &channel,
                    note,
                );
                if let Some(approver) = approver {
                    receipt = with_approver(receipt, approver);
                }
                receipt.detail = Some(error.to_string());
                WithdrawStep::Refuse {
                    error,
                    receipt: Some(receipt),
                }
            };
            let approver = match approver_of(&record.rule, &credential, channel.clone(), now) {
                Ok(approver) => approver,
                Err(ApproverFault::Anonymous) => {
                    return WithdrawStep::Refuse {
                        error: AnswerError::NoApprover,
                        receipt: None,
                    };
                }
                Err(ApproverFault::Malformed(error)) => {
                    let error = AnswerError::InvalidApprover {
                        request_id: record.id.clone(),
                        error,
                    };
                    return refuse(&record, None, "(malformed)", error);
                }
                Err(ApproverFault::Unverified(detail)) => {
                    let error = AnswerError::NotAuthenticated {
                        request_id: record.id.clone(),
                        approver: None,
                        detail,
                    };
                    let mut step = refuse(&record, None, "(unverified)", error);
                    if let (
                        WithdrawStep::Refuse {
                            receipt: Some(receipt),
                            ..
                        },
                        Credential::Token(_),
                    ) = (&mut step, &credential)
                    {
                        receipt.approver = None;
                        receipt.authentication = Some(Authentication::Token.as_str().to_owned());
                    }
                    return step;
                }
            };
            let gave_yes = record.answers.iter().any(|answer| {
                answer.approver.id == approver.id && answer.decision == AnswerDecision::Approve
            });
            let entitled = gave_yes
                || (record.state == ApprovalState::Granted
                    && judge_resolver(&record.rule, &record.principal, &approver).is_ok());
            if live && now >= record.expires_at {
                let error = AnswerError::Expired {
                    request_id: record.id.clone(),
                    expires_at: record.expires_at,
                };
                return WithdrawStep::Expire { record, error };
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
                        approver: approver.id.clone(),
                        approvers: record.rule.summary(),
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
            WithdrawStep::Write { record, receipt }
        }
    }
}
