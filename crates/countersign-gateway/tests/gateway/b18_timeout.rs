//! B18: a timed-out call is ambiguous, cancelled upstream, and never re-sent.

use std::sync::Arc;
use std::time::Duration;

use countersign::EffectState;
use serde_json::json;

use super::fake::Behaviour;
use super::harness::{config, memory_store, policy, refusal, start};

#[tokio::test]
async fn timeout_sends_cancellation_records_ambiguous_and_refuses_the_retry() {
    let store = memory_store();
    let policy = policy(
        "schema: countersign.policy/v1\nactions:\n  mcp.billing.create_invoice:\n    effect: \"invoice:{customer}\"\n    decision: allow\n",
    );
    let mut config = config("billing");
    config.call_timeout = Duration::from_millis(300);
    let mut harness = start(
        config,
        policy,
        Arc::clone(&store),
        &["create_invoice"],
        Behaviour::HoldUntilCancelled,
    )
    .await;
    let late_reply = harness.fake.late_reply_sent.notified();

    let reply = harness
        .client
        .request_with_id(
            json!(42),
            "tools/call",
            json!({"name": "create_invoice", "arguments": {"customer": "c2"}}),
        )
        .await;
    assert_eq!(reply["id"], 42, "the error carries the client's request id");
    assert_eq!(
        refusal(&reply),
        (-32097, "outcome_unknown".to_owned()),
        "{reply}"
    );
    let effects = store.effects(None).await.expect("effects");
    assert_eq!(effects.len(), 1);
    assert_eq!(
        (effects[0].key.as_str(), effects[0].state),
        ("invoice:c2", EffectState::Ambiguous)
    );
    let upstream_id = harness.fake.seen.lock().expect("seen").calls[0].0.clone();
    assert_eq!(
        harness.fake.seen.lock().expect("seen").cancelled,
        vec![upstream_id]
    );

    // The upstream completes late: kept as evidence, not delivered.
    late_reply.await;
    let kept = loop {
        let late = harness.gateway.late_replies();
        if !late.is_empty() {
            break late;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        (kept.len(), kept[0].success, kept[0].effect_key.as_deref()),
        (1, true, Some("invoice:c2"))
    );

    // The client retries: refused, never forwarded. The late success reconciles the effect.
    *harness.fake.behaviour.lock().expect("behaviour") = Behaviour::Succeed;
    let retry = harness
        .client
        .request_with_id(
            json!(43),
            "tools/call",
            json!({"name": "create_invoice", "arguments": {"customer": "c2"}}),
        )
        .await;
    assert_eq!(refusal(&retry), (-32095, "duplicate".to_owned()), "{retry}");
    assert_eq!(harness.fake.calls(), 1);
    let answers_to_42 = harness
        .client
        .received
        .iter()
        .filter(|message| message["id"] == 42)
        .count();
    assert_eq!(answers_to_42, 1);
}
