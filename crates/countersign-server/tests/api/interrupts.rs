//! The chat-surface contract (issue #17): `GET /api/v1/interrupts` and `POST
//! /api/v1/interrupts/responses`, on SQLite and on PostgreSQL.

use std::sync::atomic::Ordering;

use countersign::Receipt;
use countersign::display::interrupt_object;
use countersign::evidence::ReceiptKind;
use serde_json::{Value, json};

use super::support::{Backend, Harness, Options, on_both_stores};

on_both_stores!(
    lists_the_requests_the_caller_may_answer_as_interrupt_objects,
    answers_one_approve_and_one_deny_through_the_kernel,
    refuses_every_other_shape_and_records_who_sent_it,
    a_malformed_entry_keeps_the_rest_of_the_body_from_applying,
    refuses_anonymous_callers_unknown_ids_and_requests_no_longer_pending,
);

const RESPONSES: &str = "/api/v1/interrupts/responses";

async fn receipts(harness: &Harness) -> Vec<Receipt> {
    harness
        .store
        .receipts(0, 1000)
        .await
        .expect("receipts")
        .iter()
        .filter_map(|row| row.to_receipt().ok())
        .collect()
}

async fn state(harness: &Harness, id: &countersign::ApprovalId) -> String {
    harness
        .store
        .approval(id)
        .await
        .expect("read")
        .expect("stored")
        .state
        .as_str()
        .to_owned()
}

async fn lists_the_requests_the_caller_may_answer_as_interrupt_objects(
    backend: Backend,
    case: &str,
) {
    let harness = Harness::start(backend, case, Options::default()).await;
    let (id, hash) = harness
        .ask(
            "finance.small",
            json!({"payment_id": "pi_1", "memo": "invoice\u{202e}fdp.exe"}),
        )
        .await;
    harness.ask("ops.restart", json!({"host": "web-1"})).await;
    let alice = harness.token("human:alice", &[]);
    let (status, body) = harness.get("/api/v1/interrupts", Some(&alice)).await;
    assert_eq!(status, 200, "{body}");
    let items = body["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "alice answers finance only: {body}");
    let record = harness
        .store
        .approval(&id)
        .await
        .expect("read")
        .expect("stored");
    let expected = serde_json::to_value(interrupt_object(&record)).expect("serializable");
    assert_eq!(items[0], expected);
    assert_eq!(items[0]["schema"], "countersign.interrupt/v1");
    assert_eq!(items[0]["action_hash"], hash.as_str());
    assert!(
        items[0]["display_text"]
            .as_str()
            .is_some_and(|text| text.contains("invoice\\u{202e}fdp.exe")),
        "the shared rendering escapes the bidi control: {}",
        items[0]
    );
    assert_eq!(
        items[0]["answers"][0]["response"],
        json!({"decision": "approve", "action_hash": hash.as_str()})
    );
    let (_, other_run) = harness
        .get("/api/v1/interrupts?run=another", Some(&alice))
        .await;
    assert_eq!(other_run["items"], json!([]));
    let (status, body) = harness
        .get("/api/v1/interrupts?as=human:root", Some(&alice))
        .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("invalid_query"))
    );
    harness.stop().await;
}

async fn answers_one_approve_and_one_deny_through_the_kernel(backend: Backend, case: &str) {
    let harness = Harness::start(backend, case, Options::default()).await;
    let (yes, yes_hash) = harness
        .ask("finance.small", json!({"payment_id": "pi_1"}))
        .await;
    let (no, no_hash) = harness
        .ask("finance.small", json!({"payment_id": "pi_2"}))
        .await;
    let alice = harness.token("human:alice", &["finance"]);
    let body = json!({"responses": {
        yes.as_str(): {"decision": "approve", "action_hash": yes_hash.as_str(), "note": "ok"},
        no.as_str(): {"decision": "deny", "action_hash": no_hash.as_str(), "note": "not this one"},
    }});
    let (status, answered) = harness.post(RESPONSES, Some(&alice), body).await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["results"][yes.as_str()]["state"], "granted");
    assert_eq!(answered["results"][no.as_str()]["state"], "denied");
    assert_eq!(state(&harness, &yes).await, "granted");
    assert_eq!(state(&harness, &no).await, "denied");
    // Each answer left its receipt, naming the signed-in caller and the channel.
    let answers: Vec<Receipt> = receipts(&harness)
        .await
        .into_iter()
        .filter(|receipt| receipt.kind == ReceiptKind::Answer)
        .collect();
    assert_eq!(answers.len(), 2);
    for receipt in &answers {
        assert_eq!(receipt.approver.as_deref(), Some("human:alice"));
        assert_eq!(receipt.channel.as_deref(), Some("service"));
    }
    // The agent's calls: the approved one runs once, the denied one is refused.
    harness
        .call("finance.small", json!({"payment_id": "pi_1"}), false)
        .await
        .expect("the approved call runs");
    let denied = harness
        .call("finance.small", json!({"payment_id": "pi_2"}), false)
        .await
        .expect_err("the denied call is refused");
    assert_eq!(denied.reason(), "approval_denied");
    assert_eq!(harness.executed.load(Ordering::SeqCst), 1);
    harness.stop().await;
}

async fn refuses_every_other_shape_and_records_who_sent_it(backend: Backend, case: &str) {
    let harness = Harness::start(backend, case, Options::default()).await;
    let (id, hash) = harness
        .ask("finance.small", json!({"payment_id": "pi_3"}))
        .await;
    let alice = harness.token("human:alice", &[]);
    let shapes: Vec<Value> = vec![
        json!(true),
        json!(false),
        json!("approve"),
        json!(null),
        json!(1),
        json!([]),
        json!({}),
        json!({"decision": "approve"}),
        json!({"action_hash": hash.as_str()}),
        json!({"decision": "yes", "action_hash": hash.as_str()}),
        json!({"decision": true, "action_hash": hash.as_str()}),
        json!({"decision": "approve", "action_hash": hash.as_str(), "approver": "human:bob"}),
    ];
    for shape in &shapes {
        let body = json!({"responses": {id.as_str(): shape}});
        let (status, problem) = harness.post(RESPONSES, Some(&alice), body).await;
        assert_eq!(
            (status, problem["reason"].as_str()),
            (422, Some("invalid_decision")),
            "{shape}: {problem}"
        );
        assert_eq!(problem["results"][id.as_str()]["status"], "refused");
        assert_eq!(state(&harness, &id).await, "pending", "{shape}");
    }
    let refusals: Vec<Receipt> = receipts(&harness)
        .await
        .into_iter()
        .filter(|receipt| receipt.reason.as_deref() == Some("invalid_decision"))
        .collect();
    assert_eq!(refusals.len(), shapes.len());
    for receipt in &refusals {
        assert_eq!(receipt.approver.as_deref(), Some("human:alice"));
        assert_eq!(receipt.approval_id.as_deref(), Some(id.as_str()));
        assert_eq!(receipt.outcome.as_str(), "refused");
    }
    assert_eq!(harness.executed.load(Ordering::SeqCst), 0);
    // The valid form still counts afterwards.
    let body =
        json!({"responses": {id.as_str(): {"decision": "approve", "action_hash": hash.as_str()}}});
    let (status, answered) = harness.post(RESPONSES, Some(&alice), body).await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(state(&harness, &id).await, "granted");
    harness.stop().await;
}

async fn a_malformed_entry_keeps_the_rest_of_the_body_from_applying(backend: Backend, case: &str) {
    let harness = Harness::start(backend, case, Options::default()).await;
    let (good, good_hash) = harness
        .ask("finance.small", json!({"payment_id": "pi_4"}))
        .await;
    let (bad, _) = harness
        .ask("finance.small", json!({"payment_id": "pi_5"}))
        .await;
    let alice = harness.token("human:alice", &[]);
    let body = json!({"responses": {
        good.as_str(): {"decision": "approve", "action_hash": good_hash.as_str()},
        bad.as_str(): true,
    }});
    let (status, problem) = harness.post(RESPONSES, Some(&alice), body).await;
    assert_eq!(
        (status, problem["reason"].as_str()),
        (422, Some("invalid_decision")),
        "{problem}"
    );
    assert_eq!(problem["results"][good.as_str()]["status"], "not_applied");
    assert_eq!(problem["results"][bad.as_str()]["status"], "refused");
    assert_eq!(state(&harness, &good).await, "pending");
    assert_eq!(state(&harness, &bad).await, "pending");
    // A well-formed id of no request keeps the rest from applying too: nothing is applied
    // under a 404 (found by a first-time user: the good response was recorded).
    let mut unknown = good.as_str().to_owned();
    let last = if unknown.ends_with('0') { '1' } else { '0' };
    unknown.pop();
    unknown.push(last);
    let body = json!({"responses": {
        good.as_str(): {"decision": "approve", "action_hash": good_hash.as_str()},
        unknown.as_str(): {"decision": "approve", "action_hash": good_hash.as_str()},
    }});
    let (status, problem) = harness.post(RESPONSES, Some(&alice), body).await;
    assert_eq!(
        (status, problem["reason"].as_str()),
        (404, Some("unknown_request")),
        "{problem}"
    );
    assert_eq!(problem["results"][good.as_str()]["status"], "not_applied");
    assert_eq!(problem["results"][unknown.as_str()]["status"], "refused");
    assert_eq!(state(&harness, &good).await, "pending");
    harness.stop().await;
}

async fn refuses_anonymous_callers_unknown_ids_and_requests_no_longer_pending(
    backend: Backend,
    case: &str,
) {
    let harness = Harness::start(backend, case, Options::default()).await;
    let (id, hash) = harness
        .ask("finance.small", json!({"payment_id": "pi_6"}))
        .await;
    let approve = json!({"decision": "approve", "action_hash": hash.as_str()});
    let (status, problem) = harness
        .post(
            RESPONSES,
            None,
            json!({"responses": {id.as_str(): approve}}),
        )
        .await;
    assert_eq!(
        (status, problem["reason"].as_str()),
        (401, Some("not_authenticated"))
    );
    let (status, _) = harness.get("/api/v1/interrupts", None).await;
    assert_eq!(status, 401);
    let alice = harness.token("human:alice", &[]);
    let olga = harness.token("human:olga", &[]);
    // Someone the request's rule does not name: refused by the kernel, nothing changes.
    let (status, problem) = harness
        .post(
            RESPONSES,
            Some(&olga),
            json!({"responses": {id.as_str(): approve}}),
        )
        .await;
    assert_eq!(
        (status, problem["reason"].as_str()),
        (403, Some("not_entitled"))
    );
    assert_eq!(state(&harness, &id).await, "pending");
    for body in [
        json!({"responses": {"apr_not-an-id": approve}}),
        json!({"responses": {}}),
        json!({"responses": [approve]}),
        json!({"responses": {id.as_str(): approve}, "approver": "human:root"}),
    ] {
        let (status, problem) = harness.post(RESPONSES, Some(&alice), body.clone()).await;
        assert!(
            matches!(
                (status, problem["reason"].as_str()),
                (404, Some("unknown_request")) | (422, Some("invalid_body"))
            ),
            "{body}: {problem}"
        );
    }
    assert_eq!(state(&harness, &id).await, "pending");
    let (status, _) = harness
        .post(
            RESPONSES,
            Some(&alice),
            json!({"responses": {id.as_str(): approve}}),
        )
        .await;
    assert_eq!(status, 200);
    // A stale card: the request was answered; a different answer is refused and changes nothing.
    let deny = json!({"decision": "deny", "action_hash": hash.as_str()});
    let bob = harness.token("human:bob", &[]);
    let (status, problem) = harness
        .post(
            RESPONSES,
            Some(&bob),
            json!({"responses": {id.as_str(): deny}}),
        )
        .await;
    assert_eq!(
        (status, problem["reason"].as_str()),
        (409, Some("already_decided")),
        "{problem}"
    );
    assert_eq!(state(&harness, &id).await, "granted");
    harness.stop().await;
}
