//! The YAML layer: text to a tree of located nodes, with the parser's limits set.
//!
//! serde-saphyr does the YAML work (syntax, duplicate keys at every level, alias budgets); this
//! module turns its output into [`Node`]s that carry a 1-based line and column, so that the
//! loader can name the place of every problem it finds afterwards.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use super::error::{LoadError, LoadErrorKind};

/// One YAML node and where it starts (1-based line and column; 0 when the parser did not say).
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) value: NodeValue,
    pub(crate) line: usize,
    pub(crate) column: usize,
}

/// The value of a [`Node`] after YAML's core-schema resolution (quoted scalars are strings).
#[derive(Debug, Clone)]
pub(crate) enum NodeValue {
    Null,
    Bool(bool),
    Integer(i128),
    Float(f64),
    String(String),
    Sequence(Vec<Node>),
    /// Entries in document order; the parser already refused duplicate keys.
    Mapping(Vec<(Node, Node)>),
}

impl NodeValue {
    /// The word used for this kind of value in messages.
    pub(crate) fn kind_name(&self) -> &'static str {
        match self {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Integer(_) | NodeValue::Float(_) => "a number",
            NodeValue::String(_) => "a string",
            NodeValue::Sequence(_) => "a list",
            NodeValue::Mapping(_) => "a mapping",
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<NodeValue>::deserialize(deserializer)?;
        Ok(Node {
            value: spanned.value,
            line: usize::try_from(spanned.referenced.line()).unwrap_or(0),
            column: usize::try_from(spanned.referenced.column()).unwrap_or(0),
        })
    }
}

impl<'de> Deserialize<'de> for NodeValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = NodeValue;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a YAML value")
    }

    fn visit_unit<E>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }

    fn visit_none<E>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<NodeValue, D::Error> {
        NodeValue::deserialize(deserializer)
    }

    fn visit_bool<E>(self, value: bool) -> Result<NodeValue, E> {
        Ok(NodeValue::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<NodeValue, E> {
        Ok(NodeValue::Integer(i128::from(value)))
    }

    fn visit_u64<E>(self, value: u64) -> Result<NodeValue, E> {
        Ok(NodeValue::Integer(i128::from(value)))
    }

    fn visit_i128<E>(self, value: i128) -> Result<NodeValue, E> {
        Ok(NodeValue::Integer(value))
    }

    fn visit_u128<E>(self, value: u128) -> Result<NodeValue, E> {
        Ok(NodeValue::Integer(
            i128::try_from(value).unwrap_or(i128::MAX),
        ))
    }

    fn visit_f64<E>(self, value: f64) -> Result<NodeValue, E> {
        Ok(NodeValue::Float(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<NodeValue, E> {
        Ok(NodeValue::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<NodeValue, E> {
        Ok(NodeValue::String(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<NodeValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = access.next_element()? {
            items.push(item);
        }
        Ok(NodeValue::Sequence(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<NodeValue, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = access.next_entry()? {
            entries.push(entry);
        }
        Ok(NodeValue::Mapping(entries))
    }
}

/// Parser settings: strict booleans, no merge keys, no custom tags, tight budgets.
fn parser_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = 32;
    budget.max_events = 400_000;
    budget.max_nodes = 200_000;
    budget.max_aliases = 1_000;
    budget.max_anchors = 1_000;
    let mut alias_limits = serde_saphyr::options::AliasLimits::default();
    alias_limits.max_total_replayed_events = 100_000;
    alias_limits.max_replay_stack_depth = 16;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.alias_limits = alias_limits;
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::Error;
    options.merge_keys = serde_saphyr::MergeKeyPolicy::Error;
    options.strict_booleans = true;
    options.reject_unsupported_tags = true;
    options.with_snippet = false;
    options
}

/// Parse `text` (one YAML document) into a located tree.
///
/// # Errors
/// Syntax errors, duplicate keys, budget breaches and unsupported tags, located.
pub(crate) fn parse(text: &str) -> Result<Node, LoadError> {
    serde_saphyr::from_str_with_options::<Node>(text, parser_options())
        .map_err(map_error)
        .map_err(|error| at_the_tab(text, error))
}

/// A tab in the indentation makes the scanner fail where it next looks for a token, which can
/// be a line later: when the parser's message is about a tab, point at the first indentation tab
/// up to the line after the one it named, as the scanner may name the line before or after the
/// tab (YAML 1.2.2 §6.1: tabs never indent).
fn at_the_tab(text: &str, mut error: LoadError) -> LoadError {
    let LoadErrorKind::Syntax { detail } = &error.kind else {
        return error;
    };
    if !detail.to_ascii_lowercase().contains("tab") {
        return error;
    }
    let last = error.line.map_or(usize::MAX, |line| line.saturating_add(1));
    let found = text
        .lines()
        .enumerate()
        .take(last)
        .find_map(|(index, line)| {
            let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
            line[..indent]
                .find('\t')
                .map(|column| (index + 1, line[..column].chars().count() + 1))
        });
    if let Some((line, column)) = found {
        error.line = Some(line);
        error.column = Some(column);
    }
    error
}

fn map_error(error: serde_saphyr::Error) -> LoadError {
    let location = error.location();
    let (line, column) = match location {
        Some(location) if location.line() > 0 => (
            usize::try_from(location.line()).ok(),
            usize::try_from(location.column()).ok(),
        ),
        _ => (None, None),
    };
    let kind = classify(&error);
    LoadError {
        kind,
        file: None,
        line,
        column,
    }
}

fn classify(error: &serde_saphyr::Error) -> LoadErrorKind {
    match error.without_snippet() {
        serde_saphyr::Error::AliasError { error: inner, .. } => classify(inner),
        serde_saphyr::Error::DuplicateMappingKey { key, .. } => LoadErrorKind::DuplicateKey {
            key: key.clone().unwrap_or_else(|| "?".to_owned()),
        },
        plain @ (serde_saphyr::Error::Budget { .. }
        | serde_saphyr::Error::AliasReplayCounterOverflow { .. }
        | serde_saphyr::Error::AliasReplayLimitExceeded { .. }
        | serde_saphyr::Error::AliasExpansionLimitExceeded { .. }
        | serde_saphyr::Error::AliasReplayStackDepthExceeded { .. }) => LoadErrorKind::TooComplex {
            detail: strip_location(&plain.to_string()),
        },
        serde_saphyr::Error::MultipleDocuments { .. } => LoadErrorKind::MultipleDocuments,
        serde_saphyr::Error::NonFiniteFloat { .. } => LoadErrorKind::NumberNotRepresentable {
            problem: super::error::NumberProblem::NonFinite,
        },
        other => LoadErrorKind::Syntax {
            detail: strip_location(&other.to_string()),
        },
    }
}

/// The parser appends " at line L, column C" to its messages; the location is carried apart.
fn strip_location(message: &str) -> String {
    let trimmed = match message.find(" at line ") {
        Some(index) => &message[..index],
        None => message,
    };
    trimmed.replace('\n', " ")
}
