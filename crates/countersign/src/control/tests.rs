//! Pipeline tests: every scenario runs on the memory store and on a SQLite file.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::action::canonical::CanonicalError;
use crate::action::{ActionHash, Principal};
use crate::approval::{AnswerDecision, ApprovalId, ApprovalState};
use crate::clock::{Clock, ManualClock, Timestamp};
use crate::effect::{
    EffectKey, EffectRecord, EffectState, ExecutorError, ReconcileHook, Reconciled,
};
use crate::error::{AnswerError, ControlError, DidRun};
use crate::evidence::{Receipt, ReceiptDraft, ReceiptKind, ReceiptOutcome};
use crate::policy::Policy;
use crate::store::{BeginAttempt, BeginOutcome, EffectClaim, MemoryStore, SqliteStore, Store};

const REFUNDS: &str = r#"
schema: countersign.policy/v1
environment: test
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    resource: "payment:{payment_id}"
    rules:
      - when: { amount: { lte: 50000 } }
        decision: allow
      - when: { amount: { lte: 1000000 } }
        decision: approve
      - decision: deny
  notify:
    decision: approve
  log_ticket:
    effect: "ticket:{id}"
    decision: allow
"#;

struct World {
    control: Control,
    clock: ManualClock,
    store: Arc<dyn Store>,
    calls: Arc<AtomicUsize>,
    _dir: Option<tempfile::TempDir>,
}

#[derive(Clone, Copy, Debug)]
enum Backend {
    Memory,
    Sqlite,
}

const BACKENDS: [Backend; 2] = [Backend::Memory, Backend::Sqlite];

fn start() -> Timestamp {
    Timestamp::from_millis(1_780_000_000_000)
}

impl World {
    fn new(backend: Backend, policy: &str) -> World {
        let (store, dir): (Arc<dyn Store>, _) = match backend {
            Backend::Memory => (Arc::new(MemoryStore::new()), None),
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                (
                    Arc::new(SqliteStore::open(dir.path().join("test.db")).unwrap()),
                    Some(dir),
                )
            }
        };
        World::with_store(store, policy, dir)
    }

    fn with_store(store: Arc<dyn Store>, policy: &str, dir: Option<tempfile::TempDir>) -> World {
        let clock = ManualClock::new(start());
        World {
            control: World::control_for(&store, policy, &clock),
            clock,
            store,
            calls: Arc::new(AtomicUsize::new(0)),
            _dir: dir,
        }
    }

    fn control_for(store: &Arc<dyn Store>, policy: &str, clock: &ManualClock) -> Control {
        Control::builder_shared(
            Arc::new(Policy::from_yaml_str(policy, None).unwrap()),
            Arc::clone(store),
        )
        .identity(StaticIdentity::new(Principal::new("agent:test").unwrap()))
        .clock(Arc::new(clock.clone()))
        .build()
    }

    /// Install a new policy over the same store and clock.
    fn replace_policy(&mut self, policy: &str) {
        self.control = World::control_for(&self.store, policy, &self.clock);
    }

    async fn call(&self, name: &str, arguments: Value) -> Result<Executed<String>, ControlError> {
        self.call_request(ActionRequest::new(name, &arguments))
            .await
    }

    async fn call_request(&self, request: ActionRequest) -> Result<Executed<String>, ControlError> {
        let calls = Arc::clone(&self.calls);
        self.control
            .execute(request, |arguments| async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(format!("done {arguments}"))
            })
            .await
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    async fn receipts(&self) -> Vec<Receipt> {
        self.store
            .receipts(0, 10_000)
            .await
            .unwrap()
            .iter()
            .map(|stored| stored.to_receipt().unwrap())
            .collect()
    }

    /// (outcome, reason) of every receipt, in order.
    async fn trail(&self) -> Vec<(ReceiptOutcome, Option<String>)> {
        self.receipts()
            .await
            .into_iter()
            .map(|receipt| (receipt.outcome, receipt.reason))
            .collect()
    }

    async fn approve(&self, id: &ApprovalId) {
        self.control
            .answer(id, AnswerDecision::Approve, "human:alice", None)
            .await
            .unwrap();
    }

    async fn assert_chain_intact(&self) {
        let report = self.control.verify_receipts(None).await.unwrap();
        assert!(report.is_intact(), "{report:?}");
    }
}

fn request_id(error: &ControlError) -> ApprovalId {
    match error {
        ControlError::ApprovalRequired { request_id, .. } => request_id.clone(),
        other => panic!("expected approval_required, got {other:?}"),
    }
}

fn refused(reason: &str) -> (ReceiptOutcome, Option<String>) {
    (ReceiptOutcome::Refused, Some(reason.to_owned()))
}

#[tokio::test]
async fn allowed_call_runs_once_and_leaves_a_committed_receipt() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let done = world
            .call(
                "stripe.refund",
                json!({"payment_id": "pi_1", "amount": 500}),
            )
            .await
            .unwrap();
        assert_eq!(world.calls(), 1);
        assert_eq!(done.receipt.outcome, ReceiptOutcome::Committed);
        assert_eq!(done.receipt.effect_key.as_deref(), Some("refund:pi_1"));
        assert_eq!(done.receipt.resource.as_deref(), Some("payment:pi_1"));
        assert_eq!(done.receipt.principal.as_deref(), Some("agent:test"));
        assert_eq!(
            done.receipt.policy_hash.as_deref(),
            Some(world.control.policy().hash().as_str())
        );
        let record = world
            .store
            .effect(&EffectKey::new("refund:pi_1").unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(record.state, EffectState::Committed);
        world.assert_chain_intact().await;
    }
}

#[tokio::test]
async fn refuses_a_committed_effect_a_second_time() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        world
            .call(
                "stripe.refund",
                json!({"payment_id": "pi_1", "amount": 500}),
            )
            .await
            .unwrap();
        let again = world
            .call(
                "stripe.refund",
                json!({"payment_id": "pi_1", "amount": 500}),
            )
            .await
            .unwrap_err();
        assert_eq!(again.reason(), "duplicate", "{backend:?}");
        assert_eq!(again.did_run(), DidRun::No);
        assert!(!again.may_retry());
        assert_eq!(world.calls(), 1);
        assert_eq!(
            world.trail().await,
            vec![(ReceiptOutcome::Committed, None), refused("duplicate")]
        );
    }
}

#[tokio::test]
async fn denies_unknown_actions_with_a_receipt() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let error = world
            .call("stripe.charge", json!({"amount": 1}))
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "unknown_action");
        assert_eq!(world.calls(), 0);
        assert_eq!(world.trail().await, vec![refused("unknown_action")]);
    }
}

#[tokio::test]
async fn a_rule_denial_is_recorded_as_denied() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let error = world
            .call(
                "stripe.refund",
                json!({"payment_id": "pi_1", "amount": 5_000_000}),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                ControlError::ActionDenied {
                    reason: crate::DenyReason::Denied,
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(world.calls(), 0);
    }
}

#[tokio::test]
async fn refuses_unrepresentable_arguments_before_writing_anything() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Refund {
            payment_id: String,
            amount: f64,
        }
        for amount in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0] {
            let error = world
                .call_request(ActionRequest::new(
                    "stripe.refund",
                    &Refund {
                        payment_id: "pi_1".into(),
                        amount,
                    },
                ))
                .await
                .unwrap_err();
            assert_eq!(error.reason(), "invalid_arguments", "{amount}");
        }
        let error = world
            .call_request(ActionRequest::from_json_text(
                "stripe.refund",
                r#"{"payment_id":"pi_1","amount":9007199254740993}"#,
            ))
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "invalid_arguments");
        assert_eq!(world.calls(), 0);
        assert!(world.receipts().await.is_empty());
        assert!(world.store.effects(None).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn refuses_arguments_past_the_size_limit_before_hashing_or_writing_anything() {
    // B50 (d): a 64 MiB string argument, and an object with 1 000 000 keys, given in-process as
    // values to an action that asks a human (`notify`): refused as `too_large`, no approval
    // request, no receipt, the executor never runs.
    let world = World::new(Backend::Memory, REFUNDS);
    let huge = serde_json::json!({"text": "x".repeat(64 * 1024 * 1024)});
    let many: serde_json::Map<String, Value> = (0..1_000_000)
        .map(|index| (format!("k{index}"), Value::from(1)))
        .collect();
    for arguments in [huge, Value::Object(many)] {
        let error = world.call("notify", arguments).await.unwrap_err();
        assert_eq!(error.reason(), "invalid_arguments", "{error}");
        match &error {
            ControlError::InvalidArguments {
                source: CanonicalError::TooLarge { bytes, limit },
                ..
            } => {
                assert_eq!(*limit, crate::action::canonical::MAX_TEXT_BYTES);
                assert!(*bytes > *limit, "{bytes}");
            }
            other => panic!("{other:?}"),
        }
    }
    // Just under the limit is an ordinary call (it asks a human).
    let under =
        serde_json::json!({"text": "x".repeat(crate::action::canonical::MAX_TEXT_BYTES - 20)});
    let error = world.call("notify", under).await.unwrap_err();
    assert_eq!(error.reason(), "approval_required", "{error}");
    assert_eq!(world.calls(), 0);
    assert!(world.receipts().await.is_empty());
    assert_eq!(world.store.approvals(None).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_commit_note_set_by_the_executor_is_the_committed_records_detail() {
    // Case B50 (c): the call ran, and the executor notes what became of its result.
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let slot = crate::control::CommitNoteSlot::new();
        let note = "result not representable: withheld from the client; 120003 bytes, sha256:ab";
        let request =
            ActionRequest::new("log_ticket", &json!({"id": "t1"})).with_commit_note(slot.clone());
        let done = world
            .control
            .execute(request, |_| {
                let slot = slot.clone();
                async move {
                    slot.set(note);
                    Ok::<_, ExecutorError>("ran")
                }
            })
            .await
            .expect("committed");
        assert_eq!(done.receipt.outcome, ReceiptOutcome::Committed);
        assert_eq!(done.receipt.detail.as_deref(), Some(note));
        let key = EffectKey::new("ticket:t1").unwrap();
        let record = world.store.effect(&key).await.unwrap().expect("a record");
        assert_eq!(record.state, EffectState::Committed);
        assert_eq!(record.detail.as_deref(), Some(note));
        world.assert_chain_intact().await;
        // A note from an executor that then fails is not the failure's record.
        let slot = crate::control::CommitNoteSlot::new();
        let request =
            ActionRequest::new("log_ticket", &json!({"id": "t2"})).with_commit_note(slot.clone());
        let error = world
            .control
            .execute(request, |_| {
                let slot = slot.clone();
                async move {
                    slot.set("never recorded");
                    Err::<(), _>(ExecutorError::not_executed("refused upstream"))
                }
            })
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "not_executed");
        let receipts = world.receipts().await;
        assert_eq!(
            receipts.last().and_then(|r| r.detail.as_deref()),
            Some("refused upstream")
        );
    }
}

#[tokio::test]
async fn a_missing_template_field_is_refused_before_writing_anything() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let error = world
            .call("stripe.refund", json!({"amount": 5}))
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "bad_template");
        assert_eq!(world.calls(), 0);
        assert!(world.receipts().await.is_empty());
    }
}

#[tokio::test]
async fn no_principal_no_action() {
    let policy = Policy::from_yaml_str(REFUNDS, None).unwrap();
    let control = Control::builder(policy, MemoryStore::new()).build();
    let error = control
        .execute(ActionRequest::new("notify", &json!({})), |_| async {
            Ok::<_, ExecutorError>(())
        })
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "no_principal");
}

#[tokio::test]
async fn a_matching_answer_authorizes_exactly_one_run() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let arguments = json!({"payment_id": "pi_2", "amount": 70_000});
        let first = world
            .call("stripe.refund", arguments.clone())
            .await
            .unwrap_err();
        let id = request_id(&first);
        assert!(first.may_retry());
        assert_eq!(world.calls(), 0);
        // A waiting approval holds nothing: no receipt, no reservation.
        assert!(world.receipts().await.is_empty());
        assert!(world.store.effects(None).await.unwrap().is_empty());
        // Asking again does not create a second request.
        let again = world
            .call("stripe.refund", arguments.clone())
            .await
            .unwrap_err();
        assert_eq!(request_id(&again), id);
        assert_eq!(world.store.approvals(None).await.unwrap().len(), 1);

        world.approve(&id).await;
        let done = world
            .call("stripe.refund", arguments.clone())
            .await
            .unwrap();
        assert_eq!(done.receipt.approval_id.as_deref(), Some(id.as_str()));
        assert_eq!(done.receipt.approver.as_deref(), Some("human:alice"));
        assert_eq!(world.calls(), 1);
        let stored = world.store.approval(&id).await.unwrap().unwrap();
        assert_eq!(stored.state, ApprovalState::Consumed);

        let third = world.call("stripe.refund", arguments).await.unwrap_err();
        assert_eq!(third.reason(), "duplicate");
        assert_eq!(world.calls(), 1);
        world.assert_chain_intact().await;
    }
}

#[tokio::test]
async fn an_answer_about_other_arguments_authorizes_nothing() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let asked = world
            .call(
                "stripe.refund",
                json!({"payment_id": "pi_3", "amount": 70_000}),
            )
            .await
            .unwrap_err();
        let id = request_id(&asked);
        world.approve(&id).await;
        let other = ActionRequest::new(
            "stripe.refund",
            &json!({"payment_id": "pi_3", "amount": 900_000}),
        )
        .with_approval(id.clone());
        let error = world.call_request(other).await.unwrap_err();
        assert_eq!(error.reason(), "mismatch");
        assert_eq!(world.calls(), 0);
        // The grant still stands for what it was given for.
        assert_eq!(
            world.store.approval(&id).await.unwrap().unwrap().state,
            ApprovalState::Granted
        );
        let right = ActionRequest::new(
            "stripe.refund",
            &json!({"payment_id": "pi_3", "amount": 70_000}),
        )
        .with_approval(id);
        world.call_request(right).await.unwrap();
        assert_eq!(world.calls(), 1);
    }
}

#[tokio::test]
async fn an_answer_after_expiry_authorizes_nothing() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let asked = world.call("notify", json!({"to": "a"})).await.unwrap_err();
        let id = request_id(&asked);
        world.clock.advance(Duration::from_secs(15 * 60));
        let answer = world
            .control
            .answer(&id, AnswerDecision::Approve, "human:alice", None)
            .await
            .unwrap_err();
        assert_eq!(answer.reason(), "expired");
        assert_eq!(
            world.store.approval(&id).await.unwrap().unwrap().state,
            ApprovalState::Expired
        );
        // EXPIRED is sticky: a clock jumping back does not revive it (B32).
        world.clock.set(start());
        let again = world
            .control
            .answer(&id, AnswerDecision::Approve, "human:alice", None)
            .await
            .unwrap_err();
        assert_eq!(again.reason(), "expired");
        let presented = world
            .call_request(
                ActionRequest::new("notify", &json!({"to": "a"})).with_approval(id.clone()),
            )
            .await
            .unwrap_err();
        assert_eq!(presented.reason(), "expired");
        assert_eq!(world.calls(), 0);
        // The expiry is evidence with reason "expired", not "rejected" (B31).
        let trail = world.trail().await;
        assert_eq!(
            trail[0],
            (ReceiptOutcome::Expired, Some("expired".to_owned()))
        );
        assert!(
            trail
                .iter()
                .all(|(outcome, _)| *outcome != ReceiptOutcome::Denied)
        );
    }
}

#[tokio::test]
async fn expiry_has_no_skew_allowance() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let id = request_id(&world.call("notify", json!({"to": "b"})).await.unwrap_err());
        world.clock.advance(Duration::from_secs(15 * 60 - 1));
        world.approve(&id).await;
        world.clock.advance(Duration::from_millis(1_000));
        let error = world.call("notify", json!({"to": "b"})).await.unwrap_err();
        // The grant expired exactly at expires_at; a new request is opened.
        assert_eq!(error.reason(), "approval_required");
        assert_ne!(request_id(&error), id);
        assert_eq!(
            world.store.approval(&id).await.unwrap().unwrap().state,
            ApprovalState::Expired
        );
        assert_eq!(world.calls(), 0);
    }
}

#[tokio::test]
async fn first_answer_wins_and_an_identical_repeat_is_idempotent() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let id = request_id(&world.call("notify", json!({"to": "c"})).await.unwrap_err());
        world.approve(&id).await;
        world.approve(&id).await;
        let second = world
            .control
            .answer(&id, AnswerDecision::Deny, "human:bob", Some("no"))
            .await
            .unwrap_err();
        match second {
            AnswerError::AlreadyDecided {
                state, approver, ..
            } => {
                assert_eq!(state, ApprovalState::Granted);
                assert_eq!(approver.as_deref(), Some("human:alice"));
            }
            other => panic!("{other:?}"),
        }
        world.call("notify", json!({"to": "c"})).await.unwrap();
        let late = world
            .control
            .answer(&id, AnswerDecision::Deny, "human:bob", None)
            .await
            .unwrap_err();
        assert_eq!(late.reason(), "already_decided");
        assert_eq!(world.calls(), 1);
        let answers = world
            .trail()
            .await
            .into_iter()
            .filter(|(outcome, _)| *outcome == ReceiptOutcome::Granted)
            .count();
        assert_eq!(answers, 1);
    }
}

#[tokio::test]
async fn a_human_no_is_a_recorded_denial_and_the_same_call_is_not_asked_again() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let id = request_id(&world.call("notify", json!({"to": "d"})).await.unwrap_err());
        world
            .control
            .answer(
                &id,
                AnswerDecision::Deny,
                "human:alice",
                Some("wrong account"),
            )
            .await
            .unwrap();
        let error = world.call("notify", json!({"to": "d"})).await.unwrap_err();
        match &error {
            ControlError::ApprovalDenied {
                request_id, note, ..
            } => {
                assert_eq!(request_id, &id);
                assert_eq!(note.as_deref(), Some("wrong account"));
            }
            other => panic!("{other:?}"),
        }
        assert!(error.to_string().contains("\"wrong account\""), "{error}");
        // The unchanged re-issue is refused without a second prompt (B34).
        let again = world.call("notify", json!({"to": "d"})).await.unwrap_err();
        assert_eq!(again.reason(), "approval_denied");
        assert_eq!(world.store.approvals(None).await.unwrap().len(), 1);
        assert_eq!(world.calls(), 0);
        assert_eq!(
            world.trail().await,
            vec![
                (ReceiptOutcome::Denied, Some("rejected".to_owned())),
                refused("approval_denied"),
                refused("approval_denied")
            ]
        );
    }
}

#[tokio::test]
async fn a_caller_wait_ending_is_not_a_denial() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let request =
            ActionRequest::new("notify", &json!({"to": "e"})).with_wait(Duration::from_millis(120));
        let error = world.call_request(request).await.unwrap_err();
        let id = request_id(&error);
        assert_eq!(
            world.store.approval(&id).await.unwrap().unwrap().state,
            ApprovalState::Pending
        );
        world.clock.advance(Duration::from_secs(60));
        world.approve(&id).await;
        world.call("notify", json!({"to": "e"})).await.unwrap();
        assert_eq!(world.calls(), 1);
        assert!(
            world
                .trail()
                .await
                .iter()
                .all(|(outcome, _)| *outcome != ReceiptOutcome::Denied)
        );
    }
}

#[tokio::test]
async fn a_wait_sees_an_answer_given_meanwhile() {
    let world = World::new(Backend::Sqlite, REFUNDS);
    let control = world.control.clone();
    let store = Arc::clone(&world.store);
    let answerer = tokio::spawn(async move {
        loop {
            let pending = store.approvals(Some(ApprovalState::Pending)).await.unwrap();
            if let Some(record) = pending.first() {
                control
                    .answer(&record.id, AnswerDecision::Approve, "human:alice", None)
                    .await
                    .unwrap();
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let request =
        ActionRequest::new("notify", &json!({"to": "f"})).with_wait(Duration::from_secs(10));
    world.call_request(request).await.unwrap();
    answerer.await.unwrap();
    assert_eq!(world.calls(), 1);
}

#[tokio::test]
async fn a_lost_response_becomes_ambiguous_and_blocks_every_retry() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let arguments = json!({"payment_id": "pi_9", "amount": 500});
        let charges = Arc::new(AtomicUsize::new(0));
        let provider = Arc::clone(&charges);
        // The request goes out and the provider charges; the reply is lost.
        let error = world
            .control
            .execute(
                ActionRequest::new("stripe.refund", &arguments),
                |_| async move {
                    provider.fetch_add(1, Ordering::SeqCst);
                    Err::<(), _>(ExecutorError::may_have_run(
                        "read timed out after the request was sent",
                    ))
                },
            )
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "outcome_unknown");
        assert_eq!(error.did_run(), DidRun::Maybe);
        assert!(!error.may_retry());
        let key = EffectKey::new("refund:pi_9").unwrap();
        assert_eq!(
            world.store.effect(&key).await.unwrap().unwrap().state,
            EffectState::Ambiguous
        );
        // The identical call under a new invocation is refused, the executor never reached (B16).
        let retry = world
            .call("stripe.refund", arguments.clone())
            .await
            .unwrap_err();
        assert_eq!(retry.reason(), "ambiguous");
        assert_eq!(world.calls(), 0);
        // Reconciliation says it happened; the third try is a duplicate.
        world
            .control
            .resolve(
                &key,
                EffectState::Committed,
                "human:ops",
                Some("charge found"),
            )
            .await
            .unwrap();
        let third = world.call("stripe.refund", arguments).await.unwrap_err();
        assert_eq!(third.reason(), "duplicate");
        assert_eq!(charges.load(Ordering::SeqCst), 1);
        assert_eq!(world.calls(), 0);
        let record = world.store.effect(&key).await.unwrap().unwrap();
        assert_eq!(record.resolved_by.as_deref(), Some("human:ops"));
        world.assert_chain_intact().await;
    }
}

#[tokio::test]
async fn not_executed_permits_a_retry() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let arguments = json!({"payment_id": "pi_4", "amount": 500});
        let error = world
            .control
            .execute(ActionRequest::new("stripe.refund", &arguments), |_| async {
                Err::<(), _>(ExecutorError::not_executed(
                    "connection refused before sending",
                ))
            })
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "not_executed");
        assert!(error.may_retry());
        world.call("stripe.refund", arguments).await.unwrap();
        assert_eq!(world.calls(), 1);
        let record = world
            .store
            .effect(&EffectKey::new("refund:pi_4").unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!((record.state, record.attempts), (EffectState::Committed, 2));
    }
}

#[tokio::test]
async fn a_panic_is_ambiguous_and_reaches_the_caller_as_an_error() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let error = world
            .control
            .execute(
                ActionRequest::new("stripe.refund", &json!({"payment_id": "pi_5", "amount": 1})),
                |_| async {
                    if true {
                        panic!("boom");
                    }
                    Ok::<(), ExecutorError>(())
                },
            )
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "outcome_unknown");
        assert!(error.to_string().contains("boom"));
        let record = world
            .store
            .effect(&EffectKey::new("refund:pi_5").unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(record.state, EffectState::Ambiguous);
    }
}

#[tokio::test]
async fn a_timeout_is_ambiguous() {
    let world = World::new(Backend::Memory, REFUNDS);
    let request = ActionRequest::new("stripe.refund", &json!({"payment_id": "pi_6", "amount": 1}))
        .with_timeout(Duration::from_millis(20));
    let error = world
        .control
        .execute(request, |_| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<(), ExecutorError>(())
        })
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "outcome_unknown");
    let record = world
        .store
        .effect(&EffectKey::new("refund:pi_6").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.state, EffectState::Ambiguous);
}

#[tokio::test]
async fn a_dropped_attempt_is_recorded_ambiguous_before_settled_resolves() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let control = world.control.clone();
        let task = tokio::spawn(async move {
            control
                .execute(
                    ActionRequest::new(
                        "stripe.refund",
                        &json!({"payment_id": "pi_7", "amount": 1}),
                    ),
                    |_| async {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        Ok::<(), ExecutorError>(())
                    },
                )
                .await
        });
        let key = EffectKey::new("refund:pi_7").unwrap();
        while world.store.effect(&key).await.unwrap().is_none() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        task.abort();
        let _ = task.await;
        // No polling: `settled` is the promise that the record is written.
        world.control.settled().await.expect("recorded");
        assert_eq!(
            world.store.effect(&key).await.unwrap().unwrap().state,
            EffectState::Ambiguous,
            "{backend:?}"
        );
        let last = world.receipts().await.pop().unwrap();
        assert_eq!(
            (last.outcome, last.reason.as_deref()),
            (ReceiptOutcome::Ambiguous, Some("cancelled")),
            "{backend:?}"
        );
    }
}

#[tokio::test]
async fn settled_waits_for_the_record_of_a_dropped_attempt_while_another_process_holds_the_store() {
    let world = World::new(Backend::Sqlite, REFUNDS);
    let path = world._dir.as_ref().unwrap().path().join("test.db");
    let control = world.control.clone();
    let task = tokio::spawn(async move {
        control
            .execute(
                ActionRequest::new("stripe.refund", &json!({"payment_id": "pi_9", "amount": 1})),
                |_| async {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Ok::<(), ExecutorError>(())
                },
            )
            .await
    });
    let key = EffectKey::new("refund:pi_9").unwrap();
    while world.store.effect(&key).await.unwrap().is_none() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Another process holds the write lock: the record waits (asleep, retrying) until it lets go.
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    task.abort();
    let _ = task.await;
    assert_eq!(
        world.store.effect(&key).await.unwrap().unwrap().state,
        EffectState::Reserved,
        "not recorded yet: the lock is held"
    );
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        other.execute_batch("COMMIT").unwrap();
    });
    world.control.settled().await.expect("recorded");
    assert_eq!(
        world.store.effect(&key).await.unwrap().unwrap().state,
        EffectState::Ambiguous
    );
    release.join().unwrap();
}

#[tokio::test]
async fn an_expired_lease_becomes_ambiguous_and_is_never_released() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let key = EffectKey::new("refund:pi_8").unwrap();
        // A worker reserved the key and then died (no outcome recorded).
        let begin = BeginAttempt {
            attempt_id: crate::id::AttemptId::from_stored("att_dead".to_owned()),
            action_hash: ActionHash::from_stored("sha256:dead".into()),
            approval: None,
            effect: Some(EffectClaim {
                key: key.clone(),
                lease_until: world.clock.now().plus(DEFAULT_LEASE),
            }),
            context: None,
            refusal_draft: ReceiptDraft::default(),
        };
        assert!(matches!(
            world
                .store
                .begin_attempt(begin, world.clock.now())
                .await
                .unwrap(),
            BeginOutcome::Started { .. }
        ));
        let arguments = json!({"payment_id": "pi_8", "amount": 1});
        let live = world
            .call("stripe.refund", arguments.clone())
            .await
            .unwrap_err();
        assert_eq!(live.reason(), "in_progress");
        assert!(live.may_retry());
        world.clock.advance(DEFAULT_LEASE);
        let lapsed = world
            .call("stripe.refund", arguments.clone())
            .await
            .unwrap_err();
        assert_eq!(lapsed.reason(), "ambiguous");
        assert_eq!(
            world.store.effect(&key).await.unwrap().unwrap().state,
            EffectState::Ambiguous
        );
        assert_eq!(world.calls(), 0);
        let reasons: Vec<_> = world
            .trail()
            .await
            .into_iter()
            .map(|(_, reason)| reason.unwrap_or_default())
            .collect();
        assert_eq!(reasons, ["in_progress", "lease_expired", "ambiguous"]);
    }
}

#[tokio::test]
async fn resolve_only_from_ambiguous() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        world
            .call("stripe.refund", json!({"payment_id": "pi_10", "amount": 1}))
            .await
            .unwrap();
        let key = EffectKey::new("refund:pi_10").unwrap();
        let error = world
            .control
            .resolve(&key, EffectState::Failed, "human:ops", None)
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("`committed`, not ambiguous"),
            "{error}"
        );
        let unknown = world
            .control
            .resolve(
                &EffectKey::new("nope").unwrap(),
                EffectState::Failed,
                "human:ops",
                None,
            )
            .await
            .unwrap_err();
        assert!(
            unknown.to_string().contains("no effect has this key"),
            "{unknown}"
        );
    }
}

#[tokio::test]
async fn a_reconcile_hook_settles_ambiguity() {
    struct Hook(Reconciled);
    #[async_trait::async_trait]
    impl ReconcileHook for Hook {
        async fn reconcile(
            &self,
            _effect: &EffectRecord,
        ) -> Result<Reconciled, Box<dyn std::error::Error + Send + Sync>> {
            Ok(self.0)
        }
    }
    for (answer, expect_runs, expect_reason) in [
        (Reconciled::Failed, 1, None),
        (Reconciled::Committed, 0, Some("duplicate")),
        (Reconciled::Unknown, 0, Some("ambiguous")),
    ] {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let clock = ManualClock::new(start());
        let control = Control::builder_shared(
            Arc::new(Policy::from_yaml_str(REFUNDS, None).unwrap()),
            Arc::clone(&store),
        )
        .identity(StaticIdentity::new(Principal::new("agent:test").unwrap()))
        .clock(Arc::new(clock))
        .reconcile_hook(Arc::new(Hook(answer)))
        .build();
        let arguments = json!({"payment_id": "pi_11", "amount": 1});
        let _ = control
            .execute(ActionRequest::new("stripe.refund", &arguments), |_| async {
                Err::<(), _>(ExecutorError::may_have_run("lost"))
            })
            .await;
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&runs);
        let result = control
            .execute(
                ActionRequest::new("stripe.refund", &arguments),
                |_| async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), ExecutorError>(())
                },
            )
            .await;
        assert_eq!(runs.load(Ordering::SeqCst), expect_runs, "{answer:?}");
        assert_eq!(
            result.err().map(|error| error.reason()),
            expect_reason,
            "{answer:?}"
        );
    }
}

#[tokio::test]
async fn observe_mode_runs_everything_and_records_what_would_have_happened() {
    let policy = REFUNDS.replace("environment: test", "environment: test\nmode: observe");
    for backend in BACKENDS {
        let world = World::new(backend, &policy);
        world.call("stripe.charge", json!({})).await.unwrap();
        world.call("notify", json!({"to": "x"})).await.unwrap();
        world
            .call("stripe.refund", json!({"payment_id": "p", "amount": 1}))
            .await
            .unwrap();
        world
            .call("stripe.refund", json!({"payment_id": "p", "amount": 1}))
            .await
            .unwrap();
        assert_eq!(world.calls(), 4);
        let trail = world.trail().await;
        let observed = |reason: &str| (ReceiptOutcome::Observed, Some(reason.to_owned()));
        assert_eq!(
            trail,
            vec![
                observed("would_deny_unknown_action"),
                observed("would_require_approval"),
                observed("would_allow"),
                observed("would_allow")
            ]
        );
        assert!(!needs_approval(&world.control, "notify", &json!({"to": "x"})).unwrap());
    }
}

#[tokio::test]
async fn needs_approval_follows_policy_and_writes_nothing() {
    let world = World::new(Backend::Memory, REFUNDS);
    assert!(needs_approval(&world.control, "notify", &json!({"to": "x"})).unwrap());
    assert!(
        !needs_approval(
            &world.control,
            "stripe.refund",
            &json!({"payment_id": "p", "amount": 1})
        )
        .unwrap()
    );
    assert!(!needs_approval(&world.control, "unknown", &json!({})).unwrap());
    assert!(world.receipts().await.is_empty());
    assert!(world.store.approvals(None).await.unwrap().is_empty());
}

/// B05: a parked approval and a policy change.
#[tokio::test]
async fn a_changed_policy_voids_a_parked_approval_but_an_unrelated_change_does_not() {
    let v1 = "schema: countersign.policy/v1\nactions:\n  transfer:\n    rules:\n      - when: { amount: { lte: 1000 } }\n        decision: approve\n  other:\n    decision: allow\n";
    let deny = "schema: countersign.policy/v1\nactions:\n  transfer:\n    decision: deny\n  other:\n    decision: allow\n";
    let stricter = "schema: countersign.policy/v1\nactions:\n  transfer:\n    approval_ttl: 5m\n    rules:\n      - when: { amount: { lte: 1000 } }\n        decision: approve\n  other:\n    decision: allow\n";
    let unrelated = v1.replace("other:\n    decision: allow", "other:\n    decision: deny");
    let arguments = json!({"amount": 500, "to": "acct-1"});
    for backend in BACKENDS {
        // (a) now denied: not executed.
        let mut world = World::new(backend, v1);
        let id = request_id(&world.call("transfer", arguments.clone()).await.unwrap_err());
        world.approve(&id).await;
        world.replace_policy(deny);
        let error = world
            .call_request(ActionRequest::new("transfer", &arguments).with_approval(id.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                ControlError::ActionDenied {
                    reason: crate::DenyReason::PolicyChanged,
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(world.calls(), 0);
        // Void, not consumed; the evidence says why.
        assert_eq!(
            world.store.approval(&id).await.unwrap().unwrap().state,
            ApprovalState::Void
        );
        let trail = world.trail().await;
        assert_eq!(
            trail[trail.len() - 2..],
            [
                (ReceiptOutcome::Voided, Some("policy_changed".to_owned())),
                refused("policy_changed")
            ]
        );

        // (b) the action's rules changed: the old approval is void, a new request is raised.
        let mut world = World::new(backend, v1);
        let id = request_id(&world.call("transfer", arguments.clone()).await.unwrap_err());
        world.approve(&id).await;
        world.replace_policy(stricter);
        let error = world
            .call_request(ActionRequest::new("transfer", &arguments).with_approval(id.clone()))
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "policy_changed");
        assert_eq!(
            world.store.approval(&id).await.unwrap().unwrap().state,
            ApprovalState::Void
        );
        let fresh = world.call("transfer", arguments.clone()).await.unwrap_err();
        assert_ne!(request_id(&fresh), id);
        assert_eq!(world.calls(), 0);

        // (c) only another action changed: executed once, and the receipt names both hashes.
        let mut world = World::new(backend, v1);
        let v1_hash = world.control.policy().hash().to_owned();
        let id = request_id(&world.call("transfer", arguments.clone()).await.unwrap_err());
        world.approve(&id).await;
        world.replace_policy(&unrelated);
        let done = world.call("transfer", arguments.clone()).await.unwrap();
        assert_eq!(world.calls(), 1);
        assert_eq!(
            done.receipt.approval_policy_hash.as_deref(),
            Some(v1_hash.as_str())
        );
        assert_ne!(done.receipt.policy_hash.as_deref(), Some(v1_hash.as_str()));
    }
}

/// B17: a volatile, secret field neither changes the effect key nor reaches the evidence.
#[tokio::test]
async fn secret_arguments_stay_out_of_keys_and_evidence() {
    let policy = "schema: countersign.policy/v1\nactions:\n  pay:\n    effect: \"pay:{order}\"\n    secret_arguments: [auth_token]\n    decision: allow\n";
    for backend in BACKENDS {
        let world = World::new(backend, policy);
        world
            .call(
                "pay",
                json!({"order": "o1", "amount": 700, "auth_token": "t-1"}),
            )
            .await
            .unwrap();
        let second = world
            .call(
                "pay",
                json!({"order": "o1", "amount": 700, "auth_token": "t-2"}),
            )
            .await
            .unwrap_err();
        assert_eq!(second.reason(), "duplicate");
        assert_eq!(world.calls(), 1);
        for stored in world.store.receipts(0, 100).await.unwrap() {
            assert!(
                !stored.body.contains("t-1") && !stored.body.contains("t-2"),
                "{}",
                stored.body
            );
        }
    }
}

#[tokio::test]
async fn protect_wraps_a_typed_async_function() {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Refund {
        payment_id: String,
        amount: u64,
    }
    let world = World::new(Backend::Memory, REFUNDS);
    let refund = world
        .control
        .protect("stripe.refund", |refund: Refund| async move {
            Ok::<_, ExecutorError>(format!("{} refunded {}", refund.payment_id, refund.amount))
        });
    let done = refund
        .call(&Refund {
            payment_id: "pi_20".into(),
            amount: 10,
        })
        .await
        .unwrap();
    assert_eq!(done.value, "pi_20 refunded 10");
    let again = refund
        .call(&Refund {
            payment_id: "pi_20".into(),
            amount: 10,
        })
        .await
        .unwrap_err();
    assert_eq!(again.reason(), "duplicate");
    let big = refund
        .call(&Refund {
            payment_id: "pi_21".into(),
            amount: 60_000,
        })
        .await
        .unwrap_err();
    let id = request_id(&big);
    world.approve(&id).await;
    let done = refund
        .call_with_approval(
            &Refund {
                payment_id: "pi_21".into(),
                amount: 60_000,
            },
            id,
        )
        .await
        .unwrap();
    assert_eq!(done.value, "pi_21 refunded 60000");
}

#[tokio::test]
async fn an_approval_is_consumed_once_even_when_presented_twice() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let id = request_id(&world.call("notify", json!({"to": "z"})).await.unwrap_err());
        world.approve(&id).await;
        let first = world
            .call_request(
                ActionRequest::new("notify", &json!({"to": "z"})).with_approval(id.clone()),
            )
            .await;
        assert!(first.is_ok());
        let replay = world
            .call_request(
                ActionRequest::new("notify", &json!({"to": "z"})).with_approval(id.clone()),
            )
            .await
            .unwrap_err();
        assert_eq!(replay.reason(), "consumed");
        let unknown = world
            .call_request(
                ActionRequest::new("notify", &json!({"to": "z"}))
                    .with_approval(ApprovalId::parse("apr_aaaaaaaaaaaaaaaaaaaa").unwrap()),
            )
            .await
            .unwrap_err();
        assert_eq!(unknown.reason(), "unknown_request");
        assert_eq!(world.calls(), 1);
    }
}

#[tokio::test]
async fn nobody_is_asked_about_an_effect_that_would_be_refused() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        world
            .call("stripe.refund", json!({"payment_id": "pi_30", "amount": 1}))
            .await
            .unwrap();
        let asked = world
            .call(
                "stripe.refund",
                json!({"payment_id": "pi_30", "amount": 70_000}),
            )
            .await
            .unwrap_err();
        assert_eq!(asked.reason(), "duplicate");
        assert!(world.store.approvals(None).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn a_refused_reservation_leaves_the_approval_granted() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let arguments = json!({"payment_id": "pi_31", "amount": 70_000});
        let id = request_id(
            &world
                .call("stripe.refund", arguments.clone())
                .await
                .unwrap_err(),
        );
        world.approve(&id).await;
        // Another call commits the same effect key first.
        world
            .call("stripe.refund", json!({"payment_id": "pi_31", "amount": 1}))
            .await
            .unwrap();
        let error = world
            .call_request(ActionRequest::new("stripe.refund", &arguments).with_approval(id.clone()))
            .await
            .unwrap_err();
        assert_eq!(error.reason(), "duplicate");
        assert_eq!(
            world.store.approval(&id).await.unwrap().unwrap().state,
            ApprovalState::Granted
        );
        assert_eq!(world.calls(), 1);
    }
}

/// B23 end to end: each fake's outcome decides whether the retry reaches the executor.
#[tokio::test]
async fn only_a_definite_failure_lets_the_retry_run() {
    use crate::effect::classify_http_failure;
    let cases = [
        ("a", false, None, false, false, true),
        ("b", true, Some(400), false, false, true),
        ("c", true, Some(504), false, false, false),
        ("d-trusted", true, Some(503), true, true, true),
        ("d-untrusted", true, Some(503), true, false, false),
    ];
    for backend in BACKENDS {
        for (name, sent, status, marker, trusted, retry_runs) in cases {
            let world = World::new(backend, REFUNDS);
            let arguments = json!({"payment_id": format!("pi_b23_{name}"), "amount": 1});
            let first = world
                .control
                .execute(
                    ActionRequest::new("stripe.refund", &arguments),
                    |_| async move {
                        Err::<(), _>(classify_http_failure(sent, status, marker, trusted))
                    },
                )
                .await
                .unwrap_err();
            let expected_state = if retry_runs {
                EffectState::Failed
            } else {
                EffectState::Ambiguous
            };
            let key = EffectKey::new(format!("refund:pi_b23_{name}")).unwrap();
            assert_eq!(
                world.store.effect(&key).await.unwrap().unwrap().state,
                expected_state,
                "{name}"
            );
            assert_eq!(first.may_retry(), retry_runs, "{name}");
            let retry = world.call("stripe.refund", arguments).await;
            assert_eq!(retry.is_ok(), retry_runs, "{name} on {backend:?}");
            assert_eq!(world.calls(), usize::from(retry_runs), "{name}");
        }
    }
}

/// B30: approve and reject race; exactly one decision is stored, later ones are refused with
/// it, and the executor runs at most once.
#[tokio::test]
async fn concurrent_answers_have_one_winner() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let id = request_id(
            &world
                .call("notify", json!({"to": "race"}))
                .await
                .unwrap_err(),
        );
        let mut tasks = Vec::new();
        for n in 0..8 {
            let control = world.control.clone();
            let id = id.clone();
            let decision = if n % 2 == 0 {
                AnswerDecision::Approve
            } else {
                AnswerDecision::Deny
            };
            tasks.push(tokio::spawn(async move {
                control
                    .answer(&id, decision, &format!("human:{n}"), None)
                    .await
                    .map(|record| record.state)
            }));
        }
        let mut stored = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                Ok(state) => stored.push(state),
                Err(AnswerError::AlreadyDecided { state, .. }) => stored.push(state),
                Err(other) => panic!("{other:?}"),
            }
        }
        // Every caller saw the same single decision.
        assert!(
            stored.windows(2).all(|pair| pair[0] == pair[1]),
            "{stored:?}"
        );
        let decisions = world
            .trail()
            .await
            .into_iter()
            .filter(|(outcome, _)| {
                matches!(outcome, ReceiptOutcome::Granted | ReceiptOutcome::Denied)
            })
            .count();
        assert_eq!(decisions, 1);
        let _ = world.call("notify", json!({"to": "race"})).await;
        let _ = world.call("notify", json!({"to": "race"})).await;
        assert!(world.calls() <= 1);
    }
}

/// A framework interrupt scripted to answer with fixed arguments (or to pause the run).
struct ScriptedInterrupt {
    answer: Option<(AnswerDecision, Option<Value>)>,
    asked: AtomicUsize,
    /// Who the answer names (default `human:alice`).
    approver: Option<&'static str>,
}

#[async_trait::async_trait]
impl crate::approval::FrameworkInterrupt for ScriptedInterrupt {
    fn framework(&self) -> &str {
        "scripted"
    }

    fn carries_approved_arguments(&self) -> bool {
        true
    }

    async fn interrupt(
        &self,
        pending: crate::approval::PendingApproval,
    ) -> Result<crate::approval::ApprovalAnswer, crate::approval::InterruptError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        match &self.answer {
            None => Err(crate::approval::InterruptError::Suspended),
            Some((decision, arguments)) => Ok(crate::approval::ApprovalAnswer {
                decision: *decision,
                // `verified:NAME` plays an adapter that claims to vouch for NAME itself.
                approver: match self
                    .approver
                    .unwrap_or("human:alice")
                    .strip_prefix("verified:")
                {
                    Some(id) => crate::approver::Credential::Verified {
                        id: id.to_owned(),
                        groups: Vec::new(),
                        authentication: crate::approver::Authentication::Oidc,
                    },
                    None => self.approver.unwrap_or("human:alice").into(),
                },
                shown_hash: Some(pending.action_hash.clone()),
                note: None,
                arguments: arguments.clone(),
            }),
        }
    }
}

fn world_with_interrupt(
    answer: Option<(AnswerDecision, Option<Value>)>,
) -> (World, Arc<ScriptedInterrupt>) {
    world_with_interrupt_as(answer, None)
}

fn world_with_interrupt_as(
    answer: Option<(AnswerDecision, Option<Value>)>,
    approver: Option<&'static str>,
) -> (World, Arc<ScriptedInterrupt>) {
    let world = World::new(Backend::Sqlite, REFUNDS);
    let interrupt = Arc::new(ScriptedInterrupt {
        answer,
        asked: AtomicUsize::new(0),
        approver,
    });
    let clock: Arc<dyn Clock> = Arc::new(world.clock.clone());
    let provider = crate::control::InterruptApprovalProvider::new(
        Arc::clone(&world.store),
        interrupt.clone(),
        Arc::clone(&clock),
    );
    let control = Control::builder_shared(
        Arc::new(Policy::from_yaml_str(REFUNDS, None).unwrap()),
        Arc::clone(&world.store),
    )
    .identity(StaticIdentity::new(Principal::new("agent:test").unwrap()))
    .clock(clock)
    .approval_provider(Arc::new(provider))
    .build();
    (World { control, ..world }, interrupt)
}

#[tokio::test]
async fn an_interrupt_answer_about_the_shown_arguments_authorizes_the_call() {
    let (world, interrupt) =
        world_with_interrupt(Some((AnswerDecision::Approve, Some(json!({"to": "a"})))));
    let done = world.call("notify", json!({"to": "a"})).await.unwrap();
    assert_eq!(done.receipt.approver.as_deref(), Some("human:alice"));
    assert_eq!(
        (world.calls(), interrupt.asked.load(Ordering::SeqCst)),
        (1, 1)
    );
}

#[tokio::test]
async fn an_interrupt_answer_about_other_arguments_is_refused_and_recorded() {
    let (world, _) =
        world_with_interrupt(Some((AnswerDecision::Approve, Some(json!({"to": "b"})))));
    let error = world.call("notify", json!({"to": "a"})).await.unwrap_err();
    assert_eq!(error.reason(), "mismatch");
    assert_eq!(world.calls(), 0);
    // No grant was written, and the ended attempt left its receipt.
    let requests = world.store.approvals(None).await.unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].state, ApprovalState::Pending);
    assert_eq!(world.trail().await, vec![refused("mismatch")]);
}

#[tokio::test]
async fn a_suspended_interrupt_leaves_the_request_pending() {
    let (world, interrupt) = world_with_interrupt(None);
    let error = world.call("notify", json!({"to": "a"})).await.unwrap_err();
    let id = request_id(&error);
    assert_eq!(
        world.store.approval(&id).await.unwrap().unwrap().state,
        ApprovalState::Pending
    );
    // The replayed pass asks again about the same request; it never creates a second one.
    let again = world.call("notify", json!({"to": "a"})).await.unwrap_err();
    assert_eq!(request_id(&again), id);
    assert_eq!(interrupt.asked.load(Ordering::SeqCst), 2);
    assert!(world.receipts().await.is_empty());
}

/// Decided-before-invocation adapters open the request at the pause, before anything runs.
#[tokio::test]
async fn request_approval_opens_one_request_per_hash_and_runs_nothing() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let allowed =
            ActionRequest::new("stripe.refund", &json!({"payment_id": "p1", "amount": 1}));
        assert!(
            world
                .control
                .request_approval(&allowed)
                .await
                .unwrap()
                .is_none()
        );
        let unknown = ActionRequest::new("stripe.charge", &json!({}));
        assert!(
            world
                .control
                .request_approval(&unknown)
                .await
                .unwrap()
                .is_none()
        );

        let needs = ActionRequest::new("notify", &json!({"to": "q"}));
        let first = world
            .control
            .request_approval(&needs)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.state, ApprovalState::Pending);
        let second = world
            .control
            .request_approval(&needs)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(second.id, first.id);
        world.approve(&first.id).await;
        let granted = world
            .control
            .request_approval(&needs)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (granted.id.clone(), granted.state),
            (first.id.clone(), ApprovalState::Granted)
        );
        // The attempt that later runs takes the grant by hash, once.
        world.call("notify", json!({"to": "q"})).await.unwrap();
        assert_eq!(world.calls(), 1);
        assert!(
            world
                .receipts()
                .await
                .iter()
                .all(|receipt| receipt.kind != ReceiptKind::Attempt
                    || receipt.outcome == ReceiptOutcome::Committed)
        );
    }
}

#[tokio::test]
async fn the_principal_that_asked_cannot_answer_its_own_request() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let id = request_id(&world.call("notify", json!({"to": "s"})).await.unwrap_err());
        let principal = world.store.approval(&id).await.unwrap().unwrap().principal;
        for decision in [AnswerDecision::Approve, AnswerDecision::Deny] {
            let refused = world
                .control
                .answer(&id, decision, &principal, None)
                .await
                .unwrap_err();
            assert_eq!(refused.reason(), "self_approval", "{refused}");
            assert!(
                refused.to_string().contains("a different identity"),
                "{refused}"
            );
        }
        // Nothing was recorded: the request still waits, and the call still needs a person.
        let stored = world.store.approval(&id).await.unwrap().unwrap();
        assert_eq!(stored.state, ApprovalState::Pending);
        assert_eq!(
            world
                .call("notify", json!({"to": "s"}))
                .await
                .unwrap_err()
                .reason(),
            "approval_required"
        );
        assert_eq!(world.calls(), 0);
    }
}

#[tokio::test]
async fn an_adapter_cannot_vouch_for_an_identity() {
    let (world, _) = world_with_interrupt_as(
        Some((AnswerDecision::Approve, Some(json!({"to": "a"})))),
        Some("verified:human:alice"),
    );
    let error = world.call("notify", json!({"to": "a"})).await.unwrap_err();
    assert_eq!(error.reason(), "not_authenticated", "{error}");
    assert!(error.to_string().contains("cannot vouch"), "{error}");
    assert_eq!(world.calls(), 0);
    let requests = world.store.approvals(None).await.unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].state, crate::ApprovalState::Pending);
    assert!(requests[0].answers.is_empty());
}

#[tokio::test]
async fn an_interrupt_answering_as_the_principal_authorizes_nothing() {
    let (world, _) = world_with_interrupt_as(
        Some((AnswerDecision::Approve, Some(json!({"to": "a"})))),
        Some("agent:test"),
    );
    let error = world.call("notify", json!({"to": "a"})).await.unwrap_err();
    assert_eq!(error.reason(), "self_approval", "{error}");
    assert!(
        error.to_string().contains("the principal that asked"),
        "{error}"
    );
    assert_eq!(world.calls(), 0);
    let requests = world.store.approvals(None).await.unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].state, ApprovalState::Pending);
}

#[tokio::test]
async fn an_edited_or_deleted_effect_row_disagrees_with_its_receipts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.db");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    let world = World::with_store(store, REFUNDS, Some(dir));
    for payment in ["pi_1", "pi_2", "pi_3"] {
        world
            .call(
                "stripe.refund",
                json!({"payment_id": payment, "amount": 10}),
            )
            .await
            .unwrap();
    }
    let intact = crate::audit::cross_check_effects(world.store.as_ref())
        .await
        .unwrap();
    assert_eq!((intact.checked, intact.disagreements.len()), (3, 0));

    // Someone with write access to the file flips one outcome and deletes another row: either
    // would let the effect run again, and neither touches the hash-chained receipts.
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute(
        "UPDATE effects SET state = 'failed' WHERE key = 'refund:pi_1'",
        [],
    )
    .unwrap();
    raw.execute("DELETE FROM effects WHERE key = 'refund:pi_2'", [])
        .unwrap();
    // A committed effect set back to reserved blocks it (its lapsed lease reads as ambiguous),
    // and is just as much an edit.
    raw.execute(
        "UPDATE effects SET state = 'reserved' WHERE key = 'refund:pi_3'",
        [],
    )
    .unwrap();
    drop(raw);
    let check = crate::audit::cross_check_effects(world.store.as_ref())
        .await
        .unwrap();
    assert_eq!(check.checked, 2);
    let found: Vec<String> = check
        .disagreements
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        found,
        [
            "effect `refund:pi_1` is `failed` in the effects table, but its receipts end `committed`: the table or the receipts were edited",
            "effect `refund:pi_2` has no row in the effects table, but its receipts end `committed`: the row was deleted (so the effect could run again), or the receipts were forged",
            "effect `refund:pi_3` is `reserved` in the effects table, but its receipts end `committed`: the table or the receipts were edited",
        ]
    );
    // The chain itself is intact: only the cross-check sees it.
    let chain = crate::audit::verify_store(world.store.as_ref(), None)
        .await
        .unwrap();
    assert!(chain.first_break.is_none());
}

#[tokio::test]
async fn effects_agree_with_receipts_through_failure_ambiguity_and_resolution() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        // A definite failure, then a retry that commits.
        let failed = world
            .control
            .execute(
                ActionRequest::new(
                    "stripe.refund",
                    &json!({"payment_id": "pi_f", "amount": 10}),
                ),
                |_| async { Err::<String, _>(ExecutorError::not_executed("card network down")) },
            )
            .await;
        assert!(failed.is_err());
        world
            .call("stripe.refund", json!({"payment_id": "pi_f", "amount": 10}))
            .await
            .unwrap();
        // An unknown outcome, resolved by a person.
        let lost = world
            .control
            .execute(
                ActionRequest::new(
                    "stripe.refund",
                    &json!({"payment_id": "pi_a", "amount": 10}),
                ),
                |_| async { Err::<String, _>(ExecutorError::may_have_run("connection reset")) },
            )
            .await;
        assert!(lost.is_err());
        let before = crate::audit::cross_check_effects(world.store.as_ref())
            .await
            .unwrap();
        assert_eq!(
            (before.checked, before.disagreements.len()),
            (2, 0),
            "{backend:?}"
        );
        world
            .control
            .resolve(
                &crate::EffectKey::new("refund:pi_a").unwrap(),
                crate::EffectState::Committed,
                "human:ops",
                None,
            )
            .await
            .unwrap();
        let after = crate::audit::cross_check_effects(world.store.as_ref())
            .await
            .unwrap();
        assert_eq!(
            (after.checked, after.disagreements.len()),
            (2, 0),
            "{backend:?}"
        );
    }
}

#[tokio::test]
async fn a_granted_approval_row_must_be_backed_by_its_receipts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.db");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    let world = World::with_store(store, REFUNDS, Some(dir));
    // Used: asked, approved, run once.
    let used = request_id(&world.call("notify", json!({"to": "u"})).await.unwrap_err());
    world.approve(&used).await;
    world.call("notify", json!({"to": "u"})).await.unwrap();
    // Answered and not yet used: a legitimate grant.
    let waiting = request_id(&world.call("notify", json!({"to": "w"})).await.unwrap_err());
    world.approve(&waiting).await;
    // Never answered.
    let unanswered = request_id(&world.call("notify", json!({"to": "n"})).await.unwrap_err());
    let intact = crate::audit::cross_check_approvals(world.store.as_ref())
        .await
        .unwrap();
    assert_eq!((intact.checked, intact.disagreements.len()), (1, 0));

    // A used grant set back to granted (a replay), and an unanswered request set to granted (a
    // forged approval): both would authorize an action no person approved now.
    let raw = rusqlite::Connection::open(&path).unwrap();
    for id in [&used, &unanswered] {
        raw.execute(
            "UPDATE approvals SET state = 'granted' WHERE id = ?1",
            [id.as_str()],
        )
        .unwrap();
    }
    drop(raw);
    let check = crate::audit::cross_check_approvals(world.store.as_ref())
        .await
        .unwrap();
    assert_eq!(check.checked, 3);
    let mut found: Vec<(String, Option<&str>)> = check
        .disagreements
        .iter()
        .map(|d| (d.request_id.clone(), d.receipts))
        .collect();
    found.sort();
    let mut want = vec![
        (used.as_str().to_owned(), Some("consumed")),
        (unanswered.as_str().to_owned(), None),
    ];
    want.sort();
    assert_eq!(found, want);
}

/// Issue #27: a caller's reason to ask (an MCP tool's `destructiveHint`) raises only a pattern
/// entry's `allow`; an exact entry, a `deny` and an `approve` stay as the policy says, and the
/// receipt of the raised attempt records `raised_by`.
#[tokio::test]
async fn a_raise_only_tightens_a_pattern_allow_and_is_recorded() {
    const TOOLS: &str = r#"
schema: countersign.policy/v1
environment: test
actions:
  "mcp.files.*":
    decision: allow
  mcp.files.read:
    decision: allow
  "mcp.files.rm_*":
    decision: deny
"#;
    use crate::policy::Raise;
    for backend in BACKENDS {
        let world = World::new(backend, TOOLS);
        let raised = |name: &str| {
            ActionRequest::new(name, &json!({"path": "a"})).with_raise(Raise::DestructiveHint)
        };
        // An exact entry is never changed.
        let exact = world.call_request(raised("mcp.files.read")).await.unwrap();
        assert_eq!(exact.receipt.raised_by, None);
        assert_eq!(exact.receipt.decision.as_deref(), Some("allow"));
        // A deny stays a deny.
        let denied = world
            .call_request(raised("mcp.files.rm_rf"))
            .await
            .unwrap_err();
        assert_eq!(denied.reason(), "denied");
        // A pattern's allow without the raise runs.
        world
            .call("mcp.files.touch", json!({"path": "a"}))
            .await
            .unwrap();
        assert_eq!(world.calls(), 2);
        // With it, a human must approve first; then the identical call runs once.
        let paused = world
            .call_request(raised("mcp.files.write"))
            .await
            .unwrap_err();
        assert_eq!(world.calls(), 2, "nothing ran before approval");
        let id = request_id(&paused);
        world.approve(&id).await;
        let done = world.call_request(raised("mcp.files.write")).await.unwrap();
        assert_eq!(world.calls(), 3);
        assert_eq!(done.receipt.raised_by.as_deref(), Some("destructiveHint"));
        assert_eq!(done.receipt.decision.as_deref(), Some("approve"));
        assert_eq!(done.receipt.approval_id.as_deref(), Some(id.as_str()));
        world.assert_chain_intact().await;
    }
}

/// Issue #27: the tool's input schema is part of the action, so a changed schema is another
/// action; the requests opened for the old one are voided `tool_changed`, and the new call
/// asks again.
#[tokio::test]
async fn a_changed_tool_schema_is_another_action_and_voids_the_old_request() {
    for backend in BACKENDS {
        let world = World::new(backend, REFUNDS);
        let old = json!({"type": "object", "properties": {"to": {"type": "string"}}});
        let new = json!({"type": "object", "properties": {"to": {"type": "string"}, "cc": {"type": "string"}}});
        let call = |schema: &Value| {
            ActionRequest::new("notify", &json!({"to": "a"})).with_tool_schema(schema)
        };
        let first = world.call_request(call(&old)).await.unwrap_err();
        let old_id = request_id(&first);
        // The same schema, written in another key order, is the same action.
        let reordered = json!({"properties": {"to": {"type": "string"}}, "type": "object"});
        let again = world.call_request(call(&reordered)).await.unwrap_err();
        assert_eq!(request_id(&again), old_id);
        // Nothing to void while the schema is the one asked about.
        let none = world
            .control
            .void_for_changed_tool("notify", &old, "gateway:test")
            .await
            .unwrap();
        assert!(none.is_empty());
        world.approve(&old_id).await;

        // The schema changes: the granted, unused request is void, and the call asks anew.
        let voided = world
            .control
            .void_for_changed_tool("notify", &new, "gateway:test")
            .await
            .unwrap();
        assert_eq!(voided, std::slice::from_ref(&old_id));
        let record = world.store.approval(&old_id).await.unwrap().unwrap();
        assert_eq!(record.state, ApprovalState::Void);
        let trail = world.trail().await;
        assert_eq!(
            trail.last(),
            Some(&(ReceiptOutcome::Voided, Some("tool_changed".to_owned())))
        );
        let asked = world.call_request(call(&new)).await.unwrap_err();
        assert_ne!(request_id(&asked), old_id);
        assert_eq!(world.calls(), 0);
        // Presenting the voided approval authorizes nothing.
        let presented = world
            .call_request(call(&new).with_approval(old_id.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(presented.reason(), "mismatch" | "policy_changed"),
            "{presented:?}"
        );
        assert_eq!(world.calls(), 0);
        world.assert_chain_intact().await;
    }
}
