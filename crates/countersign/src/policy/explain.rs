//! Why a policy decides as it does: [`Policy::explain`].

use serde::Serialize;
use serde_json::Value;

use super::template::lookup;
use super::{Decision, EntryBody, Policy};
use crate::json::MAX_DEPTH;

/// How the governing entry was found for an action name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryMatch {
    /// The action name is listed as it is.
    Exact,
    /// A pattern (`prefix*`) matched: the longest matching prefix wins.
    Pattern,
}

/// One condition of a tried rule, evaluated (every condition of a tried rule is evaluated, so
/// the explanation shows all of them; the decision is the same as when the first false one
/// stops the rule).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConditionTrace {
    /// The dotted argument path, as written under `when` (`amount`, `customer.id`).
    pub field: String,
    /// The operator: `eq`, `ne`, `in`, `not_in`, `lt`, `lte`, `gt` or `gte`.
    pub operator: &'static str,
    /// The operand as written in the policy.
    pub operand: Value,
    /// The argument's value, or `None` when it is missing (then the condition is false, for
    /// every operator) or nested deeper than [`crate::json::MAX_DEPTH`] (then it is not copied;
    /// canonical arguments never are).
    pub actual: Option<Value>,
    /// Whether the condition holds.
    pub holds: bool,
}

/// One rule of the governing entry, as tried in file order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleTrace {
    /// 0-based index into the entry's `rules`.
    pub index: usize,
    /// The rule's decision.
    pub decision: Decision,
    /// Whether every condition holds (a rule without `when` always matches).
    pub matched: bool,
    /// Its conditions, in the order written (empty for a rule without `when`).
    pub conditions: Vec<ConditionTrace>,
}

/// Why [`Policy::decide`] gives its decision for one action: the governing entry, how it was
/// found, and each rule tried (up to and including the one that decided). Built by
/// [`Policy::explain`]; its `decision` and `reason` are always `decide`'s.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Explanation {
    /// The action name asked about.
    pub action: String,
    /// `allow`, `approve` or `deny`.
    pub decision: Decision,
    /// The reason code, as [`super::DecisionReason::code`]: `rule`, `action_default`,
    /// `unknown_action` or `no_matching_rule`.
    pub reason: &'static str,
    /// The governing entry's key as written (`stripe.refund`, `mcp__*`), if any.
    pub entry: Option<String>,
    /// How that entry was found.
    pub matched_by: Option<EntryMatch>,
    /// The deciding rule's 0-based index, when a rule decided.
    pub rule: Option<usize>,
    /// The rules tried, in order, up to and including the deciding one (all of them when
    /// none matched; empty for a `decision` shorthand or an unknown action).
    pub rules: Vec<RuleTrace>,
    /// The entry's `secret_arguments` (left out of hashes, redacted in evidence).
    pub secret_arguments: Vec<String>,
}

impl Policy {
    /// Explain the decision for `action` and its canonical `arguments` (a JSON object):
    /// which entry governs it and how it was found, which rules were tried, and every condition
    /// of each with the argument's value and whether it held. Pure, no I/O; the decision and
    /// reason are [`Policy::decide`]'s.
    ///
    /// # Panics
    /// Never.
    pub fn explain(&self, action: &str, arguments: &Value) -> Explanation {
        let decided = self.decide(action, arguments);
        let mut explanation = Explanation {
            action: action.to_owned(),
            decision: decided.decision,
            reason: decided.reason.code(),
            entry: None,
            matched_by: None,
            rule: match decided.reason {
                super::DecisionReason::Rule { index } => Some(index),
                _ => None,
            },
            rules: Vec::new(),
            secret_arguments: Vec::new(),
        };
        let Some(entry) = decided.entry else {
            return explanation;
        };
        explanation.entry = Some(entry.key.clone());
        explanation.matched_by = Some(if self.exact.contains_key(action) {
            EntryMatch::Exact
        } else {
            EntryMatch::Pattern
        });
        explanation.secret_arguments = entry.secret_arguments.clone();
        if let EntryBody::Rules(rules) = &entry.body {
            for (index, rule) in rules.iter().enumerate() {
                let conditions: Vec<ConditionTrace> = rule
                    .conditions
                    .iter()
                    .map(|condition| ConditionTrace {
                        field: condition.field.clone(),
                        operator: condition.test.operator(),
                        operand: condition.test.operand(),
                        // A value nested past the kernel's limit is not copied (the copy
                        // would recurse without bound): `None`, as for a missing argument.
                        actual: lookup(arguments, &condition.field)
                            .filter(|actual| !crate::json::nests_deeper_than(actual, MAX_DEPTH))
                            .cloned(),
                        holds: condition.holds(arguments),
                    })
                    .collect();
                let matched = conditions.iter().all(|condition| condition.holds);
                explanation.rules.push(RuleTrace {
                    index,
                    decision: rule.decision,
                    matched,
                    conditions,
                });
                if matched {
                    break;
                }
            }
        }
        explanation
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const POLICY: &str = r#"
schema: countersign.policy/v1
actions:
  stripe.refund:
    secret_arguments: [card_token]
    rules:
      - when: { amount: { lte: 50000 }, currency: { eq: "eur" } }
        decision: allow
      - when: { amount: { lte: 1000000 } }
        decision: approve
      - decision: deny
  "mcp__files__*":
    decision: allow
  "mcp__*":
    decision: deny
  strict:
    rules:
      - when: { mode: { eq: "dry" } }
        decision: allow
"#;

    fn policy() -> Policy {
        Policy::from_yaml_str(POLICY, None).expect("the test policy loads")
    }

    #[test]
    fn names_the_rule_and_every_condition_that_decided() {
        let explained = policy().explain(
            "stripe.refund",
            &json!({"amount": 900, "currency": "usd", "card_token": "[redacted]"}),
        );
        assert_eq!(explained.decision, Decision::Approve);
        assert_eq!(explained.reason, "rule");
        assert_eq!(explained.rule, Some(1));
        assert_eq!(explained.entry.as_deref(), Some("stripe.refund"));
        assert_eq!(explained.matched_by, Some(EntryMatch::Exact));
        assert_eq!(explained.secret_arguments, ["card_token"]);
        assert_eq!(explained.rules.len(), 2, "tried up to the deciding rule");
        let first = &explained.rules[0];
        assert!(!first.matched);
        assert_eq!(
            first
                .conditions
                .iter()
                .map(|condition| (condition.field.as_str(), condition.holds))
                .collect::<Vec<_>>(),
            [("amount", true), ("currency", false)]
        );
        assert_eq!(first.conditions[1].actual, Some(json!("usd")));
        assert_eq!(first.conditions[1].operand, json!("eur"));
        assert!(explained.rules[1].matched);
    }

    #[test]
    fn names_the_longest_pattern_and_an_unknown_action() {
        let policy = policy();
        let files = policy.explain("mcp__files__read", &json!({}));
        assert_eq!(files.entry.as_deref(), Some("mcp__files__*"));
        assert_eq!(files.matched_by, Some(EntryMatch::Pattern));
        assert_eq!(files.reason, "action_default");
        assert_eq!(files.decision, Decision::Allow);
        let unknown = policy.explain("stripe.charge", &json!({}));
        assert_eq!(unknown.entry, None);
        assert_eq!(unknown.reason, "unknown_action");
        assert_eq!(unknown.decision, Decision::Deny);
    }

    #[test]
    fn a_missing_argument_shows_as_absent_and_no_rule_matching_denies() {
        let explained = policy().explain("strict", &json!({}));
        assert_eq!(explained.reason, "no_matching_rule");
        assert_eq!(explained.decision, Decision::Deny);
        assert_eq!(explained.rules.len(), 1);
        assert_eq!(explained.rules[0].conditions[0].actual, None);
        assert!(!explained.rules[0].conditions[0].holds);
    }

    #[test]
    fn always_agrees_with_decide() {
        let policy = policy();
        for arguments in [
            json!({"amount": 1, "currency": "eur"}),
            json!({"amount": 60000, "currency": "eur"}),
            json!({"amount": 2000000}),
            json!({"amount": "1"}),
            json!({}),
        ] {
            for action in ["stripe.refund", "mcp__x", "mcp__files__w", "strict", "nope"] {
                let decided = policy.decide(action, &arguments);
                let explained = policy.explain(action, &arguments);
                assert_eq!(explained.decision, decided.decision, "{action} {arguments}");
                assert_eq!(
                    explained.reason,
                    decided.reason.code(),
                    "{action} {arguments}"
                );
            }
        }
    }
}
