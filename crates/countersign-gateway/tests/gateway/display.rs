//! What a human is shown through the gateway (issue #14, case B44): the elicitation message and
//! the `approval_required` error's `data.display` are the kernel's one rendering, in full, with
//! every character a person could misread escaped.

use std::sync::Arc;

use serde_json::{Value, json};

use super::fake::Behaviour;
use super::harness::{config, memory_store, policy, refusal, start, start_with_capabilities};

const APPROVE_SHELL: &str =
    "schema: countersign.policy/v1\nactions:\n  mcp.s.shell:\n    decision: approve\n";

/// A 10 KB value: shown in full, then replaced in snapshots by a marker.
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

fn settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.add_filter(r"apr_[a-z2-7]{20}", "apr_[ID]");
    settings.add_filter(r"sha256:[0-9a-f]{64}", "sha256:[HASH]");
    settings.add_filter(
        r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
        "[TIME]",
    );
    settings.add_filter(&long_value(), "[the 10240-character value, in full]");
    settings
}

#[tokio::test]
async fn elicitation_message_is_the_one_rendering_in_full() {
    let store = memory_store();
    let mut harness = start_with_capabilities(
        config("s"),
        policy(APPROVE_SHELL),
        Arc::clone(&store),
        &["shell"],
        Behaviour::Succeed,
        json!({"elicitation": {}}),
    )
    .await;
    harness
        .client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "shell", "arguments": tricky_arguments()}}))
        .await;
    let question = loop {
        let message = harness.client.next().await;
        if message["method"] == "elicitation/create" {
            break message;
        }
    };
    let text = question["params"]["message"].as_str().expect("message");
    let record = store.approvals(None).await.expect("approvals").remove(0);
    assert!(
        text.contains(&countersign::display::render(&record, None).to_text()),
        "{text}"
    );
    assert_eq!(
        text.matches(&long_value()).count(),
        1,
        "the long value in full"
    );
    for raw in ['\u{200b}', '\u{202e}'] {
        assert!(!text.contains(raw), "{raw:?} reached the human raw: {text}");
    }
    settings().bind(|| insta::assert_snapshot!("elicitation_tricky_arguments", text));
}

#[tokio::test]
async fn approval_required_error_carries_the_display() {
    let store = memory_store();
    let mut harness = start(
        config("s"),
        policy(APPROVE_SHELL),
        Arc::clone(&store),
        &["shell"],
        Behaviour::Succeed,
    )
    .await;
    let paused = harness.client.call("shell", tricky_arguments()).await;
    assert_eq!(refusal(&paused), (-32090, "approval_required".to_owned()));
    let shown = paused["error"]["data"]["display"]
        .as_str()
        .expect("data.display");
    let record = store.approvals(None).await.expect("approvals").remove(0);
    assert_eq!(shown, countersign::display::render(&record, None).to_text());
    assert!(shown.contains(&long_value()));
    settings().bind(|| insta::assert_snapshot!("approval_required_display", shown));
    // The model-facing message stays one line.
    let message = paused["error"]["message"].as_str().expect("message");
    assert!(!message.contains('\n'), "{message}");
}
