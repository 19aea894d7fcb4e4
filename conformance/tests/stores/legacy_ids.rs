//! Issue #19: ids and hashes are types (`AttemptId`, `ApprovalId`, `ActionHash`, `PolicyHash`,
//! `ReceiptHash`, `Principal`, `EffectKey`, `ApproverId`), and a store made by an older `main`
//! still loads: every row of the fixtures (`crates/countersign/tests/fixtures/`) reads into the
//! typed records, and a row written before a shape rule existed reads as it was written,
//! never refused and never rewritten.

use std::sync::Arc;

use countersign::evidence::Verifier;
use countersign::store::{self, SqliteStore, Store};

use super::migration::{postgres_copy_of, sqlite_copy_of};

/// Every id and hash the store hands back has its documented shape (the fixtures were written
/// by real `main` builds, which only ever wrote such ids).
async fn every_stored_id_is_well_formed(store: &dyn Store) {
    let approvals = store.approvals(None).await.expect("approvals");
    assert!(!approvals.is_empty(), "the fixture holds requests");
    for record in &approvals {
        assert!(record.id.is_well_formed(), "{}", record.id);
        assert!(
            record.action_hash.is_well_formed(),
            "{}",
            record.action_hash
        );
        assert!(
            record.policy_hash.is_well_formed(),
            "{}",
            record.policy_hash
        );
        assert!(
            countersign::Principal::new(record.principal.as_str()).is_ok(),
            "{}",
            record.principal
        );
        if let Some(attempt) = &record.consumed_by {
            assert!(attempt.is_well_formed(), "{attempt}");
        }
        for answer in &record.answers {
            assert!(
                countersign::approver::ApproverId::parse(answer.approver.id.as_str()).is_ok(),
                "{}",
                answer.approver.id
            );
        }
    }
    let receipts = store.receipts(0, 1_000).await.expect("receipts");
    assert!(!receipts.is_empty(), "the fixture holds receipts");
    for stored in &receipts {
        assert!(stored.hash.is_well_formed(), "{}", stored.hash);
        assert!(stored.prev_hash.is_well_formed(), "{}", stored.prev_hash);
        let receipt = stored.to_receipt().expect("a receipt");
        if let Some(attempt) = &receipt.attempt_id {
            assert!(attempt.is_well_formed(), "{attempt}");
        }
        if let Some(hash) = &receipt.action_hash {
            assert!(hash.is_well_formed(), "{hash}");
        }
        if let Some(hash) = &receipt.policy_hash {
            assert!(hash.is_well_formed(), "{hash}");
        }
        if let Some(id) = &receipt.approval_id {
            assert!(id.is_well_formed(), "{id}");
        }
    }
}

/// The chain still verifies: the typed read changed no byte a hash covers.
async fn chain_is_intact(store: &dyn Store) {
    let receipts = store.receipts(0, 1_000).await.expect("receipts");
    let mut verifier = Verifier::new();
    for receipt in &receipts {
        verifier.feed(receipt, None);
    }
    let report = verifier.finish(None);
    assert!(report.is_intact(), "{report:?}");
}

#[tokio::test]
async fn every_sqlite_fixture_reads_into_typed_ids() {
    for name in ["store-v1.sqlite", "store-v2.sqlite", "store-v3.sqlite"] {
        let (_folder, path) = sqlite_copy_of(name);
        let store = SqliteStore::open(&path).expect("the old store opens");
        every_stored_id_is_well_formed(&store).await;
        chain_is_intact(&store).await;
    }
}

/// What an older `main` could write before a shape rule existed: an approver typed with a space
/// (before `ApproverId`), attempt ids and hashes of another shape.
const LEGACY_SQL: &[&str] = &[
    "UPDATE approvals SET approver = 'bob smith', consumed_by = 'attempt-1', policy_hash = 'md5:old' WHERE state = 'consumed'",
    "UPDATE effects SET attempt_id = 'legacy attempt', action_hash = 'sha256:short'",
];

#[tokio::test]
async fn a_sqlite_row_of_an_older_shape_still_loads_as_it_was_written() {
    let (_folder, path) = sqlite_copy_of("store-v1.sqlite");
    {
        let connection = rusqlite::Connection::open(&path).expect("open");
        for statement in LEGACY_SQL {
            connection.execute(statement, []).expect("legacy row");
        }
    }
    let store = SqliteStore::open(&path).expect("the old store opens");
    check_legacy_rows(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_postgres_fixture_reads_into_typed_ids_and_an_older_shape_still_loads() {
    for (name, tag) in [
        ("store-v1.postgres.sql", "ids1"),
        ("store-v2.postgres.sql", "ids2"),
        ("store-v3.postgres.sql", "ids3"),
    ] {
        let (url, _schema, _admin) = postgres_copy_of(name, tag).await;
        let store = store::open_url_async(&url)
            .await
            .expect("the old store opens");
        every_stored_id_is_well_formed(store.as_ref()).await;
        chain_is_intact(store.as_ref()).await;
    }
    let (url, schema, admin) = postgres_copy_of("store-v1.postgres.sql", "idslegacy").await;
    for statement in LEGACY_SQL {
        let statement = statement
            .replace(
                "UPDATE approvals",
                &format!("UPDATE \"{schema}\".approvals"),
            )
            .replace("UPDATE effects", &format!("UPDATE \"{schema}\".effects"));
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(&admin)
            .await
            .expect("legacy row");
    }
    let store: Arc<dyn Store> = store::open_url_async(&url)
        .await
        .expect("the old store opens");
    check_legacy_rows(store.as_ref()).await;
}

async fn check_legacy_rows(store: &dyn Store) {
    let approvals = store.approvals(None).await.expect("the rows load");
    let consumed = approvals
        .iter()
        .find(|record| record.state == countersign::ApprovalState::Consumed)
        .expect("a consumed request");
    assert_eq!(consumed.approver.as_deref(), Some("bob smith"));
    let attempt = consumed.consumed_by.as_ref().expect("consumed by");
    assert_eq!(attempt.as_str(), "attempt-1");
    assert!(!attempt.is_well_formed());
    assert_eq!(consumed.policy_hash.as_str(), "md5:old");
    assert!(!consumed.policy_hash.is_well_formed());
    // Version 1 kept the answer only in the `approver` column: it reads back as it was.
    assert_eq!(consumed.answers[0].approver.id.as_str(), "bob smith");
    let effects = store.effects(None).await.expect("the effects load");
    assert!(!effects.is_empty());
    for effect in &effects {
        assert_eq!(effect.attempt_id.as_str(), "legacy attempt");
        assert!(!effect.attempt_id.is_well_formed());
        assert_eq!(effect.action_hash.as_str(), "sha256:short");
    }
    chain_is_intact(store).await;
}
