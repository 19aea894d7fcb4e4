//! A malformed policy file: `countersign verify --policy FILE` says what is wrong and where
//! (`file:line:column`), in one line, exits 1, and writes nothing.

use crate::support::{Sandbox, StoreFiles};

/// Write `policy` to `bad.yaml`, verify it, and check the one-line error is `expected`.
fn check(policy: &str, expected: &str) {
    let sandbox = Sandbox::new();
    sandbox.write("bad.yaml", policy);
    let run = sandbox.run(&["verify", "--policy", "bad.yaml"]);
    assert_eq!(run.one_line_error(), expected);
    assert!(
        StoreFiles::read(&sandbox.store_path()).is_absent(),
        "a store was created"
    );
    assert!(
        !sandbox.work().join(".countersign").exists(),
        "a store folder was created"
    );
}

#[test]
fn names_an_unknown_key_and_suggests_the_closest() {
    check(
        "schema: countersign.policy/v1
actions:
  stripe.refund:
    rules:
      - whn: { amount: { lte: 100 } }
        decision: allow
",
        "bad.yaml:5:9: unknown key `whn` in rule: expected one of `when`, `decision`, `approval`: did you mean `when`?",
    );
}

#[test]
fn names_a_duplicate_key_at_its_second_occurrence() {
    check(
        "schema: countersign.policy/v1
actions:
  stripe.refund:
    decision: allow
  stripe.refund:
    decision: deny
",
        "bad.yaml:5:3: duplicate key `stripe.refund`: a key may appear once in a mapping",
    );
}

#[test]
fn names_an_unknown_operator() {
    check(
        r#"schema: countersign.policy/v1
actions:
  stripe.refund:
    rules:
      - when: { amount: { "<": 100 } }
        decision: allow
"#,
        "bad.yaml:5:27: unknown operator `<`: expected one of `eq`, `ne`, `in`, `not_in`, `lt`, `lte`, `gt`, `gte`: did you mean `lt`?",
    );
}

#[test]
fn names_an_unknown_decision() {
    check(
        "schema: countersign.policy/v1
actions:
  stripe.refund:
    decision: alow
",
        "bad.yaml:4:15: unknown decision `alow`: expected `allow`, `approve` or `deny`: did you mean `allow`?",
    );
}

#[test]
fn names_an_unreachable_rule_and_the_rule_that_shadows_it() {
    check(
        "schema: countersign.policy/v1
actions:
  stripe.refund:
    rules:
      - decision: approve
      - when: { amount: { lte: 100 } }
        decision: allow
",
        "bad.yaml:6:9: unreachable rule: the rule on line 5 has no `when` and matches every call: move this rule above it or remove it",
    );
}

#[test]
fn names_a_template_that_does_not_parse() {
    check(
        r#"schema: countersign.policy/v1
actions:
  stripe.refund:
    effect: "refund:{payment_id"
    decision: allow
"#,
        "bad.yaml:4:13: invalid `effect` template: unbalanced brace at character 8: write each field as `{name}`",
    );
}

#[test]
fn refuses_a_secret_argument_in_a_template() {
    check(
        r#"schema: countersign.policy/v1
actions:
  stripe.refund:
    effect: "refund:{api_key}"
    secret_arguments: [api_key]
    decision: allow
"#,
        "bad.yaml:4:13: `effect` template uses `api_key`, which is a secret argument: secret arguments are left out of hashes and evidence, so build the `effect` from stable fields",
    );
}

#[test]
fn refuses_another_schema() {
    check(
        "schema: countersign.policy/v2
actions:
  stripe.refund:
    decision: allow
",
        "bad.yaml:1:9: unsupported schema `countersign.policy/v2`: expected `countersign.policy/v1`",
    );
}

#[test]
fn names_a_duration_that_does_not_parse() {
    check(
        "schema: countersign.policy/v1
approval_ttl: 10 parsecs
actions:
  stripe.refund:
    decision: approve
",
        "bad.yaml:2:15: invalid `approval_ttl` `10 parsecs`: has a unit Countersign does not read: use `s`, `m`, `h`, `d` or `w` after each number, such as `15m` (`M` and `y`, months and years, are not read)",
    );
}

#[test]
fn names_where_the_yaml_syntax_breaks() {
    check(
        "schema: countersign.policy/v1
actions:
  stripe.refund:
    decision: [allow
",
        "bad.yaml:4:15: invalid YAML: unclosed bracket '['",
    );
}

#[test]
fn says_how_to_name_the_policy_when_there_is_none() {
    let sandbox = Sandbox::new();
    std::fs::remove_file(sandbox.policy_path()).expect("remove the policy");
    let run = sandbox.run(&["verify"]);
    assert_eq!(
        run.one_line_error(),
        "no policy file at `countersign.yaml`: pass one with `--policy FILE`, start one here with `countersign init`, or check a store alone with `--store-url URL`"
    );
    assert!(StoreFiles::read(&sandbox.store_path()).is_absent());
}

/// A store named with `--store-url` is checked alone when there is no policy at the default
/// path (an auditor's copy): the exit status is the chain's, and the output says the policy was
/// not checked. A policy named with `--policy` must still exist.
#[test]
fn verifies_a_named_store_alone_when_no_policy_is_there() {
    let sandbox = Sandbox::new();
    sandbox.fill_with_demo();
    let store = format!("sqlite:{}", sandbox.store_path().display());
    std::fs::remove_file(sandbox.policy_path()).expect("remove the policy");
    let run = sandbox.run(&["verify", "--store-url", &store]);
    assert_eq!(run.status, Some(0), "{run:?}");
    assert!(
        run.stdout.starts_with(
            "policy: none at `countersign.yaml`, so only the store is checked; pass `--policy FILE` to check the agent's policy too\nchain verified: "
        ),
        "{run:?}"
    );
    let json = sandbox.run(&["verify", "--store-url", &store, "--json"]);
    assert_eq!(json.status, Some(0), "{json:?}");
    let report: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(report["policy"], serde_json::Value::Null);
    assert_eq!(report["outcome"], "verified");
    let named = sandbox.run(&["verify", "--store-url", &store, "--policy", "gone.yaml"]);
    assert!(
        named
            .one_line_error()
            .starts_with("no policy file at `gone.yaml`"),
        "{named:?}"
    );
}

#[test]
fn checks_a_good_policy_before_any_store_exists_but_is_unverifiable() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["verify"]);
    // Case B58: no receipt checked is never a pass (exit 3), though the policy was checked.
    assert_eq!(run.status, Some(3), "{run:?}");
    assert!(
        run.stdout
            .contains("no receipt was checked (exit status 3); the policy loads"),
        "{run:?}"
    );
    assert!(StoreFiles::read(&sandbox.store_path()).is_absent());
    sandbox
        .settings()
        .bind(|| insta::assert_snapshot!("verify_policy_without_store", run.transcript()));
}

/// A key with an invisible character in it (a zero-width space) is shown with the character
/// escaped, so the person reading the error sees why `pa\u{200b}y` is not `pay` (a new user's
/// trial: the error printed the key as it was, looking like a valid one).
#[test]
fn an_invisible_character_in_a_quoted_key_is_shown_escaped() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "bad.yaml",
        "schema: countersign.policy/v1\nactions:\n  pay:\n    rules:\n      - wh\u{200b}en: { amount: { lte: 100 } }\n        decision: allow\n",
    );
    let run = sandbox.run(&["verify", "--policy", "bad.yaml"]);
    let message = run.one_line_error();
    assert!(message.contains("wh\\u{200b}en"), "{message}");
    assert!(!message.contains('\u{200b}'), "{message}");
}
