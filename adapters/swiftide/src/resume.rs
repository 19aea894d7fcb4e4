//! Resuming a turn swiftide does not re-enter: [`resume`].
//!
//! swiftide 0.32 re-enters a model turn's tool calls only while none of them has an output
//! (`maybe_tool_call_without_output` in `swiftide-agents/src/agent.rs`). A turn mixing a call
//! that completed with one that paused, or one where a paused call was answered and ran while a
//! sibling waited, is never re-entered: the answer is not read, and swiftide's default context
//! keeps asking the model while the feedback is unread. [`resume`] re-enters the paused calls of
//! the last turn itself, through the agent's own tools (so a gated call's answer still goes
//! through [`crate::SwiftideInterrupt`] and the kernel), adds each output to the history as
//! swiftide does, and continues the run only when no call of the turn is left waiting.

use serde_json::Value;
use swiftide_agents::Agent;
use swiftide_agents::errors::AgentError;
use swiftide_core::ToolFeedback;
use swiftide_core::chat_completion::{ChatMessage, ToolCall, ToolOutput};

use crate::feedback::Pause;

/// What [`resume`] left waiting, and whether it continued the run.
#[derive(Debug, Default)]
pub struct Resumed {
    /// The calls waiting for a human now, with their Countersign pauses, in the turn's order:
    /// calls of the resumed turn that paused again (the run was then not continued), or the call
    /// the continued run stopped on (swiftide's stop reason names one; the other paused calls of
    /// that turn come back from the next `resume`). Answer them and call [`resume`] again.
    pub paused: Vec<(ToolCall, Pause)>,
    /// Re-entered calls of the resumed turn that asked for feedback without a Countersign pause
    /// (a tool not gated by Countersign), with their payloads. The run was not continued.
    pub other_feedback: Vec<(ToolCall, Option<Value>)>,
    /// The agent was run again (`Agent::run`) after every call of the turn had an output. False
    /// when a call of the turn still waits, or a re-entered tool asked the agent to stop
    /// (`ToolOutput::Stop` or `AgentFailed`, added to the history).
    pub continued: bool,
}

/// Why [`resume`] did nothing, or stopped part way.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// An answer names a tool call that does not wait in the agent's last turn (it has an output
    /// already, or belongs to another turn). Nothing was handed to the agent or run.
    #[error(
        "the answer for tool call `{}` names no call waiting in the agent's last turn: nothing was resumed",
        tool_call.id()
    )]
    NotWaiting {
        /// The tool call the answer names.
        tool_call: ToolCall,
        /// The feedback, handed back.
        feedback: ToolFeedback,
    },
    /// swiftide failed: reading or writing the history, handing over feedback, or the continued
    /// run. Outputs added before the failure stay in the history (their calls are not re-entered
    /// again by a later `resume`).
    #[error(transparent)]
    Agent(#[from] AgentError),
}

/// The calls of the agent's last model turn that have no output yet, in the turn's order.
///
/// The last turn is the last assistant message with tool calls, when every message after it is
/// a tool output (otherwise the conversation went on and no call waits). swiftide leaves a call
/// without output when its tool returned `ToolOutput::FeedbackRequired` (or was not found). Each
/// output answers one call equal to it in id, name and arguments, never a call that only shares
/// its provider id: Gemini and Ollama give every call of a function the function's name as id.
///
/// # Errors
///
/// [`AgentError`] when the history cannot be read.
pub async fn waiting_calls(agent: &Agent) -> Result<Vec<ToolCall>, AgentError> {
    let history = agent.history().await?;
    let mut answered: Vec<&ToolCall> = Vec::new();
    for message in history.iter().rev() {
        match message {
            ChatMessage::ToolOutput(tool_call, _) => answered.push(tool_call),
            ChatMessage::Assistant(_, Some(tool_calls)) if !tool_calls.is_empty() => {
                // Each output answers one call equal to it in id, name and arguments: provider
                // ids alone are not unique (Gemini and Ollama use the function name; case B37).
                let mut waiting = Vec::new();
                for tool_call in tool_calls {
                    match answered.iter().position(|output| *output == tool_call) {
                        Some(position) => {
                            answered.swap_remove(position);
                        }
                        None => waiting.push(tool_call.clone()),
                    }
                }
                return Ok(waiting);
            }
            _ => return Ok(Vec::new()),
        }
    }
    Ok(Vec::new())
}

/// Resume an agent that stopped on paused tool calls, answering any number of them at once,
/// whether or not swiftide would re-enter the turn.
///
/// Each `(tool_call, feedback)` ([`crate::Gate::approve`], [`crate::Gate::reject`],
/// [`crate::edit`], [`crate::recheck`]) is handed to the agent's context (`AgentContext::feedback_received`), as a
/// host does for swiftide's own resume. Then every call of the last turn still without output
/// ([`waiting_calls`]) is re-entered once, in the turn's order, through the agent's tool of that
/// name: a gated call reads its answer, which reaches the kernel through
/// [`crate::SwiftideInterrupt`] (the kernel checks the action hash and consumes the approval
/// once); an unanswered gated call pauses again on the same request (the kernel keeps one
/// request per action hash). Each output is added to the history with `Agent::add_message`, as
/// swiftide adds it (a tool error as `ToolOutput::Fail` with the error's text; a
/// `FeedbackRequired` output is not added). Feedback a re-entered tool did not read is removed,
/// so it cannot keep the run asking the model. Calls that already have an output are never
/// re-entered.
///
/// When every call of the turn then has an output, the run continues (`Agent::run`): the model
/// reads every result. Otherwise the run is not continued and the waiting calls are returned:
/// answer them and call `resume` again. Loop until [`Resumed::paused`] is empty.
///
/// Differences from swiftide's own re-entry: the calls run one after another, not concurrently;
/// the agent's `before_tool` / `after_tool` hooks are not invoked (they are not public), nor is
/// its tool retry limit counted; the agent's stop reason is not updated when calls pause again
/// (a stopped agent's reason cannot be set): read [`Resumed::paused`] instead.
///
/// Nothing is kept between calls: the agent's history is the state, so an agent rebuilt in
/// another process from its serialized history (`DefaultContext::with_existing_messages`) is
/// resumed the same way.
///
/// # Errors
///
/// [`ResumeError::NotWaiting`] (before anything is handed over) when an answer names a call that
/// does not wait; [`ResumeError::Agent`] when swiftide fails.
///
/// # Cancel safety
///
/// Not cancel safe: a dropped future may leave some calls re-entered (their outputs in the
/// history, their approvals consumed) and others not; a later `resume` re-enters only the calls
/// still without output.
pub async fn resume(
    agent: &mut Agent,
    answers: impl IntoIterator<Item = (ToolCall, ToolFeedback)>,
) -> Result<Resumed, ResumeError> {
    let waiting = waiting_calls(agent).await?;
    let answers: Vec<(ToolCall, ToolFeedback)> = answers.into_iter().collect();
    if let Some((tool_call, feedback)) = answers
        .iter()
        .find(|(tool_call, _)| !waiting.contains(tool_call))
    {
        return Err(ResumeError::NotWaiting {
            tool_call: tool_call.clone(),
            feedback: feedback.clone(),
        });
    }
    for (tool_call, feedback) in &answers {
        agent
            .context()
            .feedback_received(tool_call, feedback)
            .await
            .map_err(AgentError::MessageHistoryError)?;
    }

    let mut resumed = Resumed::default();
    let mut stopped = false;
    for tool_call in &waiting {
        let tool = agent
            .tools()
            .iter()
            .find(|tool| tool.name() == tool_call.name())
            .cloned();
        let Some(tool) = tool else {
            // swiftide skips a call to an unknown tool and leaves it without output.
            continue;
        };
        let output = tool.invoke(agent.context(), tool_call).await;
        // Feedback the tool did not read would keep swiftide's default context from stopping.
        let _unread = agent.context().has_received_feedback(tool_call).await;
        let output = match output {
            Ok(ToolOutput::FeedbackRequired(payload)) => {
                match payload.as_ref().and_then(Pause::from_value) {
                    Some(pause) => resumed.paused.push((tool_call.clone(), pause)),
                    None => resumed.other_feedback.push((tool_call.clone(), payload)),
                }
                continue;
            }
            Ok(output) => output,
            Err(error) => ToolOutput::fail(error.to_string()),
        };
        stopped |= matches!(output, ToolOutput::Stop(_) | ToolOutput::AgentFailed(_));
        agent
            .add_message(ChatMessage::ToolOutput(tool_call.clone(), output))
            .await?;
    }
    if stopped || !resumed.paused.is_empty() || !resumed.other_feedback.is_empty() {
        return Ok(resumed);
    }
    agent.run().await?;
    resumed.continued = true;
    resumed.paused = agent
        .stop_reason()
        .and_then(Pause::from_stop_reason)
        .into_iter()
        .collect();
    Ok(resumed)
}
