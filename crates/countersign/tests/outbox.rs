//! The outbox (issue #17), end to end through every store: each change to a request writes its
//! event in the same transaction, a refused answer writes none, the sweeper expires requests at
//! their `expires_at`, and deliveries are claimed under a lease, retried, kept in order per
//! request, redelivered and pruned. Two connections racing for deliveries never both hold one.
//!
//! PostgreSQL reads `COUNTERSIGN_TEST_POSTGRES_URL` and fails loudly without it (run
//! `.ci/postgres.sh`).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use countersign::outbox::{DeliveryState, EventKind, Settlement, StoredEvent};
use countersign::store::{self, DeliveryClaim, MemoryStore, SqliteStore, Store};
use countersign::{
    ActionRequest, AnswerDecision, ApprovalId, ApprovalState, Clock, Control, ControlError,
    ExecutorError, ManualClock, Policy, Principal, StaticIdentity, Timestamp,
};
use serde_json::json;

const POLICY: &str = r#"schema: countersign.policy/v1
environment: test
directory:
  human:alice: [finance]
  human:bob: [finance]
actions:
  refund:
    effect: "refund:{id}"
    rules:
      - when: { amount: { lte: 100 } }
        decision: approve
      - decision: approve
        approval: { approvers: ["group:finance"], quorum: 2 }
"#;

const START: i64 = 1_790_000_000_000;

/// One store through two separate connections (the second for the races).
struct Backend {
    first: Arc<dyn Store>,
    second: Arc<dyn Store>,
    _folder: Option<tempfile::TempDir>,
}

impl Backend {
    /// Time passes by the store's clock, seen through both connections (issue #22).
    fn pass(&self, by: Duration) {
        let millis = i64::try_from(by.as_millis()).expect("a short duration");
        self.first.shift_clock_for_tests(millis).expect("a shift");
        if !Arc::ptr_eq(&self.first, &self.second) {
            self.second.shift_clock_for_tests(millis).expect("a shift");
        }
    }
}

async fn backends() -> Vec<Backend> {
    let memory: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let folder = tempfile::tempdir().expect("temp dir");
    let path = folder.path().join("outbox.db");
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("sqlite"));
    let sqlite_again: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("sqlite again"));
    let url = support::fresh_postgres_url("outbox");
    let postgres = store::open_url_async(&url).await.expect("PostgreSQL opens");
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

fn refund(id: &str, amount: u64) -> ActionRequest {
    ActionRequest::new("refund", &json!({ "id": id, "amount": amount }))
}

async fn call(control: &Control, id: &str, amount: u64) -> Result<(), ControlError> {
    control
        .execute(refund(id, amount), |_| async { Ok::<_, ExecutorError>(()) })
        .await
        .map(drop)
}

async fn request(control: &Control, id: &str, amount: u64) -> ApprovalId {
    match call(control, id, amount).await {
        Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
        other => panic!("expected approval_required, got {other:?}"),
    }
}

async fn all_events(store: &dyn Store) -> Vec<StoredEvent> {
    store.events(0, 10_000).await.expect("events")
}

/// The kinds of `request`'s events, in order.
async fn kinds_of(store: &dyn Store, request: &ApprovalId) -> Vec<EventKind> {
    all_events(store)
        .await
        .into_iter()
        .filter(|stored| stored.event.request_id.as_ref() == Some(request))
        .map(|stored| stored.event.kind)
        .collect()
}

fn claim(endpoints: &[&str], owner: &str) -> DeliveryClaim {
    DeliveryClaim {
        endpoints: endpoints
            .iter()
            .map(|endpoint| (*endpoint).to_owned())
            .collect(),
        since: Timestamp::from_millis(START - 86_400_000),
        owner: owner.to_owned(),
        lease: Duration::from_secs(60),
        limit: 100,
    }
}

#[tokio::test]
async fn every_change_to_a_request_writes_one_event_with_the_change() {
    for backend in backends().await {
        let name = backend.first.backend();
        let store = backend.first.as_ref();
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(START)));
        let control = control(Arc::clone(&backend.first), Arc::clone(&clock));

        // A quorum of two: opened, answered twice (1 of 2, then granted), consumed.
        let quorum = request(&control, "q1", 500).await;
        control
            .answer(&quorum, AnswerDecision::Approve, "human:alice", None)
            .await
            .expect("first yes");
        assert_eq!(
            kinds_of(store, &quorum).await,
            [EventKind::Opened, EventKind::Answered]
        );
        control
            .answer(&quorum, AnswerDecision::Approve, "human:bob", None)
            .await
            .expect("second yes");
        call(&control, "q1", 500).await.expect("runs once granted");
        assert_eq!(
            kinds_of(store, &quorum).await,
            [
                EventKind::Opened,
                EventKind::Answered,
                EventKind::Answered,
                EventKind::Consumed
            ],
            "{name}"
        );

        // A refused answer (the agent answering its own request) writes its receipt, no event.
        let denied = request(&control, "d1", 50).await;
        let refused = control
            .answer(&denied, AnswerDecision::Approve, "agent:support-bot", None)
            .await
            .expect_err("the principal never answers its own request");
        assert_eq!(refused.reason(), "self_approval", "{name}");
        assert_eq!(
            kinds_of(store, &denied).await,
            [EventKind::Opened],
            "{name}"
        );
        control
            .answer(&denied, AnswerDecision::Deny, "human:alice", None)
            .await
            .expect("denied");
        assert_eq!(
            kinds_of(store, &denied).await,
            [EventKind::Opened, EventKind::Answered],
            "{name}"
        );

        // The body: `countersign.event/v1`, the same id as the row, the request as it stands.
        let events = all_events(store).await;
        let last = events.last().expect("an event");
        let body: serde_json::Value = serde_json::from_str(&last.event.body).expect("JSON");
        assert_eq!(body["schema"], "countersign.event/v1");
        assert_eq!(body["id"], last.event.id.as_str());
        assert_eq!(body["type"], "approval.answered");
        assert_eq!(body["data"]["request_id"], denied.as_str());
        assert_eq!(body["data"]["state"], "denied");
        assert_eq!(body["data"]["answer"]["approver"], "human:alice");
        assert_eq!(body["data"]["answer"]["decision"], "reject");
        assert_eq!(body["data"]["arguments"], json!({"amount": 50, "id": "d1"}));
        let ids: BTreeSet<&str> = events
            .iter()
            .map(|stored| stored.event.id.as_str())
            .collect();
        assert_eq!(ids.len(), events.len(), "{name}: event ids are unique");
        assert!(
            events.windows(2).all(|pair| pair[0].seq < pair[1].seq),
            "{name}: in order"
        );
    }
}

#[tokio::test]
async fn the_sweeper_expires_due_requests_with_a_receipt_and_an_event() {
    for backend in backends().await {
        let name = backend.first.backend();
        let store = backend.first.as_ref();
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(START)));
        let control = control(Arc::clone(&backend.first), Arc::clone(&clock));
        let waiting = request(&control, "s1", 50).await;
        let granted = request(&control, "s2", 50).await;
        control
            .answer(&granted, AnswerDecision::Approve, "human:alice", None)
            .await
            .expect("granted");
        assert!(
            store
                .sweep_expired(clock.now())
                .await
                .expect("sweep")
                .is_empty(),
            "{name}: nothing is due before its expires_at"
        );
        let receipts_before = store.receipts(0, 1_000).await.expect("receipts").len();
        // Time passes by the store's clock (issue #22: PostgreSQL judges by the server's).
        store
            .shift_clock_for_tests(15 * 60 * 1000)
            .expect("a shift");
        let mut expired: Vec<ApprovalId> = store
            .sweep_expired(clock.now())
            .await
            .expect("sweep")
            .into_iter()
            .map(|record| record.id)
            .collect();
        expired.sort();
        let mut expected = vec![waiting.clone(), granted.clone()];
        expected.sort();
        assert_eq!(expired, expected, "{name}");
        for id in [&waiting, &granted] {
            let record = store.approval(id).await.expect("read").expect("exists");
            assert_eq!(record.state, ApprovalState::Expired, "{name}");
            assert_eq!(
                kinds_of(store, id).await.last(),
                Some(&EventKind::Expired),
                "{name}"
            );
        }
        let receipts = store.receipts(0, 1_000).await.expect("receipts");
        assert_eq!(
            receipts.len(),
            receipts_before + 2,
            "{name}: one receipt each"
        );
        // A second sweep finds nothing more, and writes nothing.
        assert!(
            store
                .sweep_expired(clock.now())
                .await
                .expect("sweep")
                .is_empty()
        );
        assert_eq!(
            store.receipts(0, 1_000).await.expect("receipts").len(),
            receipts.len()
        );
        let report = countersign::audit::cross_check_approvals(store)
            .await
            .expect("cross-check");
        assert!(report.agrees(), "{name}: {report:?}");
    }
}

#[tokio::test]
async fn deliveries_are_leased_retried_and_kept_in_order_per_request() {
    for backend in backends().await {
        let name = backend.first.backend();
        let store = backend.first.as_ref();
        let other = backend.second.as_ref();
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(START)));
        let control = control(Arc::clone(&backend.first), Arc::clone(&clock));
        let first = request(&control, "o1", 50).await;
        control
            .answer(&first, AnswerDecision::Approve, "human:alice", None)
            .await
            .expect("granted");
        let second = request(&control, "o2", 50).await;
        let now = clock.now();

        // Two endpoints: each gets its own delivery of each event; only the first event of
        // each request is due (the answer waits for the opening to be delivered).
        let claimed = store
            .claim_deliveries(claim(&["http://a", "http://b"], "one"), now)
            .await
            .expect("claim");
        let due: BTreeSet<(String, String)> = claimed
            .iter()
            .map(|held| {
                (
                    held.delivery.endpoint.clone(),
                    held.delivery
                        .request_id
                        .clone()
                        .expect("a request's event")
                        .to_string(),
                )
            })
            .collect();
        assert_eq!(due.len(), 4, "{name}: {claimed:?}");
        assert!(due.contains(&("http://b".to_owned(), second.to_string())));
        assert!(
            claimed
                .iter()
                .all(|held| held.delivery.kind == EventKind::Opened)
        );
        let body: serde_json::Value = serde_json::from_str(&claimed[0].body).expect("JSON");
        assert_eq!(body["id"], claimed[0].delivery.event_id.as_str());

        // Leased: another sender, through another connection, gets none of them.
        assert!(
            other
                .claim_deliveries(claim(&["http://a", "http://b"], "two"), now)
                .await
                .expect("claim")
                .is_empty(),
            "{name}"
        );

        // `a` acknowledges both openings; `b` fails them and retries later.
        for held in &claimed {
            let settlement = if held.delivery.endpoint == "http://a" {
                Settlement::Delivered { reference: None }
            } else {
                Settlement::Retry {
                    at: now.plus(Duration::from_secs(5)),
                    error: "HTTP 503".to_owned(),
                }
            };
            assert!(
                store
                    .settle_delivery(held.delivery.id, "one", settlement, now)
                    .await
                    .expect("settle")
            );
            // Settled once: a second settlement changes nothing.
            assert!(
                !store
                    .settle_delivery(
                        held.delivery.id,
                        "one",
                        Settlement::Delivered { reference: None },
                        now
                    )
                    .await
                    .expect("settle again"),
                "{name}"
            );
        }
        // Now `a`'s answer event is due; `b`'s waits for its retry and for its opening.
        let next = other
            .claim_deliveries(claim(&["http://a", "http://b"], "two"), now)
            .await
            .expect("claim");
        assert_eq!(next.len(), 1, "{name}: {next:?}");
        assert_eq!(next[0].delivery.endpoint, "http://a");
        assert_eq!(next[0].delivery.kind, EventKind::Answered);
        assert_eq!(next[0].delivery.request_id, Some(first));

        // Six seconds pass by the store's clock (issue #22: PostgreSQL judges by the server's).
        backend.pass(Duration::from_secs(6));
        let retried = store
            .claim_deliveries(claim(&["http://b"], "one"), now)
            .await
            .expect("claim");
        let retried_ids: BTreeSet<&str> = retried
            .iter()
            .map(|held| held.delivery.event_id.as_str())
            .collect();
        let first_ids: BTreeSet<&str> = claimed
            .iter()
            .filter(|held| held.delivery.endpoint == "http://b")
            .map(|held| held.delivery.event_id.as_str())
            .collect();
        assert_eq!(
            retried_ids, first_ids,
            "{name}: a retry carries the same event id"
        );
        assert!(retried.iter().all(|held| held.delivery.attempts == 1));

        // A lease that lapsed is claimed again by another sender; the first can no longer
        // settle it.
        backend.pass(Duration::from_secs(61));
        let lapsed = now;
        let taken = other
            .claim_deliveries(claim(&["http://b"], "two"), lapsed)
            .await
            .expect("claim");
        assert_eq!(taken.len(), retried.len(), "{name}");
        assert!(
            !store
                .settle_delivery(
                    taken[0].delivery.id,
                    "one",
                    Settlement::Delivered { reference: None },
                    lapsed
                )
                .await
                .expect("settle"),
            "{name}: a lapsed lease is no longer the first sender's"
        );

        // Failed after its window, then redelivered by hand.
        let failed_id = taken[0].delivery.id;
        assert!(
            other
                .settle_delivery(
                    failed_id,
                    "two",
                    Settlement::Failed {
                        error: "HTTP 500".to_owned()
                    },
                    lapsed
                )
                .await
                .expect("settle")
        );
        let failed = store
            .deliveries(Some(DeliveryState::Failed), 10)
            .await
            .expect("list");
        assert_eq!(failed.len(), 1, "{name}");
        assert_eq!(failed[0].last_error.as_deref(), Some("HTTP 500"));
        let before = store.store_now(lapsed).await.expect("the store's time");
        let again = store
            .redeliver(failed_id, lapsed)
            .await
            .expect("redeliver")
            .expect("exists");
        let after = store.store_now(lapsed).await.expect("the store's time");
        assert_eq!(again.state, DeliveryState::Pending);
        assert!(
            again.window_start >= before && again.window_start <= after,
            "{name}: the window restarts at the store's time ({before}..{after}): {again:?}"
        );
        assert!(
            store
                .redeliver(999_999, lapsed)
                .await
                .expect("redeliver")
                .is_none()
        );
    }
}

#[tokio::test]
async fn pruning_keeps_what_is_not_delivered() {
    for backend in backends().await {
        let name = backend.first.backend();
        let store = backend.first.as_ref();
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(START)));
        let control = control(Arc::clone(&backend.first), Arc::clone(&clock));
        let delivered = request(&control, "p1", 50).await;
        let undelivered = request(&control, "p2", 50).await;
        let now = clock.now();
        for held in store
            .claim_deliveries(claim(&["http://a"], "one"), now)
            .await
            .expect("claim")
        {
            let settlement = if held.delivery.request_id.as_ref() == Some(&delivered) {
                Settlement::Delivered {
                    reference: Some("C024BE91L/1401483211.000200".to_owned()),
                }
            } else {
                Settlement::Failed {
                    error: "HTTP 410".to_owned(),
                }
            };
            store
                .settle_delivery(held.delivery.id, "one", settlement, now)
                .await
                .expect("settle");
        }
        // The endpoint's own name for what it got (Slack's message) is kept with it.
        assert_eq!(
            store
                .delivery_reference(&delivered, "http://a")
                .await
                .expect("reference")
                .as_deref(),
            Some("C024BE91L/1401483211.000200"),
            "{name}"
        );
        assert_eq!(
            store
                .delivery_reference(&undelivered, "http://a")
                .await
                .expect("reference"),
            None
        );
        assert_eq!(
            store.prune_outbox(now).await.expect("prune"),
            0,
            "{name}: too young"
        );
        // The cutoff is an instant in the store's clock (issue #22).
        let later = store
            .store_now(now)
            .await
            .expect("the store's time")
            .plus(Duration::from_secs(8 * 24 * 3_600));
        assert_eq!(store.prune_outbox(later).await.expect("prune"), 1, "{name}");
        let left: Vec<ApprovalId> = all_events(store)
            .await
            .into_iter()
            .filter_map(|stored| stored.event.request_id)
            .collect();
        assert_eq!(left, [undelivered], "{name}");
        let deliveries = store.deliveries(None, 10).await.expect("list");
        assert_eq!(deliveries.len(), 1, "{name}");
        assert_eq!(deliveries[0].state, DeliveryState::Failed);
    }
}

/// Two senders, each through its own connection, claim and settle as fast as they can: every
/// delivery is claimed by exactly one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_senders_never_both_claim_one_delivery() {
    for backend in backends().await {
        let name = backend.first.backend();
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(START)));
        let control = control(Arc::clone(&backend.first), Arc::clone(&clock));
        for index in 0..24 {
            request(&control, &format!("r{index}"), 50).await;
        }
        let now = clock.now();
        let sender = |store: Arc<dyn Store>, owner: &'static str| {
            tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let mut batch = claim(&["http://a"], owner);
                    batch.limit = 3;
                    let claimed = store.claim_deliveries(batch, now).await.expect("claim");
                    if claimed.is_empty() {
                        return mine;
                    }
                    for held in claimed {
                        tokio::task::yield_now().await;
                        assert!(
                            store
                                .settle_delivery(
                                    held.delivery.id,
                                    owner,
                                    Settlement::Delivered { reference: None },
                                    now
                                )
                                .await
                                .expect("settle"),
                            "a sender lost a delivery it held"
                        );
                        mine.push(held.delivery.event_id);
                    }
                }
            })
        };
        let one = sender(Arc::clone(&backend.first), "one");
        let two = sender(Arc::clone(&backend.second), "two");
        let (one, two) = (one.await.expect("one"), two.await.expect("two"));
        let mut sent: BTreeMap<String, u32> = BTreeMap::new();
        for id in one.iter().chain(&two) {
            *sent.entry(id.clone()).or_default() += 1;
        }
        assert_eq!(sent.len(), 24, "{name}: every event delivered");
        assert!(sent.values().all(|count| *count == 1), "{name}: {sent:?}");
    }
}
