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
    assert_eq!(
        run.one_line_error(),
        "the demo prints a walk-through for people, not JSON: leave out `--json`"
    );
    assert!(
        std::fs::read_dir(sandbox.tmp())
            .expect("read TMPDIR")
            .next()
            .is_none()
    );
}
