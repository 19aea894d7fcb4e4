//! Load errors: what is wrong with a policy file, and where.

use std::fmt;
use std::path::PathBuf;

use super::template::TemplateError;

/// A policy file that could not be loaded, with its location.
///
/// `line` and `column` are 1-based and count characters; both are `None` when the problem has
/// no place in the text (an I/O error, a file over the size limit). Display renders
/// `file:line:column: message`, leaving out the parts that are unknown, for example
/// ``countersign.yaml:12:7: unknown key `whn` in rule: expected one of `when`, `decision` ``.
///
/// A policy that fails to load is never replaced by a permissive one: the caller has no policy.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct LoadError {
    /// What is wrong.
    pub kind: LoadErrorKind,
    /// The file, as given to [`super::Policy::load`] or [`super::Policy::from_yaml_str`].
    pub file: Option<PathBuf>,
    /// 1-based line of the offending text.
    pub line: Option<usize>,
    /// 1-based column (in characters) of the offending text.
    pub column: Option<usize>,
}

impl LoadError {
    pub(crate) fn at(kind: LoadErrorKind, line: usize, column: usize) -> LoadError {
        LoadError {
            kind,
            file: None,
            line: (line > 0).then_some(line),
            column: (line > 0 && column > 0).then_some(column),
        }
    }

    pub(crate) fn nowhere(kind: LoadErrorKind) -> LoadError {
        LoadError {
            kind,
            file: None,
            line: None,
            column: None,
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(formatter, "{}:", file.display())?;
        }
        if let Some(line) = self.line {
            write!(formatter, "{line}:")?;
            if let Some(column) = self.column {
                write!(formatter, "{column}:")?;
            }
        }
        if self.file.is_some() || self.line.is_some() {
            formatter.write_str(" ")?;
        }
        write!(formatter, "{}", self.kind)
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            LoadErrorKind::InvalidTemplate { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Why a policy file could not be loaded. Each variant has a stable [`code`](Self::code).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadErrorKind {
    /// The file could not be read.
    #[error("cannot read the policy file: {message}")]
    Io {
        /// The I/O error's kind.
        kind: std::io::ErrorKind,
        /// The operating system's message.
        message: String,
    },
    /// The file is larger than the loader accepts.
    #[error("the policy file is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Size in bytes (at least `limit + 1` when the exact size is unknown).
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The file is not UTF-8.
    #[error("the policy file is not valid UTF-8: save it as UTF-8")]
    NotUtf8,
    /// The YAML itself is malformed; `detail` is the YAML parser's description.
    #[error("invalid YAML: {detail}")]
    Syntax {
        /// The parser's description of the problem.
        detail: String,
    },
    /// The document exceeds a parser budget (nesting, node count, alias expansion).
    #[error("the policy is too complex to load: {detail}: simplify it or remove YAML aliases")]
    TooComplex {
        /// The parser's description of the limit hit.
        detail: String,
    },
    /// More than one YAML document (`---`) in the file.
    #[error("the policy file holds more than one YAML document: keep one")]
    MultipleDocuments,
    /// A mapping has the same key twice (at any level, action names included).
    #[error("duplicate key `{key}`: a key may appear once in a mapping")]
    DuplicateKey {
        /// The repeated key.
        key: String,
    },
    /// A key that this place does not accept.
    #[error("unknown key `{key}` in {place}: expected one of {}{}", list(place.expected_keys()), suggest(*suggestion))]
    UnknownKey {
        /// The key as written.
        key: String,
        /// Where it was found; [`KeyPlace::expected_keys`] lists what is accepted there.
        place: KeyPlace,
        /// The accepted key closest to what was written, if any is close.
        suggestion: Option<&'static str>,
    },
    /// A required key is missing.
    #[error("missing key `{key}` in {place}")]
    MissingKey {
        /// The missing key.
        key: &'static str,
        /// Where it is required.
        place: KeyPlace,
    },
    /// A value of the wrong type.
    #[error("`{key}` must be {expected}, found {found}")]
    WrongType {
        /// The key (or `document`, `action` for the action's body) whose value is wrong.
        key: String,
        /// What is accepted there.
        expected: &'static str,
        /// What was found (`a string`, `a list`, ...).
        found: &'static str,
    },
    /// `schema` is not `countersign.policy/v1`.
    #[error("unsupported schema `{found}`: expected `countersign.policy/v1`")]
    UnsupportedSchema {
        /// The schema as written.
        found: String,
    },
    /// `mode` is not `enforce` or `observe`.
    #[error("unknown mode `{found}`: expected `enforce` or `observe`{}", suggest(*suggestion))]
    UnknownMode {
        /// The mode as written.
        found: String,
        /// The closest mode, if close.
        suggestion: Option<&'static str>,
    },
    /// `environment` is empty or has whitespace or control characters.
    #[error("invalid environment `{found}`: use a non-empty name without spaces")]
    InvalidEnvironment {
        /// The environment as written.
        found: String,
    },
    /// `decision` is not `allow`, `approve` or `deny`.
    #[error("unknown decision `{found}`: expected `allow`, `approve` or `deny`{}", suggest(*suggestion))]
    UnknownDecision {
        /// The decision as written.
        found: String,
        /// The closest decision, if close.
        suggestion: Option<&'static str>,
    },
    /// An operator outside `eq ne in not_in lt lte gt gte`.
    #[error("unknown operator `{found}`: expected one of `eq`, `ne`, `in`, `not_in`, `lt`, `lte`, `gt`, `gte`{}", suggest(*suggestion))]
    UnknownOperator {
        /// The operator as written.
        found: String,
        /// The closest (or equivalent) operator, if any.
        suggestion: Option<&'static str>,
    },
    /// An operator's operand has the wrong type (`lt` with a string, `in` with a scalar).
    #[error("operator `{operator}` takes {expected}, found {found}")]
    BadOperand {
        /// The operator.
        operator: &'static str,
        /// What it takes.
        expected: &'static str,
        /// What was found.
        found: &'static str,
    },
    /// `when: {}`.
    #[error("empty `when`: leave `when` out for a rule that always matches")]
    EmptyWhen,
    /// A field in `when` with an empty operator mapping.
    #[error("empty condition for `{field}`: give at least one operator, such as `{{ eq: ... }}`")]
    EmptyCondition {
        /// The argument path.
        field: String,
    },
    /// `rules: []`.
    #[error("empty `rules`: write `decision: deny` to deny every call to this action")]
    EmptyRules,
    /// An action has both `decision` and `rules`.
    #[error("action `{action}` has both `decision` and `rules`: keep one")]
    DecisionAndRules {
        /// The action key.
        action: String,
    },
    /// An action has neither `decision` nor `rules`.
    #[error("action `{action}` has neither `decision` nor `rules`: add one")]
    NoDecision {
        /// The action key.
        action: String,
    },
    /// A rule after a rule without `when` can never match.
    #[error(
        "unreachable rule: the rule on line {shadowed_by_line} has no `when` and matches every call: move this rule above it or remove it"
    )]
    UnreachableRule {
        /// 0-based index of the unreachable rule.
        index: usize,
        /// Line of the unconditional rule before it.
        shadowed_by_line: usize,
    },
    /// An action key that is neither a name nor a valid pattern.
    #[error("invalid action key `{key}`: {problem}")]
    InvalidPattern {
        /// The key as written.
        key: String,
        /// What is wrong with it.
        problem: PatternProblem,
    },
    /// An argument path (in `when`) or name (in `secret_arguments`) that is malformed.
    #[error("invalid argument name `{field}`: {expected}")]
    InvalidField {
        /// The name as written.
        field: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// An `effect` or `resource` template that does not parse.
    #[error("invalid `{key}` template: {error}")]
    InvalidTemplate {
        /// `effect` or `resource`.
        key: &'static str,
        /// The template problem.
        error: TemplateError,
    },
    /// A template names a secret argument (case B17): secrets never enter effect keys or
    /// resources.
    #[error(
        "`{key}` template uses `{field}`, which is a secret argument: secret arguments are left out of hashes and evidence, so build the `{key}` from stable fields"
    )]
    SecretInTemplate {
        /// `effect` or `resource`.
        key: &'static str,
        /// The field named by the template.
        field: String,
    },
    /// A condition reads a secret argument: the decision would depend on a value that the
    /// action hash leaves out.
    #[error(
        "condition on `{field}`, which is a secret argument: decisions may depend only on hashed arguments"
    )]
    SecretInCondition {
        /// The argument path.
        field: String,
    },
    /// A name listed twice in `secret_arguments`.
    #[error("`{name}` is listed twice in `secret_arguments`")]
    DuplicateSecret {
        /// The repeated name.
        name: String,
    },
    /// An `approval_ttl` that does not parse or is out of range.
    #[error("invalid `approval_ttl` `{text}`: {problem}")]
    InvalidDuration {
        /// The value as written.
        text: String,
        /// What is wrong with it.
        problem: DurationProblem,
    },
    /// A number that canonical JSON (RFC 8785) cannot carry faithfully.
    #[error("number not representable: {problem}")]
    NumberNotRepresentable {
        /// What is wrong with it.
        problem: NumberProblem,
    },
    /// An entry sets its approval TTL twice, as `approval_ttl` and as `approval.ttl`.
    #[error("`approval_ttl` and `approval.ttl` both set the TTL of `{action}`: keep one")]
    TtlTwice {
        /// The action key.
        action: String,
    },
    /// `quorum` is not a whole number from 1 to 100.
    #[error("invalid `quorum` {found}: expected a whole number from 1 to 100, unquoted")]
    InvalidQuorum {
        /// The value as written.
        found: String,
    },
    /// `require` is not `asserted` or `authenticated`.
    #[error("unknown `require` `{found}`: expected `asserted` or `authenticated`{}", suggest(*suggestion))]
    UnknownRequirement {
        /// The value as written.
        found: String,
        /// The closest value, if close.
        suggestion: Option<&'static str>,
    },
    /// An approver, resolver or directory entry that is not an identity pattern.
    #[error("invalid approver `{found}`: {expected}")]
    InvalidApprover {
        /// The value as written.
        found: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// An `approval` block whose `approvers` list is empty: nobody could ever approve.
    #[error("empty `approvers`: list who may approve, such as `group:finance` or `human:*`")]
    EmptyApprovers,
    /// A public key in `approvers.keys` that cannot be read or is not an Ed25519 public key.
    #[error("invalid approver key `{key}`: {message}")]
    InvalidKey {
        /// The key or file as written.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A bug in Countersign: the parsed policy could not be hashed.
    #[error("internal error while hashing the policy: {detail}: please report this bug")]
    Internal {
        /// What failed.
        detail: String,
    },
}

impl LoadErrorKind {
    /// A stable, machine-readable code for this kind, such as `unknown_key`.
    pub fn code(&self) -> &'static str {
        match self {
            LoadErrorKind::Io { .. } => "io",
            LoadErrorKind::TooLarge { .. } => "too_large",
            LoadErrorKind::NotUtf8 => "not_utf8",
            LoadErrorKind::Syntax { .. } => "syntax",
            LoadErrorKind::TooComplex { .. } => "too_complex",
            LoadErrorKind::MultipleDocuments => "multiple_documents",
            LoadErrorKind::DuplicateKey { .. } => "duplicate_key",
            LoadErrorKind::UnknownKey { .. } => "unknown_key",
            LoadErrorKind::MissingKey { .. } => "missing_key",
            LoadErrorKind::WrongType { .. } => "wrong_type",
            LoadErrorKind::UnsupportedSchema { .. } => "unsupported_schema",
            LoadErrorKind::UnknownMode { .. } => "unknown_mode",
            LoadErrorKind::InvalidEnvironment { .. } => "invalid_environment",
            LoadErrorKind::UnknownDecision { .. } => "unknown_decision",
            LoadErrorKind::UnknownOperator { .. } => "unknown_operator",
            LoadErrorKind::BadOperand { .. } => "bad_operand",
            LoadErrorKind::EmptyWhen => "empty_when",
            LoadErrorKind::EmptyCondition { .. } => "empty_condition",
            LoadErrorKind::EmptyRules => "empty_rules",
            LoadErrorKind::DecisionAndRules { .. } => "decision_and_rules",
            LoadErrorKind::NoDecision { .. } => "no_decision",
            LoadErrorKind::UnreachableRule { .. } => "unreachable_rule",
            LoadErrorKind::InvalidPattern { .. } => "invalid_pattern",
            LoadErrorKind::InvalidField { .. } => "invalid_field",
            LoadErrorKind::InvalidTemplate { .. } => "invalid_template",
            LoadErrorKind::SecretInTemplate { .. } => "secret_in_template",
            LoadErrorKind::SecretInCondition { .. } => "secret_in_condition",
            LoadErrorKind::DuplicateSecret { .. } => "duplicate_secret",
            LoadErrorKind::InvalidDuration { .. } => "invalid_duration",
            LoadErrorKind::NumberNotRepresentable { .. } => "number_not_representable",
            LoadErrorKind::TtlTwice { .. } => "ttl_twice",
            LoadErrorKind::InvalidQuorum { .. } => "invalid_quorum",
            LoadErrorKind::UnknownRequirement { .. } => "unknown_requirement",
            LoadErrorKind::InvalidApprover { .. } => "invalid_approver",
            LoadErrorKind::EmptyApprovers => "empty_approvers",
            LoadErrorKind::InvalidKey { .. } => "invalid_key",
            LoadErrorKind::Internal { .. } => "internal",
        }
    }
}

/// A kind of mapping in the policy file, for key errors.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPlace {
    /// The top level of the document.
    Policy,
    /// An entry under `actions`.
    Action,
    /// An item of `rules`.
    Rule,
    /// The `mcp` mapping of an entry (options the MCP gateway reads).
    Mcp,
    /// An `approval` mapping (of an entry or a rule): who may approve.
    Approval,
    /// The top-level `approvers` mapping (the keys that sign approver tokens).
    Approvers,
}

impl KeyPlace {
    /// The keys accepted in this place, in documentation order.
    pub fn expected_keys(self) -> &'static [&'static str] {
        match self {
            KeyPlace::Policy => &[
                "schema",
                "mode",
                "environment",
                "approval_ttl",
                "approvers",
                "directory",
                "actions",
            ],
            KeyPlace::Action => &[
                "effect",
                "resource",
                "approval_ttl",
                "approval",
                "resolvers",
                "secret_arguments",
                "rules",
                "decision",
                "mcp",
            ],
            KeyPlace::Rule => &["when", "decision", "approval"],
            KeyPlace::Mcp => &["not_executed_on_error"],
            KeyPlace::Approval => &[
                "approvers",
                "quorum",
                "distinct_from_requester",
                "require",
                "ttl",
            ],
            KeyPlace::Approvers => &["keys"],
        }
    }

    /// `policy`, `action` or `rule`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyPlace::Policy => "policy",
            KeyPlace::Action => "action",
            KeyPlace::Rule => "rule",
            KeyPlace::Mcp => "mcp options",
            KeyPlace::Approval => "approval",
            KeyPlace::Approvers => "approvers",
        }
    }
}

impl fmt::Display for KeyPlace {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// What is wrong with an action key.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternProblem {
    /// The key is empty.
    #[error("an action key cannot be empty")]
    Empty,
    /// Whitespace or a control character.
    #[error("an action key cannot contain whitespace or control characters")]
    Whitespace,
    /// An invisible or bidirectional formatting character (U+200B, U+202E, ...): the key
    /// would look like a name it never matches.
    #[error(
        "an action key cannot contain an invisible or bidirectional formatting character ({0}): it looks like a name an agent sends but never matches it; retype the key"
    )]
    Invisible(String),
    /// A `*` that is not the last character.
    #[error("`*` may appear only at the end of a pattern, as in `mcp.files.read_*`")]
    StarNotAtEnd,
    /// More than one `*`.
    #[error("a pattern may contain only one `*`, at its end")]
    SeveralStars,
}

/// What is wrong with a duration.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DurationProblem {
    /// Not a humantime duration.
    #[error("expected a duration such as `15m`, `1h 30m` or `90s`")]
    Unparsable,
    /// A unit other than `ms`, `s`, `m`, `h`, `d` or `w` ([`crate::clock::DURATION_UNITS`]).
    #[error(
        "has a unit Countersign does not read: use `s`, `m`, `h`, `d` or `w` after each number, such as `15m` (`M` and `y`, months and years, are not read)"
    )]
    UnknownUnit,
    /// Zero.
    #[error("must be greater than zero")]
    Zero,
    /// Longer than seven days.
    #[error("must be at most 7 days")]
    TooLong,
    /// Not a whole number of seconds.
    #[error("must be a whole number of seconds")]
    SubSecond,
}

/// Why a number cannot be carried by canonical JSON (RFC 8785).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NumberProblem {
    /// NaN or an infinity.
    #[error("NaN and infinities are not allowed")]
    NonFinite,
    /// `-0.0`.
    #[error("negative zero is not allowed: write `0`")]
    NegativeZero,
    /// An integer outside ±(2^53−1).
    #[error("integers must be within ±9007199254740991: write larger values as strings")]
    IntegerOutOfRange,
}

fn list(items: &[&str]) -> String {
    items
        .iter()
        .map(|item| format!("`{item}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn suggest(suggestion: Option<&str>) -> String {
    match suggestion {
        Some(word) => format!(": did you mean `{word}`?"),
        None => String::new(),
    }
}
