//! The everyday commands: `init`, `evaluate`, `policy diff`, `policy replay`, `stats` and
//! `completions`, on what an operator reads.

use serde_json::Value;

use crate::support::{Sandbox, StoreFiles};

fn snapshot(sandbox: &Sandbox, name: &str, text: &str) {
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!(name.to_owned(), text));
}

#[test]
fn init_writes_a_starter_policy_that_loads_and_never_overwrites() {
    let sandbox = Sandbox::new();
    let folder = sandbox.work().join("fresh");
    std::fs::create_dir(&folder).expect("a fresh folder");
    let run = sandbox.run_in(&folder, &["init"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    snapshot(&sandbox, "init_text", &run.transcript());
    let written = std::fs::read_to_string(folder.join("countersign.yaml")).expect("written");
    assert!(
        written.starts_with("# Countersign policy"),
        "commented: {written}"
    );
    assert!(folder.join(".countersign").is_dir());
    assert_eq!(
        std::fs::read_to_string(folder.join(".countersign/.gitignore")).expect("ignored"),
        "# Countersign's store: approvals, effects, receipts.\n*\n"
    );
    let verify = sandbox.run_in(&folder, &["policy", "check"]);
    assert_eq!(
        verify.status,
        Some(0),
        "the starter policy loads: {verify:?}"
    );
    assert!(!verify.stdout.contains("warning"), "{verify:?}");

    std::fs::write(folder.join("countersign.yaml"), "edited by hand\n").expect("edit");
    let again = sandbox.run_in(&folder, &["init"]);
    let message = again.one_line_error();
    assert!(message.contains("already exists"), "{message}");
    assert_eq!(
        std::fs::read_to_string(folder.join("countersign.yaml")).expect("kept"),
        "edited by hand\n",
        "init overwrote a policy"
    );
    let json = sandbox.run_in(&folder, &["init", "--policy", "other.yaml", "--json"]);
    assert_eq!(json.status, Some(0), "{json:?}");
    snapshot(&sandbox, "init_json", &json.transcript());
}

#[test]
fn evaluate_says_which_entry_rule_and_condition_decided_and_writes_nothing() {
    let sandbox = Sandbox::new();
    let text = sandbox.run(&[
        "evaluate",
        "stripe.refund",
        "--args",
        r#"{"payment_id": "pi_2", "amount": 75000}"#,
    ]);
    assert_eq!(text.status, Some(0), "{text:?}");
    snapshot(&sandbox, "evaluate_text", &text.transcript());
    let json = sandbox.run(&[
        "evaluate",
        "stripe.refund",
        "--args",
        r#"{"payment_id": "pi_2", "amount": 75000}"#,
        "--json",
    ]);
    assert_eq!(json.status, Some(0), "{json:?}");
    let parsed: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(parsed["decision"], "approve");
    assert_eq!(parsed["explanation"]["rule"], 1);
    assert_eq!(
        parsed["explanation"]["rules"][0]["conditions"][0]["holds"],
        false
    );
    snapshot(&sandbox, "evaluate_json", &json.transcript());
    let unknown = sandbox.run(&["evaluate", "stripe.charge"]);
    assert_eq!(unknown.status, Some(0), "{unknown:?}");
    snapshot(&sandbox, "evaluate_unknown", &unknown.transcript());
    assert!(
        StoreFiles::read(&sandbox.store_path()).is_absent(),
        "evaluate created a store"
    );
    let bad = sandbox.run(&["evaluate", "stripe.refund", "--args", "[1, 2]"]);
    assert!(bad.one_line_error().contains("JSON object"), "{bad:?}");
    // An argument the effect key needs is missing: said as such, not as "not executed" (nothing
    // ever runs here).
    let short = sandbox.run(&["evaluate", "stripe.refund", "--args", r#"{"amount": 10}"#]);
    let message = short.one_line_error();
    assert_eq!(
        message,
        "cannot evaluate `stripe.refund` with these arguments: missing argument `payment_id` needed by the template (its effect key or resource template reads it): add it to `--args`"
    );
    let bad = sandbox.run(&["evaluate", "stripe.refund", "--args", r#"{"a": 1, "a": 2}"#]);
    assert!(bad.one_line_error().contains("not valid JSON"), "{bad:?}");
}

const OLD: &str = "\
schema: countersign.policy/v1
environment: test
actions:
  Read:
    secret_arguments: [token]
    decision: allow
  Bash:
    rules:
      - when: { command: { eq: \"ls\" } }
        decision: allow
      - decision: approve
  Write:
    decision: approve
";

const NEW: &str = "\
schema: countersign.policy/v1
environment: test
actions:
  Read:
    rules:
      - when: { token: { eq: \"public\" } }
        decision: allow
  Bash:
    rules:
      - when: { command: { in: [\"ls\", \"git status\"] } }
        decision: allow
      - decision: approve
  Edit:
    decision: approve
";

#[test]
fn policy_diff_compares_meaning_not_text() {
    let sandbox = Sandbox::new();
    sandbox.write("old.yaml", OLD);
    sandbox.write("new.yaml", NEW);
    let text = sandbox.run(&["policy", "diff", "old.yaml", "new.yaml"]);
    assert_eq!(text.status, Some(0), "{text:?}");
    snapshot(&sandbox, "policy_diff_text", &text.transcript());
    let json = sandbox.run(&["policy", "diff", "old.yaml", "new.yaml", "--json"]);
    let parsed: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(parsed["same"], false);
    assert!(parsed["added"]["Edit"].is_object());
    assert!(parsed["removed"]["Write"].is_object());
    assert!(parsed["changed"]["Bash"].is_array());
    snapshot(&sandbox, "policy_diff_json", &json.transcript());
    // Comments, key order and formatting are not differences.
    sandbox.write(
        "reordered.yaml",
        &format!("# a comment\n{}", OLD.replace("environment: test\n", "")).replace(
            "schema: countersign.policy/v1\n",
            "schema: countersign.policy/v1\nenvironment: test   # the same\n",
        ),
    );
    let same = sandbox.run(&["policy", "diff", "old.yaml", "reordered.yaml"]);
    assert!(same.stdout.contains("no difference in meaning"), "{same:?}");
    // A missing file is named, with what to give instead (not `--policy`, which diff ignores).
    let missing = sandbox.run(&["policy", "diff", "old.yaml", "gone.yaml"]);
    let error = missing.one_line_error();
    assert!(
        error.starts_with("no policy file at `gone.yaml`: check the path"),
        "{error}"
    );
    assert!(!error.contains("--policy"), "{error}");
}

#[test]
fn policy_replay_reports_changes_and_never_guesses_a_redacted_argument() {
    let sandbox = Sandbox::new();
    sandbox.write("old.yaml", OLD);
    sandbox.write("new.yaml", NEW);
    for (tool, input) in [
        ("Read", r#"{"file_path":"/a","token":"s3cret"}"#),
        ("Bash", r#"{"command":"ls"}"#),
        ("Bash", r#"{"command":"git status"}"#),
    ] {
        let stdin = format!("{{\"tool_name\":\"{tool}\",\"tool_input\":{input}}}");
        let run = sandbox.run_with_stdin(&["check", "--policy", "old.yaml"], &stdin);
        assert_eq!(run.status, Some(0), "{run:?}");
    }
    let receipts = sandbox.receipts_json();
    assert_eq!(receipts[0]["arguments"]["token"], "[redacted]");
    let before = StoreFiles::read(&sandbox.store_path());
    let text = sandbox.run(&["policy", "replay", "--policy", "new.yaml"]);
    assert_eq!(text.status, Some(0), "{text:?}");
    snapshot(&sandbox, "policy_replay_text", &text.transcript());
    let json = sandbox.run(&["policy", "replay", "--policy", "new.yaml", "--json"]);
    let parsed: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(
        parsed["attempts"], 2,
        "the attempts that ended (the waiting one has no receipt)"
    );
    assert_eq!(parsed["undecidable"], 1);
    assert_eq!(parsed["same"], 1);
    let read = &parsed["replayed"][0];
    assert_eq!(read["now"], "undecidable");
    assert!(
        read["why"].as_str().unwrap_or_default().contains("token"),
        "{read}"
    );
    snapshot(&sandbox, "policy_replay_json", &json.transcript());
    assert!(
        StoreFiles::read(&sandbox.store_path()) == before,
        "replay wrote to the store"
    );
}

#[test]
fn stats_counts_by_action_outcome_and_reason() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let text = sandbox.run(&["stats", "--since", "24h"]);
    assert_eq!(text.status, Some(0), "{text:?}");
    snapshot(&sandbox, "stats_text", &text.transcript());
    let json = sandbox.run(&["stats", "--json"]);
    let parsed: Value = serde_json::from_str(&json.stdout).expect("JSON");
    let total: u64 = parsed["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| row["count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(Some(total), parsed["receipts"].as_u64());
    snapshot(&sandbox, "stats_json", &json.transcript());
    let bad = sandbox.run(&["stats", "--since", "yesterday"]);
    assert_eq!(bad.status, Some(2), "a usage error: {bad:?}");
    assert!(bad.stderr.contains("24h"), "{bad:?}");
    // A window reaching before 1970 counts everything from the epoch (it printed a time
    // billions of years before it).
    let all = sandbox.run(&["stats", "--since", "99999999999d"]);
    assert_eq!(all.status, Some(0), "{all:?}");
    assert!(
        all.stdout.contains(&format!(
            "{} receipt(s) since 1970-01-01T00:00:00",
            parsed["receipts"]
        )),
        "{all:?}"
    );
}

#[test]
fn completions_are_printed_for_each_shell() {
    let sandbox = Sandbox::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let run = sandbox.run(&["completions", shell]);
        assert_eq!(run.status, Some(0), "{run:?}");
        assert!(
            run.stdout.contains("evaluate") && run.stdout.contains("check"),
            "{shell}"
        );
    }
}

/// The README's quick tour and docs/cli.md's first steps, as written, in an empty folder.
#[test]
fn the_quick_tour_runs_as_documented() {
    let sandbox = Sandbox::new();
    let folder = sandbox.work().join("try-countersign");
    std::fs::create_dir(&folder).expect("an empty folder");
    let run = |args: &[&str]| sandbox.run_in(&folder, args);
    assert_eq!(run(&["init"]).status, Some(0));
    let evaluated = run(&[
        "evaluate",
        "Bash",
        "--args",
        r#"{"command": "rm -rf build"}"#,
    ]);
    assert!(
        evaluated.stdout.starts_with("Bash: approve\n"),
        "{evaluated:?}"
    );
    let deploy = [
        "exec",
        "--action",
        "deploy",
        "--args",
        r#"{"service": "api"}"#,
        "--",
        "echo",
        "deploying",
        "api",
    ];
    let waiting = run(&deploy);
    assert_eq!(waiting.status, Some(125), "{waiting:?}");
    assert_eq!(waiting.stdout, "", "nothing ran");
    let id = waiting
        .stderr
        .split_whitespace()
        .find(|word| word.starts_with("apr_"))
        .expect("the request id")
        .to_owned();
    let pending = run(&["pending"]);
    assert!(pending.stdout.contains(&id), "{pending:?}");
    assert_eq!(run(&["approve", &id]).status, Some(0));
    let ran = run(&deploy);
    assert_eq!(
        (ran.status, ran.stdout.as_str()),
        (Some(0), "deploying api\n"),
        "{ran:?}"
    );
    let again = run(&deploy);
    assert_eq!(again.status, Some(125), "a duplicate never runs: {again:?}");
    let stats = run(&["stats", "--since", "24h"]);
    assert!(stats.stdout.contains("deploy  committed"), "{stats:?}");
    // docs/cli.md, section 4: the hook without Claude Code.
    let hook =
        r#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"make"}}"#;
    let first = sandbox.run_with(&folder, &["check"], Some(hook));
    assert!(first.stdout.contains("\"deny\""), "{first:?}");
    let id = first
        .stdout
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .find(|word| word.starts_with("apr_"))
        .expect("the request id")
        .to_owned();
    assert_eq!(run(&["approve", &id]).status, Some(0));
    let second = sandbox.run_with(&folder, &["check"], Some(hook));
    assert!(second.stdout.contains("\"allow\""), "{second:?}");
    assert_eq!(run(&["verify"]).status, Some(0));
}

/// On a terminal (a pseudo-terminal from `script`, util-linux) the decision word is coloured;
/// with `NO_COLOR` set, or through a pipe, it never is.
#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let sandbox = Sandbox::new();
    let binary = env!("CARGO_BIN_EXE_countersign");
    let on_a_terminal = |no_color: Option<&str>| {
        let mut command = std::process::Command::new("script");
        command
            .args([
                "-qec",
                &format!("{binary} evaluate stripe.charge"),
                "/dev/null",
            ])
            .current_dir(sandbox.work())
            .env_remove("NO_COLOR")
            .env("TERM", "xterm");
        if let Some(value) = no_color {
            command.env("NO_COLOR", value);
        }
        let output = command
            .output()
            .expect("`script` (util-linux) runs the command on a pseudo-terminal");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let coloured = on_a_terminal(None);
    assert!(
        coloured.contains("\u{1b}["),
        "no colour on a terminal: {coloured:?}"
    );
    let plain = on_a_terminal(Some("1"));
    assert!(plain.contains("stripe.charge: deny"), "{plain:?}");
    assert!(
        !plain.contains("\u{1b}["),
        "colour despite NO_COLOR: {plain:?}"
    );
    let piped = sandbox.run(&["evaluate", "stripe.charge"]);
    assert!(!piped.stdout.contains('\u{1b}'), "{piped:?}");
}
