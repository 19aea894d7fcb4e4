//! Issue #23: a store made at schema version 4 (the fixtures `store-v4.*`, made by `main`
//! before this change, see `crates/countersign/tests/fixtures/README.md`) migrates to 5 in one
//! transaction: its events, requests and receipts read as they were, and it then carries
//! `log.checkpoint` events about the log (no request) that webhooks are offered like any other.
//! A version-4 build refuses a version-5 store (it cannot read those events): the store's
//! version says so, as every migration's does.

use std::sync::Arc;

use countersign::audit::checkpoint::{Published, publish_checkpoint, sign_log};
use countersign::evidence::VerifyOutcome;
use countersign::outbox::EventKind;
use countersign::store::sqlite::SCHEMA_VERSION as SQLITE_SCHEMA_VERSION;
use countersign::store::{self, DeliveryClaim, SqliteStore, Store};

use super::migration::{postgres_copy_of, postgres_versions, sqlite_copy_of, sqlite_version};

/// The checks after the migration, on any backend: what was there still reads, and a
/// checkpoint's event is written once, read back, and offered to an endpoint.
async fn check_migrated_from_4(store: Arc<dyn Store>) {
    let before = store.events(0, 1_000).await.expect("events");
    assert!(!before.is_empty(), "the fixture holds outbox events");
    assert!(
        before
            .iter()
            .all(|stored| stored.event.request_id.is_some()),
        "every event of version 4 is about a request"
    );
    let report = countersign::audit::verify_store(store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(report.outcome, VerifyOutcome::Verified, "{report:?}");
    assert_eq!(
        store
            .last_event(EventKind::Checkpoint)
            .await
            .expect("last event"),
        None
    );

    let key = countersign::token::generate_keypair().expect("a key");
    let made = sign_log(store.as_ref(), &key, None).await.expect("signed");
    assert_eq!(made.head.size, report.checked);
    let now = countersign::Timestamp::from_millis(
        before.last().expect("events").event.created_at.as_millis() + 1,
    );
    let Published::Written(id) = publish_checkpoint(store.as_ref(), &made, now)
        .await
        .expect("published")
    else {
        panic!("the first checkpoint event was not written")
    };
    let last = store
        .last_event(EventKind::Checkpoint)
        .await
        .expect("last event")
        .expect("the checkpoint event");
    assert_eq!(last.event.id, id);
    assert_eq!(last.event.request_id, None);
    let body: serde_json::Value = serde_json::from_str(&last.event.body).expect("JSON body");
    assert_eq!(body["type"], "log.checkpoint");
    assert_eq!(body["data"]["size"], made.head.size);
    assert_eq!(body["data"]["checkpoint"], made.signed.as_str());
    // The same head again writes nothing new.
    assert_eq!(
        publish_checkpoint(store.as_ref(), &made, now)
            .await
            .expect("published"),
        Published::Unchanged(id.clone())
    );
    assert_eq!(
        store.events(0, 1_000).await.expect("events").len(),
        before.len() + 1
    );
    // An endpoint is offered it, alongside (after) the request events of version 4.
    let claimed = store
        .claim_deliveries(
            DeliveryClaim {
                endpoints: vec!["http://127.0.0.1:9/hook".to_owned()],
                since: countersign::Timestamp::from_millis(0),
                owner: "migration-v4-test".to_owned(),
                lease: std::time::Duration::from_secs(30),
                limit: 1_000,
            },
            now,
        )
        .await
        .expect("claim");
    let checkpoint = claimed
        .iter()
        .find(|held| held.delivery.event_id == id)
        .expect("the checkpoint event is offered");
    assert_eq!(checkpoint.delivery.kind, EventKind::Checkpoint);
    assert_eq!(checkpoint.delivery.request_id, None);
}

fn sqlite_has_index(path: &std::path::Path, name: &str) -> bool {
    rusqlite::Connection::open(path)
        .expect("open")
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?1",
            [name],
            |row| row.get::<_, i64>(0),
        )
        .expect("sqlite_master")
        == 1
}

#[tokio::test]
async fn a_sqlite_store_made_by_schema_4_migrates_to_5_and_carries_checkpoint_events() {
    let (_folder, path) = sqlite_copy_of("store-v4.sqlite");
    assert_eq!(sqlite_version(&path), "4");
    assert!(!sqlite_has_index(&path, "outbox_by_kind"));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("the old store opens"));
    // Migrated to the newest version (the later steps are tested from their own fixtures).
    assert_eq!(sqlite_version(&path), SQLITE_SCHEMA_VERSION.to_string());
    assert!(sqlite_has_index(&path, "outbox_by_kind"));
    check_migrated_from_4(store).await;
}

#[tokio::test]
async fn a_failed_sqlite_migration_from_4_leaves_the_store_as_it_was() {
    let (_folder, path) = sqlite_copy_of("store-v4.sqlite");
    // Sabotage migration 5: the index it creates already exists.
    rusqlite::Connection::open(&path)
        .expect("open")
        .execute_batch("CREATE INDEX outbox_by_kind ON outbox (seq)")
        .expect("sabotage");
    let Err(error) = SqliteStore::open(&path) else {
        panic!("a migration that cannot apply was reported as done")
    };
    assert!(error.to_string().contains("outbox_by_kind"), "{error}");
    assert_eq!(sqlite_version(&path), "4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_store_made_by_schema_4_migrates_to_5_and_carries_checkpoint_events() {
    let (url, schema, admin) = postgres_copy_of("store-v4.postgres.sql", "v4ok").await;
    assert_eq!(postgres_versions(&admin, &schema).await, vec![1, 2, 3, 4]);
    let store = store::open_url_async(&url)
        .await
        .expect("the old store opens");
    assert_eq!(
        postgres_versions(&admin, &schema).await,
        vec![1, 2, 3, 4, 5, 6]
    );
    check_migrated_from_4(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_postgres_migration_from_4_leaves_the_store_as_it_was() {
    let (url, schema, admin) = postgres_copy_of("store-v4.postgres.sql", "v4bad").await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE INDEX outbox_by_kind ON \"{schema}\".outbox (seq)"
    )))
    .execute(&admin)
    .await
    .expect("sabotage");
    let Err(error) = store::open_url_async(&url).await else {
        panic!("a migration that cannot apply was reported as done")
    };
    assert!(error.to_string().contains("outbox_by_kind"), "{error}");
    assert_eq!(postgres_versions(&admin, &schema).await, vec![1, 2, 3, 4]);
}
