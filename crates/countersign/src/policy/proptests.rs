//! Property tests: no panics on any input, and first-match semantics against a reference.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::*;

const POLICY: &str = "\
schema: countersign.policy/v1
actions:
  stripe.refund:
    effect: \"refund:{payment_id}\"
    rules:
      - when: { amount: { lte: 50000 }, customer.tier: { ne: blocked } }
        decision: allow
      - when: { amount: { gt: 0, lt: 1e9 }, currency: { in: [usd, eur, 1, null] } }
        decision: approve
      - when: { tags: { eq: [a, { b: 1 }] }, flag: { not_in: [true] }, n: { gte: -2.5 } }
        decision: allow
      - decision: deny
  \"mcp.*\":
    decision: approve
";

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-z]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("amount".to_owned()),
                    Just("customer".to_owned()),
                    Just("tier".to_owned()),
                    Just("currency".to_owned()),
                    "[a-z]{1,5}"
                ],
                inner,
                0..5
            )
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    In,
    NotIn,
    Lt,
    Lte,
    Gt,
    Gte,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Eq => "eq",
            Op::Ne => "ne",
            Op::In => "in",
            Op::NotIn => "not_in",
            Op::Lt => "lt",
            Op::Lte => "lte",
            Op::Gt => "gt",
            Op::Gte => "gte",
        }
    }
}

/// Field -> (operator name -> (operator, operands)).
type GeneratedWhen = BTreeMap<&'static str, BTreeMap<&'static str, (Op, Vec<i64>)>>;

/// A generated rule: field -> (operator -> operand) and a decision; `None` for no `when`.
#[derive(Debug, Clone)]
struct GeneratedRule {
    when: Option<GeneratedWhen>,
    decision: Decision,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Eq),
        Just(Op::Ne),
        Just(Op::In),
        Just(Op::NotIn),
        Just(Op::Lt),
        Just(Op::Lte),
        Just(Op::Gt),
        Just(Op::Gte),
    ]
}

fn decision() -> impl Strategy<Value = Decision> {
    prop_oneof![
        Just(Decision::Allow),
        Just(Decision::Approve),
        Just(Decision::Deny)
    ]
}

fn conditions() -> impl Strategy<Value = GeneratedWhen> {
    let operand = (op(), prop::collection::vec(-3i64..4, 1..3));
    let per_field = prop::collection::vec(operand, 1..3).prop_map(|ops| {
        ops.into_iter()
            .map(|(op, values)| (op.name(), (op, values)))
            .collect::<BTreeMap<_, _>>()
    });
    prop::collection::btree_map(
        prop_oneof![Just("x"), Just("y"), Just("z.w")],
        per_field,
        1..3,
    )
}

/// Rules where only the last may lack `when` (anything after it would be unreachable).
fn rule_list() -> impl Strategy<Value = Vec<GeneratedRule>> {
    let conditional = (conditions(), decision()).prop_map(|(when, decision)| GeneratedRule {
        when: Some(when),
        decision,
    });
    (
        prop::collection::vec(conditional, 1..6),
        prop::option::of(decision()),
    )
        .prop_map(|(mut rules, last)| {
            if let Some(decision) = last {
                rules.push(GeneratedRule {
                    when: None,
                    decision,
                });
            }
            rules
        })
}

fn to_yaml(rules: &[GeneratedRule]) -> String {
    let mut yaml = String::from("schema: countersign.policy/v1\nactions:\n  act:\n    rules:\n");
    for rule in rules {
        yaml.push_str(&format!("      - decision: {}\n", rule.decision.as_str()));
        if let Some(when) = &rule.when {
            yaml.push_str("        when:\n");
            for (field, operators) in when {
                let rendered: Vec<String> = operators
                    .iter()
                    .map(|(name, (op, values))| match op {
                        Op::In | Op::NotIn => format!("{name}: {values:?}"),
                        _ => format!("{name}: {}", values[0]),
                    })
                    .collect();
                yaml.push_str(&format!(
                    "          {field}: {{ {} }}\n",
                    rendered.join(", ")
                ));
            }
        }
    }
    yaml
}

/// The reference: a direct reading of the documented semantics over small integers.
fn reference(
    rules: &[GeneratedRule],
    arguments: &BTreeMap<&'static str, Option<i64>>,
) -> (Decision, DecisionReason) {
    for (index, rule) in rules.iter().enumerate() {
        let holds = rule.when.as_ref().is_none_or(|when| {
            when.iter().all(|(field, operators)| {
                operators.values().all(|(op, values)| {
                    match arguments.get(field).copied().flatten() {
                        None => false,
                        Some(actual) => match op {
                            Op::Eq => actual == values[0],
                            Op::Ne => actual != values[0],
                            Op::In => values.contains(&actual),
                            Op::NotIn => !values.contains(&actual),
                            Op::Lt => actual < values[0],
                            Op::Lte => actual <= values[0],
                            Op::Gt => actual > values[0],
                            Op::Gte => actual >= values[0],
                        },
                    }
                })
            })
        });
        if holds {
            return (rule.decision, DecisionReason::Rule { index });
        }
    }
    (Decision::Deny, DecisionReason::NoMatchingRule)
}

fn arguments_json(arguments: &BTreeMap<&'static str, Option<i64>>, as_float: bool) -> Value {
    let number = |n: i64| if as_float { json!(n as f64) } else { json!(n) };
    let mut object = Map::new();
    if let Some(Some(x)) = arguments.get("x") {
        object.insert("x".into(), number(*x));
    }
    if let Some(Some(y)) = arguments.get("y") {
        object.insert("y".into(), number(*y));
    }
    if let Some(Some(w)) = arguments.get("z.w") {
        object.insert("z".into(), json!({ "w": number(*w) }));
    }
    Value::Object(object)
}

fn mutation() -> impl Strategy<Value = (usize, u8, u8)> {
    (any::<usize>(), 0u8..3, any::<u8>())
}

proptest! {
    #[test]
    fn decide_never_panics_on_any_arguments(arguments in json_value(), action in prop_oneof![
        Just("stripe.refund".to_owned()), Just("mcp.x".to_owned()), "[a-z.*]{0,12}"
    ]) {
        let policy = Policy::from_yaml_str(POLICY, None).expect("policy loads");
        let decided = policy.decide(&action, &arguments);
        prop_assert_eq!(decided.entry.is_none(), decided.reason == DecisionReason::UnknownAction);
        if let Some(entry) = decided.entry {
            // Rendering must not panic either.
            let _ = entry.effect().map(|effect| effect.render(&arguments));
        }
    }

    #[test]
    fn first_match_equals_the_reference(
        rules in rule_list(),
        x in prop::option::of(-4i64..5),
        y in prop::option::of(-4i64..5),
        w in prop::option::of(-4i64..5),
        as_float in any::<bool>(),
    ) {
        let yaml = to_yaml(&rules);
        let policy = Policy::from_yaml_str(&yaml, None).map_err(|e| TestCaseError::fail(format!("{e}\n{yaml}")))?;
        let arguments: BTreeMap<&'static str, Option<i64>> = [("x", x), ("y", y), ("z.w", w)].into_iter().collect();
        let decided = policy.decide("act", &arguments_json(&arguments, as_float));
        prop_assert_eq!((decided.decision, decided.reason), reference(&rules, &arguments), "{}", yaml);
    }

    #[test]
    fn loader_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(policy) = load::from_bytes(&bytes, None) {
            prop_assert!(policy.hash().starts_with("sha256:"));
        }
    }

    #[test]
    fn loader_never_panics_on_mutated_valid_files(mutations in prop::collection::vec(mutation(), 1..8)) {
        let mut bytes = POLICY.as_bytes().to_vec();
        for (position, kind, byte) in mutations {
            let index = position % (bytes.len() + 1);
            let alphabet = b"{}[]:*-,'\"#&!|>%@` \n\tazAZ09.";
            let byte = alphabet[usize::from(byte) % alphabet.len()];
            match kind {
                0 => bytes.insert(index, byte),
                1 if index < bytes.len() => { bytes.remove(index); }
                _ if index < bytes.len() => bytes[index] = byte,
                _ => bytes.push(byte),
            }
        }
        match load::from_bytes(&bytes, None) {
            Ok(policy) => prop_assert!(policy.hash().starts_with("sha256:")),
            Err(error) => prop_assert!(!error.kind.code().is_empty()),
        }
    }
}

/// The identities and groups of the could-permit model (issue #27).
const IDS: &[&str] = &["agent:p", "human:a", "human:b", "human:c"];
const GROUPS: &[&str] = &["g1", "g2"];
const PATTERNS: &[&str] = &[
    "agent:p", "human:a", "human:b", "human:*", "*", "group:g1", "group:g2", "group:g*",
];

/// An `approve` entry with a random approval block, and a random directory.
fn approve_policy() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::sample::select(PATTERNS), 1..4),
        1u32..4,
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(prop::collection::vec(prop::sample::select(GROUPS), 0..3), 4),
    )
        .prop_map(|(approvers, quorum, distinct, authenticated, groups)| {
            let mut yaml = String::from("schema: countersign.policy/v1\ndirectory:\n");
            for (id, groups) in IDS.iter().zip(groups) {
                let mut groups = groups;
                groups.sort_unstable();
                groups.dedup();
                yaml.push_str(&format!("  {id}: [{}]\n", groups.join(", ")));
            }
            let approvers: Vec<String> = approvers.iter().map(|p| format!("\"{p}\"")).collect();
            yaml.push_str(&format!(
                "actions:\n  act:\n    decision: approve\n    approval: {{ approvers: [{}], quorum: {quorum}, distinct_from_requester: {distinct}, require: {} }}\n",
                approvers.join(", "),
                if authenticated { "authenticated" } else { "asserted" },
            ));
            yaml
        })
}

/// How many distinct identities of the model could count towards a request by `principal`:
/// each tried as asserted (directory groups) and as authenticated with every claimed set of
/// groups (what a token, OIDC or a proxy may verify), judged by the kernel's own rule.
fn entitled_in_model(policy: &Policy, principal: &str) -> usize {
    let decided = policy.decide("act", &json!({}));
    let rule = policy.approval_rule(&decided, principal);
    let claims: [&[String]; 4] = [
        &[],
        &["g1".to_owned()],
        &["g2".to_owned()],
        &["g1".to_owned(), "g2".to_owned()],
    ];
    IDS.iter()
        .filter(|id| {
            let id = &crate::approver::ApproverId::parse(id).expect("the model's ids are valid");
            let asserted = rule.approver(
                id,
                &[],
                crate::approver::Channel::Cli,
                crate::approver::Authentication::Asserted,
            );
            let mut variants = vec![asserted];
            for claimed in claims {
                variants.push(rule.approver(
                    id,
                    claimed,
                    crate::approver::Channel::Cli,
                    crate::approver::Authentication::Token,
                ));
            }
            variants
                .iter()
                .any(|approver| crate::approver::judge(&rule, principal, approver).is_ok())
        })
        .count()
}

proptest! {
    /// Sound: when `could_permit` says never, no identity set of the model can reach the
    /// quorum; so hiding a tool never hides one someone could approve.
    #[test]
    fn could_permit_never_hides_an_approvable_action(yaml in approve_policy(), who in prop::sample::select(IDS)) {
        let policy = Policy::from_yaml_str(&yaml, None).expect("generated policies load");
        let quorum = policy.entry("act").and_then(ActionEntry::approval).map_or(1, |spec| spec.quorum) as usize;
        if !policy.could_permit("act", who) {
            prop_assert!(entitled_in_model(&policy, who) < quorum, "{yaml}");
        }
    }

    /// Never for an unknown action, always for an allow, whoever asks.
    #[test]
    fn could_permit_follows_allow_and_unknown(rules in rule_list(), who in prop::sample::select(IDS)) {
        let policy = Policy::from_yaml_str(&to_yaml(&rules), None).expect("generated policies load");
        prop_assert!(!policy.could_permit("other", who));
        let any_allow = rules.iter().any(|rule| rule.decision == Decision::Allow);
        let all_deny = rules.iter().all(|rule| rule.decision == Decision::Deny);
        if any_allow { prop_assert!(policy.could_permit("act", who)); }
        if all_deny { prop_assert!(!policy.could_permit("act", who)); }
    }
}
