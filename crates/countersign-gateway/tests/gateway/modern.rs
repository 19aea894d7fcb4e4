//! MCP 2026-07-28 beside the handshake revisions, over stdio: a modern client needs no
//! `initialize`; the gateway speaks 2026-07-28 to an upstream that lists it in
//! `server/discover` and performs the 2025-11-25 handshake itself with one that does not.

use serde_json::{Value, json};

use super::fake::Behaviour;
use super::harness::{config, memory_store, modern_params, policy, refusal, start_unopened};

const POLICY: &str = "schema: countersign.policy/v1\nactions:\n  mcp.s.read:\n    decision: allow\n  mcp.s.write:\n    decision: approve\n";

fn protocol_keys(meta: &Value) -> Vec<String> {
    meta.as_object()
        .map(|meta| {
            meta.keys()
                .filter(|key| key.starts_with("io.modelcontextprotocol/"))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_modern_client_over_an_old_era_upstream_gets_the_handshake_done_for_it() {
    let mut harness = start_unopened(
        config("s"),
        policy(POLICY),
        memory_store(),
        &["read", "write"],
        Behaviour::Succeed,
        false,
    );
    let discovered = harness
        .client
        .modern("server/discover", json!({}), json!({}))
        .await;
    let result = &discovered["result"];
    assert_eq!(result["resultType"], "complete", "{discovered}");
    let versions = result["supportedVersions"].as_array().expect("versions");
    for version in ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"] {
        assert!(versions.contains(&json!(version)), "{version} in {result}");
    }
    assert_eq!(result["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(result["serverInfo"]["name"], "s");
    // The probe found an old-era upstream: the gateway initialized it with the newest
    // handshake revision it speaks, once.
    {
        let seen = harness.fake.seen.lock().expect("seen");
        assert_eq!(seen.requests, ["server/discover", "initialize"]);
        assert_eq!(seen.initialize[0]["protocolVersion"], "2025-11-25");
        assert_eq!(seen.notifications, ["notifications/initialized"]);
    }
    let listed = harness
        .client
        .modern("tools/list", json!({}), json!({}))
        .await;
    assert_eq!(listed["result"]["resultType"], "complete", "{listed}");
    // 2026-07-28 list results are cacheable: never cached or shared, as filtered by policy.
    assert_eq!(
        (&listed["result"]["ttlMs"], &listed["result"]["cacheScope"]),
        (&json!(0), &json!("private"))
    );
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(names, ["read", "write"]);
    let called = harness
        .client
        .modern(
            "tools/call",
            json!({"name": "read", "arguments": {"path": "a"}}),
            json!({}),
        )
        .await;
    assert_eq!(called["result"]["resultType"], "complete", "{called}");
    assert_eq!(
        called["result"]["_meta"]["countersign"]["outcome"],
        "committed"
    );
    let seen = harness.fake.seen.lock().expect("seen");
    assert_eq!(seen.calls.len(), 1);
    // The old-era upstream never sees the modern per-request fields it does not define.
    assert!(
        protocol_keys(&seen.call_metas[0]).is_empty(),
        "{:?}",
        seen.call_metas
    );
    assert_eq!(
        seen.requests
            .iter()
            .filter(|method| *method == "initialize")
            .count(),
        1,
        "the handshake is done once per connection"
    );
}

#[tokio::test]
async fn a_modern_upstream_is_spoken_to_in_2026_07_28_without_a_handshake() {
    let mut harness = start_unopened(
        config("s"),
        policy(POLICY),
        memory_store(),
        &["read"],
        Behaviour::Succeed,
        true,
    );
    let called = harness
        .client
        .modern(
            "tools/call",
            json!({"name": "read", "arguments": {}}),
            json!({}),
        )
        .await;
    assert_eq!(
        called["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{called}"
    );
    let seen = harness.fake.seen.lock().expect("seen");
    assert_eq!(seen.requests, ["server/discover", "tools/call"]);
    assert!(seen.initialize.is_empty());
    assert_eq!(
        seen.call_metas[0]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
}

#[tokio::test]
async fn an_unsupported_version_or_missing_capabilities_is_refused_before_anything_runs() {
    let mut harness = start_unopened(
        config("s"),
        policy(POLICY),
        memory_store(),
        &["read"],
        Behaviour::Succeed,
        false,
    );
    let mut params = modern_params(json!({"name": "read", "arguments": {}}), json!({}));
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2027-01-01");
    let reply = harness.client.request("tools/call", params).await;
    assert_eq!(reply["error"]["code"], -32022, "{reply}");
    assert_eq!(reply["error"]["data"]["requested"], "2027-01-01");
    assert!(
        reply["error"]["data"]["supported"]
            .as_array()
            .expect("supported")
            .contains(&json!("2026-07-28"))
    );
    let mut params = modern_params(json!({"name": "read", "arguments": {}}), json!({}));
    params["_meta"]
        .as_object_mut()
        .expect("meta")
        .remove("io.modelcontextprotocol/clientCapabilities");
    let reply = harness.client.request("tools/call", params).await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert_eq!(harness.fake.calls(), 0);
}

#[tokio::test]
async fn subscriptions_listen_delivers_list_changes_of_an_old_era_upstream_with_the_subscription_id()
 {
    let mut harness = start_unopened(
        config("s"),
        policy(POLICY),
        memory_store(),
        &["read"],
        Behaviour::Succeed,
        false,
    );
    let params = modern_params(
        json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
        json!({}),
    );
    harness
        .client
        .send(json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": params}))
        .await;
    let ack = harness.client.next().await;
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );
    // The upstream announces tool list changes only: prompts are not acknowledged.
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    harness.fake.add_tool("write");
    let changed = harness.client.next().await;
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );
    // A tool announced later is decided like any other (case B15): approval first.
    let paused = harness
        .client
        .modern(
            "tools/call",
            json!({"name": "write", "arguments": {}}),
            json!({}),
        )
        .await;
    assert_eq!(refusal(&paused), (-32090, "approval_required".to_owned()));
    assert_eq!(harness.fake.calls(), 0);
}

/// Issue #32: `resourceSubscriptions` on the `subscriptions/listen` the gateway serves over a
/// handshake-era upstream: one upstream `resources/subscribe` per URI however many listeners
/// name it, only accepted URIs acknowledged, each update delivered to the listeners that named
/// its URI (with their subscription id), and `resources/unsubscribe` once the last one ends.
#[tokio::test]
async fn resource_subscriptions_are_served_over_an_old_era_upstream() {
    let mut harness = start_unopened(
        config("s"),
        policy(POLICY),
        memory_store(),
        &["read"],
        Behaviour::Succeed,
        false,
    );
    let listen = |id: &str, uris: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": modern_params(
            json!({"notifications": {"resourceSubscriptions": uris}}), json!({}))})
    };
    harness
        .client
        .send(listen(
            "listen-1",
            json!(["file:///a", "file:///a", "secret://x"]),
        ))
        .await;
    let ack = harness.client.next().await;
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    // The upstream refused `secret://x`: only `file:///a` is acknowledged, once.
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": ["file:///a"]})
    );
    harness
        .client
        .send(listen("listen-2", json!(["file:///a"])))
        .await;
    let ack = harness.client.next().await;
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": ["file:///a"]}),
        "{ack}"
    );
    let subscribes = |harness: &super::harness::Harness, method: &str| {
        harness
            .fake
            .seen
            .lock()
            .expect("seen")
            .requests
            .iter()
            .filter(|request| *request == method)
            .count()
    };
    // One upstream subscription per URI asked (and one refused), not one per listener.
    assert_eq!(subscribes(&harness, "resources/subscribe"), 2);
    let updated = |uri: &str| json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}});
    harness.fake.notify(updated("file:///b"));
    harness.fake.notify(updated("file:///a"));
    let mut ids = Vec::new();
    for _ in 0..2 {
        let event = harness.client.next().await;
        assert_eq!(
            event["method"], "notifications/resources/updated",
            "{event}"
        );
        // Nothing for `file:///b`, which nobody subscribed to.
        assert_eq!(event["params"]["uri"], "file:///a", "{event}");
        ids.push(event["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone());
    }
    ids.sort_by_key(Value::to_string);
    assert_eq!(ids, [json!("listen-1"), json!("listen-2")]);
    let cancel = |id: &str| json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}});
    harness.client.send(cancel("listen-1")).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(subscribes(&harness, "resources/unsubscribe"), 0);
    harness.client.send(cancel("listen-2")).await;
    for _ in 0..100 {
        if subscribes(&harness, "resources/unsubscribe") == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(subscribes(&harness, "resources/unsubscribe"), 1);
}

/// Issue #32: a handshake-era client (`initialize`) in front of a 2026-07-28-only upstream,
/// which refuses `initialize`: the gateway learns the upstream's era from `server/discover`,
/// answers `initialize` itself in the client's revision, and forwards each request with the
/// per-request `_meta` built from the client's `initialize`.
#[tokio::test]
async fn an_old_era_client_is_served_in_front_of_a_modern_only_upstream() {
    let mut harness = start_unopened(
        config("s"),
        policy(POLICY),
        memory_store(),
        &["read"],
        Behaviour::Succeed,
        true,
    );
    let initialized = harness
        .client
        .request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {"roots": {}},
                "clientInfo": {"name": "old-host", "version": "1"}}),
        )
        .await;
    let result = &initialized["result"];
    assert_eq!(result["protocolVersion"], "2025-06-18", "{initialized}");
    assert_eq!(result["serverInfo"]["name"], "s");
    // List changes arrive only on a 2026-07-28 listen stream: not promised to this client.
    assert_eq!(result["capabilities"], json!({"tools": {}}));
    harness
        .client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let listed = harness.client.request("tools/list", json!({})).await;
    assert_eq!(listed["result"]["tools"][0]["name"], "read", "{listed}");
    let called = harness.client.call("read", json!({"path": "a"})).await;
    assert_eq!(
        called["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{called}"
    );
    let seen = harness.fake.seen.lock().expect("seen");
    assert_eq!(
        seen.requests,
        ["initialize", "server/discover", "tools/list", "tools/call"]
    );
    assert!(seen.notifications.is_empty(), "{:?}", seen.notifications);
    let meta = &seen.call_metas[0];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "old-host"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"roots": {}})
    );
}

/// Issue #32: a 2026-07-28 upstream's input-required result is not a committed call: the
/// attempt is `failed` (not executed), the client gets the result as the upstream sent it, and
/// the call sent again with the upstream's `requestState` and answers runs (an effect key does
/// not refuse it as a duplicate).
#[tokio::test]
async fn an_upstreams_input_required_result_is_not_executed_and_the_retry_runs() {
    const PAY: &str = "schema: countersign.policy/v1\nactions:\n  mcp.s.pay:\n    effect: \"pay:{id}\"\n    decision: allow\n";
    let store = memory_store();
    let mut harness = start_unopened(
        config("s"),
        policy(PAY),
        store.clone(),
        &["pay"],
        Behaviour::InputRequired,
        true,
    );
    let asked = harness
        .client
        .modern(
            "tools/call",
            json!({"name": "pay", "arguments": {"id": "p1"}}),
            json!({"elicitation": {}}),
        )
        .await;
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    assert_eq!(result["requestState"], "up-state");
    assert_eq!(
        result["_meta"]["countersign"]["outcome"], "failed",
        "{asked}"
    );
    let effects = store.effects(None).await.expect("effects");
    assert_eq!(effects[0].state, countersign::EffectState::Failed);
    *harness.fake.behaviour.lock().expect("behaviour") = Behaviour::Succeed;
    let retried = harness
        .client
        .modern(
            "tools/call",
            json!({"name": "pay", "arguments": {"id": "p1"}, "requestState": "up-state",
                "inputResponses": {"confirm": {"action": "accept", "content": {}}}}),
            json!({"elicitation": {}}),
        )
        .await;
    assert_eq!(
        retried["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{retried}"
    );
    assert_eq!(harness.fake.calls(), 2);
}
