//! `countersign keygen` and `countersign approver token`: the key pair on disk, and tokens that
//! the kernel's one verification function accepts.

use countersign::token::{self, PublicKey};
use countersign::{Clock, SystemClock};

use crate::support::{Run, Sandbox};

/// Settings that also redact what a fresh key pair and token change: the public key, its id and
/// the token text.
fn key_settings(sandbox: &Sandbox) -> insta::Settings {
    let mut settings = sandbox.settings();
    settings.add_filter(r"ed25519:[A-Za-z0-9_-]{43}", "ed25519:[PUBLIC KEY]");
    settings.add_filter(r"\b[0-9a-f]{16}\b", "[KEY ID]");
    settings.add_filter(
        r"[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}",
        "[TOKEN]",
    );
    settings
}

/// `countersign approver token --key approver.key --subject human:alice`, then `extra`.
fn alice_token(sandbox: &Sandbox, extra: &[&str]) -> Run {
    let mut args = vec![
        "approver",
        "token",
        "--key",
        "approver.key",
        "--subject",
        "human:alice",
    ];
    args.extend_from_slice(extra);
    sandbox.run(&args)
}

#[test]
fn keygen_writes_a_private_key_and_its_public_half() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["keygen", "--out", "approver.key"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let private_text = std::fs::read_to_string(sandbox.work().join("approver.key")).unwrap();
    assert!(private_text.starts_with("-----BEGIN PRIVATE KEY-----\n"));
    let public = PublicKey::load(&sandbox.work().join("approver.key.pub")).unwrap();
    assert!(run.stdout.contains(&public.to_string()), "{run:?}");
    assert!(run.stdout.contains(public.key_id().as_str()), "{run:?}");
    key_settings(&sandbox).bind(|| insta::assert_snapshot!("keygen_text", run.transcript()));
}

#[cfg(unix)]
#[test]
fn keygen_makes_the_private_key_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["keygen", "--out", "approver.key"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let mode = std::fs::metadata(sandbox.work().join("approver.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn keygen_refuses_to_overwrite_a_key() {
    let sandbox = Sandbox::new();
    assert_eq!(
        sandbox.run(&["keygen", "--out", "approver.key"]).status,
        Some(0)
    );
    let private_before = std::fs::read(sandbox.work().join("approver.key")).unwrap();
    let public_before = std::fs::read(sandbox.work().join("approver.key.pub")).unwrap();
    let run = sandbox.run(&["keygen", "--out", "approver.key"]);
    assert_eq!(
        run.one_line_error(),
        "`approver.key` already exists: keys are never overwritten; choose another path, or move the old key pair away first"
    );
    assert_eq!(
        std::fs::read(sandbox.work().join("approver.key")).unwrap(),
        private_before
    );
    assert_eq!(
        std::fs::read(sandbox.work().join("approver.key.pub")).unwrap(),
        public_before
    );
}

#[test]
fn keygen_refuses_when_only_the_public_file_exists() {
    let sandbox = Sandbox::new();
    sandbox.write("approver.key.pub", "an old public key\n");
    let run = sandbox.run(&["keygen", "--out", "approver.key"]);
    assert!(
        run.one_line_error()
            .starts_with("`approver.key.pub` already exists"),
        "{run:?}"
    );
    assert!(!sandbox.work().join("approver.key").exists());
}

#[test]
fn keygen_prints_json_when_asked() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["keygen", "--out", "approver.key", "--json"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    let value: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let public = PublicKey::load(&sandbox.work().join("approver.key.pub")).unwrap();
    assert_eq!(value["public_key"], public.to_string());
    assert_eq!(value["key_id"], public.key_id().as_str());
    key_settings(&sandbox).bind(|| insta::assert_snapshot!("keygen_json", run.transcript()));
}

#[test]
fn an_issued_token_verifies_under_the_public_key() {
    let sandbox = Sandbox::new();
    assert_eq!(
        sandbox.run(&["keygen", "--out", "approver.key"]).status,
        Some(0)
    );
    let run = alice_token(&sandbox, &["--groups", "finance,ops"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    let issued = run.stdout.strip_suffix('\n').expect("one line");
    assert!(
        !issued.contains(char::is_whitespace),
        "the token alone: {run:?}"
    );
    let public = PublicKey::load(&sandbox.work().join("approver.key.pub")).unwrap();
    let now = SystemClock.now();
    let verified = token::verify(issued, &[public], now).unwrap();
    assert_eq!(verified.subject, "human:alice");
    assert_eq!(verified.groups, ["finance", "ops"]);
    // The default lifetime is 8 hours.
    let lifetime = verified.expires_at.as_millis() - now.as_millis();
    assert!(
        (8 * 3600 - 5) * 1000 < lifetime && lifetime <= 8 * 3600 * 1000,
        "{lifetime}"
    );
}

#[test]
fn approver_token_prints_json_when_asked() {
    let sandbox = Sandbox::new();
    assert_eq!(
        sandbox.run(&["keygen", "--out", "approver.key"]).status,
        Some(0)
    );
    let run = alice_token(&sandbox, &["--groups", "finance", "--ttl", "1h", "--json"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    key_settings(&sandbox)
        .bind(|| insta::assert_snapshot!("approver_token_json", run.transcript()));
}

/// Issue #19: a token is issued only for an approver id of the one shape.
#[test]
fn refuses_a_malformed_subject_saying_the_expected_shape() {
    let sandbox = Sandbox::new();
    assert_eq!(
        sandbox.run(&["keygen", "--out", "approver.key"]).status,
        Some(0)
    );
    for (subject, problem) in [
        ("human::alice", "a part before or after a `:` is empty"),
        ("human:bob smith", "it contains whitespace"),
    ] {
        let run = sandbox.run(&[
            "approver",
            "token",
            "--key",
            "approver.key",
            "--subject",
            subject,
        ]);
        assert_eq!(
            run.one_line_error(),
            format!(
                "`--subject`: `{subject}` is not an approver id: {problem}: write {}",
                countersign::approver::ApproverId::EXPECTED
            )
        );
    }
}

#[test]
fn refuses_a_ttl_no_token_could_use() {
    let sandbox = Sandbox::new();
    assert_eq!(
        sandbox.run(&["keygen", "--out", "approver.key"]).status,
        Some(0)
    );
    // Longer than a token may live; not a duration; negative (which reaches the parser, not
    // clap's "unexpected argument").
    for (ttl, says) in [
        (
            "25h",
            "`--ttl 25h` is longer than an approver token may live: pass `--ttl 24h` or less",
        ),
        ("soon", "`--ttl soon` is not a duration"),
        (
            "-5m",
            "`--ttl -5m` is not a duration: a duration cannot be negative",
        ),
    ] {
        let run = alice_token(&sandbox, &["--ttl", ttl]);
        assert!(run.one_line_error().starts_with(says), "{ttl}: {run:?}");
    }
}

#[test]
fn refuses_the_public_key_file_as_the_signing_key() {
    let sandbox = Sandbox::new();
    assert_eq!(
        sandbox.run(&["keygen", "--out", "approver.key"]).status,
        Some(0)
    );
    let run = sandbox.run(&[
        "approver",
        "token",
        "--key",
        "approver.key.pub",
        "--subject",
        "human:alice",
    ]);
    assert_eq!(
        run.one_line_error(),
        "`approver.key.pub` holds a public key, which cannot sign: give the private key file `countersign keygen` wrote (without `.pub`)"
    );
}

#[test]
fn refuses_a_missing_key_file() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&[
        "approver",
        "token",
        "--key",
        "absent.key",
        "--subject",
        "human:alice",
    ]);
    assert_eq!(
        run.one_line_error(),
        "cannot read the key file `absent.key`: there is no such file"
    );
}

#[test]
fn keygen_into_a_missing_folder_says_which_folder_to_create() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["keygen", "--out", "keys/approver.key"]);
    assert_eq!(
        run.one_line_error(),
        "the folder `keys` does not exist, so `--out keys/approver.key` cannot be written: create it first (`mkdir -p keys`) or give a path in an existing folder"
    );
    assert!(!sandbox.work().join("keys").exists());
}

#[test]
fn refuses_a_subject_without_a_kind() {
    let sandbox = Sandbox::new();
    assert_eq!(
        sandbox.run(&["keygen", "--out", "approver.key"]).status,
        Some(0)
    );
    let run = sandbox.run(&[
        "approver",
        "token",
        "--key",
        "approver.key",
        "--subject",
        "bob",
    ]);
    assert_eq!(
        run.one_line_error(),
        "`--subject bob` has no kind: approver ids are written `KIND:NAME`, as the policy names them: pass `--subject human:bob`"
    );
}

/// `serve` with a key given only on the command line, over the demo's store (whose waiting
/// request stored the policy's keys, none): it warns at startup that tokens signed by that key
/// cannot answer what is waiting, instead of showing an empty inbox without a word.
#[test]
fn serve_warns_when_a_command_line_key_is_stored_with_no_waiting_request() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    assert_eq!(
        sandbox.run(&["keygen", "--out", "approver.key"]).status,
        Some(0)
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store-url",
            "sqlite:.countersign/countersign.db",
            "--approver-key",
            "approver.key.pub",
        ])
        .current_dir(sandbox.work())
        .env_remove("COUNTERSIGN_POLICY")
        .env_remove("COUNTERSIGN_STORE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start countersign serve");
    // The warning is written before the line that says the service is up.
    let mut started = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut started)
        .expect("read the startup line");
    child.kill().expect("stop the service");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("read stderr");
    child.wait().expect("reap the service");
    assert!(
        started.starts_with("countersign approval service on http://127.0.0.1:"),
        "{started:?} / {stderr:?}"
    );
    let public = PublicKey::load(&sandbox.work().join("approver.key.pub")).expect("public key");
    assert!(
        stderr.contains(&format!(
            "warning: key {} given with --approver-key is in none of the 1 waiting request(s)' stored rules",
            public.key_id()
        )),
        "{stderr:?}"
    );
}
