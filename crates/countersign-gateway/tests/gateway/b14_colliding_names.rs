//! B14: two upstreams expose `search`; each is its own action with its own rule and approval.

use std::sync::Arc;

use countersign::control::record_answer;
use countersign::{AnswerDecision, ApprovalId, Clock, SystemClock};
use serde_json::json;

use super::fake::Behaviour;
use super::harness::{config, memory_store, policy, refusal, start};

const POLICY: &str = "schema: countersign.policy/v1\nactions:\n  mcp.s1.search:\n    decision: allow\n  mcp.s2.search:\n    decision: approve\n";

#[tokio::test]
async fn same_tool_name_on_two_aliases_routes_and_decides_separately_in_any_start_order() {
    let store = memory_store();
    let policy = policy(POLICY);
    for restart in 0..10 {
        let order: [&str; 2] = if restart % 2 == 0 {
            ["s1", "s2"]
        } else {
            ["s2", "s1"]
        };
        let mut harnesses = Vec::new();
        for alias in order {
            let harness = start(
                config(alias),
                Arc::clone(&policy),
                Arc::clone(&store),
                &["search"],
                Behaviour::Succeed,
            )
            .await;
            harnesses.push((alias, harness));
        }
        for (alias, harness) in &mut harnesses {
            let reply = harness.client.call("search", json!({"q": "x"})).await;
            if *alias == "s1" {
                assert_eq!(
                    reply["result"]["content"][0]["text"], "s1 did search",
                    "{reply}"
                );
                assert_eq!(
                    reply["result"]["_meta"]["countersign"]["receipt"]["action"],
                    "mcp.s1.search"
                );
            } else {
                assert_eq!(
                    refusal(&reply),
                    (-32090, "approval_required".to_owned()),
                    "{reply}"
                );
                assert_eq!(
                    harness.fake.calls(),
                    0,
                    "s2's upstream saw nothing before approval"
                );
            }
        }
    }
}

#[tokio::test]
async fn approval_for_one_alias_does_not_authorize_the_other_and_removing_one_leaves_the_other() {
    let store = memory_store();
    let both_approve =
        policy("schema: countersign.policy/v1\nactions:\n  \"mcp.*\":\n    decision: approve\n");
    let mut s1 = start(
        config("s1"),
        Arc::clone(&both_approve),
        Arc::clone(&store),
        &["search"],
        Behaviour::Succeed,
    )
    .await;
    let mut s2 = start(
        config("s2"),
        Arc::clone(&both_approve),
        Arc::clone(&store),
        &["search"],
        Behaviour::Succeed,
    )
    .await;
    let first = s1.client.call("search", json!({"q": "x"})).await;
    let second = s2.client.call("search", json!({"q": "x"})).await;
    let hash = |reply: &serde_json::Value| {
        reply["error"]["data"]["action_hash"]
            .as_str()
            .expect("hash")
            .to_owned()
    };
    assert_ne!(hash(&first), hash(&second));
    let s1_request = first["error"]["data"]["request_id"]
        .as_str()
        .expect("id")
        .to_owned();
    record_answer(
        store.as_ref(),
        &ApprovalId::parse(&s1_request).expect("id"),
        AnswerDecision::Approve,
        "human:tester",
        None,
        SystemClock.now(),
    )
    .await
    .expect("approve s1");
    let still_waiting = s2.client.call("search", json!({"q": "x"})).await;
    assert_eq!(refusal(&still_waiting).0, -32090, "{still_waiting}");
    assert_ne!(
        still_waiting["error"]["data"]["request_id"],
        json!(s1_request)
    );
    assert_eq!(s2.fake.calls(), 0);

    // Remove S1 while S2 runs: S2 still routes to its own upstream.
    let s1_fake = Arc::clone(&s1.fake);
    drop(s1);
    let s2_request = still_waiting["error"]["data"]["request_id"]
        .as_str()
        .expect("id")
        .to_owned();
    record_answer(
        store.as_ref(),
        &ApprovalId::parse(&s2_request).expect("id"),
        AnswerDecision::Approve,
        "human:tester",
        None,
        SystemClock.now(),
    )
    .await
    .expect("approve s2");
    let done = s2.client.call("search", json!({"q": "x"})).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "s2 did search",
        "{done}"
    );
    assert_eq!((s1_fake.calls(), s2.fake.calls()), (0, 1));
}
