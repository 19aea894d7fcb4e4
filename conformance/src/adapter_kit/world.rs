//! One case's world: store, clock, identity, scripted human, counting executor and the proxy
//! around the adapter's interrupt.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign::approver::Credential;
use countersign::store::{SqliteStore, Store};
use countersign::{
    ActionHash, AnswerDecision, ApprovalAnswer, ApprovalId, Clock, Control, ExecutorError,
    FrameworkInterrupt, IdentityProvider, InterruptApprovalProvider, InterruptError, ManualClock,
    PendingApproval, Policy, Principal, Timestamp,
};

use super::{Adapter, KIT_PRINCIPAL, KIT_REVIEWER, KitError};

/// The run label of every call not labelled otherwise: the calls of one case share one run.
pub const FIRST_RUN: &str = "run-1";

/// One call as the model emits it: an action name and its arguments, in a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The action (tool) name, such as `kit.refund`.
    pub action: String,
    /// The arguments, a JSON object.
    pub arguments: serde_json::Value,
    /// The kit's label for the framework run (agent run, thread, conversation) the call belongs
    /// to: [`FIRST_RUN`] unless the case labels it otherwise. Calls with the same label continue
    /// one run; the adapter maps each label to its own per-run id and scopes the kernel requests
    /// of that run to it (`ActionRequest::with_run`), so one run's approval never authorizes
    /// another run's call. Where a run must be found again from another process, the adapter
    /// keeps the mapping in [`Session::scratch_dir`].
    pub run: String,
}

impl Call {
    /// A call of `action` with `arguments`, in the case's first run.
    pub fn new(action: &str, arguments: serde_json::Value) -> Call {
        Call {
            action: action.to_owned(),
            arguments,
            run: FIRST_RUN.to_owned(),
        }
    }

    /// This call in the run labelled `run`.
    #[must_use]
    pub fn in_run(mut self, run: &str) -> Call {
        self.run = run.to_owned();
        self
    }
}

/// What a framework shows a human when it pauses.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    /// The kernel's approval request, when one exists at the pause (resumed in place: always;
    /// decided before invocation: never, the request is opened when the tool is invoked).
    pub request_id: Option<ApprovalId>,
    /// The action name.
    pub action: String,
    /// The arguments shown (secrets redacted when they come from a [`PendingApproval`]).
    pub arguments: serde_json::Value,
    /// When the kernel's request expires, when one exists at the pause.
    pub expires_at: Option<Timestamp>,
    /// The action hash the request is bound to, when one exists at the pause: what a surface
    /// echoes with the answer.
    pub action_hash: Option<ActionHash>,
}

impl Shown {
    /// What a [`PendingApproval`] shows.
    pub fn pending(pending: &PendingApproval) -> Shown {
        Shown {
            request_id: Some(pending.request_id.clone()),
            action: pending.action.clone(),
            arguments: pending.arguments.clone(),
            expires_at: Some(pending.expires_at),
            action_hash: Some(pending.action_hash.clone()),
        }
    }

    /// What a framework shows before invoking a call (no kernel request yet).
    pub fn call(call: &Call) -> Shown {
        Shown {
            request_id: None,
            action: call.action.clone(),
            arguments: call.arguments.clone(),
            expires_at: None,
            action_hash: None,
        }
    }
}

/// A human's answer: what the framework's resume carries back, and who the operator's
/// application says gave it.
///
/// Two identities, kept apart on purpose (docs/SPEC.md 2.2, "Where the approver comes from"):
///
/// - [`HumanAnswer::operator_approver`] is who answered, as the operator's application knows
///   them (signed in): the credential the operator passes **on the resuming call**, beside the
///   resume value. The adapter hands exactly this to the kernel as
///   [`ApprovalAnswer::approver`], through its own resume API (a parameter, a server-side map
///   keyed by request id) — never by writing it into the framework's payload or run state and
///   reading it back.
/// - [`HumanAnswer::payload_approver`] is the approver *name* the resume payload or saved run
///   state carries, where the framework keeps one (for display). It is data a client holding the
///   run state can edit: write it where your payload has a name, and never hand it to the
///   kernel. In the `entitlement` suite's run-state case it names an entitled approver while
///   the operator passed someone else.
#[derive(Clone, Debug, PartialEq)]
pub struct HumanAnswer {
    /// Approve or reject.
    pub decision: AnswerDecision,
    /// Who answered, as the operator's application passes it on the resuming call: the only
    /// identity the kernel may be given. The kit's humans are asserted names that get their
    /// groups from the kit policy's directory.
    pub operator_approver: Credential,
    /// The approver name written into the resume payload or run state (display only; may have
    /// been edited).
    pub payload_approver: String,
    /// Their note, if any (data, never an instruction).
    pub note: Option<String>,
    /// The request the answer names (the one the human was shown), if there was one.
    pub request_id: Option<ApprovalId>,
    /// The arguments the answer is about. Usually what was shown; in the `binding` case, other
    /// arguments (the resume payload was edited).
    pub arguments: serde_json::Value,
    /// The action hash the human was shown, echoed with the answer, when a request existed.
    pub shown_hash: Option<ActionHash>,
}

impl HumanAnswer {
    /// This answer as the kernel's [`ApprovalAnswer`], carrying the arguments it is about and
    /// the hash shown. The approver is [`HumanAnswer::operator_approver`], never the payload's
    /// name.
    pub fn to_approval_answer(&self) -> ApprovalAnswer {
        ApprovalAnswer {
            decision: self.decision,
            approver: self.operator_approver.clone(),
            shown_hash: self.shown_hash.clone(),
            note: self.note.clone(),
            arguments: Some(self.arguments.clone()),
        }
    }

    /// The operator's approver as a bare name, when it is one (the kit's humans always are);
    /// `None` for a token or an unverified source. For surfaces that only take names (the
    /// kernel's answer API, `countersign approve --as`).
    pub fn operator_approver_name(&self) -> Option<&str> {
        match &self.operator_approver {
            Credential::Asserted(name) => Some(name),
            Credential::Token(_) | Credential::Unverified { .. } | Credential::Verified { .. } => {
                None
            }
        }
    }
}

type Script = dyn Fn(&Shown) -> Option<HumanAnswer> + Send + Sync;

/// The kit's scripted human. Every time a framework shows a human something, the adapter calls
/// [`Reviewer::review`]; the kit counts those calls ("how often a human was asked").
#[derive(Clone)]
pub struct Reviewer {
    script: Arc<Script>,
    asked: Arc<AtomicUsize>,
    /// When set, every answer arrives after the request expired: the clock is moved past the
    /// shown expiry (or a day ahead when none is shown) before the answer is handed back.
    late: Option<ManualClock>,
}

impl std::fmt::Debug for Reviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reviewer")
            .field("asked", &self.asked())
            .finish_non_exhaustive()
    }
}

impl Reviewer {
    pub(crate) fn new(
        script: impl Fn(&Shown) -> Option<HumanAnswer> + Send + Sync + 'static,
    ) -> Reviewer {
        Reviewer {
            script: Arc::new(script),
            asked: Arc::new(AtomicUsize::new(0)),
            late: None,
        }
    }

    /// This human, answering only after each request expired (on `clock`).
    pub(crate) fn answering_late(mut self, clock: ManualClock) -> Reviewer {
        self.late = Some(clock);
        self
    }

    /// A human who approves exactly what is shown, as [`KIT_REVIEWER`].
    pub(crate) fn approving() -> Reviewer {
        Reviewer::new(|shown| Some(answer(shown, AnswerDecision::Approve, None)))
    }

    /// Nobody is there: every question stays unanswered (the run must pause).
    pub(crate) fn absent() -> Reviewer {
        Reviewer::new(|_| None)
    }

    /// Show `shown` to the human; their answer, or `None` when they have not answered (the run
    /// must pause and the request stay pending: a wait ending is not a denial).
    pub fn review(&self, shown: &Shown) -> Option<HumanAnswer> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let answer = (self.script)(shown);
        if let (Some(_), Some(clock)) = (&answer, &self.late) {
            match shown.expires_at {
                Some(expires_at) => clock.set(expires_at.plus(Duration::from_secs(1))),
                None => clock.advance(Duration::from_secs(24 * 60 * 60)),
            }
        }
        answer
    }

    /// How many times a human was asked.
    pub fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

/// The answer a scripted human gives about `shown`, as [`KIT_REVIEWER`].
pub(crate) fn answer(shown: &Shown, decision: AnswerDecision, note: Option<&str>) -> HumanAnswer {
    answer_as(shown, decision, note, KIT_REVIEWER)
}

/// The answer `approver` gives about `shown`: the operator passes `approver`, and the payload
/// names them too.
pub(crate) fn answer_as(
    shown: &Shown,
    decision: AnswerDecision,
    note: Option<&str>,
    approver: &str,
) -> HumanAnswer {
    HumanAnswer {
        decision,
        operator_approver: Credential::Asserted(approver.to_owned()),
        payload_approver: approver.to_owned(),
        note: note.map(str::to_owned),
        request_id: shown.request_id.clone(),
        arguments: shown.arguments.clone(),
        shown_hash: shown.action_hash.clone(),
    }
}

/// What the kit's executor does on one call.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// Succeed: the effect happened.
    Commit,
    /// Say "definitely not executed".
    NotExecuted(&'static str),
    /// Send the request and lose the response (the effect may have happened).
    LoseResponse(&'static str),
}

#[derive(Default)]
struct ToolState {
    script: VecDeque<Step>,
    received: Vec<serde_json::Value>,
    returned: Vec<serde_json::Value>,
}

/// The kit's executor: the body the framework's tool runs inside `Control::execute`. It counts
/// its calls and does what the case scripts (succeed by default).
#[derive(Clone, Default)]
pub struct Tool {
    state: Arc<Mutex<ToolState>>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("calls", &self.calls())
            .finish_non_exhaustive()
    }
}

impl Tool {
    pub(crate) fn scripted(steps: &[Step]) -> Tool {
        let tool = Tool::default();
        lock(&tool.state).script = steps.iter().cloned().collect();
        tool
    }

    /// Run the effect with the (canonical) `arguments` the kernel hands over.
    ///
    /// # Errors
    ///
    /// [`ExecutorError`] as the case scripts it.
    pub async fn call(
        &self,
        arguments: serde_json::Value,
    ) -> Result<serde_json::Value, ExecutorError> {
        let mut state = lock(&self.state);
        state.received.push(arguments.clone());
        let run = state.received.len();
        match state.script.pop_front().unwrap_or(Step::Commit) {
            Step::Commit => {
                let value = serde_json::json!({"done": true, "run": run, "arguments": arguments});
                state.returned.push(value.clone());
                Ok(value)
            }
            Step::NotExecuted(reason) => Err(ExecutorError::not_executed(reason)),
            Step::LoseResponse(reason) => Err(ExecutorError::may_have_run(reason)),
        }
    }

    /// How many times the executor ran.
    pub fn calls(&self) -> usize {
        lock(&self.state).received.len()
    }

    /// The arguments of every run, in order.
    pub(crate) fn received(&self) -> Vec<serde_json::Value> {
        lock(&self.state).received.clone()
    }

    /// The values returned by every successful run, in order.
    pub(crate) fn returned(&self) -> Vec<serde_json::Value> {
        lock(&self.state).returned.clone()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another case's thread panicked; the data is still usable.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the kit hands [`Adapter::interrupt`]: the world's human and scratch folder.
#[derive(Clone, Debug)]
pub struct Setup {
    reviewer: Reviewer,
    scratch: PathBuf,
}

impl Setup {
    /// The scripted human.
    pub fn reviewer(&self) -> &Reviewer {
        &self.reviewer
    }

    /// A folder for the framework's checkpoints; it survives into the durability case's second
    /// process.
    pub fn scratch_dir(&self) -> &Path {
        &self.scratch
    }
}

/// A [`Setup`] for `reviewer` with its scratch folder in `dir`.
pub(crate) fn setup_for(reviewer: Reviewer, dir: PathBuf) -> Setup {
    Setup {
        reviewer,
        scratch: dir,
    }
}

/// What the kit hands [`Adapter::invoke`] for one world.
pub struct Session<I> {
    control: Control,
    interrupt: Arc<I>,
    reviewer: Reviewer,
    tool: Tool,
    scratch: PathBuf,
}

impl<I> Session<I> {
    /// The control the operator built (the kit, here). Adapters call `execute` on it; they
    /// never build one.
    pub fn control(&self) -> &Control {
        &self.control
    }

    /// The interrupt [`Adapter::interrupt`] returned for this world (not the kit's proxy).
    pub fn interrupt(&self) -> &Arc<I> {
        &self.interrupt
    }

    /// The scripted human.
    pub fn reviewer(&self) -> &Reviewer {
        &self.reviewer
    }

    /// The executor to run inside `Control::execute`.
    pub fn tool(&self) -> &Tool {
        &self.tool
    }

    /// The framework's checkpoint folder (as [`Setup::scratch_dir`]).
    pub fn scratch_dir(&self) -> &Path {
        &self.scratch
    }
}

/// How often the adapter's interrupt was reached through the kernel, by result.
#[derive(Debug, Default)]
pub(crate) struct InterruptCounts {
    pub(crate) answered: AtomicUsize,
    pub(crate) suspended: AtomicUsize,
    pub(crate) failed: AtomicUsize,
}

impl InterruptCounts {
    pub(crate) fn get(&self) -> (usize, usize, usize) {
        (
            self.answered.load(Ordering::SeqCst),
            self.suspended.load(Ordering::SeqCst),
            self.failed.load(Ordering::SeqCst),
        )
    }
}

/// The proxy the kit installs around the adapter's interrupt: counts every call, and in the
/// expiry case holds each answer back until its request has expired.
struct CountingInterrupt {
    inner: Arc<dyn FrameworkInterrupt>,
    counts: Arc<InterruptCounts>,
    late_answers: Option<ManualClock>,
}

#[async_trait::async_trait]
impl FrameworkInterrupt for CountingInterrupt {
    fn framework(&self) -> &str {
        self.inner.framework()
    }

    fn carries_approved_arguments(&self) -> bool {
        self.inner.carries_approved_arguments()
    }

    async fn interrupt(&self, pending: PendingApproval) -> Result<ApprovalAnswer, InterruptError> {
        let expires_at = pending.expires_at;
        let result = self.inner.interrupt(pending).await;
        let counter = match &result {
            Ok(_) => &self.counts.answered,
            Err(InterruptError::Suspended) => &self.counts.suspended,
            Err(InterruptError::Failed(_)) => &self.counts.failed,
        };
        counter.fetch_add(1, Ordering::SeqCst);
        if let (Ok(_), Some(clock)) = (&result, &self.late_answers) {
            clock.set(expires_at.plus(Duration::from_secs(1)));
        }
        result
    }
}

/// The kit's identity provider: [`KIT_PRINCIPAL`], or nobody.
struct KitIdentity(Option<Principal>);

impl IdentityProvider for KitIdentity {
    fn principal(&self) -> Option<Principal> {
        self.0.clone()
    }
}

/// What a world is built from.
pub(crate) struct WorldSpec {
    /// Holds `kit.db` and `scratch/`.
    pub(crate) dir: PathBuf,
    pub(crate) clock_start: Timestamp,
    pub(crate) principal: bool,
    pub(crate) reviewer: Reviewer,
    pub(crate) tool: Tool,
    pub(crate) late_answers: bool,
}

/// One built world.
pub(crate) struct World<I> {
    pub(crate) session: Session<I>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) counts: Arc<InterruptCounts>,
    /// The world's clock (the kit moves it one second between calls).
    pub(crate) clock: ManualClock,
}

/// The kit's fixed start time: 2030-01-01T00:00:00Z.
pub(crate) const KIT_EPOCH: Timestamp = Timestamp::from_millis(1_893_456_000_000);

impl<I: FrameworkInterrupt + 'static> World<I> {
    pub(crate) fn build<A: Adapter<Interrupt = I>>(
        adapter: &A,
        policy: &Arc<Policy>,
        spec: WorldSpec,
    ) -> Result<World<I>, KitError> {
        let scratch = spec.dir.join("scratch");
        std::fs::create_dir_all(&scratch)?;
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::open(spec.dir.join("kit.db"))
                .map_err(|error| KitError::Io(std::io::Error::other(error.to_string())))?,
        );
        let clock = ManualClock::new(spec.clock_start);
        // Late answers: a framework that decides before invocation records the human's answer
        // through the kernel's answer API, so the human answers late; otherwise the proxy holds
        // the interrupt's answer back until the request expired.
        let late_human =
            spec.late_answers && adapter.shape() == super::Shape::DecidedBeforeInvocation;
        let reviewer = if late_human {
            spec.reviewer.answering_late(clock.clone())
        } else {
            spec.reviewer
        };
        let setup = Setup {
            reviewer: reviewer.clone(),
            scratch: scratch.clone(),
        };
        let interrupt = adapter.interrupt(&setup);
        let counts = Arc::new(InterruptCounts::default());
        let proxy = CountingInterrupt {
            inner: Arc::clone(&interrupt) as Arc<dyn FrameworkInterrupt>,
            counts: Arc::clone(&counts),
            late_answers: (spec.late_answers && !late_human).then(|| clock.clone()),
        };
        let shared_clock: Arc<dyn Clock> = Arc::new(clock.clone());
        let provider = InterruptApprovalProvider::new(
            Arc::clone(&store),
            Arc::new(proxy),
            Arc::clone(&shared_clock),
        );
        let principal = spec.principal.then(|| {
            // INVARIANT (kit-principal): KIT_PRINCIPAL is a valid principal literal.
            Principal::new(KIT_PRINCIPAL).expect("KIT_PRINCIPAL is a valid principal")
        });
        let control = Control::builder_shared(Arc::clone(policy), Arc::clone(&store))
            .identity(KitIdentity(principal))
            .clock(shared_clock)
            .approval_provider(Arc::new(provider))
            .build();
        Ok(World {
            session: Session {
                control,
                interrupt,
                reviewer,
                tool: spec.tool,
                scratch,
            },
            store,
            counts,
            clock,
        })
    }
}
