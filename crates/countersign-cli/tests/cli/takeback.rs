//! Taking it back from the command line (issue #31): `countersign revoke` and `countersign
//! cancel` (one request, or a run), with their refusals. Each refusal is one line, exit 1, and
//! changes nothing.

use crate::support::Sandbox;

fn state_of(sandbox: &Sandbox, id: &str) -> String {
    let inspected = sandbox.run(&["inspect", id, "--json"]);
    assert_eq!(inspected.status, Some(0), "{inspected:?}");
    let value: serde_json::Value = serde_json::from_str(&inspected.stdout).expect("JSON");
    value["approval"]["state"]
        .as_str()
        .expect("a state")
        .to_owned()
}

#[tokio::test]
async fn revoke_takes_back_an_unused_grant_and_the_agent_is_refused() {
    let sandbox = Sandbox::new();
    let agent = sandbox.agent();
    let id = agent.request_approval("pi_r1", 200_000).await;
    let approved = sandbox.run(&["approve", id.as_str(), "--as", "human:alice"]);
    assert_eq!(approved.status, Some(0), "{approved:?}");

    let revoked = sandbox.run(&[
        "revoke",
        id.as_str(),
        "--as",
        "human:alice",
        "--reason",
        "wrong payment",
    ]);
    assert_eq!(revoked.status, Some(0), "{revoked:?}");
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("revoke_text", revoked.transcript()));
    assert_eq!(state_of(&sandbox, id.as_str()), "revoked");
    let refused = agent
        .refund("pi_r1", 200_000, Some(&id))
        .await
        .expect_err("revoked");
    assert_eq!(refused.reason(), "revoked");
    assert_eq!(agent.refunds(), 0);

    let again = sandbox.run(&["revoke", id.as_str(), "--as", "human:alice"]);
    assert_eq!(again.status, Some(1));
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("revoke_refused_revoked", again.transcript()));
    let verified = sandbox.run(&["verify"]);
    assert_eq!(verified.status, Some(0), "{verified:?}");
}

#[tokio::test]
async fn revoke_refuses_a_used_grant_and_changes_nothing() {
    let sandbox = Sandbox::new();
    let agent = sandbox.agent();
    let id = agent.request_approval("pi_r2", 200_000).await;
    assert_eq!(
        sandbox
            .run(&["approve", id.as_str(), "--as", "human:alice"])
            .status,
        Some(0)
    );
    agent
        .refund("pi_r2", 200_000, Some(&id))
        .await
        .expect("runs");
    let refused = sandbox.run(&["revoke", id.as_str(), "--as", "human:alice"]);
    assert_eq!(refused.status, Some(1));
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("revoke_refused_consumed", refused.transcript()));
    assert_eq!(state_of(&sandbox, id.as_str()), "consumed");
    assert_eq!(agent.refunds(), 1);
}

#[tokio::test]
async fn cancel_clears_a_request_and_a_late_answer_is_refused() {
    let sandbox = Sandbox::new();
    let agent = sandbox.agent();
    let id = agent.request_approval("pi_c1", 200_000).await;
    let cancelled = sandbox.run(&[
        "cancel",
        id.as_str(),
        "--reason",
        "run abandoned",
        "--as",
        "ops:dana",
    ]);
    assert_eq!(cancelled.status, Some(0), "{cancelled:?}");
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("cancel_text", cancelled.transcript()));
    let pending = sandbox.run(&["pending"]);
    assert!(!pending.stdout.contains(id.as_str()), "{pending:?}");
    let late = sandbox.run(&["approve", id.as_str(), "--as", "human:alice"]);
    assert_eq!(late.status, Some(1));
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("approve_refused_cancelled", late.transcript()));
    assert_eq!(state_of(&sandbox, id.as_str()), "cancelled");

    let no_reason = sandbox.run(&["cancel", id.as_str()]);
    assert_eq!(no_reason.status, Some(2), "clap refuses: {no_reason:?}");
    assert!(no_reason.stderr.contains("--reason"), "{no_reason:?}");
}

#[tokio::test]
async fn cancel_run_clears_only_that_runs_requests() {
    let sandbox = Sandbox::new();
    let agent = sandbox.agent();
    let first = agent
        .request_approval_in_run("pi_a", 200_000, "run-7")
        .await;
    let second = agent
        .request_approval_in_run("pi_b", 300_000, "run-7")
        .await;
    let other = agent
        .request_approval_in_run("pi_c", 400_000, "run-8")
        .await;
    let cancelled = sandbox.run(&[
        "cancel",
        "--run",
        "run-7",
        "--reason",
        "abandoned",
        "--as",
        "ops:dana",
    ]);
    assert_eq!(cancelled.status, Some(0), "{cancelled:?}");
    // Requests made in the same millisecond list in id order: sort the lines for the snapshot.
    let mut lines: Vec<&str> = cancelled.stdout.lines().collect();
    // (by what follows the random id)
    lines.sort_by_key(|line| line.split_once(": ").map_or(*line, |(_, rest)| rest));
    let shown = format!(
        "$ countersign cancel --run run-7 --reason abandoned --as ops:dana\nstatus: 0\n{}",
        lines.join("\n")
    );
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("cancel_run_text", shown));
    assert_eq!(state_of(&sandbox, first.as_str()), "cancelled");
    assert_eq!(state_of(&sandbox, second.as_str()), "cancelled");
    assert_eq!(state_of(&sandbox, other.as_str()), "pending");
    let json = sandbox.run(&["--json", "cancel", "--run", "run-7", "--reason", "again"]);
    assert_eq!(json.status, Some(0), "{json:?}");
    let value: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(value["cancelled"].as_array().map(Vec::len), Some(0));
    let verified = sandbox.run(&["verify"]);
    assert_eq!(verified.status, Some(0), "{verified:?}");
}

/// An approval nobody configured can answer is reported by `verify`, with the entry's line.
#[test]
fn verify_says_when_nobody_can_answer_an_approval() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "countersign.yaml",
        "schema: countersign.policy/v1
environment: test
directory:
  human:alice: [support]
actions:
  stripe.refund:
    decision: approve
    approval: { approvers: [\"group:finance\"] }
",
    );
    let verified = sandbox.run(&["verify"]);
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("verify_nobody_can_answer", verified.transcript()));
    assert!(
        verified
            .stdout
            .contains("warning: line 6: `stripe.refund`: nobody can answer"),
        "{verified:?}"
    );
}

/// `countersign approver revoke JTI`: a revoked token is refused `not_authenticated` before it
/// expires, and the refusal is recorded; a fresh token still answers.
#[tokio::test]
async fn a_revoked_approver_token_is_refused() {
    let sandbox = Sandbox::new();
    assert_eq!(
        sandbox.run(&["keygen", "--out", "approvers"]).status,
        Some(0)
    );
    sandbox.write(
        "countersign.yaml",
        "schema: countersign.policy/v1
environment: test
directory:
  human:alice: [finance]
approvers:
  keys: [approvers.pub]
actions:
  stripe.refund:
    effect: \"refund:{payment_id}\"
    decision: approve
    approval: { approvers: [\"group:finance\"], require: authenticated }
",
    );
    let agent = sandbox.agent();
    let id = agent.request_approval("pi_tok", 200_000).await;
    let issue = || {
        let issued = sandbox.run(&[
            "--json",
            "approver",
            "token",
            "--key",
            "approvers",
            "--subject",
            "human:alice",
            "--groups",
            "finance",
            "--ttl",
            "1h",
        ]);
        assert_eq!(issued.status, Some(0), "{issued:?}");
        let value: serde_json::Value = serde_json::from_str(&issued.stdout).expect("JSON");
        (
            value["token"].as_str().expect("token").to_owned(),
            value["jti"].as_str().expect("a jti").to_owned(),
        )
    };
    let (leaked, jti) = issue();
    sandbox.write("leaked.token", &leaked);
    let revoked = sandbox.run(&[
        "approver",
        "revoke",
        &jti,
        "--reason",
        "leaked in a chat",
        "--as",
        "ops:dana",
    ]);
    assert_eq!(revoked.status, Some(0), "{revoked:?}");
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("approver_revoke_text", revoked.transcript()));
    // Revoking it again, by the whole token this time, changes nothing.
    let again = sandbox.run(&["approver", "revoke", &leaked]);
    assert_eq!(again.status, Some(0), "{again:?}");
    assert!(again.stdout.contains("already revoked"), "{again:?}");
    assert!(!again.stdout.contains(&leaked), "a token was echoed");

    let refused = sandbox.run(&["approve", id.as_str(), "--token-file", "leaked.token"]);
    assert_eq!(refused.status, Some(1));
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("approve_refused_revoked_token", refused.transcript()));
    let receipts = sandbox.receipts_json();
    let last = receipts.last().expect("a refusal receipt");
    assert_eq!(last["outcome"], "refused");
    assert_eq!(last["reason"], "not_authenticated");
    assert_eq!(state_of(&sandbox, id.as_str()), "pending");

    let bad = sandbox.run(&["approver", "revoke", "not-an-id"]);
    assert_eq!(bad.status, Some(1));
    assert!(
        bad.one_line_error().contains("is not a token id"),
        "{bad:?}"
    );

    let (fresh, _) = issue();
    sandbox.write("fresh.token", &fresh);
    let granted = sandbox.run(&["approve", id.as_str(), "--token-file", "fresh.token"]);
    assert_eq!(granted.status, Some(0), "{granted:?}");
    assert_eq!(state_of(&sandbox, id.as_str()), "granted");
}
