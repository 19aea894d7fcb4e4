//! `countersign check`, Claude Code's `PreToolUse` hook: allow, deny, approve then granted, a
//! replayed grant, and malformed input (a blocking error, exit status 2, nothing written).

use serde_json::Value;

use crate::support::{Run, Sandbox, StoreFiles};

fn check(sandbox: &Sandbox, tool: &str, input: &str) -> Run {
    let stdin = format!(
        "{{\"session_id\":\"s1\",\"hook_event_name\":\"PreToolUse\",\"tool_name\":\"{tool}\",\"tool_input\":{input},\"tool_use_id\":\"toolu_1\"}}"
    );
    sandbox.run_with_stdin(&["check", "--policy", "agent.yaml"], &stdin)
}

/// The hook's answer: exit status 0 and `hookSpecificOutput` with a decision and a reason.
fn decision(run: &Run) -> (String, String) {
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    let output: Value = serde_json::from_str(&run.stdout).expect("the answer is JSON");
    let specific = &output["hookSpecificOutput"];
    assert_eq!(specific["hookEventName"], "PreToolUse", "{output}");
    (
        specific["permissionDecision"]
            .as_str()
            .expect("a decision")
            .to_owned(),
        specific["permissionDecisionReason"]
            .as_str()
            .expect("a reason")
            .to_owned(),
    )
}

#[test]
fn allows_what_the_policy_allows_and_records_it_handed_off() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let run = check(&sandbox, "Read", r#"{"file_path":"/src/main.rs"}"#);
    let (answer, reason) = decision(&run);
    assert_eq!(answer, "allow", "{reason}");
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("check_allow", run.transcript()));
    let receipts = sandbox.receipts_json();
    assert_eq!(receipts.len(), 1);
    assert_eq!(receipts[0]["outcome"], "handed_off");
    assert_eq!(receipts[0]["action"], "Read");
    assert_eq!(receipts[0]["principal"], "agent:claude-code");
    assert_eq!(receipts[0]["arguments"]["file_path"], "/src/main.rs");
}

#[test]
fn denies_what_the_policy_denies_with_the_reason() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let run = check(&sandbox, "Bash", r#"{"command":"rm -rf /"}"#);
    let (answer, reason) = decision(&run);
    assert_eq!(answer, "deny");
    assert!(reason.contains("denied by the policy"), "{reason}");
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("check_deny", run.transcript()));
    // An unknown tool is denied too.
    let (answer, reason) = decision(&check(&sandbox, "WebFetch", r#"{"url":"https://x"}"#));
    assert_eq!(answer, "deny");
    assert!(reason.contains("unknown_action"), "{reason}");
    let receipts = sandbox.receipts_json();
    assert_eq!(receipts.len(), 2);
    assert!(
        receipts
            .iter()
            .all(|receipt| receipt["outcome"] == "refused")
    );
}

#[test]
fn an_approve_opens_a_request_and_the_identical_call_runs_once_after_the_grant() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let input = r#"{"command":"cargo publish"}"#;
    let first = check(&sandbox, "Bash", input);
    let (answer, reason) = decision(&first);
    assert_eq!(answer, "deny");
    let id = reason
        .split_whitespace()
        .find(|word| word.starts_with("apr_"))
        .expect("the reason names the request")
        .trim_end_matches(['.', ','])
        .to_owned();
    assert!(
        reason.contains(&format!("countersign approve {id}")),
        "{reason}"
    );
    assert!(
        sandbox.receipts_json().is_empty(),
        "a waiting request writes no receipt"
    );
    // Asking again before an answer names the same request.
    let (_, again) = decision(&check(&sandbox, "Bash", input));
    assert!(again.contains(&id), "{again}");

    let approved = sandbox.run(&["approve", &id, "--policy", "agent.yaml"]);
    assert_eq!(approved.status, Some(0), "{approved:?}");
    // Other arguments are not what was granted.
    let (answer, other) = decision(&check(
        &sandbox,
        "Bash",
        r#"{"command":"cargo publish --force"}"#,
    ));
    assert_eq!(answer, "deny");
    assert!(!other.contains(&id), "{other}");

    let granted = check(&sandbox, "Bash", input);
    let (answer, reason) = decision(&granted);
    assert_eq!(answer, "allow", "{reason}");
    assert!(
        reason.contains(&id) && reason.contains("human:tester"),
        "{reason}"
    );
    let transcripts = format!("{}\n{}", first.transcript(), granted.transcript());
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("check_approve_then_granted", transcripts));
    let receipts = sandbox.receipts_json();
    let handed = receipts.last().expect("a receipt");
    assert_eq!(handed["outcome"], "handed_off");
    assert_eq!(handed["approval_id"], id.as_str());
    assert_eq!(handed["approvers"][0]["id"], "human:tester");
    let inspect = sandbox.run(&["inspect", &id, "--json", "--policy", "agent.yaml"]);
    let inspected: Value = serde_json::from_str(&inspect.stdout).expect("inspect --json");
    assert_eq!(inspected["approval"]["state"], "consumed");
    let verify = sandbox.run(&["verify", "--policy", "agent.yaml"]);
    assert_eq!(verify.status, Some(0), "{verify:?}");
}

#[test]
fn a_replayed_grant_authorizes_nothing() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let input = r#"{"title":"release 1.0"}"#;
    let (_, reason) = decision(&check(&sandbox, "mcp__github__create_issue", input));
    let id = reason
        .split_whitespace()
        .find(|word| word.starts_with("apr_"))
        .expect("a request")
        .trim_end_matches(['.', ','])
        .to_owned();
    let approved = sandbox.run(&["approve", &id, "--policy", "agent.yaml"]);
    assert_eq!(approved.status, Some(0), "{approved:?}");
    let (answer, _) = decision(&check(&sandbox, "mcp__github__create_issue", input));
    assert_eq!(answer, "allow");
    // The same call again: the grant is spent, so a new request is opened and the call denied.
    let replayed = check(&sandbox, "mcp__github__create_issue", input);
    let (answer, reason) = decision(&replayed);
    assert_eq!(answer, "deny", "{reason}");
    assert!(
        !reason.contains(&id),
        "a consumed grant is never reused: {reason}"
    );
    assert!(reason.contains("apr_"), "{reason}");
    let handed_off = sandbox
        .receipts_json()
        .iter()
        .filter(|receipt| receipt["outcome"] == "handed_off")
        .count();
    assert_eq!(handed_off, 1, "one grant, one hand-off");
}

#[test]
fn malformed_input_is_a_blocking_error_and_writes_nothing() {
    let sandbox = Sandbox::new();
    sandbox.with_agent_policy();
    let inputs = [
        "",
        "not json",
        "[]",
        r#"{"tool_input":{"command":"ls"}}"#,
        r#"{"tool_name":"Bash"}"#,
        r#"{"tool_name":"Bash","tool_input":"ls"}"#,
        r#"{"tool_name":"Bash","tool_input":{"command":"ls","command":"rm -rf /"}}"#,
        r#"{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}"#,
    ];
    let mut transcripts = String::new();
    for input in inputs {
        let run = sandbox.run_with_stdin(&["check", "--policy", "agent.yaml"], input);
        assert_eq!(
            run.status,
            Some(2),
            "exit status 2 is Claude Code's blocking error: {run:?}"
        );
        assert_eq!(run.stdout, "", "{run:?}");
        assert!(
            run.stderr.starts_with("countersign check: ")
                && run.stderr.ends_with("the tool call is blocked\n"),
            "{run:?}"
        );
        transcripts.push_str(&format!("stdin: {input}\n{}\n", run.transcript()));
    }
    assert!(
        StoreFiles::read(&sandbox.store_path()).is_absent(),
        "malformed input created a store"
    );
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("check_malformed", transcripts));
    // A policy that does not load blocks too, and writes nothing.
    let run = sandbox.run_with_stdin(
        &["check", "--policy", "missing.yaml"],
        r#"{"tool_name":"Read","tool_input":{}}"#,
    );
    assert_eq!(run.status, Some(2), "{run:?}");
    assert!(run.stderr.contains("no policy file"), "{run:?}");
    assert!(StoreFiles::read(&sandbox.store_path()).is_absent());
}

#[test]
fn in_observe_mode_every_call_is_allowed_and_recorded_with_what_enforcement_would_do() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "agent.yaml",
        &crate::support::AGENT_POLICY
            .replace("environment: test\n", "environment: test\nmode: observe\n"),
    );
    let (answer, reason) = decision(&check(&sandbox, "Bash", r#"{"command":"rm -rf /"}"#));
    assert_eq!(answer, "allow", "observe mode enforces nothing: {reason}");
    assert!(
        reason.contains("observe mode") && reason.contains("denied"),
        "{reason}"
    );
    let receipts = sandbox.receipts_json();
    assert_eq!(receipts.len(), 1);
    assert_eq!(receipts[0]["outcome"], "observed");
    assert_eq!(receipts[0]["reason"], "would_deny");
}
