//! Approvals: a human's countersignature on exactly one action.
//!
//! A request is created when policy says `approve` and nothing usable is presented. It is bound
//! to the [`ActionHash`] and to the governing policy entry's fingerprint, and moves through
//!
//! ```text
//! pending ──► granted ──► consumed      the one attempt it authorized
//!    │  └───► denied                    a human's no (a recorded decision, not an error)
//!    ├──────► expired                   TTL passed unanswered (sticky: a clock jump back
//! granted ──► expired                    does not revive it)
//! granted ──► void                      the action's policy entry changed since the request
//! ```
//!
//! Every answer is judged by the [`ApprovalRule`] stored with the request when it was opened
//! (who may answer, how many must, what identity is required: [`crate::approver`]). The first
//! *decisive* answer wins: the quorum's last yes grants, and any entitled no denies. A second,
//! different answer is refused with the stored decision, and an identical repeat (the same
//! decision by the same approver) is an idempotent success that writes nothing (case B30). A caller that stops waiting changes
//! nothing (case B31). Expiry compares against one clock with no skew allowance (case B32).
//!
//! Every transition is decided by a pure function here ([`plan_answer`], [`plan_take`],
//! [`plan_open`]); store backends only read and write.

use std::fmt;

use serde::Serialize;

use crate::action::{ActionHash, canonical};
use crate::approver::{ApprovalRule, Approver, ApproverId, ApproverIdError, Channel, Credential};
use crate::clock::Timestamp;

pub use crate::id::ApprovalId;
use crate::id::{AttemptId, EffectKey, PolicyHash, Principal};

/// The longest note a person may keep with an answer, a withdrawal or a resolution, in bytes
/// (UTF-8): 4096. Every surface refuses a longer one before anything is recorded (the CLI's
/// `--note`, the approval service's API and forms, a chat surface's `countersign.interrupt/v1`
/// response), so a note never reads differently by where it was written.
pub const MAX_NOTE_BYTES: usize = 4096;

/// A note longer than [`MAX_NOTE_BYTES`]: refused before anything is judged or recorded (no
/// receipt carries it), by the store's plan, so every surface (the bindings too) gets the same
/// refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the note is {bytes} bytes long, and at most {MAX_NOTE_BYTES} bytes (UTF-8) are kept: shorten it and send the answer again"
)]
pub struct NoteTooLong {
    /// The note's length, in bytes (UTF-8).
    pub bytes: usize,
}

/// `Ok` when `note` is absent or at most [`MAX_NOTE_BYTES`] bytes long.
///
/// # Errors
///
/// [`NoteTooLong`] with the note's length otherwise.
pub fn check_note(note: Option<&str>) -> Result<(), NoteTooLong> {
    match note {
        Some(note) if note.len() > MAX_NOTE_BYTES => Err(NoteTooLong { bytes: note.len() }),
        _ => Ok(()),
    }
}

/// The state of an approval request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for a human.
    Pending,
    /// A human said yes; not yet used.
    Granted,
    /// A human said no.
    Denied,
    /// Used by the one attempt it authorized.
    Consumed,
    /// Its TTL passed before it was answered or used.
    Expired,
    /// The action's policy entry changed after the request; it authorizes nothing.
    Void,
    /// Its grant was taken back before it was used (by an approver who gave it, or an
    /// entitled resolver); it authorizes nothing (issue #31).
    Revoked,
    /// The operator cancelled it while it waited (an abandoned run); it left every inbox and
    /// no answer changes it (issue #31).
    Cancelled,
}

impl ApprovalState {
    /// The stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Granted => "granted",
            ApprovalState::Denied => "denied",
            ApprovalState::Consumed => "consumed",
            ApprovalState::Expired => "expired",
            ApprovalState::Void => "void",
            ApprovalState::Revoked => "revoked",
            ApprovalState::Cancelled => "cancelled",
        }
    }

    /// Parse a stored name.
    pub fn parse(text: &str) -> Option<ApprovalState> {
        Some(match text {
            "pending" => ApprovalState::Pending,
            "granted" => ApprovalState::Granted,
            "denied" => ApprovalState::Denied,
            "consumed" => ApprovalState::Consumed,
            "expired" => ApprovalState::Expired,
            "void" => ApprovalState::Void,
            "revoked" => ApprovalState::Revoked,
            "cancelled" => ApprovalState::Cancelled,
            _ => return None,
        })
    }
}

impl fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One approval request, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalRecord {
    /// Its identifier.
    pub id: ApprovalId,
    /// The action hash it is bound to.
    pub action_hash: ActionHash,
    /// The action name.
    pub action: String,
    /// The canonical arguments with secrets redacted: what the approver is shown.
    pub arguments: canonical::CanonicalJson,
    /// The principal asking.
    pub principal: Principal,
    /// The resource, if the policy names one.
    pub resource: Option<String>,
    /// The environment.
    pub environment: String,
    /// The effect key, if any.
    pub effect_key: Option<EffectKey>,
    /// The policy hash when the request was made.
    pub policy_hash: PolicyHash,
    /// The fingerprint of the governing policy entry when the request was made.
    pub entry_fingerprint: String,
    /// Its state.
    pub state: ApprovalState,
    /// When it was requested.
    pub created_at: Timestamp,
    /// When it expires: fixed at request time.
    pub expires_at: Timestamp,
    /// When it was answered, if it was.
    pub answered_at: Option<Timestamp>,
    /// Who gave the decisive answer (the quorum's last yes, or the no).
    pub approver: Option<String>,
    /// The decisive answer's note, quoted as data.
    pub note: Option<String>,
    /// When it was consumed, if it was.
    pub consumed_at: Option<Timestamp>,
    /// The attempt that consumed it (`att_…`).
    pub consumed_by: Option<AttemptId>,
    /// The run it was opened for (a framework's run or thread id), if any: not hashed. A
    /// run-scoped grant is consumed only by an attempt naming the same run, and an unscoped one
    /// only by an attempt naming none (SPEC 1.6).
    pub run: Option<String>,
    /// The rule every answer is judged by, fixed when the request was opened.
    pub rule: ApprovalRule,
    /// Every answer that counted, oldest first (one per approver).
    pub answers: Vec<RecordedAnswer>,
}

/// One answer that counted towards a request's decision, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedAnswer {
    /// Who answered, with the groups that were judged, the channel and the authentication.
    pub approver: Approver,
    /// Approve or reject.
    pub decision: AnswerDecision,
    /// When (UTC, RFC 3339 with milliseconds).
    pub answered_at: Timestamp,
    /// Their note, quoted as data.
    pub note: Option<String>,
    /// Did the surface echo the action hash it showed the approver? False only for answers
    /// through the programmatic API or the CLI without `--hash`.
    pub hash_confirmed: bool,
}

impl ApprovalRecord {
    /// The yes answers given so far.
    pub fn approvals_given(&self) -> u32 {
        let count = self
            .answers
            .iter()
            .filter(|answer| answer.decision == AnswerDecision::Approve)
            .count();
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// The approvers whose yes granted it: empty unless it is `granted` or `consumed`.
    pub fn granted_by(&self) -> Vec<&Approver> {
        if !matches!(self.state, ApprovalState::Granted | ApprovalState::Consumed) {
            return Vec::new();
        }
        self.answers
            .iter()
            .filter(|answer| answer.decision == AnswerDecision::Approve)
            .map(|answer| &answer.approver)
            .collect()
    }

    /// Is it expired at `now`? Expiry is `now >= expires_at`, with no skew allowance.
    pub fn is_expired_at(&self, now: Timestamp) -> bool {
        self.state == ApprovalState::Expired
            || (matches!(self.state, ApprovalState::Pending | ApprovalState::Granted)
                && now >= self.expires_at)
    }

    /// The request as a framework shows it to a human.
    pub fn to_pending(&self) -> PendingApproval {
        PendingApproval {
            request_id: self.id.clone(),
            action: self.action.clone(),
            arguments: self.arguments.to_value(),
            principal: self.principal.clone(),
            resource: self.resource.clone(),
            environment: self.environment.clone(),
            effect_key: self.effect_key.clone(),
            action_hash: self.action_hash.clone(),
            created_at: self.created_at,
            expires_at: self.expires_at,
            approvers: self.rule.summary(),
            quorum: self.rule.quorum,
            approvals_given: self.approvals_given(),
        }
    }
}

/// A human's decision: the closed set every surface maps its answer onto.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerDecision {
    /// Yes: grant the request (once the quorum is reached).
    Approve,
    /// No: deny the request. Every API calls a human's no `deny` (issue #19; this variant
    /// was `Reject`); on the wire and in stored answers it is still written `reject`, and
    /// every surface reads `deny` or `reject`.
    #[serde(rename = "reject")]
    Deny,
}

/// A submitted decision that is not one of the closed set (case B38): `null`, `true`, `1`,
/// `"yes"`, `{}`, an empty string, a missing key... It changes nothing and is recorded as a
/// refused answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidDecision {
    /// What was submitted, as compact JSON (`null` for a missing key).
    pub given: String,
}

impl AnswerDecision {
    /// The decision a surface submitted, strictly: only the JSON strings `"approve"`, `"deny"`
    /// and `"reject"` are decisions. Everything else — booleans, numbers, `"true"`, `"yes"`,
    /// other case, objects, `null` or a missing value (`None`) — is an [`InvalidDecision`].
    ///
    /// # Errors
    ///
    /// [`InvalidDecision`] holding what was given.
    pub fn from_submitted(
        value: Option<&serde_json::Value>,
    ) -> Result<AnswerDecision, InvalidDecision> {
        match value {
            Some(serde_json::Value::String(text)) => AnswerDecision::parse(text),
            Some(other) => Err(InvalidDecision {
                given: other.to_string(),
            }),
            None => Err(InvalidDecision {
                given: "null".to_owned(),
            }),
        }
    }

    /// Parse decision text strictly: `approve`, `deny` or `reject`, nothing else.
    ///
    /// # Errors
    ///
    /// [`InvalidDecision`] holding the text as a JSON string.
    pub fn parse(text: &str) -> Result<AnswerDecision, InvalidDecision> {
        match text {
            "approve" => Ok(AnswerDecision::Approve),
            "deny" | "reject" => Ok(AnswerDecision::Deny),
            other => Err(InvalidDecision {
                given: serde_json::Value::String(other.to_owned()).to_string(),
            }),
        }
    }

    /// `approve` or `reject`.
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerDecision::Approve => "approve",
            AnswerDecision::Deny => "reject",
        }
    }

    /// The state an answer moves a pending request to.
    pub fn state(self) -> ApprovalState {
        match self {
            AnswerDecision::Approve => ApprovalState::Granted,
            AnswerDecision::Deny => ApprovalState::Denied,
        }
    }
}

/// What a human answered, as a framework hands it back.
///
/// `approver` is what the operator's application knows about the person answering, passed on
/// the resuming call — an approver token ([`Credential::Token`]), or a bare name, which counts
/// as asserted. Never a name read from model output, tool arguments or run state.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalAnswer {
    /// Approve or reject.
    pub decision: AnswerDecision,
    /// Who answered. Required: an anonymous answer authorizes nothing.
    pub approver: Credential,
    /// The action hash the framework showed the human (from the pause payload). When set and
    /// different from the request's, the answer is refused `mismatch`.
    pub shown_hash: Option<ActionHash>,
    /// An optional note, kept and quoted as data.
    pub note: Option<String>,
    /// The arguments the human answered about, for frameworks whose resume carries them
    /// ([`FrameworkInterrupt::carries_approved_arguments`]).
    pub arguments: Option<serde_json::Value>,
}

/// An approval request as a framework shows it to a human: everything needed to decide.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PendingApproval {
    /// The request to answer.
    pub request_id: ApprovalId,
    /// The action name.
    pub action: String,
    /// The canonical arguments, secrets redacted.
    pub arguments: serde_json::Value,
    /// Who is asking.
    pub principal: Principal,
    /// The resource, if any.
    pub resource: Option<String>,
    /// The environment.
    pub environment: String,
    /// The effect key, if any.
    pub effect_key: Option<EffectKey>,
    /// The action hash the answer will be bound to.
    pub action_hash: ActionHash,
    /// When the request was made.
    pub created_at: Timestamp,
    /// When it expires (UTC, RFC 3339 when serialized).
    pub expires_at: Timestamp,
    /// Who may answer, in one line (the stored rule's summary).
    pub approvers: String,
    /// How many distinct approvers must say yes.
    pub quorum: u32,
    /// How many have so far.
    pub approvals_given: u32,
}

/// A framework call an approval request was opened for: `(framework, run, call id)`, held by
/// the kernel's store (first write wins) so an adapter never keeps a ledger of its own, and a
/// pause on one host can be resumed on another.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Correlation {
    /// The framework's name (`openai-agents`, `langgraph`, ...).
    pub framework: String,
    /// The run (or thread) id the call belongs to, if the framework has one.
    pub run: Option<String>,
    /// The framework's id for this call (a tool-call id). Never the authority: only a key to
    /// find the request, whose action hash is re-checked when the call runs.
    pub call_id: String,
}

/// Why a framework's interrupt gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum InterruptError {
    /// The framework paused the run to ask a human (it will resume later, in this or another
    /// process). The attempt ends with `ApprovalRequired`; the request stays pending.
    #[error("the run is paused waiting for a human")]
    Suspended,
    /// The interrupt itself failed.
    #[error("the framework's interrupt failed: {0}")]
    Failed(String),
}

/// A framework's own human-in-the-loop primitive, seen from the kernel.
///
/// Implemented by adapters; wrapped by the operator in a
/// [`crate::control::InterruptApprovalProvider`], which is the only place an adapter's answer
/// becomes a grant.
#[async_trait::async_trait]
pub trait FrameworkInterrupt: Send + Sync {
    /// The framework's name (for evidence and reports), such as `langgraph`.
    fn framework(&self) -> &str;
    /// Does the framework's resume carry the arguments the human answered about? When it does,
    /// the provider refuses an answer about other arguments.
    fn carries_approved_arguments(&self) -> bool;
    /// The channel its answers are recorded under: `interrupt:<framework>` unless the surface
    /// is one of the kernel's named channels (the MCP gateway's elicitation).
    fn channel(&self) -> Channel {
        Channel::Interrupt(self.framework().to_owned())
    }
    /// Ask a human through the framework.
    async fn interrupt(&self, pending: PendingApproval) -> Result<ApprovalAnswer, InterruptError>;
}

/// What to do with an answer from an approver the rule already accepted, given the stored
/// request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnswerPlan {
    /// Record it and move the request to `to`: `granted` (the quorum's last yes) or `denied`
    /// (any entitled no).
    Decide {
        /// The new state.
        to: ApprovalState,
    },
    /// Record a yes that leaves the request pending: `given` of `needed` approvals so far.
    Count {
        /// Yes answers after this one.
        given: u32,
        /// The quorum.
        needed: u32,
    },
    /// The same approver already gave this decision: succeed without writing.
    Repeat,
    /// A different decision by this approver, or a decided request: refuse with the stored
    /// state.
    AlreadyDecided {
        /// The stored state.
        state: ApprovalState,
    },
    /// The request is pending but its TTL has passed: record `expired`, then refuse.
    Expire,
    /// The request already expired.
    Expired,
}

/// Decide what an accepted approver's answer does to `record` at `now` (the first decisive
/// answer wins; no skew allowance).
///
/// Who may answer is decided before this, by [`crate::approver::judge`] against the stored
/// rule. Here: each approver counts once; a repeat is idempotent only when it is *identical*
/// (the same decision by the same approver); the same decision by someone else on a decided
/// request is refused with the stored one, so a second person is never told their answer was
/// recorded when it was not. A pending request needs `rule.quorum` distinct yeses; one no
/// denies it.
pub fn plan_answer(
    record: &ApprovalRecord,
    decision: AnswerDecision,
    approver_id: &str,
    now: Timestamp,
) -> AnswerPlan {
    match record.state {
        ApprovalState::Pending | ApprovalState::Granted if now >= record.expires_at => {
            AnswerPlan::Expire
        }
        ApprovalState::Expired => AnswerPlan::Expired,
        state => {
            let earlier = record
                .answers
                .iter()
                .find(|answer| answer.approver.id == approver_id);
            match (earlier, state) {
                (Some(earlier), _) if earlier.decision == decision => AnswerPlan::Repeat,
                (Some(_), state) => AnswerPlan::AlreadyDecided { state },
                (None, ApprovalState::Pending) => match decision {
                    AnswerDecision::Deny => AnswerPlan::Decide {
                        to: ApprovalState::Denied,
                    },
                    AnswerDecision::Approve => {
                        let given = record.approvals_given().saturating_add(1);
                        let needed = record.rule.quorum.max(1);
                        if given >= needed {
                            AnswerPlan::Decide {
                                to: ApprovalState::Granted,
                            }
                        } else {
                            AnswerPlan::Count { given, needed }
                        }
                    }
                },
                (None, state) => AnswerPlan::AlreadyDecided { state },
            }
        }
    }
}

/// The approver a [`Credential`] stands for under `rule`, at `now`, through `channel`.
///
/// A bare name is [`crate::approver::Authentication::Asserted`], with groups from the rule's
/// directory only. A [`Credential::Verified`] identity keeps the authentication its surface
/// established, and its groups add to the directory's unless that is `asserted`. A token is verified by [`crate::token::verify`] against the keys stored
/// with the rule; its `sub` is the id and its `groups` claim adds to the directory's.
///
/// Every id (a name, a verified identity, a token's `sub`) must have the one shape of
/// [`ApproverId`] (issue #19), so `human:`, `:` or `human: bob` never reach a receipt.
///
/// # Errors
///
/// [`ApproverFault::Anonymous`] for an empty name (an anonymous answer);
/// [`ApproverFault::Malformed`] for an id of another shape; [`ApproverFault::Unverified`]
/// for a token that does not verify, with what is wrong (never the token itself), or a source
/// that vouches for nobody.
pub fn approver_of(
    rule: &ApprovalRule,
    credential: &Credential,
    channel: Channel,
    now: Timestamp,
) -> Result<Approver, ApproverFault> {
    use crate::approver::Authentication;
    match credential {
        Credential::Asserted(name) => {
            let name = shaped(name)?;
            Ok(rule.approver(&name, &[], channel, Authentication::Asserted))
        }
        Credential::Verified {
            id,
            groups,
            authentication,
        } => {
            let id = shaped(id)?;
            Ok(rule.approver(&id, groups, channel, *authentication))
        }
        Credential::Unverified { source, reason } => {
            Err(ApproverFault::Unverified(format!("{source}: {reason}")))
        }
        Credential::Token(token) => {
            let keys = rule
                .keys
                .iter()
                .filter_map(|text| crate::token::PublicKey::parse(text).ok())
                .collect::<Vec<_>>();
            let verified = crate::token::verify(token, &keys, now)
                .map_err(|error| ApproverFault::Unverified(error.to_string()))?;
            let subject = ApproverId::parse(&verified.subject).map_err(ApproverFault::Malformed)?;
            Ok(rule.approver(&subject, &verified.groups, channel, Authentication::Token))
        }
    }
}

/// A name a person typed, trimmed, as an [`ApproverId`]; blank is anonymous.
fn shaped(name: &str) -> Result<ApproverId, ApproverFault> {
    let name = name.trim();
    if name.is_empty() {
        return Err(ApproverFault::Anonymous);
    }
    ApproverId::parse(name).map_err(ApproverFault::Malformed)
}

/// Why a [`Credential`] stands for no approver ([`approver_of`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApproverFault {
    /// No name at all: an anonymous answer (`no_approver`).
    Anonymous,
    /// A name or id that is not an [`ApproverId`] (`invalid_approver`).
    Malformed(ApproverIdError),
    /// A token that does not verify, or a source that vouches for nobody
    /// (`not_authenticated`), with what is wrong.
    Unverified(String),
}

/// What to do with a presented approval, given the stored request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TakePlan {
    /// Consume it (in the same transaction as the effect reservation).
    Consume,
    /// Refuse; if `mark` is set, first move the request to that state.
    Refuse {
        /// Why.
        refusal: TakeRefusal,
        /// A state to record before refusing (`expired` or `void`).
        mark: Option<ApprovalState>,
    },
}

/// Why a presented approval authorizes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TakeRefusal {
    /// No such request.
    Unknown,
    /// Not answered yet.
    Pending,
    /// A human said no.
    Denied,
    /// Already used.
    Consumed,
    /// Past its TTL.
    Expired,
    /// Granted for a different action hash.
    Mismatch,
    /// Opened for another run (or for a run, presented by an attempt naming none, or the
    /// reverse): a run-scoped grant does not leak to another run (case B42).
    OtherRun,
    /// The action's policy entry changed since the request.
    PolicyChanged,
    /// Its grant was revoked before it was used.
    Revoked,
    /// The operator cancelled the request.
    Cancelled,
}

/// Decide whether a presented approval authorizes an attempt with `action_hash` in `run` under
/// the policy entry `fingerprint` at `now`.
///
/// Order: a hash mismatch is reported first (the answer was about something else, and the
/// request is left as it is); then another run's request (left as it is: its own run may still
/// use it, case B42); then expiry; then a changed policy entry (the request is voided: case
/// B05); then consumption.
pub fn plan_take(
    record: Option<&ApprovalRecord>,
    action_hash: &ActionHash,
    fingerprint: &str,
    run: Option<&str>,
    now: Timestamp,
) -> TakePlan {
    let refuse = |refusal, mark| TakePlan::Refuse { refusal, mark };
    let Some(record) = record else {
        return refuse(TakeRefusal::Unknown, None);
    };
    if &record.action_hash != action_hash {
        return refuse(TakeRefusal::Mismatch, None);
    }
    if record.run.as_deref() != run {
        return refuse(TakeRefusal::OtherRun, None);
    }
    match record.state {
        ApprovalState::Pending | ApprovalState::Granted if now >= record.expires_at => {
            refuse(TakeRefusal::Expired, Some(ApprovalState::Expired))
        }
        ApprovalState::Pending => refuse(TakeRefusal::Pending, None),
        ApprovalState::Granted if record.entry_fingerprint != fingerprint => {
            refuse(TakeRefusal::PolicyChanged, Some(ApprovalState::Void))
        }
        ApprovalState::Granted => TakePlan::Consume,
        ApprovalState::Denied => refuse(TakeRefusal::Denied, None),
        ApprovalState::Consumed => refuse(TakeRefusal::Consumed, None),
        ApprovalState::Expired => refuse(TakeRefusal::Expired, None),
        ApprovalState::Void => refuse(TakeRefusal::PolicyChanged, None),
        ApprovalState::Revoked => refuse(TakeRefusal::Revoked, None),
        ApprovalState::Cancelled => refuse(TakeRefusal::Cancelled, None),
    }
}

/// What to do when policy says `approve` and nothing was presented.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpenPlan {
    /// A granted, unexpired request for this hash and policy entry exists: take it.
    UseGranted(ApprovalId),
    /// A pending, unexpired request exists: do not ask twice (re-entry is idempotent).
    Existing(ApprovalId),
    /// A human denied this exact action and the denial still stands (until that request's
    /// `expires_at`): refuse without asking again (case B34).
    Denied(ApprovalId),
    /// Create a new pending request.
    Create,
}

/// Decide how to open an approval for `action_hash` in `run`, given its existing requests
/// (any order), under the policy entry `fingerprint` at `now`. Also returns state marks to
/// record first: expired requests become `expired`, granted or pending ones under a changed
/// entry `void`.
///
/// A pending or granted request is reused only for the same run (and, with `reuse` false —
/// a correlated call that has no request yet — not at all: each framework call gets its own
/// request and needs its own answer). A denial is not scoped: it stands for the action hash in
/// every run until it expires.
pub fn plan_open(
    existing: &[ApprovalRecord],
    fingerprint: &str,
    run: Option<&str>,
    reuse: bool,
    now: Timestamp,
) -> (OpenPlan, Vec<(ApprovalId, ApprovalState)>) {
    let mut marks = Vec::new();
    let mut granted = None;
    let mut pending = None;
    let mut denied = None;
    let mut newest_first: Vec<&ApprovalRecord> = existing.iter().collect();
    newest_first.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
    for record in newest_first {
        match record.state {
            ApprovalState::Pending | ApprovalState::Granted if now >= record.expires_at => {
                marks.push((record.id.clone(), ApprovalState::Expired));
            }
            ApprovalState::Pending | ApprovalState::Granted
                if record.entry_fingerprint != fingerprint =>
            {
                marks.push((record.id.clone(), ApprovalState::Void));
            }
            ApprovalState::Granted if reuse && record.run.as_deref() == run => {
                granted.get_or_insert_with(|| record.id.clone());
            }
            ApprovalState::Pending if reuse && record.run.as_deref() == run => {
                pending.get_or_insert_with(|| record.id.clone());
            }
            ApprovalState::Denied if now < record.expires_at => {
                denied.get_or_insert_with(|| record.id.clone());
            }
            _ => {}
        }
    }
    // An explicit "no" beats anything granted earlier for the same hash (case B01).
    let plan = match (denied, granted, pending) {
        (Some(id), _, _) => OpenPlan::Denied(id),
        (None, Some(id), _) => OpenPlan::UseGranted(id),
        (None, None, Some(id)) => OpenPlan::Existing(id),
        (None, None, None) => OpenPlan::Create,
    };
    (plan, marks)
}

pub mod withdraw;

#[cfg(test)]
mod tests;
