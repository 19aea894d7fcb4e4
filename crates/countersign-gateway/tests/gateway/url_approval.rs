//! Issue #27: approval by URL. A client that supports URL-mode elicitation (2025-11-25's
//! `elicitation.url`, or the same in a 2026-07-28 request) is sent to the approval service's
//! page for the request; nothing it answers counts (case B45: the party being gated is not the
//! channel of the gate), and the identical call, sent again after a person approved there,
//! runs once.

use std::sync::Arc;

use countersign::{AnswerDecision, ApprovalId, ApprovalState, Store, SystemClock};
use countersign_gateway::{Gateway, GatewayError};
use serde_json::json;

use super::fake::Behaviour;
use super::harness::{
    config, memory_store, policy, refusal, start_unopened, start_with_capabilities,
};

const POLICY: &str = "schema: countersign.policy/v1\nactions:\n  mcp.s.write:\n    effect: \"write:{path}\"\n    decision: approve\n";

const BASE: &str = "https://approvals.example.com/";

fn url_config() -> countersign_gateway::GatewayConfig {
    let mut config = config("s");
    config.approval_url = Some(BASE.to_owned());
    // Even an attested client's answer does not count in URL mode: the page is the channel.
    config.attested_clients = vec!["stdio".to_owned()];
    config
}

async fn approve(store: &Arc<dyn Store>, id: &ApprovalId) {
    countersign::control::record_answer(
        store.as_ref(),
        id,
        AnswerDecision::Approve,
        "human:alice",
        None,
        countersign::Clock::now(&SystemClock),
    )
    .await
    .expect("approved on the service's page");
}

#[tokio::test]
async fn a_url_capable_client_is_sent_to_the_request_page_and_the_retry_runs_once() {
    let store = memory_store();
    let mut harness = start_with_capabilities(
        url_config(),
        policy(POLICY),
        Arc::clone(&store),
        &["write"],
        Behaviour::Succeed,
        json!({"elicitation": {"form": {}, "url": {}}}),
    )
    .await;
    let first = harness.client.call("write", json!({"path": "a"})).await;
    assert_eq!(
        refusal(&first),
        (-32042, "approval_required".to_owned()),
        "{first}"
    );
    let data = &first["error"]["data"];
    let id = data["request_id"].as_str().expect("request id").to_owned();
    let url = format!("https://approvals.example.com/requests/{id}");
    assert_eq!(data["approval_url"], url.as_str());
    let elicitation = &data["elicitations"][0];
    assert_eq!(elicitation["mode"], "url");
    assert_eq!(elicitation["url"], url.as_str());
    assert_eq!(elicitation["elicitationId"], id.as_str());
    let message = elicitation["message"].as_str().expect("message");
    assert!(
        message.contains(data["action_hash"].as_str().expect("hash")),
        "{message}"
    );
    // Nothing in the URL authorizes: it names the request only.
    assert!(!url.contains("token") && !url.contains('?'));
    // Never asked inline, even though the client also declared form elicitation.
    assert!(
        !harness
            .client
            .received
            .iter()
            .any(|message| message["method"] == "elicitation/create"),
        "{:?}",
        harness.client.received
    );

    // Sent again before anyone answered: the same request, nothing runs.
    let early = harness.client.call("write", json!({"path": "a"})).await;
    assert_eq!(refusal(&early), (-32042, "approval_required".to_owned()));
    assert_eq!(early["error"]["data"]["request_id"], id.as_str());
    assert_eq!(harness.fake.calls(), 0);

    let id = ApprovalId::parse(&id).expect("an id");
    approve(&store, &id).await;
    // The gateway tells the client the elicitation is complete.
    loop {
        let message = harness.client.next().await;
        if message["method"] == "notifications/elicitation/complete" {
            assert_eq!(message["params"]["elicitationId"], id.as_str());
            break;
        }
    }
    let done = harness.client.call("write", json!({"path": "a"})).await;
    assert_eq!(
        done["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{done}"
    );
    assert_eq!(harness.fake.calls(), 1);
    let again = harness.client.call("write", json!({"path": "a"})).await;
    assert_eq!(refusal(&again), (-32095, "duplicate".to_owned()), "{again}");
    assert_eq!(harness.fake.calls(), 1);
}

#[tokio::test]
async fn a_client_without_url_elicitation_is_asked_as_before() {
    let mut harness = start_with_capabilities(
        url_config(),
        policy(POLICY),
        memory_store(),
        &["write"],
        Behaviour::Succeed,
        json!({}),
    )
    .await;
    let first = harness.client.call("write", json!({"path": "a"})).await;
    assert_eq!(
        refusal(&first),
        (-32090, "approval_required".to_owned()),
        "{first}"
    );
    assert!(first["error"]["data"].get("elicitations").is_none());
}

#[tokio::test]
async fn a_2026_client_gets_a_url_input_request_and_its_accept_authorizes_nothing() {
    let store = memory_store();
    let mut harness = start_unopened(
        url_config(),
        policy(POLICY),
        Arc::clone(&store),
        &["write"],
        Behaviour::Succeed,
        false,
    );
    let capabilities = json!({"elicitation": {"url": {}}});
    let call = json!({"name": "write", "arguments": {"path": "a"}});
    let first = harness
        .client
        .modern("tools/call", call.clone(), capabilities.clone())
        .await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let asked = &result["inputRequests"]["countersign/approval"];
    assert_eq!(asked["method"], "elicitation/create");
    assert_eq!(asked["params"]["mode"], "url");
    let id = asked["params"]["elicitationId"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(
        asked["params"]["url"],
        format!("https://approvals.example.com/requests/{id}").as_str()
    );
    assert!(asked["params"].get("requestedSchema").is_none());
    let state = result["requestState"].as_str().expect("state").to_owned();

    // The client says the person opened the page (and even claims a decision): nothing runs.
    let mut retried = call.clone();
    retried["requestState"] = json!(state);
    retried["inputResponses"] =
        json!({"countersign/approval": {"action": "accept", "content": {"decision": "approve"}}});
    let claimed = harness
        .client
        .modern("tools/call", retried.clone(), capabilities.clone())
        .await;
    assert_eq!(
        claimed["result"]["resultType"], "input_required",
        "{claimed}"
    );
    assert_eq!(harness.fake.calls(), 0);
    let id = ApprovalId::parse(&id).expect("an id");
    let record = store.approval(&id).await.expect("read").expect("record");
    assert_eq!(record.state, ApprovalState::Pending);

    // A person approves on the page; the retried call runs once.
    approve(&store, &id).await;
    let done = harness
        .client
        .modern("tools/call", retried, capabilities)
        .await;
    assert_eq!(
        done["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{done}"
    );
    assert_eq!(harness.fake.calls(), 1);
}

#[tokio::test]
async fn an_approval_url_that_is_not_a_base_url_is_refused_at_start() {
    for bad in [
        "approvals.example.com",
        "ftp://approvals.example.com",
        "https://",
        "https://approvals.example.com/?next=x",
        "https://approvals.example.com/#top",
        "https://approvals example.com",
    ] {
        let mut config = config("s");
        config.approval_url = Some(bad.to_owned());
        let refused = Gateway::new(config, policy(POLICY), memory_store());
        assert!(
            matches!(refused, Err(GatewayError::BadApprovalUrl(ref url)) if url == bad),
            "{bad}"
        );
    }
    let mut config = config("s");
    config.approval_url = Some("http://127.0.0.1:8780".to_owned());
    assert!(Gateway::new(config, policy(POLICY), memory_store()).is_ok());
}
