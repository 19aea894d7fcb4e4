//! Kernel errors as Python exceptions.
//!
//! The exception classes live in Python (`countersign/errors.py`, one per `ControlError`
//! family). The class, the message, the stable `reason`, `did_run`, `may_retry` and the
//! variant's fields come from the kernel's one mapping, `ErrorReport` (`ControlError::report`,
//! shared with the Node binding, exhaustive over the variants); this module asks
//! `countersign.errors._from_kernel` to build the instance.

use countersign::policy::LoadError;
use countersign::{AnswerError, ControlError, ErrorReport, StoreError};
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
    report_exception(py, error.report(), cause)
}

/// The kernel's one description of an error (`ErrorReport`, shared with the Node binding) as
/// the matching `countersign` exception.
fn report_exception(py: Python<'_>, report: ErrorReport, cause: Option<PyErr>) -> PyErr {
    build(
        py,
        report.class,
        Said {
            message: &report.message,
            reason: report.reason.as_str(),
            did_run: report.did_run.as_str(),
            may_retry: report.may_retry,
        },
        report.fields,
        cause,
    )
}

/// An answer that was not recorded, as the matching `countersign` exception.
pub fn answer_error(py: Python<'_>, error: &AnswerError) -> PyErr {
    report_exception(py, error.report(), None)
}

/// A store failure outside an attempt.
pub fn store_error(py: Python<'_>, error: &StoreError) -> PyErr {
    report_exception(py, error.report(), None)
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
