//! `countersign-bench --compare-worker SCENARIO ...`: one timed run of a comparison scenario
//! from Rust, driven by `bench/compare/compare.py`, which runs the same scenarios through the
//! Python binding and through ctrlrun, interleaved, and prints the table.
//!
//! Prints one JSON object on stdout: `{"library", "scenario", "calls", "seconds", "start",
//! "end"}` (`start`/`end`: UNIX time in seconds, so the orchestrator can combine workers that
//! ran at once). With `--wait-go`, prints `ready` after setting up and waits for a line on
//! stdin before the timed part, so concurrent workers start together. With `--threads N`
//! (scenario `effect` only, issue #21) the calls are split over N tasks on a runtime of N
//! worker threads sharing one `Control`, all started together: N threads in one process.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use countersign::approval::AnswerDecision;
use countersign::store::{SqliteStore, Store};
use countersign::{ActionRequest, Control, ControlError, Policy, Principal, StaticIdentity};
use serde_json::json;

use crate::noop;

/// The policy of every comparison scenario (the Python side loads the same file).
pub(crate) const POLICY: &str = include_str!("../compare/countersign.yaml");

/// The scenarios, by the names `compare.py` uses.
const SCENARIOS: &[&str] = &["noop", "effect", "approval", "duplicate", "evaluate"];

struct WorkerArgs {
    scenario: String,
    calls: usize,
    store: PathBuf,
    prefix: String,
    wait_go: bool,
    threads: usize,
}

fn parse(args: &[String]) -> Result<WorkerArgs> {
    let value = |flag: &str| -> Option<&String> {
        args.iter()
            .position(|arg| arg == flag)
            .and_then(|index| args.get(index + 1))
    };
    let scenario = value("--compare-worker")
        .context("--compare-worker needs a scenario")?
        .clone();
    if !SCENARIOS.contains(&scenario.as_str()) {
        bail!("unknown scenario `{scenario}`: one of {SCENARIOS:?}");
    }
    let threads = match value("--threads") {
        None => 1,
        Some(threads) => match threads.parse::<usize>() {
            Ok(threads) if threads >= 1 && scenario == "effect" => threads,
            _ => bail!("--threads takes a number of at least 1, with scenario `effect` only"),
        },
    };
    Ok(WorkerArgs {
        scenario,
        calls: value("--calls")
            .context("--calls N is required")?
            .parse()
            .context("--calls takes a number")?,
        store: PathBuf::from(value("--store").context("--store PATH is required")?),
        prefix: value("--prefix").cloned().unwrap_or_default(),
        wait_go: args.iter().any(|arg| arg == "--wait-go"),
        threads,
    })
}

fn unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs_f64())
        .unwrap_or_default()
}

/// Run the worker described by `args` (the whole command line after the program name).
pub(crate) fn worker(args: &[String]) -> Result<()> {
    let args = parse(args)?;
    let runtime = if args.threads > 1 {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    };
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&args.store)?);
    let policy = Policy::from_yaml_str(POLICY, None)?;
    let control = Control::builder_shared(Arc::new(policy), store)
        .identity(StaticIdentity::new(Principal::new("agent:bench")?))
        .build();
    let refund = |payment_id: &str, amount: u64| {
        ActionRequest::new(
            "stripe.refund",
            &json!({"payment_id": payment_id, "amount": amount}),
        )
    };
    let prefix = &args.prefix;
    // Setup outside the timed part: the duplicate scenario needs one committed key.
    if args.scenario == "duplicate" {
        runtime.block_on(control.execute(refund(&format!("{prefix}dup"), 100), noop))?;
    }
    if args.wait_go {
        println!("ready");
        std::io::stdout().flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
    }
    let start = unix_seconds();
    let started = Instant::now();
    let calls = if args.threads > 1 {
        let each = args.calls / args.threads;
        runtime.block_on(async {
            let mut tasks = Vec::with_capacity(args.threads);
            for thread in 0..args.threads {
                let control = control.clone();
                let prefix = format!("{prefix}t{thread}-");
                tasks.push(tokio::spawn(async move {
                    for n in 0..each {
                        let payment_id = format!("{prefix}{n}");
                        let request = ActionRequest::new(
                            "stripe.refund",
                            &json!({"payment_id": payment_id, "amount": 100}),
                        );
                        control.execute(request, noop).await?;
                    }
                    Ok::<_, ControlError>(())
                }));
            }
            for task in tasks {
                task.await??;
            }
            Ok::<_, anyhow::Error>(())
        })?;
        each * args.threads
    } else {
        run_calls(&runtime, &control, &args)?;
        args.calls
    };
    let seconds = started.elapsed().as_secs_f64();
    let end = unix_seconds();
    println!(
        "{}",
        json!({
            "library": "countersign-rust",
            "scenario": args.scenario,
            "calls": calls,
            "threads": args.threads,
            "seconds": seconds,
            "start": start,
            "end": end,
        })
    );
    Ok(())
}

/// The calls of one single-threaded run.
fn run_calls(
    runtime: &tokio::runtime::Runtime,
    control: &Control,
    args: &WorkerArgs,
) -> Result<()> {
    let prefix = &args.prefix;
    let refund = |payment_id: &str, amount: u64| {
        ActionRequest::new(
            "stripe.refund",
            &json!({"payment_id": payment_id, "amount": amount}),
        )
    };
    runtime.block_on(async {
        for n in 0..args.calls {
            match args.scenario.as_str() {
                "noop" => {
                    control
                        .execute(ActionRequest::new("tool.noop", &json!({"n": n})), noop)
                        .await?;
                }
                "effect" => {
                    control
                        .execute(refund(&format!("{prefix}{n}"), 100), noop)
                        .await?;
                }
                "approval" => {
                    let payment_id = format!("{prefix}{n}");
                    let request_id = match control.execute(refund(&payment_id, 70_000), noop).await
                    {
                        Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
                        other => bail!("expected approval_required, got {other:?}"),
                    };
                    control
                        .answer(&request_id, AnswerDecision::Approve, "human:bench", None)
                        .await?;
                    control
                        .execute(refund(&payment_id, 70_000).with_approval(request_id), noop)
                        .await?;
                }
                "duplicate" => match control
                    .execute(refund(&format!("{prefix}dup"), 100), noop)
                    .await
                {
                    Err(ControlError::DuplicateEffect { .. }) => {}
                    other => bail!("expected a duplicate refusal, got {other:?}"),
                },
                _ => {
                    let evaluation = control.evaluate(&refund(&format!("{prefix}{n}"), 100))?;
                    std::hint::black_box(evaluation);
                }
            }
        }
        Ok(())
    })
}
