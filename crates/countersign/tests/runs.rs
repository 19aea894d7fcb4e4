//! Run scope and framework call correlation (issue #13), on every backend: a run's approval
//! never leaks to another run (case B42); a denial stands across runs; the kernel's store maps
//! (framework, run, call id) to a request, first write wins, and the call id is never the
//! authority (case B35).
//!
//! PostgreSQL reads `COUNTERSIGN_TEST_POSTGRES_URL` and fails loudly without it (run
//! `.ci/postgres.sh`).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use countersign::store::{self, MemoryStore, SqliteStore, Store};
use countersign::{
    ActionRequest, AnswerDecision, ApprovalId, ApprovalState, Clock, Control, ControlError,
    ExecutorError, ManualClock, Policy, Principal, StaticIdentity, Timestamp,
};
use serde_json::json;

const POLICY: &str = "schema: countersign.policy/v1\nenvironment: test\nactions:\n  refund:\n    effect: \"refund:{order}\"\n    decision: approve\n  notify:\n    decision: approve\n";

struct World {
    control: Control,
    store: Arc<dyn Store>,
    runs: Arc<AtomicUsize>,
    _folder: Option<tempfile::TempDir>,
}

async fn worlds() -> Vec<World> {
    let folder = tempfile::tempdir().expect("temp dir");
    let sqlite: Arc<dyn Store> =
        Arc::new(SqliteStore::open(folder.path().join("runs.db")).expect("sqlite"));
    let postgres = store::open_url_async(&support::fresh_postgres_url("runs"))
        .await
        .expect("the PostgreSQL store opens");
    vec![
        World::new(Arc::new(MemoryStore::new()), None),
        World::new(sqlite, Some(folder)),
        World::new(postgres, None),
    ]
}

impl World {
    /// Time passes by the store's clock, the one expiry is judged by (issue #22).
    fn pass(&self, by: Duration) {
        let millis = i64::try_from(by.as_millis()).expect("a short duration");
        self.store.shift_clock_for_tests(millis).expect("a shift");
    }

    fn new(store: Arc<dyn Store>, folder: Option<tempfile::TempDir>) -> World {
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_790_000_000_000)));
        let control = Control::builder_shared(
            Arc::new(Policy::from_yaml_str(POLICY, None).expect("policy")),
            Arc::clone(&store),
        )
        .identity(StaticIdentity::new(
            Principal::new("agent:p").expect("principal"),
        ))
        .clock(clock as Arc<dyn Clock>)
        .build();
        World {
            control,
            store,
            runs: Arc::new(AtomicUsize::new(0)),
            _folder: folder,
        }
    }

    fn refund(&self) -> ActionRequest {
        ActionRequest::new("refund", &json!({"order": "o1", "amount": 50}))
    }

    async fn execute(&self, request: ActionRequest) -> Result<(), ControlError> {
        let runs = Arc::clone(&self.runs);
        self.control
            .execute(request, move |_| async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ExecutorError>(())
            })
            .await
            .map(drop)
    }

    async fn pending(&self, request: ActionRequest) -> ApprovalId {
        match self.execute(request).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected approval_required, got {other:?}"),
        }
    }

    async fn approve(&self, id: &ApprovalId) {
        self.control
            .answer(id, AnswerDecision::Approve, "human:h", None)
            .await
            .expect("approved");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_approval_is_consumed_only_by_that_run() {
    for world in worlds().await {
        // Both runs ask for the identical action (same hash): each gets its own request.
        let first = world.pending(world.refund().with_run("r1")).await;
        let second = world.pending(world.refund().with_run("r2")).await;
        assert_ne!(first, second, "pending requests are reused per run only");
        assert_eq!(
            world.pending(world.refund().with_run("r1")).await,
            first,
            "the same run asking again finds its own request"
        );
        world.approve(&first).await;
        // R2 reaches execution first: R1's grant does not authorize it.
        assert_eq!(
            world
                .execute(world.refund().with_run("r2"))
                .await
                .unwrap_err()
                .reason(),
            "approval_required"
        );
        let presented = world
            .execute(world.refund().with_run("r2").with_approval(first.clone()))
            .await
            .unwrap_err();
        assert_eq!(presented.reason(), "other_run", "{presented}");
        assert!(presented.may_retry());
        // Neither does an unscoped attempt, with or without presenting it.
        assert_eq!(
            world.execute(world.refund()).await.unwrap_err().reason(),
            "approval_required"
        );
        assert_eq!(
            world
                .execute(world.refund().with_approval(first.clone()))
                .await
                .unwrap_err()
                .reason(),
            "other_run"
        );
        assert_eq!(world.runs.load(Ordering::SeqCst), 0);
        // R1 executes once on its approval, which was left granted by the refusals.
        world
            .execute(world.refund().with_run("r1"))
            .await
            .expect("R1 runs on its own approval");
        assert_eq!(world.runs.load(Ordering::SeqCst), 1);
        let record = world
            .store
            .approval(&first)
            .await
            .expect("read")
            .expect("exists");
        assert_eq!(record.state, ApprovalState::Consumed);
        assert_eq!(record.run.as_deref(), Some("r1"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_scoped_attempt_never_consumes_an_unscoped_grant() {
    for world in worlds().await {
        let unscoped = world.pending(world.refund()).await;
        world.approve(&unscoped).await;
        assert_eq!(
            world
                .execute(
                    world
                        .refund()
                        .with_run("r1")
                        .with_approval(unscoped.clone())
                )
                .await
                .unwrap_err()
                .reason(),
            "other_run"
        );
        assert_eq!(world.runs.load(Ordering::SeqCst), 0);
        world
            .execute(world.refund())
            .await
            .expect("the unscoped call runs");
        assert_eq!(world.runs.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_stands_for_the_action_in_every_run() {
    for world in worlds().await {
        let denied = world.pending(world.refund().with_run("r1")).await;
        world
            .control
            .answer(&denied, AnswerDecision::Deny, "human:h", Some("no"))
            .await
            .expect("denied");
        let before = world.store.approvals(None).await.expect("list").len();
        let refused = world
            .execute(world.refund().with_run("r2"))
            .await
            .unwrap_err();
        assert_eq!(refused.reason(), "approval_denied");
        assert_eq!(
            world.store.approvals(None).await.expect("list").len(),
            before,
            "no new request for another run while the denial stands"
        );
        // Once the denial expires, another run may ask again.
        // Time passes by the store's clock (issue #22: PostgreSQL judges by the server's).
        world.pass(Duration::from_secs(16 * 60));
        assert_eq!(
            world
                .execute(world.refund().with_run("r2"))
                .await
                .unwrap_err()
                .reason(),
            "approval_required"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_framework_call_gets_its_own_request_held_by_the_store() {
    for world in worlds().await {
        let call = |id: &str| {
            ActionRequest::new("notify", &json!({"to": "a@x"}))
                .with_run("r1")
                .with_correlation("toyflow", id)
        };
        // Two calls with the same arguments in one step: a request each, each mapped.
        let first = world.pending(call("call_1")).await;
        let second = world.pending(call("call_2")).await;
        assert_ne!(first, second);
        let mapped = world
            .control
            .correlated("toyflow", Some("r1"), "call_1")
            .await
            .expect("read")
            .expect("mapped");
        assert_eq!(mapped.id, first);
        assert_eq!(
            world
                .control
                .correlated("toyflow", Some("r1"), "call_2")
                .await
                .expect("read")
                .map(|record| record.id),
            Some(second.clone())
        );
        // Re-entering the same call finds its request (the replayed pass asks once).
        assert_eq!(world.pending(call("call_1")).await, first);
        // Another run's call with the same call id is another call.
        assert!(
            world
                .control
                .correlated("toyflow", Some("r2"), "call_1")
                .await
                .expect("read")
                .is_none()
        );
        // Each needs its own answer: approving the first runs only the first.
        world.approve(&first).await;
        world
            .execute(call("call_1").with_approval(first.clone()))
            .await
            .expect("the first call runs");
        assert_eq!(
            world.execute(call("call_2")).await.unwrap_err().reason(),
            "approval_required"
        );
        assert_eq!(world.runs.load(Ordering::SeqCst), 1);
        // The first call sent again finds its consumed request: it never runs twice.
        assert_eq!(
            world.execute(call("call_1")).await.unwrap_err().reason(),
            "consumed"
        );
        assert_eq!(world.runs.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_id_claimed_by_other_arguments_authorizes_nothing() {
    // Case B35: a second call under the same framework call id but other arguments.
    for world in worlds().await {
        let approved = ActionRequest::new("notify", &json!({"to": "acct-1", "amount": 100}))
            .with_run("r1")
            .with_correlation("adk", "C");
        let id = world.pending(approved.clone()).await;
        world.approve(&id).await;
        let injected = ActionRequest::new("notify", &json!({"to": "acct-9", "amount": 999}))
            .with_run("r1")
            .with_correlation("adk", "C");
        let refused = world.execute(injected).await.unwrap_err();
        assert_eq!(refused.reason(), "mismatch", "{refused}");
        assert_eq!(world.runs.load(Ordering::SeqCst), 0);
        let receipts = world.store.receipts(0, 100).await.expect("receipts");
        let last = receipts
            .last()
            .expect("a receipt")
            .to_receipt()
            .expect("readable");
        assert_eq!(last.reason.as_deref(), Some("mismatch"));
        assert!(
            last.detail
                .as_deref()
                .unwrap_or("")
                .contains("duplicate correlation"),
            "{last:?}"
        );
        // The mapping still names the first request, which still runs its own arguments once.
        assert_eq!(
            world
                .control
                .correlated("adk", Some("r1"), "C")
                .await
                .expect("read")
                .map(|record| record.id),
            Some(id.clone())
        );
        world
            .execute(approved)
            .await
            .expect("the approved call runs");
        assert_eq!(world.runs.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_request_expired_is_mapped_to_a_new_one() {
    for world in worlds().await {
        let call = ActionRequest::new("notify", &json!({"to": "b@x"}))
            .with_run("r1")
            .with_correlation("toyflow", "call_9");
        let first = world.pending(call.clone()).await;
        // Time passes by the store's clock (issue #22: PostgreSQL judges by the server's).
        world.pass(Duration::from_secs(16 * 60));
        let second = world.pending(call).await;
        assert_ne!(first, second);
        assert_eq!(
            world
                .control
                .correlated("toyflow", Some("r1"), "call_9")
                .await
                .expect("read")
                .map(|record| record.id),
            Some(second)
        );
    }
}
