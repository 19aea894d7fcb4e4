//! Each deliberately broken adapter fails its named suite, and the test names the case that
//! caught it: that is how the kit proves it can fail.

use countersign_conformance::adapter_kit::broken::{BrokenAdapter, Weakening};
use countersign_conformance::adapter_kit::{self, CaseStatus, Report, Suite, SuiteStatus};

/// Run the kit on the adapter with `weakening`; its `suite` fails, in `case` among others. The
/// report, for more checks.
async fn check(weakening: Weakening, suite: Suite, case: &str) -> Report {
    let report = adapter_kit::run(&BrokenAdapter(weakening), &crate::options())
        .await
        .expect("the kit runs");
    assert!(!report.is_ok(), "{}", report.to_text());
    assert_eq!(
        report.suite_status(suite),
        SuiteStatus::Fail,
        "{}",
        report.to_text()
    );
    let caught = report.case(suite, case).expect("the kit has this case");
    assert!(
        matches!(&caught.status, CaseStatus::Fail(reason) if !reason.is_empty()),
        "{case} did not catch {weakening:?}:\n{}",
        report.to_text()
    );
    report
}

#[tokio::test]
async fn never_executes_fails_kernel_at_matching_answer() {
    check(
        Weakening::NeverExecutes,
        Suite::Kernel,
        "matching_answer_authorizes",
    )
    .await;
}

#[tokio::test]
async fn swallowing_not_executed_fails_kernel_at_not_executed_retry() {
    check(
        Weakening::SwallowsNotExecuted,
        Suite::Kernel,
        "not_executed_permits_retry",
    )
    .await;
}

#[tokio::test]
async fn swallowing_a_denial_fails_denial() {
    check(
        Weakening::SwallowsDenial,
        Suite::Denial,
        "human_no_is_a_recorded_denial",
    )
    .await;
}

#[tokio::test]
async fn replaying_an_approval_fails_duplicate() {
    check(
        Weakening::ReplaysApproval,
        Suite::Duplicate,
        "approved_effect_runs_once",
    )
    .await;
}

#[tokio::test]
async fn interrupting_an_allowed_call_fails_kernel_at_allowed_action() {
    check(
        Weakening::InterruptsAllowedCalls,
        Suite::Kernel,
        "allowed_action_never_reaches_a_human",
    )
    .await;
}

#[tokio::test]
async fn granting_for_itself_fails_denial() {
    check(
        Weakening::GrantsForItself,
        Suite::Denial,
        "human_no_is_a_recorded_denial",
    )
    .await;
}

#[tokio::test]
async fn turning_a_denial_into_an_error_fails_denial() {
    check(
        Weakening::DenialAsError,
        Suite::Denial,
        "human_no_is_a_recorded_denial",
    )
    .await;
}

#[tokio::test]
async fn echoing_pending_arguments_fails_binding() {
    check(
        Weakening::EchoesPendingArguments,
        Suite::Binding,
        "answer_about_other_arguments_authorizes_nothing",
    )
    .await;
}

#[tokio::test]
async fn caching_the_first_decision_fails_denial() {
    check(
        Weakening::CachesFirstDecision,
        Suite::Denial,
        "human_no_is_a_recorded_denial",
    )
    .await;
}

#[tokio::test]
async fn supplying_its_own_principal_fails_identity() {
    check(
        Weakening::SuppliesOwnPrincipal,
        Suite::Identity,
        "provider_principal_wins",
    )
    .await;
    check(
        Weakening::SuppliesOwnPrincipal,
        Suite::Identity,
        "no_principal_no_action",
    )
    .await;
}

#[tokio::test]
async fn retrying_after_an_ambiguous_outcome_fails_kernel_at_lost_response() {
    check(
        Weakening::RetriesAfterAmbiguous,
        Suite::Kernel,
        "lost_response_blocks_retry",
    )
    .await;
}

#[tokio::test]
async fn forgetting_the_run_fails_entitlement_at_other_run() {
    check(
        Weakening::ForgetsTheRun,
        Suite::Entitlement,
        "run_scoped_approval_never_leaks_to_another_run",
    )
    .await;
}

#[tokio::test]
async fn asking_twice_on_reentry_fails_reentry() {
    check(
        Weakening::AsksTwiceOnReentry,
        Suite::Reentry,
        "replayed_pass_asks_once_and_consumes_once",
    )
    .await;
}

#[tokio::test]
async fn denying_when_the_wait_ends_fails_durability() {
    check(
        Weakening::DeniesWhenWaitEnds,
        Suite::Durability,
        "pause_answer_from_cli_resume_in_another_process",
    )
    .await;
}

#[tokio::test]
async fn claiming_not_applicable_fails_kernel() {
    check(
        Weakening::ClaimsNotApplicable,
        Suite::Kernel,
        "lost_response_blocks_retry",
    )
    .await;
}

#[tokio::test]
async fn taking_the_approver_from_the_payload_fails_exactly_entitlement() {
    let report = check(
        Weakening::TakesApproverFromPayload,
        Suite::Entitlement,
        "approver_named_in_run_state_authorizes_nothing",
    )
    .await;
    // Everywhere else the payload names the human the operator passed, so only the edited run
    // state tells the two apart: every other suite passes.
    let failing: Vec<Suite> = Suite::ALL
        .into_iter()
        .filter(|suite| report.suite_status(*suite) == SuiteStatus::Fail)
        .collect();
    assert_eq!(failing, vec![Suite::Entitlement], "{}", report.to_text());
    let failed: Vec<&str> = report
        .cases()
        .iter()
        .filter(|case| matches!(case.status, CaseStatus::Fail(_)))
        .map(|case| case.case)
        .collect();
    assert_eq!(
        failed,
        vec!["approver_named_in_run_state_authorizes_nothing"],
        "{}",
        report.to_text()
    );
}

#[test]
fn every_weakening_has_a_test_above() {
    // The tests above cover these, one each; a new weakening must add its test here.
    assert_eq!(Weakening::ALL.len(), 16);
}
