//! Notifications leave through an outbox (issue #17): one [`OutboxEvent`] per change to an
//! approval request, written by the store in the same transaction as the change, so a crash
//! never loses one and a rolled-back change never announces anything.
//!
//! The kinds are [`EventKind`]: a request opened, answered (each answer that counts, quorum
//! answers included), expired, voided (its policy entry changed), consumed by an attempt,
//! revoked or cancelled; and, about the log rather than a request, a signed checkpoint made
//! (issue #23, [`checkpoint_event`], written on its own by whoever made the checkpoint, so
//! that it is kept outside the store). Events are written whether or not anyone listens; a delivery
//! channel (the approval service's webhooks and Slack) reads them through
//! [`crate::Store::claim_deliveries`] and settles each [`Delivery`] per (event, endpoint).
//!
//! The event body is JSON, `countersign.event/v1`, the same bytes for every endpoint and every
//! retry (its shape is in `docs/approvals.md`):
//!
//! ```json
//! {"schema": "countersign.event/v1", "id": "evt_…", "type": "approval.opened",
//!  "timestamp": "2026-12-01T10:00:00.000Z", "data": {"request_id": "apr_…", …}}
//! ```
//!
//! Retrying is decided here, purely ([`after_failure`]): exponential backoff from
//! [`FIRST_RETRY`], doubled per attempt up to [`LONGEST_WAIT`], each wait scaled by a random
//! factor in [0.5, 1.5), until [`GIVE_UP_AFTER`] has passed since the delivery's window began;
//! then the delivery is `failed`.

use std::time::Duration;

use serde_json::json;

use crate::approval::{ApprovalId, ApprovalRecord};
use crate::clock::Timestamp;

/// The version string of the event body.
pub const EVENT_SCHEMA: &str = "countersign.event/v1";

/// The wait before the first retry of a failed delivery (before jitter).
pub const FIRST_RETRY: Duration = Duration::from_secs(5);
/// The longest wait between two attempts (before jitter).
pub const LONGEST_WAIT: Duration = Duration::from_secs(3_600);
/// How long a delivery is retried, from the start of its window (the event's time, or a
/// `--redeliver`), before it is `failed`.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(24 * 3_600);
/// How long delivered events are kept by default before they are pruned.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3_600);

/// What happened to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A request was opened (state `pending`).
    Opened,
    /// An answer counted: a quorum's yes (still `pending`), the decisive yes (`granted`) or a
    /// no (`denied`). One event per answer that counts; a refused answer is none.
    Answered,
    /// It expired unanswered or unused (`expired`), at its `expires_at` when the approval
    /// service's sweeper runs, or when next touched.
    Expired,
    /// Its policy entry changed before it was used (`void`).
    Voided,
    /// An attempt consumed the grant (`consumed`).
    Consumed,
    /// A grant or a counted yes was taken back (issue #31).
    Revoked,
    /// The operator cancelled it (issue #31).
    Cancelled,
    /// A signed checkpoint of the receipt log was made (issue #23): about the log, not a
    /// request (its events have no `request_id`).
    Checkpoint,
}

impl EventKind {
    /// Every kind: a request's, in the order of its life, then the log's.
    pub const ALL: [EventKind; 8] = [
        EventKind::Opened,
        EventKind::Answered,
        EventKind::Expired,
        EventKind::Voided,
        EventKind::Consumed,
        EventKind::Revoked,
        EventKind::Cancelled,
        EventKind::Checkpoint,
    ];

    /// `approval.opened`, `approval.answered`, `approval.expired`, `approval.voided`,
    /// `approval.consumed`, `approval.revoked`, `approval.cancelled` or `log.checkpoint`: the
    /// body's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Opened => "approval.opened",
            EventKind::Answered => "approval.answered",
            EventKind::Expired => "approval.expired",
            EventKind::Voided => "approval.voided",
            EventKind::Consumed => "approval.consumed",
            EventKind::Revoked => "approval.revoked",
            EventKind::Cancelled => "approval.cancelled",
            EventKind::Checkpoint => "log.checkpoint",
        }
    }

    /// The kind named by [`EventKind::as_str`]'s text.
    pub fn parse(text: &str) -> Option<EventKind> {
        EventKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One event, as written to the outbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxEvent {
    /// Its identifier: `evt_` and 20 lowercase base-32 characters. Every delivery and every
    /// retry of it carries this id (the webhook's `webhook-id`), so a receiver can drop
    /// duplicates.
    pub id: String,
    /// What happened.
    pub kind: EventKind,
    /// The request it is about; `None` for an event about the log ([`EventKind::Checkpoint`],
    /// stored with an empty `request_id`).
    pub request_id: Option<ApprovalId>,
    /// When (the store transaction's time).
    pub created_at: Timestamp,
    /// The body: `countersign.event/v1` JSON (see the [module docs](self)).
    pub body: String,
}

/// An event as stored, with its position in the outbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEvent {
    /// Its position: increasing in the order of commit for one request (the order of its
    /// changes), not necessarily across requests.
    pub seq: u64,
    /// The event.
    pub event: OutboxEvent,
}

/// The event `kind` for `record` as it stands after the change, at `now`.
pub fn approval_event(record: &ApprovalRecord, kind: EventKind, now: Timestamp) -> OutboxEvent {
    let id = crate::id::random_id("evt_");
    let answer = match kind {
        EventKind::Answered => record.answers.last().map(|answer| {
            json!({
                "approver": answer.approver.id,
                "groups": answer.approver.groups,
                "channel": answer.approver.channel.as_str(),
                "authentication": answer.approver.authentication.as_str(),
                "decision": answer.decision.as_str(),
                "answered_at": answer.answered_at,
                "note": answer.note,
                "hash_confirmed": answer.hash_confirmed,
            })
        }),
        _ => None,
    };
    let data = json!({
        "request_id": record.id.as_str(),
        "state": record.state.as_str(),
        "action": record.action,
        "action_hash": record.action_hash.as_str(),
        "arguments": record.arguments.to_value(),
        "principal": record.principal,
        "resource": record.resource,
        "environment": record.environment,
        "effect_key": record.effect_key,
        "run": record.run,
        "created_at": record.created_at,
        "expires_at": record.expires_at,
        "approvers": record.rule.summary(),
        "approvals_needed": record.rule.quorum,
        "approvals_given": record.approvals_given(),
        "decided_by": record.approver,
        "note": record.note,
        "consumed_by": record.consumed_by,
        "answer": answer,
    });
    let body = json!({
        "schema": EVENT_SCHEMA,
        "id": id,
        "type": kind.as_str(),
        "timestamp": now,
        "data": data,
    });
    OutboxEvent {
        id,
        kind,
        request_id: Some(record.id.clone()),
        created_at: now,
        body: body.to_string(),
    }
}

/// The `log.checkpoint` event for a signed checkpoint made at `now` (issue #23): `data` holds
/// the log's `origin`, the tree `size` and `root` (standard base64), the whole signed note
/// (`checkpoint`, the text `countersign checkpoint` prints and `verify --checkpoint` reads) and
/// the `verifier_key` (`origin+keyid+base64(0x01 || key)`, Go's `note` verifier format). A
/// receiver keeps the note: a checkpoint kept only in the store proves nothing against someone
/// who can write the store (`docs/evidence.md`).
pub fn checkpoint_event(
    head: &crate::evidence::checkpoint::Checkpoint,
    signed: &str,
    verifier_key: &str,
    now: Timestamp,
) -> OutboxEvent {
    let id = crate::id::random_id("evt_");
    let body = json!({
        "schema": EVENT_SCHEMA,
        "id": id,
        "type": EventKind::Checkpoint.as_str(),
        "timestamp": now,
        "data": {
            "origin": head.origin,
            "size": head.size,
            "root": head.root.to_base64(),
            "checkpoint": signed,
            "verifier_key": verifier_key,
        },
    });
    OutboxEvent {
        id,
        kind: EventKind::Checkpoint,
        request_id: None,
        created_at: now,
        body: body.to_string(),
    }
}

/// The text a store keeps in an event's `request_id` column: the request's id, or `''` for an
/// event about the log.
pub(crate) fn stored_request_id(request_id: Option<&ApprovalId>) -> &str {
    request_id.map_or("", ApprovalId::as_str)
}

/// An event's request as read back from its `request_id` column (`''`: none).
pub(crate) fn read_request_id(text: String) -> Option<ApprovalId> {
    (!text.is_empty()).then(|| ApprovalId::from_stored(text))
}

/// Where one delivery of an event to one endpoint stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    /// Not delivered yet: due at `next_attempt_at` (or held under a lease by a sender).
    Pending,
    /// The endpoint acknowledged it.
    Delivered,
    /// Retried until [`GIVE_UP_AFTER`] without success; `countersign webhooks --redeliver ID`
    /// tries again.
    Failed,
}

impl DeliveryState {
    /// `pending`, `delivered` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }

    /// The state named by [`DeliveryState::as_str`]'s text.
    pub fn parse(text: &str) -> Option<DeliveryState> {
        [
            DeliveryState::Pending,
            DeliveryState::Delivered,
            DeliveryState::Failed,
        ]
        .into_iter()
        .find(|state| state.as_str() == text)
    }
}

impl std::fmt::Display for DeliveryState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One event's delivery to one endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Its number (for `countersign webhooks --redeliver ID`).
    pub id: u64,
    /// The event's id (`evt_…`).
    pub event_id: String,
    /// The event's kind.
    pub kind: EventKind,
    /// The request the event is about (`None`: the log, [`EventKind::Checkpoint`]).
    pub request_id: Option<ApprovalId>,
    /// The endpoint: a webhook URL, or `slack`.
    pub endpoint: String,
    /// Where it stands.
    pub state: DeliveryState,
    /// Attempts made so far.
    pub attempts: u32,
    /// When the next attempt is due (while `pending`).
    pub next_attempt_at: Timestamp,
    /// When its retry window began: the event's time, or the last `--redeliver`.
    pub window_start: Timestamp,
    /// Why the last attempt failed, if it did (no secret: a status code or a transport error);
    /// `None` once delivered.
    pub last_error: Option<String>,
    /// When it was delivered, if it was.
    pub delivered_at: Option<Timestamp>,
    /// What the endpoint named it by when it acknowledged it, if anything (see
    /// [`Settlement::Delivered`]).
    pub reference: Option<String>,
    /// When the event happened.
    pub event_at: Timestamp,
}

/// A delivery claimed under a lease by one sender ([`crate::Store::claim_deliveries`]): no
/// other sender claims it until `lease_until`, or until it is settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimedDelivery {
    /// The delivery, as claimed (its `attempts` are those before this one).
    pub delivery: Delivery,
    /// The event's body, to send as it is.
    pub body: String,
    /// When the lease lapses, in the clock of the caller that claimed it (its `now` plus the
    /// lease): the store keeps the lease in its own clock (issue #22), but the sender compares
    /// this with its own clock before each attempt.
    pub lease_until: Timestamp,
}

/// What a claimed attempt came to ([`crate::Store::settle_delivery`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settlement {
    /// The endpoint acknowledged it: `delivered`, keeping what the endpoint named it by, if
    /// anything (Slack: the message's channel and `ts`, which later events update).
    Delivered {
        /// The endpoint's own name for what it received, if it gave one.
        reference: Option<String>,
    },
    /// It failed; try again at `at` (stays `pending`).
    Retry {
        /// When the next attempt is due.
        at: Timestamp,
        /// Why it failed.
        error: String,
    },
    /// It failed and its window is over: `failed`.
    Failed {
        /// Why the last attempt failed.
        error: String,
    },
}

/// What a failed attempt leads to: the attempt number `attempts` (1 for the first) failed at
/// `now` with `error`, in a window that began at `window_start`. `random` is a factor in
/// [0.5, 1.5) that spreads retries out (jitter); each wait is [`FIRST_RETRY`] doubled per
/// earlier failure, at most [`LONGEST_WAIT`]. A retry due after `window_start` plus
/// [`GIVE_UP_AFTER`] is none: the delivery is `failed`.
pub fn after_failure(
    window_start: Timestamp,
    attempts: u32,
    now: Timestamp,
    error: String,
    random: f64,
) -> Settlement {
    let doublings = attempts.saturating_sub(1).min(20);
    let wait = FIRST_RETRY
        .saturating_mul(1_u32 << doublings)
        .min(LONGEST_WAIT)
        .mul_f64(random.clamp(0.5, 1.5));
    let at = now.plus(wait);
    if at >= window_start.plus(GIVE_UP_AFTER) {
        Settlement::Failed { error }
    } else {
        Settlement::Retry { at, error }
    }
}

#[cfg(test)]
mod tests;
