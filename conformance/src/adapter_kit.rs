//! The adapter kit: drives one protected call at a time through an adapter and checks that the
//! caller gets the same refusals, the same executor counts and the same evidence as on the direct
//! kernel path (docs/SPEC.md, part 2; docs/conformance.md).
//!
//! An adapter implements [`Adapter`]: its framework's name, its shape ([`Shape`]), its
//! [`FrameworkInterrupt`], and [`Adapter::invoke`], which drives **one** protected call end to
//! end through the real framework and returns the executor's value or the kernel's
//! [`ControlError`] as itself. For every case the kit builds a fresh world — a scratch SQLite
//! store, a [`ManualClock`], the kit's own policy ([`KIT_POLICY`]) and identity provider, and an
//! [`InterruptApprovalProvider`] around a counting proxy of the adapter's interrupt — never the
//! operator's. A scripted human, the [`Reviewer`], answers whatever the framework shows.
//!
//! ```no_run
//! use countersign_conformance::adapter_kit::{self, KitOptions, reference::ReferenceAdapter};
//! # async fn demo() -> Result<(), adapter_kit::KitError> {
//! let report = adapter_kit::run(&ReferenceAdapter, &KitOptions::default()).await?;
//! print!("{}", report.to_text());
//! assert!(report.is_ok(), "{}", report.to_text());
//! # Ok(()) }
//! ```
//!
//! Suites and cases are listed by [`CASES`]. Each case ends pass, fail, or not applicable with
//! the framework's reason; a suite is not applicable only if every case in it is, and a report is
//! ok only with at least one applicable suite and no failure.

pub mod broken;
mod cases;
mod child;
pub mod reference;
mod report;
mod world;

use std::path::PathBuf;
use std::sync::Arc;

use countersign::approver::{Authentication, Channel, judge};
use countersign::{ControlError, FrameworkInterrupt, Mode, Policy};

pub use countersign::{InterruptApprovalProvider, ManualClock};
pub use report::{CaseReport, CaseStatus, Report, SuiteReport, SuiteStatus};
pub use world::{Call, FIRST_RUN, HumanAnswer, Reviewer, Session, Setup, Shown, Tool};

/// The policy every kit world runs under (`countersign.policy/v1`, enforce mode).
///
/// - `kit.refund`: effect key `refund:{payment_id}`; `amount` ≤ 500 is allowed, ≤ 100000 needs
///   approval by anyone but the requester, ≤ 200000 needs approval by `group:finance`, ≤ 300000
///   by two distinct members of `group:finance` (the `entitlement` suite), anything larger is
///   denied; approvals live 10 minutes.
/// - the directory puts [`KIT_REVIEWER`] and [`KIT_SECOND_REVIEWER`] in `finance`;
///   [`KIT_OUTSIDER`] is in no group.
/// - every other action name is unknown, hence denied (the kit calls `kit.wire_transfer`).
pub const KIT_POLICY: &str = "\
schema: countersign.policy/v1
mode: enforce
environment: conformance
approval_ttl: 10m
directory:
  human:reviewer: [finance]
  human:second-reviewer: [finance]
actions:
  kit.refund:
    effect: \"refund:{payment_id}\"
    resource: \"payment:{payment_id}\"
    rules:
      - when: { amount: { lte: 500 } }
        decision: allow
      - when: { amount: { lte: 100000 } }
        decision: approve
      - when: { amount: { lte: 200000 } }
        decision: approve
        approval: { approvers: [\"group:finance\"] }
      - when: { amount: { lte: 300000 } }
        decision: approve
        approval: { approvers: [\"group:finance\"], quorum: 2 }
      - decision: deny
";

/// The principal the kit's identity provider vouches for.
pub const KIT_PRINCIPAL: &str = "agent:conformance-kit";

/// The approver the kit's scripted human answers as (in `group:finance` by the kit's
/// directory).
pub const KIT_REVIEWER: &str = "human:reviewer";

/// A second approver in `group:finance`: the quorum's other yes in the `entitlement` suite.
pub const KIT_SECOND_REVIEWER: &str = "human:second-reviewer";

/// An approver in no group: the `entitlement` suite's human whom `group:finance` rules do not
/// entitle.
pub const KIT_OUTSIDER: &str = "human:outsider";

/// The approver `countersign approve` answers as in the durability case.
pub const CLI_APPROVER: &str = "human:cli-operator";

/// How a framework reaches a human (DESIGN.md, "The adapter contract").
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// The framework asks a predicate before invoking the tool, pauses, and invokes it once the
    /// human answered (OpenAI Agents SDK `needs_approval`, rig `AgentRun`). Refuses before
    /// invoking.
    DecidedBeforeInvocation,
    /// The tool runs, the interrupt suspends it, and the resumed run re-enters the same code
    /// with the answer (LangGraph `interrupt()`, swiftide `FeedbackRequired`).
    ResumedInPlace,
}

impl Shape {
    /// `decided before invocation` or `resumed in place`.
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::DecidedBeforeInvocation => "decided before invocation",
            Shape::ResumedInPlace => "resumed in place",
        }
    }
}

/// A suite of cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Suite {
    /// The kernel's promises, seen through the adapter.
    Kernel,
    /// An answer about other arguments authorizes nothing.
    Binding,
    /// A human's no is a recorded denial, not an error.
    Denial,
    /// An approved effect runs once.
    Duplicate,
    /// The identity provider's principal wins; no principal, no action.
    Identity,
    /// Only an entitled approver's answer counts, a quorum needs all its answers, the approver
    /// is the one the operator passed, never a name in run state, and one run's approval does
    /// not authorize another run's call.
    Entitlement,
    /// Resumed in place: the replayed pass asks once and consumes once.
    Reentry,
    /// Pause in one process, answer from the CLI, resume in another.
    Durability,
}

impl Suite {
    /// Every suite, in report order.
    pub const ALL: [Suite; 8] = [
        Suite::Kernel,
        Suite::Binding,
        Suite::Denial,
        Suite::Duplicate,
        Suite::Identity,
        Suite::Entitlement,
        Suite::Reentry,
        Suite::Durability,
    ];

    /// The suite's name (`kernel`, `binding`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Suite::Kernel => "kernel",
            Suite::Binding => "binding",
            Suite::Denial => "denial",
            Suite::Duplicate => "duplicate",
            Suite::Identity => "identity",
            Suite::Entitlement => "entitlement",
            Suite::Reentry => "reentry",
            Suite::Durability => "durability",
        }
    }
}

/// One case: its suite and its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct CaseId {
    /// The suite.
    pub suite: Suite,
    /// The case name, in snake case (`lost_response_blocks_retry`).
    pub name: &'static str,
}

/// Every case the kit runs, in report order.
pub const CASES: [CaseId; 18] = [
    case(Suite::Kernel, cases::LOST_RESPONSE),
    case(Suite::Kernel, cases::COMMITTED_EFFECT),
    case(Suite::Kernel, cases::UNKNOWN_ACTION),
    case(Suite::Kernel, cases::NOT_EXECUTED),
    case(Suite::Kernel, cases::ANSWER_AFTER_EXPIRY),
    case(Suite::Kernel, cases::ALLOWED_NEVER_ASKS),
    case(Suite::Kernel, cases::MATCHING_ANSWER),
    case(Suite::Binding, cases::OTHER_ARGUMENTS),
    case(Suite::Denial, cases::HUMAN_NO),
    case(Suite::Duplicate, cases::APPROVED_EFFECT_ONCE),
    case(Suite::Identity, cases::PROVIDER_PRINCIPAL),
    case(Suite::Identity, cases::NO_PRINCIPAL),
    case(Suite::Entitlement, cases::UNENTITLED_ANSWER),
    case(Suite::Entitlement, cases::QUORUM_NEEDS_EVERY_ANSWER),
    case(Suite::Entitlement, cases::NAME_IN_RUN_STATE),
    case(Suite::Entitlement, cases::OTHER_RUN),
    case(Suite::Reentry, cases::REPLAYED_PASS),
    case(Suite::Durability, cases::ACROSS_PROCESSES),
];

const fn case(suite: Suite, name: &'static str) -> CaseId {
    CaseId { suite, name }
}

/// What an adapter implements to be checked by the kit.
///
/// The kit calls [`Adapter::interrupt`] once per world, wraps the result in a counting proxy,
/// and hands the proxy to the [`InterruptApprovalProvider`] it constructs (as an operator
/// would). It then calls [`Adapter::invoke`] once per protected call of the case.
#[async_trait::async_trait]
pub trait Adapter: Send + Sync {
    /// The adapter's own interrupt type, so `invoke` can reach the instance it built (to hand
    /// it a resume value, for example).
    type Interrupt: FrameworkInterrupt + 'static;

    /// The framework's name, as in reports: `langgraph`, `swiftide`. Unique per adapter.
    fn framework(&self) -> &str;

    /// Does the framework decide before invoking the tool, or resume in place?
    fn shape(&self) -> Shape;

    /// The adapter's [`FrameworkInterrupt`] for one world. `setup` carries the world's scripted
    /// human and a scratch folder for framework checkpoints.
    fn interrupt(&self, setup: &Setup) -> Arc<Self::Interrupt>;

    /// Drive one protected call end to end through the framework: the model emits `call`, the
    /// framework runs its tool (whose body is [`Session::control`]'s `execute` around
    /// [`Session::tool`]), pausing and resuming as the framework does, asking
    /// [`Session::reviewer`] whenever the framework shows a human something. The call belongs
    /// to the framework run labelled [`Call::run`]: map the label to the framework's per-run id
    /// and scope the run's requests to it (`ActionRequest::with_run`).
    ///
    /// # Errors
    ///
    /// The kernel's [`ControlError`], as itself (never text, never another variant).
    async fn invoke(
        &self,
        session: &Session<Self::Interrupt>,
        call: &Call,
    ) -> Result<serde_json::Value, ControlError>;

    /// Continue a run that an earlier [`Adapter::invoke`] left paused (possibly in another OS
    /// process, with the framework's checkpoint in [`Session::scratch_dir`]); the human may have
    /// answered out of band meanwhile. The default sends the identical call again, which is
    /// right for frameworks with no checkpoint of their own.
    ///
    /// # Errors
    ///
    /// As [`Adapter::invoke`].
    async fn resume(
        &self,
        session: &Session<Self::Interrupt>,
        call: &Call,
    ) -> Result<serde_json::Value, ControlError> {
        self.invoke(session, call).await
    }

    /// Why `case` does not apply to this framework, or `None` when it does. Only the `binding`
    /// (when the resume carries no arguments), `reentry` (when the shape is decided before
    /// invocation) and `durability` cases may be not applicable; a claim on any other case is
    /// reported as a failure.
    fn not_applicable(&self, case: CaseId) -> Option<String> {
        let _ = case;
        None
    }
}

/// How the kit starts the second and third OS processes of the durability case.
#[derive(Clone, Debug, Default)]
pub enum Relaunch {
    /// Re-run the current libtest test binary, filtered to the current test (`--exact`, the
    /// name libtest gives the test's thread). Right for a `#[tokio::test]` in a test binary.
    #[default]
    CurrentTest,
    /// Run `program` with `args`; it must reach [`run`] with the same adapter (as
    /// `cargo xtask conformance` does by running itself).
    Command {
        /// The program.
        program: PathBuf,
        /// Its arguments.
        args: Vec<String>,
    },
}

/// Options for [`run`].
#[derive(Clone, Debug, Default)]
pub struct KitOptions {
    /// A policy to run under instead of [`KIT_POLICY`] (for example with another environment).
    /// It must decide the kit's actions as [`KIT_POLICY`] does, and it must enforce: the kit
    /// refuses observe mode.
    pub policy: Option<String>,
    /// The `countersign` command for the durability case. Default: `$COUNTERSIGN_BIN`, else a
    /// `countersign` beside the running executable (or one folder up), else `countersign` on
    /// `PATH`.
    pub cli: Option<PathBuf>,
    /// How to start the durability case's other processes.
    pub relaunch: Relaunch,
}

/// The `countersign` command for a kit run from a test in this workspace: `$COUNTERSIGN_BIN`
/// if set, else `countersign` built with cargo in `workspace` (the same profile as the
/// running test binary) and found beside it in `target/<profile>/`.
///
/// # Errors
///
/// Why cargo could not be run, or that the build failed.
pub fn workspace_cli(workspace: &std::path::Path) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("COUNTERSIGN_BIN") {
        return Ok(PathBuf::from(path));
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = std::process::Command::new(cargo)
        .current_dir(workspace)
        .args([
            "build",
            "--quiet",
            "-p",
            "countersign-cli",
            "--bin",
            "countersign",
        ])
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err(format!(
            "building the countersign command failed ({status})"
        ));
    }
    let exe = std::env::current_exe()
        .map_err(|error| format!("cannot find the running test binary: {error}"))?;
    // target/<profile>/deps/<test binary> → target/<profile>/countersign
    exe.parent()
        .and_then(std::path::Path::parent)
        .map(|profile| profile.join(format!("countersign{}", std::env::consts::EXE_SUFFIX)))
        .ok_or_else(|| "the test binary does not live in target/<profile>/deps".to_owned())
}

/// Why the kit could not run at all (as opposed to a case failing).
#[derive(Debug)]
pub enum KitError {
    /// The policy runs in observe mode: it enforces nothing, so there is nothing to check.
    ObserveMode,
    /// The policy given in [`KitOptions::policy`] cannot be loaded.
    Policy(countersign::LoadError),
    /// The policy does not decide the kit's actions as [`KIT_POLICY`] does.
    PolicyShape(String),
    /// A scratch folder or file could not be used.
    Io(std::io::Error),
}

impl std::fmt::Display for KitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KitError::ObserveMode => f.write_str(
                "the kit refuses to run against a policy in observe mode: observe mode enforces nothing, so no refusal could be checked; set `mode: enforce`",
            ),
            KitError::Policy(error) => write!(f, "the kit's policy cannot be loaded: {error}"),
            KitError::PolicyShape(detail) => write!(
                f,
                "the policy given to the kit does not decide the kit's actions as `KIT_POLICY` does: {detail}; start from `adapter_kit::KIT_POLICY`"
            ),
            KitError::Io(error) => write!(f, "the kit cannot use its scratch folder: {error}"),
        }
    }
}

impl std::error::Error for KitError {}

impl From<std::io::Error> for KitError {
    fn from(error: std::io::Error) -> KitError {
        KitError::Io(error)
    }
}

/// Load and check the policy the kit will run under.
fn kit_policy(options: &KitOptions) -> Result<Arc<Policy>, KitError> {
    let text = options.policy.as_deref().unwrap_or(KIT_POLICY);
    let policy = Policy::from_yaml_str(text, None).map_err(KitError::Policy)?;
    if policy.mode() == Mode::Observe {
        return Err(KitError::ObserveMode);
    }
    let probes = [
        (
            "kit.refund",
            serde_json::json!({"payment_id": "p", "amount": 100}),
            "allow",
        ),
        (
            "kit.refund",
            serde_json::json!({"payment_id": "p", "amount": 60000}),
            "approve",
        ),
        (
            "kit.refund",
            serde_json::json!({"payment_id": "p", "amount": 150000}),
            "approve",
        ),
        (
            "kit.refund",
            serde_json::json!({"payment_id": "p", "amount": 250000}),
            "approve",
        ),
        (
            "kit.refund",
            serde_json::json!({"payment_id": "p", "amount": 400000}),
            "deny",
        ),
        (
            "kit.wire_transfer",
            serde_json::json!({"iban": "x"}),
            "deny",
        ),
    ];
    for (action, arguments, expected) in probes {
        let decided = policy.decide(action, &arguments).decision.as_str();
        if decided != expected {
            return Err(KitError::PolicyShape(format!(
                "`{action}` with {arguments} is decided `{decided}`, the kit needs `{expected}`"
            )));
        }
    }
    // The `entitlement` suite's rules: who may answer, and how many must.
    for (amount, quorum) in [(150_000, 1), (250_000, 2)] {
        let arguments = serde_json::json!({"payment_id": "p", "amount": amount});
        let decided = policy.decide("kit.refund", &arguments);
        let rule = policy.approval_rule(&decided, KIT_PRINCIPAL);
        let entitled = |id: &str| {
            let Ok(id) = countersign::approver::ApproverId::parse(id) else {
                return false;
            };
            let approver = rule.approver(
                &id,
                &[],
                Channel::Interrupt("kit".to_owned()),
                Authentication::Asserted,
            );
            judge(&rule, KIT_PRINCIPAL, &approver).is_ok()
        };
        let shape = (
            rule.quorum,
            entitled(KIT_REVIEWER),
            entitled(KIT_SECOND_REVIEWER),
            entitled(KIT_OUTSIDER),
        );
        if shape != (quorum, true, true, false) {
            return Err(KitError::PolicyShape(format!(
                "`kit.refund` with {arguments} needs {} answer(s) and entitles `{KIT_REVIEWER}`: {}, `{KIT_SECOND_REVIEWER}`: {}, `{KIT_OUTSIDER}`: {}; the kit needs a quorum of {quorum}, the first two entitled (asserted, through the directory) and the last not",
                shape.0, shape.1, shape.2, shape.3
            )));
        }
    }
    Ok(Arc::new(policy))
}

/// Run every case against `adapter` and report.
///
/// When the current process was started by the kit as a durability child (the
/// `COUNTERSIGN_KIT_CHILD` environment variable names this adapter's framework), this runs that
/// child's phase and exits the process instead of returning.
///
/// # Errors
///
/// [`KitError`] when the kit cannot run at all: an observe-mode or wrongly shaped policy, or an
/// unusable scratch folder. A failing case is not an error: read [`Report::is_ok`].
pub async fn run<A: Adapter>(adapter: &A, options: &KitOptions) -> Result<Report, KitError> {
    let policy = kit_policy(options)?;
    if let Some(spec) = child::requested(adapter.framework()) {
        child::run_phase(adapter, policy, spec).await;
    }
    let mut cases = Vec::with_capacity(CASES.len());
    for case in CASES {
        let status = cases::run_case(adapter, case, &policy, options).await?;
        cases.push(CaseReport {
            suite: case.suite,
            case: case.name,
            status,
        });
    }
    Ok(Report::new(
        adapter.framework().to_owned(),
        adapter.shape(),
        cases,
    ))
}
