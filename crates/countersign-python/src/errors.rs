//! Kernel errors as Python exceptions.
//!
//! The exception classes live in Python (`countersign/errors.py`, one per `ControlError`
//! family); this module names the class, the message, the stable `reason`, `did_run`,
//! `may_retry` and the variant's fields, and asks `countersign.errors._from_kernel` to build the
//! instance. The match is exhaustive over `ControlError`, so a new kernel refusal does not
//! compile here until the binding decides what Python sees.

use countersign::policy::LoadError;
use countersign::{AnswerError, ControlError, DidRun, StoreError};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use serde_json::{Value, json};

/// What every Countersign exception says: the one-line message, the stable reason code, did the
/// attempt run (`no` or `maybe`), and may the caller retry.
struct Said<'a> {
    message: &'a str,
    reason: &'a str,
    did_run: &'a str,
    may_retry: bool,
}

/// Build `countersign.errors.<class>` for a kernel failure. `cause`, if given, becomes the
/// exception's `__cause__` (the executor's own exception).
fn build(
    py: Python<'_>,
    class: &str,
    said: Said<'_>,
    fields: Value,
    cause: Option<PyErr>,
) -> PyErr {
    let Said {
        message,
        reason,
        did_run,
        may_retry,
    } = said;
    // Looked up once per interpreter: importing on every refusal cost more than the refusal.
    static FROM_KERNEL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let made = (|| -> PyResult<PyErr> {
        let from_kernel = FROM_KERNEL.get_or_try_init(py, || {
            py.import("countersign.errors")?
                .getattr("_from_kernel")
                .map(Bound::unbind)
        })?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("cause", cause.map(|error| error.into_value(py)))?;
        let instance = from_kernel.bind(py).call(
            (
                class,
                message,
                reason,
                did_run,
                may_retry,
                crate::value_to_py(py, &fields)?,
            ),
            Some(&kwargs),
        )?;
        Ok(PyErr::from_value(instance))
    })();
    made.unwrap_or_else(|error| error)
}

/// A bug in the binding: please report it.
pub fn internal(message: &str) -> PyErr {
    PyRuntimeError::new_err(format!("internal error (please report it): {message}"))
}

fn did_run(error: &ControlError) -> &'static str {
    match error.did_run() {
        DidRun::No => "no",
        DidRun::Maybe => "maybe",
    }
}

/// A kernel refusal as the matching `countersign` exception. While the conformance kit runs in
/// this process, the exception also carries the kernel's error itself (attribute
/// `_kernel_refusal`), so the kit gets back exactly what the kernel refused with when a Python
/// adapter lets the exception through; otherwise nothing is added to the refusal path.
pub fn control_error(py: Python<'_>, error: ControlError, cause: Option<PyErr>) -> PyErr {
    let built = control_exception(py, &error, cause);
    // Only wheels built with the kit (`conformance`) carry it, and only while it runs.
    #[cfg(feature = "conformance")]
    if crate::kit::running()
        && let Ok(refusal) = Py::new(py, crate::kit::KernelRefusal::new(error))
    {
        // Best effort: an exception that cannot take the attribute is still the right one.
        let _ = built
            .value(py)
            .setattr(crate::kit::REFUSAL_ATTRIBUTE, refusal);
    }
    built
}

fn control_exception(py: Python<'_>, error: &ControlError, cause: Option<PyErr>) -> PyErr {
    let (class, fields) = match error {
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
    build(
        py,
        class,
        Said {
            message: &error.to_string(),
            reason: error.reason(),
            did_run: did_run(error),
            may_retry: error.may_retry(),
        },
        fields,
        cause,
    )
}

/// An answer that was not recorded, as the matching `countersign` exception.
pub fn answer_error(py: Python<'_>, error: &AnswerError) -> PyErr {
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
        py,
        class,
        Said {
            message: &error.to_string(),
            reason: error.reason(),
            did_run: "no",
            may_retry,
        },
        fields,
        None,
    )
}

/// A store failure outside an attempt.
pub fn store_error(py: Python<'_>, error: &StoreError) -> PyErr {
    build(
        py,
        "StoreError",
        Said {
            message: &format!("not executed: {error}"),
            reason: error.reason(),
            did_run: "no",
            may_retry: error.is_transient(),
        },
        json!({"after_run": false}),
        None,
    )
}

/// A policy that could not load (file, line and column in the message).
pub fn load_error(py: Python<'_>, error: &LoadError) -> PyErr {
    build(
        py,
        "PolicyError",
        Said {
            message: &error.to_string(),
            reason: "policy_load",
            did_run: "no",
            may_retry: false,
        },
        json!({}),
        None,
    )
}

/// Is `error` a `countersign.NotExecuted` raised by an executor?
pub fn is_not_executed(py: Python<'_>, error: &PyErr) -> bool {
    py.import("countersign.errors")
        .and_then(|module| module.getattr("NotExecuted"))
        .map(|class| error.value(py).is_instance(&class).unwrap_or(false))
        .unwrap_or(false)
}
