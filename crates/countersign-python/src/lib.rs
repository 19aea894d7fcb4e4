//! `countersign._native`: the PyO3 half of the `countersign` Python package.
//!
//! The Python package (`python/countersign/`) is the public API: `Control`, `Principal`,
//! `protect`, the exception hierarchy. This module holds the kernel: one [`countersign::Control`]
//! per Python `Control`, run on a Tokio runtime owned by the module.
//!
//! One bridge: `execute` runs the kernel on the calling thread with the GIL released (the
//! embedded SQLite store runs its transactions inline on that thread) and takes the GIL back
//! only to call the Python executor. The Python layer's `execute_async` calls it from a worker
//! thread (`asyncio.to_thread`) and runs the coroutine on the caller's event loop
//! (`run_coroutine_threadsafe`), so the loop never blocks.
//!
//! Values cross as JSON text: arguments go in as text and are canonicalized strictly by the
//! kernel (RFC 8785; `NaN`, `-0` and integers outside ±(2^53−1) are refused), and the executor
//! receives the canonical text, so what runs is exactly what was hashed and approved.
//!
//! Architecture invariant: this crate knows the kernel's public API only; it writes no grant,
//! event or receipt except through it.

mod chat;
mod convert;
mod errors;
mod interrupt;
#[cfg(feature = "conformance")]
mod kit;
mod takeback;

pub(crate) use convert::{receipt_to_py, value_to_py};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use countersign::approval::AnswerDecision;
use countersign::store;
use countersign::{
    ActionRequest, ApprovalId, ApprovalState, Control, EffectKey, ExecutorError, Policy,
    StaticIdentity,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{answer_error, control_error, load_error, store_error};

/// Who is acting: the identity every action is bound to (never taken from model output).
///
/// Shape: a non-empty string of at most 256 characters with no control characters, such as
/// `agent:support-bot`.
#[pyclass(module = "countersign._native", frozen, eq, hash, from_py_object)]
#[derive(Clone, PartialEq, Eq, Hash)]
struct Principal {
    inner: countersign::Principal,
}

#[pymethods]
impl Principal {
    #[new]
    fn new(id: &str) -> PyResult<Principal> {
        countersign::Principal::new(id)
            .map(|inner| Principal { inner })
            .map_err(|error| PyValueError::new_err(error.to_string()))
    }

    /// The identifier.
    #[getter]
    fn id(&self) -> &str {
        self.inner.as_str()
    }

    fn __repr__(&self) -> String {
        format!("Principal({:?})", self.inner.as_str())
    }

    fn __str__(&self) -> &str {
        self.inner.as_str()
    }
}

/// The kernel for one policy, one store and one principal.
#[pyclass(module = "countersign._native", frozen)]
struct NativeControl {
    control: Control,
    /// `None` for a control adopted from Rust (the conformance kit's).
    policy_path: Option<PathBuf>,
    store_url: String,
    /// `None` for a control adopted from Rust: its identity provider decides.
    principal: Option<countersign::Principal>,
}

impl NativeControl {
    /// A control built in Rust by an operator (the conformance kit), for Python to use.
    #[cfg(feature = "conformance")]
    fn adopt(control: Control, store_url: String) -> NativeControl {
        NativeControl {
            control,
            policy_path: None,
            store_url,
            principal: None,
        }
    }
}

/// `.countersign/countersign.db` in the policy file's folder (as the CLI).
fn default_store_url(policy: &Path) -> String {
    let folder = policy
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    format!(
        "sqlite:{}",
        folder.join(".countersign").join("countersign.db").display()
    )
}

/// An approval record as JSON, with `display`: the kernel's one rendering of what a human is
/// shown (`countersign::display`), as plain text.
fn record_json(record: &countersign::ApprovalRecord) -> PyResult<String> {
    to_json(&WithDisplay::of(record))
}

/// An approval record and its `display` text, serialized side by side.
#[derive(serde::Serialize)]
struct WithDisplay<'a> {
    #[serde(flatten)]
    record: &'a countersign::ApprovalRecord,
    display: String,
}

impl<'a> WithDisplay<'a> {
    fn of(record: &'a countersign::ApprovalRecord) -> WithDisplay<'a> {
        WithDisplay {
            record,
            display: countersign::display::render(record, None).to_text(),
        }
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> PyResult<String> {
    serde_json::to_string(value).map_err(|error| {
        errors::internal(&format!(
            "a kernel record could not be written as JSON: {error}"
        ))
    })
}

/// The module's Tokio runtime: timers, and the task that records a dropped attempt ambiguous.
/// Its worker threads never call into Python: every kernel call is driven by `block_on` on the
/// calling Python thread (with the GIL released), so no Rust-owned thread can be attached to the
/// interpreter while it finalizes.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("countersign-runtime")
            .enable_all()
            .build()
            // INVARIANT (runtime): building a runtime fails only when the OS refuses a thread;
            // nothing in this module can work without one.
            .expect("cannot start the countersign runtime: the OS refused a thread")
    })
}

/// What the executor bridge saw when the Python executor raised: kept so the raised
/// `OutcomeUnknown` or `NotExecuted` can carry the original exception as its `__cause__`.
type Raised = Arc<Mutex<Option<PyErr>>>;

/// Map a Python exception raised by an executor to the kernel's executor error.
fn executor_error(py: Python<'_>, error: PyErr, raised: &Raised) -> ExecutorError {
    let message = error
        .value(py)
        .str()
        .map(|text| text.to_string())
        .unwrap_or_else(|_| "an exception with no message".to_owned());
    let is_not_executed = errors::is_not_executed(py, &error);
    let type_name = error
        .get_type(py)
        .name()
        .map(|name| name.to_string())
        .unwrap_or_else(|_| "Exception".to_owned());
    if let Ok(mut slot) = raised.lock() {
        *slot = Some(error);
    }
    if is_not_executed {
        ExecutorError::not_executed(message)
    } else {
        ExecutorError::may_have_run(format!("{type_name}: {message}"))
    }
}

/// A framework call a request is correlated with: `(framework, call_id)`.
type CorrelationArg = (String, String);

/// Scope `request` to `run` and correlate it with a framework call, as given from Python.
fn scoped(
    mut request: ActionRequest,
    run: Option<&str>,
    correlation: Option<CorrelationArg>,
) -> PyResult<ActionRequest> {
    if let Some(run) = run {
        request = request.with_run(run);
    }
    if let Some((framework, call_id)) = correlation {
        if framework.is_empty() || call_id.is_empty() {
            return Err(PyValueError::new_err(
                "correlation needs a framework name and a call id, both non-empty: (framework, call_id)",
            ));
        }
        request = request.with_correlation(framework, call_id);
    }
    Ok(request)
}

fn request(
    action: &str,
    arguments_json: &str,
    approval: Option<&str>,
    timeout: Option<f64>,
    run: Option<&str>,
    correlation: Option<CorrelationArg>,
) -> PyResult<ActionRequest> {
    let mut request = scoped(
        ActionRequest::from_json_text(action, arguments_json),
        run,
        correlation,
    )?;
    if let Some(id) = approval {
        request = request.with_approval(
            ApprovalId::parse(id).map_err(|error| PyValueError::new_err(error.to_string()))?,
        );
    }
    if let Some(seconds) = timeout {
        let limit = Duration::try_from_secs_f64(seconds).map_err(|_| {
            PyValueError::new_err(format!(
                "timeout `{seconds}` is not a usable number of seconds: give a positive number"
            ))
        })?;
        request = request.with_timeout(limit);
    }
    Ok(request)
}

/// The result of a kernel call that ran: the executor's value and the receipt (a dict).
type Ran = (Py<PyAny>, Py<PyDict>);

fn json_error(error: serde_json::Error) -> PyErr {
    errors::internal(&format!(
        "a kernel record could not be written as JSON: {error}"
    ))
}

fn finish(
    py: Python<'_>,
    result: Result<countersign::Executed<Py<PyAny>>, countersign::ControlError>,
    raised: &Raised,
) -> PyResult<Ran> {
    match result {
        Ok(done) => Ok((done.value, receipt_to_py(py, &done.receipt)?.unbind())),
        Err(error) => {
            let cause = raised.lock().ok().and_then(|mut slot| slot.take());
            Err(control_error(py, error, cause))
        }
    }
}

#[pymethods]
impl NativeControl {
    /// Open `policy` with the store at `store_url` (default: the SQLite file
    /// `.countersign/countersign.db` beside the policy), acting as `principal`.
    #[new]
    ///
    /// `interrupt`, when given, is the framework's interrupt (see `interrupt.rs`): the control
    /// asks humans through it, with the kernel's `InterruptApprovalProvider` around it (the
    /// same clock and store), as an operator builds one for a Rust adapter.
    #[pyo3(signature = (policy, principal, store_url=None, approval_ttl=None, interrupt=None))]
    fn new(
        py: Python<'_>,
        policy: PathBuf,
        principal: Principal,
        store_url: Option<String>,
        approval_ttl: Option<f64>,
        interrupt: Option<Py<PyAny>>,
    ) -> PyResult<NativeControl> {
        let interrupt = match interrupt {
            Some(object) => Some(interrupt::PyFrameworkInterrupt::new(py, object)?),
            None => None,
        };
        let loaded = Policy::load(&policy).map_err(|error| load_error(py, &error))?;
        let url = store_url.unwrap_or_else(|| default_store_url(&policy));
        if let Some(path) = url.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            let path = Path::new(path.split('?').next().unwrap_or(path));
            if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(folder).map_err(|error| {
                    store_error(
                        py,
                        &countersign::StoreError::Open {
                            location: url.clone(),
                            message: format!("cannot create `{}`: {error}", folder.display()),
                        },
                    )
                })?;
            }
        }
        // `open_url_async` opens every store `open_url` does, and PostgreSQL (whose pool lives
        // on this module's runtime).
        let opened = py
            .detach(|| runtime().block_on(store::open_url_async(&url)))
            .map_err(|error| store_error(py, &error))?;
        let mut builder = Control::builder_shared(Arc::new(loaded), Arc::clone(&opened))
            .identity(StaticIdentity::new(principal.inner.clone()));
        if let Some(interrupt) = interrupt {
            let clock: Arc<dyn countersign::Clock> = Arc::new(countersign::SystemClock);
            builder = builder
                .clock(Arc::clone(&clock))
                .approval_provider(Arc::new(
                    countersign::control::InterruptApprovalProvider::new(
                        opened,
                        Arc::new(interrupt),
                        clock,
                    ),
                ));
        }
        if let Some(seconds) = approval_ttl {
            let ttl = Duration::try_from_secs_f64(seconds).map_err(|_| {
                PyValueError::new_err(format!(
                    "approval_ttl `{seconds}` is not a usable number of seconds: give a positive number"
                ))
            })?;
            builder = builder.approval_ttl(ttl);
        }
        Ok(NativeControl {
            control: builder.build(),
            policy_path: Some(policy),
            store_url: url,
            principal: Some(principal.inner),
        })
    }

    /// The policy file (`None` for a control built in Rust).
    #[getter]
    fn policy_path(&self) -> Option<PathBuf> {
        self.policy_path.clone()
    }

    /// The store URL.
    #[getter]
    fn store_url(&self) -> &str {
        &self.store_url
    }

    /// The principal's identifier (`None` for a control built in Rust).
    #[getter]
    fn principal(&self) -> Option<&str> {
        self.principal.as_ref().map(countersign::Principal::as_str)
    }

    /// `enforce` or `observe`.
    #[getter]
    fn mode(&self) -> &'static str {
        self.control.policy().mode().as_str()
    }

    /// The policy hash stamped on every receipt.
    #[getter]
    fn policy_hash(&self) -> &str {
        self.control.policy().hash()
    }

    /// What policy would decide, as JSON; writes nothing.
    fn evaluate(&self, py: Python<'_>, action: &str, arguments_json: &str) -> PyResult<String> {
        let evaluation = self
            .control
            .evaluate(&ActionRequest::from_json_text(action, arguments_json))
            .map_err(|error| control_error(py, error, None))?;
        to_json(&evaluation)
    }

    /// The kernel's `needs_approval` predicate; writes nothing.
    ///
    /// The arguments are read by the kernel's strict reader (`countersign::json::read`): a
    /// duplicate key, nesting past 64 levels or an integer outside ±(2^53−1) raises
    /// `InvalidArguments`, as `evaluate` does.
    fn needs_approval(&self, py: Python<'_>, action: &str, arguments_json: &str) -> PyResult<bool> {
        let arguments = countersign::json::read(arguments_json).map_err(|error| {
            control_error(
                py,
                countersign::ControlError::InvalidArguments {
                    action: action.to_owned(),
                    source: error.source,
                },
                None,
            )
        })?;
        countersign::needs_approval(&self.control, action, &arguments)
            .map_err(|error| control_error(py, error, None))
    }

    /// Find or open the approval request for this call (scoped to `run`, correlated with
    /// `correlation`); JSON of the record, or `None`.
    #[pyo3(signature = (action, arguments_json, run=None, correlation=None))]
    fn request_approval(
        &self,
        py: Python<'_>,
        action: &str,
        arguments_json: &str,
        run: Option<&str>,
        correlation: Option<CorrelationArg>,
    ) -> PyResult<Option<String>> {
        let request = scoped(
            ActionRequest::from_json_text(action, arguments_json),
            run,
            correlation,
        )?;
        let control = self.control.clone();
        let opened = py.detach(|| runtime().block_on(control.request_approval(&request)));
        match opened {
            Ok(Some(record)) => Ok(Some(record_json(&record)?)),
            Ok(None) => Ok(None),
            Err(error) => Err(control_error(py, error, None)),
        }
    }

    /// Run a sync Python executor under the kernel; the GIL is released while the kernel works.
    #[pyo3(signature = (action, arguments_json, executor, approval=None, timeout=None, run=None, correlation=None))]
    #[allow(clippy::too_many_arguments)]
    fn execute(
        &self,
        py: Python<'_>,
        action: &str,
        arguments_json: &str,
        executor: Py<PyAny>,
        approval: Option<&str>,
        timeout: Option<f64>,
        run: Option<&str>,
        correlation: Option<CorrelationArg>,
    ) -> PyResult<Ran> {
        let request = request(action, arguments_json, approval, timeout, run, correlation)?;
        let control = self.control.clone();
        let raised: Raised = Arc::default();
        let bridge = Arc::clone(&raised);
        let result = py.detach(move || {
            runtime().block_on(control.execute(request, move |canonical| {
                let outcome = Python::attach(|py| {
                    // Failing here (out of memory) is before the executor ran: not executed.
                    let arguments = value_to_py(py, &canonical).map_err(|error| {
                        ExecutorError::not_executed(format!(
                            "the arguments could not be handed to the executor: {error}"
                        ))
                    })?;
                    executor
                        .call1(py, (arguments,))
                        .map_err(|error| executor_error(py, error, &bridge))
                });
                async move { outcome }
            }))
        });
        finish(py, result, &raised)
    }

    /// Record a human's answer through the one answer contract; JSON of the record.
    ///
    /// `decision_json` is the submitted decision as JSON text, read strictly (`"approve"`,
    /// `"deny"`, `"reject"`; anything else is refused `invalid_decision` and recorded). Who
    /// answers is `token` (an approver token, verified against the request's stored keys) or
    /// else `approver` (an asserted name). `action_hash` is the hash the person was shown; the
    /// channel is `api`.
    #[pyo3(signature = (request_id, decision_json, approver=None, note=None, token=None, action_hash=None))]
    #[allow(clippy::too_many_arguments)]
    fn answer(
        &self,
        py: Python<'_>,
        request_id: &str,
        decision_json: &str,
        approver: Option<&str>,
        note: Option<&str>,
        token: Option<&str>,
        action_hash: Option<&str>,
    ) -> PyResult<String> {
        let id = ApprovalId::parse(request_id)
            .map_err(|error| PyValueError::new_err(error.to_string()))?;
        // The strict reader: a decision sent twice is no decision (`invalid_decision`).
        let submitted: Option<serde_json::Value> = countersign::json::read(decision_json).ok();
        let decision = AnswerDecision::from_submitted(submitted.as_ref());
        let credential = match (token, approver) {
            (Some(token), _) => countersign::approver::Credential::Token(token.to_owned()),
            (None, Some(name)) => countersign::approver::Credential::Asserted(name.to_owned()),
            (None, None) => countersign::approver::Credential::Asserted(String::new()),
        };
        let answer = countersign::store::RecordAnswer {
            request_id: id,
            decision,
            approver: credential,
            channel: countersign::approver::Channel::Api,
            shown_hash: action_hash
                .map(|hash| countersign::ActionHash::from_stored(hash.to_owned())),
            note: note.map(str::to_owned),
        };
        let store = self.control.store();
        let now = self.control.clock().now();
        let recorded = py.detach(|| {
            runtime().block_on(countersign::control::submit_answer(
                store.as_ref(),
                answer,
                now,
            ))
        });
        match recorded {
            Ok(record) => to_json(&record),
            Err(error) => Err(answer_error(py, &error)),
        }
    }

    /// Take back (issue #31): with `cancel` false, revoke the grant of `request_id` (or
    /// withdraw a counted yes from a pending quorum) as `token` (verified) or else `approver`
    /// (asserted); with `cancel` true, cancel it as the operator named `approver`. The channel
    /// is `api`; `reason` is kept on the receipt. Returns the stored request as JSON.
    #[pyo3(signature = (request_id, cancel, approver=None, token=None, reason=None))]
    fn withdraw(
        &self,
        py: Python<'_>,
        request_id: &str,
        cancel: bool,
        approver: Option<&str>,
        token: Option<&str>,
        reason: Option<&str>,
    ) -> PyResult<String> {
        takeback::withdraw(
            py,
            &self.control,
            request_id,
            cancel,
            approver,
            token,
            reason,
        )
    }

    /// Cancel every waiting request of `run` as the operator `operator`: a list of
    /// `(request_id, outcome)`, `outcome` the request as JSON or the refusal's exception.
    #[pyo3(signature = (run, operator, reason=None))]
    fn cancel_run<'py>(
        &self,
        py: Python<'py>,
        run: &str,
        operator: &str,
        reason: Option<&str>,
    ) -> PyResult<Bound<'py, pyo3::types::PyList>> {
        takeback::cancel_run(py, &self.control, run, operator, reason)
    }

    /// Put an approver token (id or whole token) on the store's deny-list; false when it
    /// already was.
    #[pyo3(signature = (token_or_id, operator, reason=None))]
    fn revoke_token(
        &self,
        py: Python<'_>,
        token_or_id: &str,
        operator: &str,
        reason: Option<&str>,
    ) -> PyResult<bool> {
        takeback::revoke_token(py, &self.control, token_or_id, operator, reason)
    }

    /// The policy's approval warnings (approvals nobody can answer, impossible quorums), one
    /// line each, as `countersign verify` prints them; the Python layer turns each into an
    /// `ApprovalWarning` when the control opens.
    #[getter]
    fn approval_warnings(&self) -> Vec<String> {
        self.control.policy().approval_warnings()
    }

    /// The request the store maps the framework call `(framework, run, call_id)` to, as JSON,
    /// or `None`. A read.
    #[pyo3(signature = (framework, run, call_id))]
    fn correlated(
        &self,
        py: Python<'_>,
        framework: &str,
        run: Option<&str>,
        call_id: &str,
    ) -> PyResult<Option<String>> {
        let control = self.control.clone();
        let found = py.detach(|| runtime().block_on(control.correlated(framework, run, call_id)));
        match found {
            Ok(Some(record)) => Ok(Some(record_json(&record)?)),
            Ok(None) => Ok(None),
            Err(error) => Err(store_error(py, &error)),
        }
    }

    /// One approval request as JSON, or `None`.
    fn approval(&self, py: Python<'_>, request_id: &str) -> PyResult<Option<String>> {
        let id = ApprovalId::parse(request_id)
            .map_err(|error| PyValueError::new_err(error.to_string()))?;
        let store = self.control.store();
        let found = py.detach(|| runtime().block_on(store.approval(&id)));
        match found {
            Ok(Some(record)) => Ok(Some(record_json(&record)?)),
            Ok(None) => Ok(None),
            Err(error) => Err(store_error(py, &error)),
        }
    }

    /// Approval requests, oldest first, as a JSON list; only those in `state` if given.
    #[pyo3(signature = (state=None))]
    fn approvals(&self, py: Python<'_>, state: Option<&str>) -> PyResult<String> {
        let state = match state {
            None => None,
            Some(text) => Some(parse_state(text)?),
        };
        let store = self.control.store();
        let found = py.detach(|| runtime().block_on(store.approvals(state)));
        match found {
            Ok(records) => to_json(&records.iter().map(WithDisplay::of).collect::<Vec<_>>()),
            Err(error) => Err(store_error(py, &error)),
        }
    }

    /// One effect record as JSON, or `None`.
    fn effect(&self, py: Python<'_>, key: &str) -> PyResult<Option<String>> {
        let key = EffectKey::new(key).map_err(|error| PyValueError::new_err(error.to_string()))?;
        let store = self.control.store();
        let found = py.detach(|| runtime().block_on(store.effect(&key)));
        match found {
            Ok(Some(record)) => Ok(Some(to_json(&record)?)),
            Ok(None) => Ok(None),
            Err(error) => Err(store_error(py, &error)),
        }
    }

    /// Every receipt, oldest first, as a JSON list.
    fn receipts(&self, py: Python<'_>) -> PyResult<String> {
        let store = self.control.store();
        let read = py.detach(|| {
            runtime().block_on(async {
                let mut all = Vec::new();
                let mut after = 0;
                loop {
                    let page = store.receipts(after, 500).await?;
                    let Some(last) = page.last() else { break };
                    after = last.position;
                    all.extend(page);
                }
                Ok::<_, countersign::StoreError>(all)
            })
        });
        let stored = read.map_err(|error| store_error(py, &error))?;
        let mut receipts = Vec::with_capacity(stored.len());
        for receipt in &stored {
            receipts.push(
                receipt.to_receipt().map_err(|detail| {
                    store_error(py, &countersign::StoreError::Corrupt { detail })
                })?,
            );
        }
        to_json(&receipts)
    }

    /// Verify the receipt chain; the report as JSON.
    fn verify_receipts(&self, py: Python<'_>) -> PyResult<String> {
        let control = self.control.clone();
        let report = py.detach(|| runtime().block_on(control.verify_receipts(None)));
        match report {
            Ok(report) => to_json(&report),
            Err(error) => Err(store_error(py, &error)),
        }
    }
}

fn parse_state(text: &str) -> PyResult<ApprovalState> {
    let all = [
        ApprovalState::Pending,
        ApprovalState::Granted,
        ApprovalState::Denied,
        ApprovalState::Consumed,
        ApprovalState::Expired,
        ApprovalState::Void,
        ApprovalState::Revoked,
        ApprovalState::Cancelled,
    ];
    all.into_iter()
        .find(|state| state.as_str() == text)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "unknown approval state `{text}`: use pending, granted, denied, consumed, expired, void, revoked or cancelled"
            ))
        })
}

/// The native half of the `countersign` package.
/// Every refusal code of the kernel (`countersign::Reason`), in declaration order: the Python
/// `Reason` enum is checked against it.
#[pyfunction]
fn reasons() -> Vec<&'static str> {
    countersign::Reason::ALL
        .iter()
        .map(|reason| reason.as_str())
        .collect()
}

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(reasons, module)?)?;
    module.add_class::<Principal>()?;
    module.add_class::<NativeControl>()?;
    // The adapter conformance kit is for adapter authors' tests: only in wheels built with the
    // `conformance` feature (the repository's test builds), not in the released one.
    #[cfg(feature = "conformance")]
    kit::register(module)?;
    chat::register(module)?;
    Ok(())
}
