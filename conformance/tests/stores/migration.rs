//! Stores made by an older `main` open and migrate forward in one transaction; a store newer
//! than this build is refused; old receipts still verify beside new ones.
//!
//! The fixtures (`crates/countersign/tests/fixtures/`, see its README) were made by `main` at
//! schema version 1 before the approver change and checked in unchanged: a SQLite file and a
//! PostgreSQL dump, each holding consumed, granted, denied and pending requests, committed and
//! ambiguous effects and 8 `countersign.receipt/v1` receipts.

use std::path::PathBuf;
use std::sync::Arc;

use countersign::store::sqlite::SCHEMA_VERSION as SQLITE_SCHEMA_VERSION;

use countersign::approver::{Channel, Credential};
use countersign::evidence::{StoredReceipt, Verifier};
use countersign::store::{self, ResolveEffect, Resolver, SqliteStore, Store};
use countersign::{
    AnswerDecision, ApprovalState, Clock, Control, EffectKey, EffectState, Policy, Principal,
    StaticIdentity, StoreError, SystemClock,
};
use countersign_conformance::store_kit::{admin_pool, postgres_url_from_env};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/countersign/tests/fixtures")
        .join(name)
}

fn refunds_policy() -> Policy {
    Policy::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/refunds/countersign.yaml"),
    )
    .expect("the refunds policy loads")
}

/// Every receipt, in order.
async fn all_receipts(store: &dyn Store) -> Vec<StoredReceipt> {
    let mut all = Vec::new();
    loop {
        let after = all.last().map_or(0, |last: &StoredReceipt| last.position);
        let page = store.receipts(after, 500).await.expect("receipts");
        if page.is_empty() {
            return all;
        }
        all.extend(page);
    }
}

/// The chain verifies; returns the schema of each receipt.
pub(super) async fn verified_schemas(store: &dyn Store) -> Vec<String> {
    let receipts = all_receipts(store).await;
    let mut verifier = Verifier::new();
    for receipt in &receipts {
        verifier.feed(receipt, None);
    }
    let report = verifier.finish(None);
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.checked, receipts.len() as u64);
    receipts
        .iter()
        .map(|stored| stored.to_receipt().expect("a receipt parses").schema)
        .collect()
}

/// What every migrated fixture must show, whatever the backend: the old rows read as they
/// were, old receipts verify, and new work appends `v2` receipts to the same chain.
async fn check_migrated(store: Arc<dyn Store>) {
    let approvals = store.approvals(None).await.expect("approvals");
    let states: Vec<ApprovalState> = approvals.iter().map(|record| record.state).collect();
    assert_eq!(approvals.len(), 4, "{states:?}");
    for state in [
        ApprovalState::Consumed,
        ApprovalState::Granted,
        ApprovalState::Denied,
        ApprovalState::Pending,
    ] {
        assert!(states.contains(&state), "{state} missing from {states:?}");
    }
    for record in &approvals {
        // Requests stored before rules existed are judged by the rule they had then.
        assert_eq!(record.rule, countersign::approver::ApprovalRule::default());
        match record.state {
            ApprovalState::Pending => assert!(record.answers.is_empty()),
            _ => {
                // The one answer version 1 recorded, read back as an asserted API answer.
                assert_eq!(record.answers.len(), 1, "{record:?}");
                assert_eq!(
                    Some(record.answers[0].approver.id.as_str()),
                    record.approver.as_deref()
                );
                assert!(!record.answers[0].hash_confirmed);
            }
        }
    }
    let denied = approvals
        .iter()
        .find(|record| record.state == ApprovalState::Denied)
        .expect("a denied request");
    assert_eq!(denied.answers[0].decision, AnswerDecision::Deny);

    let lost = EffectKey::new("refund:pi_lost").expect("key");
    let effect = store.effect(&lost).await.expect("effect").expect("stored");
    assert_eq!(effect.state, EffectState::Ambiguous);
    assert_eq!(effect.attempt, None, "version 1 kept no attempt context");

    let before = verified_schemas(store.as_ref()).await;
    assert_eq!(before.len(), 8);
    assert!(
        before
            .iter()
            .all(|schema| schema == "countersign.receipt/v1")
    );

    // New work on the old store: a resolution and an allowed refund.
    let resolved = store
        .resolve_effect(
            ResolveEffect {
                key: lost,
                to: EffectState::Failed,
                resolver: Resolver::Person {
                    credential: Credential::Asserted("human:ops".to_owned()),
                    channel: Channel::Cli,
                },
                note: Some("the provider shows no refund".to_owned()),
            },
            SystemClock.now(),
        )
        .await
        .expect("an old ambiguous effect resolves");
    assert_eq!(resolved.state, EffectState::Failed);
    let control = Control::builder_shared(Arc::new(refunds_policy()), Arc::clone(&store))
        .identity(StaticIdentity::new(
            Principal::new("agent:support-bot").expect("principal"),
        ))
        .build();
    let refund = control.protect("stripe.refund", |_: serde_json::Value| async {
        Ok::<_, countersign::ExecutorError>("refunded")
    });
    refund
        .call(&serde_json::json!({"payment_id": "pi_after_migration", "amount": 100}))
        .await
        .expect("an allowed refund runs on the migrated store");

    let after = verified_schemas(store.as_ref()).await;
    assert_eq!(after.len(), 10, "{after:?}");
    assert!(
        after[..8]
            .iter()
            .all(|schema| schema == "countersign.receipt/v1")
    );
    assert!(
        after[8..]
            .iter()
            .all(|schema| schema == "countersign.receipt/v2")
    );
}

/// A copy of the SQLite fixture in a folder of its own.
fn sqlite_copy() -> (tempfile::TempDir, PathBuf) {
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join("store-v1.sqlite");
    std::fs::copy(fixture("store-v1.sqlite"), &path).expect("copy the fixture");
    (folder, path)
}

pub(super) fn sqlite_version(path: &std::path::Path) -> String {
    rusqlite::Connection::open(path)
        .expect("open")
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |row| row.get(0),
        )
        .expect("schema_version")
}

fn sqlite_columns(path: &std::path::Path, table: &str) -> Vec<String> {
    let connection = rusqlite::Connection::open(path).expect("open");
    let mut statement = connection
        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
        .expect("prepare");
    statement
        .query_map([], |row| row.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("columns")
}

#[tokio::test]
async fn a_sqlite_store_made_by_schema_1_migrates_and_keeps_its_evidence() {
    let (_folder, path) = sqlite_copy();
    assert_eq!(sqlite_version(&path), "1");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("the old store opens"));
    check_migrated(store).await;
    assert_eq!(
        sqlite_version(&path),
        countersign::store::sqlite::SCHEMA_VERSION.to_string()
    );
    // Opening again changes nothing.
    drop(SqliteStore::open(&path).expect("reopens"));
    assert_eq!(
        sqlite_version(&path),
        countersign::store::sqlite::SCHEMA_VERSION.to_string()
    );
}

#[tokio::test]
async fn a_failed_sqlite_migration_leaves_the_store_as_it_was() {
    let (_folder, path) = sqlite_copy();
    // Sabotage the last step of migration 2: the column it adds already exists.
    rusqlite::Connection::open(&path)
        .expect("open")
        .execute_batch("ALTER TABLE effects ADD COLUMN attempt TEXT")
        .expect("sabotage");
    let Err(error) = SqliteStore::open(&path) else {
        panic!("a migration that cannot apply was reported as done")
    };
    assert!(error.to_string().contains("attempt"), "{error}");
    // One transaction: the earlier steps of the same migration were rolled back with it.
    assert_eq!(sqlite_version(&path), "1");
    let columns = sqlite_columns(&path, "approvals");
    assert!(
        !columns.iter().any(|column| column == "rule"),
        "{columns:?}"
    );
    assert!(
        !columns.iter().any(|column| column == "answers"),
        "{columns:?}"
    );
}

#[tokio::test]
async fn a_sqlite_store_from_a_newer_countersign_is_refused() {
    let (_folder, path) = sqlite_copy();
    rusqlite::Connection::open(&path)
        .expect("open")
        .execute_batch("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        .expect("pretend a newer Countersign wrote it");
    match SqliteStore::open(&path) {
        Err(error @ StoreError::Incompatible { found: 99, .. }) => {
            assert_eq!(error.reason(), "store_incompatible");
            assert!(error.to_string().contains("99"), "{error}");
        }
        Err(other) => panic!("expected store_incompatible, got {other}"),
        Ok(_) => panic!("a store from a newer Countersign was opened"),
    }
    assert_eq!(sqlite_version(&path), "99", "the refusal wrote nothing");
}

/// Load the PostgreSQL fixture into a schema of its own; returns its store URL and name.
async fn postgres_copy(tag: &str) -> (String, String, sqlx::PgPool) {
    postgres_copy_of("store-v1.postgres.sql", tag).await
}

/// Load the PostgreSQL fixture `name` into a schema of its own.
pub(super) async fn postgres_copy_of(name: &str, tag: &str) -> (String, String, sqlx::PgPool) {
    let base = postgres_url_from_env().unwrap_or_else(|message| panic!("{message}"));
    let admin = admin_pool(&base)
        .await
        .unwrap_or_else(|message| panic!("{message}"));
    let schema = format!("migration_{tag}_{}", rand::random::<u32>());
    let dump = std::fs::read_to_string(fixture(name)).expect("the dump");
    let sql = format!(
        "CREATE SCHEMA \"{schema}\";\n{}",
        dump.replace("public.", &format!("\"{schema}\"."))
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&admin)
        .await
        .expect("the dump loads");
    let separator = if base.contains('?') { '&' } else { '?' };
    (format!("{base}{separator}schema={schema}"), schema, admin)
}

pub(super) async fn postgres_versions(admin: &sqlx::PgPool, schema: &str) -> Vec<i64> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT version FROM \"{schema}\".countersign_schema_version ORDER BY version"
    )))
    .fetch_all(admin)
    .await
    .expect("versions")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_store_made_by_schema_1_migrates_and_keeps_its_evidence() {
    let (url, schema, admin) = postgres_copy("ok").await;
    assert_eq!(postgres_versions(&admin, &schema).await, vec![1]);
    let store = store::open_url_async(&url)
        .await
        .expect("the old store opens");
    check_migrated(store).await;
    assert_eq!(
        postgres_versions(&admin, &schema).await,
        vec![1, 2, 3, 4, 5, 6]
    );
    drop(store::open_url_async(&url).await.expect("reopens"));
    assert_eq!(
        postgres_versions(&admin, &schema).await,
        vec![1, 2, 3, 4, 5, 6]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_postgres_migration_leaves_the_store_as_it_was() {
    let (url, schema, admin) = postgres_copy("sabotaged").await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "ALTER TABLE \"{schema}\".effects ADD COLUMN attempt TEXT"
    )))
    .execute(&admin)
    .await
    .expect("sabotage");
    let Err(error) = store::open_url_async(&url).await else {
        panic!("a migration that cannot apply was reported as done")
    };
    assert!(error.to_string().contains("attempt"), "{error}");
    assert_eq!(postgres_versions(&admin, &schema).await, vec![1]);
    let columns: Vec<String> = sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'approvals'",
    )
    .bind(&schema)
    .fetch_all(&admin)
    .await
    .expect("columns");
    assert!(
        !columns.iter().any(|column| column == "rule"),
        "{columns:?}"
    );
}

/// Issue #31: a store made at schema version 2 (the fixtures `store-v2.*`, see the README)
/// migrates to 3 (the token deny-list) in one transaction: its requests and receipts read as
/// they were, its chain verifies, and the new table works.
async fn check_migrated_from_2(store: Arc<dyn Store>, approvals: usize, receipts: usize) {
    assert_eq!(
        store.approvals(None).await.expect("approvals").len(),
        approvals
    );
    let before = verified_schemas(store.as_ref()).await;
    assert_eq!(before.len(), receipts);
    assert!(
        before
            .iter()
            .all(|schema| schema == "countersign.receipt/v2")
    );
    let now = SystemClock.now();
    assert!(!store.token_revoked("tok_example").await.expect("read"));
    assert!(
        store
            .revoke_token("tok_example", "human:ops", Some("leaked"), now)
            .await
            .expect("the deny-list takes it")
    );
    assert!(
        !store
            .revoke_token("tok_example", "human:ops", None, now)
            .await
            .expect("a repeat"),
        "listed once"
    );
    assert!(store.token_revoked("tok_example").await.expect("read"));
    // A waiting request of the old store can still be cancelled, on the same chain.
    if let Some(pending) = store
        .approvals(Some(ApprovalState::Pending))
        .await
        .expect("pending")
        .first()
    {
        // The fixture's clock: a minute before the request expires (it was made with a
        // 15-minute TTL), so the test does not depend on when it runs. PostgreSQL judges by
        // the server's clock (issue #22): the store's test offset moves it there.
        let now = countersign::Timestamp::from_millis(pending.expires_at.as_millis() - 60_000);
        set_store_time(store.as_ref(), now).await;
        let cancelled = store
            .withdraw_approval(
                countersign::approval::withdraw::Withdrawal {
                    request_id: pending.id.clone(),
                    kind: countersign::approval::withdraw::WithdrawalKind::Cancel {
                        operator: "human:ops".to_owned(),
                        channel: Channel::Cli,
                    },
                    reason: Some("after the migration".to_owned()),
                },
                now,
            )
            .await
            .expect("cancelled");
        assert_eq!(cancelled.state, ApprovalState::Cancelled);
        assert_eq!(verified_schemas(store.as_ref()).await.len(), receipts + 1);
    }
}

pub(super) fn sqlite_copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join(name);
    std::fs::copy(fixture(name), &path).expect("copy the fixture");
    (folder, path)
}

#[tokio::test]
async fn a_sqlite_store_made_by_schema_2_migrates_forward_and_keeps_its_evidence() {
    let (_folder, path) = sqlite_copy_of("store-v2.sqlite");
    assert_eq!(sqlite_version(&path), "2");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("the old store opens"));
    // Migrated to the newest version (the later steps are tested from their own fixtures).
    assert_eq!(sqlite_version(&path), SQLITE_SCHEMA_VERSION.to_string());
    assert!(!sqlite_columns(&path, "revoked_tokens").is_empty());
    let approvals = store.approvals(None).await.expect("approvals").len();
    let receipts = verified_schemas(store.as_ref()).await.len();
    assert!(approvals > 0 && receipts > 0, "the fixture holds evidence");
    check_migrated_from_2(store, approvals, receipts).await;
}

#[tokio::test]
async fn a_failed_sqlite_migration_from_2_leaves_the_store_as_it_was() {
    let (_folder, path) = sqlite_copy_of("store-v2.sqlite");
    rusqlite::Connection::open(&path)
        .expect("open")
        .execute_batch("CREATE TABLE revoked_tokens (x TEXT)")
        .expect("sabotage");
    let Err(error) = SqliteStore::open(&path) else {
        panic!("a migration that cannot apply was reported as done")
    };
    assert!(error.to_string().contains("revoked_tokens"), "{error}");
    assert_eq!(sqlite_version(&path), "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_store_made_by_schema_2_migrates_forward_and_keeps_its_evidence() {
    let (url, schema, admin) = postgres_copy_of("store-v2.postgres.sql", "v2ok").await;
    assert_eq!(postgres_versions(&admin, &schema).await, vec![1, 2]);
    let store = store::open_url_async(&url)
        .await
        .expect("the old store opens");
    assert_eq!(
        postgres_versions(&admin, &schema).await,
        vec![1, 2, 3, 4, 5, 6]
    );
    check_migrated_from_2(store, 4, 6).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_postgres_migration_from_2_leaves_the_store_as_it_was() {
    let (url, schema, admin) = postgres_copy_of("store-v2.postgres.sql", "v2bad").await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE \"{schema}\".revoked_tokens (x TEXT)"
    )))
    .execute(&admin)
    .await
    .expect("sabotage");
    let Err(error) = store::open_url_async(&url).await else {
        panic!("a migration that cannot apply was reported as done")
    };
    assert!(error.to_string().contains("revoked_tokens"), "{error}");
    assert_eq!(postgres_versions(&admin, &schema).await, vec![1, 2]);
}

/// Issue #17: a store made at schema version 3 (the fixtures `store-v3.*`, see the README)
/// migrates to 4 (the outbox) in one transaction: its requests and receipts read as they were,
/// its chain verifies, no event is invented for what happened before, and the next change
/// writes its event and can be delivered.
async fn check_migrated_from_3(store: Arc<dyn Store>, receipts: usize) {
    let before = verified_schemas(store.as_ref()).await;
    assert_eq!(before.len(), receipts);
    assert!(
        store.events(0, 100).await.expect("events").is_empty(),
        "no event is made up for changes made before the outbox existed"
    );
    let pending = store
        .approvals(Some(ApprovalState::Pending))
        .await
        .expect("pending");
    let waiting = pending.first().expect("the fixture has a waiting request");
    // The fixture's clock: a minute before the request expires, so the test does not depend on
    // when it runs (on the store's clock too, issue #22).
    let now = countersign::Timestamp::from_millis(waiting.expires_at.as_millis() - 60_000);
    set_store_time(store.as_ref(), now).await;
    let cancelled = store
        .withdraw_approval(
            countersign::approval::withdraw::Withdrawal {
                request_id: waiting.id.clone(),
                kind: countersign::approval::withdraw::WithdrawalKind::Cancel {
                    operator: "human:ops".to_owned(),
                    channel: Channel::Cli,
                },
                reason: Some("after the migration".to_owned()),
            },
            now,
        )
        .await
        .expect("cancelled");
    assert_eq!(cancelled.state, ApprovalState::Cancelled);
    assert_eq!(verified_schemas(store.as_ref()).await.len(), receipts + 1);
    let events = store.events(0, 100).await.expect("events");
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0].event.kind,
        countersign::outbox::EventKind::Cancelled
    );
    assert_eq!(events[0].event.request_id, Some(waiting.id.clone()));
    let claimed = store
        .claim_deliveries(
            countersign::store::DeliveryClaim {
                endpoints: vec!["http://127.0.0.1:9/hook".to_owned()],
                since: countersign::Timestamp::from_millis(0),
                owner: "migration-test".to_owned(),
                lease: std::time::Duration::from_secs(30),
                limit: 10,
            },
            now,
        )
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].delivery.event_id, events[0].event.id);
}

#[tokio::test]
async fn a_sqlite_store_made_by_schema_3_migrates_to_4_and_keeps_its_evidence() {
    let (_folder, path) = sqlite_copy_of("store-v3.sqlite");
    assert_eq!(sqlite_version(&path), "3");
    assert!(sqlite_columns(&path, "outbox").is_empty());
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("the old store opens"));
    // Migrated to the newest version (the later steps are tested from their own fixtures).
    assert_eq!(sqlite_version(&path), SQLITE_SCHEMA_VERSION.to_string());
    assert!(sqlite_columns(&path, "outbox").contains(&"body".to_owned()));
    assert!(sqlite_columns(&path, "deliveries").contains(&"lease_until".to_owned()));
    let receipts = verified_schemas(store.as_ref()).await.len();
    assert!(receipts > 0, "the fixture holds evidence");
    check_migrated_from_3(store, receipts).await;
}

#[tokio::test]
async fn a_failed_sqlite_migration_from_3_leaves_the_store_as_it_was() {
    let (_folder, path) = sqlite_copy_of("store-v3.sqlite");
    rusqlite::Connection::open(&path)
        .expect("open")
        .execute_batch("CREATE TABLE deliveries (x TEXT)")
        .expect("sabotage");
    let Err(error) = SqliteStore::open(&path) else {
        panic!("a migration that cannot apply was reported as done")
    };
    assert!(error.to_string().contains("deliveries"), "{error}");
    assert_eq!(sqlite_version(&path), "3");
    // The outbox table, created earlier in the same migration, was rolled back with it.
    assert!(sqlite_columns(&path, "outbox").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_store_made_by_schema_3_migrates_to_4_and_keeps_its_evidence() {
    let (url, schema, admin) = postgres_copy_of("store-v3.postgres.sql", "v3ok").await;
    assert_eq!(postgres_versions(&admin, &schema).await, vec![1, 2, 3]);
    let store = store::open_url_async(&url)
        .await
        .expect("the old store opens");
    assert_eq!(
        postgres_versions(&admin, &schema).await,
        vec![1, 2, 3, 4, 5, 6]
    );
    let receipts = verified_schemas(store.as_ref()).await.len();
    assert!(receipts > 0, "the fixture holds evidence");
    check_migrated_from_3(store, receipts).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_postgres_migration_from_3_leaves_the_store_as_it_was() {
    let (url, schema, admin) = postgres_copy_of("store-v3.postgres.sql", "v3bad").await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE \"{schema}\".deliveries (x TEXT)"
    )))
    .execute(&admin)
    .await
    .expect("sabotage");
    let Err(error) = store::open_url_async(&url).await else {
        panic!("a migration that cannot apply was reported as done")
    };
    assert!(error.to_string().contains("deliveries"), "{error}");
    assert_eq!(postgres_versions(&admin, &schema).await, vec![1, 2, 3]);
    let outbox: Option<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'outbox'",
    )
    .bind(&schema)
    .fetch_optional(&admin)
    .await
    .expect("tables");
    assert_eq!(outbox, None, "rolled back with the rest of migration 4");
}

/// A verifier only reads (`countersign verify`): opening an older store for reading is refused
/// with how to migrate it, and migrates nothing; a database without a store gets no tables.
#[tokio::test]
async fn reading_an_older_sqlite_store_never_migrates_it() {
    let (_folder, path) = sqlite_copy();
    let before = sqlite_version(&path);
    let url = format!("sqlite:{}", path.display());
    match store::open_url_for_reading(&url).await {
        Err(error @ StoreError::Open { .. }) => {
            let message = error.to_string();
            assert!(
                message.contains("older than this Countersign reads")
                    && message.contains("reading never migrates"),
                "{message}"
            );
        }
        Err(other) => panic!("expected store_open, got {other}"),
        Ok(_) => panic!("an older store was opened for reading"),
    }
    assert_eq!(sqlite_version(&path), before, "reading migrated the store");
    assert_eq!(
        sqlite_columns(&path, "effects"),
        sqlite_columns(&fixture("store-v1.sqlite"), "effects")
    );
    // Once migrated by a writer, it reads.
    drop(
        store::open_url_async(&url)
            .await
            .expect("a writer migrates it"),
    );
    let store = store::open_url_for_reading(&url)
        .await
        .expect("now it reads");
    assert!(!all_receipts(store.as_ref()).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_postgres_never_creates_or_migrates() {
    let (url, schema, admin) = postgres_copy("reading").await;
    match store::open_url_for_reading(&url).await {
        Err(error) => assert!(
            error.to_string().contains("reading never migrates"),
            "{error}"
        ),
        Ok(_) => panic!("an older store was opened for reading"),
    }
    assert_eq!(postgres_versions(&admin, &schema).await, vec![1]);

    let empty = format!("reading_empty_{}", rand::random::<u32>());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA \"{empty}\"")))
        .execute(&admin)
        .await
        .expect("an empty schema");
    let base = postgres_url_from_env().unwrap_or_else(|message| panic!("{message}"));
    let separator = if base.contains('?') { '&' } else { '?' };
    let empty_url = format!("{base}{separator}schema={empty}");
    match store::open_url_for_reading(&empty_url).await {
        // Nothing recorded here yet (`verify` says unverifiable), not a broken store.
        Err(error @ StoreError::NoStore { .. }) => assert!(
            error.to_string().contains(&format!(
                "no Countersign store here: the schema `{empty}` (`?schema=`) has none of its tables"
            )),
            "{error}"
        ),
        Err(error) => panic!("an empty schema is not `NoStore`: {error:?}"),
        Ok(_) => panic!("an empty schema was opened for reading"),
    }
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
    )
    .bind(&empty)
    .fetch_one(&admin)
    .await
    .expect("count its tables");
    assert_eq!(tables, 0, "reading created tables");
}

/// Move `store`'s clock (its test offset) so that it reads `time` now: PostgreSQL judges by the
/// server's clock, not the caller's `now` (issue #22).
async fn set_store_time(store: &dyn countersign::Store, time: countersign::Timestamp) {
    let current = store.store_now(time).await.expect("the store's clock");
    store
        .shift_clock_for_tests(time.as_millis() - current.as_millis())
        .expect("the store's clock moves");
}

/// Behind a transaction pooler the schema is set per transaction (`SET LOCAL`), so the reader's
/// check for a store must run in one: a store in `?schema=` opens for reading through
/// PgBouncer, and an empty schema there is `NoStore`, not the server's default schema judged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_through_a_transaction_pooler_looks_in_the_named_schema() {
    use countersign_conformance::store_kit::PostgresBackend;
    let backend = PostgresBackend::pgbouncer_from_env("reading_pooled")
        .unwrap_or_else(|message| panic!("{message}"));
    let fresh = super::support::fresh(&backend, "reading_pooled").await;
    assert!(fresh.url.contains("pooler=transaction"), "{}", fresh.url);
    fresh
        .store
        .append_receipt(
            countersign::evidence::ReceiptDraft {
                action: Some("reading.pooled".to_owned()),
                ..countersign::evidence::ReceiptDraft::default()
            },
            SystemClock.now(),
        )
        .await
        .expect("append");
    let reader = store::open_url_for_reading(&fresh.url)
        .await
        .unwrap_or_else(|error| panic!("the store did not open for reading: {error}"));
    let report = countersign::audit::verify_store(reader.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(report.checked, 1, "{report:?}");
    let schema = super::support::schema_of(&fresh.url);
    let empty = fresh.url.replace(
        &format!("schema={schema}"),
        &format!("schema={schema}_none"),
    );
    match store::open_url_for_reading(&empty).await {
        Err(error @ StoreError::NoStore { .. }) => assert!(
            error.to_string().contains(&format!("`{schema}_none`")),
            "{error}"
        ),
        Err(error) => panic!("an empty schema is not `NoStore`: {error:?}"),
        Ok(_) => panic!("an empty schema was opened for reading"),
    }
}
