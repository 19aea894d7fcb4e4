//! A world for one test: a scratch SQLite store, a manual clock, the operator's control with an
//! `InterruptApprovalProvider` around `SwiftideInterrupt`, a gate, counting executors, and a
//! scripted model.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use countersign::evidence::Receipt;
use countersign::store::{SqliteStore, Store};
use countersign::{
    Clock, Control, ExecutorError, InterruptApprovalProvider, ManualClock, Policy, Principal,
    StaticIdentity, Timestamp,
};
use countersign_swiftide::{ActionSpec, Gate, GatedTool, Outcome, Pause, SwiftideInterrupt};
use serde_json::{Value, json};
use swiftide_agents::Agent;
use swiftide_core::ToolFeedback;
use swiftide_core::chat_completion::errors::LanguageModelError;
use swiftide_core::chat_completion::{
    ChatCompletion, ChatCompletionRequest, ChatCompletionResponse, ChatMessage, Tool, ToolCall,
    ToolOutput, ToolSpec,
};

pub const POLICY: &str = "\
schema: countersign.policy/v1
mode: enforce
environment: test
approval_ttl: 10m
actions:
  refund:
    effect: \"refund:{id}\"
    rules:
      - when: { amount: { lte: 100 } }
        decision: allow
      - decision: approve
  delete:
    effect: \"delete:{id}\"
    decision: approve
  log_ticket:
    effect: \"log:{id}\"
    decision: allow
  notify:
    effect: \"notify:{id}\"
    decision: approve
  send_reminder:
    effect: \"reminder:{ticket}:{round}\"
    decision: allow
  close_ticket:
    effect: \"close:{ticket}\"
    decision: approve
  drop_table:
    decision: approve
  read_file:
    decision: approve
  delete_file:
    decision: approve
";

/// The loop limit of [`World::two_refunds`]'s agent: a run that never stops asks the model this
/// many more times.
pub const TWO_REFUNDS_LIMIT: usize = 5;

pub const PRINCIPAL: &str = "agent:swiftide-test";
pub const START: Timestamp = Timestamp::from_millis(1_893_456_000_000);

/// A model that plays a script: each completion emits the next turn's tool calls; when the
/// script is done it answers with text and no tool call (the agent then stops).
#[derive(Clone, Default)]
pub struct ScriptedModel {
    turns: Arc<Mutex<VecDeque<Vec<ToolCall>>>>,
    requests: Arc<Mutex<Vec<Vec<ChatMessage>>>>,
}

impl ScriptedModel {
    pub fn new(turns: Vec<Vec<ToolCall>>) -> ScriptedModel {
        ScriptedModel {
            turns: Arc::new(Mutex::new(turns.into())),
            requests: Arc::default(),
        }
    }

    /// A model whose script is one turn making `calls`.
    pub fn one_turn(calls: Vec<ToolCall>) -> ScriptedModel {
        ScriptedModel::new(vec![calls])
    }

    /// The messages of every completion request the model got, oldest first.
    pub fn requests(&self) -> Vec<Vec<ChatMessage>> {
        self.requests.lock().expect("an unpoisoned lock").clone()
    }
}

#[async_trait::async_trait]
impl ChatCompletion for ScriptedModel {
    async fn complete(
        &self,
        request: &ChatCompletionRequest,
    ) -> Result<ChatCompletionResponse, LanguageModelError> {
        self.requests
            .lock()
            .expect("an unpoisoned lock")
            .push(request.messages().to_vec());
        let next = self.turns.lock().expect("an unpoisoned lock").pop_front();
        let mut builder = ChatCompletionResponse::builder();
        match next {
            Some(calls) => builder.tool_calls(calls),
            None => builder.message("done".to_owned()),
        };
        Ok(builder.build().expect("a response builds"))
    }
}

pub fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall::builder()
        .id(id)
        .name(name)
        .args(arguments.to_string())
        .build()
        .expect("a tool call builds")
}

/// Every run of every executor, by action: the canonical arguments it got.
#[derive(Clone, Default)]
pub struct Runs(Arc<Mutex<HashMap<String, Vec<Value>>>>);

impl Runs {
    pub fn record(&self, action: &str, arguments: Value) {
        self.0
            .lock()
            .expect("an unpoisoned lock")
            .entry(action.to_owned())
            .or_default()
            .push(arguments);
    }

    pub fn count(&self, action: &str) -> usize {
        self.0
            .lock()
            .expect("an unpoisoned lock")
            .get(action)
            .map_or(0, Vec::len)
    }

    pub fn of(&self, action: &str) -> Vec<Value> {
        self.0
            .lock()
            .expect("an unpoisoned lock")
            .get(action)
            .cloned()
            .unwrap_or_default()
    }
}

pub struct World {
    pub _dir: tempfile::TempDir,
    pub store: Arc<dyn Store>,
    pub clock: ManualClock,
    pub gate: Gate,
    pub runs: Runs,
}

impl World {
    pub fn new() -> World {
        World::with_policy(POLICY)
    }

    pub fn with_policy(policy: &str) -> World {
        let dir = tempfile::tempdir().expect("a scratch folder");
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(dir.path().join("test.db")).expect("the store opens"));
        let clock = ManualClock::new(START);
        let shared_clock: Arc<dyn Clock> = Arc::new(clock.clone());
        let gate = Gate::new(operator_control(policy, &store, shared_clock));
        World {
            _dir: dir,
            store,
            clock,
            gate,
            runs: Runs::default(),
        }
    }

    /// A gated tool named `action` whose body records its run.
    pub fn tool(&self, action: &str) -> GatedTool {
        let runs = self.runs.clone();
        let name = action.to_owned();
        self.gate.function(
            tool_spec(action),
            ActionSpec::new(action),
            move |arguments: Value| {
                let runs = runs.clone();
                let name = name.clone();
                async move {
                    runs.record(&name, arguments.clone());
                    Ok::<_, ExecutorError>(format!("{name} done with {arguments}"))
                }
            },
        )
    }

    pub fn agent(&self, model: &ScriptedModel, tools: Vec<Box<dyn Tool>>) -> Agent {
        Agent::builder()
            .llm(model)
            .tools(tools)
            .no_system_prompt()
            .build()
            .expect("the agent builds")
    }

    /// An agent with a loop limit: a run that never stops asks the model `limit` more times.
    pub fn agent_with_limit(
        &self,
        model: &ScriptedModel,
        tools: Vec<Box<dyn Tool>>,
        limit: usize,
    ) -> Agent {
        Agent::builder()
            .llm(model)
            .tools(tools)
            .no_system_prompt()
            .limit(limit)
            .build()
            .expect("the agent builds")
    }

    /// One turn asking to refund `first` (call `c1`) and `second` (call `c2`), each an
    /// `(id, amount)`, run by an agent over the gated `refund` tool with a loop limit of
    /// [`TWO_REFUNDS_LIMIT`]. Returns the model (to read its requests) and the agent, stopped
    /// after the turn.
    pub async fn two_refunds(
        &self,
        first: (u64, u64),
        second: (u64, u64),
    ) -> (ScriptedModel, Agent) {
        let model = ScriptedModel::one_turn(vec![
            call("c1", "refund", json!({"id": first.0, "amount": first.1})),
            call("c2", "refund", json!({"id": second.0, "amount": second.1})),
        ]);
        let mut agent = self.agent_with_limit(&model, self.tools(&["refund"]), TWO_REFUNDS_LIMIT);
        agent
            .query(format!("refund {} and {}", first.0, second.0))
            .await
            .expect("the agent runs");
        (model, agent)
    }

    /// The gated tools named `actions` (see [`World::tool`]).
    pub fn tools(&self, actions: &[&str]) -> Vec<Box<dyn Tool>> {
        actions
            .iter()
            .map(|action| self.tool(action).into())
            .collect()
    }

    /// An agent over the gated tools named `actions`, whose model makes one turn of `calls`.
    pub fn agent_making(&self, calls: Vec<ToolCall>, actions: &[&str]) -> Agent {
        self.agent(&ScriptedModel::one_turn(calls), self.tools(actions))
    }

    pub async fn receipts(&self) -> Vec<String> {
        receipt_lines(self.store.as_ref()).await
    }

    pub async fn receipts_full(&self) -> Vec<Receipt> {
        self.store
            .receipts(0, 1000)
            .await
            .expect("receipts read")
            .iter()
            .map(|stored| stored.to_receipt().expect("a receipt parses"))
            .collect()
    }

    /// The state of every approval request, sorted (requests made in one instant have no
    /// order).
    pub async fn approvals(&self) -> Vec<String> {
        let mut states: Vec<String> = self
            .store
            .approvals(None)
            .await
            .expect("approvals read")
            .iter()
            .map(|record| record.state.as_str().to_owned())
            .collect();
        states.sort();
        states
    }
}

/// The operator's control, built as SPEC.md 2.1 says (the adapter never builds one).
pub fn operator_control(policy: &str, store: &Arc<dyn Store>, clock: Arc<dyn Clock>) -> Control {
    let policy = Policy::from_yaml_str(policy, None).expect("the policy loads");
    let provider = InterruptApprovalProvider::new(
        Arc::clone(store),
        Arc::new(SwiftideInterrupt::new()),
        Arc::clone(&clock),
    );
    Control::builder_shared(Arc::new(policy), Arc::clone(store))
        .identity(StaticIdentity::new(
            Principal::new(PRINCIPAL).expect("a principal"),
        ))
        .clock(clock)
        .approval_provider(Arc::new(provider))
        .build()
}

pub fn tool_spec(name: &str) -> ToolSpec {
    ToolSpec::builder()
        .name(name)
        .description(format!("the {name} tool"))
        .build()
        .expect("a tool spec builds")
}

pub async fn receipt_lines(store: &dyn Store) -> Vec<String> {
    let report = countersign::audit::verify_store(store, None)
        .await
        .expect("the chain verifies");
    assert!(report.first_break.is_none(), "the receipt chain is intact");
    store
        .receipts(0, 1000)
        .await
        .expect("receipts read")
        .iter()
        .map(|stored| {
            let receipt = stored.to_receipt().expect("a receipt parses");
            let kind = serde_json::to_value(receipt.kind).expect("a kind");
            let mut line = format!(
                "{}/{}",
                kind.as_str().unwrap_or("?"),
                receipt.outcome.as_str()
            );
            if let Some(reason) = &receipt.reason {
                line.push('/');
                line.push_str(reason);
            }
            line
        })
        .collect()
}

/// The text the model read for `tool_call_id`, if the call got an output.
pub async fn model_read(agent: &Agent, tool_call_id: &str) -> Option<Value> {
    agent
        .history()
        .await
        .expect("history")
        .into_iter()
        .find_map(|message| match message {
            ChatMessage::ToolOutput(call, ToolOutput::Text(text)) if call.id() == tool_call_id => {
                Some(serde_json::from_str(&text).unwrap_or(Value::String(text)))
            }
            _ => None,
        })
}

/// The Countersign pause the agent stopped on, if it stopped on one.
pub fn pause_of(agent: &Agent) -> Option<(ToolCall, Pause)> {
    agent.stop_reason().and_then(Pause::from_stop_reason)
}

/// The Countersign pause the agent stopped on; panics with `expectation` if it did not.
pub fn expect_pause(agent: &Agent, expectation: &str) -> (ToolCall, Pause) {
    pause_of(agent).expect(expectation)
}

/// Asks the agent `prompt` and returns the Countersign pause its run stopped on.
pub async fn run_to_pause(agent: &mut Agent, prompt: &str) -> (ToolCall, Pause) {
    agent
        .query(prompt.to_owned())
        .await
        .expect("the agent runs");
    expect_pause(agent, "the agent stopped on a Countersign pause")
}

/// Hands `feedback` for `tool_call` to the agent's context, for its next run to read.
pub async fn hold_feedback(agent: &Agent, tool_call: &ToolCall, feedback: &ToolFeedback) {
    agent
        .context()
        .feedback_received(tool_call, feedback)
        .await
        .expect("feedback is held");
}

/// Answers `tool_call` with `feedback` and runs the agent on (swiftide's own resume).
pub async fn answer_and_run(agent: &mut Agent, tool_call: &ToolCall, feedback: &ToolFeedback) {
    hold_feedback(agent, tool_call, feedback).await;
    agent.run().await.expect("the agent resumes");
}

/// Every pause the gate logged, with its tool call, in order.
pub fn pauses(outcomes: &[Outcome]) -> Vec<(ToolCall, Pause)> {
    outcomes
        .iter()
        .filter_map(|outcome| match outcome {
            Outcome::Paused {
                tool_call, pause, ..
            } => Some((tool_call.clone(), Pause::clone(pause))),
            _ => None,
        })
        .collect()
}

/// `Paused` / `Ran` / `Refused(reason)` per outcome, in order.
pub fn outcome_lines(outcomes: &[Outcome]) -> Vec<String> {
    outcomes
        .iter()
        .map(|outcome| match outcome {
            Outcome::Ran { action, .. } => format!("ran {action}"),
            Outcome::Paused { pause, .. } => format!("paused {}", pause.action),
            Outcome::Refused {
                action, refusal, ..
            } => {
                format!("refused {action} ({})", refusal.reason())
            }
            Outcome::EditRefused { edit, .. } => format!("edit refused {}", edit.action),
        })
        .collect()
}

/// The `countersign` command: `$COUNTERSIGN_BIN`, or built from the workspace once.
pub fn cli() -> &'static PathBuf {
    static CLI: OnceLock<PathBuf> = OnceLock::new();
    CLI.get_or_init(|| {
        let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .expect("the adapter sits in the workspace");
        countersign_conformance::adapter_kit::workspace_cli(workspace)
            .unwrap_or_else(|error| panic!("{error}"))
    })
}
