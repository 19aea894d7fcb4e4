//! The reference adapter passes every suite, with every case applicable.

use countersign_conformance::adapter_kit::{self, CASES, reference::ReferenceAdapter};

#[tokio::test]
async fn reference_adapter_passes_every_case() {
    let report = adapter_kit::run(&ReferenceAdapter, &crate::options())
        .await
        .expect("the kit runs");
    println!("{}", report.to_text());
    assert!(report.is_ok(), "{}", report.to_text());
    assert_eq!(report.passed(), CASES.len());
    assert_eq!(report.not_applicable(), 0);
    assert_eq!(report.summary(), "reference: 18/18 (0 not applicable)");
}
