//! Issue #21: a PostgreSQL store made at schema version 5 (the fixture `store-v5.postgres.sql`,
//! made by `main` before this change, see `crates/countersign/tests/fixtures/README.md`)
//! migrates to 6 (lanes) in one transaction: its receipts stay lane 0's, each at its `seq` in
//! the log, its head carries on, and new receipts chain onto it. A failed migration leaves the
//! store at version 5.

use countersign::evidence::VerifyOutcome;
use countersign::store;

use super::migration::{postgres_copy_of, postgres_versions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_store_made_by_schema_5_migrates_to_lanes_and_keeps_its_chain() {
    let (url, schema, admin) = postgres_copy_of("store-v5.postgres.sql", "v5ok").await;
    assert_eq!(
        postgres_versions(&admin, &schema).await,
        vec![1, 2, 3, 4, 5]
    );
    let store = store::open_url_async(&url)
        .await
        .expect("the old store opens");
    assert_eq!(
        postgres_versions(&admin, &schema).await,
        vec![1, 2, 3, 4, 5, 6]
    );
    let before = store.receipts(0, 1_000).await.expect("receipts");
    assert_eq!(before.len(), 5, "the fixture's five receipts");
    for (index, receipt) in before.iter().enumerate() {
        assert_eq!(
            (receipt.lane, receipt.seq, receipt.position),
            (0, index as u64 + 1, index as u64 + 1),
            "an old receipt keeps lane 0 and its place"
        );
    }
    let anchor = store.anchor().await.expect("anchor").expect("an anchor");
    assert_eq!((anchor.seq, anchor.lanes.len()), (5, 0));
    assert_eq!(anchor.hash, before[4].hash.as_str());
    // The old head carries on: the next receipt is lane 0's sixth, after the fifth.
    let appended = store
        .append_receipt(
            countersign::evidence::ReceiptDraft {
                kind: Some(countersign::evidence::ReceiptKind::Attempt),
                outcome: Some(countersign::evidence::ReceiptOutcome::Committed),
                action: Some("migration.v5".to_owned()),
                ..Default::default()
            },
            countersign::Timestamp::from_millis(1_800_000_000_000),
        )
        .await
        .expect("append");
    assert_eq!((appended.lane, appended.seq), (0, 6));
    assert_eq!(appended.prev_hash.as_str(), before[4].hash.as_str());
    let report = countersign::audit::verify_store(store.as_ref(), Some(&anchor))
        .await
        .expect("verify");
    assert_eq!(report.outcome, VerifyOutcome::Verified, "{report:?}");
    assert_eq!(report.checked, 6);
    assert_eq!(
        store.chain_head().await.expect("head").map(|head| head.seq),
        Some(6)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_postgres_migration_from_5_leaves_the_store_as_it_was() {
    let (url, schema, admin) = postgres_copy_of("store-v5.postgres.sql", "v5bad").await;
    // Sabotage migration 6: the table it creates last already exists.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE \"{schema}\".receipt_positions (x TEXT)"
    )))
    .execute(&admin)
    .await
    .expect("sabotage");
    let Err(error) = store::open_url_async(&url).await else {
        panic!("a migration that cannot apply was reported as done")
    };
    assert!(error.to_string().contains("receipt_positions"), "{error}");
    assert_eq!(
        postgres_versions(&admin, &schema).await,
        vec![1, 2, 3, 4, 5]
    );
    // Nothing of it stayed: the one chain head is still there, and no lane table.
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 AND table_name IN ('chain_head', 'lane_heads') ORDER BY 1",
    )
    .bind(&schema)
    .fetch_all(&admin)
    .await
    .expect("tables");
    assert_eq!(tables, vec!["chain_head".to_owned()]);
}
