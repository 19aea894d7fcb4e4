//! An entry's `rules`: each a `when` of conditions over the arguments, with its own decision
//! (and approval block).

use super::*;

pub(super) fn rules(node: &Node, secrets: &[String]) -> Result<(Vec<Rule>, Vec<Value>), LoadError> {
    let NodeValue::Sequence(items) = &node.value else {
        return Err(wrong_type(node, "rules", "a list of rules"));
    };
    if items.is_empty() {
        return Err(error_at(node, LoadErrorKind::EmptyRules));
    }
    let mut rules = Vec::with_capacity(items.len());
    let mut documents = Vec::with_capacity(items.len());
    let mut unconditional_line: Option<usize> = None;
    for (index, item) in items.iter().enumerate() {
        if let Some(shadowed_by_line) = unconditional_line {
            return Err(error_at(
                item,
                LoadErrorKind::UnreachableRule {
                    index,
                    shadowed_by_line,
                },
            ));
        }
        let entries = mapping(
            item,
            "rule",
            "a mapping with `decision` and an optional `when`",
        )?;
        check_keys(entries, KeyPlace::Rule)?;
        let Some(decision_node) = get(entries, "decision") else {
            return Err(error_at(
                item,
                LoadErrorKind::MissingKey {
                    key: "decision",
                    place: KeyPlace::Rule,
                },
            ));
        };
        let decision = decision(decision_node)?;
        let (conditions, when_document) = match get(entries, "when") {
            None => {
                unconditional_line = Some(item.line);
                (Vec::new(), None)
            }
            Some(when) => {
                let (conditions, document) = conditions(when, secrets)?;
                (conditions, Some(document))
            }
        };
        let approval = get(entries, "approval").map(approval_spec).transpose()?;
        let mut document = Map::new();
        document.insert("decision".into(), json!(decision.as_str()));
        if let Some(when_document) = when_document {
            document.insert("when".into(), when_document);
        }
        if let Some((_, approval_document)) = &approval {
            document.insert("approval".into(), approval_document.clone());
        }
        documents.push(Value::Object(document));
        rules.push(Rule {
            conditions,
            decision,
            approval: approval.map(|(spec, _)| spec),
        });
    }
    Ok((rules, documents))
}

pub(super) fn conditions(
    when: &Node,
    secrets: &[String],
) -> Result<(Vec<Condition>, Value), LoadError> {
    let fields = mapping(when, "when", "a mapping of argument names to conditions")?;
    if fields.is_empty() {
        return Err(error_at(when, LoadErrorKind::EmptyWhen));
    }
    let mut conditions = Vec::new();
    let mut document = Map::new();
    for (field_node, operators_node) in fields {
        let field = key_text(field_node, "when")?;
        if !is_field_path(field) {
            return Err(error_at(
                field_node,
                LoadErrorKind::InvalidField {
                    field: field.to_owned(),
                    expected: "use letters, digits and `_`, starting with a letter or `_`, with `.` between nested names",
                },
            ));
        }
        if secret_read_by(field, secrets).is_some() {
            return Err(error_at(
                field_node,
                LoadErrorKind::SecretInCondition {
                    field: field.to_owned(),
                },
            ));
        }
        let operators = mapping(
            operators_node,
            field,
            "a mapping of operators such as `{ eq: 5 }`",
        )?;
        if operators.is_empty() {
            return Err(error_at(
                operators_node,
                LoadErrorKind::EmptyCondition {
                    field: field.to_owned(),
                },
            ));
        }
        let mut operator_document = Map::new();
        for (operator_node, operand) in operators {
            let operator = key_text(operator_node, "condition")?;
            let test = test(operator_node, operator, operand)?;
            operator_document.insert(test.operator().into(), test.operand());
            conditions.push(Condition {
                field: field.to_owned(),
                test,
            });
        }
        document.insert(field.to_owned(), Value::Object(operator_document));
    }
    Ok((conditions, Value::Object(document)))
}

pub(super) fn test(
    operator_node: &Node,
    operator: &str,
    operand: &Node,
) -> Result<Test, LoadError> {
    let bad = |operator: &'static str, expected: &'static str| {
        error_at(
            operand,
            LoadErrorKind::BadOperand {
                operator,
                expected,
                found: operand.value.kind_name(),
            },
        )
    };
    let list = |operator: &'static str| match &operand.value {
        NodeValue::Sequence(items) => items.iter().map(to_json).collect::<Result<Vec<_>, _>>(),
        _ => Err(bad(operator, "a list")),
    };
    let number = |operator: &'static str| match &operand.value {
        NodeValue::Integer(_) | NodeValue::Float(_) => {
            let value = to_json(operand)?;
            let float = value.as_f64().ok_or_else(|| bad(operator, "a number"))?;
            Ok((float, value))
        }
        _ => Err(bad(operator, "a number")),
    };
    Ok(match operator {
        "eq" => Test::Eq(to_json(operand)?),
        "ne" => Test::Ne(to_json(operand)?),
        "in" => Test::In(list("in")?),
        "not_in" => Test::NotIn(list("not_in")?),
        "lt" => number("lt").map(|(f, v)| Test::Lt(f, v))?,
        "lte" => number("lte").map(|(f, v)| Test::Lte(f, v))?,
        "gt" => number("gt").map(|(f, v)| Test::Gt(f, v))?,
        "gte" => number("gte").map(|(f, v)| Test::Gte(f, v))?,
        other => {
            return Err(error_at(
                operator_node,
                LoadErrorKind::UnknownOperator {
                    found: other.to_owned(),
                    suggestion: operator_synonym(other).or_else(|| closest(other, OPERATORS)),
                },
            ));
        }
    })
}

pub(super) fn operator_synonym(written: &str) -> Option<&'static str> {
    Some(match written {
        "=" | "==" | "equals" | "is" => "eq",
        "!=" | "<>" | "neq" | "not" => "ne",
        "<" => "lt",
        "<=" | "le" => "lte",
        ">" => "gt",
        ">=" | "ge" => "gte",
        "nin" | "notin" | "not-in" | "not in" => "not_in",
        "one_of" | "oneof" | "any_of" => "in",
        _ => return None,
    })
}

/// A YAML value as JSON, refusing numbers that canonical JSON cannot carry.
pub(super) fn to_json(node: &Node) -> Result<Value, LoadError> {
    let refuse = |problem| error_at(node, LoadErrorKind::NumberNotRepresentable { problem });
    Ok(match &node.value {
        NodeValue::Null => Value::Null,
        NodeValue::Bool(flag) => Value::Bool(*flag),
        NodeValue::Integer(integer) => {
            if integer.abs() > MAX_SAFE_INTEGER {
                return Err(refuse(NumberProblem::IntegerOutOfRange));
            }
            // In range of i64 by the check above.
            Value::from(
                i64::try_from(*integer).map_err(|_| refuse(NumberProblem::IntegerOutOfRange))?,
            )
        }
        NodeValue::Float(float) => {
            if !float.is_finite() {
                return Err(refuse(NumberProblem::NonFinite));
            }
            if *float == 0.0 && float.is_sign_negative() {
                return Err(refuse(NumberProblem::NegativeZero));
            }
            serde_json::Number::from_f64(*float)
                .map(Value::Number)
                .ok_or_else(|| refuse(NumberProblem::NonFinite))?
        }
        NodeValue::String(text) => Value::String(text.clone()),
        NodeValue::Sequence(items) => {
            Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?)
        }
        NodeValue::Mapping(entries) => {
            let mut object = Map::new();
            for (key, value) in entries {
                object.insert(key_text(key, "value")?.to_owned(), to_json(value)?);
            }
            Value::Object(object)
        }
    })
}
