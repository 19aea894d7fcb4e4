//! Case B37 (frameworks-2): parallel tool calls whose provider ids are not unique (Gemini and
//! Ollama use the function name as the id) are each paired with their own result. The adapter
//! never pairs a call with a result by the provider id alone: the kernel runs each call on its
//! own canonical arguments, and `waiting_calls` matches outputs to calls by the whole call (id,
//! name and arguments), one output per call.

use countersign_swiftide::{resume, waiting_calls};
use serde_json::json;
use swiftide_core::chat_completion::{ChatMessage, ToolOutput};

use super::support::{World, call, expect_pause};

#[tokio::test]
async fn three_calls_with_provider_ids_that_repeat_each_run_once_on_their_own_arguments() {
    let world = World::new();
    // refund o1 and o2 are allowed (small amounts), lookup-style log_ticket is allowed; the
    // provider ids are the function names.
    let mut agent = world.agent_making(
        vec![
            call("refund", "refund", json!({"id": 1, "amount": 10})),
            call("refund", "refund", json!({"id": 2, "amount": 20})),
            call("log_ticket", "log_ticket", json!({"id": 3})),
        ],
        &["refund", "log_ticket"],
    );
    agent
        .query("do three things")
        .await
        .expect("the agent runs");
    assert_eq!(
        world.runs.of("refund"),
        vec![
            json!({"amount": 10, "id": 1}),
            json!({"amount": 20, "id": 2})
        ],
        "each refund ran once, with its own arguments"
    );
    assert_eq!(world.runs.count("log_ticket"), 1);
    // Three receipts, each for its own action and arguments: none carries another call's.
    let receipts = world.receipts_full().await;
    let attempts: Vec<(String, serde_json::Value)> = receipts
        .iter()
        .map(|receipt| {
            (
                receipt.action.clone().unwrap_or_default(),
                receipt.arguments.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    for (action, arguments) in [
        ("refund", json!({"amount": 10, "id": 1})),
        ("refund", json!({"amount": 20, "id": 2})),
        ("log_ticket", json!({"id": 3})),
    ] {
        assert_eq!(
            attempts
                .iter()
                .filter(|(a, args)| a == action && *args == arguments)
                .count(),
            1,
            "{action} {arguments}: {attempts:?}"
        );
    }
    // Every output in the history names a call of the turn with its own arguments.
    let history = agent.history().await.expect("history");
    let outputs: Vec<(String, String)> = history
        .iter()
        .filter_map(|message| match message {
            ChatMessage::ToolOutput(tool_call, ToolOutput::Text(text)) => Some((
                tool_call.args().unwrap_or_default().to_owned(),
                text.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(outputs.len(), 3, "{outputs:?}");
    for (arguments, text) in &outputs {
        let arguments: serde_json::Value = serde_json::from_str(arguments).expect("arguments");
        assert!(
            text.ends_with(&arguments.to_string()),
            "an output paired with another call's arguments: {arguments} got {text}"
        );
    }
}

#[tokio::test]
async fn a_paused_call_sharing_its_provider_id_with_a_finished_one_still_waits() {
    let world = World::new();
    // Two refunds with the same provider id: the small one runs, the large one pauses. An
    // output matched by id alone would mark the paused one answered and drop it.
    let mut agent = world.agent_making(
        vec![
            call("refund", "refund", json!({"id": 7, "amount": 10})),
            call("refund", "refund", json!({"id": 8, "amount": 900})),
        ],
        &["refund"],
    );
    agent.query("two refunds").await.expect("the agent runs");
    let (tool_call, pause) = expect_pause(&agent, "the large refund paused");
    assert_eq!(tool_call.args(), Some(r#"{"amount":900,"id":8}"#));
    let waiting = waiting_calls(&agent).await.expect("history");
    assert_eq!(
        waiting,
        vec![tool_call.clone()],
        "the paused call still waits"
    );

    let resumed = resume(
        &mut agent,
        [(tool_call, world.gate.approve(&pause, "human:alice"))],
    )
    .await
    .expect("the agent resumes");
    assert!(resumed.paused.is_empty());
    assert_eq!(
        world.runs.of("refund"),
        vec![
            json!({"amount": 10, "id": 7}),
            json!({"amount": 900, "id": 8})
        ],
        "each ran once"
    );
    assert!(waiting_calls(&agent).await.expect("history").is_empty());
}
