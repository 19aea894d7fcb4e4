//! [`ErrorReport`]: what the Python and Node bindings say about a kernel error, written once
//! (issue #19). Each binding turns a report into its own exception or error object; neither
//! keeps its own copy of the mapping.

use serde_json::{Value, json};

use super::{AnswerError, ControlError, DidRun, Reason, StoreError};

/// One kernel error as a binding shows it: the class (the same name in Python's
/// `countersign.errors` and JavaScript's `errors.js`), the one-line message, the reason, did the
/// attempt run, may the caller retry, and the variant's fields (snake_case keys; ids, hashes and
/// times as strings).
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorReport {
    /// The error class, for example `ApprovalRequired` or `StoreError`.
    pub class: &'static str,
    /// The message: what happened and what to do next.
    pub message: String,
    /// The reason.
    pub reason: Reason,
    /// Did the attempt run the executor?
    pub did_run: DidRun,
    /// May the identical call (or, for an answer, a corrected one) be sent again?
    pub may_retry: bool,
    /// The variant's data, a JSON object.
    pub fields: Value,
}

impl DidRun {
    /// `no` or `maybe`, as every binding and the gateway write it.
    pub const fn as_str(self) -> &'static str {
        match self {
            DidRun::No => "no",
            DidRun::Maybe => "maybe",
        }
    }
}

impl ControlError {
    /// What a binding says about this refusal. Exhaustive over the variants, so a new refusal
    /// does not compile until it is given a class.
    pub fn report(&self) -> ErrorReport {
        let (class, fields) = match self {
            ControlError::InvalidArguments { action, source } => (
                "InvalidArguments",
                json!({
                    "action": action,
                    "detail": source.to_string(),
                    "canonical_reason": source.reason(),
                }),
            ),
            ControlError::Template { action, source } => (
                "BadTemplate",
                json!({"action": action, "detail": source.to_string()}),
            ),
            ControlError::NoPrincipal { action } => ("NoPrincipal", json!({"action": action})),
            ControlError::ActionDenied {
                action,
                action_hash,
                policy_hash,
                ..
            } => (
                "ActionDenied",
                json!({"action": action, "action_hash": action_hash, "policy_hash": policy_hash}),
            ),
            ControlError::ApprovalRequired {
                request_id,
                action_hash,
                expires_at,
            } => (
                "ApprovalRequired",
                json!({"request_id": request_id, "action_hash": action_hash, "expires_at": expires_at}),
            ),
            ControlError::ApprovalDenied {
                request_id,
                approver,
                note,
            } => (
                "ApprovalDenied",
                json!({"request_id": request_id, "approver": approver, "note": note}),
            ),
            ControlError::ApprovalMismatch {
                request_id,
                approved_hash,
                action_hash,
                other_principal,
            } => (
                "ApprovalMismatch",
                json!({"request_id": request_id, "approved_hash": approved_hash, "action_hash": action_hash, "other_principal": other_principal}),
            ),
            ControlError::ApprovalConsumed { request_id } => {
                ("ApprovalConsumed", json!({"request_id": request_id}))
            }
            ControlError::ApprovalExpired {
                request_id,
                expires_at,
            } => (
                "ApprovalExpired",
                json!({"request_id": request_id, "expires_at": expires_at}),
            ),
            ControlError::ApprovalUnknown { request_id } => {
                ("ApprovalUnknown", json!({"request_id": request_id}))
            }
            ControlError::ApprovalVoid { request_id } => {
                ("ApprovalVoid", json!({"request_id": request_id}))
            }
            ControlError::ApprovalRevoked { request_id } => {
                ("ApprovalRevoked", json!({"request_id": request_id}))
            }
            ControlError::ApprovalCancelled { request_id } => {
                ("ApprovalCancelled", json!({"request_id": request_id}))
            }
            ControlError::ApprovalOtherRun { request_id, run } => (
                "ApprovalOtherRun",
                json!({"request_id": request_id, "run": run}),
            ),
            ControlError::InterruptFailed {
                request_id,
                framework,
                message,
            } => (
                "InterruptFailed",
                json!({"request_id": request_id, "framework": framework, "detail": message}),
            ),
            ControlError::AnswerRefused { request_id, .. } => {
                ("AnswerRefused", json!({"request_id": request_id}))
            }
            ControlError::DuplicateEffect {
                effect_key,
                in_progress,
            } => (
                "DuplicateEffect",
                json!({"effect_key": effect_key, "in_progress": in_progress}),
            ),
            ControlError::AmbiguousEffect { effect_key } => {
                ("AmbiguousEffect", json!({"effect_key": effect_key}))
            }
            ControlError::NotExecuted {
                effect_key,
                message,
                ..
            } => (
                "NotExecuted",
                json!({"effect_key": effect_key, "detail": message}),
            ),
            ControlError::OutcomeUnknown {
                action,
                effect_key,
                cause,
                ..
            } => (
                "OutcomeUnknown",
                json!({"action": action, "effect_key": effect_key, "detail": cause}),
            ),
            ControlError::Store {
                source: StoreError::Internal { .. },
                ..
            } => ("InternalError", json!({})),
            ControlError::Store { after_run, .. } => {
                ("StoreError", json!({"after_run": after_run}))
            }
            ControlError::Internal(_) => ("InternalError", json!({})),
        };
        ErrorReport {
            class,
            message: self.to_string(),
            reason: self.kind(),
            did_run: self.did_run(),
            may_retry: self.may_retry(),
            fields,
        }
    }
}

impl AnswerError {
    /// What a binding says about an answer that was not recorded. Exhaustive over the variants.
    /// A refused answer changed nothing, so a corrected one (another approver, a valid
    /// decision, the right hash) may be sent: `may_retry` is true for those and for a busy store.
    pub fn report(&self) -> ErrorReport {
        let (class, fields) = match self {
            AnswerError::Unknown { request_id } => {
                ("ApprovalUnknown", json!({"request_id": request_id}))
            }
            AnswerError::AlreadyDecided {
                request_id,
                state,
                approver,
            } => (
                "AlreadyDecided",
                json!({"request_id": request_id, "state": state, "approver": approver}),
            ),
            AnswerError::Expired {
                request_id,
                expires_at,
            } => (
                "ApprovalExpired",
                json!({"request_id": request_id, "expires_at": expires_at}),
            ),
            AnswerError::NoApprover => ("NoApprover", json!({})),
            AnswerError::NoteTooLong(too_long) => (
                "NoteTooLong",
                json!({"bytes": too_long.bytes, "limit": crate::approval::MAX_NOTE_BYTES}),
            ),
            AnswerError::SelfApproval {
                request_id,
                approver,
                shared_group,
            } => (
                "SelfApproval",
                json!({"request_id": request_id, "approver": approver, "shared_group": shared_group}),
            ),
            AnswerError::InvalidDecision { request_id, given } => (
                "InvalidDecision",
                json!({"request_id": request_id, "given": given}),
            ),
            AnswerError::InvalidApprover { request_id, error } => (
                "InvalidApprover",
                json!({"request_id": request_id, "given": error.given}),
            ),
            AnswerError::NotAuthenticated {
                request_id,
                approver,
                ..
            } => (
                "NotAuthenticated",
                json!({"request_id": request_id, "approver": approver}),
            ),
            AnswerError::NotEntitled {
                request_id,
                approver,
                approvers,
                act,
            } => (
                "NotEntitled",
                json!({"request_id": request_id, "approver": approver, "approvers": approvers, "act": act}),
            ),
            AnswerError::Mismatch {
                request_id,
                shown,
                action_hash,
            } => (
                "AnswerMismatch",
                json!({"request_id": request_id, "shown": shown, "action_hash": action_hash}),
            ),
            AnswerError::Revoked { request_id } => {
                ("ApprovalRevoked", json!({"request_id": request_id}))
            }
            AnswerError::Cancelled { request_id } => {
                ("ApprovalCancelled", json!({"request_id": request_id}))
            }
            AnswerError::Consumed { request_id } => {
                ("ApprovalConsumed", json!({"request_id": request_id}))
            }
            AnswerError::NotRevocable { request_id, state } => (
                "NotRevocable",
                json!({"request_id": request_id, "state": state}),
            ),
            AnswerError::Store(_) => ("StoreError", json!({"after_run": false})),
        };
        let may_retry = self.is_refused_answer()
            || matches!(self, AnswerError::NoteTooLong(_))
            || matches!(self, AnswerError::Store(source) if source.is_transient());
        ErrorReport {
            class,
            message: self.to_string(),
            reason: self.kind(),
            did_run: DidRun::No,
            may_retry,
            fields,
        }
    }
}

impl StoreError {
    /// What a binding says about a store failure outside an attempt: nothing ran.
    pub fn report(&self) -> ErrorReport {
        let class = match self {
            StoreError::Internal { .. } => "InternalError",
            StoreError::Busy { .. }
            | StoreError::OutcomeUnknown { .. }
            | StoreError::Incompatible { .. }
            | StoreError::Corrupt { .. }
            | StoreError::Open { .. }
            | StoreError::NoStore { .. }
            | StoreError::Backend { .. } => "StoreError",
        };
        ErrorReport {
            class,
            message: format!("not executed: {self}"),
            reason: self.kind(),
            did_run: DidRun::No,
            may_retry: self.is_transient(),
            fields: json!({"after_run": false}),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::ApprovalId;
    use crate::approver::ApproverId;

    fn request_id() -> ApprovalId {
        ApprovalId::parse("apr_aaaaaaaaaaaaaaaaaaaa").expect("an id")
    }

    #[test]
    fn a_bug_of_ours_in_the_store_is_internal_never_a_store_error() {
        let bug = StoreError::Internal {
            detail: "an invariant broke".to_owned(),
        };
        assert_eq!(bug.kind(), Reason::Internal);
        let report = bug.report();
        assert_eq!(
            (report.class, report.reason),
            ("InternalError", Reason::Internal)
        );
        assert!(
            report.message.contains("please report it"),
            "{}",
            report.message
        );
        let refusal = ControlError::Store {
            after_run: false,
            source: bug,
        };
        assert_eq!(refusal.kind(), Reason::Internal);
        assert_eq!(refusal.report().class, "InternalError");
        let backend = StoreError::Backend {
            message: "disk I/O error".to_owned(),
        };
        assert_eq!(backend.report().class, "StoreError");
    }

    #[test]
    fn a_malformed_approver_reports_its_own_class_with_what_was_given() {
        let error = AnswerError::InvalidApprover {
            request_id: request_id(),
            error: ApproverId::parse("human: bob").unwrap_err(),
        };
        let report = error.report();
        assert_eq!(report.class, "InvalidApprover");
        assert_eq!(report.reason, Reason::InvalidApprover);
        assert_eq!(report.fields["given"], "human: bob");
        assert!(report.may_retry, "a corrected answer may be sent");
        let refusal = ControlError::from_answer_error(error);
        assert_eq!(refusal.kind(), Reason::InvalidApprover);
        assert_eq!(refusal.report().class, "AnswerRefused");
    }

    #[test]
    fn an_approval_required_report_carries_its_fields() {
        let refusal = ControlError::ApprovalRequired {
            request_id: request_id(),
            action_hash: crate::ActionHash::from_stored(format!("sha256:{}", "a".repeat(64))),
            expires_at: crate::Timestamp::from_millis(0),
        };
        let report = refusal.report();
        assert_eq!(report.class, "ApprovalRequired");
        assert_eq!(report.did_run.as_str(), "no");
        assert!(report.may_retry);
        assert_eq!(report.fields["request_id"], "apr_aaaaaaaaaaaaaaaaaaaa");
        assert_eq!(report.message, refusal.to_string());
    }
}
