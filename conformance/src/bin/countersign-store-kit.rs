//! `countersign-store-kit [--filter TEXT] [--backend memory|sqlite|postgres|postgres-pgbouncer]...`:
//! run the store kit and print one report per backend (`sqlite: 30/30 (0 not applicable)`),
//! then the cases that did not pass. Exits non-zero when a case failed or a backend could not
//! be set up.
//!
//! The worker binary is looked up beside this one; PostgreSQL is the server named by
//! `COUNTERSIGN_TEST_POSTGRES_URL`, and `postgres-pgbouncer` the same server through the
//! PgBouncer (transaction mode) named by `COUNTERSIGN_TEST_PGBOUNCER_URL`.
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;

use countersign_conformance::store_kit::{
    self, KitOptions, MemoryBackend, PostgresBackend, SqliteBackend, StoreBackend,
};

fn main() -> ExitCode {
    let mut filter = None;
    let mut backends: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--filter" => filter = args.next(),
            "--backend" => backends.extend(args.next()),
            other => {
                eprintln!("unknown argument `{other}`: use --filter TEXT or --backend NAME");
                return ExitCode::from(2);
            }
        }
    }
    if backends.is_empty() {
        backends = vec![
            "memory".into(),
            "sqlite".into(),
            "postgres".into(),
            "postgres-pgbouncer".into(),
        ];
    }
    let worker = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("countersign-store-worker")))
        .filter(|path| path.exists());
    if worker.is_none() {
        eprintln!(
            "error: `countersign-store-worker` is not beside this binary: build it with `cargo build -p countersign-conformance --bins`"
        );
        return ExitCode::FAILURE;
    }
    let options = KitOptions { worker, filter };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = false;
    for name in &backends {
        let backend: Arc<dyn StoreBackend> = match name.as_str() {
            "memory" => Arc::new(MemoryBackend),
            "sqlite" => Arc::new(SqliteBackend),
            "postgres" => match PostgresBackend::from_env("xtask_kit") {
                Ok(backend) => Arc::new(backend.with_options("max_connections=8")),
                Err(message) => {
                    println!("postgres: not run: {message}");
                    failed = true;
                    continue;
                }
            },
            "postgres-pgbouncer" => match PostgresBackend::pgbouncer_from_env("xtask_kit_pooled") {
                Ok(backend) => Arc::new(backend.with_options("max_connections=8")),
                Err(message) => {
                    println!("postgres-pgbouncer: not run: {message}");
                    failed = true;
                    continue;
                }
            },
            other => {
                eprintln!(
                    "unknown backend `{other}`: use memory, sqlite, postgres or postgres-pgbouncer"
                );
                return ExitCode::from(2);
            }
        };
        let report = runtime.block_on(store_kit::run(backend.as_ref(), &options));
        println!("{}", report.render());
        failed |= !report.failures().is_empty();
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
