//! Countersign for swiftide agents: every consequential swiftide `Tool` runs through the
//! Countersign kernel, and approvals are asked where swiftide users already answer — the
//! `FeedbackRequired` pause.
//!
//! The operator builds the kernel's `Control` with an `InterruptApprovalProvider` around
//! [`SwiftideInterrupt`]; the adapter never builds a control, a principal or a grant.
//!
//! ```no_run
//! use std::sync::Arc;
//! use countersign::{Control, InterruptApprovalProvider, Policy, Principal, StaticIdentity, SystemClock};
//! use countersign::store::SqliteStore;
//! use countersign_swiftide::{ActionSpec, Gate, Pause, SwiftideInterrupt};
//! # async fn demo(agent_builder: &mut swiftide_agents::AgentBuilder, tool: impl swiftide_core::Tool + 'static)
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! let store: Arc<dyn countersign::Store> = Arc::new(SqliteStore::open("countersign.db")?);
//! let clock: Arc<dyn countersign::Clock> = Arc::new(SystemClock);
//! let provider = InterruptApprovalProvider::new(store.clone(), Arc::new(SwiftideInterrupt::new()), clock.clone());
//! let policy = Arc::new(Policy::load(std::path::Path::new("countersign.yaml"))?);
//! let control = Control::builder_shared(policy, store)
//!     .identity(StaticIdentity::new(Principal::new("agent:support-bot")?))
//!     .clock(clock)
//!     .approval_provider(Arc::new(provider))
//!     .build();
//! let gate = Gate::new(control);
//! let mut agent = agent_builder.tools([gate.wrap(tool, ActionSpec::new("stripe.refund"))]).build()?;
//! agent.query("refund order o-7").await?;
//! if let Some((tool_call, pause)) = agent.stop_reason().and_then(Pause::from_stop_reason) {
//!     // show `pause` to a human; your application passes who they are (a bare name is
//!     // asserted; an approver token authenticates them):
//!     let feedback = gate.approve(&pause, "human:alice");
//!     agent.context().feedback_received(&tool_call, &feedback).await?;
//!     agent.run().await?; // re-enters the tool; the kernel runs exactly what was approved, once
//! }
//! for outcome in gate.take_outcomes() {
//!     if let Some(refusal) = outcome.refusal() { eprintln!("{}: {refusal}", refusal.reason()); }
//! }
//! # Ok(()) }
//! ```
//!
//! The approver is what the operator's application passes to [`Gate::approve`] /
//! [`Gate::reject`], kept by the gate beside the request id: never a name read from the
//! feedback payload or the agent's history, which are run state (SPEC.md 2.2).
//!
//! When a model turn mixes an allowed call with a paused one, or pauses several calls not all
//! answered before the same `run`, swiftide 0.32 does not re-enter what is left after
//! `feedback_received` + `run`: resume with [`resume`], which re-enters the waiting calls itself
//! and returns the calls still waiting.
//!
//! See the crate's README for the shape (resumed in place), the binding (prevention) and every
//! place swiftide shows through.
#![forbid(unsafe_code)]

mod feedback;
mod gate;
mod interrupt;
mod resume;

pub use feedback::{
    Edit, FEEDBACK_SCHEMA, FeedbackPayload, NOT_AN_ANSWER, PAUSE_SCHEMA, Pause, edit,
    model_message, recheck,
};
pub use gate::{ActionSpec, CountersignAction, Gate, GatedTool, Halt, Outcome, Pass};
pub use interrupt::{FRAMEWORK, SwiftideInterrupt};
pub use resume::{ResumeError, Resumed, resume, waiting_calls};
