//! The answer path: [`submit_answer`], the one way every surface records a human's answer, and
//! the [`ApprovalProvider`] the pipeline asks when policy says `approve` (for a framework's own
//! pause, an [`InterruptApprovalProvider`]).

use std::sync::Arc;

use crate::action::REDACTED;
use crate::action::canonical;
use crate::approval::{
    AnswerDecision, ApprovalId, ApprovalRecord, FrameworkInterrupt, InterruptError, PendingApproval,
};
use crate::approver::{Channel, Credential};
use crate::clock::Timestamp;
use crate::effect::{EffectKey, EffectRecord, EffectState};
use crate::error::{AnswerError, ControlError, ResolveError, StoreError};
use crate::evidence::{Anchor, VerifyReport};
use crate::store::{RecordAnswer, ResolveEffect, Resolver, Store};

use super::Control;

/// What an [`ApprovalProvider`] did with a pending request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderOutcome {
    /// An answer was recorded in the store; the pipeline goes on to take it.
    Answered,
    /// Nobody answered now (out of band, or the framework paused the run): the attempt ends
    /// with `ApprovalRequired` and the request stays pending.
    Deferred,
}

/// Asks a human when policy says `approve` and nothing usable was presented.
#[async_trait::async_trait]
pub trait ApprovalProvider: Send + Sync {
    /// Ask about `pending`; record the answer, if one comes, in the store.
    ///
    /// # Errors
    ///
    /// A [`ControlError`] that ends the attempt (for example `ApprovalMismatch` when the answer
    /// is about other arguments).
    async fn request(&self, pending: &PendingApproval) -> Result<ProviderOutcome, ControlError>;
}

/// The approval provider that routes requests through a framework's interrupt.
///
/// Constructed by the operator with the store and the adapter's [`FrameworkInterrupt`]; it
/// records the answer (and who gave it) in the store, after checking that an answer carrying
/// arguments is about exactly the pending ones.
pub struct InterruptApprovalProvider {
    store: Arc<dyn Store>,
    interrupt: Arc<dyn FrameworkInterrupt>,
    clock: Arc<dyn crate::clock::Clock>,
}

impl InterruptApprovalProvider {
    /// A provider that asks through `interrupt` and records answers in `store`, judging expiry
    /// by `clock` (use the same clock as the [`crate::Control`]).
    pub fn new(
        store: Arc<dyn Store>,
        interrupt: Arc<dyn FrameworkInterrupt>,
        clock: Arc<dyn crate::clock::Clock>,
    ) -> InterruptApprovalProvider {
        InterruptApprovalProvider {
            store,
            interrupt,
            clock,
        }
    }
}

#[async_trait::async_trait]
impl ApprovalProvider for InterruptApprovalProvider {
    async fn request(&self, pending: &PendingApproval) -> Result<ProviderOutcome, ControlError> {
        let answer = match self.interrupt.interrupt(pending.clone()).await {
            Ok(answer) => answer,
            Err(InterruptError::Suspended) => return Ok(ProviderOutcome::Deferred),
            Err(InterruptError::Failed(message)) => {
                return Err(ControlError::InterruptFailed {
                    request_id: pending.request_id.clone(),
                    framework: self.interrupt.framework().to_owned(),
                    message,
                });
            }
        };
        if self.interrupt.carries_approved_arguments() {
            answered_about_pending(pending, answer.arguments.as_ref())?;
        }
        // An adapter hands over a token or a name; it never vouches for an identity itself
        // (only a surface the operator runs, such as the approval service, does).
        let approver = match answer.approver {
            Credential::Verified { id, .. } => Credential::Unverified {
                source: format!("the {} adapter, naming `{id}`", self.interrupt.framework()),
                reason: "an adapter cannot vouch for an approver: pass the approver's token on the resuming call".to_owned(),
            },
            other => other,
        };
        let submitted = crate::store::RecordAnswer {
            request_id: pending.request_id.clone(),
            decision: Ok(answer.decision),
            approver,
            channel: self.interrupt.channel(),
            shown_hash: answer.shown_hash,
            note: answer.note,
        };
        submit_answer(self.store.as_ref(), submitted, self.clock.now())
            .await
            .map_err(ControlError::from_answer_error)?;
        Ok(ProviderOutcome::Answered)
    }
}

/// Check that an answer's arguments are the pending ones (after the same redaction).
fn answered_about_pending(
    pending: &PendingApproval,
    answered: Option<&serde_json::Value>,
) -> Result<(), ControlError> {
    let mismatch = |answered_hash: String| ControlError::ApprovalMismatch {
        request_id: pending.request_id.clone(),
        approved_hash: answered_hash,
        action_hash: pending.action_hash.clone(),
        other_principal: false,
    };
    let Some(answered) = answered else {
        return Err(mismatch("(no arguments in the answer)".to_owned()));
    };
    let mut answered = answered.clone();
    // Secret arguments are shown redacted; keep the redaction marker where the pending had it.
    if let (serde_json::Value::Object(answered_map), serde_json::Value::Object(pending_map)) =
        (&mut answered, &pending.arguments)
    {
        for (key, value) in pending_map {
            if value.as_str() == Some(REDACTED) && answered_map.contains_key(key) {
                answered_map.insert(key.clone(), value.clone());
            }
        }
    }
    let answered = canonical::to_canonical(&answered)
        .map_err(|_| mismatch("(unrepresentable arguments)".to_owned()))?;
    let pending_canonical = canonical::to_canonical(&pending.arguments)
        .map_err(|_| mismatch("(unrepresentable pending arguments)".to_owned()))?;
    if answered != pending_canonical {
        return Err(mismatch(answered.sha256()));
    }
    Ok(())
}

/// Record a human's answer: the one path every surface shares (the CLI, the approval service,
/// the Python helpers, the interrupt provider, the gateway).
///
/// The store judges it against the request's stored rule, in one transaction with the answer
/// and its receipt; a refused answer changes nothing but writes a refusal receipt naming who
/// sent it and why.
///
/// # Errors
///
/// [`crate::AnswerError`]: unknown request, an invalid decision, no approver, a token that
/// does not verify, not entitled, self-approval, a hash echo that does not match, already
/// decided (with the stored decision), expired, or a store failure.
///
/// # Cancel safety
///
/// One store transaction: dropping the future either leaves the answer unrecorded or recorded,
/// never half.
pub async fn submit_answer(
    store: &dyn Store,
    answer: crate::store::RecordAnswer,
    now: Timestamp,
) -> Result<ApprovalRecord, crate::error::AnswerError> {
    if let Credential::Asserted(name) | Credential::Verified { id: name, .. } = &answer.approver
        && name.trim().is_empty()
    {
        return Err(crate::error::AnswerError::NoApprover);
    }
    store.answer_approval(answer, now).await
}

/// [`submit_answer`] for the programmatic API: an asserted `approver` through
/// [`Channel::Api`], with no hash echo (the answer receipt records `hash_confirmed: false`).
///
/// # Errors
///
/// As [`submit_answer`].
///
/// # Cancel safety
///
/// As [`submit_answer`].
pub async fn record_answer(
    store: &dyn Store,
    request_id: &ApprovalId,
    decision: AnswerDecision,
    approver: &str,
    note: Option<&str>,
    now: Timestamp,
) -> Result<ApprovalRecord, crate::error::AnswerError> {
    let answer = crate::store::RecordAnswer {
        request_id: request_id.clone(),
        decision: Ok(decision),
        approver: Credential::Asserted(approver.to_owned()),
        channel: Channel::Api,
        shown_hash: None,
        note: note.map(str::to_owned),
    };
    submit_answer(store, answer, now).await
}

impl Control {
    /// Record a human's answer as the programmatic API: an asserted `approver` through
    /// [`Channel::Api`], with no hash echo. Judged by the request's stored rule like every
    /// answer; [`Control::submit_answer`] takes a token, a channel and the hash shown.
    ///
    /// # Errors
    ///
    /// [`AnswerError`]: see [`submit_answer`].
    pub async fn answer(
        &self,
        request_id: &ApprovalId,
        decision: AnswerDecision,
        approver: &str,
        note: Option<&str>,
    ) -> Result<ApprovalRecord, AnswerError> {
        record_answer(
            self.inner.store.as_ref(),
            request_id,
            decision,
            approver,
            note,
            self.now(),
        )
        .await
    }

    /// Record an answer as a surface submits it (the one closed answer contract: see
    /// [`submit_answer`]).
    ///
    /// # Errors
    ///
    /// [`AnswerError`]: see [`submit_answer`].
    ///
    /// # Cancel safety
    ///
    /// One store transaction.
    pub async fn submit_answer(&self, answer: RecordAnswer) -> Result<ApprovalRecord, AnswerError> {
        submit_answer(self.inner.store.as_ref(), answer, self.now()).await
    }

    /// Resolve an ambiguous effect to `committed` or `failed`.
    ///
    /// # Errors
    ///
    /// [`ResolveError`]: unknown key, not ambiguous, bad target, store.
    pub async fn resolve(
        &self,
        key: &EffectKey,
        to: EffectState,
        resolver: &str,
        note: Option<&str>,
    ) -> Result<EffectRecord, ResolveError> {
        let resolve = ResolveEffect {
            key: key.clone(),
            to,
            resolver: Resolver::Person {
                credential: Credential::Asserted(resolver.to_owned()),
                channel: Channel::Api,
            },
            note: note.map(str::to_owned),
        };
        self.inner.store.resolve_effect(resolve, self.now()).await
    }

    /// Verify the receipt chain, against `anchor` if given.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the store cannot be read.
    pub async fn verify_receipts(
        &self,
        anchor: Option<&Anchor>,
    ) -> Result<VerifyReport, StoreError> {
        crate::audit::verify_store(self.inner.store.as_ref(), anchor).await
    }
}
