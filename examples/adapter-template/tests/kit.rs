//! The Countersign adapter conformance kit, run against the toy adapter as this crate's CI runs
//! it: the kit drives protected calls through the adapter and checks that the caller gets the
//! kernel's refusals, executor counts and evidence. `COUNTERSIGN_BIN` (or `countersign` on
//! `PATH`) is the CLI its durability case answers with.

use std::sync::Arc;

use countersign::ControlError;
use countersign_conformance::adapter_kit::{self, Adapter, Call, KitOptions, Session, Setup, Shape, Shown};
use countersign_toy_adapter::{FRAMEWORK, Step, ToyInterrupt, step};

/// A run left paused on `pending`: the caller sees the kernel's `ApprovalRequired`, and the
/// request stays pending (`countersign approve` may answer it; `resume` picks it up).
fn still_waiting(pending: countersign::PendingApproval) -> ControlError {
    ControlError::ApprovalRequired {
        request_id: pending.request_id,
        action_hash: pending.action_hash,
        expires_at: pending.expires_at,
    }
}

/// The toy adapter as the kit drives it: one call, pausing and resuming as toy does.
struct Toy;

#[async_trait::async_trait]
impl Adapter for Toy {
    type Interrupt = ToyInterrupt;

    fn framework(&self) -> &str {
        FRAMEWORK
    }

    fn shape(&self) -> Shape {
        Shape::ResumedInPlace
    }

    fn interrupt(&self, _setup: &Setup) -> Arc<ToyInterrupt> {
        Arc::new(ToyInterrupt::default())
    }

    async fn invoke(
        &self,
        session: &Session<ToyInterrupt>,
        call: &Call,
    ) -> Result<serde_json::Value, ControlError> {
        // One toy step of the kit's call: its tool is the kit's counting executor.
        let run_step = || {
            let tool = session.tool().clone();
            step(
                session.control(),
                session.interrupt(),
                &call.run,
                &call.action,
                &call.arguments,
                move |arguments| async move { tool.call(arguments).await },
            )
        };
        match run_step().await {
            Step::Done(result) => result,
            Step::Paused(pending) => {
                // toy shows the question to a person; nobody answering leaves the run paused.
                let Some(answer) = session.reviewer().review(&Shown::pending(&pending)) else {
                    return Err(still_waiting(pending));
                };
                session
                    .interrupt()
                    .resume_with(pending.request_id.clone(), answer.to_approval_answer());
                match run_step().await {
                    Step::Done(result) => result,
                    Step::Paused(pending) => Err(still_waiting(pending)),
                }
            }
        }
    }
}

#[tokio::test]
async fn toy_adapter_passes_the_countersign_kit() {
    let report = adapter_kit::run(&Toy, &KitOptions::default())
        .await
        .expect("the kit runs");
    println!("{}", report.to_text());
    assert!(report.is_ok(), "{}", report.to_text());
}
