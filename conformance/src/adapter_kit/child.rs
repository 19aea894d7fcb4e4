//! The durability case: pause in one OS process, answer with the `countersign` command, resume
//! in another OS process, all on one SQLite file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use countersign::store::{SqliteStore, Store};
use countersign::{Clock, ControlError, Policy, SystemClock, Timestamp};
use serde::{Deserialize, Serialize};

use super::cases::{self, Differences};
use super::world::{Call, Reviewer, Tool, World, WorldSpec};
use super::{Adapter, CLI_APPROVER, KitError, KitOptions, Relaunch};

/// The environment variable that tells a process it is a durability child (JSON, [`ChildSpec`]).
pub(crate) const CHILD_ENV: &str = "COUNTERSIGN_KIT_CHILD";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Phase {
    Pause,
    Resume,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Pause => "pause",
            Phase::Resume => "resume",
        }
    }
}

/// What a child process is asked to do.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ChildSpec {
    framework: String,
    phase: Phase,
    dir: PathBuf,
    clock_ms: i64,
}

/// What a child process reports back (in `<dir>/<phase>.json`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct ChildResult {
    result: String,
    request_id: Option<String>,
    tool_calls: usize,
    asked: usize,
    answered: usize,
    error: Option<String>,
}

fn durable_call() -> Call {
    Call::new(
        "kit.refund",
        serde_json::json!({"payment_id": "pay_durable", "amount": 60000}),
    )
}

/// The child spec addressed to `framework`, if this process is such a child.
pub(crate) fn requested(framework: &str) -> Option<ChildSpec> {
    let text = std::env::var(CHILD_ENV).ok()?;
    let spec: ChildSpec = serde_json::from_str(&text).ok()?;
    (spec.framework == framework).then_some(spec)
}

/// Run a child's phase, write its result, and exit the process.
pub(crate) async fn run_phase<A: Adapter>(adapter: &A, policy: Arc<Policy>, spec: ChildSpec) -> ! {
    let result = phase(adapter, &policy, &spec)
        .await
        .unwrap_or_else(|error| ChildResult {
            error: Some(error.to_string()),
            ..ChildResult::default()
        });
    let path = spec.dir.join(format!("{}.json", spec.phase.as_str()));
    let written = serde_json::to_vec(&result)
        .map_err(std::io::Error::other)
        .and_then(|bytes| std::fs::write(&path, bytes));
    std::process::exit(if written.is_ok() { 0 } else { 1 })
}

async fn phase<A: Adapter>(
    adapter: &A,
    policy: &Arc<Policy>,
    spec: &ChildSpec,
) -> Result<ChildResult, KitError> {
    let world = World::build(
        adapter,
        policy,
        WorldSpec {
            dir: spec.dir.clone(),
            clock_start: Timestamp::from_millis(spec.clock_ms),
            principal: true,
            // Nobody answers inside the framework: the answer comes from the CLI.
            reviewer: Reviewer::absent(),
            tool: Tool::default(),
            late_answers: false,
        },
    )?;
    let call = durable_call();
    let result = match spec.phase {
        Phase::Pause => adapter.invoke(&world.session, &call).await,
        Phase::Resume => adapter.resume(&world.session, &call).await,
    };
    let (answered, _, _) = world.counts.get();
    Ok(ChildResult {
        result: cases::result_line(&result),
        request_id: match &result {
            Err(ControlError::ApprovalRequired { request_id, .. }) => {
                Some(request_id.as_str().to_owned())
            }
            _ => None,
        },
        tool_calls: world.session.tool().calls(),
        asked: world.session.reviewer().asked(),
        answered,
        error: None,
    })
}

/// The durability case, from the parent's side.
pub(crate) async fn durability<A: Adapter>(
    adapter: &A,
    _policy: &Arc<Policy>,
    options: &KitOptions,
) -> Result<Result<(), String>, KitError> {
    let dir = tempfile::tempdir()?;
    // The CLI answers by the system clock, so the world starts at the real time.
    let start = SystemClock.now();
    let paused = match spawn_phase(
        adapter.framework(),
        Phase::Pause,
        dir.path(),
        start,
        options,
    ) {
        Ok(result) => result,
        Err(reason) => return Ok(Err(reason)),
    };
    let mut differences = Differences::default();
    differences.eq(
        "first process: result",
        paused.result.as_str(),
        "ApprovalRequired(approval_required)",
    );
    differences.eq("first process: executor calls", paused.tool_calls, 0);
    let Some(request_id) = paused.request_id.clone() else {
        differences.push("first process: no pending request to answer".to_owned());
        return Ok(differences.finish());
    };
    let store_path = dir.path().join("kit.db");
    if let Err(reason) = answer_with_cli(options, &request_id, &store_path) {
        differences.push(reason);
        return Ok(differences.finish());
    }
    let resumed = match spawn_phase(
        adapter.framework(),
        Phase::Resume,
        dir.path(),
        start.plus(Duration::from_secs(1)),
        options,
    ) {
        Ok(result) => result,
        Err(reason) => {
            differences.push(reason);
            return Ok(differences.finish());
        }
    };
    differences.eq("second process: result", resumed.result.as_str(), "ok");
    differences.eq("second process: executor calls", resumed.tool_calls, 1);
    differences.eq(
        "second process: times a human was asked (the CLI already answered)",
        resumed.asked,
        0,
    );
    let store = SqliteStore::open(&store_path)
        .map_err(|error| KitError::Io(std::io::Error::other(error.to_string())))?;
    match cases::read_receipts(&store).await {
        Ok(receipts) => {
            differences.eq(
                "receipts",
                receipts.iter().map(cases::receipt_line).collect::<Vec<_>>(),
                vec![
                    "answer/granted/approved".to_owned(),
                    "attempt/committed".to_owned(),
                ],
            );
            cases::check_evidence(&mut differences, &receipts, &[CLI_APPROVER]);
        }
        Err(reason) => differences.push(reason),
    }
    let approvals = store
        .approvals(None)
        .await
        .map_err(|error| KitError::Io(std::io::Error::other(error.to_string())))?;
    differences.eq(
        "approval requests",
        approvals
            .iter()
            .map(|record| record.state.as_str())
            .collect::<Vec<_>>(),
        vec!["consumed"],
    );
    Ok(differences.finish())
}

fn relaunch_command(options: &KitOptions) -> Result<Command, String> {
    match &options.relaunch {
        Relaunch::Command { program, args } => {
            let mut command = Command::new(program);
            command.args(args);
            Ok(command)
        }
        Relaunch::CurrentTest => {
            let exe = std::env::current_exe()
                .map_err(|error| format!("cannot find the running test binary: {error}"))?;
            let thread = std::thread::current();
            let name = thread
                .name()
                .filter(|name| *name != "main")
                .ok_or_else(|| {
                    "cannot tell which test to re-run in a second process: run the kit from a test function (libtest names its thread), or set `KitOptions::relaunch`".to_owned()
                })?;
            let mut command = Command::new(exe);
            command.args([name, "--exact", "--nocapture", "--test-threads=1"]);
            Ok(command)
        }
    }
}

fn spawn_phase(
    framework: &str,
    phase: Phase,
    dir: &Path,
    clock: Timestamp,
    options: &KitOptions,
) -> Result<ChildResult, String> {
    let spec = ChildSpec {
        framework: framework.to_owned(),
        phase,
        dir: dir.to_path_buf(),
        clock_ms: clock.as_millis(),
    };
    let mut command = relaunch_command(options)?;
    let spec_text = serde_json::to_string(&spec)
        .map_err(|error| format!("cannot write the child's instructions: {error}"))?;
    command.env(CHILD_ENV, spec_text);
    let output = command
        .output()
        .map_err(|error| format!("cannot start the {} process: {error}", phase.as_str()))?;
    let path = dir.join(format!("{}.json", phase.as_str()));
    let text = std::fs::read_to_string(&path).map_err(|_| {
        format!(
            "the {} process wrote no result ({}; {})",
            phase.as_str(),
            output.status,
            tail(&output)
        )
    })?;
    let result: ChildResult = serde_json::from_str(&text).map_err(|error| {
        format!(
            "the {} process's result is unreadable: {error}",
            phase.as_str()
        )
    })?;
    match &result.error {
        Some(error) => Err(format!(
            "the {} process could not run: {error}",
            phase.as_str()
        )),
        None => Ok(result),
    }
}

fn tail(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last: Vec<&str> = stderr.lines().rev().take(3).collect();
    if last.is_empty() {
        "no output".to_owned()
    } else {
        last.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }
}

/// The `countersign` command: the option, `$COUNTERSIGN_BIN`, a sibling of this executable, or
/// `countersign` on `PATH`.
pub(crate) fn cli_program(options: &KitOptions) -> PathBuf {
    if let Some(cli) = &options.cli {
        return cli.clone();
    }
    if let Some(cli) = std::env::var_os("COUNTERSIGN_BIN") {
        return PathBuf::from(cli);
    }
    let name = format!("countersign{}", std::env::consts::EXE_SUFFIX);
    if let Ok(exe) = std::env::current_exe() {
        for folder in exe.ancestors().skip(1).take(2) {
            let candidate = folder.join(&name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    PathBuf::from(name)
}

fn answer_with_cli(options: &KitOptions, request_id: &str, store: &Path) -> Result<(), String> {
    let program = cli_program(options);
    let output = Command::new(&program)
        .arg("approve")
        .arg(request_id)
        .arg("--store-url")
        .arg(format!("sqlite:{}", store.display()))
        .arg("--as")
        .arg(CLI_APPROVER)
        .env_remove(CHILD_ENV)
        .output()
        .map_err(|error| {
            format!(
                "cannot run `{}`: {error}: install it (`cargo install countersign-cli`) or set COUNTERSIGN_BIN",
                program.display()
            )
        })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`countersign approve {request_id}` failed ({}): {}",
            output.status,
            tail(&output)
        ))
    }
}
