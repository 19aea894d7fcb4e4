//! The cases of shared/cases/resumed-in-place.md (B07–B11), through the real swiftide loop.

use std::borrow::Cow;
use std::collections::HashSet;

use countersign::{ActionRequest, ControlError, ExecutorError};
use countersign_swiftide::{FEEDBACK_SCHEMA, FeedbackPayload, Gate, Halt, edit};
use serde_json::{Value, json};
use swiftide_agents::Agent;
use swiftide_core::AgentContext;
use swiftide_core::chat_completion::errors::ToolError;
use swiftide_core::chat_completion::{Tool, ToolCall, ToolOutput, ToolSpec};

use super::support::{
    Runs, ScriptedModel, World, answer_and_run, call, expect_pause, hold_feedback, model_read,
    outcome_lines, pause_of, pauses, run_to_pause, tool_spec,
};

/// An agent over the gated `delete` tool whose model asks, in one turn, to delete 1 (`c1`) and
/// 2 (`c2`).
fn two_deletes(world: &World) -> Agent {
    world.agent_making(
        vec![
            call("c1", "delete", json!({"id": 1})),
            call("c2", "delete", json!({"id": 2})),
        ],
        &["delete"],
    )
}

/// B07: parallel pauses get distinct ids; each answer reaches exactly its own call.
#[tokio::test]
async fn b07_parallel_pauses_have_distinct_ids_and_answers_reach_their_own_call() {
    for reverse in [false, true] {
        let world = World::new();
        let mut agent = two_deletes(&world);
        agent.query("delete 1 and 2").await.expect("the agent runs");
        let paused = pauses(&world.gate.take_outcomes());
        assert_eq!(paused.len(), 2, "both calls paused");
        let ids: HashSet<&str> = paused.iter().map(|(_, p)| p.request_id.as_str()).collect();
        let hashes: HashSet<&str> = paused.iter().map(|(_, p)| p.action_hash.as_str()).collect();
        assert_eq!(ids.len(), 2, "distinct pause ids");
        assert_eq!(hashes.len(), 2, "each pause id maps to its own action hash");
        let by_call = |id: &str| paused.iter().find(|(c, _)| c.id() == id).cloned().unwrap();
        let (c1, p1) = by_call("c1");
        let (c2, p2) = by_call("c2");
        assert_eq!(p1.arguments, json!({"id": 1}));
        // swiftide's stop reason names one of them.
        let (stopped_on, _) = expect_pause(&agent, "stopped on a pause");
        assert!(stopped_on == c1 || stopped_on == c2);

        let mut answers = vec![
            (c1.clone(), world.gate.approve(&p1, "human:alice")),
            (c2.clone(), world.gate.deny(&p2, "human:alice", None)),
        ];
        if reverse {
            answers.reverse();
        }
        for (tool_call, feedback) in &answers {
            hold_feedback(&agent, tool_call, feedback).await;
        }
        agent.run().await.expect("the agent resumes");
        assert_eq!(
            world.runs.of("delete"),
            vec![json!({"id": 1})],
            "reverse={reverse}"
        );
        let mut lines = outcome_lines(&world.gate.take_outcomes());
        lines.sort();
        assert_eq!(
            lines,
            vec!["ran delete", "refused delete (approval_denied)"]
        );
        assert_eq!(world.approvals().await, vec!["consumed", "denied"]);
    }
}

/// B07: an answer naming an unknown pause id is refused, not applied to "the first pending".
#[tokio::test]
async fn b07_an_answer_with_an_unknown_pause_id_is_not_applied() {
    let world = World::new();
    let mut agent = two_deletes(&world);
    agent.query("delete 1 and 2").await.expect("the agent runs");
    let paused = pauses(&world.gate.take_outcomes());
    let unknown = "apr_00000000000000000000000000000000";
    for (tool_call, pause) in &paused {
        let payload = FeedbackPayload {
            schema: FEEDBACK_SCHEMA.to_owned(),
            request_id: Some(unknown.to_owned()),
            approver: Some("human:alice".to_owned()),
            arguments: Some(pause.arguments.clone()),
            ..FeedbackPayload::default()
        };
        hold_feedback(&agent, tool_call, &payload.into_feedback(true)).await;
    }
    agent.run().await.expect("the agent resumes");
    assert_eq!(world.runs.count("delete"), 0);
    assert_eq!(world.approvals().await, vec!["pending", "pending"]);
    assert!(
        world.receipts().await.is_empty(),
        "no grant, no attempt receipt"
    );
    let again = pauses(&world.gate.take_outcomes());
    assert_eq!(again.len(), 2);
    for (_, pause) in &again {
        assert_eq!(pause.ignored_feedback.as_deref(), Some(unknown));
        assert!(paused.iter().any(|(_, p)| p.request_id == pause.request_id));
    }
}

/// A hand-written swiftide tool whose body makes several kernel attempts through one pass.
#[derive(Clone)]
struct Scripted {
    gate: Gate,
    name: &'static str,
    runs: Runs,
    body: Body,
}

type BodyFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, Halt>> + Send + 'a>>;
type Body = for<'a> fn(&'a countersign_swiftide::Pass, Value, Runs) -> BodyFuture<'a>;

#[async_trait::async_trait]
impl Tool for Scripted {
    async fn invoke(
        &self,
        context: &dyn AgentContext,
        tool_call: &ToolCall,
    ) -> Result<ToolOutput, ToolError> {
        let pass = self.gate.begin(context, tool_call).await;
        let arguments: Value = serde_json::from_str(tool_call.args().unwrap_or("{}"))?;
        Ok(
            match (self.body)(&pass, arguments, self.runs.clone()).await {
                Ok(text) => ToolOutput::Text(text),
                Err(halt) => halt.into_tool_output(self.name),
            },
        )
    }

    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(self.name)
    }

    fn tool_spec(&self) -> ToolSpec {
        tool_spec(self.name)
    }
}

impl From<Scripted> for Box<dyn Tool> {
    fn from(tool: Scripted) -> Box<dyn Tool> {
        Box::new(tool)
    }
}

/// An agent over the `Scripted` tool `name` running `body`, whose model calls it once (`c1`)
/// with `arguments`.
fn scripted_agent(world: &World, name: &'static str, body: Body, arguments: Value) -> Agent {
    let tool = Scripted {
        gate: world.gate.clone(),
        name,
        runs: world.runs.clone(),
        body,
    };
    let model = ScriptedModel::one_turn(vec![call("c1", name, arguments)]);
    world.agent(&model, vec![tool.into()])
}

fn handle_ticket(
    pass: &countersign_swiftide::Pass,
    arguments: Value,
    runs: Runs,
) -> BodyFuture<'_> {
    Box::pin(async move {
        let id = arguments["id"].clone();
        step(pass, &runs, "log_ticket", json!({"id": id})).await?;
        step(pass, &runs, "refund", json!({"id": id, "amount": 900})).await?;
        step(pass, &runs, "notify", json!({"id": id})).await?;
        Ok("handled".to_owned())
    })
}

fn chase_ticket(pass: &countersign_swiftide::Pass, arguments: Value, runs: Runs) -> BodyFuture<'_> {
    Box::pin(async move {
        let ticket = arguments["ticket"].clone();
        for round in 1..=5 {
            step(
                pass,
                &runs,
                "send_reminder",
                json!({"ticket": ticket, "round": round}),
            )
            .await?;
            match step(
                pass,
                &runs,
                "close_ticket",
                json!({"ticket": ticket, "round": round}),
            )
            .await
            {
                Ok(_) => return Ok(format!("closed in round {round}")),
                Err(halt) if matches!(halt.refusal(), ControlError::ApprovalDenied { .. }) => {
                    continue;
                }
                Err(halt) => return Err(halt),
            }
        }
        Ok("gave up".to_owned())
    })
}

/// Run `action` with `arguments` through the pass; a step that committed before the pause is
/// refused `duplicate` on the replayed pass, which the body treats as done.
async fn step(
    pass: &countersign_swiftide::Pass,
    runs: &Runs,
    action: &str,
    arguments: Value,
) -> Result<bool, Halt> {
    let runs = runs.clone();
    let name = action.to_owned();
    match pass
        .execute(
            ActionRequest::new(action, &arguments),
            |canonical| async move {
                runs.record(&name, canonical);
                Ok::<_, ExecutorError>(())
            },
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(halt)
            if matches!(
                halt.refusal(),
                ControlError::DuplicateEffect {
                    in_progress: false,
                    ..
                }
            ) =>
        {
            Ok(false)
        }
        Err(halt) => Err(halt),
    }
}

/// B08: a tool with an allowed effect and two approvals; each answer resumes it in place.
#[tokio::test]
async fn b08_two_approvals_in_one_tool_run_each_effect_once() {
    let world = World::new();
    let mut agent = scripted_agent(&world, "handle_ticket", handle_ticket, json!({"id": 7}));
    agent.query("handle 7").await.expect("the agent runs");
    let mut prompted = Vec::new();
    for _ in 0..2 {
        let (tool_call, pause) = expect_pause(&agent, "paused");
        prompted.push(pause.action_hash.clone());
        answer_and_run(
            &mut agent,
            &tool_call,
            &world.gate.approve(&pause, "human:alice"),
        )
        .await;
    }
    assert!(pause_of(&agent).is_none());
    assert_eq!(
        (
            runs_of(&world, "log_ticket"),
            runs_of(&world, "refund"),
            runs_of(&world, "notify")
        ),
        (1, 1, 1)
    );
    assert_eq!(
        world.approvals().await,
        vec!["consumed", "consumed"],
        "exactly 2 requests"
    );
    let unique: HashSet<&String> = prompted.iter().collect();
    assert_eq!(unique.len(), 2, "no hash prompted twice");
    // The replayed log_ticket step met its committed key: refused, never at the executor.
    assert_eq!(
        world.receipts().await,
        vec![
            "attempt/committed",         // log_ticket
            "attempt/refused/duplicate", // log_ticket, replayed
            "answer/granted/approved",   // refund
            "attempt/committed",         // refund
            "attempt/refused/duplicate", // log_ticket, replayed again
            "attempt/refused/duplicate", // refund, replayed
            "answer/granted/approved",   // notify
            "attempt/committed",         // notify
        ]
    );
}

fn runs_of(world: &World, action: &str) -> usize {
    world.runs.count(action)
}

/// B09: a pause inside a loop (reject twice, approve the third round).
///
/// Documented choice (adapters/swiftide/README.md, "A re-ask after a no"): after a human's no, the identical action is
/// refused `approval_denied` without a new prompt until the request expires, so a loop that asks
/// again must ask about something different: here each round's close names its round.
#[tokio::test]
async fn b09_a_pause_in_a_loop_runs_each_round_once() {
    let world = World::new();
    let mut agent = scripted_agent(&world, "chase_ticket", chase_ticket, json!({"ticket": 9}));
    agent.query("chase 9").await.expect("the agent runs");
    let mut pause_ids = Vec::new();
    for round in 1..=3 {
        let (tool_call, pause) = expect_pause(&agent, "paused");
        pause_ids.push(pause.request_id.clone());
        let feedback = if round < 3 {
            world.gate.deny(&pause, "human:alice", Some("not yet"))
        } else {
            world.gate.approve(&pause, "human:alice")
        };
        answer_and_run(&mut agent, &tool_call, &feedback).await;
    }
    assert!(pause_of(&agent).is_none());
    assert_eq!(world.runs.count("send_reminder"), 3, "not 6");
    assert_eq!(world.runs.count("close_ticket"), 1);
    assert_eq!(pause_ids.iter().collect::<HashSet<_>>().len(), 3);
    assert_eq!(
        world.approvals().await,
        vec!["consumed", "denied", "denied"]
    );
    let read = model_read(&agent, "c1")
        .await
        .expect("the model read a result");
    assert_eq!(read, json!("closed in round 3"));
}

/// B10: a rejected call pushed straight into execution still does not run: the kernel, not the
/// message list, stops it.
#[tokio::test]
async fn b10_a_rejected_call_pushed_straight_into_execution_does_not_run() {
    let world = World::new();
    let drop_table = world.tool("drop_table");
    let model = ScriptedModel::one_turn(vec![call("c1", "drop_table", json!({"name": "users"}))]);
    let mut agent = world.agent(&model, vec![drop_table.clone().into()]);
    let (tool_call, pause) = run_to_pause(&mut agent, "drop users").await;
    answer_and_run(
        &mut agent,
        &tool_call,
        &world.gate.deny(&pause, "human:alice", None),
    )
    .await;
    assert_eq!(world.runs.count("drop_table"), 0);

    // A harness pushes the same call straight into the tool, skipping the agent's messages.
    let output = drop_table
        .invoke(agent.context(), &tool_call)
        .await
        .expect("the tool answers");
    assert_eq!(world.runs.count("drop_table"), 0);
    let read: Value = serde_json::from_str(output.as_text().expect("text")).expect("json");
    assert_eq!(read["reason"], "approval_denied");
    // And again with swiftide's own "approved" feedback attached: still the kernel's no.
    hold_feedback(&agent, &tool_call, &swiftide_core::ToolFeedback::approved()).await;
    drop_table
        .invoke(agent.context(), &tool_call)
        .await
        .expect("the tool answers");
    assert_eq!(world.runs.count("drop_table"), 0);
    assert_eq!(
        world.receipts().await,
        vec![
            "answer/denied/rejected",
            "attempt/refused/approval_denied",
            "attempt/refused/approval_denied",
            "attempt/refused/approval_denied",
        ]
    );
    assert_eq!(
        world.approvals().await,
        vec!["denied"],
        "no new request, no new prompt"
    );
}

/// The model's one turn in the B11 cases: read `/a` (call `c1`).
fn read_a() -> Vec<ToolCall> {
    vec![call("c1", "read_file", json!({"path": "/a"}))]
}

/// B11 (a): an edit that changes the tool is a new action: policy decides it again, and the
/// original approval cannot authorize it.
#[tokio::test]
async fn b11_an_edit_to_another_tool_is_decided_again_and_needs_its_own_approval() {
    let world = World::new();
    let mut agent = world.agent_making(read_a(), &["read_file", "delete_file"]);
    let (tool_call, original) = run_to_pause(&mut agent, "read /a").await;
    answer_and_run(
        &mut agent,
        &tool_call,
        &edit(&original, "delete_file", json!({"path": "/a"})),
    )
    .await;
    let (tool_call, edited) = expect_pause(&agent, "the edited action pauses for its own approval");
    assert_eq!(edited.action, "delete_file");
    assert_ne!(edited.action_hash, original.action_hash, "a new hash");
    assert_ne!(edited.request_id, original.request_id, "a new request");
    let link = edited.edit.clone().expect("the pause links the edit");
    assert_eq!(
        (link.from_request.as_str(), link.from_hash.as_str()),
        (original.request_id.as_str(), original.action_hash.as_str())
    );
    assert_eq!(
        world.runs.count("delete_file") + world.runs.count("read_file"),
        0
    );

    // The original approval answered for the edited call authorizes nothing.
    let stale = FeedbackPayload {
        schema: FEEDBACK_SCHEMA.to_owned(),
        request_id: Some(original.request_id.clone()),
        approver: Some("human:alice".to_owned()),
        arguments: Some(original.arguments.clone()),
        edit: edited.edit.clone(),
        ..FeedbackPayload::default()
    };
    answer_and_run(&mut agent, &tool_call, &stale.into_feedback(true)).await;
    assert_eq!(
        world.runs.count("delete_file") + world.runs.count("read_file"),
        0
    );
    let (tool_call, again) = expect_pause(&agent, "still paused on the edited request");
    assert_eq!(again.request_id, edited.request_id);

    answer_and_run(
        &mut agent,
        &tool_call,
        &world.gate.approve(&again, "human:admin"),
    )
    .await;
    assert_eq!(world.runs.of("delete_file"), vec![json!({"path": "/a"})]);
    assert_eq!(world.runs.count("read_file"), 0);
    // The original request was never answered: it cannot authorize anything.
    assert_eq!(world.approvals().await, vec!["consumed", "pending"]);
}

/// B11 (a), variant: the edited action is denied by policy; nothing runs.
#[tokio::test]
async fn b11_an_edit_to_a_denied_tool_is_refused_by_policy() {
    let policy = super::support::POLICY.replace(
        "  delete_file:\n    decision: approve\n",
        "  delete_file:\n    decision: deny\n",
    );
    let world = World::with_policy(&policy);
    let mut agent = world.agent_making(read_a(), &["read_file", "delete_file"]);
    let (tool_call, original) = run_to_pause(&mut agent, "read /a").await;
    world.gate.take_outcomes();
    answer_and_run(
        &mut agent,
        &tool_call,
        &edit(&original, "delete_file", json!({"path": "/a"})),
    )
    .await;
    assert_eq!(
        world.runs.count("delete_file") + world.runs.count("read_file"),
        0
    );
    assert_eq!(
        outcome_lines(&world.gate.take_outcomes()),
        vec!["refused delete_file (denied)"]
    );
    assert_eq!(world.receipts().await, vec!["attempt/refused/denied"]);
}

/// B11 (b): an edit of the arguments only: the approval that takes effect is bound to the
/// edited hash.
#[tokio::test]
async fn b11_an_edit_of_the_arguments_is_approved_under_the_edited_hash() {
    let world = World::new();
    let mut agent = world.agent_making(read_a(), &["read_file"]);
    let (tool_call, original) = run_to_pause(&mut agent, "read /a").await;
    answer_and_run(
        &mut agent,
        &tool_call,
        &edit(&original, "read_file", json!({"path": "/b"})),
    )
    .await;
    let (tool_call, edited) = expect_pause(&agent, "paused on the edited call");
    assert_eq!(edited.arguments, json!({"path": "/b"}));
    assert_ne!(edited.action_hash, original.action_hash);
    assert_eq!(world.runs.count("read_file"), 0);
    answer_and_run(
        &mut agent,
        &tool_call,
        &world.gate.approve(&edited, "human:alice"),
    )
    .await;
    assert_eq!(world.runs.of("read_file"), vec![json!({"path": "/b"})]);
    let records = world.store.approvals(None).await.expect("approvals");
    assert_eq!(records.len(), 2);
    let consumed: Vec<_> = records
        .iter()
        .filter(|record| record.state.as_str() == "consumed")
        .collect();
    assert_eq!(consumed.len(), 1);
    assert_eq!(consumed[0].action_hash.as_str(), edited.action_hash);
    assert_eq!(consumed[0].id.as_str(), edited.request_id);
}
