//! The reports people and CI read: text and JSON snapshots (what varies is redacted), the
//! counting rules, and the refusal to run in observe mode.

use countersign_conformance::adapter_kit::broken::{BrokenAdapter, Weakening};
use countersign_conformance::adapter_kit::reference::ReferenceAdapter;
use countersign_conformance::adapter_kit::{self, KIT_POLICY, KitError, KitOptions};

fn redacted<T>(check: impl FnOnce() -> T) -> T {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"apr_[a-z2-7]{20}", "[request]");
    settings.add_filter(r"att_[a-z2-7]{20}", "[attempt]");
    settings.add_filter(r"sha256:[0-9a-f]{64}", "[hash]");
    settings.add_filter(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", "[time]");
    settings.bind(check)
}

#[tokio::test]
async fn reference_report_reads_as_documented() {
    let report = adapter_kit::run(&ReferenceAdapter, &crate::options())
        .await
        .expect("the kit runs");
    redacted(|| {
        insta::assert_snapshot!("reference_text", report.to_text());
        insta::assert_json_snapshot!("reference_json", report.to_json());
    });
}

#[tokio::test]
async fn failing_report_names_each_difference() {
    let report = adapter_kit::run(
        &BrokenAdapter(Weakening::GrantsForItself),
        &crate::options(),
    )
    .await
    .expect("the kit runs");
    assert!(report.failed() > 0);
    redacted(|| insta::assert_snapshot!("grants_for_itself_text", report.to_text()));
}

#[tokio::test]
async fn not_applicable_never_counts_as_passed() {
    let report = adapter_kit::run(
        &BrokenAdapter(Weakening::ClaimsNotApplicable),
        &crate::options(),
    )
    .await
    .expect("the kit runs");
    assert_eq!(report.not_applicable(), 1);
    assert_eq!(report.passed(), 0);
    assert_eq!(report.applicable(), 17);
    assert!(!report.is_ok());
    redacted(|| {
        insta::assert_snapshot!("claims_not_applicable_text", report.to_text());
        insta::assert_json_snapshot!("claims_not_applicable_json", report.to_json());
    });
}

#[tokio::test]
async fn refuses_a_policy_in_observe_mode() {
    let options = KitOptions {
        policy: Some(KIT_POLICY.replace("mode: enforce", "mode: observe")),
        ..crate::options()
    };
    let refused = adapter_kit::run(&ReferenceAdapter, &options).await;
    let error = refused.expect_err("observe mode is refused");
    assert!(matches!(error, KitError::ObserveMode));
    assert_eq!(
        error.to_string(),
        "the kit refuses to run against a policy in observe mode: observe mode enforces nothing, so no refusal could be checked; set `mode: enforce`"
    );
}

#[tokio::test]
async fn refuses_a_policy_that_decides_the_kit_actions_otherwise() {
    let options = KitOptions {
        policy: Some(KIT_POLICY.replace("lte: 500 }", "lte: 100000 }")),
        ..crate::options()
    };
    let error = adapter_kit::run(&ReferenceAdapter, &options)
        .await
        .expect_err("a reshaped policy is refused");
    assert!(matches!(error, KitError::PolicyShape(_)), "{error}");
}
