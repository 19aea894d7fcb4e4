//! A swiftide agent whose refund tool is gated by Countersign, offline: a scripted model asks
//! for a small refund (allowed), a large one (needs approval: the agent stops with swiftide's
//! `FeedbackRequired`) and a huge one (denied by policy). A human answers the pause and the
//! resumed run re-enters the tool; the kernel runs exactly what was approved, once.
//!
//! ```sh
//! cargo run -p countersign-swiftide --example swiftide            # the reviewer approves
//! cargo run -p countersign-swiftide --example swiftide -- --reject
//! ```

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use countersign::store::{SqliteStore, Store};
use countersign::{
    Clock, Control, ExecutorError, InterruptApprovalProvider, Policy, Principal, StaticIdentity,
    SystemClock,
};
use countersign_swiftide::{ActionSpec, Gate, Outcome, Pause, SwiftideInterrupt};
use serde_json::{Value, json};
use swiftide_agents::Agent;
use swiftide_core::chat_completion::errors::LanguageModelError;
use swiftide_core::chat_completion::{
    ChatCompletion, ChatCompletionRequest, ChatCompletionResponse, ToolCall, ToolSpec,
};

/// A model that plays a script of tool calls, then says it is done.
#[derive(Clone)]
struct ScriptedModel(Arc<Mutex<VecDeque<ToolCall>>>);

#[async_trait::async_trait]
impl ChatCompletion for ScriptedModel {
    async fn complete(
        &self,
        _request: &ChatCompletionRequest,
    ) -> Result<ChatCompletionResponse, LanguageModelError> {
        let next = self
            .0
            .lock()
            .map_err(|_| LanguageModelError::permanent("the script lock is poisoned"))?
            .pop_front();
        let mut response = ChatCompletionResponse::builder();
        match next {
            Some(call) => response.tool_calls(vec![call]),
            None => response.message("All refunds handled.".to_owned()),
        };
        response.build().map_err(LanguageModelError::permanent)
    }
}

fn refund_call(id: &str, order: &str, amount: u64) -> Result<ToolCall, Box<dyn std::error::Error>> {
    Ok(ToolCall::builder()
        .id(id)
        .name("refund_order")
        .args(json!({"order_id": order, "amount": amount}).to_string())
        .build()?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rejecting = std::env::args().any(|arg| arg == "--reject");
    let scratch = tempfile::tempdir()?;

    // The operator's side (SPEC.md 2.1): store, clock, policy, identity, and the kernel's
    // InterruptApprovalProvider around the adapter's interrupt.
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(scratch.path().join("example.db"))?);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let policy = Policy::from_yaml_str(include_str!("countersign.yaml"), None)?;
    let provider = InterruptApprovalProvider::new(
        Arc::clone(&store),
        Arc::new(SwiftideInterrupt::new()),
        Arc::clone(&clock),
    );
    let control = Control::builder_shared(Arc::new(policy), Arc::clone(&store))
        .identity(StaticIdentity::new(Principal::new("agent:support-bot")?))
        .clock(clock)
        .approval_provider(Arc::new(provider))
        .build();

    // The adapter: a gated swiftide tool. Its body runs only through the kernel.
    let gate = Gate::new(control);
    let refund = gate.function(
        ToolSpec::builder()
            .name("refund_order")
            .description("Refund an order")
            .build()?,
        ActionSpec::new("refund_order"),
        |arguments: Value| async move {
            println!("  >>> payment provider: refunding {arguments}");
            Ok::<_, ExecutorError>(format!("refunded {}", arguments["order_id"]))
        },
    );

    let model = ScriptedModel(Arc::new(Mutex::new(VecDeque::from([
        refund_call("call_1", "o-7", 80)?,
        refund_call("call_2", "o-9", 900)?,
        refund_call("call_3", "o-11", 90000)?,
    ]))));
    let mut agent = Agent::builder()
        .llm(&model)
        .tools([refund])
        .no_system_prompt()
        .build()?;

    agent.query("Refund o-7, o-9 and o-11").await?;
    while let Some((tool_call, pause)) = agent.stop_reason().and_then(Pause::from_stop_reason) {
        println!(
            "paused: {} {} needs approval (request {}, hash {}, expires {})",
            pause.action, pause.arguments, pause.request_id, pause.action_hash, pause.expires_at
        );
        // Who answers is what this application knows (here a bare name, asserted; an approver
        // token authenticates): the gate passes it to the kernel, never the payload's text.
        let feedback = if rejecting {
            println!("  reviewer: reject");
            gate.deny(&pause, "human:reviewer", Some("customer already refunded"))
        } else {
            println!("  reviewer: approve");
            gate.approve(&pause, "human:reviewer")
        };
        agent
            .context()
            .feedback_received(&tool_call, &feedback)
            .await?;
        agent.run().await?;
    }

    println!("outcomes:");
    for outcome in gate.take_outcomes() {
        match &outcome {
            Outcome::Ran {
                action, receipt, ..
            } => {
                println!(
                    "  {}: ran {action} (receipt #{})",
                    outcome.tool_call().id(),
                    receipt.seq
                );
            }
            Outcome::Paused { pause, .. } => {
                println!(
                    "  {}: paused on {}",
                    outcome.tool_call().id(),
                    pause.request_id
                );
            }
            Outcome::Refused { refusal, .. } => {
                println!(
                    "  {}: refused ({}): {refusal}",
                    outcome.tool_call().id(),
                    refusal.reason()
                );
            }
            Outcome::EditRefused { edit, .. } => {
                println!(
                    "  {}: edit to `{}` refused",
                    outcome.tool_call().id(),
                    edit.action
                );
            }
        }
    }
    println!("receipts:");
    for stored in store.receipts(0, 100).await? {
        let receipt = stored.to_receipt()?;
        println!(
            "  #{} {} {} {}",
            receipt.seq,
            receipt.outcome.as_str(),
            receipt.reason.as_deref().unwrap_or("-"),
            receipt.action.as_deref().unwrap_or("-"),
        );
    }
    Ok(())
}
