//! B19: a reply whose id does not match the request never decides the outcome.

use std::sync::Arc;

use countersign::EffectState;
use serde_json::json;

use super::fake::Behaviour;
use super::harness::{config, memory_store, policy, refusal, start};

async fn check(behaviour: Behaviour, evidence: &str) {
    let store = memory_store();
    let policy = policy(
        "schema: countersign.policy/v1\nactions:\n  mcp.pay.refund:\n    effect: \"refund:{txn}\"\n    decision: allow\n",
    );
    let mut harness = start(
        config("pay"),
        policy,
        Arc::clone(&store),
        &["refund"],
        behaviour,
    )
    .await;
    let reply = harness
        .client
        .request_with_id(
            json!(42),
            "tools/call",
            json!({"name": "refund", "arguments": {"txn": "t1"}}),
        )
        .await;
    assert_eq!(
        refusal(&reply),
        (-32097, "outcome_unknown".to_owned()),
        "{behaviour:?}: {reply}"
    );
    let effects = store.effects(None).await.expect("effects");
    assert_eq!(effects[0].state, EffectState::Ambiguous, "{behaviour:?}");
    let receipts = store.receipts(0, 100).await.expect("receipts");
    let last = receipts.last().expect("a receipt");
    assert!(
        last.body.contains("ambiguous") && last.body.contains(evidence),
        "{behaviour:?}: the raw reply is evidence: {}",
        last.body
    );

    let retry = harness
        .client
        .request_with_id(
            json!(43),
            "tools/call",
            json!({"name": "refund", "arguments": {"txn": "t1"}}),
        )
        .await;
    assert_eq!(
        refusal(&retry),
        (-32096, "ambiguous".to_owned()),
        "{behaviour:?}: {retry}"
    );
    assert_eq!(
        harness.fake.calls(),
        1,
        "{behaviour:?}: the refund ran once"
    );
}

#[tokio::test]
async fn error_reply_with_another_id_is_ambiguous() {
    check(Behaviour::ErrorWithOtherId, "999").await;
}

#[tokio::test]
async fn error_reply_without_id_is_ambiguous() {
    check(Behaviour::ErrorWithoutId, "refund failed").await;
}

#[tokio::test]
async fn error_reply_with_the_id_as_a_string_is_ambiguous() {
    check(Behaviour::ErrorWithStringId, "refund failed").await;
}

#[tokio::test]
async fn success_reply_with_another_id_is_ambiguous_not_committed() {
    check(Behaviour::SuccessWithOtherId, "999").await;
}
