//! Kernel values as Python objects: JSON values as `json.loads` would give them, and receipts
//! as dicts in the `countersign.receipt/v2` shape.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString};

use crate::json_error;

/// A JSON value as the Python objects `json.loads` would give for its text (serde_json's
/// `Value`: integers that fit `i64`/`u64` become `int`, other numbers `float`).
pub(crate) fn value_to_py<'py>(
    py: Python<'py>,
    value: &serde_json::Value,
) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(flag) => PyBool::new(py, *flag).to_owned().into_any(),
        Value::Number(number) => match (number.as_i64(), number.as_u64()) {
            (Some(integer), _) => integer.into_pyobject(py)?.into_any(),
            (None, Some(integer)) => integer.into_pyobject(py)?.into_any(),
            // INVARIANT (finite-numbers): serde_json numbers are finite; NaN never occurs.
            (None, None) => PyFloat::new(py, number.as_f64().unwrap_or(f64::NAN)).into_any(),
        },
        Value::String(text) => PyString::new(py, text).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(value_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(members) => {
            let dict = PyDict::new(py);
            for (key, member) in members {
                dict.set_item(key, value_to_py(py, member)?)?;
            }
            dict.into_any()
        }
    })
}

/// A receipt as the dict `json.loads` gives for its `countersign.receipt/v2` JSON, built
/// directly (no JSON text in between): the same keys, in the same order, with the same values.
/// `test_executed_receipt_is_the_stored_receipt` (tests/test_binding.py) holds the two equal.
pub(crate) fn receipt_to_py<'py>(
    py: Python<'py>,
    receipt: &countersign::Receipt,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    fn text<T: AsRef<str>>(value: &Option<T>) -> Option<&str> {
        value.as_ref().map(AsRef::as_ref)
    }
    dict.set_item("schema", &receipt.schema)?;
    dict.set_item("seq", receipt.seq)?;
    dict.set_item("prev_hash", receipt.prev_hash.as_str())?;
    dict.set_item("recorded_at", receipt.recorded_at.to_rfc3339())?;
    let kind = serde_json::to_value(receipt.kind).map_err(json_error)?;
    dict.set_item("kind", value_to_py(py, &kind)?)?;
    dict.set_item("outcome", receipt.outcome.as_str())?;
    dict.set_item("reason", text(&receipt.reason))?;
    dict.set_item("attempt_id", text(&receipt.attempt_id))?;
    dict.set_item("action", text(&receipt.action))?;
    dict.set_item("action_hash", text(&receipt.action_hash))?;
    dict.set_item("principal", text(&receipt.principal))?;
    dict.set_item("resource", text(&receipt.resource))?;
    dict.set_item("environment", text(&receipt.environment))?;
    dict.set_item("effect_key", text(&receipt.effect_key))?;
    match &receipt.arguments {
        Some(arguments) => dict.set_item("arguments", value_to_py(py, arguments)?)?,
        None => dict.set_item("arguments", py.None())?,
    }
    dict.set_item("decision", text(&receipt.decision))?;
    dict.set_item("mode", text(&receipt.mode))?;
    dict.set_item("approval_id", text(&receipt.approval_id))?;
    dict.set_item("approver", text(&receipt.approver))?;
    dict.set_item("note", text(&receipt.note))?;
    dict.set_item("policy_hash", text(&receipt.policy_hash))?;
    dict.set_item("approval_policy_hash", text(&receipt.approval_policy_hash))?;
    dict.set_item("detail", text(&receipt.detail))?;
    // The v2 fields, in the serialized order, only when set (as their JSON leaves them out).
    if let Some(given) = receipt.approvals_given {
        dict.set_item("approvals_given", given)?;
    }
    if let Some(needed) = receipt.approvals_needed {
        dict.set_item("approvals_needed", needed)?;
    }
    if let Some(groups) = &receipt.approver_groups {
        dict.set_item("approver_groups", groups.clone())?;
    }
    if let Some(channel) = &receipt.channel {
        dict.set_item("channel", channel)?;
    }
    if let Some(authentication) = &receipt.authentication {
        dict.set_item("authentication", authentication)?;
    }
    if let Some(confirmed) = receipt.hash_confirmed {
        dict.set_item("hash_confirmed", confirmed)?;
    }
    if let Some(approvers) = &receipt.approvers {
        let approvers = serde_json::to_value(approvers).map_err(json_error)?;
        dict.set_item("approvers", value_to_py(py, &approvers)?)?;
    }
    if let Some(started) = receipt.attempt_started_at {
        dict.set_item("attempt_started_at", started.to_rfc3339())?;
    }
    if !receipt.hash.is_empty() {
        dict.set_item("hash", receipt.hash.as_str())?;
    }
    Ok(dict)
}
