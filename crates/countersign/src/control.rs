//! The pipeline: [`Control::execute`] and [`Control::protect`].
//!
//! Checks run in a fixed order and an earlier refusal always wins (DESIGN.md, "The pipeline"):
//!
//! 1. build the action: principal from the identity provider, arguments canonicalized (an
//!    unrepresentable argument is refused before anything is written), templates rendered;
//! 2. policy decision (`deny` → [`ControlError::ActionDenied`], with a receipt);
//! 3. approval gate: `approve` with nothing presented looks for a usable request for this exact
//!    action hash; if there is none, it writes a pending request and asks the approval provider,
//!    or returns [`ControlError::ApprovalRequired`] (no receipt, no reservation: a waiting
//!    approval holds nothing). If the effect key would be refused anyway, nobody is asked;
//! 4. approval take and 5. effect reservation, in **one** store transaction;
//! 6. execute, and map the outcome: `Ok` → committed; [`ExecutorError::NotExecuted`] → failed
//!    (retry allowed); any other error, a panic, a timeout, a dropped future → ambiguous;
//! 7. one receipt, chained, written atomically with the final state change.

use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::action::canonical::{self, CanonicalError, CanonicalJson};
use crate::action::{Action, ActionHash, Principal};
use crate::approval::{
    self, AnswerDecision, ApprovalId, ApprovalProvider, ApprovalRecord, ApprovalState, Correlation,
    ProviderOutcome,
};
use crate::approver::{ApprovalRule, Channel, Credential};
use crate::clock::{Clock, SystemClock, Timestamp};
use crate::effect::{
    AttemptContext, EffectKey, EffectRecord, EffectState, ExecutorError, ReconcileHook, Reconciled,
    RetryDecision,
};
use crate::error::{AnswerError, ControlError, ResolveError, StoreError};
use crate::evidence::{
    self, Anchor, Receipt, ReceiptDraft, ReceiptKind, ReceiptOutcome, VerifyReport,
};
use crate::policy::{Decision, Mode, Policy, Template};
use crate::store::{
    BeginAttempt, BeginOutcome, BeginRefusal, EffectClaim, FinishAttempt, NewApproval, OpenOutcome,
    PresentedApproval, RecordAnswer, ResolveEffect, Resolver, Store, random_id,
};

/// Vouches for the principal of every action (never taken from model output or arguments).
pub trait IdentityProvider: Send + Sync + 'static {
    /// The principal acting now, or `None` (then every action is refused: no principal, no
    /// action).
    fn principal(&self) -> Option<Principal>;
}

/// An identity provider that always names the same principal.
#[derive(Clone, Debug)]
pub struct StaticIdentity(Principal);

impl StaticIdentity {
    /// Always `principal`.
    pub fn new(principal: Principal) -> StaticIdentity {
        StaticIdentity(principal)
    }
}

impl IdentityProvider for StaticIdentity {
    fn principal(&self) -> Option<Principal> {
        Some(self.0.clone())
    }
}

/// One call to decide and maybe execute.
#[derive(Clone, Debug)]
pub struct ActionRequest {
    name: String,
    arguments: Result<CanonicalJson, CanonicalError>,
    approval: Option<ApprovalId>,
    timeout: Option<Duration>,
    wait: Option<Duration>,
    effect: Option<Template>,
    resource: Option<Template>,
    run: Option<String>,
    correlation: Option<(String, String)>,
    /// Where the executor puts a process's exit status ([`ActionRequest::with_exit_status`]).
    exit_status: Option<ExitStatusSlot>,
}

impl ActionRequest {
    /// A call of `name` with `arguments` (any `Serialize`: a struct, a `serde_json::Value`).
    /// An unrepresentable argument is reported by [`Control::execute`] as
    /// [`ControlError::InvalidArguments`].
    pub fn new<A: Serialize + ?Sized>(name: impl Into<String>, arguments: &A) -> ActionRequest {
        ActionRequest::from_canonical(name, canonical::to_canonical(arguments))
    }

    /// A call whose arguments are JSON text, canonicalized strictly (duplicate keys, `-0`,
    /// integer literals outside ±(2^53−1) are refused).
    pub fn from_json_text(name: impl Into<String>, text: &str) -> ActionRequest {
        ActionRequest::from_canonical(name, canonical::parse_canonical(text))
    }

    fn from_canonical(
        name: impl Into<String>,
        arguments: Result<CanonicalJson, CanonicalError>,
    ) -> ActionRequest {
        ActionRequest {
            name: name.into(),
            arguments,
            approval: None,
            timeout: None,
            wait: None,
            effect: None,
            resource: None,
            run: None,
            correlation: None,
            exit_status: None,
        }
    }

    /// Scope this call to one run (a framework's run or thread id; not hashed). A request it
    /// opens is scoped to the run: only an attempt naming the same run consumes its grant, and
    /// a grant of another run, or an unscoped one, authorizes nothing here (`other_run`, case
    /// B42). An empty id means no run.
    pub fn with_run(mut self, run: impl Into<String>) -> ActionRequest {
        let run = run.into();
        self.run = (!run.is_empty()).then_some(run);
        self
    }

    /// Correlate this call with the framework call it is: `framework` and the framework's call
    /// id (its run comes from [`ActionRequest::with_run`]). The kernel's store maps the
    /// (framework, run, call id) to the request it opens, in the same transaction, first write
    /// wins; two calls with the same arguments in one step get a request each. Read the mapping
    /// with [`Control::correlated`]. The call id is never the authority: the action hash is
    /// checked when the call runs, and a call id mapped to another hash is refused `mismatch`
    /// (case B35).
    pub fn with_correlation(
        mut self,
        framework: impl Into<String>,
        call_id: impl Into<String>,
    ) -> ActionRequest {
        self.correlation = Some((framework.into(), call_id.into()));
        self
    }

    /// The run this call is scoped to, if any.
    pub fn run(&self) -> Option<&str> {
        self.run.as_deref()
    }

    /// The framework call this call is correlated with, if any.
    fn correlation(&self) -> Option<Correlation> {
        self.correlation
            .as_ref()
            .map(|(framework, call_id)| Correlation {
                framework: framework.clone(),
                run: self.run.clone(),
                call_id: call_id.clone(),
            })
    }

    /// Present an approval: the request the human answered. It authorizes this call only if it
    /// was granted for exactly this action hash, is unexpired and unused.
    pub fn with_approval(mut self, request_id: ApprovalId) -> ActionRequest {
        self.approval = Some(request_id);
        self
    }

    /// Give the executor at most `timeout`; past it the attempt ends `ambiguous` (the call may
    /// have gone out).
    pub fn with_timeout(mut self, timeout: Duration) -> ActionRequest {
        self.timeout = Some(timeout);
        self
    }

    /// When approval is needed and no provider answers at once, wait up to `wait` for a human
    /// to answer out of band (polling the store). The wait ending is not a denial and not an
    /// expiry: the request stays pending.
    pub fn with_wait(mut self, wait: Duration) -> ActionRequest {
        self.wait = Some(wait);
        self
    }

    /// An effect-key template used when the policy entry declares none.
    pub fn with_effect(mut self, template: Template) -> ActionRequest {
        self.effect = Some(template);
        self
    }

    /// A resource template used when the policy entry declares none.
    pub fn with_resource(mut self, template: Template) -> ActionRequest {
        self.resource = Some(template);
        self
    }

    /// The action name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A successful execution: the executor's value and the receipt that records it.
#[derive(Clone, Debug)]
pub struct Executed<T> {
    /// What the executor returned.
    pub value: T,
    /// The receipt.
    pub receipt: Receipt,
}

/// What policy would decide, without writing anything ([`Control::evaluate`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Evaluation {
    /// The action name.
    pub action: String,
    /// `allow`, `approve` or `deny`.
    pub decision: Decision,
    /// The reason code (`rule`, `action_default`, `unknown_action`, `no_matching_rule`).
    pub reason: &'static str,
    /// The action hash.
    pub action_hash: ActionHash,
    /// The effect key, if any.
    pub effect_key: Option<EffectKey>,
    /// The resource, if any.
    pub resource: Option<String>,
    /// Enforce or observe.
    pub mode: Mode,
    /// The policy hash.
    pub policy_hash: String,
}

/// The control: the kernel's entry point. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Control {
    inner: Arc<Inner>,
}

struct Inner {
    policy: Arc<Policy>,
    store: Arc<dyn Store>,
    identity: Option<Arc<dyn IdentityProvider>>,
    approvals: Option<Arc<dyn ApprovalProvider>>,
    clock: Arc<dyn Clock>,
    approval_ttl: Option<Duration>,
    lease: Duration,
    environment: Option<String>,
    reconcile: Option<Arc<dyn ReconcileHook>>,
}

/// Builds a [`Control`].
pub struct ControlBuilder {
    inner: Inner,
}

impl ControlBuilder {
    /// The identity provider that names the principal of every action. Without one, every
    /// action is refused with `no_principal`.
    pub fn identity(mut self, identity: impl IdentityProvider) -> ControlBuilder {
        self.inner.identity = Some(Arc::new(identity));
        self
    }

    /// The approval provider asked when policy says `approve` (for example an
    /// [`crate::InterruptApprovalProvider`]). Without one, approvals are out of band: the
    /// attempt returns [`ControlError::ApprovalRequired`].
    pub fn approval_provider(mut self, provider: Arc<dyn ApprovalProvider>) -> ControlBuilder {
        self.inner.approvals = Some(provider);
        self
    }

    /// The clock (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> ControlBuilder {
        self.inner.clock = clock;
        self
    }

    /// The approval TTL for every action, overriding the policy's (default: the policy entry's
    /// `approval_ttl`, else the policy's, else 15 minutes).
    pub fn approval_ttl(mut self, ttl: Duration) -> ControlBuilder {
        self.inner.approval_ttl = Some(ttl);
        self
    }

    /// How long a reservation's lease lasts (default 5 minutes). An executor still running when
    /// it lapses leaves the effect `ambiguous`: set it above the longest executor run.
    pub fn lease(mut self, lease: Duration) -> ControlBuilder {
        self.inner.lease = lease;
        self
    }

    /// The environment, overriding the policy's.
    pub fn environment(mut self, environment: impl Into<String>) -> ControlBuilder {
        self.inner.environment = Some(environment.into());
        self
    }

    /// A hook asked what happened to an ambiguous effect before an attempt on it is refused.
    pub fn reconcile_hook(mut self, hook: Arc<dyn ReconcileHook>) -> ControlBuilder {
        self.inner.reconcile = Some(hook);
        self
    }

    /// The control.
    pub fn build(self) -> Control {
        Control {
            inner: Arc::new(self.inner),
        }
    }
}

/// The entry fingerprint presented when policy now denies an action: it matches no stored
/// request, so a presented grant is voided rather than consumed.
const DENIED_BY_POLICY: &str = "denied-by-policy";

/// The default lease: 5 minutes.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(300);

/// Everything decided about an attempt before any write.
struct Prepared {
    action: Action,
    decision: Decision,
    reason: &'static str,
    fingerprint: String,
    approval_ttl: Duration,
    /// The rule a request opened for this call is judged by (set for `approve` decisions).
    approval_rule: Option<ApprovalRule>,
    /// Who may resolve this call's effect, when the entry says (set when there is an effect
    /// key and the entry has `resolvers` or an `approval` block).
    resolvers: Option<ApprovalRule>,
}

enum ExecutorOutcome<T> {
    Value(T),
    NotExecuted(String),
    Failed(String),
    Panicked(String),
    TimedOut(Duration),
}

/// Turns an attempt ambiguous if its future is dropped while the executor runs.
struct InFlight {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    finish: Option<FinishAttempt>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // INVARIANT (no-release): a dropped attempt is recorded ambiguous, never released. If no
        // runtime is left to record it, the lease lapsing makes it ambiguous all the same.
        if let Some(finish) = self.finish.take()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let store = Arc::clone(&self.store);
            let now = self.clock.now();
            handle.spawn(async move {
                let _ = store.finish_attempt(finish, now).await;
            });
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic with no message".to_owned()
    }
}

impl Control {
    /// Start building a control for `policy` over `store`.
    pub fn builder(policy: Policy, store: impl Store) -> ControlBuilder {
        Control::builder_shared(Arc::new(policy), Arc::new(store))
    }

    /// Start building a control from shared parts (several controls may share one store).
    pub fn builder_shared(policy: Arc<Policy>, store: Arc<dyn Store>) -> ControlBuilder {
        ControlBuilder {
            inner: Inner {
                policy,
                store,
                identity: None,
                approvals: None,
                clock: Arc::new(SystemClock),
                approval_ttl: None,
                lease: DEFAULT_LEASE,
                environment: None,
                reconcile: None,
            },
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// The store.
    pub fn store(&self) -> Arc<dyn Store> {
        Arc::clone(&self.inner.store)
    }

    /// The clock.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.inner.clock)
    }

    fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    fn environment(&self) -> &str {
        self.inner
            .environment
            .as_deref()
            .unwrap_or_else(|| self.inner.policy.environment())
    }

    /// Step 1 and 2: build the action and decide. Writes nothing.
    fn prepare(&self, request: &ActionRequest) -> Result<Prepared, ControlError> {
        let name = request.name.as_str();
        let arguments =
            request
                .arguments
                .clone()
                .map_err(|source| ControlError::InvalidArguments {
                    action: name.to_owned(),
                    source,
                })?;
        let principal = self
            .inner
            .identity
            .as_ref()
            .and_then(|identity| identity.principal())
            .ok_or_else(|| ControlError::NoPrincipal {
                action: name.to_owned(),
            })?;
        let value = arguments.to_value();
        let policy = &self.inner.policy;
        let decided = policy.decide(name, &value);
        let entry = decided.entry;
        let template_error = |source| ControlError::Template {
            action: name.to_owned(),
            source,
        };
        let secrets: &[String] = entry
            .map(|entry| entry.secret_arguments())
            .unwrap_or_default();
        let effect_template = entry
            .and_then(|entry| entry.effect())
            .or(request.effect.as_ref());
        let resource_template = entry
            .and_then(|entry| entry.resource())
            .or(request.resource.as_ref());
        for template in [effect_template, resource_template].into_iter().flatten() {
            if let Some(field) = template
                .fields()
                .find(|field| secrets.iter().any(|secret| secret == field))
            {
                return Err(template_error(crate::policy::TemplateError::SecretField {
                    template: template.as_str().to_owned(),
                    field: field.to_owned(),
                }));
            }
        }
        let effect_key = effect_template
            .map(|template| template.render(&value))
            .transpose()
            .map_err(template_error)?
            .map(EffectKey::new)
            .transpose()
            .map_err(|error| {
                template_error(crate::policy::TemplateError::BadKey {
                    message: error.to_string(),
                })
            })?;
        let resource = resource_template
            .map(|template| template.render(&value))
            .transpose()
            .map_err(template_error)?;
        let action = Action::new(
            name,
            arguments,
            secrets,
            principal,
            resource,
            self.environment(),
            effect_key,
        )
        .map_err(|source| ControlError::InvalidArguments {
            action: name.to_owned(),
            source,
        })?;
        let reason = match (decided.decision, decided.reason.code()) {
            (Decision::Deny, "rule" | "action_default") => "denied",
            (_, code) => code,
        };
        let approval_rule = (decided.decision == Decision::Approve)
            .then(|| policy.approval_rule(&decided, action.principal.as_str()));
        let resolvers = match (&action.effect_key, entry) {
            (Some(_), Some(entry)) => policy.resolver_rule(entry, action.principal.as_str()),
            _ => None,
        };
        Ok(Prepared {
            decision: decided.decision,
            reason,
            fingerprint: entry
                .map(|entry| entry.fingerprint().to_owned())
                .unwrap_or_default(),
            approval_ttl: self
                .inner
                .approval_ttl
                .or_else(|| decided.approval_ttl())
                .unwrap_or_else(|| policy.approval_ttl()),
            approval_rule,
            resolvers,
            action,
        })
    }

    /// What policy would decide for `request`, without writing anything.
    ///
    /// # Errors
    ///
    /// Refusals of step 1 only: `invalid_arguments`, `bad_template`, `no_principal`.
    pub fn evaluate(&self, request: &ActionRequest) -> Result<Evaluation, ControlError> {
        let prepared = self.prepare(request)?;
        Ok(Evaluation {
            action: prepared.action.name.clone(),
            decision: prepared.decision,
            reason: prepared.reason,
            action_hash: prepared.action.hash.clone(),
            effect_key: prepared.action.effect_key.clone(),
            resource: prepared.action.resource.clone(),
            mode: self.inner.policy.mode(),
            policy_hash: self.inner.policy.hash().to_owned(),
        })
    }

    /// Find or open the approval request for `request` without running anything: step 1 to 3
    /// of the pipeline, minus the approval provider and the wait.
    ///
    /// For adapters whose framework decides before invocation (the OpenAI Agents SDK): the
    /// request exists, bound to the action hash, as soon as the framework pauses, so a human can
    /// answer it out of band (`countersign approve`) and the attempt that later runs takes it by
    /// hash. Idempotent for one action hash: a second call finds the same request.
    ///
    /// Returns `None` when the call needs no approval (policy says `allow` or `deny`, or the
    /// policy is in observe mode); otherwise the request, `pending` (created now or earlier),
    /// `granted` (answered yes, unused, unexpired) or `denied` (a human's no that still stands
    /// until that request's `expires_at`). Writes only what step 3 writes: the pending request,
    /// and expiry or void marks on older requests for the same hash, each with its receipt.
    ///
    /// # Errors
    ///
    /// Refusals of step 1 (`invalid_arguments`, `bad_template`, `no_principal`); the effect
    /// key's refusal when it would be refused anyway (`duplicate`, `in_progress`, `ambiguous`:
    /// nobody is asked, and no receipt is written until an attempt is made); store errors.
    ///
    /// # Cancel safety
    ///
    /// One store transaction: dropping the future leaves the request created or not.
    pub async fn request_approval(
        &self,
        request: &ActionRequest,
    ) -> Result<Option<ApprovalRecord>, ControlError> {
        let prepared = self.prepare(request)?;
        if self.inner.policy.mode() == Mode::Observe || prepared.decision != Decision::Approve {
            return Ok(None);
        }
        let now = self.now();
        let opened = self
            .inner
            .store
            .open_approval(self.new_approval(request, &prepared, now), now)
            .await
            .map_err(|source| ControlError::Store {
                after_run: false,
                source,
            })?;
        match opened {
            OpenOutcome::Granted(record)
            | OpenOutcome::Pending { record, .. }
            | OpenOutcome::Denied(record) => Ok(Some(record)),
            OpenOutcome::CorrelationConflict(record) => {
                Err(correlation_conflict(&record, &prepared.action.hash))
            }
            OpenOutcome::EffectRefused { decision, record } => {
                Err(effect_refusal(decision, &record))
            }
        }
    }

    /// The request mapped to a framework call (see [`ActionRequest::with_correlation`]), if
    /// any.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    ///
    /// # Cancel safety
    ///
    /// A read: dropping the future changes nothing.
    pub async fn correlated(
        &self,
        framework: &str,
        run: Option<&str>,
        call_id: &str,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        let correlation = Correlation {
            framework: framework.to_owned(),
            run: run.filter(|run| !run.is_empty()).map(str::to_owned),
            call_id: call_id.to_owned(),
        };
        self.inner.store.correlated(&correlation).await
    }

    fn draft(&self, prepared: &Prepared, attempt_id: &str) -> ReceiptDraft {
        let action = &prepared.action;
        ReceiptDraft {
            kind: Some(ReceiptKind::Attempt),
            attempt_id: Some(attempt_id.to_owned()),
            action: Some(action.name.clone()),
            action_hash: Some(action.hash.as_str().to_owned()),
            principal: Some(action.principal.as_str().to_owned()),
            resource: action.resource.clone(),
            environment: Some(action.environment.clone()),
            effect_key: action
                .effect_key
                .as_ref()
                .map(|key| key.as_str().to_owned()),
            arguments: Some(action.redacted_arguments.clone()),
            decision: Some(prepared.decision.as_str().to_owned()),
            mode: Some(self.inner.policy.mode().as_str().to_owned()),
            policy_hash: Some(self.inner.policy.hash().to_owned()),
            attempt_started_at: Some(self.now()),
            ..ReceiptDraft::default()
        }
    }

    /// What the effect record an attempt reserves keeps about it (see
    /// [`crate::effect::AttemptContext`]); `None` without an effect key.
    fn attempt_context(&self, prepared: &Prepared, draft: &ReceiptDraft) -> Option<AttemptContext> {
        let action = &prepared.action;
        action.effect_key.as_ref()?;
        Some(AttemptContext {
            action: action.name.clone(),
            principal: action.principal.as_str().to_owned(),
            environment: action.environment.clone(),
            policy_hash: self.inner.policy.hash().to_owned(),
            started_at: draft.attempt_started_at.unwrap_or_else(|| self.now()),
            approval_id: None,
            resolvers: prepared.resolvers.clone(),
        })
    }

    /// Decide `request` and, if allowed or approved, run `executor` at most once with the
    /// canonical arguments (as a `serde_json::Value`).
    ///
    /// # Errors
    ///
    /// A [`ControlError`]; each variant says whether the executor ran
    /// ([`ControlError::did_run`]) and whether a retry may run ([`ControlError::may_retry`]).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before the reservation leaves nothing but what was already written
    /// (a pending approval request, a refusal receipt). Dropping it while the executor runs
    /// records the effect `ambiguous` (on a Tokio runtime, at once; otherwise when the lease
    /// lapses): it is never released for a second run.
    pub async fn execute<T, F, Fut>(
        &self,
        request: ActionRequest,
        executor: F,
    ) -> Result<Executed<T>, ControlError>
    where
        F: FnOnce(serde_json::Value) -> Fut,
        Fut: Future<Output = Result<T, ExecutorError>>,
    {
        let prepared = self.prepare(&request)?;
        let attempt_id = random_id("att_");
        let draft = self.draft(&prepared, &attempt_id);
        if self.inner.policy.mode() == Mode::Observe {
            return self.observe(&request, &prepared, draft, executor).await;
        }
        match prepared.decision {
            Decision::Deny => {
                let reason = self.deny(&request, &prepared, &attempt_id, draft).await?;
                Err(ControlError::ActionDenied {
                    action: prepared.action.name.clone(),
                    action_hash: prepared.action.hash.clone(),
                    reason,
                    policy_hash: self.inner.policy.hash().to_owned(),
                })
            }
            Decision::Allow => {
                self.run(&request, &prepared, &attempt_id, None, draft, executor)
                    .await
            }
            Decision::Approve => {
                let approval = match &request.approval {
                    Some(id) => id.clone(),
                    None => self.open_approval(&request, &prepared, &draft).await?,
                };
                self.run(
                    &request,
                    &prepared,
                    &attempt_id,
                    Some(approval),
                    draft,
                    executor,
                )
                .await
            }
        }
    }

    /// Step 2's refusal: write the denial receipt. A granted approval presented for this exact
    /// action was given under a policy that allowed asking; the policy now denies the action, so
    /// the approval is voided (never consumed) and the receipt says `policy_changed` (case B05).
    /// Returns the reason recorded.
    async fn deny(
        &self,
        request: &ActionRequest,
        prepared: &Prepared,
        attempt_id: &str,
        draft: ReceiptDraft,
    ) -> Result<&'static str, ControlError> {
        let store_error = |source| ControlError::Store {
            after_run: false,
            source,
        };
        if let Some(id) = &request.approval {
            let presented = self.inner.store.approval(id).await.map_err(store_error)?;
            if let Some(record) = presented.filter(|record| {
                record.state == ApprovalState::Granted && record.action_hash == prepared.action.hash
            }) {
                let begin = BeginAttempt {
                    attempt_id: attempt_id.to_owned(),
                    action_hash: prepared.action.hash.clone(),
                    // INVARIANT (deny-voids): no stored entry fingerprint equals this sentinel,
                    // so `plan_take` can only refuse; a granted request is voided.
                    approval: Some(PresentedApproval {
                        id: record.id,
                        fingerprint: DENIED_BY_POLICY.to_owned(),
                        run: request.run.clone(),
                    }),
                    effect: None,
                    context: None,
                    refusal_draft: draft,
                };
                return match self
                    .inner
                    .store
                    .begin_attempt(begin, self.now())
                    .await
                    .map_err(store_error)?
                {
                    BeginOutcome::Refused { refusal, .. } => Ok(refusal.reason()),
                    BeginOutcome::Started { .. } => Err(ControlError::Internal(
                        "a denied action consumed an approval".to_owned(),
                    )),
                };
            }
        }
        let draft = draft.with_outcome(ReceiptOutcome::Refused, Some(prepared.reason));
        self.inner
            .store
            .append_receipt(draft, self.now())
            .await
            .map_err(store_error)?;
        Ok(prepared.reason)
    }

    /// Step 3: find a usable approval, or create one and ask.
    async fn open_approval(
        &self,
        request: &ActionRequest,
        prepared: &Prepared,
        draft: &ReceiptDraft,
    ) -> Result<ApprovalId, ControlError> {
        let store_error = |source| ControlError::Store {
            after_run: false,
            source,
        };
        let now = self.now();
        let new = self.new_approval(request, prepared, now);
        let opened = self
            .inner
            .store
            .open_approval(new, now)
            .await
            .map_err(store_error)?;
        // Every refusal here ends the attempt: one receipt, then the refusal itself.
        let (refusal, receipt) = match opened {
            OpenOutcome::Granted(record) => return Ok(record.id),
            OpenOutcome::Pending { record, .. } => {
                return self.ask(request, draft, record).await;
            }
            OpenOutcome::Denied(record) => {
                let mut receipt = draft
                    .clone()
                    .with_outcome(ReceiptOutcome::Refused, Some("approval_denied"));
                receipt.approval_id = Some(record.id.as_str().to_owned());
                receipt.approver = record.approver.clone();
                receipt.note = record.note.clone();
                let refusal = ControlError::ApprovalDenied {
                    request_id: record.id,
                    approver: record.approver.unwrap_or_default(),
                    note: record.note,
                };
                (refusal, receipt)
            }
            OpenOutcome::CorrelationConflict(record) => {
                let refusal = correlation_conflict(&record, &prepared.action.hash);
                let mut receipt = draft
                    .clone()
                    .with_outcome(ReceiptOutcome::Refused, Some(refusal.reason()));
                receipt.approval_id = Some(record.id.as_str().to_owned());
                receipt.detail = Some(format!(
                    "duplicate correlation: this framework call is already mapped to approval `{}` for {}",
                    record.id, record.action_hash
                ));
                (refusal, receipt)
            }
            OpenOutcome::EffectRefused { decision, record } => {
                let refusal = effect_refusal(decision, &record);
                let receipt = draft
                    .clone()
                    .with_outcome(ReceiptOutcome::Refused, Some(refusal.reason()));
                (refusal, receipt)
            }
        };
        self.inner
            .store
            .append_receipt(receipt, self.now())
            .await
            .map_err(store_error)?;
        Err(refusal)
    }

    /// Step 3's asking: hand a pending request to the approval provider, or wait for an answer
    /// out of band; the request's id if one came, else `ApprovalRequired`.
    async fn ask(
        &self,
        request: &ActionRequest,
        draft: &ReceiptDraft,
        pending: ApprovalRecord,
    ) -> Result<ApprovalId, ControlError> {
        let store_error = |source| ControlError::Store {
            after_run: false,
            source,
        };
        if let Some(provider) = &self.inner.approvals {
            match provider.request(&pending.to_pending()).await {
                Ok(ProviderOutcome::Answered) => return Ok(pending.id),
                Ok(ProviderOutcome::Deferred) => {}
                // The attempt ends here: an answer about other arguments, an expired request.
                // Record the refusal like every other ended attempt (a store failure is not
                // an ended attempt: nothing could be recorded).
                Err(refusal) if !matches!(refusal, ControlError::Store { .. }) => {
                    let mut receipt = draft
                        .clone()
                        .with_outcome(ReceiptOutcome::Refused, Some(refusal.reason()));
                    receipt.approval_id = Some(pending.id.as_str().to_owned());
                    receipt.detail = Some(refusal.to_string());
                    self.inner
                        .store
                        .append_receipt(receipt, self.now())
                        .await
                        .map_err(store_error)?;
                    return Err(refusal);
                }
                Err(error) => return Err(error),
            }
        }
        if let Some(wait) = request.wait
            && self.wait_for_answer(&pending.id, wait).await?
        {
            return Ok(pending.id);
        }
        Err(ControlError::ApprovalRequired {
            request_id: pending.id,
            action_hash: pending.action_hash,
            expires_at: pending.expires_at,
        })
    }

    /// The pending request step 3 would create for `prepared` at `now`.
    fn new_approval(
        &self,
        request: &ActionRequest,
        prepared: &Prepared,
        now: Timestamp,
    ) -> NewApproval {
        let action = &prepared.action;
        let record = ApprovalRecord {
            id: ApprovalId::generate(),
            action_hash: action.hash.clone(),
            action: action.name.clone(),
            arguments: action.redacted_arguments.clone(),
            principal: action.principal.as_str().to_owned(),
            resource: action.resource.clone(),
            environment: action.environment.clone(),
            effect_key: action
                .effect_key
                .as_ref()
                .map(|key| key.as_str().to_owned()),
            policy_hash: self.inner.policy.hash().to_owned(),
            entry_fingerprint: prepared.fingerprint.clone(),
            state: ApprovalState::Pending,
            created_at: now,
            expires_at: now.plus(prepared.approval_ttl),
            answered_at: None,
            approver: None,
            note: None,
            consumed_at: None,
            consumed_by: None,
            run: request.run.clone(),
            rule: prepared.approval_rule.clone().unwrap_or_default(),
            answers: Vec::new(),
        };
        NewApproval {
            record,
            effect_key: action.effect_key.clone(),
            correlation: request.correlation(),
        }
    }

    /// Poll until the request leaves `pending` (true) or `wait` passes (false). Never writes.
    async fn wait_for_answer(&self, id: &ApprovalId, wait: Duration) -> Result<bool, ControlError> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut delay = Duration::from_millis(50);
        loop {
            let record =
                self.inner
                    .store
                    .approval(id)
                    .await
                    .map_err(|source| ControlError::Store {
                        after_run: false,
                        source,
                    })?;
            match record {
                Some(record)
                    if record.state == ApprovalState::Pending
                        && !record.is_expired_at(self.now()) => {}
                // Answered, expired or gone: the take step decides and records.
                _ => return Ok(true),
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(delay.min(deadline - now)).await;
            delay = (delay * 2).min(Duration::from_secs(1));
        }
    }

    /// Steps 4–7.
    async fn run<T, F, Fut>(
        &self,
        request: &ActionRequest,
        prepared: &Prepared,
        attempt_id: &str,
        approval: Option<ApprovalId>,
        mut draft: ReceiptDraft,
        executor: F,
    ) -> Result<Executed<T>, ControlError>
    where
        F: FnOnce(serde_json::Value) -> Fut,
        Fut: Future<Output = Result<T, ExecutorError>>,
    {
        let store_error = |source| ControlError::Store {
            after_run: false,
            source,
        };
        let action = &prepared.action;
        if approval.is_some() || action.effect_key.is_some() {
            let mut reconciled = false;
            loop {
                let now = self.now();
                let begin = BeginAttempt {
                    attempt_id: attempt_id.to_owned(),
                    action_hash: action.hash.clone(),
                    approval: approval.clone().map(|id| PresentedApproval {
                        id,
                        fingerprint: prepared.fingerprint.clone(),
                        run: request.run.clone(),
                    }),
                    effect: action.effect_key.clone().map(|key| EffectClaim {
                        key,
                        lease_until: now.plus(self.inner.lease),
                    }),
                    context: self.attempt_context(prepared, &draft),
                    refusal_draft: draft.clone(),
                };
                match self
                    .inner
                    .store
                    .begin_attempt(begin, now)
                    .await
                    .map_err(store_error)?
                {
                    BeginOutcome::Started { approval } => {
                        if let Some(record) = approval {
                            draft.approval_id = Some(record.id.as_str().to_owned());
                            draft.approver = record.approver.clone();
                            draft.note = record.note.clone();
                            draft.approval_policy_hash = Some(record.policy_hash.clone());
                            draft.approvers =
                                Some(record.granted_by().into_iter().cloned().collect());
                        }
                        break;
                    }
                    BeginOutcome::Refused { refusal, .. } => {
                        if let (
                            false,
                            Some(hook),
                            BeginRefusal::Effect {
                                decision: RetryDecision::Ambiguous,
                                record,
                            },
                        ) = (reconciled, &self.inner.reconcile, &refusal)
                        {
                            reconciled = true;
                            match self.reconcile(hook.as_ref(), record).await? {
                                Some(EffectState::Failed) => continue,
                                Some(_) => {
                                    return Err(ControlError::DuplicateEffect {
                                        effect_key: record.key.clone(),
                                        in_progress: false,
                                    });
                                }
                                None => {}
                            }
                        }
                        return Err(begin_refusal(refusal, approval.as_ref(), &action.hash));
                    }
                }
            }
        }

        let arguments = action.arguments.to_value();
        // The guard holds the draft while the executor runs (it records a dropped attempt
        // ambiguous) and hands it back afterwards: moved, not cloned.
        let mut guard = InFlight {
            store: Arc::clone(&self.inner.store),
            clock: Arc::clone(&self.inner.clock),
            finish: Some(FinishAttempt {
                attempt_id: attempt_id.to_owned(),
                effect_key: action.effect_key.clone(),
                state: EffectState::Ambiguous,
                detail: Some("the caller dropped the attempt while the executor ran".to_owned()),
                draft: draft.with_outcome(ReceiptOutcome::Ambiguous, Some("cancelled")),
            }),
        };
        let outcome = run_executor(executor, arguments, request.timeout).await;
        let draft = guard
            .finish
            .take()
            .map(|finish| finish.draft)
            // INVARIANT (in-flight): `finish` is set above and taken only here or on drop.
            .ok_or_else(|| ControlError::Internal("the in-flight record was lost".to_owned()))?;

        let (state, receipt_outcome, reason, detail) = match &outcome {
            ExecutorOutcome::Value(_) => (
                EffectState::Committed,
                ReceiptOutcome::Committed,
                None,
                None,
            ),
            ExecutorOutcome::NotExecuted(message) => (
                EffectState::Failed,
                ReceiptOutcome::Failed,
                Some("not_executed"),
                Some(message.clone()),
            ),
            ExecutorOutcome::Failed(message) => (
                EffectState::Ambiguous,
                ReceiptOutcome::Ambiguous,
                Some("executor_error"),
                Some(message.clone()),
            ),
            ExecutorOutcome::Panicked(message) => (
                EffectState::Ambiguous,
                ReceiptOutcome::Ambiguous,
                Some("panic"),
                Some(format!("the executor panicked: {message}")),
            ),
            ExecutorOutcome::TimedOut(limit) => (
                EffectState::Ambiguous,
                ReceiptOutcome::Ambiguous,
                Some("timeout"),
                Some(format!("the executor ran past its {limit:?} timeout")),
            ),
        };
        let mut final_draft = draft.with_outcome(receipt_outcome, reason);
        final_draft.detail = detail.clone();
        final_draft.exit_status = request.exit_status.as_ref().and_then(ExitStatusSlot::get);
        let finish = FinishAttempt {
            attempt_id: attempt_id.to_owned(),
            effect_key: action.effect_key.clone(),
            state,
            detail: detail.clone(),
            draft: final_draft,
        };
        let receipt = self
            .inner
            .store
            .finish_attempt(finish, self.now())
            .await
            .map_err(|source| ControlError::Store {
                after_run: true,
                source,
            })?;
        match outcome {
            ExecutorOutcome::Value(value) => Ok(Executed { value, receipt }),
            ExecutorOutcome::NotExecuted(message) => Err(ControlError::NotExecuted {
                effect_key: action.effect_key.clone(),
                message,
            }),
            _ => Err(ControlError::OutcomeUnknown {
                action: action.name.clone(),
                effect_key: action.effect_key.clone(),
                cause: detail.unwrap_or_default(),
            }),
        }
    }

    /// Ask the reconcile hook; record a definite answer. Returns the recorded state.
    async fn reconcile(
        &self,
        hook: &dyn ReconcileHook,
        record: &EffectRecord,
    ) -> Result<Option<EffectState>, ControlError> {
        let to = match hook.reconcile(record).await {
            Ok(Reconciled::Committed) => EffectState::Committed,
            Ok(Reconciled::Failed) => EffectState::Failed,
            Ok(Reconciled::Unknown) | Err(_) => return Ok(None),
        };
        let resolve = ResolveEffect {
            key: record.key.clone(),
            to,
            resolver: Resolver::Hook,
            note: None,
        };
        match self.inner.store.resolve_effect(resolve, self.now()).await {
            Ok(_) => Ok(Some(to)),
            // Someone else resolved it first: go by what is stored now. (The hook is never
            // judged as a person, so `NotPermitted` cannot come back; treat it the same.)
            Err(ResolveError::Refused { .. } | ResolveError::NotPermitted { .. }) => Ok(None),
            Err(ResolveError::Store(source)) => Err(ControlError::Store {
                after_run: false,
                source,
            }),
        }
    }

    /// Observe mode: decide and record, enforce nothing.
    async fn observe<T, F, Fut>(
        &self,
        request: &ActionRequest,
        prepared: &Prepared,
        draft: ReceiptDraft,
        executor: F,
    ) -> Result<Executed<T>, ControlError>
    where
        F: FnOnce(serde_json::Value) -> Fut,
        Fut: Future<Output = Result<T, ExecutorError>>,
    {
        let would = match prepared.decision {
            Decision::Allow => "would_allow",
            Decision::Approve => "would_require_approval",
            Decision::Deny => match prepared.reason {
                "unknown_action" => "would_deny_unknown_action",
                "no_matching_rule" => "would_deny_no_matching_rule",
                _ => "would_deny",
            },
        };
        let outcome = run_executor(
            executor,
            prepared.action.arguments.to_value(),
            request.timeout,
        )
        .await;
        let detail = match &outcome {
            ExecutorOutcome::Value(_) => None,
            ExecutorOutcome::NotExecuted(message) => Some(format!("not executed: {message}")),
            ExecutorOutcome::Failed(message) => Some(format!("executor error: {message}")),
            ExecutorOutcome::Panicked(message) => Some(format!("the executor panicked: {message}")),
            ExecutorOutcome::TimedOut(limit) => {
                Some(format!("the executor ran past its {limit:?} timeout"))
            }
        };
        let mut observed = draft.with_outcome(ReceiptOutcome::Observed, Some(would));
        observed.detail = detail.clone();
        observed.exit_status = request.exit_status.as_ref().and_then(ExitStatusSlot::get);
        let receipt = self
            .inner
            .store
            .append_receipt(observed, self.now())
            .await
            .map_err(|source| ControlError::Store {
                after_run: true,
                source,
            })?;
        match outcome {
            ExecutorOutcome::Value(value) => Ok(Executed { value, receipt }),
            ExecutorOutcome::NotExecuted(message) => Err(ControlError::NotExecuted {
                effect_key: None,
                message,
            }),
            _ => Err(ControlError::OutcomeUnknown {
                action: prepared.action.name.clone(),
                effect_key: None,
                cause: detail.unwrap_or_default(),
            }),
        }
    }

    /// Record a human's answer as the programmatic API: an asserted `approver` through
    /// [`Channel::Api`], with no hash echo. Judged by the request's stored rule like every
    /// answer; [`Control::submit_answer`] takes a token, a channel and the hash shown.
    ///
    /// # Errors
    ///
    /// [`AnswerError`]: see [`approval::submit_answer`].
    pub async fn answer(
        &self,
        request_id: &ApprovalId,
        decision: AnswerDecision,
        approver: &str,
        note: Option<&str>,
    ) -> Result<ApprovalRecord, AnswerError> {
        approval::record_answer(
            self.inner.store.as_ref(),
            request_id,
            decision,
            approver,
            note,
            self.now(),
        )
        .await
    }

    /// Record an answer as a surface submits it (the one closed answer contract: see
    /// [`approval::submit_answer`]).
    ///
    /// # Errors
    ///
    /// [`AnswerError`]: see [`approval::submit_answer`].
    ///
    /// # Cancel safety
    ///
    /// One store transaction.
    pub async fn submit_answer(&self, answer: RecordAnswer) -> Result<ApprovalRecord, AnswerError> {
        approval::submit_answer(self.inner.store.as_ref(), answer, self.now()).await
    }

    /// Resolve an ambiguous effect to `committed` or `failed`.
    ///
    /// # Errors
    ///
    /// [`ResolveError`]: unknown key, not ambiguous, bad target, store.
    pub async fn resolve(
        &self,
        key: &EffectKey,
        to: EffectState,
        resolver: &str,
        note: Option<&str>,
    ) -> Result<EffectRecord, ResolveError> {
        let resolve = ResolveEffect {
            key: key.clone(),
            to,
            resolver: Resolver::Person {
                credential: Credential::Asserted(resolver.to_owned()),
                channel: Channel::Api,
            },
            note: note.map(str::to_owned),
        };
        self.inner.store.resolve_effect(resolve, self.now()).await
    }

    /// Verify the receipt chain, against `anchor` if given.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the store cannot be read.
    pub async fn verify_receipts(
        &self,
        anchor: Option<&Anchor>,
    ) -> Result<VerifyReport, StoreError> {
        evidence::verify_store(self.inner.store.as_ref(), anchor).await
    }

    /// Wrap an async function or closure as a protected tool named `action`.
    ///
    /// The function receives the arguments deserialized from their canonical form, so what
    /// runs is exactly what was hashed and approved.
    pub fn protect<A, T, F, Fut>(&self, action: impl Into<String>, executor: F) -> Protected<A, F>
    where
        A: Serialize + DeserializeOwned,
        F: Fn(A) -> Fut,
        Fut: Future<Output = Result<T, ExecutorError>>,
    {
        Protected {
            control: self.clone(),
            action: action.into(),
            executor,
            timeout: None,
            wait: None,
            effect: None,
            resource: None,
            arguments: PhantomData,
        }
    }
}

async fn run_executor<T, F, Fut>(
    executor: F,
    arguments: serde_json::Value,
    timeout: Option<Duration>,
) -> ExecutorOutcome<T>
where
    F: FnOnce(serde_json::Value) -> Fut,
    Fut: Future<Output = Result<T, ExecutorError>>,
{
    let call = AssertUnwindSafe(async move { executor(arguments).await }).catch_unwind();
    let result = match timeout {
        Some(limit) => match tokio::time::timeout(limit, call).await {
            Ok(result) => result,
            Err(_) => return ExecutorOutcome::TimedOut(limit),
        },
        None => call.await,
    };
    match result {
        Ok(Ok(value)) => ExecutorOutcome::Value(value),
        Ok(Err(ExecutorError::NotExecuted(message))) => ExecutorOutcome::NotExecuted(message),
        Ok(Err(ExecutorError::Failed(error))) => ExecutorOutcome::Failed(error.to_string()),
        Err(payload) => ExecutorOutcome::Panicked(panic_message(payload.as_ref())),
    }
}

fn effect_refusal(decision: RetryDecision, record: &EffectRecord) -> ControlError {
    match decision {
        RetryDecision::InProgress => ControlError::DuplicateEffect {
            effect_key: record.key.clone(),
            in_progress: true,
        },
        RetryDecision::Committed => ControlError::DuplicateEffect {
            effect_key: record.key.clone(),
            in_progress: false,
        },
        RetryDecision::Ambiguous | RetryDecision::LeaseExpired => ControlError::AmbiguousEffect {
            effect_key: record.key.clone(),
        },
        RetryDecision::Reserve => ControlError::Internal(format!(
            "effect `{}` was refused with a reserve decision",
            record.key
        )),
    }
}

fn begin_refusal(
    refusal: BeginRefusal,
    presented: Option<&ApprovalId>,
    action_hash: &ActionHash,
) -> ControlError {
    use crate::approval::TakeRefusal;
    match refusal {
        BeginRefusal::Effect { decision, record } => effect_refusal(decision, &record),
        BeginRefusal::Approval { refusal, record } => {
            let request_id = record
                .as_ref()
                .map(|record| record.id.clone())
                .or_else(|| presented.cloned())
                .unwrap_or_else(|| ApprovalId::from_stored(String::new()));
            match (refusal, record) {
                (TakeRefusal::Unknown, _) | (_, None) => {
                    ControlError::ApprovalUnknown { request_id }
                }
                (TakeRefusal::Pending, Some(record)) => ControlError::ApprovalRequired {
                    request_id,
                    action_hash: record.action_hash,
                    expires_at: record.expires_at,
                },
                (TakeRefusal::Denied, Some(record)) => ControlError::ApprovalDenied {
                    request_id,
                    approver: record.approver.unwrap_or_default(),
                    note: record.note,
                },
                (TakeRefusal::Consumed, _) => ControlError::ApprovalConsumed { request_id },
                (TakeRefusal::Expired, Some(record)) => ControlError::ApprovalExpired {
                    request_id,
                    expires_at: record.expires_at,
                },
                (TakeRefusal::Mismatch, Some(record)) => ControlError::ApprovalMismatch {
                    request_id,
                    approved_hash: record.action_hash.as_str().to_owned(),
                    action_hash: action_hash.clone(),
                },
                (TakeRefusal::PolicyChanged, _) => ControlError::ApprovalVoid { request_id },
                (TakeRefusal::Revoked, _) => ControlError::ApprovalRevoked { request_id },
                (TakeRefusal::Cancelled, _) => ControlError::ApprovalCancelled { request_id },
                (TakeRefusal::OtherRun, Some(record)) => ControlError::ApprovalOtherRun {
                    request_id,
                    run: record.run,
                },
            }
        }
    }
}

/// The refusal for a framework call already mapped to a request about another action hash.
fn correlation_conflict(record: &ApprovalRecord, action_hash: &ActionHash) -> ControlError {
    ControlError::ApprovalMismatch {
        request_id: record.id.clone(),
        approved_hash: record.action_hash.as_str().to_owned(),
        action_hash: action_hash.clone(),
    }
}

/// Does this call need a human's approval before the framework invokes the tool?
///
/// The predicate for adapters whose framework decides before invocation (the OpenAI Agents SDK's
/// `needs_approval`): true when policy says `approve` in enforce mode; false in observe mode and
/// for `allow` and `deny` (a denied call is refused, with a receipt, when it is invoked).
///
/// # Errors
///
/// Refusals of step 1: `invalid_arguments`, `bad_template`, `no_principal`.
pub fn needs_approval(
    control: &Control,
    action: &str,
    arguments: &serde_json::Value,
) -> Result<bool, ControlError> {
    let evaluation = control.evaluate(&ActionRequest::new(action, arguments))?;
    Ok(evaluation.mode == Mode::Enforce && evaluation.decision == Decision::Approve)
}

/// A protected tool: an async function wrapped by [`Control::protect`].
pub struct Protected<A, F> {
    control: Control,
    action: String,
    executor: F,
    timeout: Option<Duration>,
    wait: Option<Duration>,
    effect: Option<Template>,
    resource: Option<Template>,
    arguments: PhantomData<fn(A)>,
}

impl<A, T, F, Fut> Protected<A, F>
where
    A: Serialize + DeserializeOwned,
    F: Fn(A) -> Fut,
    Fut: Future<Output = Result<T, ExecutorError>>,
{
    /// Give each run at most `timeout` (past it: `ambiguous`).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Wait up to `wait` for an out-of-band answer when approval is needed.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// An effect-key template used when the policy entry declares none.
    pub fn effect(mut self, template: Template) -> Self {
        self.effect = Some(template);
        self
    }

    /// A resource template used when the policy entry declares none.
    pub fn resource(mut self, template: Template) -> Self {
        self.resource = Some(template);
        self
    }

    /// The action name.
    pub fn action(&self) -> &str {
        &self.action
    }

    fn request(&self, arguments: &A, approval: Option<ApprovalId>) -> ActionRequest {
        let mut request = ActionRequest::new(self.action.clone(), arguments);
        request.timeout = self.timeout;
        request.wait = self.wait;
        request.effect = self.effect.clone();
        request.resource = self.resource.clone();
        request.approval = approval;
        request
    }

    async fn run(&self, request: ActionRequest) -> Result<Executed<T>, ControlError> {
        let executor = &self.executor;
        self.control
            .execute(request, |canonical: serde_json::Value| async move {
                let arguments: A = serde_json::from_value(canonical).map_err(|error| {
                    ExecutorError::not_executed(format!(
                        "the canonical arguments do not fit the tool's argument type: {error}"
                    ))
                })?;
                executor(arguments).await
            })
            .await
    }

    /// Call the tool.
    ///
    /// # Errors
    ///
    /// As [`Control::execute`].
    pub async fn call(&self, arguments: &A) -> Result<Executed<T>, ControlError> {
        self.run(self.request(arguments, None)).await
    }

    /// Call the tool presenting an approval.
    ///
    /// # Errors
    ///
    /// As [`Control::execute`].
    pub async fn call_with_approval(
        &self,
        arguments: &A,
        approval: ApprovalId,
    ) -> Result<Executed<T>, ControlError> {
        self.run(self.request(arguments, Some(approval))).await
    }
}

mod external;
mod withdraw;

pub use external::{ExitStatusSlot, HANDED_OFF_DETAIL, HandedOff};

#[cfg(test)]
mod tests;
