//! A framework's interrupt played by a Python object, for a `Control` built in Python
//! (`countersign.Control(..., interrupt=obj)`): the operator's `InterruptApprovalProvider`
//! around it, as SPEC.md 2.1 has the operator build one for a Rust adapter.
//!
//! The object has `framework` (str: the name in receipts' channel `interrupt:<framework>`),
//! `carries_approved_arguments` (bool) and `interrupt(pending_json) -> answer_json | None`.
//! `None` suspends (the attempt ends `approval_required`, the request stays pending); an
//! exception is `interrupt_failed` (the request stays pending). The answer is
//! `{"decision", "approver" | "approver_token", "note", "arguments", "action_hash"}`; see
//! [`parse_answer`].

use countersign::FrameworkInterrupt;
use countersign::approval::{AnswerDecision, ApprovalAnswer, InterruptError, PendingApproval};
use countersign::approver::Credential;
use pyo3::prelude::*;

/// The framework's interrupt, played by a Python object the operator handed `Control`.
pub(crate) struct PyFrameworkInterrupt {
    pub(crate) object: Py<PyAny>,
    pub(crate) framework: String,
    pub(crate) carries: bool,
}

impl PyFrameworkInterrupt {
    /// Read `framework` and `carries_approved_arguments` from `object`; a `TypeError` names
    /// what is missing.
    pub(crate) fn new(py: Python<'_>, object: Py<PyAny>) -> PyResult<PyFrameworkInterrupt> {
        let bound = object.bind(py);
        let missing = |name: &str| {
            pyo3::exceptions::PyTypeError::new_err(format!(
                "the interrupt lacks `{name}`: an interrupt has `framework` (str), \
                 `carries_approved_arguments` (bool) and `interrupt(pending_json)`"
            ))
        };
        let framework: String = bound
            .getattr("framework")
            .map_err(|_| missing("framework"))?
            .extract()?;
        if framework.is_empty() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "the interrupt's `framework` is empty: name the framework (`langgraph`)",
            ));
        }
        let carries = bound
            .getattr("carries_approved_arguments")
            .map_err(|_| missing("carries_approved_arguments"))?
            .is_truthy()?;
        if !bound.hasattr("interrupt")? {
            return Err(missing("interrupt"));
        }
        Ok(PyFrameworkInterrupt {
            object,
            framework,
            carries,
        })
    }
}

#[async_trait::async_trait]
impl FrameworkInterrupt for PyFrameworkInterrupt {
    fn framework(&self) -> &str {
        &self.framework
    }

    fn carries_approved_arguments(&self) -> bool {
        self.carries
    }

    async fn interrupt(&self, pending: PendingApproval) -> Result<ApprovalAnswer, InterruptError> {
        let text = serde_json::to_string(&pending)
            .map_err(|error| InterruptError::Failed(error.to_string()))?;
        // On a thread of its own, outside the module's runtime, so the Python object may call
        // any binding method (each of which drives the runtime itself).
        let answered = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    Python::attach(
                        |py| match self.object.call_method1(py, "interrupt", (text,)) {
                            Ok(value) if value.is_none(py) => Ok(None),
                            Ok(value) => value.extract::<String>(py).map(Some).map_err(|_| {
                                "the interrupt returned something other than JSON text or None"
                                    .to_owned()
                            }),
                            Err(error) => Err(format!("{}", error.value(py))),
                        },
                    )
                })
                .join()
                .unwrap_or_else(|_| Err("the interrupt's thread panicked".to_owned()))
        });
        match answered.map_err(InterruptError::Failed)? {
            None => Err(InterruptError::Suspended),
            Some(text) => parse_answer(&text).map_err(InterruptError::Failed),
        }
    }
}

/// An interrupt's answer: `{"decision": "approve"|"deny"|"reject", "approver": str | null,
/// "approver_token": str | null, "note": str | null, "arguments": ..., "action_hash": str |
/// null}`. The decision is read strictly (case B38). Who answered is `approver_token` (an
/// approver token) or else `approver` (a bare name, `asserted`) — the one the operator passed
/// on the resuming call, never a name read back from the framework's payload or run state
/// (SPEC.md 2.2). With neither, the answer names nobody and the kernel refuses it.
pub(crate) fn parse_answer(text: &str) -> Result<ApprovalAnswer, String> {
    // The kernel's one strict reader (issue #19): `{"decision":"deny","decision":"approve"}`
    // is refused, never read as its last key.
    let value: serde_json::Value = countersign::json::read(text).map_err(|error| {
        format!("the interrupt's answer is not JSON Countersign accepts: {error}")
    })?;
    let decision = AnswerDecision::from_submitted(value.get("decision")).map_err(|invalid| {
        format!(
            "the interrupt's answer has decision {}: use \"approve\" or \"deny\"",
            invalid.given
        )
    })?;
    let approver = match (value["approver_token"].as_str(), value["approver"].as_str()) {
        (Some(token), _) => Credential::Token(token.to_owned()),
        (None, Some(name)) => Credential::Asserted(name.to_owned()),
        (None, None) => Credential::Asserted(String::new()),
    };
    Ok(ApprovalAnswer {
        decision,
        approver,
        shown_hash: value["action_hash"]
            .as_str()
            .map(|hash| countersign::ActionHash::from_stored(hash.to_owned())),
        note: value["note"].as_str().map(str::to_owned),
        arguments: value.get("arguments").filter(|a| !a.is_null()).cloned(),
    })
}
