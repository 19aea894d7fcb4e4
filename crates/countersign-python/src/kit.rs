//! The adapter conformance kit (`countersign-conformance`), driven through a Python adapter:
//! `countersign.conformance.run(adapter, relaunch=[...])`.
//!
//! The kit is the Rust one, unchanged: it builds each case's world (a scratch SQLite store, a
//! manual clock, its policy, its identity provider, an `InterruptApprovalProvider` around a
//! counting proxy of the adapter's interrupt) and checks refusals, executor counts, receipts
//! and approval states. This module only lets a Python object play the kit's `Adapter`:
//!
//! - `adapter.framework` (str) and `adapter.shape` (`"decided_before_invocation"` or
//!   `"resumed_in_place"`);
//! - `adapter.interrupt(setup)` returns the framework's interrupt: an object with
//!   `carries_approved_arguments` (bool) and `interrupt(pending_json) -> answer_json | None`;
//! - `adapter.invoke(session, action, arguments_json, run)` drives one protected call of the
//!   kit's run `run` (a label; the adapter maps it to its own per-run id) through the
//!   real framework and returns the executor's value as JSON text, or raises the kernel's
//!   refusal as the `countersign` exception the binding raised (it carries the kernel's error,
//!   which goes back to the kit exactly as it was);
//! - optional `adapter.resume(...)` (same signature) and `adapter.not_applicable(suite, case)`.
//!
//! Every Python call runs on a thread of its own, outside the module's Tokio runtime, so the
//! adapter may call any binding method (each of which drives the runtime itself).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use countersign::approval::{AnswerDecision, ApprovalAnswer, InterruptError, PendingApproval};
use countersign::approver::Credential;
use countersign::{
    ApprovalId, ApprovalState, Control, ControlError, FrameworkInterrupt, Timestamp,
};
use countersign_conformance::adapter_kit::{
    self, Adapter, Call, CaseId, KitOptions, Relaunch, Reviewer, Session, Setup, Shape, Shown, Tool,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::errors::{self, control_error};
use crate::{NativeControl, runtime};

/// A kernel refusal carried by the `countersign` exception the binding raised for it, so a
/// Python adapter that lets the exception through hands the kit the kernel's error itself.
#[pyclass(module = "countersign._native", frozen)]
pub(crate) struct KernelRefusal {
    error: Mutex<Option<ControlError>>,
}

impl KernelRefusal {
    pub(crate) fn new(error: ControlError) -> KernelRefusal {
        KernelRefusal {
            error: Mutex::new(Some(error)),
        }
    }

    fn take(&self) -> Option<ControlError> {
        self.error.lock().ok().and_then(|mut slot| slot.take())
    }
}

/// The attribute of a `countersign` exception that holds its [`KernelRefusal`].
pub(crate) const REFUSAL_ATTRIBUTE: &str = "_kernel_refusal";

/// Set while [`run_adapter_kit`] runs in this process: only then do refusals carry the kernel's
/// error (the attribute costs an allocation on every refusal, which users' calls need not pay).
static RUNNING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Is the kit running in this process?
pub(crate) fn running() -> bool {
    RUNNING.load(std::sync::atomic::Ordering::Relaxed)
}

/// Run `work` on a thread of its own (outside the Tokio runtime) and wait for it.
fn on_own_thread<T: Send>(work: impl FnOnce() -> T + Send) -> Option<T> {
    std::thread::scope(|scope| scope.spawn(work).join().ok())
}

fn describe(py: Python<'_>, error: &PyErr) -> String {
    let name = error
        .get_type(py)
        .name()
        .map(|name| name.to_string())
        .unwrap_or_else(|_| "Exception".to_owned());
    format!("{name}: {}", error.value(py))
}

/// What a Python adapter returned or raised, as the kit wants it.
fn kit_result(
    py: Python<'_>,
    result: PyResult<Bound<'_, PyAny>>,
) -> Result<serde_json::Value, ControlError> {
    match result {
        Ok(value) => {
            let text: String = value.extract().map_err(|_| {
                ControlError::Internal(
                    "the Python adapter's invoke returned something other than JSON text"
                        .to_owned(),
                )
            })?;
            serde_json::from_str(&text).map_err(|error| {
                ControlError::Internal(format!(
                    "the Python adapter's invoke returned text that is not JSON: {error}"
                ))
            })
        }
        Err(error) => {
            let carried = error
                .value(py)
                .getattr(REFUSAL_ATTRIBUTE)
                .ok()
                .and_then(|refusal| {
                    refusal
                        .cast::<KernelRefusal>()
                        .ok()
                        .and_then(|refusal| refusal.get().take())
                });
            Err(carried.unwrap_or_else(|| {
                ControlError::Internal(format!(
                    "the Python adapter raised {}, not a kernel refusal",
                    describe(py, &error)
                ))
            }))
        }
    }
}

/// The framework's interrupt, played by a Python object.
pub(crate) struct PyInterrupt {
    object: Option<Py<PyAny>>,
    framework: String,
    carries: bool,
    broken: Option<String>,
}

#[async_trait::async_trait]
impl FrameworkInterrupt for PyInterrupt {
    fn framework(&self) -> &str {
        &self.framework
    }

    fn carries_approved_arguments(&self) -> bool {
        self.carries
    }

    async fn interrupt(&self, pending: PendingApproval) -> Result<ApprovalAnswer, InterruptError> {
        let (Some(object), None) = (&self.object, &self.broken) else {
            return Err(InterruptError::Failed(
                self.broken.clone().unwrap_or_default(),
            ));
        };
        let text = serde_json::to_string(&pending)
            .map_err(|error| InterruptError::Failed(error.to_string()))?;
        let answered = on_own_thread(|| {
            Python::attach(|py| {
                let result = object.call_method1(py, "interrupt", (text,));
                match result {
                    Ok(value) if value.is_none(py) => Ok(None),
                    Ok(value) => value.extract::<String>(py).map(Some).map_err(|_| {
                        "the interrupt returned something other than JSON text or None".to_owned()
                    }),
                    Err(error) => Err(describe(py, &error)),
                }
            })
        })
        .unwrap_or_else(|| Err("the interrupt's thread panicked".to_owned()));
        match answered.map_err(InterruptError::Failed)? {
            None => Err(InterruptError::Suspended),
            Some(text) => parse_answer(&text).map_err(InterruptError::Failed),
        }
    }
}

/// The interrupt's answer, read as for an interrupt handed to a Python-built `Control`
/// ([`crate::interrupt::parse_answer`]): `approver_token` or `approver` is the one the operator
/// passed on the resuming call, never a name read back from the framework's payload.
fn parse_answer(text: &str) -> Result<ApprovalAnswer, String> {
    crate::interrupt::parse_answer(text)
}

fn shown_from_json(text: &str) -> PyResult<Shown> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|error| PyValueError::new_err(format!("`shown` is not JSON: {error}")))?;
    let request_id = match value["request_id"].as_str() {
        Some(id) => {
            Some(ApprovalId::parse(id).map_err(|error| PyValueError::new_err(error.to_string()))?)
        }
        None => None,
    };
    let expires_at = match &value["expires_at"] {
        serde_json::Value::Null => None,
        time => Some(
            serde_json::from_value::<Timestamp>(time.clone()).map_err(|error| {
                PyValueError::new_err(format!("`expires_at` is not an RFC 3339 time: {error}"))
            })?,
        ),
    };
    Ok(Shown {
        request_id,
        action: value["action"].as_str().unwrap_or_default().to_owned(),
        arguments: value["arguments"].clone(),
        expires_at,
        action_hash: value["action_hash"]
            .as_str()
            .map(|hash| countersign::ActionHash::from_stored(hash.to_owned())),
    })
}

fn review(reviewer: &Reviewer, shown_json: &str) -> PyResult<Option<String>> {
    let shown = shown_from_json(shown_json)?;
    let Some(answer) = reviewer.review(&shown) else {
        return Ok(None);
    };
    let decision = match answer.decision {
        AnswerDecision::Approve => "approve",
        AnswerDecision::Deny => "reject",
    };
    // `approver` (or `approver_token`) is who the operator's application passes on the
    // resuming call; `payload_approver` is the name the run state carries (display only, and
    // edited in the `entitlement` suite): an adapter never hands the kernel that one.
    let (approver, approver_token) = match &answer.operator_approver {
        Credential::Asserted(name) => (Some(name.as_str()), None),
        Credential::Token(token) => (None, Some(token.as_str())),
        Credential::Unverified { .. } | Credential::Verified { .. } => (None, None),
    };
    let value = serde_json::json!({
        "decision": decision,
        "approver": approver,
        "approver_token": approver_token,
        "payload_approver": answer.payload_approver,
        "note": answer.note,
        "request_id": answer.request_id.as_ref().map(ApprovalId::as_str),
        "arguments": answer.arguments,
        "action_hash": answer.shown_hash.as_ref().map(countersign::ActionHash::as_str),
    });
    Ok(Some(value.to_string()))
}

/// What the kit hands `adapter.interrupt`: the world's scripted human and a checkpoint folder.
#[pyclass(module = "countersign._native", frozen)]
struct KitSetup {
    reviewer: Reviewer,
    scratch: PathBuf,
}

#[pymethods]
impl KitSetup {
    /// Show the human `shown_json` (`{"request_id", "action", "arguments", "expires_at"}`);
    /// their answer as JSON text, or `None` when nobody answers.
    fn review(&self, shown_json: &str) -> PyResult<Option<String>> {
        review(&self.reviewer, shown_json)
    }

    /// The folder for framework checkpoints.
    #[getter]
    fn scratch_dir(&self) -> PathBuf {
        self.scratch.clone()
    }
}

/// What the kit hands `adapter.invoke` for one case's world.
#[pyclass(module = "countersign._native", frozen)]
struct KitSession {
    control: Control,
    tool: Tool,
    reviewer: Reviewer,
    scratch: PathBuf,
    interrupt: Option<Py<PyAny>>,
}

#[pymethods]
impl KitSession {
    /// The kit's kernel (the operator's `Control`), for the adapter to use as its own.
    fn control(&self) -> NativeControl {
        let store = self
            .scratch
            .parent()
            .unwrap_or(Path::new("."))
            .join("kit.db");
        NativeControl::adopt(self.control.clone(), format!("sqlite:{}", store.display()))
    }

    /// The interrupt `adapter.interrupt` returned for this world.
    #[getter]
    fn interrupt(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.interrupt.as_ref().map(|object| object.clone_ref(py))
    }

    /// Show the human `shown_json`; their answer as JSON text, or `None`.
    fn review(&self, shown_json: &str) -> PyResult<Option<String>> {
        review(&self.reviewer, shown_json)
    }

    /// Run the kit's executor with `arguments_json` (the canonical arguments the kernel handed
    /// the tool); its value as JSON text. Raises `countersign.NotExecuted` or `RuntimeError`
    /// (outcome unknown) when the case scripts a failure.
    fn run_tool(&self, py: Python<'_>, arguments_json: &str) -> PyResult<String> {
        let arguments: serde_json::Value = countersign::json::read(arguments_json)
            .map_err(|error| PyValueError::new_err(format!("arguments are not JSON: {error}")))?;
        let tool = self.tool.clone();
        // The kit's executor never waits on anything: a local executor drives it.
        match py.detach(|| futures::executor::block_on(tool.call(arguments))) {
            Ok(value) => Ok(value.to_string()),
            Err(error) => match error.not_executed_reason() {
                Some(reason) => {
                    let class = py.import("countersign.errors")?.getattr("NotExecuted")?;
                    Err(PyErr::from_value(class.call1((reason,))?))
                }
                None => Err(PyRuntimeError::new_err(error.to_string())),
            },
        }
    }

    /// The kernel's `ApprovalRequired` refusal for `request_id`, to raise when the framework
    /// paused on that request (decided before invocation: the pause is the framework's, and
    /// no kernel call refused). Raises `ValueError` when the request is not pending.
    fn paused(&self, py: Python<'_>, request_id: &str) -> PyResult<Py<PyAny>> {
        let id = ApprovalId::parse(request_id)
            .map_err(|error| PyValueError::new_err(error.to_string()))?;
        let store = self.control.store();
        let found = py
            .detach(|| runtime().block_on(store.approval(&id)))
            .map_err(|error| errors::store_error(py, &error))?;
        match found {
            Some(record) if record.state == ApprovalState::Pending => {
                let refusal = ControlError::ApprovalRequired {
                    request_id: record.id,
                    action_hash: record.action_hash,
                    expires_at: record.expires_at,
                };
                Ok(control_error(py, refusal, None).into_value(py).into_any())
            }
            Some(record) => Err(PyValueError::new_err(format!(
                "approval request `{request_id}` is {}, not pending",
                record.state.as_str()
            ))),
            None => Err(PyValueError::new_err(format!(
                "no approval request `{request_id}` in the kit's store"
            ))),
        }
    }

    /// The folder for framework checkpoints (it survives into the durability case's second
    /// process).
    #[getter]
    fn scratch_dir(&self) -> PathBuf {
        self.scratch.clone()
    }
}

/// A Python object playing the kit's `Adapter`.
struct PyAdapter {
    object: Py<PyAny>,
    framework: String,
    shape: Shape,
}

impl PyAdapter {
    fn new(py: Python<'_>, object: Py<PyAny>) -> PyResult<PyAdapter> {
        let bound = object.bind(py);
        let framework: String = bound.getattr("framework")?.extract()?;
        let shape = match bound.getattr("shape")?.extract::<String>()?.as_str() {
            "decided_before_invocation" => Shape::DecidedBeforeInvocation,
            "resumed_in_place" => Shape::ResumedInPlace,
            other => {
                return Err(PyValueError::new_err(format!(
                    "adapter.shape is `{other}`: use \"decided_before_invocation\" or \"resumed_in_place\""
                )));
            }
        };
        Ok(PyAdapter {
            object,
            framework,
            shape,
        })
    }

    fn call(
        &self,
        method: &str,
        session: &Session<PyInterrupt>,
        call: &Call,
    ) -> Result<serde_json::Value, ControlError> {
        let arguments = call.arguments.to_string();
        on_own_thread(|| {
            Python::attach(|py| {
                let interrupt = session
                    .interrupt()
                    .object
                    .as_ref()
                    .map(|object| object.clone_ref(py));
                let handle = Py::new(
                    py,
                    KitSession {
                        control: session.control().clone(),
                        tool: session.tool().clone(),
                        reviewer: session.reviewer().clone(),
                        scratch: session.scratch_dir().to_path_buf(),
                        interrupt,
                    },
                )
                .map_err(|error| ControlError::Internal(describe(py, &error)))?;
                let result = self.object.bind(py).call_method1(
                    method,
                    (handle, call.action.as_str(), arguments, call.run.as_str()),
                );
                kit_result(py, result)
            })
        })
        .unwrap_or_else(|| {
            Err(ControlError::Internal(
                "the thread running the Python adapter panicked".to_owned(),
            ))
        })
    }
}

#[async_trait::async_trait]
impl Adapter for PyAdapter {
    type Interrupt = PyInterrupt;

    fn framework(&self) -> &str {
        &self.framework
    }

    fn shape(&self) -> Shape {
        self.shape
    }

    fn interrupt(&self, setup: &Setup) -> Arc<PyInterrupt> {
        let made = on_own_thread(|| {
            Python::attach(|py| -> Result<(Py<PyAny>, bool), String> {
                let handle = Py::new(
                    py,
                    KitSetup {
                        reviewer: setup.reviewer().clone(),
                        scratch: setup.scratch_dir().to_path_buf(),
                    },
                )
                .map_err(|error| describe(py, &error))?;
                let object = self
                    .object
                    .bind(py)
                    .call_method1("interrupt", (handle,))
                    .map_err(|error| describe(py, &error))?;
                let carries = object
                    .getattr("carries_approved_arguments")
                    .and_then(|value| value.is_truthy())
                    .map_err(|error| describe(py, &error))?;
                Ok((object.unbind(), carries))
            })
        })
        .unwrap_or_else(|| Err("the thread running the Python adapter panicked".to_owned()));
        Arc::new(match made {
            Ok((object, carries)) => PyInterrupt {
                object: Some(object),
                framework: self.framework.clone(),
                carries,
                broken: None,
            },
            // A broken interrupt claims to carry arguments, so the `binding` case runs (and
            // fails on the interrupt) instead of being reported not applicable.
            Err(reason) => PyInterrupt {
                object: None,
                framework: self.framework.clone(),
                carries: true,
                broken: Some(format!("adapter.interrupt(setup) failed: {reason}")),
            },
        })
    }

    async fn invoke(
        &self,
        session: &Session<PyInterrupt>,
        call: &Call,
    ) -> Result<serde_json::Value, ControlError> {
        self.call("invoke", session, call)
    }

    async fn resume(
        &self,
        session: &Session<PyInterrupt>,
        call: &Call,
    ) -> Result<serde_json::Value, ControlError> {
        let has_resume =
            Python::attach(|py| self.object.bind(py).hasattr("resume").unwrap_or(false));
        self.call(if has_resume { "resume" } else { "invoke" }, session, call)
    }

    fn not_applicable(&self, case: CaseId) -> Option<String> {
        on_own_thread(|| {
            Python::attach(|py| {
                let bound = self.object.bind(py);
                if !bound.hasattr("not_applicable").unwrap_or(false) {
                    return None;
                }
                bound
                    .call_method1("not_applicable", (case.suite.as_str(), case.name))
                    .ok()
                    .and_then(|reason| reason.extract::<Option<String>>().ok())
                    .flatten()
            })
        })
        .flatten()
    }
}

/// Run the adapter kit against a Python adapter; `(ok, text report, JSON report)`.
///
/// `relaunch` is the command line that starts this same adapter again in a fresh process (the
/// durability case's second and third processes): it must reach `countersign.conformance.run`
/// with the same adapter. `cli` is the `countersign` command (default: `$COUNTERSIGN_BIN`, then
/// `countersign` on `PATH`); `policy` replaces the kit's policy text.
#[pyfunction]
#[pyo3(signature = (adapter, relaunch, cli=None, policy=None))]
pub(crate) fn run_adapter_kit(
    py: Python<'_>,
    adapter: Py<PyAny>,
    relaunch: Vec<String>,
    cli: Option<PathBuf>,
    policy: Option<String>,
) -> PyResult<(bool, String, String)> {
    let Some((program, args)) = relaunch.split_first() else {
        return Err(PyValueError::new_err(
            "relaunch is empty: give the command line that runs this adapter's kit again (for example [sys.executable, __file__])",
        ));
    };
    let options = KitOptions {
        policy,
        cli,
        relaunch: Relaunch::Command {
            program: PathBuf::from(program),
            args: args.to_vec(),
        },
    };
    let adapter = PyAdapter::new(py, adapter)?;
    RUNNING.store(true, std::sync::atomic::Ordering::Relaxed);
    let ran = py.detach(|| runtime().block_on(adapter_kit::run(&adapter, &options)));
    RUNNING.store(false, std::sync::atomic::Ordering::Relaxed);
    let report = ran.map_err(|error| PyRuntimeError::new_err(error.to_string()))?;
    Ok((
        report.is_ok(),
        report.to_text(),
        report.to_json().to_string(),
    ))
}

/// Register the kit's classes and function on the native module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<KernelRefusal>()?;
    module.add_class::<KitSetup>()?;
    module.add_class::<KitSession>()?;
    module.add_function(wrap_pyfunction!(run_adapter_kit, module)?)?;
    Ok(())
}
