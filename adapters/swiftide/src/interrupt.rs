//! The adapter's [`FrameworkInterrupt`]: swiftide's `FeedbackRequired` pause, seen from the
//! kernel.
//!
//! swiftide hands a tool the human's answer through `AgentContext::has_received_feedback` when the
//! resumed run re-enters the tool. A [`crate::Pass`] takes that feedback once per tool call and
//! keeps it in a task-local slot for as long as it runs `Control::execute`; the kernel's
//! `InterruptApprovalProvider` calls [`SwiftideInterrupt::interrupt`] inside that same task,
//! which answers from the slot when, and only when, the feedback names the pending request.
//! Otherwise it records the pending request (the pass then stops the agent with
//! `ToolOutput::FeedbackRequired`) and suspends.

use std::sync::{Arc, Mutex};

use countersign::approver::Credential;
use countersign::{
    AnswerDecision, ApprovalAnswer, FrameworkInterrupt, InterruptError, PendingApproval,
};

use crate::feedback::Answer;

/// The framework name in reports and `interrupt_failed` refusals.
pub const FRAMEWORK: &str = "swiftide";

/// What one pass of a tool call shares with the interrupt.
#[derive(Debug, Default)]
pub(crate) struct PassSlot {
    /// The answer swiftide handed this tool call, if any.
    pub(crate) answer: Option<Answer>,
    /// Who the operator said answers the request the feedback names ([`crate::Gate::approve`]).
    pub(crate) operator_approver: Option<Credential>,
    /// The answer was handed to the kernel (it answers one request, once).
    pub(crate) answer_used: bool,
    /// The request the last suspension paused on.
    pub(crate) suspended_on: Option<PendingApproval>,
}

pub(crate) type SharedSlot = Arc<Mutex<PassSlot>>;

tokio::task_local! {
    pub(crate) static SLOT: SharedSlot;
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another task panicked while holding it; the data is plain.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The swiftide adapter's [`FrameworkInterrupt`].
///
/// The operator wraps it in the kernel's `InterruptApprovalProvider` and builds the `Control`
/// with that provider (SPEC.md 2.1); the adapter never builds either. It holds no state: each
/// gated tool call brings its own answer (see the module docs), so one instance serves every
/// agent and every concurrent tool call of the control.
///
/// It carries approved arguments ([`FrameworkInterrupt::carries_approved_arguments`] is true):
/// the feedback payload names the arguments the human answered about, and the provider refuses
/// (`mismatch`) an answer about other arguments.
#[derive(Clone, Copy, Debug, Default)]
pub struct SwiftideInterrupt;

impl SwiftideInterrupt {
    /// The interrupt.
    pub fn new() -> SwiftideInterrupt {
        SwiftideInterrupt
    }
}

#[async_trait::async_trait]
impl FrameworkInterrupt for SwiftideInterrupt {
    fn framework(&self) -> &str {
        FRAMEWORK
    }

    fn carries_approved_arguments(&self) -> bool {
        true
    }

    async fn interrupt(&self, pending: PendingApproval) -> Result<ApprovalAnswer, InterruptError> {
        let Ok(slot) = SLOT.try_with(Arc::clone) else {
            return Err(InterruptError::Failed(
                "the swiftide interrupt was reached outside a gated tool call: run the action through `countersign_swiftide::Gate`".to_owned(),
            ));
        };
        let mut slot = lock(&slot);
        // INVARIANT (bound-resume): feedback answers only the request it names, and only once
        // per pass; anything else suspends (SPEC.md 2.2).
        let matching = !slot.answer_used
            && slot.answer.as_ref().is_some_and(|answer| {
                answer.request_id.as_deref() == Some(pending.request_id.as_str())
            });
        if matching && let Some(answer) = slot.answer.clone() {
            slot.answer_used = true;
            // INVARIANT (operator-approver): the approver is the one the operator passed with
            // `Gate::approve` / `Gate::reject`, never the payload's name (run state anyone
            // holding the context can edit). Without one, the answer cannot vouch for anyone:
            // the kernel records it as refused (`not_authenticated`) and nothing changes.
            let approver = slot.operator_approver.take().unwrap_or_else(|| {
                let named = answer
                    .approver
                    .as_deref()
                    .map(|name| format!(" naming `{name}`"))
                    .unwrap_or_default();
                Credential::Unverified {
                    source: format!("swiftide feedback{named}"),
                    reason: "a name in the feedback payload is run state, not the operator's word: answer with `Gate::approve(&pause, approver)` or `Gate::reject` on the gate that runs the tool".to_owned(),
                }
            });
            return Ok(ApprovalAnswer {
                decision: if answer.approved {
                    AnswerDecision::Approve
                } else {
                    AnswerDecision::Deny
                },
                approver,
                shown_hash: answer.action_hash.map(countersign::ActionHash::from_stored),
                note: answer.note,
                arguments: answer.arguments,
            });
        }
        slot.suspended_on = Some(pending);
        Err(InterruptError::Suspended)
    }
}
