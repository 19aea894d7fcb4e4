//! Policy: the `countersign.policy/v1` document, and the decision it gives for an action.
//!
//! A [`Policy`] is loaded from YAML by a strict loader ([`Policy::load`],
//! [`Policy::from_yaml_str`]): unknown keys, duplicate keys, wrong types, unknown operators or
//! decisions, malformed patterns and templates are each a [`LoadError`] naming the file, line
//! and column. A policy that cannot load never becomes a permissive one.
//!
//! Once loaded, a policy is immutable and [`Policy::decide`] is a pure function of the action
//! name and its canonical arguments:
//!
//! 1. the governing entry is the exact action name if listed, else the listed pattern
//!    (`prefix*`) with the longest matching prefix (`*` alone matches every name); no entry
//!    denies (`unknown_action`);
//! 2. an entry with `decision` gives that decision (`action_default`);
//! 3. otherwise its `rules` are tried in order and the first whose conditions all hold decides
//!    (`rule`); none denies (`no_matching_rule`).
//!
//! A condition on a missing argument is false for every operator, `ne` and `not_in` included,
//! so a missing argument never widens a decision. `mode: observe` does not change what `decide`
//! returns: the kernel records the decision and does not enforce it.
//!
//! The user-facing description of the file is `docs/policy.md`.
//!
//! ```
//! use countersign::policy::{Decision, Policy};
//! use serde_json::json;
//!
//! let policy = Policy::from_yaml_str(
//!     "schema: countersign.policy/v1\n\
//!      actions:\n  \
//!        stripe.refund:\n    \
//!          effect: \"refund:{payment_id}\"\n    \
//!          rules:\n      \
//!            - when: { amount: { lte: 50000 } }\n        \
//!              decision: allow\n      \
//!            - decision: approve\n",
//!     None,
//! )?;
//! let small = policy.decide("stripe.refund", &json!({"payment_id": "p1", "amount": 900}));
//! assert_eq!(small.decision, Decision::Allow);
//! let large = policy.decide("stripe.refund", &json!({"payment_id": "p1", "amount": 90000}));
//! assert_eq!(large.decision, Decision::Approve);
//! assert_eq!(policy.decide("stripe.charge", &json!({})).decision, Decision::Deny);
//! # Ok::<(), countersign::policy::LoadError>(())
//! ```

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::approver::{ApprovalRule, Requirement};
use crate::id::PolicyHash;

/// Whether `name` matches the action key `pattern` (defined beside the approver rules, which
/// match group names the same way).
pub use crate::approver::matches_pattern;

mod condition;
mod error;
mod explain;
mod load;
mod template;
mod yaml;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use error::{
    DurationProblem, KeyPlace, LoadError, LoadErrorKind, NumberProblem, PatternProblem,
};
pub use explain::{ConditionTrace, EntryMatch, Explanation, RuleTrace};
pub use template::{Template, TemplateError};

use condition::Condition;

/// The only schema this loader accepts.
pub const SCHEMA: &str = "countersign.policy/v1";

/// The largest policy file the loader reads: 1 MiB.
pub const MAX_POLICY_BYTES: usize = 1024 * 1024;

/// A parsed, validated, immutable policy document.
#[derive(Debug, Clone)]
pub struct Policy {
    mode: Mode,
    environment: String,
    approval_ttl: Duration,
    /// `directory`: identity → group names (sorted).
    directory: BTreeMap<String, Vec<String>>,
    /// `approvers.keys`, in inline `ed25519:` form.
    keys: Vec<String>,
    /// Entries in the order written.
    entries: Vec<ActionEntry>,
    /// Exact action names to their index in `entries`.
    exact: BTreeMap<String, usize>,
    /// Pattern prefixes (without the `*`) and their entry index.
    // INVARIANT (longest-prefix-first): sorted by prefix length, longest first; prefixes are
    // unique because action keys are.
    patterns: Vec<(String, usize)>,
    hash: PolicyHash,
    /// The parsed document the hash covers (defaults filled in, canonical).
    document: serde_json::Value,
}

impl Policy {
    /// Parse and validate a policy from YAML text.
    ///
    /// `source` is the file the text came from; it only labels errors.
    ///
    /// # Errors
    /// A [`LoadError`] with the kind of problem and its 1-based line and column; text over
    /// [`MAX_POLICY_BYTES`] is [`LoadErrorKind::TooLarge`].
    pub fn from_yaml_str(text: &str, source: Option<&Path>) -> Result<Policy, LoadError> {
        load::from_text(text, source.and_then(Path::parent))
            .map_err(|error| with_file(error, source))
    }

    /// Read, parse and validate the policy file at `path`.
    ///
    /// # Errors
    /// As [`Policy::from_yaml_str`]; a file that cannot be read is [`LoadErrorKind::Io`], one
    /// that is not UTF-8 is [`LoadErrorKind::NotUtf8`].
    pub fn load(path: &Path) -> Result<Policy, LoadError> {
        let bytes = load::read_capped(path).map_err(|error| with_file(error, Some(path)))?;
        load::from_bytes(&bytes, path.parent()).map_err(|error| with_file(error, Some(path)))
    }

    /// The policy hash: `sha256:` plus 64 lowercase hex digits over the canonical JSON of the
    /// parsed document (defaults filled in), so formatting, comments and key order do not
    /// change it and every semantic change does. Stamped on every receipt.
    pub fn hash(&self) -> &PolicyHash {
        &self.hash
    }

    /// The parsed document [`Policy::hash`] covers, as JSON: `schema`, `mode`, `environment`,
    /// `approval_ttl_seconds`, `actions` (each entry by its key, as its fingerprint covers it:
    /// `decision` or `rules` with their `when` conditions, templates, TTL, `approval`,
    /// `resolvers`, `secret_arguments`, `mcp`) and, when set, `directory` and `approvers`.
    /// Comments, formatting and key order are gone, so two documents compare by meaning
    /// (`countersign policy diff`).
    pub fn document(&self) -> &serde_json::Value {
        &self.document
    }

    /// Whether decisions are enforced or only recorded.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The environment name (`default` when not written); part of every action hash.
    pub fn environment(&self) -> &str {
        &self.environment
    }

    /// The policy-wide approval time to live (default 15 minutes; whole seconds, at most 7
    /// days). An entry's own `approval_ttl` overrides it.
    pub fn approval_ttl(&self) -> Duration {
        self.approval_ttl
    }

    /// The `directory`: identity → group names (sorted, unique).
    pub fn directory(&self) -> &BTreeMap<String, Vec<String>> {
        &self.directory
    }

    /// The public keys that may sign approver tokens (`approvers.keys`), in inline `ed25519:`
    /// form.
    pub fn approver_keys(&self) -> &[String] {
        &self.keys
    }

    /// The rule an approval request opened now for `principal` under `decided` is judged by
    /// for its whole life: the matching rule's `approval` block, else the entry's, else the
    /// default (anyone but the requester, one answer, asserted allowed); the entry's
    /// `resolvers`; the principal's groups and the whole directory; the approver keys.
    pub fn approval_rule(&self, decided: &PolicyDecision<'_>, principal: &str) -> ApprovalRule {
        let spec = decided.approval();
        let resolvers = decided.entry.and_then(|entry| entry.resolvers.clone());
        self.rule_from(spec, resolvers, principal)
    }

    /// The resolver rule an effect reserved under `entry` keeps, when it is not the default:
    /// `Some` exactly when the entry has a `resolvers` list or an `approval` block.
    pub fn resolver_rule(&self, entry: &ActionEntry, principal: &str) -> Option<ApprovalRule> {
        if entry.resolvers.is_none() && entry.approval.is_none() {
            return None;
        }
        Some(self.rule_from(entry.approval.as_ref(), entry.resolvers.clone(), principal))
    }

    fn rule_from(
        &self,
        spec: Option<&ApprovalSpec>,
        resolvers: Option<Vec<String>>,
        principal: &str,
    ) -> ApprovalRule {
        let default = ApprovalRule::default();
        ApprovalRule {
            approvers: spec.map_or(default.approvers, |spec| spec.approvers.clone()),
            quorum: spec.map_or(1, |spec| spec.quorum),
            distinct_from_requester: spec.is_some_and(|spec| spec.distinct_from_requester),
            require: spec.map_or(Requirement::Asserted, |spec| spec.require),
            resolvers,
            requester_groups: self.directory.get(principal).cloned().unwrap_or_default(),
            directory: self.directory.clone(),
            keys: self.keys.clone(),
        }
    }

    /// Approval rules nobody can satisfy, or that only a token claiming an unknown group can,
    /// as one-line warnings naming the entry's line, the action key and the rule (counted from
    /// 1, as `countersign policy explain` counts them). A policy with
    /// warnings still loads: each is a likely mistake, not a contradiction (a token's `groups`
    /// claim may name groups the directory does not). `countersign verify` prints them.
    pub fn approval_warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        for entry in &self.entries {
            let line = if entry.line > 0 {
                format!("line {}: ", entry.line)
            } else {
                String::new()
            };
            let mut specs: Vec<(String, &ApprovalSpec)> = Vec::new();
            // An approval block that no `approve` decision can use is reported as that, not
            // judged as if it could open requests.
            let unused = |place: &str, decision: Decision| {
                format!(
                    "{place}: has an `approval:` block but decides `{}`: only an `approve` decision opens a request, so the block is never used; remove it, or make the decision `approve`",
                    decision.as_str()
                )
            };
            // A pattern entry's `allow` may be raised to `approve` ([`Raise`]): its approval
            // block can then be used, so it counts as an `approve` here.
            let approves = |decision: Decision| {
                decision == Decision::Approve || (decision == Decision::Allow && entry.is_pattern())
            };
            let decides_approve = match &entry.body {
                EntryBody::Shorthand(decision) => approves(*decision),
                EntryBody::Rules(rules) => rules
                    .iter()
                    .any(|rule| approves(rule.decision) && rule.approval.is_none()),
            };
            if let Some(spec) = &entry.approval {
                let place = format!("{line}`{}`", entry.key);
                if decides_approve {
                    specs.push((place, spec));
                } else if let EntryBody::Shorthand(decision) = &entry.body {
                    warnings.push(unused(&place, *decision));
                } else {
                    warnings.push(format!(
                        "{place}: has an `approval:` block but none of its rules that decide `approve` uses it (each has its own, or none decides `approve`): the block is never used; remove it"
                    ));
                }
            }
            if let EntryBody::Rules(rules) = &entry.body {
                for (index, rule) in rules.iter().enumerate() {
                    if let Some(spec) = &rule.approval {
                        let place = format!("{line}`{}` rule {}", entry.key, index + 1);
                        if approves(rule.decision) {
                            specs.push((place, spec));
                        } else {
                            warnings.push(unused(&place, rule.decision));
                        }
                    }
                }
            }
            for (place, spec) in specs {
                if let Some(warning) = self.nobody_can_answer(&place, spec) {
                    // It says all the others would (a group nobody is in, a quorum no one can
                    // meet), and they would read as if someone could answer.
                    warnings.push(warning);
                    continue;
                }
                self.warn_about(&place, spec, &mut warnings);
            }
        }
        warnings
    }

    /// Issue #31: the warning for an approval whose approvers can match nobody configured,
    /// so that every request it opens would silently expire; `None` when someone can answer.
    ///
    /// A pattern can be matched when: it names an identity or a wildcard (anyone may assert a
    /// name) and the rule does not `require: authenticated`, or a key is configured to verify
    /// that identity's token; it is `group:G` and someone in `directory` is in `G` (and the
    /// rule does not `require: authenticated`, or a key is configured), or a key is
    /// configured (a token's `groups` claim can name `G`). No patterns means the default
    /// (anyone but the requester). `require: authenticated` with no key is left to its own
    /// warning, which says that only the approval service's OIDC or proxy sign-in can answer
    /// (that sign-in is not part of the policy, so this cannot say nobody can).
    fn nobody_can_answer(&self, place: &str, spec: &ApprovalSpec) -> Option<String> {
        // Under `require: authenticated` with no key, the approval service's own sign-in (OIDC
        // or a proxy) can still answer: the `require: authenticated` warning says so instead.
        if spec.approvers.is_empty()
            || (spec.require == Requirement::Authenticated && self.keys.is_empty())
        {
            return None;
        }
        let has_key = !self.keys.is_empty();
        let authenticated = spec.require == Requirement::Authenticated;
        let someone = spec
            .approvers
            .iter()
            .any(|pattern| match pattern.strip_prefix("group:") {
                Some(group) => {
                    let in_directory = self.directory.values().any(|groups| {
                        groups
                            .iter()
                            .any(|member_of| group.contains('*') || member_of == group)
                    });
                    has_key || (in_directory && !authenticated)
                }
                None => has_key || !authenticated,
            });
        if someone {
            return None;
        }
        Some(format!(
            "{place}: nobody can answer: its approvers ({}) match no directory member and no key is configured{}: every request it opens will expire unanswered; add approvers to `directory`, or a key under `approvers.keys` (`countersign keygen`)",
            spec.approvers.join(", "),
            if authenticated {
                " to verify the authenticated approver it requires"
            } else {
                ""
            }
        ))
    }

    fn warn_about(&self, place: &str, spec: &ApprovalSpec, warnings: &mut Vec<String>) {
        let named_only = spec
            .approvers
            .iter()
            .all(|pattern| !pattern.contains('*') && !pattern.starts_with("group:"));
        if named_only && spec.quorum as usize > spec.approvers.len() {
            warnings.push(format!(
                "{place}: `quorum: {}` but only {} approver(s) are named: no request can ever be granted; name more approvers or lower the quorum",
                spec.quorum,
                spec.approvers.len()
            ));
        }
        // Groups without a key: only the directory's members can answer a token-less surface,
        // so a quorum larger than the people it lists can never be met from it (a key's tokens,
        // or the approval service's sign-in, may carry `groups` claims naming more people).
        let wildcard = spec.approvers.iter().any(|pattern| pattern.contains('*'));
        if !named_only && !wildcard && self.keys.is_empty() {
            let mut people: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
            for pattern in &spec.approvers {
                match pattern.strip_prefix("group:") {
                    Some(group) => people.extend(
                        self.directory
                            .iter()
                            .filter(|(_, groups)| groups.iter().any(|member_of| member_of == group))
                            .map(|(principal, _)| principal.as_str()),
                    ),
                    None => {
                        people.insert(pattern.as_str());
                    }
                }
            }
            // No one at all is the "nobody can answer" warning's case.
            if !people.is_empty() && spec.quorum as usize > people.len() {
                warnings.push(format!(
                    "{place}: `quorum: {}` but only {} approver(s) can answer ({}: the named approvers and the members `directory` lists in its groups): no request can be granted unless an approver's sign-in carries a `groups` claim; add members to `directory`, or lower the quorum",
                    spec.quorum,
                    people.len(),
                    people.iter().copied().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        if spec.require == Requirement::Authenticated && self.keys.is_empty() {
            warnings.push(format!(
                "{place}: `require: authenticated` but `approvers.keys` lists no key: no approver token can verify, so only the approval service's OIDC or proxy sign-in can answer; add a key with `countersign keygen`"
            ));
        }
        for pattern in &spec.approvers {
            if let Some(group) = pattern.strip_prefix("group:")
                && !group.contains('*')
                && !self
                    .directory
                    .values()
                    .any(|groups| groups.iter().any(|member_of| member_of == group))
            {
                warnings.push(format!(
                    "{place}: nobody in `directory` is in group `{group}`: only a sign-in whose `groups` claim names it (a verified approver token, or the approval service's OIDC or proxy sign-in) can approve; check the spelling"
                ));
            }
        }
    }

    /// Decide `action` against its canonical `arguments` (a JSON object). Pure, no I/O.
    ///
    /// Ignores [`Policy::mode`]: observe mode is applied by the caller.
    ///
    /// # Panics
    /// Never.
    pub fn decide(&self, action: &str, arguments: &Value) -> PolicyDecision<'_> {
        let Some(entry) = self.entry(action) else {
            return PolicyDecision {
                decision: Decision::Deny,
                reason: DecisionReason::UnknownAction,
                entry: None,
            };
        };
        let (decision, reason) = entry.decide(arguments);
        PolicyDecision {
            decision,
            reason,
            entry: Some(entry),
        }
    }

    /// The entry that governs `action`: the exact name if listed, else the pattern with the
    /// longest matching prefix, else `None`.
    pub fn entry(&self, action: &str) -> Option<&ActionEntry> {
        if let Some(&index) = self.exact.get(action) {
            return self.entries.get(index);
        }
        self.patterns
            .iter()
            .find(|(prefix, _)| action.starts_with(prefix.as_str()))
            .and_then(|&(_, index)| self.entries.get(index))
    }

    /// Could `principal` ever run `action`: is there any arguments for which the policy allows
    /// it, or asks for an approval that someone other than `principal` could give? Pure, no
    /// I/O; ignores [`Policy::mode`] (observe mode enforces nothing, so the caller decides).
    ///
    /// `false` means provably never, so a surface may hide the action from `principal` (the
    /// MCP gateway's per-principal `tools/list`, issue #27); `true` may still be refused for
    /// every concrete call (conditions are not solved). An `approve` can never be given when
    /// its approvers are all named identities and, leaving out `principal` (who may never
    /// approve itself), fewer remain than its `quorum`; or when it has
    /// `distinct_from_requester` and every approver pattern is a group `principal` belongs to
    /// in the `directory` (an approver entitled only by that group shares it, and is refused
    /// `self_approval`). No entry (`unknown_action`) is never. A rule that
    /// [`Policy::approval_warnings`] says nobody *the policy configures* can answer still
    /// counts as possible: the approval service's OIDC or proxy sign-in is outside the policy.
    pub fn could_permit(&self, action: &str, principal: &str) -> bool {
        let Some(entry) = self.entry(action) else {
            return false;
        };
        let approvable =
            |spec: Option<&ApprovalSpec>| spec.is_none_or(|spec| self.approvable(spec, principal));
        match &entry.body {
            EntryBody::Shorthand(Decision::Allow) => true,
            EntryBody::Shorthand(Decision::Deny) => false,
            EntryBody::Shorthand(Decision::Approve) => approvable(entry.approval.as_ref()),
            EntryBody::Rules(rules) => rules.iter().any(|rule| match rule.decision {
                Decision::Allow => true,
                Decision::Deny => false,
                Decision::Approve => approvable(rule.approval.as_ref().or(entry.approval.as_ref())),
            }),
        }
    }

    /// Can anyone but `principal` ever grant under `spec`? See [`Policy::could_permit`].
    fn approvable(&self, spec: &ApprovalSpec, principal: &str) -> bool {
        let named_only = !spec.approvers.is_empty()
            && spec
                .approvers
                .iter()
                .all(|pattern| !pattern.contains('*') && !pattern.starts_with("group:"));
        if named_only {
            let mut others: Vec<&String> = spec
                .approvers
                .iter()
                .filter(|name| name.as_str() != principal)
                .collect();
            others.sort();
            others.dedup();
            if others.len() < spec.quorum as usize {
                return false;
            }
        }
        if spec.distinct_from_requester {
            let own_groups = self.directory.get(principal);
            let only_own_groups = !spec.approvers.is_empty()
                && spec.approvers.iter().all(|pattern| {
                    pattern.strip_prefix("group:").is_some_and(|group| {
                        !group.contains('*')
                            && own_groups.is_some_and(|groups| groups.iter().any(|g| g == group))
                    })
                });
            if only_own_groups {
                return false;
            }
        }
        true
    }

    /// The action keys as written (names and patterns), in file order.
    pub fn action_keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|entry| entry.key.as_str())
    }
}

fn with_file(mut error: LoadError, source: Option<&Path>) -> LoadError {
    error.file = source.map(Path::to_path_buf);
    error
}

/// Whether the kernel enforces decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Decisions are enforced (the default).
    #[default]
    Enforce,
    /// Every decision is computed and recorded; nothing is denied or held for approval.
    Observe,
}

impl Mode {
    /// `enforce` or `observe`, as written in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Observe => "observe",
        }
    }
}

/// What the policy says about one action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Run it.
    Allow,
    /// Run it only after a human approves this exact action.
    Approve,
    /// Refuse it.
    Deny,
}

impl Decision {
    /// `allow`, `approve` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Approve => "approve",
            Decision::Deny => "deny",
        }
    }
}

/// Why a caller asks the kernel to raise a pattern entry's `allow` to `approve`: a fact about
/// the tool from outside the policy that may only ever tighten a decision (issue #27). Given
/// with [`crate::ActionRequest::with_raise`]; recorded on the attempt's receipt as
/// `raised_by` ([`Raise::as_str`]). It never changes an exact entry, a `deny` or an `approve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Raise {
    /// The MCP tool does not say it is harmless: its `destructiveHint` annotation is `true`, or
    /// absent (MCP's default is `true`) while `readOnlyHint` is not `true`.
    DestructiveHint,
}

impl Raise {
    /// The receipt's `raised_by` text: `destructiveHint` (the annotation's own name).
    pub fn as_str(self) -> &'static str {
        match self {
            Raise::DestructiveHint => "destructiveHint",
        }
    }
}

/// Why the policy decided as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionReason {
    /// No action key matches the name: denied.
    UnknownAction,
    /// The entry has rules and none matched: denied.
    NoMatchingRule,
    /// The rule at `index` (0-based, in file order) matched.
    Rule {
        /// 0-based index into the entry's `rules`.
        index: usize,
    },
    /// The entry's `decision` shorthand applied.
    Shorthand,
}

impl DecisionReason {
    /// A stable code: `unknown_action`, `no_matching_rule`, `rule` or `action_default`.
    pub fn code(self) -> &'static str {
        match self {
            DecisionReason::UnknownAction => "unknown_action",
            DecisionReason::NoMatchingRule => "no_matching_rule",
            DecisionReason::Rule { .. } => "rule",
            DecisionReason::Shorthand => "action_default",
        }
    }
}

/// The result of [`Policy::decide`].
#[derive(Debug, Clone, Copy)]
pub struct PolicyDecision<'p> {
    /// The decision.
    pub decision: Decision,
    /// Why.
    pub reason: DecisionReason,
    /// The governing entry; `None` exactly when the reason is `UnknownAction`.
    pub entry: Option<&'p ActionEntry>,
}

impl PolicyDecision<'_> {
    /// The `approval` block that governs an `approve` decision: the matching rule's, else the
    /// entry's, else none (the default rule).
    pub fn approval(&self) -> Option<&ApprovalSpec> {
        let entry = self.entry?;
        let from_rule = match (&entry.body, self.reason) {
            (EntryBody::Rules(rules), DecisionReason::Rule { index }) => {
                rules.get(index).and_then(|rule| rule.approval.as_ref())
            }
            _ => None,
        };
        from_rule.or(entry.approval.as_ref())
    }

    /// The approval TTL this decision sets: the governing `approval` block's `ttl`, else the
    /// entry's `approval_ttl`; `None` means the policy-wide TTL.
    pub fn approval_ttl(&self) -> Option<Duration> {
        self.approval()
            .and_then(|spec| spec.ttl)
            .or_else(|| self.entry.and_then(ActionEntry::approval_ttl))
    }
}

/// An `approval` block, of an entry or of a rule: who may approve, how many must, and what
/// identity is required (docs/policy.md, "Who may approve").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalSpec {
    /// Entitlement patterns (`human:alice`, `human:*`, `group:finance`, `*`); default `["*"]`.
    pub approvers: Vec<String>,
    /// Distinct approvals needed, 1 to 100; default 1.
    pub quorum: u32,
    /// Refuse approvers sharing a group with the requesting principal; default false.
    pub distinct_from_requester: bool,
    /// `asserted` (default) or `authenticated`.
    pub require: Requirement,
    /// `ttl`: this block's approval TTL (the alias of `approval_ttl`).
    pub ttl: Option<Duration>,
}

/// One entry under `actions`: an action name or pattern with its decision or rules.
#[derive(Debug, Clone)]
pub struct ActionEntry {
    key: String,
    body: EntryBody,
    effect: Option<Template>,
    resource: Option<Template>,
    approval_ttl: Option<Duration>,
    approval: Option<ApprovalSpec>,
    resolvers: Option<Vec<String>>,
    secret_arguments: Vec<String>,
    not_executed_on_error: bool,
    fingerprint: String,
    /// The 1-based line of the entry's key in the policy file (0 when not known).
    line: usize,
}

#[derive(Debug, Clone)]
enum EntryBody {
    Shorthand(Decision),
    Rules(Vec<Rule>),
}

#[derive(Debug, Clone)]
struct Rule {
    /// Empty for a rule without `when` (it always matches).
    conditions: Vec<Condition>,
    decision: Decision,
    /// This rule's own `approval` block, which replaces the entry's for calls it decides.
    approval: Option<ApprovalSpec>,
}

impl ActionEntry {
    /// The key as written, such as `stripe.refund` or `mcp.files.read_*`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The effect-key template, if any.
    pub fn effect(&self) -> Option<&Template> {
        self.effect.as_ref()
    }

    /// The resource template, if any.
    pub fn resource(&self) -> Option<&Template> {
        self.resource.as_ref()
    }

    /// This entry's own approval TTL (whole seconds; `approval_ttl` or `approval.ttl`),
    /// overriding [`Policy::approval_ttl`].
    pub fn approval_ttl(&self) -> Option<Duration> {
        self.approval_ttl
    }

    /// This entry's `approval` block, if it has one.
    pub fn approval(&self) -> Option<&ApprovalSpec> {
        self.approval.as_ref()
    }

    /// This entry's `resolvers`, if it lists them (otherwise its approvers resolve).
    pub fn resolvers(&self) -> Option<&[String]> {
        self.resolvers.as_deref()
    }

    /// Top-level argument names that are credentials or volatile: the kernel leaves them out
    /// of the action hash and redacts them in evidence. No template or condition reads them.
    pub fn secret_arguments(&self) -> &[String] {
        &self.secret_arguments
    }

    /// The entry's `mcp: { not_executed_on_error: true }` option (default false): an MCP tool
    /// result with `isError: true`, or a JSON-RPC error reply whose id matches the request,
    /// proves the call had no effect, so the MCP gateway records it `failed` (retry allowed)
    /// rather than `ambiguous`. Only set it for tools whose errors are known to be definite.
    pub fn not_executed_on_error(&self) -> bool {
        self.not_executed_on_error
    }

    /// Is this a pattern entry (a key ending in `*`, such as `mcp.files.read_*` or `*`) rather
    /// than an exact action name? Only a pattern's `allow` may be raised ([`Raise`]).
    pub fn is_pattern(&self) -> bool {
        self.key.ends_with('*')
    }

    /// Can this entry ever give `allow` or `approve`? False for `decision: deny` and for rules
    /// that all deny. The MCP gateway hides tools whose entry can never permit a call.
    pub fn can_permit(&self) -> bool {
        match &self.body {
            EntryBody::Shorthand(decision) => *decision != Decision::Deny,
            EntryBody::Rules(rules) => rules.iter().any(|rule| rule.decision != Decision::Deny),
        }
    }

    /// `sha256:` plus 64 lowercase hex digits over the canonical JSON of this entry as parsed
    /// (key, decision or rules, templates, TTL, secrets, `mcp` options when set). It changes exactly when this entry
    /// changes, so an approval bound to it is void after an edit to this action's rules and
    /// survives edits to other actions (case B05).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    fn decide(&self, arguments: &Value) -> (Decision, DecisionReason) {
        match &self.body {
            EntryBody::Shorthand(decision) => (*decision, DecisionReason::Shorthand),
            EntryBody::Rules(rules) => rules
                .iter()
                .position(|rule| rule.conditions.iter().all(|c| c.holds(arguments)))
                .and_then(|index| rules.get(index).map(|rule| (rule.decision, index)))
                .map_or(
                    (Decision::Deny, DecisionReason::NoMatchingRule),
                    |(d, index)| (d, DecisionReason::Rule { index }),
                ),
        }
    }
}
