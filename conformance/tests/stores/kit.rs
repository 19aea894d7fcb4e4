//! The store kit against memory, SQLite and PostgreSQL, and the broken fixtures.

use std::sync::Arc;

use countersign_conformance::store_kit::broken::{DangerBrokenBackend, Fault};
use countersign_conformance::store_kit::{
    self, CaseStatus, KitOptions, MemoryBackend, PostgresBackend, Report, SqliteBackend,
    StoreBackend,
};

use super::support::{kit_options, postgres};

fn assert_all_applicable_pass(report: &Report) {
    eprintln!("{}", report.render());
    assert!(report.failures().is_empty(), "{}", report.render());
    assert_eq!(report.passed(), report.applicable(), "{}", report.render());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_store_passes_every_applicable_case() {
    let report = store_kit::run(&MemoryBackend, &kit_options()).await;
    assert_all_applicable_pass(&report);
    // Memory cannot be reached from another process or reopened: those are not applicable,
    // never passes.
    assert!(report.not_applicable() > 0, "{}", report.render());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_store_passes_every_case() {
    let report = store_kit::run(&SqliteBackend, &kit_options()).await;
    assert_all_applicable_pass(&report);
    assert_eq!(report.not_applicable(), 0, "{}", report.render());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_store_passes_every_case() {
    let backend = postgres("kit").with_options("max_connections=8");
    let report = store_kit::run(&backend, &kit_options()).await;
    assert_all_applicable_pass(&report);
    assert_eq!(report.not_applicable(), 0, "{}", report.render());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_store_passes_every_case_through_pgbouncer_in_transaction_mode() {
    let backend = match PostgresBackend::pgbouncer_from_env("kit_pooled") {
        Ok(backend) => backend.with_options("max_connections=8"),
        Err(message) => panic!("{message}"),
    };
    let report = store_kit::run(&backend, &kit_options()).await;
    assert_all_applicable_pass(&report);
    assert_eq!(report.not_applicable(), 0, "{}", report.render());
    assert!(
        report.render().starts_with("postgres-pgbouncer"),
        "{}",
        report.render()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_store_passes_every_case_at_serializable() {
    let backend =
        postgres("kit_serializable").with_options("isolation=serializable&max_connections=8");
    let options = KitOptions {
        filter: Some("among".to_owned()),
        ..kit_options()
    };
    let report = store_kit::run(&backend, &options).await;
    assert_all_applicable_pass(&report);
    assert!(report.applicable() >= 3, "{}", report.render());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_broken_store_fails_its_named_case() {
    for fault in Fault::ALL {
        let backend =
            DangerBrokenBackend::new(Arc::new(SqliteBackend) as Arc<dyn StoreBackend>, fault);
        let status = store_kit::run_one(&backend, &kit_options(), fault.must_fail())
            .await
            .expect("the named case exists");
        assert!(
            matches!(status, CaseStatus::Failed(_)),
            "{} passed `{}`: the kit cannot tell it from a working store ({status:?})",
            fault.name(),
            fault.must_fail()
        );
        eprintln!("{} fails {}: {status:?}", fault.name(), fault.must_fail());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn broken_store_fixtures_pass_the_cases_they_do_not_break() {
    // A fixture is broken in one method only: a case that does not touch it still passes,
    // so a failure above is the fault's, not the wrapper's.
    let backend = DangerBrokenBackend::new(
        Arc::new(SqliteBackend) as Arc<dyn StoreBackend>,
        Fault::UncheckedApprovalHash,
    );
    let status = store_kit::run_one(
        &backend,
        &kit_options(),
        "reservation/committed_effect_refuses_as_duplicate",
    )
    .await
    .expect("the case exists");
    assert_eq!(status, CaseStatus::Passed);
}
