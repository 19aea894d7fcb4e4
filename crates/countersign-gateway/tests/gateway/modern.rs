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
    // The gateway lists the tools itself before deciding a call to one it has not seen listed
    // (its schema and annotations are part of the decision, issue #27).
    assert_eq!(
        seen.requests,
        ["server/discover", "tools/list", "tools/call"]
    );
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
