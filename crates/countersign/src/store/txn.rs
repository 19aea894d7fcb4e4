//! The read-decide-write sequences every embedded backend shares.
//!
//! A backend implements [`Txn`]: plain reads and writes inside one transaction it has already
//! opened (a locked in-memory state, a SQLite `BEGIN IMMEDIATE`). The functions here read, ask
//! the pure decision functions, and write; the backend commits when they return `Ok` and rolls
//! back otherwise. Each function is a pure function of what it reads, so a backend may run it
//! again after a busy database rolled it back.

use crate::approval::{
    AnswerPlan, ApprovalRecord, ApprovalState, ApproverFault, Correlation, OpenPlan,
    RecordedAnswer, TakePlan, approver_of, plan_answer, plan_open, plan_take,
};
use crate::approver::{
    ApprovalRule, Approver, Authentication, Channel, Credential, Ineligible, judge, judge_resolver,
};
use crate::clock::Timestamp;
use crate::effect::{EffectRecord, EffectState, RetryDecision, resolution_allowed, retry_decision};
use crate::error::{AnswerError, ResolveError, StoreError};
use crate::evidence::{
    self, ChainHead, Receipt, ReceiptDraft, ReceiptKind, ReceiptOutcome, StoredReceipt,
};
use crate::id::AttemptId;
use crate::outbox::{EventKind, OutboxEvent, approval_event};
use crate::store::outbox::{due_for_expiry, withdrawal_event};
use crate::store::{
    BeginAttempt, BeginOutcome, BeginRefusal, FinishAttempt, HandOff, HandOffOutcome, NewApproval,
    OpenOutcome, RECONCILE_HOOK, RecordAnswer, ResolveEffect, Resolver,
};
use crate::{ActionHash, ApprovalId, EffectKey};

/// Reads and writes inside one open transaction.
pub trait Txn {
    /// One approval request.
    fn approval(&mut self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError>;
    /// Every approval request bound to `hash`.
    fn approvals_for_hash(&mut self, hash: &ActionHash) -> Result<Vec<ApprovalRecord>, StoreError>;
    /// Insert a new request.
    fn insert_approval(&mut self, record: &ApprovalRecord) -> Result<(), StoreError>;
    /// The request a framework call is mapped to.
    fn correlation(&mut self, correlation: &Correlation) -> Result<Option<ApprovalId>, StoreError>;
    /// Map a framework call to a request: a new mapping, or (`replace`) one whose request ended
    /// without authorizing anything.
    fn put_correlation(
        &mut self,
        correlation: &Correlation,
        id: &ApprovalId,
        replace: bool,
    ) -> Result<(), StoreError>;
    /// Overwrite a request's mutable fields (state, answer, consumption).
    fn update_approval(&mut self, record: &ApprovalRecord) -> Result<(), StoreError>;
    /// One effect record.
    fn effect(&mut self, key: &EffectKey) -> Result<Option<EffectRecord>, StoreError>;
    /// Insert or overwrite an effect record.
    fn put_effect(&mut self, record: &EffectRecord) -> Result<(), StoreError>;
    /// Record an attempt's outcome on its effect: if `attempt_id` still holds the record `key`
    /// in `reserved`, move it to `state` with `detail`, updated at `now`, and return true;
    /// otherwise write nothing and return false (compare-and-set).
    ///
    /// The default reads the record and writes it back; a backend may do the same in one
    /// conditional update.
    fn complete_effect(
        &mut self,
        key: &EffectKey,
        attempt_id: &str,
        state: EffectState,
        detail: Option<&str>,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        match self.effect(key)? {
            Some(mut record)
                if record.attempt_id == attempt_id && record.state == EffectState::Reserved =>
            {
                record.state = state;
                record.updated_at = now;
                record.detail = detail.map(str::to_owned);
                self.put_effect(&record)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
    /// Is the approver token id `jti` on the deny-list (issue #31)?
    fn token_revoked(&mut self, jti: &str) -> Result<bool, StoreError>;
    /// The newest receipt.
    fn chain_head(&mut self) -> Result<Option<ChainHead>, StoreError>;
    /// Append an event to the outbox (issue #17), in this transaction.
    fn insert_event(&mut self, event: &OutboxEvent) -> Result<(), StoreError>;
    /// Append a sealed receipt (its `seq` is the head's plus one).
    fn insert_receipt(
        &mut self,
        stored: &StoredReceipt,
        receipt: &Receipt,
    ) -> Result<(), StoreError>;
}

/// Seal `draft` onto the chain and append it.
pub fn append<T: Txn + ?Sized>(
    txn: &mut T,
    draft: ReceiptDraft,
    now: Timestamp,
) -> Result<Receipt, StoreError> {
    let head = txn.chain_head()?;
    let (receipt, stored) =
        evidence::seal(draft, head.as_ref(), now).map_err(|error| StoreError::Corrupt {
            detail: format!("unsealable receipt: {error}"),
        })?;
    txn.insert_receipt(&stored, &receipt)?;
    Ok(receipt)
}

/// Write the outbox event `kind` for `record` as it now stands (issue #17).
fn announce<T: Txn + ?Sized>(
    txn: &mut T,
    record: &ApprovalRecord,
    kind: EventKind,
    now: Timestamp,
) -> Result<(), StoreError> {
    txn.insert_event(&approval_event(record, kind, now))
}

/// The receipt for a change to an approval request.
pub(crate) fn approval_draft(
    record: &ApprovalRecord,
    kind: ReceiptKind,
    outcome: ReceiptOutcome,
    reason: &str,
) -> ReceiptDraft {
    ReceiptDraft {
        kind: Some(kind),
        outcome: Some(outcome),
        reason: Some(reason.to_owned()),
        action: Some(record.action.clone()),
        action_hash: Some(record.action_hash.clone()),
        principal: Some(record.principal.clone()),
        resource: record.resource.clone(),
        environment: Some(record.environment.clone()),
        effect_key: record.effect_key.clone(),
        arguments: Some(record.arguments.clone()),
        approval_id: Some(record.id.clone()),
        approver: record.approver.clone(),
        note: record.note.clone(),
        policy_hash: Some(record.policy_hash.clone()),
        ..ReceiptDraft::default()
    }
}

/// Move a request to `expired` or `void`, with its receipt.
fn mark_approval<T: Txn + ?Sized>(
    txn: &mut T,
    mut record: ApprovalRecord,
    state: ApprovalState,
    now: Timestamp,
) -> Result<ApprovalRecord, StoreError> {
    record.state = state;
    txn.update_approval(&record)?;
    let event = match state {
        ApprovalState::Void => EventKind::Voided,
        _ => EventKind::Expired,
    };
    announce(txn, &record, event, now)?;
    let (kind, outcome, reason) = match state {
        ApprovalState::Void => (
            ReceiptKind::ApprovalVoided,
            ReceiptOutcome::Voided,
            "policy_changed",
        ),
        _ => (
            ReceiptKind::ApprovalExpired,
            ReceiptOutcome::Expired,
            "expired",
        ),
    };
    append(txn, approval_draft(&record, kind, outcome, reason), now)?;
    Ok(record)
}

/// A receipt about an effect record written without its attempt (a lapsed lease, a
/// resolution): it names the attempt's action, principal, environment, policy, start and the
/// approval it consumed with the approvers who granted it, from the record's context.
pub(crate) fn effect_draft(
    record: &EffectRecord,
    approval: Option<&ApprovalRecord>,
    kind: ReceiptKind,
    outcome: ReceiptOutcome,
    reason: &str,
) -> ReceiptDraft {
    let mut draft = ReceiptDraft {
        kind: Some(kind),
        outcome: Some(outcome),
        reason: Some(reason.to_owned()),
        attempt_id: Some(record.attempt_id.clone()),
        action_hash: Some(record.action_hash.clone()),
        effect_key: Some(record.key.clone()),
        detail: record.detail.clone(),
        ..ReceiptDraft::default()
    };
    if let Some(context) = &record.attempt {
        draft.action = Some(context.action.clone());
        draft.principal = Some(context.principal.clone());
        draft.environment = Some(context.environment.clone());
        draft.policy_hash = Some(context.policy_hash.clone());
        draft.attempt_started_at = Some(context.started_at);
        draft.approval_id = context.approval_id.clone();
    }
    if let Some(approval) = approval {
        draft.approval_policy_hash = Some(approval.policy_hash.clone());
        draft.approvers = Some(approval.granted_by().into_iter().cloned().collect());
    }
    draft
}

/// The approval an effect record's attempt consumed, if its context names one.
fn consumed_approval<T: Txn + ?Sized>(
    txn: &mut T,
    record: &EffectRecord,
) -> Result<Option<ApprovalRecord>, StoreError> {
    match record
        .attempt
        .as_ref()
        .and_then(|context| context.approval_id.as_deref())
    {
        Some(id) => txn.approval(&ApprovalId::from_stored(id.to_owned())),
        None => Ok(None),
    }
}

/// Record that a lapsed lease left an effect ambiguous, with its receipt.
fn mark_lease_expired<T: Txn + ?Sized>(
    txn: &mut T,
    mut record: EffectRecord,
    now: Timestamp,
) -> Result<EffectRecord, StoreError> {
    record.state = EffectState::Ambiguous;
    record.updated_at = now;
    record.detail = Some(format!(
        "the lease of attempt {} lapsed at {} with no outcome recorded",
        record.attempt_id, record.lease_until
    ));
    txn.put_effect(&record)?;
    let approval = consumed_approval(txn, &record)?;
    let draft = effect_draft(
        &record,
        approval.as_ref(),
        ReceiptKind::LeaseExpired,
        ReceiptOutcome::Ambiguous,
        "lease_expired",
    );
    append(txn, draft, now)?;
    Ok(record)
}

/// [`crate::Store::open_approval`].
pub fn open_approval<T: Txn + ?Sized>(
    txn: &mut T,
    new: NewApproval,
    now: Timestamp,
) -> Result<OpenOutcome, StoreError> {
    if let Some(key) = &new.effect_key {
        let current = txn.effect(key)?;
        match retry_decision(current.as_ref(), now) {
            RetryDecision::Reserve => {}
            RetryDecision::LeaseExpired => {
                let record = current.ok_or_else(|| StoreError::Corrupt {
                    detail: "lease decision without a record".to_owned(),
                })?;
                let record = mark_lease_expired(txn, record, now)?;
                return Ok(OpenOutcome::EffectRefused {
                    decision: RetryDecision::Ambiguous,
                    record,
                });
            }
            decision => {
                let record = current.ok_or_else(|| StoreError::Corrupt {
                    detail: "refusal without a record".to_owned(),
                })?;
                return Ok(OpenOutcome::EffectRefused { decision, record });
            }
        }
    }
    let mapped = match &new.correlation {
        Some(correlation) => match txn.correlation(correlation)? {
            Some(id) => txn.approval(&id)?,
            None => None,
        },
        None => None,
    };
    let remap = mapped.is_some();
    if let Some(record) = mapped
        && let Some(outcome) = correlated_outcome(record, &new, now)
    {
        return Ok(outcome);
    }
    let existing = txn.approvals_for_hash(&new.record.action_hash)?;
    let (plan, marks) = plan_open(
        &existing,
        &new.record.entry_fingerprint,
        new.record.run.as_deref(),
        new.correlation.is_none(),
        now,
    );
    for (id, state) in marks {
        if let Some(record) = existing.iter().find(|record| record.id == id) {
            mark_approval(txn, record.clone(), state, now)?;
        }
    }
    let find = |id: &ApprovalId| {
        existing
            .iter()
            .find(|record| &record.id == id)
            .cloned()
            .ok_or_else(|| StoreError::Corrupt {
                detail: format!("approval {id} vanished"),
            })
    };
    Ok(match plan {
        OpenPlan::UseGranted(id) => OpenOutcome::Granted(find(&id)?),
        OpenPlan::Existing(id) => OpenOutcome::Pending {
            record: find(&id)?,
            created: false,
        },
        OpenPlan::Denied(id) => OpenOutcome::Denied(find(&id)?),
        OpenPlan::Create => {
            txn.insert_approval(&new.record)?;
            announce(txn, &new.record, EventKind::Opened, now)?;
            if let Some(correlation) = &new.correlation {
                txn.put_correlation(correlation, &new.record.id, remap)?;
            }
            OpenOutcome::Pending {
                record: new.record,
                created: true,
            }
        }
    })
}

/// What a framework call already mapped to `record` gets, or `None` when that request ended
/// without authorizing anything (expired, voided), so a new one is made and mapped instead.
/// A mapping to another action hash is a conflict: the call id is never the authority.
pub(crate) fn correlated_outcome(
    record: ApprovalRecord,
    new: &NewApproval,
    now: Timestamp,
) -> Option<OpenOutcome> {
    if record.action_hash != new.record.action_hash {
        return Some(OpenOutcome::CorrelationConflict(record));
    }
    let live = now < record.expires_at && record.entry_fingerprint == new.record.entry_fingerprint;
    match record.state {
        ApprovalState::Pending if live => Some(OpenOutcome::Pending {
            record,
            created: false,
        }),
        // A consumed request is handed back too: the take step refuses it (`consumed`), so
        // one framework call never runs twice on one approval.
        ApprovalState::Granted if live => Some(OpenOutcome::Granted(record)),
        ApprovalState::Consumed => Some(OpenOutcome::Granted(record)),
        ApprovalState::Denied if now < record.expires_at => Some(OpenOutcome::Denied(record)),
        _ => None,
    }
}

/// What an answer does, decided from the stored request alone: the pure plan both kinds of
/// backend apply (this module's [`answer_approval`] and the PostgreSQL twin).
// Built once per answer and consumed at once; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum AnswerStep {
    /// Write the updated request and its answer receipt.
    Write {
        record: ApprovalRecord,
        receipt: ReceiptDraft,
    },
    /// An identical repeat: succeed, write nothing.
    Repeat(ApprovalRecord),
    /// Move the (pending, past its TTL) request to `expired` with its receipt, then refuse.
    Expire {
        record: ApprovalRecord,
        error: AnswerError,
    },
    /// Refuse, leaving the request as it was; write the refusal receipt if there is one (every
    /// refusal by the rule or the contract has one; an unknown request or a missing approver
    /// has nothing to attach it to).
    Refuse {
        error: AnswerError,
        receipt: Option<ReceiptDraft>,
    },
}

/// The receipt of an answer (counted, decisive or refused) by `approver`.
fn answer_draft(
    record: &ApprovalRecord,
    approver: Option<&Approver>,
    channel: &Channel,
    outcome: ReceiptOutcome,
    reason: &str,
) -> ReceiptDraft {
    let mut draft = approval_draft(record, ReceiptKind::Answer, outcome, reason);
    draft.channel = Some(channel.as_str().into_owned());
    draft.approvals_needed = Some(record.rule.quorum);
    draft.approvals_given = Some(record.approvals_given());
    if let Some(approver) = approver {
        draft.approver = Some(approver.id.to_string());
        draft.approver_groups = Some(approver.groups.clone());
        draft.authentication = Some(approver.authentication.as_str().to_owned());
    }
    draft
}

/// Decide what `answer` does to `record` at `now`. Order: the credential becomes an approver
/// (a token must verify); the decision must be one of the closed set; the stored rule judges
/// the approver; the echoed hash must be the request's; then the state machine
/// ([`plan_answer`]) with quorum.
pub(crate) fn answer_step(
    record: Option<ApprovalRecord>,
    answer: RecordAnswer,
    now: Timestamp,
) -> AnswerStep {
    let Some(mut record) = record else {
        return AnswerStep::Refuse {
            error: AnswerError::Unknown {
                request_id: answer.request_id,
            },
            receipt: None,
        };
    };
    let channel = answer.channel;
    let refuse = |record: &ApprovalRecord, approver: Option<&Approver>, error: AnswerError| {
        let mut receipt = answer_draft(
            record,
            approver,
            &channel,
            ReceiptOutcome::Refused,
            error.reason(),
        );
        receipt.note = answer.note.clone();
        receipt.detail = Some(error.to_string());
        AnswerStep::Refuse {
            error,
            receipt: Some(receipt),
        }
    };
    let approver = match approver_of(&record.rule, &answer.approver, channel.clone(), now) {
        Ok(approver) => approver,
        Err(ApproverFault::Anonymous) => {
            return AnswerStep::Refuse {
                error: AnswerError::NoApprover,
                receipt: None,
            };
        }
        Err(ApproverFault::Malformed(error)) => {
            return refuse(
                &record,
                None,
                AnswerError::InvalidApprover {
                    request_id: record.id.clone(),
                    error,
                },
            );
        }
        Err(ApproverFault::Unverified(detail)) => {
            let mut step = refuse(
                &record,
                None,
                AnswerError::NotAuthenticated {
                    request_id: record.id.clone(),
                    approver: None,
                    detail,
                },
            );
            // Only a token claims an authentication method; an unverified source claims none.
            if let (
                AnswerStep::Refuse {
                    receipt: Some(receipt),
                    ..
                },
                Credential::Token(_),
            ) = (&mut step, &answer.approver)
            {
                receipt.authentication = Some(Authentication::Token.as_str().to_owned());
            }
            return step;
        }
    };
    let decision = match answer.decision {
        Ok(decision) => decision,
        Err(invalid) => {
            let error = AnswerError::InvalidDecision {
                request_id: record.id.clone(),
                given: invalid.given,
            };
            return refuse(&record, Some(&approver), error);
        }
    };
    if let Err(ineligible) = judge(&record.rule, &record.principal, &approver) {
        let error = match ineligible {
            Ineligible::NotAuthenticated => AnswerError::NotAuthenticated {
                request_id: record.id.clone(),
                approver: Some(approver.id.to_string()),
                detail: format!(
                    "`{}` is asserted (typed, not verified) and the rule requires an authenticated approver",
                    approver.id
                ),
            },
            Ineligible::NotEntitled => AnswerError::NotEntitled {
                request_id: record.id.clone(),
                approver: approver.id.to_string(),
                approvers: record.rule.summary(),
            },
            Ineligible::SelfApproval { shared_group } => AnswerError::SelfApproval {
                request_id: record.id.clone(),
                approver: approver.id.to_string(),
                shared_group,
            },
        };
        return refuse(&record, Some(&approver), error);
    }
    let hash_confirmed = match &answer.shown_hash {
        Some(shown) if shown != &record.action_hash => {
            let error = AnswerError::Mismatch {
                request_id: record.id.clone(),
                shown: shown.as_str().to_owned(),
                action_hash: record.action_hash.clone(),
            };
            return refuse(&record, Some(&approver), error);
        }
        Some(_) => true,
        None if channel.requires_hash_echo() => {
            let error = AnswerError::Mismatch {
                request_id: record.id.clone(),
                shown: "(none)".to_owned(),
                action_hash: record.action_hash.clone(),
            };
            return refuse(&record, Some(&approver), error);
        }
        None => false,
    };
    // Issue #31: a revoked or cancelled request takes no answer, not even a repeat.
    match record.state {
        ApprovalState::Cancelled => {
            let error = AnswerError::Cancelled {
                request_id: record.id.clone(),
            };
            return refuse(&record, Some(&approver), error);
        }
        ApprovalState::Revoked => {
            let error = AnswerError::Revoked {
                request_id: record.id.clone(),
            };
            return refuse(&record, Some(&approver), error);
        }
        _ => {}
    }
    let recorded = RecordedAnswer {
        approver: approver.clone(),
        decision,
        answered_at: now,
        note: answer.note.clone(),
        hash_confirmed,
    };
    let (outcome, reason) = match plan_answer(&record, decision, &approver.id, now) {
        AnswerPlan::Decide { to } => {
            record.state = to;
            record.answered_at = Some(now);
            record.approver = Some(approver.id.to_string());
            record.note = answer.note;
            record.answers.push(recorded);
            match to {
                ApprovalState::Granted => (ReceiptOutcome::Granted, "approved"),
                _ => (ReceiptOutcome::Denied, "rejected"),
            }
        }
        AnswerPlan::Count { .. } => {
            record.answers.push(recorded);
            (ReceiptOutcome::Counted, "approved")
        }
        AnswerPlan::Repeat => return AnswerStep::Repeat(record),
        AnswerPlan::AlreadyDecided { state } => {
            let first = record.approver.clone().or_else(|| {
                record
                    .answers
                    .iter()
                    .find(|earlier| earlier.approver.id == approver.id)
                    .map(|earlier| earlier.approver.id.to_string())
            });
            let error = AnswerError::AlreadyDecided {
                request_id: record.id.clone(),
                state,
                approver: first,
            };
            return refuse(&record, Some(&approver), error);
        }
        AnswerPlan::Expire => {
            let error = AnswerError::Expired {
                request_id: record.id.clone(),
                expires_at: record.expires_at,
            };
            return AnswerStep::Expire { record, error };
        }
        AnswerPlan::Expired => {
            return AnswerStep::Refuse {
                error: AnswerError::Expired {
                    request_id: record.id.clone(),
                    expires_at: record.expires_at,
                },
                receipt: None,
            };
        }
    };
    let mut receipt = answer_draft(&record, Some(&approver), &channel, outcome, reason);
    receipt.note = record.answers.last().and_then(|latest| latest.note.clone());
    receipt.hash_confirmed = Some(hash_confirmed);
    AnswerStep::Write { record, receipt }
}

/// The deny-list id of a token credential, if it has one (issue #31).
pub(crate) fn credential_jti(credential: &Credential) -> Option<String> {
    match credential {
        Credential::Token(token) => crate::token::unverified_jti(token),
        _ => None,
    }
}

/// The refusal of an answer or revocation presenting a revoked token (issue #31):
/// `not_authenticated`, with a refusal receipt when the request exists.
pub(crate) fn revoked_token_refusal(
    record: Option<ApprovalRecord>,
    request_id: ApprovalId,
    channel: &Channel,
    jti: &str,
) -> (AnswerError, Option<ReceiptDraft>) {
    let Some(record) = record else {
        return (AnswerError::Unknown { request_id }, None);
    };
    let error = AnswerError::NotAuthenticated {
        request_id: record.id.clone(),
        approver: None,
        detail: format!(
            "the approver token `{jti}` was revoked (`countersign approver revoke`): ask for a new one"
        ),
    };
    let mut receipt = answer_draft(
        &record,
        None,
        channel,
        ReceiptOutcome::Refused,
        error.reason(),
    );
    receipt.authentication = Some(Authentication::Token.as_str().to_owned());
    receipt.detail = Some(error.to_string());
    (error, Some(receipt))
}

/// [`crate::Store::answer_approval`]. Returns the stored request after the answer.
pub fn answer_approval<T: Txn + ?Sized>(
    txn: &mut T,
    answer: RecordAnswer,
    now: Timestamp,
) -> Result<Result<ApprovalRecord, AnswerError>, StoreError> {
    let record = txn.approval(&answer.request_id)?;
    let step = match credential_jti(&answer.approver) {
        Some(jti) if txn.token_revoked(&jti)? => {
            let (error, receipt) =
                revoked_token_refusal(record, answer.request_id, &answer.channel, &jti);
            AnswerStep::Refuse { error, receipt }
        }
        _ => answer_step(record, answer, now),
    };
    match step {
        AnswerStep::Write { record, receipt } => {
            txn.update_approval(&record)?;
            announce(txn, &record, EventKind::Answered, now)?;
            append(txn, receipt, now)?;
            Ok(Ok(record))
        }
        AnswerStep::Repeat(record) => Ok(Ok(record)),
        AnswerStep::Expire { record, error } => {
            mark_approval(txn, record, ApprovalState::Expired, now)?;
            Ok(Err(error))
        }
        AnswerStep::Refuse { error, receipt } => {
            if let Some(receipt) = receipt {
                append(txn, receipt, now)?;
            }
            Ok(Err(error))
        }
    }
}

/// [`crate::Store::expire_approval`] (issue #17's sweeper): a request still `pending` or
/// `granted` and past its `expires_at` is marked `expired`, with its receipt and event.
pub fn expire_approval<T: Txn + ?Sized>(
    txn: &mut T,
    id: &ApprovalId,
    now: Timestamp,
) -> Result<Option<ApprovalRecord>, StoreError> {
    match txn.approval(id)? {
        Some(record) if due_for_expiry(&record, now) => Ok(Some(mark_approval(
            txn,
            record,
            ApprovalState::Expired,
            now,
        )?)),
        _ => Ok(None),
    }
}

/// [`crate::Store::withdraw_approval`] (issue #31): the plan is
/// [`crate::approval::withdraw`]'s. Returns the stored request after the withdrawal.
pub fn withdraw_approval<T: Txn + ?Sized>(
    txn: &mut T,
    withdrawal: crate::approval::withdraw::Withdrawal,
    now: Timestamp,
) -> Result<Result<ApprovalRecord, AnswerError>, StoreError> {
    use crate::store::withdraw::{WithdrawStep, withdraw_step};
    let record = txn.approval(&withdrawal.request_id)?;
    if let Some((approver, channel)) = withdrawal.kind.credential()
        && let Some(jti) = credential_jti(approver)
        && txn.token_revoked(&jti)?
    {
        let (error, receipt) =
            revoked_token_refusal(record, withdrawal.request_id.clone(), channel, &jti);
        if let Some(mut receipt) = receipt {
            receipt.kind = Some(match withdrawal.kind {
                crate::approval::withdraw::WithdrawalKind::Revoke { .. } => {
                    ReceiptKind::ApprovalRevoked
                }
                _ => ReceiptKind::ApprovalCancelled,
            });
            append(txn, receipt, now)?;
        }
        return Ok(Err(error));
    }
    match withdraw_step(record, withdrawal, now) {
        WithdrawStep::Write { record, receipt } => {
            txn.update_approval(&record)?;
            announce(txn, &record, withdrawal_event(&record), now)?;
            append(txn, receipt, now)?;
            Ok(Ok(record))
        }
        WithdrawStep::Repeat(record) => Ok(Ok(record)),
        WithdrawStep::Expire { record, error } => {
            mark_approval(txn, record, ApprovalState::Expired, now)?;
            Ok(Err(error))
        }
        WithdrawStep::Refuse { error, receipt } => {
            if let Some(receipt) = receipt {
                append(txn, receipt, now)?;
            }
            Ok(Err(error))
        }
    }
}

/// [`crate::Store::begin_attempt`].
///
/// Returns `Ok(Err(..))` for a refusal whose marks and receipt must be committed, and never
/// leaves a consumed approval behind a refused reservation: the reservation is checked before
/// anything is consumed.
pub fn begin_attempt<T: Txn + ?Sized>(
    txn: &mut T,
    begin: BeginAttempt,
    now: Timestamp,
) -> Result<BeginOutcome, StoreError> {
    let refuse = |txn: &mut T, refusal: BeginRefusal| -> Result<BeginOutcome, StoreError> {
        let mut draft = begin
            .refusal_draft
            .clone()
            .with_outcome(ReceiptOutcome::Refused, Some(refusal.reason()));
        if let BeginRefusal::Approval {
            record: Some(record),
            ..
        } = &refusal
        {
            draft.approval_id = Some(record.id.clone());
            draft.approver = record.approver.clone();
            draft.note = record.note.clone();
            draft.approval_policy_hash = Some(record.policy_hash.clone());
        }
        let receipt = append(txn, draft, now)?;
        Ok(BeginOutcome::Refused {
            refusal,
            receipt: Box::new(receipt),
        })
    };

    // 1. The approval: may it be consumed?
    let mut to_consume = None;
    if let Some(presented) = &begin.approval {
        let record = txn.approval(&presented.id)?;
        match plan_take(
            record.as_ref(),
            &begin.action_hash,
            &presented.fingerprint,
            presented.run.as_deref(),
            now,
        ) {
            TakePlan::Consume => to_consume = record,
            TakePlan::Refuse { refusal, mark } => {
                let record = match (record, mark) {
                    (Some(record), Some(state)) => Some(mark_approval(txn, record, state, now)?),
                    (record, _) => record,
                };
                return refuse(txn, BeginRefusal::Approval { refusal, record });
            }
        }
    }

    // 2. The effect key: may it be reserved? (Checked before anything is consumed, so a refused
    //    reservation leaves the approval granted.)
    let mut attempts = 1;
    if let Some(claim) = &begin.effect {
        let current = txn.effect(&claim.key)?;
        match retry_decision(current.as_ref(), now) {
            RetryDecision::Reserve => {
                attempts = current
                    .as_ref()
                    .map_or(1, |record| record.attempts.saturating_add(1));
            }
            RetryDecision::LeaseExpired => {
                let record = current.ok_or_else(|| StoreError::Corrupt {
                    detail: "lease decision without a record".to_owned(),
                })?;
                let record = mark_lease_expired(txn, record, now)?;
                return refuse(
                    txn,
                    BeginRefusal::Effect {
                        decision: RetryDecision::Ambiguous,
                        record,
                    },
                );
            }
            decision => {
                let record = current.ok_or_else(|| StoreError::Corrupt {
                    detail: "refusal without a record".to_owned(),
                })?;
                return refuse(txn, BeginRefusal::Effect { decision, record });
            }
        }
    }

    // 3. Consume and reserve.
    let consumed = match to_consume {
        Some(mut record) => {
            record.state = ApprovalState::Consumed;
            record.consumed_at = Some(now);
            record.consumed_by = Some(begin.attempt_id.clone());
            txn.update_approval(&record)?;
            announce(txn, &record, EventKind::Consumed, now)?;
            Some(record)
        }
        None => None,
    };
    if let Some(claim) = begin.effect {
        txn.put_effect(&reservation(
            claim,
            &begin.action_hash,
            &begin.attempt_id,
            attempts,
            begin.context,
            consumed.as_ref(),
            now,
        ))?;
    }
    Ok(BeginOutcome::Started { approval: consumed })
}

/// Fill `draft` with what an attempt that consumed `record` records about it: the request, its
/// decisive approver and note, the policy it was requested under and who granted it.
pub(crate) fn record_consumed(draft: &mut ReceiptDraft, record: &ApprovalRecord) {
    draft.approval_id = Some(record.id.clone());
    draft.approver = record.approver.clone();
    draft.note = record.note.clone();
    draft.approval_policy_hash = Some(record.policy_hash.clone());
    draft.approvers = Some(record.granted_by().into_iter().cloned().collect());
}

/// [`crate::Store::hand_off`]: [`begin_attempt`], then (if it started) the reserved key left
/// `ambiguous` and the `handed_off` receipt, in the caller's one transaction.
pub fn hand_off<T: Txn + ?Sized>(
    txn: &mut T,
    hand_off: HandOff,
    now: Timestamp,
) -> Result<HandOffOutcome, StoreError> {
    let HandOff {
        begin,
        mut draft,
        detail,
    } = hand_off;
    let attempt_id = begin.attempt_id.clone();
    let key = begin.effect.as_ref().map(|claim| claim.key.clone());
    match begin_attempt(txn, begin, now)? {
        BeginOutcome::Refused { refusal, receipt } => {
            Ok(HandOffOutcome::Refused { refusal, receipt })
        }
        BeginOutcome::Started { approval } => {
            if let Some(record) = &approval {
                record_consumed(&mut draft, record);
            }
            if let Some(key) = &key {
                // INVARIANT (hand-off-ambiguous): a handed-off effect may have happened, so it
                // is never left `reserved` (a lapse would say the same later) nor `committed`.
                if !txn.complete_effect(
                    key,
                    &attempt_id,
                    EffectState::Ambiguous,
                    Some(&detail),
                    now,
                )? {
                    return Err(StoreError::Corrupt {
                        detail: format!(
                            "effect `{key}` reserved by {attempt_id} was not held in the same transaction"
                        ),
                    });
                }
                draft.detail = Some(detail);
            }
            let receipt = append(txn, draft, now)?;
            Ok(HandOffOutcome::HandedOff {
                approval,
                receipt: Box::new(receipt),
            })
        }
    }
}

/// The effect record an attempt's reservation writes; both backends build it here.
pub(crate) fn reservation(
    claim: crate::store::EffectClaim,
    action_hash: &ActionHash,
    attempt_id: &AttemptId,
    attempts: u32,
    context: Option<crate::effect::AttemptContext>,
    consumed: Option<&ApprovalRecord>,
    now: Timestamp,
) -> EffectRecord {
    let attempt = context.map(|mut context| {
        if let Some(approval) = consumed {
            context.approval_id = Some(approval.id.clone());
            // The consumed approval's rule says who may resolve; no copy is needed.
            context.resolvers = None;
        }
        context
    });
    EffectRecord {
        key: claim.key,
        state: EffectState::Reserved,
        action_hash: action_hash.clone(),
        attempt_id: attempt_id.clone(),
        attempts,
        lease_until: claim.lease_until,
        updated_at: now,
        resolved_by: None,
        detail: None,
        attempt,
    }
}

/// [`crate::Store::finish_attempt`].
pub fn finish_attempt<T: Txn + ?Sized>(
    txn: &mut T,
    finish: FinishAttempt,
    now: Timestamp,
) -> Result<Receipt, StoreError> {
    let mut draft = finish.draft;
    if let Some(key) = &finish.effect_key
        && !txn.complete_effect(
            key,
            &finish.attempt_id,
            finish.state,
            finish.detail.as_deref(),
            now,
        )?
    {
        match txn.effect(key)? {
            Some(record) => {
                // INVARIANT (no-release): a record this attempt no longer holds is never
                // overwritten; the receipt says what this attempt saw.
                let note = format!(
                    "this attempt's lease lapsed before its outcome was recorded; the effect stays `{}`",
                    record.state
                );
                draft.detail = Some(match draft.detail.take() {
                    Some(detail) => format!("{detail}; {note}"),
                    None => note,
                });
            }
            None => {
                return Err(StoreError::Corrupt {
                    detail: format!(
                        "effect `{key}` reserved by {} is missing",
                        finish.attempt_id
                    ),
                });
            }
        }
    }
    append(txn, draft, now)
}

/// What a resolution does, decided from the stored effect (and the approval its attempt
/// consumed) alone: the plan both kinds of backend apply.
// Built once per resolution and consumed at once; boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum ResolveStep {
    /// Write the resolved record and its receipt.
    Write {
        record: EffectRecord,
        receipt: ReceiptDraft,
    },
    /// Refuse; write the refusal receipt, if any (a resolver the rule refuses gets one).
    Refuse {
        error: ResolveError,
        receipt: Option<ReceiptDraft>,
    },
}

/// Decide what `resolve` does to `record` at `now`: a person is judged by the effect's
/// resolver rule (the consumed approval's rule, else the attempt's `resolvers`, else the
/// default: anyone but the principal); then the retry table says whether the state allows it.
pub(crate) fn resolve_step(
    record: Option<EffectRecord>,
    approval: Option<&ApprovalRecord>,
    resolve: ResolveEffect,
    now: Timestamp,
) -> ResolveStep {
    let Some(mut record) = record else {
        return ResolveStep::Refuse {
            error: ResolveError::Refused {
                effect_key: resolve.key,
                refusal: crate::effect::ResolveRefusal::Unknown,
            },
            receipt: None,
        };
    };
    let mut resolver_fields = None;
    let resolved_by = match resolve.resolver {
        Resolver::Hook => RECONCILE_HOOK.to_owned(),
        Resolver::Person {
            credential,
            channel,
        } => {
            let context = record.attempt.as_ref();
            let default_rule = ApprovalRule::default();
            let rule = approval
                .map(|approval| &approval.rule)
                .or_else(|| context.and_then(|context| context.resolvers.as_ref()))
                .unwrap_or(&default_rule);
            let principal = context.map_or("", |context| context.principal.as_str());
            let refuse = |record: &EffectRecord,
                          approver: Option<&Approver>,
                          reason: &'static str,
                          message: String| {
                let mut receipt = effect_draft(
                    record,
                    approval,
                    ReceiptKind::Resolution,
                    ReceiptOutcome::Refused,
                    reason,
                );
                receipt.channel = Some(channel.as_str().into_owned());
                if let Some(approver) = approver {
                    receipt.approver = Some(approver.id.to_string());
                    receipt.approver_groups = Some(approver.groups.clone());
                    receipt.authentication = Some(approver.authentication.as_str().to_owned());
                }
                receipt.detail = Some(message.clone());
                receipt.note = resolve.note.clone();
                ResolveStep::Refuse {
                    error: ResolveError::NotPermitted {
                        effect_key: record.key.clone(),
                        reason,
                        message,
                    },
                    receipt: Some(receipt),
                }
            };
            let approver = match approver_of(rule, &credential, channel.clone(), now) {
                Ok(approver) => approver,
                Err(ApproverFault::Malformed(error)) => {
                    return refuse(&record, None, "invalid_approver", error.to_string());
                }
                Err(ApproverFault::Anonymous) => {
                    return ResolveStep::Refuse {
                        error: ResolveError::NotPermitted {
                            effect_key: record.key.clone(),
                            reason: "no_approver",
                            message: "a resolution needs a resolver: say who is resolving (for example `--as human:alice`)".to_owned(),
                        },
                        receipt: None,
                    };
                }
                Err(ApproverFault::Unverified(detail)) => {
                    return refuse(
                        &record,
                        None,
                        "not_authenticated",
                        format!("the approver token does not verify: {detail}"),
                    );
                }
            };
            if let Err(ineligible) = judge_resolver(rule, principal, &approver) {
                let message = match &ineligible {
                    Ineligible::NotAuthenticated => format!(
                        "`{}` is asserted and resolving `{}` needs an authenticated resolver: pass an approver token with `--token-file FILE`",
                        approver.id, record.key
                    ),
                    Ineligible::NotEntitled => format!(
                        "`{}` may not resolve `{}`: it may be resolved by {}",
                        approver.id,
                        record.key,
                        rule.resolver_patterns().join(", ")
                    ),
                    Ineligible::SelfApproval { .. } => format!(
                        "`{}` ran the attempt behind `{}` and cannot resolve it: a different identity must",
                        approver.id, record.key
                    ),
                };
                return refuse(&record, Some(&approver), ineligible.reason(), message);
            }
            let id = approver.id.to_string();
            resolver_fields = Some((approver, channel));
            id
        }
    };
    if let Err(refusal) = resolution_allowed(&record, resolve.to, now) {
        return ResolveStep::Refuse {
            error: ResolveError::Refused {
                effect_key: resolve.key,
                refusal,
            },
            receipt: None,
        };
    }
    record.state = resolve.to;
    record.updated_at = now;
    record.resolved_by = Some(resolved_by.clone());
    record.detail = resolve.note.clone();
    let outcome = match resolve.to {
        EffectState::Committed => ReceiptOutcome::Committed,
        _ => ReceiptOutcome::Failed,
    };
    let mut receipt = effect_draft(
        &record,
        approval,
        ReceiptKind::Resolution,
        outcome,
        "resolved",
    );
    receipt.approver = Some(resolved_by);
    receipt.note = resolve.note;
    receipt.detail = None;
    if let Some((approver, channel)) = resolver_fields {
        receipt.approver_groups = Some(approver.groups);
        receipt.authentication = Some(approver.authentication.as_str().to_owned());
        receipt.channel = Some(channel.as_str().into_owned());
    }
    ResolveStep::Write { record, receipt }
}

/// [`crate::Store::resolve_effect`].
pub fn resolve_effect<T: Txn + ?Sized>(
    txn: &mut T,
    resolve: ResolveEffect,
    now: Timestamp,
) -> Result<Result<EffectRecord, ResolveError>, StoreError> {
    let record = txn.effect(&resolve.key)?;
    let approval = match &record {
        Some(record) => consumed_approval(txn, record)?,
        None => None,
    };
    match resolve_step(record, approval.as_ref(), resolve, now) {
        ResolveStep::Write { record, receipt } => {
            txn.put_effect(&record)?;
            append(txn, receipt, now)?;
            Ok(Ok(record))
        }
        ResolveStep::Refuse { error, receipt } => {
            if let Some(receipt) = receipt {
                append(txn, receipt, now)?;
            }
            Ok(Err(error))
        }
    }
}
