//! What crosses swiftide's pause: the [`Pause`] a gated tool stops the agent with, the
//! [`ToolFeedback`] a host resumes it with, and the text the model reads when a call did not run.

use countersign::{ControlError, DidRun, PendingApproval};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use swiftide_agents::StopReason;
use swiftide_core::ToolFeedback;
use swiftide_core::chat_completion::ToolCall;

/// The `schema` of a [`Pause`] payload.
pub const PAUSE_SCHEMA: &str = "countersign.swiftide.pause/v1";

/// The `schema` of a feedback payload ([`FeedbackPayload`]).
pub const FEEDBACK_SCHEMA: &str = "countersign.swiftide.feedback/v1";

/// A gated call waiting for a human: the payload of `ToolOutput::FeedbackRequired`, hence of
/// `StopReason::FeedbackRequired { payload, .. }` (JSON, [`PAUSE_SCHEMA`]).
///
/// Show it to a human, then resume with [`crate::Gate::approve`], [`crate::Gate::reject`] or
/// [`edit`]; or answer
/// `request_id` out of band (`countersign approve apr_…`) and resume with [`recheck`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pause {
    /// Always [`PAUSE_SCHEMA`].
    pub schema: String,
    /// The kernel's approval request (`apr_…`): the pause id.
    pub request_id: String,
    /// The action name.
    pub action: String,
    /// The canonical arguments, secrets redacted (`"[redacted]"`).
    pub arguments: Value,
    /// The action hash the answer will be bound to (`sha256:` plus 64 lowercase hex digits).
    pub action_hash: String,
    /// When the request expires: UTC, RFC 3339 with milliseconds.
    pub expires_at: String,
    /// Who asks (the control's principal).
    pub principal: String,
    /// The rendered resource, if any.
    pub resource: Option<String>,
    /// The rendered effect key, if any.
    pub effect_key: Option<String>,
    /// What to show the human: the kernel's one rendering of the request
    /// (`countersign::display`): every argument in full, every character a person could
    /// misread escaped as `\u{…}` with a warning under it. Plain text, lines separated by
    /// `\n`. Show this rather than rendering `arguments` yourself. Empty in a payload written
    /// before this field existed.
    #[serde(default)]
    pub display: String,
    /// The swiftide tool call that paused.
    pub tool_call_id: String,
    /// Set when the paused action is a reviewer's edit of the tool call: what it was edited
    /// from. Every later answer for this tool call carries it again
    /// ([`crate::Gate::approve`] does).
    pub edit: Option<Edit>,
    /// Set when the feedback this pass received answered nothing, and the run paused again on
    /// `request_id`: the other request it named (`apr_…`), or [`NOT_AN_ANSWER`] when it carried
    /// no Countersign answer at all (swiftide's own payload-less `ToolFeedback::approved()`).
    pub ignored_feedback: Option<String>,
}

/// [`Pause::ignored_feedback`] for feedback that carried no Countersign answer: build answers
/// with [`crate::Gate::approve`] or [`crate::Gate::reject`], which name the request and the
/// arguments shown.
pub const NOT_AN_ANSWER: &str = "feedback without a Countersign answer";

impl Pause {
    pub(crate) fn new(
        pending: &PendingApproval,
        tool_call: &ToolCall,
        edit: Option<Edit>,
        ignored_feedback: Option<String>,
    ) -> Pause {
        Pause {
            schema: PAUSE_SCHEMA.to_owned(),
            request_id: pending.request_id.as_str().to_owned(),
            action: pending.action.clone(),
            arguments: pending.arguments.clone(),
            action_hash: pending.action_hash.as_str().to_owned(),
            expires_at: pending.expires_at.to_rfc3339(),
            principal: pending.principal.to_string(),
            resource: pending.resource.clone(),
            effect_key: pending.effect_key.as_ref().map(ToString::to_string),
            display: countersign::display::render_pending(pending, None).to_text(),
            tool_call_id: tool_call.id().to_owned(),
            edit,
            ignored_feedback,
        }
    }

    /// The pause as JSON (the `FeedbackRequired` payload).
    pub fn to_value(&self) -> Value {
        // INVARIANT (pause-json): every field is a string, an optional string or JSON.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Read a `FeedbackRequired` payload; `None` when it is not a Countersign pause (another
    /// tool's feedback request).
    pub fn from_value(value: &Value) -> Option<Pause> {
        serde_json::from_value::<Pause>(value.clone())
            .ok()
            .filter(|pause| pause.schema == PAUSE_SCHEMA)
    }

    /// The tool call and the pause an agent stopped on, if it stopped on a Countersign pause.
    ///
    /// swiftide's stop reason names **one** tool call: when several gated calls of one model
    /// turn pause together, the others are in [`crate::Gate::take_outcomes`] in-process, and
    /// come back in [`crate::Resumed::paused`] from [`crate::resume`].
    pub fn from_stop_reason(reason: &StopReason) -> Option<(ToolCall, Pause)> {
        let (tool_call, payload) = reason.as_feedback_required()?;
        Some((tool_call.clone(), Pause::from_value(payload?)?))
    }
}

/// A reviewer's edit: run `action` with `arguments` instead of the call the model made.
///
/// An edit is a new action with a new hash: policy decides it again and, if it needs approval,
/// a new request is made for it. The original request is not answered by an edit (it stays
/// pending until it expires or someone answers it with the CLI).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Edit {
    /// The action to run instead (a gated tool's action on the same [`crate::Gate`]).
    pub action: String,
    /// Its arguments.
    pub arguments: Value,
    /// The request the reviewer edited (`apr_…`).
    pub from_request: String,
    /// The action hash the reviewer edited.
    pub from_hash: String,
}

/// The payload of a Countersign [`ToolFeedback`] (JSON, [`FEEDBACK_SCHEMA`]). The feedback's
/// variant (`Approved` / `Refused`) is the decision; the payload binds it to one request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FeedbackPayload {
    /// Always [`FEEDBACK_SCHEMA`].
    pub schema: String,
    /// The request this answers (`apr_…`). Feedback naming no request, or another one, answers
    /// nothing: the run pauses again.
    pub request_id: Option<String>,
    /// Who answered (`human:alice`), **for display only**. The payload is run state (anyone
    /// holding the agent's context can edit it): the kernel is given the approver the operator
    /// passed to [`crate::Gate::approve`] / [`crate::Gate::reject`], never this name. Still
    /// read from payloads written before that, and ignored. A token is never written here.
    pub approver: Option<String>,
    /// Their note, kept as data.
    pub note: Option<String>,
    /// The arguments the human answered about, as shown. The kernel refuses (`mismatch`) an
    /// answer about other arguments.
    pub arguments: Option<Value>,
    /// The reviewer's edit this tool call carries, if any.
    pub edit: Option<Edit>,
    /// The action hash the human was shown (the pause's), echoed to the kernel: an answer
    /// about another hash is refused `mismatch`.
    pub action_hash: Option<String>,
}

impl FeedbackPayload {
    /// This payload as swiftide feedback: `Approved` when `approved`, else `Refused`.
    pub fn into_feedback(self, approved: bool) -> ToolFeedback {
        // INVARIANT (payload-json): the payload has only strings, options and JSON values.
        let payload = serde_json::to_value(self).unwrap_or(Value::Null);
        if approved {
            ToolFeedback::approved().with_payload(payload)
        } else {
            ToolFeedback::refused().with_payload(payload)
        }
    }
}

/// A human's answer as a gated tool reads it from swiftide's feedback.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    pub(crate) approved: bool,
    pub(crate) request_id: Option<String>,
    pub(crate) approver: Option<String>,
    pub(crate) note: Option<String>,
    pub(crate) arguments: Option<Value>,
    pub(crate) edit: Option<Edit>,
    pub(crate) action_hash: Option<String>,
}

impl Answer {
    /// Read swiftide's feedback. Feedback without a Countersign payload (`ToolFeedback::approved()`
    /// as swiftide's own `ApprovalRequired` uses it) names no request and answers nothing.
    pub(crate) fn from_feedback(feedback: &ToolFeedback) -> Answer {
        let payload = feedback
            .payload()
            .and_then(|value| serde_json::from_value::<FeedbackPayload>(value.clone()).ok())
            .filter(|payload| payload.schema == FEEDBACK_SCHEMA)
            .unwrap_or_default();
        Answer {
            approved: feedback.is_approved(),
            request_id: payload.request_id,
            approver: payload.approver,
            note: payload.note,
            arguments: payload.arguments,
            edit: payload.edit,
            action_hash: payload.action_hash,
        }
    }
}

/// The feedback answering `pause`; `shown_name` is written into the payload for display.
pub(crate) fn answer(
    pause: &Pause,
    shown_name: Option<&str>,
    note: Option<&str>,
    approved: bool,
) -> ToolFeedback {
    FeedbackPayload {
        schema: FEEDBACK_SCHEMA.to_owned(),
        request_id: Some(pause.request_id.clone()),
        approver: shown_name.map(str::to_owned),
        note: note.map(str::to_owned),
        arguments: Some(pause.arguments.clone()),
        edit: pause.edit.clone(),
        action_hash: Some(pause.action_hash.clone()),
    }
    .into_feedback(approved)
}

/// A reviewer edits the paused call: run `action` with `arguments` instead. Nothing is approved
/// by this: the resumed run asks policy about the edited action, which may pause again with a
/// new request (bound to the edited hash) or be refused.
pub fn edit(pause: &Pause, action: &str, arguments: Value) -> ToolFeedback {
    let (from_request, from_hash) = match &pause.edit {
        // An edit of an edit still points at what the model asked for.
        Some(earlier) => (earlier.from_request.clone(), earlier.from_hash.clone()),
        None => (pause.request_id.clone(), pause.action_hash.clone()),
    };
    FeedbackPayload {
        schema: FEEDBACK_SCHEMA.to_owned(),
        edit: Some(Edit {
            action: action.to_owned(),
            arguments,
            from_request,
            from_hash,
        }),
        ..FeedbackPayload::default()
    }
    .into_feedback(true)
}

/// Feedback that answers nothing: it only makes swiftide re-enter the paused tool call. Use it
/// after the request was answered out of band (`countersign approve`): the kernel finds the
/// grant by action hash. swiftide does not re-enter a paused call without some feedback.
///
/// A paused edit must be rechecked with its edit: pass the pause.
pub fn recheck(pause: Option<&Pause>) -> ToolFeedback {
    FeedbackPayload {
        schema: FEEDBACK_SCHEMA.to_owned(),
        edit: pause.and_then(|pause| pause.edit.clone()),
        ..FeedbackPayload::default()
    }
    .into_feedback(true)
}

/// The text the model reads when a gated call did not run (SPEC.md 2.6): JSON with `status`,
/// the kernel's `reason`, `did_run`, a plain `message`, and the reviewer's note as data.
pub fn model_message(tool: &str, error: &ControlError) -> String {
    let did_run = match error.did_run() {
        DidRun::No => "no",
        DidRun::Maybe => "maybe",
    };
    let (status, message) = match error {
        ControlError::ApprovalRequired { .. } => (
            "pending",
            format!(
                "The tool `{tool}` was not executed: the action is waiting for a human decision."
            ),
        ),
        ControlError::ApprovalDenied { .. } => (
            "rejected",
            format!("The tool `{tool}` was not executed: a human rejected this action."),
        ),
        ControlError::ApprovalExpired { .. } => (
            "expired",
            format!("The tool `{tool}` was not executed: its approval expired. It will not run."),
        ),
        _ if error.did_run() == DidRun::Maybe => (
            "unknown",
            format!(
                "The tool `{tool}` may have run, and its outcome is unknown. Do not call it again; a human must check."
            ),
        ),
        _ => (
            "refused",
            format!("The tool `{tool}` was not executed: Countersign refused it."),
        ),
    };
    let note = match error {
        ControlError::ApprovalDenied { note, .. } => note.clone(),
        _ => None,
    };
    serde_json::json!({
        "status": status,
        // `false` when it did not run; `null` when nobody knows.
        "executed": if did_run == "no" { Value::Bool(false) } else { Value::Null },
        "did_run": did_run,
        "reason": error.reason(),
        "tool": tool,
        "message": message,
        "reviewer_note": note,
    })
    .to_string()
}
