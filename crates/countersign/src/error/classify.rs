//! How a refusal is classified: its [`Reason`], whether it ran, whether it may be retried. Every
//! match here is exhaustive (no `_` arm), so a new variant must be classified before it
//! compiles (issue #19).

use super::{AnswerError, ControlError, DidRun, Reason};
use crate::approval::{ApprovalId, ApprovalState};

impl ControlError {
    /// The typed reason: [`Reason`], exhaustive.
    pub fn kind(&self) -> Reason {
        match self {
            ControlError::InvalidArguments { .. } => Reason::InvalidArguments,
            ControlError::Template { .. } => Reason::BadTemplate,
            ControlError::NoPrincipal { .. } => Reason::NoPrincipal,
            ControlError::ActionDenied { reason, .. } => reason.reason(),
            ControlError::ApprovalRequired { .. } => Reason::ApprovalRequired,
            ControlError::ApprovalDenied { .. } => Reason::ApprovalDenied,
            ControlError::ApprovalMismatch { .. } => Reason::Mismatch,
            ControlError::ApprovalConsumed { .. } => Reason::Consumed,
            ControlError::ApprovalExpired { .. } => Reason::Expired,
            ControlError::ApprovalUnknown { .. } => Reason::UnknownRequest,
            ControlError::ApprovalVoid { .. } => Reason::PolicyChanged,
            ControlError::ApprovalRevoked { .. } => Reason::Revoked,
            ControlError::ApprovalCancelled { .. } => Reason::Cancelled,
            ControlError::ApprovalOtherRun { .. } => Reason::OtherRun,
            ControlError::InterruptFailed { .. } => Reason::InterruptFailed,
            ControlError::AnswerRefused { reason, .. } => *reason,
            ControlError::DuplicateEffect {
                in_progress: true, ..
            } => Reason::InProgress,
            ControlError::DuplicateEffect {
                in_progress: false, ..
            } => Reason::Duplicate,
            ControlError::AmbiguousEffect { .. } => Reason::Ambiguous,
            ControlError::NotExecuted { .. } => Reason::NotExecuted,
            ControlError::OutcomeUnknown { .. } => Reason::OutcomeUnknown,
            ControlError::Store { source, .. } => source.kind(),
            ControlError::Internal(_) => Reason::Internal,
        }
    }

    /// The stable reason code, as written in receipts and shown by every adapter:
    /// [`ControlError::kind`]'s wire string.
    pub fn reason(&self) -> &'static str {
        self.kind().as_str()
    }

    /// Did this attempt run the executor?
    pub fn did_run(&self) -> DidRun {
        match self {
            ControlError::OutcomeUnknown { .. } => DidRun::Maybe,
            ControlError::Store { after_run, .. } => {
                if *after_run {
                    DidRun::Maybe
                } else {
                    DidRun::No
                }
            }
            // The executor ran and said it had no effect: as far as the world is concerned,
            // nothing ran.
            ControlError::NotExecuted { .. } => DidRun::No,
            // Refused before the reservation (or, for a duplicate or an ambiguous effect, by
            // it): this attempt never called the executor.
            ControlError::InvalidArguments { .. }
            | ControlError::Template { .. }
            | ControlError::NoPrincipal { .. }
            | ControlError::ActionDenied { .. }
            | ControlError::ApprovalRequired { .. }
            | ControlError::ApprovalDenied { .. }
            | ControlError::ApprovalMismatch { .. }
            | ControlError::ApprovalConsumed { .. }
            | ControlError::ApprovalExpired { .. }
            | ControlError::ApprovalUnknown { .. }
            | ControlError::ApprovalOtherRun { .. }
            | ControlError::ApprovalVoid { .. }
            | ControlError::ApprovalRevoked { .. }
            | ControlError::ApprovalCancelled { .. }
            | ControlError::AnswerRefused { .. }
            | ControlError::InterruptFailed { .. }
            | ControlError::DuplicateEffect { .. }
            | ControlError::AmbiguousEffect { .. }
            | ControlError::Internal(_) => DidRun::No,
        }
    }

    /// May the caller send the identical call again?
    ///
    /// True for: `NotExecuted` (definitely not executed), `ApprovalRequired` (after a human
    /// answers), `in_progress` (after the holder finishes, which may then refuse it as a
    /// duplicate), an expired or voided approval (a new request will be made), a busy store
    /// before the run. False for everything that would be refused again or may have run.
    pub fn may_retry(&self) -> bool {
        match self {
            ControlError::NotExecuted { .. }
            | ControlError::ApprovalRequired { .. }
            | ControlError::ApprovalExpired { .. }
            | ControlError::ApprovalVoid { .. }
            | ControlError::ApprovalRevoked { .. }
            | ControlError::ApprovalCancelled { .. }
            | ControlError::ApprovalOtherRun { .. }
            | ControlError::InterruptFailed { .. }
            | ControlError::AnswerRefused { .. } => true,
            ControlError::DuplicateEffect { in_progress, .. } => *in_progress,
            ControlError::Store { after_run, source } => !after_run && source.is_transient(),
            ControlError::InvalidArguments { .. }
            | ControlError::Template { .. }
            | ControlError::NoPrincipal { .. }
            | ControlError::ActionDenied { .. }
            | ControlError::ApprovalDenied { .. }
            | ControlError::ApprovalMismatch { .. }
            | ControlError::ApprovalConsumed { .. }
            | ControlError::ApprovalUnknown { .. }
            | ControlError::AmbiguousEffect { .. }
            | ControlError::OutcomeUnknown { .. }
            | ControlError::Internal(_) => false,
        }
    }

    /// Map an answer error met inside the pipeline.
    pub(crate) fn from_answer_error(error: AnswerError) -> ControlError {
        match error {
            AnswerError::Unknown { request_id } => ControlError::ApprovalUnknown { request_id },
            AnswerError::Expired {
                request_id,
                expires_at,
            } => ControlError::ApprovalExpired {
                request_id,
                expires_at,
            },
            AnswerError::AlreadyDecided {
                request_id,
                state: ApprovalState::Consumed,
                ..
            } => ControlError::ApprovalConsumed { request_id },
            AnswerError::AlreadyDecided {
                request_id,
                state: ApprovalState::Void,
                ..
            } => ControlError::ApprovalVoid { request_id },
            AnswerError::Revoked { request_id } => ControlError::ApprovalRevoked { request_id },
            AnswerError::Cancelled { request_id } => ControlError::ApprovalCancelled { request_id },
            AnswerError::Consumed { request_id } => ControlError::ApprovalConsumed { request_id },
            refused @ (AnswerError::AlreadyDecided { .. } | AnswerError::NotRevocable { .. }) => {
                ControlError::AnswerRefused {
                    request_id: refused
                        .request_id()
                        .cloned()
                        .unwrap_or_else(|| ApprovalId::from_stored(String::new())),
                    reason: refused.kind(),
                    message: refused.to_string(),
                }
            }
            refused @ (AnswerError::NoApprover
            | AnswerError::NoteTooLong(_)
            | AnswerError::SelfApproval { .. }
            | AnswerError::InvalidDecision { .. }
            | AnswerError::InvalidApprover { .. }
            | AnswerError::NotAuthenticated { .. }
            | AnswerError::NotEntitled { .. }
            | AnswerError::Mismatch { .. }) => ControlError::AnswerRefused {
                request_id: refused
                    .request_id()
                    .cloned()
                    .unwrap_or_else(|| ApprovalId::from_stored(String::new())),
                reason: refused.kind(),
                message: refused.to_string(),
            },
            AnswerError::Store(source) => ControlError::Store {
                after_run: false,
                source,
            },
        }
    }
}
