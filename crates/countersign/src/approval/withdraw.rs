//! Taking it back (issue #31): an approver revoking a grant not yet used (or withdrawing their
//! own yes from a quorum still pending), and the operator cancelling a request an abandoned run
//! left waiting.
//!
//! Transitions (every one writes one receipt in the same transaction):
//!
//! | from | by | to | receipt (`kind` / `outcome` / `reason`) |
//! |---|---|---|---|
//! | `granted` | an approver who gave a yes, or an entitled resolver | `revoked` | `approval_revoked` / `revoked` / `revoked` |
//! | `pending` (quorum) | an approver whose yes was counted | `pending`, one yes fewer | `approval_revoked` / `withdrawn` / `revoked` |
//! | `pending`, `granted` | the operator | `cancelled` | `approval_cancelled` / `cancelled` / `cancelled` |
//!
//! Refusals change nothing (and, once the caller is known, write an `approval_revoked` or
//! `approval_cancelled` receipt with outcome `refused`): a consumed grant is refused
//! `consumed`, a revoked one `revoked`, a cancelled one `cancelled`, a `denied`, `expired` or
//! `void` one `not_revocable`. A request past its TTL is marked `expired` first (with its
//! receipt) and refused `expired`. Cancelling a cancelled request again is a repeat: it
//! succeeds and writes nothing, so clearing a run twice is harmless.
//!
//! The decision is pure ([`withdraw_step`]); [`crate::store::txn::withdraw_approval`] and its
//! PostgreSQL twin apply it inside one transaction, so a revocation racing the attempt that
//! consumes the same grant is serialized by the store: exactly one of them wins and the loser
//! is refused (`consumed` for the revocation, `revoked` for the attempt).

use crate::ApprovalId;
use crate::approval::{AnswerDecision, ApprovalRecord, ApprovalState, approver_of};
use crate::approver::{Approver, Authentication, Channel, Credential, judge_resolver};
use crate::clock::Timestamp;
use crate::error::AnswerError;
use crate::evidence::{ReceiptDraft, ReceiptKind, ReceiptOutcome};
use crate::store::txn::approval_draft;

/// The name a cancellation records when the operator gave none.
pub const DEFAULT_OPERATOR: &str = "operator";

/// A request to take something back: the closed contract every surface submits to
/// [`crate::Store::withdraw_approval`].
#[derive(Clone, Debug)]
pub struct Withdrawal {
    /// The request.
    pub request_id: ApprovalId,
    /// Revoke (an approver's side) or cancel (the operator's side).
    pub kind: WithdrawalKind,
    /// Why, kept as data on the receipt's `note`.
    pub reason: Option<String>,
}

/// Who takes it back, and how.
#[derive(Clone, Debug)]
pub enum WithdrawalKind {
    /// Revoke a grant not yet used, or withdraw one's own counted yes from a pending quorum.
    /// The credential is judged like an answer's: it must name an approver who gave a yes on
    /// this request, or one the request's resolver rule entitles (`resolvers:`, by default
    /// anyone but the principal, and the rule's `require: authenticated`).
    Revoke {
        /// Who revokes.
        approver: Credential,
        /// Where from.
        channel: Channel,
    },
    /// Cancel a pending (or granted, unused) request: the operator's side, the principal's own
    /// deployment, so no approver rule applies. The name is recorded as given (empty:
    /// [`DEFAULT_OPERATOR`]); a surface must only offer this to the operator.
    Cancel {
        /// Who cancels, as recorded on the receipt.
        operator: String,
        /// Where from.
        channel: Channel,
    },
}

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
                Err(None) => {
                    return WithdrawStep::Refuse {
                        error: AnswerError::NoApprover,
                        receipt: None,
                    };
                }
                Err(Some(detail)) => {
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
