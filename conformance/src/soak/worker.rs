//! One soak worker process: `countersign-soak worker --url URL --run-dir DIR --instance ID …`.
//!
//! It opens the store, acts as the principal `agent:soak-INSTANCE` through one [`Control`], and
//! runs `--concurrency` traffic tasks, each picking one operation at a time ([`Op`]), plus one
//! task answering other instances' pending approvals. Every call's result is compared with what
//! that operation allows; anything else is counted `unexpected` and printed to standard error.
//! Once a second it prints its cumulative counts as one JSON line (`{"stats": {…}}`) on standard
//! output. It stops after the operations under way when its standard input says `stop` or
//! closes, prints its last counts and `{"stopped": true}`.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use countersign::{
    ActionRequest, AnswerDecision, AnswerError, ApprovalId, ApprovalState, Control, ControlError,
    Executed, ExecutorError, Policy, Principal, StaticIdentity,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::tally::{Mode, Tally};
use super::{INTRUDER, SOAK_POLICY, approver_of, principal_of};

/// The timeout of the calls whose executor hangs.
const TIMEOUT: Duration = Duration::from_millis(100);
/// How long a hanging executor sleeps (far past [`TIMEOUT`]).
const HANG: Duration = Duration::from_secs(5);
/// How long an approval flow waits for an answer before giving up.
const ANSWER_WAIT: Duration = Duration::from_secs(60);
/// Keys of this instance's committed effects kept for sending again later.
const RECENT: usize = 256;
/// Distinct shared keys per 10-second window, sent by every instance.
const SHARED_KEYS: u64 = 16;
/// Approval flows one worker keeps waiting at once (each in its own task, so a traffic task
/// never idles while a request waits for its answer).
const APPROVALS_IN_FLIGHT: usize = 8;

/// A worker's command line, as the supervisor builds it.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// The store URL.
    pub url: String,
    /// The run folder (tallies).
    pub run_dir: PathBuf,
    /// This instance (`w3-7`).
    pub instance: String,
    /// The seed of this instance's random choices.
    pub seed: u64,
    /// Traffic tasks.
    pub concurrency: usize,
    /// The effect lease.
    pub lease: Duration,
}

impl WorkerOptions {
    /// The arguments after `worker`.
    pub fn to_args(&self) -> Vec<String> {
        vec![
            "worker".to_owned(),
            "--url".to_owned(),
            self.url.clone(),
            "--run-dir".to_owned(),
            self.run_dir.display().to_string(),
            "--instance".to_owned(),
            self.instance.clone(),
            "--seed".to_owned(),
            self.seed.to_string(),
            "--concurrency".to_owned(),
            self.concurrency.to_string(),
            "--lease-ms".to_owned(),
            self.lease.as_millis().to_string(),
        ]
    }

    /// Parse the arguments after `worker`.
    ///
    /// # Errors
    ///
    /// A message naming a missing or bad argument.
    pub fn parse(args: &[String]) -> Result<WorkerOptions, String> {
        let value = |flag: &str| -> Result<&String, String> {
            args.iter()
                .position(|arg| arg == flag)
                .and_then(|at| args.get(at + 1))
                .ok_or_else(|| format!("a worker needs `{flag}`"))
        };
        let number = |flag: &str| -> Result<u64, String> {
            value(flag)?
                .parse()
                .map_err(|_| format!("a worker's `{flag}` must be a whole number"))
        };
        Ok(WorkerOptions {
            url: value("--url")?.clone(),
            run_dir: PathBuf::from(value("--run-dir")?),
            instance: value("--instance")?.clone(),
            seed: number("--seed")?,
            concurrency: usize::try_from(number("--concurrency")?)
                .unwrap_or(1)
                .max(1),
            lease: Duration::from_millis(number("--lease-ms")?),
        })
    }
}

/// One traffic operation.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// A fresh effect key with this executor behaviour (a refused one is then sent again).
    Fresh(Mode),
    /// An allowed action without an effect key.
    Note,
    /// An action the policy does not know: denied.
    Unknown,
    /// Approve, then answer: the request waits, in a task of its own, until another instance
    /// or the supervisor answers (a fresh key instead when [`APPROVALS_IN_FLIGHT`] wait).
    Approve,
    /// One fresh key sent twice at once: one runs, the other is refused.
    Concurrent,
    /// A key this instance committed earlier, sent again: refused.
    Again,
    /// A key every instance sends in the same 10-second window.
    Shared,
}

/// The traffic mix: operations and their weights.
const MIX: [(Op, u32); 11] = [
    (Op::Fresh(Mode::Run), 40),
    (Op::Note, 8),
    (Op::Unknown, 3),
    (Op::Approve, 10),
    (Op::Concurrent, 8),
    (Op::Again, 8),
    (Op::Shared, 8),
    (Op::Fresh(Mode::Refuse), 4),
    (Op::Fresh(Mode::Lose), 4),
    (Op::Fresh(Mode::HangBefore), 2),
    (Op::Fresh(Mode::HangAfter), 2),
];

fn pick(rng: &mut StdRng) -> Op {
    let total: u32 = MIX.iter().map(|(_, weight)| weight).sum();
    let mut roll = rng.random_range(0..total);
    for (op, weight) in MIX {
        if roll < weight {
            return op;
        }
        roll -= weight;
    }
    Op::Note
}

/// What a call came back with, as the soak tells results apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The executor ran and the effect is committed (or an action without effect ran).
    Ok,
    /// Refused: the key is committed (`in_progress` false) or held by another attempt.
    Duplicate { in_progress: bool },
    /// Refused: an earlier attempt's outcome is unknown.
    Ambiguous,
    /// The executor said it did not run.
    NotExecuted,
    /// The executor's outcome is unknown (error, timeout).
    OutcomeUnknown,
    /// A pending approval request was opened.
    ApprovalRequired(ApprovalId),
    /// The presented approval was denied.
    ApprovalDenied,
    /// The policy denied the action.
    Denied,
    /// The store failed (before or after the executor ran).
    Store { after_run: bool },
    /// Anything else (its reason code).
    Other(&'static str),
}

impl Seen {
    pub(crate) fn of<T>(result: &Result<Executed<T>, ControlError>) -> Seen {
        match result {
            Ok(_) => Seen::Ok,
            Err(error) => match error {
                ControlError::DuplicateEffect { in_progress, .. } => Seen::Duplicate {
                    in_progress: *in_progress,
                },
                ControlError::AmbiguousEffect { .. } => Seen::Ambiguous,
                ControlError::NotExecuted { .. } => Seen::NotExecuted,
                ControlError::OutcomeUnknown { .. } => Seen::OutcomeUnknown,
                ControlError::ApprovalRequired { request_id, .. } => {
                    Seen::ApprovalRequired(request_id.clone())
                }
                ControlError::ApprovalDenied { .. } => Seen::ApprovalDenied,
                ControlError::ActionDenied { .. } => Seen::Denied,
                ControlError::Store { after_run, .. } => Seen::Store {
                    after_run: *after_run,
                },
                other => Seen::Other(other.reason()),
            },
        }
    }

    fn label(&self) -> &'static str {
        match self {
            Seen::Ok => "ok",
            Seen::Duplicate { in_progress: true } => "duplicate_in_progress",
            Seen::Duplicate { in_progress: false } => "duplicate_committed",
            Seen::Ambiguous => "ambiguous_refused",
            Seen::NotExecuted => "not_executed",
            Seen::OutcomeUnknown => "outcome_unknown",
            Seen::ApprovalRequired(_) => "approval_required",
            Seen::ApprovalDenied => "approval_denied",
            Seen::Denied => "denied",
            Seen::Store { .. } => "store_error",
            Seen::Other(_) => "other",
        }
    }
}

/// Cumulative counts, printed once a second.
#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) counts: Mutex<BTreeMap<&'static str, u64>>,
    unexpected: Mutex<Vec<String>>,
}

impl Stats {
    pub(crate) fn bump(&self, name: &'static str) {
        if let Ok(mut counts) = self.counts.lock() {
            *counts.entry(name).or_default() += 1;
        }
    }

    fn unexpected(&self, what: String) {
        self.bump("unexpected");
        eprintln!("soak worker: unexpected: {what}");
        if let Ok(mut samples) = self.unexpected.lock()
            && samples.len() < 20
        {
            samples.push(what);
        }
    }

    fn line(&self) -> serde_json::Value {
        let counts = self
            .counts
            .lock()
            .map(|counts| counts.clone())
            .unwrap_or_default();
        let samples = self
            .unexpected
            .lock()
            .map(|samples| samples.clone())
            .unwrap_or_default();
        json!({"stats": counts, "unexpected": samples})
    }
}

/// Everything the tasks of one worker share.
struct Worker {
    control: Control,
    tally: Arc<Tally>,
    stats: Stats,
    instance: String,
    next_key: AtomicU64,
    recent: Mutex<VecDeque<String>>,
    stop: AtomicBool,
    approvals: Arc<tokio::sync::Semaphore>,
}

/// The executor: it runs (writes its tally line), refuses, loses its reply or hangs, as `mode`
/// says.
pub(crate) async fn act(tally: Arc<Tally>, key: String, mode: Mode) -> Result<(), ExecutorError> {
    match mode {
        Mode::Refuse => {
            return Err(ExecutorError::not_executed("soak: refused before running"));
        }
        Mode::HangBefore => tokio::time::sleep(HANG).await,
        Mode::Run | Mode::Lose | Mode::HangAfter => {}
    }
    tally.executed(&key, mode).map_err(|error| {
        ExecutorError::may_have_run(format!("soak: the tally write failed: {error}"))
    })?;
    match mode {
        Mode::Lose => Err(ExecutorError::may_have_run("soak: the reply was lost")),
        Mode::HangAfter => {
            tokio::time::sleep(HANG).await;
            Ok(())
        }
        Mode::Run | Mode::Refuse | Mode::HangBefore => Ok(()),
    }
}

impl Worker {
    fn key(&self) -> String {
        format!(
            "k:{}:{}",
            self.instance,
            self.next_key.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Send `action` on `key` with an executor in `mode`.
    async fn send(
        &self,
        action: &str,
        key: &str,
        mode: Mode,
        approval: Option<ApprovalId>,
    ) -> Seen {
        let mut request = ActionRequest::new(action, &json!({"key": key}));
        if matches!(mode, Mode::HangBefore | Mode::HangAfter) {
            request = request.with_timeout(TIMEOUT);
        }
        if let Some(id) = approval {
            request = request.with_approval(id);
        }
        self.stats.bump("calls");
        let tally = Arc::clone(&self.tally);
        let owned = key.to_owned();
        let result = self
            .control
            .execute(request, move |_arguments| act(tally, owned, mode))
            .await;
        let seen = Seen::of(&result);
        self.stats.bump(seen.label());
        if let (Seen::Store { .. }, Err(error)) = (&seen, &result) {
            eprintln!("soak worker: store error on `{key}`: {error}");
        }
        if seen == (Seen::Store { after_run: true })
            && let Err(error) = self.tally.store_failed(key)
        {
            eprintln!("soak worker: cannot write the tally: {error}");
        }
        if let (Seen::Other(_), Err(error)) = (&seen, &result) {
            self.stats
                .unexpected(format!("`{action}` on `{key}`: {error}"));
        }
        seen
    }

    /// Count `seen` as unexpected unless `allowed` says it may happen (a store failure is
    /// counted as one, never as unexpected).
    fn expect(&self, op: &str, key: &str, seen: &Seen, allowed: &[fn(&Seen) -> bool]) {
        if matches!(seen, Seen::Store { .. } | Seen::Other(_)) {
            return;
        }
        if !allowed.iter().any(|allow| allow(seen)) {
            self.stats
                .unexpected(format!("{op} on `{key}` answered {}", seen.label()));
        }
    }

    fn remember(&self, key: String) {
        if let Ok(mut recent) = self.recent.lock() {
            if recent.len() == RECENT {
                recent.pop_front();
            }
            recent.push_back(key);
        }
    }

    async fn one(self: &Arc<Self>, op: Op, rng: &mut StdRng) {
        match op {
            Op::Fresh(mode) => self.fresh(mode).await,
            Op::Note => {
                self.stats.bump("calls");
                let n = self.next_key.fetch_add(1, Ordering::Relaxed);
                let request = ActionRequest::new("soak.note", &json!({"n": n}));
                let result = self
                    .control
                    .execute(request, |_arguments| async { Ok::<_, ExecutorError>(()) })
                    .await;
                let seen = Seen::of(&result);
                self.stats.bump(seen.label());
                self.expect("note", "-", &seen, &[|seen| *seen == Seen::Ok]);
            }
            Op::Unknown => {
                self.stats.bump("calls");
                let request = ActionRequest::new("soak.unknown", &json!({}));
                let result = self
                    .control
                    .execute(request, |_arguments| async { Ok::<_, ExecutorError>(()) })
                    .await;
                let seen = Seen::of(&result);
                self.stats.bump(seen.label());
                self.expect(
                    "unknown action",
                    "-",
                    &seen,
                    &[|seen| *seen == Seen::Denied],
                );
            }
            Op::Approve => match Arc::clone(&self.approvals).try_acquire_owned() {
                Ok(permit) => {
                    let worker = Arc::clone(self);
                    tokio::spawn(async move {
                        worker.approve().await;
                        drop(permit);
                    });
                }
                Err(_) => self.fresh(Mode::Run).await,
            },
            Op::Concurrent => {
                let key = self.key();
                let (first, second) = tokio::join!(
                    self.send("soak.effect", &key, Mode::Run, None),
                    self.send("soak.effect", &key, Mode::Run, None)
                );
                let ran = [&first, &second]
                    .iter()
                    .filter(|seen| ***seen == Seen::Ok)
                    .count();
                let refused = [&first, &second]
                    .iter()
                    .filter(|seen| matches!(seen, Seen::Duplicate { .. }))
                    .count();
                if ran != 1 || refused != 1 {
                    let stored = [&first, &second]
                        .iter()
                        .any(|seen| matches!(seen, Seen::Store { .. } | Seen::Other(_)));
                    if !stored {
                        self.stats.unexpected(format!(
                            "two concurrent calls on `{key}` answered {} and {}",
                            first.label(),
                            second.label()
                        ));
                    }
                }
                if ran >= 1 {
                    self.remember(key);
                }
            }
            Op::Again => {
                let key = self.recent.lock().ok().and_then(|recent| {
                    (!recent.is_empty()).then(|| recent[rng.random_range(0..recent.len())].clone())
                });
                match key {
                    Some(key) => {
                        let seen = self.send("soak.effect", &key, Mode::Run, None).await;
                        self.expect(
                            "a committed key sent again",
                            &key,
                            &seen,
                            &[|seen| *seen == Seen::Duplicate { in_progress: false }],
                        );
                    }
                    None => self.fresh(Mode::Run).await,
                }
            }
            Op::Shared => {
                let window = super::unix_millis() / 10_000;
                let key = format!("shared:{window}:{}", rng.random_range(0..SHARED_KEYS));
                let seen = self.send("soak.effect", &key, Mode::Run, None).await;
                self.expect(
                    "a shared key",
                    &key,
                    &seen,
                    &[
                        |seen| *seen == Seen::Ok,
                        |seen| matches!(seen, Seen::Duplicate { .. }),
                        |seen| *seen == Seen::Ambiguous,
                    ],
                );
            }
        }
    }

    async fn fresh(&self, mode: Mode) {
        let key = self.key();
        if mode != Mode::Run
            && let Err(error) = self.tally.fault(&key, mode)
        {
            eprintln!("soak worker: cannot write the tally: {error}");
            return;
        }
        let seen = self.send("soak.effect", &key, mode, None).await;
        match mode {
            Mode::Run => {
                self.expect("a fresh key", &key, &seen, &[|seen| *seen == Seen::Ok]);
                if seen == Seen::Ok {
                    self.remember(key);
                }
            }
            Mode::Refuse => {
                self.expect(
                    "a refusing executor",
                    &key,
                    &seen,
                    &[|seen| *seen == Seen::NotExecuted],
                );
                if seen == Seen::NotExecuted {
                    // "Not executed" makes a retry legal: it must run now.
                    let again = self.send("soak.effect", &key, Mode::Run, None).await;
                    self.expect(
                        "a retry after not executed",
                        &key,
                        &again,
                        &[|seen| *seen == Seen::Ok],
                    );
                    if again == Seen::Ok {
                        self.remember(key);
                    }
                }
            }
            Mode::Lose | Mode::HangBefore | Mode::HangAfter => {
                self.expect(
                    mode.as_str(),
                    &key,
                    &seen,
                    &[|seen| *seen == Seen::OutcomeUnknown],
                );
            }
        }
    }

    /// Ask, wait for another instance or the supervisor to answer, then send the call again
    /// with the request: it runs when granted and is refused when denied.
    async fn approve(&self) {
        let key = self.key();
        let first = self.send("soak.approve", &key, Mode::Run, None).await;
        let Seen::ApprovalRequired(id) = first else {
            self.expect("an approval request", &key, &first, &[]);
            return;
        };
        let started = tokio::time::Instant::now();
        let state = loop {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            if started.elapsed() > ANSWER_WAIT {
                self.stats.bump("approvals_unanswered");
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            match self.control.store().approval(&id).await {
                Ok(Some(record)) if record.state == ApprovalState::Pending => {}
                Ok(Some(record)) => break record.state,
                Ok(None) => {
                    self.stats
                        .unexpected(format!("approval `{id}` for `{key}` is missing"));
                    return;
                }
                Err(error) => {
                    eprintln!("soak worker: store error reading approval `{id}`: {error}");
                    self.stats.bump("store_error");
                }
            }
        };
        let seen = self.send("soak.approve", &key, Mode::Run, Some(id)).await;
        match state {
            ApprovalState::Granted => {
                self.expect(
                    "a granted approval",
                    &key,
                    &seen,
                    &[|seen| *seen == Seen::Ok],
                );
            }
            ApprovalState::Denied => {
                self.expect(
                    "a denied approval",
                    &key,
                    &seen,
                    &[|seen| *seen == Seen::ApprovalDenied],
                );
            }
            other => {
                self.stats
                    .unexpected(format!("approval for `{key}` ended `{}`", other.as_str()));
            }
        }
    }

    /// Answer up to two pending requests of other instances, now and then first as someone
    /// the policy does not entitle (which must be refused).
    async fn answer_some(&self, rng: &mut StdRng) {
        let pending = match self
            .control
            .store()
            .approvals(Some(ApprovalState::Pending))
            .await
        {
            Ok(pending) => pending,
            Err(error) => {
                eprintln!("soak worker: store error listing pending approvals: {error}");
                self.stats.bump("store_error");
                return;
            }
        };
        let mine = principal_of(&self.instance);
        let theirs: Vec<_> = pending
            .into_iter()
            .filter(|record| record.principal.as_str() != mine)
            .collect();
        for _ in 0..2.min(theirs.len()) {
            let record = &theirs[rng.random_range(0..theirs.len())];
            if rng.random_bool(0.05) {
                self.stats.bump("answers");
                match self
                    .control
                    .answer(&record.id, AnswerDecision::Approve, INTRUDER, None)
                    .await
                {
                    Err(AnswerError::NotEntitled { .. }) => self.stats.bump("intruder_refused"),
                    Err(AnswerError::Store(error)) => {
                        eprintln!("soak worker: store error answering: {error}");
                        self.stats.bump("store_error");
                    }
                    Ok(_) => self.stats.unexpected(format!(
                        "`{INTRUDER}` answered approval `{}` and it counted",
                        record.id
                    )),
                    Err(other) => self.stats.unexpected(format!(
                        "`{INTRUDER}` answering approval `{}`: {other}",
                        record.id
                    )),
                }
            }
            let decision = if rng.random_bool(0.1) {
                AnswerDecision::Deny
            } else {
                AnswerDecision::Approve
            };
            let approver = approver_of(&self.instance);
            self.stats.bump("answers");
            let answered = self
                .control
                .answer(&record.id, decision, &approver, Some("soak"))
                .await;
            answered_as(&self.stats, &record.id, answered);
        }
    }
}

/// Count one answer's result (shared with the supervisor's answers).
pub(crate) fn answered_as(
    stats: &Stats,
    id: &ApprovalId,
    answered: Result<countersign::ApprovalRecord, AnswerError>,
) {
    match answered {
        Ok(record) => stats.bump(match record.state {
            ApprovalState::Denied => "answer_denied",
            _ => "answer_granted",
        }),
        Err(AnswerError::AlreadyDecided { .. }) => stats.bump("answer_already_decided"),
        Err(AnswerError::Expired { .. }) => stats.bump("answer_expired"),
        Err(AnswerError::Store(error)) => {
            eprintln!("soak: store error answering approval `{id}`: {error}");
            stats.bump("store_error");
        }
        Err(other) => stats.unexpected(format!("answering approval `{id}`: {other}")),
    }
}

fn say(value: &serde_json::Value) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{value}");
    let _ = stdout.flush();
}

/// Be one worker process until told to stop.
///
/// # Errors
///
/// A message when the store, the policy or the tally cannot be opened.
pub fn run(options: WorkerOptions) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the runtime: {error}"))?;
    runtime.block_on(serve(options))
}

async fn serve(options: WorkerOptions) -> Result<(), String> {
    let store = countersign::store::open_url_async(&options.url)
        .await
        .map_err(|error| format!("cannot open the store: {error}"))?;
    let policy = Policy::from_yaml_str(SOAK_POLICY, None)
        .map_err(|error| format!("the soak policy does not load: {error}"))?;
    let principal = Principal::new(principal_of(&options.instance))
        .map_err(|error| format!("bad instance name: {error}"))?;
    let control = Control::builder_shared(Arc::new(policy), store)
        .identity(StaticIdentity::new(principal))
        .lease(options.lease)
        .build();
    let worker = Arc::new(Worker {
        control,
        tally: Arc::new(Tally::open(&options.run_dir, &options.instance)?),
        stats: Stats::default(),
        instance: options.instance.clone(),
        next_key: AtomicU64::new(0),
        recent: Mutex::new(VecDeque::new()),
        stop: AtomicBool::new(false),
        approvals: Arc::new(tokio::sync::Semaphore::new(APPROVALS_IN_FLIGHT)),
    });
    let stopper = Arc::clone(&worker);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            match line {
                Ok(line) if line.trim() != "stop" => {}
                _ => break,
            }
        }
        stopper.stop.store(true, Ordering::Relaxed);
    });
    let mut tasks = Vec::new();
    for task in 0..options.concurrency {
        let worker = Arc::clone(&worker);
        let mut rng = StdRng::seed_from_u64(options.seed.wrapping_add(task as u64));
        tasks.push(tokio::spawn(async move {
            while !worker.stop.load(Ordering::Relaxed) {
                let op = pick(&mut rng);
                worker.one(op, &mut rng).await;
            }
        }));
    }
    let answerer = Arc::clone(&worker);
    let mut rng = StdRng::seed_from_u64(options.seed.wrapping_add(u64::from(u16::MAX)));
    tasks.push(tokio::spawn(async move {
        while !answerer.stop.load(Ordering::Relaxed) {
            // Listing the pending requests reads the whole approvals table: now and then only.
            let pause = rng.random_range(1_000..3_000);
            tokio::time::sleep(Duration::from_millis(pause)).await;
            answerer.answer_some(&mut rng).await;
        }
    }));
    let reporter = Arc::clone(&worker);
    let report = tokio::spawn(async move {
        while !reporter.stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            say(&reporter.stats.line());
        }
    });
    for task in tasks {
        task.await
            .map_err(|error| format!("a traffic task failed: {error}"))?;
    }
    // The approval flows still waiting see the stop flag within 100 ms.
    let all = u32::try_from(APPROVALS_IN_FLIGHT).unwrap_or(u32::MAX);
    let _flows = worker
        .approvals
        .acquire_many(all)
        .await
        .map_err(|error| format!("the approval flows' semaphore closed: {error}"))?;
    report.abort();
    say(&worker.stats.line());
    say(&json!({"stopped": true}));
    Ok(())
}
