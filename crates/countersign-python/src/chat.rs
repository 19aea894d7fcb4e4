//! The chat-surface contract for Python (issue #17): a pending request as its
//! `countersign.interrupt/v1` object, and one response to it handed to the kernel's one answer
//! path. Both halves are the kernel's (`countersign::display::interrupt_object`,
//! `countersign::display::parse_interrupt_response`), so an adapter's `emit_interrupts` /
//! `apply_responses` speak exactly what `POST /api/v1/interrupts/responses` reads.

use countersign::ApprovalId;
use countersign::approver::{Channel, Credential};
use countersign::display::{interrupt_object, parse_interrupt_response};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::{answer_error, store_error};
use crate::{NativeControl, runtime, to_json};

/// The request `request_id` as a `countersign.interrupt/v1` object (JSON text), or `None` when
/// the store holds no such request. A read.
#[pyfunction]
fn interrupt_object_json(
    py: Python<'_>,
    control: PyRef<'_, NativeControl>,
    request_id: &str,
) -> PyResult<Option<String>> {
    let id =
        ApprovalId::parse(request_id).map_err(|error| PyValueError::new_err(error.to_string()))?;
    let store = control.control.store();
    let found = py.detach(|| runtime().block_on(store.approval(&id)));
    match found {
        Ok(Some(record)) => Ok(Some(to_json(&interrupt_object(&record))?)),
        Ok(None) => Ok(None),
        Err(error) => Err(store_error(py, &error)),
    }
}

/// Hand one chat-surface response (`response_json`, read strictly: anything but `{"decision":
/// "approve"|"deny", "action_hash": str, "note": str?}` is an invalid decision the kernel
/// records as a refused answer) to `submit_answer`, as `token` (verified) or else `approver`
/// (asserted), through the channel `interrupt:<framework>`. Returns the stored request as JSON.
#[pyfunction]
#[pyo3(signature = (control, request_id, response_json, framework, approver=None, token=None))]
fn respond(
    py: Python<'_>,
    control: PyRef<'_, NativeControl>,
    request_id: &str,
    response_json: &str,
    framework: &str,
    approver: Option<&str>,
    token: Option<&str>,
) -> PyResult<String> {
    let id =
        ApprovalId::parse(request_id).map_err(|error| PyValueError::new_err(error.to_string()))?;
    if framework.is_empty() {
        return Err(PyValueError::new_err(
            "the framework is empty: name the framework the response came through",
        ));
    }
    // Text that is not JSON is kept as a JSON string, so the refusal receipt shows it.
    let submitted: serde_json::Value = serde_json::from_str(response_json)
        .unwrap_or_else(|_| serde_json::Value::String(response_json.to_owned()));
    let (decision, shown_hash, note) = match parse_interrupt_response(&submitted) {
        Ok(response) => (
            Ok(response.decision),
            Some(response.action_hash),
            response.note,
        ),
        Err(invalid) => (Err(invalid), None, None),
    };
    let credential = match (token, approver) {
        (Some(token), _) => Credential::Token(token.to_owned()),
        (None, Some(name)) => Credential::Asserted(name.to_owned()),
        (None, None) => Credential::Asserted(String::new()),
    };
    let answer = countersign::store::RecordAnswer {
        request_id: id,
        decision,
        approver: credential,
        channel: Channel::Interrupt(framework.to_owned()),
        shown_hash,
        note,
    };
    let store = control.control.store();
    let now = control.control.clock().now();
    let recorded = py.detach(|| {
        runtime().block_on(countersign::control::submit_answer(
            store.as_ref(),
            answer,
            now,
        ))
    });
    match recorded {
        Ok(record) => crate::record_json(&record),
        Err(error) => Err(answer_error(py, &error)),
    }
}

/// Add the chat-surface functions to the native module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(interrupt_object_json, module)?)?;
    module.add_function(wrap_pyfunction!(respond, module)?)?;
    Ok(())
}
