//! Taking it back from Python (issue #31): revoke a grant, cancel a request or a whole run, and
//! revoke an approver token. Each is one call into the kernel's [`countersign::Control`].

use countersign::approval::ApprovalId;
use countersign::approval::withdraw::{Withdrawal, WithdrawalKind};
use countersign::approver::{Channel, Credential};
use countersign::control::RevokeTokenError;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::errors::{answer_error, store_error};
use crate::{record_json, runtime};

/// Revoke (`cancel` false) as `token` (verified) or else `approver` (asserted), or cancel
/// (`cancel` true) as the operator named `approver`, through [`Channel::Api`]. Returns the
/// stored request as JSON.
pub fn withdraw(
    py: Python<'_>,
    control: &countersign::Control,
    request_id: &str,
    cancel: bool,
    approver: Option<&str>,
    token: Option<&str>,
    reason: Option<&str>,
) -> PyResult<String> {
    let id =
        ApprovalId::parse(request_id).map_err(|error| PyValueError::new_err(error.to_string()))?;
    let channel = Channel::Api;
    let kind = if cancel {
        WithdrawalKind::Cancel {
            operator: approver.unwrap_or_default().to_owned(),
            channel,
        }
    } else {
        let approver = match (token, approver) {
            (Some(token), _) => Credential::Token(token.to_owned()),
            (None, name) => Credential::Asserted(name.unwrap_or_default().to_owned()),
        };
        WithdrawalKind::Revoke { approver, channel }
    };
    let withdrawal = Withdrawal {
        request_id: id,
        kind,
        reason: reason.map(str::to_owned),
    };
    let control = control.clone();
    match py.detach(|| runtime().block_on(control.withdraw(withdrawal))) {
        Ok(record) => record_json(&record),
        Err(error) => Err(answer_error(py, &error)),
    }
}

/// Cancel every waiting request of `run` as `operator`. Returns a list of
/// `(request_id, outcome)` pairs, oldest request first, where `outcome` is the cancelled
/// request as JSON text, or the exception its refusal maps to (a request that changed
/// meanwhile); the others still go ahead.
pub fn cancel_run<'py>(
    py: Python<'py>,
    control: &countersign::Control,
    run: &str,
    operator: &str,
    reason: Option<&str>,
) -> PyResult<Bound<'py, PyList>> {
    let control = control.clone();
    let done = py
        .detach(|| runtime().block_on(control.cancel_run(run, operator, reason)))
        .map_err(|error| answer_error(py, &error))?;
    let pairs = PyList::empty(py);
    for (id, outcome) in done {
        let outcome = match outcome {
            Ok(record) => record_json(&record)?.into_pyobject(py)?.into_any(),
            Err(error) => answer_error(py, &error)
                .into_value(py)
                .into_bound(py)
                .into_any(),
        };
        pairs.append((id.to_string(), outcome))?;
    }
    Ok(pairs)
}

/// Put an approver token (its id `tok_…` or the whole token) on the store's deny-list as
/// `operator`. Returns false when it was already there.
pub fn revoke_token(
    py: Python<'_>,
    control: &countersign::Control,
    token_or_id: &str,
    operator: &str,
    reason: Option<&str>,
) -> PyResult<bool> {
    let control = control.clone();
    match py.detach(|| runtime().block_on(control.revoke_token(token_or_id, operator, reason))) {
        Ok(added) => Ok(added),
        Err(RevokeTokenError::NotATokenId(message)) => Err(PyValueError::new_err(message)),
        Err(RevokeTokenError::Store(error)) => Err(store_error(py, &error)),
    }
}
