//! The gateway's JSON-RPC error codes and the structured data of every refusal.
//!
//! Codes are stable: a client may branch on them. They sit in JSON-RPC's range for
//! implementation-defined server errors (-32000 to -32099), apart from the codes MCP itself
//! uses. The table, with what each means for a retry, is in the crate README.
//!
//! | code | reason codes | did the call run? | may the identical call be sent again? |
//! |---|---|---|---|
//! | -32090 | `approval_required` | no | yes, after a human approves |
//! | -32091 | `approval_denied` | no | no: a human said no |
//! | -32092 | `expired` | no | yes: a new approval is requested |
//! | -32093 | `mismatch`, `consumed`, `unknown_request`, `policy_changed`, `interrupt_failed`, `revoked`, `cancelled`, `tool_changed`, and every refused answer (`not_entitled`, `invalid_approver`, ...) | no | see `data.may_retry` |
//! | -32094 | `denied`, `unknown_action`, `no_matching_rule` | no | no |
//! | -32095 | `duplicate`, `in_progress` | no (this attempt) | no |
//! | -32096 | `ambiguous` | no (an earlier attempt may have) | no, until resolved |
//! | -32097 | `outcome_unknown` | maybe | no, until resolved |
//! | -32098 | `not_executed` | no | yes |
//! | -32099 | `no_principal`, `invalid_arguments`, `bad_template`, store and internal errors | no, unless `data.did_run` says `maybe` | see `data.may_retry` |

use countersign::display::ApprovalDisplay;
use countersign::{ControlError, Reason};
use serde_json::{Map, Value, json};

/// A human must approve first: `countersign approve <request_id>`, then send the identical call.
pub const APPROVAL_REQUIRED: i64 = -32090;
/// A human rejected this exact action.
pub const APPROVAL_DENIED: i64 = -32091;
/// The approval request expired; sending the call again requests a new one.
pub const APPROVAL_EXPIRED: i64 = -32092;
/// The presented or found approval cannot authorize this call (mismatch, used, void, unknown,
/// revoked or cancelled: issue #31).
pub const APPROVAL_INVALID: i64 = -32093;
/// Policy denies the action.
pub const POLICY_DENIED: i64 = -32094;
/// The effect already happened, or another attempt holds it.
pub const DUPLICATE_EFFECT: i64 = -32095;
/// An earlier attempt on this effect has an unknown outcome; retries are refused until resolved.
pub const AMBIGUOUS_EFFECT: i64 = -32096;
/// This attempt was sent upstream and its outcome is unknown.
pub const OUTCOME_UNKNOWN: i64 = -32097;
/// The upstream definitely did not execute the call; the identical call may be sent again.
pub const NOT_EXECUTED: i64 = -32098;
/// The gateway refused the call for another reason (no principal, bad arguments, store).
pub const REFUSED: i64 = -32099;

/// MCP's `URLElicitationRequiredError` (2025-11-25): the call cannot go ahead until the person
/// completes the URL-mode elicitation in `data.elicitations` (here: the approval service's page
/// for the request, issue #27); the identical call is then sent again. Carries the same
/// `data` as [`APPROVAL_REQUIRED`] (`reason: approval_required`).
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// JSON-RPC's own codes the gateway answers with.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC invalid request (also: batches, which the gateway refuses).
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC method not found.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC invalid params.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC internal error (used when the upstream connection is gone).
pub const INTERNAL_ERROR: i64 = -32603;

/// The gateway's code for a kernel refusal with reason `reason`. Exhaustive over [`Reason`]:
/// a new refusal does not compile until it is given a code (issue #19).
pub fn code_for(reason: Reason) -> i64 {
    match reason {
        Reason::ApprovalRequired => APPROVAL_REQUIRED,
        Reason::ApprovalDenied => APPROVAL_DENIED,
        Reason::Expired => APPROVAL_EXPIRED,
        Reason::Mismatch
        | Reason::Consumed
        | Reason::UnknownRequest
        | Reason::PolicyChanged
        | Reason::InterruptFailed
        | Reason::OtherRun
        | Reason::NotEntitled
        | Reason::NotAuthenticated
        | Reason::SelfApproval
        | Reason::InvalidDecision
        | Reason::NoteTooLong
        | Reason::AlreadyDecided
        | Reason::NoApprover
        | Reason::InvalidApprover
        | Reason::Revoked
        | Reason::Cancelled
        | Reason::ToolChanged
        | Reason::NotRevocable => APPROVAL_INVALID,
        Reason::Denied | Reason::UnknownAction | Reason::NoMatchingRule => POLICY_DENIED,
        Reason::Duplicate | Reason::InProgress => DUPLICATE_EFFECT,
        Reason::Ambiguous => AMBIGUOUS_EFFECT,
        Reason::OutcomeUnknown => OUTCOME_UNKNOWN,
        Reason::NotExecuted => NOT_EXECUTED,
        Reason::InvalidArguments
        | Reason::BadTemplate
        | Reason::NoPrincipal
        | Reason::StoreBusy
        | Reason::StoreOutcomeUnknown
        | Reason::StoreIncompatible
        | Reason::StoreCorrupt
        | Reason::StoreOpen
        | Reason::StoreError
        | Reason::Internal => REFUSED,
    }
}

/// The model-facing sentence for a refusal: for a rejected or expired approval, one that says
/// plainly the tool did not run and what to do (so it never reads like the tool failing);
/// otherwise the kernel's own sentence, which starts with "not executed" or "outcome unknown".
pub fn message(error: &ControlError, action: &str) -> String {
    match error {
        ControlError::ApprovalDenied {
            request_id,
            approver,
            note,
        } => format!(
            "the tool did not run: a person (`{approver}`) rejected this exact call to `{action}` (approval `{request_id}`){}: do not send it again; ask the user how to proceed",
            note.as_deref()
                .map(|note| format!(", saying: {note}"))
                .unwrap_or_default()
        ),
        ControlError::ApprovalExpired {
            request_id,
            expires_at,
        } => format!(
            "the tool did not run: approval `{request_id}` for `{action}` expired at {expires_at} before this call used it: send the identical call again to ask for a new approval"
        ),
        // Every other refusal: the kernel's own sentence (listed, so a new refusal is decided
        // here too).
        ControlError::InvalidArguments { .. }
        | ControlError::Template { .. }
        | ControlError::NoPrincipal { .. }
        | ControlError::ActionDenied { .. }
        | ControlError::ApprovalRequired { .. }
        | ControlError::ApprovalMismatch { .. }
        | ControlError::ApprovalConsumed { .. }
        | ControlError::ApprovalUnknown { .. }
        | ControlError::ApprovalOtherRun { .. }
        | ControlError::ApprovalVoid { .. }
        | ControlError::ApprovalRevoked { .. }
        | ControlError::ApprovalCancelled { .. }
        | ControlError::AnswerRefused { .. }
        | ControlError::InterruptFailed { .. }
        | ControlError::DuplicateEffect { .. }
        | ControlError::AmbiguousEffect { .. }
        | ControlError::NotExecuted { .. }
        | ControlError::OutcomeUnknown { .. }
        | ControlError::Store { .. }
        | ControlError::Internal(_) => error.to_string(),
    }
}

/// The JSON-RPC `error` object (-32098, `not_executed`) for a request of `action` the gateway
/// refuses itself, before the kernel and before anything is sent upstream (the gateway is
/// stopping; the upstream refused the handshake). `action` is the policy action of a
/// `tools/call` (`mcp.<alias>.<tool>`) and the method of any other request. `data` is as
/// [`refusal`]'s: `countersign: true`, `reason`, `action`, `did_run: "no"`, `may_retry: true`.
pub fn not_executed(message: impl Into<String>, action: &str) -> Value {
    json!({
        "code": NOT_EXECUTED,
        "message": message.into(),
        "data": {
            "countersign": true,
            "reason": "not_executed",
            "action": action,
            "did_run": "no",
            "may_retry": true,
        },
    })
}

/// The JSON-RPC `error` object for a kernel refusal of the action `action`.
///
/// `message` is [`message`]'s sentence. For `approval_required`, the session adds
/// `data.display` with [`attach_display`]. `data` always has `countersign: true`, `reason`, `action`, `did_run`
/// (`no`|`maybe`) and `may_retry`; plus, when known, `action_hash`, `request_id`,
/// `expires_at` (UTC, RFC 3339), `effect_key`, and `upstream` (the raw upstream reply kept as
/// evidence).
pub fn refusal(error: &ControlError, action: &str, upstream: Option<&Value>) -> Value {
    let mut data = Map::new();
    data.insert("countersign".into(), json!(true));
    data.insert("reason".into(), json!(error.reason()));
    data.insert("action".into(), json!(action));
    data.insert("did_run".into(), json!(error.did_run().as_str()));
    data.insert("may_retry".into(), json!(error.may_retry()));
    match error {
        ControlError::ApprovalRequired {
            request_id,
            action_hash,
            expires_at,
        } => {
            data.insert("request_id".into(), json!(request_id.as_str()));
            data.insert("action_hash".into(), json!(action_hash.as_str()));
            data.insert("expires_at".into(), json!(expires_at.to_string()));
            data.insert(
                "approve_with".into(),
                json!(format!("countersign approve {request_id}")),
            );
        }
        ControlError::ApprovalExpired {
            request_id,
            expires_at,
        } => {
            data.insert("request_id".into(), json!(request_id.as_str()));
            data.insert("expires_at".into(), json!(expires_at.to_string()));
        }
        ControlError::ApprovalDenied {
            request_id,
            approver,
            note,
        } => {
            data.insert("request_id".into(), json!(request_id.as_str()));
            data.insert("approver".into(), json!(approver));
            if let Some(note) = note {
                data.insert("note".into(), json!(note));
            }
        }
        ControlError::ApprovalMismatch {
            request_id,
            action_hash,
            ..
        } => {
            data.insert("request_id".into(), json!(request_id.as_str()));
            data.insert("action_hash".into(), json!(action_hash.as_str()));
        }
        ControlError::ApprovalConsumed { request_id }
        | ControlError::ApprovalUnknown { request_id }
        | ControlError::ApprovalVoid { request_id }
        | ControlError::ApprovalOtherRun { request_id, .. }
        | ControlError::ApprovalRevoked { request_id, .. }
        | ControlError::ApprovalCancelled { request_id, .. }
        | ControlError::AnswerRefused { request_id, .. }
        | ControlError::InterruptFailed { request_id, .. } => {
            data.insert("request_id".into(), json!(request_id.as_str()));
        }
        ControlError::ActionDenied { action_hash, .. } => {
            data.insert("action_hash".into(), json!(action_hash.as_str()));
        }
        ControlError::DuplicateEffect { effect_key, .. }
        | ControlError::AmbiguousEffect { effect_key } => {
            data.insert("effect_key".into(), json!(effect_key.as_str()));
        }
        ControlError::NotExecuted { effect_key, .. }
        | ControlError::OutcomeUnknown { effect_key, .. } => {
            if let Some(key) = effect_key {
                data.insert("effect_key".into(), json!(key.as_str()));
            }
        }
        // Refusals before an action exists, and faults: nothing more to name.
        ControlError::InvalidArguments { .. }
        | ControlError::Template { .. }
        | ControlError::NoPrincipal { .. }
        | ControlError::Store { .. }
        | ControlError::Internal(_) => {}
    }
    if let Some(upstream) = upstream {
        data.insert("upstream".into(), upstream.clone());
    }
    json!({
        "code": code_for(error.kind()),
        "message": message(error, action),
        "data": Value::Object(data),
    })
}

/// Add what an approver is shown to an `approval_required` error object made by [`refusal`]:
/// `data.display`, the plain text of [`countersign::display`] (the one rendering every surface
/// uses: arguments in full, every character a person could misread escaped). Lines are
/// separated by `\n`. Other error objects are left as they are.
pub fn attach_display(error: &mut Value, display: &ApprovalDisplay) {
    if error.pointer("/data/reason").and_then(Value::as_str) != Some("approval_required") {
        return;
    }
    if let Some(Value::Object(data)) = error.get_mut("data") {
        data.insert("display".into(), json!(display.to_text()));
    }
}

/// The `elicitation/create` message the gateway shows a human for `display`: a question, the
/// request as [`countersign::display`] renders it, and what approving does.
pub fn elicitation_message(display: &ApprovalDisplay) -> String {
    format!(
        "Countersign: approve this exact action?\n\n{}\n\nApproving authorizes this call once; other arguments need their own approval.",
        display.to_text()
    )
}

/// Turn an `approval_required` error object made by [`refusal`] into MCP's
/// `URLElicitationRequiredError` ([`URL_ELICITATION_REQUIRED`]): `data.elicitations` holds one
/// URL-mode elicitation (`mode: "url"`, `elicitationId` the request id, `url` the approval
/// service's page, a `message` with what the person is shown) and `data.approval_url` the same
/// URL. Nothing in the URL authorizes: the page signs the person in. Other error objects are
/// left as they are.
pub fn require_url_elicitation(
    error: &mut Value,
    request_id: &str,
    url: &str,
    display: &ApprovalDisplay,
) {
    if error.pointer("/data/reason").and_then(Value::as_str) != Some("approval_required") {
        return;
    }
    error["code"] = json!(URL_ELICITATION_REQUIRED);
    error["message"] = json!(format!(
        "not executed: approval required: a person must approve request `{request_id}` on the approval service's page, {url}, then send the identical call again"
    ));
    if let Some(Value::Object(data)) = error.get_mut("data") {
        data.insert("approval_url".into(), json!(url));
        data.insert(
            "elicitations".into(),
            json!([{
                "mode": "url",
                "elicitationId": request_id,
                "url": url,
                "message": url_elicitation_message(&elicitation_message(display)),
            }]),
        );
    }
}

/// The message of a URL-mode approval elicitation: `question` (what a form would have asked)
/// and where to answer it.
pub fn url_elicitation_message(question: &str) -> String {
    format!(
        "{question}\n\nOpen the approval service's page to answer; it asks you to sign in, and only an entitled approver's answer counts."
    )
}

/// Append `flags` ([`crate::GatewayConfig::command_flags`]) to a refusal's `data.approve_with`,
/// and to the same command where the refusal's `message` quotes it, so the suggested command
/// reaches the gateway's own store (found by first-time users: it named the default store, and
/// the message still did after `data` was fixed).
///
/// With no flags (`None`: a store no other process reaches), `approve_with` is removed and the
/// message says to answer in the client's approval prompt (found by a first-time user: a
/// `memory:` gateway told the model to run a command that could only fail).
pub fn add_command_flags(error: &mut Value, flags: Option<&str>) {
    if flags == Some("") {
        return;
    }
    let Some(Value::String(command)) = error.pointer_mut("/data/approve_with") else {
        return;
    };
    let bare = format!("`{command}`");
    let (from, to) = match flags {
        Some(flags) => {
            command.push_str(flags);
            (bare, format!("`{command}`"))
        }
        None => (
            format!("run {bare}"),
            "answer it in the client's approval prompt (the gateway's store is `memory:`, which `countersign approve` cannot reach)".to_owned(),
        ),
    };
    if flags.is_none()
        && let Some(Value::Object(data)) = error.get_mut("data")
    {
        data.remove("approve_with");
    }
    if let Some(Value::String(message)) = error.pointer_mut("/message") {
        *message = message.replace(&from, &to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_no_other_process_reaches_suggests_no_command() {
        let refusal = || {
            json!({"code": APPROVAL_REQUIRED,
                "message": "not executed; waiting for approval: run `countersign approve apr_x` (expires t), then send the identical call again",
                "data": {"approve_with": "countersign approve apr_x"}})
        };
        let mut flagged = refusal();
        add_command_flags(&mut flagged, Some(" --policy /p.yaml"));
        assert_eq!(
            flagged["data"]["approve_with"],
            "countersign approve apr_x --policy /p.yaml"
        );
        assert!(
            flagged["message"]
                .as_str()
                .is_some_and(|text| text.contains("`countersign approve apr_x --policy /p.yaml`")),
            "{flagged}"
        );
        let mut memory = refusal();
        add_command_flags(&mut memory, None);
        assert!(memory["data"].get("approve_with").is_none(), "{memory}");
        let message = memory["message"].as_str().expect("message");
        assert!(
            !message.contains("countersign approve apr_x")
                && message.contains("the client's approval prompt"),
            "{message}"
        );
    }

    /// Issue #31: a revoked or cancelled approval is an approval that cannot authorize the call,
    /// never the catch-all code.
    #[test]
    fn revoked_and_cancelled_approvals_have_the_approval_code() {
        for reason in [
            Reason::Revoked,
            Reason::Cancelled,
            Reason::NotRevocable,
            Reason::Consumed,
        ] {
            assert_eq!(code_for(reason), APPROVAL_INVALID, "{reason}");
        }
        let revoked = ControlError::ApprovalRevoked {
            request_id: countersign::ApprovalId::parse("apr_aaaaaaaaaaaaaaaaaaaa").expect("an id"),
        };
        assert_eq!(code_for(revoked.kind()), APPROVAL_INVALID);
    }

    /// Issue #19: every reason has a code, and only the ones that are not about approvals,
    /// policy or effects fall in the catch-all `-32099`.
    #[test]
    fn every_reason_has_its_code() {
        let refused: Vec<Reason> = Reason::ALL
            .into_iter()
            .filter(|reason| code_for(*reason) == REFUSED)
            .collect();
        assert_eq!(
            refused,
            [
                Reason::InvalidArguments,
                Reason::BadTemplate,
                Reason::NoPrincipal,
                Reason::StoreBusy,
                Reason::StoreOutcomeUnknown,
                Reason::StoreIncompatible,
                Reason::StoreCorrupt,
                Reason::StoreOpen,
                Reason::StoreError,
                Reason::Internal,
            ]
        );
    }
}
