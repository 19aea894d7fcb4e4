//! `countersign.linux-x64-gnu.node`: the native half of the `@countersign/node` package.
//!
//! The JavaScript package (`index.js`, `errors.js`, `index.d.ts`) is the public API: `Control`,
//! the `CountersignError` classes, the records. This addon holds the kernel: one
//! [`countersign::Control`] per JavaScript `Control`.
//!
//! **Threading.** Every method that touches the kernel is an `async fn`: napi-rs runs it on its
//! Tokio runtime's worker threads, so Node's main thread only queues the call and later settles
//! the promise. The embedded SQLite store runs its transactions inline on that worker thread.
//! The executor is a JavaScript function reached through a thread-safe function: the kernel
//! (on a worker) queues the call onto the main thread and awaits the promise the wrapper
//! returns, so a sync or async executor runs on the event loop, never blocking it.
//!
//! **Values cross as JSON text.** Arguments go in as text, written by the wrapper's strict
//! serializer (`index.js`), and are canonicalized by the kernel (RFC 8785; `NaN`, `-0` and
//! integers whose digits a double would change are refused). The executor receives the canonical
//! arguments, so what runs is exactly what was hashed and approved. Its return value never
//! crosses: the wrapper keeps it, and the executor bridge only says how the call ended.
//!
//! **Refusals** reject with an `Error` whose message is [`REFUSAL_PREFIX`] plus a JSON object
//! (`class`, `message`, `reason`, `did_run`, `may_retry`, `fields`); the wrapper turns it into
//! the matching `CountersignError` subclass (`errors.rs` decides which).
//!
//! Architecture invariant: this crate knows the kernel's public API only; it writes no grant,
//! event or receipt except through it.

mod errors;
#[cfg(feature = "conformance")]
pub mod kit;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use countersign::approval::AnswerDecision;
use countersign::policy::{Decision, Mode};
use countersign::store;
use countersign::{
    ActionRequest, ApprovalId, ApprovalState, Control, EffectKey, ExecutorError, Policy,
    StaticIdentity,
};
use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;

use crate::errors::{answer_error, control_error, internal, load_error, misuse, store_error};

pub use crate::errors::REFUSAL_PREFIX;

/// The executor bridge: called with the canonical arguments as JSON text, it returns a promise
/// of the outcome envelope (`{"ok":true}` or `{"ok":false,"not_executed":bool,"message":str}`).
/// `CalleeHandled = false`: the function gets the text itself, not `(error, text)`.
type ExecutorBridge = ThreadsafeFunction<String, Promise<String>, String, napi::Status, false>;

/// Every refusal code of the kernel (`countersign::Reason`), in declaration order: the
/// JavaScript `Reason` object (`errors.js`) is checked against it.
#[napi]
pub fn reasons() -> Vec<&'static str> {
    countersign::Reason::ALL
        .iter()
        .map(|reason| reason.as_str())
        .collect()
}

/// The kernel for one policy, one store and one principal (`Control` in `index.js`).
#[napi]
pub struct NativeControl {
    control: Control,
    /// `None` for a control built in Rust (the conformance kit's).
    policy_path: Option<String>,
    store_url: String,
    /// `None` for a control built in Rust: its identity provider decides.
    principal: Option<countersign::Principal>,
}

impl NativeControl {
    /// A control built in Rust by an operator (the conformance kit), for JavaScript to use.
    #[cfg(feature = "conformance")]
    pub(crate) fn adopt(control: Control, store_url: String) -> NativeControl {
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

/// Create the folder of a `sqlite:` store's file, as the CLI and the Python binding do.
fn create_sqlite_folder(url: &str) -> Result<(), countersign::StoreError> {
    let Some(path) = url.strip_prefix("sqlite:") else {
        return Ok(());
    };
    let path = path.strip_prefix("//").unwrap_or(path);
    let path = Path::new(path.split('?').next().unwrap_or(path));
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(folder).map_err(|error| countersign::StoreError::Open {
            location: url.to_owned(),
            message: format!("cannot create `{}`: {error}", folder.display()),
        })?;
    }
    Ok(())
}

/// A number of seconds from JavaScript as a duration, or a misuse error naming `what`.
fn seconds(what: &str, value: f64) -> napi::Result<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        misuse(&format!(
            "{what} `{value}` is not a usable number of seconds: give a positive number"
        ))
    })
}

/// An approval record as JSON, with `display`: the kernel's one rendering of what a human is
/// shown (`countersign::display`), as plain text.
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

fn to_json<T: serde::Serialize>(value: &T) -> napi::Result<String> {
    serde_json::to_string(value).map_err(|error| {
        internal(&format!(
            "a kernel record could not be written as JSON: {error}"
        ))
    })
}

fn record_json(record: &countersign::ApprovalRecord) -> napi::Result<String> {
    to_json(&WithDisplay::of(record))
}

/// Scope `request` to `run` and correlate it with the framework call `(framework, call_id)`.
fn scoped(
    mut request: ActionRequest,
    run: Option<String>,
    framework: Option<String>,
    call_id: Option<String>,
) -> napi::Result<ActionRequest> {
    if let Some(run) = run {
        request = request.with_run(run);
    }
    match (framework, call_id) {
        (None, None) => {}
        (Some(framework), Some(call_id)) if !framework.is_empty() && !call_id.is_empty() => {
            request = request.with_correlation(framework, call_id);
        }
        _ => {
            return Err(misuse(
                "correlation needs a framework name and a call id, both non-empty: { framework, callId }",
            ));
        }
    }
    Ok(request)
}

fn parse_approval_id(text: &str) -> napi::Result<ApprovalId> {
    ApprovalId::parse(text).map_err(|error| misuse(&error.to_string()))
}

fn parse_state(text: &str) -> napi::Result<ApprovalState> {
    let all = [
        ApprovalState::Pending,
        ApprovalState::Granted,
        ApprovalState::Denied,
        ApprovalState::Consumed,
        ApprovalState::Expired,
        ApprovalState::Void,
    ];
    all.into_iter()
        .find(|state| state.as_str() == text)
        .ok_or_else(|| {
            misuse(&format!(
                "unknown approval state `{text}`: use pending, granted, denied, consumed, expired or void"
            ))
        })
}

/// How a JavaScript executor ended, as the wrapper's envelope says.
#[derive(serde::Deserialize)]
struct Outcome {
    ok: bool,
    #[serde(default)]
    not_executed: bool,
    #[serde(default)]
    message: String,
}

/// Run the JavaScript executor through its bridge and map how it ended to the kernel's terms.
async fn call_executor(bridge: &ExecutorBridge, canonical: String) -> Result<(), ExecutorError> {
    // A failure to queue the call, or a promise that rejected (the wrapper never rejects), is
    // an outcome nobody can know: recorded ambiguous, never retried blindly.
    let promise = bridge.call_async(canonical).await.map_err(|error| {
        ExecutorError::may_have_run(format!("the executor could not be called: {error}"))
    })?;
    let envelope = promise.await.map_err(|error| {
        ExecutorError::may_have_run(format!("the executor's promise failed: {error}"))
    })?;
    let outcome: Outcome = serde_json::from_str(&envelope).map_err(|error| {
        ExecutorError::may_have_run(format!(
            "the executor bridge answered `{envelope}`: {error}"
        ))
    })?;
    match outcome {
        Outcome { ok: true, .. } => Ok(()),
        Outcome {
            not_executed: true,
            message,
            ..
        } => Err(ExecutorError::not_executed(message)),
        Outcome { message, .. } => Err(ExecutorError::may_have_run(message)),
    }
}

/// Open the kernel for `policy` (a `countersign.policy/v1` file) with the store at `store_url`
/// (default: the SQLite file `.countersign/countersign.db` beside the policy, created if
/// missing), acting as `principal`. `approval_ttl`: seconds an approval request stays
/// answerable.
///
/// Rejects with a `PolicyError` (the message names file, line and column), a `StoreError`, or a
/// `TypeError`-like misuse for a bad principal or TTL.
#[napi]
pub async fn open_control(
    policy: String,
    principal: String,
    store_url: Option<String>,
    approval_ttl: Option<f64>,
) -> napi::Result<NativeControl> {
    let principal =
        countersign::Principal::new(&principal).map_err(|error| misuse(&error.to_string()))?;
    let ttl = approval_ttl
        .map(|value| seconds("approvalTtl", value))
        .transpose()?;
    let policy_path = PathBuf::from(&policy);
    let loaded = Policy::load(&policy_path).map_err(|error| load_error(&error))?;
    let url = store_url.unwrap_or_else(|| default_store_url(&policy_path));
    create_sqlite_folder(&url).map_err(|error| store_error(&error))?;
    let opened = store::open_url_async(&url)
        .await
        .map_err(|error| store_error(&error))?;
    let mut builder = Control::builder_shared(Arc::new(loaded), opened)
        .identity(StaticIdentity::new(principal.clone()));
    if let Some(ttl) = ttl {
        builder = builder.approval_ttl(ttl);
    }
    Ok(NativeControl {
        control: builder.build(),
        policy_path: Some(policy),
        store_url: url,
        principal: Some(principal),
    })
}

#[napi]
impl NativeControl {
    /// The policy file (`null` for a control built in Rust).
    #[napi(getter)]
    pub fn policy_path(&self) -> Option<String> {
        self.policy_path.clone()
    }

    /// The store URL.
    #[napi(getter)]
    pub fn store_url(&self) -> String {
        self.store_url.clone()
    }

    /// The principal's identifier (`null` for a control built in Rust).
    #[napi(getter)]
    pub fn principal(&self) -> Option<String> {
        self.principal.as_ref().map(|p| p.as_str().to_owned())
    }

    /// `enforce` or `observe`.
    #[napi(getter)]
    pub fn mode(&self) -> String {
        self.control.policy().mode().as_str().to_owned()
    }

    /// The policy hash stamped on every receipt (`sha256:` + 64 hex).
    #[napi(getter)]
    pub fn policy_hash(&self) -> String {
        self.control.policy().hash().to_string()
    }

    /// What policy would decide, as JSON; writes nothing.
    #[napi]
    pub async fn evaluate(&self, action: String, arguments_json: String) -> napi::Result<String> {
        let evaluation = self
            .control
            .evaluate(&ActionRequest::from_json_text(action, &arguments_json))
            .map_err(control_error)?;
        to_json(&evaluation)
    }

    /// Can this policy ever let `action` run? True in observe mode (nothing is enforced) and,
    /// in enforce mode, when the action's entry can give `allow` or `approve` for some
    /// arguments (`ActionEntry::can_permit`, by which the MCP gateway hides tools); false for
    /// an action the policy does not list and for an entry whose rules all deny. Pure: reads
    /// the loaded policy, writes nothing. Adapters use it to leave out tools that could only
    /// ever be refused.
    #[napi]
    pub fn can_permit(&self, action: String) -> bool {
        let policy = self.control.policy();
        policy.mode() == Mode::Observe
            || policy
                .entry(&action)
                .is_some_and(|entry| entry.can_permit())
    }

    /// The kernel's `needs_approval` predicate: `approve` in enforce mode. Writes nothing.
    ///
    /// The arguments are read by the kernel's strict parser (`ActionRequest::from_json_text`),
    /// then decided as `countersign::needs_approval` decides.
    #[napi]
    pub async fn needs_approval(
        &self,
        action: String,
        arguments_json: String,
    ) -> napi::Result<bool> {
        let evaluation = self
            .control
            .evaluate(&ActionRequest::from_json_text(action, &arguments_json))
            .map_err(control_error)?;
        Ok(evaluation.mode == Mode::Enforce && evaluation.decision == Decision::Approve)
    }

    /// Find or open the approval request for this call (scoped to `run`, correlated with the
    /// framework call `(framework, call_id)`); JSON of the record, or `null`.
    #[napi]
    pub async fn request_approval(
        &self,
        action: String,
        arguments_json: String,
        run: Option<String>,
        framework: Option<String>,
        call_id: Option<String>,
    ) -> napi::Result<Option<String>> {
        let request = scoped(
            ActionRequest::from_json_text(action, &arguments_json),
            run,
            framework,
            call_id,
        )?;
        match self.control.request_approval(&request).await {
            Ok(Some(record)) => Ok(Some(record_json(&record)?)),
            Ok(None) => Ok(None),
            Err(error) => Err(control_error(error)),
        }
    }

    /// Decide this call and, if allowed or approved, run the executor at most once with the
    /// canonical arguments; the receipt as JSON.
    ///
    /// `executor` is the wrapper's bridge (see [`ExecutorBridge`]). `timeout` in seconds.
    #[napi(
        ts_args_type = "action: string, argumentsJson: string, executor: (canonicalJson: string) => Promise<string>, approval?: string | undefined | null, timeout?: number | undefined | null, run?: string | undefined | null, framework?: string | undefined | null, callId?: string | undefined | null"
    )]
    #[allow(clippy::too_many_arguments)]
    pub async fn execute(
        &self,
        action: String,
        arguments_json: String,
        executor: ExecutorBridge,
        approval: Option<String>,
        timeout: Option<f64>,
        run: Option<String>,
        framework: Option<String>,
        call_id: Option<String>,
    ) -> napi::Result<String> {
        let mut request = scoped(
            ActionRequest::from_json_text(action, &arguments_json),
            run,
            framework,
            call_id,
        )?;
        if let Some(id) = approval {
            request = request.with_approval(parse_approval_id(&id)?);
        }
        if let Some(limit) = timeout {
            request = request.with_timeout(seconds("timeout", limit)?);
        }
        let bridge = Arc::new(executor);
        let result = self
            .control
            .execute(request, move |canonical| {
                let bridge = Arc::clone(&bridge);
                async move { call_executor(&bridge, canonical.to_string()).await }
            })
            .await;
        match result {
            Ok(done) => to_json(&done.receipt),
            Err(error) => Err(control_error(error)),
        }
    }

    /// Record a human's answer through the one answer contract; JSON of the record.
    ///
    /// `decision_json` is the submitted decision as JSON text, read strictly (`"approve"`,
    /// `"deny"`, `"reject"`; anything else is refused `invalid_decision` and recorded). Who
    /// answers is `token` (an approver token) or else `approver` (an asserted name).
    /// `action_hash` is the hash the person was shown; the channel is `api`.
    #[napi]
    pub async fn answer(
        &self,
        request_id: String,
        decision_json: String,
        approver: Option<String>,
        note: Option<String>,
        token: Option<String>,
        action_hash: Option<String>,
    ) -> napi::Result<String> {
        let id = parse_approval_id(&request_id)?;
        // The strict reader: a decision sent twice is no decision (`invalid_decision`).
        let submitted: Option<serde_json::Value> = countersign::json::read(&decision_json).ok();
        let decision = AnswerDecision::from_submitted(submitted.as_ref());
        let credential = match (token, approver) {
            (Some(token), _) => countersign::approver::Credential::Token(token),
            (None, Some(name)) => countersign::approver::Credential::Asserted(name),
            (None, None) => countersign::approver::Credential::Asserted(String::new()),
        };
        let answer = countersign::store::RecordAnswer {
            request_id: id,
            decision,
            approver: credential,
            channel: countersign::approver::Channel::Api,
            shown_hash: action_hash.map(countersign::ActionHash::from_stored),
            note,
        };
        let store = self.control.store();
        let now = self.control.clock().now();
        match countersign::control::submit_answer(store.as_ref(), answer, now).await {
            Ok(record) => record_json(&record),
            Err(error) => Err(answer_error(&error)),
        }
    }

    /// Take back (issue #31): with `cancel` false, revoke the grant of `request_id` (or
    /// withdraw a counted yes from a quorum still pending) as `token` (verified) or else
    /// `approver` (asserted); with `cancel` true, cancel it as the operator named `approver`.
    /// The channel is `api`; `reason` is kept on the receipt. JSON of the stored request.
    #[napi]
    pub async fn withdraw(
        &self,
        request_id: String,
        cancel: bool,
        approver: Option<String>,
        token: Option<String>,
        reason: Option<String>,
    ) -> napi::Result<String> {
        use countersign::approval::withdraw::{Withdrawal, WithdrawalKind};
        use countersign::approver::{Channel, Credential};
        let kind = if cancel {
            WithdrawalKind::Cancel {
                operator: approver.unwrap_or_default(),
                channel: Channel::Api,
            }
        } else {
            let approver = match (token, approver) {
                (Some(token), _) => Credential::Token(token),
                (None, name) => Credential::Asserted(name.unwrap_or_default()),
            };
            WithdrawalKind::Revoke {
                approver,
                channel: Channel::Api,
            }
        };
        let withdrawal = Withdrawal {
            request_id: parse_approval_id(&request_id)?,
            kind,
            reason,
        };
        match self.control.withdraw(withdrawal).await {
            Ok(record) => record_json(&record),
            Err(error) => Err(answer_error(&error)),
        }
    }

    /// Cancel every waiting request of `run` as `operator`, oldest first, each in its own
    /// transaction: a JSON list of `{"request_id", "request"}` (cancelled) or
    /// `{"request_id", "refusal"}` (the rejection text of a request that changed meanwhile).
    #[napi]
    pub async fn cancel_run(
        &self,
        run: String,
        operator: String,
        reason: Option<String>,
    ) -> napi::Result<String> {
        let done = self
            .control
            .cancel_run(&run, &operator, reason.as_deref())
            .await
            .map_err(|error| answer_error(&error))?;
        let mut items = Vec::with_capacity(done.len());
        for (id, outcome) in done {
            items.push(match outcome {
                Ok(record) => serde_json::json!({
                    "request_id": id.to_string(),
                    "request": serde_json::from_str::<serde_json::Value>(&record_json(&record)?)
                        .map_err(|error| internal(&error.to_string()))?,
                }),
                Err(error) => serde_json::json!({
                    "request_id": id.to_string(),
                    "refusal": answer_error(&error).reason,
                }),
            });
        }
        serde_json::to_string(&items).map_err(|error| internal(&error.to_string()))
    }

    /// Put an approver token (its id `tok_…` or the whole token) on the store's deny-list as
    /// `operator`; false when it already was. A text of neither shape is a `TypeError`.
    #[napi]
    pub async fn revoke_token(
        &self,
        token_or_id: String,
        operator: String,
        reason: Option<String>,
    ) -> napi::Result<bool> {
        use countersign::control::RevokeTokenError;
        match self
            .control
            .revoke_token(&token_or_id, &operator, reason.as_deref())
            .await
        {
            Ok(added) => Ok(added),
            Err(RevokeTokenError::NotATokenId(message)) => Err(misuse(&message)),
            Err(RevokeTokenError::Store(error)) => Err(store_error(&error)),
        }
    }

    /// The policy's approval warnings (approvals nobody can answer, impossible quorums), one
    /// line each as `countersign verify` prints them; `Control.open` emits each as a
    /// `process` warning of type `ApprovalWarning`.
    #[napi(getter)]
    pub fn approval_warnings(&self) -> Vec<String> {
        self.control.policy().approval_warnings()
    }

    /// The request the store maps the framework call `(framework, run, call_id)` to, as JSON,
    /// or `null`. A read.
    #[napi]
    pub async fn correlated(
        &self,
        framework: String,
        run: Option<String>,
        call_id: String,
    ) -> napi::Result<Option<String>> {
        match self
            .control
            .correlated(&framework, run.as_deref(), &call_id)
            .await
        {
            Ok(Some(record)) => Ok(Some(record_json(&record)?)),
            Ok(None) => Ok(None),
            Err(error) => Err(store_error(&error)),
        }
    }

    /// One approval request as JSON, or `null`.
    #[napi]
    pub async fn approval(&self, request_id: String) -> napi::Result<Option<String>> {
        let id = parse_approval_id(&request_id)?;
        match self.control.store().approval(&id).await {
            Ok(Some(record)) => Ok(Some(record_json(&record)?)),
            Ok(None) => Ok(None),
            Err(error) => Err(store_error(&error)),
        }
    }

    /// Approval requests, oldest first, as a JSON list; only those in `state` if given.
    #[napi]
    pub async fn approvals(&self, state: Option<String>) -> napi::Result<String> {
        let state = state.as_deref().map(parse_state).transpose()?;
        match self.control.store().approvals(state).await {
            Ok(records) => to_json(&records.iter().map(WithDisplay::of).collect::<Vec<_>>()),
            Err(error) => Err(store_error(&error)),
        }
    }

    /// One effect record as JSON, or `null`.
    #[napi]
    pub async fn effect(&self, key: String) -> napi::Result<Option<String>> {
        let key = EffectKey::new(&key).map_err(|error| misuse(&error.to_string()))?;
        match self.control.store().effect(&key).await {
            Ok(Some(record)) => Ok(Some(to_json(&record)?)),
            Ok(None) => Ok(None),
            Err(error) => Err(store_error(&error)),
        }
    }

    /// Every receipt, oldest first, as a JSON list.
    #[napi]
    pub async fn receipts(&self) -> napi::Result<String> {
        let store = self.control.store();
        let mut receipts = Vec::new();
        let mut after = 0;
        loop {
            let page = store
                .receipts(after, 500)
                .await
                .map_err(|error| store_error(&error))?;
            let Some(last) = page.last() else { break };
            after = last.position;
            for stored in &page {
                receipts.push(
                    stored.to_receipt().map_err(|detail| {
                        store_error(&countersign::StoreError::Corrupt { detail })
                    })?,
                );
            }
        }
        to_json(&receipts)
    }

    /// Verify the receipt chain; the report as JSON.
    #[napi]
    pub async fn verify_receipts(&self) -> napi::Result<String> {
        match self.control.verify_receipts(None).await {
            Ok(report) => to_json(&report),
            Err(error) => Err(store_error(&error)),
        }
    }
}
