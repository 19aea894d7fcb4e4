//! What a reservation gets back from [`Store::begin_attempt`](super::Store::begin_attempt):
//! started, or refused with the typed reason its refusal receipt records.

use crate::approval::{ApprovalRecord, TakeRefusal};
use crate::effect::{EffectRecord, RetryDecision};
use crate::error::Reason;
use crate::evidence::Receipt;

/// Why [`Store::begin_attempt`](super::Store::begin_attempt) refused.
// A refusal is built once per refused attempt; boxing the record would cost more than the
// size difference.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum BeginRefusal {
    /// The presented approval authorizes nothing.
    Approval {
        /// Why.
        refusal: TakeRefusal,
        /// The stored request, if it exists.
        record: Option<ApprovalRecord>,
    },
    /// The effect key may not be reserved.
    Effect {
        /// The retry table's answer.
        decision: RetryDecision,
        /// The stored record.
        record: EffectRecord,
    },
}

impl BeginRefusal {
    /// The typed reason written on the refusal receipt.
    pub fn kind(&self) -> Reason {
        match self {
            BeginRefusal::Approval { refusal, .. } => match refusal {
                TakeRefusal::Unknown => Reason::UnknownRequest,
                TakeRefusal::Pending => Reason::ApprovalRequired,
                TakeRefusal::Denied => Reason::ApprovalDenied,
                TakeRefusal::Consumed => Reason::Consumed,
                TakeRefusal::Expired => Reason::Expired,
                TakeRefusal::Mismatch => Reason::Mismatch,
                TakeRefusal::OtherRun => Reason::OtherRun,
                TakeRefusal::PolicyChanged => Reason::PolicyChanged,
                TakeRefusal::Revoked => Reason::Revoked,
                TakeRefusal::Cancelled => Reason::Cancelled,
            },
            BeginRefusal::Effect { decision, .. } => match decision {
                RetryDecision::InProgress => Reason::InProgress,
                RetryDecision::Committed => Reason::Duplicate,
                RetryDecision::Ambiguous | RetryDecision::LeaseExpired => Reason::Ambiguous,
                // A reservation is not a refusal: reaching here is a bug of ours.
                RetryDecision::Reserve => Reason::Internal,
            },
        }
    }

    /// The stable reason code written on the refusal receipt: [`BeginRefusal::kind`]'s wire
    /// string.
    pub fn reason(&self) -> &'static str {
        self.kind().as_str()
    }
}

/// What [`Store::begin_attempt`](super::Store::begin_attempt) did.
#[derive(Clone, Debug)]
pub enum BeginOutcome {
    /// The approval (if any) is consumed and the key (if any) reserved: run the executor.
    Started {
        /// The consumed approval.
        approval: Option<ApprovalRecord>,
    },
    /// Refused; nothing was consumed or reserved, and the refusal receipt was written.
    Refused {
        /// Why.
        refusal: BeginRefusal,
        /// The refusal receipt.
        receipt: Box<Receipt>,
    },
}
