//! Case B25: 20 concurrent reservations of one key on PostgreSQL while the winning transaction
//! is held open for 200 ms (a trigger sleeps inside it), at SERIALIZABLE and at READ COMMITTED.
//! Exactly one reservation and one executor call; every other caller gets `in_progress` or
//! `duplicate`; nobody gets a store error from running out of retries.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use countersign::{ActionRequest, ExecutorError, SystemClock};
use countersign_conformance::store_kit::cases::kit_control;
use countersign_conformance::store_kit::{StoreBackend, admin_pool, postgres_url_from_env};
use serde_json::json;

use super::support::{fresh, postgres, schema_of};

async fn twenty_racers_with_the_winner_held_open(isolation: &str) {
    let backend = postgres(&format!("b25_{isolation}"))
        .with_options(&format!("isolation={isolation}&max_connections=24"));
    let fresh = fresh(&backend, "b25/held_open").await;
    let schema = schema_of(&fresh.url);
    let admin = admin_pool(&postgres_url_from_env().expect("url"))
        .await
        .expect("admin");
    for statement in [
        format!(
            "CREATE FUNCTION \"{schema}\".hold_open() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.2); RETURN NULL; END $$"
        ),
        format!(
            "CREATE TRIGGER hold_open AFTER INSERT ON \"{schema}\".effects FOR EACH ROW EXECUTE FUNCTION \"{schema}\".hold_open()"
        ),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(&admin)
            .await
            .expect("install the trigger");
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(tokio::sync::Barrier::new(20));
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let control = kit_control(Arc::clone(&fresh.store), Arc::new(SystemClock), None);
        let calls = Arc::clone(&calls);
        let barrier = Arc::clone(&barrier);
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            control
                .execute(
                    ActionRequest::new("kit.effect", &json!({"key": "b25"})),
                    move |_arguments| async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        Ok::<_, ExecutorError>(())
                    },
                )
                .await
                .map(drop)
        }));
    }
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for task in tasks {
        let outcome = match task.await.expect("no panic") {
            Ok(()) => "ran".to_owned(),
            Err(error) => format!(
                "{}: {}",
                error.reason(),
                if error.reason().starts_with("store") {
                    error.to_string()
                } else {
                    String::new()
                }
            ),
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "{isolation}: {outcomes:?}");
    assert_eq!(outcomes.get("ran"), Some(&1), "{isolation}: {outcomes:?}");
    assert!(
        outcomes.keys().all(|outcome| outcome == "ran"
            || outcome == "in_progress: "
            || outcome == "duplicate: "),
        "{isolation}: a loser got something other than in_progress or duplicate: {outcomes:?}"
    );
    let effects = fresh.store.effects(None).await.expect("effects");
    assert_eq!(effects.len(), 1);
    assert_eq!(effects[0].attempts, 1);
    eprintln!("{}: {isolation}: {outcomes:?}", backend.name());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serializable_losers_wait_out_a_held_winner() {
    twenty_racers_with_the_winner_held_open("serializable").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_committed_losers_wait_out_a_held_winner() {
    twenty_racers_with_the_winner_held_open("read_committed").await;
}
