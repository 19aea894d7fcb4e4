//! `receipts --verify` and `verify`: an intact chain passes; an edited receipt is named; deleted
//! newest receipts are caught with an anchor and, without one, the output says they cannot be;
//! `verify` also compares the effects table with the receipts.

use crate::support::{Run, Sandbox};

/// Open the sandbox's store behind the kernel's back, as an attacker with file access would.
fn raw_store(sandbox: &Sandbox) -> rusqlite::Connection {
    rusqlite::Connection::open(sandbox.store_path()).expect("open the store file directly")
}

fn snapshot(sandbox: &Sandbox, name: &str, run: &Run) {
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!(name, run.transcript()));
}

#[test]
fn an_intact_chain_verifies_with_the_policy() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let run = sandbox.run(&["verify"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    snapshot(&sandbox, "verify_intact", &run);
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(report["chain"]["checked"], 11);
    assert_eq!(report["chain"]["first_break"], serde_json::Value::Null);
    assert_eq!(report["policy"]["mode"], "enforce");
}

#[test]
fn an_edited_receipt_is_named_as_the_first_break() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let changed = raw_store(&sandbox)
        .execute(
            "UPDATE receipts SET body = replace(body, '\"human:alice\"', '\"human:mallory\"') WHERE seq = 3",
            [],
        )
        .expect("edit receipt 3");
    assert_eq!(changed, 1);

    let run = sandbox.run(&["receipts", "--verify"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stdout
            .starts_with("chain BROKEN at receipt 3: receipt 3 was altered"),
        "{run:?}"
    );
    snapshot(&sandbox, "receipts_verify_tampered", &run);

    let run = sandbox.run(&["receipts", "--verify", "--json"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(report["first_break"]["seq"], 3);
    assert_eq!(report["first_break"]["kind"], "hash_mismatch");
    assert_eq!(report["checked"], 2);

    let run = sandbox.run(&["verify"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(run.stdout.contains("chain BROKEN at receipt 3"), "{run:?}");
}

#[test]
fn an_edited_effects_table_is_caught_by_verify_though_the_chain_is_intact() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    // Flipping a committed refund to `failed` would let it run again; the receipts are untouched.
    let changed = raw_store(&sandbox)
        .execute(
            "UPDATE effects SET state = 'failed' WHERE key = 'refund:pi_1001'",
            [],
        )
        .expect("edit the effects table");
    assert_eq!(changed, 1);

    let run = sandbox.run(&["verify"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stdout.contains("chain verified: 11 receipt(s) checked"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains(
            "effect `refund:pi_1001` is `failed` in the effects table, but its receipts end `committed`"
        ),
        "{run:?}"
    );
    snapshot(&sandbox, "verify_effects_edited", &run);

    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(report["chain"]["first_break"], serde_json::Value::Null);
    let disagreements = &report["effects"]["disagreements"];
    assert_eq!(disagreements[0]["effect_key"], "refund:pi_1001");
    assert_eq!(disagreements[0]["table"], "failed");
    assert_eq!(disagreements[0]["receipts"], "committed");
}

#[test]
fn deleted_newest_receipts_fail_against_an_anchor_and_are_flagged_without_one() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let export = sandbox.run(&["receipts", "--export-anchor"]);
    assert_eq!(export.status, Some(0), "{export:?}");
    let anchor: serde_json::Value = serde_json::from_str(&export.stdout).expect("JSON");
    assert_eq!(anchor["seq"], 11);
    sandbox.write("anchor.json", &export.stdout);

    let deleted = raw_store(&sandbox)
        .execute("DELETE FROM receipts WHERE seq > 8", [])
        .expect("delete the newest receipts");
    assert_eq!(deleted, 3);

    let run = sandbox.run(&["receipts", "--verify", "--anchor", "anchor.json"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(run.stdout.contains("anchor FAILED"), "{run:?}");
    snapshot(&sandbox, "receipts_verify_truncated_with_anchor", &run);

    let run = sandbox.run(&["verify", "--anchor", "anchor.json"]);
    assert_eq!(run.status, Some(1), "{run:?}");

    let run = sandbox.run(&["receipts", "--verify"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("without an anchor, deleting the newest receipts cannot be detected"),
        "{run:?}"
    );
    snapshot(&sandbox, "receipts_verify_truncated_without_anchor", &run);
}

#[test]
fn a_file_that_is_not_an_anchor_is_refused() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    sandbox.write("anchor.json", "{\"head\": 3}");
    let run = sandbox.run(&["receipts", "--verify", "--anchor", "anchor.json"]);
    let message = run.one_line_error();
    assert!(
        message.starts_with("`anchor.json` is not an anchor ("),
        "{message}"
    );
    assert!(
        message.ends_with("): export one with `countersign receipts --export-anchor`"),
        "{message}"
    );
}

/// An anchor is read with the kernel's strict reader and its shape checked: a key given twice,
/// a `seq` of 0, a list, a malformed hash (which used to be blamed on the log: "receipt 18 hashes
/// to …, but the anchor says not a hash at all") and a lane named twice are each refused, saying
/// which.
#[test]
fn an_anchor_that_cannot_mean_one_head_is_refused() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let hash = format!("sha256:{}", "a".repeat(64));
    for (text, expected) in [
        (
            format!("{{\"seq\": 1, \"seq\": 3, \"hash\": \"{hash}\"}}"),
            "key `seq` appears more than once",
        ),
        (
            format!("{{\"seq\": 0, \"hash\": \"{hash}\"}}"),
            "its `seq` is 0",
        ),
        (
            format!("[{{\"seq\": 1, \"hash\": \"{hash}\"}}]"),
            "an anchor is one JSON object",
        ),
        (
            "{\"seq\": 18, \"hash\": \"not a hash at all\"}".to_owned(),
            "is not a receipt hash",
        ),
        (
            format!(
                "{{\"seq\": 1, \"hash\": \"{hash}\", \"lanes\": [{{\"lane\": 2, \"seq\": 1, \"hash\": \"{hash}\"}}, {{\"lane\": 2, \"seq\": 2, \"hash\": \"{hash}\"}}]}}"
            ),
            "names lane 2 twice",
        ),
    ] {
        sandbox.write("anchor.json", &text);
        let run = sandbox.run(&["verify", "--anchor", "anchor.json"]);
        let message = run.one_line_error();
        assert!(
            message.starts_with("`anchor.json` is not an anchor (") && message.contains(expected),
            "{text}: {message}"
        );
    }
}

#[test]
fn an_empty_log_has_no_anchor_to_export() {
    let sandbox = Sandbox::new();
    drop(sandbox.agent());
    let run = sandbox.run(&["receipts", "--export-anchor"]);
    assert_eq!(
        run.one_line_error(),
        "the receipt log is empty: there is nothing to anchor yet"
    );
}

#[test]
fn a_forged_grant_is_caught_by_verify() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    // The demo's used approval (pi_1002) set back to granted would authorize the refund again.
    let changed = raw_store(&sandbox)
        .execute(
            "UPDATE approvals SET state = 'granted' WHERE state = 'consumed'",
            [],
        )
        .expect("edit the approvals table");
    assert!(changed >= 1);
    let run = sandbox.run(&["verify"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stdout
            .contains("granted approvals DISAGREE with the receipts")
            && run.stdout.contains("but its receipts end `consumed`"),
        "{run:?}"
    );
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(
        report["approvals"]["disagreements"][0]["receipts"],
        "consumed"
    );
}

// Case B58: verify has three outcomes with their own exit statuses; nothing checked is never 0.
#[test]
fn an_empty_log_is_unverifiable_with_exit_status_3() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let store = raw_store(&sandbox);
    for table in ["receipts", "effects", "approvals"] {
        store
            .execute(&format!("DELETE FROM {table}"), [])
            .expect("empty the table");
    }
    drop(store);
    for args in [&["receipts", "--verify"][..], &["verify"][..]] {
        let run = sandbox.run(args);
        assert_eq!(run.status, Some(3), "{args:?}: {run:?}");
        assert!(
            run.stdout
                .contains("chain unverifiable: the log is empty, so no receipt was checked"),
            "{run:?}"
        );
    }
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.status, Some(3), "{run:?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(report["outcome"], "unverifiable");
    assert_eq!(report["chain"]["outcome"], "unverifiable");
    assert_eq!(report["chain"]["checked"], 0);
}

#[test]
fn a_receipt_without_a_hash_fails_and_is_named() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let changed = raw_store(&sandbox)
        .execute("UPDATE receipts SET hash = '' WHERE seq = 5", [])
        .expect("blank a hash");
    assert_eq!(changed, 1);
    let run = sandbox.run(&["verify"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stdout
            .contains("chain BROKEN at receipt 5: receipt 5 has no hash")
            && run
                .stdout
                .contains("4 receipt(s) before it verified (receipts 1 to 4, head sha256:"),
        "{run:?}"
    );
    let run = sandbox.run(&["verify", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(report["outcome"], "failed");
    assert_eq!(report["chain"]["first_break"]["kind"], "unhashed");
}

#[test]
fn a_verified_chain_says_how_much_it_checked() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(report["outcome"], "verified");
    assert_eq!(report["chain"]["first_seq"], 1);
    assert_eq!(report["chain"]["head"]["seq"], 11);
}

#[test]
fn policy_check_reads_only_the_policy() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["policy", "check"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert!(
        run.stdout
            .starts_with("policy countersign.yaml loads: sha256:"),
        "{run:?}"
    );
    assert!(crate::support::StoreFiles::read(&sandbox.store_path()).is_absent());
    let run = sandbox.run(&["policy", "check", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(report["mode"], "enforce");
    std::fs::write(sandbox.policy_path(), "version: [").expect("break the policy");
    let run = sandbox.run(&["policy", "check"]);
    assert_eq!(run.status, Some(1), "{run:?}");
}

/// `receipts --verify` and `verify --store-url` on a store file that does not exist: nothing
/// was checked (exit 3, as `verify` without a store), and no file is created.
#[test]
fn a_missing_store_is_unverifiable_for_every_verify_and_is_not_created() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["receipts", "--verify"]);
    assert_eq!(run.status, Some(3), "{run:?}");
    assert!(
        run.stdout
            .starts_with("unverifiable: no receipt was checked"),
        "{run:?}"
    );
    assert!(crate::support::StoreFiles::read(&sandbox.store_path()).is_absent());
    let named = sandbox.tmp().join("nowhere.db");
    let url = format!("sqlite:{}", named.display());
    let run = sandbox.run(&["verify", "--store-url", &url]);
    assert_eq!(run.status, Some(3), "{run:?}");
    assert!(
        run.stdout.contains("unverifiable: no receipt was checked"),
        "{run:?}"
    );
    assert!(!named.exists(), "verify created {}", named.display());
    let run = sandbox.run(&["receipts", "--verify", "--json", "--store-url", &url]);
    assert_eq!(run.status, Some(3), "{run:?}");
    let report: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(report["outcome"], "unverifiable");
}

/// The tables of a SQLite file, sorted: what a verifier must leave as it found.
fn tables_of(path: &std::path::Path) -> Vec<String> {
    let connection = rusqlite::Connection::open(path).expect("open the file directly");
    let mut statement = connection
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .expect("list the tables");
    statement
        .query_map([], |row| row.get::<_, String>(0))
        .expect("read the tables")
        .collect::<Result<_, _>>()
        .expect("table names")
}

/// A verifier only reads: on a SQLite file that is not a Countersign store, or one whose table
/// was dropped, `verify` and `receipts --verify` name what is missing (exit 1) and create no
/// table (they used to create the schema, then fail with raw SQL).
#[test]
fn verify_never_writes_to_a_file_that_is_not_a_store() {
    let sandbox = Sandbox::new();
    let other = sandbox.tmp().join("other.db");
    rusqlite::Connection::open(&other)
        .expect("make another program's database")
        .execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep me');")
        .expect("fill it");
    let url = format!("sqlite:{}", other.display());
    for args in [
        &["verify", "--store-url", &url][..],
        &["receipts", "--verify", "--store-url", &url][..],
    ] {
        let run = sandbox.run(args);
        assert_eq!(run.status, Some(1), "{args:?}: {run:?}");
        assert!(
            run.stderr
                .contains("not a Countersign store: it has no `meta` table")
                && run.stderr.contains("nothing was changed"),
            "{run:?}"
        );
        assert_eq!(tables_of(&other), ["notes"], "{args:?} changed the file");
    }

    sandbox.fill_with_demo();
    raw_store(&sandbox)
        .execute_batch("DROP TABLE effects")
        .expect("drop a table");
    let before = tables_of(&sandbox.store_path());
    let run = sandbox.run(&["verify"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stderr
            .contains("not a Countersign store: it has no `effects` table"),
        "{run:?}"
    );
    assert_eq!(
        tables_of(&sandbox.store_path()),
        before,
        "verify re-created a table"
    );

    let garbage = sandbox.tmp().join("garbage.db");
    std::fs::write(
        &garbage,
        "this is not a database, and it is long enough to have a header",
    )
    .expect("write a text file");
    let url = format!("sqlite:{}", garbage.display());
    let run = sandbox.run(&["verify", "--store-url", &url]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stderr.contains("not a readable SQLite database"),
        "{run:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&garbage).expect("read it back"),
        "this is not a database, and it is long enough to have a header"
    );
}

/// `verify` and `receipts --verify` leave a closed store's files byte for byte as they were, and
/// no `-wal` or `-shm` beside them: a read-only SQLite connection creates both to read a WAL
/// database and cannot remove them, so they used to be left behind, empty.
#[test]
fn verify_leaves_a_closed_store_as_it_found_it() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let log = format!("{}-wal", sandbox.store_path().display());
    assert!(
        !std::path::Path::new(&log).exists(),
        "the demo closed its store"
    );
    let before = crate::support::StoreFiles::read(&sandbox.store_path());
    for args in [&["verify"][..], &["receipts", "--verify"][..]] {
        let run = sandbox.run(args);
        assert_eq!(run.status, Some(0), "{args:?}: {run:?}");
        assert_eq!(
            crate::support::StoreFiles::read(&sandbox.store_path()),
            before,
            "{args:?} left the store's files changed"
        );
    }
}
