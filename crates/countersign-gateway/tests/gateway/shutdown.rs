//! How a stdio gateway ends: its client closing its input (every request already read is
//! answered first), or a shutdown such as `SIGTERM` (running calls cancelled, and recorded).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign::store::SqliteStore;
use countersign::store::sqlite::SqliteOptions;
use countersign::{EffectState, Store};
use serde_json::{Value, json};

use countersign_gateway::{Gateway, GatewayError, HttpFrontConfig};

use super::fake::{Behaviour, Fake};
use super::harness::{Harness, config, http_client, memory_store, policy, start};
use super::http_front::{fake_factory, open_session};

const INVOICES: &str = "schema: countersign.policy/v1\nactions:\n  mcp.billing.create_invoice:\n    effect: \"invoice:{customer}\"\n    decision: allow\n";

/// Every effect of `store` as (key, state), in key order.
async fn effect_states(store: &Arc<dyn Store>) -> Vec<(String, EffectState)> {
    store
        .effects(None)
        .await
        .expect("effects")
        .iter()
        .map(|effect| (effect.key.as_str().to_owned(), effect.state))
        .collect()
}

/// The serving task ends within 10 s, without an error.
async fn ends(harness: &mut Harness) {
    ends_with(harness).await.expect("the gateway ends cleanly");
}

/// What the serving task ended with, within 10 s.
async fn ends_with(harness: &mut Harness) -> Result<(), GatewayError> {
    tokio::time::timeout(Duration::from_secs(10), &mut harness.task)
        .await
        .expect("the gateway stops within 10 s")
        .expect("the serving task ends without a panic")
}

/// A gateway offering `create_invoice` (allowed, one per customer) over a fake upstream.
async fn invoicing(store: &Arc<dyn Store>, behaviour: Behaviour) -> Harness {
    start(
        config("billing"),
        policy(INVOICES),
        Arc::clone(store),
        &["create_invoice"],
        behaviour,
    )
    .await
}

/// A gateway over an upstream that holds every call until cancelled, with a client that has
/// sent `create_invoice` for `customer` under `id` (not waiting for the reply).
async fn holding_a_call(store: &Arc<dyn Store>, id: i64, customer: &str) -> Harness {
    let mut harness = invoicing(store, Behaviour::HoldUntilCancelled).await;
    harness
        .client
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "create_invoice", "arguments": {"customer": customer}}}))
        .await;
    harness
}

/// Wait until the upstream holds the call: it has been sent, so it may have run.
async fn until_sent_upstream(harness: &Harness) {
    while harness.fake.calls() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn requests_read_before_the_input_ends_are_all_answered() {
    let store = memory_store();
    let mut harness = invoicing(&store, Behaviour::Succeed).await;
    for id in 10..15 {
        harness
            .client
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "create_invoice", "arguments": {"customer": format!("c{id}")}}}))
            .await;
    }
    harness
        .client
        .send(json!({"jsonrpc": "2.0", "id": 20, "method": "tools/list", "params": {}}))
        .await;
    // The requests and the end of input arrive together: the gateway reads the end before any
    // call has run.
    harness.client.close_input().await;

    let mut answered = Vec::new();
    while let Some(message) = harness.client.next_or_end().await {
        assert!(message.get("error").is_none(), "{message}");
        answered.push(message["id"].as_i64().expect("a reply carries its id"));
    }
    answered.sort_unstable();
    assert_eq!(answered, vec![10, 11, 12, 13, 14, 20]);
    ends(&mut harness).await;
    assert_eq!(harness.fake.calls(), 5);
    let effects = store.effects(None).await.expect("effects");
    assert_eq!(effects.len(), 5);
    assert!(
        effects
            .iter()
            .all(|effect| effect.state == EffectState::Committed),
        "{effects:?}"
    );
}

#[tokio::test]
async fn a_shutdown_cancels_a_running_call_and_it_is_recorded_ambiguous_before_the_gateway_returns()
{
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("store.db");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("store"));
    let mut harness = holding_a_call(&store, 7, "c7").await;
    until_sent_upstream(&harness).await;
    // Another process holds the store's write lock for a while: the gateway must wait for the
    // record, not leave it to a task its runtime may never run.
    let other = rusqlite::Connection::open(&path).expect("a second connection");
    other
        .execute_batch("BEGIN IMMEDIATE")
        .expect("the write lock");
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        other.execute_batch("COMMIT").expect("let go");
    });
    harness.stop.notify_one();
    ends(&mut harness).await;

    // Recorded before the gateway returned: no polling, and not left to the lease.
    assert_eq!(
        effect_states(&store).await,
        [("invoice:c7".to_owned(), EffectState::Ambiguous)]
    );
    let receipts = store.receipts(0, 100).await.expect("receipts");
    let last: Value =
        serde_json::from_str(&receipts.last().expect("a receipt").body).expect("receipt JSON");
    assert_eq!(
        (&last["outcome"], &last["reason"]),
        (&json!("ambiguous"), &json!("cancelled")),
        "{last}"
    );
    // The cancelled call gets no reply: the gateway's output ends.
    assert_eq!(harness.client.next_or_end().await, None);
    release.join().expect("the lock holder");
}

#[tokio::test]
async fn after_the_input_ends_a_request_the_upstream_never_answers_is_given_up_within_the_call_timeout()
 {
    let store = memory_store();
    let mut config = config("billing");
    config.call_timeout = Duration::from_millis(300);
    let mut harness = start(
        config,
        policy(INVOICES),
        Arc::clone(&store),
        &["create_invoice"],
        Behaviour::Succeed,
    )
    .await;
    harness
        .client
        .send(json!({"jsonrpc": "2.0", "id": 30, "method": "resources/read", "params": {"uri": "hang://forever"}}))
        .await;
    harness
        .client
        .send(json!({"jsonrpc": "2.0", "id": 31, "method": "tools/call", "params": {"name": "create_invoice", "arguments": {"customer": "c31"}}}))
        .await;
    harness.client.close_input().await;
    let mut replies = Vec::new();
    while let Some(message) = harness.client.next_or_end().await {
        replies.push(message);
    }
    // The gateway exits by itself (before, it waited for that reply until a signal).
    ends(&mut harness).await;
    let read = replies
        .iter()
        .find(|reply| reply["id"] == 30)
        .expect("the read is answered");
    assert_eq!(read["error"]["code"], -32603, "{read}");
    assert!(
        read["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("--call-timeout")
                && message.ends_with("the request was cancelled")),
        "{read}"
    );
    let call = replies
        .iter()
        .find(|reply| reply["id"] == 31)
        .expect("the call is answered");
    assert_eq!(
        call["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{call}"
    );
    // The upstream is told the read is no longer wanted (the fake reads it on its own task).
    let cancelled = harness.fake.cancellations().await;
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
}

#[tokio::test]
async fn a_shutdown_while_the_input_drains_stops_the_running_calls() {
    let store = memory_store();
    let mut harness = holding_a_call(&store, 8, "c8").await;
    harness.client.close_input().await;
    until_sent_upstream(&harness).await;
    // Draining waits for the held call; the shutdown ends the wait.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !harness.task.is_finished(),
        "the gateway waits for the call"
    );
    harness.stop.notify_one();
    ends(&mut harness).await;
    let effects = store.effects(None).await.expect("effects");
    assert_eq!(effects[0].state, EffectState::Ambiguous);
}

#[tokio::test]
async fn a_shutdown_of_the_http_front_cancels_running_calls_and_ends_open_connections() {
    const POLICY: &str = "schema: countersign.policy/v1\nactions:\n  mcp.s.create_invoice:\n    effect: \"invoice:{customer}\"\n    decision: allow\n";
    let store = memory_store();
    let gateway = Gateway::new(config("s"), policy(POLICY), Arc::clone(&store)).expect("gateway");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let fakes: Arc<Mutex<Vec<Arc<Fake>>>> = Arc::default();
    let factory = fake_factory(&["create_invoice"], Behaviour::HoldUntilCancelled, &fakes);
    let stop = Arc::new(tokio::sync::Notify::new());
    let stopped = Arc::clone(&stop);
    let mut task = tokio::spawn(async move {
        gateway
            .serve_http_until(listener, HttpFrontConfig::default(), factory, async move {
                stopped.notified().await;
            })
            .await
    });
    let session = open_session(&url, json!({}), &[]).await;
    let request = http_client()
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-session-id", session)
        .body(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "create_invoice", "arguments": {"customer": "c1"}}}).to_string());
    let held = tokio::spawn(async move {
        match request.send().await {
            Ok(response) => response.bytes().await.map(|_| ()),
            Err(error) => Err(error),
        }
    });
    let upstream_calls = || {
        fakes
            .lock()
            .expect("fakes")
            .iter()
            .map(|fake| fake.calls())
            .sum::<usize>()
    };
    while upstream_calls() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop_cleanly(&stop, &mut task).await;
    assert_eq!(
        effect_states(&store).await,
        [("invoice:c1".to_owned(), EffectState::Ambiguous)]
    );
    // The client's request, held open on its connection, ends: the connection was closed.
    tokio::time::timeout(Duration::from_secs(10), held)
        .await
        .expect("the held request ends with the gateway")
        .expect("no panic")
        .expect_err("a cancelled call gets no reply");
}

/// Tell the HTTP front serving in `task` to stop, and see it stop within 10 s, cleanly.
async fn stop_cleanly(
    stop: &tokio::sync::Notify,
    task: &mut tokio::task::JoinHandle<Result<(), GatewayError>>,
) {
    stop.notify_one();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the gateway stops within 10 s")
        .expect("no panic")
        .expect("a stop is not an error");
}

/// The text of a tool call's result: here, the fake's record of how its question was answered.
fn result_text(reply: &Value) -> String {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a result with text: {reply}"))
        .to_owned()
}

#[tokio::test]
async fn a_question_of_the_upstream_is_refused_once_the_input_has_ended_so_the_call_finishes() {
    // Asked after the input ended, and asked before it ended but never answered.
    for answered_before_the_end in [false, true] {
        let store = memory_store();
        let mut harness = invoicing(&store, Behaviour::AskClientFirst).await;
        harness
            .client
            .send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "create_invoice", "arguments": {"customer": "c9"}}}))
            .await;
        if answered_before_the_end {
            let asked = harness.client.next().await;
            assert_eq!(asked["method"], "roots/list", "{asked}");
        }
        harness.client.close_input().await;
        let reply = loop {
            let message = harness
                .client
                .next_or_end()
                .await
                .expect("the call is answered before the output ends");
            if message["id"] == 9 {
                break message;
            }
        };
        let answer = result_text(&reply);
        assert!(
            answer.contains("can answer no request"),
            "{answered_before_the_end}: {answer}"
        );
        ends(&mut harness).await;
        let effects = store.effects(None).await.expect("effects");
        assert_eq!(effects[0].state, EffectState::Committed);
    }
}

#[tokio::test]
async fn a_cancelled_call_the_store_cannot_record_is_reported_not_claimed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("store.db");
    let options = SqliteOptions {
        busy_budget: Duration::from_millis(200),
        ..SqliteOptions::default()
    };
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open_with(&path, options).expect("store"));
    let mut harness = holding_a_call(&store, 10, "c10").await;
    until_sent_upstream(&harness).await;
    // Another process holds the write lock past the store's busy budget.
    let other = rusqlite::Connection::open(&path).expect("a second connection");
    other
        .execute_batch("BEGIN IMMEDIATE")
        .expect("the write lock");
    harness.stop.notify_one();
    let ended = ends_with(&mut harness).await;
    other.execute_batch("ROLLBACK").expect("let go");
    let Err(GatewayError::Unrecorded(refused)) = ended else {
        panic!("the refusal is reported: {ended:?}");
    };
    assert_eq!(refused.count, 1);
    let said = GatewayError::Unrecorded(refused).to_string();
    assert!(
        said.contains("could not be recorded") && said.contains("effects --state reserved"),
        "{said}"
    );
    // Left to its lease, as the error says.
    let effects = store.effects(None).await.expect("effects");
    assert_eq!(effects[0].state, EffectState::Reserved);
}

/// A client whose connection fails after `lines`: they are read, then `EIO`.
struct FailingClient {
    lines: Option<Vec<u8>>,
}

impl tokio::io::AsyncRead for FailingClient {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _context: &mut std::task::Context<'_>,
        buffer: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.lines.take() {
            Some(lines) => {
                buffer.put_slice(&lines);
                std::task::Poll::Ready(Ok(()))
            }
            None => std::task::Poll::Ready(Err(std::io::Error::from_raw_os_error(5))),
        }
    }
}

#[tokio::test]
async fn when_the_client_connection_fails_running_calls_finish_and_are_recorded_first() {
    let store = memory_store();
    let gateway =
        Gateway::new(config("billing"), policy(INVOICES), Arc::clone(&store)).expect("gateway");
    let (upstream_side, fake_side) = tokio::io::duplex(1 << 20);
    let _fake = super::fake::start(
        "billing",
        &["create_invoice"],
        Behaviour::Succeed,
        fake_side,
    );
    let (reader, writer) = tokio::io::split(upstream_side);
    let mut lines = String::new();
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "create_invoice", "arguments": {"customer": "c11"}}}),
    ] {
        lines.push_str(&format!("{message}\n"));
    }
    let client = FailingClient {
        lines: Some(lines.into_bytes()),
    };
    let ended = tokio::time::timeout(
        Duration::from_secs(10),
        gateway.serve_io(
            client,
            tokio::io::sink(),
            countersign_gateway::Upstream::Io {
                reader: Box::new(reader),
                writer: Box::new(writer),
            },
        ),
    )
    .await
    .expect("the gateway ends");
    assert!(matches!(ended, Err(GatewayError::Client(_))), "{ended:?}");
    // Recorded before it returned, as it ended.
    assert_eq!(
        effect_states(&store).await,
        [("invoice:c11".to_owned(), EffectState::Committed)]
    );
}

/// A stdio server that answers `initialize` only after 1.5 s, then reads until its input ends.
const SLOW_TO_START: &str = r#"
import json, sys, time
request = json.loads(sys.stdin.readline())
time.sleep(1.5)
print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "serverInfo": {"name": "slow", "version": "0"}}}), flush=True)
for _ in sys.stdin:
    pass
"#;

#[tokio::test]
async fn a_stopping_http_front_hands_out_no_session_for_an_initialize_still_waiting() {
    let gateway = Gateway::new(config("s"), policy(INVOICES), memory_store()).expect("gateway");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let stop = Arc::new(tokio::sync::Notify::new());
    let stopped = Arc::clone(&stop);
    let mut task = tokio::spawn(async move {
        gateway
            .serve_http_until(
                listener,
                HttpFrontConfig::default(),
                || {
                    Ok(countersign_gateway::Upstream::Command {
                        program: "python3".to_owned(),
                        args: vec!["-c".to_owned(), SLOW_TO_START.to_owned()],
                    })
                },
                async move { stopped.notified().await },
            )
            .await
    });
    let request = http_client()
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}})
            .to_string(),
        );
    let waiting = tokio::spawn(async move { request.send().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop_cleanly(&stop, &mut task).await;
    // Before, the server's late answer reached the client while the gateway ended the
    // server: a session from a gateway that had stopped.
    let answer = waiting.await.expect("no panic");
    if let Ok(response) = answer {
        assert!(
            response.headers().get("mcp-session-id").is_none(),
            "{:?}",
            response.headers()
        );
    }
}
