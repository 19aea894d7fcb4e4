//! The soak (issue #22): mixed traffic through the real kernel from several worker processes on
//! one SQLite or PostgreSQL store, a worker killed with SIGKILL at random moments and restarted,
//! and a checker that reads the store and the executors' own tallies at the end.
//!
//! The `countersign-soak` binary is both sides: the supervisor ([`supervisor::run`]) and, run
//! again by it with `worker …`, each worker process ([`worker::run`]). What each side does and
//! what the checker proves is in `docs/soak.md`.
//!
//! Names used throughout:
//!
//! - a *slot* is one of the `--workers` places (`w0`, `w1`, …); each process started in a slot is
//!   an *instance* (`w3-7`: slot 3, its 7th start), which acts as the principal
//!   `agent:soak-w3-7` ([`principal_of`]), so every attempt in the store names the process that
//!   made it;
//! - a *tally* is the append-only file each instance writes outside the store
//!   (`RUN_DIR/tally/INSTANCE.log`, [`tally`]): one line per execution, written by the executor
//!   itself before it returns, and one line per fault it was told to inject.

pub mod check;
pub mod supervisor;
pub mod tally;
pub mod worker;

use std::path::PathBuf;
use std::time::Duration;

/// The soak's policy: `soak.effect` is allowed with an effect key, `soak.approve` needs one yes
/// from any `human:soak-*` approver (every worker and the supervisor answer as one), `soak.note`
/// is allowed without an effect key, and anything else is denied as unknown.
pub const SOAK_POLICY: &str = "\
schema: countersign.policy/v1
environment: soak
actions:
  soak.effect:
    effect: \"{key}\"
    decision: allow
  soak.approve:
    effect: \"{key}\"
    decision: approve
    approval:
      approvers: [\"human:soak-*\"]
  soak.note:
    decision: allow
";

/// The principal prefix of every soak worker instance.
const PRINCIPAL_PREFIX: &str = "agent:soak-";

/// The principal worker instance `instance` acts as (`agent:soak-w3-7`).
pub fn principal_of(instance: &str) -> String {
    format!("{PRINCIPAL_PREFIX}{instance}")
}

/// The worker instance a principal names, if it is a soak worker's.
pub fn instance_of(principal: &str) -> Option<&str> {
    principal.strip_prefix(PRINCIPAL_PREFIX)
}

/// The approver name worker instance (or `supervisor`) `who` answers as: entitled by
/// [`SOAK_POLICY`].
pub fn approver_of(who: &str) -> String {
    format!("human:soak-{who}")
}

/// The approver name the workers sometimes answer as to check that an answer from someone the
/// policy does not entitle is refused.
pub const INTRUDER: &str = "human:intruder";

/// Which store the soak runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// A SQLite file in the run folder.
    Sqlite,
    /// A fresh schema on the PostgreSQL server of `COUNTERSIGN_TEST_POSTGRES_URL` or `--store-url`.
    Postgres,
}

impl StoreKind {
    /// `sqlite` or `postgres`.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Sqlite => "sqlite",
            StoreKind::Postgres => "postgres",
        }
    }
}

/// What the supervisor was asked to do (`countersign-soak --help`).
#[derive(Clone, Debug)]
pub struct SoakOptions {
    /// The store kind.
    pub store: StoreKind,
    /// The PostgreSQL server URL (no `schema=`): `--store-url`, else the environment's.
    pub store_url: Option<String>,
    /// Worker processes.
    pub workers: usize,
    /// How long traffic runs (the check comes after).
    pub duration: Duration,
    /// Concurrent traffic tasks in each worker process.
    pub concurrency: usize,
    /// The seed of every random choice (kill times and traffic; timing still varies).
    pub seed: u64,
    /// Where the store file (SQLite), the tallies, the kill log and the worker logs go.
    pub run_dir: PathBuf,
    /// The mean time between two kills.
    pub kill_every: Duration,
    /// The effect lease each worker's control uses.
    pub lease: Duration,
    /// Print a progress line this often.
    pub progress_every: Duration,
}

/// The `--help` text of `countersign-soak` (and of `cargo xtask soak`).
pub const HELP: &str = "\
countersign-soak: mixed traffic through the real kernel from worker processes, a worker killed
with SIGKILL at random moments and restarted, then a check of the store against the executors'
own tallies (issue #22; docs/soak.md)

usage: countersign-soak [OPTIONS]
       countersign-soak check --run-dir DIR [--store-url URL]   (the checker again, on a
                            finished run: its store from run.json, its kills from kills.log)

  --store sqlite|postgres   the store (default sqlite): a file in the run folder, or a fresh
                            schema `soak_SEED` on the PostgreSQL server
  --store-url URL           the PostgreSQL server (default: COUNTERSIGN_TEST_POSTGRES_URL)
  --workers N               worker processes (default 4)
  --minutes M | --seconds S how long traffic runs (default 1 minute); the check comes after
  --concurrency N           traffic tasks in each worker (default 4)
  --kill-every SECONDS      mean time between two SIGKILLs (default 10)
  --lease SECONDS           the effect lease of every worker (default 30)
  --seed N                  seed of the random choices (default: from the clock; printed)
  --run-dir DIR             where the tallies, kill log, worker logs and the SQLite file go
                            (default: a new folder under the system's temporary folder)
  --progress SECONDS        a progress line this often (default 10)

Exits 0 when every check passes: no effect key executed twice, every ambiguous or stranded
effect attributed to a killed worker, an injected executor fault or a store error the worker
saw, the receipt log verifies and agrees with the effect and approval tables, and no call got
an outcome its traffic did not allow. Otherwise exits 1 and names what failed.
";

/// The parsed command line: the supervisor's options, a worker's, or help.
#[derive(Debug)]
pub enum Invocation {
    /// Print [`HELP`].
    Help,
    /// Run the soak.
    Supervise(SoakOptions),
    /// Be one worker process (started by the supervisor).
    Worker(worker::WorkerOptions),
    /// Run the checker again on a finished run: its folder and, if given, the store URL.
    Check(PathBuf, Option<String>),
}

/// Parse `countersign-soak`'s arguments (without the program name).
///
/// # Errors
///
/// A message naming the bad or unknown argument.
pub fn parse(args: &[String]) -> Result<Invocation, String> {
    if args.first().map(String::as_str) == Some("worker") {
        return worker::WorkerOptions::parse(&args[1..]).map(Invocation::Worker);
    }
    if args.first().map(String::as_str) == Some("check") {
        let value = |flag: &str| {
            args.iter()
                .position(|arg| arg == flag)
                .and_then(|at| args.get(at + 1))
                .cloned()
        };
        let run_dir = value("--run-dir").ok_or("`check` needs `--run-dir DIR`: see --help")?;
        return Ok(Invocation::Check(
            PathBuf::from(run_dir),
            value("--store-url"),
        ));
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0);
    let mut options = SoakOptions {
        store: StoreKind::Sqlite,
        store_url: None,
        workers: 4,
        duration: Duration::from_secs(60),
        concurrency: 4,
        seed,
        run_dir: PathBuf::new(),
        kill_every: Duration::from_secs(10),
        lease: Duration::from_secs(30),
        progress_every: Duration::from_secs(10),
    };
    let mut run_dir = None;
    let mut index = 0;
    while index < args.len() {
        let flag = args[index].as_str();
        if matches!(flag, "-h" | "--help" | "help") {
            return Ok(Invocation::Help);
        }
        let value = args
            .get(index + 1)
            .ok_or_else(|| format!("`{flag}` needs a value: see --help"))?;
        let number = |what: &str| -> Result<u64, String> {
            value
                .parse::<u64>()
                .map_err(|_| format!("`{flag} {value}`: {what} must be a whole number"))
        };
        match flag {
            "--store" => {
                options.store = match value.as_str() {
                    "sqlite" => StoreKind::Sqlite,
                    "postgres" => StoreKind::Postgres,
                    other => return Err(format!("`--store {other}`: use `sqlite` or `postgres`")),
                }
            }
            "--store-url" => options.store_url = Some(value.clone()),
            "--workers" => options.workers = positive(number("the worker count")?, flag)?,
            "--minutes" => options.duration = Duration::from_secs(60 * number("minutes")?),
            "--seconds" => options.duration = Duration::from_secs(number("seconds")?),
            "--concurrency" => options.concurrency = positive(number("the task count")?, flag)?,
            "--kill-every" => {
                options.kill_every = Duration::from_secs(positive(number("seconds")?, flag)? as u64)
            }
            "--lease" => {
                options.lease = Duration::from_secs(positive(number("seconds")?, flag)? as u64)
            }
            "--seed" => options.seed = number("the seed")?,
            "--run-dir" => run_dir = Some(PathBuf::from(value)),
            "--progress" => {
                options.progress_every =
                    Duration::from_secs(positive(number("seconds")?, flag)? as u64)
            }
            other => return Err(format!("unknown argument `{other}`: see --help")),
        }
        index += 2;
    }
    if options.duration.is_zero() {
        return Err("the soak needs a duration above zero (`--seconds` or `--minutes`)".to_owned());
    }
    options.run_dir = run_dir
        .unwrap_or_else(|| std::env::temp_dir().join(format!("countersign-soak-{}", options.seed)));
    Ok(Invocation::Supervise(options))
}

fn positive(value: u64, flag: &str) -> Result<usize, String> {
    match usize::try_from(value) {
        Ok(value) if value > 0 => Ok(value),
        _ => Err(format!("`{flag}` must be at least 1")),
    }
}

/// Milliseconds since the Unix epoch.
pub fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
