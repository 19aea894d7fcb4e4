//! Where a client or an upstream steps outside the protocol, found by first-time users: two
//! requests in flight under one id, MCP tasks (2025-11-25) the gateway does not offer, an
//! upstream that never answers `initialize` over stdio, and messages over the size cap. In each
//! case nothing runs twice, nothing is recorded as an outcome nobody can know, and the client is
//! told exactly which request was refused and why.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign::Store;
use countersign_gateway::{Gateway, GatewayConfig, Upstream};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::fake::Behaviour;
use super::harness::{Client, config, connect, memory_store, policy, refusal, start};

/// Tools `send` and `slow` are allowed (exact entries, so no annotation raises them).
const ALLOWING: &str = "schema: countersign.policy/v1
actions:
  mcp.s.send:
    decision: allow
  mcp.s.slow:
    decision: allow
  mcp.s.batch:
    decision: allow
";

/// A line of `respond`'s that is not written: the scripted upstream waits this many
/// milliseconds (the number after it) before writing the next line.
const PAUSE: &str = "pause before the next line, ms: ";

/// `line`, written after `millis` milliseconds.
fn after(millis: u64, line: String) -> Vec<String> {
    vec![format!("{PAUSE}{millis}"), line]
}

/// An upstream the test scripts: every message the gateway sends it is recorded, and
/// `respond` gives the lines to write back (each a JSON text, or any raw text; see [`after`]).
fn scripted(
    respond: impl Fn(&Value) -> Vec<String> + Send + 'static,
) -> (Upstream, Arc<Mutex<Vec<Value>>>) {
    let (gateway_side, upstream_side) = tokio::io::duplex(1 << 22);
    let (reader, mut writer) = tokio::io::split(upstream_side);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        let mut lines = BufReader::new(reader).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let message: Value = serde_json::from_str(&line).expect("the gateway sends JSON");
            record.lock().expect("seen").push(message.clone());
            for reply in respond(&message) {
                if let Some(millis) = reply.strip_prefix(PAUSE) {
                    let millis = millis.parse().expect("a pause in milliseconds");
                    tokio::time::sleep(Duration::from_millis(millis)).await;
                    continue;
                }
                let mut bytes = reply.into_bytes();
                bytes.push(b'\n');
                if writer.write_all(&bytes).await.is_err() {
                    return;
                }
            }
        }
    });
    let (reader, writer) = tokio::io::split(gateway_side);
    let upstream = Upstream::Io {
        reader: Box::new(reader),
        writer: Box::new(writer),
    };
    (upstream, seen)
}

/// The reply of a 2025-06-18 server to `initialize`, declaring `capabilities`.
fn initialized(message: &Value, capabilities: Value) -> String {
    json!({"jsonrpc": "2.0", "id": message["id"], "result": {
        "protocolVersion": "2025-06-18",
        "capabilities": capabilities,
        "serverInfo": {"name": "scripted", "version": "0"}}})
    .to_string()
}

fn done(message: &Value, text: &str) -> String {
    json!({"jsonrpc": "2.0", "id": message["id"], "result": {
        "content": [{"type": "text", "text": text}]}})
    .to_string()
}

fn gateway(config: GatewayConfig) -> Gateway {
    let store: Arc<dyn Store> = memory_store();
    Gateway::new(config, policy(ALLOWING), store).expect("gateway")
}

/// The methods the upstream was sent, in order.
fn methods(seen: &Mutex<Vec<Value>>) -> Vec<String> {
    seen.lock()
        .expect("seen")
        .iter()
        .filter_map(|message| message["method"].as_str().map(str::to_owned))
        .collect()
}

/// What a scripted upstream says to anything else: an empty result to a request, nothing to a
/// notification.
fn empty_result(message: &Value) -> Vec<String> {
    match message.get("id") {
        Some(id) => vec![json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string()],
        None => Vec::new(),
    }
}

/// The next response (not a notification or a request of the gateway's).
async fn next_response(client: &mut Client) -> Value {
    loop {
        let message = client.next().await;
        if message.get("method").is_none() {
            return message;
        }
    }
}

#[tokio::test]
async fn a_second_request_under_an_id_in_flight_is_refused_and_runs_nothing() {
    let mut harness = start(
        config("s"),
        policy(ALLOWING),
        memory_store(),
        &["slow"],
        Behaviour::HoldUntilCancelled,
    )
    .await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"n": 1}}});
    harness.client.send(call.clone()).await;
    // The first is held by the upstream; the same id again is refused at once, under that id.
    harness.client.send(call).await;
    let refused = next_response(&mut harness.client).await;
    assert_eq!(refused["id"], 7, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert_eq!(
        refused["error"]["data"]["reason"], "duplicate_request_id",
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|text| text.contains("the earlier one still runs")),
        "{refused}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(harness.fake.calls(), 1, "the upstream ran it twice");
    // Once the client cancels it, the id is free again.
    harness
        .client
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "test"}}),
        )
        .await;
    harness.fake.late_reply_sent.notified().await;
    *harness.fake.behaviour.lock().expect("behaviour") = Behaviour::Succeed;
    let again = harness
        .client
        .request_with_id(
            json!(7),
            "tools/call",
            json!({"name": "slow", "arguments": {"n": 2}}),
        )
        .await;
    // The late reply to the cancelled call is not sent (MCP 2025-06-18, "Cancellation"), so
    // the one reply under id 7 is the second call's: not refused as a duplicate, and run.
    assert_eq!(
        again["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{again}"
    );
    let replies_to_seven = harness
        .client
        .received
        .iter()
        .filter(|message| message["id"] == 7 && message.get("method").is_none())
        .count();
    // The duplicate's refusal, then the second call's reply.
    assert_eq!(replies_to_seven, 2, "{:?}", harness.client.received);
}

#[tokio::test]
async fn mcp_tasks_are_not_offered_and_a_task_only_tool_is_refused_before_it_is_sent() {
    let (upstream, seen) = scripted(|message| match message["method"].as_str() {
        Some("initialize") => vec![initialized(
            message,
            json!({"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}),
        )],
        Some("tools/list") => vec![
            json!({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [
                {"name": "send", "inputSchema": {"type": "object"},
                 "execution": {"taskSupport": "optional"}},
                {"name": "batch", "inputSchema": {"type": "object"},
                 "execution": {"taskSupport": "required"}},
            ]}})
            .to_string(),
        ],
        Some("tools/call") => vec![done(message, "sent")],
        _ => empty_result(message),
    });
    let (mut client, _task) = connect(&gateway(config("s")), upstream);
    let opened = client
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await;
    let capabilities = &opened["result"]["capabilities"];
    assert!(capabilities.get("tools").is_some(), "{opened}");
    assert!(
        capabilities.get("tasks").is_none(),
        "tasks offered: {opened}"
    );

    let listed = client.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().expect("tools");
    assert!(tools[0].get("execution").is_none(), "{listed}");
    assert_eq!(tools[1]["execution"]["taskSupport"], "required", "{listed}");

    // A task-augmented call runs as a plain one; `task` never reaches the upstream.
    let reply = client
        .request(
            "tools/call",
            json!({"name": "send", "arguments": {"to": "a"}, "task": {"ttl": 60000}}),
        )
        .await;
    assert_eq!(
        reply["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{reply}"
    );
    let forwarded = seen
        .lock()
        .expect("seen")
        .iter()
        .find(|message| message["method"] == "tools/call")
        .cloned()
        .expect("the call was sent");
    assert!(forwarded["params"].get("task").is_none(), "{forwarded}");

    // A tool that runs only as a task is refused before anything is sent.
    let reply = client.call("batch", json!({})).await;
    assert_eq!(
        refusal(&reply),
        (-32098, "not_executed".to_owned()),
        "{reply}"
    );
    assert_eq!(reply["error"]["data"]["may_retry"], false, "{reply}");
    let calls = methods(&seen)
        .iter()
        .filter(|method| *method == "tools/call")
        .count();
    assert_eq!(calls, 1, "the task-only tool reached the upstream");

    // `tasks/*` is refused by the gateway, never forwarded.
    let reply = client.request("tasks/get", json!({"taskId": "t1"})).await;
    assert_eq!(reply["error"]["code"], -32601, "{reply}");
    assert!(
        !methods(&seen)
            .iter()
            .any(|method| method.starts_with("tasks/"))
    );
}

#[tokio::test]
async fn an_initialize_the_upstream_never_answers_is_given_up_and_nothing_else_is_sent() {
    // The upstream reads everything and answers nothing.
    let (upstream, seen) = scripted(|_| Vec::new());
    let mut config = config("s");
    config.call_timeout = Duration::from_millis(800);
    let (mut client, _task) = connect(&gateway(config), upstream);
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
        )
        .await;
    // A call sent before `initialize` is answered is held, never forwarded into an outcome
    // nobody could know; once the gateway gives up on `initialize` (within --call-timeout), it
    // answers both: `initialize` with the reason, the call as not executed.
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "send", "arguments": {}}}))
        .await;
    let first = next_response(&mut client).await;
    let second = next_response(&mut client).await;
    let (given_up, early) = if first["id"] == 1 {
        (first, second)
    } else {
        (second, first)
    };
    assert_eq!(given_up["id"], 1, "{given_up}");
    assert!(
        given_up["error"]["message"]
            .as_str()
            .is_some_and(|text| text.contains("did not answer `initialize` within --call-timeout")),
        "{given_up}"
    );
    assert_eq!(early["id"], 2, "{early}");
    assert_eq!(
        refusal(&early),
        (-32098, "not_executed".to_owned()),
        "{early}"
    );
    assert!(
        early["error"]["message"]
            .as_str()
            .is_some_and(|text| text.contains("did not accept `initialize`")),
        "{early}"
    );
    // Until an `initialize` succeeds, no call is sent.
    let later = client
        .request_with_id(
            json!(3),
            "tools/call",
            json!({"name": "send", "arguments": {}}),
        )
        .await;
    assert_eq!(
        refusal(&later),
        (-32098, "not_executed".to_owned()),
        "{later}"
    );
    assert_eq!(methods(&seen), ["initialize"]);
}

#[tokio::test]
async fn after_a_refused_initialize_every_request_is_answered_and_the_gateway_still_ends() {
    // Found by a first-time user: after the upstream refused `initialize`, the next request
    // got no answer, and the gateway ignored the end of its input.
    let (upstream, seen) = scripted(|message| match message["method"].as_str() {
        Some("initialize") => vec![
            json!({"jsonrpc": "2.0", "id": message["id"], "error": {
                "code": -32602, "message": "unsupported protocol version"}})
            .to_string(),
        ],
        Some("server/discover") => vec![
            json!({"jsonrpc": "2.0", "id": message["id"], "error": {
                "code": -32601, "message": "method not found"}})
            .to_string(),
        ],
        _ => Vec::new(),
    });
    let (mut client, task) = connect(&gateway(config("s")), upstream);
    let refused = client
        .request(
            "initialize",
            json!({"protocolVersion": "1999-01-01", "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    for (id, method, params) in [
        (2, "tools/list", json!({})),
        (3, "tools/call", json!({"name": "send", "arguments": {}})),
        (4, "resources/list", json!({})),
        (5, "ping", json!({})),
    ] {
        client
            .send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
    }
    client.close_input().await;
    let mut answered = Vec::new();
    while let Some(message) = client.next_or_end().await {
        if message.get("method").is_none() {
            answered.push(message);
        }
    }
    let ids: Vec<i64> = answered.iter().filter_map(|m| m["id"].as_i64()).collect();
    assert_eq!(ids, [2, 3, 4, 5], "{answered:?}");
    for reply in &answered[..3] {
        assert_eq!(
            refusal(reply),
            (-32098, "not_executed".to_owned()),
            "{reply}"
        );
    }
    assert!(answered[3].get("result").is_some(), "{}", answered[3]);
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the gateway ends once its input has")
        .expect("the serving task");
    // Only the client's handshake and the gateway's probe for a 2026-07-28 upstream went
    // upstream: no handshake of the gateway's own, whose session nobody would use.
    assert_eq!(methods(&seen), ["initialize", "server/discover"]);
}

#[tokio::test]
async fn requests_sent_right_behind_initialize_are_held_until_it_is_answered_then_run() {
    // The upstream takes its time over `initialize`; the client (a file piped in, say) sends
    // its call at once. The call reaches the upstream only after `initialize` is answered.
    let (upstream, seen) = scripted(|message| match message["method"].as_str() {
        Some("initialize") => after(300, initialized(message, json!({"tools": {}}))),
        Some("tools/list") => vec![
            json!({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [
                {"name": "send", "inputSchema": {"type": "object"}}]}})
            .to_string(),
        ],
        Some("tools/call") => vec![done(message, "sent")],
        _ => Vec::new(),
    });
    let (mut client, _task) = connect(&gateway(config("s")), upstream);
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "send", "arguments": {}}}),
    ] {
        client.send(message).await;
    }
    let mut replies = [
        next_response(&mut client).await,
        next_response(&mut client).await,
    ];
    replies.sort_by_key(|reply| reply["id"].as_i64());
    assert!(
        replies[0]["result"]["protocolVersion"].is_string(),
        "{}",
        replies[0]
    );
    assert_eq!(
        replies[1]["result"]["content"][0]["text"], "sent",
        "{}",
        replies[1]
    );
    let methods = methods(&seen);
    let answered = methods.iter().position(|method| method == "initialize");
    let called = methods.iter().position(|method| method == "tools/call");
    assert!(answered < called, "{methods:?}");
}

#[tokio::test]
async fn an_oversized_message_is_refused_under_its_id_and_an_oversized_reply_fails_only_its_call() {
    let blob = "x".repeat(2_000);
    // `slow` is held until `send`'s oversized reply has been written, then answered.
    let held: Mutex<Option<Value>> = Mutex::new(None);
    let (upstream, _seen) = scripted(move |message| match message["method"].as_str() {
        Some("initialize") => vec![initialized(message, json!({"tools": {}}))],
        Some("tools/list") => vec![
            json!({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [
                {"name": "send", "inputSchema": {"type": "object"}},
                {"name": "slow", "inputSchema": {"type": "object"}},
            ]}})
            .to_string(),
        ],
        Some("tools/call") if message["params"]["name"] == "slow" => {
            *held.lock().expect("held") = Some(message.clone());
            Vec::new()
        }
        Some("tools/call") => {
            let mut lines = vec![
                json!({"jsonrpc": "2.0", "id": message["id"], "result": {
                    "content": [{"type": "text", "text": blob}]}})
                .to_string(),
            ];
            if let Some(slow) = held.lock().expect("held").take() {
                lines.push(done(&slow, "slow done"));
            }
            lines
        }
        _ => empty_result(message),
    });
    let mut config = config("s");
    config.max_message_bytes = 1_000;
    let (mut client, _task) = connect(&gateway(config), upstream);
    client.initialize(json!({})).await;

    // The client's own message over the cap: refused under the id it starts with.
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{{"name":"send","arguments":{{"blob":"{}"}}}}}}"#,
        "y".repeat(2_000)
    );
    client.send_raw(line.as_bytes()).await;
    let refused = next_response(&mut client).await;
    assert_eq!(refused["id"], 41, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert_eq!(refused["error"]["data"]["reason"], "too_large", "{refused}");
    assert_eq!(
        refused["error"]["data"]["raw_bytes"],
        line.len(),
        "{refused}"
    );

    // `slow` waits; `send`'s reply is over the cap: only `send` is failed, as ambiguous.
    client
        .send(json!({"jsonrpc": "2.0", "id": 50, "method": "tools/call",
            "params": {"name": "slow", "arguments": {}}}))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 51, "method": "tools/call",
            "params": {"name": "send", "arguments": {}}}))
        .await;
    let mut replies = Vec::new();
    while replies.len() < 2 {
        replies.push(next_response(&mut client).await);
    }
    let reply_to = |id: i64| {
        replies
            .iter()
            .find(|reply| reply["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no reply to {id}: {replies:?}"))
    };
    let oversized = reply_to(51);
    assert_eq!(
        oversized["error"]["data"]["did_run"], "maybe",
        "{oversized}"
    );
    assert!(
        oversized["error"]["message"]
            .as_str()
            .is_some_and(|text| text.contains("over the gateway's 1000-byte cap")),
        "{oversized}"
    );
    let slow = reply_to(50);
    assert_eq!(
        slow["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{slow}"
    );
}

#[tokio::test]
async fn an_oversized_notification_touches_no_call_and_an_oversized_reply_ends_its_request_wherever_its_id_is()
 {
    // Found by a first-time user: an oversized log notification marked every running call
    // outcome unknown, and an oversized reply whose `id` came after its large part left the
    // request it answered unanswered forever.
    let blob = "x".repeat(2_000);
    let (upstream, _seen) = scripted(move |message| match message["method"].as_str() {
        Some("initialize") => vec![initialized(message, json!({"tools": {}, "resources": {}}))],
        Some("tools/list") => vec![
            json!({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [
                {"name": "send", "inputSchema": {"type": "object"}}]}})
            .to_string(),
        ],
        Some("tools/call") => vec![
            format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"{blob}"}}}}"#
            ),
            done(message, "sent"),
        ],
        // `result` first, `id` last, as some serializers write it.
        Some("resources/list") => vec![format!(
            r#"{{"jsonrpc":"2.0","result":{{"resources":[],"note":"{blob}"}},"id":{}}}"#,
            message["id"]
        )],
        // No `id` that can be read at either end.
        Some("prompts/list") => vec![format!(
            r#"{{"jsonrpc":"2.0","result":{{"prompts":[],"note":"{blob}"}},"id":{},"x":1}}"#,
            message["id"]
        )],
        _ => empty_result(message),
    });
    let mut config = config("s");
    config.max_message_bytes = 1_000;
    let (mut client, _task) = connect(&gateway(config), upstream);
    client.initialize(json!({})).await;

    let sent = client.call("send", json!({})).await;
    assert_eq!(
        sent["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{sent}"
    );
    for method in ["resources/list", "prompts/list"] {
        let listed = client.request(method, json!({})).await;
        assert_eq!(listed["error"]["code"], -32603, "{method}: {listed}");
        assert!(
            listed["error"]["message"]
                .as_str()
                .is_some_and(|text| text.contains("over the gateway's 1000-byte cap")),
            "{method}: {listed}"
        );
    }
    // The session goes on.
    let pong = client.request("ping", json!({})).await;
    assert!(pong.get("result").is_some(), "{pong}");
}

#[tokio::test]
async fn a_request_whose_id_is_not_a_string_or_a_number_is_refused_and_never_sent() {
    // Found by a first-time user: `[1]`, `true`, `{}` and `null` were taken as request ids.
    let (upstream, seen) = scripted(|message| match message["method"].as_str() {
        Some("initialize") => vec![initialized(message, json!({"tools": {}}))],
        _ => empty_result(message),
    });
    let (mut client, _task) = connect(&gateway(config("s")), upstream);
    client.initialize(json!({})).await;
    for id in [json!([1]), json!(true), json!({}), Value::Null] {
        client
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "send", "arguments": {}}}))
            .await;
        let refused = next_response(&mut client).await;
        assert_eq!(refused["id"], Value::Null, "{id}: {refused}");
        assert_eq!(refused["error"]["code"], -32600, "{id}: {refused}");
        assert_eq!(
            refused["error"]["data"]["reason"], "invalid_request_id",
            "{id}: {refused}"
        );
        assert_eq!(refused["error"]["data"]["did_run"], "no", "{id}: {refused}");
    }
    // Strings and numbers are ids; the session goes on.
    let pong = client
        .request_with_id(json!("p-1"), "ping", json!({}))
        .await;
    assert!(pong.get("result").is_some(), "{pong}");
    assert!(!methods(&seen).contains(&"tools/call".to_owned()));
}

#[tokio::test]
async fn an_oversized_reply_from_the_client_is_not_answered_and_ends_the_request_it_answers() {
    // Found by a first-time user: the client's oversized answer to the upstream's `roots/list`
    // was refused as if it were a request, and the upstream's request was never answered.
    let mut config = config("s");
    config.max_message_bytes = 1_000;
    let mut harness = start(
        config,
        policy(ALLOWING),
        memory_store(),
        &["send"],
        Behaviour::AskClientFirst,
    )
    .await;
    harness
        .client
        .send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "send", "arguments": {}}}))
        .await;
    let asked = loop {
        let message = harness.client.next().await;
        if message["method"] == "roots/list" {
            break message;
        }
    };
    let reply = format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"roots":[{{"uri":"file:///{}"}}]}}}}"#,
        asked["id"],
        "r".repeat(2_000)
    );
    harness.client.send_raw(reply.as_bytes()).await;
    let answered = next_response(&mut harness.client).await;
    // The call's own reply, carrying what the upstream was told; no refusal of the reply.
    assert_eq!(answered["id"], 5, "{answered}");
    let text = answered["result"]["content"][0]["text"]
        .as_str()
        .expect("the upstream's result");
    assert!(
        text.contains("-32603") && text.contains("1000-byte cap"),
        "{text}"
    );
    assert!(
        !harness
            .client
            .received
            .iter()
            .any(|message| message["error"]["data"]["reason"] == "too_large"),
        "{:?}",
        harness.client.received
    );
}

#[tokio::test]
async fn padding_counts_against_the_cap_and_an_oversized_stray_reply_gets_no_reply() {
    // Found by a second first-time user: a line padded with spaces past the cap was read whole
    // and answered, and an oversized reply to nothing was answered as if it were a request.
    let (upstream, _seen) = scripted(|message| match message["method"].as_str() {
        Some("initialize") => vec![initialized(message, json!({"tools": {}}))],
        _ => empty_result(message),
    });
    let mut config = config("s");
    config.max_message_bytes = 1_000;
    let (mut client, _task) = connect(&gateway(config), upstream);
    client.initialize(json!({})).await;
    let padded = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"ping"}}{}"#,
        " ".repeat(3_000)
    );
    client.send_raw(padded.as_bytes()).await;
    let refused = next_response(&mut client).await;
    assert_eq!(refused["id"], 7, "{refused}");
    assert_eq!(refused["error"]["data"]["reason"], "too_large", "{refused}");
    assert_eq!(
        refused["error"]["data"]["raw_bytes"],
        padded.len(),
        "{refused}"
    );
    let stray = format!(
        r#"{{"jsonrpc":"2.0","result":{{"note":"{}"}},"id":"nope"}}"#,
        "n".repeat(3_000)
    );
    client.send_raw(stray.as_bytes()).await;
    // The next reply is the ping's: the stray reply got none.
    let pong = client.request_with_id(json!(8), "ping", json!({})).await;
    assert!(pong.get("result").is_some(), "{pong}");
    assert!(
        !client
            .received
            .iter()
            .any(|message| message["id"] == "nope"),
        "{:?}",
        client.received
    );
}
