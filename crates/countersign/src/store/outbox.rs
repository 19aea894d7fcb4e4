//! The outbox's request types shared by every backend (issue #17).

use crate::approval::{ApprovalRecord, ApprovalState};
use crate::clock::Timestamp;
use crate::error::StoreError;
use crate::outbox::EventKind;

/// Which deliveries [`crate::Store::claim_deliveries`] may claim, and for whom.
#[derive(Clone, Debug)]
pub struct DeliveryClaim {
    /// The endpoints this sender delivers to (webhook URLs, `slack`).
    pub endpoints: Vec<String>,
    /// Events older than this get no new delivery row (they would be past their retry window).
    pub since: Timestamp,
    /// Who claims: a sender's random id, kept with the lease.
    pub owner: String,
    /// How long the lease lasts: longer than one attempt may take.
    pub lease: std::time::Duration,
    /// At most this many.
    pub limit: usize,
}

/// The refusal of a backend that keeps no outbox.
pub(super) fn outbox_unsupported(backend: &str) -> StoreError {
    StoreError::Backend {
        message: format!(
            "the `{backend}` store keeps no outbox of events: use the memory, SQLite or PostgreSQL store"
        ),
    }
}

/// The event a withdrawal writes: `approval.cancelled` for the operator's cancellation,
/// `approval.revoked` for a grant or a counted yes taken back.
pub(crate) fn withdrawal_event(record: &ApprovalRecord) -> EventKind {
    match record.state {
        ApprovalState::Cancelled => EventKind::Cancelled,
        ApprovalState::Void => EventKind::Voided,
        _ => EventKind::Revoked,
    }
}

/// Is `record` one the sweeper expires at `now`: still `pending` or `granted`, and past its
/// `expires_at`?
pub(crate) fn due_for_expiry(record: &ApprovalRecord, now: Timestamp) -> bool {
    matches!(
        record.state,
        ApprovalState::Pending | ApprovalState::Granted
    ) && record.is_expired_at(now)
}
