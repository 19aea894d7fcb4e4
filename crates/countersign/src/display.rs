//! What an approver is shown: one rendering of an approval request for every surface.
//!
//! An approver's yes is only worth what they were shown (case B44). Every surface — the CLI's
//! `pending` and `inspect`, the gateway's elicitation message and its `approval_required` error,
//! an adapter's pause payload — renders a request through [`render`] (or [`render_pending`]),
//! and nothing else. The rendering:
//!
//! - shows the canonical arguments exactly as hashed: every value in full, never truncated or
//!   elided; an empty string is shown as empty and marked;
//! - never interprets a character a person could misread. Each of these is written as a
//!   `\u{…}` escape (lowercase hex, as Rust writes it) and listed as a [`Finding`] with its code
//!   point:
//!   - C0 and C1 controls (general category `Cc`), newlines and tabs included;
//!   - bidirectional formatting controls (UAX #9: U+061C, U+200E–U+200F, U+202A–U+202E,
//!     U+2066–U+2069);
//!   - every `Default_Ignorable_Code_Point` (UAX #44, `DerivedCoreProperties.txt`): zero-width
//!     characters, U+FEFF, fillers, variation selectors (U+FE00–U+FE0F, U+E0100–U+E01EF), tag
//!     characters (U+E0000–U+E007F) and the reserved rest of their blocks;
//!   - whitespace other than U+0020 (the `White_Space` property, UAX #44);
//!   - a span that is not in Normalization Form C (UAX #15): every code point of the span but a
//!     visible first one, so a decomposed `e` + U+0301 reads `e\u{301}`, never `é`;
//!   - in a token that mixes scripts (UTS #39 mixed-script detection over augmented script
//!     sets), the characters of a minority script that UTS #39 lists as confusable across
//!     scripts (a Cyrillic `а` in a Latin word reads `p\u{430}ypal`); the token is marked
//!     whatever its characters.
//!
//! A literal backslash is shown as itself, except one that would read as the start of an
//! escape (a backslash followed by `u{`), which is shown as `\u{5c}`. So [`unescape`] of any
//! shown text gives back the original exactly: nothing is dropped, added or reordered.
//!
//! The display is a pure function of the request (and of the optional agent context, shown in
//! a separate, labelled section): the same request renders the same on every surface. It is
//! never stored: receipts, evidence and the executor keep the raw canonical arguments.
//!
//! The rules' rationale is in `docs/SPEC.md` ("What an approver is shown").
//!
//! By concept: this file builds the display model; `text` escapes what is misreadable and
//! lists the findings ([`shown`]); `interrupt` is the chat-surface contract built on it
//! ([`interrupt_object`], [`parse_interrupt_response`], issue #17).

mod interrupt;
mod text;

pub use interrupt::{
    INTERRUPT_SCHEMA, InterruptAnswer, InterruptObject, InterruptResponse, MAX_RESPONSE_NOTE,
    ResponseTemplate, interrupt_object, parse_interrupt_response,
};
pub use text::{class_of, is_bidi_control, is_default_ignorable, shown, unescape};

use std::fmt::{self, Write as _};

use serde::Serialize;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::canonical_combining_class;
use unicode_script::{Script, UnicodeScript};
use unicode_security::MixedScript;

use crate::action::canonical;
use crate::approval::{ApprovalRecord, PendingApproval};
use crate::clock::Timestamp;

/// The `schema` of an [`ApprovalDisplay`].
pub const DISPLAY_SCHEMA: &str = "countersign.display/v1";

/// An approval request as a person is shown it: the display model every surface renders.
///
/// Serialized (for `--json`, a web page, Slack) as an object with these fields; every text a
/// person reads is a [`ShownText`] (escaped text plus findings). Plain text is
/// [`ApprovalDisplay::to_text`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalDisplay {
    /// Always [`DISPLAY_SCHEMA`].
    pub schema: &'static str,
    /// The request to answer (`apr_` plus 20 lowercase base-32 characters).
    pub request_id: String,
    /// The action name.
    pub action: ShownText,
    /// The canonical arguments, one entry per leaf value in canonical (RFC 8785) key order:
    /// together they are exactly the hashed arguments (secrets redacted by the kernel).
    pub arguments: Vec<ShownArgument>,
    /// The whole canonical JSON text of the arguments, exactly as hashed, escaped.
    pub canonical_arguments: ShownText,
    /// The principal asking.
    pub principal: ShownText,
    /// The resource, if the policy names one.
    pub resource: Option<ShownText>,
    /// The environment.
    pub environment: ShownText,
    /// The effect key, if any.
    pub effect_key: Option<ShownText>,
    /// The action hash the answer is bound to (`sha256:` plus 64 lowercase hex digits).
    pub action_hash: String,
    /// When the request expires (UTC, RFC 3339 with milliseconds).
    pub expires_at: Timestamp,
    /// Who may approve, in one line: the summary of the approval rule fixed at request time
    /// ([`crate::approver::ApprovalRule::summary`]), such as `group:finance (2 of them)`.
    /// Always set by [`render`] and [`render_pending`].
    pub who_may_approve: Option<ShownText>,
    /// What the agent said about why it wants the action: its own words, not checked and not
    /// part of the hashed action. Shown apart from the action and labelled as the agent's.
    pub agent_context: Option<ShownText>,
    /// How many findings there are in all (arguments, names and other fields): 0 means
    /// nothing needed marking.
    pub finding_count: usize,
}

/// One leaf of the canonical arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ShownArgument {
    /// Where the value is: a JSON Pointer (RFC 6901, `/to`, `/items/0/sku`; empty for the
    /// arguments themselves), escaped like any shown text.
    pub path: ShownText,
    /// The JSON type of the value.
    pub kind: ValueKind,
    /// The value: a string's characters (without quotes), or the canonical JSON text of any
    /// other value (`500`, `true`, `null`, `{}`, `[]`).
    pub value: ShownText,
}

/// The JSON type of a [`ShownArgument`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueKind {
    /// A string.
    String,
    /// A number, in canonical (ECMAScript) form.
    Number,
    /// `true` or `false`.
    Bool,
    /// `null`.
    Null,
    /// An object with no members (`{}`).
    EmptyObject,
    /// An array with no elements (`[]`).
    EmptyArray,
}

/// A text as shown to a person: the escaped text and what was marked in it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ShownText {
    /// The text with every marked code point written as `\u{…}` (lowercase hex); [`unescape`]
    /// gives back the original.
    pub text: String,
    /// What was marked, ordered by position.
    pub findings: Vec<Finding>,
}

/// One thing marked in a text.
///
/// Positions count Unicode scalar values (code points) of the **original** text, not bytes and
/// not positions in the escaped text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What it is.
    pub kind: FindingKind,
    /// The first code point marked (0-based).
    pub start: usize,
    /// One past the last code point marked (`start == end` only for [`FindingKind::Empty`]).
    pub end: usize,
    /// The code points concerned, as `U+XXXX` (at least four uppercase hex digits): every code
    /// point of `start..end`, except for [`FindingKind::MixedScript`], where only those of the
    /// token's minority scripts are listed.
    pub code_points: Vec<String>,
    /// More about it, when there is more: for [`FindingKind::NotNfc`] the span's NFC form
    /// (escaped), for [`FindingKind::MixedScript`] the scripts mixed (`Latin, Cyrillic`).
    pub note: Option<String>,
}

/// What a [`Finding`] marks. A code point in several classes is reported once, in the first
/// that applies in this order: control, bidi control, default ignorable, whitespace. Not-NFC
/// and mixed-script findings are about spans and may overlap those.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// The text is empty: there is nothing to see, and that is the value.
    Empty,
    /// A C0 or C1 control character (general category `Cc`: U+0000–U+001F, U+007F–U+009F).
    Control,
    /// A bidirectional formatting control (UAX #9): it can reorder what is read.
    BidiControl,
    /// A `Default_Ignorable_Code_Point` (UAX #44): normally rendered as nothing at all.
    DefaultIgnorable,
    /// Whitespace other than U+0020 (the `White_Space` property): it can pass for a space.
    Whitespace,
    /// A span not in Normalization Form C (UAX #15): it looks like its NFC form but is other
    /// code points (and hashes differently).
    NotNfc,
    /// A token (a run without whitespace, controls or ASCII punctuation) whose characters
    /// share no script (UTS #39 mixed-script detection): a look-alike may hide in it.
    MixedScript,
}

impl FindingKind {
    /// The stable snake_case name (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::Empty => "empty",
            FindingKind::Control => "control",
            FindingKind::BidiControl => "bidi_control",
            FindingKind::DefaultIgnorable => "default_ignorable",
            FindingKind::Whitespace => "whitespace",
            FindingKind::NotNfc => "not_nfc",
            FindingKind::MixedScript => "mixed_script",
        }
    }

    /// A few words for a person, as [`ApprovalDisplay::to_text`] lists it (`bidirectional
    /// control (can reorder what you read)`): for surfaces that show findings themselves.
    pub fn description(self) -> &'static str {
        self.describe()
    }

    /// A few words for a person.
    fn describe(self) -> &'static str {
        match self {
            FindingKind::Empty => "empty: the value is an empty string",
            FindingKind::Control => "control character",
            FindingKind::BidiControl => "bidirectional control (can reorder what you read)",
            FindingKind::DefaultIgnorable => "invisible character (default ignorable)",
            FindingKind::Whitespace => "whitespace other than a plain space",
            FindingKind::NotNfc => "not in NFC (looks like other characters)",
            FindingKind::MixedScript => "mixes scripts (a look-alike character may hide here)",
        }
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How far a request is from its quorum, as every surface says it: `0 of 1 approval`,
/// `1 of 2 approvals` (found by a first-time user: "0 of 1 approvals").
pub fn approvals_count(given: u32, quorum: u32) -> String {
    let noun = if quorum == 1 { "approval" } else { "approvals" };
    format!("{given} of {quorum} {noun}")
}

/// Render a stored approval request for a person.
///
/// `agent_context` is the agent's own account of why it wants the action (untrusted: it may be
/// false or adversarial); when given it is shown, escaped, in its own labelled section.
///
/// # Panics
///
/// Never.
pub fn render(record: &ApprovalRecord, agent_context: Option<&str>) -> ApprovalDisplay {
    let arguments = record.arguments.to_value();
    render_parts(
        Parts {
            request_id: record.id.as_str(),
            action: &record.action,
            arguments: &arguments,
            canonical_text: Some(record.arguments.as_str()),
            principal: record.principal.as_str(),
            resource: record.resource.as_deref(),
            environment: &record.environment,
            effect_key: record.effect_key.as_ref().map(crate::id::EffectKey::as_str),
            action_hash: record.action_hash.as_str(),
            expires_at: record.expires_at,
            who_may_approve: record.rule.summary(),
        },
        agent_context,
    )
}

/// Render a request as a framework's interrupt receives it ([`PendingApproval`]): the same
/// rendering as [`render`] of its stored record.
///
/// The arguments are shown in canonical form; a [`PendingApproval`] the kernel made always has
/// one. Should one built by hand not be representable (NaN, `-0`, an integer past ±(2^53−1)),
/// its JSON text is shown instead, marked by nothing: such arguments were never hashed.
///
/// # Panics
///
/// Never.
pub fn render_pending(pending: &PendingApproval, agent_context: Option<&str>) -> ApprovalDisplay {
    render_parts(
        Parts {
            request_id: pending.request_id.as_str(),
            action: &pending.action,
            arguments: &pending.arguments,
            canonical_text: None,
            principal: &pending.principal,
            resource: pending.resource.as_deref(),
            environment: &pending.environment,
            effect_key: pending.effect_key.as_deref(),
            action_hash: pending.action_hash.as_str(),
            expires_at: pending.expires_at,
            who_may_approve: pending.approvers.clone(),
        },
        agent_context,
    )
}

/// The fields both request shapes share.
struct Parts<'a> {
    request_id: &'a str,
    action: &'a str,
    arguments: &'a serde_json::Value,
    canonical_text: Option<&'a str>,
    principal: &'a str,
    resource: Option<&'a str>,
    environment: &'a str,
    effect_key: Option<&'a str>,
    action_hash: &'a str,
    expires_at: Timestamp,
    who_may_approve: String,
}

fn render_parts(parts: Parts<'_>, agent_context: Option<&str>) -> ApprovalDisplay {
    let canonical_text = match parts.canonical_text {
        Some(text) => text.to_owned(),
        None => canonical::to_canonical(parts.arguments)
            .map(canonical::CanonicalJson::into_string)
            .unwrap_or_else(|_| parts.arguments.to_string()),
    };
    let mut arguments = Vec::new();
    leaves(parts.arguments, &mut String::new(), &mut arguments);
    let mut display = ApprovalDisplay {
        schema: DISPLAY_SCHEMA,
        request_id: parts.request_id.to_owned(),
        action: shown(parts.action),
        arguments,
        canonical_arguments: shown(&canonical_text),
        principal: shown(parts.principal),
        resource: parts.resource.map(shown),
        environment: shown(parts.environment),
        effect_key: parts.effect_key.map(shown),
        action_hash: parts.action_hash.to_owned(),
        expires_at: parts.expires_at,
        who_may_approve: Some(shown(&parts.who_may_approve)),
        agent_context: agent_context.map(shown),
        finding_count: 0,
    };
    display.finding_count = display.count_findings();
    display
}

/// Collect the leaves of `value` under the JSON Pointer `path`, keys in RFC 8785 order.
fn leaves(value: &serde_json::Value, path: &mut String, out: &mut Vec<ShownArgument>) {
    use serde_json::Value;
    let leaf = |kind, text: &str| {
        let mut path = shown(path);
        // The empty pointer names the arguments themselves: nothing is missing there.
        path.findings
            .retain(|finding| finding.kind != FindingKind::Empty);
        ShownArgument {
            path,
            kind,
            value: shown(text),
        }
    };
    match value {
        Value::Object(map) if !map.is_empty() => {
            let mut keys: Vec<&String> = map.keys().collect();
            // RFC 8785 §3.2.3: members sorted by their names' UTF-16 code units.
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            for key in keys {
                let before = path.len();
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                leaves(&map[key.as_str()], path, out);
                path.truncate(before);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (index, item) in items.iter().enumerate() {
                let before = path.len();
                let _ = write!(path, "/{index}");
                leaves(item, path, out);
                path.truncate(before);
            }
        }
        Value::Object(_) => out.push(leaf(ValueKind::EmptyObject, "{}")),
        Value::Array(_) => out.push(leaf(ValueKind::EmptyArray, "[]")),
        Value::String(text) => out.push(leaf(ValueKind::String, text)),
        Value::Bool(flag) => out.push(leaf(ValueKind::Bool, if *flag { "true" } else { "false" })),
        Value::Null => out.push(leaf(ValueKind::Null, "null")),
        Value::Number(number) => {
            let text = canonical::to_canonical(number)
                .map(canonical::CanonicalJson::into_string)
                .unwrap_or_else(|_| number.to_string());
            out.push(leaf(ValueKind::Number, &text));
        }
    }
}

impl ApprovalDisplay {
    fn count_findings(&self) -> usize {
        let fields = [
            Some(&self.action),
            Some(&self.principal),
            self.resource.as_ref(),
            Some(&self.environment),
            self.effect_key.as_ref(),
            self.who_may_approve.as_ref(),
            self.agent_context.as_ref(),
        ];
        let arguments: usize = self
            .arguments
            .iter()
            .map(|argument| argument.path.findings.len() + argument.value.findings.len())
            .sum();
        arguments
            + fields
                .into_iter()
                .flatten()
                .map(|field| field.findings.len())
                .sum::<usize>()
    }

    /// The display as plain text: one field per line, each argument on its own line with its
    /// findings listed under it, then the agent's words (if any) in a labelled section.
    ///
    /// No line of it comes from a value's own line breaks (they are escaped), so nothing in
    /// an argument can pose as a field. Lines are separated by `\n`; there is no final newline.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let mut line = |label: &str, text: &str| {
            let _ = writeln!(out, "{label:<12} {text}");
        };
        line("action", &self.action.text);
        line("principal", &self.principal.text);
        line(
            "resource",
            self.resource.as_ref().map_or("-", |shown| &shown.text),
        );
        line("environment", &self.environment.text);
        line(
            "effect key",
            self.effect_key.as_ref().map_or("-", |shown| &shown.text),
        );
        line("action hash", &self.action_hash);
        line("expires", &self.expires_at.to_rfc3339());
        line("request", &self.request_id);
        if let Some(who) = &self.who_may_approve {
            line("approvers", &who.text);
        }
        let mut fields_with_findings = vec![
            ("action", &self.action),
            ("principal", &self.principal),
            ("environment", &self.environment),
        ];
        if let Some(resource) = &self.resource {
            fields_with_findings.push(("resource", resource));
        }
        if let Some(effect_key) = &self.effect_key {
            fields_with_findings.push(("effect key", effect_key));
        }
        if let Some(who) = &self.who_may_approve {
            fields_with_findings.push(("approvers", who));
        }
        for (name, field) in fields_with_findings {
            for finding in &field.findings {
                let _ = writeln!(out, "  ! {name}: {}", describe(finding));
            }
        }
        let _ = writeln!(
            out,
            "arguments    exactly as hashed, in full; \\u{{hex}} is one character shown by its code point"
        );
        for argument in &self.arguments {
            let path = if argument.path.text.is_empty() {
                "(all)"
            } else {
                &argument.path.text
            };
            let value = match argument.kind {
                ValueKind::String => format!("\"{}\"", argument.value.text),
                _ => argument.value.text.clone(),
            };
            let _ = writeln!(out, "  {path} = {value}");
            for finding in &argument.path.findings {
                let _ = writeln!(out, "    ! name: {}", describe(finding));
            }
            for finding in &argument.value.findings {
                let _ = writeln!(out, "    ! {}", describe(finding));
            }
        }
        if let Some(context) = &self.agent_context {
            let _ = writeln!(
                out,
                "the agent's own words (not checked, not part of the action; may be false):"
            );
            let _ = writeln!(out, "  \"{}\"", context.text);
            for finding in &context.findings {
                let _ = writeln!(out, "    ! {}", describe(finding));
            }
        }
        if out.ends_with('\n') {
            out.pop();
        }
        out
    }
}

impl fmt::Display for ApprovalDisplay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

/// One finding in words: `bidirectional control (…): U+202E at 8`.
fn describe(finding: &Finding) -> String {
    let mut text = finding.kind.describe().to_owned();
    if finding.kind == FindingKind::Empty {
        return text;
    }
    let _ = write!(text, ": {}", finding.code_points.join(" "));
    if finding.end == finding.start + 1 {
        let _ = write!(text, " at character {}", finding.start);
    } else {
        let _ = write!(text, " in characters {}..{}", finding.start, finding.end);
    }
    if let Some(note) = &finding.note {
        let _ = write!(text, " ({note})");
    }
    text
}

#[cfg(test)]
mod tests;
