//! Issue #27: tool lists that fail closed. `tools/list` is filtered per principal (a tool the
//! policy can never allow or get approved for this principal is hidden), in both eras and for
//! tools announced later; annotations never loosen a decision; the tool's input schema is part
//! of the action, so a changed schema voids the open requests for the old one.

use std::sync::Arc;
use std::time::Duration;

use countersign::{AnswerDecision, ApprovalState, Principal, Store, SystemClock};
use countersign_gateway::PrincipalSource;
use serde_json::{Value, json};

use super::fake::Behaviour;
use super::harness::{config, memory_store, policy, refusal, start, start_unopened};

/// `ops_only` can only be approved by `agent:ops`, who may never approve its own call.
const PER_PRINCIPAL: &str = "schema: countersign.policy/v1
actions:
  mcp.s.read:
    decision: allow
  mcp.s.ops_only:
    decision: approve
    approval: { approvers: [\"agent:ops\"] }
";

#[tokio::test]
async fn tools_list_hides_per_principal_what_the_policy_can_never_permit() {
    let mut names = Vec::new();
    for principal in ["agent:ops", "agent:other"] {
        let mut config = config("s");
        config.principal = PrincipalSource::Fixed(Principal::new(principal).expect("principal"));
        let mut harness = start(
            config,
            policy(PER_PRINCIPAL),
            memory_store(),
            &["read", "ops_only", "unlisted"],
            Behaviour::Succeed,
        )
        .await;
        names.push(harness.client.tool_names().await);
    }
    assert_eq!(names[0], ["read"], "agent:ops could only approve itself");
    assert_eq!(names[1], ["read", "ops_only"]);
}

#[tokio::test]
async fn a_tool_announced_later_to_a_2026_client_is_filtered_before_it_sees_it() {
    let store = memory_store();
    let mut harness = start_unopened(
        config("s"),
        policy(PER_PRINCIPAL),
        Arc::clone(&store),
        &["read"],
        Behaviour::Succeed,
        true,
    );
    let listen = harness
        .client
        .modern("tools/list", json!({}), json!({}))
        .await;
    assert_eq!(
        listen["result"]["tools"].as_array().map(Vec::len),
        Some(1),
        "{listen}"
    );
    // The upstream announces a tool the policy never heard of, and one it may approve.
    harness.fake.add_tool("drop_table");
    harness.fake.add_tool("ops_only");
    let listed = harness
        .client
        .modern("tools/list", json!({}), json!({}))
        .await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(names, ["read", "ops_only"], "{listed}");
    // Called anyway, the hidden one is denied and never reaches the upstream.
    let called = harness
        .client
        .modern(
            "tools/call",
            json!({"name": "drop_table", "arguments": {}}),
            json!({}),
        )
        .await;
    assert_eq!(
        refusal(&called),
        (-32094, "unknown_action".to_owned()),
        "{called}"
    );
    assert_eq!(harness.fake.calls(), 0);
}

/// Tools under a pattern `allow`, one exact `allow`, and none for `ghost`.
const ANNOTATED: &str = "schema: countersign.policy/v1
actions:
  \"mcp.s.t_*\":
    decision: allow
  mcp.s.exact:
    decision: allow
";

fn receipts_of(bodies: &[Value], action: &str) -> Vec<Value> {
    bodies
        .iter()
        .filter(|body| body["action"] == action && body["kind"] == "attempt")
        .cloned()
        .collect()
}

async fn bodies(store: &Arc<dyn Store>) -> Vec<Value> {
    store
        .receipts(0, 1000)
        .await
        .expect("receipts")
        .iter()
        .map(|stored| serde_json::from_str(&stored.body).expect("a receipt body"))
        .collect()
}

#[tokio::test]
async fn annotations_never_loosen_and_raise_only_a_pattern_allow() {
    let store = memory_store();
    let mut harness = start(
        config("s"),
        policy(ANNOTATED),
        Arc::clone(&store),
        &["t_wipe", "t_peek", "t_tidy", "exact", "ghost"],
        Behaviour::Succeed,
    )
    .await;
    harness
        .fake
        .annotate("t_peek", json!({"readOnlyHint": true}));
    harness.fake.annotate(
        "t_tidy",
        json!({"readOnlyHint": false, "destructiveHint": false}),
    );
    harness
        .fake
        .annotate("exact", json!({"destructiveHint": true}));
    harness.fake.annotate(
        "ghost",
        json!({"readOnlyHint": true, "destructiveHint": false}),
    );
    // No entry: hidden, whatever it declares, and denied when called.
    assert_eq!(
        harness.client.tool_names().await,
        ["t_wipe", "t_peek", "t_tidy", "exact"]
    );
    let ghost = harness.client.call("ghost", json!({})).await;
    assert_eq!(
        refusal(&ghost),
        (-32094, "unknown_action".to_owned()),
        "{ghost}"
    );

    // A pattern allow of a tool that says it is harmless runs as the policy says.
    for tool in ["t_peek", "t_tidy"] {
        let ran = harness.client.call(tool, json!({})).await;
        assert_eq!(
            ran["result"]["_meta"]["countersign"]["outcome"], "committed",
            "{ran}"
        );
    }
    // An exact allow is never changed, even with destructiveHint: true.
    let exact = harness.client.call("exact", json!({})).await;
    assert_eq!(
        exact["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{exact}"
    );
    assert_eq!(harness.fake.calls(), 3);

    // A pattern allow of a tool without annotations (destructiveHint absent) needs approval.
    let wipe = harness.client.call("t_wipe", json!({"all": true})).await;
    assert_eq!(
        refusal(&wipe),
        (-32090, "approval_required".to_owned()),
        "{wipe}"
    );
    assert_eq!(harness.fake.calls(), 3, "nothing ran before approval");
    let pending = store
        .approvals(Some(ApprovalState::Pending))
        .await
        .expect("approvals");
    assert_eq!(pending.len(), 1);
    countersign::control::record_answer(
        store.as_ref(),
        &pending[0].id,
        AnswerDecision::Approve,
        "human:alice",
        None,
        countersign::Clock::now(&SystemClock),
    )
    .await
    .expect("approved");
    let wiped = harness.client.call("t_wipe", json!({"all": true})).await;
    assert_eq!(
        wiped["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{wiped}"
    );
    assert_eq!(harness.fake.calls(), 4);

    let bodies = bodies(&store).await;
    let raised = receipts_of(&bodies, "mcp.s.t_wipe");
    assert_eq!(raised.len(), 1, "{bodies:?}");
    assert_eq!(raised[0]["raised_by"], "destructiveHint");
    assert_eq!(raised[0]["decision"], "approve");
    assert_eq!(raised[0]["schema"], "countersign.receipt/v2");
    for action in ["mcp.s.t_peek", "mcp.s.t_tidy", "mcp.s.exact"] {
        let receipts = receipts_of(&bodies, action);
        assert_eq!(receipts.len(), 1, "{action}");
        assert_eq!(receipts[0].get("raised_by"), None, "{action}");
        assert_eq!(receipts[0]["decision"], "allow", "{action}");
    }
}

/// A gateway whose one tool, `write`, needs approval, listed by the client and called once:
/// the store, the harness and the `approval_required` refusal of that call.
async fn writing_asked() -> (Arc<dyn Store>, super::harness::Harness, Value) {
    let store = memory_store();
    let mut harness = start(
        config("s"),
        policy("schema: countersign.policy/v1\nactions:\n  mcp.s.write:\n    decision: approve\n"),
        Arc::clone(&store),
        &["write"],
        Behaviour::Succeed,
    )
    .await;
    assert_eq!(harness.client.tool_names().await, ["write"]);
    let first = harness.client.call("write", json!({"path": "a"})).await;
    assert_eq!(
        refusal(&first),
        (-32090, "approval_required".to_owned()),
        "{first}"
    );
    (store, harness, first)
}

#[tokio::test]
async fn a_changed_input_schema_voids_the_open_request_and_asks_again() {
    let (store, mut harness, first) = writing_asked().await;
    let old_id = first["error"]["data"]["request_id"]
        .as_str()
        .expect("request id")
        .to_owned();
    let old_hash = first["error"]["data"]["action_hash"].clone();

    // The tool's schema changes; the client lists again, as the notification asks it to.
    harness.fake.change_schema(
        "write",
        json!({"type": "object", "properties": {"path": {"type": "string"}, "mode": {"type": "string"}}}),
    );
    loop {
        let message = harness.client.next().await;
        if message["method"] == "notifications/tools/list_changed" {
            break;
        }
    }
    assert_eq!(harness.client.tool_names().await, ["write"]);
    let old = countersign::ApprovalId::parse(&old_id).expect("an id");
    let mut state = ApprovalState::Pending;
    for _ in 0..100 {
        state = store
            .approval(&old)
            .await
            .expect("read")
            .expect("record")
            .state;
        if state != ApprovalState::Pending {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(state, ApprovalState::Void);
    let bodies = bodies(&store).await;
    let voided: Vec<&Value> = bodies
        .iter()
        .filter(|body| body["kind"] == "approval_voided")
        .collect();
    assert_eq!(voided.len(), 1, "{bodies:?}");
    assert_eq!(voided[0]["reason"], "tool_changed");
    assert_eq!(voided[0]["approval_id"], old_id.as_str());

    // An approver answering the old request changes nothing; the same call is a new action.
    let late = countersign::control::record_answer(
        store.as_ref(),
        &old,
        AnswerDecision::Approve,
        "human:alice",
        None,
        countersign::Clock::now(&SystemClock),
    )
    .await;
    assert!(late.is_err(), "{late:?}");
    let again = harness.client.call("write", json!({"path": "a"})).await;
    assert_eq!(
        refusal(&again),
        (-32090, "approval_required".to_owned()),
        "{again}"
    );
    assert_ne!(again["error"]["data"]["request_id"], json!(old_id));
    assert_ne!(again["error"]["data"]["action_hash"], old_hash);
    assert_eq!(harness.fake.calls(), 0);
}

/// A grant for a tool's old schema authorizes nothing once the upstream says its tools
/// changed, even when the client never lists them again: the gateway lists them itself before
/// the next call, voids the grant, and asks again (found by a first-time user: the old grant
/// ran the changed tool).
#[tokio::test]
async fn a_grant_for_the_old_schema_runs_nothing_when_the_client_does_not_list_again() {
    let (store, mut harness, first) = writing_asked().await;
    let old_id = first["error"]["data"]["request_id"]
        .as_str()
        .expect("request id")
        .to_owned();
    let old = countersign::ApprovalId::parse(&old_id).expect("an id");
    countersign::control::record_answer(
        store.as_ref(),
        &old,
        AnswerDecision::Approve,
        "human:alice",
        None,
        countersign::Clock::now(&SystemClock),
    )
    .await
    .expect("granted");
    harness.fake.change_schema(
        "write",
        json!({"type": "object", "properties": {"path": {"type": "string"}, "mode": {"type": "string", "default": "overwrite-everything"}}}),
    );
    loop {
        let message = harness.client.next().await;
        if message["method"] == "notifications/tools/list_changed" {
            break;
        }
    }
    // No `tools/list` from the client: the same call again.
    let again = harness.client.call("write", json!({"path": "a"})).await;
    assert_eq!(
        refusal(&again),
        (-32090, "approval_required".to_owned()),
        "{again}"
    );
    assert_ne!(again["error"]["data"]["request_id"], json!(old_id));
    assert_eq!(harness.fake.calls(), 0, "the changed tool did not run");
    let state = store
        .approval(&old)
        .await
        .expect("read")
        .expect("record")
        .state;
    assert_ne!(state, ApprovalState::Consumed, "the old grant was not used");
}

/// A call to a tool the session has not seen listed waits for the gateway's own `tools/list`
/// no longer than `--call-timeout`, and an unanswered list is cancelled upstream; the call is
/// then decided without the tool's schema. (The list used to be waited for a fixed 10 s, and
/// left running upstream.)
#[tokio::test]
async fn a_list_the_upstream_never_answers_is_bounded_by_the_call_timeout_and_cancelled() {
    const ALLOW: &str =
        "schema: countersign.policy/v1\nactions:\n  mcp.s.ghost:\n    decision: allow\n";
    let mut config = config("s");
    config.call_timeout = Duration::from_millis(500);
    let mut harness = start(
        config,
        policy(ALLOW),
        memory_store(),
        &["ghost"],
        Behaviour::Succeed,
    )
    .await;
    harness
        .fake
        .list_hangs
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let started = std::time::Instant::now();
    let reply = harness.client.call("ghost", json!({})).await;
    let waited = started.elapsed();
    assert_eq!(
        reply["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{reply}"
    );
    assert!(
        waited < Duration::from_secs(5),
        "the call waited {waited:?} for the list, more than its call timeout allows"
    );
    // The fake reads the cancellation on its own task.
    let cancelled = harness.fake.cancellations().await;
    let seen = harness.fake.seen.lock().expect("seen");
    let list = seen
        .requests
        .iter()
        .position(|method| method == "tools/list")
        .expect("the gateway asked for the list");
    assert_eq!(
        seen.requests[list + 1..],
        ["tools/call"],
        "{:?}",
        seen.requests
    );
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
}
