//! Approvals as MCP 2026-07-28 multi round-trip requests: a call that needs approval answers
//! with an input-required result whose `requestState` is MAC'd and names the approval request
//! and the action hash; the retried call carries the answer. A state that does not verify is
//! refused; an answer counts only from an attested client (case B45).

use serde_json::{Value, json};

use super::fake::Behaviour;
use super::harness::{Harness, config, memory_store, policy, refusal, start_unopened};

const POLICY: &str =
    "schema: countersign.policy/v1\nactions:\n  mcp.s.write:\n    decision: approve\n";

const ELICITATION: &str = r#"{"elicitation": {"form": {}}}"#;

fn harness(attested: bool) -> Harness {
    let mut config = config("s");
    if attested {
        config.attested_clients = vec!["stdio".to_owned()];
    }
    start_unopened(
        config,
        policy(POLICY),
        memory_store(),
        &["write"],
        Behaviour::Succeed,
        false,
    )
}

fn capabilities() -> Value {
    serde_json::from_str(ELICITATION).expect("json")
}

async fn first_attempt(harness: &mut Harness, arguments: Value) -> Value {
    let reply = harness
        .client
        .modern(
            "tools/call",
            json!({"name": "write", "arguments": arguments}),
            capabilities(),
        )
        .await;
    let result = &reply["result"];
    assert_eq!(result["resultType"], "input_required", "{reply}");
    result.clone()
}

async fn retry(harness: &mut Harness, arguments: Value, state: &str, answer: Value) -> Value {
    harness
        .client
        .modern(
            "tools/call",
            json!({"name": "write", "arguments": arguments,
                   "requestState": state,
                   "inputResponses": {"countersign/approval": answer}}),
            capabilities(),
        )
        .await
}

fn approve() -> Value {
    json!({"action": "accept", "content": {"decision": "approve"}})
}

#[tokio::test]
async fn the_question_travels_in_the_result_and_an_attested_answer_runs_the_call_once() {
    let mut harness = harness(true);
    let asked = first_attempt(&mut harness, json!({"path": "b"})).await;
    let question = &asked["inputRequests"]["countersign/approval"];
    assert_eq!(question["method"], "elicitation/create");
    let message = question["params"]["message"].as_str().expect("message");
    assert!(message.contains("mcp.s.write"), "{message}");
    let hash = asked["_meta"]["countersign"]["action_hash"]
        .as_str()
        .expect("hash");
    assert!(
        message.contains(hash),
        "the question shows the hash: {message}"
    );
    let state = asked["requestState"].as_str().expect("state");
    assert!(state.starts_with("cs1."), "{state}");
    assert_eq!(harness.fake.calls(), 0, "nothing runs before the answer");
    let done = retry(&mut harness, json!({"path": "b"}), state, approve()).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["_meta"]["countersign"]["outcome"],
        "committed"
    );
    assert_eq!(harness.fake.calls(), 1);
    // The gateway's state and the answer never reach the upstream.
    let seen = harness.fake.seen.lock().expect("seen");
    assert_eq!(seen.calls[0].2, json!({"path": "b"}));
    assert!(seen.call_metas[0].is_null(), "{:?}", seen.call_metas);
}

#[tokio::test]
async fn a_forged_or_foreign_request_state_is_refused_and_nothing_runs() {
    let mut harness = harness(true);
    let asked = first_attempt(&mut harness, json!({"path": "b"})).await;
    let state = asked["requestState"].as_str().expect("state").to_owned();
    // One character of the payload changed: the MAC no longer verifies.
    let (payload, tag) = state["cs1.".len()..].split_once('.').expect("two parts");
    let mut bytes = payload.as_bytes().to_vec();
    bytes[3] = if bytes[3] == b'A' { b'B' } else { b'A' };
    let forged = format!("cs1.{}.{tag}", String::from_utf8(bytes).expect("ascii"));
    let reply = retry(&mut harness, json!({"path": "b"}), &forged, approve()).await;
    assert_eq!(
        refusal(&reply),
        (-32602, "invalid_request_state".to_owned()),
        "{reply}"
    );
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("integrity")),
        "{reply}"
    );
    // A genuine state presented with other arguments names another action.
    let reply = retry(&mut harness, json!({"path": "c"}), &state, approve()).await;
    assert_eq!(
        refusal(&reply),
        (-32602, "invalid_request_state".to_owned())
    );
    // An answer without the gateway's state.
    let reply = retry(&mut harness, json!({"path": "b"}), "opaque", approve()).await;
    assert_eq!(
        refusal(&reply),
        (-32602, "invalid_request_state".to_owned())
    );
    assert_eq!(harness.fake.calls(), 0);
    // A state from another gateway (another key) does not verify either.
    let mut other = super::harness::start_unopened(
        config("s"),
        policy(POLICY),
        memory_store(),
        &["write"],
        Behaviour::Succeed,
        false,
    );
    let reply = retry(&mut other, json!({"path": "b"}), &state, approve()).await;
    assert_eq!(
        refusal(&reply),
        (-32602, "invalid_request_state".to_owned())
    );
    assert_eq!(other.fake.calls(), 0);
}

#[tokio::test]
async fn an_unattested_clients_answer_is_refused_and_the_request_stays_pending() {
    let mut harness = harness(false);
    let asked = first_attempt(&mut harness, json!({"path": "b"})).await;
    let state = asked["requestState"].as_str().expect("state").to_owned();
    let reply = retry(&mut harness, json!({"path": "b"}), &state, approve()).await;
    assert_eq!(
        refusal(&reply),
        (-32093, "not_authenticated".to_owned()),
        "{reply}"
    );
    assert_eq!(harness.fake.calls(), 0);
}

#[tokio::test]
async fn a_decline_is_a_recorded_denial_and_a_cancel_asks_again() {
    let mut harness = harness(true);
    let asked = first_attempt(&mut harness, json!({"path": "b"})).await;
    let state = asked["requestState"].as_str().expect("state").to_owned();
    let again = retry(
        &mut harness,
        json!({"path": "b"}),
        &state,
        json!({"action": "cancel"}),
    )
    .await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    let declined = retry(
        &mut harness,
        json!({"path": "b"}),
        &state,
        json!({"action": "decline"}),
    )
    .await;
    assert_eq!(
        refusal(&declined),
        (-32091, "approval_denied".to_owned()),
        "{declined}"
    );
    assert_eq!(harness.fake.calls(), 0);
}

#[tokio::test]
async fn a_client_without_elicitation_gets_the_out_of_band_refusal() {
    let mut harness = harness(true);
    let reply = harness
        .client
        .modern(
            "tools/call",
            json!({"name": "write", "arguments": {}}),
            json!({}),
        )
        .await;
    assert_eq!(
        refusal(&reply),
        (-32090, "approval_required".to_owned()),
        "{reply}"
    );
    assert_eq!(harness.fake.calls(), 0);
}

#[tokio::test]
async fn answers_that_do_not_fit_the_form_leave_the_request_pending_case_b45() {
    let mut harness = harness(true);
    let asked = first_attempt(&mut harness, json!({"path": "b"})).await;
    let state = asked["requestState"].as_str().expect("state").to_owned();
    for answer in [
        json!({"action": "accept", "content": {}}),
        json!({"action": "accept", "content": {"approve": true}}),
        json!({"action": "accept", "content": {"decision": "approve", "also": "this"}}),
        json!({"action": "ACCEPT", "content": {"decision": "approve"}}),
        json!({"action": "accept", "content": {"decision": "yes"}}),
    ] {
        let reply = retry(&mut harness, json!({"path": "b"}), &state, answer.clone()).await;
        assert_eq!(
            reply["result"]["resultType"], "input_required",
            "{answer} is no approval: {reply}"
        );
    }
    assert_eq!(harness.fake.calls(), 0);
}
