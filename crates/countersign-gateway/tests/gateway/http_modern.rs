//! MCP 2026-07-28 on the Streamable HTTP front, beside the sessions of the handshake
//! revisions: no session, and `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` checked
//! against the body (a mismatch is HTTP 400 with -32020, an unsupported version HTTP 400 with
//! -32022), all before anything reaches a session or the upstream.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use countersign_gateway::HttpFrontConfig;
use serde_json::{Value, json};

use super::harness::{config, memory_store, modern_params, policy};
use super::http_front::{JsonValue, default_server, open_session, post, serve};

const POLICY: &str = "schema: countersign.policy/v1\nactions:\n  mcp.s.read:\n    decision: allow\n  mcp.s.write:\n    decision: approve\n  mcp.s.locate:\n    decision: allow\n";

fn call(id: Value, tool: &str, capabilities: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": modern_params(json!({"name": tool, "arguments": {"path": "a"}}), capabilities)})
}

const VERSION: (&str, &str) = ("mcp-protocol-version", "2026-07-28");
const METHOD: (&str, &str) = ("mcp-method", "tools/call");

#[tokio::test]
async fn a_modern_request_needs_no_session_and_its_headers_must_match_its_body() {
    let server = serve(
        config("s"),
        policy(POLICY),
        memory_store(),
        HttpFrontConfig::default(),
    )
    .await;
    let ok = post(
        &server.url,
        None,
        &call(json!(7), "read", json!({})),
        &[VERSION, METHOD, ("mcp-name", "read")],
    )
    .await;
    assert_eq!(ok.status(), 200);
    assert!(ok.headers().get("mcp-session-id").is_none(), "no sessions");
    let reply = ok.json_value().await;
    assert_eq!(reply["id"], 7, "the client's own id comes back: {reply}");
    assert_eq!(reply["result"]["resultType"], "complete");
    assert_eq!(
        reply["result"]["_meta"]["countersign"]["outcome"],
        "committed"
    );
    assert_eq!(server.upstream_calls(), 1);

    let refused = |headers: Vec<(&'static str, &'static str)>, body: Value, code: i64| {
        let url = server.url.clone();
        async move {
            let response = post(&url, None, &body, &headers).await;
            assert_eq!(response.status(), 400, "{headers:?}");
            let reply = response.json_value().await;
            assert_eq!(reply["error"]["code"], code, "{headers:?}: {reply}");
            reply
        }
    };
    let body = || call(json!(8), "read", json!({}));
    // Mcp-Name names another tool than the body: a router would have acted on `write`.
    let reply = refused(vec![VERSION, METHOD, ("mcp-name", "write")], body(), -32020).await;
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("Mcp-Name")),
        "{reply}"
    );
    refused(vec![VERSION, METHOD], body(), -32020).await;
    refused(vec![VERSION, ("mcp-name", "read")], body(), -32020).await;
    refused(
        vec![VERSION, ("mcp-method", "tools/list"), ("mcp-name", "read")],
        body(),
        -32020,
    )
    .await;
    let mut older_body = body();
    older_body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-06-18");
    refused(
        vec![VERSION, METHOD, ("mcp-name", "read")],
        older_body,
        -32020,
    )
    .await;
    let reply = refused(
        vec![
            ("mcp-protocol-version", "2027-01-01"),
            METHOD,
            ("mcp-name", "read"),
        ],
        body(),
        -32022,
    )
    .await;
    assert!(
        reply["error"]["data"]["supported"]
            .as_array()
            .is_some_and(|supported| supported.contains(&json!("2026-07-28")))
    );
    let mut no_capabilities = body();
    no_capabilities["params"]["_meta"]
        .as_object_mut()
        .expect("meta")
        .remove("io.modelcontextprotocol/clientCapabilities");
    refused(
        vec![VERSION, METHOD, ("mcp-name", "read")],
        no_capabilities,
        -32602,
    )
    .await;
    assert_eq!(
        server.upstream_calls(),
        1,
        "no refused request reached the upstream"
    );

    // A name outside plain ASCII travels in the Base64 sentinel form and is decoded first.
    let sentinel = format!("=?base64?{}?=", STANDARD.encode("read"));
    let decoded = post(
        &server.url,
        Some("a-session-id-from-elsewhere"),
        &call(json!("nine"), "read", json!({})),
        &[VERSION, METHOD, ("mcp-name", &sentinel)],
    )
    .await;
    assert_eq!(decoded.status(), 200, "a stray Mcp-Session-Id is ignored");
    assert_eq!(decoded.json_value().await["id"], "nine");
    assert_eq!(server.upstream_calls(), 2);

    let get = super::harness::http_client()
        .get(&server.url)
        .header("accept", "text/event-stream")
        .header(VERSION.0, VERSION.1)
        .send()
        .await
        .expect("answer");
    assert_eq!(get.status(), 405, "2026-07-28 has no GET stream");
}

#[tokio::test]
async fn an_approval_round_trip_over_http_runs_the_call_once_for_an_attested_principal() {
    let mut config = config("s");
    config.attested_clients = vec!["agent:test".to_owned()];
    let server = serve(
        config,
        policy(POLICY),
        memory_store(),
        HttpFrontConfig::default(),
    )
    .await;
    let elicitation = json!({"elicitation": {}});
    let headers = [VERSION, METHOD, ("mcp-name", "write")];
    let asked = post(
        &server.url,
        None,
        &call(json!(1), "write", elicitation.clone()),
        &headers,
    )
    .await
    .json_value()
    .await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"].as_str().expect("state");
    assert_eq!(server.upstream_calls(), 0);
    let mut retried = call(json!(2), "write", elicitation);
    retried["params"]["requestState"] = json!(state);
    retried["params"]["inputResponses"] =
        json!({"countersign/approval": {"action": "accept", "content": {"decision": "approve"}}});
    let done = post(&server.url, None, &retried, &headers)
        .await
        .json_value()
        .await;
    assert_eq!(done["id"], 2);
    assert_eq!(
        done["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{done}"
    );
    assert_eq!(server.upstream_calls(), 1);
}

#[tokio::test]
async fn a_last_event_id_is_answered_not_supported_and_replays_nothing_case_b48() {
    let server = default_server().await;
    let a = open_session(&server.url, json!({}), &[]).await;
    let b = open_session(&server.url, json!({}), &[]).await;
    for event_id in ["0", "e_B7", &format!("{b}-7"), &format!("{a}-1")] {
        let resumed = super::harness::http_client()
            .get(&server.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &a)
            .header("last-event-id", event_id)
            .send()
            .await
            .expect("answer");
        assert_eq!(resumed.status(), 400, "{event_id}");
        let reply = resumed.json_value().await;
        assert!(
            reply["error"]["message"]
                .as_str()
                .is_some_and(|message| message.contains("not supported")),
            "{reply}"
        );
    }
}

#[tokio::test]
async fn mirrored_parameter_headers_must_match_the_arguments_of_a_listed_tool() {
    let server = serve(
        config("s"),
        policy(POLICY),
        memory_store(),
        HttpFrontConfig::default(),
    )
    .await;
    let with_param = |id: i64| {
        let mut body = call(json!(id), "read", json!({}));
        body["params"]["arguments"] = json!({"path": "a"});
        body
    };
    let headers = [VERSION, METHOD, ("mcp-name", "read")];
    // Headers for a tool the gateway has not listed cannot be checked: refused.
    let mut sent = headers.to_vec();
    sent.push(("mcp-param-path", "a"));
    let early = post(&server.url, None, &with_param(1), &sent).await;
    assert_eq!(early.status(), 400);
    assert_eq!(early.json_value().await["error"]["code"], -32020);
    // The fake's tools have no `x-mcp-header`: once listed, no Mcp-Param header is expected,
    // and one that is sent anyway mirrors nothing.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                      "params": modern_params(json!({}), json!({}))});
    let listed = post(
        &server.url,
        None,
        &list,
        &[VERSION, ("mcp-method", "tools/list")],
    )
    .await;
    assert_eq!(listed.status(), 200);
    let ok = post(&server.url, None, &with_param(3), &headers).await;
    assert_eq!(ok.status(), 200);
    assert_eq!(server.upstream_calls(), 1);

    // `locate` mirrors `region` into `Mcp-Param-Region`: the header must match the argument.
    let locate = |id: i64, region: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": modern_params(
            json!({"name": "locate", "arguments": {"region": region}}), json!({}))})
    };
    let base = [VERSION, METHOD, ("mcp-name", "locate")];
    let with = |value: &'static str| {
        let mut headers = base.to_vec();
        headers.push(("mcp-param-region", value));
        headers
    };
    let matching = post(&server.url, None, &locate(4, "eu-west1"), &with("eu-west1")).await;
    assert_eq!(matching.status(), 200);
    for (headers, why) in [
        (with("us-east1"), "another value"),
        (base.to_vec(), "missing"),
    ] {
        let refused = post(&server.url, None, &locate(5, "eu-west1"), &headers).await;
        assert_eq!(refused.status(), 400, "{why}");
        assert_eq!(refused.json_value().await["error"]["code"], -32020, "{why}");
    }
    assert_eq!(
        server.upstream_calls(),
        2,
        "no mismatched call reached the upstream"
    );
}
