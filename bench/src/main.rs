//! Countersign's benchmarks: `cargo xtask bench` runs this binary in release mode; `cargo xtask
//! test` runs it once with `--quick` so the harness never rots.
//!
//! Each scenario runs `rounds` times for `iterations` calls on a fresh store in a temporary
//! folder; the report is the median calls per second. Figures are printed, never asserted:
//! performance targets live here, not in tests.

mod compare;
mod evidence;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use countersign::approval::AnswerDecision;
use countersign::store::{MemoryStore, SqliteStore, Store};
use countersign::{
    ActionRequest, Control, ControlError, ExecutorError, Policy, Principal, StaticIdentity,
};
use serde_json::json;

use crate::compare::POLICY;

struct Settings {
    iterations: usize,
    rounds: usize,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // One timed run for `bench/compare/compare.py` (prints JSON; see `compare.rs`).
    if args.iter().any(|arg| arg == "--compare-worker") {
        return compare::worker(&args);
    }
    let quick = args.iter().any(|arg| arg == "--quick");
    // `--only TEXT`: run only the scenarios whose name contains TEXT (for profiling).
    let only = args
        .iter()
        .position(|arg| arg == "--only")
        .and_then(|index| args.get(index + 1))
        .cloned();
    let settings = if quick {
        Settings {
            iterations: 200,
            rounds: 1,
        }
    } else {
        Settings {
            iterations: 5_000,
            rounds: 5,
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    println!(
        "countersign kernel benchmarks ({} calls x {} rounds, median)",
        settings.iterations, settings.rounds
    );
    println!("{:<48} {:>14}", "scenario", "calls/s");
    let scenarios: [(&str, Scenario); 5] = [
        (
            "canonicalize + hash, 10-argument action",
            Scenario::Canonical,
        ),
        ("policy evaluation", Scenario::Policy),
        (
            "execute, allow, no effect key (memory store)",
            Scenario::AllowMemory,
        ),
        (
            "execute, allow + effect key (SQLite file)",
            Scenario::AllowEffectSqlite,
        ),
        (
            "approval round trip (SQLite file)",
            Scenario::ApprovalSqlite,
        ),
    ];
    for (name, scenario) in scenarios {
        if only.as_deref().is_some_and(|only| !name.contains(only)) {
            continue;
        }
        let mut rates = Vec::new();
        for _ in 0..settings.rounds {
            let elapsed = runtime
                .block_on(scenario.run(settings.iterations))
                .with_context(|| format!("scenario `{name}`"))?;
            rates.push(settings.iterations as f64 / elapsed.as_secs_f64());
        }
        rates.sort_by(f64::total_cmp);
        println!("{:<48} {:>14.0}", name, rates[rates.len() / 2]);
    }
    if only.as_deref().is_none_or(|only| "evidence".contains(only)) {
        evidence::run(quick)?;
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Scenario {
    Canonical,
    Policy,
    AllowMemory,
    AllowEffectSqlite,
    ApprovalSqlite,
}

fn control(store: Arc<dyn Store>) -> Result<Control> {
    let policy = Policy::from_yaml_str(POLICY, None)?;
    Ok(Control::builder_shared(Arc::new(policy), store)
        .identity(StaticIdentity::new(Principal::new("agent:bench")?))
        .build())
}

fn ten_arguments(n: usize) -> serde_json::Value {
    json!({
        "payment_id": format!("pi_{n}"), "amount": 1999, "currency": "usd", "reason": "requested_by_customer",
        "customer": {"id": "cus_1", "email": "a@example.test"}, "metadata": {"ticket": n, "agent": "support"},
        "notify": true, "ratio": 0.25, "tags": ["refund", "bench"], "note": "世界"
    })
}

pub(crate) async fn noop(_: serde_json::Value) -> Result<(), ExecutorError> {
    Ok(())
}

impl Scenario {
    async fn run(self, iterations: usize) -> Result<Duration> {
        let folder = tempfile::tempdir()?;
        let sqlite = || -> Result<Arc<dyn Store>> {
            Ok(Arc::new(SqliteStore::open(folder.path().join("bench.db"))?))
        };
        let started;
        match self {
            Scenario::Canonical => {
                let values: Vec<_> = (0..iterations).map(ten_arguments).collect();
                started = Instant::now();
                for value in &values {
                    let canonical = countersign::canonical::to_canonical(value)?;
                    std::hint::black_box(canonical.sha256());
                }
            }
            Scenario::Policy => {
                let policy = Policy::from_yaml_str(POLICY, None)?;
                let values: Vec<_> = (0..iterations).map(ten_arguments).collect();
                started = Instant::now();
                for value in &values {
                    std::hint::black_box(policy.decide("stripe.refund", value).decision);
                }
            }
            Scenario::AllowMemory => {
                let control = control(Arc::new(MemoryStore::new()))?;
                started = Instant::now();
                for n in 0..iterations {
                    control
                        .execute(ActionRequest::new("tool.noop", &json!({"n": n})), noop)
                        .await?;
                }
            }
            Scenario::AllowEffectSqlite => {
                let control = control(sqlite()?)?;
                started = Instant::now();
                for n in 0..iterations {
                    control
                        .execute(
                            ActionRequest::new(
                                "stripe.refund",
                                &json!({"payment_id": format!("pi_{n}"), "amount": 100}),
                            ),
                            noop,
                        )
                        .await?;
                }
            }
            Scenario::ApprovalSqlite => {
                let control = control(sqlite()?)?;
                started = Instant::now();
                for n in 0..iterations {
                    let arguments = json!({"payment_id": format!("pi_{n}"), "amount": 70_000});
                    let request_id = match control
                        .execute(ActionRequest::new("stripe.refund", &arguments), noop)
                        .await
                    {
                        Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
                        other => anyhow::bail!("expected approval_required, got {other:?}"),
                    };
                    control
                        .answer(&request_id, AnswerDecision::Approve, "human:bench", None)
                        .await?;
                    control
                        .execute(
                            ActionRequest::new("stripe.refund", &arguments)
                                .with_approval(request_id),
                            noop,
                        )
                        .await?;
                }
            }
        }
        Ok(started.elapsed())
    }
}
