//! `countersign check`: Claude Code's `PreToolUse` hook.
//!
//! The protocol, as Claude Code's hooks reference describes it
//! (<https://code.claude.com/docs/en/hooks#pretooluse>, read 2026-12-01): the hook gets one JSON
//! object on standard input with `hook_event_name` (`PreToolUse`), `tool_name` (`Bash`, `Write`,
//! `mcp__<server>__<tool>`, ...) and `tool_input` (the tool's arguments, an object), among
//! others (`session_id`, `cwd`, `tool_use_id`). It answers with exit status 0 and, on standard
//! output, `{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision":
//! "allow" | "deny" | "ask", "permissionDecisionReason": "…"}}`; a `deny` reason is shown to
//! Claude. Exit status 2 is a blocking error: standard output is ignored and standard error is
//! shown to Claude; any other non-zero status is a non-blocking error and the tool runs, so this
//! command never uses one.
//!
//! The mapping (docs/cli.md): the action name is `tool_name` as it is, the arguments are
//! `tool_input` as they are (canonicalized), the principal is `--principal` (never the input).

use std::io::{Read, Write};
use std::process::ExitCode;

use clap::Args;
use countersign::{ActionRequest, Control, ControlError, Decision, StaticIdentity};
use serde::Serialize;
use serde_json::Value;

use crate::everyday::{load_policy, principal};
use crate::{Failure, Global};

/// The exit status of a blocking error: Claude Code blocks the tool call and shows standard
/// error to Claude.
pub const BLOCKING_ERROR: u8 = 2;

/// The largest hook input read: 16 MiB (a `Write` carries the whole file).
const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;

/// Arguments of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Who the agent is: part of every action hash and receipt, set by whoever configures the
    /// hook, never taken from the hook's input.
    #[arg(
        long,
        value_name = "WHO",
        default_value = "agent:claude-code",
        env = "COUNTERSIGN_PRINCIPAL"
    )]
    principal: String,
}

/// The hook's answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HookOutput {
    hook_specific_output: HookSpecific,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HookSpecific {
    hook_event_name: &'static str,
    permission_decision: &'static str,
    permission_decision_reason: String,
}

/// A tool call taken from the hook input.
struct ToolCall {
    name: String,
    input: Value,
}

/// Read and check the hook input: one JSON object (strict: duplicate keys and unrepresentable
/// numbers refused) with a non-empty string `tool_name` and an object `tool_input`; a
/// `hook_event_name`, if given, must be `PreToolUse`.
fn parse_input(text: &str) -> Result<ToolCall, String> {
    let parsed = countersign::json::read(text).map_err(|error| {
        format!("the hook input is not valid JSON ({error}): Claude Code sends one JSON object on standard input")
    })?;
    let Value::Object(mut object) = parsed else {
        return Err("the hook input is not a JSON object: Claude Code sends `{\"tool_name\": …, \"tool_input\": {…}}`".to_owned());
    };
    if let Some(event) = object.get("hook_event_name")
        && event.as_str() != Some("PreToolUse")
    {
        return Err(format!(
            "`countersign check` answers the `PreToolUse` hook, and this input is for {event}: register it under `PreToolUse` in the settings"
        ));
    }
    let name = match object.remove("tool_name") {
        Some(Value::String(name)) if !name.trim().is_empty() => name,
        Some(_) => return Err("`tool_name` in the hook input is not a non-empty string".to_owned()),
        None => return Err(
            "the hook input has no `tool_name`: is this command registered as a `PreToolUse` hook?"
                .to_owned(),
        ),
    };
    let input = match object.remove("tool_input") {
        Some(input @ Value::Object(_)) => input,
        Some(_) => return Err("`tool_input` in the hook input is not a JSON object".to_owned()),
        None => return Err("the hook input has no `tool_input`: is this command registered as a `PreToolUse` hook?".to_owned()),
    };
    Ok(ToolCall { name, input })
}

/// `countersign check`: answer one `PreToolUse` call.
pub async fn check(
    global: &Global,
    args: &CheckArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    match decide(global, args).await {
        Ok(output) => {
            serde_json::to_writer(&mut *out, &output)?;
            writeln!(out)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(message) => {
            // A blocking error: Claude Code ignores standard output and shows this to Claude.
            countersign::stderr_line!("countersign check: {message}; the tool call is blocked");
            Ok(ExitCode::from(BLOCKING_ERROR))
        }
    }
}

fn answer(decision: &'static str, reason: String) -> HookOutput {
    HookOutput {
        hook_specific_output: HookSpecific {
            hook_event_name: "PreToolUse",
            permission_decision: decision,
            permission_decision_reason: reason,
        },
    }
}

/// Everything but writing the answer. `Err` is a blocking error; nothing has been written to
/// the store unless the kernel wrote it (input, policy and principal are checked first).
async fn decide(global: &Global, args: &CheckArgs) -> Result<HookOutput, String> {
    let mut text = String::new();
    std::io::stdin()
        .take(MAX_INPUT_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|error| format!("cannot read the hook input on standard input ({error})"))?;
    if text.len() as u64 > MAX_INPUT_BYTES {
        return Err(format!(
            "the hook input is larger than {MAX_INPUT_BYTES} bytes"
        ));
    }
    let call = parse_input(&text)?;
    let principal = principal(&args.principal).map_err(|Failure(message)| message)?;
    let policy_path = global.policy_path();
    let policy = load_policy(&policy_path).map_err(|Failure(message)| message)?;
    let explanation = policy.explain(&call.name, &call.input);
    let store = crate::store_access::open_for_recording(global)
        .await
        .map_err(|Failure(message)| format!("cannot open the store: {message}"))?;
    let control = Control::builder_shared(std::sync::Arc::new(policy), store)
        .identity(StaticIdentity::new(principal))
        .build();
    let tool = countersign::evidence::printable(&call.name).into_owned();
    let request = ActionRequest::new(call.name, &call.input);
    match control.hand_off(request).await {
        Ok(handed) => {
            let seq = handed.receipt.seq;
            let reason = match (&handed.approval, handed.receipt.outcome) {
                (_, countersign::evidence::ReceiptOutcome::Observed) => format!(
                    "countersign (observe mode): `{tool}` would be {}; allowed and recorded (receipt {seq})",
                    match handed.decision {
                        Decision::Allow => "allowed",
                        Decision::Approve => "held for approval",
                        Decision::Deny => "denied",
                    }
                ),
                (Some(approval), _) => format!(
                    "countersign: `{tool}` approved by {} (request {}), used once now (receipt {seq})",
                    approval.approver.as_deref().unwrap_or("an approver"),
                    approval.id
                ),
                (None, _) => format!(
                    "countersign: `{tool}` allowed by {} (receipt {seq})",
                    match explanation.rule {
                        Some(index) => format!(
                            "rule {} of `{}`",
                            index + 1,
                            explanation.entry.as_deref().unwrap_or_default()
                        ),
                        None => format!(
                            "the `decision` of `{}`",
                            explanation.entry.as_deref().unwrap_or_default()
                        ),
                    }
                ),
            };
            Ok(answer("allow", reason))
        }
        Err(ControlError::ApprovalRequired {
            request_id,
            expires_at,
            ..
        }) => Ok(answer(
            "deny",
            format!(
                "countersign: `{tool}` needs a human's approval: request {request_id} is waiting. Ask the user to answer it in a terminal with `countersign approve {request_id}` (or `countersign deny {request_id} --note WHY`), then retry exactly the same call; the approval authorizes that one identical call once and expires at {expires_at}"
            ),
        )),
        Err(ControlError::ActionDenied { reason, .. }) => Ok(answer(
            "deny",
            format!(
                "countersign: `{tool}` is denied by the policy ({reason}{}); do not retry it",
                match explanation.rule {
                    Some(index) => format!(
                        ", rule {} of `{}`",
                        index + 1,
                        explanation.entry.as_deref().unwrap_or_default()
                    ),
                    None => String::new(),
                }
            ),
        )),
        Err(ControlError::Store { source, .. }) => {
            Err(format!("cannot record the decision ({source})"))
        }
        Err(ControlError::Internal(message)) => {
            Err(format!("internal error in the kernel ({message})"))
        }
        Err(refusal) => Ok(answer(
            "deny",
            format!(
                "countersign: `{tool}` refused ({}): {refusal}",
                refusal.reason()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_tool_name_and_input_as_they_are() {
        let call = parse_input(
            r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"mcp__github__create_issue","tool_input":{"title":"x"}}"#,
        )
        .expect("valid");
        assert_eq!(call.name, "mcp__github__create_issue");
        assert_eq!(call.input, serde_json::json!({"title": "x"}));
    }

    #[test]
    fn refuses_malformed_input_with_a_reason() {
        for (input, expected) in [
            ("", "not valid JSON"),
            ("[1]", "not a JSON object"),
            (r#"{"tool_input":{}}"#, "no `tool_name`"),
            (r#"{"tool_name":"Bash"}"#, "no `tool_input`"),
            (r#"{"tool_name":"","tool_input":{}}"#, "non-empty string"),
            (
                r#"{"tool_name":"Bash","tool_input":"ls"}"#,
                "not a JSON object",
            ),
            (
                r#"{"tool_name":"Bash","tool_name":"Read","tool_input":{}}"#,
                "not valid JSON",
            ),
            (
                r#"{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{}}"#,
                "PreToolUse",
            ),
        ] {
            let error = parse_input(input).err().unwrap_or_default();
            assert!(error.contains(expected), "{input}: {error}");
        }
    }
}
