//! Unit tests for the policy loader, decisions and templates.

use std::path::Path;

use serde_json::{Value, json};

use super::*;

fn load(yaml: &str) -> Policy {
    match Policy::from_yaml_str(yaml, Some(Path::new("countersign.yaml"))) {
        Ok(policy) => policy,
        Err(error) => panic!("policy should load: {error}"),
    }
}

fn load_error(yaml: &str) -> LoadError {
    match Policy::from_yaml_str(yaml, Some(Path::new("countersign.yaml"))) {
        Ok(_) => panic!("policy should not load:\n{yaml}"),
        Err(error) => error,
    }
}

/// Assert the error's code and its exact 1-based line and column.
fn check_error(yaml: &str, code: &str, line: usize, column: usize) -> LoadError {
    let error = load_error(yaml);
    assert_eq!(
        (error.kind.code(), error.line, error.column),
        (code, Some(line), Some(column)),
        "{error}"
    );
    assert_eq!(error.file.as_deref(), Some(Path::new("countersign.yaml")));
    error
}

/// Decide `action` with `arguments` and compare decision and reason code.
fn check(yaml: &str, action: &str, arguments: Value, expected: (Decision, &str)) {
    let policy = load(yaml);
    let decided = policy.decide(action, &arguments);
    assert_eq!(
        (decided.decision, decided.reason.code()),
        expected,
        "{action} {arguments}"
    );
    assert_eq!(
        decided.entry.is_none(),
        decided.reason == DecisionReason::UnknownAction
    );
}

const REFUND: &str = "\
schema: countersign.policy/v1
mode: enforce
environment: production
approval_ttl: 15m
actions:
  stripe.refund:
    effect: \"refund:{payment_id}\"
    resource: \"payment:{payment_id}\"
    approval_ttl: 10m
    secret_arguments: [card_token]
    rules:
      - when: { amount: { lte: 50000 } }
        decision: allow
      - when: { amount: { lte: 1000000 }, currency: { in: [usd, eur] } }
        decision: approve
      - decision: deny
  \"mcp.files.read_*\":
    decision: allow
";

// ---------------------------------------------------------------------------------------------
// Loading: accessors of a good file

#[test]
fn loads_the_reference_file_with_its_settings() {
    let policy = load(REFUND);
    assert_eq!(policy.mode(), Mode::Enforce);
    assert_eq!(policy.environment(), "production");
    assert_eq!(policy.approval_ttl(), Duration::from_secs(900));
    assert_eq!(
        policy.action_keys().collect::<Vec<_>>(),
        ["stripe.refund", "mcp.files.read_*"]
    );
    let entry = policy.entry("stripe.refund").expect("entry");
    assert_eq!(entry.key(), "stripe.refund");
    assert_eq!(
        entry.effect().map(Template::as_str),
        Some("refund:{payment_id}")
    );
    assert_eq!(
        entry.resource().map(Template::as_str),
        Some("payment:{payment_id}")
    );
    assert_eq!(entry.approval_ttl(), Some(Duration::from_secs(600)));
    assert_eq!(entry.secret_arguments(), ["card_token".to_owned()]);
    assert!(entry.fingerprint().starts_with("sha256:"));
    assert_eq!(entry.fingerprint().len(), 7 + 64);
    assert!(policy.hash().starts_with("sha256:"));
    assert_eq!(policy.hash().len(), 7 + 64);
}

#[test]
fn applies_defaults_when_optional_keys_are_absent() {
    let policy = load("schema: countersign.policy/v1\nactions: {}\n");
    assert_eq!(policy.mode(), Mode::Enforce);
    assert_eq!(policy.environment(), "default");
    assert_eq!(policy.approval_ttl(), Duration::from_secs(15 * 60));
    assert_eq!(policy.action_keys().count(), 0);
}

#[test]
fn reads_observe_mode() {
    let policy = load("schema: countersign.policy/v1\nmode: observe\nactions:\n");
    assert_eq!(policy.mode(), Mode::Observe);
    assert_eq!(policy.mode().as_str(), "observe");
}

#[test]
fn loads_from_a_file_and_labels_errors_with_its_path() {
    let directory = std::env::temp_dir().join(format!("countersign-policy-{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("temp dir");
    let good = directory.join("good.yaml");
    std::fs::write(&good, REFUND).expect("write");
    assert_eq!(
        Policy::load(&good).expect("loads").hash(),
        load(REFUND).hash()
    );
    let bad = directory.join("bad.yaml");
    std::fs::write(&bad, "schema: countersign.policy/v1\nactions: 3\n").expect("write");
    let error = Policy::load(&bad).expect_err("bad file");
    assert_eq!(error.file.as_deref(), Some(bad.as_path()));
    assert_eq!((error.line, error.column), (Some(2), Some(10)));
    let missing = Policy::load(&directory.join("absent.yaml")).expect_err("absent");
    assert_eq!(missing.kind.code(), "io");
    assert_eq!((missing.line, missing.column), (None, None));
    let binary = directory.join("binary.yaml");
    std::fs::write(&binary, b"schema: x\nab\xffc\n").expect("write");
    let error = Policy::load(&binary).expect_err("not utf-8");
    assert_eq!(
        (error.kind.code(), error.line, error.column),
        ("not_utf8", Some(2), Some(3))
    );
    let large = directory.join("large.yaml");
    std::fs::write(&large, vec![b'#'; MAX_POLICY_BYTES + 1]).expect("write");
    let error = Policy::load(&large).expect_err("too large");
    assert_eq!(error.kind.code(), "too_large");
    std::fs::remove_dir_all(&directory).expect("cleanup");
}

// ---------------------------------------------------------------------------------------------
// Loading: one test per malformed-file kind, each with its exact place

#[test]
fn refuses_unknown_key_in_rule_with_a_suggestion() {
    let error = check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - whn: { x: { eq: 1 } }\n        decision: allow\n",
        "unknown_key",
        5,
        9,
    );
    assert_eq!(
        error.kind,
        LoadErrorKind::UnknownKey {
            key: "whn".into(),
            place: KeyPlace::Rule,
            suggestion: Some("when"),
        }
    );
}

#[test]
fn refuses_unknown_key_in_policy_and_action() {
    check_error(
        "schema: countersign.policy/v1\nactoins: {}\n",
        "unknown_key",
        2,
        1,
    );
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    decision: allow\n    efect: \"x:{y}\"\n",
        "unknown_key",
        5,
        5,
    );
}

#[test]
fn refuses_duplicate_keys_at_every_level() {
    let error = check_error(
        "schema: countersign.policy/v1\nactions: {}\nactions: {}\n",
        "duplicate_key",
        3,
        1,
    );
    assert_eq!(
        error.kind,
        LoadErrorKind::DuplicateKey {
            key: "actions".into()
        }
    );
    // Duplicate action names.
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    decision: allow\n  a:\n    decision: deny\n",
        "duplicate_key",
        5,
        3,
    );
    // Duplicate operator inside a condition.
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: { x: { lt: 1, lt: 2 } }\n        decision: allow\n",
        "duplicate_key",
        5,
        29,
    );
}

#[test]
fn refuses_wrong_types() {
    let error = check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    decision: allow\n    secret_arguments: card_token\n",
        "wrong_type",
        5,
        23,
    );
    assert_eq!(
        error.kind,
        LoadErrorKind::WrongType {
            key: "secret_arguments".into(),
            expected: "a list of argument names",
            found: "a string",
        }
    );
    check_error(
        "schema: countersign.policy/v1\nactions: [a, b]\n",
        "wrong_type",
        2,
        10,
    );
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a: allow\n",
        "wrong_type",
        3,
        6,
    );
    check_error(
        "schema: countersign.policy/v1\nenvironment: 3\nactions: {}\n",
        "wrong_type",
        2,
        14,
    );
    check_error("- schema\n", "wrong_type", 1, 1);
    // Keys are strings.
    check_error(
        "schema: countersign.policy/v1\nactions:\n  1: { decision: allow }\n",
        "wrong_type",
        3,
        3,
    );
}

#[test]
fn refuses_a_wrong_schema() {
    let error = check_error(
        "schema: countersign.policy/v2\nactions: {}\n",
        "unsupported_schema",
        1,
        9,
    );
    assert_eq!(
        error.to_string(),
        "countersign.yaml:1:9: unsupported schema `countersign.policy/v2`: expected `countersign.policy/v1`"
    );
}

#[test]
fn refuses_missing_required_keys() {
    check_error("actions: {}\n", "missing_key", 1, 1);
    check_error("", "missing_key", 1, 1);
    check_error("schema: countersign.policy/v1\n", "missing_key", 1, 1);
    let error = check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: { x: { eq: 1 } }\n",
        "missing_key",
        5,
        9,
    );
    assert_eq!(
        error.kind,
        LoadErrorKind::MissingKey {
            key: "decision",
            place: KeyPlace::Rule
        }
    );
}

#[test]
fn refuses_an_unknown_mode() {
    let error = check_error(
        "schema: countersign.policy/v1\nmode: enforcing\nactions: {}\n",
        "unknown_mode",
        2,
        7,
    );
    assert!(matches!(
        error.kind,
        LoadErrorKind::UnknownMode {
            suggestion: None,
            ..
        }
    ));
    let error = check_error(
        "schema: countersign.policy/v1\nmode: obsrve\nactions: {}\n",
        "unknown_mode",
        2,
        7,
    );
    assert!(matches!(
        error.kind,
        LoadErrorKind::UnknownMode {
            suggestion: Some("observe"),
            ..
        }
    ));
}

#[test]
fn refuses_an_invalid_environment() {
    check_error(
        "schema: countersign.policy/v1\nenvironment: \"\"\nactions: {}\n",
        "invalid_environment",
        2,
        14,
    );
    check_error(
        "schema: countersign.policy/v1\nenvironment: prod west\nactions: {}\n",
        "invalid_environment",
        2,
        14,
    );
}

#[test]
fn refuses_an_unknown_decision() {
    let error = check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    decision: alow\n",
        "unknown_decision",
        4,
        15,
    );
    assert!(matches!(
        error.kind,
        LoadErrorKind::UnknownDecision {
            suggestion: Some("allow"),
            ..
        }
    ));
    // YAML 1.1 booleans are strings here, and still not a decision.
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    decision: yes\n",
        "unknown_decision",
        4,
        15,
    );
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    decision: true\n",
        "wrong_type",
        4,
        15,
    );
}

#[test]
fn refuses_an_unknown_operator_and_suggests_one() {
    let error = check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: { amount: { \"<=\": 5 } }\n        decision: allow\n",
        "unknown_operator",
        5,
        27,
    );
    assert!(matches!(
        error.kind,
        LoadErrorKind::UnknownOperator {
            suggestion: Some("lte"),
            ..
        }
    ));
    let error = check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: { amount: { lten: 5 } }\n        decision: allow\n",
        "unknown_operator",
        5,
        27,
    );
    assert!(matches!(
        error.kind,
        LoadErrorKind::UnknownOperator {
            suggestion: Some("lte"),
            ..
        }
    ));
}

#[test]
fn refuses_operands_of_the_wrong_type() {
    let error = check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: { amount: { lt: \"5\" } }\n        decision: allow\n",
        "bad_operand",
        5,
        31,
    );
    assert_eq!(
        error.kind,
        LoadErrorKind::BadOperand {
            operator: "lt",
            expected: "a number",
            found: "a string"
        }
    );
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: { currency: { in: usd } }\n        decision: allow\n",
        "bad_operand",
        5,
        33,
    );
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: { n: { gte: [1] } }\n        decision: allow\n",
        "bad_operand",
        5,
        27,
    );
}

#[test]
fn refuses_an_empty_when() {
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: {}\n        decision: allow\n",
        "empty_when",
        5,
        15,
    );
}

#[test]
fn refuses_an_empty_condition() {
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: { amount: {} }\n        decision: allow\n",
        "empty_condition",
        5,
        25,
    );
}

#[test]
fn refuses_empty_rules() {
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules: []\n",
        "empty_rules",
        4,
        12,
    );
}

#[test]
fn refuses_an_action_with_both_decision_and_rules() {
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    decision: allow\n    rules:\n      - decision: deny\n",
        "decision_and_rules",
        4,
        5,
    );
}

#[test]
fn refuses_an_action_with_neither_decision_nor_rules() {
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    effect: \"a:{b}\"\n",
        "no_decision",
        4,
        5,
    );
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a: {}\n",
        "no_decision",
        3,
        6,
    );
}

#[test]
fn refuses_a_rule_after_an_unconditional_rule_naming_its_line() {
    let error = check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - decision: approve\n      - when: { x: { eq: 1 } }\n        decision: allow\n",
        "unreachable_rule",
        6,
        9,
    );
    assert_eq!(
        error.kind,
        LoadErrorKind::UnreachableRule {
            index: 1,
            shadowed_by_line: 5
        }
    );
}

#[test]
fn refuses_malformed_patterns() {
    // A new user's trial: a zero-width space in a key loaded cleanly, and the action then
    // matched nothing, with no hint why.
    for (hidden, code) in [
        ("\u{200b}", "U+200B"),
        ("\u{202e}", "U+202E"),
        ("\u{feff}", "U+FEFF"),
    ] {
        let error = check_error(
            &format!(
                "schema: countersign.policy/v1\nactions:\n  \"d\u{e9}ploy{hidden}\":\n    decision: allow\n"
            ),
            "invalid_pattern",
            3,
            3,
        );
        assert_eq!(
            error.kind,
            LoadErrorKind::InvalidPattern {
                key: format!("d\u{e9}ploy{hidden}"),
                problem: PatternProblem::Invisible(code.to_owned()),
            }
        );
    }
    let error = check_error(
        "schema: countersign.policy/v1\nactions:\n  \"mcp.*.read\":\n    decision: allow\n",
        "invalid_pattern",
        3,
        3,
    );
    assert!(matches!(
        error.kind,
        LoadErrorKind::InvalidPattern {
            problem: PatternProblem::StarNotAtEnd,
            ..
        }
    ));
    let error = check_error(
        "schema: countersign.policy/v1\nactions:\n  \"mcp.**\":\n    decision: allow\n",
        "invalid_pattern",
        3,
        3,
    );
    assert!(matches!(
        error.kind,
        LoadErrorKind::InvalidPattern {
            problem: PatternProblem::SeveralStars,
            ..
        }
    ));
    check_error(
        "schema: countersign.policy/v1\nactions:\n  \"\":\n    decision: allow\n",
        "invalid_pattern",
        3,
        3,
    );
    check_error(
        "schema: countersign.policy/v1\nactions:\n  \"a b\":\n    decision: allow\n",
        "invalid_pattern",
        3,
        3,
    );
}

#[test]
fn refuses_malformed_templates() {
    let cases = [
        (
            "\"refund:{payment_id\"",
            TemplateError::Unbalanced { position: 8 },
        ),
        (
            "\"refund:payment_id}\"",
            TemplateError::Unbalanced { position: 18 },
        ),
        ("\"refund:{}\"", TemplateError::EmptyField { position: 8 }),
        (
            "\"refund:{1id}\"",
            TemplateError::InvalidField {
                field: "1id".into(),
                position: 8,
            },
        ),
        (
            "\"refund:{a-b}\"",
            TemplateError::InvalidField {
                field: "a-b".into(),
                position: 8,
            },
        ),
        ("\"\"", TemplateError::Empty),
    ];
    for (template, expected) in cases {
        let yaml = format!(
            "schema: countersign.policy/v1\nactions:\n  a:\n    decision: allow\n    effect: {template}\n"
        );
        let error = check_error(&yaml, "invalid_template", 5, 13);
        assert_eq!(
            error.kind,
            LoadErrorKind::InvalidTemplate {
                key: "effect",
                error: expected
            }
        );
    }
}

#[test]
fn refuses_a_template_that_names_a_secret_argument() {
    // Case B17: an effect key built from a volatile credential defeats idempotency.
    let error = check_error(
        "schema: countersign.policy/v1\nactions:\n  pay:\n    effect: \"pay:{order}:{auth_token}\"\n    secret_arguments: [auth_token]\n    decision: approve\n",
        "secret_in_template",
        4,
        13,
    );
    assert_eq!(
        error.kind,
        LoadErrorKind::SecretInTemplate {
            key: "effect",
            field: "auth_token".into()
        }
    );
    // A path into a secret object reads the secret too.
    check_error(
        "schema: countersign.policy/v1\nactions:\n  pay:\n    resource: \"card:{card.last4}\"\n    secret_arguments: [card]\n    decision: approve\n",
        "secret_in_template",
        4,
        15,
    );
}

#[test]
fn accepts_secret_arguments_that_no_template_names() {
    // Case B17, the accepted shape: the effect key uses only stable fields.
    let policy = load(
        "schema: countersign.policy/v1\nactions:\n  pay:\n    effect: \"pay:{order}\"\n    secret_arguments: [auth_token]\n    decision: approve\n",
    );
    let entry = policy.entry("pay").expect("entry");
    let effect = entry.effect().expect("effect");
    let first = effect.render(&json!({"order": "o1", "amount": 700, "auth_token": "t-1"}));
    let second = effect.render(&json!({"order": "o1", "amount": 700, "auth_token": "t-2"}));
    assert_eq!(first, Ok("pay:o1".to_owned()));
    assert_eq!(first, second);
}

#[test]
fn refuses_a_condition_on_a_secret_argument() {
    check_error(
        "schema: countersign.policy/v1\nactions:\n  pay:\n    secret_arguments: [auth_token]\n    rules:\n      - when: { auth_token: { eq: x } }\n        decision: allow\n",
        "secret_in_condition",
        6,
        17,
    );
}

#[test]
fn refuses_a_secret_listed_twice_or_malformed() {
    check_error(
        "schema: countersign.policy/v1\nactions:\n  pay:\n    secret_arguments: [a, b, a]\n    decision: allow\n",
        "duplicate_secret",
        4,
        30,
    );
    check_error(
        "schema: countersign.policy/v1\nactions:\n  pay:\n    secret_arguments: [card.token]\n    decision: allow\n",
        "invalid_field",
        4,
        24,
    );
}

#[test]
fn refuses_a_malformed_argument_path_in_when() {
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: { \"customer..id\": { eq: 1 } }\n        decision: allow\n",
        "invalid_field",
        5,
        17,
    );
}

#[test]
fn refuses_bad_durations() {
    let cases = [
        ("0s", DurationProblem::Zero),
        ("8days", DurationProblem::TooLong),
        ("soon", DurationProblem::Unparsable),
        ("1500ms", DurationProblem::SubSecond),
        // `M` is months to humantime: refused by its unit, not as "at most 7 days".
        ("10M", DurationProblem::UnknownUnit),
        ("1y", DurationProblem::UnknownUnit),
    ];
    for (text, problem) in cases {
        let yaml = format!("schema: countersign.policy/v1\napproval_ttl: {text}\nactions: {{}}\n");
        let error = check_error(&yaml, "invalid_duration", 2, 15);
        assert_eq!(
            error.kind,
            LoadErrorKind::InvalidDuration {
                text: text.into(),
                problem
            }
        );
    }
    check_error(
        "schema: countersign.policy/v1\napproval_ttl: 900\nactions: {}\n",
        "wrong_type",
        2,
        15,
    );
    // Seven days exactly is the longest accepted.
    assert_eq!(
        load("schema: countersign.policy/v1\napproval_ttl: 7days\nactions: {}\n").approval_ttl(),
        Duration::from_secs(7 * 24 * 3600)
    );
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    approval_ttl: 0m\n    decision: approve\n",
        "invalid_duration",
        4,
        19,
    );
}

/// A tab in the indentation is named at its own line and column, wherever the scanner next
/// stumbled (it can name a neighbouring line), and the message says it is a tab.
#[test]
fn a_tab_in_the_indentation_is_named_where_it_is() {
    for (yaml, line, column) in [
        (
            "schema: countersign.policy/v1\nactions:\n  a:\n\tdecision: allow\n",
            4,
            1,
        ),
        (
            "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: {}\n  \t  decision: allow\n",
            6,
            3,
        ),
    ] {
        let error = load_error(yaml);
        assert_eq!(
            (error.kind.code(), error.line, error.column),
            ("syntax", Some(line), Some(column)),
            "{yaml:?}: {error}"
        );
        assert!(error.to_string().to_lowercase().contains("tab"), "{error}");
    }
}

#[test]
fn refuses_numbers_canonical_json_cannot_carry() {
    let cases = [
        ("9007199254740992", NumberProblem::IntegerOutOfRange),
        ("-0.0", NumberProblem::NegativeZero),
        (".inf", NumberProblem::NonFinite),
    ];
    for (number, problem) in cases {
        let yaml = format!(
            "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: {{ n: {{ eq: {number} }} }}\n        decision: allow\n"
        );
        let error = check_error(&yaml, "number_not_representable", 5, 26);
        assert_eq!(
            error.kind,
            LoadErrorKind::NumberNotRepresentable { problem }
        );
    }
    // The largest safe integer is fine.
    load(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: { n: { lte: 9007199254740991 } }\n        decision: allow\n",
    );
}

#[test]
fn refuses_invalid_yaml_with_its_place() {
    check_error(
        "schema: countersign.policy/v1\nactions: [a, b\n",
        "syntax",
        2,
        10,
    );
    check_error(
        "schema: countersign.policy/v1\nactions: {}\n---\nschema: x\n",
        "multiple_documents",
        4,
        1,
    );
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a: !custom {decision: allow}\n",
        "syntax",
        3,
        14,
    );
    check_error(
        "schema: countersign.policy/v1\nactions:\n  a:\n    <<: {decision: allow}\n",
        "syntax",
        4,
        5,
    );
}

#[test]
fn refuses_an_alias_bomb() {
    let mut yaml =
        String::from("schema: countersign.policy/v1\nx0: &x0 [a, a, a, a, a, a, a, a, a, a]\n");
    for level in 1..12 {
        let previous = level - 1;
        yaml.push_str(&format!(
            "x{level}: &x{level} [*x{previous}, *x{previous}, *x{previous}, *x{previous}, *x{previous}, *x{previous}, *x{previous}, *x{previous}, *x{previous}, *x{previous}]\n"
        ));
    }
    yaml.push_str("actions: {}\n");
    let error = load_error(&yaml);
    assert_eq!(error.kind.code(), "too_complex", "{error}");
    assert!(error.line.is_some());
}

#[test]
fn refuses_text_over_the_size_limit() {
    let mut yaml = String::from("schema: countersign.policy/v1\nactions: {}\n");
    yaml.push_str(&"#".repeat(MAX_POLICY_BYTES));
    let error = load_error(&yaml);
    assert_eq!(
        error.kind,
        LoadErrorKind::TooLarge {
            size: yaml.len() as u64,
            limit: MAX_POLICY_BYTES as u64
        }
    );
    assert_eq!((error.line, error.column), (None, None));
}

#[test]
fn accepts_aliases_within_budget() {
    let policy = load(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: &small { amount: { lte: 10 } }\n        decision: allow\n      - decision: deny\n  b:\n    rules:\n      - when: *small\n        decision: approve\n",
    );
    assert_eq!(
        policy.decide("b", &json!({"amount": 5})).decision,
        Decision::Approve
    );
}

#[test]
fn describes_errors_without_a_file() {
    let error = Policy::from_yaml_str("schema: countersign.policy/v1\nactoins: {}\n", None)
        .expect_err("bad");
    assert_eq!(error.file, None);
    assert!(
        error
            .to_string()
            .starts_with("2:1: unknown key `actoins` in policy"),
        "{error}"
    );
}

#[test]
fn snapshots_load_error_messages() {
    let cases = [
        "schema: countersign.policy/v1\nactions:\n  stripe.refund:\n    rules:\n      - whn: { amount: { lte: 5 } }\n        decision: allow\n",
        "schema: countersign.policy/v1\nactions:\n  a:\n    decision: allow\n  a:\n    decision: deny\n",
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: { amount: { \"<\": 5 } }\n        decision: allow\n",
        "schema: countersign.policy/v1\nactions:\n  pay:\n    effect: \"pay:{auth_token}\"\n    secret_arguments: [auth_token]\n    decision: approve\n",
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - decision: approve\n      - when: { x: { eq: 1 } }\n        decision: allow\n",
        "schema: countersign.policy/v1\napproval_ttl: 30days\nactions: {}\n",
        "schema: countersign.policy/v1\nactions:\n  a:\n    effect: \"refund:{payment_id\"\n    decision: allow\n",
        "schema: countersign.policy/v1\nactions:\n  \"mcp.*.read\":\n    decision: allow\n",
    ];
    let rendered: Vec<String> = cases
        .iter()
        .map(|yaml| load_error(yaml).to_string())
        .collect();
    // Without the module prefix, the snapshot file name does not depend on the crate name.
    insta::with_settings!({ prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!("load_error_messages", rendered.join("\n"));
    });
}

// ---------------------------------------------------------------------------------------------
// Decisions

const PRECEDENCE: &str = "\
schema: countersign.policy/v1
actions:
  \"*\":
    decision: approve
  \"mcp.*\":
    decision: deny
  \"mcp.files.*\":
    decision: allow
  mcp.files.delete:
    decision: deny
";

#[test]
fn exact_name_beats_any_pattern() {
    check(
        PRECEDENCE,
        "mcp.files.delete",
        json!({}),
        (Decision::Deny, "action_default"),
    );
    let policy = load(PRECEDENCE);
    assert_eq!(
        policy.entry("mcp.files.delete").map(ActionEntry::key),
        Some("mcp.files.delete")
    );
}

#[test]
fn longer_pattern_prefix_beats_shorter() {
    check(
        PRECEDENCE,
        "mcp.files.read",
        json!({}),
        (Decision::Allow, "action_default"),
    );
    check(
        PRECEDENCE,
        "mcp.db.drop",
        json!({}),
        (Decision::Deny, "action_default"),
    );
    let policy = load(PRECEDENCE);
    assert_eq!(
        policy.entry("mcp.files.read").map(ActionEntry::key),
        Some("mcp.files.*")
    );
    assert_eq!(
        policy.entry("mcp.files.").map(ActionEntry::key),
        Some("mcp.files.*")
    );
    assert_eq!(
        policy.entry("mcp.file").map(ActionEntry::key),
        Some("mcp.*")
    );
}

#[test]
fn star_alone_is_the_default_for_every_other_name() {
    check(
        PRECEDENCE,
        "send_email",
        json!({}),
        (Decision::Approve, "action_default"),
    );
    check(
        PRECEDENCE,
        "",
        json!({}),
        (Decision::Approve, "action_default"),
    );
}

#[test]
fn unknown_action_is_denied_without_an_entry() {
    check(
        REFUND,
        "stripe.charge",
        json!({"amount": 1}),
        (Decision::Deny, "unknown_action"),
    );
    check(
        "schema: countersign.policy/v1\nactions: {}\n",
        "anything",
        json!({}),
        (Decision::Deny, "unknown_action"),
    );
    // A pattern does not match a name that merely contains its prefix elsewhere.
    check(
        REFUND,
        "x.mcp.files.read_a",
        json!({}),
        (Decision::Deny, "unknown_action"),
    );
}

#[test]
fn first_matching_rule_wins() {
    check(
        REFUND,
        "stripe.refund",
        json!({"amount": 100, "currency": "jpy"}),
        (Decision::Allow, "rule"),
    );
    check(
        REFUND,
        "stripe.refund",
        json!({"amount": 60000, "currency": "usd"}),
        (Decision::Approve, "rule"),
    );
    check(
        REFUND,
        "stripe.refund",
        json!({"amount": 60000, "currency": "jpy"}),
        (Decision::Deny, "rule"),
    );
    let policy = load(REFUND);
    let decided = policy.decide(
        "stripe.refund",
        &json!({"amount": 60000, "currency": "eur"}),
    );
    assert_eq!(decided.reason, DecisionReason::Rule { index: 1 });
    assert_eq!(decided.entry.map(ActionEntry::key), Some("stripe.refund"));
}

#[test]
fn no_matching_rule_denies() {
    let yaml = "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: { n: { gt: 10 } }\n        decision: allow\n";
    check(
        yaml,
        "a",
        json!({"n": 5}),
        (Decision::Deny, "no_matching_rule"),
    );
    check(yaml, "a", json!({"n": 11}), (Decision::Allow, "rule"));
}

fn one_condition(condition: &str) -> String {
    format!(
        "schema: countersign.policy/v1\nactions:\n  a:\n    rules:\n      - when: {{ {condition} }}\n        decision: allow\n"
    )
}

#[test]
fn each_operator_decides_as_documented() {
    let allow = (Decision::Allow, "rule");
    let deny = (Decision::Deny, "no_matching_rule");
    let table: &[(&str, Value, (Decision, &str))] = &[
        ("x: { eq: usd }", json!({"x": "usd"}), allow),
        ("x: { eq: usd }", json!({"x": "USD"}), deny),
        ("x: { eq: \"5\" }", json!({"x": 5}), deny),
        ("x: { eq: true }", json!({"x": true}), allow),
        ("x: { eq: null }", json!({"x": null}), allow),
        ("x: { eq: [1, 2] }", json!({"x": [1, 2]}), allow),
        ("x: { eq: { k: 1 } }", json!({"x": {"k": 1.0}}), allow),
        ("x: { ne: usd }", json!({"x": "eur"}), allow),
        ("x: { ne: usd }", json!({"x": "usd"}), deny),
        ("x: { in: [usd, eur] }", json!({"x": "eur"}), allow),
        ("x: { in: [usd, eur] }", json!({"x": "jpy"}), deny),
        ("x: { in: [] }", json!({"x": "jpy"}), deny),
        ("x: { not_in: [usd, eur] }", json!({"x": "jpy"}), allow),
        ("x: { not_in: [usd, eur] }", json!({"x": "usd"}), deny),
        ("x: { lt: 10 }", json!({"x": 9.5}), allow),
        ("x: { lt: 10 }", json!({"x": 10}), deny),
        ("x: { lte: 10 }", json!({"x": 10}), allow),
        ("x: { lte: 10 }", json!({"x": 10.5}), deny),
        ("x: { gt: 10 }", json!({"x": 11}), allow),
        ("x: { gt: 10 }", json!({"x": 10}), deny),
        ("x: { gte: 10.5 }", json!({"x": 10.5}), allow),
        ("x: { gte: 10.5 }", json!({"x": 10}), deny),
        ("x: { gte: -3 }", json!({"x": -2}), allow),
        // Several operators on one field are ANDed.
        ("x: { gt: 1, lt: 5 }", json!({"x": 3}), allow),
        ("x: { gt: 1, lt: 5 }", json!({"x": 7}), deny),
        // Several fields are ANDed.
        ("x: { eq: 1 }, y: { eq: 2 }", json!({"x": 1, "y": 2}), allow),
        ("x: { eq: 1 }, y: { eq: 2 }", json!({"x": 1, "y": 3}), deny),
        // A non-number never satisfies an ordering.
        ("x: { lt: 10 }", json!({"x": "5"}), deny),
        ("x: { gte: 0 }", json!({"x": null}), deny),
        ("x: { gte: 0 }", json!({"x": [1]}), deny),
    ];
    for (condition, arguments, expected) in table {
        check(&one_condition(condition), "a", arguments.clone(), *expected);
    }
}

#[test]
fn equality_is_canonical_so_one_equals_one_point_zero() {
    let allow = (Decision::Allow, "rule");
    check(
        &one_condition("x: { eq: 1 }"),
        "a",
        json!({"x": 1.0}),
        allow,
    );
    check(
        &one_condition("x: { eq: 1.0 }"),
        "a",
        json!({"x": 1}),
        allow,
    );
    check(
        &one_condition("x: { in: [1, 2] }"),
        "a",
        json!({"x": 2.0}),
        allow,
    );
    check(
        &one_condition("x: { ne: 1 }"),
        "a",
        json!({"x": 1.0}),
        (Decision::Deny, "no_matching_rule"),
    );
}

#[test]
fn dotted_paths_descend_into_objects() {
    let allow = (Decision::Allow, "rule");
    let deny = (Decision::Deny, "no_matching_rule");
    let yaml = one_condition("customer.id: { eq: c1 }");
    check(&yaml, "a", json!({"customer": {"id": "c1"}}), allow);
    check(&yaml, "a", json!({"customer": {"id": "c2"}}), deny);
    check(&yaml, "a", json!({"customer": "c1"}), deny);
    // A top-level key spelled with a dot is not a path.
    check(&yaml, "a", json!({"customer.id": "c1"}), deny);
}

#[test]
fn missing_argument_fails_closed_for_every_operator() {
    let deny = (Decision::Deny, "no_matching_rule");
    for condition in [
        "x: { eq: 1 }",
        "x: { ne: 1 }",
        "x: { in: [1] }",
        "x: { not_in: [1] }",
        "x: { lt: 1 }",
        "x: { lte: 1 }",
        "x: { gt: 1 }",
        "x: { gte: 1 }",
        "x.y: { ne: 1 }",
    ] {
        check(&one_condition(condition), "a", json!({"other": 1}), deny);
        check(
            &one_condition(condition),
            "a",
            json!({"x": {}}),
            if condition.starts_with("x.y") {
                deny
            } else {
                check_present(condition)
            },
        );
        check(&one_condition(condition), "a", json!(null), deny);
        check(&one_condition(condition), "a", json!("not an object"), deny);
    }
}

/// The decision for `{"x": {}}`: `x` is present (an object), so only `ne`/`not_in` hold.
fn check_present(condition: &str) -> (Decision, &'static str) {
    if condition.contains("ne:") || condition.contains("not_in") {
        (Decision::Allow, "rule")
    } else {
        (Decision::Deny, "no_matching_rule")
    }
}

#[test]
fn decision_and_reason_have_stable_codes() {
    assert_eq!(
        [
            Decision::Allow.as_str(),
            Decision::Approve.as_str(),
            Decision::Deny.as_str()
        ],
        ["allow", "approve", "deny"]
    );
    assert_eq!(
        [
            DecisionReason::UnknownAction.code(),
            DecisionReason::NoMatchingRule.code(),
            DecisionReason::Rule { index: 3 }.code(),
            DecisionReason::Shorthand.code(),
        ],
        [
            "unknown_action",
            "no_matching_rule",
            "rule",
            "action_default"
        ]
    );
}

#[test]
fn observe_mode_does_not_change_the_decision() {
    let observed = REFUND.replace("mode: enforce", "mode: observe");
    check(
        &observed,
        "stripe.refund",
        json!({"amount": 60000, "currency": "jpy"}),
        (Decision::Deny, "rule"),
    );
    check(
        &observed,
        "unknown",
        json!({}),
        (Decision::Deny, "unknown_action"),
    );
}

#[test]
fn matches_pattern_follows_the_key_rules() {
    assert!(matches_pattern("*", "anything"));
    assert!(matches_pattern("mcp.files.read_*", "mcp.files.read_dir"));
    assert!(matches_pattern("mcp.files.read_*", "mcp.files.read_"));
    assert!(!matches_pattern("mcp.files.read_*", "mcp.files.write"));
    assert!(matches_pattern("stripe.refund", "stripe.refund"));
    assert!(!matches_pattern("stripe.refund", "stripe.refunds"));
    assert!(!matches_pattern("a*b*", "a*bc"));
}

// ---------------------------------------------------------------------------------------------
// Cases B14 and B15: MCP tool names

#[test]
fn pattern_default_covers_a_tool_never_seen_before() {
    // Case B15: a tool announced after startup falls under the fail-closed default.
    let yaml = "schema: countersign.policy/v1\nactions:\n  \"mcp.s.*\":\n    decision: approve\n  mcp.s.list_users:\n    decision: allow\n";
    check(
        yaml,
        "mcp.s.create_user",
        json!({"name": "x"}),
        (Decision::Approve, "action_default"),
    );
    check(
        yaml,
        "mcp.s.delete_user",
        json!({"id": 7}),
        (Decision::Approve, "action_default"),
    );
    let star = "schema: countersign.policy/v1\nactions:\n  \"*\":\n    decision: approve\n";
    check(
        star,
        "mcp.other.never_seen",
        json!({}),
        (Decision::Approve, "action_default"),
    );
}

#[test]
fn same_tool_name_on_two_servers_is_decided_independently() {
    // Case B14: `search` on S1 is allowed, `search` on S2 needs approval.
    let yaml = "schema: countersign.policy/v1\nactions:\n  mcp.s1.search:\n    decision: allow\n  mcp.s2.search:\n    decision: approve\n";
    let policy = load(yaml);
    let arguments = json!({"q": "x"});
    let first = policy.decide("mcp.s1.search", &arguments);
    let second = policy.decide("mcp.s2.search", &arguments);
    assert_eq!(first.decision, Decision::Allow);
    assert_eq!(second.decision, Decision::Approve);
    let (first, second) = (first.entry.expect("s1"), second.entry.expect("s2"));
    assert_ne!(first.fingerprint(), second.fingerprint());
    check(
        yaml,
        "search",
        arguments,
        (Decision::Deny, "unknown_action"),
    );
}

// ---------------------------------------------------------------------------------------------
// Case B05: entry fingerprints and the policy hash

const TRANSFER_V1: &str = "\
schema: countersign.policy/v1
actions:
  transfer:
    rules:
      - when: { amount: { lte: 1000 } }
        decision: approve
      - decision: deny
  email.send:
    decision: allow
";

fn fingerprint(yaml: &str, action: &str) -> String {
    load(yaml)
        .entry(action)
        .expect("entry")
        .fingerprint()
        .to_owned()
}

#[test]
fn fingerprint_survives_edits_to_other_actions() {
    // B05 (c): policy v2 leaves `transfer` unchanged; an approval bound to it stays valid.
    let v2 = TRANSFER_V1.replace(
        "email.send:\n    decision: allow",
        "email.send:\n    decision: approve",
    );
    assert_ne!(load(TRANSFER_V1).hash(), load(&v2).hash());
    assert_eq!(
        fingerprint(TRANSFER_V1, "transfer"),
        fingerprint(&v2, "transfer")
    );
    let added = format!("{TRANSFER_V1}  other:\n    decision: deny\n");
    assert_eq!(
        fingerprint(TRANSFER_V1, "transfer"),
        fingerprint(&added, "transfer")
    );
}

#[test]
fn fingerprint_changes_when_this_actions_rules_change() {
    // B05 (a): `transfer` now denied.
    let denied = "schema: countersign.policy/v1\nactions:\n  transfer:\n    decision: deny\n  email.send:\n    decision: allow\n";
    assert_ne!(
        fingerprint(TRANSFER_V1, "transfer"),
        fingerprint(denied, "transfer")
    );
    // A changed bound.
    let bound = TRANSFER_V1.replace("lte: 1000", "lte: 2000");
    assert_ne!(
        fingerprint(TRANSFER_V1, "transfer"),
        fingerprint(&bound, "transfer")
    );
    // A changed TTL, template or secret list is a change to the entry too.
    for addition in [
        "    approval_ttl: 5m\n",
        "    effect: \"t:{id}\"\n",
        "    secret_arguments: [otp]\n",
    ] {
        let changed = TRANSFER_V1.replace("  transfer:\n", &format!("  transfer:\n{addition}"));
        assert_ne!(
            fingerprint(TRANSFER_V1, "transfer"),
            fingerprint(&changed, "transfer"),
            "{addition}"
        );
    }
}

#[test]
fn fingerprint_ignores_formatting() {
    let reformatted = "schema: countersign.policy/v1\nactions:\n  transfer:\n    rules: [ {decision: approve, when: {amount: {lte: 1000}}}, {decision: deny} ]  # same\n  email.send: {decision: allow}\n";
    assert_eq!(
        fingerprint(TRANSFER_V1, "transfer"),
        fingerprint(reformatted, "transfer")
    );
}

#[test]
fn policy_hash_is_stable_under_reformatting_comments_and_key_order() {
    let reordered = "\
# The refund policy.
actions:
  \"mcp.files.read_*\": { decision: allow }
  stripe.refund:
    secret_arguments: [card_token]   # never hashed
    rules:
      - decision: allow
        when: { amount: { lte: 50000 } }
      - when:
          currency: { in: [usd, eur] }
          amount: { lte: 1000000 }
        decision: approve
      - decision: deny
    approval_ttl: 600s
    resource: 'payment:{payment_id}'
    effect: refund:{payment_id}
approval_ttl: 900s
environment: production
schema: countersign.policy/v1
";
    assert_eq!(load(REFUND).hash(), load(reordered).hash());
    // Writing a default explicitly does not change the hash either.
    let explicit = "schema: countersign.policy/v1\nmode: enforce\nenvironment: default\napproval_ttl: 15m\nactions: {}\n";
    assert_eq!(
        load(explicit).hash(),
        load("schema: countersign.policy/v1\nactions:\n").hash()
    );
}

#[test]
fn policy_hash_changes_with_any_semantic_change() {
    let base = load(REFUND).hash().to_owned();
    for (from, to) in [
        ("mode: enforce", "mode: observe"),
        ("environment: production", "environment: staging"),
        ("approval_ttl: 15m", "approval_ttl: 16m"),
        ("lte: 50000", "lte: 50001"),
        ("decision: deny", "decision: approve"),
        ("[usd, eur]", "[eur, usd, gbp]"),
        ("\"mcp.files.read_*\"", "\"mcp.files.reads_*\""),
        ("refund:{payment_id}", "refund:{payment_id}:x"),
    ] {
        let changed = REFUND.replacen(from, to, 1);
        assert_ne!(changed, REFUND, "{from}");
        assert_ne!(load(&changed).hash(), &base, "{from} -> {to}");
    }
}

// ---------------------------------------------------------------------------------------------
// Templates

#[test]
fn renders_strings_numbers_and_booleans() {
    let template =
        Template::parse("refund:{payment_id}:{amount}:{live}:{customer.id}").expect("parses");
    assert_eq!(
        template.as_str(),
        "refund:{payment_id}:{amount}:{live}:{customer.id}"
    );
    assert_eq!(
        template.fields().collect::<Vec<_>>(),
        ["payment_id", "amount", "live", "customer.id"]
    );
    let rendered = template.render(&json!({
        "payment_id": "p_1:x y", "amount": 1.0, "live": false, "customer": {"id": 42}
    }));
    assert_eq!(rendered, Ok("refund:p_1:x y:1:false:42".to_owned()));
    let constant = Template::parse("global-lock").expect("parses");
    assert_eq!(constant.fields().count(), 0);
    assert_eq!(constant.render(&json!({})), Ok("global-lock".to_owned()));
}

#[test]
fn refuses_to_render_missing_null_or_structured_fields() {
    let template = Template::parse("k:{a}").expect("parses");
    let cases = [
        (
            json!({}),
            TemplateError::MissingField { field: "a".into() },
            "missing_field",
        ),
        (
            json!([1]),
            TemplateError::MissingField { field: "a".into() },
            "missing_field",
        ),
        (
            json!({"a": null}),
            TemplateError::NullField { field: "a".into() },
            "null_field",
        ),
        (
            json!({"a": [1]}),
            TemplateError::NonScalarField {
                field: "a".into(),
                found: "an array",
            },
            "non_scalar_field",
        ),
        (
            json!({"a": {"b": 1}}),
            TemplateError::NonScalarField {
                field: "a".into(),
                found: "an object",
            },
            "non_scalar_field",
        ),
    ];
    for (arguments, expected, reason) in cases {
        let error = template.render(&arguments).expect_err("refused");
        assert_eq!(error.reason(), reason);
        assert_eq!(error, expected);
    }
}

#[test]
fn template_parse_errors_have_reasons() {
    assert_eq!(
        Template::parse("{a}{").map_err(|e| e.reason()),
        Err("unbalanced")
    );
    assert_eq!(
        Template::parse("{a{b}}").map_err(|e| e.reason()),
        Err("unbalanced")
    );
    assert_eq!(
        Template::parse("x{}").map_err(|e| e.reason()),
        Err("empty_field")
    );
    assert_eq!(
        Template::parse("{a.}").map_err(|e| e.reason()),
        Err("invalid_field")
    );
    assert_eq!(Template::parse("").map_err(|e| e.reason()), Err("empty"));
    assert!(Template::parse("{_a.b_2}").is_ok());
}

// The `mcp` options an entry carries for the MCP gateway (issue #5).

const MCP_BASE: &str =
    "schema: countersign.policy/v1\nactions:\n  mcp.files.write_file:\n    decision: approve\n";

#[test]
fn reads_mcp_not_executed_on_error_and_defaults_it_to_false() {
    let plain = load(MCP_BASE);
    let entry = plain.entry("mcp.files.write_file").expect("entry");
    assert!(!entry.not_executed_on_error());
    let marked = load(&format!(
        "{MCP_BASE}    mcp: {{ not_executed_on_error: true }}\n"
    ));
    let entry = marked.entry("mcp.files.write_file").expect("entry");
    assert!(entry.not_executed_on_error());
}

#[test]
fn mcp_option_changes_the_entry_fingerprint_only_when_set() {
    let plain = load(MCP_BASE);
    let written_false = load(&format!(
        "{MCP_BASE}    mcp: {{ not_executed_on_error: false }}\n"
    ));
    let marked = load(&format!(
        "{MCP_BASE}    mcp: {{ not_executed_on_error: true }}\n"
    ));
    let fingerprint = |policy: &Policy| {
        policy
            .entry("mcp.files.write_file")
            .expect("entry")
            .fingerprint()
            .to_owned()
    };
    assert_eq!(fingerprint(&plain), fingerprint(&written_false));
    assert_ne!(fingerprint(&plain), fingerprint(&marked));
    assert_ne!(plain.hash(), marked.hash());
}

#[test]
fn refuses_unknown_key_in_mcp_options() {
    let error = check_error(
        &format!("{MCP_BASE}    mcp: {{ not_executed_on_eror: true }}\n"),
        "unknown_key",
        5,
        12,
    );
    assert!(
        error.to_string().contains("`not_executed_on_error`"),
        "{error}"
    );
}

#[test]
fn refuses_non_boolean_mcp_not_executed_on_error() {
    check_error(
        &format!("{MCP_BASE}    mcp: {{ not_executed_on_error: \"yes\" }}\n"),
        "wrong_type",
        5,
        35,
    );
    check_error(&format!("{MCP_BASE}    mcp: true\n"), "wrong_type", 5, 10);
}

#[test]
fn can_permit_is_false_only_for_entries_that_always_deny() {
    let policy = load(
        "schema: countersign.policy/v1\nactions:\n  a.deny:\n    decision: deny\n  a.allow:\n    decision: allow\n  a.rules_deny:\n    rules:\n      - when: { x: { eq: 1 } }\n        decision: deny\n      - decision: deny\n  a.rules_some:\n    rules:\n      - when: { x: { eq: 1 } }\n        decision: approve\n      - decision: deny\n",
    );
    let can = |name: &str| policy.entry(name).expect("entry").can_permit();
    assert!(!can("a.deny"));
    assert!(can("a.allow"));
    assert!(!can("a.rules_deny"));
    assert!(can("a.rules_some"));
}

#[test]
fn warns_about_approval_rules_nobody_can_satisfy() {
    let policy = Policy::from_yaml_str(
        "schema: countersign.policy/v1
directory:
  human:alice: [finance]
actions:
  refund:
    decision: approve
    approval: { approvers: [\"human:alice\"], quorum: 2 }
  wire:
    rules:
      - decision: approve
        approval: { approvers: [\"group:finanse\", \"group:finance\"], require: authenticated }
  read:
    decision: approve
    approval: { approvers: [\"group:fin*\", \"human:*\"], quorum: 3 }
",
        None,
    )
    .expect("warnings are not load errors");
    let warnings = policy.approval_warnings();
    assert_eq!(warnings.len(), 3, "{warnings:#?}");
    assert!(
        warnings[0].starts_with("line 5: `refund`: `quorum: 2` but only 1 approver(s) are named")
    );
    // `require: authenticated` with no key: the approval service's sign-in may still answer,
    // so this is said, and never "nobody can answer" beside it (a new user's trial).
    assert!(
        warnings[1].starts_with(
            "line 8: `wire` rule 1: `require: authenticated` but `approvers.keys` lists no key"
        ),
        "{warnings:#?}"
    );
    assert!(
        warnings[2]
            .starts_with("line 8: `wire` rule 1: nobody in `directory` is in group `finanse`")
    );
    assert!(
        warnings
            .iter()
            .all(|warning| !warning.contains("nobody can answer")),
        "{warnings:#?}"
    );
    // Patterns and known groups draw no warning.
    let clean = Policy::from_yaml_str(
        "schema: countersign.policy/v1\nactions:\n  a:\n    decision: approve\n",
        None,
    )
    .expect("loads");
    assert!(clean.approval_warnings().is_empty());
}

/// A quorum over groups that the directory's members can never reach (no key, so no token can
/// name more members) is reported, counting each person once; a key, a wildcard or enough
/// members draws no warning.
#[test]
fn warns_when_a_groups_quorum_exceeds_the_people_who_can_answer() {
    let short = "schema: countersign.policy/v1
directory:
  human:ann: [finance]
  human:bob: [finance, risk]
  human:eve: [support]
actions:
  wire:
    decision: approve
    approval: { approvers: [\"group:finance\", \"group:risk\", \"human:bob\"], quorum: 3 }
";
    let warnings = Policy::from_yaml_str(short, None)
        .expect("warnings are not load errors")
        .approval_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].starts_with(
            "line 7: `wire`: `quorum: 3` but only 2 approver(s) can answer (human:ann, human:bob: "
        ),
        "{warnings:#?}"
    );
    let enough = short.replace("human:eve: [support]", "human:eve: [risk]");
    let warnings = Policy::from_yaml_str(&enough, None)
        .expect("loads")
        .approval_warnings();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let wildcard = short.replace("\"human:bob\"]", "\"human:*\"]");
    let warnings = Policy::from_yaml_str(&wildcard, None)
        .expect("loads")
        .approval_warnings();
    assert!(warnings.is_empty(), "{warnings:#?}");
}

/// Issue #31: an approval whose approvers match nobody configured is reported at once, with
/// the entry's line; a directory member or a key (tokens carry groups) makes it answerable.
#[test]
fn warns_when_nobody_can_answer_an_approval() {
    let nobody = "schema: countersign.policy/v1
directory:
  human:alice: [support]
actions:
  read:
    decision: allow
  refund:
    decision: approve
    approval: { approvers: [\"group:finance\"] }
";
    let warnings = Policy::from_yaml_str(nobody, None)
        .expect("loads")
        .approval_warnings();
    let found: Vec<&String> = warnings
        .iter()
        .filter(|warning| warning.contains("nobody can answer"))
        .collect();
    assert_eq!(found.len(), 1, "{warnings:#?}");
    assert!(
        found[0].starts_with("line 7: `refund`: nobody can answer: its approvers (group:finance)"),
        "{warnings:#?}"
    );
    let member = nobody.replace("[support]", "[support, finance]");
    let warnings = Policy::from_yaml_str(&member, None)
        .expect("loads")
        .approval_warnings();
    assert!(
        warnings
            .iter()
            .all(|warning| !warning.contains("nobody can answer")),
        "{warnings:#?}"
    );
    let key = crate::token::generate_keypair()
        .expect("a key")
        .public_key();
    let with_key = nobody.replace(
        "actions:",
        &format!("approvers:\n  keys: [\"{key}\"]\nactions:"),
    );
    let warnings = Policy::from_yaml_str(&with_key, None)
        .expect("loads")
        .approval_warnings();
    assert!(
        warnings
            .iter()
            .all(|warning| !warning.contains("nobody can answer")),
        "{warnings:#?}"
    );
    // A named approver can always be asserted; under `require: authenticated` with no key only
    // the approval service's sign-in can answer, which is said instead of "nobody".
    let named = nobody.replace("group:finance", "human:bob");
    assert!(
        Policy::from_yaml_str(&named, None)
            .expect("loads")
            .approval_warnings()
            .iter()
            .all(|warning| !warning.contains("nobody can answer"))
    );
    let named_authenticated = named.replace("\"] }", "\"], require: authenticated }");
    let warnings = Policy::from_yaml_str(&named_authenticated, None)
        .expect("loads")
        .approval_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].contains("only the approval service's OIDC or proxy sign-in can answer"),
        "{warnings:#?}"
    );
    // Nobody at all: that one warning, not also the group's own.
    let warnings = Policy::from_yaml_str(nobody, None)
        .expect("loads")
        .approval_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
}

/// A new user's trial: `decision: allow` with an `approval:` block loaded with the warning
/// that its requests "will expire unanswered", although an `allow` never opens one. An
/// approval block no `approve` decision can use is reported as unused, and only that; a
/// pattern entry's `allow`, which a caller may raise to `approve`, keeps its block.
#[test]
fn an_approval_block_no_approve_can_use_is_reported_as_unused() {
    let policy = "\
schema: countersign.policy/v1
actions:
  deploy:
    decision: allow
    approval: { approvers: [\"group:nobody\"] }
  refund:
    rules:
      - when: { amount: { lte: 10 } }
        decision: deny
        approval: { approvers: [\"group:nobody\"] }
      - decision: approve
  \"mcp.files.*\":
    decision: allow
    approval: { approvers: [\"human:bob\"] }
";
    let warnings = Policy::from_yaml_str(policy, None)
        .expect("loads")
        .approval_warnings();
    assert_eq!(
        warnings,
        vec![
            "line 3: `deploy`: has an `approval:` block but decides `allow`: only an `approve` decision opens a request, so the block is never used; remove it, or make the decision `approve`".to_owned(),
            "line 6: `refund` rule 1: has an `approval:` block but decides `deny`: only an `approve` decision opens a request, so the block is never used; remove it, or make the decision `approve`".to_owned(),
        ],
        "{warnings:#?}"
    );
}

/// Issue #27: "could this principal ever be allowed or approved for this action?" — the
/// question behind the MCP gateway's per-principal `tools/list`.
#[test]
fn could_permit_answers_per_principal() {
    let policy = load(
        "schema: countersign.policy/v1
directory:
  agent:ops: [ops]
  human:olga: [ops]
actions:
  t.allow:
    decision: allow
  t.deny:
    decision: deny
  t.approve_default:
    decision: approve
  t.only_self:
    decision: approve
    approval: { approvers: [\"agent:ops\"] }
  t.two_named:
    decision: approve
    approval: { approvers: [\"agent:ops\", \"human:bob\"], quorum: 2 }
  t.own_group:
    decision: approve
    approval: { approvers: [\"group:ops\"], distinct_from_requester: true }
  t.rules:
    rules:
      - when: { x: { eq: 1 } }
        decision: approve
        approval: { approvers: [\"agent:ops\"] }
      - decision: deny
  t.rules_allow:
    rules:
      - when: { x: { eq: 1 } }
        decision: allow
      - decision: deny
  \"t.pattern_*\":
    decision: approve
",
    );
    let could = |action: &str, principal: &str| policy.could_permit(action, principal);
    for principal in ["agent:ops", "agent:other"] {
        assert!(could("t.allow", principal));
        assert!(!could("t.deny", principal));
        assert!(!could("t.unknown", principal), "no entry is never");
        assert!(could("t.approve_default", principal));
        assert!(could("t.rules_allow", principal));
        assert!(could("t.pattern_x", principal));
    }
    // The only approver is the requester itself, who may never approve.
    assert!(!could("t.only_self", "agent:ops"));
    assert!(could("t.only_self", "agent:other"));
    assert!(!could("t.rules", "agent:ops"));
    assert!(could("t.rules", "agent:other"));
    // A quorum of 2 out of two named, one of them the requester.
    assert!(!could("t.two_named", "agent:ops"));
    assert!(could("t.two_named", "agent:other"));
    // Every approver must be in the requester's own group, which is refused.
    assert!(!could("t.own_group", "agent:ops"));
    assert!(could("t.own_group", "agent:other"));
}

#[test]
fn could_permit_counts_approvers_the_policy_does_not_configure() {
    // Nobody the policy configures can answer these, but the approval service's OIDC or proxy
    // sign-in may verify such an approver: never hidden on that ground.
    let policy = load(
        "schema: countersign.policy/v1
actions:
  t.nobody:
    decision: approve
    approval: { approvers: [\"group:finance\"] }
  t.authenticated:
    decision: approve
    approval: { approvers: [\"human:alice\"], require: authenticated }
",
    );
    assert!(policy.could_permit("t.nobody", "agent:a"));
    assert!(policy.could_permit("t.authenticated", "agent:a"));
}

/// A quorum written as text (`"2"`) is refused with its quotes shown, so the message does not
/// read as refusing the count 2; a number out of range shows the number.
#[test]
fn a_quoted_quorum_is_named_as_text() {
    let policy = |quorum: &str| {
        format!(
            "schema: countersign.policy/v1\nactions:\n  refund:\n    decision: approve\n    approval: {{ approvers: [\"human:*\"], quorum: {quorum} }}\n"
        )
    };
    let quoted = check_error(&policy("\"2\""), "invalid_quorum", 5, 49);
    assert!(
        quoted
            .to_string()
            .contains("invalid `quorum` \"2\" (quoted, so text): expected a whole number from 1 to 100, unquoted"),
        "{quoted}"
    );
    let zero = check_error(&policy("0"), "invalid_quorum", 5, 49);
    assert!(zero.to_string().contains("invalid `quorum` `0`:"), "{zero}");
    let list = load_error(&policy("[2]"));
    assert!(
        list.to_string().contains("invalid `quorum` (a list):"),
        "{list}"
    );
}
