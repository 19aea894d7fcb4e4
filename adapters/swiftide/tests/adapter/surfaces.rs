//! Case B44, "all surfaces use the same sanitiser": one request whose argument holds a
//! right-to-left override, rendered by every surface that shows a human an approval request.
//! Each must show the kernel renderer's escaped form and never the raw character.
//!
//! The surfaces: the CLI's `pending` (text and `--json`), the CLI's `inspect`, the gateway's
//! elicitation message and its `approval_required` error text, and this adapter's `Pause`.
//! (The gateway's own tests check that its session sends exactly these texts.)

use countersign::display;
use serde_json::json;

use super::support::{World, call, cli, run_to_pause};

#[tokio::test]
async fn every_surface_shows_the_one_rendering_of_a_bidi_control() {
    let value = "invoice\u{202e}fdp.exe";
    let escaped = display::shown(value).text;
    assert_eq!(escaped, "invoice\\u{202e}fdp.exe");

    let world = World::new();
    let mut agent = world.agent_making(
        vec![call("c1", "drop_table", json!({ "table": value }))],
        &["drop_table"],
    );
    let (_, pause) = run_to_pause(&mut agent, "drop it").await;
    let record = world
        .store
        .approval(&countersign::ApprovalId::parse(&pause.request_id).expect("an id"))
        .await
        .expect("the store reads")
        .expect("the request is stored");
    let rendered = display::render(&record, None);
    let store_url = format!("sqlite:{}", world._dir.path().join("test.db").display());
    let run_cli = |args: &[&str]| {
        let output = std::process::Command::new(cli())
            .args(args)
            .arg("--store-url")
            .arg(&store_url)
            .output()
            .expect("the countersign command runs");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).expect("UTF-8")
    };
    let mut elicitation_error = countersign_gateway::codes::refusal(
        &countersign::ControlError::ApprovalRequired {
            request_id: record.id.clone(),
            action_hash: record.action_hash.clone(),
            expires_at: record.expires_at,
        },
        &record.action,
        None,
    );
    countersign_gateway::codes::attach_display(&mut elicitation_error, &rendered);

    let surfaces: Vec<(&str, String)> = vec![
        ("cli pending", run_cli(&["pending"])),
        ("cli pending --json", run_cli(&["pending", "--json"])),
        ("cli inspect", run_cli(&["inspect", &pause.request_id])),
        (
            "gateway elicitation",
            countersign_gateway::codes::elicitation_message(&display::render_pending(
                &record.to_pending(),
                None,
            )),
        ),
        (
            "gateway approval_required error",
            elicitation_error["data"]["display"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ),
        ("swiftide pause", pause.display.clone()),
    ];
    for (surface, shown) in &surfaces {
        // JSON output escapes the backslash itself.
        let json_escaped = escaped.replace('\\', "\\\\");
        assert!(
            shown.contains(&escaped) || shown.contains(&json_escaped),
            "{surface} does not show the renderer's form {escaped:?}: {shown}"
        );
        let shown_outside_raw_fields = if surface.ends_with("--json") {
            // The stored record's own `arguments` field keeps the raw value, as JSON data.
            let listed: serde_json::Value = serde_json::from_str(shown).expect("JSON");
            listed[0]["display"].to_string()
        } else {
            shown.clone()
        };
        assert!(
            !shown_outside_raw_fields.contains('\u{202e}'),
            "{surface} shows U+202E raw: {shown}"
        );
    }
    // The same text, whole, on each text surface.
    let text = rendered.to_text();
    assert_eq!(pause.display, text);
    assert!(surfaces[4].1 == text);
    assert!(surfaces[3].1.contains(&text));
    // The evidence keeps the raw canonical arguments, not the display form.
    assert_eq!(
        record.arguments.as_str(),
        "{\"table\":\"invoice\u{202e}fdp.exe\"}"
    );
    assert_eq!(pause.arguments, json!({ "table": value }));
}
