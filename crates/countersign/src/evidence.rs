//! Evidence: receipts in an append-only, hash-chained log.
//!
//! Every attempt that ends (refusals included), every human answer, every resolution and every
//! expiry writes one [`Receipt`], in the same store transaction as the state change it records.
//! Receipts are chained: receipt `n` carries `prev_hash` = the hash of receipt `n − 1` (the first
//! carries [`GENESIS_HASH`]), and its own `hash` = `sha256:` + hex SHA-256 over the RFC 8785 form
//! of every field except `hash`.
//!
//! [`verify`] walks the chain and names the first broken receipt. A chain alone cannot reveal
//! that its newest receipts were deleted (case B33): verification says so plainly unless it is
//! given an [`Anchor`] (a head hash and count exported earlier, kept elsewhere), and then fails
//! if the log no longer reaches it.

use serde::{Deserialize, Serialize};

use crate::action::canonical;
use crate::clock::Timestamp;

/// The receipt format's schema string this build writes.
///
/// `v2` adds, each written only when set: `approvals_given` and `approvals_needed` (a quorum's
/// count), `approver_groups`, `channel`, `authentication` and `hash_confirmed` (who answered and
/// how that was known), `approvers` (those whose yes granted the approval an attempt consumed)
/// and `attempt_started_at`; later, the outcome `handed_off` ([`ReceiptOutcome::HandedOff`]) and
/// `exit_status` ([`ProcessExit`]). [`verify`] reads chains that mix `v1` and `v2` receipts:
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
    /// The serialized (snake_case) name.
    pub(crate) fn as_str(self) -> &'static str {
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
    /// Position in the chain, from 1, without gaps.
    pub seq: u64,
    /// The previous receipt's hash ([`GENESIS_HASH`] for the first).
    pub prev_hash: String,
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
    pub attempt_id: Option<String>,
    /// The action name.
    pub action: Option<String>,
    /// The action hash.
    pub action_hash: Option<String>,
    /// The principal.
    pub principal: Option<String>,
    /// The resource.
    pub resource: Option<String>,
    /// The environment.
    pub environment: Option<String>,
    /// The effect key.
    pub effect_key: Option<String>,
    /// The canonical arguments, secrets redacted.
    pub arguments: Option<serde_json::Value>,
    /// The policy decision: `allow`, `approve` or `deny`.
    pub decision: Option<String>,
    /// `enforce` or `observe`.
    pub mode: Option<String>,
    /// The approval request involved, if any.
    pub approval_id: Option<String>,
    /// Who answered or resolved.
    pub approver: Option<String>,
    /// A human's note, quoted as data.
    pub note: Option<String>,
    /// The policy hash that decided this attempt.
    pub policy_hash: Option<String>,
    /// The policy hash when the consumed approval was requested (case B05).
    pub approval_policy_hash: Option<String>,
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
    /// This receipt's hash over every other field.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hash: String,
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
    pub attempt_id: Option<String>,
    /// See [`Receipt::action`].
    pub action: Option<String>,
    /// See [`Receipt::action_hash`].
    pub action_hash: Option<String>,
    /// See [`Receipt::principal`].
    pub principal: Option<String>,
    /// See [`Receipt::resource`].
    pub resource: Option<String>,
    /// See [`Receipt::environment`].
    pub environment: Option<String>,
    /// See [`Receipt::effect_key`].
    pub effect_key: Option<String>,
    /// See [`Receipt::arguments`]; kept as canonical text, so sealing writes it as is.
    pub arguments: Option<canonical::CanonicalJson>,
    /// See [`Receipt::decision`].
    pub decision: Option<String>,
    /// See [`Receipt::mode`].
    pub mode: Option<String>,
    /// See [`Receipt::approval_id`].
    pub approval_id: Option<String>,
    /// See [`Receipt::approver`].
    pub approver: Option<String>,
    /// See [`Receipt::note`].
    pub note: Option<String>,
    /// See [`Receipt::policy_hash`].
    pub policy_hash: Option<String>,
    /// See [`Receipt::approval_policy_hash`].
    pub approval_policy_hash: Option<String>,
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
    pub hash: String,
}

/// A receipt as stored: the columns the chain is checked against and the canonical body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredReceipt {
    /// The `seq` column.
    pub seq: u64,
    /// The `prev_hash` column.
    pub prev_hash: String,
    /// The `hash` column.
    pub hash: String,
    /// The canonical JSON body (every field but `hash`).
    pub body: String,
}

/// Seal a draft into the next receipt of the chain whose head is `head`, at `now`.
///
/// Returns the receipt and its stored form.
///
/// # Errors
///
/// A [`canonical::CanonicalError`] if the draft holds an unrepresentable value (it cannot: its
/// arguments are already canonical; kept so a bug surfaces as an error, not a panic).
pub fn seal(
    draft: ReceiptDraft,
    head: Option<&ChainHead>,
    now: Timestamp,
) -> Result<(Receipt, StoredReceipt), canonical::CanonicalError> {
    let (seq, prev_hash) = match head {
        Some(head) => (head.seq + 1, head.hash.clone()),
        None => (1, GENESIS_HASH.to_owned()),
    };
    let arguments = draft.arguments;
    let mut receipt = Receipt {
        schema: RECEIPT_SCHEMA.to_owned(),
        seq,
        prev_hash,
        recorded_at: now,
        kind: draft.kind.unwrap_or(ReceiptKind::Attempt),
        outcome: draft.outcome.unwrap_or(ReceiptOutcome::Refused),
        reason: draft.reason,
        attempt_id: draft.attempt_id,
        action: draft.action,
        action_hash: draft.action_hash,
        principal: draft.principal,
        resource: draft.resource,
        environment: draft.environment,
        effect_key: draft.effect_key,
        arguments: arguments.as_ref().map(canonical::CanonicalJson::to_value),
        decision: draft.decision,
        mode: draft.mode,
        approval_id: draft.approval_id,
        approver: draft.approver,
        note: draft.note,
        policy_hash: draft.policy_hash,
        approval_policy_hash: draft.approval_policy_hash,
        detail: draft.detail,
        approvals_given: draft.approvals_given,
        approvals_needed: draft.approvals_needed,
        approver_groups: draft.approver_groups,
        channel: draft.channel,
        authentication: draft.authentication,
        hash_confirmed: draft.hash_confirmed,
        approvers: draft.approvers,
        attempt_started_at: draft.attempt_started_at,
        exit_status: draft.exit_status,
        hash: String::new(),
    };
    let body = body_of(&receipt, arguments.as_ref())?;
    receipt.hash = canonical::sha256_prefixed(body.as_bytes());
    let stored = StoredReceipt {
        seq,
        prev_hash: receipt.prev_hash.clone(),
        hash: receipt.hash.clone(),
        body,
    };
    Ok((receipt, stored))
}

/// The largest `seq` RFC 8785 writes exactly (2^53 − 1).
const MAX_EXACT_SEQ: u64 = (1 << 53) - 1;

/// The canonical body of a receipt whose `hash` is still empty (an empty hash is not
/// serialized): every field except `hash`. `arguments` is the canonical text of
/// `receipt.arguments`.
///
/// The RFC 8785 text is written field by field, in sorted key order, with the arguments copied
/// in as the canonical text they already are, instead of serializing the receipt through the
/// generic canonicalizer (which would walk the arguments again and sort every key on every
/// call). `body_matches_the_generic_canonical_form` pins the two together.
fn body_of(
    receipt: &Receipt,
    arguments: Option<&canonical::CanonicalJson>,
) -> Result<String, canonical::CanonicalError> {
    debug_assert!(receipt.hash.is_empty());
    if receipt.seq > MAX_EXACT_SEQ {
        // Not reachable in practice; the generic path names the refusal.
        return Ok(canonical::to_canonical(receipt)?.into_string());
    }
    let mut out = String::with_capacity(640 + arguments.map_or(0, |text| text.as_str().len()));
    let optional = |out: &mut String, key: &str, value: &Option<String>| {
        out.push_str(key);
        match value {
            Some(text) => canonical::write_string(text, out),
            None => out.push_str("null"),
        }
    };
    // v2 fields: written only when set (then as canonical JSON), in their sorted place.
    let present = |out: &mut String, key: &str, value: Option<String>| {
        if let Some(text) = value {
            out.push_str(key);
            out.push_str(&text);
        }
    };
    let number = |value: Option<u32>| value.map(|number| number.to_string());
    let text = |value: &Option<String>| {
        value.as_ref().map(|text| {
            let mut quoted = String::new();
            canonical::write_string(text, &mut quoted);
            quoted
        })
    };
    optional(&mut out, "{\"action\":", &receipt.action);
    optional(&mut out, ",\"action_hash\":", &receipt.action_hash);
    optional(&mut out, ",\"approval_id\":", &receipt.approval_id);
    optional(
        &mut out,
        ",\"approval_policy_hash\":",
        &receipt.approval_policy_hash,
    );
    present(
        &mut out,
        ",\"approvals_given\":",
        number(receipt.approvals_given),
    );
    present(
        &mut out,
        ",\"approvals_needed\":",
        number(receipt.approvals_needed),
    );
    optional(&mut out, ",\"approver\":", &receipt.approver);
    present(
        &mut out,
        ",\"approver_groups\":",
        canonical_of(receipt.approver_groups.as_ref())?,
    );
    present(
        &mut out,
        ",\"approvers\":",
        canonical_of(receipt.approvers.as_ref())?,
    );
    out.push_str(",\"arguments\":");
    out.push_str(arguments.map_or("null", canonical::CanonicalJson::as_str));
    optional(&mut out, ",\"attempt_id\":", &receipt.attempt_id);
    present(
        &mut out,
        ",\"attempt_started_at\":",
        text(&receipt.attempt_started_at.map(Timestamp::to_rfc3339)),
    );
    present(
        &mut out,
        ",\"authentication\":",
        text(&receipt.authentication),
    );
    present(&mut out, ",\"channel\":", text(&receipt.channel));
    optional(&mut out, ",\"decision\":", &receipt.decision);
    optional(&mut out, ",\"detail\":", &receipt.detail);
    optional(&mut out, ",\"effect_key\":", &receipt.effect_key);
    optional(&mut out, ",\"environment\":", &receipt.environment);
    present(
        &mut out,
        ",\"exit_status\":",
        canonical_of(receipt.exit_status.as_ref())?,
    );
    present(
        &mut out,
        ",\"hash_confirmed\":",
        receipt.hash_confirmed.map(|flag| flag.to_string()),
    );
    out.push_str(",\"kind\":");
    canonical::write_string(receipt.kind.as_str(), &mut out);
    optional(&mut out, ",\"mode\":", &receipt.mode);
    optional(&mut out, ",\"note\":", &receipt.note);
    out.push_str(",\"outcome\":");
    canonical::write_string(receipt.outcome.as_str(), &mut out);
    optional(&mut out, ",\"policy_hash\":", &receipt.policy_hash);
    out.push_str(",\"prev_hash\":");
    canonical::write_string(&receipt.prev_hash, &mut out);
    optional(&mut out, ",\"principal\":", &receipt.principal);
    optional(&mut out, ",\"reason\":", &receipt.reason);
    out.push_str(",\"recorded_at\":");
    canonical::write_string(&receipt.recorded_at.to_rfc3339(), &mut out);
    optional(&mut out, ",\"resource\":", &receipt.resource);
    out.push_str(",\"schema\":");
    canonical::write_string(&receipt.schema, &mut out);
    out.push_str(",\"seq\":");
    out.push_str(&receipt.seq.to_string());
    out.push('}');
    Ok(out)
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
            || self.outcome == ReceiptOutcome::HandedOff
    }
}

impl StoredReceipt {
    /// Parse the body back into a [`Receipt`].
    ///
    /// # Errors
    ///
    /// A message when the body is not a receipt.
    pub fn to_receipt(&self) -> Result<Receipt, String> {
        let mut value: serde_json::Value =
            serde_json::from_str(&self.body).map_err(|error| error.to_string())?;
        if let serde_json::Value::Object(map) = &mut value {
            map.insert(
                "hash".to_owned(),
                serde_json::Value::String(self.hash.clone()),
            );
        }
        serde_json::from_value(value).map_err(|error| error.to_string())
    }
}

/// The canonical JSON text of a structured receipt field, if set.
fn canonical_of<T: Serialize>(
    value: Option<&T>,
) -> Result<Option<String>, canonical::CanonicalError> {
    value
        .map(|value| canonical::to_canonical(value).map(canonical::CanonicalJson::into_string))
        .transpose()
}

/// An externally kept reference point: the chain's head when it was exported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    /// The number of receipts (the head's `seq`).
    pub seq: u64,
    /// The head's hash.
    pub hash: String,
}

/// Where a chain first breaks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChainBreak {
    /// A receipt is missing or out of order.
    SeqGap {
        /// The seq expected.
        expected: u64,
        /// The seq found.
        found: u64,
    },
    /// A receipt does not point at its predecessor (a receipt was removed, inserted or forked).
    PrevHashMismatch {
        /// The receipt.
        seq: u64,
        /// The predecessor's hash.
        expected: String,
        /// What it points at.
        found: String,
    },
    /// A receipt's content does not match its hash (it was edited).
    HashMismatch {
        /// The receipt.
        seq: u64,
        /// The hash of its content now.
        computed: String,
        /// The hash stored with it.
        stored: String,
    },
    /// A receipt's body is unreadable or disagrees with its columns.
    Unreadable {
        /// The receipt.
        seq: u64,
        /// What is wrong.
        detail: String,
    },
}

impl ChainBreak {
    /// The receipt where the chain breaks.
    pub fn seq(&self) -> u64 {
        match self {
            ChainBreak::SeqGap { found, .. } => *found,
            ChainBreak::PrevHashMismatch { seq, .. }
            | ChainBreak::HashMismatch { seq, .. }
            | ChainBreak::Unreadable { seq, .. } => *seq,
        }
    }
}

impl std::fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChainBreak::SeqGap { expected, found } => {
                write!(
                    f,
                    "receipt {expected} is missing: the next one found is {found}"
                )
            }
            ChainBreak::PrevHashMismatch {
                seq,
                expected,
                found,
            } => write!(
                f,
                "receipt {seq} does not follow receipt {}: it points at {found}, expected {expected} (a receipt was removed, inserted or forked)",
                seq.saturating_sub(1)
            ),
            ChainBreak::HashMismatch {
                seq,
                computed,
                stored,
            } => write!(
                f,
                "receipt {seq} was altered: its content hashes to {computed}, but {stored} is recorded"
            ),
            ChainBreak::Unreadable { seq, detail } => {
                write!(f, "receipt {seq} is unreadable: {detail}")
            }
        }
    }
}

/// What verification found out about the log's tail.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum AnchorCheck {
    /// No anchor was given: deleting the newest receipts cannot be detected.
    NotGiven,
    /// The log reaches the anchor and agrees with it.
    Matched,
    /// The log does not reach the anchor, or disagrees with it.
    Failed {
        /// What is wrong.
        detail: String,
    },
}

/// The result of [`verify`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// How many receipts were checked.
    pub checked: u64,
    /// The head reached (the last intact receipt), if any.
    pub head: Option<ChainHead>,
    /// The first break, if any.
    pub first_break: Option<ChainBreak>,
    /// The tail check.
    pub anchor: AnchorCheck,
}

impl VerifyReport {
    /// True when the chain is intact and, if an anchor was given, reaches it. Without an anchor
    /// this is still true for an intact chain; read [`VerifyReport::anchor`] for what that
    /// cannot show.
    pub fn is_intact(&self) -> bool {
        self.first_break.is_none() && !matches!(self.anchor, AnchorCheck::Failed { .. })
    }
}

/// Verifies a chain page by page (so a log of any length is checked in bounded memory).
#[derive(Debug)]
pub struct Verifier {
    expected_seq: u64,
    prev_hash: String,
    checked: u64,
    first_break: Option<ChainBreak>,
    anchor_seen: Option<String>,
}

impl Default for Verifier {
    fn default() -> Self {
        Verifier {
            expected_seq: 1,
            prev_hash: GENESIS_HASH.to_owned(),
            checked: 0,
            first_break: None,
            anchor_seen: None,
        }
    }
}

impl Verifier {
    /// A verifier at the start of a chain.
    pub fn new() -> Verifier {
        Verifier::default()
    }

    /// Has it found a break (so further receipts need not be fed)?
    pub fn is_broken(&self) -> bool {
        self.first_break.is_some()
    }

    /// Check the next receipt, in `seq` order.
    pub fn feed(&mut self, receipt: &StoredReceipt, anchor: Option<&Anchor>) {
        if self.first_break.is_some() {
            return;
        }
        let found = self.check(receipt).err();
        if let Some(chain_break) = found {
            self.first_break = Some(chain_break);
            return;
        }
        if anchor.is_some_and(|anchor| anchor.seq == receipt.seq) {
            self.anchor_seen = Some(receipt.hash.clone());
        }
        self.checked += 1;
        self.expected_seq += 1;
        self.prev_hash = receipt.hash.clone();
    }

    fn check(&self, receipt: &StoredReceipt) -> Result<(), ChainBreak> {
        if receipt.seq != self.expected_seq {
            return Err(ChainBreak::SeqGap {
                expected: self.expected_seq,
                found: receipt.seq,
            });
        }
        if receipt.prev_hash != self.prev_hash {
            return Err(ChainBreak::PrevHashMismatch {
                seq: receipt.seq,
                expected: self.prev_hash.clone(),
                found: receipt.prev_hash.clone(),
            });
        }
        let computed = canonical::sha256_prefixed(receipt.body.as_bytes());
        if computed != receipt.hash {
            return Err(ChainBreak::HashMismatch {
                seq: receipt.seq,
                computed,
                stored: receipt.hash.clone(),
            });
        }
        let parsed = receipt
            .to_receipt()
            .map_err(|detail| ChainBreak::Unreadable {
                seq: receipt.seq,
                detail,
            })?;
        if parsed.seq != receipt.seq || parsed.prev_hash != receipt.prev_hash {
            return Err(ChainBreak::Unreadable {
                seq: receipt.seq,
                detail: "its body names a different position in the chain".to_owned(),
            });
        }
        if !RECEIPT_SCHEMAS.contains(&parsed.schema.as_str()) {
            return Err(ChainBreak::Unreadable {
                seq: receipt.seq,
                detail: format!(
                    "its schema `{}` is not one this Countersign reads ({}): upgrade Countersign",
                    parsed.schema,
                    RECEIPT_SCHEMAS.join(", ")
                ),
            });
        }
        if parsed.schema == RECEIPT_SCHEMAS[0] && parsed.has_v2_fields() {
            return Err(ChainBreak::Unreadable {
                seq: receipt.seq,
                detail: "it says `countersign.receipt/v1` but carries fields only v2 has"
                    .to_owned(),
            });
        }
        Ok(())
    }

    /// Finish: the report, judged against `anchor` if one is given.
    pub fn finish(self, anchor: Option<&Anchor>) -> VerifyReport {
        let head = (self.checked > 0).then(|| ChainHead {
            seq: self.expected_seq - 1,
            hash: self.prev_hash.clone(),
        });
        let anchor = match anchor {
            None => AnchorCheck::NotGiven,
            Some(anchor) => match &self.anchor_seen {
                Some(hash) if *hash == anchor.hash => AnchorCheck::Matched,
                Some(hash) => AnchorCheck::Failed {
                    detail: format!(
                        "receipt {} hashes to {hash}, but the anchor says {}",
                        anchor.seq, anchor.hash
                    ),
                },
                None => AnchorCheck::Failed {
                    detail: format!(
                        "the anchor names receipt {} but the intact log ends at receipt {}: receipts were removed",
                        anchor.seq,
                        self.expected_seq - 1
                    ),
                },
            },
        };
        VerifyReport {
            checked: self.checked,
            head,
            first_break: self.first_break,
            anchor,
        }
    }
}

/// Verify a whole chain held in memory.
pub fn verify<'a>(
    receipts: impl IntoIterator<Item = &'a StoredReceipt>,
    anchor: Option<&Anchor>,
) -> VerifyReport {
    let mut verifier = Verifier::new();
    for receipt in receipts {
        verifier.feed(receipt, anchor);
        if verifier.is_broken() {
            break;
        }
    }
    verifier.finish(anchor)
}

#[cfg(test)]
mod tests;

/// Verify the whole chain in `store`, page by page, against `anchor` if given.
///
/// # Errors
///
/// [`crate::StoreError`] when the store cannot be read.
///
/// # Cancel safety
///
/// Read-only.
pub async fn verify_store(
    store: &dyn crate::store::Store,
    anchor: Option<&Anchor>,
) -> Result<VerifyReport, crate::error::StoreError> {
    const PAGE: usize = 2_000;
    let mut verifier = Verifier::new();
    let mut after = 0;
    loop {
        let page = store.receipts(after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for receipt in &page {
            verifier.feed(receipt, anchor);
        }
        if verifier.is_broken() || page.len() < PAGE {
            break;
        }
    }
    Ok(verifier.finish(anchor))
}

/// An effect whose row in the store disagrees with what its receipts record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EffectDisagreement {
    /// The effect key.
    pub effect_key: String,
    /// The state in the effects table (`None`: no row).
    pub table: Option<crate::effect::EffectState>,
    /// The state its receipts end in (`None`: no receipt records an outcome for it).
    pub receipts: Option<crate::effect::EffectState>,
}

impl std::fmt::Display for EffectDisagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key = printable(&self.effect_key);
        match (self.table, self.receipts) {
            (None, Some(receipts)) => write!(
                f,
                "effect `{key}` has no row in the effects table, but its receipts end `{}`: the row was deleted, so the effect could run again",
                receipts.as_str()
            ),
            (Some(table), None) => write!(
                f,
                "effect `{key}` is `{}` in the effects table, but no receipt records an outcome for it: the row was written outside Countersign",
                table.as_str()
            ),
            (Some(table), Some(receipts)) => write!(
                f,
                "effect `{key}` is `{}` in the effects table, but its receipts end `{}`: the table was edited",
                table.as_str(),
                receipts.as_str()
            ),
            (None, None) => write!(f, "effect `{key}`: nothing recorded"),
        }
    }
}

/// What a comparison of a state table with the receipts found ([`cross_check_effects`],
/// [`cross_check_approvals`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StateCheck<D> {
    /// Rows compared.
    pub checked: u64,
    /// Every disagreement, in key order.
    pub disagreements: Vec<D>,
}

impl<D> Default for StateCheck<D> {
    fn default() -> Self {
        StateCheck {
            checked: 0,
            disagreements: Vec::new(),
        }
    }
}

impl<D> StateCheck<D> {
    /// True when every compared row agrees with the receipts.
    pub fn agrees(&self) -> bool {
        self.disagreements.is_empty()
    }
}

/// What [`cross_check_effects`] found.
pub type EffectCheck = StateCheck<EffectDisagreement>;

/// The effect state a receipt leaves its key in, if it changes it.
fn effect_state_after(receipt: &Receipt) -> Option<crate::effect::EffectState> {
    use crate::effect::EffectState;
    match (receipt.kind, receipt.outcome) {
        (ReceiptKind::Attempt | ReceiptKind::Resolution, ReceiptOutcome::Committed) => {
            Some(EffectState::Committed)
        }
        (ReceiptKind::Attempt | ReceiptKind::Resolution, ReceiptOutcome::Failed) => {
            Some(EffectState::Failed)
        }
        (ReceiptKind::Attempt, ReceiptOutcome::Ambiguous | ReceiptOutcome::HandedOff)
        | (ReceiptKind::LeaseExpired, _) => Some(EffectState::Ambiguous),
        _ => None,
    }
}

/// Compare the effects table with the receipt chain: every settled effect row (committed,
/// failed, ambiguous) must be the state its key's receipts end in; a `reserved` row (an attempt
/// in flight, or one whose lease lapsed) may only follow no outcome or a definite failure; and
/// every key whose receipts record an outcome must still have its row. The effects table is
/// what the kernel consults before running an effect, and it is not hash-chained: an edited or
/// deleted row could let an effect run again, and this is how `countersign verify` notices.
/// Keys with `observed` receipts (observe mode) are skipped. Run it on an intact chain
/// ([`verify_store`]).
///
/// # Errors
///
/// [`crate::StoreError`] when the store cannot be read, or `Corrupt` for a receipt whose body
/// does not parse.
///
/// # Cancel safety
///
/// Read-only.
pub async fn cross_check_effects(
    store: &dyn crate::store::Store,
) -> Result<EffectCheck, crate::error::StoreError> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut ended: BTreeMap<String, crate::effect::EffectState> = BTreeMap::new();
    let mut observed: BTreeSet<String> = BTreeSet::new();
    for_each_receipt(store, |receipt| {
        let Some(key) = receipt.effect_key.clone() else {
            return;
        };
        if receipt.outcome == ReceiptOutcome::Observed {
            observed.insert(key);
        } else if let Some(state) = effect_state_after(&receipt) {
            ended.insert(key, state);
        }
    })
    .await?;
    let mut check = EffectCheck::default();
    let mut rows = BTreeSet::new();
    for effect in store.effects(None).await? {
        use crate::effect::EffectState;
        let key = effect.key.as_str().to_owned();
        rows.insert(key.clone());
        if observed.contains(&key) {
            continue;
        }
        check.checked += 1;
        let receipts = ended.get(&key).copied();
        let agrees = match effect.state {
            // A reservation follows no outcome yet (the first attempt, in flight or lapsed) or
            // a definite failure (a retry); never a commit, and never an unresolved ambiguity.
            EffectState::Reserved => matches!(receipts, None | Some(EffectState::Failed)),
            settled => receipts == Some(settled),
        };
        if !agrees {
            check.disagreements.push(EffectDisagreement {
                effect_key: key,
                table: Some(effect.state),
                receipts,
            });
        }
    }
    for (key, state) in ended {
        if !rows.contains(&key) && !observed.contains(&key) {
            check.disagreements.push(EffectDisagreement {
                effect_key: key,
                table: None,
                receipts: Some(state),
            });
        }
    }
    check
        .disagreements
        .sort_by(|a, b| a.effect_key.cmp(&b.effect_key));
    Ok(check)
}

/// Every receipt in `store`, oldest first, parsed, handed to `visit` page by page (bounded
/// memory).
async fn for_each_receipt(
    store: &dyn crate::store::Store,
    mut visit: impl FnMut(Receipt),
) -> Result<(), crate::error::StoreError> {
    const PAGE: usize = 2_000;
    let mut after = 0;
    loop {
        let page = store.receipts(after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for stored in &page {
            visit(
                stored
                    .to_receipt()
                    .map_err(|detail| crate::error::StoreError::Corrupt {
                        detail: format!("receipt {} does not parse: {detail}", stored.seq),
                    })?,
            );
        }
        if page.len() < PAGE {
            break;
        }
    }
    Ok(())
}

/// A `granted` approval row that its receipts do not back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalDisagreement {
    /// The request id.
    pub request_id: String,
    /// What its receipts end in: `granted`, `denied`, `consumed`, `expired`, `voided`, or
    /// `None` when no receipt records an answer.
    pub receipts: Option<&'static str>,
}

impl std::fmt::Display for ApprovalDisagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = printable(&self.request_id);
        match self.receipts {
            None => write!(
                f,
                "approval `{id}` is `granted` in the approvals table, but no receipt records anyone answering it: the row was written outside Countersign and would authorize an action nobody approved"
            ),
            Some(ended) => write!(
                f,
                "approval `{id}` is `granted` in the approvals table, but its receipts end `{ended}`: the table was edited and would authorize an action again"
            ),
        }
    }
}

/// What [`cross_check_approvals`] found (`checked` counts `granted` rows).
pub type ApprovalCheck = StateCheck<ApprovalDisagreement>;

/// Compare the approvals table with the receipts: every `granted` row — the state that
/// authorizes an action — must be backed by a `granted` answer receipt for that request that no
/// later receipt superseded (an attempt that consumed it, an expiry, a voiding). Other states
/// authorize nothing and are not compared. Run it on an intact chain ([`verify_store`]).
///
/// # Errors
///
/// As [`cross_check_effects`].
///
/// # Cancel safety
///
/// Read-only.
pub async fn cross_check_approvals(
    store: &dyn crate::store::Store,
) -> Result<ApprovalCheck, crate::error::StoreError> {
    let mut ended: std::collections::BTreeMap<String, &'static str> = Default::default();
    for_each_receipt(store, |receipt| {
        let Some(id) = receipt.approval_id.clone() else {
            return;
        };
        let state = match (receipt.kind, receipt.outcome) {
            (ReceiptKind::Answer, ReceiptOutcome::Granted) => "granted",
            (ReceiptKind::Answer, ReceiptOutcome::Denied) => "denied",
            (ReceiptKind::ApprovalExpired, _) => "expired",
            (ReceiptKind::ApprovalVoided, _) => "voided",
            (ReceiptKind::ApprovalRevoked, ReceiptOutcome::Revoked) => "revoked",
            (ReceiptKind::ApprovalCancelled, ReceiptOutcome::Cancelled) => "cancelled",
            (
                ReceiptKind::Attempt,
                ReceiptOutcome::Committed
                | ReceiptOutcome::Failed
                | ReceiptOutcome::Ambiguous
                | ReceiptOutcome::HandedOff,
            ) => "consumed",
            _ => return,
        };
        ended.insert(id, state);
    })
    .await?;
    let mut check = ApprovalCheck::default();
    // Issue #31: a revoked or cancelled request must end on its own receipt, and a granted one
    // must not have been revoked or cancelled since.
    let mut records = store
        .approvals(Some(crate::approval::ApprovalState::Granted))
        .await?;
    records.extend(
        store
            .approvals(Some(crate::approval::ApprovalState::Revoked))
            .await?,
    );
    records.extend(
        store
            .approvals(Some(crate::approval::ApprovalState::Cancelled))
            .await?,
    );
    for record in records {
        check.checked += 1;
        let id = record.id.as_str().to_owned();
        let receipts = ended.get(&id).copied();
        let expected = match record.state {
            crate::approval::ApprovalState::Revoked => "revoked",
            crate::approval::ApprovalState::Cancelled => "cancelled",
            _ => "granted",
        };
        if receipts != Some(expected) {
            check.disagreements.push(ApprovalDisagreement {
                request_id: id,
                receipts,
            });
        }
    }
    check
        .disagreements
        .sort_by(|a, b| a.request_id.cmp(&b.request_id));
    Ok(check)
}

/// `text` made safe to show a person in a terminal or a log line: control characters (newlines
/// included) and Unicode bidirectional and invisible formatting characters (U+061C, U+200B to
/// U+200F, U+202A to U+202E, U+2060 to U+2069, U+FEFF) are written as `\u{…}` escapes, so a
/// tool name or argument can neither forge a second log line nor reverse what an approver reads.
/// Everything else is returned unchanged.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    fn hidden(character: char) -> bool {
        character.is_control()
            || matches!(character, '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
    }
    if !text.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for character in text.chars() {
        if hidden(character) {
            shown.push_str(&format!("\\u{{{:x}}}", u32::from(character)));
        } else {
            shown.push(character);
        }
    }
    std::borrow::Cow::Owned(shown)
}
