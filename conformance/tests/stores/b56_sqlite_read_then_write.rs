//! Case B56: a read-then-write SQLite transaction that starts deferred gets `SQLITE_BUSY` at
//! once when it tries to upgrade, whatever the busy timeout. Every store transaction that reads
//! before it writes (effect reserve, approval consume, evidence append) takes the write lock at
//! `BEGIN IMMEDIATE`, so while another connection holds the lock for less than the busy budget
//! each path waits and succeeds; past the budget the caller gets a typed `store_busy` that
//! arrives no sooner than the budget and changes nothing.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use countersign::store::sqlite::SqliteOptions;
use countersign::store::{SqliteStore, Store};
use countersign::{
    ActionRequest, AnswerDecision, ControlError, EffectKey, ExecutorError, Reason, SystemClock,
};
use countersign_conformance::store_kit::SqliteBackend;
use countersign_conformance::store_kit::cases::kit_control;
use serde_json::json;

use super::support::{fresh, sqlite_file};

/// Hold the write lock of `path` from another connection `rounds` times for `hold` each (with a
/// short gap), signalling on `held` each time the lock is taken.
fn hold_write_lock(
    path: std::path::PathBuf,
    rounds: usize,
    hold: Duration,
    held: mpsc::Sender<()>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let connection = rusqlite::Connection::open(&path).expect("open the file directly");
        connection
            .busy_timeout(Duration::from_secs(30))
            .expect("busy timeout");
        for _ in 0..rounds {
            connection
                .execute_batch("BEGIN IMMEDIATE")
                .expect("take the write lock");
            let _ = held.send(());
            std::thread::sleep(hold);
            connection.execute_batch("COMMIT").expect("release it");
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

fn store_with_budget(path: &std::path::Path, budget: Duration) -> Arc<dyn Store> {
    let options = SqliteOptions {
        busy_budget: budget,
        ..SqliteOptions::default()
    };
    Arc::new(SqliteStore::open_with(path, options).expect("open the store"))
}

async fn run(control: &countersign::Control, request: ActionRequest) -> Result<(), ControlError> {
    control
        .execute(request, |_arguments| async { Ok::<_, ExecutorError>(()) })
        .await
        .map(drop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_then_write_paths_wait_for_a_held_lock_and_succeed() {
    let fresh = fresh(&SqliteBackend, "b56/waits").await;
    let path = sqlite_file(&fresh.url).to_path_buf();
    let store = store_with_budget(&path, Duration::from_secs(5));
    let control = kit_control(Arc::clone(&store), Arc::new(SystemClock), None);
    const ROUNDS: usize = 6;
    // One granted approval per round, asked for before the lock is held.
    let mut granted = Vec::new();
    for round in 0..ROUNDS {
        let request = ActionRequest::new("kit.approve", &json!({"key": format!("c{round}")}));
        let id = match run(&control, request).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected approval_required, got {other:?}"),
        };
        control
            .answer(&id, AnswerDecision::Approve, "human:kit-approver", None)
            .await
            .expect("approve");
        granted.push(id);
    }
    let (held_tx, held_rx) = mpsc::channel();
    let holder = hold_write_lock(path.clone(), ROUNDS, Duration::from_millis(300), held_tx);
    let mut waited = Vec::new();
    for (round, id) in granted.into_iter().enumerate() {
        held_rx.recv().expect("the other connection holds the lock");
        let started = Instant::now();
        // Effect reserve (reads the key's state, then inserts).
        run(
            &control,
            ActionRequest::new("kit.effect", &json!({"key": format!("r{round}")})),
        )
        .await
        .unwrap_or_else(|error| panic!("reserve in round {round}: {error}"));
        waited.push(started.elapsed());
        // Approval consume (reads a granted row, then marks it consumed).
        run(
            &control,
            ActionRequest::new("kit.approve", &json!({"key": format!("c{round}")}))
                .with_approval(id),
        )
        .await
        .unwrap_or_else(|error| panic!("consume in round {round}: {error}"));
        // Evidence append alone (reads the chain head, then inserts).
        run(
            &control,
            ActionRequest::new("kit.note", &json!({"n": round})),
        )
        .await
        .unwrap_or_else(|error| panic!("append in round {round}: {error}"));
    }
    holder.join().expect("the holder thread");
    // The first path of each round started while the lock was held, so it waited for it rather
    // than failing: most of the 300 ms hold.
    let blocked = waited
        .iter()
        .filter(|elapsed| **elapsed >= Duration::from_millis(150))
        .count();
    assert!(
        blocked >= ROUNDS / 2,
        "the reserve should have waited behind the held lock: {waited:?}"
    );
    let report = countersign::audit::verify_store(store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(report.first_break, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_budget_the_caller_gets_store_busy_no_sooner_and_nothing_changes() {
    let fresh = fresh(&SqliteBackend, "b56/budget").await;
    let path = sqlite_file(&fresh.url).to_path_buf();
    let budget = Duration::from_millis(400);
    let store = store_with_budget(&path, budget);
    let control = kit_control(Arc::clone(&store), Arc::new(SystemClock), None);
    run(&control, ActionRequest::new("kit.note", &json!({"n": 0})))
        .await
        .expect("a first receipt");
    let before = store.receipts(0, 100).await.expect("receipts").len();

    let (held_tx, held_rx) = mpsc::channel();
    let holder = hold_write_lock(path.clone(), 1, Duration::from_millis(1_500), held_tx);
    held_rx.recv().expect("the other connection holds the lock");
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let started = Instant::now();
    let refused = control
        .execute(
            ActionRequest::new("kit.effect", &json!({"key": "late"})),
            move |_arguments| async move {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok::<_, ExecutorError>(())
            },
        )
        .await
        .expect_err("the lock outlives the budget");
    let elapsed = started.elapsed();
    holder.join().expect("the holder thread");
    assert_eq!(refused.kind(), Reason::StoreBusy, "{refused}");
    assert!(
        elapsed >= budget,
        "store_busy came after {elapsed:?}, before the {budget:?} budget"
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(
        store
            .effect(&EffectKey::new("late").expect("key"))
            .await
            .expect("read")
            .is_none(),
        "a refused reserve left an effect row"
    );
    assert_eq!(
        store.receipts(0, 100).await.expect("receipts").len(),
        before,
        "a busy refusal wrote a receipt"
    );
}
