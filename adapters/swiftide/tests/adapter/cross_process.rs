//! Cross-process resume: the agent pauses in this process; its stop reason, history and the
//! resume feedback are serialized; the request is approved with `countersign approve` (a second
//! process); the agent is rebuilt from the files and resumed in a third process.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use countersign::store::{SqliteStore, Store};
use countersign::{Clock, ExecutorError, SystemClock};
use countersign_swiftide::{ActionSpec, Gate, GatedTool, Pause, recheck};
use serde_json::{Value, json};
use swiftide_agents::{Agent, DefaultContext, StopReason};
use swiftide_core::ToolFeedback;
use swiftide_core::chat_completion::ChatMessage;

use super::support::{
    POLICY, ScriptedModel, answer_and_run, call, cli, operator_control, outcome_lines,
    receipt_lines, tool_spec,
};

const RESUME_ENV: &str = "COUNTERSIGN_SWIFTIDE_TEST_RESUME";
const TEST_NAME: &str = "adapter::cross_process::resumes_in_a_third_process_after_cli_approval";

/// What the pausing process leaves for the resuming one.
#[derive(serde::Serialize, serde::Deserialize)]
struct Saved {
    history: Vec<ChatMessage>,
    stop_reason: StopReason,
    feedback: ToolFeedback,
}

/// The operator's side in any process: the store file, the system clock (the CLI answers by
/// it), the control, the gate, and the refund tool, whose runs are appended to a file.
fn gate_and_tool(dir: &Path) -> (Arc<dyn Store>, GatedTool) {
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.join("store.db")).expect("the store opens"));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let gate = Gate::new(operator_control(POLICY, &store, clock));
    let runs = dir.join("runs.txt");
    let tool = gate.function(
        tool_spec("refund"),
        ActionSpec::new("refund"),
        move |arguments: Value| {
            let runs = runs.clone();
            async move {
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&runs)
                    .map_err(|error| ExecutorError::not_executed(error.to_string()))?;
                writeln!(file, "{arguments}").map_err(ExecutorError::may_have_run)?;
                Ok::<_, ExecutorError>(format!("refunded {arguments}"))
            }
        },
    );
    (store, tool)
}

fn runs(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("runs.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The resuming process: rebuild the agent from the saved files, apply the saved feedback, run.
async fn resume_phase(dir: &Path) {
    let saved: Saved =
        serde_json::from_slice(&std::fs::read(dir.join("saved.json")).expect("saved state"))
            .expect("saved state parses");
    let (_store, tool) = gate_and_tool(dir);
    let gate_outcomes = tool.clone();
    let mut context = DefaultContext::default();
    context
        .with_existing_messages(saved.history)
        .await
        .expect("history restored");
    let model = ScriptedModel::new(Vec::new());
    let mut agent = Agent::builder()
        .llm(&model)
        .context(context)
        .tools([tool])
        .no_system_prompt()
        .build()
        .expect("the agent builds");
    let (tool_call, _) = saved
        .stop_reason
        .as_feedback_required()
        .expect("the saved run stopped for feedback");
    answer_and_run(&mut agent, tool_call, &saved.feedback).await;
    let lines = outcome_lines(&gate_outcomes.gate().take_outcomes());
    std::fs::write(
        dir.join(format!("resumed-{}.json", std::process::id())),
        serde_json::to_vec(&lines).expect("lines serialize"),
    )
    .expect("the result is written");
}

fn spawn_resume(dir: &Path) -> Vec<String> {
    let before: Vec<PathBuf> = list(dir);
    let status = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(RESUME_ENV, dir)
        .status()
        .expect("the resuming process starts");
    assert!(status.success(), "the resuming process failed");
    let written: Vec<PathBuf> = list(dir)
        .into_iter()
        .filter(|path| !before.contains(path))
        .collect();
    let [result] = written.as_slice() else {
        panic!("the resuming process wrote one result, got {written:?}");
    };
    serde_json::from_slice(&std::fs::read(result).expect("the result")).expect("lines")
}

fn list(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("the folder lists")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("resumed-"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_in_a_third_process_after_cli_approval() {
    if let Some(dir) = std::env::var_os(RESUME_ENV) {
        resume_phase(Path::new(&dir)).await;
        return;
    }
    let scratch = tempfile::tempdir().expect("a scratch folder");
    let dir = scratch.path();

    // Process 1 (this one): the agent pauses; save the stop reason, history and feedback.
    let (store, tool) = gate_and_tool(dir);
    let model = ScriptedModel::new(vec![vec![call(
        "c1",
        "refund",
        json!({"id": 8, "amount": 700}),
    )]]);
    let mut agent = Agent::builder()
        .llm(&model)
        .tools([tool.clone()])
        .no_system_prompt()
        .build()
        .expect("the agent builds");
    agent.query("refund 8").await.expect("the agent runs");
    let stop_reason = agent.stop_reason().cloned().expect("stopped");
    let (_, pause) = Pause::from_stop_reason(&stop_reason).expect("paused");
    let saved = Saved {
        history: agent.history().await.expect("history"),
        stop_reason,
        // Nothing is answered in the framework: the answer comes from the CLI, and the feedback
        // only makes swiftide re-enter the paused call.
        feedback: recheck(Some(&pause)),
    };
    std::fs::write(
        dir.join("saved.json"),
        serde_json::to_vec(&saved).expect("serializes"),
    )
    .expect("saved");
    drop(agent);
    assert!(runs(dir).is_empty());

    // Process 2: a human approves with the CLI.
    let output = std::process::Command::new(cli())
        .arg("approve")
        .arg(&pause.request_id)
        .arg("--store-url")
        .arg(format!("sqlite:{}", dir.join("store.db").display()))
        .arg("--as")
        .arg("human:cli-operator")
        .output()
        .expect("the countersign command runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // Process 3: rebuilt and resumed; the kernel finds the grant by action hash.
    assert_eq!(spawn_resume(dir), vec!["ran refund"]);
    assert_eq!(runs(dir), vec![r#"{"amount":700,"id":8}"#]);
    // A fourth process replays the same saved run: refused as a duplicate, nothing runs.
    assert_eq!(spawn_resume(dir), vec!["refused refund (duplicate)"]);
    assert_eq!(runs(dir).len(), 1);

    assert_eq!(
        receipt_lines(store.as_ref()).await,
        vec![
            "answer/granted/approved",
            "attempt/committed",
            "attempt/refused/duplicate"
        ]
    );
    let receipts = store.receipts(0, 10).await.expect("receipts");
    let granted = receipts[0].to_receipt().expect("a receipt");
    assert_eq!(granted.approver.as_deref(), Some("human:cli-operator"));
    let approvals = store.approvals(None).await.expect("approvals");
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].state.as_str(), "consumed");
}
