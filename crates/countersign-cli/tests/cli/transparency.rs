//! `countersign checkpoint`, `verify --checkpoint`, `receipts --bundle` and `verify --bundle`
//! (issue #23): a kept checkpoint catches truncation and a forked log, a checkpoint fails under
//! another key, and a bundle verifies with no store and fails after an edit.

use std::path::{Path, PathBuf};

use crate::support::{Run, Sandbox};

fn keygen(sandbox: &Sandbox, name: &str) -> (PathBuf, PathBuf) {
    let key = sandbox.work().join(name);
    let run = sandbox.run(&["keygen", "--out", key.to_str().expect("UTF-8 path")]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let public = sandbox.work().join(format!("{name}.pub"));
    (key, public)
}

fn path(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

fn checkpoint(sandbox: &Sandbox, key: &Path, out: &str) -> Run {
    let run = sandbox.run(&["checkpoint", "--key", path(key), "--out", out, "--json"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    run
}

/// One more allowed refund through the kernel: one more receipt.
async fn one_more_receipt(sandbox: &Sandbox, payment_id: &str) {
    sandbox
        .agent()
        .refund(payment_id, 100, None)
        .await
        .expect("an allowed refund runs");
}

fn snapshot(sandbox: &Sandbox, name: &str, run: &Run) {
    let mut settings = sandbox.settings();
    settings.add_filter(r"— (\S+) [A-Za-z0-9+/]{91}=", "— $1 [SIGNATURE]");
    settings.add_filter(r"[A-Za-z0-9+/]{43}=", "[ROOT]");
    settings.add_filter(r"key id [0-9a-f]{8}", "key id [KEYID]");
    settings.add_filter(r"\+[0-9a-f]{8}", "+[KEYID]");
    settings.add_filter(r"countersign/[0-9a-f]{16}", "countersign/[LOG]");
    settings.bind(|| insta::assert_snapshot!(name, run.transcript()));
}

#[test]
fn a_checkpoint_is_a_signed_note_of_the_whole_log() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let (key, _) = keygen(&sandbox, "log-key");
    let run = sandbox.run(&["checkpoint", "--key", path(&key), "--out", "kept.note"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    snapshot(&sandbox, "checkpoint_text", &run);
    let note = std::fs::read_to_string(sandbox.work().join("kept.note")).expect("written");
    let mut lines = note.lines();
    assert!(lines.next().expect("origin").starts_with("countersign/"));
    assert_eq!(lines.next(), Some("11"));
    let run = checkpoint(&sandbox, &key, "again.note");
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(json["size"], 11);
    // The verifier key is Go's `name+keyid+base64(0x01 || key)`.
    let verifier = json["verifier_key"].as_str().expect("text");
    assert!(verifier.starts_with(&format!("{}+", json["origin"].as_str().expect("origin"))));
}

#[tokio::test]
async fn the_store_verifies_against_a_kept_checkpoint_and_after_it_grows() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let (key, public) = keygen(&sandbox, "log-key");
    checkpoint(&sandbox, &key, "kept.note");
    let args = [
        "verify",
        "--checkpoint",
        "kept.note",
        "--key",
        path(&public),
    ];
    let run = sandbox.run(&args);
    assert_eq!(run.status, Some(0), "{run:?}");
    snapshot(&sandbox, "verify_checkpoint_same_size", &run);

    one_more_receipt(&sandbox, "pi_after_checkpoint").await;
    let run = sandbox.run(&[&args[..], &["--json"]].concat());
    assert_eq!(run.status, Some(0), "{run:?}");
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(json["outcome"], "verified");
    assert_eq!(json["checkpoint"]["size"], 11);
    assert_eq!(json["store"]["size"], 12);
    // The store's head, as `verify` alone reports it (it was null).
    assert_eq!(json["chain"]["log_head"]["seq"], 12, "{json}");
    assert!(
        !json["consistency_proof"]
            .as_array()
            .expect("a proof")
            .is_empty()
    );
}

#[test]
fn a_truncated_store_fails_against_a_kept_checkpoint() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let (key, public) = keygen(&sandbox, "log-key");
    checkpoint(&sandbox, &key, "kept.note");
    let deleted = rusqlite::Connection::open(sandbox.store_path())
        .expect("open the store file directly")
        .execute("DELETE FROM receipts WHERE seq >= 10", [])
        .expect("delete the newest receipts");
    assert_eq!(deleted, 2);
    let run = sandbox.run(&[
        "verify",
        "--checkpoint",
        "kept.note",
        "--key",
        path(&public),
    ]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stdout
            .contains("the checkpoint signed 11 receipts, but the store has 9"),
        "{run:?}"
    );
    snapshot(&sandbox, "verify_checkpoint_truncated", &run);
}

#[tokio::test]
async fn another_log_fails_against_a_kept_checkpoint() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let (key, public) = keygen(&sandbox, "log-key");
    checkpoint(&sandbox, &key, "kept.note");
    // A whole other history, intact on its own, as a rewrite that recomputed every hash is.
    std::fs::remove_dir_all(sandbox.work().join(".countersign")).expect("remove the store");
    sandbox.fill_with_demo();
    one_more_receipt(&sandbox, "pi_forked").await;
    let run = sandbox.run(&[
        "verify",
        "--checkpoint",
        "kept.note",
        "--key",
        path(&public),
    ]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stdout
            .contains("are not the ones the checkpoint signed"),
        "{run:?}"
    );
    // Receipt 1 names another log: that is said, beside a rewrite.
    assert!(
        run.stdout.contains("either it is another log's checkpoint")
            && run.stdout.contains("whole history was rewritten"),
        "{run:?}"
    );
}

/// `verify --checkpoint` with no store at the given place is `unverifiable` (exit 3), as
/// `verify` alone is, and says where it looked.
#[test]
fn a_checkpoint_against_no_store_is_unverifiable() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let (key, public) = keygen(&sandbox, "log-key");
    checkpoint(&sandbox, &key, "kept.note");
    let against = |store_url: &str| {
        sandbox.run(&[
            "verify",
            "--checkpoint",
            "kept.note",
            "--key",
            path(&public),
            "--store-url",
            store_url,
        ])
    };
    let run = against("sqlite:elsewhere.db");
    assert_eq!(run.status, Some(3), "{run:?}");
    assert!(
        run.stdout
            .contains("unverifiable: cannot check the checkpoint: no store at")
            && run.stdout.contains("elsewhere.db"),
        "{run:?}"
    );
    // A PostgreSQL schema holding no store likewise (it exited 1 before).
    let (postgres, _schema) = crate::support::postgres_schema_url("cli_checkpoint_nothing");
    let run = against(&postgres);
    assert_eq!(run.status, Some(3), "{run:?}");
    assert!(
        run.stdout
            .contains("unverifiable: cannot check the checkpoint: "),
        "{run:?}"
    );
}

#[test]
fn a_checkpoint_fails_under_another_key() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let (key, _) = keygen(&sandbox, "log-key");
    let (_, other_public) = keygen(&sandbox, "other-key");
    checkpoint(&sandbox, &key, "kept.note");
    let run = sandbox.run(&[
        "verify",
        "--checkpoint",
        "kept.note",
        "--key",
        path(&other_public),
    ]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(run.stdout.contains("is not signed by"), "{run:?}");
    snapshot(&sandbox, "verify_checkpoint_other_key", &run);
}

#[test]
fn a_bundle_verifies_with_no_store_and_fails_after_an_edit() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let (key, public) = keygen(&sandbox, "log-key");
    checkpoint(&sandbox, &key, "kept.note");
    let run = sandbox.run(&[
        "receipts",
        "--bundle",
        "3",
        "--checkpoint",
        "kept.note",
        "--key",
        path(&public),
        "--out",
        "bundle.json",
    ]);
    assert_eq!(run.status, Some(0), "{run:?}");
    std::fs::remove_dir_all(sandbox.work().join(".countersign")).expect("remove the store");
    std::fs::remove_file(sandbox.policy_path()).expect("remove the policy");

    let verify = ["verify", "--bundle", "bundle.json", "--key", path(&public)];
    let run = sandbox.run(&verify);
    assert_eq!(run.status, Some(0), "{run:?}");
    snapshot(&sandbox, "verify_bundle", &run);
    assert!(!sandbox.store_path().exists(), "verify made no store");

    let text = std::fs::read_to_string(sandbox.work().join("bundle.json")).expect("bundle");
    let edited = text.replacen("stripe.refund", "stripe.refunX", 1);
    assert_ne!(edited, text);
    sandbox.write("bundle.json", &edited);
    let run = sandbox.run(&verify);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stdout.starts_with("failed: receipt 3 was altered"),
        "{run:?}"
    );
}

#[test]
fn a_bundle_of_an_action_hash_holds_all_its_receipts() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let (key, public) = keygen(&sandbox, "log-key");
    checkpoint(&sandbox, &key, "kept.note");
    let receipts = sandbox.run(&["receipts", "--json", "--last", "100"]);
    let receipts: serde_json::Value = serde_json::from_str(&receipts.stdout).expect("JSON");
    let hash = receipts
        .as_array()
        .expect("a list")
        .iter()
        .find_map(|receipt| receipt["action_hash"].as_str())
        .expect("a receipt with an action hash")
        .to_owned();
    let expected = receipts
        .as_array()
        .expect("a list")
        .iter()
        .filter(|receipt| receipt["action_hash"] == hash.as_str())
        .count();
    let run = sandbox.run(&["receipts", "--bundle", &hash, "--checkpoint", "kept.note"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let bundle: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(bundle["receipts"].as_array().expect("list").len(), expected);
    sandbox.write("bundle.json", &run.stdout);
    let run = sandbox.run(&["verify", "--bundle", "bundle.json", "--key", path(&public)]);
    assert_eq!(run.status, Some(0), "{run:?}");
}

#[tokio::test]
async fn refusals_say_what_to_do() {
    let sandbox = Sandbox::new();
    let (key, public) = keygen(&sandbox, "log-key");
    // No store: checkpoint and verify create none.
    let run = sandbox.run(&["checkpoint", "--key", path(&key)]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(!sandbox.store_path().exists());
    sandbox.fill_with_demo();
    // The public key is not a signing key.
    let run = sandbox.run(&["checkpoint", "--key", path(&public)]);
    assert_eq!(run.status, Some(1), "{run:?}");
    // --checkpoint without --key.
    checkpoint(&sandbox, &key, "kept.note");
    // A usage error (2), as every flag no run could use is, not a failed check (1).
    let run = sandbox.run(&["verify", "--checkpoint", "kept.note"]);
    assert_eq!(run.status, Some(2), "{run:?}");
    assert!(run.stderr.contains("needs `--key"), "{run:?}");
    let run = sandbox.run(&["verify", "--bundle", "kept.note", "--json"]);
    assert_eq!(run.status, Some(2), "{run:?}");
    assert!(run.stderr.contains("needs `--key"), "{run:?}");
    let run = sandbox.run(&["verify", "--key", path(&public)]);
    assert_eq!(run.status, Some(2), "{run:?}");
    assert!(run.stderr.contains("`--key` is for"), "{run:?}");
    // The key and the checkpoint swapped: the key is named as a key, not as a checkpoint that
    // does not hold.
    let run = sandbox.run(&[
        "verify",
        "--checkpoint",
        path(&public),
        "--key",
        path(&public),
    ]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.one_line_error()
            .contains("is a PEM key, not a signed checkpoint"),
        "{run:?}"
    );
    // A bundle of a receipt newer than the checkpoint.
    one_more_receipt(&sandbox, "pi_newer").await;
    let run = sandbox.run(&["receipts", "--bundle", "12", "--checkpoint", "kept.note"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stderr.contains("is newer than the checkpoint"),
        "{run:?}"
    );
    snapshot(&sandbox, "bundle_newer_than_checkpoint", &run);
}

/// The `log.checkpoint` outbox events in the sandbox's store: (request_id, body).
fn checkpoint_events(sandbox: &Sandbox) -> Vec<(String, serde_json::Value)> {
    let connection = rusqlite::Connection::open(sandbox.store_path()).expect("open the store");
    let mut statement = connection
        .prepare("SELECT request_id, body FROM outbox WHERE kind = 'log.checkpoint' ORDER BY seq")
        .expect("query the outbox");
    statement
        .query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })
        .expect("read the outbox")
        .map(|row| {
            let (request_id, body) = row.expect("a row");
            (
                request_id,
                serde_json::from_str(&body).expect("a JSON body"),
            )
        })
        .collect()
}

/// Each checkpoint also goes to the outbox as a `log.checkpoint` event carrying the whole note
/// (for webhooks to take outside the store); the same head again writes none; `--no-event`
/// writes nothing; without `--out`, standard output is the note alone.
#[tokio::test]
async fn a_checkpoint_is_written_to_the_outbox_once_per_head() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let (key, _) = keygen(&sandbox, "log-key");
    let run = checkpoint(&sandbox, &key, "kept.note");
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(json["event_written"], true, "{run:?}");
    let note = std::fs::read_to_string(sandbox.work().join("kept.note")).expect("written");
    let events = checkpoint_events(&sandbox);
    assert_eq!(events.len(), 1, "{events:?}");
    let (request_id, body) = &events[0];
    assert_eq!(request_id, "", "a log event has no request");
    assert_eq!(body["type"], "log.checkpoint");
    assert_eq!(body["id"], json["event"]);
    assert_eq!(body["data"]["checkpoint"], note.as_str());
    assert_eq!(body["data"]["size"], 11);
    assert_eq!(body["data"]["origin"], json["origin"]);
    assert_eq!(body["data"]["verifier_key"], json["verifier_key"]);

    // The same head: no second event, and standard output is exactly the note.
    let run = sandbox.run(&["checkpoint", "--key", path(&key)]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.stdout, note);
    assert!(
        run.stderr
            .contains("no new outbox event: the log has not grown since event"),
        "{run:?}"
    );
    assert_eq!(checkpoint_events(&sandbox).len(), 1);

    // The log grows: a new event; `--no-event` then writes none.
    one_more_receipt(&sandbox, "pi_event").await;
    let run = sandbox.run(&["checkpoint", "--key", path(&key), "--no-event", "--json"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(json["event"], serde_json::Value::Null);
    assert_eq!(checkpoint_events(&sandbox).len(), 1);
    checkpoint(&sandbox, &key, "later.note");
    let events = checkpoint_events(&sandbox);
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].1["data"]["size"], 12);
}

/// `checkpoint --out FILE` replaces FILE only with a checkpoint of the same log that extends the
/// one it holds; another file, or a checkpoint the log no longer extends (receipts removed
/// since), is kept and refused (found by a first-time user: `--out` silently replaced the copy
/// kept as evidence).
#[tokio::test]
async fn checkpoint_out_replaces_only_an_earlier_checkpoint_the_log_extends() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let (key, _) = keygen(&sandbox, "log-key");
    checkpoint(&sandbox, &key, "kept.note");
    one_more_receipt(&sandbox, "pi_grown").await;
    let run = checkpoint(&sandbox, &key, "kept.note");
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(json["size"], 12);
    let kept = sandbox.work().join("kept.note");
    let note = std::fs::read_to_string(&kept).expect("written");
    assert_eq!(note.lines().nth(1), Some("12"), "{note}");

    let notes = sandbox.work().join("notes.txt");
    std::fs::write(&notes, "my notes\n").expect("write");
    let run = sandbox.run(&["checkpoint", "--key", path(&key), "--out", "notes.txt"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stderr.contains("`notes.txt` was not replaced")
            && run.stderr.contains("not a checkpoint this key signed"),
        "{run:?}"
    );
    assert_eq!(std::fs::read_to_string(&notes).expect("read"), "my notes\n");

    let run = sandbox.run(&["checkpoint", "--key", path(&key), "--out", "-"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stderr.contains("already printed on standard output"),
        "{run:?}"
    );
    assert!(
        !sandbox.work().join("-").exists(),
        "a file named `-` was written"
    );
    // A folder (and so a FIFO or a device) at the path is refused at once, never read.
    std::fs::create_dir(sandbox.work().join("a-folder")).expect("mkdir");
    let run = sandbox.run(&["checkpoint", "--key", path(&key), "--out", "a-folder"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stderr.contains("`a-folder` was not replaced")
            && run.stderr.contains("not a regular file"),
        "{run:?}"
    );
    #[cfg(unix)]
    {
        let fifo = sandbox.work().join("a-fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let run = sandbox.run(&["checkpoint", "--key", path(&key), "--out", "a-fifo"]);
        assert_eq!(run.status, Some(1), "{run:?}");
        assert!(run.stderr.contains("not a regular file"), "{run:?}");
    }

    let deleted = rusqlite::Connection::open(sandbox.store_path())
        .expect("open the store file directly")
        .execute("DELETE FROM receipts WHERE seq >= 11", [])
        .expect("delete the newest receipts");
    assert_eq!(deleted, 2);
    let run = sandbox.run(&["checkpoint", "--key", path(&key), "--out", "kept.note"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stderr
            .contains("it signed 12 receipts and the log now has 10: receipts were removed"),
        "{run:?}"
    );
    assert_eq!(std::fs::read_to_string(&kept).expect("read"), note);
}
