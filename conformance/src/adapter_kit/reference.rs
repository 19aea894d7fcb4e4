//! The reference adapter: direct kernel calls through `Control::execute` and the
//! `InterruptApprovalProvider` the kit builds, with the smallest resumed-in-place "framework"
//! there is. Every suite applies to it and it passes every one; the kit's expectations are what
//! it does.
//!
//! Its pause/resume primitive: the interrupt suspends when it holds no answer for the pending
//! request (the attempt ends `ApprovalRequired`); the adapter shows the request to the human,
//! holds the answer keyed by the request id, and re-enters the same call, whose second pass
//! finds the same pending request and takes the held answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use countersign::{
    ActionRequest, ApprovalAnswer, ApprovalId, ControlError, Executed, FrameworkInterrupt,
    InterruptError, PendingApproval,
};

use super::world::{Call, HumanAnswer, Session, Setup, Shown};
use super::{Adapter, Shape};

/// The reference adapter (framework name `reference`, resumed in place).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReferenceAdapter;

/// The reference adapter's interrupt: answers with a held resume value for exactly the pending
/// request, or suspends.
#[derive(Debug, Default)]
pub struct ReferenceInterrupt {
    paused: Mutex<Option<PendingApproval>>,
    held: Mutex<HashMap<ApprovalId, HumanAnswer>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked; the data is still usable.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ReferenceInterrupt {
    /// An interrupt holding nothing.
    pub fn new() -> ReferenceInterrupt {
        ReferenceInterrupt::default()
    }

    /// The request the last suspension paused on, if any (taken: asked once).
    pub fn take_paused(&self) -> Option<PendingApproval> {
        lock(&self.paused).take()
    }

    /// Hold `answer` as the resume value for the request it names. An answer naming no request
    /// is dropped: it cannot be bound to anything.
    pub fn hold(&self, answer: HumanAnswer) {
        if let Some(request_id) = answer.request_id.clone() {
            lock(&self.held).insert(request_id, answer);
        }
    }
}

#[async_trait::async_trait]
impl FrameworkInterrupt for ReferenceInterrupt {
    fn framework(&self) -> &str {
        "reference"
    }

    fn carries_approved_arguments(&self) -> bool {
        true
    }

    async fn interrupt(&self, pending: PendingApproval) -> Result<ApprovalAnswer, InterruptError> {
        // INVARIANT (bound-resume): a resume value answers only the request it names.
        if let Some(answer) = lock(&self.held).remove(&pending.request_id) {
            return Ok(answer.to_approval_answer());
        }
        *lock(&self.paused) = Some(pending);
        Err(InterruptError::Suspended)
    }
}

/// Run `call` through the session's control, with the session's tool as the executor.
///
/// # Errors
///
/// The kernel's [`ControlError`], as itself.
pub async fn execute_call<I>(
    session: &Session<I>,
    call: &Call,
    approval: Option<ApprovalId>,
) -> Result<Executed<serde_json::Value>, ControlError> {
    // The reference framework's run id is the kit's run label: every request of the run is
    // scoped to it, so another run's approval never authorizes this call.
    let mut request =
        ActionRequest::new(call.action.clone(), &call.arguments).with_run(call.run.clone());
    if let Some(approval) = approval {
        request = request.with_approval(approval);
    }
    let tool = session.tool().clone();
    session
        .control()
        .execute(request, move |arguments| async move {
            tool.call(arguments).await
        })
        .await
}

#[async_trait::async_trait]
impl Adapter for ReferenceAdapter {
    type Interrupt = ReferenceInterrupt;

    fn framework(&self) -> &str {
        "reference"
    }

    fn shape(&self) -> Shape {
        Shape::ResumedInPlace
    }

    fn interrupt(&self, _setup: &Setup) -> Arc<ReferenceInterrupt> {
        Arc::new(ReferenceInterrupt::new())
    }

    async fn invoke(
        &self,
        session: &Session<ReferenceInterrupt>,
        call: &Call,
    ) -> Result<serde_json::Value, ControlError> {
        let first = execute_call(session, call, None).await;
        let Err(ControlError::ApprovalRequired { request_id, .. }) = &first else {
            return first.map(|executed| executed.value);
        };
        // The first pass suspended: show the request to the human, once.
        let pending = session.interrupt().take_paused();
        let Some(pending) = pending.filter(|pending| &pending.request_id == request_id) else {
            return first.map(|executed| executed.value);
        };
        let Some(answer) = session.reviewer().review(&Shown::pending(&pending)) else {
            // Nobody answered: stay paused. The request stays pending (a wait ending is not a
            // denial); `countersign approve` may answer it, and `resume` picks it up.
            return first.map(|executed| executed.value);
        };
        session.interrupt().hold(answer);
        // Re-enter the same call: the second pass finds the same pending request.
        execute_call(session, call, None)
            .await
            .map(|executed| executed.value)
    }
}
