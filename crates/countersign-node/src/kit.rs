//! The adapter conformance kit (`countersign-conformance`), driven through a JavaScript
//! adapter: `require('@countersign/node/conformance').run(adapter, { relaunch })` (feature
//! `conformance`, enabled by the test build only).
//!
//! The kit is the Rust one, unchanged: it builds each case's world (a scratch SQLite store, a
//! manual clock, its policy, its identity provider, an `InterruptApprovalProvider` around the
//! adapter's interrupt) and checks refusals, executor counts, receipts and approval states. This
//! module only lets JavaScript play the kit's `Adapter`, through four thread-safe functions the
//! wrapper (`conformance.js`) passes in:
//!
//! - `makeInterrupt(setup)`: calls `adapter.interrupt(setup)`, keeps the object and answers
//!   `{"id": n, "carries": bool}`;
//! - `callInterrupt([id, pendingJson])`: the kept interrupt's `interrupt(pending)`: the answer's
//!   JSON, or `null` to suspend;
//! - `invoke(session)`: `adapter.invoke` (or `resume`) with the session's call; the envelope
//!   `{"ok":true,"value":…}` or `{"ok":false,"refusal":n|null,"message":…}`;
//! - `notApplicable([suite, case])`: the reason text, or `null`.
//!
//! The kit runs on a thread of its own, with a runtime of its own, and blocks there while
//! JavaScript answers, so Node's main thread stays free to run the adapter. A refusal the kernel
//! raises while the kit runs is kept in a table and its number travels with the JavaScript error
//! (`kernelRefusal`), so the kit gets back exactly the kernel's error when the adapter lets it
//! through.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use countersign::approval::{AnswerDecision, ApprovalAnswer, InterruptError, PendingApproval};
use countersign::approver::Credential;
use countersign::{
    ApprovalId, ApprovalState, Control, ControlError, FrameworkInterrupt, Timestamp,
};
use countersign_conformance::adapter_kit::{
    self, Adapter, Call, CaseId, KitOptions, Relaunch, Reviewer, Session, Setup, Shape, Shown, Tool,
};
use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;

use crate::NativeControl;
use crate::errors::{self, misuse};

/// A JavaScript function of one argument returning a promise of text (JSON).
///
/// Weak (`Weak = true`): a bridge never keeps Node's event loop alive by itself. While the kit
/// runs, its pending promise does; after it, a bridge still held by a kit world's `Control`
/// (reachable from a JavaScript object until that is collected) must not keep the process
/// from exiting.
type Bridge<T> = ThreadsafeFunction<T, Promise<String>, T, napi::Status, false, true>;

/// Set while [`run_adapter_kit`] runs in this process: only then are refusals kept.
static RUNNING: AtomicBool = AtomicBool::new(false);
static NEXT_REFUSAL: AtomicU32 = AtomicU32::new(1);

fn refusals() -> &'static Mutex<HashMap<u32, ControlError>> {
    static TABLE: std::sync::OnceLock<Mutex<HashMap<u32, ControlError>>> =
        std::sync::OnceLock::new();
    TABLE.get_or_init(Mutex::default)
}

/// While the kit runs, keep `error` and give its number (for the JavaScript error's
/// `kernelRefusal`); otherwise `None` and nothing is kept.
pub(crate) fn keep_refusal(error: ControlError) -> Option<u32> {
    if !RUNNING.load(Ordering::Relaxed) {
        return None;
    }
    let number = NEXT_REFUSAL.fetch_add(1, Ordering::Relaxed);
    let mut table = refusals().lock().ok()?;
    table.insert(number, error);
    Some(number)
}

fn take_refusal(number: u32) -> Option<ControlError> {
    refusals().lock().ok()?.remove(&number)
}

/// Call a bridge and wait for its answer, from any thread but Node's main one.
async fn ask<T>(bridge: &Bridge<T>, value: T) -> Result<String, String>
where
    T: 'static + Send + napi::bindgen_prelude::JsValuesTupleIntoVec,
{
    let promise = bridge
        .call_async(value)
        .await
        .map_err(|error| format!("the adapter could not be called: {error}"))?;
    promise
        .await
        .map_err(|error| format!("the adapter failed: {error}"))
}

/// The framework's interrupt, played by a JavaScript object kept by the wrapper.
pub(crate) struct JsInterrupt {
    id: u32,
    framework: String,
    carries: bool,
    broken: Option<String>,
    call: Arc<Bridge<(u32, String)>>,
}

#[async_trait::async_trait]
impl FrameworkInterrupt for JsInterrupt {
    fn framework(&self) -> &str {
        &self.framework
    }

    fn carries_approved_arguments(&self) -> bool {
        self.carries
    }

    async fn interrupt(&self, pending: PendingApproval) -> Result<ApprovalAnswer, InterruptError> {
        if let Some(reason) = &self.broken {
            return Err(InterruptError::Failed(reason.clone()));
        }
        let text = serde_json::to_string(&pending)
            .map_err(|error| InterruptError::Failed(error.to_string()))?;
        let answered = ask(&self.call, (self.id, text))
            .await
            .map_err(InterruptError::Failed)?;
        match serde_json::from_str::<serde_json::Value>(&answered) {
            Ok(serde_json::Value::Null) => Err(InterruptError::Suspended),
            Ok(value) => parse_answer(&value).map_err(InterruptError::Failed),
            Err(error) => Err(InterruptError::Failed(format!(
                "the interrupt's answer is not JSON: {error}"
            ))),
        }
    }
}

/// `{"decision": "approve"|"deny"|"reject", "approver": str, "approver_token": str|null,
/// "note": str|null, "arguments": ..., "action_hash": str|null}`, read strictly (case B38). `approver` must be the one the operator
/// passed on the resuming call, never a name read back from the framework's run state.
fn parse_answer(value: &serde_json::Value) -> Result<ApprovalAnswer, String> {
    let decision = AnswerDecision::from_submitted(value.get("decision")).map_err(|invalid| {
        format!(
            "the interrupt's answer has decision {}: use \"approve\" or \"deny\"",
            invalid.given
        )
    })?;
    Ok(ApprovalAnswer {
        decision,
        approver: match value["approver_token"].as_str() {
            Some(token) => Credential::Token(token.to_owned()),
            None => value["approver"].as_str().unwrap_or_default().into(),
        },
        shown_hash: value["action_hash"]
            .as_str()
            .map(|hash| countersign::ActionHash::from_stored(hash.to_owned())),
        note: value["note"].as_str().map(str::to_owned),
        arguments: value.get("arguments").filter(|a| !a.is_null()).cloned(),
    })
}

fn shown_from_json(text: &str) -> napi::Result<Shown> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|error| misuse(&format!("`shown` is not JSON: {error}")))?;
    let request_id = match value["request_id"].as_str() {
        Some(id) => Some(ApprovalId::parse(id).map_err(|error| misuse(&error.to_string()))?),
        None => None,
    };
    let expires_at = match &value["expires_at"] {
        serde_json::Value::Null => None,
        time => Some(
            serde_json::from_value::<Timestamp>(time.clone()).map_err(|error| {
                misuse(&format!("`expires_at` is not an RFC 3339 time: {error}"))
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

/// The scripted human's answer to `shown_json`, as JSON text, or `None` when nobody answers.
/// `approver` (or `approver_token`) is who the operator's application passes on the resuming
/// call; `payload_approver` is the name the run state carries (display only).
fn review(reviewer: &Reviewer, shown_json: &str) -> napi::Result<Option<String>> {
    let shown = shown_from_json(shown_json)?;
    let Some(answer) = reviewer.review(&shown) else {
        return Ok(None);
    };
    let decision = match answer.decision {
        AnswerDecision::Approve => "approve",
        AnswerDecision::Deny => "reject",
    };
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
#[napi]
pub struct KitSetup {
    reviewer: Reviewer,
    scratch: PathBuf,
}

#[napi]
impl KitSetup {
    /// The scripted human's answer to `shownJson`, as JSON text, or `null`.
    #[napi]
    pub fn review(&self, shown_json: String) -> napi::Result<Option<String>> {
        review(&self.reviewer, &shown_json)
    }

    /// The folder for framework checkpoints.
    #[napi(getter)]
    pub fn scratch_dir(&self) -> String {
        self.scratch.display().to_string()
    }
}

/// What the kit hands `adapter.invoke` for one call in one case's world.
#[napi]
pub struct KitSession {
    control: Control,
    tool: Tool,
    reviewer: Reviewer,
    scratch: PathBuf,
    interrupt_id: u32,
    method: String,
    action: String,
    arguments_json: String,
    run: String,
}

#[napi]
impl KitSession {
    /// The kit's kernel (the operator's `Control`), for the adapter to use as its own.
    #[napi]
    pub fn control(&self) -> NativeControl {
        let store = self
            .scratch
            .parent()
            .unwrap_or(Path::new("."))
            .join("kit.db");
        NativeControl::adopt(self.control.clone(), format!("sqlite:{}", store.display()))
    }

    /// The number of the interrupt `adapter.interrupt` returned for this world.
    #[napi(getter)]
    pub fn interrupt_id(&self) -> u32 {
        self.interrupt_id
    }

    /// `invoke` or `resume`.
    #[napi(getter)]
    pub fn method(&self) -> String {
        self.method.clone()
    }

    /// The call's action.
    #[napi(getter)]
    pub fn action(&self) -> String {
        self.action.clone()
    }

    /// The call's arguments, as JSON text.
    #[napi(getter)]
    pub fn arguments_json(&self) -> String {
        self.arguments_json.clone()
    }

    /// The kit's label of the call's run.
    #[napi(getter)]
    pub fn run(&self) -> String {
        self.run.clone()
    }

    /// The scripted human's answer to `shownJson`, as JSON text, or `null`.
    #[napi]
    pub fn review(&self, shown_json: String) -> napi::Result<Option<String>> {
        review(&self.reviewer, &shown_json)
    }

    /// Run the kit's executor with `argumentsJson` (the canonical arguments the kernel handed
    /// the tool); its value as JSON text. Rejects with `NotExecuted`, or a plain `Error`
    /// (outcome unknown), when the case scripts a failure.
    #[napi]
    pub async fn run_tool(&self, arguments_json: String) -> napi::Result<String> {
        let arguments: serde_json::Value = countersign::json::read(&arguments_json)
            .map_err(|error| misuse(&format!("arguments are not JSON: {error}")))?;
        match self.tool.clone().call(arguments).await {
            Ok(value) => Ok(value.to_string()),
            Err(error) => match error.not_executed_reason() {
                Some(reason) => Err(errors::not_executed(reason)),
                None => Err(napi::Error::from_reason(error.to_string())),
            },
        }
    }

    /// The kernel's `ApprovalRequired` refusal for `requestId`, to throw when the framework
    /// paused on that request; rejects with a `TypeError` when the request is not pending.
    #[napi]
    pub async fn paused(&self, request_id: String) -> napi::Result<String> {
        let id = ApprovalId::parse(&request_id).map_err(|error| misuse(&error.to_string()))?;
        let found = self
            .control
            .store()
            .approval(&id)
            .await
            .map_err(|error| errors::store_error(&error))?;
        match found {
            Some(record) if record.state == ApprovalState::Pending => {
                let refusal = ControlError::ApprovalRequired {
                    request_id: record.id,
                    action_hash: record.action_hash,
                    expires_at: record.expires_at,
                };
                Ok(errors::control_error(refusal).reason)
            }
            Some(record) => Err(misuse(&format!(
                "approval request `{request_id}` is {}, not pending",
                record.state.as_str()
            ))),
            None => Err(misuse(&format!(
                "no approval request `{request_id}` in the kit's store"
            ))),
        }
    }

    /// The folder for framework checkpoints (it survives into the durability case's second
    /// process).
    #[napi(getter)]
    pub fn scratch_dir(&self) -> String {
        self.scratch.display().to_string()
    }
}

/// The JavaScript adapter, through the wrapper's bridges.
struct JsAdapter {
    framework: String,
    shape: Shape,
    make_interrupt: Bridge<KitSetup>,
    call_interrupt: Arc<Bridge<(u32, String)>>,
    invoke: Bridge<KitSession>,
    not_applicable: Bridge<(String, String)>,
}

impl JsAdapter {
    async fn call(
        &self,
        method: &str,
        session: &Session<JsInterrupt>,
        call: &Call,
    ) -> Result<serde_json::Value, ControlError> {
        let handle = KitSession {
            control: session.control().clone(),
            tool: session.tool().clone(),
            reviewer: session.reviewer().clone(),
            scratch: session.scratch_dir().to_path_buf(),
            interrupt_id: session.interrupt().id,
            method: method.to_owned(),
            action: call.action.clone(),
            arguments_json: call.arguments.to_string(),
            run: call.run.clone(),
        };
        let envelope = ask(&self.invoke, handle)
            .await
            .map_err(ControlError::Internal)?;
        let value: serde_json::Value = serde_json::from_str(&envelope).map_err(|error| {
            ControlError::Internal(format!("the adapter bridge answered `{envelope}`: {error}"))
        })?;
        if value["ok"] == serde_json::Value::Bool(true) {
            return Ok(value["value"].clone());
        }
        let carried = value["refusal"]
            .as_u64()
            .and_then(|number| u32::try_from(number).ok())
            .and_then(take_refusal);
        Err(carried.unwrap_or_else(|| {
            ControlError::Internal(format!(
                "the JavaScript adapter threw {}, not a kernel refusal",
                value["message"].as_str().unwrap_or("something")
            ))
        }))
    }
}

#[async_trait::async_trait]
impl Adapter for JsAdapter {
    type Interrupt = JsInterrupt;

    fn framework(&self) -> &str {
        &self.framework
    }

    fn shape(&self) -> Shape {
        self.shape
    }

    fn interrupt(&self, setup: &Setup) -> Arc<JsInterrupt> {
        let handle = KitSetup {
            reviewer: setup.reviewer().clone(),
            scratch: setup.scratch_dir().to_path_buf(),
        };
        // The kit asks for the interrupt synchronously; this thread is the kit's own, so
        // waiting for Node's main thread here blocks nothing JavaScript needs.
        let made = futures::executor::block_on(ask(&self.make_interrupt, handle));
        let parsed = made.and_then(|text| {
            serde_json::from_str::<serde_json::Value>(&text)
                .map_err(|error| format!("adapter.interrupt(setup) answered `{text}`: {error}"))
        });
        let (id, carries, broken) = match parsed {
            Ok(value) if value["ok"] == serde_json::Value::Bool(true) => (
                value["id"]
                    .as_u64()
                    .and_then(|id| u32::try_from(id).ok())
                    .unwrap_or(0),
                value["carries"].as_bool().unwrap_or(false),
                None,
            ),
            Ok(value) => (
                0,
                true,
                Some(format!(
                    "adapter.interrupt(setup) failed: {}",
                    value["message"].as_str().unwrap_or("no message")
                )),
            ),
            // A broken interrupt claims to carry arguments, so the `binding` case runs (and
            // fails on the interrupt) instead of being reported not applicable.
            Err(reason) => (0, true, Some(reason)),
        };
        Arc::new(JsInterrupt {
            id,
            framework: self.framework.clone(),
            carries,
            broken,
            call: Arc::clone(&self.call_interrupt),
        })
    }

    async fn invoke(
        &self,
        session: &Session<JsInterrupt>,
        call: &Call,
    ) -> Result<serde_json::Value, ControlError> {
        self.call("invoke", session, call).await
    }

    async fn resume(
        &self,
        session: &Session<JsInterrupt>,
        call: &Call,
    ) -> Result<serde_json::Value, ControlError> {
        self.call("resume", session, call).await
    }

    fn not_applicable(&self, case: CaseId) -> Option<String> {
        let asked = futures::executor::block_on(ask(
            &self.not_applicable,
            (case.suite.as_str().to_owned(), case.name.to_owned()),
        ));
        match asked.map(|text| serde_json::from_str::<Option<String>>(&text)) {
            Ok(Ok(reason)) => reason,
            _ => None,
        }
    }
}

/// The kit's report: `ok`, the text report (its last line is
/// `<framework>: passed/applicable (k not applicable)`) and the JSON report.
#[napi(object)]
pub struct KitReport {
    /// At least one applicable suite and no failure.
    pub ok: bool,
    /// The text report.
    pub text: String,
    /// The same as JSON text.
    pub json: String,
}

/// Run the adapter kit against a JavaScript adapter (see the module docs for the bridges).
///
/// `relaunch` is the command line that starts this same adapter's kit again in a fresh process
/// (the durability case's second and third processes). `cli` is the `countersign` command
/// (default: `$COUNTERSIGN_BIN`, then `countersign` on `PATH`); `policy` replaces the kit's
/// policy text.
#[napi(
    ts_args_type = "framework: string, shape: string, makeInterrupt: (setup: KitSetup) => Promise<string>, callInterrupt: (call: [number, string]) => Promise<string>, invoke: (session: KitSession) => Promise<string>, notApplicable: (which: [string, string]) => Promise<string>, relaunch: string[], cli?: string | undefined | null, policy?: string | undefined | null"
)]
#[allow(clippy::too_many_arguments)]
pub async fn run_adapter_kit(
    framework: String,
    shape: String,
    make_interrupt: Bridge<KitSetup>,
    call_interrupt: Bridge<(u32, String)>,
    invoke: Bridge<KitSession>,
    not_applicable: Bridge<(String, String)>,
    relaunch: Vec<String>,
    cli: Option<String>,
    policy: Option<String>,
) -> napi::Result<KitReport> {
    let shape = match shape.as_str() {
        "decided_before_invocation" => Shape::DecidedBeforeInvocation,
        "resumed_in_place" => Shape::ResumedInPlace,
        other => {
            return Err(misuse(&format!(
                "adapter.shape is `{other}`: use \"decided_before_invocation\" or \"resumed_in_place\""
            )));
        }
    };
    let Some((program, args)) = relaunch.split_first() else {
        return Err(misuse(
            "relaunch is empty: give the command line that runs this adapter's kit again (for example [process.execPath, __filename])",
        ));
    };
    let options = KitOptions {
        policy,
        cli: cli.map(PathBuf::from),
        relaunch: Relaunch::Command {
            program: PathBuf::from(program),
            args: args.to_vec(),
        },
    };
    let adapter = JsAdapter {
        framework,
        shape,
        make_interrupt,
        call_interrupt: Arc::new(call_interrupt),
        invoke,
        not_applicable,
    };
    let (sender, receiver) = futures::channel::oneshot::channel();
    // The kit on a thread and runtime of its own: it blocks while JavaScript answers.
    std::thread::Builder::new()
        .name("countersign-kit".to_owned())
        .spawn(move || {
            let ran = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .map_err(|error| format!("cannot start the kit's runtime: {error}"))
                .and_then(|runtime| {
                    RUNNING.store(true, Ordering::Relaxed);
                    let report = runtime.block_on(adapter_kit::run(&adapter, &options));
                    RUNNING.store(false, Ordering::Relaxed);
                    report.map_err(|error| error.to_string())
                });
            let _ = sender.send(ran.map(|report| KitReport {
                ok: report.is_ok(),
                text: report.to_text(),
                json: report.to_json().to_string(),
            }));
        })
        .map_err(|error| errors::internal(&format!("cannot start the kit's thread: {error}")))?;
    match receiver.await {
        Ok(Ok(report)) => Ok(report),
        Ok(Err(message)) => Err(napi::Error::from_reason(message)),
        Err(_) => Err(errors::internal("the kit's thread ended without a report")),
    }
}
