//! Across processes: the agent (the kernel, in this test process) asks; the operator answers
//! with the `countersign` binary; the agent's next call sees the answer.

use countersign::ControlError;

use crate::support::Sandbox;

#[tokio::test]
async fn an_approval_granted_on_the_command_line_authorizes_one_call() {
    let sandbox = Sandbox::new();
    let agent = sandbox.agent();
    let id = agent.request_approval("pi_5001", 75_000).await;
    assert_eq!(agent.refunds(), 0);

    let pending = sandbox.run(&["pending", "--json"]);
    assert_eq!(pending.status, Some(0), "{pending:?}");
    let waiting: serde_json::Value = serde_json::from_str(&pending.stdout).expect("JSON");
    let waiting = waiting.as_array().expect("a list");
    assert_eq!(waiting.len(), 1, "{pending:?}");
    assert_eq!(waiting[0]["id"], id.as_str());
    assert_eq!(waiting[0]["state"], "pending");
    assert_eq!(waiting[0]["action"], "stripe.refund");
    assert_eq!(waiting[0]["principal"], "agent:support-bot");

    let approve = sandbox.run(&["approve", id.as_str(), "--as", "human:alice"]);
    assert_eq!(approve.status, Some(0), "{approve:?}");
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("approve_text", approve.transcript()));

    let done = agent.refund("pi_5001", 75_000, Some(&id)).await;
    assert_eq!(done.expect("the granted call runs"), "refunded \"pi_5001\"");
    assert_eq!(agent.refunds(), 1);

    // The approval was used: presenting it again authorizes nothing, and the effect is done.
    let again = agent.refund("pi_5001", 75_000, Some(&id)).await;
    assert!(
        matches!(
            again,
            Err(ControlError::ApprovalConsumed { .. } | ControlError::DuplicateEffect { .. })
        ),
        "{again:?}"
    );
    assert_eq!(agent.refunds(), 1);

    let after = sandbox.run(&["pending"]);
    assert_eq!(after.stdout, "no approval requests are waiting\n");
    let inspect = sandbox.run(&["inspect", id.as_str(), "--json"]);
    let record: serde_json::Value = serde_json::from_str(&inspect.stdout).expect("JSON");
    assert_eq!(record["approval"]["state"], "consumed");
    assert_eq!(record["approval"]["approver"], "human:alice");
}

#[tokio::test]
async fn an_approval_denied_on_the_command_line_reaches_the_agent_as_a_denial() {
    let sandbox = Sandbox::new();
    let agent = sandbox.agent();
    let id = agent.request_approval("pi_5002", 80_000).await;

    let deny = sandbox.run(&[
        "deny",
        id.as_str(),
        "--as",
        "human:bob",
        "--note",
        "customer already refunded by hand",
    ]);
    assert_eq!(deny.status, Some(0), "{deny:?}");
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("deny_text", deny.transcript()));

    let refused = agent.refund("pi_5002", 80_000, Some(&id)).await;
    match refused {
        Err(ControlError::ApprovalDenied {
            request_id,
            approver,
            note,
        }) => {
            assert_eq!(request_id, id);
            assert_eq!(approver, "human:bob");
            assert_eq!(note.as_deref(), Some("customer already refunded by hand"));
        }
        other => panic!("expected a recorded denial, got {other:?}"),
    }
    assert_eq!(agent.refunds(), 0);
}

#[tokio::test]
async fn answers_print_json_when_asked() {
    let sandbox = Sandbox::new();
    let agent = sandbox.agent();
    let id = agent.request_approval("pi_5003", 90_000).await;
    let run = sandbox.run(&["approve", id.as_str(), "--as", "human:alice", "--json"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let record: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(record["id"], id.as_str());
    assert_eq!(record["state"], "granted");
    assert_eq!(record["approver"], "human:alice");
}

#[tokio::test]
async fn an_ambiguous_effect_resolved_as_failed_may_run_again() {
    let sandbox = Sandbox::new();
    let agent = sandbox.agent();
    let lost = agent.refund_losing_the_reply("pi_5004", 100).await;
    assert_eq!(lost.reason(), "outcome_unknown");
    let blind_retry = agent.refund("pi_5004", 100, None).await;
    assert!(
        matches!(blind_retry, Err(ControlError::AmbiguousEffect { .. })),
        "{blind_retry:?}"
    );

    let resolve = sandbox.run(&[
        "resolve",
        "refund:pi_5004",
        "--failed",
        "--as",
        "human:ops",
        "--note",
        "the provider has no such refund",
    ]);
    assert_eq!(resolve.status, Some(0), "{resolve:?}");
    assert_eq!(
        resolve.stdout,
        "resolved refund:pi_5004 as failed\na new attempt on this key may run\n"
    );

    let retry = agent.refund("pi_5004", 100, None).await;
    assert_eq!(retry.expect("the retry runs"), "refunded \"pi_5004\"");
    assert_eq!(agent.refunds(), 2);
}
