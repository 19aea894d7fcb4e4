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

/// Another connection on `path` that takes the write lock whenever it is told to, holds it for
/// `hold`, and reports the instant it *began* to release it (just before `COMMIT`): nothing that
/// needs the lock can commit before that instant, however loaded the machine is.
struct LockHolder {
    go: mpsc::Sender<()>,
    held: mpsc::Receiver<()>,
    releasing: mpsc::Receiver<Instant>,
    thread: std::thread::JoinHandle<()>,
}

impl LockHolder {
    fn start(path: std::path::PathBuf, hold: Duration) -> LockHolder {
        let (go, go_rx) = mpsc::channel::<()>();
        let (held_tx, held) = mpsc::channel();
        let (releasing_tx, releasing) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let connection = rusqlite::Connection::open(&path).expect("open the file directly");
            connection
                .busy_timeout(Duration::from_secs(30))
                .expect("busy timeout");
            // One hold per `go`, until the sender is dropped.
            while go_rx.recv().is_ok() {
                connection
                    .execute_batch("BEGIN IMMEDIATE")
                    .expect("take the write lock");
                held_tx.send(()).expect("the test waits for the lock");
                std::thread::sleep(hold);
                releasing_tx
                    .send(Instant::now())
                    .expect("the test waits for the release");
                connection.execute_batch("COMMIT").expect("release it");
            }
        });
        LockHolder {
            go,
            held,
            releasing,
            thread,
        }
    }

    /// Take the lock in the other connection and return once it is held.
    fn hold(&self) {
        self.go.send(()).expect("the holder runs");
        self.held
            .recv()
            .expect("the other connection holds the lock");
    }

    /// The instant the current hold began to be released.
    fn released(&self) -> Instant {
        self.releasing.recv().expect("the holder releases the lock")
    }

    fn stop(self) {
        drop(self.go);
        self.thread.join().expect("the holder thread");
    }
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
    // Each read-then-write path starts while the other connection holds the write lock. It must
    // wait for the lock and then succeed: its commit cannot come before the holder began to
    // release the lock (an ordering, not a duration, so a loaded machine cannot fail it), and a
    // deferred transaction would have failed with `SQLITE_BUSY` at its first write instead.
    let holder = LockHolder::start(path.clone(), Duration::from_millis(200));
    for (round, id) in granted.into_iter().enumerate() {
        let paths = [
            // Effect reserve (reads the key's state, then inserts).
            (
                "reserve",
                ActionRequest::new("kit.effect", &json!({"key": format!("r{round}")})),
            ),
            // Approval consume (reads a granted row, then marks it consumed).
            (
                "consume",
                ActionRequest::new("kit.approve", &json!({"key": format!("c{round}")}))
                    .with_approval(id),
            ),
            // Evidence append alone (reads the chain head, then inserts).
            (
                "append",
                ActionRequest::new("kit.note", &json!({"n": round})),
            ),
        ];
        for (path_name, request) in paths {
            holder.hold();
            run(&control, request)
                .await
                .unwrap_or_else(|error| panic!("{path_name} in round {round}: {error}"));
            let done = Instant::now();
            let released = holder.released();
            assert!(
                done > released,
                "{path_name} in round {round} finished while the other connection held the write lock"
            );
        }
    }
    holder.stop();
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

    let holder = LockHolder::start(path.clone(), Duration::from_millis(1_500));
    holder.hold();
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
    holder.released();
    holder.stop();
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
