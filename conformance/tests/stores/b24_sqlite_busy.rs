//! Case B24: two OS processes × 1,000 reservations on unique keys plus their receipts, at once.
//! Nobody sees a raw busy or locked error; 2,000 reservations, 2,000 receipts, a valid chain;
//! SQLite's integrity check passes.

use std::time::Duration;

use countersign::EffectState;
use countersign::audit::verify_store;
use countersign_conformance::store_kit::worker::{self, start_in};
use countersign_conformance::store_kit::{Fresh, SqliteBackend, StoreBackend};
use serde_json::json;

use super::support::{fresh, postgres, sqlite_file, worker as worker_binary};

async fn two_processes_thousand_reservations_each(backend: &dyn StoreBackend) -> Fresh {
    let fresh = fresh(backend, "b24/two_processes").await;
    let url = fresh.url.clone();
    let replies = tokio::task::block_in_place(move || {
        let mut workers = worker::spawn_many(&worker_binary(), &url, 2).expect("workers start");
        let start = start_in(Duration::from_millis(200));
        let requests = [
            json!({"op": "execute_many", "prefix": "p0", "count": 1000, "start_at_ms": start}),
            json!({"op": "execute_many", "prefix": "p1", "count": 1000, "start_at_ms": start}),
        ];
        worker::exchange(&mut workers, &requests).expect("workers answer")
    });
    for reply in &replies {
        let text = reply.to_string().to_lowercase();
        assert!(
            !text.contains("database is locked") && !text.contains("busy"),
            "{}: {reply}",
            backend.name()
        );
        assert_eq!(reply["ok"], json!(1000), "{}: {reply}", backend.name());
    }
    let committed = fresh
        .store
        .effects(Some(EffectState::Committed))
        .await
        .expect("effects");
    assert_eq!(committed.len(), 2000, "{}", backend.name());
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(report.first_break, None, "{}", backend.name());
    assert_eq!(
        report.checked,
        2000,
        "{}: one receipt per reservation",
        backend.name()
    );
    fresh
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_two_processes_never_see_database_is_locked() {
    let fresh = two_processes_thousand_reservations_each(&SqliteBackend).await;
    let connection = rusqlite::Connection::open(sqlite_file(&fresh.url)).expect("open the file");
    let integrity: String = connection
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity check runs");
    assert_eq!(integrity, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_processes_reserve_two_thousand_keys() {
    two_processes_thousand_reservations_each(&postgres("b24")).await;
}
