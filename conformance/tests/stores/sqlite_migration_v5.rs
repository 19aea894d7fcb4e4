//! Issue #21: a SQLite store made at schema version 5 (the fixture `store-v5.sqlite`, made by
//! `main` before this change, see `crates/countersign/tests/fixtures/README.md`) migrates to 6
//! in one transaction: `effects_by_state` then keeps only the effects that are not settled, and
//! every listing by state reads as before. A failed migration leaves the store at version 5.

use std::sync::Arc;

use countersign::EffectState;
use countersign::store::{SqliteStore, Store};

use super::migration::{sqlite_copy_of, sqlite_version, verified_schemas};

/// The `CREATE INDEX` statement of `effects_by_state`.
fn index_sql(path: &std::path::Path) -> String {
    rusqlite::Connection::open(path)
        .expect("open")
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'effects_by_state'",
            [],
            |row| row.get(0),
        )
        .expect("the index")
}

/// The keys listed for `state` (every effect for `None`), in order.
async fn keys(store: &dyn Store, state: Option<EffectState>) -> Vec<String> {
    store
        .effects(state)
        .await
        .expect("effects")
        .iter()
        .map(|effect| format!("{} {}", effect.key.as_str(), effect.state.as_str()))
        .collect()
}

#[tokio::test]
async fn a_sqlite_store_made_by_schema_5_migrates_to_6_and_lists_its_effects_as_before() {
    let (_folder, path) = sqlite_copy_of("store-v5.sqlite");
    assert_eq!(sqlite_version(&path), "5");
    assert!(!index_sql(&path).contains("WHERE"), "{}", index_sql(&path));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("the old store opens"));
    assert_eq!(sqlite_version(&path), "6");
    assert!(
        index_sql(&path).ends_with("WHERE state = 'reserved' OR state = 'ambiguous'"),
        "{}",
        index_sql(&path)
    );
    assert_eq!(
        keys(store.as_ref(), None).await,
        [
            "refund:pi_1001 committed",
            "refund:pi_1002 committed",
            "refund:pi_1004 committed",
            "refund:pi_1005 committed",
            "refund:pi_v5_ambiguous ambiguous",
            "refund:pi_v5_failed failed",
            "refund:pi_v5_reserved reserved",
        ]
    );
    for (state, expected) in [
        (
            EffectState::Reserved,
            vec!["refund:pi_v5_reserved reserved"],
        ),
        (
            EffectState::Ambiguous,
            vec!["refund:pi_v5_ambiguous ambiguous"],
        ),
        (EffectState::Failed, vec!["refund:pi_v5_failed failed"]),
        (
            EffectState::Committed,
            vec![
                "refund:pi_1001 committed",
                "refund:pi_1002 committed",
                "refund:pi_1004 committed",
                "refund:pi_1005 committed",
            ],
        ),
    ] {
        assert_eq!(
            keys(store.as_ref(), Some(state)).await,
            expected,
            "{state:?}"
        );
    }
    // The log is untouched: 19 receipts, intact.
    assert_eq!(verified_schemas(store.as_ref()).await.len(), 19);
}

#[tokio::test]
async fn a_failed_sqlite_migration_from_5_leaves_the_store_as_it_was() {
    let (_folder, path) = sqlite_copy_of("store-v5.sqlite");
    // Sabotage migration 6: the index it replaces is already gone.
    rusqlite::Connection::open(&path)
        .expect("open")
        .execute_batch("DROP INDEX effects_by_state")
        .expect("sabotage");
    let Err(error) = SqliteStore::open(&path) else {
        panic!("a migration that cannot apply was reported as done")
    };
    assert!(error.to_string().contains("effects_by_state"), "{error}");
    assert_eq!(sqlite_version(&path), "5");
}
