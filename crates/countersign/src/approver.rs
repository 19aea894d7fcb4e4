//! Approvers: who is answering, how we know, and whether they may.
//!
//! Every approval surface — the CLI, the approval service, Slack, a webhook, an adapter's
//! interrupt, the gateway's elicitation — hands the kernel one closed answer: `approve` or
//! `deny` for one request id, with a [`Credential`] saying who answers and the [`Channel`] it
//! came through. The kernel turns the credential into an [`Approver`] and judges it against the
//! [`ApprovalRule`] stored with the request when it was opened — never against the policy file
//! of whoever happens to be answering (a policy edit after the request changes nothing for it).
//!
//! Identity never comes from model output, tool arguments, run state, a checkpoint or a resume
//! payload's text: a surface passes what the *operator's application* knows about the person
//! (a signed approver token, or a bare name, which is only ever [`Authentication::Asserted`]).
//!
//! The rules, in the order [`judge`] applies them (docs/policy.md, "Who may approve"):
//!
//! 1. the principal that asked never answers its own request (`self_approval`), whatever the
//!    rule says;
//! 2. `require: authenticated` refuses an asserted identity (`not_authenticated`);
//! 3. the approver must be entitled: one of the rule's `approvers` patterns matches their id, or
//!    a `group:` pattern matches one of their groups (`*` at the end matches any suffix, as in
//!    action keys) (`not_entitled`);
//! 4. with `distinct_from_requester: true`, nobody sharing a group with the requesting
//!    principal answers (`self_approval`).
//!
//! Groups: an authenticated identity's groups are its verified token's `groups` claim plus its
//! directory entry; an asserted identity gets groups only from the directory (so typing a group
//! name grants nothing).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The channel an answer came through. Serialized as its [`Channel::as_str`] text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Channel {
    /// `countersign approve` / `deny` / `resolve`.
    Cli,
    /// The approval service (`countersign serve`): web inbox or JSON API.
    Service,
    /// Slack interactivity.
    Slack,
    /// An adapter's interrupt, with the framework's name (`interrupt:langgraph`).
    Interrupt(String),
    /// The MCP gateway's elicitation (only from an attested client).
    Elicitation,
    /// The programmatic API (`Control::answer`, the Python binding).
    Api,
}

impl Channel {
    /// `cli`, `service`, `slack`, `interrupt:<framework>`, `elicitation` or `api`.
    pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Channel::Cli => "cli".into(),
            Channel::Service => "service".into(),
            Channel::Slack => "slack".into(),
            Channel::Interrupt(framework) => format!("interrupt:{framework}").into(),
            Channel::Elicitation => "elicitation".into(),
            Channel::Api => "api".into(),
        }
    }

    /// Parse the text [`Channel::as_str`] writes.
    pub fn parse(text: &str) -> Option<Channel> {
        Some(match text {
            "cli" => Channel::Cli,
            "service" => Channel::Service,
            "slack" => Channel::Slack,
            "elicitation" => Channel::Elicitation,
            "api" => Channel::Api,
            other => Channel::Interrupt(other.strip_prefix("interrupt:")?.to_owned()),
        })
    }

    /// Must an answer through this channel echo the action hash the person was shown? True for
    /// every surface that renders the action itself (the service, Slack, an interrupt's pause
    /// payload, elicitation). The programmatic API may leave it out, and so may the CLI, whose
    /// `approve ID` names a request the operator read with `pending` (`--hash` pins it); the
    /// answer receipt then records `hash_confirmed: false`.
    pub fn requires_hash_echo(&self) -> bool {
        !matches!(self, Channel::Api | Channel::Cli)
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl Serialize for Channel {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.as_str())
    }
}

impl<'de> Deserialize<'de> for Channel {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Channel::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown channel `{text}`")))
    }
}

/// How an approver's identity was established.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Authentication {
    /// A name typed or passed by the surface, unverified (`--as alice`). For local use.
    Asserted,
    /// An approver token (Ed25519-signed JWT) verified against the policy's `approvers.keys`.
    Token,
    /// An OpenID Connect ID token verified by the approval service.
    Oidc,
    /// A Slack request whose signature the service verified.
    SlackSignature,
    /// An identity header set by an authenticating proxy the operator trusts.
    ProxyHeader,
}

impl Authentication {
    /// The stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Authentication::Asserted => "asserted",
            Authentication::Token => "token",
            Authentication::Oidc => "oidc",
            Authentication::SlackSignature => "slack_signature",
            Authentication::ProxyHeader => "proxy_header",
        }
    }

    /// Anything but [`Authentication::Asserted`].
    pub fn is_authenticated(self) -> bool {
        self != Authentication::Asserted
    }
}

/// The identity behind one answer, as the kernel judges it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approver {
    /// Who, for example `human:alice` (a token's `sub`), of the one shape [`ApproverId`].
    pub id: ApproverId,
    /// Group names (without the `group:` prefix), sorted and unique: the ones the rule may
    /// match against.
    pub groups: Vec<String>,
    /// Where the answer came from.
    pub channel: Channel,
    /// How the identity was established.
    pub authentication: Authentication,
}

impl Approver {
    /// Does any of the rule's entitlement patterns match this approver? A `group:` pattern
    /// matches only the approver's groups (`group:fin*` matches group `finance`); any other
    /// pattern matches only their id. An identity *named* `group:finance` is therefore in no
    /// group: a name never stands for a group.
    pub fn matches_any(&self, patterns: &[String]) -> bool {
        patterns
            .iter()
            .any(|pattern| match pattern.strip_prefix("group:") {
                Some(group_pattern) => self
                    .groups
                    .iter()
                    .any(|group| matches_pattern(group_pattern, group)),
                None => matches_pattern(pattern, self.id.as_str()),
            })
    }
}

mod id;

pub use id::{ApproverId, ApproverIdError};

/// Who answers, as a surface hands it to the kernel. The kernel turns it into an [`Approver`].
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// A bare name, unverified: [`Authentication::Asserted`]. Gets groups only from the
    /// directory.
    Asserted(String),
    /// An approver token (compact JWS), verified by [`crate::token::verify`] against the keys
    /// stored with the request's rule. Never logged.
    Token(String),
    /// An identity the surface itself authenticated before handing the answer over (for
    /// example the approval service, behind an authenticating proxy whose identity header it
    /// accepted only together with the proxy's shared secret). The surface vouches for `id` and
    /// `groups`; the kernel still judges them against the request's stored rule, adding the
    /// rule's directory groups. With [`Authentication::Asserted`] it is treated exactly as
    /// [`Credential::Asserted`] (claimed groups ignored). Only for surfaces the operator runs:
    /// never built from model output, tool arguments or run state.
    Verified {
        /// Who, for example `human:alice`. An empty id is an anonymous answer (`no_approver`).
        id: String,
        /// Groups the surface verified (without the `group:` prefix).
        groups: Vec<String>,
        /// How the surface authenticated the person (for example
        /// [`Authentication::ProxyHeader`]).
        authentication: Authentication,
    },
    /// An answer from a source that cannot vouch for anyone (for example an MCP client the
    /// operator did not attest). It is recorded as a refused answer (`not_authenticated`,
    /// with `reason`) and changes nothing.
    Unverified {
        /// Where it came from, for the refusal receipt (for example `mcp client "cursor"`).
        source: String,
        /// Why it cannot count, and what to do instead.
        reason: String,
    },
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::Asserted(name) => f.debug_tuple("Asserted").field(name).finish(),
            // A token is a bearer secret: never printed.
            Credential::Token(_) => f.write_str("Token([hidden])"),
            Credential::Verified {
                id,
                groups,
                authentication,
            } => f
                .debug_struct("Verified")
                .field("id", id)
                .field("groups", groups)
                .field("authentication", authentication)
                .finish(),
            Credential::Unverified { source, reason } => f
                .debug_struct("Unverified")
                .field("source", source)
                .field("reason", reason)
                .finish(),
        }
    }
}

impl From<&str> for Credential {
    fn from(name: &str) -> Credential {
        Credential::Asserted(name.to_owned())
    }
}

impl From<String> for Credential {
    fn from(name: String) -> Credential {
        Credential::Asserted(name)
    }
}

/// What identity `approval.require` demands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Requirement {
    /// Any identity, asserted ones included (the default, for local use).
    #[default]
    Asserted,
    /// Only an authenticated identity (a verified token, OIDC, a Slack signature, a proxy
    /// header): `--as NAME` is refused.
    Authenticated,
}

impl Requirement {
    /// `asserted` or `authenticated`, as written in the policy.
    pub fn as_str(self) -> &'static str {
        match self {
            Requirement::Asserted => "asserted",
            Requirement::Authenticated => "authenticated",
        }
    }
}

/// The approval rule a request is judged by, stored with it when it is opened.
///
/// Built from the governing policy entry's (or rule's) `approval:` block, the policy's
/// `directory:` and `approvers.keys`, and the requesting principal's groups at that moment.
/// Stored as canonical JSON; a request stored before rules existed reads as
/// [`ApprovalRule::default`] (anyone but the requester, one answer, asserted allowed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRule {
    /// Entitlement patterns: an id (`human:alice`), a pattern (`human:*`, `*`) or a group
    /// (`group:finance`, `group:fin*`).
    pub approvers: Vec<String>,
    /// How many distinct entitled approvers must say yes (at least 1).
    pub quorum: u32,
    /// Refuse approvers who share a group with the requesting principal.
    pub distinct_from_requester: bool,
    /// The identity required.
    pub require: Requirement,
    /// Who may resolve an ambiguous effect of this action; `None`: the `approvers`.
    pub resolvers: Option<Vec<String>>,
    /// The requesting principal's groups when the request was opened (from the directory).
    pub requester_groups: Vec<String>,
    /// The policy's directory (id → groups) when the request was opened.
    pub directory: BTreeMap<String, Vec<String>>,
    /// The public keys (inline `ed25519:` form) that may sign approver tokens for it.
    pub keys: Vec<String>,
}

impl Default for ApprovalRule {
    fn default() -> ApprovalRule {
        ApprovalRule {
            approvers: vec!["*".to_owned()],
            quorum: 1,
            distinct_from_requester: false,
            require: Requirement::Asserted,
            resolvers: None,
            requester_groups: Vec::new(),
            directory: BTreeMap::new(),
            keys: Vec::new(),
        }
    }
}

impl ApprovalRule {
    /// The patterns that may resolve an ambiguous effect: `resolvers`, else `approvers`.
    pub fn resolver_patterns(&self) -> &[String] {
        self.resolvers.as_deref().unwrap_or(&self.approvers)
    }

    /// Who may resolve, in one line for people: `anyone but the requester` when a resolver
    /// pattern is `*`, else the patterns, comma-separated (`group:sre, human:alice`).
    pub fn resolver_summary(&self) -> String {
        let patterns = self.resolver_patterns();
        if patterns.iter().any(|pattern| pattern == "*") {
            "anyone but the requester".to_owned()
        } else {
            patterns.join(", ")
        }
    }

    /// A one-line summary for listings: `group:finance (2 of them), authenticated`.
    pub fn summary(&self) -> String {
        let mut text = if self.approvers.iter().any(|pattern| pattern == "*") {
            "anyone but the requester".to_owned()
        } else {
            self.approvers.join(", ")
        };
        if self.quorum > 1 {
            text.push_str(&format!(" ({} of them)", self.quorum));
        }
        if self.require == Requirement::Authenticated {
            text.push_str(", authenticated");
        }
        if self.distinct_from_requester {
            text.push_str(", not the requester's groups");
        }
        text
    }

    /// The approver an identity becomes under this rule: groups from the verified claim (if
    /// any) plus the directory entry, sorted and unique. An asserted identity's claimed groups
    /// are ignored.
    pub fn approver(
        &self,
        id: &ApproverId,
        claimed_groups: &[String],
        channel: Channel,
        authentication: Authentication,
    ) -> Approver {
        let mut groups: Vec<String> = self.directory.get(id.as_str()).cloned().unwrap_or_default();
        if authentication.is_authenticated() {
            groups.extend(claimed_groups.iter().cloned());
        }
        groups.sort();
        groups.dedup();
        Approver {
            id: id.clone(),
            groups,
            channel,
            authentication,
        }
    }
}

/// Why an approver may not answer (or resolve).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ineligible {
    /// The rule requires an authenticated identity and this one is asserted.
    NotAuthenticated,
    /// No entitlement pattern matches the approver.
    NotEntitled,
    /// The approver is the requesting principal, or shares a group with it under
    /// `distinct_from_requester: true`.
    SelfApproval {
        /// The shared group, when that was the reason.
        shared_group: Option<String>,
    },
}

impl Ineligible {
    /// The stable reason code: `not_authenticated`, `not_entitled` or `self_approval`.
    pub fn reason(&self) -> &'static str {
        match self {
            Ineligible::NotAuthenticated => "not_authenticated",
            Ineligible::NotEntitled => "not_entitled",
            Ineligible::SelfApproval { .. } => "self_approval",
        }
    }
}

/// May `approver` answer a request by `principal` under `rule`? Pure; the order is the module
/// docs' (the requester itself, authentication, entitlement, the requester's groups).
pub fn judge(rule: &ApprovalRule, principal: &str, approver: &Approver) -> Result<(), Ineligible> {
    judge_against(rule, &rule.approvers, principal, approver)
}

/// May `approver` resolve an ambiguous effect governed by `rule`? As [`judge`], against
/// [`ApprovalRule::resolver_patterns`].
pub fn judge_resolver(
    rule: &ApprovalRule,
    principal: &str,
    approver: &Approver,
) -> Result<(), Ineligible> {
    judge_against(rule, rule.resolver_patterns(), principal, approver)
}

fn judge_against(
    rule: &ApprovalRule,
    patterns: &[String],
    principal: &str,
    approver: &Approver,
) -> Result<(), Ineligible> {
    // The same person whatever the ASCII case (`agent:BOT` is `agent:bot`, [`ApproverId`]).
    if approver.id.is(principal) {
        return Err(Ineligible::SelfApproval { shared_group: None });
    }
    if rule.require == Requirement::Authenticated && !approver.authentication.is_authenticated() {
        return Err(Ineligible::NotAuthenticated);
    }
    if !approver.matches_any(patterns) {
        return Err(Ineligible::NotEntitled);
    }
    if rule.distinct_from_requester
        && let Some(shared) = approver
            .groups
            .iter()
            .find(|group| rule.requester_groups.contains(group))
    {
        return Err(Ineligible::SelfApproval {
            shared_group: Some(shared.clone()),
        });
    }
    Ok(())
}

/// Whether `name` matches the action key `pattern`.
///
/// A pattern with one `*`, at its end, matches every name that starts with the text before
/// the `*` (`*` alone matches every name, `read_*` matches `read_` itself); any other key
/// matches only the identical name.
pub fn matches_pattern(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) if !prefix.contains('*') => name.starts_with(prefix),
        _ => pattern == name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(approvers: &[&str]) -> ApprovalRule {
        ApprovalRule {
            approvers: approvers.iter().map(|text| (*text).to_owned()).collect(),
            ..ApprovalRule::default()
        }
    }

    fn asserted(rule: &ApprovalRule, id: &str) -> Approver {
        rule.approver(
            &ApproverId::parse(id).expect("an approver id"),
            &[],
            Channel::Cli,
            Authentication::Asserted,
        )
    }

    #[test]
    fn a_group_pattern_entitles_members_from_the_directory() {
        let mut rule = rule(&["group:finance"]);
        rule.directory
            .insert("human:alice".to_owned(), vec!["finance".to_owned()]);
        assert_eq!(
            judge(&rule, "agent:bot", &asserted(&rule, "human:alice")),
            Ok(())
        );
        assert_eq!(
            judge(&rule, "agent:bot", &asserted(&rule, "human:mallory")),
            Err(Ineligible::NotEntitled)
        );
    }

    #[test]
    fn an_asserted_identity_gets_no_groups_from_its_claim() {
        let rule = rule(&["group:finance"]);
        let approver = rule.approver(
            &ApproverId::parse("human:mallory").expect("an approver id"),
            &["finance".to_owned()],
            Channel::Cli,
            Authentication::Asserted,
        );
        assert!(approver.groups.is_empty());
        assert_eq!(
            judge(&rule, "agent:bot", &approver),
            Err(Ineligible::NotEntitled)
        );
        let verified = rule.approver(
            &ApproverId::parse("human:carol").expect("an approver id"),
            &["finance".to_owned()],
            Channel::Cli,
            Authentication::Token,
        );
        assert_eq!(judge(&rule, "agent:bot", &verified), Ok(()));
    }

    #[test]
    fn a_name_that_looks_like_a_group_is_in_no_group() {
        let rule = rule(&["group:finance"]);
        assert_eq!(
            judge(&rule, "agent:bot", &asserted(&rule, "group:finance")),
            Err(Ineligible::NotEntitled)
        );
        let mut patterned = super::ApprovalRule {
            approvers: vec!["group:fin*".to_owned()],
            ..ApprovalRule::default()
        };
        patterned
            .directory
            .insert("human:alice".to_owned(), vec!["finance".to_owned()]);
        assert_eq!(
            judge(
                &patterned,
                "agent:bot",
                &asserted(&patterned, "human:alice")
            ),
            Ok(())
        );
    }

    #[test]
    fn id_patterns_match_like_action_keys() {
        let rule = rule(&["human:*"]);
        assert_eq!(
            judge(&rule, "agent:bot", &asserted(&rule, "human:bob")),
            Ok(())
        );
        assert_eq!(
            judge(&rule, "agent:bot", &asserted(&rule, "agent:other")),
            Err(Ineligible::NotEntitled)
        );
    }

    #[test]
    fn refuses_asserted_identities_when_authentication_is_required() {
        let mut rule = rule(&["*"]);
        rule.require = Requirement::Authenticated;
        assert_eq!(
            judge(&rule, "agent:bot", &asserted(&rule, "human:bob")),
            Err(Ineligible::NotAuthenticated)
        );
        let verified = rule.approver(
            &ApproverId::parse("human:bob").expect("an approver id"),
            &[],
            Channel::Cli,
            Authentication::Token,
        );
        assert_eq!(judge(&rule, "agent:bot", &verified), Ok(()));
    }

    #[test]
    fn refuses_the_requester_and_its_group_when_distinct() {
        let mut rule = rule(&["*"]);
        // The requester in any ASCII case (found by a first-time user: `agent:BOT` approved
        // `agent:bot`'s own call).
        for requester in ["agent:bot", "agent:BOT", "Agent:Bot"] {
            assert_eq!(
                judge(&rule, "agent:bot", &asserted(&rule, requester)),
                Err(Ineligible::SelfApproval { shared_group: None }),
                "{requester}"
            );
        }
        rule.distinct_from_requester = true;
        rule.requester_groups = vec!["support".to_owned()];
        rule.directory
            .insert("human:sam".to_owned(), vec!["support".to_owned()]);
        assert_eq!(
            judge(&rule, "agent:bot", &asserted(&rule, "human:sam")),
            Err(Ineligible::SelfApproval {
                shared_group: Some("support".to_owned())
            })
        );
        assert_eq!(
            judge(&rule, "agent:bot", &asserted(&rule, "human:alice")),
            Ok(())
        );
    }

    #[test]
    fn resolvers_default_to_the_approvers() {
        let mut rule = rule(&["group:finance"]);
        rule.directory
            .insert("human:alice".to_owned(), vec!["finance".to_owned()]);
        let alice = asserted(&rule, "human:alice");
        assert_eq!(judge_resolver(&rule, "agent:bot", &alice), Ok(()));
        rule.resolvers = Some(vec!["human:oncall".to_owned()]);
        assert_eq!(
            judge_resolver(&rule, "agent:bot", &alice),
            Err(Ineligible::NotEntitled)
        );
    }

    #[test]
    fn channels_round_trip_through_their_text() {
        for channel in [
            Channel::Cli,
            Channel::Service,
            Channel::Slack,
            Channel::Interrupt("langgraph".to_owned()),
            Channel::Elicitation,
            Channel::Api,
        ] {
            assert_eq!(Channel::parse(&channel.as_str()), Some(channel.clone()));
        }
        assert_eq!(Channel::parse("telepathy"), None);
    }

    #[test]
    fn a_token_credential_never_prints_its_secret() {
        let shown = format!("{:?}", Credential::Token("eyJsecret".to_owned()));
        assert!(!shown.contains("eyJ"), "{shown}");
    }
}
