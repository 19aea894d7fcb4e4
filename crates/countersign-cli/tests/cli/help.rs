//! `--help` of the command and of each subcommand, as an operator reads it.

use crate::support::Sandbox;

fn check_help(name: &str, args: &[&str]) {
    let sandbox = Sandbox::new();
    let run = sandbox.run(args);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!(name, run.transcript()));
}

#[test]
fn top_level_help_lists_every_command() {
    check_help("help_top_level", &["--help"]);
}

#[test]
fn demo_help() {
    check_help("help_demo", &["demo", "--help"]);
}

#[test]
fn pending_help() {
    check_help("help_pending", &["pending", "--help"]);
}

#[test]
fn approve_help() {
    check_help("help_approve", &["approve", "--help"]);
}

#[test]
fn deny_help() {
    check_help("help_deny", &["deny", "--help"]);
}

#[test]
fn resolve_help() {
    check_help("help_resolve", &["resolve", "--help"]);
}

#[test]
fn receipts_help() {
    check_help("help_receipts", &["receipts", "--help"]);
}

#[test]
fn effects_help() {
    check_help("help_effects", &["effects", "--help"]);
}

#[test]
fn inspect_help() {
    check_help("help_inspect", &["inspect", "--help"]);
}

#[test]
fn verify_help() {
    check_help("help_verify", &["verify", "--help"]);
}

#[test]
fn keygen_help() {
    check_help("help_keygen", &["keygen", "--help"]);
}

#[test]
fn approver_token_help() {
    check_help("help_approver_token", &["approver", "token", "--help"]);
}

#[test]
fn serve_help() {
    check_help("help_serve", &["serve", "--help"]);
}

#[test]
fn no_command_is_a_usage_error_that_shows_the_help() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&[]);
    assert_eq!(run.status, Some(2), "{run:?}");
    assert!(run.stderr.contains("Usage: countersign"), "{run:?}");
}

#[test]
fn init_help() {
    check_help("help_init", &["init", "--help"]);
}

#[test]
fn evaluate_help() {
    check_help("help_evaluate", &["evaluate", "--help"]);
}

#[test]
fn check_command_help() {
    check_help("help_check", &["check", "--help"]);
}

#[test]
fn exec_help() {
    check_help("help_exec", &["exec", "--help"]);
}

#[test]
fn policy_help() {
    check_help("help_policy", &["policy", "--help"]);
}

#[test]
fn policy_diff_help() {
    check_help("help_policy_diff", &["policy", "diff", "--help"]);
}

#[test]
fn policy_replay_help() {
    check_help("help_policy_replay", &["policy", "replay", "--help"]);
}

#[test]
fn stats_help() {
    check_help("help_stats", &["stats", "--help"]);
}

#[test]
fn completions_help() {
    check_help("help_completions", &["completions", "--help"]);
}

/// Issue #28: `--version` names the commit it was built from (this checkout's, as git says; or
/// `unknown` when built where git cannot say).
#[test]
fn version_names_the_commit() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["--version"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let expected_commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    assert_eq!(
        run.stdout,
        format!(
            "countersign {} (commit {expected_commit})\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn webhooks_help() {
    check_help("help_webhooks", &["webhooks", "--help"]);
}
