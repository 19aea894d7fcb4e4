//! Kernel errors as JavaScript errors.
//!
//! The error classes live in JavaScript (`errors.js`, one per `ControlError` family, as the
//! Python binding's `countersign/errors.py`); this module names the class, the message, the
//! stable `reason`, `did_run`, `may_retry` and the variant's fields, and rejects with an `Error`
//! whose message is [`REFUSAL_PREFIX`] plus that JSON. The wrapper (`index.js`) builds the
//! instance. The match is exhaustive over `ControlError`, so a new kernel refusal does not
//! compile here until the binding decides what JavaScript sees.

use countersign::policy::LoadError;
use countersign::{AnswerError, ControlError, DidRun, StoreError};
use serde_json::{Value, json};

/// What starts the message of every rejection that carries a Countersign error as JSON.
pub const REFUSAL_PREFIX: &str = "countersign-refusal:";

/// What every Countersign error says: the one-line message, the stable reason code, did the
/// attempt run (`no` or `maybe`), and may the caller retry.
struct Said<'a> {
    message: &'a str,
    reason: &'a str,
    did_run: &'a str,
    may_retry: bool,
}

fn build(class: &str, said: Said<'_>, fields: Value) -> napi::Error {
    let payload = json!({
        "class": class,
        "message": said.message,
        "reason": said.reason,
        "did_run": said.did_run,
        "may_retry": said.may_retry,
        "fields": fields,
    });
    napi::Error::from_reason(format!("{REFUSAL_PREFIX}{payload}"))
}

/// A bug in the binding: please report it (`InternalError` in JavaScript).
pub fn internal(message: &str) -> napi::Error {
    build(
        "InternalError",
        Said {
            message: &format!("internal error (please report it): {message}"),
            reason: "internal",
            did_run: "no",
            may_retry: false,
        },
        json!({}),
    )
}

/// The caller's misuse (a malformed id, a negative timeout): a `TypeError` in JavaScript, not a
/// refusal. Nothing was written.
pub fn misuse(message: &str) -> napi::Error {
    napi::Error::new(napi::Status::InvalidArg, message.to_owned())
}

fn did_run(error: &ControlError) -> &'static str {
    match error.did_run() {
        DidRun::No => "no",
        DidRun::Maybe => "maybe",
    }
}

/// A kernel refusal as the matching JavaScript error. While the conformance kit runs in this
/// process (feature `conformance`), the error also carries the number of the kernel's error,
/// kept by the kit (`kernelRefusal`), so the kit gets back exactly what the kernel refused with
/// when a JavaScript adapter lets the error through.
pub fn control_error(error: ControlError) -> napi::Error {
    let (class, fields) = match &error {
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
        } => (
            "ApprovalMismatch",
            json!({"request_id": request_id, "approved_hash": approved_hash, "action_hash": action_hash}),
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
        } => (
            "NotExecuted",
            json!({"effect_key": effect_key, "detail": message}),
        ),
        ControlError::OutcomeUnknown {
            action,
            effect_key,
            cause,
        } => (
            "OutcomeUnknown",
            json!({"action": action, "effect_key": effect_key, "detail": cause}),
        ),
        ControlError::Store { after_run, .. } => ("StoreError", json!({"after_run": after_run})),
        ControlError::Internal(_) => ("InternalError", json!({})),
    };
    let message = error.to_string();
    let said = Said {
        message: &message,
        reason: error.reason(),
        did_run: did_run(&error),
        may_retry: error.may_retry(),
    };
    #[cfg(feature = "conformance")]
    let fields = match (fields, crate::kit::keep_refusal(error)) {
        (Value::Object(mut members), Some(number)) => {
            members.insert("kernel_refusal".to_owned(), json!(number));
            Value::Object(members)
        }
        (fields, _) => fields,
    };
    build(class, said, fields)
}

/// The kit's executor said its effect did not happen: `NotExecuted` in JavaScript, as an
/// executor would throw it.
#[cfg(feature = "conformance")]
pub fn not_executed(reason: &str) -> napi::Error {
    build(
        "NotExecuted",
        Said {
            message: reason,
            reason: "not_executed",
            did_run: "no",
            may_retry: true,
        },
        json!({}),
    )
}

/// An answer that was not recorded, as the matching JavaScript error.
pub fn answer_error(error: &AnswerError) -> napi::Error {
    let (class, fields) = match error {
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
        } => (
            "NotEntitled",
            json!({"request_id": request_id, "approver": approver, "approvers": approvers}),
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
    // A refused answer changed nothing: a corrected one (another approver, a valid decision,
    // the right hash) may be sent.
    let may_retry = error.is_refused_answer()
        || matches!(error, AnswerError::Store(source) if source.is_transient());
    build(
        class,
        Said {
            message: &error.to_string(),
            reason: error.reason(),
            did_run: "no",
            may_retry,
        },
        fields,
    )
}

/// A store failure outside an attempt.
pub fn store_error(error: &StoreError) -> napi::Error {
    build(
        "StoreError",
        Said {
            message: &format!("not executed: {error}"),
            reason: error.reason(),
            did_run: "no",
            may_retry: error.is_transient(),
        },
        json!({"after_run": false}),
    )
}

/// A policy that could not load (file, line and column in the message).
pub fn load_error(error: &LoadError) -> napi::Error {
    build(
        "PolicyError",
        Said {
            message: &error.to_string(),
            reason: "policy_load",
            did_run: "no",
            may_retry: false,
        },
        json!({}),
    )
}
