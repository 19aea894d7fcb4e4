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

/// Two demos on one store: the second is refused at once, naming the first, and touches nothing
/// (before, it deleted the running demo's store, which then failed midway with a misleading
/// error). The test holds the lock a running demo holds.
#[test]
fn a_second_demo_on_the_same_store_is_refused_while_the_first_runs() {
    let sandbox = Sandbox::new();
    let store = sandbox.tmp().join("shared.db");
    let url = format!("sqlite:{}", store.display());
    let lock = std::fs::File::create(sandbox.tmp().join("shared.db.lock")).expect("lock file");
    lock.lock().expect("take the lock a running demo holds");
    let run = sandbox.run(&["demo", "--store-url", &url]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.one_line_error().starts_with(&format!(
            "another `countersign demo` is running on `{}`",
            store.display()
        )),
        "{run:?}"
    );
    assert!(StoreFiles::read(&store).is_absent(), "nothing was created");
    drop(lock);
    let after = sandbox.run(&["demo", "--store-url", &url]);
    assert_eq!(after.status, Some(0), "{after:?}");
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

/// One HTTP/1.1 request to `addr` (the connection closed after it): the status and the body.
fn http(addr: &str, method: &str, path: &str, token: &str, body: Option<&str>) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to serve");
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send the request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("read the response");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// The words after `countersign ` on the demo's line that contains `marker`.
fn printed_command(run: &crate::support::Run, marker: &str) -> Vec<String> {
    let line = run
        .stdout
        .lines()
        .find(|line| line.contains(marker))
        .unwrap_or_else(|| panic!("no line with {marker:?} in {run:?}"));
    let (_, command) = line
        .rsplit_once("countersign ")
        .expect("the line names a countersign command");
    command.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn the_waiting_request_is_answered_in_the_web_inbox_as_printed() {
    use std::io::BufRead;
    let sandbox = Sandbox::new();
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let store = sandbox.tmp().join("demo.db");
    let url = format!("sqlite:{}", store.display());
    let run = sandbox.run_in(&checkout, &["demo", "--store-url", &url]);
    assert_eq!(run.status, Some(0), "{run:?}");

    // The two commands the demo printed, run as a person would.
    let serve_args = printed_command(&run, "or in the web inbox:");
    let token_args = printed_command(&run, "sign in at http://127.0.0.1:8780/signin");
    let key = sandbox.tmp().join("demo-approver.key");
    assert!(
        token_args.contains(&key.display().to_string()),
        "{token_args:?}"
    );
    let token_args: Vec<&str> = token_args.iter().map(String::as_str).collect();
    let token = sandbox.run_in(&checkout, &token_args);
    assert_eq!(token.status, Some(0), "{token:?}");
    let token = token.stdout.trim().to_owned();

    let mut serve = std::process::Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(&serve_args)
        .args(["--listen", "127.0.0.1:0"])
        .current_dir(&checkout)
        .env_remove("COUNTERSIGN_POLICY")
        .env_remove("COUNTERSIGN_STORE_URL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start countersign serve");
    let mut started = String::new();
    std::io::BufReader::new(serve.stdout.take().expect("stdout"))
        .read_line(&mut started)
        .expect("read the startup line");
    let addr = started
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {started:?}"))
        .to_owned();
    assert!(started.contains("1 approver key"), "{started:?}");

    let (status, body) = http(&addr, "GET", "/api/v1/approvals", &token, None);
    let listed: serde_json::Value = serde_json::from_str(&body).expect("a JSON listing");
    let waiting: Vec<&serde_json::Value> = listed["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{status} {body}"))
        .iter()
        .filter(|item| item["arguments"]["payment_id"] == "pi_1006")
        .collect();
    assert_eq!((status, waiting.len()), (200, 1), "{body}");
    let (id, hash) = (
        waiting[0]["id"].as_str().expect("an id"),
        waiting[0]["action_hash"].as_str().expect("a hash"),
    );
    let (status, body) = http(
        &addr,
        "POST",
        &format!("/api/v1/approvals/{id}/answer"),
        &token,
        Some(&format!(
            r#"{{"decision": "approve", "action_hash": "{hash}"}}"#
        )),
    );
    serve.kill().expect("stop serve");
    serve.wait().expect("reap serve");
    let answered: serde_json::Value = serde_json::from_str(&body).expect("a JSON answer");
    assert_eq!(
        (status, answered["state"].as_str()),
        (200, Some("granted")),
        "{body}"
    );
    let approver = &answered["answers"][0]["approver"];
    assert_eq!(
        (approver["id"].as_str(), approver["authentication"].as_str()),
        (Some("human:you"), Some("token")),
        "{body}"
    );
}

/// A new user's trial ran the demo again while the `serve` it had printed was still running:
/// the inbox went silently stale (serve kept reading the deleted file). A run that replaces
/// the last demo's store says so, and what to restart.
#[test]
fn a_second_run_on_the_same_store_says_what_to_restart() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "example.yaml",
        include_str!("../../../../examples/refunds/countersign.yaml"),
    );
    let note = "note: this replaced the last demo's store and approver key: restart any `countersign serve` still running on them";
    let first = sandbox.run(&["demo", "--policy", "example.yaml"]);
    assert_eq!(first.status, Some(0), "{first:?}");
    assert!(!first.stdout.contains(note), "{first:?}");
    let second = sandbox.run(&["demo", "--policy", "example.yaml"]);
    assert_eq!(second.status, Some(0), "{second:?}");
    assert!(second.stdout.contains(note), "{second:?}");
    assert!(
        sandbox
            .work()
            .join(".countersign/demo-approver.key")
            .exists()
    );
}
