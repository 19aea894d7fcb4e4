//! The policy loader ([`countersign::Policy::from_yaml_str`]), and the decisions a loaded
//! policy makes.
//!
//! For every input: loading gives a policy or a [`countersign::LoadError`] with a message;
//! loading the same text twice gives the same policy hash; a loaded policy decides every action
//! it names, and an unknown one, on a few argument shapes without panicking, and an unknown
//! action is denied.

use countersign::{Decision, Policy};
use serde_json::json;

/// Load one input as a policy file and ask the result for decisions.
///
/// # Panics
///
/// When a property in the module docs does not hold (the fuzzer's crash).
pub fn run(data: &[u8]) {
    let Some(text) = crate::text(data) else {
        return;
    };
    let policy = match Policy::from_yaml_str(text, None) {
        Ok(policy) => policy,
        Err(error) => {
            crate::check_message(&error, "Policy::from_yaml_str");
            return;
        }
    };
    let again = Policy::from_yaml_str(text, None).expect("the same text loaded once and not twice");
    assert_eq!(policy.hash(), again.hash(), "one text, two policy hashes");
    let arguments = [
        json!({}),
        json!({"amount": 1, "payment_id": "pi_1"}),
        json!({"amount": 1_000_000.5, "to": ["a", "b"], "path": "/tmp/x"}),
        json!({"amount": "12", "flag": true, "nested": {"a": null}}),
    ];
    let names: Vec<String> = policy.action_keys().map(str::to_owned).collect();
    for name in names
        .iter()
        .map(String::as_str)
        .chain(["fuzz.unknown.action"])
    {
        for value in &arguments {
            let decided = policy.decide(name, value);
            let _ = policy.approval_rule(&decided, "agent:fuzz");
        }
    }
    if policy.entry("fuzz.unknown.action").is_none() {
        assert_eq!(
            policy.decide("fuzz.unknown.action", &json!({})).decision,
            Decision::Deny,
            "an unknown action was not denied"
        );
    }
    let _ = policy.approval_warnings();
}
