//! Conditions (`when`) and their evaluation against canonical arguments.

use serde_json::Value;

use super::template::lookup;

/// One operator applied to one argument path. All conditions of a rule are ANDed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Condition {
    /// Dotted path into the arguments, such as `customer.id`.
    pub(crate) field: String,
    pub(crate) test: Test,
}

/// An operator with its operand, already type-checked by the loader.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Test {
    Eq(Value),
    Ne(Value),
    In(Vec<Value>),
    NotIn(Vec<Value>),
    /// The `f64` compares; the `Value` keeps the number as written, for hashing.
    Lt(f64, Value),
    Lte(f64, Value),
    Gt(f64, Value),
    Gte(f64, Value),
}

/// The operator names, in documentation order.
pub(crate) const OPERATORS: &[&str] = &["eq", "ne", "in", "not_in", "lt", "lte", "gt", "gte"];

impl Test {
    pub(crate) fn operator(&self) -> &'static str {
        match self {
            Test::Eq(_) => "eq",
            Test::Ne(_) => "ne",
            Test::In(_) => "in",
            Test::NotIn(_) => "not_in",
            Test::Lt(..) => "lt",
            Test::Lte(..) => "lte",
            Test::Gt(..) => "gt",
            Test::Gte(..) => "gte",
        }
    }

    /// The operand as JSON, for the policy hash.
    pub(crate) fn operand(&self) -> Value {
        match self {
            Test::Eq(value) | Test::Ne(value) => value.clone(),
            Test::In(values) | Test::NotIn(values) => Value::Array(values.clone()),
            Test::Lt(_, value) | Test::Lte(_, value) | Test::Gt(_, value) | Test::Gte(_, value) => {
                value.clone()
            }
        }
    }
}

impl Condition {
    /// Whether the condition holds.
    ///
    /// INVARIANT (missing-fails-closed): a missing argument makes every operator false,
    /// `ne` and `not_in` included, so an absent field can never widen a decision.
    pub(crate) fn holds(&self, arguments: &Value) -> bool {
        let Some(actual) = lookup(arguments, &self.field) else {
            return false;
        };
        match &self.test {
            Test::Eq(expected) => canonical_eq(actual, expected),
            Test::Ne(expected) => !canonical_eq(actual, expected),
            Test::In(list) => list.iter().any(|item| canonical_eq(actual, item)),
            Test::NotIn(list) => !list.iter().any(|item| canonical_eq(actual, item)),
            Test::Lt(bound, _) => number(actual).is_some_and(|value| value < *bound),
            Test::Lte(bound, _) => number(actual).is_some_and(|value| value <= *bound),
            Test::Gt(bound, _) => number(actual).is_some_and(|value| value > *bound),
            Test::Gte(bound, _) => number(actual).is_some_and(|value| value >= *bound),
        }
    }
}

fn number(value: &Value) -> Option<f64> {
    value.as_f64().filter(|float| float.is_finite())
}

/// Equality under canonical JSON (RFC 8785): numbers are IEEE-754 doubles (`1` equals `1.0`),
/// strings compare byte for byte, objects by key set and values, arrays element by element.
pub(crate) fn canonical_eq(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Number(a), Value::Number(b)) => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        },
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| canonical_eq(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, x)| b.get(key).is_some_and(|y| canonical_eq(x, y)))
        }
        _ => false,
    }
}
