//! Approvals through the gateway: inline (MCP elicitation) and out of band, with the rejected
//! and expired answers a model must never mistake for a tool failure.

use std::sync::Arc;

use countersign::{AnswerDecision, ApprovalState, Store, SystemClock};
use serde_json::{Value, json};

use super::fake::Behaviour;
use super::harness::{
    Client, config, memory_store, policy, refusal, start, start_with_capabilities,
};

const APPROVE_WRITES: &str = "schema: countersign.policy/v1\nactions:\n  mcp.s.write:\n    effect: \"write:{a}\"\n    decision: approve\n";

/// Send a `tools/call` for `write` with `arguments`, and return the `elicitation/create`
/// request the gateway sends before it answers.
async fn call_and_wait_for_question(client: &mut Client, id: i64, arguments: Value) -> Value {
    client
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "write", "arguments": arguments}}))
        .await;
    loop {
        let message = client.next().await;
        if message["method"] == "elicitation/create" {
            return message;
        }
        assert_ne!(
            message["id"],
            json!(id),
            "answered before asking: {message}"
        );
    }
}

/// Answer the gateway's question `question` with `result`, and return the call's response.
async fn answer(client: &mut Client, question: &Value, id: i64, result: Value) -> Value {
    client
        .send(json!({"jsonrpc": "2.0", "id": question["id"], "result": result}))
        .await;
    loop {
        let message = client.next().await;
        if message["id"] == json!(id) && message.get("method").is_none() {
            return message;
        }
    }
}

/// The harness's client (on the gateway's standard input), attested by the operator.
fn attested_config() -> countersign_gateway::GatewayConfig {
    let mut config = config("s");
    config.attested_clients = vec!["stdio".to_owned()];
    config
}

async fn only_approval(store: &Arc<dyn Store>) -> countersign::ApprovalRecord {
    let mut all = store.approvals(None).await.expect("approvals");
    assert_eq!(all.len(), 1, "{all:?}");
    all.remove(0)
}

#[tokio::test]
async fn elicitation_shows_the_exact_canonical_arguments_and_hash_and_accept_runs_the_call_once() {
    let store = memory_store();
    let mut harness = start_with_capabilities(
        attested_config(),
        policy(APPROVE_WRITES),
        Arc::clone(&store),
        &["write"],
        Behaviour::Succeed,
        json!({"elicitation": {}}),
    )
    .await;
    // Keys out of order and `1.0` for 1: the canonical form sorts keys and writes `1`.
    let question =
        call_and_wait_for_question(&mut harness.client, 7, json!({"b": 1.0, "a": "x"})).await;
    let record = only_approval(&store).await;
    let text = question["params"]["message"].as_str().expect("message");
    // Every leaf in canonical order and form, as the one display renders it.
    assert!(text.contains("  /a = \"x\"\n  /b = 1\n"), "{text}");
    assert!(
        text.contains(&countersign::display::render(&record, None).to_text()),
        "{text}"
    );
    assert_eq!(record.arguments.as_str(), r#"{"a":"x","b":1}"#);
    assert!(text.contains(record.action_hash.as_str()), "{text}");
    assert!(
        text.contains("mcp.s.write") && text.contains("agent:test"),
        "{text}"
    );
    assert_eq!(harness.fake.calls(), 0, "nothing runs before the answer");

    let reply = answer(
        &mut harness.client,
        &question,
        7,
        json!({"action": "accept", "content": {"decision": "approve"}}),
    )
    .await;
    assert_eq!(
        reply["result"]["_meta"]["countersign"]["receipt"]["outcome"], "committed",
        "{reply}"
    );
    assert_eq!(
        reply["result"]["_meta"]["countersign"]["receipt"]["action_hash"],
        json!(record.action_hash.as_str())
    );
    let calls = harness.fake.seen.lock().expect("seen").calls.clone();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].2, json!({"a": "x", "b": 1}));
    let record = only_approval(&store).await;
    assert_eq!(record.state, ApprovalState::Consumed);
    assert_eq!(record.approver.as_deref(), Some("human:mcp-client:stdio"));
}

#[tokio::test]
async fn an_unattested_clients_accept_is_a_refused_answer_and_the_request_stays_pending() {
    let store = memory_store();
    // The client calls itself `test` (clientInfo.name); the operator attested nobody.
    let mut harness = start_with_capabilities(
        config("s"),
        policy(APPROVE_WRITES),
        Arc::clone(&store),
        &["write"],
        Behaviour::Succeed,
        json!({"elicitation": {}}),
    )
    .await;
    let question = call_and_wait_for_question(&mut harness.client, 9, json!({"a": "z"})).await;
    let reply = answer(
        &mut harness.client,
        &question,
        9,
        json!({"action": "accept", "content": {"decision": "approve"}}),
    )
    .await;
    assert_eq!(
        refusal(&reply),
        (-32093, "not_authenticated".to_owned()),
        "{reply}"
    );
    assert_eq!(reply["error"]["data"]["did_run"], "no");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--attested-client stdio"), "{message}");
    assert_eq!(harness.fake.calls(), 0, "an unattested accept runs nothing");
    let record = only_approval(&store).await;
    assert_eq!(
        record.state,
        ApprovalState::Pending,
        "left for another channel"
    );
    assert!(record.answers.is_empty());
    // The refused answer is evidence: who sent it, through which channel, and why.
    // The attempt's own refusal receipt follows it.
    let receipts = store.receipts(0, 100).await.expect("receipts");
    let bodies: Vec<Value> = receipts
        .iter()
        .map(|stored| serde_json::from_str(&stored.body).expect("receipt JSON"))
        .collect();
    let answers: Vec<&Value> = bodies
        .iter()
        .filter(|body| body["kind"] == "answer")
        .collect();
    assert_eq!(answers.len(), 1, "{bodies:?}");
    assert_eq!(answers[0]["outcome"], "refused");
    assert_eq!(answers[0]["reason"], "not_authenticated");
    assert_eq!(answers[0]["channel"], "elicitation");
    let attempt = bodies.last().expect("receipts");
    assert_eq!(attempt["kind"], "attempt");
    assert_eq!(attempt["reason"], "not_authenticated");
    // Another channel still answers it, and the retried call then runs once.
    countersign::control::record_answer(
        store.as_ref(),
        &record.id,
        AnswerDecision::Approve,
        "human:alice",
        None,
        countersign::Clock::now(&SystemClock),
    )
    .await
    .expect("the CLI's answer is recorded");
}

#[tokio::test]
async fn elicitation_decline_is_a_recorded_denial_and_the_tool_never_runs() {
    let store = memory_store();
    let mut harness = start_with_capabilities(
        attested_config(),
        policy(APPROVE_WRITES),
        Arc::clone(&store),
        &["write"],
        Behaviour::Succeed,
        json!({"elicitation": {}}),
    )
    .await;
    let question = call_and_wait_for_question(&mut harness.client, 3, json!({"a": "y"})).await;
    let reply = answer(
        &mut harness.client,
        &question,
        3,
        json!({"action": "decline"}),
    )
    .await;
    assert_eq!(
        refusal(&reply),
        (-32091, "approval_denied".to_owned()),
        "{reply}"
    );
    assert_eq!(reply["error"]["data"]["did_run"], "no");
    assert_eq!(harness.fake.calls(), 0);
    let record = only_approval(&store).await;
    assert_eq!(record.state, ApprovalState::Denied);
    assert_eq!(record.approver.as_deref(), Some("human:mcp-client:stdio"));
    let receipts = store.receipts(0, 100).await.expect("receipts");
    let denied = receipts
        .iter()
        .map(|stored| serde_json::from_str::<Value>(&stored.body).expect("receipt JSON"))
        .filter(|body| body["action"] == "mcp.s.write")
        .map(|body| body["outcome"].as_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>();
    assert!(
        denied.iter().any(|outcome| outcome == "denied"),
        "{denied:?}"
    );
}

#[tokio::test]
async fn an_approval_rejected_out_of_band_refuses_the_retry_with_a_message_saying_the_tool_did_not_run()
 {
    let store = memory_store();
    let mut harness = start(
        config("s"),
        policy(APPROVE_WRITES),
        Arc::clone(&store),
        &["write"],
        Behaviour::Succeed,
    )
    .await;
    let paused = harness.client.call("write", json!({"a": "z"})).await;
    assert_eq!(refusal(&paused), (-32090, "approval_required".to_owned()));
    let request_id = only_approval(&store).await.id;
    countersign::control::record_answer(
        store.as_ref(),
        &request_id,
        AnswerDecision::Deny,
        "human:ops",
        Some("not this file"),
        countersign::Clock::now(&SystemClock),
    )
    .await
    .expect("reject");

    let rejected = harness.client.call("write", json!({"a": "z"})).await;
    assert_eq!(
        refusal(&rejected),
        (-32091, "approval_denied".to_owned()),
        "{rejected}"
    );
    let message = rejected["error"]["message"].as_str().expect("message");
    assert!(message.starts_with("the tool did not run: "), "{message}");
    assert!(
        message.contains("rejected") && message.contains("not this file"),
        "{message}"
    );
    let data = &rejected["error"]["data"];
    assert_eq!(
        (
            data["countersign"].clone(),
            data["did_run"].clone(),
            data["may_retry"].clone()
        ),
        (json!(true), json!("no"), json!(false)),
        "{data}"
    );
    assert_eq!(data["request_id"], json!(request_id.as_str()));
    assert!(
        rejected.get("result").is_none(),
        "never shaped like a tool result"
    );
    assert_eq!(harness.fake.calls(), 0);
}

#[tokio::test]
async fn a_presented_expired_approval_is_refused_distinctly_and_the_next_call_asks_again() {
    let store = memory_store();
    let policy = policy(
        "schema: countersign.policy/v1\nactions:\n  mcp.s.write:\n    decision: approve\n    approval_ttl: 1s\n",
    );
    let mut harness = start(
        config("s"),
        policy,
        Arc::clone(&store),
        &["write"],
        Behaviour::Succeed,
    )
    .await;
    let paused = harness.client.call("write", json!({"a": "late"})).await;
    assert_eq!(refusal(&paused), (-32090, "approval_required".to_owned()));
    let record = only_approval(&store).await;
    // Wait until the request's own expiry has passed (the TTL is one second).
    while countersign::Clock::now(&SystemClock) <= record.expires_at {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // The client presents the approval it was given: it expired, so the call is refused
    // distinctly (a retry without it simply asks again).
    let presented = json!({"name": "write", "arguments": {"a": "late"}, "_meta": {"countersign/approval": record.id.as_str()}});
    let expired = harness.client.request("tools/call", presented).await;
    assert_eq!(
        refusal(&expired),
        (-32092, "expired".to_owned()),
        "{expired}"
    );
    let message = expired["error"]["message"].as_str().expect("message");
    assert!(message.starts_with("the tool did not run: "), "{message}");
    assert!(message.contains("expired"), "{message}");
    assert_eq!(expired["error"]["data"]["did_run"], "no");
    assert_eq!(expired["error"]["data"]["may_retry"], true);
    assert_eq!(
        store
            .approval(&record.id)
            .await
            .expect("approval")
            .expect("stored")
            .state,
        ApprovalState::Expired
    );

    let again = harness.client.call("write", json!({"a": "late"})).await;
    assert_eq!(
        refusal(&again),
        (-32090, "approval_required".to_owned()),
        "{again}"
    );
    assert_ne!(
        again["error"]["data"]["request_id"],
        json!(record.id.as_str()),
        "a new request"
    );
    assert_eq!(harness.fake.calls(), 0);
}

#[tokio::test]
async fn a_call_cancelled_while_it_waits_for_approval_never_runs_and_is_not_answered() {
    // Found by a first-time user: a call the client cancelled while it waited for approval
    // still ran once someone approved it, and its reply came back under the (reused) id.
    let store = memory_store();
    let mut config = config("s");
    config.approval_wait = Some(std::time::Duration::from_secs(20));
    let mut harness = start(
        config,
        policy(APPROVE_WRITES),
        Arc::clone(&store),
        &["write"],
        Behaviour::Succeed,
    )
    .await;
    harness
        .client
        .send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "write", "arguments": {"a": "z"}}}))
        .await;
    let request_id = loop {
        let pending = store.approvals(None).await.expect("approvals");
        if let Some(record) = pending.first() {
            break record.id.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    harness
        .client
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "the user gave up"}}),
        )
        .await;
    // Once the cancellation is read (a ping after it is answered), approve it.
    let pong = harness
        .client
        .request_with_id(json!(8), "ping", json!({}))
        .await;
    assert!(pong.get("result").is_some(), "{pong}");
    countersign::control::record_answer(
        store.as_ref(),
        &request_id,
        AnswerDecision::Approve,
        "human:ops",
        None,
        countersign::Clock::now(&SystemClock),
    )
    .await
    .expect("approve");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let pong = harness
        .client
        .request_with_id(json!(9), "ping", json!({}))
        .await;
    assert!(pong.get("result").is_some(), "{pong}");
    assert_eq!(harness.fake.calls(), 0, "the cancelled call ran");
    let answered_seven: Vec<&Value> = harness
        .client
        .received
        .iter()
        .filter(|message| message["id"] == 7 && message.get("method").is_none())
        .collect();
    assert!(answered_seven.is_empty(), "{answered_seven:?}");
    // The approval was not used: the same call, made again, runs once on it.
    let reply = harness.client.call("write", json!({"a": "z"})).await;
    assert_eq!(
        reply["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{reply}"
    );
    assert_eq!(harness.fake.calls(), 1);
}
