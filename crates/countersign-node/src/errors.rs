//! Kernel errors as JavaScript errors.
//!
//! The error classes live in JavaScript (`errors.js`, one per `ControlError` family, as the
//! Python binding's `countersign/errors.py`); this module names the class, the message, the
//! stable `reason`, `did_run`, `may_retry` and the variant's fields (all from the kernel's one
//! mapping, `ErrorReport`, shared with the Python binding and exhaustive over `ControlError`),
//! and rejects with an `Error` whose message is [`REFUSAL_PREFIX`] plus that JSON. The wrapper
//! (`index.js`) builds the instance.

use countersign::policy::LoadError;
use countersign::{AnswerError, ControlError, ErrorReport, StoreError};
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

/// A kernel refusal as the matching JavaScript error. While the conformance kit runs in this
/// process (feature `conformance`), the error also carries the number of the kernel's error,
/// kept by the kit (`kernelRefusal`), so the kit gets back exactly what the kernel refused with
/// when a JavaScript adapter lets the error through.
pub fn control_error(error: ControlError) -> napi::Error {
    let report = error.report();
    #[cfg(feature = "conformance")]
    let report = with_kernel_refusal(report, error);
    from_report(report)
}

/// The report with the number the kit keeps the kernel's error under (`kernel_refusal`).
#[cfg(feature = "conformance")]
fn with_kernel_refusal(mut report: ErrorReport, error: ControlError) -> ErrorReport {
    if let Some(number) = crate::kit::keep_refusal(error)
        && let Value::Object(members) = &mut report.fields
    {
        members.insert("kernel_refusal".to_owned(), json!(number));
    }
    report
}

/// The kernel's one description of an error (`ErrorReport`, shared with the Python binding) as
/// the matching JavaScript error.
fn from_report(report: ErrorReport) -> napi::Error {
    build(
        report.class,
        Said {
            message: &report.message,
            reason: report.reason.as_str(),
            did_run: report.did_run.as_str(),
            may_retry: report.may_retry,
        },
        report.fields,
    )
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
    from_report(error.report())
}

/// A store failure outside an attempt.
pub fn store_error(error: &StoreError) -> napi::Error {
    from_report(error.report())
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
