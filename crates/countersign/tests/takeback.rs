//! Taking it back (issue #31), end to end through every store: revoking a grant not yet used,
//! withdrawing one yes from a pending quorum, the operator cancelling a request (or a whole
//! run), every refusal, and the races (revoke against consume, cancel against answer) between
//! two separate store connections.
//!
//! PostgreSQL reads `COUNTERSIGN_TEST_POSTGRES_URL` and fails loudly without it (run
//! `.ci/postgres.sh`).

mod support;

use std::sync::Arc;

use countersign::approval::withdraw::{Withdrawal, WithdrawalKind};
use countersign::approver::{Channel, Credential};
use countersign::audit;
use countersign::evidence::{ReceiptKind, ReceiptOutcome};
use countersign::store::{self, MemoryStore, SqliteStore, Store};
use countersign::{
    ActionRequest, AnswerDecision, AnswerError, ApprovalId, ApprovalRecord, ApprovalState, Clock,
    Control, ControlError, ExecutorError, ManualClock, Policy, Principal, Receipt, StaticIdentity,
    Timestamp,
};
use serde_json::json;

const POLICY: &str = r#"schema: countersign.policy/v1
environment: test
directory:
  human:alice: [finance]
  human:bob: [finance]
  human:carol: [finance]
actions:
  refund:
    effect: "refund:{id}"
    rules:
      - when: { amount: { lte: 100 } }
        decision: approve
      - decision: approve
        approval: { approvers: ["group:finance"], quorum: 2 }
"#;

/// A store reached through one or two separate connections (the second for the races).
struct Backend {
    first: Arc<dyn Store>,
    second: Arc<dyn Store>,
    _folder: Option<tempfile::TempDir>,
}

async fn backends() -> Vec<Backend> {
    let memory: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join("takeback.db");
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("sqlite"));
    let sqlite_again: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("sqlite again"));
    let url = support::fresh_postgres_url("takeback");
    let postgres = store::open_url_async(&url)
        .await
        .expect("the PostgreSQL store opens");
    let postgres_again = store::open_url_async(&url)
        .await
        .expect("a second PostgreSQL connection opens");
    vec![
        Backend {
            first: Arc::clone(&memory),
            second: memory,
            _folder: None,
        },
        Backend {
            first: sqlite,
            second: sqlite_again,
            _folder: Some(folder),
        },
        Backend {
            first: postgres,
            second: postgres_again,
            _folder: None,
        },
    ]
}

struct World {
    control: Control,
    /// The same store through its second connection.
    other: Control,
    store: Arc<dyn Store>,
    _backend: Backend,
}

fn control(store: Arc<dyn Store>, clock: Arc<ManualClock>) -> Control {
    Control::builder_shared(
        Arc::new(Policy::from_yaml_str(POLICY, None).expect("policy")),
        store,
    )
    .identity(StaticIdentity::new(
        Principal::new("agent:support-bot").expect("principal"),
    ))
    .clock(clock as Arc<dyn Clock>)
    .build()
}

async fn worlds() -> Vec<World> {
    backends()
        .await
        .into_iter()
        .map(|backend| {
            let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_790_000_000_000)));
            World {
                control: control(Arc::clone(&backend.first), Arc::clone(&clock)),
                other: control(Arc::clone(&backend.second), clock),
                store: Arc::clone(&backend.first),
                _backend: backend,
            }
        })
        .collect()
}

fn refund(id: &str, amount: u64) -> ActionRequest {
    ActionRequest::new("refund", &json!({ "id": id, "amount": amount }))
}

impl World {
    fn name(&self) -> &'static str {
        self.store.backend()
    }

    async fn call(&self, request: ActionRequest) -> Result<&'static str, ControlError> {
        self.control
            .execute(request, |_| async { Ok::<_, ExecutorError>("refunded") })
            .await
            .map(|done| done.value)
    }

    async fn request(&self, id: &str, amount: u64) -> ApprovalId {
        match self.call(refund(id, amount)).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected approval_required, got {other:?}"),
        }
    }

    async fn granted(&self, id: &str) -> ApprovalId {
        let request = self.request(id, 50).await;
        self.control
            .answer(&request, AnswerDecision::Approve, "human:alice", None)
            .await
            .expect("granted");
        request
    }

    async fn record(&self, id: &ApprovalId) -> ApprovalRecord {
        self.store
            .approval(id)
            .await
            .expect("read")
            .expect("the request exists")
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

    async fn last_receipt(&self) -> Receipt {
        self.receipts().await.pop().expect("a receipt")
    }

    /// The chain is intact and the approvals and effects tables agree with it.
    async fn assert_consistent(&self) {
        let store = self.store.as_ref();
        let report = audit::verify_store(store, None).await.expect("verify");
        assert!(report.is_intact(), "{report:?}");
        let effects = audit::cross_check_effects(store).await.expect("effects");
        assert!(effects.agrees(), "{effects:?}");
        let approvals = audit::cross_check_approvals(store)
            .await
            .expect("approvals");
        assert!(approvals.agrees(), "{}: {approvals:?}", self.name());
    }
}

#[tokio::test]
async fn the_approver_revokes_an_unused_grant_and_the_attempt_is_refused_revoked() {
    for world in worlds().await {
        let request = world.granted("r1").await;
        let revoked = world
            .control
            .revoke(&request, "human:alice", Some("wrong payment"))
            .await
            .expect("revoked");
        assert_eq!(revoked.state, ApprovalState::Revoked);
        let receipt = world.last_receipt().await;
        assert_eq!(receipt.kind, ReceiptKind::ApprovalRevoked, "{receipt:?}");
        assert_eq!(receipt.outcome, ReceiptOutcome::Revoked);
        assert_eq!(receipt.reason.as_deref(), Some("revoked"));
        assert_eq!(receipt.approver.as_deref(), Some("human:alice"));
        assert_eq!(receipt.note.as_deref(), Some("wrong payment"));
        assert_eq!(receipt.approval_id.as_deref(), Some(request.as_str()));

        let refused = world
            .call(refund("r1", 50).with_approval(request.clone()))
            .await
            .expect_err("a revoked grant authorizes nothing");
        assert!(
            matches!(refused, ControlError::ApprovalRevoked { .. }),
            "{refused:?}"
        );
        assert_eq!(refused.reason(), "revoked");
        let receipt = world.last_receipt().await;
        assert_eq!(receipt.outcome, ReceiptOutcome::Refused);
        assert_eq!(receipt.reason.as_deref(), Some("revoked"));
        assert!(
            world
                .store
                .effect(&countersign::EffectKey::new("refund:r1").expect("key"))
                .await
                .expect("read")
                .is_none(),
            "nothing was reserved"
        );

        // A late answer to it is refused `revoked` and changes nothing.
        let before = world.record(&request).await;
        let late = world
            .control
            .answer(&request, AnswerDecision::Approve, "human:bob", None)
            .await
            .expect_err("no answer after a revocation");
        assert!(matches!(late, AnswerError::Revoked { .. }), "{late:?}");
        assert_eq!(world.record(&request).await, before);
        world.assert_consistent().await;
    }
}

#[tokio::test]
async fn a_consumed_grant_cannot_be_revoked_and_nothing_changes() {
    for world in worlds().await {
        let request = world.granted("r2").await;
        assert_eq!(
            world
                .call(refund("r2", 50).with_approval(request.clone()))
                .await
                .expect("runs"),
            "refunded"
        );
        let before = world.record(&request).await;
        let count = world.receipts().await.len();
        let refused = world
            .control
            .revoke(&request, "human:alice", Some("too late"))
            .await
            .expect_err("consumed");
        assert!(
            matches!(refused, AnswerError::Consumed { .. }),
            "{refused:?}"
        );
        assert_eq!(refused.reason(), "consumed");
        assert_eq!(world.record(&request).await, before, "nothing changed");
        let receipts = world.receipts().await;
        assert_eq!(receipts.len(), count + 1, "one refusal receipt");
        let last = receipts.last().expect("receipt");
        assert_eq!(last.kind, ReceiptKind::ApprovalRevoked);
        assert_eq!(last.outcome, ReceiptOutcome::Refused);
        assert_eq!(last.reason.as_deref(), Some("consumed"));
        world.assert_consistent().await;
    }
}

#[tokio::test]
async fn only_a_giver_or_an_entitled_resolver_may_revoke() {
    for world in worlds().await {
        let request = world.granted("r3").await;
        // The principal itself is never an entitled resolver.
        let refused = world
            .control
            .revoke(&request, "agent:support-bot", None)
            .await
            .expect_err("the requester cannot revoke");
        assert_eq!(refused.reason(), "not_entitled", "{refused:?}");
        assert_eq!(world.record(&request).await.state, ApprovalState::Granted);
        let refused = world
            .control
            .revoke(&request, "", None)
            .await
            .expect_err("anonymous");
        assert!(matches!(refused, AnswerError::NoApprover), "{refused:?}");
        // Anyone but the principal resolves by default: bob may take alice's grant back.
        let revoked = world
            .control
            .revoke(&request, "human:bob", Some("duplicate refund"))
            .await
            .expect("an entitled resolver revokes");
        assert_eq!(revoked.state, ApprovalState::Revoked);
        // Revoking twice is refused `revoked`.
        let again = world
            .control
            .revoke(&request, "human:alice", None)
            .await
            .expect_err("already revoked");
        assert_eq!(again.reason(), "revoked");
        world.assert_consistent().await;
    }
}

#[tokio::test]
async fn withdrawing_a_yes_before_the_quorum_completes_lowers_the_count() {
    for world in worlds().await {
        let request = world.request("q1", 500).await;
        let counted = world
            .control
            .answer(&request, AnswerDecision::Approve, "human:alice", None)
            .await
            .expect("counted");
        assert_eq!(counted.state, ApprovalState::Pending);
        assert_eq!(counted.approvals_given(), 1);
        // Someone who gave no yes has nothing to withdraw.
        let refused = world
            .control
            .revoke(&request, "human:bob", None)
            .await
            .expect_err("nothing to withdraw");
        assert_eq!(refused.reason(), "not_revocable", "{refused:?}");
        let withdrawn = world
            .control
            .revoke(&request, "human:alice", Some("misread the amount"))
            .await
            .expect("withdrawn");
        assert_eq!(withdrawn.state, ApprovalState::Pending);
        assert_eq!(withdrawn.approvals_given(), 0);
        let receipt = world.last_receipt().await;
        assert_eq!(receipt.kind, ReceiptKind::ApprovalRevoked);
        assert_eq!(receipt.outcome, ReceiptOutcome::Withdrawn);
        assert_eq!(receipt.approvals_given, Some(0));
        assert_eq!(receipt.approvals_needed, Some(2));
        // Bob's yes alone no longer completes the quorum.
        let after_bob = world
            .control
            .answer(&request, AnswerDecision::Approve, "human:bob", None)
            .await
            .expect("counted");
        assert_eq!(after_bob.state, ApprovalState::Pending);
        assert_eq!(after_bob.approvals_given(), 1);
        let granted = world
            .control
            .answer(&request, AnswerDecision::Approve, "human:carol", None)
            .await
            .expect("granted");
        assert_eq!(granted.state, ApprovalState::Granted);
        world.assert_consistent().await;
    }
}

#[tokio::test]
async fn the_operator_cancels_a_pending_request_and_a_late_answer_is_refused_cancelled() {
    for world in worlds().await {
        let request = world.request("c1", 50).await;
        let cancelled = world
            .control
            .cancel(&request, "ops:dana", Some("run abandoned"))
            .await
            .expect("cancelled");
        assert_eq!(cancelled.state, ApprovalState::Cancelled);
        let receipt = world.last_receipt().await;
        assert_eq!(receipt.kind, ReceiptKind::ApprovalCancelled);
        assert_eq!(receipt.outcome, ReceiptOutcome::Cancelled);
        assert_eq!(receipt.reason.as_deref(), Some("cancelled"));
        assert_eq!(receipt.approver.as_deref(), Some("ops:dana"));
        assert_eq!(receipt.note.as_deref(), Some("run abandoned"));
        // It left every inbox.
        let pending = world
            .store
            .approvals(Some(ApprovalState::Pending))
            .await
            .expect("list");
        assert!(pending.iter().all(|record| record.id != request));
        // A late answer is refused `cancelled`, with a refusal receipt, and changes nothing.
        let late = world
            .control
            .answer(&request, AnswerDecision::Approve, "human:alice", None)
            .await
            .expect_err("cancelled");
        assert!(matches!(late, AnswerError::Cancelled { .. }), "{late:?}");
        assert_eq!(late.reason(), "cancelled");
        let receipt = world.last_receipt().await;
        assert_eq!(receipt.kind, ReceiptKind::Answer);
        assert_eq!(receipt.outcome, ReceiptOutcome::Refused);
        assert_eq!(receipt.reason.as_deref(), Some("cancelled"));
        assert_eq!(world.record(&request).await.state, ApprovalState::Cancelled);
        // Cancelling again is a harmless repeat: no new receipt.
        let count = world.receipts().await.len();
        world
            .control
            .cancel(&request, "ops:dana", None)
            .await
            .expect("a repeat");
        assert_eq!(world.receipts().await.len(), count);
        // Presenting it is refused `cancelled`.
        let refused = world
            .call(refund("c1", 50).with_approval(request.clone()))
            .await
            .expect_err("cancelled");
        assert_eq!(refused.reason(), "cancelled");
        // A consumed grant cannot be cancelled.
        let used = world.granted("c2").await;
        world
            .call(refund("c2", 50).with_approval(used.clone()))
            .await
            .expect("runs");
        let refused = world
            .control
            .cancel(&used, "ops:dana", None)
            .await
            .expect_err("consumed");
        assert_eq!(refused.reason(), "consumed");
        // A denied one has nothing to take back.
        let denied = world.request("c3", 50).await;
        world
            .control
            .answer(&denied, AnswerDecision::Deny, "human:alice", None)
            .await
            .expect("denied");
        let refused = world
            .control
            .cancel(&denied, "ops:dana", None)
            .await
            .expect_err("denied");
        assert_eq!(refused.reason(), "not_revocable");
        world.assert_consistent().await;
    }
}

#[tokio::test]
async fn cancelling_a_run_clears_only_that_runs_waiting_requests() {
    for world in worlds().await {
        let in_run = |id: &str, run: &str| refund(id, 50).with_run(run);
        let mut ours = Vec::new();
        for id in ["a", "b"] {
            match world.call(in_run(id, "run-1")).await {
                Err(ControlError::ApprovalRequired { request_id, .. }) => ours.push(request_id),
                other => panic!("expected approval_required, got {other:?}"),
            }
        }
        let theirs = match world.call(in_run("c", "run-2")).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected approval_required, got {other:?}"),
        };
        let done = world
            .control
            .cancel_run("run-1", "ops:dana", Some("abandoned"))
            .await
            .expect("listed");
        assert_eq!(done.len(), 2);
        for (id, result) in done {
            assert!(ours.contains(&id));
            assert_eq!(result.expect("cancelled").state, ApprovalState::Cancelled);
        }
        assert_eq!(world.record(&theirs).await.state, ApprovalState::Pending);
        world.assert_consistent().await;
    }
}

#[tokio::test]
async fn a_request_past_its_ttl_is_marked_expired_not_revoked() {
    for backend in backends().await {
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_790_000_000_000)));
        let control = control(Arc::clone(&backend.first), Arc::clone(&clock));
        let request = match control
            .execute(refund("e1", 50), |_| async { Ok::<_, ExecutorError>(()) })
            .await
        {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected approval_required, got {other:?}"),
        };
        // Time passes by the store's clock (issue #22: PostgreSQL judges by the server's).
        backend
            .first
            .shift_clock_for_tests(16 * 60 * 1000)
            .expect("a shift");
        let refused = control
            .cancel(&request, "ops:dana", None)
            .await
            .expect_err("expired");
        assert_eq!(refused.reason(), "expired");
        let record = backend
            .first
            .approval(&request)
            .await
            .expect("read")
            .expect("exists");
        assert_eq!(record.state, ApprovalState::Expired);
    }
}

/// Revoke against consume, each through its own store connection: exactly one wins, the loser
/// gets a typed refusal, and the receipts agree with the tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn revoke_racing_consume_lets_exactly_one_win() {
    for world in worlds().await {
        for round in 0..6 {
            let id = format!("race{round}");
            let request = world.granted(&id).await;
            let consumer = {
                let control = world.control.clone();
                let request = refund(&id, 50).with_approval(request.clone());
                tokio::spawn(async move {
                    control
                        .execute(request, |_| async { Ok::<_, ExecutorError>("refunded") })
                        .await
                        .map(|done| done.value)
                })
            };
            let revoker = {
                let other = world.other.clone();
                let request = request.clone();
                tokio::spawn(async move { other.revoke(&request, "human:alice", None).await })
            };
            let consumed = consumer.await.expect("no panic");
            let revoked = revoker.await.expect("no panic");
            match (&consumed, &revoked) {
                (Ok(_), Err(AnswerError::Consumed { .. })) => {
                    assert_eq!(world.record(&request).await.state, ApprovalState::Consumed);
                }
                (Err(ControlError::ApprovalRevoked { .. }), Ok(record)) => {
                    assert_eq!(record.state, ApprovalState::Revoked);
                    assert_eq!(world.record(&request).await.state, ApprovalState::Revoked);
                }
                other => panic!("{}: exactly one must win, got {other:?}", world.name()),
            }
            let receipts = world.receipts().await;
            let wins = receipts
                .iter()
                .filter(|receipt| receipt.approval_id.as_deref() == Some(request.as_str()))
                .filter(|receipt| {
                    matches!(
                        (receipt.kind, receipt.outcome),
                        (ReceiptKind::Attempt, ReceiptOutcome::Committed)
                            | (ReceiptKind::ApprovalRevoked, ReceiptOutcome::Revoked)
                    )
                })
                .count();
            assert_eq!(wins, 1, "{}: one winning receipt", world.name());
        }
        world.assert_consistent().await;
    }
}

/// Cancel against answer, each through its own connection: either the answer lands first and
/// the cancellation then cancels the granted request, or the cancellation lands first and the
/// answer is refused `cancelled`. Never a grant after a cancellation.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_racing_answer_never_leaves_a_grant_behind() {
    for world in worlds().await {
        for round in 0..6 {
            let request = world.request(&format!("ca{round}"), 50).await;
            let answerer = {
                let control = world.control.clone();
                let request = request.clone();
                tokio::spawn(async move {
                    control
                        .answer(&request, AnswerDecision::Approve, "human:alice", None)
                        .await
                })
            };
            let canceller = {
                let other = world.other.clone();
                let request = request.clone();
                tokio::spawn(async move { other.cancel(&request, "ops:dana", None).await })
            };
            let answered = answerer.await.expect("no panic");
            let cancelled = canceller.await.expect("no panic");
            assert_eq!(
                cancelled
                    .expect("the operator's cancel wins either way")
                    .state,
                ApprovalState::Cancelled
            );
            match answered {
                Ok(record) => assert_eq!(record.state, ApprovalState::Granted),
                Err(error) => assert_eq!(error.reason(), "cancelled", "{error:?}"),
            }
            assert_eq!(world.record(&request).await.state, ApprovalState::Cancelled);
        }
        world.assert_consistent().await;
    }
}

/// A surface's withdrawal: a token-less `Verified` identity through the service channel is
/// judged like an answer.
#[tokio::test]
async fn a_withdrawal_through_a_surface_records_its_channel() {
    for world in worlds().await {
        let request = world.granted("s1").await;
        world
            .control
            .withdraw(Withdrawal {
                request_id: request.clone(),
                kind: WithdrawalKind::Revoke {
                    approver: Credential::Asserted("human:alice".to_owned()),
                    channel: Channel::Service,
                },
                reason: None,
            })
            .await
            .expect("revoked");
        let receipt = world.last_receipt().await;
        assert_eq!(receipt.channel.as_deref(), Some("service"));
        assert_eq!(receipt.authentication.as_deref(), Some("asserted"));
    }
}

/// A token on the store's deny-list is refused `not_authenticated` by an answer and by a
/// revocation, with a refusal receipt, on every backend; the same approver's fresh token works.
#[tokio::test]
async fn a_revoked_token_is_refused_before_it_expires() {
    let key = countersign::token::generate_keypair().expect("a key");
    let policy = format!(
        "schema: countersign.policy/v1
environment: test
approvers:
  keys: [\"{}\"]
actions:
  refund:
    decision: approve
    approval: {{ approvers: [\"group:finance\"], require: authenticated }}
",
        key.public_key()
    );
    for backend in backends().await {
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_790_000_000_000)));
        let control = Control::builder_shared(
            Arc::new(Policy::from_yaml_str(&policy, None).expect("policy")),
            Arc::clone(&backend.first),
        )
        .identity(StaticIdentity::new(
            Principal::new("agent:support-bot").expect("principal"),
        ))
        .clock(Arc::clone(&clock) as Arc<dyn Clock>)
        .build();
        let token = |now| {
            countersign::token::issue(
                &key,
                "human:alice",
                &["finance".to_owned()],
                std::time::Duration::from_secs(3600),
                now,
            )
            .expect("a token")
        };
        let leaked = token(clock.now());
        let jti = countersign::token::unverified_jti(&leaked).expect("a jti");
        let request = match control
            .execute(refund("t1", 50), |_| async { Ok::<_, ExecutorError>(()) })
            .await
        {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected approval_required, got {other:?}"),
        };
        let answer = |credential: String| countersign::store::RecordAnswer {
            request_id: request.clone(),
            decision: Ok(AnswerDecision::Approve),
            approver: Credential::Token(credential),
            channel: Channel::Api,
            shown_hash: None,
            note: None,
        };
        assert!(
            backend
                .first
                .revoke_token(&jti, "ops:dana", Some("leaked"), clock.now())
                .await
                .expect("listed")
        );
        // The other connection sees it at once.
        assert!(backend.second.token_revoked(&jti).await.expect("read"));
        let refused = control
            .submit_answer(answer(leaked.clone()))
            .await
            .expect_err("a revoked token answers nothing");
        assert_eq!(refused.reason(), "not_authenticated", "{refused:?}");
        assert!(refused.to_string().contains(&jti), "{refused}");
        let last = backend
            .first
            .receipts(0, 1_000)
            .await
            .expect("receipts")
            .last()
            .expect("a receipt")
            .to_receipt()
            .expect("parses");
        assert_eq!(last.outcome, ReceiptOutcome::Refused);
        assert_eq!(last.reason.as_deref(), Some("not_authenticated"));
        assert_eq!(last.authentication.as_deref(), Some("token"));

        // A fresh token of the same approver answers; the leaked one cannot revoke the grant.
        clock.advance(std::time::Duration::from_secs(1));
        let granted = control
            .submit_answer(answer(token(clock.now())))
            .await
            .expect("granted");
        assert_eq!(granted.state, ApprovalState::Granted);
        let refused = control
            .withdraw(Withdrawal {
                request_id: request.clone(),
                kind: WithdrawalKind::Revoke {
                    approver: Credential::Token(leaked),
                    channel: Channel::Api,
                },
                reason: None,
            })
            .await
            .expect_err("a revoked token revokes nothing");
        assert_eq!(refused.reason(), "not_authenticated");
        let record = backend
            .first
            .approval(&request)
            .await
            .expect("read")
            .expect("exists");
        assert_eq!(record.state, ApprovalState::Granted);
    }
}

/// Issue #31, the approval service's cancel: a resolver (here, by default, the rule's
/// approvers) cancels through `CancelAsResolver`; the requesting agent and someone outside
/// the rule are refused `not_entitled` with a receipt naming them, and nothing changes.
#[tokio::test]
async fn a_resolver_cancels_and_anyone_else_is_refused_not_entitled() {
    for world in worlds().await {
        let request = world.request("rc1", 500).await;
        let as_resolver = |who: &str| Withdrawal {
            request_id: request.clone(),
            kind: WithdrawalKind::CancelAsResolver {
                resolver: Credential::Asserted(who.to_owned()),
                channel: Channel::Service,
            },
            reason: Some("duplicate".to_owned()),
        };
        for outsider in ["agent:support-bot", "human:mallory"] {
            let refused = world
                .control
                .withdraw(as_resolver(outsider))
                .await
                .expect_err("not a resolver");
            assert!(
                matches!(&refused, AnswerError::NotEntitled { approver, .. } if approver == outsider),
                "{}: {refused:?}",
                world.name()
            );
            assert!(refused.to_string().contains("its resolvers"), "{refused}");
            let receipt = world.last_receipt().await;
            assert_eq!(receipt.kind, ReceiptKind::ApprovalCancelled);
            assert_eq!(receipt.outcome, ReceiptOutcome::Refused);
            assert_eq!(receipt.reason.as_deref(), Some("not_entitled"));
            assert_eq!(receipt.approver.as_deref(), Some(outsider));
            assert_eq!(world.record(&request).await.state, ApprovalState::Pending);
        }
        let cancelled = world
            .control
            .withdraw(as_resolver("human:bob"))
            .await
            .expect("a finance approver may cancel");
        assert_eq!(cancelled.state, ApprovalState::Cancelled);
        let receipt = world.last_receipt().await;
        assert_eq!(receipt.kind, ReceiptKind::ApprovalCancelled);
        assert_eq!(receipt.outcome, ReceiptOutcome::Cancelled);
        assert_eq!(receipt.approver.as_deref(), Some("human:bob"));
        assert_eq!(
            receipt.approver_groups.as_deref(),
            Some(&["finance".to_owned()][..])
        );
        assert_eq!(receipt.channel.as_deref(), Some("service"));
        world.assert_consistent().await;
    }
}

/// Issue #31: `Control::revoke_token` takes a token id or a whole token, says when it was
/// already revoked, and refuses text of neither shape without writing anything.
#[tokio::test]
async fn revoke_token_takes_an_id_or_a_token_and_refuses_anything_else() {
    use countersign::control::RevokeTokenError;
    use countersign::token;
    for world in worlds().await {
        let key = token::generate_keypair().expect("a key");
        let issued = token::issue(
            &key,
            "human:alice",
            &["finance".to_owned()],
            std::time::Duration::from_secs(600),
            world.control.clock().now(),
        )
        .expect("a token");
        let jti = token::unverified_jti(&issued).expect("an id");
        assert!(
            world
                .control
                .revoke_token(&issued, "ops:dana", Some("leaked"))
                .await
                .expect("revoked")
        );
        assert!(world.store.token_revoked(&jti).await.expect("read"));
        assert!(
            !world
                .control
                .revoke_token(&jti, "ops:dana", None)
                .await
                .expect("a repeat"),
            "{}: already revoked",
            world.name()
        );
        for bad in ["", "tok_short", "not a token", "tok_ABCDEFGHIJKLMNOPQRST"] {
            let refused = world
                .control
                .revoke_token(bad, "ops:dana", None)
                .await
                .expect_err("neither shape");
            assert!(
                matches!(&refused, RevokeTokenError::NotATokenId(message) if message.contains("tok_")),
                "{refused:?}"
            );
        }
    }
}

/// Issue #27: a request opened for an older input schema of a tool is voided `tool_changed`
/// on every store, in one transaction with its receipt; one for the current schema is left
/// alone; the chain and the approvals table still agree.
#[tokio::test]
async fn a_changed_tool_schema_voids_the_open_requests_for_the_old_one_on_every_store() {
    let old = json!({"type": "object", "properties": {"id": {"type": "string"}}});
    let new = json!({"type": "object", "properties": {"id": {"type": "string"}, "memo": {"type": "string"}}});
    for world in worlds().await {
        let pending = match world.call(refund("t1", 50).with_tool_schema(&old)).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!(
                "{}: expected approval_required, got {other:?}",
                world.name()
            ),
        };
        let granted = match world.call(refund("t2", 50).with_tool_schema(&old)).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!(
                "{}: expected approval_required, got {other:?}",
                world.name()
            ),
        };
        world
            .control
            .answer(&granted, AnswerDecision::Approve, "human:alice", None)
            .await
            .expect("granted");
        let current = match world.call(refund("t3", 50).with_tool_schema(&new)).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!(
                "{}: expected approval_required, got {other:?}",
                world.name()
            ),
        };
        let voided = world
            .control
            .void_for_changed_tool("refund", &new, "gateway:test")
            .await
            .expect("voided");
        assert_eq!(
            voided,
            [pending.clone(), granted.clone()],
            "{}",
            world.name()
        );
        for id in [&pending, &granted] {
            assert_eq!(
                world.record(id).await.state,
                ApprovalState::Void,
                "{}",
                world.name()
            );
        }
        assert_eq!(world.record(&current).await.state, ApprovalState::Pending);
        let receipt = world.last_receipt().await;
        assert_eq!(receipt.kind, ReceiptKind::ApprovalVoided);
        assert_eq!(receipt.outcome, ReceiptOutcome::Voided);
        assert_eq!(receipt.reason.as_deref(), Some("tool_changed"));
        assert_eq!(receipt.approver.as_deref(), Some("gateway:test"));
        // Again: nothing left to void, nothing written.
        let count = world.receipts().await.len();
        let again = world
            .control
            .void_for_changed_tool("refund", &new, "gateway:test")
            .await
            .expect("a repeat");
        assert!(again.is_empty());
        assert_eq!(world.receipts().await.len(), count);
        // The voided grant authorizes nothing, and an answer to the voided request changes
        // nothing.
        let refused = world
            .call(
                refund("t2", 50)
                    .with_tool_schema(&old)
                    .with_approval(granted.clone()),
            )
            .await
            .expect_err("void");
        assert_eq!(refused.reason(), "policy_changed", "{}", world.name());
        let late = world
            .control
            .answer(&pending, AnswerDecision::Approve, "human:alice", None)
            .await;
        assert!(late.is_err(), "{}: {late:?}", world.name());
        assert_eq!(world.record(&pending).await.state, ApprovalState::Void);
        world.assert_consistent().await;
    }
}
