//! Effects: the at-most-once half of the kernel.
//!
//! An action whose policy entry has an `effect` template gets an [`EffectKey`] such as
//! `refund:pi_1`. Before the executor runs, the key is reserved in the store; the record then
//! moves through
//!
//! ```text
//! reserved ──► committed            executor returned Ok
//!     │  ├───► failed               executor returned ExecutorError::NotExecuted (retry allowed)
//!     │  └───► ambiguous            any other error, a panic, a timeout, a dropped future
//!     └──────► ambiguous            the lease expired with no outcome (crash, kill -9)
//! ambiguous ──► committed | failed  only by `countersign resolve` or a ReconcileHook
//! failed ─────► reserved            a new attempt
//! ```
//!
//! `reserved` covers DESIGN.md's `reserved → executing`: the executor starts right after the
//! reservation commits, and the kernel does not spend a second transaction to say so. A lease
//! that lapses on a reserved record therefore means "may have run", never "did not run".
//!
//! Which attempt may proceed is one pure function, [`retry_decision`], shared by every store
//! backend: backends only read and write.

use std::fmt;

use serde::Serialize;

use crate::clock::Timestamp;
use crate::id::{ActionHash, ApprovalId, AttemptId, PolicyHash, Principal};

pub use crate::id::{EffectKey, EffectKeyError};

/// The state of an effect record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectState {
    /// Claimed by an attempt whose lease runs until `lease_until`; its executor may be running.
    Reserved,
    /// The executor returned `Ok`: the effect happened.
    Committed,
    /// The executor said the effect definitely did not happen; a new attempt may reserve it.
    Failed,
    /// Nobody knows whether the effect happened; every attempt is refused until it is resolved.
    Ambiguous,
}

impl EffectState {
    /// The stable lowercase name (`reserved`, `committed`, `failed`, `ambiguous`).
    pub fn as_str(self) -> &'static str {
        match self {
            EffectState::Reserved => "reserved",
            EffectState::Committed => "committed",
            EffectState::Failed => "failed",
            EffectState::Ambiguous => "ambiguous",
        }
    }

    /// Parse a stored or user-given name.
    pub fn parse(text: &str) -> Option<EffectState> {
        match text {
            "reserved" => Some(EffectState::Reserved),
            "committed" => Some(EffectState::Committed),
            "failed" => Some(EffectState::Failed),
            "ambiguous" => Some(EffectState::Ambiguous),
            _ => None,
        }
    }
}

impl fmt::Display for EffectState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One effect record, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EffectRecord {
    /// The effect key.
    pub key: EffectKey,
    /// The state.
    pub state: EffectState,
    /// The action hash of the attempt that last reserved it.
    pub action_hash: ActionHash,
    /// The attempt that last reserved it (`att_…`).
    pub attempt_id: AttemptId,
    /// How many attempts have reserved it (1 for the first).
    pub attempts: u32,
    /// When the current lease lapses (meaningful in `reserved`).
    pub lease_until: Timestamp,
    /// When the record last changed.
    pub updated_at: Timestamp,
    /// Who resolved it, when it was resolved by a human or a reconcile hook.
    pub resolved_by: Option<String>,
    /// Free text: the executor's error, the resolver's note.
    pub detail: Option<String>,
    /// What the reserving attempt was: its action, principal, environment, policy, start and
    /// approval, so that a receipt written later without that attempt (a lapsed lease, a
    /// resolution) still names them. `None` for records stored before schema version 2.
    pub attempt: Option<AttemptContext>,
}

/// The reserving attempt, as kept on its effect record (canonical JSON in the store).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptContext {
    /// The action name.
    pub action: String,
    /// The principal.
    pub principal: Principal,
    /// The environment.
    pub environment: String,
    /// The policy hash that decided the attempt.
    pub policy_hash: PolicyHash,
    /// When the attempt began (UTC, RFC 3339 with milliseconds).
    pub started_at: Timestamp,
    /// The approval it consumed (`apr_…`), if any.
    pub approval_id: Option<ApprovalId>,
    /// Who may resolve the effect if it becomes ambiguous, when that is not the default
    /// (anyone) and no consumed approval's rule says it.
    pub resolvers: Option<crate::approver::ApprovalRule>,
}

/// What the retry table says about a new attempt on an effect key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetryDecision {
    /// No record, or the last attempt definitely did not run: reserve it.
    Reserve,
    /// Another attempt holds a live lease: refuse as in progress.
    InProgress,
    /// The effect happened: refuse as a duplicate.
    Committed,
    /// The outcome is unknown: refuse until resolved.
    Ambiguous,
    /// The holder's lease lapsed with no outcome: record `ambiguous`, then refuse.
    LeaseExpired,
}

/// The retry table: may a new attempt reserve this key at `now`?
///
/// | current record                | decision       |
/// |-------------------------------|----------------|
/// | none                          | `Reserve`      |
/// | `failed`                      | `Reserve`      |
/// | `reserved`, `now < lease`     | `InProgress`   |
/// | `reserved`, `now >= lease`    | `LeaseExpired` |
/// | `committed`                   | `Committed`    |
/// | `ambiguous`                   | `Ambiguous`    |
///
/// An expired lease is never released: the holder may have run (DESIGN.md, "Effect records").
pub fn retry_decision(current: Option<&EffectRecord>, now: Timestamp) -> RetryDecision {
    match current {
        None => RetryDecision::Reserve,
        Some(record) => match record.state {
            EffectState::Failed => RetryDecision::Reserve,
            EffectState::Reserved if now < record.lease_until => RetryDecision::InProgress,
            EffectState::Reserved => RetryDecision::LeaseExpired,
            EffectState::Committed => RetryDecision::Committed,
            EffectState::Ambiguous => RetryDecision::Ambiguous,
        },
    }
}

/// May an effect in `from` be resolved to `to` by a human or reconcile hook?
///
/// Only `ambiguous` (or a `reserved` record whose lease has lapsed, which is ambiguous in all but
/// name) may be resolved, and only to `committed` or `failed`.
pub fn resolution_allowed(
    current: &EffectRecord,
    to: EffectState,
    now: Timestamp,
) -> Result<(), ResolveRefusal> {
    if !matches!(to, EffectState::Committed | EffectState::Failed) {
        return Err(ResolveRefusal::BadTarget { to });
    }
    match retry_decision(Some(current), now) {
        RetryDecision::Ambiguous | RetryDecision::LeaseExpired => Ok(()),
        _ => Err(ResolveRefusal::NotAmbiguous {
            state: current.state,
        }),
    }
}

/// Why a resolution was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolveRefusal {
    /// No effect record has that key.
    #[error("no effect has this key: list effects with `countersign effects`")]
    Unknown,
    /// The effect is not ambiguous.
    #[error("the effect is `{state}`, not ambiguous: only an ambiguous effect can be resolved")]
    NotAmbiguous {
        /// Its current state.
        state: EffectState,
    },
    /// The target state is not `committed` or `failed`.
    #[error("an effect can only be resolved to `committed` or `failed`, not `{to}`")]
    BadTarget {
        /// The requested state.
        to: EffectState,
    },
}

/// The error an executor returns.
///
/// Only [`ExecutorError::NotExecuted`] tells the kernel that the effect definitely did not
/// happen (the record becomes `failed`, a retry is legal). Anything else is treated as "may have
/// happened": the record becomes `ambiguous` and every retry is refused until resolved.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    /// The effect definitely did not happen (for example: the connection was refused before any
    /// byte was sent, or the upstream answered a validation error that it documents as
    /// non-executing). Retry allowed.
    #[error("not executed: {0}")]
    NotExecuted(String),
    /// The executor failed in a way that does not prove the effect did not happen: it may have
    /// run (the effect becomes `ambiguous`). Named for what it means, unlike the effect state
    /// `failed`, which means "did not run" (issue #19; this variant was `Failed`).
    #[error("{0}")]
    MayHaveRun(Box<dyn std::error::Error + Send + Sync>),
    /// Another executor error with the executor's evidence attached (for example the raw reply
    /// of an upstream server), built by [`ExecutorError::with_evidence`]. The kernel classifies
    /// it as the error it wraps and hands the evidence back in the refusal
    /// (`ControlError::NotExecuted` / `ControlError::OutcomeUnknown`, field `evidence`), so a
    /// caller never needs a side channel to learn what the executor saw (issue #19).
    #[error("{error}")]
    WithEvidence {
        /// The error itself.
        error: Box<ExecutorError>,
        /// What the executor kept, as JSON (data, never an instruction).
        evidence: serde_json::Value,
    },
}

/// An [`ExecutorError`] without its evidence: what the kernel classifies.
pub(crate) enum BareExecutorError {
    /// [`ExecutorError::NotExecuted`].
    NotExecuted(String),
    /// [`ExecutorError::MayHaveRun`].
    MayHaveRun(Box<dyn std::error::Error + Send + Sync>),
}

impl ExecutorError {
    /// The effect definitely did not happen, for the reason given.
    pub fn not_executed(reason: impl Into<String>) -> ExecutorError {
        ExecutorError::NotExecuted(reason.into())
    }

    /// This error with `evidence` attached (the outermost evidence wins when nested).
    pub fn with_evidence(self, evidence: serde_json::Value) -> ExecutorError {
        ExecutorError::WithEvidence {
            error: Box::new(self),
            evidence,
        }
    }

    /// The reason, when the error (or the one it wraps) says the effect definitely did not
    /// happen.
    pub fn not_executed_reason(&self) -> Option<&str> {
        match self {
            ExecutorError::NotExecuted(reason) => Some(reason),
            ExecutorError::MayHaveRun(_) => None,
            ExecutorError::WithEvidence { error, .. } => error.not_executed_reason(),
        }
    }

    /// The error without its evidence, and the evidence.
    pub(crate) fn into_parts(self) -> (BareExecutorError, Option<serde_json::Value>) {
        match self {
            ExecutorError::NotExecuted(reason) => (BareExecutorError::NotExecuted(reason), None),
            ExecutorError::MayHaveRun(error) => (BareExecutorError::MayHaveRun(error), None),
            ExecutorError::WithEvidence { error, evidence } => {
                let (bare, inner) = error.into_parts();
                // The outermost evidence wins; an inner one is kept only when it is alone.
                (bare, Some(evidence).or(inner))
            }
        }
    }

    /// The executor failed; the effect may have happened.
    pub fn may_have_run(
        error: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> ExecutorError {
        ExecutorError::MayHaveRun(error.into())
    }
}

/// How an executor that talks HTTP should report a failed call, so that only a definite
/// non-execution unlocks a retry (case B23; the same split DESIGN.md makes for every executor).
///
/// | what happened | result |
/// |---|---|
/// | nothing was sent (connection refused, DNS failure) | `NotExecuted` |
/// | 4xx except 408 and 429: the upstream validated and refused the request | `NotExecuted` (documented choice: a definite refusal; the retry will usually be refused the same way) |
/// | 408, 429, any 5xx, a read timeout or a cut connection after the request was sent | `MayHaveRun` (ambiguous) |
/// | 503 (or any 5xx) carrying an explicit "not processed" marker **that the operator configured as trusted** | `NotExecuted` |
///
/// `sent` is false only when no byte of the request left the process; `status` is the
/// response status, or `None` when no response arrived.
pub fn classify_http_failure(
    sent: bool,
    status: Option<u16>,
    not_processed_marker: bool,
    marker_trusted: bool,
) -> ExecutorError {
    let definite = match (sent, status) {
        (false, _) => true,
        (true, None) => false,
        (true, Some(408 | 429)) => false,
        (true, Some(400..=499)) => true,
        (true, Some(500..=599)) => not_processed_marker && marker_trusted,
        (true, Some(_)) => false,
    };
    let what = match status {
        Some(code) => format!("the upstream answered {code}"),
        None if sent => "no response after the request was sent".to_owned(),
        None => "the request was never sent".to_owned(),
    };
    if definite {
        ExecutorError::not_executed(what)
    } else {
        ExecutorError::may_have_run(what)
    }
}

/// What a [`ReconcileHook`] found out about an ambiguous effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reconciled {
    /// The effect happened: record `committed`.
    Committed,
    /// The effect definitely did not happen: record `failed` (a retry may then run).
    Failed,
    /// Still unknown: leave it `ambiguous`.
    Unknown,
}

/// Asks the system of record what happened to an ambiguous effect (for example: look the
/// payment up by its idempotency key).
///
/// Called by [`crate::Control::execute`] when an attempt meets an ambiguous effect; its answer
/// is recorded with resolver `reconcile-hook`.
#[async_trait::async_trait]
pub trait ReconcileHook: Send + Sync {
    /// Find out what happened to `effect`. An error counts as [`Reconciled::Unknown`].
    async fn reconcile(
        &self,
        effect: &EffectRecord,
    ) -> Result<Reconciled, Box<dyn std::error::Error + Send + Sync>>;
}

#[cfg(test)]
mod tests;
