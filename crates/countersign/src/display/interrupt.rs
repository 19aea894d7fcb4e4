//! The chat-surface contract (issue #17): what a chat surface shows for one pending approval
//! ([`InterruptObject`], `countersign.interrupt/v1`) and the one closed response it may send
//! back for it ([`InterruptResponse`], read strictly by [`parse_interrupt_response`]).
//!
//! Both halves live here so that every surface that speaks the contract — the approval
//! service's `POST /api/v1/interrupts/responses`, the Python binding's `Control.respond`
//! behind an adapter's `apply_responses` — renders the same object and reads a response by the
//! same rules. A response is data for [`crate::control::submit_answer`], never a grant: it
//! carries no approver (the surface passes the caller it signed in), and a response that is not
//! exactly `{"decision": "approve" | "deny", "action_hash": "sha256:…", "note": "…"?}` is an
//! [`InvalidDecision`] that the kernel records as a refused answer (case B38).
//!
//! The payload schemas, with examples, are in `docs/approvals.md` ("Chat surfaces").

use serde::Serialize;

use crate::action::ActionHash;
use crate::approval::{AnswerDecision, ApprovalRecord, InvalidDecision};
use crate::clock::Timestamp;

use super::{ApprovalDisplay, render};

/// The `schema` of an [`InterruptObject`].
pub const INTERRUPT_SCHEMA: &str = "countersign.interrupt/v1";

/// The longest `note` a response may carry, in bytes (UTF-8): [`crate::approval::MAX_NOTE_BYTES`].
pub const MAX_RESPONSE_NOTE: usize = crate::approval::MAX_NOTE_BYTES;

/// One pending approval as a chat surface shows it: serialized as the JSON object
/// `countersign.interrupt/v1`.
///
/// A surface shows `display_text` (or renders `display`, never `arguments` itself) and offers
/// the two `answers`; the chosen answer's `response` is what it sends back, keyed by
/// `request_id`, with an optional `note`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InterruptObject {
    /// Always [`INTERRUPT_SCHEMA`].
    pub schema: &'static str,
    /// The request to answer (`apr_` plus 20 lowercase base-32 characters).
    pub request_id: String,
    /// The action name.
    pub action: String,
    /// The canonical arguments (RFC 8785, secrets redacted by the kernel): exactly what was
    /// hashed and what runs once approved. For programs; people are shown `display`.
    pub arguments: serde_json::Value,
    /// The action hash the answer is bound to (`sha256:` plus 64 lowercase hex digits).
    pub action_hash: String,
    /// When the request expires (UTC, RFC 3339 with milliseconds); an answer after it counts
    /// for nothing.
    pub expires_at: Timestamp,
    /// The run (a framework's run or thread id) the request was opened for, if any.
    pub run: Option<String>,
    /// Who may approve, in one line (the stored rule's summary, such as `group:finance (2 of
    /// them)`).
    pub approvers: String,
    /// How many distinct approvers must say yes.
    pub quorum: u32,
    /// Yes answers counted so far.
    pub approvals_given: u32,
    /// The kernel's one rendering of the request ([`render`], `countersign.display/v1`).
    pub display: ApprovalDisplay,
    /// The same rendering as plain text ([`ApprovalDisplay::to_text`]): lines separated by
    /// `\n`, every misreadable character escaped.
    pub display_text: String,
    /// The two answers, approve first: what a surface offers as its buttons.
    pub answers: [InterruptAnswer; 2],
}

/// One of the two answers an [`InterruptObject`] offers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InterruptAnswer {
    /// `approve` or `deny`.
    pub decision: &'static str,
    /// A label for a button: `Approve` or `Deny`.
    pub label: &'static str,
    /// The response to send for this answer, as it is (a `note` may be added).
    pub response: ResponseTemplate,
}

/// The body of one response as an [`InterruptAnswer`] offers it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResponseTemplate {
    /// `approve` or `deny`.
    pub decision: &'static str,
    /// The request's action hash, echoed.
    pub action_hash: String,
}

/// The chat-surface object of `record` (whatever its state: a surface lists pending ones).
///
/// # Panics
///
/// Never.
pub fn interrupt_object(record: &ApprovalRecord) -> InterruptObject {
    let display = render(record, None);
    let display_text = display.to_text();
    let answer = |decision: &'static str, label: &'static str| InterruptAnswer {
        decision,
        label,
        response: ResponseTemplate {
            decision,
            action_hash: record.action_hash.as_str().to_owned(),
        },
    };
    InterruptObject {
        schema: INTERRUPT_SCHEMA,
        request_id: record.id.as_str().to_owned(),
        action: record.action.clone(),
        arguments: record.arguments.to_value(),
        action_hash: record.action_hash.as_str().to_owned(),
        expires_at: record.expires_at,
        run: record.run.clone(),
        approvers: record.rule.summary(),
        quorum: record.rule.quorum,
        approvals_given: record.approvals_given(),
        display,
        display_text,
        answers: [answer("approve", "Approve"), answer("deny", "Deny")],
    }
}

/// A response to one [`InterruptObject`], read by [`parse_interrupt_response`]: the closed
/// answer a surface hands [`crate::control::submit_answer`] with the caller it signed in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterruptResponse {
    /// Approve or deny.
    pub decision: AnswerDecision,
    /// The action hash the person was shown (the kernel refuses `mismatch` when it is not the
    /// request's).
    pub action_hash: ActionHash,
    /// Their note, kept as data.
    pub note: Option<String>,
}

/// Read one response strictly: a JSON object with exactly `decision` (the string `"approve"`
/// or `"deny"`), `action_hash` (a string) and optionally `note` (a string of at most
/// [`MAX_RESPONSE_NOTE`] bytes, or `null`).
///
/// # Errors
///
/// [`InvalidDecision`] holding the whole submitted value as compact JSON, for anything else:
/// a bare boolean, a string, a number, `null`, an array; an object missing `decision` or
/// `action_hash`, with another decision (`"reject"`, `"yes"`, `true`...), a non-string hash
/// or note, a note that is too long, or any other field (an `approver` field included: who
/// answers is never part of the payload).
pub fn parse_interrupt_response(
    value: &serde_json::Value,
) -> Result<InterruptResponse, InvalidDecision> {
    let invalid = || InvalidDecision {
        given: value.to_string(),
    };
    let serde_json::Value::Object(fields) = value else {
        return Err(invalid());
    };
    if fields
        .keys()
        .any(|key| !matches!(key.as_str(), "decision" | "action_hash" | "note"))
    {
        return Err(invalid());
    }
    let decision = match fields.get("decision").and_then(serde_json::Value::as_str) {
        Some("approve") => AnswerDecision::Approve,
        Some("deny") => AnswerDecision::Deny,
        _ => return Err(invalid()),
    };
    let Some(action_hash) = fields
        .get("action_hash")
        .and_then(serde_json::Value::as_str)
    else {
        return Err(invalid());
    };
    let note = match fields.get("note") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(note)) if note.len() <= MAX_RESPONSE_NOTE => {
            Some(note.clone())
        }
        Some(_) => return Err(invalid()),
    };
    Ok(InterruptResponse {
        decision,
        action_hash: ActionHash::from_stored(action_hash.to_owned()),
        note,
    })
}
