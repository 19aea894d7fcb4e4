//! Who may approve, from the command line: a policy whose approvals need finance people (two of
//! them for larger refunds, a verified token for the largest), answered with `--as` and with
//! tokens from `countersign keygen` and `countersign approver token`. Every refusal is one line,
//! exit 1, and leaves the request as it was.

use crate::support::Sandbox;

/// The sandbox policy with approver rules; `KEY` is replaced by the approver key file.
const POLICY: &str = "\
schema: countersign.policy/v1
environment: test
directory:
  human:alice: [finance]
  human:bob: [finance]
  agent:support-bot: [support]
approvers:
  keys: [approvers.pub]
actions:
  stripe.refund:
    effect: \"refund:{payment_id}\"
    rules:
      - when: { amount: { lte: 50000 } }
        decision: allow
      - when: { amount: { lte: 500000 } }
        decision: approve
        approval: { approvers: [\"group:finance\"], quorum: 2 }
      - decision: approve
        approval: { approvers: [\"group:finance\"], require: authenticated }
";

fn sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    let made = sandbox.run(&["keygen", "--out", "approvers"]);
    assert_eq!(made.status, Some(0), "{made:?}");
    sandbox.write("countersign.yaml", POLICY);
    sandbox
}

fn state_of(sandbox: &Sandbox, id: &str) -> serde_json::Value {
    let inspected = sandbox.run(&["inspect", id, "--json"]);
    assert_eq!(inspected.status, Some(0), "{inspected:?}");
    let value: serde_json::Value = serde_json::from_str(&inspected.stdout).expect("JSON");
    value["approval"].clone()
}

#[tokio::test]
async fn a_quorum_request_counts_distinct_finance_approvers() {
    let sandbox = sandbox();
    let agent = sandbox.agent();
    let id = agent.request_approval("pi_q1", 200_000).await;
    let id = id.as_str();

    let pending = sandbox.run(&["pending"]);
    assert!(
        pending.stdout.contains("pending, 0 of 2 approvals"),
        "{pending:?}"
    );
    assert!(
        pending.stdout.contains("group:finance (2 of them)"),
        "{pending:?}"
    );

    let outsider = sandbox.run(&["approve", id, "--as", "human:mallory"]);
    assert_eq!(outsider.status, Some(1));
    assert_eq!(
        outsider.one_line_error(),
        format!(
            "`human:mallory` may not answer approval `{id}`: that is for group:finance (2 of them); ask one of them"
        )
    );
    let own = sandbox.run(&["approve", id, "--as", "agent:support-bot"]);
    assert_eq!(own.status, Some(1));
    assert!(
        own.one_line_error()
            .contains("it is the principal that asked"),
        "{own:?}"
    );

    let first = sandbox.run(&["approve", id, "--as", "human:alice"]);
    assert_eq!(first.status, Some(0), "{first:?}");
    sandbox.settings().bind(|| {
        insta::assert_snapshot!("approve_counted_one_of_two", first.transcript());
    });
    let approval = state_of(&sandbox, id);
    assert_eq!(approval["state"], "pending");
    assert_eq!(approval["answers"].as_array().map(Vec::len), Some(1));
    // The same answer again succeeds, writes nothing, and says so.
    let repeat = sandbox.run(&["approve", id, "--as", "human:alice"]);
    assert_eq!(repeat.status, Some(0), "{repeat:?}");
    assert!(
        repeat.stdout.starts_with(&format!(
            "you had already approved {id}: nothing changed (it is `pending`, 1 of 2 approvals)"
        )),
        "{repeat:?}"
    );
    assert_eq!(state_of(&sandbox, id)["answers"], approval["answers"]);
    // `--mine` for alice no longer lists what she answered; bob still has it.
    let alice = sandbox.run(&["pending", "--mine", "--as", "human:alice"]);
    assert!(!alice.stdout.contains(id), "{alice:?}");
    let bob = sandbox.run(&["pending", "--mine", "--as", "human:bob"]);
    assert!(bob.stdout.contains(id), "{bob:?}");
    assert_eq!(
        agent
            .refund("pi_q1", 200_000, None)
            .await
            .unwrap_err()
            .reason(),
        "approval_required"
    );

    let second = sandbox.run(&["approve", id, "--as", "human:bob", "--note", "checked"]);
    assert_eq!(second.status, Some(0), "{second:?}");
    assert!(second.stdout.starts_with("approved "), "{second:?}");
    agent
        .refund("pi_q1", 200_000, None)
        .await
        .expect("the refund runs once granted");
    assert_eq!(agent.refunds(), 1);
}

#[tokio::test]
async fn an_authenticated_rule_takes_a_token_and_refuses_a_name() {
    let sandbox = sandbox();
    let agent = sandbox.agent();
    let id = agent.request_approval("pi_t1", 900_000).await;
    let id = id.as_str();

    let listed = sandbox.run(&["pending"]);
    assert!(
        listed.stdout.contains("add `--token-file FILE`"),
        "{listed:?}"
    );
    let asserted = sandbox.run(&["approve", id, "--as", "human:alice"]);
    assert_eq!(asserted.status, Some(1));
    assert!(
        asserted
            .one_line_error()
            .starts_with(&format!("approval `{id}` needs an authenticated approver")),
        "{asserted:?}"
    );
    assert_eq!(state_of(&sandbox, id)["state"], "pending");

    let issued = sandbox.run(&[
        "approver",
        "token",
        "--key",
        "approvers",
        "--subject",
        "human:dora",
        "--groups",
        "finance",
        "--ttl",
        "10m",
    ]);
    assert_eq!(issued.status, Some(0), "{issued:?}");
    sandbox.write("dora.token", issued.stdout.trim());
    // A token file that holds something else is refused without recording anything.
    sandbox.write("junk.token", "not-a-token");
    let junk = sandbox.run(&["approve", id, "--token-file", "junk.token"]);
    assert_eq!(junk.status, Some(1));
    assert!(
        junk.one_line_error().starts_with(&format!(
            "the approver token given for approval `{id}` was refused: "
        )),
        "{junk:?}"
    );
    assert!(
        !junk.stderr.contains("not-a-token"),
        "a token was echoed: {junk:?}"
    );

    let hash = state_of(&sandbox, id)["action_hash"]
        .as_str()
        .expect("hash")
        .to_owned();
    let answered = sandbox.run(&["approve", id, "--token-file", "dora.token", "--hash", &hash]);
    assert_eq!(answered.status, Some(0), "{answered:?}");
    let approval = state_of(&sandbox, id);
    assert_eq!(approval["state"], "granted");
    assert_eq!(approval["answers"][0]["approver"]["id"], "human:dora");
    assert_eq!(
        approval["answers"][0]["approver"]["authentication"],
        "token"
    );
    assert_eq!(approval["answers"][0]["approver"]["channel"], "cli");
    assert_eq!(approval["answers"][0]["hash_confirmed"], true);
    agent
        .refund("pi_t1", 900_000, None)
        .await
        .expect("the refund runs");
}

#[test]
fn a_wrong_hash_is_refused_before_anything_is_recorded() {
    let sandbox = sandbox();
    let run = sandbox.run(&[
        "approve",
        "apr_aaaaaaaaaaaaaaaaaaaa",
        "--hash",
        "sha256:nope",
    ]);
    assert_eq!(run.status, Some(1));
    assert!(
        run.one_line_error()
            .starts_with("`sha256:nope` is not an action hash"),
        "{run:?}"
    );
}

#[test]
fn policy_check_warns_about_approval_rules_nobody_can_satisfy() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "countersign.yaml",
        "schema: countersign.policy/v1
directory:
  human:alice: [finance]
actions:
  refund:
    decision: approve
    approval: { approvers: [\"group:finanse\"], require: authenticated }
",
    );
    let run = sandbox.run(&["policy", "check", "--policy", "countersign.yaml"]);
    assert_eq!(
        run.status,
        Some(0),
        "warnings do not fail the check: {run:?}"
    );
    let warnings: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.starts_with("warning: "))
        .collect();
    // `require: authenticated` with no key: only the approval service's sign-in can answer,
    // which is said, not "nobody can answer" beside it.
    assert_eq!(warnings.len(), 2, "{run:?}");
    assert!(warnings[0].contains("lists no key"), "{warnings:?}");
    assert!(warnings[1].contains("group `finanse`"), "{warnings:?}");
}
