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
//! | `pending`, `granted` | an entitled resolver (the approval service) | `cancelled` | `approval_cancelled` / `cancelled` / `cancelled` |
//! | `pending`, `granted` | the operator, because the tool changed (issue #27) | `void` | `approval_voided` / `voided` / `tool_changed` |
//!
//! Refusals change nothing (and, once the caller is known, write an `approval_revoked` or
//! `approval_cancelled` receipt with outcome `refused`): a consumed grant is refused
//! `consumed`, a revoked one `revoked`, a cancelled one `cancelled`, a `denied`, `expired` or
//! `void` one `not_revocable`. A request past its TTL is marked `expired` first (with its
//! receipt) and refused `expired`. Cancelling a cancelled request again is a repeat: it
//! succeeds and writes nothing, so clearing a run twice is harmless.
//!
//! This module holds the contract every surface submits ([`Withdrawal`]). The decision is pure
//! (`store/plan/withdraw.rs`, in the store layer because its refusals are
//! [`crate::error::AnswerError`]s), and every backend applies its plan inside one transaction, so a revocation racing the attempt that
//! consumes the same grant is serialized by the store: exactly one of them wins and the loser
//! is refused (`consumed` for the revocation, `revoked` for the attempt).

use crate::ApprovalId;
use crate::approver::{Channel, Credential};

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
    /// Cancel a pending (or granted, unused) request as one of its resolvers: the approval
    /// service's cancel, where the caller is a signed-in person rather than the operator's own
    /// deployment. The credential is judged like a revocation's against the request's stored
    /// resolver rule (`resolvers:`, by default anyone but the principal, and the rule's
    /// `require: authenticated`); anyone else is refused `not_entitled` with a receipt.
    CancelAsResolver {
        /// Who cancels.
        resolver: Credential,
        /// Where from.
        channel: Channel,
    },
    /// Void a pending (or granted, unused) request because what it asked about changed
    /// outside the policy (issue #27: the MCP tool's input schema changed). The operator's
    /// side, like [`WithdrawalKind::Cancel`]: the request becomes `void`, with an
    /// `approval_voided` / `voided` receipt whose reason is the cause's (`tool_changed`). Voiding a
    /// void request again writes nothing.
    Void {
        /// Who voids it (for example `gateway:files`), as recorded on the receipt.
        operator: String,
        /// Why.
        cause: VoidCause,
    },
}

/// Why a request is voided by a [`WithdrawalKind::Void`]; the receipt's reason is its
/// [`crate::Reason`] (`tool_changed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoidCause {
    /// The tool's input schema changed since the request was opened, so the action it names
    /// is not the one a new call would be ([`crate::Reason::ToolChanged`]).
    ToolChanged,
}

impl WithdrawalKind {
    /// The credential to check against the token deny-list, and where it came from: the
    /// approver's for [`WithdrawalKind::Revoke`] and [`WithdrawalKind::CancelAsResolver`];
    /// `None` for the operator's [`WithdrawalKind::Cancel`].
    pub fn credential(&self) -> Option<(&Credential, &Channel)> {
        match self {
            WithdrawalKind::Revoke { approver, channel } => Some((approver, channel)),
            WithdrawalKind::CancelAsResolver { resolver, channel } => Some((resolver, channel)),
            WithdrawalKind::Cancel { .. } | WithdrawalKind::Void { .. } => None,
        }
    }
}
