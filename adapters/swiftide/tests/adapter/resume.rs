//! `resume`: turns swiftide 0.32 does not re-enter by itself (a completed call beside a paused
//! one), answered in one resume, in process and from a serialized history.

use countersign_swiftide::{Pause, ResumeError, resume, waiting_calls};
use serde_json::{Value, json};
use swiftide_agents::{Agent, DefaultContext, StopReason};
use swiftide_core::chat_completion::{ChatMessage, ToolCall, ToolOutput};

use super::support::{
    TWO_REFUNDS_LIMIT, World, call, expect_pause, model_read, outcome_lines, pauses,
};

/// The ids of the tool outputs in one completion request, in order.
fn outputs_read(request: &[ChatMessage]) -> Vec<String> {
    request
        .iter()
        .filter_map(|message| match message {
            ChatMessage::ToolOutput(tool_call, ToolOutput::Text(_)) => {
                Some(tool_call.id().to_owned())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn resume_runs_a_paused_call_beside_an_allowed_one_once_and_the_model_reads_both() {
    let world = World::new();
    let (model, mut agent) = world.two_refunds((10, 20), (11, 900)).await;
    let (tool_call, pause) = expect_pause(&agent, "paused");
    assert_eq!(tool_call.id(), "c2");
    assert_eq!(world.runs.count("refund"), 1);
    let waiting = waiting_calls(&agent).await.expect("history");
    assert_eq!(waiting, vec![tool_call.clone()]);

    let resumed = resume(
        &mut agent,
        [(tool_call, world.gate.approve(&pause, "human:alice"))],
    )
    .await
    .expect("the agent resumes");
    assert!(resumed.continued);
    assert!(resumed.paused.is_empty());
    assert!(resumed.other_feedback.is_empty());

    // Both calls ran once, each with its own arguments; the approval was consumed.
    assert_eq!(
        world.runs.of("refund"),
        vec![
            json!({"amount": 20, "id": 10}),
            json!({"amount": 900, "id": 11})
        ]
    );
    assert_eq!(world.approvals().await, vec!["consumed"]);
    assert_eq!(
        world.receipts().await,
        vec![
            "attempt/committed",
            "answer/granted/approved",
            "attempt/committed"
        ]
    );
    assert_eq!(
        outcome_lines(&world.gate.take_outcomes()),
        vec!["ran refund", "paused refund", "ran refund"]
    );
    // The model was asked twice (the turn, then once with both results) and the run stopped
    // normally, far from the agent's limit.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(outputs_read(&requests[1]), vec!["c1", "c2"]);
    assert_eq!(agent.stop_reason(), Some(&StopReason::NoNewMessages));
    assert!(waiting_calls(&agent).await.expect("history").is_empty());
    assert_eq!(
        model_read(&agent, "c2").await,
        Some(Value::String(
            r#"refund done with {"amount":900,"id":11}"#.to_owned()
        ))
    );

    // A second resume has nothing to re-enter: the answer is refused before anything runs.
    let again = resume(
        &mut agent,
        [(
            call("c2", "refund", json!({"id": 11, "amount": 900})),
            world.gate.approve(&pause, "human:alice"),
        )],
    )
    .await;
    assert!(matches!(again, Err(ResumeError::NotWaiting { .. })));
    assert_eq!(world.runs.count("refund"), 2);
}

#[tokio::test]
async fn two_paused_calls_of_one_turn_are_answered_in_one_resume_one_approved_one_rejected() {
    let world = World::new();
    let (model, mut agent) = world.two_refunds((20, 900), (21, 800)).await;
    let paused = pauses(&world.gate.take_outcomes());
    assert_eq!(paused.len(), 2);
    assert_ne!(paused[0].1.request_id, paused[1].1.request_id);
    assert_eq!(world.approvals().await, vec!["pending", "pending"]);
    let answers: Vec<_> = paused
        .iter()
        .map(|(tool_call, pause)| {
            let feedback = if tool_call.id() == "c1" {
                world.gate.approve(pause, "human:alice")
            } else {
                world.gate.deny(pause, "human:alice", Some("not this one"))
            };
            (tool_call.clone(), feedback)
        })
        .collect();

    let resumed = resume(&mut agent, answers)
        .await
        .expect("the agent resumes");
    assert!(resumed.continued);
    assert!(resumed.paused.is_empty());

    assert_eq!(
        world.runs.of("refund"),
        vec![json!({"amount": 900, "id": 20})]
    );
    assert_eq!(world.approvals().await, vec!["consumed", "denied"]);
    // The calls are re-entered in the turn's order: c1's answer and run, then c2's denial.
    assert_eq!(
        world.receipts().await,
        vec![
            "answer/granted/approved",
            "attempt/committed",
            "answer/denied/rejected",
            "attempt/refused/approval_denied"
        ]
    );
    let outcomes = outcome_lines(&world.gate.take_outcomes());
    assert_eq!(
        outcomes,
        vec!["ran refund", "refused refund (approval_denied)"]
    );
    let read = model_read(&agent, "c2").await.expect("the model read c2");
    assert_eq!(read["status"], "rejected");
    assert_eq!(read["executed"], false);
    assert_eq!(read["reviewer_note"], "not this one");
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(outputs_read(&requests[1]), vec!["c1", "c2"]);
    assert_eq!(agent.stop_reason(), Some(&StopReason::NoNewMessages));
}

/// Cross-process shape: only the stop reason's call is known and answered; the agent is rebuilt
/// from its serialized history. `resume` runs the answered call, re-enters the other one, which
/// pauses again on the same request (no second request), and does not continue the run until it
/// is answered too.
#[tokio::test]
async fn answering_one_of_two_paused_calls_returns_the_other_on_its_first_request() {
    let world = World::new();
    let (model, first) = world.two_refunds((30, 900), (31, 800)).await;
    let stop_reason = first.stop_reason().cloned().expect("stopped");
    let first_pauses = pauses(&world.gate.take_outcomes());
    let saved = serde_json::to_vec(&(first.history().await.expect("history"), &stop_reason))
        .expect("serializes");
    drop(first);

    let (history, stop_reason): (Vec<ChatMessage>, StopReason) =
        serde_json::from_slice(&saved).expect("parses");
    let mut context = DefaultContext::default();
    context
        .with_existing_messages(history)
        .await
        .expect("history restored");
    let mut agent = Agent::builder()
        .llm(&model)
        .context(context)
        .tools([world.tool("refund")])
        .no_system_prompt()
        .limit(TWO_REFUNDS_LIMIT)
        .build()
        .expect("the agent builds");
    let (tool_call, pause) = Pause::from_stop_reason(&stop_reason).expect("paused");
    assert_eq!(tool_call.id(), "c1");

    let resumed = resume(
        &mut agent,
        [(tool_call, world.gate.approve(&pause, "human:alice"))],
    )
    .await
    .expect("the agent resumes");
    assert!(!resumed.continued);
    assert_eq!(world.runs.count("refund"), 1);
    let [(waiting_call, waiting_pause)] =
        <[(ToolCall, Pause); 1]>::try_from(resumed.paused).expect("one call still waits");
    assert_eq!(waiting_call.id(), "c2");
    let original = first_pauses
        .iter()
        .find(|(tool_call, _)| tool_call.id() == "c2")
        .expect("c2 paused first");
    assert_eq!(waiting_pause.request_id, original.1.request_id);
    assert_eq!(world.approvals().await, vec!["consumed", "pending"]);
    assert_eq!(model.requests().len(), 1);

    let resumed = resume(
        &mut agent,
        [(
            waiting_call,
            world.gate.approve(&waiting_pause, "human:bob"),
        )],
    )
    .await
    .expect("the agent resumes");
    assert!(resumed.continued);
    assert!(resumed.paused.is_empty());
    assert_eq!(
        world.runs.of("refund"),
        vec![
            json!({"amount": 900, "id": 30}),
            json!({"amount": 800, "id": 31})
        ]
    );
    assert_eq!(world.approvals().await, vec!["consumed", "consumed"]);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(outputs_read(&requests[1]), vec!["c1", "c2"]);
    assert_eq!(agent.stop_reason(), Some(&StopReason::NoNewMessages));
}
