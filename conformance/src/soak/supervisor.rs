//! The soak's supervisor: it makes a fresh store, starts the worker processes (this binary
//! again, `worker …`), kills a random one with SIGKILL at random moments and starts another in
//! its slot, answers approvals nobody answered, sends lapsed reservations again, prints
//! progress, stops the workers, and runs the checker ([`super::check`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use countersign::store::Store;
use countersign::{
    AnswerDecision, ApprovalState, Clock, Control, EffectState, Policy, Principal, StaticIdentity,
    SystemClock,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use super::tally::{Mode, Tally};
use super::worker::{Seen, Stats, WorkerOptions, act, answered_as};
use super::{SOAK_POLICY, SoakOptions, StoreKind, approver_of, principal_of};

/// One worker process the supervisor started.
struct Running {
    instance: String,
    child: Child,
    stdin: Option<ChildStdin>,
    started: Instant,
}

/// A kill the supervisor made: the instance, its process id, when (ms since the Unix epoch).
#[derive(Clone, Debug)]
pub struct Kill {
    /// The instance killed.
    pub instance: String,
    /// Its process id.
    pub pid: u32,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// Run the soak; `Ok(true)` when every check passed.
///
/// # Errors
///
/// A message when the soak cannot be set up (the store, the run folder, a worker that cannot
/// start).
pub fn run(options: SoakOptions) -> Result<bool, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the runtime: {error}"))?;
    runtime.block_on(supervise(options))
}

/// The store URL for this run, on a fresh store: a new SQLite file, or a PostgreSQL schema
/// `soak_SEED` dropped first.
async fn fresh_store_url(options: &SoakOptions) -> Result<String, String> {
    match options.store {
        StoreKind::Sqlite => Ok(format!(
            "sqlite:{}",
            options.run_dir.join("soak.db").display()
        )),
        StoreKind::Postgres => {
            let base = match &options.store_url {
                Some(url) => url.clone(),
                None => crate::store_kit::postgres_url_from_env()?,
            };
            let schema = format!("soak_{}", options.seed);
            let admin = crate::store_kit::admin_pool(&base).await?;
            // INVARIANT (schema-name): `soak_` and digits only.
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
            )))
            .execute(&admin)
            .await
            .map_err(|error| format!("cannot drop schema `{schema}`: {error}"))?;
            admin.close().await;
            let joiner = if base.contains('?') { '&' } else { '?' };
            Ok(format!("{base}{joiner}schema={schema}&max_connections=4"))
        }
    }
}

fn spawn(
    options: &SoakOptions,
    url: &str,
    slot: usize,
    incarnation: u64,
    lines: &Sender<(String, String)>,
) -> Result<Running, String> {
    let instance = format!("w{slot}-{incarnation}");
    let worker = WorkerOptions {
        url: url.to_owned(),
        run_dir: options.run_dir.clone(),
        instance: instance.clone(),
        seed: options
            .seed
            .wrapping_mul(1_000_003)
            .wrapping_add((slot as u64) << 20)
            .wrapping_add(incarnation << 8),
        concurrency: options.concurrency,
        lease: options.lease,
    };
    let binary = std::env::current_exe()
        .map_err(|error| format!("cannot find this binary to start workers: {error}"))?;
    let logs = options.run_dir.join("logs");
    std::fs::create_dir_all(&logs)
        .map_err(|error| format!("cannot create `{}`: {error}", logs.display()))?;
    let stderr = std::fs::File::create(logs.join(format!("{instance}.err")))
        .map_err(|error| format!("cannot create the log of {instance}: {error}"))?;
    let mut child = Command::new(binary)
        .args(worker.to_args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|error| format!("cannot start worker {instance}: {error}"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| format!("worker {instance} has no stdout"))?;
    let sender = lines.clone();
    let name = instance.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send((name.clone(), line)).is_err() {
                break;
            }
        }
    });
    Ok(Running {
        instance,
        stdin: child.stdin.take(),
        child,
        started: Instant::now(),
    })
}

/// Everything the supervisor counts while the soak runs.
#[derive(Default)]
pub(crate) struct Tallied {
    /// Each instance's latest cumulative counts.
    pub(crate) latest: BTreeMap<String, BTreeMap<String, u64>>,
    /// Each instance's unexpected results (samples).
    pub(crate) unexpected: BTreeMap<String, Vec<String>>,
    /// The supervisor's own counts (answers, lapsed-lease probes).
    pub(crate) own: BTreeMap<&'static str, u64>,
    /// Instances that said they stopped.
    pub(crate) stopped: BTreeSet<String>,
}

impl Tallied {
    fn take(&mut self, receiver: &Receiver<(String, String)>) {
        while let Ok((instance, line)) = receiver.try_recv() {
            let Ok(value) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if let Some(stats) = value.get("stats").and_then(Value::as_object) {
                let counts = stats
                    .iter()
                    .filter_map(|(name, count)| Some((name.clone(), count.as_u64()?)))
                    .collect();
                self.latest.insert(instance.clone(), counts);
                let samples: Vec<String> = value["unexpected"]
                    .as_array()
                    .map(|samples| {
                        samples
                            .iter()
                            .filter_map(|sample| sample.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                if !samples.is_empty() {
                    self.unexpected.insert(instance.clone(), samples);
                }
            }
            if value.get("stopped") == Some(&Value::Bool(true)) {
                self.stopped.insert(instance);
            }
        }
    }

    /// One count summed over every instance and the supervisor.
    pub(crate) fn total(&self, name: &str) -> u64 {
        let workers: u64 = self
            .latest
            .values()
            .filter_map(|counts| counts.get(name))
            .sum();
        workers + self.own.get(name).copied().unwrap_or(0)
    }

    /// Every count, summed.
    pub(crate) fn totals(&self) -> BTreeMap<String, u64> {
        let mut totals: BTreeMap<String, u64> = BTreeMap::new();
        for counts in self.latest.values() {
            for (name, count) in counts {
                *totals.entry(name.clone()).or_default() += count;
            }
        }
        for (name, count) in &self.own {
            *totals.entry((*name).to_owned()).or_default() += count;
        }
        totals
    }
}

fn log_line(path: &Path, value: &Value) -> Result<(), String> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|error| format!("cannot open `{}`: {error}", path.display()))?;
    writeln!(file, "{value}").map_err(|error| format!("cannot write `{}`: {error}", path.display()))
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

/// Send every reservation whose lease lapsed a second or more ago again, as the supervisor:
/// the kernel must refuse it as ambiguous (and record the lapse). Its executor writes the
/// supervisor's tally, so a wrong "go ahead" shows up as a double execution.
async fn probe_lapsed(control: &Control, tally: &Arc<Tally>, tallied: &mut Tallied) {
    let reserved = match control.store().effects(Some(EffectState::Reserved)).await {
        Ok(reserved) => reserved,
        Err(error) => {
            eprintln!("soak: store error listing reservations: {error}");
            *tallied.own.entry("store_error").or_default() += 1;
            return;
        }
    };
    let now = SystemClock.now();
    for record in reserved {
        if record.lease_until.plus(Duration::from_secs(1)) > now {
            continue;
        }
        let key = record.key.as_str().to_owned();
        *tallied.own.entry("calls").or_default() += 1;
        *tallied.own.entry("lapsed_probes").or_default() += 1;
        let request = countersign::ActionRequest::new("soak.effect", &json!({"key": key}));
        let tally = Arc::clone(tally);
        let owned = key.clone();
        let result = control
            .execute(request, move |_arguments| act(tally, owned, Mode::Run))
            .await;
        match Seen::of(&result) {
            Seen::Ambiguous => *tallied.own.entry("ambiguous_refused").or_default() += 1,
            Seen::Store { .. } => {
                if let Err(error) = &result {
                    eprintln!("soak: store error sending `{key}` again: {error}");
                }
                *tallied.own.entry("store_error").or_default() += 1;
            }
            other => {
                *tallied.own.entry("unexpected").or_default() += 1;
                let sample = format!("a lapsed reservation `{key}` sent again answered {other:?}");
                eprintln!("soak: unexpected: {sample}");
                tallied
                    .unexpected
                    .entry("supervisor".to_owned())
                    .or_default()
                    .push(sample);
            }
        }
    }
}

fn progress(started: Instant, tallied: &Tallied, kills: usize, running: usize) {
    let elapsed = started.elapsed().as_secs_f64();
    let calls = tallied.total("calls");
    println!(
        "soak [{:>5.0}s] calls {calls} ({:.0}/s)  ran {}  refused duplicate {}  ambiguous {}  unknown outcome {}  answers {}  kills {kills}  workers {running}  store errors {}  unexpected {}  load {}",
        elapsed,
        calls as f64 / elapsed.max(0.001),
        tallied.total("ok"),
        tallied.total("duplicate_committed") + tallied.total("duplicate_in_progress"),
        tallied.total("ambiguous_refused"),
        tallied.total("outcome_unknown"),
        tallied.total("answers"),
        tallied.total("store_error"),
        tallied.total("unexpected"),
        std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|text| text.split_whitespace().next().map(str::to_owned))
            .unwrap_or_default(),
    );
    let _ = std::io::stdout().flush();
}

async fn supervise(options: SoakOptions) -> Result<bool, String> {
    std::fs::create_dir_all(&options.run_dir)
        .map_err(|error| format!("cannot create `{}`: {error}", options.run_dir.display()))?;
    if super::tally::folder(&options.run_dir).exists() {
        return Err(format!(
            "`{}` holds an earlier run's tallies: give another `--run-dir` (or another `--seed`)",
            options.run_dir.display()
        ));
    }
    let url = fresh_store_url(&options).await?;
    // Open (and migrate) the store once before any worker does.
    let store: Arc<dyn Store> = countersign::store::open_url_async(&url)
        .await
        .map_err(|error| format!("cannot open the soak's store: {error}"))?;
    let policy = Arc::new(
        Policy::from_yaml_str(SOAK_POLICY, None)
            .map_err(|error| format!("the soak policy does not load: {error}"))?,
    );
    let principal =
        Principal::new(principal_of("supervisor")).map_err(|error| error.to_string())?;
    let control = Control::builder_shared(policy, Arc::clone(&store))
        .identity(StaticIdentity::new(principal))
        .lease(options.lease)
        .build();
    let own_tally = Arc::new(Tally::open(&options.run_dir, "supervisor")?);
    let kills_log = options.run_dir.join("kills.log");
    let shown_url = url.split('?').next().unwrap_or(&url).to_owned();
    println!(
        "soak: store {} ({shown_url}), {} workers x {} tasks, {}s of traffic, a kill every ~{}s, lease {}s, seed {}, run folder {}",
        options.store.as_str(),
        options.workers,
        options.concurrency,
        options.duration.as_secs(),
        options.kill_every.as_secs(),
        options.lease.as_secs(),
        options.seed,
        options.run_dir.display()
    );
    log_line(
        &options.run_dir.join("run.json"),
        &json!({
            "store": options.store.as_str(), "url": shown_url, "workers": options.workers,
            "concurrency": options.concurrency, "seconds": options.duration.as_secs(),
            "seed": options.seed, "kill_every_s": options.kill_every.as_secs(),
            "lease_s": options.lease.as_secs(), "started_ms": super::unix_millis(),
            "store_url": without_password(&url),
        }),
    )?;

    let (sender, receiver) = channel();
    let mut incarnations = vec![0u64; options.workers];
    let mut running = Vec::new();
    for (slot, incarnation) in incarnations.iter_mut().enumerate() {
        *incarnation += 1;
        running.push(spawn(&options, &url, slot, *incarnation, &sender)?);
    }
    let mut rng = StdRng::seed_from_u64(options.seed);
    let mut tallied = Tallied::default();
    let mut kills: Vec<Kill> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let started = Instant::now();
    let next_kill_after = |rng: &mut StdRng| {
        options
            .kill_every
            .mul_f64(rng.random_range(0.2..1.8))
            .max(Duration::from_millis(200))
    };
    let mut next_kill = started + next_kill_after(&mut rng);
    let mut next_answer = started + Duration::from_secs(1);
    let mut next_probe = started + Duration::from_secs(10);
    let mut next_progress = started + options.progress_every;
    while started.elapsed() < options.duration {
        tokio::time::sleep(Duration::from_millis(100)).await;
        tallied.take(&receiver);
        let now = Instant::now();
        // A worker that ended without being killed is a failure: start another in its slot.
        for slot in 0..running.len() {
            if let Ok(Some(status)) = running[slot].child.try_wait() {
                let instance = running[slot].instance.clone();
                let log = options.run_dir.join("logs").join(format!("{instance}.err"));
                failures.push(format!(
                    "worker {instance} exited on its own ({status}) after {:.1}s: {}",
                    running[slot].started.elapsed().as_secs_f64(),
                    tail(&log)
                ));
                eprintln!("soak: {}", failures.last().map_or("", String::as_str));
                incarnations[slot] += 1;
                running[slot] = spawn(&options, &url, slot, incarnations[slot], &sender)?;
            }
        }
        if now >= next_kill {
            let slot = rng.random_range(0..running.len());
            let victim = &mut running[slot];
            let pid = victim.child.id();
            // Child::kill is SIGKILL on Unix.
            victim
                .child
                .kill()
                .map_err(|error| format!("cannot kill worker {}: {error}", victim.instance))?;
            let at_ms = super::unix_millis();
            let _ = victim.child.wait();
            let kill = Kill {
                instance: victim.instance.clone(),
                pid,
                at_ms,
            };
            log_line(
                &kills_log,
                &json!({"instance": kill.instance, "pid": pid, "at_ms": at_ms,
                        "after_s": started.elapsed().as_secs_f64()}),
            )?;
            kills.push(kill);
            incarnations[slot] += 1;
            running[slot] = spawn(&options, &url, slot, incarnations[slot], &sender)?;
            next_kill = now + next_kill_after(&mut rng);
        }
        if now >= next_answer {
            if let Err(error) = supervisor_answers(&control, &mut rng, &mut tallied.own).await {
                *tallied.own.entry("store_error").or_default() += 1;
                eprintln!("soak: {error}");
            }
            next_answer = now + Duration::from_secs(1);
        }
        if now >= next_probe {
            probe_lapsed(&control, &own_tally, &mut tallied).await;
            next_probe = now + Duration::from_secs(10);
        }
        if now >= next_progress {
            progress(started, &tallied, kills.len(), running.len());
            next_progress = now + options.progress_every;
        }
    }
    let traffic_time = started.elapsed();
    // Stop: every worker finishes the operations under way and exits.
    for worker in &mut running {
        if let Some(mut stdin) = worker.stdin.take() {
            let _ = writeln!(stdin, "stop");
        }
    }
    let stop_started = Instant::now();
    for worker in &mut running {
        loop {
            match worker.child.try_wait() {
                Ok(Some(status)) if status.success() => break,
                Ok(Some(status)) => {
                    failures.push(format!(
                        "worker {} ended with {status} when told to stop",
                        worker.instance
                    ));
                    break;
                }
                Ok(None) if stop_started.elapsed() > Duration::from_secs(90) => {
                    failures.push(format!(
                        "worker {} did not stop within 90s; killed",
                        worker.instance
                    ));
                    let _ = worker.child.kill();
                    let _ = worker.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(error) => {
                    failures.push(format!(
                        "cannot wait for worker {}: {error}",
                        worker.instance
                    ));
                    break;
                }
            }
        }
    }
    drop(sender);
    // The reader threads end at each worker's end of output.
    std::thread::sleep(Duration::from_millis(200));
    tallied.take(&receiver);
    println!(
        "soak: traffic stopped after {:.0}s; {} kills; checking the store and the tallies",
        traffic_time.as_secs_f64(),
        kills.len()
    );
    let killed: BTreeSet<String> = kills.iter().map(|kill| kill.instance.clone()).collect();
    let report = super::check::run(store.as_ref(), &options.run_dir, &killed).await?;
    let passed = super::check::print(
        &report,
        &tallied,
        &kills,
        &failures,
        traffic_time,
        options.workers,
    );
    log_line(
        &options.run_dir.join("summary.json"),
        &super::check::summary(&report, &tallied, &kills, &failures, traffic_time, passed),
    )?;
    Ok(passed)
}

/// `url` with the password of its `user:password@` part, if any, replaced by `***` (run.json
/// keeps the store URL for `countersign-soak check`, never a secret).
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user, host)) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{name}:***@{host}{tail}")
        }
        _ => url.to_owned(),
    }
}

/// `countersign-soak check --run-dir DIR [--store-url URL]`: run the checker again on a
/// finished run (its store URL from `run.json` unless given, its kills from `kills.log`);
/// `Ok(true)` when every check passes.
///
/// # Errors
///
/// A message when the run folder or the store cannot be read.
pub fn check_again(run_dir: &Path, store_url: Option<String>) -> Result<bool, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the runtime: {error}"))?;
    runtime.block_on(async {
        let read = |name: &str| {
            let path = run_dir.join(name);
            std::fs::read_to_string(&path)
                .map_err(|error| format!("cannot read `{}`: {error}", path.display()))
        };
        let run: Value = serde_json::from_str(read("run.json")?.trim())
            .map_err(|error| format!("run.json does not parse: {error}"))?;
        let url = match store_url {
            Some(url) => url,
            None => run["store_url"]
                .as_str()
                .ok_or("run.json names no store_url: pass --store-url")?
                .to_owned(),
        };
        let store = countersign::store::open_url_async(&url)
            .await
            .map_err(|error| format!("cannot open `{url}`: {error}"))?;
        let mut kills = Vec::new();
        for line in read("kills.log").unwrap_or_default().lines() {
            let kill: Value = serde_json::from_str(line)
                .map_err(|error| format!("kills.log: `{line}`: {error}"))?;
            kills.push(Kill {
                instance: kill["instance"].as_str().unwrap_or_default().to_owned(),
                pid: u32::try_from(kill["pid"].as_u64().unwrap_or(0)).unwrap_or(0),
                at_ms: kill["at_ms"].as_u64().unwrap_or(0),
            });
        }
        let killed: BTreeSet<String> = kills.iter().map(|kill| kill.instance.clone()).collect();
        let report = super::check::run(store.as_ref(), run_dir, &killed).await?;
        let workers = usize::try_from(run["workers"].as_u64().unwrap_or(0)).unwrap_or(0);
        Ok(super::check::print(
            &report,
            &Tallied::default(),
            &kills,
            &[],
            Duration::ZERO,
            workers,
        ))
    })
}

/// The supervisor's answers: one pass over the requests pending for more than a second (the
/// workers answer some before that), answered as `human:soak-supervisor` (approve, one in ten
/// denied); the results are added to `counts`.
///
/// # Errors
///
/// A message when the store cannot be read.
async fn supervisor_answers(
    control: &Control,
    rng: &mut StdRng,
    counts: &mut BTreeMap<&'static str, u64>,
) -> Result<(), String> {
    let pending = control
        .store()
        .approvals(Some(ApprovalState::Pending))
        .await
        .map_err(|error| format!("cannot list pending approvals: {error}"))?;
    let stats = Stats::default();
    let before = SystemClock.now();
    for record in pending {
        if record.created_at.plus(Duration::from_secs(1)) > before {
            continue;
        }
        let decision = if rng.random_bool(0.1) {
            AnswerDecision::Deny
        } else {
            AnswerDecision::Approve
        };
        stats.bump("answers");
        let answered = control
            .answer(
                &record.id,
                decision,
                &approver_of("supervisor"),
                Some("soak"),
            )
            .await;
        answered_as(&stats, &record.id, answered);
    }
    if let Ok(mine) = stats.counts.lock() {
        for (name, count) in mine.iter() {
            *counts.entry(*name).or_default() += count;
        }
    }
    Ok(())
}
