//! One clock (issue #22): two hosts whose clocks disagree by minutes reach the same verdict on
//! one PostgreSQL store, because expiry and leases are judged by the server's clock.
//!
//! Each test runs two [`Control`]s, one whose clock runs 10 minutes ahead of the host's and one
//! 10 minutes behind, each on its own connection pool to one store: directly, and through
//! PgBouncer when `COUNTERSIGN_TEST_PGBOUNCER_URL` is set. Time moves with the stores' test
//! offset ([`Store::shift_clock_for_tests`]), never by waiting. PostgreSQL reads
//! `COUNTERSIGN_TEST_POSTGRES_URL` and fails loudly without it (run `.ci/postgres.sh`).

use std::sync::Arc;
use std::time::Duration;

use countersign::store::{self, Store};
use countersign::{
    ActionRequest, AnswerDecision, ApprovalState, Clock, Control, ControlError, EffectKey,
    EffectState, ExecutorError, ManualClock, Policy, Principal, StaticIdentity, SystemClock,
    Timestamp,
};
use serde_json::json;

const POLICY: &str = r#"schema: countersign.policy/v1
environment: test
directory:
  human:alice: [finance]
actions:
  refund:
    effect: "refund:{id}"
    rules:
      - decision: approve
        approval: { approvers: ["group:finance"] }
  ship:
    effect: "ship:{id}"
    rules:
      - decision: allow
"#;

/// Ten minutes, the skew of each host's clock.
const SKEW: Duration = Duration::from_secs(600);

/// The approval TTL (the policy's default) and the lease (the control's default).
const TTL: Duration = Duration::from_secs(15 * 60);
const LEASE: Duration = countersign::control::DEFAULT_LEASE;

/// The store URLs to run on: PostgreSQL, and PgBouncer when set; each with a fresh schema.
fn urls(test: &str) -> Vec<String> {
    let direct = std::env::var("COUNTERSIGN_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "COUNTERSIGN_TEST_POSTGRES_URL is not set: these tests need PostgreSQL; run `.ci/postgres.sh` and export the URL it prints"
        )
    });
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    let mut urls = vec![direct];
    urls.extend(std::env::var("COUNTERSIGN_TEST_PGBOUNCER_URL").ok());
    urls.into_iter()
        .enumerate()
        .map(|(index, url)| {
            let separator = if url.contains('?') { '&' } else { '?' };
            format!(
                "{url}{separator}schema=clock_{test}_{}_{nanos}_{index}",
                std::process::id()
            )
        })
        .collect()
}

/// Two hosts on one store: each its own connection pool and its own skewed clock.
struct Hosts {
    ahead: Control,
    behind: Control,
    ahead_store: Arc<dyn Store>,
    behind_store: Arc<dyn Store>,
    ahead_clock: Arc<ManualClock>,
    url: String,
}

async fn hosts(url: String) -> Hosts {
    let ahead_store = store::open_url_async(&url).await.expect("the store opens");
    let behind_store = store::open_url_async(&url)
        .await
        .expect("a second pool on the store opens");
    let real = SystemClock.now();
    let ahead_clock = Arc::new(ManualClock::new(real.plus(SKEW)));
    let behind_clock = Arc::new(ManualClock::new(Timestamp::from_millis(
        real.as_millis() - millis(SKEW),
    )));
    Hosts {
        ahead: control(Arc::clone(&ahead_store), Arc::clone(&ahead_clock)),
        behind: control(Arc::clone(&behind_store), behind_clock),
        ahead_store,
        behind_store,
        ahead_clock,
        url,
    }
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

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).expect("a short duration")
}

impl Hosts {
    /// Time passes for both hosts: the store's clock moves by `by`, as seen through either
    /// pool. (The hosts' own clocks stand still: the store does not read them.)
    fn pass(&self, by: Duration) {
        for store in [&self.ahead_store, &self.behind_store] {
            store.shift_clock_for_tests(millis(by)).expect("a shift");
        }
    }

    /// The store's time now.
    async fn store_now(&self) -> Timestamp {
        self.ahead_store
            .store_now(SystemClock.now())
            .await
            .expect("the store's clock")
    }
}

fn refund(id: &str) -> ActionRequest {
    ActionRequest::new("refund", &json!({ "id": id }))
}

fn ship(id: &str) -> ActionRequest {
    ActionRequest::new("ship", &json!({ "id": id }))
}

#[tokio::test]
async fn an_approval_expires_at_one_store_time_for_hosts_minutes_apart() {
    for url in urls("approval") {
        let hosts = hosts(url).await;
        let before = hosts.store_now().await;
        let (request, expires_at) = match hosts
            .ahead
            .execute(refund("r1"), |_| async { Ok::<_, ExecutorError>(()) })
            .await
        {
            Err(ControlError::ApprovalRequired {
                request_id,
                expires_at,
                ..
            }) => (request_id, expires_at),
            other => panic!("{}: expected approval_required, got {other:?}", hosts.url),
        };
        let after = hosts.store_now().await;
        // The TTL runs from the store's time, not from the clock of the host that asked (10
        // minutes ahead).
        assert!(
            expires_at >= before.plus(TTL) && expires_at <= after.plus(TTL),
            "{}: expires {expires_at}, the store's clock read {before}..{after}",
            hosts.url
        );
        hosts
            .behind
            .answer(&request, AnswerDecision::Approve, "human:alice", None)
            .await
            .expect("the host behind grants it");

        // A minute before it expires by the store's clock: the host ahead (whose own clock is
        // already 9 minutes past the expiry) neither sweeps it nor finds it expired.
        hosts.pass(TTL - Duration::from_secs(60));
        let swept = hosts
            .ahead_store
            .sweep_expired(hosts.ahead_clock.now())
            .await
            .expect("a sweep");
        assert!(swept.is_empty(), "{}: swept {swept:?}", hosts.url);
        let kept = hosts
            .ahead_store
            .expire_approval(&request, hosts.ahead_clock.now())
            .await
            .expect("an expiry check");
        assert!(kept.is_none(), "{}: expired early: {kept:?}", hosts.url);

        // A minute after: the host behind (whose own clock reads 4 minutes after the request
        // was opened) is refused `expired`, and the request is marked so once.
        hosts.pass(Duration::from_secs(120));
        let refused = hosts
            .behind
            .execute(refund("r1").with_approval(request.clone()), |_| async {
                Ok::<_, ExecutorError>(())
            })
            .await
            .expect_err("the grant has expired by the store's clock");
        assert_eq!(refused.reason(), "expired", "{}: {refused:?}", hosts.url);
        let record = hosts
            .ahead_store
            .approval(&request)
            .await
            .expect("read")
            .expect("the request exists");
        assert_eq!(record.state, ApprovalState::Expired, "{}", hosts.url);
    }
}

#[tokio::test]
async fn an_effect_lease_lapses_at_one_store_time_for_hosts_minutes_apart() {
    for url in urls("lease") {
        let hosts = hosts(url).await;
        let key = EffectKey::new("ship:s1").expect("key");
        let (started, started_rx) = tokio::sync::oneshot::channel::<()>();
        let (release, release_rx) = tokio::sync::oneshot::channel::<()>();
        // The host behind runs the effect and holds its lease while its executor runs.
        let running = hosts.behind.execute(ship("s1"), move |_| async move {
            let _ = started.send(());
            let _ = release_rx.await;
            Ok::<_, ExecutorError>("shipped")
        });
        let checks = async {
            started_rx.await.expect("the executor starts");
            let record = hosts
                .ahead_store
                .effect(&key)
                .await
                .expect("read")
                .expect("reserved");
            let now = hosts.store_now().await;
            assert!(
                record.lease_until > now && record.lease_until <= now.plus(LEASE),
                "{}: the lease runs to {}, the store's clock reads {now}",
                hosts.url,
                record.lease_until
            );
            // The host ahead, whose own clock is already 15 minutes past the lease, sees it
            // held: `in_progress`, and nothing is marked.
            let refused = hosts
                .ahead
                .execute(ship("s1"), |_| async { Ok::<_, ExecutorError>("twice") })
                .await
                .expect_err("the key is held");
            assert_eq!(
                refused.reason(),
                "in_progress",
                "{}: {refused:?}",
                hosts.url
            );

            // Past the lease by the store's clock: both hosts see it lapsed (the host behind
            // would not, by its own clock, for 20 more minutes).
            hosts.pass(LEASE + Duration::from_secs(1));
            let refused = hosts
                .ahead
                .execute(ship("s1"), |_| async { Ok::<_, ExecutorError>("twice") })
                .await
                .expect_err("the lease lapsed: ambiguous");
            assert_eq!(refused.reason(), "ambiguous", "{}: {refused:?}", hosts.url);
            let record = hosts
                .behind_store
                .effect(&key)
                .await
                .expect("read")
                .expect("kept");
            assert_eq!(record.state, EffectState::Ambiguous, "{}", hosts.url);
            let _ = release.send(());
        };
        let (ran, ()) = tokio::join!(running, checks);
        // The executor ran once; its late outcome leaves the lapsed record ambiguous.
        let _ = ran;
        let record = hosts
            .behind_store
            .effect(&key)
            .await
            .expect("read")
            .expect("kept");
        assert_eq!(record.state, EffectState::Ambiguous, "{}", hosts.url);
    }
}
