//! Hand-off (issue #29): an attempt authorized for a tool that runs outside Countersign ends in
//! one `handed_off` receipt, written in the transaction that consumed its grant and reserved its
//! key; and a process's exit status reaches the receipt. On every backend.
//!
//! PostgreSQL reads `COUNTERSIGN_TEST_POSTGRES_URL` and fails loudly without it (run
//! `.ci/postgres.sh`).

mod support;

use std::sync::Arc;

use countersign::audit;
use countersign::evidence::{ProcessExit, ReceiptOutcome};
use countersign::store::{self, MemoryStore, SqliteStore, Store};
use countersign::{
    ActionRequest, AnswerDecision, ApprovalState, Clock, Control, ControlError, EffectKey,
    EffectState, ExecutorError, ExitStatusSlot, ManualClock, Policy, Principal, Receipt,
    StaticIdentity, Timestamp,
};
use serde_json::json;

const POLICY: &str = r#"schema: countersign.policy/v1
environment: test
actions:
  Read:
    decision: allow
  Bash:
    rules:
      - when: { command: { eq: "rm -rf /" } }
        decision: deny
      - decision: approve
  deploy:
    effect: "deploy:{service}"
    decision: allow
  job:
    effect: "job:{id}"
    decision: allow
"#;

struct World {
    control: Control,
    store: Arc<dyn Store>,
    _folder: Option<tempfile::TempDir>,
}

async fn worlds() -> Vec<World> {
    let folder = tempfile::tempdir().expect("temp dir");
    let sqlite: Arc<dyn Store> =
        Arc::new(SqliteStore::open(folder.path().join("hand_off.db")).expect("sqlite"));
    let postgres = store::open_url_async(&support::fresh_postgres_url("hand_off"))
        .await
        .expect("the PostgreSQL store opens");
    vec![
        World::new(Arc::new(MemoryStore::new()), None),
        World::new(sqlite, Some(folder)),
        World::new(postgres, None),
    ]
}

impl World {
    fn new(store: Arc<dyn Store>, folder: Option<tempfile::TempDir>) -> World {
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_790_000_000_000)));
        let control = Control::builder_shared(
            Arc::new(Policy::from_yaml_str(POLICY, None).expect("policy")),
            Arc::clone(&store),
        )
        .identity(StaticIdentity::new(
            Principal::new("agent:coder").expect("principal"),
        ))
        .clock(clock as Arc<dyn Clock>)
        .build();
        World {
            control,
            store,
            _folder: folder,
        }
    }

    async fn receipts(&self) -> Vec<Receipt> {
        self.store
            .receipts(0, 1_000)
            .await
            .expect("receipts")
            .iter()
            .map(|stored| stored.to_receipt().expect("a receipt"))
            .collect()
    }

    /// The chain is intact and the effects and approvals tables agree with it.
    async fn assert_consistent(&self) {
        let store = self.store.as_ref();
        let report = audit::verify_store(store, None).await.expect("verify");
        assert!(report.is_intact(), "{report:?}");
        let effects = audit::cross_check_effects(store).await.expect("effects");
        assert!(effects.agrees(), "{effects:?}");
        let approvals = audit::cross_check_approvals(store)
            .await
            .expect("approvals");
        assert!(approvals.agrees(), "{approvals:?}");
    }
}

fn bash(command: &str) -> ActionRequest {
    ActionRequest::new("Bash", &json!({ "command": command }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_call_is_handed_off_with_one_receipt() {
    for world in worlds().await {
        let handed = world
            .control
            .hand_off(ActionRequest::new("Read", &json!({"file_path": "/tmp/a"})))
            .await
            .expect("allowed");
        assert_eq!(handed.decision.as_str(), "allow");
        assert_eq!(handed.receipt.outcome, ReceiptOutcome::HandedOff);
        assert!(handed.approval.is_none());
        let receipts = world.receipts().await;
        assert_eq!(receipts.len(), 1, "{receipts:?}");
        assert_eq!(receipts[0], handed.receipt);
        assert_eq!(receipts[0].decision.as_deref(), Some("allow"));
        world.assert_consistent().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_is_refused_with_its_receipt() {
    for world in worlds().await {
        let refusal = world
            .control
            .hand_off(bash("rm -rf /"))
            .await
            .expect_err("denied");
        assert!(
            matches!(refusal, ControlError::ActionDenied { .. }),
            "{refusal}"
        );
        let receipts = world.receipts().await;
        assert_eq!(receipts.len(), 1);
        assert_eq!(receipts[0].outcome, ReceiptOutcome::Refused);
        assert_eq!(receipts[0].reason.as_deref(), Some("denied"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_call_is_handed_off_once_consuming_its_grant() {
    for world in worlds().await {
        let first = match world.control.hand_off(bash("cargo publish")).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected approval_required, got {other:?}"),
        };
        assert!(
            world.receipts().await.is_empty(),
            "a waiting request writes no receipt"
        );
        // Asking again before an answer finds the same request.
        match world.control.hand_off(bash("cargo publish")).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => {
                assert_eq!(request_id, first)
            }
            other => panic!("expected the same request, got {other:?}"),
        }
        world
            .control
            .answer(&first, AnswerDecision::Approve, "human:alice", None)
            .await
            .expect("granted");
        // Other arguments are not what was granted.
        match world.control.hand_off(bash("cargo publish --force")).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => {
                assert_ne!(request_id, first)
            }
            other => panic!("expected a new request, got {other:?}"),
        }
        let handed = world
            .control
            .hand_off(bash("cargo publish"))
            .await
            .expect("the identical call is authorized");
        assert_eq!(handed.receipt.outcome, ReceiptOutcome::HandedOff);
        assert_eq!(handed.receipt.approval_id.as_deref(), Some(first.as_str()));
        assert_eq!(handed.receipt.approver.as_deref(), Some("human:alice"));
        let approvers = handed
            .receipt
            .approvers
            .clone()
            .expect("granting approvers");
        assert_eq!(approvers.len(), 1);
        assert_eq!(approvers[0].id, "human:alice");
        let stored = world
            .store
            .approval(&first)
            .await
            .expect("read")
            .expect("exists");
        assert_eq!(stored.state, ApprovalState::Consumed);
        assert_eq!(
            stored.consumed_by.as_deref(),
            handed.receipt.attempt_id.as_deref()
        );
        // The grant is spent: the identical call again needs a new approval.
        match world.control.hand_off(bash("cargo publish")).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => {
                assert_ne!(request_id, first, "a consumed grant is never reused")
            }
            other => panic!("expected approval_required, got {other:?}"),
        }
        // Presenting the spent grant is refused `consumed`, with a receipt.
        let presented = world
            .control
            .hand_off(bash("cargo publish").with_approval(first.clone()))
            .await
            .expect_err("consumed");
        assert_eq!(presented.reason(), "consumed", "{presented}");
        let last = world.receipts().await.pop().expect("a receipt");
        assert_eq!(last.outcome, ReceiptOutcome::Refused);
        assert_eq!(last.reason.as_deref(), Some("consumed"));
        world.assert_consistent().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_off_effect_is_left_ambiguous_and_refuses_a_retry() {
    for world in worlds().await {
        let request = || ActionRequest::new("deploy", &json!({"service": "api"}));
        let handed = world.control.hand_off(request()).await.expect("allowed");
        assert_eq!(handed.receipt.effect_key.as_deref(), Some("deploy:api"));
        assert_eq!(
            handed.receipt.detail.as_deref(),
            Some(countersign::control::HANDED_OFF_DETAIL)
        );
        let key = EffectKey::new("deploy:api".to_owned()).expect("key");
        let record = world
            .store
            .effect(&key)
            .await
            .expect("read")
            .expect("reserved");
        assert_eq!(record.state, EffectState::Ambiguous);
        let again = world
            .control
            .hand_off(request())
            .await
            .expect_err("refused");
        assert_eq!(again.reason(), "ambiguous", "{again}");
        world.assert_consistent().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executors_exit_status_is_recorded_on_its_receipt() {
    for world in worlds().await {
        for (id, exit, not_executed) in [
            ("a", ProcessExit::code(0), false),
            ("b", ProcessExit::code(75), true),
            ("c", ProcessExit::signal(9), false),
        ] {
            let slot = ExitStatusSlot::new();
            let executor_slot = slot.clone();
            let outcome = world
                .control
                .execute(
                    ActionRequest::new("job", &json!({ "id": id })).with_exit_status(slot),
                    move |_| async move {
                        executor_slot.set(exit);
                        match (exit.code, not_executed) {
                            (Some(0), _) => Ok(()),
                            (_, true) => Err(ExecutorError::not_executed("exit 75")),
                            _ => Err(ExecutorError::may_have_run("killed")),
                        }
                    },
                )
                .await;
            let last = world.receipts().await.pop().expect("a receipt");
            assert_eq!(last.exit_status, Some(exit), "{last:?}");
            let expected = match (exit.code, not_executed) {
                (Some(0), _) => ReceiptOutcome::Committed,
                (_, true) => ReceiptOutcome::Failed,
                _ => ReceiptOutcome::Ambiguous,
            };
            assert_eq!(last.outcome, expected, "{outcome:?}");
        }
        world.assert_consistent().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_hand_offs_of_one_grant_let_exactly_one_through() {
    for world in worlds().await {
        let first = match world.control.hand_off(bash("make release")).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected approval_required, got {other:?}"),
        };
        world
            .control
            .answer(&first, AnswerDecision::Approve, "human:alice", None)
            .await
            .expect("granted");
        let racers: Vec<_> = (0..8)
            .map(|_| {
                let control = world.control.clone();
                let id = first.clone();
                tokio::spawn(async move {
                    control
                        .hand_off(bash("make release").with_approval(id))
                        .await
                })
            })
            .collect();
        let mut through = 0;
        for racer in racers {
            match racer.await.expect("no panic") {
                Ok(handed) => {
                    through += 1;
                    assert_eq!(handed.receipt.outcome, ReceiptOutcome::HandedOff);
                }
                Err(refusal) => assert_eq!(refusal.reason(), "consumed", "{refusal}"),
            }
        }
        assert_eq!(
            through,
            1,
            "one grant, one hand-off ({})",
            world.store.backend()
        );
        let handed_off = world
            .receipts()
            .await
            .iter()
            .filter(|receipt| receipt.outcome == ReceiptOutcome::HandedOff)
            .count();
        assert_eq!(handed_off, 1);
        world.assert_consistent().await;
    }
}
