//! Who may approve (issue #12), end to end through real stores: every answer is judged by the
//! rule stored with its request; refusals change nothing but leave a refusal receipt naming who
//! sent them; a quorum needs distinct entitled approvers; tokens are verified against the keys
//! the request stored.

use std::sync::Arc;
use std::time::Duration;

use countersign::approval::{self, AnswerDecision};
use countersign::approver::{Channel, Credential};
use countersign::evidence::{Receipt, ReceiptKind, ReceiptOutcome};
use countersign::store::{MemoryStore, RecordAnswer, SqliteStore, Store};
use countersign::token::{self, SigningKey};
use countersign::{
    ActionHash, ActionRequest, ApprovalId, ApprovalRecord, ApprovalState, Clock, Control,
    ControlError, ExecutorError, ManualClock, Policy, Principal, StaticIdentity, Timestamp,
};
use serde_json::json;

const START: i64 = 1_790_000_000_000;

/// Up to 100: anyone but the requester. Up to 1000: two of finance, none from the requester's
/// groups. Above: one of finance, with a verified token.
fn policy(key: &SigningKey) -> String {
    format!(
        "schema: countersign.policy/v1
environment: test
directory:
  human:alice: [finance]
  human:bob: [finance]
  human:carol: [finance, support]
  human:sam: [support]
  agent:support-bot: [support]
approvers:
  keys: [\"{}\"]
actions:
  refund:
    effect: \"refund:{{id}}\"
    rules:
      - when: {{ amount: {{ lte: 100 }} }}
        decision: approve
      - when: {{ amount: {{ lte: 1000 }} }}
        decision: approve
        approval: {{ approvers: [\"group:finance\"], quorum: 2, distinct_from_requester: true }}
      - decision: approve
        approval: {{ approvers: [\"group:finance\"], require: authenticated }}
",
        key.public_key()
    )
}

struct World {
    store: Arc<dyn Store>,
    control: Control,
    clock: Arc<ManualClock>,
    key: SigningKey,
    _folder: Option<tempfile::TempDir>,
}

impl World {
    fn with(store: Arc<dyn Store>, folder: Option<tempfile::TempDir>) -> World {
        let key = token::generate_keypair().expect("a key");
        let policy = Policy::from_yaml_str(&policy(&key), None).expect("the policy loads");
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(START)));
        let control = Control::builder_shared(Arc::new(policy), Arc::clone(&store))
            .identity(StaticIdentity::new(
                Principal::new("agent:support-bot").expect("principal"),
            ))
            .clock(Arc::clone(&clock) as Arc<dyn Clock>)
            .build();
        World {
            store,
            control,
            clock,
            key,
            _folder: folder,
        }
    }

    /// One world per backend the embedded default and the tests use.
    fn each() -> Vec<World> {
        let folder = tempfile::tempdir().expect("temp dir");
        let sqlite = SqliteStore::open(folder.path().join("answers.db")).expect("sqlite");
        vec![
            World::with(Arc::new(MemoryStore::new()), None),
            World::with(Arc::new(sqlite), Some(folder)),
        ]
    }

    async fn call(&self, id: &str, amount: u64) -> Result<&'static str, ControlError> {
        self.control
            .execute(
                ActionRequest::new("refund", &json!({"id": id, "amount": amount})),
                |_| async { Ok::<_, ExecutorError>("refunded") },
            )
            .await
            .map(|done| done.value)
    }

    /// Ask for a refund that needs approval; return the pending request.
    async fn request(&self, id: &str, amount: u64) -> ApprovalRecord {
        match self.call(id, amount).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => {
                self.record(&request_id).await
            }
            other => panic!("expected approval_required, got {other:?}"),
        }
    }

    async fn record(&self, id: &ApprovalId) -> ApprovalRecord {
        self.store
            .approval(id)
            .await
            .expect("read")
            .expect("the request exists")
    }

    async fn submit(
        &self,
        record: &ApprovalRecord,
        decision: AnswerDecision,
        approver: Credential,
    ) -> Result<ApprovalRecord, countersign::AnswerError> {
        self.submit_with(record, Ok(decision), approver, Channel::Cli, None)
            .await
    }

    async fn submit_with(
        &self,
        record: &ApprovalRecord,
        decision: Result<AnswerDecision, approval::InvalidDecision>,
        approver: Credential,
        channel: Channel,
        shown_hash: Option<ActionHash>,
    ) -> Result<ApprovalRecord, countersign::AnswerError> {
        countersign::control::submit_answer(
            self.store.as_ref(),
            RecordAnswer {
                request_id: record.id.clone(),
                decision,
                approver,
                channel,
                shown_hash,
                note: None,
            },
            self.clock.now(),
        )
        .await
    }

    fn token(&self, subject: &str, groups: &[&str], ttl: Duration, at: Timestamp) -> Credential {
        let groups: Vec<String> = groups.iter().map(|group| (*group).to_owned()).collect();
        Credential::Token(token::issue(&self.key, subject, &groups, ttl, at).expect("a token"))
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

    /// The newest receipt, which must be the refusal of an answer by `approver` for `reason`;
    /// and the request must be exactly as `before`.
    async fn assert_refused(&self, before: &ApprovalRecord, reason: &str, approver: Option<&str>) {
        let receipts = self.receipts().await;
        let last = receipts.last().expect("a refusal receipt");
        assert_eq!(last.kind, ReceiptKind::Answer, "{last:?}");
        assert_eq!(last.outcome, ReceiptOutcome::Refused, "{last:?}");
        assert_eq!(last.reason.as_deref(), Some(reason), "{last:?}");
        assert_eq!(last.approver.as_deref(), approver, "{last:?}");
        assert_eq!(last.approval_id.as_deref(), Some(before.id.as_str()));
        assert!(last.channel.is_some(), "{last:?}");
        assert_eq!(
            &self.record(&before.id).await,
            before,
            "the request changed"
        );
    }
}

fn asserted(name: &str) -> Credential {
    Credential::Asserted(name.to_owned())
}

#[tokio::test]
async fn an_entitled_approver_grants_and_the_call_runs_once() {
    for world in World::each() {
        let request = world.request("r1", 50).await;
        assert_eq!(request.rule.summary(), "anyone but the requester");
        let granted = world
            .submit(&request, AnswerDecision::Approve, asserted("human:sam"))
            .await
            .expect("granted");
        assert_eq!(granted.state, ApprovalState::Granted);
        assert_eq!(world.call("r1", 50).await.expect("runs"), "refunded");
        let receipts = world.receipts().await;
        let attempt = receipts.last().expect("the attempt's receipt");
        assert_eq!(attempt.outcome, ReceiptOutcome::Committed);
        let approvers: Vec<&str> = attempt
            .approvers
            .iter()
            .flatten()
            .map(|approver| approver.id.as_str())
            .collect();
        assert_eq!(approvers, ["human:sam"]);
        assert!(attempt.attempt_started_at.is_some());
    }
}

/// Issue #19: one shape for every approver id. `human:`, `:` and `human: bob` are refused with
/// the expected shape, recorded as a refused answer naming nobody, and change nothing; the same
/// for a verified identity and a token's subject.
#[tokio::test]
async fn a_malformed_approver_id_is_refused_and_never_reaches_a_receipt() {
    for world in World::each() {
        let request = world.request("r-shape", 50).await;
        // A token whose subject is `human:` is not issued any more (`token::issue`): its
        // refusal at answer time is `token::tests::a_signed_token_whose_subject_is_not_an_approver_id_stands_for_no_approver`.
        for credential in [
            asserted("human:"),
            asserted(":"),
            asserted("human: bob"),
            Credential::Verified {
                id: "human: bob".to_owned(),
                groups: Vec::new(),
                authentication: countersign::approver::Authentication::ProxyHeader,
            },
        ] {
            let error = world
                .submit(&request, AnswerDecision::Approve, credential)
                .await
                .expect_err("refused");
            assert_eq!(
                error.kind(),
                countersign::Reason::InvalidApprover,
                "{error}"
            );
            assert!(
                error.to_string().contains("is not an approver id")
                    && error.to_string().contains("`human:alice`"),
                "{error}"
            );
            world
                .assert_refused(&request, "invalid_approver", None)
                .await;
        }
    }
}

#[tokio::test]
async fn an_approver_outside_the_group_is_refused_and_recorded() {
    for world in World::each() {
        let request = world.request("r2", 500).await;
        let error = world
            .submit(&request, AnswerDecision::Approve, asserted("human:mallory"))
            .await
            .expect_err("refused");
        assert_eq!(error.reason(), "not_entitled", "{error}");
        assert!(error.to_string().contains("group:finance"), "{error}");
        world
            .assert_refused(&request, "not_entitled", Some("human:mallory"))
            .await;
        // A name claiming a group is not in it: asserted identities get groups only from the
        // directory.
        let error = world
            .submit(&request, AnswerDecision::Approve, asserted("group:finance"))
            .await
            .expect_err("refused");
        assert_eq!(error.reason(), "not_entitled", "{error}");
    }
}

#[tokio::test]
async fn a_quorum_of_two_needs_two_distinct_approvers() {
    for world in World::each() {
        let request = world.request("r3", 500).await;
        let one = world
            .submit(&request, AnswerDecision::Approve, asserted("human:alice"))
            .await
            .expect("counted");
        assert_eq!(one.state, ApprovalState::Pending);
        assert_eq!((one.approvals_given(), one.rule.quorum), (1, 2));
        let counted = world.receipts().await.pop().expect("receipt");
        assert_eq!(counted.outcome, ReceiptOutcome::Counted);
        assert_eq!(
            (counted.approvals_given, counted.approvals_needed),
            (Some(1), Some(2))
        );
        assert_eq!(
            counted.approver_groups.as_deref(),
            Some(&["finance".to_owned()][..])
        );
        // Not yet: the call still waits.
        assert_eq!(
            world.call("r3", 500).await.expect_err("waits").reason(),
            "approval_required"
        );
        // The same approver twice is one approval: an idempotent repeat that writes nothing.
        let receipts = world.receipts().await.len();
        let again = world
            .submit(&request, AnswerDecision::Approve, asserted("human:alice"))
            .await
            .expect("a repeat is a success");
        assert_eq!(again.approvals_given(), 1);
        assert_eq!(world.receipts().await.len(), receipts);
        // A second entitled approver grants it.
        let two = world
            .submit(&request, AnswerDecision::Approve, asserted("human:bob"))
            .await
            .expect("granted");
        assert_eq!(two.state, ApprovalState::Granted);
        assert_eq!(world.call("r3", 500).await.expect("runs"), "refunded");
        let attempt = world.receipts().await.pop().expect("receipt");
        let approvers: Vec<&str> = attempt
            .approvers
            .iter()
            .flatten()
            .map(|approver| approver.id.as_str())
            .collect();
        assert_eq!(approvers, ["human:alice", "human:bob"]);
        assert_eq!(
            world.record(&request.id).await.state,
            ApprovalState::Consumed
        );
    }
}

#[tokio::test]
async fn one_entitled_no_denies_a_quorum_request() {
    for world in World::each() {
        let request = world.request("r4", 500).await;
        world
            .submit(&request, AnswerDecision::Approve, asserted("human:alice"))
            .await
            .expect("counted");
        let denied = world
            .submit(&request, AnswerDecision::Deny, asserted("human:bob"))
            .await
            .expect("denied");
        assert_eq!(denied.state, ApprovalState::Denied);
        assert_eq!(
            world.call("r4", 500).await.expect_err("denied").reason(),
            "approval_denied"
        );
        // The first approver cannot change their answer afterwards.
        let error = world
            .submit(&request, AnswerDecision::Deny, asserted("human:alice"))
            .await
            .expect_err("refused");
        assert_eq!(error.reason(), "already_decided");
    }
}

#[tokio::test]
async fn the_requester_and_its_group_never_answer() {
    for world in World::each() {
        let request = world.request("r5", 500).await;
        let error = world
            .submit(
                &request,
                AnswerDecision::Approve,
                asserted("agent:support-bot"),
            )
            .await
            .expect_err("refused");
        // The requester never answers, whatever the rule lists: that is named first.
        assert_eq!(error.reason(), "self_approval", "{error}");
        // Carol is in finance but shares `support` with the requesting agent.
        let error = world
            .submit(&request, AnswerDecision::Approve, asserted("human:carol"))
            .await
            .expect_err("refused");
        assert_eq!(error.reason(), "self_approval", "{error}");
        assert!(error.to_string().contains("support"), "{error}");
        world
            .assert_refused(&request, "self_approval", Some("human:carol"))
            .await;
        // Under the default rule, the principal itself is refused.
        let small = world.request("r5b", 10).await;
        let error = world
            .submit(
                &small,
                AnswerDecision::Approve,
                asserted("agent:support-bot"),
            )
            .await
            .expect_err("refused");
        assert_eq!(error.reason(), "self_approval", "{error}");
    }
}

#[tokio::test]
async fn authenticated_rules_take_only_verified_tokens() {
    for world in World::each() {
        let request = world.request("r6", 5_000).await;
        let now = world.clock.now();
        let error = world
            .submit(&request, AnswerDecision::Approve, asserted("human:alice"))
            .await
            .expect_err("asserted is refused");
        assert_eq!(error.reason(), "not_authenticated", "{error}");
        world
            .assert_refused(&request, "not_authenticated", Some("human:alice"))
            .await;

        let expired = world.token(
            "human:alice",
            &[],
            Duration::from_secs(60),
            Timestamp::from_millis(now.as_millis() - 120_000),
        );
        let error = world
            .submit(&request, AnswerDecision::Approve, expired)
            .await
            .expect_err("expired");
        assert_eq!(error.reason(), "not_authenticated");
        assert!(error.to_string().contains("expired"), "{error}");
        world
            .assert_refused(&request, "not_authenticated", None)
            .await;

        let future = world.token(
            "human:alice",
            &[],
            Duration::from_secs(600),
            now.plus(Duration::from_secs(300)),
        );
        let error = world
            .submit(&request, AnswerDecision::Approve, future)
            .await
            .expect_err("from the future");
        assert_eq!(error.reason(), "not_authenticated", "{error}");

        let stranger = token::generate_keypair().expect("another key");
        let forged = Credential::Token(
            token::issue(&stranger, "human:alice", &[], Duration::from_secs(600), now)
                .expect("a token"),
        );
        let error = world
            .submit(&request, AnswerDecision::Approve, forged)
            .await
            .expect_err("wrong key");
        assert_eq!(error.reason(), "not_authenticated", "{error}");

        // A valid token whose groups claim finance for someone the directory does not know.
        let claimed = world.token("human:dora", &["finance"], Duration::from_secs(600), now);
        let granted = world
            .submit(&request, AnswerDecision::Approve, claimed)
            .await
            .expect("a verified token's groups count");
        assert_eq!(granted.state, ApprovalState::Granted);
        let answer = &granted.answers[0];
        assert_eq!(answer.approver.id, "human:dora");
        assert_eq!(
            answer.approver.authentication,
            countersign::approver::Authentication::Token
        );
        let receipt = world.receipts().await.pop().expect("receipt");
        assert_eq!(receipt.authentication.as_deref(), Some("token"));
        assert_eq!(receipt.channel.as_deref(), Some("cli"));
        assert_eq!(world.call("r6", 5_000).await.expect("runs"), "refunded");
    }
}

#[tokio::test]
async fn an_answer_is_judged_by_the_rule_stored_with_its_request() {
    for world in World::each() {
        // Opened while the policy said anyone may approve a small refund...
        let request = world.request("r7", 50).await;
        // ...then the policy file changes to finance only, in another process: its control
        // answers on the same store.
        let strict = Policy::from_yaml_str(
            "schema: countersign.policy/v1\nenvironment: test\ndirectory:\n  human:alice: [finance]\nactions:\n  refund:\n    effect: \"refund:{id}\"\n    decision: approve\n    approval: { approvers: [\"group:finance\"] }\n",
            None,
        )
        .expect("policy");
        let other = Control::builder_shared(Arc::new(strict), Arc::clone(&world.store))
            .identity(StaticIdentity::new(
                Principal::new("agent:other").expect("principal"),
            ))
            .clock(Arc::clone(&world.clock) as Arc<dyn Clock>)
            .build();
        let answered = other
            .answer(&request.id, AnswerDecision::Approve, "human:sam", None)
            .await
            .expect("the stored rule (anyone) judges it, not the new file");
        assert_eq!(answered.state, ApprovalState::Granted);
        assert_eq!(answered.rule, request.rule);
    }
}

#[tokio::test]
async fn every_malformed_decision_is_refused_and_recorded() {
    // Case B38: only the closed set changes state.
    let submitted = [
        None,
        Some(json!(null)),
        Some(json!("false")),
        Some(json!("no")),
        Some(json!(0)),
        Some(json!(1)),
        Some(json!("true")),
        Some(json!(true)),
        Some(json!({})),
        Some(json!([])),
        Some(json!({"approved": "yes"})),
        Some(json!("")),
        Some(json!("Approve")),
    ];
    for world in World::each() {
        let request = world.request("r8", 50).await;
        for value in &submitted {
            let decision = AnswerDecision::from_submitted(value.as_ref());
            assert!(decision.is_err(), "{value:?} was read as a decision");
            let error = world
                .submit_with(
                    &request,
                    decision,
                    asserted("human:sam"),
                    Channel::Api,
                    None,
                )
                .await
                .expect_err("refused");
            assert_eq!(error.reason(), "invalid_decision", "{value:?}");
            world
                .assert_refused(&request, "invalid_decision", Some("human:sam"))
                .await;
            assert_eq!(
                world.call("r8", 50).await.expect_err("waits").reason(),
                "approval_required"
            );
        }
        for (text, decision) in [
            ("approve", AnswerDecision::Approve),
            ("deny", AnswerDecision::Deny),
            ("reject", AnswerDecision::Deny),
        ] {
            assert_eq!(
                AnswerDecision::from_submitted(Some(&json!(text))),
                Ok(decision)
            );
        }
    }
}

#[tokio::test]
async fn the_hash_a_surface_showed_must_be_the_requests() {
    for world in World::each() {
        let request = world.request("r9", 50).await;
        let other = ActionHash::from_stored(format!("sha256:{}", "0".repeat(64)));
        let error = world
            .submit_with(
                &request,
                Ok(AnswerDecision::Approve),
                asserted("human:sam"),
                Channel::Service,
                Some(other),
            )
            .await
            .expect_err("mismatch");
        assert_eq!(error.reason(), "mismatch");
        world
            .assert_refused(&request, "mismatch", Some("human:sam"))
            .await;
        // A surface that shows the action must echo its hash.
        let error = world
            .submit_with(
                &request,
                Ok(AnswerDecision::Approve),
                asserted("human:sam"),
                Channel::Slack,
                None,
            )
            .await
            .expect_err("no echo");
        assert_eq!(error.reason(), "mismatch");
        // The CLI may leave it out; the receipt says the hash was not confirmed.
        world
            .submit_with(
                &request,
                Ok(AnswerDecision::Approve),
                asserted("human:sam"),
                Channel::Cli,
                None,
            )
            .await
            .expect("recorded");
        let receipt = world.receipts().await.pop().expect("receipt");
        assert_eq!(receipt.hash_confirmed, Some(false));
        let confirmed = world.request("r9b", 60).await;
        world
            .submit_with(
                &confirmed,
                Ok(AnswerDecision::Approve),
                asserted("human:sam"),
                Channel::Service,
                Some(confirmed.action_hash.clone()),
            )
            .await
            .expect("recorded");
        let receipt = world.receipts().await.pop().expect("receipt");
        assert_eq!(receipt.hash_confirmed, Some(true));
        assert_eq!(receipt.channel.as_deref(), Some("service"));
    }
}

#[tokio::test]
async fn a_note_past_the_limit_is_refused_before_anything_is_recorded() {
    let limit = countersign::approval::MAX_NOTE_BYTES;
    // 2,049 two-byte characters: under the limit in characters, over it in bytes.
    let long = "é".repeat(limit / 2 + 1);
    for world in World::each() {
        let request = world.request("r10", 50).await;
        let before = world.receipts().await.len();
        let refused = world
            .control
            .answer(
                &request.id,
                AnswerDecision::Approve,
                "human:sam",
                Some(&long),
            )
            .await
            .expect_err("the note is too long");
        assert_eq!(refused.reason(), "note_too_long", "{refused:?}");
        assert!(
            refused
                .to_string()
                .contains(&format!("{} bytes", long.len())),
            "{refused}"
        );
        assert!(refused.report().may_retry, "a shorter note may be sent");
        assert_eq!(world.record(&request.id).await, request, "nothing changed");
        assert_eq!(world.receipts().await.len(), before, "no receipt");
        // Exactly the limit is kept, and the request is granted.
        let at_limit = "n".repeat(limit);
        let granted = world
            .control
            .answer(
                &request.id,
                AnswerDecision::Approve,
                "human:sam",
                Some(&at_limit),
            )
            .await
            .expect("a note of exactly the limit is kept");
        assert_eq!(granted.state, ApprovalState::Granted);
        let receipt = world.receipts().await.pop().expect("the answer receipt");
        assert_eq!(receipt.note.as_deref(), Some(at_limit.as_str()));
        // A revocation's reason and a resolution's note are held to the same limit.
        let before = world.receipts().await.len();
        let refused = world
            .control
            .revoke(&request.id, "human:sam", Some(&long))
            .await
            .expect_err("the reason is too long");
        assert_eq!(refused.reason(), "note_too_long", "{refused:?}");
        assert_eq!(
            world.record(&request.id).await.state,
            ApprovalState::Granted
        );
        let key = countersign::EffectKey::new("refund:r10").expect("a key");
        let refused = world
            .control
            .resolve(
                &key,
                countersign::EffectState::Failed,
                "human:sam",
                Some(&long),
            )
            .await
            .expect_err("the note is too long");
        assert!(
            matches!(refused, countersign::error::ResolveError::NoteTooLong(_)),
            "{refused:?}"
        );
        assert_eq!(world.receipts().await.len(), before, "no receipt");
    }
}
