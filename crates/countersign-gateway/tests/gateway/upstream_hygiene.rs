//! Upstream hygiene: an upstream session that expires is renewed and the refused call sent once
//! on the new session (HTTP 404 for a known session id proves it was not processed); the
//! client's credentials and session id never reach the upstream or the evidence (case B47); an
//! upstream that refuses the handshake gets no call, and costs the HTTP front no session.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use countersign::{EffectState, Store};
use countersign_gateway::{Gateway, HeaderPrincipal, HttpFrontConfig, PrincipalSource, Upstream};
use serde_json::json;
use tokio::task::JoinHandle;

use super::faulty_http::{self, Mode};
use super::harness::{Client, config, connect, memory_store, modern_params, policy};
use super::http_front::{JsonValue, post};

const POLICY: &str = "schema: countersign.policy/v1\nactions:\n  mcp.billing.create_invoice:\n    effect: \"invoice:{customer}\"\n    decision: allow\n";

/// A stdio gateway in front of a fresh [`Mode::Sessions`] upstream, its client initialized and
/// its first call (`c1`) committed.
struct Billing {
    upstream: Arc<faulty_http::Faulty>,
    server: JoinHandle<()>,
    store: Arc<dyn Store>,
    client: Client,
    task: JoinHandle<()>,
}

async fn billing_after_one_call() -> Billing {
    let (url, upstream, server) = faulty_http::start_in(Mode::Sessions).await;
    let store = memory_store();
    let gateway = Gateway::new(config("billing"), policy(POLICY), store.clone()).expect("gateway");
    let (mut client, task) = connect(&gateway, Upstream::Url(url));
    client.initialize(json!({})).await;
    let first = client
        .call("create_invoice", json!({"customer": "c1"}))
        .await;
    assert_eq!(
        first["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{first}"
    );
    Billing {
        upstream,
        server,
        store,
        client,
        task,
    }
}

#[tokio::test]
async fn an_expired_upstream_session_is_renewed_and_the_refused_call_sent_once_on_it() {
    let Billing {
        upstream,
        server,
        store,
        mut client,
        task,
    } = billing_after_one_call().await;
    upstream.expire();
    let second = client
        .call("create_invoice", json!({"customer": "c2"}))
        .await;
    assert_eq!(
        second["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{second}"
    );
    // The upstream's own count: the c2 call arrived twice (refused unprocessed with 404, then
    // on the new session) and ran once; a new session was opened once.
    assert_eq!(upstream.calls_of("create_invoice"), 3);
    let executed = upstream.executed.lock().expect("executed").clone();
    assert_eq!(
        executed
            .iter()
            .map(|params| params["arguments"]["customer"].clone())
            .collect::<Vec<_>>(),
        [json!("c1"), json!("c2")]
    );
    let received = upstream.received.lock().expect("received").clone();
    let initializes = received
        .iter()
        .filter(|request| request.method == "initialize")
        .count();
    assert_eq!(initializes, 2);
    let last = received.last().expect("a request");
    assert_eq!(last.header("mcp-session-id"), Some("session-2"));
    let effects = store.effects(None).await.expect("effects");
    assert!(
        effects
            .iter()
            .all(|effect| effect.state == EffectState::Committed),
        "{effects:?}"
    );
    task.abort();
    server.abort();
}

const SECRET: &str = "0123456789abcdef0123456789abcdef-client-secret";

#[tokio::test]
async fn the_clients_credentials_and_session_id_never_reach_the_upstream_or_the_evidence() {
    let (upstream_url, upstream, server) = faulty_http::start_in(Mode::Sessions).await;
    let store = memory_store();
    let mut config = config("billing");
    config.principal = PrincipalSource::Header(
        HeaderPrincipal::new("x-countersign-principal", SECRET).expect("header principal"),
    );
    let gateway = Gateway::new(config, policy(POLICY), store.clone()).expect("gateway");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let upstream_for_sessions = upstream_url.clone();
    let front = tokio::spawn(async move {
        let _ = gateway
            .serve_http(listener, HttpFrontConfig::default(), move || {
                Ok(Upstream::Url(upstream_for_sessions.clone()))
            })
            .await;
    });
    let bearer = format!("Bearer {SECRET}");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": modern_params(
        json!({"name": "create_invoice", "arguments": {"customer": "c9"}}), json!({}))});
    let reply = post(
        &url,
        Some("client-session-S_client"),
        &body,
        &[
            ("authorization", &bearer),
            ("x-countersign-principal", "user:alice"),
            ("cookie", "sid=client-cookie"),
            ("x-forwarded-for", "203.0.113.9"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "create_invoice"),
        ],
    )
    .await
    .json_value()
    .await;
    assert_eq!(
        reply["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{reply}"
    );
    let received = upstream.received.lock().expect("received").clone();
    assert!(
        received
            .iter()
            .any(|request| request.method == "tools/call")
    );
    for request in &received {
        for (name, value) in &request.headers {
            assert!(
                !value.contains(SECRET)
                    && !value.contains("client-cookie")
                    && !value.contains("S_client")
                    && !value.contains("203.0.113.9"),
                "{name}: {value} reached the upstream"
            );
        }
        assert!(request.header("authorization").is_none());
        assert!(request.header("cookie").is_none());
        assert!(!request.body.to_string().contains(SECRET));
    }
    // The evidence names the principal the secret authenticated, never the secret.
    let receipts = store.receipts(0, 100).await.expect("receipts");
    let evidence = format!("{receipts:?}");
    assert!(evidence.contains("user:alice"), "{evidence}");
    assert!(!evidence.contains(SECRET) && !evidence.contains("S_client"));
    front.abort();
    server.abort();
}

#[tokio::test]
async fn parameters_a_2026_07_28_upstream_marks_are_mirrored_into_its_headers() {
    let (url, upstream, server) = faulty_http::start().await;
    let policy = policy(
        "schema: countersign.policy/v1\nactions:\n  mcp.billing.locate:\n    decision: allow\n",
    );
    let gateway = Gateway::new(config("billing"), policy, memory_store()).expect("gateway");
    let (mut client, task) = connect(&gateway, Upstream::Url(url));
    let listed = client.modern("tools/list", json!({}), json!({})).await;
    assert_eq!(listed["result"]["tools"][0]["name"], "locate", "{listed}");
    for region in ["eu-west1", "Zürich"] {
        // The fake cuts every call's stream; what it received is what counts here.
        let _ = client
            .modern(
                "tools/call",
                json!({"name": "locate", "arguments": {"region": region}}),
                json!({}),
            )
            .await;
    }
    let received = upstream.received.lock().expect("received").clone();
    let mirrored: Vec<Option<String>> = received
        .iter()
        .filter(|request| request.method == "tools/call")
        .map(|request| request.header("mcp-param-region").map(str::to_owned))
        .collect();
    assert_eq!(
        mirrored,
        [
            Some("eu-west1".to_owned()),
            Some(format!("=?base64?{}?=", "WsO8cmljaA=="))
        ]
    );
    task.abort();
    server.abort();
}

#[tokio::test]
async fn the_upstream_session_is_ended_with_delete_when_the_client_leaves() {
    let (url, upstream, server) = faulty_http::start_in(Mode::Sessions).await;
    let gateway = Gateway::new(config("billing"), policy(POLICY), memory_store()).expect("gateway");
    let (mut client, task) = connect(&gateway, Upstream::Url(url));
    client.initialize(json!({})).await;
    client.close_input().await;
    tokio::time::timeout(std::time::Duration::from_secs(10), task)
        .await
        .expect("the gateway ends with its client")
        .expect("no panic");
    let received = upstream.received.lock().expect("received").clone();
    let last = received.last().expect("a request");
    assert_eq!(
        (last.http_method.as_str(), last.header("mcp-session-id")),
        ("DELETE", Some("session-1")),
        "{received:?}"
    );
    server.abort();
}

const HANDSHAKE: &str = r#"{"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}"#;

#[tokio::test]
async fn after_the_upstream_refuses_the_handshake_no_call_is_sent_until_a_new_one_succeeds() {
    let (url, upstream, server) = faulty_http::start_in(Mode::Sessions).await;
    upstream.refuse_sessions.store(true, Ordering::SeqCst);
    let store = memory_store();
    let gateway = Gateway::new(config("billing"), policy(POLICY), store.clone()).expect("gateway");
    let (mut client, task) = connect(&gateway, Upstream::Url(url));
    let handshake: serde_json::Value = serde_json::from_str(HANDSHAKE).expect("json");
    let refused = client.request("initialize", handshake).await;
    let refusal = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(refusal.contains("503"), "{refused}");
    // The client goes on regardless: its call is refused unsent, and nothing is recorded
    // (before, it was sent to an upstream with no session for it and recorded `ambiguous`).
    let call = client
        .call("create_invoice", json!({"customer": "c1"}))
        .await;
    assert_eq!(call["error"]["code"], -32098, "{call}");
    let message = call["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the upstream did not accept `initialize`")
            && message.contains("503")
            && message.contains("send `initialize` again"),
        "{call}"
    );
    assert_eq!(upstream.calls_of("create_invoice"), 0);
    assert!(store.effects(None).await.expect("effects").is_empty());
    let pong = client.request("ping", json!({})).await;
    assert_eq!(
        pong["result"],
        json!({}),
        "the gateway answers a ping itself: {pong}"
    );

    upstream.refuse_sessions.store(false, Ordering::SeqCst);
    client.initialize(json!({})).await;
    let call = client
        .call("create_invoice", json!({"customer": "c1"}))
        .await;
    assert_eq!(
        call["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{call}"
    );
    task.abort();
    server.abort();
}

/// An HTTP front with `--max-sessions 1` and `call_timeout` in front of `upstream_url`: its
/// `/mcp` URL and its task.
async fn one_session_front(
    upstream_url: String,
    call_timeout: Duration,
) -> (String, tokio::task::JoinHandle<()>) {
    let mut config = config("billing");
    config.call_timeout = call_timeout;
    let gateway = Gateway::new(config, policy(POLICY), memory_store()).expect("gateway");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let front_config = HttpFrontConfig {
        max_sessions: 1,
        ..HttpFrontConfig::default()
    };
    let front = tokio::spawn(async move {
        let _ = gateway
            .serve_http(listener, front_config, move || {
                Ok(Upstream::Url(upstream_url.clone()))
            })
            .await;
    });
    (url, front)
}

fn initialize_body() -> serde_json::Value {
    let handshake: serde_json::Value = serde_json::from_str(HANDSHAKE).expect("json");
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": handshake})
}

/// Send `initialize` to `url` as a client whose own timeout (200 ms) is shorter than the
/// upstream's start, and give up.
async fn give_up_on_initialize(url: &str) {
    let gave_up = super::harness::http_client()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .timeout(Duration::from_millis(200))
        .body(initialize_body().to_string())
        .send()
        .await;
    assert!(gave_up.is_err(), "the client gave up: {gave_up:?}");
}

#[tokio::test]
async fn a_client_that_gives_up_on_initialize_leaves_no_session_and_a_slow_upstream_is_timed_out() {
    let (upstream_url, upstream, server) = faulty_http::start_in(Mode::Sessions).await;
    upstream.initialize_delay_ms.store(2_000, Ordering::SeqCst);
    let (url, front) = one_session_front(upstream_url.clone(), Duration::from_secs(30)).await;
    give_up_on_initialize(&url).await;
    // Its session goes with it: the one slot is free again well before the upstream would
    // have answered (before, it stayed taken until the gateway stopped).
    upstream.initialize_delay_ms.store(0, Ordering::SeqCst);
    let opened = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let response = post(&url, None, &initialize_body(), &[]).await;
            if response.status() == 200 {
                return response;
            }
            assert_eq!(response.status(), 503, "only the slot may be missing");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the slot is freed once the client gave up");
    assert!(opened.headers().get("mcp-session-id").is_some());
    front.abort();

    // An upstream that takes longer than --call-timeout to answer `initialize`: the client is
    // told, gets no session, and the slot is free again.
    upstream.initialize_delay_ms.store(2_000, Ordering::SeqCst);
    let (url, front) = one_session_front(upstream_url, Duration::from_millis(300)).await;
    let timed_out = post(&url, None, &initialize_body(), &[]).await;
    assert_eq!(timed_out.status(), 504);
    assert!(timed_out.headers().get("mcp-session-id").is_none());
    let reply = timed_out.json_value().await;
    assert!(
        reply["error"]["message"].as_str().is_some_and(
            |message| message.contains("did not answer `initialize` within --call-timeout")
        ),
        "{reply}"
    );
    upstream.initialize_delay_ms.store(0, Ordering::SeqCst);
    let opened = post(&url, None, &initialize_body(), &[]).await;
    assert_eq!(opened.status(), 200);
    front.abort();
    server.abort();
}

#[tokio::test]
async fn a_handshake_the_upstream_refuses_opens_no_session_on_the_http_front() {
    let (upstream_url, upstream, server) = faulty_http::start_in(Mode::Sessions).await;
    upstream.refuse_sessions.store(true, Ordering::SeqCst);
    let (url, front) = one_session_front(upstream_url, Duration::from_secs(30)).await;
    let body = initialize_body();
    let refused = post(&url, None, &body, &[]).await;
    assert!(
        refused.headers().get("mcp-session-id").is_none(),
        "a refused handshake issues no session: {:?}",
        refused.headers()
    );
    let reply = refused.json_value().await;
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("503")),
        "the client gets the refusal as it came: {reply}"
    );
    // The one `--max-sessions` slot is free again: once the upstream takes sessions, a new
    // `initialize` opens one (before, the front answered 503 `too many sessions`).
    upstream.refuse_sessions.store(false, Ordering::SeqCst);
    let accepted = post(&url, None, &body, &[]).await;
    assert_eq!(accepted.status(), 200);
    assert!(accepted.headers().get("mcp-session-id").is_some());
    let reply = accepted.json_value().await;
    assert_eq!(reply["result"]["serverInfo"]["name"], "faulty", "{reply}");
    front.abort();
    server.abort();
}

#[tokio::test]
async fn a_lost_upstream_session_is_opened_again_before_any_call_and_never_skipped() {
    let Billing {
        upstream,
        server,
        store,
        mut client,
        task,
    } = billing_after_one_call().await;
    // The session expires and the upstream is full: the renewal is refused.
    upstream.expire();
    upstream.refuse_sessions.store(true, Ordering::SeqCst);
    for customer in ["c2", "c3"] {
        let refused = client
            .call("create_invoice", json!({"customer": customer}))
            .await;
        assert_eq!(refused["error"]["code"], -32098, "{refused}");
    }
    // Nothing went out without a session (before, c3 was sent without one, refused with 400,
    // and recorded `ambiguous`).
    let received = upstream.received.lock().expect("received").clone();
    assert!(
        received
            .iter()
            .filter(|request| request.method == "tools/call")
            .all(|request| request.header("mcp-session-id").is_some()),
        "{received:?}"
    );
    let effects = store.effects(None).await.expect("effects");
    assert!(
        effects
            .iter()
            .all(|effect| effect.state != EffectState::Ambiguous),
        "{effects:?}"
    );
    // Once the upstream takes sessions again, the next call opens one first and runs.
    upstream.refuse_sessions.store(false, Ordering::SeqCst);
    let recovered = client
        .call("create_invoice", json!({"customer": "c3"}))
        .await;
    assert_eq!(
        recovered["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{recovered}"
    );
    let executed = upstream.executed.lock().expect("executed").clone();
    assert_eq!(executed.len(), 2, "{executed:?}");
    task.abort();
    server.abort();
}

#[tokio::test]
async fn calls_made_while_a_session_renewal_hangs_wait_for_it_and_are_never_sent_without_one() {
    let (url, upstream, server) = faulty_http::start_in(Mode::Sessions).await;
    let store = memory_store();
    let mut config = config("billing");
    // A renewal may take half of it: 0.5 s.
    config.call_timeout = Duration::from_secs(1);
    let gateway = Gateway::new(config, policy(POLICY), store.clone()).expect("gateway");
    let (mut client, task) = connect(&gateway, Upstream::Url(url));
    client.initialize(json!({})).await;
    // The session expires, and the upstream then hangs on `initialize`.
    upstream.expire();
    upstream.initialize_delay_ms.store(5_000, Ordering::SeqCst);
    for (id, customer) in [(20, "c2"), (21, "c3"), (22, "c4")] {
        client
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "create_invoice", "arguments": {"customer": customer}}}))
            .await;
    }
    // A request made while the renewal runs waits for it too.
    tokio::time::sleep(Duration::from_millis(100)).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 23, "method": "prompts/list", "params": {}}))
        .await;
    let mut replies = Vec::new();
    while replies.len() < 4 {
        let message = client.next().await;
        if message.get("id").is_some() {
            replies.push(message);
        }
    }
    for reply in replies.iter().filter(|reply| reply["id"] != 23) {
        assert_eq!(reply["error"]["code"], -32098, "{reply}");
    }
    let listing = replies
        .iter()
        .find(|reply| reply["id"] == 23)
        .expect("answered");
    assert!(
        listing["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("nothing was sent")),
        "{listing}"
    );
    // Before, what was sent during the renewal (the calls, and the `tools/list` the gateway
    // asks before a call to a tool it has not seen listed) went out without a session, was
    // refused, and a call was recorded `ambiguous`.
    let received = upstream.received.lock().expect("received").clone();
    assert!(
        received
            .iter()
            .filter(|request| request.method != "initialize")
            .all(|request| request.header("mcp-session-id").is_some()),
        "{received:?}"
    );
    let effects = store.effects(None).await.expect("effects");
    assert_eq!(effects.len(), 3, "{effects:?}");
    assert!(
        effects
            .iter()
            .all(|effect| effect.state == EffectState::Failed),
        "{effects:?}"
    );
    task.abort();
    server.abort();
}

#[tokio::test]
async fn a_gateway_ending_a_session_abandons_its_upstream_request_so_a_gateway_upstream_frees_its_slot()
 {
    let (faulty_url, upstream, server) = faulty_http::start_in(Mode::Sessions).await;
    upstream.initialize_delay_ms.store(2_000, Ordering::SeqCst);
    // A: a gateway with one slot in front of the slow upstream; C: a gateway in front of A.
    let (a_url, a) = one_session_front(faulty_url, Duration::from_secs(30)).await;
    let (c_url, c) = one_session_front(a_url.clone(), Duration::from_secs(30)).await;
    give_up_on_initialize(&c_url).await;
    // C ends its session and drops its `initialize` to A, so A ends the session it was opening
    // (before, A's request went on, A accepted the session once the upstream answered, and
    // its one slot stayed taken by a session nobody knew).
    upstream.initialize_delay_ms.store(0, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let direct = post(&a_url, None, &initialize_body(), &[]).await;
    assert_eq!(direct.status(), 200, "A's slot is free");
    a.abort();
    c.abort();
    server.abort();
}
