//! Step 3 of the pipeline, the approval gate: a usable request for this exact action hash is
//! found, or a pending one is opened and the [`super::ApprovalProvider`] asked.

use std::time::Duration;

use crate::action::ActionHash;
use crate::approval::{ApprovalId, ApprovalRecord, ApprovalState, Correlation};
use crate::clock::Timestamp;
use crate::error::{ControlError, StoreError};
use crate::evidence::{ReceiptDraft, ReceiptOutcome};
use crate::policy::{Decision, Mode};
use crate::store::{NewApproval, OpenOutcome};

use super::pipeline::effect_refusal;
use super::{ActionRequest, Control, Prepared, ProviderOutcome};

impl Control {
    /// Find or open the approval request for `request` without running anything: step 1 to 3
    /// of the pipeline, minus the approval provider and the wait.
    ///
    /// For adapters whose framework decides before invocation (the OpenAI Agents SDK): the
    /// request exists, bound to the action hash, as soon as the framework pauses, so a human can
    /// answer it out of band (`countersign approve`) and the attempt that later runs takes it by
    /// hash. Idempotent for one action hash: a second call finds the same request.
    ///
    /// Returns `None` when the call needs no approval (policy says `allow` or `deny`, or the
    /// policy is in observe mode); otherwise the request, `pending` (created now or earlier),
    /// `granted` (answered yes, unused, unexpired) or `denied` (a human's no that still stands
    /// until that request's `expires_at`). Writes only what step 3 writes: the pending request,
    /// and expiry or void marks on older requests for the same hash, each with its receipt.
    ///
    /// # Errors
    ///
    /// Refusals of step 1 (`invalid_arguments`, `bad_template`, `no_principal`); the effect
    /// key's refusal when it would be refused anyway (`duplicate`, `in_progress`, `ambiguous`:
    /// nobody is asked, and no receipt is written until an attempt is made); store errors.
    ///
    /// # Cancel safety
    ///
    /// One store transaction: dropping the future leaves the request created or not.
    pub async fn request_approval(
        &self,
        request: &ActionRequest,
    ) -> Result<Option<ApprovalRecord>, ControlError> {
        let prepared = self.prepare(request)?;
        if self.inner.policy.mode() == Mode::Observe || prepared.decision != Decision::Approve {
            return Ok(None);
        }
        let now = self.now();
        let opened = self
            .inner
            .store
            .open_approval(self.new_approval(request, &prepared, now), now)
            .await
            .map_err(|source| ControlError::Store {
                after_run: false,
                source,
            })?;
        match opened {
            OpenOutcome::Granted(record)
            | OpenOutcome::Pending { record, .. }
            | OpenOutcome::Denied(record) => Ok(Some(record)),
            OpenOutcome::CorrelationConflict(record) => {
                Err(correlation_conflict(&record, &prepared.action.hash))
            }
            OpenOutcome::EffectRefused { decision, record } => {
                Err(effect_refusal(decision, &record))
            }
        }
    }

    /// The request mapped to a framework call (see [`ActionRequest::with_correlation`]), if
    /// any.
    ///
    /// # Errors
    ///
    /// [`StoreError`] only.
    ///
    /// # Cancel safety
    ///
    /// A read: dropping the future changes nothing.
    pub async fn correlated(
        &self,
        framework: &str,
        run: Option<&str>,
        call_id: &str,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        let correlation = Correlation {
            framework: framework.to_owned(),
            run: run.filter(|run| !run.is_empty()).map(str::to_owned),
            call_id: call_id.to_owned(),
        };
        self.inner.store.correlated(&correlation).await
    }

    /// Step 3: find a usable approval, or create one and ask.
    pub(super) async fn open_approval(
        &self,
        request: &ActionRequest,
        prepared: &Prepared,
        draft: &ReceiptDraft,
    ) -> Result<ApprovalId, ControlError> {
        let store_error = |source| ControlError::Store {
            after_run: false,
            source,
        };
        let now = self.now();
        let new = self.new_approval(request, prepared, now);
        let opened = self
            .inner
            .store
            .open_approval(new, now)
            .await
            .map_err(store_error)?;
        // Every refusal here ends the attempt: one receipt, then the refusal itself.
        let (refusal, receipt) = match opened {
            OpenOutcome::Granted(record) => return Ok(record.id),
            OpenOutcome::Pending { record, .. } => {
                return self.ask(request, draft, record).await;
            }
            OpenOutcome::Denied(record) => {
                let mut receipt = draft
                    .clone()
                    .with_outcome(ReceiptOutcome::Refused, Some("approval_denied"));
                receipt.approval_id = Some(record.id.clone());
                receipt.approver = record.approver.clone();
                receipt.note = record.note.clone();
                let refusal = ControlError::ApprovalDenied {
                    request_id: record.id,
                    approver: record.approver.unwrap_or_default(),
                    note: record.note,
                };
                (refusal, receipt)
            }
            OpenOutcome::CorrelationConflict(record) => {
                let refusal = correlation_conflict(&record, &prepared.action.hash);
                let mut receipt = draft
                    .clone()
                    .with_outcome(ReceiptOutcome::Refused, Some(refusal.reason()));
                receipt.approval_id = Some(record.id.clone());
                receipt.detail = Some(format!(
                    "duplicate correlation: this framework call is already mapped to approval `{}` for {}",
                    record.id, record.action_hash
                ));
                (refusal, receipt)
            }
            OpenOutcome::EffectRefused { decision, record } => {
                let refusal = effect_refusal(decision, &record);
                let receipt = draft
                    .clone()
                    .with_outcome(ReceiptOutcome::Refused, Some(refusal.reason()));
                (refusal, receipt)
            }
        };
        self.inner
            .store
            .append_receipt(receipt, self.now())
            .await
            .map_err(store_error)?;
        Err(refusal)
    }

    /// Step 3's asking: hand a pending request to the approval provider, or wait for an answer
    /// out of band; the request's id if one came, else `ApprovalRequired`.
    async fn ask(
        &self,
        request: &ActionRequest,
        draft: &ReceiptDraft,
        pending: ApprovalRecord,
    ) -> Result<ApprovalId, ControlError> {
        let store_error = |source| ControlError::Store {
            after_run: false,
            source,
        };
        if let Some(provider) = &self.inner.approvals {
            match provider.request(&pending.to_pending()).await {
                Ok(ProviderOutcome::Answered) => return Ok(pending.id),
                Ok(ProviderOutcome::Deferred) => {}
                // The attempt ends here: an answer about other arguments, an expired request.
                // Record the refusal like every other ended attempt (a store failure is not
                // an ended attempt: nothing could be recorded).
                Err(refusal) if !matches!(refusal, ControlError::Store { .. }) => {
                    let mut receipt = draft
                        .clone()
                        .with_outcome(ReceiptOutcome::Refused, Some(refusal.reason()));
                    receipt.approval_id = Some(pending.id.clone());
                    receipt.detail = Some(refusal.to_string());
                    self.inner
                        .store
                        .append_receipt(receipt, self.now())
                        .await
                        .map_err(store_error)?;
                    return Err(refusal);
                }
                Err(error) => return Err(error),
            }
        }
        if let Some(wait) = request.wait
            && self.wait_for_answer(&pending.id, wait).await?
        {
            return Ok(pending.id);
        }
        Err(ControlError::ApprovalRequired {
            request_id: pending.id,
            action_hash: pending.action_hash,
            expires_at: pending.expires_at,
        })
    }

    /// The pending request step 3 would create for `prepared` at `now`.
    fn new_approval(
        &self,
        request: &ActionRequest,
        prepared: &Prepared,
        now: Timestamp,
    ) -> NewApproval {
        let action = &prepared.action;
        let record = ApprovalRecord {
            id: ApprovalId::generate(),
            action_hash: action.hash.clone(),
            action: action.name.clone(),
            arguments: action.redacted_arguments.clone(),
            principal: action.principal.clone(),
            resource: action.resource.clone(),
            environment: action.environment.clone(),
            effect_key: action.effect_key.clone(),
            policy_hash: self.inner.policy.hash().to_owned(),
            entry_fingerprint: prepared.fingerprint.clone(),
            state: ApprovalState::Pending,
            created_at: now,
            expires_at: now.plus(prepared.approval_ttl),
            answered_at: None,
            approver: None,
            note: None,
            consumed_at: None,
            consumed_by: None,
            run: request.run.clone(),
            rule: prepared.approval_rule.clone().unwrap_or_default(),
            answers: Vec::new(),
        };
        NewApproval {
            record,
            effect_key: action.effect_key.clone(),
            correlation: request.correlation(),
        }
    }

    /// Poll until the request leaves `pending` or expires (true) or `wait` passes (false).
    /// Never writes. Expiry is judged by the store's clock (issue #22): its distance from this
    /// control's clock is read once.
    async fn wait_for_answer(&self, id: &ApprovalId, wait: Duration) -> Result<bool, ControlError> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut delay = Duration::from_millis(50);
        let asked = self.now();
        let store_now =
            self.inner
                .store
                .store_now(asked)
                .await
                .map_err(|source| ControlError::Store {
                    after_run: false,
                    source,
                })?;
        let skew = store_now.as_millis().saturating_sub(asked.as_millis());
        loop {
            let record =
                self.inner
                    .store
                    .approval(id)
                    .await
                    .map_err(|source| ControlError::Store {
                        after_run: false,
                        source,
                    })?;
            match record {
                Some(record)
                    if record.state == ApprovalState::Pending
                        && !record.is_expired_at(Timestamp::from_millis(
                            self.now().as_millis().saturating_add(skew),
                        )) => {}
                // Answered, expired or gone: the take step decides and records.
                _ => return Ok(true),
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(delay.min(deadline - now)).await;
            delay = (delay * 2).min(Duration::from_secs(1));
        }
    }
}

/// The refusal for a framework call already mapped to a request about another action hash.
fn correlation_conflict(record: &ApprovalRecord, action_hash: &ActionHash) -> ControlError {
    ControlError::ApprovalMismatch {
        request_id: record.id.clone(),
        approved_hash: record.action_hash.as_str().to_owned(),
        action_hash: action_hash.clone(),
        other_principal: false,
    }
}
