//! `countersign-store-bench [--quick] [--only ROWS] [--callers LIST] [--calls N]`: allow + effect throughput (one `Control::execute` on a
//! fresh effect key per call: a reservation transaction and a finish transaction with its
//! receipt) on SQLite and on PostgreSQL, with 1, 2, 4, 8 and 16 concurrent callers in one
//! process (rows `sqlite` and `postgres`), then with 1, 2, 4 and 8 worker processes on one
//! PostgreSQL database, one caller each (rows `postgres-processes`, whose `callers` column
//! counts processes). Prints calls per second; asserts nothing about time. Build it with
//! `--release` for meaningful figures.
//!
//! `--only` picks rows (`sqlite`, `postgres`, `postgres-processes`, comma-separated; all by
//! default), `--callers` the caller and process counts (comma-separated), `--calls` the calls
//! per in-process row (3,200; worker rows make half as many): for profiling one row (issue #21).
//!
//! The worker processes are this binary again (`--worker URL CALLS INDEX`): each opens the
//! store, says `ready`, waits for `go` on its standard input, makes its calls and says `done`;
//! the time runs from the first `go` to the last `done`, so connecting is not counted.
#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::Instant;

use countersign::store::Store;
use countersign::{ActionRequest, ExecutorError, SystemClock};
use countersign_conformance::store_kit::cases::kit_control;
use countersign_conformance::store_kit::{PostgresBackend, SqliteBackend, StoreBackend};
use serde_json::json;

/// In-process caller counts.
const CALLERS: [usize; 5] = [1, 2, 4, 8, 16];
/// Worker process counts on PostgreSQL.
const PROCESSES: [usize; 4] = [1, 2, 4, 8];

/// `calls_each` allow + effect calls from each of `callers` tasks, keys prefixed by `tag`.
async fn calls(
    store: Arc<dyn Store>,
    tag: &str,
    callers: usize,
    calls_each: usize,
) -> Result<(), String> {
    let mut tasks = Vec::new();
    for caller in 0..callers {
        let control = kit_control(Arc::clone(&store), Arc::new(SystemClock), None);
        let tag = tag.to_owned();
        tasks.push(tokio::spawn(async move {
            for call in 0..calls_each {
                let request = ActionRequest::new(
                    "kit.effect",
                    &json!({"key": format!("bench-{tag}-{caller}-{call}")}),
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
    Ok(())
}

async fn measure(store: Arc<dyn Store>, callers: usize, calls_each: usize) -> Result<f64, String> {
    let started = Instant::now();
    calls(store, "in", callers, calls_each).await?;
    Ok((callers * calls_each) as f64 / started.elapsed().as_secs_f64())
}

/// One worker process, started and waiting for `go`.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    fn spawn(url: &str, calls_each: usize, index: usize) -> Result<Worker, String> {
        let binary = std::env::current_exe()
            .map_err(|error| format!("cannot find this binary to start workers: {error}"))?;
        let mut child = Command::new(binary)
            .args(["--worker", url, &calls_each.to_string(), &index.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|error| format!("cannot start a worker process: {error}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("a worker process has no pipes".to_owned());
        };
        let mut worker = Worker {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        };
        worker.expect("ready")?;
        Ok(worker)
    }

    fn expect(&mut self, word: &str) -> Result<(), String> {
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|error| format!("a worker process failed: {error}"))?;
        if line.trim() != word {
            return Err(format!(
                "a worker process said `{}` instead of `{word}` (its error is above)",
                line.trim()
            ));
        }
        Ok(())
    }
}

/// `processes` worker processes on the store at `url`, `calls_each` calls each.
fn measure_processes(url: &str, processes: usize, calls_each: usize) -> Result<f64, String> {
    let mut workers = (0..processes)
        .map(|index| Worker::spawn(url, calls_each, index))
        .collect::<Result<Vec<_>, _>>()?;
    let started = Instant::now();
    for worker in &mut workers {
        writeln!(worker.stdin, "go").map_err(|error| format!("a worker went away: {error}"))?;
        worker
            .stdin
            .flush()
            .map_err(|error| format!("a worker went away: {error}"))?;
    }
    for worker in &mut workers {
        worker.expect("done")?;
    }
    let elapsed = started.elapsed();
    for worker in &mut workers {
        let status = worker
            .child
            .wait()
            .map_err(|error| format!("a worker process failed: {error}"))?;
        if !status.success() {
            return Err(format!("a worker process ended with {status}"));
        }
    }
    Ok((processes * calls_each) as f64 / elapsed.as_secs_f64())
}

/// The worker side of [`measure_processes`].
async fn worker(url: &str, calls_each: usize, index: usize) -> Result<(), String> {
    let store = countersign::store::open_url_async(url)
        .await
        .map_err(|error| error.to_string())?;
    let say = |word: &str| -> Result<(), String> {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{word}").map_err(|error| error.to_string())?;
        stdout.flush().map_err(|error| error.to_string())
    };
    say("ready")?;
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|error| error.to_string())?;
    if line.trim() != "go" {
        return Err(format!("expected `go`, got `{}`", line.trim()));
    }
    calls(store, &format!("w{index}"), 1, calls_each).await?;
    say("done")
}

/// What to run: the command line's options.
struct Options {
    total: usize,
    only: Vec<String>,
    callers: Option<Vec<usize>>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let value = |flag: &str| {
            args.iter()
                .position(|arg| arg == flag)
                .map(|index| {
                    args.get(index + 1)
                        .cloned()
                        .ok_or(format!("{flag} needs a value"))
                })
                .transpose()
        };
        let numbers = |text: &str, flag: &str| -> Result<Vec<usize>, String> {
            text.split(',')
                .map(|part| {
                    part.parse::<usize>()
                        .ok()
                        .filter(|count| *count > 0)
                        .ok_or(format!("{flag} takes positive numbers, comma-separated"))
                })
                .collect()
        };
        let quick = args.iter().any(|arg| arg == "--quick");
        let total = match value("--calls")? {
            Some(calls) => numbers(&calls, "--calls")?[0],
            None if quick => 160,
            None => 3_200,
        };
        let only = value("--only")?
            .unwrap_or_else(|| "sqlite,postgres,postgres-processes".to_owned())
            .split(',')
            .map(str::to_owned)
            .collect();
        let callers = value("--callers")?
            .map(|list| numbers(&list, "--callers"))
            .transpose()?;
        Ok(Options {
            total,
            only,
            callers,
        })
    }

    fn counts(&self, default: &[usize]) -> Vec<usize> {
        self.callers.clone().unwrap_or_else(|| default.to_vec())
    }
}

async fn bench(options: Options) -> Result<(), String> {
    let total = options.total;
    let wants = |row: &str| options.only.iter().any(|only| only == row);
    // PostgreSQL is needed only for its rows: `--only sqlite` runs without a server.
    let postgres = if wants("postgres") || wants("postgres-processes") {
        Some(PostgresBackend::from_env("bench")?)
    } else {
        None
    };
    let mut backends: Vec<Arc<dyn StoreBackend>> = Vec::new();
    if wants("sqlite") {
        backends.push(Arc::new(SqliteBackend));
    }
    if let Some(postgres) = postgres.as_ref().filter(|_| wants("postgres")) {
        backends.push(Arc::new(
            postgres.clone().with_options("max_connections=20"),
        ));
    }
    println!("store                callers   calls    calls/s");
    for backend in &backends {
        for callers in options.counts(&CALLERS) {
            let fresh = backend.fresh(&format!("bench_{callers}")).await?;
            let rate = measure(Arc::clone(&fresh.store), callers, total / callers).await?;
            println!(
                "{:<20} {callers:>8} {:>7} {rate:>10.0}",
                backend.name(),
                total / callers * callers
            );
        }
    }
    let Some(postgres) = postgres.filter(|_| wants("postgres-processes")) else {
        return Ok(());
    };
    let workers = postgres.with_options("max_connections=4");
    println!("# postgres-processes: `callers` counts worker processes, one caller each");
    for processes in options.counts(&PROCESSES) {
        let fresh = workers.fresh(&format!("bench_p{processes}")).await?;
        let url = fresh.url.clone();
        let calls_each = total / 2 / processes;
        let rate =
            tokio::task::spawn_blocking(move || measure_processes(&url, processes, calls_each))
                .await
                .map_err(|error| error.to_string())??;
        println!(
            "{:<20} {processes:>8} {:>7} {rate:>10.0}",
            "postgres-processes",
            calls_each * processes
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
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
    let result = match args.get(1).map(String::as_str) {
        Some("--worker") => match (args.get(2), args.get(3), args.get(4)) {
            (Some(url), Some(calls_each), Some(index)) => {
                match (calls_each.parse::<usize>(), index.parse::<usize>()) {
                    (Ok(calls_each), Ok(index)) => runtime.block_on(worker(url, calls_each, index)),
                    _ => Err("--worker takes URL CALLS INDEX, both numbers".to_owned()),
                }
            }
            _ => Err("--worker takes URL CALLS INDEX".to_owned()),
        },
        _ => Options::parse(&args).and_then(|options| runtime.block_on(bench(options))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
