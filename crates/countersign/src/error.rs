//! Errors: refusals, answer errors and store errors.
//!
//! [`ControlError`] is one exhaustive enum so that a new refusal forces every adapter to decide
//! what to do with it. Every variant answers two questions, by [`ControlError::did_run`] and
//! [`ControlError::may_retry`]: did this attempt run, and may the caller retry? Every variant
//! also has a stable [`ControlError::reason`] code, the same string in receipts, the CLI, the
//! gateway and the Python binding.
//!
//! Policy load and configuration errors are a separate type, [`crate::policy::LoadError`],
//! which carries file, line and column.

use std::time::Duration;

use crate::action::ActionHash;
use crate::action::canonical::CanonicalError;
use crate::approval::{ApprovalId, ApprovalState};
use crate::approver::ApproverIdError;
use crate::clock::Timestamp;
use crate::effect::{EffectKey, ResolveRefusal};
use crate::id::PolicyHash;
use crate::policy::TemplateError;

mod classify;
mod reason;
mod report;

pub use reason::{DenyReason, Reason};
pub use report::ErrorReport;

/// Did an attempt's executor run?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DidRun {
    /// The executor was not called by this attempt.
    No,
    /// The executor was called and its outcome is unknown: it may have had its effect.
    Maybe,
}

/// Why [`crate::Control::execute`] did not return the executor's value.
///
/// Refusals before the reservation did not run the executor. [`ControlError::NotExecuted`]
/// ran it and it said "definitely not executed": a retry is allowed.
/// [`ControlError::OutcomeUnknown`] ran it and nobody knows what happened: the effect is
/// ambiguous and retries are refused until it is resolved.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// An argument cannot be represented in canonical form (NaN, infinity, `-0`, an integer
    /// outside ±(2^53−1), ...). Nothing was written.
    #[error("not executed: arguments of `{action}` are not representable: {source}")]
    InvalidArguments {
        /// The action name.
        action: String,
        /// What is wrong, with its JSON Pointer path.
        source: CanonicalError,
    },
    /// The effect or resource template could not be rendered from the arguments. Nothing was
    /// written.
    #[error("not executed: `{action}`: {source}")]
    Template {
        /// The action name.
        action: String,
        /// What is wrong.
        source: TemplateError,
    },
    /// The identity provider vouched for no principal: no principal, no action. Nothing was
    /// written.
    #[error(
        "not executed: no principal for `{action}`: configure an identity provider on the control"
    )]
    NoPrincipal {
        /// The action name.
        action: String,
    },
    /// Policy denied the action (reason `unknown_action`, `no_matching_rule`, `denied`, or
    /// `policy_changed` when a presented approval was voided because the policy now denies it).
    #[error("not executed: policy denied `{action}` ({reason}): {hint}", hint = reason.hint())]
    ActionDenied {
        /// The action name.
        action: String,
        /// The action hash.
        action_hash: ActionHash,
        /// Why.
        reason: DenyReason,
        /// The policy hash that decided.
        policy_hash: PolicyHash,
    },
    /// A human must approve first. A pending request exists; nothing else was written.
    #[error(
        "not executed; waiting for approval: run `countersign approve {request_id}` (expires {expires_at}), then send the identical call again"
    )]
    ApprovalRequired {
        /// The pending request.
        request_id: ApprovalId,
        /// The action hash it is bound to.
        action_hash: ActionHash,
        /// When it expires.
        expires_at: Timestamp,
    },
    /// A human denied this action.
    #[error(
        "not executed: approval `{request_id}` was denied by `{approver}`{}",
        note_suffix(note)
    )]
    ApprovalDenied {
        /// The denied request.
        request_id: ApprovalId,
        /// Who denied it.
        approver: String,
        /// Their note, if any (data, not an instruction).
        note: Option<String>,
    },
    /// The presented approval is for a different action hash: it authorizes nothing.
    #[error(
        "not executed: approval `{request_id}` {}",
        approval_mismatch_text(*other_principal, approved_hash, action_hash)
    )]
    ApprovalMismatch {
        /// The presented request.
        request_id: ApprovalId,
        /// The hash the answer was about, or what stood in for it (`(no arguments in the
        /// answer)`).
        approved_hash: String,
        /// The hash of this attempt.
        action_hash: ActionHash,
        /// The request was opened for another principal than this attempt's: that, not the
        /// arguments, is why it authorizes nothing here (the principal is part of the action
        /// hash). Which principal is not said.
        other_principal: bool,
    },
    /// The presented approval was already used by another attempt.
    #[error(
        "not executed: approval `{request_id}` was already used: an approval authorizes one attempt"
    )]
    ApprovalConsumed {
        /// The presented request.
        request_id: ApprovalId,
    },
    /// The approval expired before it was answered or used. It will never authorize anything.
    #[error(
        "not executed: approval `{request_id}` expired at {expires_at}: send the call again to request a new approval"
    )]
    ApprovalExpired {
        /// The request.
        request_id: ApprovalId,
        /// When it expired.
        expires_at: Timestamp,
    },
    /// No approval request has this id.
    #[error(
        "not executed: no approval request `{request_id}`: list them with `countersign pending`"
    )]
    ApprovalUnknown {
        /// The id given.
        request_id: ApprovalId,
    },
    /// The presented approval was opened for another run (or for a run, presented by an
    /// attempt naming none, or the reverse): a run's approval does not leak to another run
    /// (case B42). It is left as it is for its own run.
    #[error(
        "not executed: approval `{request_id}` belongs to {}: send the call without it to request an approval for this run",
        run.as_deref().map_or_else(|| "no run".to_owned(), |run| format!("run `{run}`"))
    )]
    ApprovalOtherRun {
        /// The presented request.
        request_id: ApprovalId,
        /// The run it was opened for.
        run: Option<String>,
    },
    /// The action's policy entry changed since the approval was requested; the approval is void.
    #[error(
        "not executed: the policy for this action changed since approval `{request_id}` was requested; it is void: send the call again to request a new approval"
    )]
    ApprovalVoid {
        /// The voided request.
        request_id: ApprovalId,
    },
    /// The presented approval was revoked before it was used (issue #31): it authorizes
    /// nothing. Did not run; a retry needs a new approval.
    #[error(
        "not executed: approval `{request_id}` was revoked before it was used: send the call again to request a new approval"
    )]
    ApprovalRevoked {
        /// The revoked request.
        request_id: ApprovalId,
    },
    /// The presented approval request was cancelled by the operator (issue #31): it
    /// authorizes nothing. Did not run; a retry needs a new approval.
    #[error(
        "not executed: approval `{request_id}` was cancelled by the operator: send the call again to request a new approval"
    )]
    ApprovalCancelled {
        /// The cancelled request.
        request_id: ApprovalId,
    },
    /// The answer handed back through a framework's interrupt was refused (`not_entitled`,
    /// `not_authenticated`, `self_approval`, `invalid_decision`, `mismatch`, `already_decided`,
    /// `no_approver`): it authorizes nothing, and the request stays as it was for an entitled
    /// approver to answer.
    #[error(
        "not executed: the answer to approval `{request_id}` was refused ({reason}): {message}"
    )]
    AnswerRefused {
        /// The request.
        request_id: ApprovalId,
        /// The answer refusal's reason ([`AnswerError::kind`]).
        reason: Reason,
        /// What happened and what to do next.
        message: String,
    },
    /// The framework's interrupt failed; the request stays pending.
    #[error(
        "not executed: asking for approval `{request_id}` through {framework} failed: {message}"
    )]
    InterruptFailed {
        /// The pending request.
        request_id: ApprovalId,
        /// The framework.
        framework: String,
        /// What it said.
        message: String,
    },
    /// The effect key was already used: the effect happened (`committed`) or another attempt
    /// holds it (`in_progress`).
    #[error("not executed: effect `{effect_key}` {}", duplicate_text(*in_progress))]
    DuplicateEffect {
        /// The effect key.
        effect_key: EffectKey,
        /// True when another attempt holds a live lease; false when the effect is committed.
        in_progress: bool,
    },
    /// A previous attempt on this effect key may have run and its outcome is unknown.
    #[error(
        "not executed: effect `{effect_key}` has an unknown outcome from an earlier attempt: find out what happened, then run `countersign resolve {} --committed` or `--failed`",
        crate::evidence::shell_word(.effect_key.as_str())
    )]
    AmbiguousEffect {
        /// The effect key.
        effect_key: EffectKey,
    },
    /// The executor said the effect definitely did not happen. Retry allowed.
    #[error("not executed: {message}")]
    NotExecuted {
        /// The effect key, if any (now `failed`).
        effect_key: Option<EffectKey>,
        /// The executor's reason.
        message: String,
        /// What the executor kept ([`crate::ExecutorError::with_evidence`]), if anything.
        evidence: Option<serde_json::Value>,
    },
    /// The executor ran and its outcome is unknown (an error, a panic, a timeout, a dropped
    /// future). The effect is `ambiguous`; retries are refused until resolved.
    #[error("outcome unknown: `{action}` may have run ({cause}){}", resolve_hint(effect_key.as_ref()))]
    OutcomeUnknown {
        /// The action name.
        action: String,
        /// The effect key, if any (now `ambiguous`).
        effect_key: Option<EffectKey>,
        /// What happened.
        cause: String,
        /// What the executor kept ([`crate::ExecutorError::with_evidence`]), if anything.
        evidence: Option<serde_json::Value>,
    },
    /// The store failed.
    #[error("{}{source}", store_prefix(*after_run))]
    Store {
        /// True when the failure came after the executor ran (its outcome may be unrecorded; the
        /// lease will turn the effect ambiguous).
        after_run: bool,
        /// The store error.
        source: StoreError,
    },
    /// A bug in Countersign: please report it with this message.
    #[error("internal error (please report it): {0}")]
    Internal(String),
}

fn note_suffix(note: &Option<String>) -> String {
    match note {
        Some(note) => format!(" with the note \"{}\"", note.escape_debug()),
        None => String::new(),
    }
}

fn approval_mismatch_text(
    other_principal: bool,
    approved_hash: &str,
    action_hash: &ActionHash,
) -> String {
    if other_principal {
        "was requested by another principal, and authorizes only that principal's call: make this call without it to request an approval of its own".to_owned()
    } else {
        format!(
            "was given for different arguments ({approved_hash}), not for this action ({action_hash}): request a new approval for these arguments"
        )
    }
}

fn duplicate_text(in_progress: bool) -> &'static str {
    if in_progress {
        "is in progress in another attempt: wait for it to finish, then check `countersign effects`"
    } else {
        "was already committed: it runs at most once"
    }
}

fn resolve_hint(effect_key: Option<&EffectKey>) -> String {
    match effect_key {
        Some(key) => format!(
            ": retries are refused until someone runs `countersign resolve {} --committed` or `--failed`",
            crate::evidence::shell_word(key.as_str())
        ),
        None => ": check before trying again".to_owned(),
    }
}

fn store_prefix(after_run: bool) -> &'static str {
    if after_run {
        "outcome unrecorded: the executor ran but the store failed: "
    } else {
        "not executed: "
    }
}

/// Why an answer (`countersign approve` / `deny`, or a framework's answer) was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// No request has this id.
    #[error("no approval request `{request_id}`: list them with `countersign pending`")]
    Unknown {
        /// The id given.
        request_id: ApprovalId,
    },
    /// The request was already decided differently, or (still `pending`, waiting for a
    /// quorum) this approver already gave another answer; the first answer stands.
    #[error("{}", already_decided_text(request_id, *state, approver))]
    AlreadyDecided {
        /// The request.
        request_id: ApprovalId,
        /// Its stored state.
        state: ApprovalState,
        /// Who answered first (for a `pending` request: this approver, whose earlier answer
        /// was counted).
        approver: Option<String>,
    },
    /// The request expired before the answer.
    #[error(
        "approval `{request_id}` expired at {expires_at}: the agent must send the call again to request a new approval"
    )]
    Expired {
        /// The request.
        request_id: ApprovalId,
        /// When it expired.
        expires_at: Timestamp,
    },
    /// The request was cancelled by the operator (issue #31): no answer changes it. The
    /// request is unchanged.
    #[error(
        "approval `{request_id}` was cancelled by the operator: it authorizes nothing and no answer changes it; the agent must send the call again to request a new approval"
    )]
    Cancelled {
        /// The request.
        request_id: ApprovalId,
    },
    /// The request's grant was revoked (issue #31): no answer changes it. The request is
    /// unchanged.
    #[error(
        "approval `{request_id}` was revoked: it authorizes nothing and no answer changes it; the agent must send the call again to request a new approval"
    )]
    Revoked {
        /// The request.
        request_id: ApprovalId,
    },
    /// A revocation of a grant that was already used (issue #31): the attempt it authorized
    /// has started, so nothing can take it back. Nothing changed.
    #[error(
        "approval `{request_id}` was already used: a consumed grant cannot be revoked; see `countersign inspect {request_id}` for its attempt"
    )]
    Consumed {
        /// The request.
        request_id: ApprovalId,
    },
    /// A revocation or cancellation of a request in a state it cannot leave (`denied`,
    /// `expired`, `void`; or for a revocation, `pending` with no yes from this approver).
    /// Nothing changed.
    #[error(
        "approval `{request_id}` is `{}`: there is nothing to take back",
        state.as_str()
    )]
    NotRevocable {
        /// The request.
        request_id: ApprovalId,
        /// Its stored state.
        state: ApprovalState,
    },
    /// The answer named no approver.
    #[error("an answer needs an approver: say who is answering (for example `--as alice`)")]
    NoApprover,
    /// The approver is the principal that asked for the approval, or shares a group with it
    /// under `distinct_from_requester: true`: an action is never approved (or denied) by the
    /// identity that requested it. A refusal receipt was written; the request is unchanged.
    #[error(
        "`{approver}` cannot answer approval `{request_id}`: {}: a different identity must answer",
        self_reason(shared_group)
    )]
    SelfApproval {
        /// The request.
        request_id: ApprovalId,
        /// The approver named.
        approver: String,
        /// The group it shares with the requesting principal, when that is the reason.
        shared_group: Option<String>,
    },
    /// The submitted decision is not `approve` or `deny` (case B38). A refusal receipt was
    /// written; the request is unchanged.
    #[error(
        "`{given}` is not a decision for approval `{request_id}`: answer `approve` or `deny`; the request is unchanged"
    )]
    InvalidDecision {
        /// The request.
        request_id: ApprovalId,
        /// What was submitted, as compact JSON.
        given: String,
    },
    /// The answer's approver id is not of the one shape ([`crate::approver::ApproverId`]:
    /// `human:`, `:` or `human: bob` are refused, issue #19). A refusal receipt was written;
    /// the request is unchanged.
    #[error("cannot answer approval `{request_id}`: {error}")]
    InvalidApprover {
        /// The request.
        request_id: ApprovalId,
        /// What was given and the expected shape.
        error: ApproverIdError,
    },
    /// The request's rule requires an authenticated approver and the answer's identity is
    /// asserted, or its token did not verify. A refusal receipt was written; the request is
    /// unchanged.
    #[error("{}", not_authenticated_text(request_id, approver.as_deref(), detail))]
    NotAuthenticated {
        /// The request.
        request_id: ApprovalId,
        /// Who the answer claimed to be, when known (never the token).
        approver: Option<String>,
        /// What is wrong.
        detail: String,
    },
    /// No entitlement pattern of the request's stored rule matches the approver. A refusal
    /// receipt was written; the request is unchanged.
    #[error(
        "`{approver}` may not {act} approval `{request_id}`: that is for {approvers}; ask one of them"
    )]
    NotEntitled {
        /// The request.
        request_id: ApprovalId,
        /// The approver named.
        approver: String,
        /// Who may (the stored rule's summary, or its resolvers' for a cancellation).
        approvers: String,
        /// What was refused: `answer`, `revoke` or `cancel` (found by a first-time user: a
        /// refused cancellation said "may not answer").
        act: &'static str,
    },
    /// The action hash the surface showed is not the request's: the person saw a different
    /// action (a stale card, an edited payload). A refusal receipt was written; the request is
    /// unchanged.
    #[error("{}", mismatch_text(request_id, shown, action_hash))]
    Mismatch {
        /// The request.
        request_id: ApprovalId,
        /// The hash the surface echoed, or `(none)` when a surface that must echo it did not.
        shown: String,
        /// The request's action hash.
        action_hash: ActionHash,
    },
    /// The note is longer than [`crate::approval::MAX_NOTE_BYTES`]; nothing was recorded.
    #[error(transparent)]
    NoteTooLong(#[from] crate::approval::NoteTooLong),
    /// The store failed; the answer may not be recorded: check with `countersign inspect`.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The text of [`AnswerError::NotAuthenticated`]. With an approver, an asserted name met a rule
/// that requires a token; without one, the token itself was refused (it did not verify against
/// the keys stored with the request, or it was revoked), whatever the rule requires, and the way
/// out is another token or, where the rule accepts it, a typed name.
fn not_authenticated_text(request_id: &ApprovalId, approver: Option<&str>, detail: &str) -> String {
    match approver {
        Some(_) => format!(
            "approval `{request_id}` needs an authenticated approver: {detail}: pass an approver token with `--token-file FILE` or `COUNTERSIGN_APPROVER_TOKEN` (`countersign approver token` issues one)"
        ),
        None => format!(
            "the approver token given for approval `{request_id}` was refused: {detail} (a token is checked against the keys stored with the request when it was opened); where the request's rule accepts a typed name, answer with `--as NAME` instead"
        ),
    }
}

/// The text of [`AnswerError::Mismatch`]: a hash that differs says to look again; a missing one
/// (`(none)`) says which field carries it on each surface, so an HTTP caller is not sent to
/// the CLI.
fn mismatch_text(request_id: &ApprovalId, shown: &str, action_hash: &ActionHash) -> String {
    if shown == "(none)" {
        format!(
            "the answer to approval `{request_id}` did not echo the action hash it was given about, and this surface must: send the hash the person was shown with the answer (`action_hash` in the approval service's API, `--hash` on the CLI); the request is for {action_hash}"
        )
    } else {
        format!(
            "the answer to approval `{request_id}` was given about {shown}, but the request is for {action_hash}: look at the request again (its page, the API's `GET /api/v1/approvals/{request_id}`, or `countersign inspect {request_id}`) and answer what it shows"
        )
    }
}

fn already_decided_text(
    request_id: &ApprovalId,
    state: ApprovalState,
    approver: &Option<String>,
) -> String {
    match (state, approver) {
        (ApprovalState::Pending, Some(approver)) => format!(
            "`{approver}` already answered approval `{request_id}` and that answer is counted: a changed answer from the same approver is refused; the request waits for other approvers"
        ),
        _ => format!(
            "approval `{request_id}` was already answered: it is `{state}`{}; the first answer stands",
            by_suffix(approver)
        ),
    }
}

fn by_suffix(approver: &Option<String>) -> String {
    match approver {
        Some(approver) => format!(" by `{approver}`"),
        None => String::new(),
    }
}

impl AnswerError {
    /// The request the answer was for, when the error knows it.
    pub fn request_id(&self) -> Option<&ApprovalId> {
        match self {
            AnswerError::Unknown { request_id }
            | AnswerError::AlreadyDecided { request_id, .. }
            | AnswerError::Expired { request_id, .. }
            | AnswerError::SelfApproval { request_id, .. }
            | AnswerError::InvalidDecision { request_id, .. }
            | AnswerError::InvalidApprover { request_id, .. }
            | AnswerError::NotAuthenticated { request_id, .. }
            | AnswerError::NotEntitled { request_id, .. }
            | AnswerError::Mismatch { request_id, .. }
            | AnswerError::Cancelled { request_id }
            | AnswerError::Revoked { request_id }
            | AnswerError::Consumed { request_id }
            | AnswerError::NotRevocable { request_id, .. } => Some(request_id),
            AnswerError::NoApprover | AnswerError::NoteTooLong(_) | AnswerError::Store(_) => None,
        }
    }

    /// Was the answer refused by the rule or the contract (a refusal receipt was written and
    /// the request is unchanged), as opposed to a state that no answer can change?
    pub fn is_refused_answer(&self) -> bool {
        matches!(
            self,
            AnswerError::SelfApproval { .. }
                | AnswerError::InvalidDecision { .. }
                | AnswerError::InvalidApprover { .. }
                | AnswerError::NotAuthenticated { .. }
                | AnswerError::NotEntitled { .. }
                | AnswerError::Mismatch { .. }
        )
    }

    /// The typed reason: [`Reason`], exhaustive.
    pub fn kind(&self) -> Reason {
        match self {
            AnswerError::Unknown { .. } => Reason::UnknownRequest,
            AnswerError::AlreadyDecided { .. } => Reason::AlreadyDecided,
            AnswerError::Expired { .. } => Reason::Expired,
            AnswerError::NoApprover => Reason::NoApprover,
            AnswerError::NoteTooLong(_) => Reason::NoteTooLong,
            AnswerError::SelfApproval { .. } => Reason::SelfApproval,
            AnswerError::InvalidDecision { .. } => Reason::InvalidDecision,
            AnswerError::InvalidApprover { .. } => Reason::InvalidApprover,
            AnswerError::NotAuthenticated { .. } => Reason::NotAuthenticated,
            AnswerError::NotEntitled { .. } => Reason::NotEntitled,
            AnswerError::Mismatch { .. } => Reason::Mismatch,
            AnswerError::Cancelled { .. } => Reason::Cancelled,
            AnswerError::Revoked { .. } => Reason::Revoked,
            AnswerError::Consumed { .. } => Reason::Consumed,
            AnswerError::NotRevocable { .. } => Reason::NotRevocable,
            AnswerError::Store(source) => source.kind(),
        }
    }

    /// The stable reason code: [`AnswerError::kind`]'s wire string.
    pub fn reason(&self) -> &'static str {
        self.kind().as_str()
    }
}

fn self_reason(shared_group: &Option<String>) -> String {
    match shared_group {
        Some(group) => format!(
            "it shares the group `{group}` with the principal that asked, and the rule wants an approver from outside it"
        ),
        None => "it is the principal that asked".to_owned(),
    }
}

/// Why `countersign resolve` (or a reconcile hook's answer) was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The resolution is not allowed from the current state.
    #[error("cannot resolve `{effect_key}`: {refusal}")]
    Refused {
        /// The key.
        effect_key: EffectKey,
        /// Why.
        refusal: ResolveRefusal,
    },
    /// The resolver may not resolve this effect (`no_approver`, `not_authenticated`,
    /// `not_entitled`, `self_approval`); a refusal receipt was written and the effect is
    /// unchanged.
    #[error("cannot resolve `{effect_key}` ({reason}): {message}")]
    NotPermitted {
        /// The key.
        effect_key: EffectKey,
        /// The stable reason code.
        reason: &'static str,
        /// What happened and what to do next.
        message: String,
    },
    /// The note is longer than [`crate::approval::MAX_NOTE_BYTES`]; nothing was recorded.
    #[error(transparent)]
    NoteTooLong(#[from] crate::approval::NoteTooLong),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A store failure, mapped to one neutral kind whatever the backend calls it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database stayed busy (another process held its write lock) for longer than the
    /// bounded wait. Nothing was written.
    #[error(
        "store busy: the database stayed locked for {waited:?}; nothing was written: try again"
    )]
    Busy {
        /// How long the store waited.
        waited: Duration,
    },
    /// The connection failed while committing: whether the write landed is unknown, and
    /// re-reading could not settle it.
    #[error(
        "store state unknown: the connection failed while committing `{operation}` and re-reading could not tell whether it landed: check with `countersign inspect` before retrying"
    )]
    OutcomeUnknown {
        /// The operation.
        operation: &'static str,
    },
    /// The database was written by a newer Countersign.
    #[error(
        "store schema version {found} is newer than this Countersign supports ({supported}): upgrade Countersign"
    )]
    Incompatible {
        /// The version found.
        found: i64,
        /// The newest version supported.
        supported: i64,
    },
    /// A stored row could not be read back.
    #[error("store holds an unreadable record ({detail}): run `countersign receipts --verify`")]
    Corrupt {
        /// What was wrong.
        detail: String,
    },
    /// The store URL or path could not be used.
    #[error("cannot open store `{location}`: {message}")]
    Open {
        /// The URL or path.
        location: String,
        /// Why.
        message: String,
    },
    /// No store is where a reader looked: a PostgreSQL database or `?schema=` that holds none
    /// of a store's tables ([`crate::store::open_url_for_reading`], which never creates one).
    /// Apart from [`StoreError::Open`] so that a reader can say "nothing recorded here yet"
    /// (`countersign verify` exits 3, unverifiable, as for a SQLite file that does not exist)
    /// instead of failing. Its reason is `store_open`.
    #[error("cannot open store `{location}`: {message}")]
    NoStore {
        /// The URL, without its password.
        location: String,
        /// Where it looked, and what to do.
        message: String,
    },
    /// Any other failure of the database engine.
    #[error("store error: {message}")]
    Backend {
        /// The backend's message.
        message: String,
    },
    /// A bug in Countersign's store code (an invariant broken, a lock poisoned by an earlier
    /// panic), never the database's fault: please report it. Nothing was written.
    #[error("internal error (please report it): {detail}")]
    Internal {
        /// What broke.
        detail: String,
    },
}

impl StoreError {
    /// The typed reason: [`Reason`], exhaustive.
    pub fn kind(&self) -> Reason {
        match self {
            StoreError::Busy { .. } => Reason::StoreBusy,
            StoreError::OutcomeUnknown { .. } => Reason::StoreOutcomeUnknown,
            StoreError::Incompatible { .. } => Reason::StoreIncompatible,
            StoreError::Corrupt { .. } => Reason::StoreCorrupt,
            StoreError::Open { .. } | StoreError::NoStore { .. } => Reason::StoreOpen,
            StoreError::Backend { .. } => Reason::StoreError,
            StoreError::Internal { .. } => Reason::Internal,
        }
    }

    /// The stable reason code: [`StoreError::kind`]'s wire string.
    pub fn reason(&self) -> &'static str {
        self.kind().as_str()
    }

    /// Might the same operation succeed if tried again later?
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Busy { .. })
    }
}
