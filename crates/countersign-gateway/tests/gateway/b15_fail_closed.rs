//! B15: every MCP tool call goes through the one choke point, including tools announced later.

use std::sync::Arc;

use countersign::ApprovalState;
use serde_json::json;

use super::fake::Behaviour;
use super::harness::{config, memory_store, policy, refusal, start};

#[tokio::test]
async fn listed_and_late_announced_tools_both_pause_for_approval_under_the_default() {
    let store = memory_store();
    let policy =
        policy("schema: countersign.policy/v1\nactions:\n  \"*\":\n    decision: approve\n");
    let mut harness = start(
        config("s"),
        policy,
        Arc::clone(&store),
        &["create_user"],
        Behaviour::Succeed,
    )
    .await;
    let created = harness
        .client
        .call("create_user", json!({"name": "ann"}))
        .await;
    assert_eq!(
        refusal(&created),
        (-32090, "approval_required".to_owned()),
        "{created}"
    );

    harness.fake.add_tool("delete_user");
    loop {
        let message = harness.client.next().await;
        if message["method"] == "notifications/tools/list_changed" {
            break;
        }
    }
    let deleted = harness
        .client
        .call("delete_user", json!({"name": "ann"}))
        .await;
    assert_eq!(
        refusal(&deleted),
        (-32090, "approval_required".to_owned()),
        "{deleted}"
    );
    assert_eq!(
        harness.fake.calls(),
        0,
        "the upstream receives nothing before approval"
    );
    let pending = store
        .approvals(Some(ApprovalState::Pending))
        .await
        .expect("approvals");
    let mut actions: Vec<String> = pending.iter().map(|record| record.action.clone()).collect();
    actions.sort();
    assert_eq!(actions, ["mcp.s.create_user", "mcp.s.delete_user"]);
}

#[tokio::test]
async fn a_tool_the_policy_never_saw_is_hidden_and_denied_when_called_anyway() {
    let store = memory_store();
    let policy = policy(
        "schema: countersign.policy/v1\nactions:\n  mcp.s.create_user:\n    decision: allow\n",
    );
    let mut harness = start(
        config("s"),
        policy,
        store,
        &["create_user"],
        Behaviour::Succeed,
    )
    .await;
    harness.fake.add_tool("delete_user");
    assert_eq!(harness.client.tool_names().await, ["create_user"]);
    let deleted = harness
        .client
        .call("delete_user", json!({"name": "ann"}))
        .await;
    assert_eq!(
        refusal(&deleted),
        (-32094, "unknown_action".to_owned()),
        "{deleted}"
    );
    assert_eq!(harness.fake.calls(), 0);
}

#[tokio::test]
async fn hiding_can_be_turned_off() {
    let policy = policy(
        "schema: countersign.policy/v1\nactions:\n  mcp.s.create_user:\n    decision: allow\n",
    );
    let mut config = config("s");
    config.hide_unpermitted_tools = false;
    let mut harness = start(
        config,
        policy,
        memory_store(),
        &["create_user", "drop_table"],
        Behaviour::Succeed,
    )
    .await;
    assert_eq!(
        harness.client.tool_names().await,
        ["create_user", "drop_table"]
    );
}
