//! The pipeline: [`Control::execute`] and [`Control::protect`].
//!
//! Checks run in a fixed order and an earlier refusal always wins (DESIGN.md, "The pipeline"):
//!
//! 1. build the action: principal from the identity provider, arguments canonicalized (an
//!    unrepresentable argument is refused before anything is written), templates rendered;
//! 2. policy decision (`deny` → [`ControlError::ActionDenied`](crate::error::ControlError::ActionDenied), with a receipt);
//! 3. approval gate: `approve` with nothing presented looks for a usable request for this exact
//!    action hash; if there is none, it writes a pending request and asks the approval provider,
//!    or returns [`ControlError::ApprovalRequired`](crate::error::ControlError::ApprovalRequired) (no receipt, no reservation: a waiting
//!    approval holds nothing). If the effect key would be refused anyway, nobody is asked;
//! 4. approval take and 5. effect reservation, in **one** store transaction;
//! 6. execute, and map the outcome: `Ok` → committed; [`ExecutorError::NotExecuted`](crate::effect::ExecutorError::NotExecuted) → failed
//!    (retry allowed); any other error, a panic, a timeout, a dropped future → ambiguous;
//! 7. one receipt, chained, written atomically with the final state change.
//!
//! By concept: `request` (the [`ActionRequest`] and step 1: the action and its decision),
//! `gate` (step 3), `pipeline` (steps 2 and 4 to 7: [`Control::execute`]), `answer` (how an
//! answer is recorded: [`submit_answer`], [`ApprovalProvider`]) and `protect`
//! ([`Control::protect`], [`Protected`]). This file holds [`Control`] and its builder.

mod answer;
mod external;
mod gate;
mod pipeline;
mod protect;
mod request;
mod withdraw;

pub use answer::{
    ApprovalProvider, InterruptApprovalProvider, ProviderOutcome, record_answer, submit_answer,
};
pub use external::{ExitStatusSlot, HANDED_OFF_DETAIL, HandedOff};
pub use protect::Protected;
pub use request::{
    ActionRequest, CommitNoteSlot, Evaluation, Executed, IdentityProvider, StaticIdentity,
    needs_approval,
};
pub use withdraw::RevokeTokenError;

use std::sync::Arc;
use std::time::Duration;

use crate::action::Action;
use crate::approver::ApprovalRule;
use crate::clock::{Clock, SystemClock, Timestamp};
use crate::effect::ReconcileHook;
use crate::error::DenyReason;
use crate::policy::{Decision, Policy};
use crate::store::Store;

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
    /// Records of attempts dropped while their executors ran (see [`Control::settled`]).
    unrecorded: Arc<tokio::sync::watch::Sender<Unrecorded>>,
}

/// The records of dropped attempts ([`Control::settled`]): how many are being written, and how
/// many the store refused.
#[derive(Debug, Default)]
pub(crate) struct Unrecorded {
    pub(crate) writing: usize,
    pub(crate) refused: usize,
    pub(crate) last_refusal: Option<String>,
}

/// Attempts dropped while their executors ran that the store refused to record `ambiguous`
/// ([`Control::settled`]). Each stays reserved (`in_progress` to a retry) until its lease
/// lapses, and is `ambiguous` from then on: it is never released for a second run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{count} cancelled attempt(s) could not be recorded `ambiguous` (the store refused: {error}): each stays `in_progress` until its lease lapses ({}), then becomes `ambiguous`; list them with `countersign effects --state reserved`",
    humantime::format_duration(*lease)
)]
pub struct UnrecordedAttempts {
    /// How many records the store refused.
    pub count: usize,
    /// The last refusal, as the store worded it.
    pub error: String,
    /// The control's lease: how long until each becomes `ambiguous` on its own.
    pub lease: Duration,
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
    /// attempt returns [`ControlError::ApprovalRequired`](crate::error::ControlError::ApprovalRequired).
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
    /// Why a pattern entry's `allow` was raised to `approve`, if it was.
    raised_by: Option<crate::policy::Raise>,
    reason: &'static str,
    /// Why policy denies it, when it does (`decision` is `Deny`).
    denial: DenyReason,
    fingerprint: String,
    approval_ttl: Duration,
    /// The rule a request opened for this call is judged by (set for `approve` decisions).
    approval_rule: Option<ApprovalRule>,
    /// Who may resolve this call's effect, when the entry says (set when there is an effect
    /// key and the entry has `resolvers` or an `approval` block).
    resolvers: Option<ApprovalRule>,
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
                unrecorded: Arc::new(tokio::sync::watch::Sender::new(Unrecorded::default())),
            },
        }
    }

    /// Resolves once every attempt whose [`execute`](Control::execute) future was dropped
    /// while its executor ran has been recorded `ambiguous` in the store, or refused by it.
    ///
    /// A dropped future cannot await, so that record is written on a task of its own on the
    /// current Tokio runtime. A host that cancels calls as it shuts down (a signal, a closed
    /// client) awaits this before it ends its runtime: a task the runtime drops unwritten
    /// leaves the attempt to its lease, which makes it `ambiguous` only once it lapses
    /// ([`ControlBuilder::lease`], 5 minutes by default), and until then the effect key is
    /// refused `in_progress`. Resolves at once when nothing is pending.
    ///
    /// # Errors
    ///
    /// [`UnrecordedAttempts`] when the store refused any such record since this control was
    /// built (for example another process held a SQLite store's write lock past the busy
    /// budget): each of those attempts is left to its lease.
    pub async fn settled(&self) -> Result<(), UnrecordedAttempts> {
        let mut unrecorded = self.inner.unrecorded.subscribe();
        // The sender lives in `self.inner`: `wait_for` cannot see it closed.
        let _ = unrecorded.wait_for(|now| now.writing == 0).await;
        let now = unrecorded.borrow();
        match &now.last_refusal {
            Some(error) if now.refused > 0 => Err(UnrecordedAttempts {
                count: now.refused,
                error: error.clone(),
                lease: self.inner.lease,
            }),
            _ => Ok(()),
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
}

#[cfg(test)]
mod tests;
