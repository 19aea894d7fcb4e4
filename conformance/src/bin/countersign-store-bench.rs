//! `countersign-store-bench [--quick]`: allow + effect throughput (one `Control::execute` on a
//! fresh effect key per call: a reservation transaction and a finish transaction with its
//! receipt) with 1, 4 and 16 concurrent callers, on SQLite and on PostgreSQL. Prints calls per
//! second; asserts nothing about time. Build it with `--release` for meaningful figures.
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use countersign::store::Store;
use countersign::{ActionRequest, ExecutorError, SystemClock};
use countersign_conformance::store_kit::cases::kit_control;
use countersign_conformance::store_kit::{PostgresBackend, SqliteBackend, StoreBackend};
use serde_json::json;

async fn measure(store: Arc<dyn Store>, callers: usize, calls_each: usize) -> Result<f64, String> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for caller in 0..callers {
        let control = kit_control(Arc::clone(&store), Arc::new(SystemClock), None);
        tasks.push(tokio::spawn(async move {
            for call in 0..calls_each {
                let request = ActionRequest::new(
                    "kit.effect",
                    &json!({"key": format!("bench-{caller}-{call}")}),
                );
                control
                    .execute(request, |_arguments| async { Ok::<_, ExecutorError>(()) })
                    .await
                    .map_err(|error| error.to_string())?;
            }
            Ok::<_, String>(())
        }));
    }
    for task in tasks {
        task.await.map_err(|error| error.to_string())??;
    }
    Ok((callers * calls_each) as f64 / started.elapsed().as_secs_f64())
}

async fn bench(quick: bool) -> Result<(), String> {
    let total = if quick { 160 } else { 3_200 };
    let postgres: Arc<dyn StoreBackend> =
        Arc::new(PostgresBackend::from_env("bench")?.with_options("max_connections=20"));
    let backends: Vec<Arc<dyn StoreBackend>> = vec![Arc::new(SqliteBackend), postgres];
    println!("store       callers   calls    calls/s");
    for backend in &backends {
        for callers in [1, 4, 16] {
            let fresh = backend.fresh(&format!("bench_{callers}")).await?;
            let rate = measure(Arc::clone(&fresh.store), callers, total / callers).await?;
            println!(
                "{:<10} {callers:>8} {:>7} {rate:>10.0}",
                backend.name(),
                total / callers * callers
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bench(quick)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
