//! Bad input: one clear line, exit status 1 (2 for usage errors), and nothing written.

use crate::support::{Sandbox, StoreFiles};

/// An id of the right shape that no request has.
const UNKNOWN_ID: &str = "apr_aaaaaaaaaaaaaaaaaaaa";

/// Run `args` on a store filled by the demo; check the run fails with `expected` and leaves the
/// store's files byte for byte as they were.
fn check_refused(sandbox: &Sandbox, args: &[&str], expected: &str) {
    let before = StoreFiles::read(&sandbox.store_path());
    assert!(!before.is_absent(), "the test needs a store");
    let run = sandbox.run(args);
    assert_eq!(run.one_line_error(), expected);
    assert_eq!(
        StoreFiles::read(&sandbox.store_path()),
        before,
        "`countersign {}` changed the store",
        args.join(" ")
    );
}

#[test]
fn refuses_an_unknown_request_id() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    for verb in ["approve", "deny"] {
        check_refused(
            &sandbox,
            &[verb, UNKNOWN_ID, "--as", "human:alice"],
            "no approval request `apr_aaaaaaaaaaaaaaaaaaaa`: list them with `countersign pending`",
        );
    }
}

#[test]
fn refuses_a_malformed_request_id() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    check_refused(
        &sandbox,
        &["approve", "apr_NOT-AN-ID", "--as", "human:alice"],
        "`apr_NOT-AN-ID` is not an approval request id: expected `apr_` followed by 20 characters of `a`-`z` and `2`-`7`; list them with `countersign pending`",
    );
}

#[test]
fn refuses_an_empty_approver() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    check_refused(
        &sandbox,
        &["approve", UNKNOWN_ID, "--as", " "],
        "`--as` is empty: say who is answering, for example `--as human:alice`",
    );
}

/// Issue #19: one shape for an approver id; `human:`, `:` and `human: bob` never reach a receipt.
#[test]
fn refuses_a_malformed_approver_saying_the_expected_shape() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    for (given, problem) in [
        ("human:", "a part before or after a `:` is empty"),
        (":", "a part before or after a `:` is empty"),
        ("human: bob", "it contains whitespace"),
    ] {
        check_refused(
            &sandbox,
            &["approve", UNKNOWN_ID, "--as", given],
            &format!(
                "`--as`: `{given}` is not an approver id: {problem}: write {}",
                countersign::approver::ApproverId::EXPECTED
            ),
        );
    }
}

#[tokio::test]
async fn a_second_different_answer_is_refused_with_the_stored_one() {
    let sandbox = Sandbox::new();
    let agent = sandbox.agent();
    let id = agent.request_approval("pi_4001", 60_000).await;
    let first = sandbox.run(&["approve", id.as_str(), "--as", "human:alice"]);
    assert_eq!(first.status, Some(0), "{first:?}");

    // Refused, the request unchanged, and the refused answer recorded with who sent it.
    let second = sandbox.run(&["deny", id.as_str(), "--as", "human:bob"]);
    assert_eq!(
        second.one_line_error(),
        format!(
            "approval `{id}` was already answered: it is `granted` by `human:alice`; the first answer stands"
        )
    );
    let inspected = sandbox.run(&["inspect", id.as_str(), "--json"]);
    let inspected: serde_json::Value =
        serde_json::from_str(&inspected.stdout).expect("inspect --json prints JSON");
    assert_eq!(inspected["approval"]["state"], "granted");
    let last = inspected["receipts"]
        .as_array()
        .and_then(|receipts| receipts.last())
        .expect("the answers have receipts");
    assert_eq!(last["outcome"], "refused");
    assert_eq!(last["reason"], "already_decided");
    assert_eq!(last["approver"], "human:bob");

    // The identical answer again is not an error: it says nothing changed, and the state.
    let repeat = sandbox.run(&["approve", id.as_str(), "--as", "human:alice"]);
    assert_eq!(repeat.status, Some(0), "{repeat:?}");
    assert_eq!(
        repeat.stdout,
        format!(
            "you had already approved {id}: nothing changed (it is `granted`, 1 of 1 approval)\n"
        )
    );
    assert!(first.stdout.starts_with("approved "), "{first:?}");
}

#[test]
fn refuses_to_resolve_an_effect_that_is_not_ambiguous() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    check_refused(
        &sandbox,
        &["resolve", "refund:pi_1001", "--failed", "--as", "human:ops"],
        "cannot resolve `refund:pi_1001`: the effect is `committed`, not ambiguous: only an ambiguous effect can be resolved",
    );
    check_refused(
        &sandbox,
        &[
            "resolve",
            "refund:pi_404",
            "--committed",
            "--as",
            "human:ops",
        ],
        "cannot resolve `refund:pi_404`: no effect has this key: list effects with `countersign effects`",
    );
}

#[test]
fn a_missing_store_is_never_created() {
    let sandbox = Sandbox::new();
    // `receipts --verify` and `verify` answer "unverifiable" (exit 3) instead: see
    // `chain::a_missing_store_is_unverifiable_for_every_verify_and_is_not_created`.
    let every_reader_and_writer: [&[&str]; 7] = [
        &["pending"],
        &["approve", UNKNOWN_ID, "--as", "human:alice"],
        &["deny", UNKNOWN_ID, "--as", "human:alice"],
        &["resolve", "refund:pi_1", "--committed", "--as", "human:ops"],
        &["receipts"],
        &["effects"],
        &["inspect", "refund:pi_1"],
    ];
    for args in every_reader_and_writer {
        let run = sandbox.run(args);
        assert_eq!(
            run.one_line_error(),
            // Beside a policy that exists, the store is the agent's to make: say so, not where
            // else to look.
            "no store at `./.countersign/countersign.db` yet: nothing has been recorded under `countersign.yaml`; the agent's first call makes it (the kernel API, `countersign exec` or `countersign check`), so there is nothing to show until then",
            "{args:?}"
        );
        assert!(
            !sandbox.work().join(".countersign").exists(),
            "`countersign {}` created the store folder",
            args.join(" ")
        );
    }
    // A store named with --store-url is not created either.
    let run = sandbox.run(&[
        "--store-url",
        "sqlite:elsewhere/agent.db",
        "approve",
        UNKNOWN_ID,
        "--as",
        "human:alice",
    ]);
    assert!(
        run.one_line_error()
            .starts_with("no store at `elsewhere/agent.db`: "),
        "{run:?}"
    );
    assert!(!sandbox.work().join("elsewhere").exists());
    // Nor one named in the `sqlite:///absolute` form.
    let absolute = sandbox.work().join("absolute.db");
    let url = format!("sqlite://{}", absolute.display());
    let run = sandbox.run(&["--store-url", &url, "pending"]);
    run.one_line_error();
    assert!(StoreFiles::read(&absolute).is_absent());
}

#[test]
fn refuses_an_unknown_store_scheme() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["--store-url", "redis://localhost/0", "pending"]);
    assert_eq!(
        run.one_line_error(),
        "cannot open store `redis://localhost/0`: unknown store scheme `redis`: use `sqlite:PATH` (the default), `postgres://USER@HOST/DATABASE` or `memory:`"
    );
    assert!(StoreFiles::read(&sandbox.store_path()).is_absent());
}

#[test]
fn refuses_a_folder_named_as_the_store() {
    let sandbox = Sandbox::new();
    let folder = sandbox.work().join("stores");
    std::fs::create_dir_all(&folder).expect("a folder");
    let url = format!("sqlite:{}", folder.display());
    let run = sandbox.run(&["--store-url", &url, "pending"]);
    let error = run.one_line_error();
    assert!(
        error.contains("is a folder, not a database file: name a file inside it"),
        "{error}"
    );
    assert!(error.contains("countersign.db"), "{error}");
    assert_eq!(
        std::fs::read_dir(&folder).expect("readable").count(),
        0,
        "nothing was written into the folder"
    );
}

#[test]
fn refuses_a_file_that_is_not_a_database_and_leaves_it_as_it_was() {
    let sandbox = Sandbox::new();
    let file = sandbox.work().join("notes.txt");
    std::fs::write(&file, "not a database, just notes\n".repeat(100)).expect("a file");
    let before = std::fs::read(&file).expect("readable");
    let url = format!("sqlite:{}", file.display());
    let run = sandbox.run(&["--store-url", &url, "pending"]);
    let error = run.one_line_error();
    assert!(
        error.contains("the file is not a SQLite database"),
        "{error}"
    );
    assert!(error.contains("move this file aside"), "{error}");
    assert_eq!(std::fs::read(&file).expect("readable"), before, "unchanged");
}

#[test]
fn refuses_an_effect_key_that_cannot_exist() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    check_refused(
        &sandbox,
        &["resolve", "", "--committed", "--as", "human:ops"],
        "`` is not an effect key (effect key is empty: the effect template must render to at least one character): list them with `countersign effects --state ambiguous`",
    );
}

#[test]
fn usage_errors_exit_with_status_2_and_write_nothing() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let before = StoreFiles::read(&sandbox.store_path());
    let usage_errors: [&[&str]; 6] = [
        &["approve"],
        &["resolve", "refund:pi_1004"],
        &["resolve", "refund:pi_1004", "--committed", "--failed"],
        &["receipts", "--last", "0"],
        &["effects", "--state", "lost"],
        &["frobnicate"],
    ];
    for args in usage_errors {
        let run = sandbox.run(args);
        assert_eq!(run.status, Some(2), "{run:?}");
        assert_eq!(run.stdout, "", "{run:?}");
        assert!(run.stderr.starts_with("error: "), "{run:?}");
        assert!(run.stderr.contains("--help"), "no pointer to help: {run:?}");
    }
    assert_eq!(StoreFiles::read(&sandbox.store_path()), before);
}

#[test]
fn serve_refuses_a_public_address_without_a_proxy_and_a_missing_store() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    check_refused(
        &sandbox,
        &["serve", "--listen", "0.0.0.0:0"],
        "refusing to listen on `0.0.0.0:0` without TLS: the approval service has no TLS of its own; keep the default loopback address (127.0.0.1:8780) and reach it through a reverse proxy that terminates TLS, then pass `--behind-proxy` to listen where the proxy can reach it (see docs/approval-service.md)",
    );
    let run = sandbox.run(&["serve", "--store-url", "sqlite:nowhere/x.db"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert!(
        run.one_line_error()
            .starts_with("no store at `nowhere/x.db`"),
        "{run:?}"
    );
}

/// A port another process holds is named, with another port to try (found by a first-time
/// user: the suggestion was the very port in use).
#[test]
fn serve_on_a_port_in_use_suggests_another() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = taken.local_addr().expect("its address").port();
    let address = format!("127.0.0.1:{port}");
    let run = sandbox.run(&["serve", "--listen", &address]);
    assert_eq!(run.status, Some(1), "{run:?}");
    let message = run.one_line_error();
    assert!(
        message.starts_with(&format!("cannot listen on `{address}`"))
            && message.contains("another process listens there"),
        "{run:?}"
    );
    let suggested = message
        .rsplit("--listen ")
        .next()
        .and_then(|rest| rest.split('`').next())
        .expect("a suggested address");
    assert_ne!(suggested, address, "{run:?}");
    assert!(suggested.starts_with("127.0.0.1:"), "{run:?}");
    drop(taken);
}

#[test]
fn serve_says_why_a_host_name_cannot_be_listened_on() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["serve", "--listen", "localhost:8780"]);
    assert_eq!(run.status, Some(2), "a usage error: {run:?}");
    assert!(
        run.stderr.contains(
            "`localhost:8780` is not an address to listen on: `localhost` is not an IP address (host names are not resolved, so that the address checked for loopback is the one bound): give `127.0.0.1:8780` or `[::1]:8780`"
        ),
        "{run:?}"
    );
    let run = sandbox.run(&["serve", "--listen", "8780"]);
    assert!(
        run.stderr.contains(
            "`8780` is not an address to listen on: give an IP address and a port, such as `127.0.0.1:8080` or `[::1]:8080`"
        ),
        "{run:?}"
    );
}

/// Issue #32: `--upstream-ca` only with an https:// upstream, and only a file of certificates.
#[test]
fn refuses_an_upstream_ca_without_an_https_upstream_or_without_certificates() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let not_pem = sandbox.write("not-a-ca.pem", "hello\n");
    let not_pem = not_pem.to_str().expect("a UTF-8 path");
    let gateway = |url: &str| {
        vec![
            "gateway".to_owned(),
            "--alias".to_owned(),
            "crm".to_owned(),
            "--principal".to_owned(),
            "agent:x".to_owned(),
            "--upstream-url".to_owned(),
            url.to_owned(),
            "--upstream-ca".to_owned(),
            not_pem.to_owned(),
        ]
    };
    let plain = gateway("http://127.0.0.1:9/mcp");
    let plain: Vec<&str> = plain.iter().map(String::as_str).collect();
    check_refused(
        &sandbox,
        &plain,
        "--upstream-ca is for an https:// --upstream-url: give the upstream's https:// address, or leave --upstream-ca out",
    );
    let tls = gateway("https://127.0.0.1:9/mcp");
    let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
    let run = sandbox.run(&tls);
    let message = run.one_line_error();
    assert!(
        message.starts_with("--upstream-ca: the CA file `")
            && message.contains("BEGIN CERTIFICATE"),
        "{message}"
    );
}

/// With `--json`, an error is JSON too: one object on standard error, nothing on standard
/// output, exit 1.
#[test]
fn with_json_an_error_is_one_json_object() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["effects", "--json", "--store-url", "sqlite:nowhere.db"]);
    assert_eq!(run.status, Some(1), "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    let error: serde_json::Value =
        serde_json::from_str(run.stderr.trim()).expect("the error is one JSON object");
    assert_eq!(error["exit_status"], 1);
    assert!(
        error["error"]
            .as_str()
            .is_some_and(|message| message.contains("no store at `nowhere.db`")),
        "{error}"
    );
}

/// A new user's trial: values no run could use are usage errors (exit status 2) that say what
/// to give instead, before anything is decided or recorded: a zero timeout (it ended the
/// command at random, `ambiguous`), an empty action name (a receipt with a blank action), and
/// a "did nothing" exit status outside 1–255 (0 was silently ignored), and a note longer than
/// the API's and the forms' limit (the CLI kept it whole).
#[test]
fn refuses_values_no_run_could_use() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let before = StoreFiles::read(&sandbox.store_path());
    let long_note = "n".repeat(5000);
    for (args, expected) in [
        (
            &[
                "exec",
                "--action",
                "backup",
                "--timeout",
                "0s",
                "--",
                "true",
            ][..],
            "must be longer than zero",
        ),
        (
            &["exec", "--action", "backup", "--wait", "0s", "--", "true"][..],
            "must be longer than zero",
        ),
        (
            &["exec", "--action", "", "--", "true"][..],
            "an action name cannot be empty",
        ),
        (&["evaluate", " "][..], "an action name cannot be empty"),
        (
            &[
                "exec",
                "--action",
                "backup",
                "--not-executed-exit",
                "0",
                "--",
                "true",
            ][..],
            "`0` cannot be a failing exit status: they run from 1 to 255",
        ),
        (
            &[
                "exec",
                "--action",
                "backup",
                "--not-executed-exit",
                "-3",
                "--",
                "true",
            ][..],
            "`-3` cannot be a failing exit status",
        ),
        (
            &[
                "approve",
                UNKNOWN_ID,
                "--as",
                "human:alice",
                "--note",
                &long_note,
            ][..],
            "the note is 5000 bytes, longer than the 4096 every surface allows",
        ),
    ] {
        let run = sandbox.run(args);
        assert_eq!(run.status, Some(2), "{run:?}");
        assert!(run.stderr.contains(expected), "{run:?}");
        // A refused note is not echoed back (it is kilobytes long).
        assert!(run.stderr.len() < 1_000, "{run:?}");
    }
    assert_eq!(StoreFiles::read(&sandbox.store_path()), before);
}

/// A message cap no `initialize` fits in, or past the JSON reader's own limit, is a usage
/// error (found by a first-time user: `--max-message-bytes 0` started a gateway that refused
/// every message).
#[test]
fn refuses_a_message_cap_no_session_could_use() {
    let sandbox = Sandbox::new();
    for cap in ["0", "1023", "4194305"] {
        let run = sandbox.run(&[
            "gateway",
            "--alias",
            "files",
            "--principal",
            "agent:me",
            "--max-message-bytes",
            cap,
            "--",
            "true",
        ]);
        assert_eq!(run.status, Some(2), "{cap}: {run:?}");
        assert!(run.stderr.contains("1024..=4194304"), "{cap}: {run:?}");
    }
}
