//! A Countersign adapter for **toy**, a framework whose human-in-the-loop primitive is a pause:
//! a tool may stop the run with a question, and the application resumes the same step later
//! with an answer. That is the "resumed in place" shape (SPEC.md 2.1): the kernel asks through
//! [`FrameworkInterrupt`], this adapter turns the kernel's question into a toy pause, and the
//! resumed step runs the same call again, whose second pass finds the same pending request and
//! takes the held answer. Every decision stays the kernel's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use countersign::{
    ActionRequest, ApprovalAnswer, ApprovalId, Control, ControlError, ExecutorError,
    FrameworkInterrupt, InterruptError, PendingApproval,
};

/// The framework's name, as it appears on receipts (`interrupt:toy`) and kit reports.
pub const FRAMEWORK: &str = "toy";

/// What a toy step ended with.
#[derive(Debug)]
pub enum Step<T> {
    /// The tool ran (or the kernel refused it: the refusal is the value's `Err`).
    Done(Result<T, ControlError>),
    /// The run paused on a question for a human: the kernel request waiting for an answer.
    Paused(PendingApproval),
}

/// toy's pause primitive as a [`FrameworkInterrupt`]: it answers a kernel question with the
/// answer the application resumed with (bound to the request it names), or pauses the run.
#[derive(Debug, Default)]
pub struct ToyInterrupt {
    paused: Mutex<Option<PendingApproval>>,
    answers: Mutex<HashMap<ApprovalId, ApprovalAnswer>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ToyInterrupt {
    /// The question the last step paused on, taken (each pause is shown once).
    pub fn take_paused(&self) -> Option<PendingApproval> {
        lock(&self.paused).take()
    }

    /// Resume with a human's answer to `request_id`: held for that request only. The approver
    /// in `answer` is the one the application authenticated, never a name from run state.
    pub fn resume_with(&self, request_id: ApprovalId, answer: ApprovalAnswer) {
        lock(&self.answers).insert(request_id, answer);
    }
}

#[async_trait::async_trait]
impl FrameworkInterrupt for ToyInterrupt {
    fn framework(&self) -> &str {
        FRAMEWORK
    }

    fn carries_approved_arguments(&self) -> bool {
        // toy's resume carries no arguments: the kernel binds the answer to the request's hash.
        false
    }

    async fn interrupt(&self, pending: PendingApproval) -> Result<ApprovalAnswer, InterruptError> {
        if let Some(answer) = lock(&self.answers).remove(&pending.request_id) {
            return Ok(answer);
        }
        *lock(&self.paused) = Some(pending);
        Err(InterruptError::Suspended)
    }
}

/// One toy step: the tool call `action(arguments)` of run `run`, through the kernel. `tool` is
/// the executor; it runs at most once, with the canonical arguments, only when policy (and, if
/// needed, a human) allowed exactly this call.
pub async fn step<F, Fut>(
    control: &Control,
    interrupt: &Arc<ToyInterrupt>,
    run: &str,
    action: &str,
    arguments: &serde_json::Value,
    tool: F,
) -> Step<serde_json::Value>
where
    F: FnOnce(serde_json::Value) -> Fut + Send,
    Fut: std::future::Future<Output = Result<serde_json::Value, ExecutorError>> + Send,
{
    let request = ActionRequest::new(action, arguments).with_run(run);
    let done = control.execute(request, tool).await;
    match done {
        Err(ControlError::ApprovalRequired { ref request_id, .. }) => {
            match interrupt.take_paused() {
                Some(pending) if &pending.request_id == request_id => Step::Paused(pending),
                _ => Step::Done(done.map(|executed| executed.value)),
            }
        }
        other => Step::Done(other.map(|executed| executed.value)),
    }
}
