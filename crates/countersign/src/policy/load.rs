//! The strict loader: YAML tree to [`Policy`], refusing anything it does not understand.

mod approvers;
mod rules;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::condition::{Condition, OPERATORS, Test};
use super::error::{
    DurationProblem, KeyPlace, LoadError, LoadErrorKind, NumberProblem, PatternProblem,
};
use super::template::{Template, is_field_path};
use super::yaml::{self, Node, NodeValue};
use super::{
    ActionEntry, ApprovalSpec, Decision, EntryBody, MAX_POLICY_BYTES, Mode, Policy, Rule, SCHEMA,
};
use crate::approver::Requirement;

use approvers::*;
use rules::*;

const DECISIONS: &[&str] = &["allow", "approve", "deny"];
const MODES: &[&str] = &["enforce", "observe"];

const DEFAULT_ENVIRONMENT: &str = "default";
const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(15 * 60);
const MAX_APPROVAL_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// ±(2^53−1): the integers RFC 8785 carries exactly.
const MAX_SAFE_INTEGER: i128 = 9_007_199_254_740_991;

type Entries = [(Node, Node)];

/// Read at most [`MAX_POLICY_BYTES`] + 1 bytes of `path`.
pub(crate) fn read_capped(path: &Path) -> Result<Vec<u8>, LoadError> {
    let io_error = |error: std::io::Error| {
        LoadError::nowhere(LoadErrorKind::Io {
            kind: error.kind(),
            message: error.to_string(),
        })
    };
    let file = std::fs::File::open(path).map_err(io_error)?;
    let limit = MAX_POLICY_BYTES as u64;
    if let Ok(metadata) = file.metadata()
        && metadata.len() > limit
    {
        return Err(LoadError::nowhere(LoadErrorKind::TooLarge {
            size: metadata.len(),
            limit,
        }));
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error)?;
    Ok(bytes)
}

/// Load from raw bytes: size cap, UTF-8 check, then [`from_text`]. `base` is the folder that
/// relative key files (`approvers.keys`) are read from.
pub(crate) fn from_bytes(bytes: &[u8], base: Option<&Path>) -> Result<Policy, LoadError> {
    check_size(bytes.len())?;
    match std::str::from_utf8(bytes) {
        Ok(text) => from_text(text, base),
        Err(error) => {
            let valid = bytes.get(..error.valid_up_to()).unwrap_or_default();
            // The prefix up to `valid_up_to` is valid UTF-8 by definition.
            let prefix = std::str::from_utf8(valid).unwrap_or_default();
            let line = prefix.matches('\n').count() + 1;
            let column = prefix.rsplit('\n').next().unwrap_or("").chars().count() + 1;
            Err(LoadError::at(LoadErrorKind::NotUtf8, line, column))
        }
    }
}

fn check_size(size: usize) -> Result<(), LoadError> {
    if size > MAX_POLICY_BYTES {
        return Err(LoadError::nowhere(LoadErrorKind::TooLarge {
            size: size as u64,
            limit: MAX_POLICY_BYTES as u64,
        }));
    }
    Ok(())
}

/// Load from text: size cap, YAML, then validation.
pub(crate) fn from_text(text: &str, base: Option<&Path>) -> Result<Policy, LoadError> {
    check_size(text.len())?;
    let root = yaml::parse(text)?;
    build_policy(&root, base)
}

fn error_at(node: &Node, kind: LoadErrorKind) -> LoadError {
    LoadError::at(kind, node.line, node.column)
}

fn wrong_type(node: &Node, key: &str, expected: &'static str) -> LoadError {
    error_at(
        node,
        LoadErrorKind::WrongType {
            key: key.to_owned(),
            expected,
            found: node.value.kind_name(),
        },
    )
}

fn mapping<'a>(
    node: &'a Node,
    key: &str,
    expected: &'static str,
) -> Result<&'a Entries, LoadError> {
    match &node.value {
        NodeValue::Mapping(entries) => Ok(entries),
        _ => Err(wrong_type(node, key, expected)),
    }
}

fn string<'a>(node: &'a Node, key: &str, expected: &'static str) -> Result<&'a str, LoadError> {
    match &node.value {
        NodeValue::String(text) => Ok(text),
        _ => Err(wrong_type(node, key, expected)),
    }
}

fn key_text<'a>(key: &'a Node, place: &str) -> Result<&'a str, LoadError> {
    match &key.value {
        NodeValue::String(text) => Ok(text),
        _ => Err(wrong_type(key, &format!("key in {place}"), "a string")),
    }
}

/// Refuse any key outside `allowed`.
fn check_keys(entries: &Entries, place: KeyPlace) -> Result<(), LoadError> {
    let allowed = place.expected_keys();
    for (key, _) in entries {
        let text = key_text(key, place.as_str())?;
        if !allowed.contains(&text) {
            return Err(error_at(
                key,
                LoadErrorKind::UnknownKey {
                    key: text.to_owned(),
                    place,
                    suggestion: closest(text, allowed),
                },
            ));
        }
    }
    Ok(())
}

fn get<'a>(entries: &'a Entries, name: &str) -> Option<&'a Node> {
    entries
        .iter()
        .find(|(key, _)| matches!(&key.value, NodeValue::String(text) if text == name))
        .map(|(_, value)| value)
}

fn build_policy(root: &Node, base: Option<&Path>) -> Result<Policy, LoadError> {
    let empty = Vec::new();
    let entries: &Entries = match &root.value {
        NodeValue::Null => &empty,
        NodeValue::Mapping(entries) => entries,
        _ => {
            return Err(wrong_type(
                root,
                "document",
                "a mapping with `schema` and `actions`",
            ));
        }
    };
    // The schema is checked first, so a file of another schema gets one clear error.
    let Some(schema) = get(entries, "schema") else {
        return Err(error_at(
            root,
            LoadErrorKind::MissingKey {
                key: "schema",
                place: KeyPlace::Policy,
            },
        ));
    };
    let schema_text = string(schema, "schema", "the string `countersign.policy/v1`")?;
    if schema_text != SCHEMA {
        return Err(error_at(
            schema,
            LoadErrorKind::UnsupportedSchema {
                found: schema_text.to_owned(),
            },
        ));
    }
    check_keys(entries, KeyPlace::Policy)?;

    let mode = match get(entries, "mode") {
        None => Mode::Enforce,
        Some(node) => match string(node, "mode", "`enforce` or `observe`")? {
            "enforce" => Mode::Enforce,
            "observe" => Mode::Observe,
            other => {
                return Err(error_at(
                    node,
                    LoadErrorKind::UnknownMode {
                        found: other.to_owned(),
                        suggestion: closest(other, MODES),
                    },
                ));
            }
        },
    };
    let environment = match get(entries, "environment") {
        None => DEFAULT_ENVIRONMENT.to_owned(),
        Some(node) => {
            let text = string(node, "environment", "a string")?;
            if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(error_at(
                    node,
                    LoadErrorKind::InvalidEnvironment {
                        found: text.to_owned(),
                    },
                ));
            }
            text.to_owned()
        }
    };
    let approval_ttl = match get(entries, "approval_ttl") {
        None => DEFAULT_APPROVAL_TTL,
        Some(node) => duration(node)?,
    };
    let directory = match get(entries, "directory") {
        None => BTreeMap::new(),
        Some(node) => directory(node)?,
    };
    let keys = match get(entries, "approvers") {
        None => Vec::new(),
        Some(node) => approver_keys(node, base)?,
    };
    let Some(actions_node) = get(entries, "actions") else {
        return Err(error_at(
            root,
            LoadErrorKind::MissingKey {
                key: "actions",
                place: KeyPlace::Policy,
            },
        ));
    };
    let actions: &Entries = match &actions_node.value {
        // `actions:` with nothing after it is an empty mapping: everything is denied.
        NodeValue::Null => &empty,
        NodeValue::Mapping(entries) => entries,
        _ => {
            return Err(wrong_type(
                actions_node,
                "actions",
                "a mapping of action names",
            ));
        }
    };

    let mut parsed = Vec::with_capacity(actions.len());
    let mut exact = BTreeMap::new();
    let mut patterns = Vec::new();
    let mut documents = Map::new();
    for (key_node, body) in actions {
        let key = key_text(key_node, "actions")?;
        let prefix = check_action_key(key_node, key)?;
        let (mut entry, document) = build_entry(key, body)?;
        entry.line = key_node.line;
        let index = parsed.len();
        match prefix {
            Some(prefix) => patterns.push((prefix.to_owned(), index)),
            None => {
                exact.insert(key.to_owned(), index);
            }
        }
        documents.insert(key.to_owned(), document);
        parsed.push(entry);
    }
    // INVARIANT (longest-prefix-first): see `Policy::patterns`.
    patterns.sort_by(|(a, _), (b, _)| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));

    let mut document = json!({
        "schema": SCHEMA,
        "mode": mode.as_str(),
        "environment": environment,
        "approval_ttl_seconds": approval_ttl.as_secs(),
        "actions": Value::Object(documents),
    });
    // Written only when set, so a policy without them keeps the hash it had before they existed.
    if let Value::Object(map) = &mut document {
        if !directory.is_empty() {
            map.insert("directory".into(), json!(directory));
        }
        if !keys.is_empty() {
            map.insert("approvers".into(), json!({ "keys": keys }));
        }
    }
    let hash = crate::id::PolicyHash::computed(hash_of(&document)?);
    Ok(Policy {
        mode,
        environment,
        approval_ttl,
        directory,
        keys,
        entries: parsed,
        exact,
        patterns,
        hash,
        document,
    })
}

fn hash_of(document: &Value) -> Result<String, LoadError> {
    crate::canonical::to_canonical(document)
        .map(|canonical| canonical.sha256())
        .map_err(|error| {
            LoadError::nowhere(LoadErrorKind::Internal {
                detail: error.to_string(),
            })
        })
}

/// Validate an action key; `Some(prefix)` for a pattern, `None` for an exact name.
fn check_action_key<'a>(node: &Node, key: &'a str) -> Result<Option<&'a str>, LoadError> {
    let problem = if key.is_empty() {
        Some(PatternProblem::Empty)
    } else if key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some(PatternProblem::Whitespace)
    } else if let Some(hidden) = key.chars().find(|&c| crate::evidence::is_hidden(c)) {
        Some(PatternProblem::Invisible(format!(
            "U+{:04X}",
            u32::from(hidden)
        )))
    } else if key.matches('*').count() > 1 {
        Some(PatternProblem::SeveralStars)
    } else if key.contains('*') && !key.ends_with('*') {
        Some(PatternProblem::StarNotAtEnd)
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(error_at(
            node,
            LoadErrorKind::InvalidPattern {
                key: key.to_owned(),
                problem,
            },
        ));
    }
    Ok(key.strip_suffix('*'))
}

fn build_entry(key: &str, body: &Node) -> Result<(ActionEntry, Value), LoadError> {
    let entries = mapping(body, key, "a mapping with `decision` or `rules`")?;
    check_keys(entries, KeyPlace::Action)?;
    let mut document = Map::new();
    document.insert("key".into(), json!(key));

    let secret_arguments = match get(entries, "secret_arguments") {
        None => Vec::new(),
        Some(node) => secrets(node)?,
    };
    if !secret_arguments.is_empty() {
        let mut sorted = secret_arguments.clone();
        sorted.sort();
        document.insert("secret_arguments".into(), json!(sorted));
    }
    let effect = template(entries, "effect", &secret_arguments)?;
    let resource = template(entries, "resource", &secret_arguments)?;
    for (name, value) in [("effect", &effect), ("resource", &resource)] {
        if let Some(value) = value {
            document.insert(name.into(), json!(value.as_str()));
        }
    }
    let approval = get(entries, "approval").map(approval_spec).transpose()?;
    let approval_ttl = match (get(entries, "approval_ttl"), &approval) {
        (Some(node), Some((spec, _))) if spec.ttl.is_some() => {
            return Err(error_at(
                node,
                LoadErrorKind::TtlTwice {
                    action: key.to_owned(),
                },
            ));
        }
        (Some(node), _) => Some(duration(node)?),
        (None, Some((spec, _))) => spec.ttl,
        (None, None) => None,
    };
    if let Some(ttl) = approval_ttl {
        document.insert("approval_ttl_seconds".into(), json!(ttl.as_secs()));
    }
    // Written only when set, so entries without them keep their fingerprints.
    if let Some((_, approval_document)) = &approval {
        document.insert("approval".into(), approval_document.clone());
    }
    let resolvers = get(entries, "resolvers")
        .map(|node| identity_patterns(node, "resolvers"))
        .transpose()?;
    if let Some(resolvers) = &resolvers {
        document.insert("resolvers".into(), json!(resolvers));
    }
    let not_executed_on_error = match get(entries, "mcp") {
        None => false,
        Some(node) => mcp_options(node)?,
    };
    // Written into the fingerprint only when set, so entries without `mcp` keep the
    // fingerprints (and the policy hash) they had before the key existed.
    if not_executed_on_error {
        document.insert("mcp".into(), json!({ "not_executed_on_error": true }));
    }

    let body = match (get(entries, "decision"), get(entries, "rules")) {
        (Some(_), Some(_)) => {
            return Err(error_at(
                body,
                LoadErrorKind::DecisionAndRules {
                    action: key.to_owned(),
                },
            ));
        }
        (None, None) => {
            return Err(error_at(
                body,
                LoadErrorKind::NoDecision {
                    action: key.to_owned(),
                },
            ));
        }
        (Some(node), None) => {
            let decision = decision(node)?;
            document.insert("decision".into(), json!(decision.as_str()));
            EntryBody::Shorthand(decision)
        }
        (None, Some(node)) => {
            let (rules, rule_documents) = rules(node, &secret_arguments)?;
            document.insert("rules".into(), Value::Array(rule_documents));
            EntryBody::Rules(rules)
        }
    };
    let document = Value::Object(document);
    let fingerprint = hash_of(&document)?;
    let entry = ActionEntry {
        key: key.to_owned(),
        body,
        effect,
        resource,
        approval_ttl,
        approval: approval.map(|(spec, _)| spec),
        resolvers,
        secret_arguments,
        not_executed_on_error,
        fingerprint,
        line: 0,
    };
    Ok((entry, document))
}

/// The `mcp` options of an entry: a mapping with at most `not_executed_on_error: <bool>`.
fn mcp_options(node: &Node) -> Result<bool, LoadError> {
    let entries = mapping(
        node,
        "mcp",
        "a mapping such as `{ not_executed_on_error: true }`",
    )?;
    check_keys(entries, KeyPlace::Mcp)?;
    match get(entries, "not_executed_on_error") {
        None => Ok(false),
        Some(flag) => match &flag.value {
            NodeValue::Bool(flag) => Ok(*flag),
            _ => Err(wrong_type(
                flag,
                "not_executed_on_error",
                "`true` or `false`",
            )),
        },
    }
}

fn secrets(node: &Node) -> Result<Vec<String>, LoadError> {
    let NodeValue::Sequence(items) = &node.value else {
        return Err(wrong_type(
            node,
            "secret_arguments",
            "a list of argument names",
        ));
    };
    let mut names: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let name = string(item, "secret_arguments", "a list of argument names")?;
        if !is_field_path(name) || name.contains('.') {
            return Err(error_at(
                item,
                LoadErrorKind::InvalidField {
                    field: name.to_owned(),
                    expected: "a secret is a top-level argument name: letters, digits and `_`, starting with a letter or `_`",
                },
            ));
        }
        if names.iter().any(|known| known == name) {
            return Err(error_at(
                item,
                LoadErrorKind::DuplicateSecret {
                    name: name.to_owned(),
                },
            ));
        }
        names.push(name.to_owned());
    }
    Ok(names)
}

/// The secret that `field` reads, if any: the field itself or an object it descends into.
fn secret_read_by<'a>(field: &str, secrets: &'a [String]) -> Option<&'a String> {
    let top = field.split('.').next().unwrap_or(field);
    secrets.iter().find(|secret| secret.as_str() == top)
}

fn template(
    entries: &Entries,
    key: &'static str,
    secrets: &[String],
) -> Result<Option<Template>, LoadError> {
    let Some(node) = get(entries, key) else {
        return Ok(None);
    };
    let text = string(node, key, "a template string such as `refund:{payment_id}`")?;
    let template = Template::parse(text)
        .map_err(|error| error_at(node, LoadErrorKind::InvalidTemplate { key, error }))?;
    if let Some(field) = template
        .fields()
        .find(|field| secret_read_by(field, secrets).is_some())
    {
        return Err(error_at(
            node,
            LoadErrorKind::SecretInTemplate {
                key,
                field: field.to_owned(),
            },
        ));
    }
    Ok(Some(template))
}

fn duration(node: &Node) -> Result<Duration, LoadError> {
    let text = string(node, "approval_ttl", "a duration such as `15m`")?;
    let fail = |problem| {
        error_at(
            node,
            LoadErrorKind::InvalidDuration {
                text: text.to_owned(),
                problem,
            },
        )
    };
    // The units every duration of Countersign's takes (`10M` would be ten months).
    crate::clock::check_duration_units(text).map_err(|problem| {
        fail(match problem {
            crate::clock::DurationUnitProblem::Unknown(_) => DurationProblem::UnknownUnit,
            crate::clock::DurationUnitProblem::Missing => DurationProblem::Unparsable,
        })
    })?;
    let value = humantime::parse_duration(text).map_err(|_| fail(DurationProblem::Unparsable))?;
    if value.is_zero() {
        return Err(fail(DurationProblem::Zero));
    }
    if value > MAX_APPROVAL_TTL {
        return Err(fail(DurationProblem::TooLong));
    }
    if value.subsec_nanos() != 0 {
        return Err(fail(DurationProblem::SubSecond));
    }
    Ok(value)
}

fn decision(node: &Node) -> Result<Decision, LoadError> {
    match string(node, "decision", "`allow`, `approve` or `deny`")? {
        "allow" => Ok(Decision::Allow),
        "approve" => Ok(Decision::Approve),
        "deny" => Ok(Decision::Deny),
        other => Err(error_at(
            node,
            LoadErrorKind::UnknownDecision {
                found: other.to_owned(),
                suggestion: closest(other, DECISIONS),
            },
        )),
    }
}

/// The candidate nearest to `written` by edit distance, if it is close (at most 2 edits, and
/// fewer edits than `written` has characters).
fn closest(written: &str, candidates: &[&'static str]) -> Option<&'static str> {
    let limit = 2.min(written.chars().count().saturating_sub(1));
    candidates
        .iter()
        .map(|candidate| (edit_distance(written, candidate), *candidate))
        .filter(|(distance, _)| *distance <= limit && *distance > 0)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}
