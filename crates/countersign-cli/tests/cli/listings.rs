//! What the operator reads: `receipts`, `effects`, `pending` and `inspect`, as text and JSON.

use crate::support::Sandbox;

fn snapshot(sandbox: &Sandbox, name: &str, args: &[&str]) -> crate::support::Run {
    let run = sandbox.run(args);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!(name, run.transcript()));
    run
}

fn json(run: &crate::support::Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("not JSON ({error}): {run:?}"))
}

#[test]
fn receipts_lists_the_chain_as_text() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    snapshot(&sandbox, "receipts_text", &["receipts"]);
}

#[test]
fn receipts_lists_the_newest_as_json() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let run = snapshot(
        &sandbox,
        "receipts_json_last_3",
        &["receipts", "--json", "--last", "3"],
    );
    let seqs: Vec<u64> = json(&run)
        .as_array()
        .expect("a list of receipts")
        .iter()
        .map(|receipt| receipt["seq"].as_u64().expect("a seq"))
        .collect();
    assert_eq!(seqs, [9, 10, 11]);
}

#[test]
fn receipts_on_an_empty_store_says_so() {
    let sandbox = Sandbox::new();
    drop(sandbox.agent());
    let run = sandbox.run(&["receipts"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.stdout, "no receipts yet\n");
}

#[tokio::test]
async fn effects_lists_every_effect_and_points_at_resolve_for_ambiguous_ones() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let agent = sandbox.agent();
    agent.refund_losing_the_reply("pi_2001", 100).await;
    snapshot(&sandbox, "effects_text", &["effects"]);
    let run = snapshot(
        &sandbox,
        "effects_json_ambiguous",
        &["effects", "--json", "--state", "ambiguous"],
    );
    let effects = json(&run);
    let keys: Vec<&str> = effects
        .as_array()
        .expect("a list of effects")
        .iter()
        .map(|effect| effect["key"].as_str().expect("a key"))
        .collect();
    assert_eq!(keys, ["refund:pi_2001"]);
}

#[tokio::test]
async fn pending_lists_waiting_requests_and_how_to_answer_them() {
    let sandbox = Sandbox::new();
    let agent = sandbox.agent();
    agent.request_approval("pi_3001", 60_000).await;
    // `pending` lists oldest first; requests made within one millisecond tie, and ties are
    // ordered by their random ids, so keep the two apart for a stable snapshot.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    agent.request_approval("pi_3002", 70_000).await;
    let run = snapshot(&sandbox, "pending_text", &["pending"]);
    let listed = run
        .stdout
        .lines()
        .filter(|line| line.starts_with("approval apr_"))
        .count();
    assert_eq!(listed, 2, "{run:?}");
    let run = snapshot(&sandbox, "pending_json", &["pending", "--json"]);
    assert_eq!(json(&run).as_array().expect("a list").len(), 2);
}

#[test]
fn pending_with_nothing_waiting_says_so() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    // The demo leaves one request waiting; once it is denied, nothing is.
    let waiting = json(&sandbox.run(&["pending", "--json"]));
    let waiting = waiting.as_array().expect("a list");
    assert_eq!(waiting.len(), 1, "the demo leaves one request: {waiting:?}");
    let id = waiting[0]["id"].as_str().expect("an id");
    let denied = sandbox.run(&["deny", id, "--as", "human:you"]);
    assert_eq!(denied.status, Some(0), "{denied:?}");
    let run = sandbox.run(&["pending"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.stdout, "no approval requests are waiting\n");
    let run = sandbox.run(&["pending", "--json"]);
    assert_eq!(run.stdout, "[]\n");
}

#[test]
fn inspect_shows_an_effect_and_its_receipts() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    snapshot(
        &sandbox,
        "inspect_effect_text",
        &["inspect", "refund:pi_1004"],
    );
    let run = snapshot(
        &sandbox,
        "inspect_effect_json",
        &["inspect", "refund:pi_1004", "--json"],
    );
    let value = json(&run);
    assert_eq!(value["effect"]["state"], "committed");
    assert_eq!(value["receipts"].as_array().expect("receipts").len(), 4);
}

#[test]
fn inspect_shows_an_approval_by_its_id() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let receipts = sandbox.run(&["receipts", "--json"]);
    let id = json(&receipts)
        .as_array()
        .expect("receipts")
        .iter()
        .find_map(|receipt| receipt["approval_id"].as_str().map(str::to_owned))
        .expect("the demo answered an approval");
    snapshot(&sandbox, "inspect_approval_text", &["inspect", &id]);
}

#[test]
fn inspect_of_an_unknown_id_says_what_it_accepts() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let run = sandbox.run(&["inspect", "refund:pi_404"]);
    assert_eq!(
        run.one_line_error(),
        "nothing is recorded for `refund:pi_404`: give an approval id (apr_…), an attempt id (att_…), an effect key (exactly as `countersign effects` prints it) or an action hash"
    );
    // The key is named as typed, its leading space shown (found by a first-time user:
    // ` job: lead` was named `job: lead`, which exists).
    let run = sandbox.run(&["inspect", " refund:pi_404"]);
    assert!(
        run.one_line_error()
            .starts_with(r"nothing is recorded for `\u{20}refund:pi_404`"),
        "{run:?}"
    );
}

/// Every command that reads or answers what an agent recorded refuses a PostgreSQL schema that
/// holds no store, naming it, and creates nothing there, as it refuses a SQLite file that does
/// not exist (found by a first-time user: `receipts` on a mistyped `?schema=` made every table
/// and said "No receipts yet"). Once an agent has recorded there, the same commands read it.
/// Needs `COUNTERSIGN_TEST_POSTGRES_URL` (fails loudly without it).
#[test]
fn reading_commands_refuse_a_postgres_schema_with_no_store_and_create_nothing() {
    let (url, schema) = crate::support::postgres_schema_url("cli_empty_reads");
    let sandbox = Sandbox::new();
    let commands: [&[&str]; 11] = [
        &["receipts"],
        &["receipts", "--export-anchor"],
        &["stats"],
        &["effects"],
        &["pending"],
        &["inspect", "apr_aaaaaaaaaaaaaaaaaaaa"],
        &["policy", "replay"],
        &["webhooks"],
        &["approve", "apr_aaaaaaaaaaaaaaaaaaaa"],
        &["resolve", "--committed", "refund:pay_1"],
        &["receipts", "--json"],
    ];
    for command in commands {
        let mut args = command.to_vec();
        args.extend(["--store-url", &url]);
        let run = sandbox.run(&args);
        run.assert_no_panic();
        assert_eq!(run.status, Some(1), "{command:?}: {run:?}");
        assert!(
            run.stderr.contains("no Countersign store here")
                && run.stderr.contains(&format!("the schema `{schema}`"))
                && run.stderr.contains("nothing was created"),
            "{command:?}: {run:?}"
        );
    }
    // A schema holding another program's `approvals` is not migrated into a store either.
    let (other, other_schema) = crate::support::postgres_schema_url("cli_other_tables");
    let run = sandbox.run(&["receipts", "--store-url", &other]);
    assert_eq!(run.status, Some(1), "{run:?}");
    let base = std::env::var("COUNTERSIGN_TEST_POSTGRES_URL").expect("checked above");
    let made = std::process::Command::new("psql")
        .args([
            base.as_str(),
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            &format!(
                "CREATE SCHEMA {other_schema}; CREATE TABLE {other_schema}.approvals (id INTEGER);"
            ),
        ])
        .output()
        .expect("run psql");
    assert!(made.status.success(), "{made:?}");
    for command in [
        &["stats"][..],
        &["receipts"],
        &["resolve", "--committed", "job:x"],
    ] {
        let mut args = command.to_vec();
        args.extend(["--store-url", &other]);
        let run = sandbox.run(&args);
        assert_eq!(run.status, Some(1), "{command:?}: {run:?}");
        assert!(
            run.stderr.contains("not a whole Countersign store")
                && run.stderr.contains("nothing was created"),
            "{command:?}: {run:?}"
        );
    }
    // Nothing was created: verify still finds no store (a created one would verify as empty).
    let run = sandbox.run(&["verify", "--store-url", &url]);
    assert_eq!(run.status, Some(3), "{run:?}");
    assert!(run.stdout.contains("no Countersign store here"), "{run:?}");
    // An agent's first call makes the store; then the reading commands read it.
    let run = sandbox.run(&[
        "exec",
        "--store-url",
        &url,
        "--action",
        "stripe.refund",
        "--args",
        r#"{"payment_id":"pay_1","amount":100}"#,
        "--",
        "true",
    ]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let run = sandbox.run(&["receipts", "--store-url", &url, "--json"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert!(
        !json(&run).as_array().expect("a list").is_empty(),
        "{run:?}"
    );
}

/// A SQLite database that is not a Countersign store (another program's, or an empty file) is
/// refused by the reading commands, and nothing is added to it (found by a first-time user:
/// `pending` added every table of a store to `app.db` and said nothing waited).
#[test]
fn reading_commands_refuse_another_programs_database_and_add_nothing() {
    let sandbox = Sandbox::new();
    let app = sandbox.work().join("app.db");
    rusqlite::Connection::open(&app)
        .expect("make a database")
        .execute_batch("CREATE TABLE users (id INTEGER); CREATE TABLE receipts (note TEXT);")
        .expect("another program's tables");
    let empty = sandbox.work().join("empty.db");
    std::fs::write(&empty, b"").expect("an empty file");
    let tables = |path: &std::path::Path| -> Vec<String> {
        let connection = rusqlite::Connection::open(path).expect("open");
        let mut statement = connection
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .expect("query");
        statement
            .query_map([], |row| row.get(0))
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("names")
    };
    for command in [
        &["pending"][..],
        &["receipts"],
        &["stats"],
        &["effects"],
        &["resolve", "--committed", "job:x"],
    ] {
        let app_url = format!("sqlite:{}", app.display());
        let mut args = command.to_vec();
        args.extend(["--store-url", &app_url]);
        let run = sandbox.run(&args);
        run.assert_no_panic();
        assert_eq!(run.status, Some(1), "{command:?}: {run:?}");
        assert!(
            run.stderr
                .contains("not a Countersign store: it has no `meta` table")
                && run.stderr.contains("nothing was changed"),
            "{command:?}: {run:?}"
        );
        let empty_url = format!("sqlite:{}", empty.display());
        let mut args = command.to_vec();
        args.extend(["--store-url", &empty_url]);
        let run = sandbox.run(&args);
        assert_eq!(run.status, Some(1), "{command:?}: {run:?}");
        assert!(
            run.stderr.contains("no Countersign store here"),
            "{command:?}: {run:?}"
        );
    }
    assert_eq!(tables(&app), ["receipts", "users"], "nothing was added");
    assert_eq!(std::fs::metadata(&empty).expect("still there").len(), 0);
}
