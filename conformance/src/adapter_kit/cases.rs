//! The cases: each one a scenario of protected calls and what the direct kernel path gives for
//! it (results, executor count, how often a human and the interrupt were reached, receipts and
//! approval states).

use std::sync::Arc;

use countersign::evidence::Receipt;
use countersign::store::Store;
use countersign::{
    AnswerDecision, ApprovalId, ApprovalRecord, ControlError, FrameworkInterrupt, Policy,
};
use serde_json::json;

use super::world::{self, Call, Reviewer, Shown, Step, Tool, World, WorldSpec};
use super::{
    Adapter, CaseId, CaseStatus, KIT_OUTSIDER, KIT_PRINCIPAL, KIT_REVIEWER, KIT_SECOND_REVIEWER,
    KitError, KitOptions,
};
use super::{Shape, Suite, child};

mod check;

use check::*;

pub(crate) use check::{Differences, check_evidence, read_receipts, receipt_line, result_line};

pub(crate) const LOST_RESPONSE: &str = "lost_response_blocks_retry";
pub(crate) const COMMITTED_EFFECT: &str = "committed_effect_refuses_second_attempt";
pub(crate) const UNKNOWN_ACTION: &str = "unknown_action_is_denied";
pub(crate) const NOT_EXECUTED: &str = "not_executed_permits_retry";
pub(crate) const ANSWER_AFTER_EXPIRY: &str = "answer_after_expiry_authorizes_nothing";
pub(crate) const ALLOWED_NEVER_ASKS: &str = "allowed_action_never_reaches_a_human";
pub(crate) const MATCHING_ANSWER: &str = "matching_answer_authorizes";
pub(crate) const OTHER_ARGUMENTS: &str = "answer_about_other_arguments_authorizes_nothing";
pub(crate) const HUMAN_NO: &str = "human_no_is_a_recorded_denial";
pub(crate) const APPROVED_EFFECT_ONCE: &str = "approved_effect_runs_once";
pub(crate) const PROVIDER_PRINCIPAL: &str = "provider_principal_wins";
pub(crate) const NO_PRINCIPAL: &str = "no_principal_no_action";
pub(crate) const REPLAYED_PASS: &str = "replayed_pass_asks_once_and_consumes_once";
pub(crate) const ACROSS_PROCESSES: &str = "pause_answer_from_cli_resume_in_another_process";
pub(crate) const UNENTITLED_ANSWER: &str = "unentitled_answer_authorizes_nothing";
pub(crate) const QUORUM_NEEDS_EVERY_ANSWER: &str = "quorum_is_not_granted_by_one_answer";
pub(crate) const NAME_IN_RUN_STATE: &str = "approver_named_in_run_state_authorizes_nothing";
pub(crate) const OTHER_RUN: &str = "run_scoped_approval_never_leaks_to_another_run";

/// The second run of the `entitlement` suite's run-scope case.
const SECOND_RUN: &str = "run-2";

/// Run one case against `adapter` in a fresh world.
pub(crate) async fn run_case<A: Adapter>(
    adapter: &A,
    case: CaseId,
    policy: &Arc<Policy>,
    options: &KitOptions,
) -> Result<CaseStatus, KitError> {
    if let Some(status) = applicability(adapter, case)? {
        return Ok(status);
    }
    if case.suite == Suite::Durability {
        return Ok(status_of(
            child::durability(adapter, policy, options).await?,
        ));
    }
    let scenario = scenario(case.name, adapter.shape());
    let dir = tempfile::tempdir()?;
    let world = World::build(
        adapter,
        policy,
        WorldSpec {
            dir: dir.path().to_path_buf(),
            clock_start: world::KIT_EPOCH,
            principal: scenario.principal,
            reviewer: scenario.reviewer.clone(),
            tool: scenario.tool.clone(),
            late_answers: scenario.late_answers,
        },
    )?;
    let mut results = Vec::new();
    let mut steps = Vec::new();
    for (index, call) in scenario.calls.iter().enumerate() {
        // Calls are a second apart, so records made by different calls have an order.
        world.clock.advance(std::time::Duration::from_secs(1));
        let result = if scenario.replay_last && index + 1 == scenario.calls.len() {
            adapter.resume(&world.session, call).await
        } else {
            adapter.invoke(&world.session, call).await
        };
        let paused_on = match &result {
            Err(ControlError::ApprovalRequired { request_id, .. }) => Some(request_id.clone()),
            _ => None,
        };
        results.push(result);
        if !scenario.steps.is_empty() {
            steps.push(AfterCall::read(&world).await);
        }
        if scenario.answer_out_of_band_after == Some(index) {
            // The human answers the request this call paused on out of band, through the
            // kernel's answer API (as `countersign approve` does), as the kit's reviewer.
            if let Some(request_id) = paused_on {
                // A refused answer shows in the receipts and approval states, which are checked.
                let _ = world
                    .session
                    .control()
                    .answer(&request_id, AnswerDecision::Approve, KIT_REVIEWER, None)
                    .await;
            }
        }
    }
    let observed = Observed::read(&world, results, steps).await;
    Ok(status_of(
        observed.and_then(|observed| check(&scenario, &observed)),
    ))
}

fn status_of(outcome: Result<(), String>) -> CaseStatus {
    match outcome {
        Ok(()) => CaseStatus::Pass,
        Err(reason) => CaseStatus::Fail(reason),
    }
}

/// `Some(status)` when the case is not run: not applicable, or an N/A claim the kit refuses.
fn applicability<A: Adapter>(adapter: &A, case: CaseId) -> Result<Option<CaseStatus>, KitError> {
    let claim = adapter.not_applicable(case);
    let shape = adapter.shape();
    let kit_reason = match case.suite {
        Suite::Reentry if shape == Shape::DecidedBeforeInvocation => Some(
            "decided before invocation: the framework asks before it invokes the tool, so no pass is replayed"
                .to_owned(),
        ),
        Suite::Binding => {
            let dir = tempfile::tempdir()?;
            let interrupt = adapter.interrupt(&world_setup(dir.path()));
            (!interrupt.carries_approved_arguments()).then(|| {
                "the framework's resume does not carry the arguments the human answered about (`carries_approved_arguments` is false): answers are bound by request id"
                    .to_owned()
            })
        }
        _ => None,
    };
    let may_claim = matches!(case.suite, Suite::Durability) || kit_reason.is_some();
    Ok(match (claim, kit_reason) {
        (Some(reason), _) if may_claim => Some(CaseStatus::NotApplicable(reason)),
        (Some(reason), None) => Some(CaseStatus::Fail(format!(
            "the adapter says this case does not apply ({reason}), but it applies to every {} adapter",
            shape.as_str()
        ))),
        (None, Some(reason)) => Some(CaseStatus::NotApplicable(reason)),
        (Some(_), Some(_)) | (None, None) => None,
    })
}

fn world_setup(dir: &std::path::Path) -> super::Setup {
    super::world::setup_for(Reviewer::absent(), dir.to_path_buf())
}

/// What one call should end with.
#[derive(Clone, Debug)]
pub(crate) enum Want {
    /// The executor's value from its `n`-th successful run (from 0).
    Value(usize),
    /// A refusal: the variant's name and the reason code.
    Refused(&'static str, &'static str),
}

/// One case's calls and expectations.
pub(crate) struct Scenario {
    calls: Vec<Call>,
    /// The last call replays the run (`Adapter::resume`) instead of a new invocation.
    replay_last: bool,
    principal: bool,
    reviewer: Reviewer,
    tool: Tool,
    late_answers: bool,
    results: Vec<Want>,
    tool_calls: usize,
    /// How often a human is asked.
    asked: usize,
    /// How often the interrupt hands the kernel an answer.
    answered: usize,
    /// Whether `answered` is checked. Not for a framework that decides before invocation: it
    /// records the human's answer with the kernel's answer API (as `countersign approve`
    /// does), and the answer shows in the receipts and approval states, which are checked.
    answered_pinned: bool,
    /// How often the interrupt suspends, when the case pins it.
    suspended: Option<usize>,
    /// `kind/outcome[/reason]` of every receipt, in chain order.
    receipts: Vec<&'static str>,
    /// The state of every approval request, oldest first.
    approvals: Vec<&'static str>,
    /// The denial the case expects to carry the human's note.
    denial_note: Option<&'static str>,
    /// Who may be named as approver on a receipt (the humans the operator passed).
    approvers: Vec<&'static str>,
    /// The approvers whose answers were counted on each approval request, oldest first.
    counted: Vec<Vec<&'static str>>,
    /// After each call, when pinned: the approval states, how many yeses the newest request
    /// has of how many it needs, and the executor count.
    steps: Vec<AfterCall>,
    /// After the call at this index (from 0), the kit's reviewer approves the request it paused
    /// on through the kernel's answer API (out of band: the framework shows nothing).
    answer_out_of_band_after: Option<usize>,
    /// Every request is scoped to a run (the approval record names one), no two calls of
    /// different runs paused on the same request, and requests of different runs name
    /// different runs.
    runs_pinned: bool,
}

/// What the world shows after one call (the `entitlement` suite pins it).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AfterCall {
    approvals: Vec<String>,
    /// `given of needed` on the newest request.
    given: String,
    tool_calls: usize,
}

impl AfterCall {
    fn new(approvals: &[&str], given: &str, tool_calls: usize) -> AfterCall {
        AfterCall {
            approvals: approvals.iter().map(|state| (*state).to_owned()).collect(),
            given: given.to_owned(),
            tool_calls,
        }
    }

    async fn read<I>(world: &World<I>) -> AfterCall {
        let records = world.store.approvals(None).await.unwrap_or_default();
        AfterCall {
            approvals: records
                .iter()
                .map(|record| record.state.as_str().to_owned())
                .collect(),
            given: records.last().map_or_else(String::new, |record| {
                format!("{} of {}", record.approvals_given(), record.rule.quorum)
            }),
            tool_calls: world.session.tool().calls(),
        }
    }
}

impl Scenario {
    fn new(calls: Vec<Call>) -> Scenario {
        Scenario {
            calls,
            replay_last: false,
            principal: true,
            reviewer: Reviewer::approving(),
            tool: Tool::default(),
            late_answers: false,
            results: Vec::new(),
            tool_calls: 0,
            asked: 0,
            answered: 0,
            answered_pinned: true,
            suspended: None,
            receipts: Vec::new(),
            approvals: Vec::new(),
            denial_note: None,
            approvers: vec![KIT_REVIEWER],
            counted: Vec::new(),
            steps: Vec::new(),
            answer_out_of_band_after: None,
            runs_pinned: false,
        }
    }
}

fn refund(payment_id: &str, amount: u64) -> Call {
    Call::new(
        "kit.refund",
        json!({"payment_id": payment_id, "amount": amount}),
    )
}

/// The scenario for case `name`, as the direct kernel path plays it, for an adapter of `shape`.
///
/// The two shapes differ in three places (docs/SPEC.md, part 2):
/// - decided before invocation records the human's answer with the answer API, so the number of
///   answers the interrupt hands over is not pinned (receipts and approval states are);
/// - in `other_arguments`, the human answered the request they were shown (a recorded grant)
///   and the framework's run state was edited afterwards: the grant stays unused and the
///   attempt with the edited arguments is refused;
/// - everything else, including how often a human is asked, is the same: a predicate that asks
///   the kernel does not prompt again for an action already denied or already done.
fn scenario(name: &str, shape: Shape) -> Scenario {
    let mut scenario = scenario_resumed(name);
    if shape == Shape::DecidedBeforeInvocation {
        scenario.answered_pinned = false;
        match name {
            OTHER_ARGUMENTS => {
                scenario.receipts = vec!["answer/granted/approved", "attempt/refused/mismatch"];
                scenario.approvals = vec!["granted"];
            }
            // The answer is refused when it is recorded, before the framework invokes
            // anything: the call stays paused on its request.
            UNENTITLED_ANSWER | NAME_IN_RUN_STATE => {
                scenario.results = vec![Want::Refused("ApprovalRequired", "approval_required")];
                scenario.receipts = vec!["answer/refused/not_entitled"];
            }
            // One yes of two is recorded and the call stays paused; it is invoked only once the
            // quorum's last yes granted the request.
            QUORUM_NEEDS_EVERY_ANSWER => {
                scenario.receipts = vec![
                    "answer/counted/approved",
                    "answer/granted/approved",
                    "attempt/committed",
                ];
            }
            _ => {}
        }
    }
    scenario
}

/// The scenario for case `name` as a resumed-in-place adapter plays it.
fn scenario_resumed(name: &str) -> Scenario {
    match name {
        LOST_RESPONSE => Scenario {
            tool: Tool::scripted(&[Step::LoseResponse(
                "the connection reset after the request was sent",
            )]),
            results: vec![
                Want::Refused("OutcomeUnknown", "outcome_unknown"),
                Want::Refused("AmbiguousEffect", "ambiguous"),
            ],
            tool_calls: 1,
            receipts: vec![
                "attempt/ambiguous/executor_error",
                "attempt/refused/ambiguous",
            ],
            ..Scenario::new(vec![refund("pay_lost", 100), refund("pay_lost", 100)])
        },
        COMMITTED_EFFECT => Scenario {
            results: vec![
                Want::Value(0),
                Want::Refused("DuplicateEffect", "duplicate"),
            ],
            tool_calls: 1,
            receipts: vec!["attempt/committed", "attempt/refused/duplicate"],
            ..Scenario::new(vec![refund("pay_once", 100), refund("pay_once", 100)])
        },
        UNKNOWN_ACTION => Scenario {
            results: vec![Want::Refused("ActionDenied", "unknown_action")],
            receipts: vec!["attempt/refused/unknown_action"],
            ..Scenario::new(vec![Call::new(
                "kit.wire_transfer",
                json!({"iban": "XX00 0000 0000", "amount": 100}),
            )])
        },
        NOT_EXECUTED => Scenario {
            tool: Tool::scripted(&[
                Step::NotExecuted("the card network refused the request before it was sent"),
                Step::Commit,
            ]),
            results: vec![Want::Refused("NotExecuted", "not_executed"), Want::Value(0)],
            tool_calls: 2,
            receipts: vec!["attempt/failed/not_executed", "attempt/committed"],
            ..Scenario::new(vec![refund("pay_retry", 100), refund("pay_retry", 100)])
        },
        ANSWER_AFTER_EXPIRY => Scenario {
            late_answers: true,
            results: vec![Want::Refused("ApprovalExpired", "expired")],
            asked: 1,
            answered: 1,
            // The request's expiry, then the attempt that ended on it (every ended attempt
            // leaves a receipt).
            receipts: vec![
                "approval_expired/expired/expired",
                "attempt/refused/expired",
            ],
            approvals: vec!["expired"],
            ..Scenario::new(vec![refund("pay_late", 60000)])
        },
        ALLOWED_NEVER_ASKS => Scenario {
            results: vec![Want::Value(0)],
            tool_calls: 1,
            suspended: Some(0),
            receipts: vec!["attempt/committed"],
            ..Scenario::new(vec![refund("pay_small", 100)])
        },
        MATCHING_ANSWER => Scenario {
            results: vec![Want::Value(0)],
            tool_calls: 1,
            asked: 1,
            answered: 1,
            receipts: vec!["answer/granted/approved", "attempt/committed"],
            approvals: vec!["consumed"],
            ..Scenario::new(vec![refund("pay_big", 60000)])
        },
        OTHER_ARGUMENTS => Scenario {
            // The resume payload was edited: the answer is about a refund of 600, not 60000.
            reviewer: Reviewer::new(|shown: &Shown| {
                let mut answer = world::answer(shown, AnswerDecision::Approve, None);
                answer.arguments["amount"] = json!(600);
                Some(answer)
            }),
            results: vec![Want::Refused("ApprovalMismatch", "mismatch")],
            asked: 1,
            answered: 1,
            // No grant is written; the ended attempt leaves its refusal.
            receipts: vec!["attempt/refused/mismatch"],
            approvals: vec!["pending"],
            ..Scenario::new(vec![refund("pay_edited", 60000)])
        },
        HUMAN_NO => Scenario {
            reviewer: Reviewer::new(|shown: &Shown| {
                Some(if shown.arguments["payment_id"] == "pay_first" {
                    world::answer(shown, AnswerDecision::Approve, None)
                } else {
                    world::answer(shown, AnswerDecision::Deny, Some("wrong account"))
                })
            }),
            results: vec![
                Want::Value(0),
                Want::Refused("ApprovalDenied", "approval_denied"),
                Want::Refused("ApprovalDenied", "approval_denied"),
            ],
            tool_calls: 1,
            // The unchanged re-issue is refused without a new prompt (case B34).
            asked: 2,
            answered: 2,
            receipts: vec![
                "answer/granted/approved",
                "attempt/committed",
                "answer/denied/rejected",
                "attempt/refused/approval_denied",
                "attempt/refused/approval_denied",
            ],
            approvals: vec!["consumed", "denied"],
            denial_note: Some("wrong account"),
            ..Scenario::new(vec![
                refund("pay_first", 60000),
                refund("pay_second", 70000),
                refund("pay_second", 70000),
            ])
        },
        APPROVED_EFFECT_ONCE => Scenario {
            results: vec![
                Want::Value(0),
                Want::Refused("DuplicateEffect", "duplicate"),
            ],
            tool_calls: 1,
            asked: 1,
            answered: 1,
            receipts: vec![
                "answer/granted/approved",
                "attempt/committed",
                "attempt/refused/duplicate",
            ],
            approvals: vec!["consumed"],
            ..Scenario::new(vec![refund("pay_dup", 60000), refund("pay_dup", 60000)])
        },
        PROVIDER_PRINCIPAL => Scenario {
            results: vec![Want::Value(0)],
            tool_calls: 1,
            receipts: vec!["attempt/committed"],
            ..Scenario::new(vec![Call::new(
                "kit.refund",
                json!({"payment_id": "pay_who", "amount": 100, "principal": "human:cfo"}),
            )])
        },
        NO_PRINCIPAL => Scenario {
            principal: false,
            results: vec![Want::Refused("NoPrincipal", "no_principal")],
            ..Scenario::new(vec![refund("pay_nobody", 100)])
        },
        REPLAYED_PASS => Scenario {
            replay_last: true,
            results: vec![
                Want::Value(0),
                Want::Refused("DuplicateEffect", "duplicate"),
            ],
            tool_calls: 1,
            asked: 1,
            answered: 1,
            suspended: Some(1),
            receipts: vec![
                "answer/granted/approved",
                "attempt/committed",
                "attempt/refused/duplicate",
            ],
            approvals: vec!["consumed"],
            ..Scenario::new(vec![
                refund("pay_replay", 60000),
                refund("pay_replay", 60000),
            ])
        },
        UNENTITLED_ANSWER => Scenario {
            // The rule says `group:finance`; the human who answers is in no group.
            reviewer: Reviewer::new(|shown: &Shown| {
                Some(world::answer_as(
                    shown,
                    AnswerDecision::Approve,
                    None,
                    KIT_OUTSIDER,
                ))
            }),
            results: vec![Want::Refused("AnswerRefused", "not_entitled")],
            asked: 1,
            answered: 1,
            // The refused answer and the attempt it ended, both named; the request unchanged.
            receipts: vec![
                "answer/refused/not_entitled",
                "attempt/refused/not_entitled",
            ],
            approvals: vec!["pending"],
            approvers: vec![KIT_OUTSIDER],
            counted: vec![vec![]],
            steps: vec![AfterCall::new(&["pending"], "0 of 1", 0)],
            ..Scenario::new(vec![refund("pay_outsider", 150000)])
        },
        QUORUM_NEEDS_EVERY_ANSWER => {
            // Two distinct members of `group:finance` must say yes: the first pause is
            // answered by one, the second by the other.
            let answers = std::sync::atomic::AtomicUsize::new(0);
            Scenario {
                reviewer: Reviewer::new(move |shown: &Shown| {
                    let approver = match answers.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                        0 => KIT_REVIEWER,
                        _ => KIT_SECOND_REVIEWER,
                    };
                    Some(world::answer_as(
                        shown,
                        AnswerDecision::Approve,
                        None,
                        approver,
                    ))
                }),
                results: vec![
                    Want::Refused("ApprovalRequired", "approval_required"),
                    Want::Value(0),
                ],
                tool_calls: 1,
                asked: 2,
                answered: 2,
                receipts: vec![
                    "answer/counted/approved",
                    "attempt/refused/approval_required",
                    "answer/granted/approved",
                    "attempt/committed",
                ],
                approvals: vec!["consumed"],
                approvers: vec![KIT_REVIEWER, KIT_SECOND_REVIEWER],
                counted: vec![vec![KIT_REVIEWER, KIT_SECOND_REVIEWER]],
                steps: vec![
                    AfterCall::new(&["pending"], "1 of 2", 0),
                    AfterCall::new(&["consumed"], "2 of 2", 1),
                ],
                ..Scenario::new(vec![refund("pay_pair", 250000), refund("pay_pair", 250000)])
            }
        }
        NAME_IN_RUN_STATE => Scenario {
            // The operator passes the outsider who answered; the saved run state / resume
            // payload was edited to name an entitled member of `group:finance`.
            reviewer: Reviewer::new(|shown: &Shown| {
                let mut answer =
                    world::answer_as(shown, AnswerDecision::Approve, None, KIT_OUTSIDER);
                answer.payload_approver = KIT_REVIEWER.to_owned();
                Some(answer)
            }),
            results: vec![Want::Refused("AnswerRefused", "not_entitled")],
            asked: 1,
            answered: 1,
            receipts: vec![
                "answer/refused/not_entitled",
                "attempt/refused/not_entitled",
            ],
            approvals: vec!["pending"],
            // The kernel records the identity the operator passed, never the payload's name.
            approvers: vec![KIT_OUTSIDER],
            counted: vec![vec![]],
            steps: vec![AfterCall::new(&["pending"], "0 of 1", 0)],
            ..Scenario::new(vec![refund("pay_named", 150000)])
        },
        OTHER_RUN => Scenario {
            // Nobody answers inside the framework: run 1's request is approved out of band,
            // and run 2, asking for the identical action, is shown its own request.
            reviewer: Reviewer::absent(),
            replay_last: true,
            answer_out_of_band_after: Some(0),
            runs_pinned: true,
            results: vec![
                Want::Refused("ApprovalRequired", "approval_required"),
                Want::Refused("ApprovalRequired", "approval_required"),
                Want::Value(0),
            ],
            tool_calls: 1,
            asked: 2,
            answered: 0,
            receipts: vec!["answer/granted/approved", "attempt/committed"],
            approvals: vec!["consumed", "pending"],
            counted: vec![vec![KIT_REVIEWER], vec![]],
            steps: vec![
                AfterCall::new(&["pending"], "0 of 1", 0),
                AfterCall::new(&["granted", "pending"], "0 of 1", 0),
                AfterCall::new(&["consumed", "pending"], "0 of 1", 1),
            ],
            ..Scenario::new(vec![
                refund("pay_runs", 60000),
                refund("pay_runs", 60000).in_run(SECOND_RUN),
                refund("pay_runs", 60000),
            ])
        },
        // INVARIANT (case-names): every name in CASES but the durability case has an arm above.
        other => unreachable!("no scenario for case `{other}`"),
    }
}
