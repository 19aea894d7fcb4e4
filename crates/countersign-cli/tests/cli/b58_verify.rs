//! Case B58 (the cases "stores and evidence, second set"): `verify` never says "verified" when
//! nothing was checked. Its five scenarios, each through the binary: (a) an empty store, (b) a
//! log whose rows have NULL hashes, written by hand, (c) a range past the head, (d) a good chain
//! followed by hand-inserted unhashed rows, (e) a healthy chain. Every outcome prints how much
//! was checked, the first and last positions and the log's head.

use crate::support::{Run, Sandbox};

/// The store's file opened behind the kernel's back, as someone with file access would.
fn raw_store(sandbox: &Sandbox) -> rusqlite::Connection {
    rusqlite::Connection::open(sandbox.store_path()).expect("open the store file directly")
}

fn snapshot(sandbox: &Sandbox, name: &str, run: &Run) {
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!(name, run.transcript()));
}

fn json_of(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("{error}: {run:?}"))
}

/// (a) An empty evidence store: unverifiable (3), no head, nothing checked.
#[test]
fn a_an_empty_store_is_unverifiable() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let store = raw_store(&sandbox);
    for table in ["receipts", "effects", "approvals"] {
        store
            .execute(&format!("DELETE FROM {table}"), [])
            .expect("empty the table");
    }
    drop(store);
    let run = sandbox.run(&["verify"]);
    assert_eq!(run.status, Some(3), "{run:?}");
    assert!(
        run.stdout
            .contains("log head: none (no receipt in the store)"),
        "{run:?}"
    );
    snapshot(&sandbox, "b58_a_empty_store", &run);
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.status, Some(3), "{run:?}");
    let report = json_of(&run);
    assert_eq!(report["outcome"], "unverifiable");
    assert_eq!(report["chain"]["checked"], 0);
    assert_eq!(report["chain"]["first_seq"], serde_json::Value::Null);
    assert_eq!(report["chain"]["last_seq"], serde_json::Value::Null);
    assert_eq!(report["chain"]["log_head"], serde_json::Value::Null);
}

/// (b) Rows written before hashing, with NULL hash columns (the table rebuilt without its
/// NOT NULL constraints, as an older tool or a hand-made import could): nothing can be checked,
/// so unverifiable (3), and the first unhashed receipt is named, not skipped.
#[test]
fn b_rows_with_null_hashes_are_unverifiable_and_the_first_is_named() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    raw_store(&sandbox)
        .execute_batch(
            "DELETE FROM effects; DELETE FROM approvals;
             DROP TABLE receipts;
             CREATE TABLE receipts (seq INTEGER PRIMARY KEY, prev_hash TEXT, hash TEXT, body TEXT);
             INSERT INTO receipts (seq, prev_hash, hash, body) VALUES
                 (1, NULL, NULL, '{\"action\":\"stripe.refund\"}'),
                 (2, NULL, NULL, '{\"action\":\"stripe.refund\"}'),
                 (3, NULL, NULL, '{\"action\":\"email.send\"}');",
        )
        .expect("write unhashed rows by hand");
    let run = sandbox.run(&["verify"]);
    assert_eq!(run.status, Some(3), "{run:?}");
    assert!(
        run.stdout.contains(
            "chain unverifiable: no receipt was checked (exit status 3): receipt 1 has no hash, and neither has any receipt after it"
        ) && run.stdout.contains("log head: receipt 3 (no hash)"),
        "{run:?}"
    );
    snapshot(&sandbox, "b58_b_null_hashes", &run);
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.status, Some(3), "{run:?}");
    let report = json_of(&run);
    assert_eq!(report["outcome"], "unverifiable");
    assert_eq!(report["chain"]["checked"], 0);
    assert_eq!(report["chain"]["first_break"]["kind"], "unhashed");
    assert_eq!(report["chain"]["first_break"]["seq"], 1);
    assert_eq!(report["chain"]["log_head"]["seq"], 3);
    // `receipts --verify` reads the same log the same way.
    let run = sandbox.run(&["receipts", "--verify"]);
    assert_eq!(run.status, Some(3), "{run:?}");
}

/// (c) A range with no receipt in it (starting after the head, or ending before it starts) is
/// unverifiable (3) and says what the head is and what to do; a range that ends past the head
/// checks what exists and is still unverifiable.
#[test]
fn c_a_range_past_the_head_is_unverifiable_and_names_the_head() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let run = sandbox.run(&["verify", "--from", "20"]);
    assert_eq!(run.status, Some(3), "{run:?}");
    assert!(
        run.stdout.contains(
            "chain unverifiable: the range starts at receipt 20, after the log's head (receipt 11), so no receipt was checked (exit status 3); check up to the head with `--from 1 --to 11`"
        ),
        "{run:?}"
    );
    snapshot(&sandbox, "b58_c_range_past_head", &run);
    let run = sandbox.run(&["verify", "--from", "20", "--json"]);
    assert_eq!(run.status, Some(3), "{run:?}");
    let report = json_of(&run);
    assert_eq!(report["outcome"], "unverifiable");
    assert_eq!(report["chain"]["checked"], 0);
    assert_eq!(report["chain"]["range"]["from"], 20);
    assert_eq!(report["chain"]["log_head"]["seq"], 11);

    let run = sandbox.run(&["verify", "--from", "5", "--to", "20"]);
    assert_eq!(run.status, Some(3), "{run:?}");
    assert!(
        run.stdout
            .contains("chain unverifiable: 7 receipt(s) checked (receipts 5 to 11)")
            && run.stdout.contains(
                "but the range ends at receipt 20, after the log's head (receipt 11): receipts 12 to 20 do not exist"
            ),
        "{run:?}"
    );
    snapshot(&sandbox, "b58_c_range_ends_past_head", &run);

    // An inverted range is a usage error (clap's exit status 2), whatever the store holds: the
    // case's "(c) is a usage error, not a success". Nothing is read.
    for args in [
        &["verify", "--from", "9", "--to", "5", "--json"][..],
        &["verify", "--from", "9", "--to", "5"][..],
    ] {
        let run = sandbox.run(args);
        assert_eq!(run.status, Some(2), "{run:?}");
        assert_eq!(run.stdout, "", "{run:?}");
        assert!(
            run.stderr.contains(
                "`--from 9` is after `--to 5`: a range runs from its first receipt to its last, such as `--from 5 --to 9`"
            ),
            "{run:?}"
        );
    }

    // `--from 0` is a usage error (clap's exit status 2), not an empty range.
    let run = sandbox.run(&["verify", "--from", "0"]);
    assert_eq!(run.status, Some(2), "{run:?}");
    // An empty store with a range: still unverifiable, never 0.
    let empty = Sandbox::new();
    empty.fill_with_demo();
    raw_store(&empty)
        .execute_batch("DELETE FROM receipts; DELETE FROM effects; DELETE FROM approvals;")
        .expect("empty it");
    let run = empty.run(&["verify", "--from", "1", "--to", "3"]);
    assert_eq!(run.status, Some(3), "{run:?}");
}

/// (d) A good chain followed by rows inserted by hand without hashes: FAILED (1), naming the
/// first unhashed receipt, with what verified before it and the head as stored.
#[test]
fn d_unhashed_rows_after_a_good_chain_fail_naming_the_first() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    raw_store(&sandbox)
        .execute_batch(
            "INSERT INTO receipts (seq, prev_hash, hash, body) VALUES
                 (12, '', '', '{\"action\":\"stripe.refund\"}'),
                 (13, '', '', '{\"action\":\"stripe.refund\"}');",
        )
        .expect("insert unhashed rows by hand");
    let run = sandbox.run(&["verify"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stdout
            .contains("chain BROKEN at receipt 12: receipt 12 has no hash")
            && run
                .stdout
                .contains("11 receipt(s) before it verified (receipts 1 to 11, head sha256:")
            && run.stdout.contains("log head: receipt 13 (no hash)"),
        "{run:?}"
    );
    snapshot(&sandbox, "b58_d_unhashed_after_good_chain", &run);
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    let report = json_of(&run);
    assert_eq!(report["outcome"], "failed");
    assert_eq!(report["chain"]["first_break"]["kind"], "unhashed");
    assert_eq!(report["chain"]["first_break"]["seq"], 12);
    assert_eq!(report["chain"]["checked"], 11);
    assert_eq!(report["chain"]["last_seq"], 11);
    assert_eq!(report["chain"]["log_head"]["seq"], 13);
    // A range that reaches the unhashed rows fails the same way; one before them verifies.
    let run = sandbox.run(&["verify", "--from", "10"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(run.stdout.contains("chain BROKEN at receipt 12"), "{run:?}");
    let run = sandbox.run(&["verify", "--from", "2", "--to", "11", "--json"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(json_of(&run)["chain"]["checked"], 10);
    // A range that starts at the first unhashed row, after the good chain, fails too: it is not
    // a log without hashes (3, which an incremental checker reads as "nothing new yet").
    for from in ["12", "13"] {
        let run = sandbox.run(&["verify", "--from", from, "--json"]);
        assert_eq!(run.status, Some(1), "--from {from}: {run:?}");
        assert_eq!(json_of(&run)["outcome"], "failed", "--from {from}");
    }
}

/// (e) The control: a healthy chain is verified (0), and says how much it checked; a range of
/// it verifies too, linked to the receipt before it.
#[test]
fn e_a_healthy_chain_is_verified_whole_and_by_range() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let report = json_of(&run);
    assert_eq!(report["outcome"], "verified");
    assert_eq!(report["chain"]["checked"], 11);
    assert_eq!(report["chain"]["first_seq"], 1);
    assert_eq!(report["chain"]["last_seq"], 11);
    assert_eq!(report["chain"]["log_head"]["seq"], 11);
    assert_eq!(
        report["chain"]["log_head"]["hash"],
        report["chain"]["head"]["hash"]
    );

    let run = sandbox.run(&["verify", "--from", "3", "--to", "8"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("chain verified: 6 receipt(s) checked (receipts 3 to 8), head sha256:")
            && run.stdout.contains("linked to receipt 2, whose hash holds")
            && run.stdout.contains("log head: receipt 11, sha256:"),
        "{run:?}"
    );
    snapshot(&sandbox, "b58_e_healthy_range", &run);
    let run = sandbox.run(&["verify", "--from", "3", "--to", "8", "--json"]);
    let report = json_of(&run);
    assert_eq!(report["outcome"], "verified");
    assert_eq!(report["chain"]["first_seq"], 3);
    assert_eq!(report["chain"]["last_seq"], 8);
    assert_eq!(report["effects"], serde_json::Value::Null);
}

/// A range is anchored to the receipt before it: an edit there fails the range, though the
/// range's own receipts are intact.
#[test]
fn a_range_fails_when_the_receipt_before_it_was_edited() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let changed = raw_store(&sandbox)
        .execute(
            "UPDATE receipts SET body = replace(body, 'stripe', 'strype') WHERE seq = 4",
            [],
        )
        .expect("edit receipt 4");
    assert_eq!(changed, 1);
    let run = sandbox.run(&["verify", "--from", "5"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.stdout
            .contains("chain BROKEN at receipt 4: receipt 4 was altered"),
        "{run:?}"
    );
    // Deleting it instead leaves a gap the range's start cannot link over.
    raw_store(&sandbox)
        .execute("DELETE FROM receipts WHERE seq = 4", [])
        .expect("delete receipt 4");
    let run = sandbox.run(&["verify", "--from", "5", "--json"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert_eq!(json_of(&run)["chain"]["first_break"]["kind"], "seq_gap");
}

/// A receipt column holding a BLOB or a number (written outside Countersign) is read, and the
/// receipt it breaks is named (found by a first-time user: the read failed on the column type,
/// naming no receipt).
#[test]
fn a_column_of_another_type_names_its_receipt() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    raw_store(&sandbox)
        .execute(
            "UPDATE receipts SET body = CAST(replace(body, 'stripe', 'strype') AS BLOB) WHERE seq = 4",
            [],
        )
        .expect("store receipt 4's body as an edited BLOB");
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert_eq!(json_of(&run)["chain"]["first_break"]["seq"], 4, "{run:?}");
    raw_store(&sandbox)
        .execute("UPDATE receipts SET hash = 42 WHERE seq = 2", [])
        .expect("store receipt 2's hash as a number");
    let run = sandbox.run(&["verify", "--json"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert_eq!(json_of(&run)["chain"]["first_break"]["seq"], 2, "{run:?}");
}

/// Rows inserted below the log's start (seq 0 and negative) are never "intact" (found by a
/// first-time user: `verify` read the log from seq 1 on, and said so).
#[test]
fn rows_inserted_below_the_start_of_the_log_are_reported() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    for seq in [0, -5] {
        raw_store(&sandbox)
            .execute(
                "INSERT INTO receipts (seq, prev_hash, hash, body) SELECT ?1, prev_hash, hash, body FROM receipts WHERE seq = 1",
                [seq],
            )
            .expect("insert a row below the log");
        let run = sandbox.run(&["verify"]);
        assert_ne!(run.status, Some(0), "{run:?}");
        assert!(
            run.stderr.contains(&format!("a receipt row at seq {seq},")),
            "{run:?}"
        );
        assert!(!run.stdout.contains("intact"), "{run:?}");
    }
}

/// `--from`/`--to` check the chain only: they refuse `--anchor`, `--checkpoint` and `--bundle`
/// as usage errors.
#[test]
fn a_range_refuses_the_flags_that_check_the_whole_log() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let run = sandbox.run(&["verify", "--from", "2", "--anchor", "anchor.json"]);
    assert_eq!(run.status, Some(2), "{run:?}");
    assert!(run.stderr.contains("cannot be used with"), "{run:?}");
}

/// A PostgreSQL URL whose schema holds no store is "nothing recorded here yet", as a SQLite file
/// that does not exist is: unverifiable (3), naming the schema, and nothing is created. Needs
/// `COUNTERSIGN_TEST_POSTGRES_URL` (fails loudly without it).
#[test]
fn a_postgres_schema_with_no_store_is_unverifiable_and_left_empty() {
    let (url, schema) = crate::support::postgres_schema_url("cli_nothing");
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["verify", "--store-url", &url]);
    run.assert_no_panic();
    assert_eq!(run.status, Some(3), "{run:?}");
    assert!(
        run.stdout
            .contains("unverifiable: no receipt was checked (exit status 3)")
            && run.stdout.contains(&format!("the schema `{schema}`"))
            && run.stdout.contains("nothing has been recorded in it yet"),
        "{run:?}"
    );
    let run = sandbox.run(&["verify", "--store-url", &url, "--json"]);
    assert_eq!(run.status, Some(3), "{run:?}");
    let report = json_of(&run);
    assert_eq!(report["outcome"], "unverifiable");
    assert_eq!(report["store"], serde_json::Value::Null);
    // Why, as the text says it: a script can tell "no store" from an empty log.
    assert!(
        report["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("no Countersign store here")),
        "{report}"
    );
    let run = sandbox.run(&["receipts", "--verify", "--store-url", &url, "--json"]);
    assert_eq!(run.status, Some(3), "{run:?}");
    let report = json_of(&run);
    assert_eq!(report["outcome"], "unverifiable");
    assert_eq!(report["checked"], 0);
    // Reading created nothing: a later verify still finds no store (a created schema with its
    // tables would verify as an empty log instead, with its own message).
    let run = sandbox.run(&["verify", "--store-url", &url]);
    assert_eq!(run.status, Some(3), "{run:?}");
    assert!(run.stdout.contains("no Countersign store here"), "{run:?}");
}
