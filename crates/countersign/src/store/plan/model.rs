//! The model-based property test of the plan (issue #20).
//!
//! Random sequences of store operations, from several simulated callers whose clocks disagree
//! by up to five seconds, run against the pure plan over a small in-memory model (this file's
//! [`Model`]: maps, no locks) and, through the public [`Store`] trait, against the memory, SQLite
//! and (when `COUNTERSIGN_TEST_POSTGRES_URL` names a server) PostgreSQL stores. After every
//! operation each backend's result must be the model's; at the end their approvals, effect
//! records, receipts (byte for byte) and outbox events (kind, request, time) must be the
//! model's.
//!
//! Cases: `COUNTERSIGN_MODEL_CASES` (default 48), each of up to 40 operations.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::{Done, EffectVersion, Fetched, Operation, Read, Write};
use crate::ActionHash;
use crate::action::canonical;
use crate::approval::withdraw::{Withdrawal, WithdrawalKind};
use crate::approval::{AnswerDecision, ApprovalId, ApprovalRecord, ApprovalState, Correlation};
use crate::approver::{ApprovalRule, Channel, Credential};
use crate::clock::Timestamp;
use crate::effect::{AttemptContext, EffectKey, EffectRecord, EffectState};
use crate::error::StoreError;
use crate::evidence::{ChainHead, ReceiptDraft, ReceiptKind, ReceiptOutcome, StoredReceipt};
use crate::id::{AttemptId, PolicyHash, Principal};
use crate::outbox::OutboxEvent;
use crate::store::{
    BeginAttempt, BeginOutcome, EffectClaim, FinishAttempt, HandOff, MemoryStore, NewApproval,
    PresentedApproval, RecordAnswer, ResolveEffect, Resolver, SqliteStore, Store,
};

const PRINCIPAL: &str = "agent:bot";
const BASE: i64 = 1_790_000_000_000;

/// The reference: the plan over plain maps, applied write by write with every expectation
/// asserted.
#[derive(Default)]
struct Model {
    approvals: BTreeMap<String, ApprovalRecord>,
    correlations: Vec<(Correlation, ApprovalId)>,
    effects: BTreeMap<String, EffectRecord>,
    receipts: Vec<StoredReceipt>,
    events: Vec<OutboxEvent>,
}

impl Model {
    fn read(&self, read: &Read) -> Fetched {
        match read {
            Read::Approval(id) => {
                Fetched::Approval(id.clone(), self.approvals.get(id.as_str()).cloned())
            }
            Read::ApprovalsForHash(hash) => Fetched::ApprovalsForHash(
                hash.clone(),
                self.approvals
                    .values()
                    .filter(|record| &record.action_hash == hash)
                    .cloned()
                    .collect(),
            ),
            Read::Correlation(correlation) => Fetched::Correlation(
                correlation.clone(),
                self.correlations
                    .iter()
                    .find(|(mapped, _)| mapped == correlation)
                    .map(|(_, id)| id.clone()),
            ),
            Read::Effect(key) => {
                Fetched::Effect(key.clone(), self.effects.get(key.as_str()).cloned())
            }
            Read::EffectHolder(key) => Fetched::EffectHolder(
                key.clone(),
                self.effects.get(key.as_str()).map(|record| EffectVersion {
                    state: record.state,
                    attempt_id: record.attempt_id.clone(),
                }),
            ),
            Read::TokenRevoked(jti) => Fetched::TokenRevoked(jti.clone(), false),
        }
    }

    fn write(&mut self, write: Write) {
        match write {
            Write::InsertApproval(record) => {
                let old = self.approvals.insert(record.id.as_str().to_owned(), record);
                assert!(old.is_none(), "inserted over an existing request");
            }
            Write::UpdateApproval { record, expected } => {
                let slot = self
                    .approvals
                    .get_mut(record.id.as_str())
                    .expect("updated a read row");
                assert_eq!(slot.state, expected.state);
                assert_eq!(slot.answers.len(), expected.answers);
                *slot = record;
            }
            Write::PutCorrelation(mapping) => {
                let found = self
                    .correlations
                    .iter()
                    .position(|(c, _)| c == &mapping.correlation);
                assert_eq!(found.is_some(), mapping.replace, "mapping expectation");
                if let Some(index) = found {
                    self.correlations.remove(index);
                }
                self.correlations.push((mapping.correlation, mapping.id));
            }
            Write::ReserveEffect { record, expected } => {
                let before = self.effects.get(record.key.as_str());
                assert_eq!(
                    before.map(|r| (r.state, r.attempt_id.clone())),
                    expected.map(|e| (e.state, e.attempt_id))
                );
                self.effects.insert(record.key.as_str().to_owned(), record);
            }
            Write::SettleEffect(change) => {
                let slot = self
                    .effects
                    .get_mut(change.key.as_str())
                    .expect("settled a read row");
                assert_eq!(
                    (slot.state, &slot.attempt_id),
                    (change.expected.state, &change.expected.attempt_id)
                );
                change.apply(slot);
            }
        }
    }

    fn run(&mut self, operation: &Operation, now: Timestamp) -> Result<Done, StoreError> {
        let plan = super::plan_with(operation, super::Now::at(now), |read| {
            Ok::<_, StoreError>(self.read(read))
        })?;
        let head = self.receipts.last().map(|last| ChainHead {
            seq: last.seq,
            hash: last.hash.clone(),
        });
        let sealed = plan.seal(head)?;
        for write in sealed.writes {
            self.write(write);
        }
        self.events.extend(sealed.events);
        // One lane, each receipt placed at its `seq`, as the stores read them back.
        self.receipts
            .extend(sealed.receipts.into_iter().map(|mut receipt| {
                receipt.position = receipt.seq;
                receipt
            }));
        Ok(sealed.done)
    }
}

/// One generated step: who calls, how far the shared time moves first (seconds), and the
/// operation's choices as small numbers (read by [`World::operation`]).
#[derive(Clone, Debug)]
struct Step {
    caller: usize,
    advance: i64,
    kind: u8,
    a: u8,
    b: u8,
    c: u8,
    flag: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (
        0..3usize,
        0..40i64,
        0..13u8,
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        any::<bool>(),
    )
        .prop_map(|(caller, advance, kind, a, b, c, flag)| Step {
            caller,
            advance,
            kind,
            a,
            b,
            c,
            flag,
        })
}

fn hash(action: u8) -> ActionHash {
    ActionHash::from_stored(format!("sha256:{:064x}", action))
}

fn request_id(n: usize) -> ApprovalId {
    ApprovalId::from_stored(format!("apr_{n:020}"))
}

fn key(n: u8) -> EffectKey {
    EffectKey::new(format!("key-{}", n % 3)).expect("a valid key")
}

fn credential(n: u8) -> Credential {
    match n % 5 {
        0 => Credential::Asserted("human:alice".to_owned()),
        1 => Credential::Asserted("human:bob".to_owned()),
        2 => Credential::Asserted(PRINCIPAL.to_owned()),
        3 => Credential::Asserted(String::new()),
        _ => Credential::Asserted("human:carol".to_owned()),
    }
}

fn draft(attempt_id: &str, action: u8, outcome: ReceiptOutcome) -> ReceiptDraft {
    ReceiptDraft {
        kind: Some(ReceiptKind::Attempt),
        outcome: Some(outcome),
        attempt_id: Some(AttemptId::from_stored(attempt_id.to_owned())),
        action: Some(format!("kit.action{action}")),
        action_hash: Some(hash(action)),
        principal: Some(Principal::from_stored(PRINCIPAL)),
        environment: Some("test".to_owned()),
        ..ReceiptDraft::default()
    }
}

/// What the sequence has made so far (from the model's results).
#[derive(Default)]
struct World {
    /// Requests opened so far (ids from 1): action, policy entry and run of each.
    opened: Vec<(u8, String, Option<String>)>,
    attempts: usize,
    /// Started attempts: (attempt id, action, key).
    started: Vec<(String, u8, Option<EffectKey>)>,
}

impl World {
    fn operation(&mut self, step: &Step, now: Timestamp) -> Operation {
        let mut action = step.a % 3;
        let mut fingerprint = format!("sha256:entry{}", step.b % 2);
        let mut run = step.c.is_multiple_of(3).then(|| "run-1".to_owned());
        // Mostly a request that exists (and, for an attempt, its action, entry and run); one in
        // eight an id never opened.
        let chosen = usize::from(step.b) % (self.opened.len() + 1);
        let some_request = request_id(if step.b % 8 == 7 {
            0
        } else {
            chosen.max(1).min(self.opened.len())
        });
        if matches!(step.kind, 7..=9)
            && !step.flag
            && let Some(opened) = self.opened.get(chosen.max(1) - 1)
        {
            (action, fingerprint, run) = opened.clone();
        }
        match step.kind {
            0 | 1 => {
                self.opened.push((action, fingerprint.clone(), run.clone()));
                let arguments = canonical::to_canonical(&serde_json::json!({ "n": action }))
                    .expect("canonical arguments");
                let rule = ApprovalRule {
                    quorum: if action == 2 { 2 } else { 1 },
                    distinct_from_requester: true,
                    ..ApprovalRule::default()
                };
                let effect_key = step.c.is_multiple_of(2).then(|| key(step.a / 3));
                let record = ApprovalRecord {
                    id: request_id(self.opened.len()),
                    action_hash: hash(action),
                    action: format!("kit.action{action}"),
                    arguments,
                    principal: Principal::from_stored(PRINCIPAL),
                    resource: None,
                    environment: "test".to_owned(),
                    effect_key: effect_key.clone(),
                    policy_hash: PolicyHash::from_stored("sha256:policy".to_owned()),
                    entry_fingerprint: fingerprint,
                    state: ApprovalState::Pending,
                    created_at: now,
                    expires_at: now.plus(std::time::Duration::from_secs(if step.flag {
                        30
                    } else {
                        300
                    })),
                    answered_at: None,
                    approver: None,
                    note: None,
                    consumed_at: None,
                    consumed_by: None,
                    run: run.clone(),
                    rule,
                    answers: Vec::new(),
                };
                let correlation = (step.kind == 1).then(|| Correlation {
                    framework: "kit".to_owned(),
                    run,
                    call_id: format!("call-{}", step.b % 4),
                });
                Operation::Open(NewApproval {
                    record,
                    effect_key,
                    correlation,
                })
            }
            2..=4 => Operation::Answer(RecordAnswer {
                request_id: some_request.clone(),
                decision: Ok(if step.c.is_multiple_of(4) {
                    AnswerDecision::Deny
                } else {
                    AnswerDecision::Approve
                }),
                approver: credential(step.a),
                channel: Channel::Cli,
                shown_hash: match step.c % 5 {
                    0 => None,
                    1 => Some(hash(step.a % 2)),
                    _ => self
                        .opened
                        .get(chosen.max(1) - 1)
                        .map(|(action, _, _)| hash(*action)),
                },
                note: step.flag.then(|| "ok".to_owned()),
            }),
            5 => Operation::Withdraw(Withdrawal {
                request_id: some_request.clone(),
                kind: match step.c % 3 {
                    0 => WithdrawalKind::Cancel {
                        operator: "ops".to_owned(),
                        channel: Channel::Cli,
                    },
                    1 => WithdrawalKind::Revoke {
                        approver: credential(step.a),
                        channel: Channel::Cli,
                    },
                    _ => WithdrawalKind::CancelAsResolver {
                        resolver: credential(step.a),
                        channel: Channel::Cli,
                    },
                },
                reason: None,
            }),
            6 => Operation::Expire(some_request),
            7..=9 => {
                self.attempts += 1;
                let attempt_id = format!("att_{:020}", self.attempts);
                let begin = BeginAttempt {
                    attempt_id: AttemptId::from_stored(attempt_id.clone()),
                    action_hash: hash(action),
                    approval: (!step.c.is_multiple_of(3)).then(|| PresentedApproval {
                        id: some_request,
                        fingerprint,
                        run: run.clone(),
                    }),
                    effect: step.c.is_multiple_of(2).then(|| EffectClaim {
                        key: key(step.a / 3),
                        lease_until: now.plus(std::time::Duration::from_secs(if step.flag {
                            20
                        } else {
                            120
                        })),
                    }),
                    context: Some(AttemptContext {
                        action: format!("kit.action{action}"),
                        principal: Principal::from_stored(PRINCIPAL),
                        environment: "test".to_owned(),
                        policy_hash: PolicyHash::from_stored("sha256:policy".to_owned()),
                        started_at: now,
                        approval_id: None,
                        resolvers: None,
                    }),
                    refusal_draft: draft(&attempt_id, action, ReceiptOutcome::Refused),
                };
                if step.kind == 9 {
                    Operation::HandOff(HandOff {
                        begin,
                        draft: draft(&attempt_id, action, ReceiptOutcome::HandedOff),
                        detail: "handed to a human".to_owned(),
                    })
                } else {
                    Operation::Begin(begin)
                }
            }
            10 | 11 => match self
                .started
                .get(usize::from(step.b) % self.started.len().max(1))
                .cloned()
            {
                Some((attempt_id, action, effect_key)) => {
                    let (state, outcome) = match step.c % 3 {
                        0 => (EffectState::Committed, ReceiptOutcome::Committed),
                        1 => (EffectState::Failed, ReceiptOutcome::Failed),
                        _ => (EffectState::Ambiguous, ReceiptOutcome::Ambiguous),
                    };
                    Operation::Finish(FinishAttempt {
                        draft: draft(&attempt_id, action, outcome),
                        attempt_id: AttemptId::from_stored(attempt_id),
                        effect_key,
                        state,
                        detail: step.flag.then(|| "executor said so".to_owned()),
                    })
                }
                None => Operation::Append(draft("att_none", action, ReceiptOutcome::Refused)),
            },
            _ => Operation::Resolve(ResolveEffect {
                key: key(step.a),
                to: if step.flag {
                    EffectState::Committed
                } else {
                    EffectState::Failed
                },
                resolver: match step.c % 3 {
                    0 => Resolver::Hook,
                    _ => Resolver::Person {
                        credential: credential(step.b),
                        channel: Channel::Cli,
                    },
                },
                note: None,
            }),
        }
    }

    /// Note the attempts the model started.
    fn learn(&mut self, operation: &Operation, done: &Result<Done, StoreError>) {
        let started = matches!(done, Ok(Done::Begun(BeginOutcome::Started { .. })));
        if let (true, Operation::Begin(begin)) = (started, operation) {
            let action = (0..3u8)
                .find(|action| hash(*action) == begin.action_hash)
                .unwrap_or(0);
            self.started.push((
                begin.attempt_id.to_string(),
                action,
                begin.effect.as_ref().map(|claim| claim.key.clone()),
            ));
        }
    }
}

/// A result as text, for comparison across backends.
fn shown(done: Result<Done, StoreError>) -> String {
    match done {
        Ok(Done::Opened(outcome)) => format!("{:?}", Ok::<_, ()>(outcome)),
        Ok(Done::Answered(result)) => format!("{result:?}"),
        Ok(Done::Begun(outcome)) => format!("{:?}", Ok::<_, ()>(outcome)),
        Ok(Done::HandedOff(outcome)) => format!("{:?}", Ok::<_, ()>(outcome)),
        Ok(Done::Receipt(receipt)) => format!("{:?}", Ok::<_, ()>(*receipt)),
        Ok(Done::Resolved(result)) => format!("{result:?}"),
        Ok(Done::Expired(record)) => format!("{:?}", Ok::<_, ()>(record)),
        Err(error) => format!("Err({error:?})"),
    }
}

/// Run `operation` through the public trait.
async fn call(store: &dyn Store, operation: Operation, now: Timestamp) -> String {
    fn text<T: std::fmt::Debug, E: std::fmt::Debug>(result: Result<T, E>) -> String {
        match result {
            Ok(value) => format!("{:?}", Ok::<_, ()>(value)),
            Err(error) => format!("Err({error:?})"),
        }
    }
    match operation {
        Operation::Open(new) => text(store.open_approval(new, now).await),
        Operation::Answer(answer) => format!("{:?}", store.answer_approval(answer, now).await),
        Operation::Withdraw(withdrawal) => {
            format!("{:?}", store.withdraw_approval(withdrawal, now).await)
        }
        Operation::Expire(id) => text(store.expire_approval(&id, now).await),
        Operation::Begin(begin) => text(store.begin_attempt(begin, now).await),
        Operation::Finish(finish) => text(store.finish_attempt(finish, now).await),
        Operation::HandOff(hand_off) => text(store.hand_off(hand_off, now).await),
        Operation::Append(draft) => text(store.append_receipt(draft, now).await),
        Operation::Resolve(resolve) => format!("{:?}", store.resolve_effect(resolve, now).await),
    }
}

/// The state a store ends in, as text: requests by id, effects by key, receipts, events.
async fn state(store: &dyn Store) -> (String, String, Vec<StoredReceipt>, String) {
    let mut approvals = store.approvals(None).await.expect("approvals");
    approvals.sort_by(|a, b| a.id.cmp(&b.id));
    let mut effects = store.effects(None).await.expect("effects");
    effects.sort_by(|a, b| a.key.cmp(&b.key));
    let receipts = store.receipts(0, usize::MAX).await.expect("receipts");
    let events = store.events(0, usize::MAX).await.expect("events");
    let events: Vec<_> = events
        .iter()
        .map(|stored| {
            (
                stored.event.kind,
                stored.event.request_id.clone(),
                stored.event.created_at,
            )
        })
        .collect();
    (
        format!("{approvals:?}"),
        format!("{effects:?}"),
        receipts,
        format!("{events:?}"),
    )
}

fn model_state(model: &Model) -> (String, String, Vec<StoredReceipt>, String) {
    let approvals: Vec<_> = model.approvals.values().collect();
    let effects: Vec<_> = model.effects.values().collect();
    let events: Vec<_> = model
        .events
        .iter()
        .map(|event| (event.kind, event.request_id.clone(), event.created_at))
        .collect();
    (
        format!("{approvals:?}"),
        format!("{effects:?}"),
        model.receipts.clone(),
        format!("{events:?}"),
    )
}

/// The backends of one case: memory, a fresh SQLite file, and a fresh PostgreSQL schema when a
/// server is named.
async fn backends(dir: &std::path::Path, case: u64) -> Vec<Arc<dyn Store>> {
    let mut stores: Vec<Arc<dyn Store>> = vec![
        Arc::new(MemoryStore::new()),
        Arc::new(SqliteStore::open(dir.join(format!("model-{case}.db"))).expect("sqlite")),
    ];
    #[cfg(feature = "postgres")]
    if let Ok(url) = std::env::var("COUNTERSIGN_TEST_POSTGRES_URL") {
        let separator = if url.contains('?') { '&' } else { '?' };
        let url = format!(
            "{url}{separator}schema=plan_model_{}_{case}&max_connections=2",
            std::process::id()
        );
        let store = crate::store::PostgresStore::connect(&url)
            .await
            .expect("postgres");
        // The model runs at exact caller times, skewed per caller: this test-only mode
        // (compiled into this crate's tests alone) judges by them instead of the server's
        // clock, which `tests/clock.rs` and the store kit's `clock/*` cases test.
        store.judge_by_caller_clock();
        stores.push(Arc::new(store));
    }
    stores
}

fn cases() -> u32 {
    std::env::var("COUNTERSIGN_MODEL_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(48)
}

static CASE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn every_backend_does_what_the_plan_over_the_model_does(
        skews in proptest::array::uniform3(-5_000i64..5_000),
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let case = CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = tempfile::tempdir().expect("a temporary folder");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let stores = backends(dir.path(), case).await;
            let mut model = Model::default();
            let mut world = World::default();
            let mut time = BASE;
            for (index, step) in steps.iter().enumerate() {
                time += step.advance * 1_000;
                let now = Timestamp::from_millis(time + skews[step.caller]);
                let operation = world.operation(step, now);
                let done = model.run(&operation, now);
                world.learn(&operation, &done);
                let expected = shown(done);
                for store in &stores {
                    let got = call(store.as_ref(), operation.clone(), now).await;
                    assert_eq!(
                        got, expected,
                        "step {index} ({}) on {}",
                        operation.name(),
                        store.backend()
                    );
                }
            }
            let expected = model_state(&model);
            for store in &stores {
                let got = state(store.as_ref()).await;
                assert_eq!(got.0, expected.0, "requests on {}", store.backend());
                assert_eq!(got.1, expected.1, "effects on {}", store.backend());
                assert_eq!(got.2, expected.2, "receipts on {}", store.backend());
                assert_eq!(got.3, expected.3, "events on {}", store.backend());
            }
        });
    }
}
