//! `receipts --export jsonl|ocsf [--after SEQ]` (issue #23): JSONL lines are the stored bodies
//! and re-check against the chain; an export resumes after a seq; a position past the head, an
//! altered receipt and a missing store are refused by name; a closed pipe ends it quietly; every
//! OCSF event validates against the vendored OCSF 1.8.0 schema.

use std::io::BufRead;

use countersign::Principal;
use countersign::clock::Timestamp;
use countersign::evidence::{ProcessExit, ReceiptDraft, ReceiptKind, ReceiptOutcome};
use countersign::id::{ApprovalId, AttemptId, EffectKey};
use countersign::store::{SqliteStore, Store};
use serde_json::Value;

use crate::ocsf_schema::Schema;
use crate::support::Sandbox;

/// `(hash, body)` of every stored receipt, read behind the kernel's back.
fn stored_rows(sandbox: &Sandbox) -> Vec<(String, String)> {
    let connection =
        rusqlite::Connection::open(sandbox.store_path()).expect("open the store file directly");
    let mut statement = connection
        .prepare("SELECT hash, body FROM receipts ORDER BY seq")
        .expect("prepare");
    statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("query")
        .map(|row| row.expect("a row"))
        .collect()
}

fn lines(stdout: &str) -> Vec<&str> {
    stdout.lines().collect()
}

#[test]
fn jsonl_lines_are_the_stored_bodies_and_re_check_against_the_chain() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let run = sandbox.run(&["receipts", "--export", "jsonl"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    let rows = stored_rows(&sandbox);
    let exported = lines(&run.stdout);
    assert_eq!(exported.len(), 11, "{run:?}");
    let mut previous = countersign::evidence::GENESIS_HASH.to_owned();
    for (index, (line, (hash, body))) in exported.iter().zip(&rows).enumerate() {
        assert_eq!(line, body, "line {} is not the stored body", index + 1);
        // The line alone re-checks: its SHA-256 is its hash, its prev_hash the line before's.
        assert_eq!(
            &countersign::canonical::sha256_prefixed(line.as_bytes()),
            hash
        );
        let parsed: Value = serde_json::from_str(line).expect("a JSON line");
        assert_eq!(parsed["seq"], index as u64 + 1);
        assert_eq!(parsed["prev_hash"], previous.as_str());
        previous = hash.clone();
    }
    let anchor = sandbox.run(&["receipts", "--export-anchor"]);
    let anchor: Value = serde_json::from_str(&anchor.stdout).expect("an anchor");
    assert_eq!(
        anchor["hash"],
        previous.as_str(),
        "the last line is the head"
    );
    // `--json` changes nothing: every line is JSON already.
    let with_json = sandbox.run(&["receipts", "--export", "jsonl", "--json"]);
    assert_eq!(with_json.stdout, run.stdout);
}

#[test]
fn an_export_resumes_after_the_last_seq_a_consumer_saw() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let all = sandbox.run(&["receipts", "--export", "jsonl"]);
    let rest = sandbox.run(&["receipts", "--export", "jsonl", "--after", "8"]);
    assert_eq!(rest.status, Some(0), "{rest:?}");
    assert_eq!(lines(&rest.stdout), lines(&all.stdout)[8..].to_vec());
    // At the head there is nothing new: no line, success, so a poller just tries again later.
    let at_head = sandbox.run(&["receipts", "--export", "ocsf", "--after", "11"]);
    assert_eq!(at_head.status, Some(0), "{at_head:?}");
    assert_eq!(at_head.stdout, "");
    assert_eq!(at_head.stderr, "");
}

#[test]
fn a_position_past_the_head_is_refused_naming_the_head() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let run = sandbox.run(&["receipts", "--export", "jsonl", "--after", "12"]);
    let message = run.one_line_error();
    assert!(
        message.starts_with(
            "`--after 12` is past the head of the receipt log (place 11): this is not the store the position came from"
        ),
        "{run:?}"
    );
    // `--after` means nothing without `--export`: a usage error.
    let run = sandbox.run(&["receipts", "--after", "3"]);
    assert_eq!(run.status, Some(2), "{run:?}");
    let run = sandbox.run(&["receipts", "--export", "jsonl", "--verify"]);
    assert_eq!(run.status, Some(2), "{run:?}");
}

#[test]
fn an_altered_receipt_stops_the_export_after_the_intact_lines() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let all = sandbox.run(&["receipts", "--export", "jsonl"]);
    let changed = rusqlite::Connection::open(sandbox.store_path())
        .expect("open the store file directly")
        .execute(
            "UPDATE receipts SET body = replace(body, '\"human:alice\"', '\"human:mallory\"') WHERE seq = 3",
            [],
        )
        .expect("edit receipt 3");
    assert_eq!(changed, 1);
    for format in ["jsonl", "ocsf"] {
        let run = sandbox.run(&["receipts", "--export", format]);
        assert_eq!(run.status, Some(1), "{run:?}");
        assert_eq!(
            lines(&run.stdout).len(),
            2,
            "only the intact lines: {run:?}"
        );
        assert!(
            run.stderr
                .starts_with("error: receipt 3 was altered: its content hashes to sha256:"),
            "{run:?}"
        );
        assert!(
            run.stderr
                .ends_with("run `countersign receipts --verify`\n")
        );
    }
    // A consumer already past it resumes: what follows still links to the stored hash.
    let run = sandbox.run(&["receipts", "--export", "jsonl", "--after", "3"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(lines(&run.stdout), lines(&all.stdout)[3..].to_vec());
}

#[test]
fn a_deleted_receipt_stops_the_export_at_the_gap() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let deleted = rusqlite::Connection::open(sandbox.store_path())
        .expect("open the store file directly")
        .execute("DELETE FROM receipts WHERE seq = 6", [])
        .expect("delete receipt 6");
    assert_eq!(deleted, 1);
    let run = sandbox.run(&["receipts", "--export", "ocsf"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert_eq!(
        lines(&run.stdout).len(),
        5,
        "only the lines before the gap: {run:?}"
    );
    assert_eq!(
        run.stderr,
        "error: receipt 6 is missing where it belongs: the next one found is 7 (it was removed, or moved later in the log); the chain is broken there, so the export stops before it: run `countersign receipts --verify`\n"
    );
    // Receipt 7 no longer links to what precedes it.
    let run = sandbox.run(&["receipts", "--export", "jsonl", "--after", "6"]);
    let message = run.one_line_error();
    assert!(
        message.starts_with(
            "the receipt at place 6, the one `--after 6` resumes from, is missing from the log"
        ),
        "{run:?}"
    );
}

#[test]
fn a_missing_store_is_refused_and_never_created() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["receipts", "--export", "jsonl"]);
    let message = run.one_line_error();
    assert!(message.starts_with("no store at `"), "{run:?}");
    assert!(!sandbox.store_path().exists(), "the export made a store");
}

/// Append receipts straight to the sandbox store, one per kind and outcome the kernel writes,
/// with every field an OCSF event maps; returns how many.
async fn append_every_kind(store: &SqliteStore) -> usize {
    let now = Timestamp::from_millis(1_764_000_000_000);
    let principal = Principal::new("agent:support-bot").expect("a principal");
    let approval = ApprovalId::generate();
    let attempt = |outcome, reason: Option<&str>| {
        ReceiptDraft {
            kind: Some(ReceiptKind::Attempt),
            attempt_id: Some(AttemptId::generate()),
            action: Some("stripe.refund".to_owned()),
            principal: Some(principal.clone()),
            resource: Some("payment:pi_9".to_owned()),
            environment: Some("test".to_owned()),
            effect_key: Some(EffectKey::new("refund:pi_9").expect("an effect key")),
            decision: Some("allow".to_owned()),
            mode: Some("enforce".to_owned()),
            attempt_started_at: Some(Timestamp::from_millis(1_763_999_999_250)),
            ..ReceiptDraft::default()
        }
        .with_outcome(outcome, reason)
    };
    let about_approval = |kind, outcome, reason: Option<&str>| {
        // Nobody answers an expiry or a voided request: Countersign itself records it.
        let by_a_person = !matches!(
            kind,
            ReceiptKind::ApprovalExpired | ReceiptKind::ApprovalVoided
        );
        ReceiptDraft {
            kind: Some(kind),
            action: Some("stripe.refund".to_owned()),
            approval_id: Some(approval.clone()),
            approver: by_a_person.then(|| "human:alice".to_owned()),
            approver_groups: by_a_person.then(|| vec!["finance".to_owned()]),
            channel: by_a_person.then(|| "cli".to_owned()),
            authentication: by_a_person.then(|| "asserted".to_owned()),
            ..ReceiptDraft::default()
        }
        .with_outcome(outcome, reason)
    };
    let effect = |kind, outcome, approver: Option<&str>| {
        ReceiptDraft {
            kind: Some(kind),
            effect_key: Some(EffectKey::new("refund:pi_9").expect("an effect key")),
            approver: approver.map(str::to_owned),
            ..ReceiptDraft::default()
        }
        .with_outcome(outcome, None)
    };
    let mut with_exit = attempt(ReceiptOutcome::Committed, None);
    with_exit.exit_status = Some(ProcessExit::code(0));
    with_exit.approval_id = Some(approval.clone());
    let mut observed = attempt(ReceiptOutcome::Observed, Some("would_deny"));
    observed.mode = Some("observe".to_owned());
    let mut failed = attempt(ReceiptOutcome::Failed, None);
    failed.detail = Some("card_declined".to_owned());
    let drafts = vec![
        with_exit,
        observed,
        failed,
        attempt(ReceiptOutcome::Ambiguous, Some("timeout")),
        attempt(ReceiptOutcome::Refused, Some("duplicate")),
        attempt(ReceiptOutcome::HandedOff, None),
        about_approval(ReceiptKind::Answer, ReceiptOutcome::Granted, None),
        about_approval(ReceiptKind::Answer, ReceiptOutcome::Counted, None),
        about_approval(ReceiptKind::Answer, ReceiptOutcome::Denied, None),
        about_approval(
            ReceiptKind::Answer,
            ReceiptOutcome::Refused,
            Some("not_entitled"),
        ),
        about_approval(ReceiptKind::ApprovalExpired, ReceiptOutcome::Expired, None),
        about_approval(ReceiptKind::ApprovalVoided, ReceiptOutcome::Voided, None),
        about_approval(ReceiptKind::ApprovalRevoked, ReceiptOutcome::Revoked, None),
        about_approval(
            ReceiptKind::ApprovalRevoked,
            ReceiptOutcome::Withdrawn,
            None,
        ),
        about_approval(
            ReceiptKind::ApprovalCancelled,
            ReceiptOutcome::Cancelled,
            None,
        ),
        effect(ReceiptKind::LeaseExpired, ReceiptOutcome::Ambiguous, None),
        effect(
            ReceiptKind::Resolution,
            ReceiptOutcome::Failed,
            Some("human:bob"),
        ),
        effect(
            ReceiptKind::Resolution,
            ReceiptOutcome::Committed,
            Some("human:bob"),
        ),
    ];
    let count = drafts.len();
    for draft in drafts {
        store
            .append_receipt(draft, now)
            .await
            .expect("append a receipt");
    }
    count
}

/// Export `sandbox`'s store as OCSF and validate every event; returns the events.
fn export_and_validate(sandbox: &Sandbox) -> Vec<Value> {
    let run = sandbox.run(&["receipts", "--export", "ocsf"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    let schema = Schema::ocsf_1_8_0();
    let rows = stored_rows(sandbox);
    let events: Vec<Value> = run
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("an OCSF event per line"))
        .collect();
    assert_eq!(events.len(), rows.len(), "one event per receipt");
    for (index, (event, (hash, body))) in events.iter().zip(&rows).enumerate() {
        let errors = schema.validate(event);
        assert!(
            errors.is_empty(),
            "event {} breaks OCSF 1.8.0: {errors:#?}\n{event:#}",
            index + 1
        );
        assert_eq!(event["metadata"]["version"], "1.8.0");
        assert_eq!(event["metadata"]["uid"], hash.as_str());
        assert_eq!(event["metadata"]["sequence"], index as u64 + 1);
        let body: Value = serde_json::from_str(body).expect("a stored body");
        assert_eq!(event["unmapped"], body, "the whole receipt is kept");
        assert_eq!(
            event["metadata"]["product"]["version"],
            env!("CARGO_PKG_VERSION")
        );
    }
    events
}

#[test]
fn every_ocsf_event_of_the_demo_validates_against_ocsf_1_8_0() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let events = export_and_validate(&sandbox);
    assert_eq!(events.len(), 11);
    // A few events whole, for review (times, hashes, ids and the product version redacted).
    let shown: Vec<Value> = events
        .into_iter()
        .take(4)
        .map(|mut event| {
            event["metadata"]["product"]["version"] = "[VERSION]".into();
            event
        })
        .collect();
    let text = serde_json::to_string_pretty(&shown).expect("JSON");
    let mut settings = sandbox.settings();
    settings.add_filter(r#""(time|start_time)": \d{13}"#, r#""$1": "[MILLIS]""#);
    settings.add_filter(r#""duration": \d+"#, r#""duration": "[MILLIS]""#);
    settings.bind(|| insta::assert_snapshot!("export_ocsf_demo", text));
}

#[tokio::test]
async fn every_receipt_kind_and_outcome_maps_to_a_valid_ocsf_event() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let store = SqliteStore::open(sandbox.store_path()).expect("open the sandbox store");
    let appended = append_every_kind(&store).await;
    drop(store);
    let events = export_and_validate(&sandbox);
    let added = &events[events.len() - appended..];
    let summary: Vec<String> = added
        .iter()
        .map(|event| {
            format!(
                "{} {} -> type_uid {} status {} severity {} operation {} actor {} disposition {}",
                event["metadata"]["event_code"].as_str().unwrap_or("?"),
                event["unmapped"]["outcome"].as_str().unwrap_or("?"),
                event["type_uid"],
                event["status"].as_str().unwrap_or("?"),
                event["severity"].as_str().unwrap_or("?"),
                event["api"]["operation"].as_str().unwrap_or("?"),
                event["actor"]["user"]["name"]
                    .as_str()
                    .or(event["actor"]["app_name"].as_str())
                    .unwrap_or("?"),
                event["disposition"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    // The mapping table of docs/export.md, row by row.
    let text = summary.join("\n");
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("export_ocsf_every_kind", text));
    let committed = &added[0];
    assert_eq!(committed["duration"], 750);
    assert_eq!(committed["api"]["response"]["code"], 0);
    assert_eq!(committed["disposition_id"], 8, "it consumed an approval");
}

#[test]
fn a_closed_pipe_ends_the_export_quietly() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    // Enough receipts that the export outgrows the pipe's buffer.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let store = SqliteStore::open(sandbox.store_path()).expect("open the sandbox store");
        for _ in 0..40 {
            append_every_kind(&store).await;
        }
    });
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["receipts", "--export", "ocsf"])
        .current_dir(sandbox.work())
        .env_remove("COUNTERSIGN_POLICY")
        .env_remove("COUNTERSIGN_STORE_URL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the countersign binary");
    let mut first = String::new();
    {
        let stdout = child.stdout.take().expect("a stdout pipe");
        std::io::BufReader::new(stdout)
            .read_line(&mut first)
            .expect("read the first line");
        // Dropping the reader closes the pipe, as `| head -1` does.
    }
    let output = child.wait_with_output().expect("wait for the export");
    assert!(first.contains("\"class_uid\":6003"), "{first}");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}
