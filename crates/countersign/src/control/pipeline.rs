//! Steps 2 and 4 to 7 of the pipeline: [`Control::execute`] decides, takes the approval and
//! reserves the effect in one store transaction, runs the executor, and records the outcome
//! with its chained receipt.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use crate::action::Action;
use crate::approval::{ApprovalId, ApprovalState};
use crate::clock::Clock;
use crate::effect::{
    AttemptContext, BareExecutorError, EffectRecord, EffectState, ExecutorError, ReconcileHook,
    Reconciled, RetryDecision,
};
use crate::error::{ControlError, DenyReason, Reason, ResolveError};
use crate::evidence::{ReceiptDraft, ReceiptKind, ReceiptOutcome};
use crate::id::AttemptId;
use crate::policy::{Decision, Mode};
use crate::store::{
    BeginAttempt, BeginOutcome, BeginRefusal, EffectClaim, FinishAttempt, PresentedApproval,
    ResolveEffect, Resolver, Store,
};

use super::{
    ActionRequest, CommitNoteSlot, Control, DENIED_BY_POLICY, Executed, ExitStatusSlot, Prepared,
    Unrecorded,
};

enum ExecutorOutcome<T> {
    Value(T),
    NotExecuted(String, Option<serde_json::Value>),
    MayHaveRun(String, Option<serde_json::Value>),
    Panicked(String),
    TimedOut(Duration),
}

impl<T> ExecutorOutcome<T> {
    /// The evidence the executor's error carried.
    fn take_evidence(&mut self) -> Option<serde_json::Value> {
        match self {
            ExecutorOutcome::NotExecuted(_, evidence)
            | ExecutorOutcome::MayHaveRun(_, evidence) => evidence.take(),
            ExecutorOutcome::Value(_)
            | ExecutorOutcome::Panicked(_)
            | ExecutorOutcome::TimedOut(_) => None,
        }
    }
}

/// Turns an attempt ambiguous if its future is dropped while the executor runs.
struct InFlight {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    finish: Option<FinishAttempt>,
    /// The control's records of dropped attempts ([`Control::settled`]).
    unrecorded: Arc<tokio::sync::watch::Sender<Unrecorded>>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // INVARIANT (no-release): a dropped attempt is recorded ambiguous, never released. If no
        // runtime is left to record it, the lease lapsing makes it ambiguous all the same.
        if let Some(finish) = self.finish.take()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let store = Arc::clone(&self.store);
            let now = self.clock.now();
            let writing = Writing::count(&self.unrecorded);
            handle.spawn(async move {
                if let Err(error) = store.finish_attempt(finish, now).await {
                    writing.refused(error.to_string());
                }
            });
        }
    }
}

/// One record of a dropped attempt being written: counted while it lives, so that
/// [`Control::settled`] waits for it, and uncounted when its task ends or is dropped unrun.
struct Writing(Arc<tokio::sync::watch::Sender<Unrecorded>>);

impl Writing {
    fn count(unrecorded: &Arc<tokio::sync::watch::Sender<Unrecorded>>) -> Writing {
        unrecorded.send_modify(|now| now.writing += 1);
        Writing(Arc::clone(unrecorded))
    }

    /// The store refused the record.
    fn refused(&self, error: String) {
        self.0.send_modify(|now| {
            now.refused += 1;
            now.last_refusal = Some(error);
        });
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        self.0
            .send_modify(|now| now.writing = now.writing.saturating_sub(1));
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic with no message".to_owned()
    }
}

impl Control {
    pub(super) fn draft(&self, prepared: &Prepared, attempt_id: &AttemptId) -> ReceiptDraft {
        let action = &prepared.action;
        ReceiptDraft {
            kind: Some(ReceiptKind::Attempt),
            attempt_id: Some(attempt_id.to_owned()),
            action: Some(action.name.clone()),
            action_hash: Some(action.hash.clone()),
            principal: Some(action.principal.clone()),
            resource: action.resource.clone(),
            environment: Some(action.environment.clone()),
            effect_key: action.effect_key.clone(),
            arguments: Some(action.redacted_arguments.clone()),
            decision: Some(prepared.decision.as_str().to_owned()),
            raised_by: prepared.raised_by.map(|by| by.as_str().to_owned()),
            tool_schema: action.tool_schema.clone(),
            mode: Some(self.inner.policy.mode().as_str().to_owned()),
            policy_hash: Some(self.inner.policy.hash().to_owned()),
            attempt_started_at: Some(self.now()),
            ..ReceiptDraft::default()
        }
    }

    /// Step 4+5's input: consume `approval` (if presented) and reserve the action's effect key
    /// (if any) until `now` plus the lease, for attempt `attempt_id`. Shared by the pipeline and
    /// [`Control::hand_off`], so both present and reserve the same way.
    pub(super) fn begin_attempt_of(
        &self,
        request: &ActionRequest,
        prepared: &Prepared,
        attempt_id: &AttemptId,
        approval: Option<ApprovalId>,
        draft: &ReceiptDraft,
        now: crate::clock::Timestamp,
    ) -> BeginAttempt {
        let action = &prepared.action;
        BeginAttempt {
            attempt_id: attempt_id.to_owned(),
            action_hash: action.hash.clone(),
            approval: approval.map(|id| PresentedApproval {
                id,
                fingerprint: prepared.fingerprint.clone(),
                run: request.run.clone(),
            }),
            effect: action.effect_key.clone().map(|key| EffectClaim {
                key,
                lease_until: now.plus(self.inner.lease),
            }),
            context: self.attempt_context(prepared, draft),
            refusal_draft: draft.clone(),
        }
    }

    /// What the effect record an attempt reserves keeps about it (see
    /// [`crate::effect::AttemptContext`]); `None` without an effect key.
    pub(super) fn attempt_context(
        &self,
        prepared: &Prepared,
        draft: &ReceiptDraft,
    ) -> Option<AttemptContext> {
        let action = &prepared.action;
        action.effect_key.as_ref()?;
        Some(AttemptContext {
            action: action.name.clone(),
            principal: action.principal.clone(),
            environment: action.environment.clone(),
            policy_hash: self.inner.policy.hash().to_owned(),
            started_at: draft.attempt_started_at.unwrap_or_else(|| self.now()),
            approval_id: None,
            resolvers: prepared.resolvers.clone(),
        })
    }

    /// Decide `request` and, if allowed or approved, run `executor` at most once with the
    /// canonical arguments (as a `serde_json::Value`).
    ///
    /// # Errors
    ///
    /// A [`ControlError`]; each variant says whether the executor ran
    /// ([`ControlError::did_run`]) and whether a retry may run ([`ControlError::may_retry`]).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before the reservation leaves nothing but what was already written
    /// (a pending approval request, a refusal receipt). Dropping it while the executor runs
    /// records the effect `ambiguous` (on a Tokio runtime, at once, on a task of its own that
    /// [`Control::settled`] waits for; otherwise when the lease lapses): it is never released
    /// for a second run.
    pub async fn execute<T, F, Fut>(
        &self,
        request: ActionRequest,
        executor: F,
    ) -> Result<Executed<T>, ControlError>
    where
        F: FnOnce(serde_json::Value) -> Fut,
        Fut: Future<Output = Result<T, ExecutorError>>,
    {
        let prepared = self.prepare(&request)?;
        let attempt_id = AttemptId::generate();
        let draft = self.draft(&prepared, &attempt_id);
        if self.inner.policy.mode() == Mode::Observe {
            return self.observe(&request, &prepared, draft, executor).await;
        }
        match prepared.decision {
            Decision::Deny => {
                let reason = self.deny(&request, &prepared, &attempt_id, draft).await?;
                Err(ControlError::ActionDenied {
                    action: prepared.action.name.clone(),
                    action_hash: prepared.action.hash.clone(),
                    reason,
                    policy_hash: self.inner.policy.hash().to_owned(),
                })
            }
            Decision::Allow => {
                self.run(&request, &prepared, &attempt_id, None, draft, executor)
                    .await
            }
            Decision::Approve => {
                let approval = match &request.approval {
                    Some(id) => id.clone(),
                    None => self.open_approval(&request, &prepared, &draft).await?,
                };
                self.run(
                    &request,
                    &prepared,
                    &attempt_id,
                    Some(approval),
                    draft,
                    executor,
                )
                .await
            }
        }
    }

    /// Step 2's refusal: write the denial receipt. A granted approval presented for this exact
    /// action was given under a policy that allowed asking; the policy now denies the action, so
    /// the approval is voided (never consumed) and the receipt says `policy_changed` (case B05).
    /// Returns the reason recorded.
    pub(super) async fn deny(
        &self,
        request: &ActionRequest,
        prepared: &Prepared,
        attempt_id: &AttemptId,
        draft: ReceiptDraft,
    ) -> Result<DenyReason, ControlError> {
        let store_error = |source| ControlError::Store {
            after_run: false,
            source,
        };
        if let Some(id) = &request.approval {
            let presented = self.inner.store.approval(id).await.map_err(store_error)?;
            if let Some(record) = presented.filter(|record| {
                record.state == ApprovalState::Granted && record.action_hash == prepared.action.hash
            }) {
                let begin = BeginAttempt {
                    attempt_id: attempt_id.to_owned(),
                    action_hash: prepared.action.hash.clone(),
                    // INVARIANT (deny-voids): no stored entry fingerprint equals this sentinel,
                    // so `plan_take` can only refuse; a granted request is voided.
                    approval: Some(PresentedApproval {
                        id: record.id,
                        fingerprint: DENIED_BY_POLICY.to_owned(),
                        run: request.run.clone(),
                    }),
                    effect: None,
                    context: None,
                    refusal_draft: draft,
                };
                return match self
                    .inner
                    .store
                    .begin_attempt(begin, self.now())
                    .await
                    .map_err(store_error)?
                {
                    // The grant is voided (`policy_changed`); a grant the store refused for
                    // another reason (expired, another run's) stays as it was, and the action
                    // is denied for the policy's own reason.
                    BeginOutcome::Refused { refusal, .. } => {
                        if refusal.kind() == Reason::PolicyChanged {
                            Ok(DenyReason::PolicyChanged)
                        } else {
                            Ok(prepared.denial)
                        }
                    }
                    BeginOutcome::Started { .. } => Err(ControlError::Internal(
                        "a denied action consumed an approval".to_owned(),
                    )),
                };
            }
        }
        let draft = draft.with_outcome(ReceiptOutcome::Refused, Some(prepared.reason));
        self.inner
            .store
            .append_receipt(draft, self.now())
            .await
            .map_err(store_error)?;
        Ok(prepared.denial)
    }

    /// Steps 4–7.
    async fn run<T, F, Fut>(
        &self,
        request: &ActionRequest,
        prepared: &Prepared,
        attempt_id: &AttemptId,
        approval: Option<ApprovalId>,
        mut draft: ReceiptDraft,
        executor: F,
    ) -> Result<Executed<T>, ControlError>
    where
        F: FnOnce(serde_json::Value) -> Fut,
        Fut: Future<Output = Result<T, ExecutorError>>,
    {
        let store_error = |source| ControlError::Store {
            after_run: false,
            source,
        };
        let action = &prepared.action;
        if approval.is_some() || action.effect_key.is_some() {
            let mut reconciled = false;
            loop {
                let now = self.now();
                let begin = self.begin_attempt_of(
                    request,
                    prepared,
                    attempt_id,
                    approval.clone(),
                    &draft,
                    now,
                );
                match self
                    .inner
                    .store
                    .begin_attempt(begin, now)
                    .await
                    .map_err(store_error)?
                {
                    BeginOutcome::Started { approval } => {
                        if let Some(record) = approval {
                            draft.approval_id = Some(record.id.clone());
                            draft.approver = record.approver.clone();
                            draft.note = record.note.clone();
                            draft.approval_policy_hash = Some(record.policy_hash.clone());
                            draft.approvers =
                                Some(record.granted_by().into_iter().cloned().collect());
                        }
                        break;
                    }
                    BeginOutcome::Refused { refusal, .. } => {
                        if let (
                            false,
                            Some(hook),
                            BeginRefusal::Effect {
                                decision: RetryDecision::Ambiguous,
                                record,
                            },
                        ) = (reconciled, &self.inner.reconcile, &refusal)
                        {
                            reconciled = true;
                            match self.reconcile(hook.as_ref(), record).await? {
                                Some(EffectState::Failed) => continue,
                                Some(_) => {
                                    return Err(ControlError::DuplicateEffect {
                                        effect_key: record.key.clone(),
                                        in_progress: false,
                                    });
                                }
                                None => {}
                            }
                        }
                        return Err(begin_refusal(refusal, approval.as_ref(), action));
                    }
                }
            }
        }

        let arguments = action.arguments.to_value();
        // The guard holds the draft while the executor runs (it records a dropped attempt
        // ambiguous) and hands it back afterwards: moved, not cloned.
        let mut guard = InFlight {
            store: Arc::clone(&self.inner.store),
            clock: Arc::clone(&self.inner.clock),
            unrecorded: Arc::clone(&self.inner.unrecorded),
            finish: Some(FinishAttempt {
                attempt_id: attempt_id.to_owned(),
                effect_key: action.effect_key.clone(),
                state: EffectState::Ambiguous,
                detail: Some("the caller dropped the attempt while the executor ran".to_owned()),
                draft: draft.with_outcome(ReceiptOutcome::Ambiguous, Some("cancelled")),
            }),
        };
        let outcome = run_executor(executor, arguments, request.timeout).await;
        let draft = guard
            .finish
            .take()
            .map(|finish| finish.draft)
            // INVARIANT (in-flight): `finish` is set above and taken only here or on drop.
            .ok_or_else(|| ControlError::Internal("the in-flight record was lost".to_owned()))?;

        let (state, receipt_outcome, reason, detail) = match &outcome {
            ExecutorOutcome::Value(_) => (
                EffectState::Committed,
                ReceiptOutcome::Committed,
                None,
                request.commit_note.as_ref().and_then(CommitNoteSlot::get),
            ),
            ExecutorOutcome::NotExecuted(message, _) => (
                EffectState::Failed,
                ReceiptOutcome::Failed,
                Some("not_executed"),
                Some(message.clone()),
            ),
            ExecutorOutcome::MayHaveRun(message, _) => (
                EffectState::Ambiguous,
                ReceiptOutcome::Ambiguous,
                Some("executor_error"),
                Some(message.clone()),
            ),
            ExecutorOutcome::Panicked(message) => (
                EffectState::Ambiguous,
                ReceiptOutcome::Ambiguous,
                Some("panic"),
                Some(format!("the executor panicked: {message}")),
            ),
            ExecutorOutcome::TimedOut(limit) => (
                EffectState::Ambiguous,
                ReceiptOutcome::Ambiguous,
                Some("timeout"),
                Some(format!("the executor ran past its {limit:?} timeout")),
            ),
        };
        let mut final_draft = draft.with_outcome(receipt_outcome, reason);
        final_draft.detail = detail.clone();
        final_draft.exit_status = request.exit_status.as_ref().and_then(ExitStatusSlot::get);
        let finish = FinishAttempt {
            attempt_id: attempt_id.to_owned(),
            effect_key: action.effect_key.clone(),
            state,
            detail: detail.clone(),
            draft: final_draft,
        };
        let receipt = self
            .inner
            .store
            .finish_attempt(finish, self.now())
            .await
            .map_err(|source| ControlError::Store {
                after_run: true,
                source,
            })?;
        let mut outcome = outcome;
        let evidence = outcome.take_evidence();
        match outcome {
            ExecutorOutcome::Value(value) => Ok(Executed { value, receipt }),
            ExecutorOutcome::NotExecuted(message, _) => Err(ControlError::NotExecuted {
                effect_key: action.effect_key.clone(),
                message,
                evidence,
            }),
            ExecutorOutcome::MayHaveRun(..)
            | ExecutorOutcome::Panicked(_)
            | ExecutorOutcome::TimedOut(_) => Err(ControlError::OutcomeUnknown {
                action: action.name.clone(),
                effect_key: action.effect_key.clone(),
                cause: detail.unwrap_or_default(),
                evidence,
            }),
        }
    }

    /// Ask the reconcile hook; record a definite answer. Returns the recorded state.
    async fn reconcile(
        &self,
        hook: &dyn ReconcileHook,
        record: &EffectRecord,
    ) -> Result<Option<EffectState>, ControlError> {
        let to = match hook.reconcile(record).await {
            Ok(Reconciled::Committed) => EffectState::Committed,
            Ok(Reconciled::Failed) => EffectState::Failed,
            Ok(Reconciled::Unknown) | Err(_) => return Ok(None),
        };
        let resolve = ResolveEffect {
            key: record.key.clone(),
            to,
            resolver: Resolver::Hook,
            note: None,
        };
        match self.inner.store.resolve_effect(resolve, self.now()).await {
            Ok(_) => Ok(Some(to)),
            // Someone else resolved it first: go by what is stored now. (The hook is never
            // judged as a person, so `NotPermitted` cannot come back; treat it the same.)
            // (The hook keeps no note, so `NoteTooLong` cannot come back either.)
            Err(
                ResolveError::Refused { .. }
                | ResolveError::NotPermitted { .. }
                | ResolveError::NoteTooLong(_),
            ) => Ok(None),
            Err(ResolveError::Store(source)) => Err(ControlError::Store {
                after_run: false,
                source,
            }),
        }
    }

    /// Observe mode: decide and record, enforce nothing.
    async fn observe<T, F, Fut>(
        &self,
        request: &ActionRequest,
        prepared: &Prepared,
        draft: ReceiptDraft,
        executor: F,
    ) -> Result<Executed<T>, ControlError>
    where
        F: FnOnce(serde_json::Value) -> Fut,
        Fut: Future<Output = Result<T, ExecutorError>>,
    {
        let would = match prepared.decision {
            Decision::Allow => "would_allow",
            Decision::Approve => "would_require_approval",
            Decision::Deny => match prepared.denial {
                DenyReason::UnknownAction => "would_deny_unknown_action",
                DenyReason::NoMatchingRule => "would_deny_no_matching_rule",
                DenyReason::Denied | DenyReason::PolicyChanged => "would_deny",
            },
        };
        let outcome = run_executor(
            executor,
            prepared.action.arguments.to_value(),
            request.timeout,
        )
        .await;
        let detail = match &outcome {
            ExecutorOutcome::Value(_) => None,
            ExecutorOutcome::NotExecuted(message, _) => Some(format!("not executed: {message}")),
            ExecutorOutcome::MayHaveRun(message, _) => Some(format!("executor error: {message}")),
            ExecutorOutcome::Panicked(message) => Some(format!("the executor panicked: {message}")),
            ExecutorOutcome::TimedOut(limit) => {
                Some(format!("the executor ran past its {limit:?} timeout"))
            }
        };
        let mut observed = draft.with_outcome(ReceiptOutcome::Observed, Some(would));
        observed.detail = detail.clone();
        observed.exit_status = request.exit_status.as_ref().and_then(ExitStatusSlot::get);
        let receipt = self
            .inner
            .store
            .append_receipt(observed, self.now())
            .await
            .map_err(|source| ControlError::Store {
                after_run: true,
                source,
            })?;
        let mut outcome = outcome;
        let evidence = outcome.take_evidence();
        match outcome {
            ExecutorOutcome::Value(value) => Ok(Executed { value, receipt }),
            ExecutorOutcome::NotExecuted(message, _) => Err(ControlError::NotExecuted {
                effect_key: None,
                message,
                evidence,
            }),
            ExecutorOutcome::MayHaveRun(..)
            | ExecutorOutcome::Panicked(_)
            | ExecutorOutcome::TimedOut(_) => Err(ControlError::OutcomeUnknown {
                action: prepared.action.name.clone(),
                effect_key: None,
                cause: detail.unwrap_or_default(),
                evidence,
            }),
        }
    }
}

async fn run_executor<T, F, Fut>(
    executor: F,
    arguments: serde_json::Value,
    timeout: Option<Duration>,
) -> ExecutorOutcome<T>
where
    F: FnOnce(serde_json::Value) -> Fut,
    Fut: Future<Output = Result<T, ExecutorError>>,
{
    let call = AssertUnwindSafe(async move { executor(arguments).await }).catch_unwind();
    let result = match timeout {
        Some(limit) => match tokio::time::timeout(limit, call).await {
            Ok(result) => result,
            Err(_) => return ExecutorOutcome::TimedOut(limit),
        },
        None => call.await,
    };
    match result {
        Ok(Ok(value)) => ExecutorOutcome::Value(value),
        Ok(Err(error)) => match error.into_parts() {
            (BareExecutorError::NotExecuted(message), evidence) => {
                ExecutorOutcome::NotExecuted(message, evidence)
            }
            (BareExecutorError::MayHaveRun(error), evidence) => {
                ExecutorOutcome::MayHaveRun(error.to_string(), evidence)
            }
        },
        Err(payload) => ExecutorOutcome::Panicked(panic_message(payload.as_ref())),
    }
}

pub(super) fn effect_refusal(decision: RetryDecision, record: &EffectRecord) -> ControlError {
    match decision {
        RetryDecision::InProgress => ControlError::DuplicateEffect {
            effect_key: record.key.clone(),
            in_progress: true,
        },
        RetryDecision::Committed => ControlError::DuplicateEffect {
            effect_key: record.key.clone(),
            in_progress: false,
        },
        RetryDecision::Ambiguous | RetryDecision::LeaseExpired => ControlError::AmbiguousEffect {
            effect_key: record.key.clone(),
        },
        RetryDecision::Reserve => ControlError::Internal(format!(
            "effect `{}` was refused with a reserve decision",
            record.key
        )),
    }
}

pub(super) fn begin_refusal(
    refusal: BeginRefusal,
    presented: Option<&ApprovalId>,
    action: &Action,
) -> ControlError {
    use crate::approval::TakeRefusal;
    match refusal {
        BeginRefusal::Effect { decision, record } => effect_refusal(decision, &record),
        BeginRefusal::Approval { refusal, record } => {
            let request_id = record
                .as_ref()
                .map(|record| record.id.clone())
                .or_else(|| presented.cloned())
                .unwrap_or_else(|| ApprovalId::from_stored(String::new()));
            match (refusal, record) {
                (TakeRefusal::Unknown, _) | (_, None) => {
                    ControlError::ApprovalUnknown { request_id }
                }
                (TakeRefusal::Pending, Some(record)) => ControlError::ApprovalRequired {
                    request_id,
                    action_hash: record.action_hash,
                    expires_at: record.expires_at,
                },
                (TakeRefusal::Denied, Some(record)) => ControlError::ApprovalDenied {
                    request_id,
                    approver: record.approver.unwrap_or_default(),
                    note: record.note,
                },
                (TakeRefusal::Consumed, _) => ControlError::ApprovalConsumed { request_id },
                (TakeRefusal::Expired, Some(record)) => ControlError::ApprovalExpired {
                    request_id,
                    expires_at: record.expires_at,
                },
                (TakeRefusal::Mismatch, Some(record)) => ControlError::ApprovalMismatch {
                    request_id,
                    approved_hash: record.action_hash.as_str().to_owned(),
                    action_hash: action.hash.clone(),
                    // Found by a first-time user: another principal presenting a grant was
                    // told its arguments differed.
                    other_principal: record.principal != action.principal,
                },
                (TakeRefusal::PolicyChanged, _) => ControlError::ApprovalVoid { request_id },
                (TakeRefusal::Revoked, _) => ControlError::ApprovalRevoked { request_id },
                (TakeRefusal::Cancelled, _) => ControlError::ApprovalCancelled { request_id },
                (TakeRefusal::OtherRun, Some(record)) => ControlError::ApprovalOtherRun {
                    request_id,
                    run: record.run,
                },
            }
        }
    }
}
