//! The adapter kit (`countersign-conformance`) driven through this adapter and the real swiftide
//! agent loop. Each kit call is one agent run: a scripted model emits the call, the gated tool
//! runs it through the kit's control, a pause is shown to the kit's human and answered through
//! swiftide's feedback, and the run is checkpointed (history and stop reason, as JSON) under the
//! kit's scratch folder so another process can resume it.

use std::sync::Arc;

use countersign::{AnswerDecision, ApprovalId, ControlError, ExecutorError};
use countersign_conformance::adapter_kit::{
    self, Adapter, Call, HumanAnswer, KitOptions, Session, Setup, Shape, Shown,
};
use countersign_swiftide::{
    ActionSpec, FEEDBACK_SCHEMA, FeedbackPayload, Gate, Outcome, Pause, SwiftideInterrupt, recheck,
};
use serde_json::Value;
use swiftide_agents::{Agent, DefaultContext, StopReason};
use swiftide_core::ToolFeedback;
use swiftide_core::chat_completion::ChatMessage;

use super::support::{ScriptedModel, answer_and_run, cli, pause_of, tool_spec};

struct SwiftideAdapter;

#[derive(serde::Serialize, serde::Deserialize)]
struct Checkpoint {
    history: Vec<ChatMessage>,
    stop_reason: StopReason,
}

/// The conversation id of the kit's run `label`: made once per run and kept in the scratch
/// folder beside the checkpoints, so a resume in another process continues the same run.
fn run_id(session: &Session<SwiftideInterrupt>, label: &str) -> String {
    use std::hash::BuildHasher;
    let path = session.scratch_dir().join("runs.json");
    let mut runs: std::collections::BTreeMap<String, String> = std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    if let Some(id) = runs.get(label) {
        return id.clone();
    }
    let random =
        std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now());
    let id = format!("swiftide-run-{random:016x}");
    runs.insert(label.to_owned(), id.clone());
    std::fs::write(
        &path,
        serde_json::to_vec(&runs).expect("the run map serializes"),
    )
    .expect("the run map is written");
    id
}

/// One checkpoint file per run and call, named from them, so another process finds it.
fn checkpoint_path(session: &Session<SwiftideInterrupt>, call: &Call) -> std::path::PathBuf {
    let name: String = format!("{}{}{}", call.run, call.action, call.arguments)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    session.scratch_dir().join(format!("{name}.json"))
}

impl SwiftideAdapter {
    /// A gate on the kit's control, and an agent whose model emits `call` (or, with a
    /// checkpoint's history, an agent that continues it).
    async fn agent(
        session: &Session<SwiftideInterrupt>,
        call: &Call,
        history: Option<Vec<ChatMessage>>,
    ) -> (Gate, Agent) {
        // One gate per agent run: its requests are scoped to the run's conversation id.
        let gate = Gate::for_run(session.control().clone(), run_id(session, &call.run));
        let executor = session.tool().clone();
        let tool = gate.function(
            tool_spec("kit_tool"),
            ActionSpec::new(call.action.clone()),
            move |arguments: Value| {
                let executor = executor.clone();
                async move {
                    let value = executor.call(arguments).await?;
                    Ok::<_, ExecutorError>(value.to_string())
                }
            },
        );
        let mut builder = Agent::builder();
        let model = match history {
            None => ScriptedModel::new(vec![vec![super::support::call(
                "kit_call",
                "kit_tool",
                call.arguments.clone(),
            )]]),
            Some(history) => {
                let mut context = DefaultContext::default();
                context
                    .with_existing_messages(history)
                    .await
                    .expect("history restored");
                builder.context(context);
                ScriptedModel::new(Vec::new())
            }
        };
        let agent = builder
            .llm(&model)
            .tools([tool])
            .no_system_prompt()
            .build()
            .expect("the agent builds");
        (gate, agent)
    }

    /// What the run ended with, for the kit: the executor's value or the kernel's refusal.
    fn result(gate: &Gate) -> Option<Result<Value, ControlError>> {
        let outcome = gate.take_outcomes().pop()?;
        Some(match outcome {
            // The executor's value is what the model read.
            Outcome::Ran { .. } => return None,
            other => Err(other
                .into_refusal()?
                .expect("the tool's halt is gone: the log holds the refusal")),
        })
    }

    async fn value_read(agent: &Agent) -> Option<Value> {
        agent
            .history()
            .await
            .ok()?
            .into_iter()
            .rev()
            .find_map(|message| match message {
                ChatMessage::ToolOutput(_, output) => output
                    .as_text()
                    .and_then(|text| serde_json::from_str(text).ok()),
                _ => None,
            })
    }

    async fn finish(gate: &Gate, agent: &Agent) -> Result<Value, ControlError> {
        match Self::result(gate) {
            Some(result) => result,
            None => Ok(Self::value_read(agent)
                .await
                .expect("a committed call left its value for the model")),
        }
    }

    async fn save(session: &Session<SwiftideInterrupt>, call: &Call, agent: &Agent) {
        let checkpoint = Checkpoint {
            history: agent.history().await.expect("history"),
            stop_reason: agent.stop_reason().cloned().expect("stopped"),
        };
        std::fs::write(
            checkpoint_path(session, call),
            serde_json::to_vec(&checkpoint).expect("a checkpoint serializes"),
        )
        .expect("the checkpoint is written");
    }
}

/// The feedback a host hands swiftide for `answer`: the operator passes who answered to the
/// gate ([`Gate::approve`] / [`Gate::reject`]), and the payload carries the rest. The payload is
/// built field by field so that it can carry what the kit says the run state holds: the
/// arguments the answer is about (`binding`) and the approver name written into it (the
/// `entitlement` suite edits it to name someone the operator did not pass).
fn feedback(gate: &Gate, pause: &Pause, answer: &HumanAnswer) -> ToolFeedback {
    let approved = answer.decision == AnswerDecision::Approve;
    // Record who answered, server-side, beside the request id (the returned feedback is
    // replaced by the kit's payload below).
    let _ = if approved {
        gate.approve(pause, answer.operator_approver.clone())
    } else {
        gate.deny(pause, answer.operator_approver.clone(), None)
    };
    FeedbackPayload {
        schema: FEEDBACK_SCHEMA.to_owned(),
        request_id: answer.request_id.as_ref().map(|id| id.as_str().to_owned()),
        approver: Some(answer.payload_approver.clone()),
        note: answer.note.clone(),
        arguments: Some(answer.arguments.clone()),
        edit: None,
        action_hash: answer
            .shown_hash
            .as_ref()
            .map(|hash| hash.as_str().to_owned()),
    }
    .into_feedback(approved)
}

#[async_trait::async_trait]
impl Adapter for SwiftideAdapter {
    type Interrupt = SwiftideInterrupt;

    fn framework(&self) -> &str {
        "swiftide"
    }

    fn shape(&self) -> Shape {
        Shape::ResumedInPlace
    }

    fn interrupt(&self, _setup: &Setup) -> Arc<SwiftideInterrupt> {
        Arc::new(SwiftideInterrupt::new())
    }

    async fn invoke(
        &self,
        session: &Session<SwiftideInterrupt>,
        call: &Call,
    ) -> Result<Value, ControlError> {
        let (gate, mut agent) = Self::agent(session, call, None).await;
        agent.query("go").await.expect("the agent runs");
        let Some((tool_call, pause)) = pause_of(&agent) else {
            return Self::finish(&gate, &agent).await;
        };
        Self::save(session, call, &agent).await;
        let paused = Self::result(&gate).expect("a pause is logged");
        let shown = Shown {
            request_id: ApprovalId::parse(&pause.request_id).ok(),
            action: pause.action.clone(),
            arguments: pause.arguments.clone(),
            expires_at: serde_json::from_value(serde_json::Value::String(pause.expires_at.clone()))
                .ok(),
            action_hash: Some(countersign::ActionHash::from_stored(
                pause.action_hash.clone(),
            )),
        };
        // Nobody answered: the run stays paused (checkpointed); the kernel's refusal stands.
        let Some(answer) = session.reviewer().review(&shown) else {
            return paused;
        };
        answer_and_run(&mut agent, &tool_call, &feedback(&gate, &pause, &answer)).await;
        // One answer per pause (SPEC.md 2.4): a second pause is returned, not asked again.
        Self::finish(&gate, &agent).await
    }

    async fn resume(
        &self,
        session: &Session<SwiftideInterrupt>,
        call: &Call,
    ) -> Result<Value, ControlError> {
        let Ok(bytes) = std::fs::read(checkpoint_path(session, call)) else {
            return self.invoke(session, call).await;
        };
        let checkpoint: Checkpoint = serde_json::from_slice(&bytes).expect("a checkpoint");
        let (gate, mut agent) = Self::agent(session, call, Some(checkpoint.history)).await;
        let (tool_call, pause) =
            Pause::from_stop_reason(&checkpoint.stop_reason).expect("the checkpoint paused");
        // Re-enter the paused call with no answer: an answer given out of band is found by the
        // kernel; a replay after the call committed is refused as a duplicate.
        answer_and_run(&mut agent, &tool_call, &recheck(Some(&pause))).await;
        Self::finish(&gate, &agent).await
    }
}

#[tokio::test]
async fn swiftide_adapter_passes_the_countersign_kit() {
    let options = KitOptions {
        cli: Some(cli().clone()),
        ..KitOptions::default()
    };
    let report = adapter_kit::run(&SwiftideAdapter, &options)
        .await
        .expect("the kit runs");
    let text = report.to_text();
    println!("{text}");
    assert!(report.is_ok(), "{text}");
    insta::assert_snapshot!("swiftide_kit_report", text);
}
