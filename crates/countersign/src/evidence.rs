//! Evidence: receipts in an append-only, hash-chained log.
//!
//! Every attempt that ends (refusals included), every human answer, every resolution and every
//! expiry writes one [`Receipt`], in the same store transaction as the state change it records.
//! Receipts are chained: receipt `n` carries `prev_hash` = the hash of receipt `n − 1` (the first
//! carries [`GENESIS_HASH`]), and its own `hash` = `sha256:` + hex SHA-256 over the RFC 8785 form
//! of every field except `hash`. A log may hold several such chains, one per writer lane
//! ([`Receipt::lane`], issue #21): each lane's `seq` runs from 1 and its `prev_hash` points at
//! the lane's previous receipt; a store that keeps one lane writes lane 0 only.
//!
//! [`verify`] walks the chain and names the first broken receipt. A chain alone cannot reveal
//! that its newest receipts were deleted (case B33): verification says so plainly unless it is
//! given an [`Anchor`] (a head hash and count exported earlier, kept elsewhere), and then fails
//! if the log no longer reaches it.
//!
//! By concept: this file holds the receipt and its parts; `seal` chains a draft into the next
//! receipt, `verify` checks a chain ([`Verifier`]). Reading a chain out of a store is
//! [`crate::audit`]'s. Evidence a third party checks without the store (issue #23,
//! `docs/evidence.md`): [`merkle`] (RFC 6962 / 9162 tree hashing and proofs), [`log`] (which
//! bytes of which receipt are which leaf), [`note`] (C2SP signed notes) and [`checkpoint`]
//! (signed checkpoints of the tree).

mod anchor;
pub mod bundle;
pub mod checkpoint;
pub mod log;
pub mod merkle;
pub mod note;
mod seal;
mod verify;

pub use anchor::Anchor;
pub use seal::{seal, seal_in_lane};
pub use verify::{
    AnchorCheck, ChainBreak, Verifier, VerifyOutcome, VerifyRange, VerifyReport, check_alone,
    verify,
};

pub(crate) use crate::text::is_hidden;
pub use crate::text::printable;
use serde::{Deserialize, Serialize};

use crate::action::canonical;
use crate::clock::Timestamp;
use crate::id::{ActionHash, ApprovalId, AttemptId, EffectKey, PolicyHash, Principal, ReceiptHash};

/// The receipt format's schema string this build writes.
///
/// `v2` adds, each written only when set: `approvals_given` and `approvals_needed` (a quorum's
/// count), `approver_groups`, `channel`, `authentication` and `hash_confirmed` (who answered and
/// how that was known), `approvers` (those whose yes granted the approval an attempt consumed)
/// and `attempt_started_at`; later, the outcome `handed_off` ([`ReceiptOutcome::HandedOff`]),
/// `exit_status` ([`ProcessExit`]), `raised_by` and `tool_schema` (issue #27); then `lane`
/// (issue #21, [`Receipt::lane`]). [`verify`] reads chains that mix `v1` and `v2` receipts:
/// each receipt's hash covers its own stored body, whatever its version, and a `v1` receipt
/// carrying anything only `v2` has is unreadable.
pub const RECEIPT_SCHEMA: &str = "countersign.receipt/v2";

/// The schema strings [`verify`] accepts.
pub const RECEIPT_SCHEMAS: [&str; 2] = ["countersign.receipt/v1", RECEIPT_SCHEMA];

/// The `prev_hash` of the first receipt: `sha256:` and 64 zeros.
pub const GENESIS_HASH: &str =
    "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// What a receipt records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptKind {
    /// An attempt to execute an action ended (ran, or was refused).
    Attempt,
    /// A human (or a framework on their behalf) answered an approval request.
    Answer,
    /// An approval request expired unanswered or unused.
    ApprovalExpired,
    /// An approval was voided because the action's policy entry changed.
    ApprovalVoided,
    /// An effect's lease lapsed with no outcome: it became ambiguous.
    LeaseExpired,
    /// A human or reconcile hook resolved an ambiguous effect.
    Resolution,
    /// v2: an approver revoked a grant not yet used, or withdrew their yes from a quorum still
    /// pending, or such an attempt was refused (issue #31).
    ApprovalRevoked,
    /// v2: the operator cancelled a request, or such an attempt was refused (issue #31).
    ApprovalCancelled,
}

/// The outcome a receipt records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptOutcome {
    /// The executor returned `Ok`.
    Committed,
    /// The executor said "definitely not executed".
    Failed,
    /// The executor ran and its outcome is unknown.
    Ambiguous,
    /// The attempt was refused before the executor ran.
    Refused,
    /// Observe mode: the executor ran and nothing was enforced; `reason` says what enforcement
    /// would have done.
    Observed,
    /// An approval was granted.
    Granted,
    /// An approval was denied by a human.
    Denied,
    /// An approval expired.
    Expired,
    /// An approval was voided.
    Voided,
    /// An approver's yes was counted; the request needs more approvals (`approvals_given` of
    /// `approvals_needed`).
    Counted,
    /// v2: the attempt was authorized (the policy allowed it, or it consumed a granted
    /// approval) and handed to a tool that runs outside Countersign, such as a coding agent's
    /// own tool after its hook said yes ([`crate::Control::hand_off`]). Whether and how the
    /// tool ran is not known to Countersign; an effect key it reserved is left `ambiguous`.
    HandedOff,
    /// v2: a grant was revoked before it was used; it authorizes nothing.
    Revoked,
    /// v2: an approver's counted yes was withdrawn from a quorum still pending
    /// (`approvals_given` is the count after it).
    Withdrawn,
    /// v2: the operator cancelled the request; it authorizes nothing.
    Cancelled,
}

impl ReceiptKind {
    /// The serialized (snake_case) name, as receipts store it (`attempt`, `answer`,
    /// `approval_expired`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptKind::Attempt => "attempt",
            ReceiptKind::Answer => "answer",
            ReceiptKind::ApprovalExpired => "approval_expired",
            ReceiptKind::ApprovalVoided => "approval_voided",
            ReceiptKind::LeaseExpired => "lease_expired",
            ReceiptKind::Resolution => "resolution",
            ReceiptKind::ApprovalRevoked => "approval_revoked",
            ReceiptKind::ApprovalCancelled => "approval_cancelled",
        }
    }
}

impl ReceiptOutcome {
    /// The stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptOutcome::Committed => "committed",
            ReceiptOutcome::Failed => "failed",
            ReceiptOutcome::Ambiguous => "ambiguous",
            ReceiptOutcome::Refused => "refused",
            ReceiptOutcome::Observed => "observed",
            ReceiptOutcome::Granted => "granted",
            ReceiptOutcome::Denied => "denied",
            ReceiptOutcome::Expired => "expired",
            ReceiptOutcome::Voided => "voided",
            ReceiptOutcome::Counted => "counted",
            ReceiptOutcome::HandedOff => "handed_off",
            ReceiptOutcome::Revoked => "revoked",
            ReceiptOutcome::Withdrawn => "withdrawn",
            ReceiptOutcome::Cancelled => "cancelled",
        }
    }
}

/// One receipt. Its serialized form ([`RECEIPT_SCHEMA`]) is a stable, hashed format: fields are
/// only ever added in a new schema version, and the fields `v2` added are left out of the body
/// when unset.
///
/// Shapes: hashes are `sha256:` + 64 lowercase hex; times are UTC RFC 3339 with milliseconds;
/// `arguments` are canonical with secrets replaced by `"[redacted]"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// Always [`RECEIPT_SCHEMA`].
    pub schema: String,
    /// Position in its lane's chain, from 1, without gaps.
    pub seq: u64,
    /// v2: the writer lane whose chain holds the receipt (issue #21; SPEC 1.5). A log is one or
    /// more lanes, each its own `seq` from 1 and its own `prev_hash` chain; lane 0 is written
    /// as no field at all, so a store that keeps one lane (SQLite, memory, and today every
    /// store) writes the bodies it always wrote.
    #[serde(default, skip_serializing_if = "is_lane_zero")]
    pub lane: u32,
    /// The previous receipt's hash ([`GENESIS_HASH`] for the first).
    pub prev_hash: ReceiptHash,
    /// When it was written.
    pub recorded_at: Timestamp,
    /// What it records.
    pub kind: ReceiptKind,
    /// The outcome.
    pub outcome: ReceiptOutcome,
    /// A stable reason code for refusals and observations (`approval_required`, `duplicate`,
    /// `no_matching_rule`, ...).
    pub reason: Option<String>,
    /// The attempt (`att_…`), for attempt receipts.
    pub attempt_id: Option<AttemptId>,
    /// The action name.
    pub action: Option<String>,
    /// The action hash.
    pub action_hash: Option<ActionHash>,
    /// The principal.
    pub principal: Option<Principal>,
    /// The resource.
    pub resource: Option<String>,
    /// The environment.
    pub environment: Option<String>,
    /// The effect key.
    pub effect_key: Option<EffectKey>,
    /// The canonical arguments, secrets redacted.
    pub arguments: Option<serde_json::Value>,
    /// The policy decision: `allow`, `approve` or `deny`.
    pub decision: Option<String>,
    /// `enforce` or `observe`.
    pub mode: Option<String>,
    /// The approval request involved, if any.
    pub approval_id: Option<ApprovalId>,
    /// Who answered or resolved.
    pub approver: Option<String>,
    /// A human's note, quoted as data.
    pub note: Option<String>,
    /// The policy hash that decided this attempt.
    pub policy_hash: Option<PolicyHash>,
    /// The policy hash when the consumed approval was requested (case B05).
    pub approval_policy_hash: Option<PolicyHash>,
    /// Free text: the executor's error, a lease note.
    pub detail: Option<String>,
    /// v2: yes answers counted so far on the request (answer receipts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_given: Option<u32>,
    /// v2: the request's quorum (answer receipts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_needed: Option<u32>,
    /// v2: the groups the answering approver was judged with (answer and resolution receipts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver_groups: Option<Vec<String>>,
    /// v2: the channel the answer came through (`cli`, `service`, `interrupt:<framework>`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// v2: how the approver was authenticated (`asserted`, `token`, `oidc`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<String>,
    /// v2: did the surface echo the action hash it showed the approver (answer receipts)?
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_confirmed: Option<bool>,
    /// v2: the approvers whose yes granted the approval this attempt consumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvers: Option<Vec<crate::approver::Approver>>,
    /// v2: when the attempt this receipt ends began (UTC, RFC 3339 with milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_started_at: Option<Timestamp>,
    /// v2: how the process an attempt ran ended (`countersign exec`): its exit code or the
    /// signal that ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<ProcessExit>,
    /// v2: why a pattern entry's `allow` was raised to `approve` for this attempt
    /// (`destructiveHint`, issue #27; [`crate::policy::Raise`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raised_by: Option<String>,
    /// v2: the digest of the tool's input schema the action hash covers (`sha256:` plus 64
    /// hex digits; issue #27), so the hash can be recomputed from the receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_schema: Option<String>,
    /// This receipt's hash over every other field.
    #[serde(default, skip_serializing_if = "ReceiptHash::is_unset")]
    pub hash: ReceiptHash,
}

/// A receipt before it is chained: every field but `seq`, `prev_hash`, `recorded_at` and `hash`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ReceiptDraft {
    /// See [`Receipt::kind`].
    pub kind: Option<ReceiptKind>,
    /// See [`Receipt::outcome`].
    pub outcome: Option<ReceiptOutcome>,
    /// See [`Receipt::reason`].
    pub reason: Option<String>,
    /// See [`Receipt::attempt_id`].
    pub attempt_id: Option<AttemptId>,
    /// See [`Receipt::action`].
    pub action: Option<String>,
    /// See [`Receipt::action_hash`].
    pub action_hash: Option<ActionHash>,
    /// See [`Receipt::principal`].
    pub principal: Option<Principal>,
    /// See [`Receipt::resource`].
    pub resource: Option<String>,
    /// See [`Receipt::environment`].
    pub environment: Option<String>,
    /// See [`Receipt::effect_key`].
    pub effect_key: Option<EffectKey>,
    /// See [`Receipt::arguments`]; kept as canonical text, so sealing writes it as is.
    pub arguments: Option<canonical::CanonicalJson>,
    /// See [`Receipt::decision`].
    pub decision: Option<String>,
    /// See [`Receipt::mode`].
    pub mode: Option<String>,
    /// See [`Receipt::approval_id`].
    pub approval_id: Option<ApprovalId>,
    /// See [`Receipt::approver`].
    pub approver: Option<String>,
    /// See [`Receipt::note`].
    pub note: Option<String>,
    /// See [`Receipt::policy_hash`].
    pub policy_hash: Option<PolicyHash>,
    /// See [`Receipt::approval_policy_hash`].
    pub approval_policy_hash: Option<PolicyHash>,
    /// See [`Receipt::detail`].
    pub detail: Option<String>,
    /// See [`Receipt::approvals_given`].
    pub approvals_given: Option<u32>,
    /// See [`Receipt::approvals_needed`].
    pub approvals_needed: Option<u32>,
    /// See [`Receipt::approver_groups`].
    pub approver_groups: Option<Vec<String>>,
    /// See [`Receipt::channel`].
    pub channel: Option<String>,
    /// See [`Receipt::authentication`].
    pub authentication: Option<String>,
    /// See [`Receipt::hash_confirmed`].
    pub hash_confirmed: Option<bool>,
    /// See [`Receipt::approvers`].
    pub approvers: Option<Vec<crate::approver::Approver>>,
    /// See [`Receipt::attempt_started_at`].
    pub attempt_started_at: Option<Timestamp>,
    /// See [`Receipt::exit_status`].
    pub exit_status: Option<ProcessExit>,
    /// See [`Receipt::raised_by`].
    pub raised_by: Option<String>,
    /// See [`Receipt::tool_schema`].
    pub tool_schema: Option<String>,
}

/// How a process ended, as a receipt records it (`exit_status`, receipt v2): exactly one of
/// `code` (its exit code; 0 is success) and `signal` (the number of the Unix signal that ended
/// it) is set. JSON: `{"code": 3}` or `{"signal": 9}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessExit {
    /// The exit code, when the process exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// The signal number, when a signal ended the process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

impl ProcessExit {
    /// A process that exited with `code`.
    pub fn code(code: i32) -> ProcessExit {
        ProcessExit {
            code: Some(code),
            signal: None,
        }
    }

    /// A process ended by signal number `signal`.
    pub fn signal(signal: i32) -> ProcessExit {
        ProcessExit {
            code: None,
            signal: Some(signal),
        }
    }
}

impl std::fmt::Display for ProcessExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit code {code}"),
            (None, Some(signal)) => write!(f, "signal {signal}"),
            (None, None) => write!(f, "no exit status"),
        }
    }
}

impl ReceiptDraft {
    /// This draft with `outcome` and `reason` set.
    pub fn with_outcome(mut self, outcome: ReceiptOutcome, reason: Option<&str>) -> ReceiptDraft {
        self.outcome = Some(outcome);
        self.reason = reason.map(str::to_owned);
        self
    }
}

/// The newest receipt's position and hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainHead {
    /// Its `seq` (the number of receipts in an intact chain).
    pub seq: u64,
    /// Its hash.
    pub hash: ReceiptHash,
}

/// The newest receipt of one lane other than lane 0 ([`Receipt::lane`]): where a verification
/// reached in it ([`VerifyReport::lanes`]) or what an anchor says it held ([`Anchor::lanes`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaneHead {
    /// The lane (1 or more).
    pub lane: u32,
    /// Its newest receipt's `seq` (the number of receipts in the lane, when intact).
    pub seq: u64,
    /// That receipt's hash (`sha256:` + 64 lowercase hex).
    pub hash: ReceiptHash,
}

/// A receipt as stored: the columns the chain is checked against and the canonical body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredReceipt {
    /// The lane it was stored in ([`Receipt::lane`]): always 0 in a store that keeps one lane
    /// (memory, SQLite), 0 to 15 in a PostgreSQL store (SPEC 1.5). [`check_alone`] holds the
    /// body to it.
    pub lane: u32,
    /// Its place in the log's one total order (SPEC 1.5), from 1 without gaps: the
    /// [`Store::receipts`](crate::store::Store::receipts) cursor and, less one, its Merkle leaf
    /// index ([`log`]). A store of one lane places a receipt at its `seq`; a store of several
    /// places each lane's receipts in `seq` order after they commit. 0 for a receipt not read
    /// from a log (just sealed): [`Verifier`] checks the place of every receipt that has one.
    pub position: u64,
    /// The `seq` column.
    pub seq: u64,
    /// The `prev_hash` column.
    pub prev_hash: ReceiptHash,
    /// The `hash` column.
    pub hash: ReceiptHash,
    /// The canonical JSON body (every field but `hash`).
    pub body: String,
    /// True when the log's order names this receipt (its `lane`, `seq` and `position`) but the
    /// store no longer holds its row: it was deleted after it was placed. `prev_hash`, `hash`
    /// and `body` are empty then. Only a store that records places apart from the receipts
    /// (PostgreSQL's `receipt_positions`) can tell; elsewhere a deleted receipt shows as a gap.
    /// [`Verifier`] and [`check_alone`] report it as [`ChainBreak::Missing`].
    pub missing: bool,
}

impl Receipt {
    /// Does it carry any field `countersign.receipt/v2` added?
    fn has_v2_fields(&self) -> bool {
        self.approvals_given.is_some()
            || self.approvals_needed.is_some()
            || self.approver_groups.is_some()
            || self.channel.is_some()
            || self.authentication.is_some()
            || self.hash_confirmed.is_some()
            || self.approvers.is_some()
            || self.attempt_started_at.is_some()
            || self.exit_status.is_some()
            || self.raised_by.is_some()
            || self.tool_schema.is_some()
            || self.outcome == ReceiptOutcome::HandedOff
            || self.lane != 0
    }
}

/// Is `lane` the first lane (written as no `lane` field)?
fn is_lane_zero(lane: &u32) -> bool {
    *lane == 0
}

impl StoredReceipt {
    /// Parse the body back into a [`Receipt`].
    ///
    /// # Errors
    ///
    /// A message when the body is not a receipt, or when the receipt is
    /// [`missing`](StoredReceipt::missing).
    pub fn to_receipt(&self) -> Result<Receipt, String> {
        if self.missing {
            return Err(ChainBreak::Missing {
                lane: self.lane,
                seq: self.seq,
                position: self.position,
            }
            .to_string());
        }
        let mut value: serde_json::Value =
            serde_json::from_str(&self.body).map_err(|error| error.to_string())?;
        if let serde_json::Value::Object(map) = &mut value {
            map.insert(
                "hash".to_owned(),
                serde_json::Value::String(self.hash.as_str().to_owned()),
            );
        }
        serde_json::from_value(value).map_err(|error| error.to_string())
    }
}

#[cfg(test)]
mod tests;

/// `text` as one word to paste into a POSIX shell command line (an effect key in the
/// `countersign resolve KEY` a refusal suggests): [`escaped`] (which `countersign resolve` and
/// `inspect` read back), then quoted (`shlex`) when anything in it is special to the shell:
/// `job:a b` becomes `'job:a b'`.
pub fn shell_word(text: &str) -> String {
    let shown = escaped(text);
    shlex::try_quote(&shown).map_or_else(|_| shown.to_string(), |word| word.into_owned())
}

/// [`printable`], and reversible: a literal `\` before `u{` is written `\u{5c}` as well, so
/// that `display::unescape(&escaped(text)) == text` and two texts never print alike (SPEC 1.9's
/// rule). For text a person may type back, such as an effect key: a key holding a NUL and one
/// holding the six characters `\u{0}` print differently. A space at either end is written
/// `\u{20}`: in a listing it would not be seen (found by a first-time user: `job:trail ` showed
/// as `job:trail`, which `resolve` then did not find). Unlike [`printable`], not for text that
/// may already be escaped (it would be escaped again).
pub fn escaped(text: &str) -> std::borrow::Cow<'_, str> {
    let shown = if text.contains("\\u{") {
        std::borrow::Cow::Owned(printable(&text.replace("\\u{", "\\u{5c}u{")).into_owned())
    } else {
        printable(text)
    };
    if !shown.starts_with(' ') && !shown.ends_with(' ') {
        return shown;
    }
    let after_leading = shown.trim_start_matches(' ');
    let leading = shown.len() - after_leading.len();
    let core = after_leading.trim_end_matches(' ');
    let trailing = after_leading.len() - core.len();
    std::borrow::Cow::Owned(format!(
        "{}{core}{}",
        "\\u{20}".repeat(leading),
        "\\u{20}".repeat(trailing)
    ))
}
