//! Webhooks (issue #17) against a local receiver: signatures verify (and a wrong secret does
//! not), a receiver that is down gets the delivery later, a retry carries the same
//! `webhook-id`, each request's events arrive in order, a request expires (and says so) at its
//! `expires_at`, and two services on one PostgreSQL never both deliver one event.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use countersign::outbox::DeliveryState;
use countersign::store::{self, Store};
use countersign::{
    ActionRequest, ApprovalId, Clock, Control, ControlError, ExecutorError, Policy, Principal,
    StaticIdentity, SystemClock,
};
use countersign_server::webhook::{WebhookEndpoint, WebhookSecret};
use countersign_server::{Notifications, Service, ServiceConfig, SignIn, StoreSource};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};

use crate::api::support::{Backend, Harness, Options};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER_SECRET: &str = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

/// One POST the receiver got.
#[derive(Clone, Debug)]
struct Received {
    id: String,
    timestamp: String,
    signature: String,
    body: String,
    /// What the receiver answered.
    status: u16,
}

impl Received {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }
}

/// A receiver on 127.0.0.1: records every POST; answers 500 to the first attempt of each
/// event when `fail_first` is set, 200 otherwise, after `delay`.
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    fail_first: bool,
    delay: Duration,
}

impl Receiver {
    /// Listen on `addr` (port 0 for any); the bound address and the server task.
    async fn start(&self, addr: SocketAddr) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .expect("a loopback port");
        let bound = listener.local_addr().expect("an address");
        let receiver = self.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: String| {
                let receiver = receiver.clone();
                async move { receiver.take(&headers, body).await }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (bound, task)
    }

    async fn take(&self, headers: &HeaderMap, body: String) -> StatusCode {
        tokio::time::sleep(self.delay).await;
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        let id = header("webhook-id");
        let mut got = self.got.lock().expect("the log");
        let seen = got.iter().any(|earlier| earlier.id == id);
        let status = if self.fail_first && !seen { 500 } else { 200 };
        got.push(Received {
            id,
            timestamp: header("webhook-timestamp"),
            signature: header("webhook-signature"),
            body,
            status,
        });
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().expect("the log").clone()
    }

    /// Wait (up to 20 s) until `done` holds for what was received.
    async fn wait_for(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        for _ in 0..400 {
            let got = self.got();
            if done(&got) {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the receiver never got {what}: {:#?}", self.got());
    }
}

/// Verify a delivery the way a receiver's Standard Webhooks library does, written here from
/// the specification (not with the service's code): some `v1,` signature of
/// `{id}.{timestamp}.{body}` under the secret's key must match.
fn verifies(secret: &str, received: &Received) -> bool {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
        .expect("base64");
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).expect("any key length");
    mac.update(format!("{}.{}.{}", received.id, received.timestamp, received.body).as_bytes());
    let expected = STANDARD.encode(mac.finalize().into_bytes());
    received
        .signature
        .split(' ')
        .filter_map(|part| part.strip_prefix("v1,"))
        .any(|signature| signature == expected)
}

fn webhook(url: &str, secrets: &[&str]) -> Notifications {
    let secrets = secrets
        .iter()
        .map(|secret| WebhookSecret::parse(secret, "test").expect("a secret"))
        .collect();
    Notifications {
        webhooks: vec![WebhookEndpoint::new(url, secrets).expect("an endpoint")],
        timeout: Duration::from_secs(2),
        tick: Duration::from_millis(25),
        ..Notifications::default()
    }
}

async fn harness(case: &str, notifications: Notifications) -> Harness {
    Harness::start(
        Backend::Sqlite,
        case,
        Options {
            notifications: Some(notifications),
            ..Options::default()
        },
    )
    .await
}

#[tokio::test]
async fn deliveries_are_signed_per_standard_webhooks_and_a_wrong_secret_fails() {
    let receiver = Receiver::default();
    let (addr, _task) = receiver.start("127.0.0.1:0".parse().expect("addr")).await;
    let harness = harness("signed", webhook(&format!("http://{addr}/hook"), &[SECRET])).await;
    let (id, hash) = harness
        .ask("finance.small", json!({"payment_id": "pi_w1"}))
        .await;
    let got = receiver
        .wait_for("the opening", |got| !got.is_empty())
        .await;
    let opened = &got[0];
    assert!(verifies(SECRET, opened), "{opened:?}");
    assert!(
        !verifies(OTHER_SECRET, opened),
        "a wrong secret must not verify"
    );
    let mut tampered = opened.clone();
    tampered.body = tampered.body.replace("pi_w1", "pi_w2");
    assert!(
        !verifies(SECRET, &tampered),
        "a changed body must not verify"
    );
    let body = opened.json();
    assert_eq!(body["schema"], "countersign.event/v1");
    assert_eq!(body["type"], "approval.opened");
    assert_eq!(body["id"], opened.id.as_str());
    assert!(opened.id.starts_with("evt_"));
    assert_eq!(body["data"]["request_id"], id.as_str());
    assert_eq!(body["data"]["action_hash"], hash.as_str());
    assert_eq!(body["data"]["arguments"], json!({"payment_id": "pi_w1"}));
    let sent_at: i64 = opened.timestamp.parse().expect("Unix seconds");
    assert!((sent_at - harness.clock.now().as_millis() / 1000).abs() <= 1);

    // The answer through the API arrives next, signed the same way.
    let token = harness.token("human:alice", &["finance"]);
    assert_eq!(harness.answer(&id, &token, "approve", &hash).await.0, 200);
    let got = receiver.wait_for("the answer", |got| got.len() >= 2).await;
    assert_eq!(got[1].json()["type"], "approval.answered");
    assert_eq!(got[1].json()["data"]["answer"]["approver"], "human:alice");
    assert_eq!(got[1].json()["data"]["answer"]["channel"], "service");
    assert!(verifies(SECRET, &got[1]));
    let delivered = harness
        .store
        .deliveries(Some(DeliveryState::Delivered), 10)
        .await
        .expect("deliveries");
    assert_eq!(delivered.len(), 2);
    harness.stop().await;
}

#[tokio::test]
async fn during_a_rotation_both_secrets_sign() {
    let receiver = Receiver::default();
    let (addr, _task) = receiver.start("127.0.0.1:0".parse().expect("addr")).await;
    let url = format!("http://{addr}/hook");
    let harness = harness("rotation", webhook(&url, &[OTHER_SECRET, SECRET])).await;
    harness
        .ask("finance.small", json!({"payment_id": "pi_r1"}))
        .await;
    let got = receiver.wait_for("an event", |got| !got.is_empty()).await;
    assert!(verifies(SECRET, &got[0]) && verifies(OTHER_SECRET, &got[0]));
    assert_eq!(got[0].signature.split(' ').count(), 2);
    harness.stop().await;
}

#[tokio::test]
async fn a_receiver_that_is_down_gets_the_delivery_later_with_the_same_id() {
    // Take a free port, then leave it closed: the receiver is down.
    let probe = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = probe.local_addr().expect("an address");
    drop(probe);
    let harness = harness("down", webhook(&format!("http://{addr}/hook"), &[SECRET])).await;
    let (id, _) = harness
        .ask("finance.small", json!({"payment_id": "pi_d1"}))
        .await;
    let mut failed_once = None;
    for _ in 0..200 {
        let pending = harness
            .store
            .deliveries(Some(DeliveryState::Pending), 10)
            .await
            .expect("deliveries");
        if let Some(delivery) = pending.iter().find(|delivery| delivery.attempts >= 1) {
            failed_once = Some(delivery.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let failed_once = failed_once.expect("the first attempt failed and was recorded");
    assert!(
        failed_once.last_error.as_deref().is_some_and(|error| error
            .starts_with(&format!("cannot deliver to `http://{addr}`: "))
            && error.to_lowercase().contains("connection refused")),
        "the delivery's last error names the receiver and the cause: {failed_once:?}"
    );
    assert!(
        failed_once.next_attempt_at > harness.clock.now(),
        "backs off"
    );

    // The receiver comes up; once the backoff has passed, the same event arrives.
    let receiver = Receiver::default();
    let (_, _task) = receiver.start(addr).await;
    harness.advance(Duration::from_secs(10));
    let got = receiver.wait_for("the retry", |got| !got.is_empty()).await;
    assert_eq!(
        got[0].id, failed_once.event_id,
        "a retry keeps its webhook-id"
    );
    assert_eq!(got[0].json()["data"]["request_id"], id.as_str());
    assert!(verifies(SECRET, &got[0]));
    // Delivered, the row no longer shows the first attempt's error: `last_error` is why the
    // last attempt failed, and it did not.
    let mut delivered = None;
    for _ in 0..200 {
        delivered = harness
            .store
            .deliveries(Some(DeliveryState::Delivered), 10)
            .await
            .expect("deliveries")
            .into_iter()
            .find(|delivery| delivery.event_id == failed_once.event_id);
        if delivered.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let delivered = delivered.expect("the retry is settled delivered");
    assert_eq!(delivered.last_error, None, "{delivered:?}");
    assert_eq!(delivered.attempts, 2, "{delivered:?}");
    harness.stop().await;
}

#[tokio::test]
async fn each_requests_events_arrive_in_order_and_duplicates_keep_their_id() {
    let receiver = Receiver {
        fail_first: true,
        ..Receiver::default()
    };
    let (addr, _task) = receiver.start("127.0.0.1:0".parse().expect("addr")).await;
    let harness = harness("order", webhook(&format!("http://{addr}/hook"), &[SECRET])).await;
    let arguments = json!({"payment_id": "pi_o1"});
    let (id, hash) = harness.ask("finance.refund", arguments.clone()).await;
    let alice = harness.token("human:alice", &["finance"]);
    let bob = harness.token("human:bob", &["finance"]);
    assert_eq!(harness.answer(&id, &alice, "approve", &hash).await.0, 200);
    assert_eq!(harness.answer(&id, &bob, "approve", &hash).await.0, 200);
    harness
        .call("finance.refund", arguments, false)
        .await
        .expect("runs once granted");
    // Every first attempt is answered 500: move the clock past each backoff until all four
    // events are delivered.
    let mut delivered = Vec::new();
    for _ in 0..400 {
        delivered = receiver
            .got()
            .into_iter()
            .filter(|received| received.status == 200)
            .collect();
        if delivered.len() == 4 {
            break;
        }
        harness.advance(Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let kinds: Vec<String> = delivered
        .iter()
        .map(|received| received.json()["type"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "approval.opened",
            "approval.answered",
            "approval.answered",
            "approval.consumed"
        ]
    );
    let got = receiver.got();
    let mut attempts: BTreeMap<&str, Vec<u16>> = BTreeMap::new();
    for received in &got {
        attempts
            .entry(received.id.as_str())
            .or_default()
            .push(received.status);
        assert!(verifies(SECRET, received));
    }
    // Each event: refused once, then delivered, under one id; the duplicate bodies match.
    assert_eq!(attempts.len(), 4);
    assert!(attempts.values().all(|statuses| statuses == &[500, 200]));
    for received in &got {
        let first = got
            .iter()
            .find(|other| other.id == received.id)
            .expect("itself");
        assert_eq!(first.body, received.body);
    }
    // No event of the request was tried before the one before it was delivered.
    for (index, received) in got.iter().enumerate() {
        let position = delivered
            .iter()
            .position(|done| done.id == received.id)
            .expect("delivered");
        for earlier in &delivered[..position] {
            let earlier_done = got
                .iter()
                .position(|other| other.id == earlier.id && other.status == 200)
                .expect("delivered");
            assert!(earlier_done < index, "out of order: {got:#?}");
        }
    }
    harness.stop().await;
}

#[tokio::test]
async fn a_request_expires_at_its_expires_at_and_says_so() {
    let receiver = Receiver::default();
    let (addr, _task) = receiver.start("127.0.0.1:0".parse().expect("addr")).await;
    let harness = harness("expiry", webhook(&format!("http://{addr}/hook"), &[SECRET])).await;
    let (id, _) = harness
        .ask("finance.small", json!({"payment_id": "pi_e1"}))
        .await;
    receiver.wait_for("the opening", |got| got.len() == 1).await;
    harness.advance(Duration::from_secs(15 * 60));
    let got = receiver.wait_for("the expiry", |got| got.len() == 2).await;
    assert_eq!(got[1].json()["type"], "approval.expired");
    assert_eq!(got[1].json()["data"]["state"], "expired");
    // Nobody touched the request: the sweeper expired it, with its receipt.
    let record = harness
        .store
        .approval(&id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(record.state, countersign::ApprovalState::Expired);
    let receipts = harness.store.receipts(0, 100).await.expect("receipts");
    let last = receipts
        .last()
        .expect("a receipt")
        .to_receipt()
        .expect("parses");
    assert_eq!(last.reason.as_deref(), Some("expired"));
    harness.stop().await;
}

/// Two services (two `countersign serve` replicas) on one PostgreSQL schema, each with its own
/// connection pool and its own background sender, deliver to one slow receiver: every event
/// arrives exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_on_one_postgres_never_both_deliver_an_event() {
    let receiver = Receiver {
        delay: Duration::from_millis(20),
        ..Receiver::default()
    };
    let (addr, _task) = receiver.start("127.0.0.1:0".parse().expect("addr")).await;
    let base = std::env::var("COUNTERSIGN_TEST_POSTGRES_URL").expect(
        "COUNTERSIGN_TEST_POSTGRES_URL is not set: run `.ci/postgres.sh` and source what it prints",
    );
    let suffix = ApprovalId::generate().as_str()[4..14].to_owned();
    let joiner = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{joiner}schema=replicas_{suffix}&max_connections=4");
    let policy = Policy::from_yaml_str(
        "schema: countersign.policy/v1\nactions:\n  deploy:\n    decision: approve\n",
        None,
    )
    .expect("policy");
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let store = store::open_url_async(&url).await.expect("PostgreSQL");
        let service = Service::new(ServiceConfig {
            store: StoreSource::Open(store),
            sign_in: SignIn::default(),
            directory: BTreeMap::new(),
            auditors_group: None,
            public_url: None,
            clock: Arc::new(SystemClock),
            policy: None,
        });
        let mut notifications = webhook(&format!("http://{addr}/hook"), &[SECRET]);
        notifications.tick = Duration::from_millis(5);
        replicas.push(countersign_server::notify::spawn(&service, notifications));
    }
    let store: Arc<dyn Store> = store::open_url_async(&url).await.expect("PostgreSQL");
    let control = Control::builder_shared(Arc::new(policy), Arc::clone(&store))
        .identity(StaticIdentity::new(
            Principal::new("agent:ci").expect("principal"),
        ))
        .build();
    const REQUESTS: usize = 30;
    for index in 0..REQUESTS {
        let outcome = control
            .execute(
                ActionRequest::new("deploy", &json!({ "service": format!("svc{index}") })),
                |_| async { Ok::<_, ExecutorError>(()) },
            )
            .await;
        assert!(
            matches!(outcome, Err(ControlError::ApprovalRequired { .. })),
            "{outcome:?}"
        );
    }
    receiver
        .wait_for("every opening", |got| {
            got.iter()
                .map(|received| received.id.as_str())
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                == REQUESTS
        })
        .await;
    // Give a second sender every chance to send one again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for received in receiver.got() {
        *counts.entry(received.id).or_default() += 1;
    }
    assert_eq!(counts.len(), REQUESTS);
    assert!(
        counts.values().all(|count| *count == 1),
        "an event was delivered twice: {counts:?}"
    );
    let delivered = store
        .deliveries(Some(DeliveryState::Delivered), 100)
        .await
        .expect("deliveries");
    assert_eq!(delivered.len(), REQUESTS);
    assert!(delivered.iter().all(|delivery| delivery.attempts == 1));
    for replica in replicas {
        replica.abort();
    }
}

/// The receiver behind a TLS terminator whose certificate (for `localhost` and 127.0.0.1) a
/// local CA made with `openssl` signed; the CA, another CA, and the `https://` hook URL.
async fn tls_receiver(
    receiver: &Receiver,
    folder: &std::path::Path,
) -> (
    countersign_http::testing::LocalCa,
    countersign_http::testing::LocalCa,
    String,
    Vec<tokio::task::JoinHandle<()>>,
) {
    use countersign_http::testing::{LocalCa, server_config, terminate_tls};
    let ca = LocalCa::new(folder, "ca").expect("a CA (needs the openssl command)");
    let other = LocalCa::new(folder, "other").expect("another CA");
    let leaf = ca
        .leaf("receiver", &["DNS:localhost", "IP:127.0.0.1"])
        .expect("a leaf");
    let (plain, receiving) = receiver.start("127.0.0.1:0".parse().expect("addr")).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = listener.local_addr().expect("an address").port();
    let terminating = terminate_tls(listener, server_config(&leaf).expect("TLS"), plain);
    (
        ca,
        other,
        format!("https://localhost:{port}/hook"),
        vec![receiving, terminating],
    )
}

#[tokio::test]
async fn an_https_receiver_gets_signed_deliveries_through_the_configured_ca() {
    let folder = tempfile::tempdir().expect("a folder");
    let receiver = Receiver::default();
    let (ca, _, url, tasks) = tls_receiver(&receiver, folder.path()).await;
    let mut notifications = webhook(&url, &[SECRET]);
    notifications.trust = countersign_http::Trust::pem_file(&ca.certificate()).expect("the CA");
    let harness = harness("https", notifications).await;
    let (id, _) = harness
        .ask("finance.small", json!({"payment_id": "pi_s1"}))
        .await;
    let got = receiver
        .wait_for("the opening", |got| !got.is_empty())
        .await;
    assert!(verifies(SECRET, &got[0]), "{:?}", got[0]);
    assert_eq!(got[0].json()["data"]["request_id"], id.as_str());
    harness.stop().await;
    for task in tasks {
        task.abort();
    }
}

#[tokio::test]
async fn an_https_receiver_with_an_unknown_ca_fails_closed_and_says_what_to_do() {
    let folder = tempfile::tempdir().expect("a folder");
    let receiver = Receiver::default();
    let (_, other, url, tasks) = tls_receiver(&receiver, folder.path()).await;
    let mut notifications = webhook(&url, &[SECRET]);
    notifications.trust = countersign_http::Trust::pem_file(&other.certificate()).expect("a CA");
    let harness = harness("https-unknown-ca", notifications).await;
    harness
        .ask("finance.small", json!({"payment_id": "pi_s2"}))
        .await;
    let mut failed = None;
    for _ in 0..200 {
        let pending = harness
            .store
            .deliveries(Some(DeliveryState::Pending), 10)
            .await
            .expect("deliveries");
        if let Some(delivery) = pending.iter().find(|delivery| delivery.attempts >= 1) {
            failed = Some(delivery.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let failed = failed.expect("the attempt failed and was recorded");
    let error = failed.last_error.clone().unwrap_or_default();
    assert!(
        error.contains("TLS handshake")
            && error.contains("does not trust")
            && error.contains("ca_file")
            && error.contains(&url.replace("/hook", "")),
        "{error}"
    );
    assert!(receiver.got().is_empty(), "nothing reached the receiver");
    harness.stop().await;
    for task in tasks {
        task.abort();
    }
}
