//! Case B22: two worker processes released together on the same effect key, many trials.
//! Every trial runs the executor exactly once; the loser gets a typed `in_progress` or
//! `duplicate`, never a generic error; one reservation row per key. Also issue #2's SQLite
//! requirement: two OS processes sharing one file, 100 trials, one executor call each.
//!
//! Sleeps: 3 trials with the case's 500 ms executor, then 100 trials with a 20 ms executor so
//! the suite stays fast (the race window is the reservation, not the sleep).

use std::time::Duration;

use countersign::audit::verify_store;
use countersign_conformance::store_kit::StoreBackend;
use countersign_conformance::store_kit::worker::{self, start_in};
use serde_json::{Value, json};

use super::support::{fresh, postgres, worker as worker_binary};
use countersign_conformance::store_kit::SqliteBackend;

async fn same_key_trials(backend: &dyn StoreBackend) {
    let fresh = fresh(backend, "b22/same_key_in_flight").await;
    let url = fresh.url.clone();
    let plan: Vec<(String, u64)> = (0..3)
        .map(|trial| (format!("b22-slow-{trial}"), 500))
        .chain((0..100).map(|trial| (format!("b22-{trial}"), 20)))
        .collect();
    let trials = plan.len();
    let plan_for_workers = plan.clone();
    let replies: Vec<Vec<Value>> = tokio::task::block_in_place(move || {
        let mut workers = worker::spawn_many(&worker_binary(), &url, 2).expect("workers start");
        plan_for_workers
            .iter()
            .map(|(key, sleep_ms)| {
                let request = json!({"op": "execute", "key": key, "sleep_ms": sleep_ms, "start_at_ms": start_in(Duration::from_millis(30))});
                worker::exchange(&mut workers, &[request.clone(), request]).expect("workers answer")
            })
            .collect()
    });
    for ((key, _), pair) in plan.iter().zip(&replies) {
        let ran = pair
            .iter()
            .filter(|reply| reply["ran"] == json!(true))
            .count();
        assert_eq!(
            ran,
            1,
            "{}: trial {key}: {ran} executor calls: {pair:?}",
            backend.name()
        );
        for reply in pair.iter().filter(|reply| reply["ok"] != json!(true)) {
            let reason = reply["reason"].as_str().unwrap_or("none");
            assert!(
                reason == "in_progress" || reason == "duplicate",
                "{}: trial {key}: the loser got `{reason}`, not a typed in_progress or duplicate: {reply}",
                backend.name()
            );
        }
    }
    let effects = fresh.store.effects(None).await.expect("effects");
    assert_eq!(
        effects.len(),
        trials,
        "{}: one reservation row per key",
        backend.name()
    );
    assert!(
        effects.iter().all(|record| record.attempts == 1),
        "{}: a key was reserved twice",
        backend.name()
    );
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(report.first_break, None);
    assert_eq!(
        report.checked,
        2 * trials as u64,
        "{}: one receipt per attempt",
        backend.name()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_same_key_from_two_processes_runs_once_per_trial() {
    same_key_trials(&SqliteBackend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_same_key_from_two_processes_runs_once_per_trial() {
    same_key_trials(&postgres("b22")).await;
}
