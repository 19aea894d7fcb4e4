//! Actions whose work happens outside this process's executor: [`Control::hand_off`], for a
//! tool that runs elsewhere once Countersign says yes (a coding agent's own tool behind its
//! hook), and [`ExitStatusSlot`], how an executor that runs a process puts its exit status in
//! the receipt.

use std::sync::{Arc, Mutex};

use super::pipeline::begin_refusal;
use super::{Control, Prepared};
use crate::approval::{ApprovalId, ApprovalRecord};
use crate::control::ActionRequest;
use crate::error::{ControlError, DenyReason};
use crate::evidence::{ProcessExit, Receipt, ReceiptDraft, ReceiptOutcome};
use crate::id::AttemptId;
use crate::policy::{Decision, Mode};
use crate::store::{HandOff, HandOffOutcome};

/// What [`Control::hand_off`] authorized: the decision, the `handed_off` receipt (`observed` in
/// observe mode) and the approval it consumed, if any.
#[derive(Clone, Debug)]
pub struct HandedOff {
    /// `allow` or `approve` (in observe mode, whatever the policy decided, `deny` included).
    pub decision: Decision,
    /// The receipt that ends the attempt: outcome `handed_off`, or `observed` in observe mode.
    pub receipt: Receipt,
    /// The granted approval this attempt consumed (`approve` only).
    pub approval: Option<ApprovalRecord>,
}

/// The detail a handed-off attempt leaves on the effect record it reserved.
pub const HANDED_OFF_DETAIL: &str = "handed off to a tool that runs outside Countersign: whether it ran is unknown; find out, then run `countersign resolve <KEY> --committed` or `--failed`";

/// Where an executor that runs a process puts its exit status, so the attempt's receipt records
/// it (`exit_status`, receipt v2). Give a clone to [`ActionRequest::with_exit_status`] and
/// another to the executor; the executor calls [`ExitStatusSlot::set`] once the process ends.
/// A slot never set (the process was killed on a timeout, or never started) records nothing.
#[derive(Clone, Debug, Default)]
pub struct ExitStatusSlot(Arc<Mutex<Option<ProcessExit>>>);

impl ExitStatusSlot {
    /// An empty slot.
    pub fn new() -> ExitStatusSlot {
        ExitStatusSlot::default()
    }

    /// Record how the process ended (a later call replaces an earlier one).
    pub fn set(&self, exit: ProcessExit) {
        // A poisoned lock only means another holder panicked; the value is still ours to set.
        let mut slot = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = Some(exit);
    }

    /// What was recorded, if anything.
    pub fn get(&self) -> Option<ProcessExit> {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ActionRequest {
    /// Record the exit status the executor puts in `slot` on the attempt's receipt.
    pub fn with_exit_status(mut self, slot: ExitStatusSlot) -> ActionRequest {
        self.exit_status = Some(slot);
        self
    }
}

impl Control {
    /// Decide `request` and, if it may run, hand it to a tool that runs outside Countersign:
    /// steps 1 to 5 of the pipeline exactly as [`Control::execute`] runs them, then, instead of
    /// an executor, one `handed_off` receipt written in the same store transaction that consumed
    /// the approval and reserved the effect key ([`crate::Store::hand_off`]).
    ///
    /// For hooks that gate a tool the agent runs itself (Claude Code's `PreToolUse`,
    /// `countersign check`): `Ok` means "let the tool run". What the tool then does is not
    /// known to Countersign, so a reserved effect key is left `ambiguous` (every retry refused
    /// until `countersign resolve`), never `committed`. The reconcile hook is not consulted.
    ///
    /// In observe mode every call is handed off and recorded `observed`, with the reason
    /// enforcement would have given (`would_deny`, ...).
    ///
    /// # Errors
    ///
    /// As [`Control::execute`] before its executor runs: `deny` is [`ControlError::ActionDenied`]
    /// (with its receipt); an `approve` with no usable grant opens (or finds) the request and is
    /// [`ControlError::ApprovalRequired`]; a refused approval or effect key is its refusal, with
    /// its receipt. Every error means the tool must not run.
    ///
    /// # Cancel safety
    ///
    /// Each store call is one transaction; dropping the future leaves the pending request, the
    /// refusal or the hand-off committed or not started, never a consumed grant without its
    /// receipt.
    pub async fn hand_off(&self, request: ActionRequest) -> Result<HandedOff, ControlError> {
        let prepared = self.prepare(&request)?;
        let attempt_id = AttemptId::generate();
        let draft = self.draft(&prepared, &attempt_id);
        if self.inner.policy.mode() == Mode::Observe {
            let would = match prepared.decision {
                Decision::Allow => "would_allow",
                Decision::Approve => "would_require_approval",
                Decision::Deny => match prepared.denial {
                    DenyReason::UnknownAction => "would_deny_unknown_action",
                    DenyReason::NoMatchingRule => "would_deny_no_matching_rule",
                    DenyReason::Denied | DenyReason::PolicyChanged => "would_deny",
                },
            };
            let receipt = self
                .inner
                .store
                .append_receipt(
                    draft.with_outcome(ReceiptOutcome::Observed, Some(would)),
                    self.now(),
                )
                .await
                .map_err(|source| ControlError::Store {
                    after_run: false,
                    source,
                })?;
            return Ok(HandedOff {
                decision: prepared.decision,
                receipt,
                approval: None,
            });
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
                self.hand_off_attempt(&request, &prepared, &attempt_id, None, draft)
                    .await
            }
            Decision::Approve => {
                let approval = match &request.approval {
                    Some(id) => id.clone(),
                    None => self.open_approval(&request, &prepared, &draft).await?,
                };
                self.hand_off_attempt(&request, &prepared, &attempt_id, Some(approval), draft)
                    .await
            }
        }
    }

    /// Steps 4, 5 and 7 of a hand-off, in one store transaction.
    async fn hand_off_attempt(
        &self,
        request: &ActionRequest,
        prepared: &Prepared,
        attempt_id: &AttemptId,
        approval: Option<ApprovalId>,
        draft: ReceiptDraft,
    ) -> Result<HandedOff, ControlError> {
        let action = &prepared.action;
        let now = self.now();
        let begin =
            self.begin_attempt_of(request, prepared, attempt_id, approval.clone(), &draft, now);
        let hand_off = HandOff {
            begin,
            draft: draft.with_outcome(ReceiptOutcome::HandedOff, None),
            detail: HANDED_OFF_DETAIL.to_owned(),
        };
        match self
            .inner
            .store
            .hand_off(hand_off, now)
            .await
            .map_err(|source| ControlError::Store {
                after_run: false,
                source,
            })? {
            HandOffOutcome::HandedOff { approval, receipt } => Ok(HandedOff {
                decision: prepared.decision,
                receipt: *receipt,
                approval,
            }),
            HandOffOutcome::Refused { refusal, .. } => {
                Err(begin_refusal(refusal, approval.as_ref(), action))
            }
        }
    }
}
