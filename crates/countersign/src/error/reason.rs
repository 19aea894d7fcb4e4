//! [`Reason`]: the one vocabulary of refusal codes, from the kernel to every edge (issue #19).

use std::fmt;

/// Why something was refused or failed: the stable code receipts, the CLI's `--json`, the
/// gateway's `data.reason`, the approval service's problem `reason` and the Python and Node
/// errors carry, as a closed enum.
///
/// Exhaustive on purpose: a new refusal forces every place that classifies one (the gateway's
/// codes, the bindings' classes, `did_run` / `may_retry`) to decide what it means. The wire
/// strings ([`Reason::as_str`]) are the ones Countersign has always written and never change;
/// [`Reason::parse`] reads them back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// `invalid_arguments`: an argument has no canonical form.
    InvalidArguments,
    /// `bad_template`: an effect or resource template could not be rendered.
    BadTemplate,
    /// `no_principal`: the identity provider vouched for nobody.
    NoPrincipal,
    /// `unknown_action`: the policy has no entry for the action.
    UnknownAction,
    /// `no_matching_rule`: the entry's rules matched none of the arguments.
    NoMatchingRule,
    /// `denied`: a policy rule denies the action.
    Denied,
    /// `policy_changed`: the policy changed since the approval; it is void.
    PolicyChanged,
    /// `approval_required`: a human must answer first.
    ApprovalRequired,
    /// `approval_denied`: a human said no (a deny).
    ApprovalDenied,
    /// `mismatch`: the approval or the answer is about another action hash.
    Mismatch,
    /// `consumed`: the approval was already used.
    Consumed,
    /// `expired`: the approval expired.
    Expired,
    /// `unknown_request`: no approval request has this id.
    UnknownRequest,
    /// `revoked`: the grant was revoked before it was used.
    Revoked,
    /// `cancelled`: the operator cancelled the request.
    Cancelled,
    /// `tool_changed`: the MCP tool's input schema changed since the request was opened; the
    /// request is void (issue #27). Written on the voiding receipt.
    ToolChanged,
    /// `other_run`: the approval belongs to another run.
    OtherRun,
    /// `interrupt_failed`: the framework's interrupt failed.
    InterruptFailed,
    /// `not_entitled`: the approver may not answer this request.
    NotEntitled,
    /// `not_authenticated`: the rule wants an authenticated approver, or the token failed.
    NotAuthenticated,
    /// `self_approval`: the approver is (or shares a group with) the requester.
    SelfApproval,
    /// `invalid_decision`: the answer is not `approve` or `deny`.
    InvalidDecision,
    /// `note_too_long`: the note kept with an answer, a withdrawal or a resolution is longer
    /// than [`crate::approval::MAX_NOTE_BYTES`]; nothing was recorded.
    NoteTooLong,
    /// `already_decided`: the request was already answered.
    AlreadyDecided,
    /// `invalid_approver`: the approver id is not of the one shape.
    InvalidApprover,
    /// `no_approver`: the answer named nobody.
    NoApprover,
    /// `not_revocable`: nothing to take back.
    NotRevocable,
    /// `in_progress`: another attempt holds the effect.
    InProgress,
    /// `duplicate`: the effect was already committed.
    Duplicate,
    /// `ambiguous`: an earlier attempt's outcome is unknown.
    Ambiguous,
    /// `not_executed`: the executor said the effect definitely did not happen.
    NotExecuted,
    /// `outcome_unknown`: the executor ran and nobody knows what happened.
    OutcomeUnknown,
    /// `store_busy`: the database stayed locked past the bounded wait.
    StoreBusy,
    /// `store_outcome_unknown`: the connection failed while committing.
    StoreOutcomeUnknown,
    /// `store_incompatible`: the store was written by a newer Countersign.
    StoreIncompatible,
    /// `store_corrupt`: a stored row could not be read back.
    StoreCorrupt,
    /// `store_open`: the store could not be opened.
    StoreOpen,
    /// `store_error`: any other failure of the database engine.
    StoreError,
    /// `internal`: a bug in Countersign; please report it.
    Internal,
}

impl Reason {
    /// Every reason, in declaration order.
    pub const ALL: [Reason; 39] = [
        Reason::InvalidArguments,
        Reason::BadTemplate,
        Reason::NoPrincipal,
        Reason::UnknownAction,
        Reason::NoMatchingRule,
        Reason::Denied,
        Reason::PolicyChanged,
        Reason::ApprovalRequired,
        Reason::ApprovalDenied,
        Reason::Mismatch,
        Reason::Consumed,
        Reason::Expired,
        Reason::UnknownRequest,
        Reason::Revoked,
        Reason::Cancelled,
        Reason::ToolChanged,
        Reason::OtherRun,
        Reason::InterruptFailed,
        Reason::NotEntitled,
        Reason::NotAuthenticated,
        Reason::SelfApproval,
        Reason::InvalidDecision,
        Reason::NoteTooLong,
        Reason::AlreadyDecided,
        Reason::InvalidApprover,
        Reason::NoApprover,
        Reason::NotRevocable,
        Reason::InProgress,
        Reason::Duplicate,
        Reason::Ambiguous,
        Reason::NotExecuted,
        Reason::OutcomeUnknown,
        Reason::StoreBusy,
        Reason::StoreOutcomeUnknown,
        Reason::StoreIncompatible,
        Reason::StoreCorrupt,
        Reason::StoreOpen,
        Reason::StoreError,
        Reason::Internal,
    ];

    /// The wire string: snake_case, stable.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::InvalidArguments => "invalid_arguments",
            Reason::BadTemplate => "bad_template",
            Reason::NoPrincipal => "no_principal",
            Reason::UnknownAction => "unknown_action",
            Reason::NoMatchingRule => "no_matching_rule",
            Reason::Denied => "denied",
            Reason::PolicyChanged => "policy_changed",
            Reason::ApprovalRequired => "approval_required",
            Reason::ApprovalDenied => "approval_denied",
            Reason::Mismatch => "mismatch",
            Reason::Consumed => "consumed",
            Reason::Expired => "expired",
            Reason::UnknownRequest => "unknown_request",
            Reason::Revoked => "revoked",
            Reason::Cancelled => "cancelled",
            Reason::ToolChanged => "tool_changed",
            Reason::OtherRun => "other_run",
            Reason::InterruptFailed => "interrupt_failed",
            Reason::NotEntitled => "not_entitled",
            Reason::NotAuthenticated => "not_authenticated",
            Reason::SelfApproval => "self_approval",
            Reason::InvalidDecision => "invalid_decision",
            Reason::NoteTooLong => "note_too_long",
            Reason::AlreadyDecided => "already_decided",
            Reason::InvalidApprover => "invalid_approver",
            Reason::NoApprover => "no_approver",
            Reason::NotRevocable => "not_revocable",
            Reason::InProgress => "in_progress",
            Reason::Duplicate => "duplicate",
            Reason::Ambiguous => "ambiguous",
            Reason::NotExecuted => "not_executed",
            Reason::OutcomeUnknown => "outcome_unknown",
            Reason::StoreBusy => "store_busy",
            Reason::StoreOutcomeUnknown => "store_outcome_unknown",
            Reason::StoreIncompatible => "store_incompatible",
            Reason::StoreCorrupt => "store_corrupt",
            Reason::StoreOpen => "store_open",
            Reason::StoreError => "store_error",
            Reason::Internal => "internal",
        }
    }

    /// The reason whose wire string is `text`, if any.
    pub fn parse(text: &str) -> Option<Reason> {
        Reason::ALL
            .into_iter()
            .find(|reason| reason.as_str() == text)
    }
}

impl fmt::Display for Reason {
    /// The wire string.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl PartialEq<&str> for Reason {
    /// Compares the wire string.
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl serde::Serialize for Reason {
    /// As its wire string.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Why policy denied an action: the reasons [`crate::ControlError::ActionDenied`] carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DenyReason {
    /// The policy has no entry for the action ([`Reason::UnknownAction`]).
    UnknownAction,
    /// The entry's rules matched none of the arguments ([`Reason::NoMatchingRule`]).
    NoMatchingRule,
    /// A rule, or the entry's own decision, denies it ([`Reason::Denied`]).
    Denied,
    /// A presented approval was voided because the policy now denies the action
    /// ([`Reason::PolicyChanged`]).
    PolicyChanged,
}

impl DenyReason {
    /// The reason in the one vocabulary.
    pub const fn reason(self) -> Reason {
        match self {
            DenyReason::UnknownAction => Reason::UnknownAction,
            DenyReason::NoMatchingRule => Reason::NoMatchingRule,
            DenyReason::Denied => Reason::Denied,
            DenyReason::PolicyChanged => Reason::PolicyChanged,
        }
    }

    /// What a person can do about it.
    pub const fn hint(self) -> &'static str {
        match self {
            DenyReason::UnknownAction => {
                "the policy has no entry for it; add one to allow or approve it"
            }
            DenyReason::NoMatchingRule => {
                "no rule matched these arguments; change the arguments or the policy"
            }
            DenyReason::Denied => "a policy rule denies it; do not retry",
            DenyReason::PolicyChanged => {
                "the policy changed since the approval and now denies it; the approval is void; do not retry"
            }
        }
    }
}

impl fmt::Display for DenyReason {
    /// The wire string of [`DenyReason::reason`].
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.reason().as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_one_wire_string_that_parses_back() {
        let mut seen = std::collections::BTreeSet::new();
        for reason in Reason::ALL {
            assert!(seen.insert(reason.as_str()), "{reason} twice");
            assert_eq!(Reason::parse(reason.as_str()), Some(reason));
            assert_eq!(reason.to_string(), reason.as_str());
        }
        assert_eq!(Reason::parse("something_new"), None);
    }
}
