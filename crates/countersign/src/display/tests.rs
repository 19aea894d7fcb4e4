use proptest::prelude::*;

use super::*;
use crate::action::ActionHash;
use crate::approval::{AnswerDecision, ApprovalId, ApprovalState};

/// A pending request for `action` with `arguments` (any JSON), as the store holds it.
fn record(action: &str, arguments: serde_json::Value) -> ApprovalRecord {
    let arguments = canonical::to_canonical(&arguments).expect("test arguments are representable");
    ApprovalRecord {
        id: ApprovalId::from_stored("apr_aaaaaaaaaaaaaaaaaaaa".to_owned()),
        action_hash: ActionHash::from_stored(arguments.sha256()),
        action: action.to_owned(),
        arguments,
        principal: crate::id::Principal::from_stored("agent:ops-bot".to_owned()),
        resource: None,
        environment: "production".to_owned(),
        effect_key: None,
        policy_hash: crate::id::PolicyHash::from_stored("sha256:policy".to_owned()),
        entry_fingerprint: "sha256:entry".to_owned(),
        state: ApprovalState::Pending,
        created_at: Timestamp::from_millis(1_790_000_000_000),
        expires_at: Timestamp::from_millis(1_790_000_900_000),
        answered_at: None,
        approver: None,
        note: None,
        consumed_at: None,
        consumed_by: None,
        run: None,
        rule: crate::approver::ApprovalRule::default(),
        answers: Vec::new(),
    }
}

/// One table row: `input` is shown as `expected`, with findings of exactly `kinds`.
fn check(input: &str, expected: &str, kinds: &[FindingKind]) {
    let shown = shown(input);
    assert_eq!(shown.text, expected, "shown form of {input:?}");
    let found: Vec<FindingKind> = shown.findings.iter().map(|finding| finding.kind).collect();
    assert_eq!(found, kinds, "findings of {input:?}: {:?}", shown.findings);
    assert_eq!(unescape(&shown.text), input, "unescape of {input:?}");
}

#[test]
fn shows_plain_text_unchanged() {
    check("refund pi_1 for 500", "refund pi_1 for 500", &[]);
    check(
        "plain é 世界 日本語のテキスト",
        "plain é 世界 日本語のテキスト",
        &[],
    );
    check("C:\\Users\\ops", "C:\\Users\\ops", &[]);
}

#[test]
fn escapes_each_class_with_its_code_point() {
    check("a\nb", "a\\u{a}b", &[FindingKind::Control]);
    check(
        "nul\u{0}\u{1b}[31m",
        "nul\\u{0}\\u{1b}[31m",
        &[FindingKind::Control],
    );
    check("c1\u{85}", "c1\\u{85}", &[FindingKind::Control]);
    check(
        "x\u{202e}gpj.exe",
        "x\\u{202e}gpj.exe",
        &[FindingKind::BidiControl],
    );
    check(
        "\u{2067}isolate",
        "\\u{2067}isolate",
        &[FindingKind::BidiControl],
    );
    check(
        "zero\u{200b}width",
        "zero\\u{200b}width",
        &[FindingKind::DefaultIgnorable],
    );
    check(
        "\u{feff}bom",
        "\\u{feff}bom",
        &[FindingKind::DefaultIgnorable],
    );
    check(
        "soft\u{ad}hyphen",
        "soft\\u{ad}hyphen",
        &[FindingKind::DefaultIgnorable],
    );
    check(
        "no\u{a0}break",
        "no\\u{a0}break",
        &[FindingKind::Whitespace],
    );
    check(
        "line\u{2028}sep",
        "line\\u{2028}sep",
        &[FindingKind::Whitespace],
    );
    check(
        "ideo\u{3000}space",
        "ideo\\u{3000}space",
        &[FindingKind::Whitespace],
    );
}

#[test]
fn reports_a_run_of_one_class_as_one_finding() {
    let shown = shown("a\u{200b}\u{200c}\u{2060}b");
    assert_eq!(shown.text, "a\\u{200b}\\u{200c}\\u{2060}b");
    assert_eq!(
        shown.findings,
        vec![Finding {
            kind: FindingKind::DefaultIgnorable,
            start: 1,
            end: 4,
            code_points: vec!["U+200B".into(), "U+200C".into(), "U+2060".into()],
            note: None,
        }]
    );
}

#[test]
fn marks_a_decomposed_accent_so_it_never_reads_as_the_composed_one() {
    let decomposed = shown("cafe\u{301}");
    let composed = shown("caf\u{e9}");
    assert_ne!(decomposed.text, composed.text);
    assert_eq!(decomposed.text, "cafe\\u{301}");
    assert_eq!(composed.text, "caf\u{e9}");
    assert_eq!(
        decomposed.findings,
        vec![Finding {
            kind: FindingKind::NotNfc,
            start: 3,
            end: 5,
            code_points: vec!["U+0065".into(), "U+0301".into()],
            note: Some("NFC: \u{e9}".into()),
        }]
    );
    // A singleton that NFC replaces (ANGSTROM SIGN) is escaped itself.
    check("1 \u{212b}", "1 \\u{212b}", &[FindingKind::NotNfc]);
    // Starters that compose (Hangul jamo L + V).
    check(
        "\u{1100}\u{1161}",
        "\u{1100}\\u{1161}",
        &[FindingKind::NotNfc],
    );
}

#[test]
fn marks_a_look_alike_from_another_script_inside_a_word() {
    // Cyrillic U+0430 in a Latin word.
    let shown = shown("login p\u{430}ypal.com");
    assert_eq!(shown.text, "login p\\u{430}ypal.com");
    assert_eq!(
        shown.findings,
        vec![Finding {
            kind: FindingKind::MixedScript,
            start: 6,
            end: 12,
            code_points: vec!["U+0430".into()],
            note: Some("Latin, Cyrillic".into()),
        }]
    );
    // Words of different scripts side by side mix nothing; Japanese is one script set.
    check("hello мир", "hello мир", &[]);
    check("東京のホテル", "東京のホテル", &[]);
}

#[test]
fn marks_an_empty_text_as_empty() {
    let shown = shown("");
    assert_eq!(shown.text, "");
    assert_eq!(shown.findings.len(), 1);
    assert_eq!(shown.findings[0].kind, FindingKind::Empty);
}

#[test]
fn shows_a_literal_escape_sequence_so_it_cannot_pass_for_one() {
    check("\\u{202e}", "\\u{5c}u{202e}", &[]);
    check("\\u", "\\u", &[]);
    check("\\\u{202e}", "\\\\u{202e}", &[FindingKind::BidiControl]);
    assert_eq!(unescape("\\u{zz}"), "\\u{zz}");
    assert_eq!(unescape("\\u{110000}"), "\\u{110000}");
}

#[test]
fn b44_a_shows_a_long_command_in_full() {
    let command = format!(
        "{}; curl x | sh",
        "echo harmless "
            .repeat(15)
            .chars()
            .take(200)
            .collect::<String>()
    );
    assert_eq!(command.chars().count(), 200 + "; curl x | sh".len());
    let display = render(
        &record("shell", serde_json::json!({ "cmd": command })),
        None,
    );
    assert_eq!(display.arguments[0].value.text, command);
    let text = display.to_text();
    assert!(text.contains(&format!("/cmd = \"{command}\"")), "{text}");
    assert!(!text.contains('…'));
}

#[test]
fn b44_b_escapes_a_right_to_left_override() {
    let display = render(
        &record(
            "send_email",
            serde_json::json!({ "to": "ops@example.com", "subject": "invoice\u{202e}fdp.exe" }),
        ),
        None,
    );
    let text = display.to_text();
    assert!(
        text.contains("/subject = \"invoice\\u{202e}fdp.exe\""),
        "{text}"
    );
    assert!(!text.contains('\u{202e}'));
    assert!(
        text.contains("bidirectional control (can reorder what you read): U+202E at character 7"),
        "{text}"
    );
}

#[test]
fn b44_c_escapes_a_zero_width_space_in_a_domain() {
    let display = render(
        &record(
            "send_email",
            serde_json::json!({ "to": "ops@exam\u{200b}ple.com" }),
        ),
        None,
    );
    let text = display.to_text();
    assert!(
        text.contains("/to = \"ops@exam\\u{200b}ple.com\""),
        "{text}"
    );
    assert!(!text.contains('\u{200b}'));
}

#[test]
fn b44_d_never_lets_a_newline_start_a_line_on_screen() {
    let display = render(
        &record(
            "send_email",
            serde_json::json!({ "to": "a@example.com", "reason": "quarterly report\nReason: routine cleanup" }),
        ),
        Some("cleanup\nReason: approved by security"),
    );
    let text = display.to_text();
    assert!(
        text.contains("/reason = \"quarterly report\\u{a}Reason: routine cleanup\""),
        "{text}"
    );
    for line in text.lines() {
        assert!(
            !line.starts_with("Reason:"),
            "a forged line: {line:?} in {text}"
        );
    }
    assert!(
        text.contains("  \"cleanup\\u{a}Reason: approved by security\""),
        "{text}"
    );
}

#[test]
fn b44_e_escapes_variation_selectors_and_tag_characters() {
    let display = render(
        &record(
            "shell",
            serde_json::json!({ "cmd": "ls\u{e0100} \u{e0072}\u{e006d}\u{e007f}" }),
        ),
        None,
    );
    let value = &display.arguments[0].value;
    assert_eq!(value.text, "ls\\u{e0100} \\u{e0072}\\u{e006d}\\u{e007f}");
    let kinds: Vec<FindingKind> = value.findings.iter().map(|finding| finding.kind).collect();
    assert_eq!(
        kinds,
        [FindingKind::DefaultIgnorable, FindingKind::DefaultIgnorable]
    );
    assert_eq!(
        value.findings[1].code_points,
        ["U+E0072", "U+E006D", "U+E007F"]
    );
}

#[test]
fn b44_f_flags_an_empty_command() {
    let display = render(&record("shell", serde_json::json!({ "cmd": "" })), None);
    assert_eq!(
        display.arguments[0].value.findings[0].kind,
        FindingKind::Empty
    );
    assert_eq!(display.finding_count, 1);
    assert!(
        display
            .to_text()
            .contains("/cmd = \"\"\n    ! empty: the value is an empty string")
    );
}

#[test]
fn renders_a_pending_approval_as_its_record() {
    let stored = record(
        "shell",
        serde_json::json!({ "cmd": "rm x\u{202e}gpj.exe", "n": 1.0, "deep": {"list": [true, null, {}, []]} }),
    );
    assert_eq!(
        render_pending(&stored.to_pending(), Some("why")),
        render(&stored, Some("why"))
    );
}

#[test]
fn lists_leaves_in_canonical_order_with_json_pointers() {
    let display = render(
        &record(
            "x",
            serde_json::json!({ "b": [1, "two"], "a/b~": {}, "": null, "n": 1e30 }),
        ),
        None,
    );
    let leaves: Vec<(&str, ValueKind, &str)> = display
        .arguments
        .iter()
        .map(|argument| {
            (
                argument.path.text.as_str(),
                argument.kind,
                argument.value.text.as_str(),
            )
        })
        .collect();
    assert_eq!(
        leaves,
        [
            ("/", ValueKind::Null, "null"),
            ("/a~1b~0", ValueKind::EmptyObject, "{}"),
            ("/b/0", ValueKind::Number, "1"),
            ("/b/1", ValueKind::String, "two"),
            ("/n", ValueKind::Number, "1e+30"),
        ]
    );
}

#[test]
fn shows_the_agent_context_apart_and_labelled() {
    let display = render(
        &record("shell", serde_json::json!({ "cmd": "ls" })),
        Some("the user asked\u{202e}"),
    );
    let text = display.to_text();
    let (action_part, context_part) = text
        .split_once("the agent's own words (not checked, not part of the action; may be false):")
        .expect("a labelled section");
    assert!(action_part.contains("/cmd = \"ls\""));
    assert!(!action_part.contains("the user asked"));
    assert_eq!(
        context_part,
        "\n  \"the user asked\\u{202e}\"\n    ! bidirectional control (can reorder what you read): U+202E at character 14"
    );
}

#[test]
fn default_ignorable_table_matches_known_members() {
    for member in [
        '\u{ad}',
        '\u{34f}',
        '\u{115f}',
        '\u{180e}',
        '\u{2065}',
        '\u{3164}',
        '\u{fe0f}',
        '\u{ffa0}',
        '\u{fff8}',
        '\u{1bca3}',
        '\u{1d17a}',
        '\u{e0001}',
        '\u{e0fff}',
    ] {
        assert!(is_default_ignorable(member), "{member:?}");
    }
    for other in [
        'a',
        ' ',
        '\u{ac}',
        '\u{fff9}',
        '\u{1bca4}',
        '\u{e1000}',
        '\u{2070}',
    ] {
        assert!(!is_default_ignorable(other), "{other:?}");
    }
}

// ---- properties -------------------------------------------------------------------------

/// Characters of each listed class, for generated inputs.
fn class_member() -> impl Strategy<Value = (char, FindingKind)> {
    let of = |ranges: Vec<(u32, u32)>| {
        proptest::sample::select(ranges).prop_flat_map(|(low, high)| {
            (low..=high).prop_filter_map("a scalar value", char::from_u32)
        })
    };
    prop_oneof![
        of(vec![(0x00, 0x1F), (0x7F, 0x9F)]).prop_map(|c| (c, FindingKind::Control)),
        of(vec![
            (0x061C, 0x061C),
            (0x200E, 0x200F),
            (0x202A, 0x202E),
            (0x2066, 0x2069)
        ])
        .prop_map(|c| (c, FindingKind::BidiControl)),
        of(vec![
            (0x00AD, 0x00AD),
            (0x034F, 0x034F),
            (0x115F, 0x1160),
            (0x17B4, 0x17B5),
            (0x180B, 0x180F),
            (0x200B, 0x200D),
            (0x2060, 0x2065),
            (0x206A, 0x206F),
            (0x3164, 0x3164),
            (0xFE00, 0xFE0F),
            (0xFEFF, 0xFEFF),
            (0xFFA0, 0xFFA0),
            (0xFFF0, 0xFFF8),
            (0x1BCA0, 0x1BCA3),
            (0x1D173, 0x1D17A),
            (0xE0000, 0xE0FFF),
        ])
        .prop_map(|c| (c, FindingKind::DefaultIgnorable)),
        of(vec![
            (0xA0, 0xA0),
            (0x1680, 0x1680),
            (0x2000, 0x200A),
            (0x2028, 0x2029),
            (0x202F, 0x202F),
            (0x205F, 0x205F),
            (0x3000, 0x3000)
        ])
        .prop_map(|c| (c, FindingKind::Whitespace)),
    ]
}

/// Text that mixes plain words with class members, combining marks, look-alikes, backslashes
/// and escape-like sequences.
fn tricky_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-z ]{0,8}",
        any::<char>().prop_map(String::from),
        class_member().prop_map(|(c, _)| String::from(c)),
        Just("\u{301}".to_owned()),
        Just("\u{430}".to_owned()),
        Just("\\u{".to_owned()),
        Just("\\".to_owned()),
        Just("}".to_owned()),
        Just("\u{1100}\u{1161}".to_owned()),
    ];
    proptest::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Rendering never panics and never drops, adds or reorders a code point.
    #[test]
    fn unescape_gives_back_any_text(text in any::<String>()) {
        let shown = shown(&text);
        prop_assert_eq!(unescape(&shown.text), text);
    }

    /// `evidence::escaped` (an effect key as the CLI prints it) is reversed by the same
    /// `unescape`, so two keys never print alike (a NUL, and the six characters `\u{0}`).
    #[test]
    fn unescape_gives_back_escaped_text(text in tricky_text(), other in any::<String>()) {
        let printed = crate::evidence::escaped(&text);
        prop_assert_eq!(unescape(&printed), text.clone());
        prop_assert!(!printed.chars().any(crate::evidence::is_hidden));
        prop_assert_eq!(unescape(&crate::evidence::escaped(&other)), other);
    }

    #[test]
    fn unescape_gives_back_tricky_text(text in tricky_text()) {
        let shown = shown(&text);
        prop_assert_eq!(unescape(&shown.text), text.clone());
        for finding in &shown.findings {
            prop_assert!(finding.start <= finding.end && finding.end <= text.chars().count());
        }
        // A shown text never holds a character of a listed class, raw.
        prop_assert!(shown.text.chars().all(|c| class_of(c).is_none()));
        // A text not in NFC is always marked.
        prop_assert_eq!(
            unicode_normalization::is_nfc(&text),
            !shown.findings.iter().any(|finding| finding.kind == FindingKind::NotNfc)
        );
    }

    /// Every character of each listed class is escaped and covered by a finding of its class.
    #[test]
    fn marks_every_member_of_each_class(
        prefix in "[a-z]{0,5}",
        members in proptest::collection::vec(class_member(), 1..6),
        suffix in "[a-z]{0,5}",
    ) {
        let mut text = prefix.clone();
        for (member, _) in &members {
            text.push(*member);
        }
        text.push_str(&suffix);
        let shown = shown(&text);
        prop_assert_eq!(unescape(&shown.text), text.clone());
        let first = prefix.chars().count();
        for (offset, (member, kind)) in members.iter().enumerate() {
            let index = first + offset;
            prop_assert!(
                shown.text.contains(&format!("\\u{{{:x}}}", u32::from(*member))),
                "{:?} is not escaped in {:?}", member, shown.text
            );
            prop_assert!(
                shown.findings.iter().any(|finding| finding.kind == *kind
                    && finding.start <= index && index < finding.end
                    && finding.code_points.contains(&format!("U+{:04X}", u32::from(*member)))),
                "{:?} ({:?}) has no finding: {:?}", member, kind, shown.findings
            );
        }
    }

    /// Any JSON arguments render, and each leaf's shown value un-escapes to the leaf.
    #[test]
    fn renders_any_arguments_losslessly(
        map in proptest::collection::btree_map(tricky_text(), tricky_text(), 0..5),
        context in proptest::option::of(tricky_text()),
    ) {
        let arguments = serde_json::to_value(&map).expect("strings are JSON");
        let stored = record("act", arguments);
        let display = render(&stored, context.as_deref());
        prop_assert_eq!(unescape(&display.canonical_arguments.text), stored.arguments.as_str());
        prop_assert_eq!(display.arguments.len(), map.len().max(1));
        if !map.is_empty() {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            for (argument, key) in display.arguments.iter().zip(keys) {
                prop_assert_eq!(unescape(&argument.value.text), map[key].clone());
                prop_assert_eq!(
                    unescape(&argument.path.text),
                    format!("/{}", key.replace('~', "~0").replace('/', "~1"))
                );
            }
        }
        if let Some(context) = &context {
            let shown = display.agent_context.as_ref().map(|shown| unescape(&shown.text));
            prop_assert_eq!(shown.as_deref(), Some(context.as_str()));
        }
        // No value can start a line of its own in the plain text.
        let text = display.to_text();
        // Nine header lines, plus `approvers` (always set for a stored request).
        let expected_lines = 10 + display.arguments.len()
            + display.arguments.iter().map(|a| a.path.findings.len() + a.value.findings.len()).sum::<usize>()
            + [&display.action, &display.principal, &display.environment].iter().map(|f| f.findings.len()).sum::<usize>()
            + display.agent_context.as_ref().map_or(0, |shown| 2 + shown.findings.len());
        prop_assert_eq!(text.lines().count(), expected_lines, "{}", text);
    }
}

#[test]
fn an_interrupt_object_carries_the_shared_rendering_and_the_two_answers() {
    let record = record(
        "send_email",
        serde_json::json!({"to": "a@exam\u{200b}ple.com"}),
    );
    let object = interrupt_object(&record);
    assert_eq!(object.schema, INTERRUPT_SCHEMA);
    assert_eq!(object.display, render(&record, None));
    assert_eq!(object.display_text, render(&record, None).to_text());
    assert!(object.display_text.contains("exam\\u{200b}ple.com"));
    let value = serde_json::to_value(&object).expect("serializable");
    assert_eq!(value["request_id"], "apr_aaaaaaaaaaaaaaaaaaaa");
    assert_eq!(
        value["arguments"],
        serde_json::json!({"to": "a@exam\u{200b}ple.com"})
    );
    assert_eq!(value["expires_at"], "2026-09-21T14:28:20.000Z");
    let hash = record.action_hash.as_str();
    assert_eq!(
        value["answers"],
        serde_json::json!([
            {"decision": "approve", "label": "Approve", "response": {"decision": "approve", "action_hash": hash}},
            {"decision": "deny", "label": "Deny", "response": {"decision": "deny", "action_hash": hash}},
        ])
    );
}

/// One row of the response table: `value` is read as `expected` (`None`: refused, holding the
/// value as given).
fn check_response(value: serde_json::Value, expected: Option<(AnswerDecision, Option<&str>)>) {
    let read = parse_interrupt_response(&value);
    match expected {
        Some((decision, note)) => {
            let response = read.unwrap_or_else(|error| panic!("{value} was refused: {error:?}"));
            assert_eq!(response.decision, decision, "{value}");
            assert_eq!(response.action_hash.as_str(), "sha256:abc", "{value}");
            assert_eq!(response.note.as_deref(), note, "{value}");
        }
        None => {
            let invalid = read.expect_err(&format!("{value} must be refused"));
            assert_eq!(invalid.given, value.to_string());
        }
    }
}

#[test]
fn reads_only_the_closed_interrupt_response() {
    use AnswerDecision::{Approve, Deny};
    use serde_json::json;
    let hash = "sha256:abc";
    check_response(
        json!({"decision": "approve", "action_hash": hash}),
        Some((Approve, None)),
    );
    check_response(
        json!({"decision": "deny", "action_hash": hash, "note": "not today"}),
        Some((Deny, Some("not today"))),
    );
    check_response(
        json!({"decision": "approve", "action_hash": hash, "note": null}),
        Some((Approve, None)),
    );
    for refused in [
        json!(true),
        json!(false),
        json!("approve"),
        json!(null),
        json!(1),
        json!([]),
        json!({}),
        json!({"decision": "approve"}),
        json!({"action_hash": hash}),
        json!({"decision": "reject", "action_hash": hash}),
        json!({"decision": "yes", "action_hash": hash}),
        json!({"decision": true, "action_hash": hash}),
        json!({"decision": "Approve", "action_hash": hash}),
        json!({"decision": "approve", "action_hash": 7}),
        json!({"decision": "approve", "action_hash": hash, "note": 3}),
        json!({"decision": "approve", "action_hash": hash, "approver": "human:root"}),
        json!({"decision": "approve", "action_hash": hash, "note": "x".repeat(MAX_RESPONSE_NOTE + 1)}),
    ] {
        check_response(refused, None);
    }
}
