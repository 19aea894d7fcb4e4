//! `countersign demo`: the kernel's guarantees, step by step, on a scratch store.

use crate::support::{Sandbox, StoreFiles};

/// The folders `countersign-demo-*` the demo made in the sandbox's `TMPDIR`.
fn demo_folders(sandbox: &Sandbox) -> Vec<std::path::PathBuf> {
    let mut folders: Vec<_> = std::fs::read_dir(sandbox.tmp())
        .expect("read TMPDIR")
        .map(|entry| entry.expect("a TMPDIR entry").path())
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("countersign-demo-"))
        })
        .collect();
    folders.sort();
    folders
}

#[test]
fn outside_a_checkout_writes_the_example_policy_to_a_folder_of_its_own() {
    let sandbox = Sandbox::new();
    let elsewhere = tempfile::tempdir().expect("an empty working directory");
    let run = sandbox.run_in(elsewhere.path(), &["demo"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.stderr, "");

    let folders = demo_folders(&sandbox);
    assert_eq!(folders.len(), 1, "{folders:?}");
    let policy = std::fs::read_to_string(folders[0].join("countersign.yaml"))
        .expect("the example policy was written");
    assert_eq!(
        policy,
        include_str!("../../../../examples/refunds/countersign.yaml")
    );
    assert!(!StoreFiles::read(&folders[0].join(".countersign/demo.db")).is_absent());
    assert_eq!(
        std::fs::read_dir(elsewhere.path())
            .expect("read the working directory")
            .count(),
        0,
        "the demo wrote into the working directory"
    );

    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("demo", run.transcript()));

    // A second run gets a folder of its own and leaves the first one alone.
    let again = sandbox.run_in(elsewhere.path(), &["demo"]);
    assert_eq!(again.status, Some(0), "{again:?}");
    assert_eq!(demo_folders(&sandbox).len(), 2);
    assert_eq!(
        std::fs::read_to_string(folders[0].join("countersign.yaml")).expect("still there"),
        policy
    );
}

#[test]
fn in_a_checkout_runs_the_example_policy_in_place() {
    let sandbox = Sandbox::new();
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let store = sandbox.tmp().join("demo.db");
    let url = format!("sqlite:{}", store.display());
    let run = sandbox.run_in(&checkout, &["demo", "--store-url", &url]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert!(
        run.stdout
            .starts_with("Countersign demo: policy examples/refunds/countersign.yaml ("),
        "{run:?}"
    );
    assert!(
        demo_folders(&sandbox).is_empty(),
        "no scratch policy is needed"
    );
    assert!(!StoreFiles::read(&store).is_absent());
}

#[test]
fn never_replaces_a_store_named_on_the_command_line() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let before = StoreFiles::read(&sandbox.store_path());
    let run = sandbox.run(&["demo", "--store-url", "sqlite:.countersign/countersign.db"]);
    assert_eq!(
        run.one_line_error(),
        "`.countersign/countersign.db` already exists and the demo needs a fresh store: pass `--store-url sqlite:NEW_PATH` (check `COUNTERSIGN_STORE_URL` too), or leave `--store-url` out"
    );
    assert_eq!(StoreFiles::read(&sandbox.store_path()), before);
}

#[test]
fn refuses_a_store_that_is_not_a_sqlite_file() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["demo", "--store-url", "memory:"]);
    assert_eq!(
        run.one_line_error(),
        "the demo runs on a SQLite file, not `memory:`: pass `--store-url sqlite:PATH` or leave it out"
    );
}

#[test]
fn says_what_it_needs_from_a_policy_it_cannot_demonstrate() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "other.yaml",
        "schema: countersign.policy/v1\nactions:\n  stripe.refund:\n    decision: allow\n",
    );
    let run = sandbox.run(&[
        "demo",
        "--policy",
        "other.yaml",
        "--store-url",
        "sqlite:demo.db",
    ]);
    assert_eq!(run.status, Some(1), "{run:?}");
    // Checked before anything is written: no half-walked demo store is left behind.
    assert_eq!(
        run.one_line_error(),
        "the demo walks through the example refunds policy, and `other.yaml` differs: `stripe.refund` has no `effect` template, and the demo shows a duplicate refused: run `countersign demo` without --policy, or use a copy of examples/refunds/countersign.yaml"
    );
    assert!(StoreFiles::read(&sandbox.work().join("demo.db")).is_absent());
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let sandbox = Sandbox::new();
    let elsewhere = tempfile::tempdir().expect("an empty working directory");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_countersign"))
        .arg("demo")
        .current_dir(elsewhere.path())
        .env("TMPDIR", sandbox.tmp())
        .env_remove("COUNTERSIGN_POLICY")
        .env_remove("COUNTERSIGN_STORE_URL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the countersign binary");
    // The reader goes away before the demo prints: like `countersign demo | head -0`.
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("the demo ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr, "", "a closed pipe is not an error to report");
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn refuses_json_rather_than_ignoring_it() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["demo", "--json"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    // Asked for JSON, the refusal is JSON too (as every error under `--json`).
    let error: serde_json::Value = serde_json::from_str(run.stderr.trim()).expect("JSON");
    assert_eq!(
        error["error"],
        "the demo prints a walk-through for people, not JSON: leave out `--json`"
    );
    assert!(
        std::fs::read_dir(sandbox.tmp())
            .expect("read TMPDIR")
            .next()
            .is_none()
    );
}

/// The example policy, as the demo runs it.
const EXAMPLE_POLICY: &str = include_str!("../../../../examples/refunds/countersign.yaml");

/// Run the demo on a copy of the example policy in the sandbox, with its store at
/// `work/demo.db`.
fn run_example(sandbox: &Sandbox) -> crate::support::Run {
    sandbox.write("example.yaml", EXAMPLE_POLICY);
    let run = sandbox.run(&[
        "demo",
        "--policy",
        "example.yaml",
        "--store-url",
        "sqlite:demo.db",
    ]);
    assert_eq!(run.status, Some(0), "{run:?}");
    run
}

#[test]
fn the_quorum_scene_leaves_receipts_naming_each_approver_their_groups_and_channel() {
    let sandbox = Sandbox::new();
    run_example(&sandbox);
    let listed = sandbox.run(&["receipts", "--json", "--store-url", "sqlite:demo.db"]);
    assert_eq!(listed.status, Some(0), "{listed:?}");
    let receipts: Vec<serde_json::Value> =
        serde_json::from_str(&listed.stdout).expect("receipts as JSON");
    let of_the_big_refund: Vec<&serde_json::Value> = receipts
        .iter()
        .filter(|receipt| receipt["effect_key"] == "refund:pi_1005")
        .collect();
    let answers: Vec<serde_json::Value> = of_the_big_refund
        .iter()
        .filter(|receipt| receipt["kind"] == "answer")
        .map(|receipt| {
            serde_json::json!([
                receipt["outcome"],
                receipt["reason"],
                receipt["approver"],
                receipt["approver_groups"],
                receipt["channel"],
                receipt["authentication"],
                receipt["approvals_given"],
                receipt["approvals_needed"],
            ])
        })
        .collect();
    assert_eq!(
        answers,
        [
            serde_json::json!([
                "counted",
                "approved",
                "human:alice",
                ["finance"],
                "cli",
                "asserted",
                1,
                2
            ]),
            serde_json::json!([
                "refused",
                "self_approval",
                "agent:support-bot",
                ["support"],
                "cli",
                "asserted",
                1,
                2
            ]),
            serde_json::json!([
                "refused",
                "not_entitled",
                "human:sam",
                ["support"],
                "cli",
                "asserted",
                1,
                2
            ]),
            serde_json::json!([
                "refused",
                "self_approval",
                "human:carol",
                ["finance", "support"],
                "cli",
                "asserted",
                1,
                2
            ]),
            serde_json::json!([
                "granted",
                "approved",
                "human:bob",
                ["finance"],
                "cli",
                "asserted",
                2,
                2
            ]),
        ]
    );
    // The answers that counted echoed the hash they were shown, as `approve --hash` does.
    let confirmed: Vec<&serde_json::Value> = of_the_big_refund
        .iter()
        .filter(|receipt| receipt["kind"] == "answer" && receipt["outcome"] != "refused")
        .map(|receipt| &receipt["hash_confirmed"])
        .collect();
    assert_eq!(confirmed, [true, true]);
    // The refund ran once, on the strength of both finance approvers.
    let attempts: Vec<&&serde_json::Value> = of_the_big_refund
        .iter()
        .filter(|receipt| receipt["kind"] == "attempt")
        .collect();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0]["outcome"], "committed");
    let approvers: Vec<&serde_json::Value> = attempts[0]["approvers"]
        .as_array()
        .expect("the approvers behind the grant")
        .iter()
        .map(|approver| &approver["id"])
        .collect();
    assert_eq!(approvers, ["human:alice", "human:bob"]);
}

#[test]
fn a_policy_without_a_quorum_band_skips_that_scene_and_says_so() {
    let sandbox = Sandbox::new();
    // The sandbox policy asks one human for every refund up to 1000000, as the example did
    // before it had a directory.
    let run = sandbox.run(&[
        "demo",
        "--policy",
        "countersign.yaml",
        "--store-url",
        "sqlite:demo.db",
    ]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert!(
        run.stdout.contains(
            "\n4. A refund of 400000 that needs several approvers\n   skipped: under `countersign.yaml` a refund of 400000 needs one answer; the example policy asks two people from finance\n"
        ),
        "{run:?}"
    );
    assert!(!run.stdout.contains("pi_1005"), "{run:?}");
    assert!(
        run.stdout.contains("the payment provider was called 3 times: pi_1001, pi_1002 and pi_1004 (whose reply was lost), each exactly once"),
        "{run:?}"
    );
}

#[test]
fn interactively_the_operator_gives_the_second_finance_answer() {
    use std::io::Write;
    let sandbox = Sandbox::new();
    sandbox.write("example.yaml", EXAMPLE_POLICY);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args([
            "demo",
            "--interactive",
            "--policy",
            "example.yaml",
            "--store-url",
            "sqlite:demo.db",
        ])
        .current_dir(sandbox.work())
        .env("TMPDIR", sandbox.tmp())
        .env_remove("COUNTERSIGN_POLICY")
        .env_remove("COUNTERSIGN_STORE_URL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the countersign binary");
    // Yes to the first request (scene 2), no as human:bob to the quorum request (scene 4).
    child
        .stdin
        .take()
        .expect("the demo's stdin")
        .write_all(b"y\nn\n")
        .expect("answer the demo");
    let output = child.wait_with_output().expect("the demo ends");
    let stdout = String::from_utf8(output.stdout).expect("stdout is UTF-8");
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    for expected in [
        "   human   → `countersign approve ",
        "` as human:you: granted\n",
        "   each answer is what `countersign approve ID --as NAME --hash HASH` records; you give the last one\n",
        "   human   → human:alice approves: pending, 1 of 2 approvals\n",
        "   human   ? you are human:bob (finance): approve refund of 400000 on pi_1005 (apr_",
        "   human   → human:bob denies: denied, 1 of 2 approvals\n",
        "   result  → refused (approval_denied): not executed: approval `apr_",
        "the payment provider was called 3 times: pi_1001, pi_1002 and pi_1004 (whose reply was lost), each exactly once",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
}
