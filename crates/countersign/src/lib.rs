//! Countersign: the action-control kernel for AI agents.
//!
//! Countersign sits between "an agent decided to act" and "the call that acts" and gives four
//! guarantees (see `docs/ARCHITECTURE.md` and `docs/SPEC.md` in the repository):
//!
//! 1. **Policy decides.** Every consequential call becomes an [`Action`] decided `allow`,
//!    `approve` or `deny` by a [`Policy`]. Unknown actions are denied.
//! 2. **An approval authorizes exactly one action.** A grant is bound to the [`ActionHash`],
//!    expires, and is consumed once, in the same store transaction as the effect reservation.
//! 3. **One effect happens at most once.** An action with an effect key is reserved atomically
//!    before it runs; an outcome nobody can know is recorded `ambiguous` and every retry is
//!    refused until a human or a [`ReconcileHook`] resolves it.
//! 4. **Evidence.** Every attempt that ends writes a [`Receipt`] into a hash-chained log, in the
//!    same transaction as the state change it records.
//!
//! The entry point is [`Control`]: build one with a policy, a [`Store`] and an
//! [`IdentityProvider`], then call [`Control::execute`] or wrap a function with
//! [`Control::protect`].
//!
//! ```
//! use countersign::{Control, Policy, Principal, StaticIdentity, store::MemoryStore};
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let policy = Policy::from_yaml_str(
//!     "schema: countersign.policy/v1\nactions:\n  stripe.refund:\n    effect: \"refund:{payment_id}\"\n    decision: allow\n",
//!     None,
//! )?;
//! let control = Control::builder(policy, MemoryStore::new())
//!     .identity(StaticIdentity::new(Principal::new("agent:support-bot")?))
//!     .build();
//! let refund = control.protect("stripe.refund", |args: serde_json::Value| async move {
//!     Ok::<_, countersign::ExecutorError>(format!("refunded {}", args["payment_id"]))
//! });
//! let done = refund.call(&serde_json::json!({"payment_id": "pi_1", "amount": 500})).await?;
//! assert_eq!(done.value, "refunded \"pi_1\"");
//! // The same effect key never runs twice.
//! let again = refund.call(&serde_json::json!({"payment_id": "pi_1", "amount": 500})).await;
//! assert_eq!(again.unwrap_err().reason(), "duplicate");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
#![forbid(unsafe_code)]

/// `eprintln!` that never panics. Rust's `eprintln!` panics when standard error cannot be
/// written (a terminal that hung up: `EIO`; a pipe whose reader has gone: `EPIPE`), which would
/// take a process down in the middle of recording what it was doing; a line that cannot be
/// written is dropped instead. Every binary of the workspace writes standard error through it
/// (`clippy::print_stderr` is denied in those crates).
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr().lock(), $($arg)*);
    }};
}

pub mod action;
pub mod approval;
pub mod approver;
pub mod audit;
pub mod clock;
pub mod control;
pub mod display;
pub mod effect;
pub mod error;
pub mod evidence;
pub mod id;
pub mod json;
pub mod outbox;
pub mod policy;
pub mod store;
mod text;
pub mod token;

pub use action::{Action, ActionHash, Principal, canonical};
pub use approval::{
    AnswerDecision, ApprovalAnswer, ApprovalId, ApprovalRecord, ApprovalState, FrameworkInterrupt,
    InterruptError, PendingApproval,
};
pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use control::{
    ActionRequest, ApprovalProvider, CommitNoteSlot, Control, ControlBuilder, Evaluation, Executed,
    ExitStatusSlot, HandedOff, IdentityProvider, InterruptApprovalProvider, Protected,
    StaticIdentity, UnrecordedAttempts, needs_approval,
};
pub use display::ApprovalDisplay;
pub use effect::{EffectKey, EffectRecord, EffectState, ExecutorError, ReconcileHook};
pub use error::{AnswerError, ControlError, DenyReason, DidRun, ErrorReport, Reason, StoreError};
pub use evidence::{Anchor, Receipt, VerifyReport};
pub use id::{AttemptId, PolicyHash, ReceiptHash, ShapeError};
pub use policy::{Decision, LoadError, Mode, Policy};
pub use store::Store;

/// The crate README's example, compiled and type-checked as a doctest so the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
