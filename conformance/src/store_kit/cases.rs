//! The store kit's cases, by suite: `reservation`, `approvals`, `resolution`, `durability`,
//! `evidence`, `crash`. Each is an async function over a fresh store that returns `Err` with
//! what went wrong.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use countersign::evidence::{ReceiptDraft, ReceiptKind, ReceiptOutcome, StoredReceipt};
use countersign::store::Store;
use countersign::{
    ActionRequest, AnswerDecision, ApprovalId, ApprovalState, Clock, Control, ControlError,
    EffectKey, EffectState, ExecutorError, ManualClock, Policy, Principal, StaticIdentity,
    SystemClock, Timestamp,
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::worker::{self, KIT_POLICY, KIT_PRINCIPAL, Worker, start_in, unix_millis};
use super::{CaseContext, KitError};

/// What a case needs from a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Only this process.
    InProcess,
    /// Other OS processes opening the same store.
    CrossProcess,
    /// A store that keeps what was written when opened again.
    Durable,
}

/// A case's body.
pub type CaseFn = for<'a> fn(&'a CaseContext<'a>) -> BoxFuture<'a, Result<(), KitError>>;

/// One case.
#[derive(Clone, Copy)]
pub struct Case {
    /// Its suite.
    pub suite: &'static str,
    /// Its name, saying the behaviour it checks.
    pub name: &'static str,
    /// What it needs.
    pub needs: Needs,
    /// Its body.
    pub run: CaseFn,
}

impl Case {
    /// `suite/name`.
    pub fn path(&self) -> String {
        format!("{}/{}", self.suite, self.name)
    }
}

macro_rules! case {
    ($suite:literal, $name:ident, $needs:ident) => {
        Case {
            suite: $suite,
            name: stringify!($name),
            needs: Needs::$needs,
            run: |context| Box::pin($name(context)),
        }
    };
}

/// Every case, in report order.
pub fn all() -> Vec<Case> {
    vec![
        case!("reservation", first_attempt_reserves_and_commits, InProcess),
        case!(
            "reservation",
            failed_record_may_be_reserved_again,
            InProcess
        ),
        case!("reservation", live_lease_refuses_as_in_progress, InProcess),
        case!(
            "reservation",
            committed_effect_refuses_as_duplicate,
            InProcess
        ),
        case!(
            "reservation",
            ambiguous_effect_refuses_until_resolved,
            InProcess
        ),
        case!(
            "reservation",
            lapsed_lease_becomes_ambiguous_and_is_never_released,
            InProcess
        ),
        case!(
            "reservation",
            refusal_changes_nothing_and_leaves_a_receipt,
            InProcess
        ),
        case!("reservation", one_winner_among_threads, InProcess),
        case!("reservation", one_winner_among_8_processes, CrossProcess),
        case!("approvals", one_consumer_among_threads, InProcess),
        case!("approvals", one_consumer_across_processes, CrossProcess),
        case!(
            "approvals",
            revoke_versus_consume_across_processes_has_one_winner,
            CrossProcess
        ),
        case!(
            "approvals",
            grant_versus_deny_race_has_one_winner,
            InProcess
        ),
        case!("approvals", binding_to_one_hash, InProcess),
        case!("approvals", single_use, InProcess),
        case!("approvals", expiry_is_recorded, InProcess),
        case!(
            "approvals",
            refused_reservation_leaves_the_approval_granted,
            InProcess
        ),
        case!("approvals", first_answer_stands, InProcess),
        case!("approvals", reentry_asks_once, InProcess),
        case!("resolution", only_an_ambiguous_effect_resolves, InProcess),
        case!("resolution", records_who_resolved, InProcess),
        case!(
            "resolution",
            failed_resolution_permits_a_new_attempt,
            InProcess
        ),
        case!("durability", ambiguous_state_survives_reopen, Durable),
        case!("durability", terminal_states_survive_reopen, Durable),
        case!("durability", receipts_survive_reopen_and_verify, Durable),
        case!("evidence", receipts_round_trip_without_coercion, InProcess),
        case!("evidence", chain_intact_under_concurrent_writers, InProcess),
        case!(
            "evidence",
            chain_intact_under_concurrent_processes,
            CrossProcess
        ),
        case!("evidence", every_refusal_leaves_one_receipt, InProcess),
        case!("evidence", chain_head_is_the_newest_receipt, InProcess),
        case!(
            "crash",
            killed_worker_leaves_an_ambiguous_effect_never_run_again,
            CrossProcess
        ),
        case!(
            "crash",
            killed_approved_attempt_leaves_a_receipt_naming_it,
            CrossProcess
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// Helpers

fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), KitError> {
    if condition { Ok(()) } else { Err(message()) }
}

fn store_error(what: &str) -> impl Fn(countersign::StoreError) -> KitError + '_ {
    move |error| format!("{what}: store error: {error}")
}

/// The kit's control over `store`.
pub fn kit_control(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    lease: Option<Duration>,
) -> Control {
    // INVARIANT (kit-policy): KIT_POLICY and KIT_PRINCIPAL are constants checked by every case.
    #[allow(clippy::expect_used)]
    let policy = Policy::from_yaml_str(KIT_POLICY, None).expect("the kit policy loads");
    #[allow(clippy::expect_used)]
    let principal = Principal::new(KIT_PRINCIPAL).expect("the kit principal is valid");
    let mut builder = Control::builder_shared(Arc::new(policy), store)
        .identity(StaticIdentity::new(principal))
        .clock(clock);
    if let Some(lease) = lease {
        builder = builder.lease(lease);
    }
    builder.build()
}

fn system_control(store: Arc<dyn Store>) -> Control {
    kit_control(store, Arc::new(SystemClock), None)
}

fn manual_clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Timestamp::from_millis(unix_millis())))
}

fn call(key: &str) -> ActionRequest {
    ActionRequest::new("kit.effect", &json!({ "key": key }))
}

fn approve_call(key: &str) -> ActionRequest {
    ActionRequest::new("kit.approve", &json!({ "key": key }))
}

fn key(text: &str) -> Result<EffectKey, KitError> {
    EffectKey::new(text).map_err(|error| error.to_string())
}

/// Run `request` with an executor that counts its calls, sleeps `sleep`, and returns `result`.
async fn run_counted(
    control: &Control,
    request: ActionRequest,
    calls: &Arc<AtomicUsize>,
    sleep: Duration,
    result: fn() -> Result<(), ExecutorError>,
) -> Result<(), ControlError> {
    let calls = Arc::clone(calls);
    control
        .execute(request, move |_arguments| async move {
            calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(sleep).await;
            result()
        })
        .await
        .map(drop)
}

fn ok() -> Result<(), ExecutorError> {
    Ok(())
}

fn not_executed() -> Result<(), ExecutorError> {
    Err(ExecutorError::not_executed(
        "the upstream refused before any byte was sent",
    ))
}

fn unknown() -> Result<(), ExecutorError> {
    Err(ExecutorError::failed(
        "the connection dropped after the request went out",
    ))
}

async fn effect_state(store: &dyn Store, key_text: &str) -> Result<Option<EffectState>, KitError> {
    Ok(store
        .effect(&key(key_text)?)
        .await
        .map_err(store_error("reading the effect"))?
        .map(|record| record.state))
}

async fn all_receipts(store: &dyn Store) -> Result<Vec<StoredReceipt>, KitError> {
    let mut receipts = Vec::new();
    loop {
        let after = receipts.last().map_or(0, |last: &StoredReceipt| last.seq);
        let page = store
            .receipts(after, 1_000)
            .await
            .map_err(store_error("reading receipts"))?;
        if page.is_empty() {
            return Ok(receipts);
        }
        receipts.extend(page);
    }
}

/// The chain has `expected` receipts (if given), no gaps, no fork, and verifies.
async fn check_chain(store: &dyn Store, expected: Option<usize>) -> Result<(), KitError> {
    let receipts = all_receipts(store).await?;
    if let Some(expected) = expected {
        ensure(receipts.len() == expected, || {
            format!("expected {expected} receipts, found {}", receipts.len())
        })?;
    }
    let mut previous = HashSet::new();
    for (index, receipt) in receipts.iter().enumerate() {
        ensure(receipt.seq == index as u64 + 1, || {
            format!(
                "receipt seq {} at position {}: a gap",
                receipt.seq,
                index + 1
            )
        })?;
        ensure(previous.insert(receipt.prev_hash.clone()), || {
            format!(
                "receipt {} shares its prev_hash with another: a fork",
                receipt.seq
            )
        })?;
    }
    let report = countersign::evidence::verify_store(store, None)
        .await
        .map_err(store_error("verifying"))?;
    ensure(report.first_break.is_none(), || {
        format!("the chain is broken: {:?}", report.first_break)
    })
}

/// Ask for an approval of `kit.approve` on `key_text` and return the pending request's id.
async fn request_approval(control: &Control, key_text: &str) -> Result<ApprovalId, KitError> {
    match control
        .execute(approve_call(key_text), |_arguments| async {
            Ok::<_, ExecutorError>(())
        })
        .await
    {
        Err(ControlError::ApprovalRequired { request_id, .. }) => Ok(request_id),
        Err(other) => Err(format!(
            "expected approval_required, got {}: {other}",
            other.reason()
        )),
        Ok(_) => Err("an approve action ran without an approval".to_owned()),
    }
}

async fn granted(control: &Control, key_text: &str) -> Result<ApprovalId, KitError> {
    let id = request_approval(control, key_text).await?;
    control
        .answer(&id, AnswerDecision::Approve, "human:kit-approver", None)
        .await
        .map_err(|error| format!("approving: {error}"))?;
    Ok(id)
}

async fn approval_state(store: &dyn Store, id: &ApprovalId) -> Result<ApprovalState, KitError> {
    store
        .approval(id)
        .await
        .map_err(store_error("reading the approval"))?
        .map(|record| record.state)
        .ok_or_else(|| format!("approval {id} is missing"))
}

fn reason_of(result: &Result<(), ControlError>) -> &'static str {
    match result {
        Ok(()) => "ran",
        Err(error) => error.reason(),
    }
}

/// Tally of outcomes: reason → count.
fn tally<'a>(reasons: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for reason in reasons {
        *counts.entry(reason.to_owned()).or_default() += 1;
    }
    counts
}

fn only_typed_losers(counts: &BTreeMap<String, usize>, allowed: &[&str]) -> Result<(), KitError> {
    ensure(
        counts
            .keys()
            .all(|reason| reason == "ran" || allowed.contains(&reason.as_str())),
        || format!("a loser got something other than {allowed:?}: {counts:?}"),
    )
}

/// Several handles on the case's store (separate connections where the backend has them).
async fn handles(
    context: &CaseContext<'_>,
    fresh: &super::Fresh,
    count: usize,
) -> Result<Vec<Arc<dyn Store>>, KitError> {
    let mut stores = vec![Arc::clone(&fresh.store)];
    for _ in 1..count {
        stores.push(context.backend.reopen(fresh).await?);
    }
    Ok(stores)
}

/// Run `body` (blocking work with worker processes) without stalling the runtime.
fn blocking<R>(body: impl FnOnce() -> R) -> R {
    tokio::task::block_in_place(body)
}

// ---------------------------------------------------------------------------------------------
// reservation

async fn first_attempt_reserves_and_commits(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let calls = Arc::new(AtomicUsize::new(0));
    run_counted(&control, call("k1"), &calls, Duration::ZERO, ok)
        .await
        .map_err(|error| format!("first attempt refused: {error}"))?;
    let record = fresh
        .store
        .effect(&key("k1")?)
        .await
        .map_err(store_error("reading"))?
        .ok_or("no effect record after a committed attempt")?;
    ensure(
        record.state == EffectState::Committed && record.attempts == 1,
        || {
            format!(
                "expected committed after 1 attempt, found {} after {}",
                record.state, record.attempts
            )
        },
    )?;
    ensure(calls.load(Ordering::SeqCst) == 1, || {
        "the executor did not run once".to_owned()
    })?;
    check_chain(fresh.store.as_ref(), Some(1)).await
}

async fn failed_record_may_be_reserved_again(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let calls = Arc::new(AtomicUsize::new(0));
    let first = run_counted(&control, call("k1"), &calls, Duration::ZERO, not_executed).await;
    ensure(reason_of(&first) == "not_executed", || {
        format!("first attempt: {}", reason_of(&first))
    })?;
    ensure(
        effect_state(fresh.store.as_ref(), "k1").await? == Some(EffectState::Failed),
        || "a not-executed attempt must leave the effect failed".to_owned(),
    )?;
    run_counted(&control, call("k1"), &calls, Duration::ZERO, ok)
        .await
        .map_err(|error| format!("a retry after failed was refused: {error}"))?;
    let record = fresh
        .store
        .effect(&key("k1")?)
        .await
        .map_err(store_error("reading"))?;
    ensure(
        record
            .as_ref()
            .is_some_and(|record| record.attempts == 2 && record.state == EffectState::Committed),
        || format!("expected committed after 2 attempts, found {record:?}"),
    )?;
    ensure(calls.load(Ordering::SeqCst) == 2, || {
        "the executor should have run twice".to_owned()
    })
}

/// Start an attempt whose executor waits for `release`; returns once the executor is running.
async fn hold_attempt(
    control: &Control,
    key_text: &str,
    calls: &Arc<AtomicUsize>,
) -> Result<
    (
        tokio::task::JoinHandle<Result<(), ControlError>>,
        tokio::sync::oneshot::Sender<()>,
    ),
    KitError,
> {
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let control = control.clone();
    let calls = Arc::clone(calls);
    let request = call(key_text);
    let holder = tokio::spawn(async move {
        control
            .execute(request, move |_arguments| async move {
                calls.fetch_add(1, Ordering::SeqCst);
                let _ = started_tx.send(());
                let _ = release_rx.await;
                Ok::<_, ExecutorError>(())
            })
            .await
            .map(drop)
    });
    started_rx
        .await
        .map_err(|_| "the holding attempt never started its executor".to_owned())?;
    Ok((holder, release_tx))
}

async fn live_lease_refuses_as_in_progress(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let calls = Arc::new(AtomicUsize::new(0));
    let (holder, release) = hold_attempt(&control, "k1", &calls).await?;
    let before = fresh
        .store
        .effect(&key("k1")?)
        .await
        .map_err(store_error("reading"))?;
    let second = run_counted(&control, call("k1"), &calls, Duration::ZERO, ok).await;
    let after = fresh
        .store
        .effect(&key("k1")?)
        .await
        .map_err(store_error("reading"))?;
    let _ = release.send(());
    let _ = holder.await;
    ensure(reason_of(&second) == "in_progress", || {
        format!(
            "a second attempt under a live lease got `{}`",
            reason_of(&second)
        )
    })?;
    ensure(before == after, || {
        "a refused attempt changed the effect record".to_owned()
    })?;
    ensure(calls.load(Ordering::SeqCst) == 1, || {
        "the executor ran twice".to_owned()
    })
}

async fn committed_effect_refuses_as_duplicate(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let calls = Arc::new(AtomicUsize::new(0));
    run_counted(&control, call("k1"), &calls, Duration::ZERO, ok)
        .await
        .map_err(|error| format!("first attempt: {error}"))?;
    let second = run_counted(&control, call("k1"), &calls, Duration::ZERO, ok).await;
    ensure(reason_of(&second) == "duplicate", || {
        format!("second attempt got `{}`", reason_of(&second))
    })?;
    ensure(calls.load(Ordering::SeqCst) == 1, || {
        "the executor ran twice".to_owned()
    })
}

async fn ambiguous_effect_refuses_until_resolved(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let calls = Arc::new(AtomicUsize::new(0));
    let first = run_counted(&control, call("k1"), &calls, Duration::ZERO, unknown).await;
    ensure(reason_of(&first) == "outcome_unknown", || {
        format!("first attempt got `{}`", reason_of(&first))
    })?;
    for _ in 0..2 {
        let again = run_counted(&control, call("k1"), &calls, Duration::ZERO, ok).await;
        ensure(reason_of(&again) == "ambiguous", || {
            format!("a retry of an ambiguous effect got `{}`", reason_of(&again))
        })?;
    }
    ensure(calls.load(Ordering::SeqCst) == 1, || {
        "an ambiguous effect ran again".to_owned()
    })?;
    ensure(
        effect_state(fresh.store.as_ref(), "k1").await? == Some(EffectState::Ambiguous),
        || "the effect is no longer ambiguous".to_owned(),
    )
}

async fn lapsed_lease_becomes_ambiguous_and_is_never_released(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let clock = manual_clock();
    let control = kit_control(
        Arc::clone(&fresh.store),
        clock.clone(),
        Some(Duration::from_secs(1)),
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let (holder, release) = hold_attempt(&control, "k1", &calls).await?;
    clock.advance(Duration::from_secs(5));
    let late = run_counted(&control, call("k1"), &calls, Duration::ZERO, ok).await;
    ensure(reason_of(&late) == "ambiguous", || {
        format!(
            "an attempt after the lease lapsed got `{}`, expected ambiguous",
            reason_of(&late)
        )
    })?;
    // The original holder finishing late must not release or overwrite the record.
    let _ = release.send(());
    let _ = holder.await;
    let record = fresh
        .store
        .effect(&key("k1")?)
        .await
        .map_err(store_error("reading"))?
        .ok_or("the effect record vanished")?;
    ensure(record.state == EffectState::Ambiguous, || {
        format!(
            "after the late finish the effect is `{}`, expected ambiguous",
            record.state
        )
    })?;
    clock.advance(Duration::from_secs(60));
    let again = run_counted(&control, call("k1"), &calls, Duration::ZERO, ok).await;
    ensure(reason_of(&again) == "ambiguous", || {
        format!("a later attempt got `{}`", reason_of(&again))
    })?;
    ensure(calls.load(Ordering::SeqCst) == 1, || {
        "the executor ran again after the lease lapsed".to_owned()
    })?;
    let receipts = all_receipts(fresh.store.as_ref()).await?;
    let lapsed = receipts
        .iter()
        .filter_map(|stored| stored.to_receipt().ok())
        .filter(|receipt| receipt.kind == ReceiptKind::LeaseExpired)
        .count();
    ensure(lapsed == 1, || {
        format!("expected one lease_expired receipt, found {lapsed}")
    })?;
    check_chain(fresh.store.as_ref(), None).await
}

async fn refusal_changes_nothing_and_leaves_a_receipt(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let calls = Arc::new(AtomicUsize::new(0));
    run_counted(&control, call("k1"), &calls, Duration::ZERO, ok)
        .await
        .map_err(|error| format!("first attempt: {error}"))?;
    let before = fresh
        .store
        .effect(&key("k1")?)
        .await
        .map_err(store_error("reading"))?;
    let receipts_before = all_receipts(fresh.store.as_ref()).await?.len();
    let refused = run_counted(&control, call("k1"), &calls, Duration::ZERO, ok).await;
    let after = fresh
        .store
        .effect(&key("k1")?)
        .await
        .map_err(store_error("reading"))?;
    let receipts = all_receipts(fresh.store.as_ref()).await?;
    ensure(reason_of(&refused) == "duplicate", || {
        format!("refusal got `{}`", reason_of(&refused))
    })?;
    ensure(before == after, || {
        "a refusal changed the effect record".to_owned()
    })?;
    ensure(receipts.len() == receipts_before + 1, || {
        format!(
            "a refusal wrote {} receipts, expected 1",
            receipts.len() - receipts_before
        )
    })?;
    let last = receipts
        .last()
        .ok_or("no receipts")?
        .to_receipt()
        .map_err(|error| format!("unreadable receipt: {error}"))?;
    ensure(
        last.outcome == ReceiptOutcome::Refused && last.reason.as_deref() == Some("duplicate"),
        || {
            format!(
                "the refusal receipt says {:?} {:?}",
                last.outcome, last.reason
            )
        },
    )
}

async fn one_winner_among_threads(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let stores = handles(context, &fresh, 4).await?;
    let calls = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(tokio::sync::Barrier::new(16));
    let mut tasks = Vec::new();
    for index in 0..16 {
        let control = system_control(Arc::clone(&stores[index % stores.len()]));
        let calls = Arc::clone(&calls);
        let barrier = Arc::clone(&barrier);
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            run_counted(
                &control,
                call("race"),
                &calls,
                Duration::from_millis(50),
                ok,
            )
            .await
        }));
    }
    let mut reasons = Vec::new();
    for task in tasks {
        let result = task
            .await
            .map_err(|error| format!("a racing task panicked: {error}"))?;
        reasons.push(reason_of(&result));
    }
    let counts = tally(reasons);
    ensure(calls.load(Ordering::SeqCst) == 1, || {
        format!(
            "{} executor calls among 16 racing attempts: {counts:?}",
            calls.load(Ordering::SeqCst)
        )
    })?;
    ensure(counts.get("ran") == Some(&1), || {
        format!("expected one winner: {counts:?}")
    })?;
    only_typed_losers(&counts, &["in_progress", "duplicate"])?;
    check_chain(fresh.store.as_ref(), Some(16)).await
}

async fn one_winner_among_8_processes(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let binary = context.worker()?.to_path_buf();
    let url = fresh.url.clone();
    let replies = blocking(move || -> Result<Vec<Value>, KitError> {
        let mut workers = worker::spawn_many(&binary, &url, 8)?;
        let start = start_in(Duration::from_millis(200));
        let request =
            json!({"op": "execute", "key": "race", "sleep_ms": 100, "start_at_ms": start});
        worker::exchange(&mut workers, &vec![request; 8])
    })?;
    let ran = replies
        .iter()
        .filter(|reply| reply["ran"] == json!(true))
        .count();
    let counts = tally(replies.iter().map(|reply| {
        if reply["ok"] == json!(true) {
            "ran"
        } else {
            reply["reason"].as_str().unwrap_or("no reason")
        }
    }));
    ensure(ran == 1, || {
        format!("{ran} executor calls among 8 processes: {counts:?}")
    })?;
    only_typed_losers(&counts, &["in_progress", "duplicate"])?;
    let effects = fresh
        .store
        .effects(None)
        .await
        .map_err(store_error("listing"))?;
    ensure(effects.len() == 1 && effects[0].attempts == 1, || {
        format!("expected one reservation, found {effects:?}")
    })?;
    check_chain(fresh.store.as_ref(), Some(8)).await
}

// ---------------------------------------------------------------------------------------------
// approvals

async fn one_consumer_among_threads(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let id = granted(&control, "a1").await?;
    let stores = handles(context, &fresh, 4).await?;
    let calls = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(tokio::sync::Barrier::new(8));
    let mut tasks = Vec::new();
    for index in 0..8 {
        let control = system_control(Arc::clone(&stores[index % stores.len()]));
        let calls = Arc::clone(&calls);
        let barrier = Arc::clone(&barrier);
        let request = approve_call("a1").with_approval(id.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            run_counted(&control, request, &calls, Duration::from_millis(20), ok).await
        }));
    }
    let mut reasons = Vec::new();
    for task in tasks {
        let result = task
            .await
            .map_err(|error| format!("a task panicked: {error}"))?;
        reasons.push(reason_of(&result));
    }
    let counts = tally(reasons);
    ensure(
        calls.load(Ordering::SeqCst) == 1 && counts.get("ran") == Some(&1),
        || {
            format!(
                "one approval authorized {} runs: {counts:?}",
                calls.load(Ordering::SeqCst)
            )
        },
    )?;
    only_typed_losers(&counts, &["consumed"])?;
    ensure(
        approval_state(fresh.store.as_ref(), &id).await? == ApprovalState::Consumed,
        || "the approval is not consumed".to_owned(),
    )
}

async fn one_consumer_across_processes(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let id = granted(&control, "a1").await?;
    let binary = context.worker()?.to_path_buf();
    let url = fresh.url.clone();
    let replies = blocking(move || -> Result<Vec<Value>, KitError> {
        let mut workers = worker::spawn_many(&binary, &url, 4)?;
        let start = start_in(Duration::from_millis(200));
        let request = json!({"op": "execute", "action": "kit.approve", "key": "a1", "approval": id.as_str(), "sleep_ms": 50, "start_at_ms": start});
        worker::exchange(&mut workers, &vec![request; 4])
    })?;
    let ran = replies
        .iter()
        .filter(|reply| reply["ran"] == json!(true))
        .count();
    let counts = tally(replies.iter().map(|reply| {
        if reply["ok"] == json!(true) {
            "ran"
        } else {
            reply["reason"].as_str().unwrap_or("no reason")
        }
    }));
    ensure(ran == 1, || {
        format!("one approval authorized {ran} runs across processes: {counts:?}")
    })?;
    only_typed_losers(&counts, &["consumed"])
}

/// Issue #31: one process revokes a grant while another presents it. Exactly one wins: either
/// the attempt ran and the revocation is refused `consumed`, or the grant is revoked and the
/// attempt is refused `revoked`; the stored state and the receipts agree.
async fn revoke_versus_consume_across_processes_has_one_winner(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let binary = context.worker()?.to_path_buf();
    for round in 0..3 {
        let key_text = format!("rv{round}");
        let id = granted(&control, &key_text).await?;
        let url = fresh.url.clone();
        let binary = binary.clone();
        let approval = id.as_str().to_owned();
        let replies = blocking(move || -> Result<Vec<Value>, KitError> {
            let mut workers = worker::spawn_many(&binary, &url, 2)?;
            let start = start_in(Duration::from_millis(200));
            let requests = vec![
                json!({"op": "execute", "action": "kit.approve", "key": key_text, "approval": approval, "start_at_ms": start}),
                json!({"op": "revoke", "approval": approval, "approver": "human:kit-approver", "start_at_ms": start}),
            ];
            worker::exchange(&mut workers, &requests)
        })?;
        let consumed = replies[0]["ok"] == json!(true);
        let revoked = replies[1]["ok"] == json!(true);
        let state = approval_state(fresh.store.as_ref(), &id).await?;
        match (consumed, revoked) {
            (true, false) => ensure(
                replies[1]["reason"] == json!("consumed") && state == ApprovalState::Consumed,
                || format!("the attempt won but: {replies:?}, state {state}"),
            )?,
            (false, true) => ensure(
                replies[0]["reason"] == json!("revoked")
                    && replies[0]["ran"] == json!(false)
                    && state == ApprovalState::Revoked,
                || format!("the revocation won but: {replies:?}, state {state}"),
            )?,
            _ => {
                return Err(format!(
                    "exactly one of revoke and consume must win: {replies:?}"
                ));
            }
        }
        let wins = all_receipts(fresh.store.as_ref())
            .await?
            .iter()
            .filter_map(|stored| stored.to_receipt().ok())
            .filter(|receipt| receipt.approval_id.as_deref() == Some(id.as_str()))
            .filter(|receipt| {
                matches!(
                    (receipt.kind, receipt.outcome),
                    (ReceiptKind::Attempt, ReceiptOutcome::Committed)
                        | (ReceiptKind::ApprovalRevoked, ReceiptOutcome::Revoked)
                )
            })
            .count();
        ensure(wins == 1, || {
            format!("{wins} winning receipts for one grant")
        })?;
    }
    check_chain(fresh.store.as_ref(), None).await
}

async fn grant_versus_deny_race_has_one_winner(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let stores = handles(context, &fresh, 2).await?;
    let control = system_control(Arc::clone(&fresh.store));
    for round in 0..5 {
        let id = request_approval(&control, &format!("g{round}")).await?;
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let mut tasks = Vec::new();
        for (index, decision) in [AnswerDecision::Approve, AnswerDecision::Reject]
            .into_iter()
            .enumerate()
        {
            let answering = system_control(Arc::clone(&stores[index]));
            let barrier = Arc::clone(&barrier);
            let id = id.clone();
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                (
                    decision,
                    answering
                        .answer(&id, decision, &format!("human:{index}"), None)
                        .await,
                )
            }));
        }
        let mut winners = Vec::new();
        for task in tasks {
            let (decision, result) = task
                .await
                .map_err(|error| format!("a task panicked: {error}"))?;
            match result {
                Ok(_) => winners.push(decision),
                Err(error) if error.reason() == "already_decided" => {}
                Err(error) => {
                    return Err(format!(
                        "an answer failed with `{}`: {error}",
                        error.reason()
                    ));
                }
            }
        }
        ensure(winners.len() == 1, || {
            format!("round {round}: {} answers won", winners.len())
        })?;
        let state = approval_state(fresh.store.as_ref(), &id).await?;
        ensure(state == winners[0].state(), || {
            format!(
                "round {round}: {:?} won but the request is `{state}`",
                winners[0]
            )
        })?;
    }
    // Each round: one decisive answer receipt, and one refusal receipt for the loser (a
    // refused answer is recorded with who sent it; it changes nothing).
    let answers: Vec<_> = all_receipts(fresh.store.as_ref())
        .await?
        .iter()
        .filter_map(|stored| stored.to_receipt().ok())
        .filter(|receipt| receipt.kind == ReceiptKind::Answer)
        .collect();
    let decisive = answers
        .iter()
        .filter(|receipt| receipt.outcome != ReceiptOutcome::Refused)
        .count();
    let refused = answers
        .iter()
        .filter(|receipt| {
            receipt.outcome == ReceiptOutcome::Refused
                && receipt.reason.as_deref() == Some("already_decided")
        })
        .count();
    ensure(decisive == 5 && refused == 5, || {
        format!(
            "expected 5 decisive and 5 refused answer receipts, found {decisive} and {refused} of {}",
            answers.len()
        )
    })
}

async fn binding_to_one_hash(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let id = granted(&control, "b1").await?;
    let calls = Arc::new(AtomicUsize::new(0));
    let other = run_counted(
        &control,
        approve_call("b2").with_approval(id.clone()),
        &calls,
        Duration::ZERO,
        ok,
    )
    .await;
    ensure(reason_of(&other) == "mismatch", || {
        format!(
            "an approval for other arguments got `{}`, expected mismatch",
            reason_of(&other)
        )
    })?;
    ensure(calls.load(Ordering::SeqCst) == 0, || {
        "an approval authorized other arguments".to_owned()
    })?;
    ensure(
        approval_state(fresh.store.as_ref(), &id).await? == ApprovalState::Granted,
        || "a mismatched presentation changed the approval".to_owned(),
    )?;
    run_counted(
        &control,
        approve_call("b1").with_approval(id),
        &calls,
        Duration::ZERO,
        ok,
    )
    .await
    .map_err(|error| format!("the matching attempt was refused: {error}"))
}

async fn single_use(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let id = granted(&control, "s1").await?;
    let calls = Arc::new(AtomicUsize::new(0));
    run_counted(
        &control,
        approve_call("s1").with_approval(id.clone()),
        &calls,
        Duration::ZERO,
        not_executed,
    )
    .await
    .err()
    .filter(|error| error.reason() == "not_executed")
    .ok_or("the first use should end not_executed")?;
    // Even though the effect may be retried, the approval may not be reused.
    let second = run_counted(
        &control,
        approve_call("s1").with_approval(id),
        &calls,
        Duration::ZERO,
        ok,
    )
    .await;
    ensure(reason_of(&second) == "consumed", || {
        format!("a second use got `{}`", reason_of(&second))
    })?;
    ensure(calls.load(Ordering::SeqCst) == 1, || {
        "one approval authorized two runs".to_owned()
    })
}

async fn expiry_is_recorded(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let clock = manual_clock();
    let control = kit_control(Arc::clone(&fresh.store), clock.clone(), None);
    let id = granted(&control, "e1").await?;
    clock.advance(Duration::from_secs(24 * 3600));
    let calls = Arc::new(AtomicUsize::new(0));
    let late = run_counted(
        &control,
        approve_call("e1").with_approval(id.clone()),
        &calls,
        Duration::ZERO,
        ok,
    )
    .await;
    ensure(reason_of(&late) == "expired", || {
        format!("a late use got `{}`", reason_of(&late))
    })?;
    ensure(
        approval_state(fresh.store.as_ref(), &id).await? == ApprovalState::Expired,
        || "the expiry was not recorded on the request".to_owned(),
    )?;
    let expired = all_receipts(fresh.store.as_ref())
        .await?
        .iter()
        .filter_map(|stored| stored.to_receipt().ok())
        .filter(|receipt| receipt.kind == ReceiptKind::ApprovalExpired)
        .count();
    ensure(expired == 1, || {
        format!("expected one approval_expired receipt, found {expired}")
    })?;
    ensure(calls.load(Ordering::SeqCst) == 0, || {
        "an expired approval authorized a run".to_owned()
    })
}

async fn refused_reservation_leaves_the_approval_granted(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let id = granted(&control, "r1").await?;
    let calls = Arc::new(AtomicUsize::new(0));
    // Another action commits the same effect key first.
    run_counted(&control, call("r1"), &calls, Duration::ZERO, ok)
        .await
        .map_err(|error| format!("committing the key: {error}"))?;
    let refused = run_counted(
        &control,
        approve_call("r1").with_approval(id.clone()),
        &calls,
        Duration::ZERO,
        ok,
    )
    .await;
    ensure(reason_of(&refused) == "duplicate", || {
        format!("expected duplicate, got `{}`", reason_of(&refused))
    })?;
    ensure(
        approval_state(fresh.store.as_ref(), &id).await? == ApprovalState::Granted,
        || "a refused reservation consumed the approval".to_owned(),
    )
}

async fn first_answer_stands(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let id = granted(&control, "f1").await?;
    let receipts = all_receipts(fresh.store.as_ref()).await?.len();
    let second = control
        .answer(&id, AnswerDecision::Reject, "human:late", None)
        .await;
    ensure(
        matches!(&second, Err(error) if error.reason() == "already_decided"),
        || format!("a second, different answer got {second:?}"),
    )?;
    // The refused answer is recorded (who sent it, why), and nothing else is.
    let after_refusal = all_receipts(fresh.store.as_ref()).await?;
    let refusal = after_refusal
        .last()
        .and_then(|stored| stored.to_receipt().ok());
    ensure(
        after_refusal.len() == receipts + 1
            && refusal.as_ref().is_some_and(|receipt| {
                receipt.outcome == ReceiptOutcome::Refused
                    && receipt.reason.as_deref() == Some("already_decided")
                    && receipt.approver.as_deref() == Some("human:late")
            }),
        || {
            "a refused answer did not write exactly one refusal receipt naming its sender"
                .to_owned()
        },
    )?;
    control
        .answer(&id, AnswerDecision::Approve, "human:kit-approver", None)
        .await
        .map_err(|error| format!("an identical repeat was refused: {error}"))?;
    ensure(
        all_receipts(fresh.store.as_ref()).await?.len() == receipts + 1,
        || "an identical repeated answer wrote a receipt".to_owned(),
    )?;
    ensure(
        approval_state(fresh.store.as_ref(), &id).await? == ApprovalState::Granted,
        || "the first answer did not stand".to_owned(),
    )
}

async fn reentry_asks_once(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let first = request_approval(&control, "q1").await?;
    let second = request_approval(&control, "q1").await?;
    ensure(first == second, || {
        format!("the same action asked twice: {first} and {second}")
    })?;
    let pending = fresh
        .store
        .approvals(Some(ApprovalState::Pending))
        .await
        .map_err(store_error("listing"))?;
    ensure(pending.len() == 1, || {
        format!("{} pending requests for one action", pending.len())
    })
}

// ---------------------------------------------------------------------------------------------
// resolution

async fn make_ambiguous(control: &Control, key_text: &str) -> Result<(), KitError> {
    let calls = Arc::new(AtomicUsize::new(0));
    let result = run_counted(control, call(key_text), &calls, Duration::ZERO, unknown).await;
    ensure(reason_of(&result) == "outcome_unknown", || {
        format!("making `{key_text}` ambiguous got `{}`", reason_of(&result))
    })
}

async fn only_an_ambiguous_effect_resolves(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let calls = Arc::new(AtomicUsize::new(0));
    run_counted(&control, call("done"), &calls, Duration::ZERO, ok)
        .await
        .map_err(|error| format!("committing: {error}"))?;
    let committed = control
        .resolve(&key("done")?, EffectState::Failed, "human:r", None)
        .await;
    ensure(committed.is_err(), || {
        "a committed effect was resolved".to_owned()
    })?;
    let unknown_key = control
        .resolve(&key("nothing")?, EffectState::Failed, "human:r", None)
        .await;
    ensure(unknown_key.is_err(), || {
        "an unknown key was resolved".to_owned()
    })?;
    let (holder, release) = hold_attempt(&control, "live", &calls).await?;
    let live = control
        .resolve(&key("live")?, EffectState::Failed, "human:r", None)
        .await;
    let _ = release.send(());
    let _ = holder.await;
    ensure(live.is_err(), || {
        "an effect under a live lease was resolved".to_owned()
    })?;
    make_ambiguous(&control, "maybe").await?;
    let to_reserved = control
        .resolve(&key("maybe")?, EffectState::Reserved, "human:r", None)
        .await;
    ensure(to_reserved.is_err(), || {
        "an effect was resolved to `reserved`".to_owned()
    })?;
    control
        .resolve(&key("maybe")?, EffectState::Committed, "human:r", None)
        .await
        .map_err(|error| format!("resolving an ambiguous effect: {error}"))?;
    ensure(
        effect_state(fresh.store.as_ref(), "done").await? == Some(EffectState::Committed),
        || "a refused resolution changed the record".to_owned(),
    )
}

async fn records_who_resolved(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    make_ambiguous(&control, "m1").await?;
    let record = control
        .resolve(
            &key("m1")?,
            EffectState::Committed,
            "human:resolver",
            Some("checked the ledger"),
        )
        .await
        .map_err(|error| format!("resolving: {error}"))?;
    let stored = fresh
        .store
        .effect(&key("m1")?)
        .await
        .map_err(store_error("reading"))?
        .ok_or("the record vanished")?;
    ensure(
        stored == record && stored.resolved_by.as_deref() == Some("human:resolver"),
        || format!("the stored record does not name the resolver: {stored:?}"),
    )?;
    let last = all_receipts(fresh.store.as_ref())
        .await?
        .last()
        .ok_or("no receipts")?
        .to_receipt()
        .map_err(|error| format!("unreadable receipt: {error}"))?;
    ensure(
        last.kind == ReceiptKind::Resolution && last.approver.as_deref() == Some("human:resolver"),
        || format!("the resolution receipt does not name the resolver: {last:?}"),
    )
}

async fn failed_resolution_permits_a_new_attempt(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    make_ambiguous(&control, "m1").await?;
    control
        .resolve(&key("m1")?, EffectState::Failed, "human:resolver", None)
        .await
        .map_err(|error| format!("resolving: {error}"))?;
    let calls = Arc::new(AtomicUsize::new(0));
    run_counted(&control, call("m1"), &calls, Duration::ZERO, ok)
        .await
        .map_err(|error| format!("an attempt after resolving to failed was refused: {error}"))
}

// ---------------------------------------------------------------------------------------------
// durability

async fn ambiguous_state_survives_reopen(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    make_ambiguous(&system_control(Arc::clone(&fresh.store)), "d1").await?;
    let reopened = context.backend.reopen(&fresh).await?;
    ensure(
        effect_state(reopened.as_ref(), "d1").await? == Some(EffectState::Ambiguous),
        || "the ambiguous state did not survive reopening".to_owned(),
    )?;
    let calls = Arc::new(AtomicUsize::new(0));
    let again = run_counted(
        &system_control(reopened),
        call("d1"),
        &calls,
        Duration::ZERO,
        ok,
    )
    .await;
    ensure(reason_of(&again) == "ambiguous", || {
        format!("after reopening a retry got `{}`", reason_of(&again))
    })
}

async fn terminal_states_survive_reopen(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let calls = Arc::new(AtomicUsize::new(0));
    run_counted(&control, call("c1"), &calls, Duration::ZERO, ok)
        .await
        .map_err(|error| error.to_string())?;
    let _ = run_counted(&control, call("f1"), &calls, Duration::ZERO, not_executed).await;
    let granted_id = granted(&control, "g1").await?;
    let denied_id = request_approval(&control, "n1").await?;
    control
        .answer(
            &denied_id,
            AnswerDecision::Reject,
            "human:no",
            Some("not today"),
        )
        .await
        .map_err(|error| error.to_string())?;
    let effects_before = fresh
        .store
        .effects(None)
        .await
        .map_err(store_error("listing"))?;
    let approvals_before = fresh
        .store
        .approvals(None)
        .await
        .map_err(store_error("listing"))?;
    let reopened = context.backend.reopen(&fresh).await?;
    let effects_after = reopened
        .effects(None)
        .await
        .map_err(store_error("listing"))?;
    let approvals_after = reopened
        .approvals(None)
        .await
        .map_err(store_error("listing"))?;
    ensure(effects_before == effects_after, || {
        "effect records changed across reopening".to_owned()
    })?;
    ensure(approvals_before == approvals_after, || {
        "approval requests changed across reopening".to_owned()
    })?;
    ensure(
        approval_state(reopened.as_ref(), &granted_id).await? == ApprovalState::Granted,
        || "a grant did not survive".to_owned(),
    )?;
    ensure(
        approval_state(reopened.as_ref(), &denied_id).await? == ApprovalState::Denied,
        || "a denial did not survive".to_owned(),
    )
}

async fn receipts_survive_reopen_and_verify(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let calls = Arc::new(AtomicUsize::new(0));
    for index in 0..5 {
        run_counted(
            &control,
            call(&format!("k{index}")),
            &calls,
            Duration::ZERO,
            ok,
        )
        .await
        .map_err(|error| error.to_string())?;
    }
    let before = all_receipts(fresh.store.as_ref()).await?;
    let reopened = context.backend.reopen(&fresh).await?;
    let after = all_receipts(reopened.as_ref()).await?;
    ensure(before == after, || {
        "receipts changed across reopening".to_owned()
    })?;
    check_chain(reopened.as_ref(), Some(5)).await
}

// ---------------------------------------------------------------------------------------------
// evidence

async fn receipts_round_trip_without_coercion(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let arguments = json!({
        "key": "ключ-🔑-\u{0301}e",
        "largest_safe_integer": 9_007_199_254_740_991_i64,
        "smallest_safe_integer": -9_007_199_254_740_991_i64,
        "tenth": 0.1,
        "integral_float": 1.0,
        "string_that_looks_like_a_number": "1",
        "empty": "",
        "nested": {"list": [1, "1", true, null, {"z": [], "a": {}}]},
        "quote_and_newline": "a\"b\nc\\d",
    });
    let done = control
        .execute(
            ActionRequest::new("kit.effect", &arguments),
            |_arguments| async { Ok::<_, ExecutorError>("ok") },
        )
        .await
        .map_err(|error| format!("executing: {error}"))?;
    let stored = all_receipts(fresh.store.as_ref()).await?;
    let read_back = stored
        .last()
        .ok_or("no receipt")?
        .to_receipt()
        .map_err(|error| format!("unreadable receipt: {error}"))?;
    ensure(read_back == done.receipt, || {
        format!(
            "the receipt changed in the store:\nwritten {:?}\nread    {read_back:?}",
            done.receipt
        )
    })?;
    let expected = countersign::canonical::to_canonical(&arguments)
        .map_err(|error| error.to_string())?
        .to_value();
    ensure(read_back.arguments.as_ref() == Some(&expected), || {
        format!("arguments were coerced: {:?}", read_back.arguments)
    })?;
    let record = fresh
        .store
        .effect(&key("ключ-🔑-\u{0301}e")?)
        .await
        .map_err(store_error("reading"))?;
    ensure(record.is_some(), || {
        "the effect key did not round-trip byte for byte".to_owned()
    })
}

async fn chain_intact_under_concurrent_writers(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let stores = handles(context, &fresh, 4).await?;
    let barrier = Arc::new(tokio::sync::Barrier::new(8));
    let mut tasks = Vec::new();
    for index in 0..8 {
        let store = Arc::clone(&stores[index % stores.len()]);
        let barrier = Arc::clone(&barrier);
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut failures = Vec::new();
            for note in 0..25 {
                let draft = ReceiptDraft {
                    kind: Some(ReceiptKind::Attempt),
                    outcome: Some(ReceiptOutcome::Committed),
                    action: Some("kit.note".to_owned()),
                    detail: Some(format!("writer {index} note {note}")),
                    ..ReceiptDraft::default()
                };
                if let Err(error) = store.append_receipt(draft, SystemClock.now()).await {
                    failures.push(error.to_string());
                }
            }
            failures
        }));
    }
    let mut failures = Vec::new();
    for task in tasks {
        failures.extend(
            task.await
                .map_err(|error| format!("a writer panicked: {error}"))?,
        );
    }
    ensure(failures.is_empty(), || {
        format!("{} appends failed, first: {}", failures.len(), failures[0])
    })?;
    check_chain(fresh.store.as_ref(), Some(200)).await
}

async fn chain_intact_under_concurrent_processes(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let binary = context.worker()?.to_path_buf();
    let url = fresh.url.clone();
    let replies = blocking(move || -> Result<Vec<Value>, KitError> {
        let mut workers = worker::spawn_many(&binary, &url, 2)?;
        let start = start_in(Duration::from_millis(200));
        let request = json!({"op": "append_many", "count": 200, "start_at_ms": start});
        worker::exchange(&mut workers, &vec![request; 2])
    })?;
    for reply in &replies {
        ensure(reply["ok"] == json!(200), || {
            format!("a writer process failed: {reply}")
        })?;
    }
    check_chain(fresh.store.as_ref(), Some(400)).await
}

async fn every_refusal_leaves_one_receipt(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let calls = Arc::new(AtomicUsize::new(0));
    let mut expected = Vec::new();
    run_counted(&control, call("x"), &calls, Duration::ZERO, ok)
        .await
        .map_err(|error| error.to_string())?;
    expected.push("committed");
    let _ = run_counted(&control, call("x"), &calls, Duration::ZERO, ok).await;
    expected.push("refused");
    let denied = control
        .execute(
            ActionRequest::new("kit.unknown", &json!({})),
            |_arguments| async { Ok::<_, ExecutorError>(()) },
        )
        .await;
    ensure(
        matches!(&denied, Err(error) if error.reason() == "unknown_action"),
        || "an unknown action was not denied".to_owned(),
    )?;
    expected.push("refused");
    let unknown_approval =
        ApprovalId::parse("apr_aaaaaaaaaaaaaaaaaaaa").map_err(|error| error.to_string())?;
    let _ = run_counted(
        &control,
        approve_call("y").with_approval(unknown_approval),
        &calls,
        Duration::ZERO,
        ok,
    )
    .await;
    expected.push("refused");
    let outcomes: Vec<String> = all_receipts(fresh.store.as_ref())
        .await?
        .iter()
        .filter_map(|stored| stored.to_receipt().ok())
        .map(|receipt| receipt.outcome.as_str().to_owned())
        .collect();
    ensure(outcomes == expected, || {
        format!("receipts {outcomes:?}, expected {expected:?}")
    })
}

async fn chain_head_is_the_newest_receipt(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    ensure(
        fresh
            .store
            .chain_head()
            .await
            .map_err(store_error("head"))?
            .is_none(),
        || "an empty store has a chain head".to_owned(),
    )?;
    let control = system_control(Arc::clone(&fresh.store));
    let calls = Arc::new(AtomicUsize::new(0));
    for index in 0..3 {
        run_counted(
            &control,
            call(&format!("h{index}")),
            &calls,
            Duration::ZERO,
            ok,
        )
        .await
        .map_err(|error| error.to_string())?;
    }
    let head = fresh
        .store
        .chain_head()
        .await
        .map_err(store_error("head"))?
        .ok_or("no head")?;
    let last = all_receipts(fresh.store.as_ref())
        .await?
        .pop()
        .ok_or("no receipts")?;
    ensure(head.seq == 3 && head.hash == last.hash, || {
        format!("head {head:?}, newest {last:?}")
    })
}

// ---------------------------------------------------------------------------------------------
// crash

/// A worker running an approved attempt is killed (SIGKILL) inside its executor; when its
/// lease lapses, the receipt that records the effect ambiguous names what the dead attempt was:
/// its action, principal, environment, policy, when it started, the approval it consumed and
/// who granted it (issue #12: the consumption of an approval is never invisible).
async fn killed_approved_attempt_leaves_a_receipt_naming_it(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let id = granted(&control, "crash-approved").await?;
    let binary = context.worker()?.to_path_buf();
    let url = fresh.url.clone();
    let lease = Duration::from_millis(1_500);
    let presented = id.as_str().to_owned();
    let (started_before, killed_at) = blocking(move || -> Result<(i64, i64), KitError> {
        let started_before = unix_millis();
        let mut victim = Worker::spawn(&binary, &url)?;
        victim.send(&json!({"op": "execute", "action": "kit.approve", "key": "crash-approved", "approval": presented, "sleep_ms": 600_000, "lease_ms": lease.as_millis() as u64, "announce": true}))?;
        let event = victim.receive()?;
        ensure(event["event"] == json!("executing"), || {
            format!("expected the approved executor to start: {event}")
        })?;
        victim.kill();
        Ok((started_before, unix_millis()))
    })?;
    ensure(
        approval_state(fresh.store.as_ref(), &id).await? == ApprovalState::Consumed,
        || "the killed attempt's approval is not consumed".to_owned(),
    )?;
    let lapse = killed_at + lease.as_millis() as i64 + 100 - unix_millis();
    if lapse > 0 {
        tokio::time::sleep(Duration::from_millis(lapse.unsigned_abs())).await;
    }
    // The next attempt on the key finds the lapsed lease and records it.
    let calls = Arc::new(AtomicUsize::new(0));
    let after = run_counted(&control, call("crash-approved"), &calls, Duration::ZERO, ok).await;
    ensure(reason_of(&after) == "ambiguous", || {
        format!("after the crash a retry got `{}`", reason_of(&after))
    })?;
    let receipts = all_receipts(fresh.store.as_ref())
        .await?
        .iter()
        .map(StoredReceipt::to_receipt)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("a receipt is unreadable: {error}"))?;
    let lapsed = receipts
        .iter()
        .find(|receipt| receipt.kind == ReceiptKind::LeaseExpired)
        .ok_or("no lease_expired receipt")?;
    let started = lapsed
        .attempt_started_at
        .ok_or("the lapsed-lease receipt does not say when the attempt started")?;
    let approvers: Vec<&str> = lapsed
        .approvers
        .iter()
        .flatten()
        .map(|approver| approver.id.as_str())
        .collect();
    ensure(
        lapsed.action.as_deref() == Some("kit.approve")
            && lapsed.principal.as_deref() == Some(KIT_PRINCIPAL)
            && lapsed.environment.as_deref() == Some("kit")
            && lapsed.policy_hash.is_some()
            && lapsed.approval_id.as_deref() == Some(id.as_str())
            && approvers == ["human:kit-approver"]
            && started.as_millis() >= started_before
            && started.as_millis() <= killed_at,
        || format!("the lapsed-lease receipt does not name the dead attempt: {lapsed:?}"),
    )?;
    check_chain(fresh.store.as_ref(), None).await
}

async fn killed_worker_leaves_an_ambiguous_effect_never_run_again(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let binary = context.worker()?.to_path_buf();
    let url = fresh.url.clone();
    let lease = Duration::from_millis(1_500);
    let killed_at = blocking(move || -> Result<i64, KitError> {
        let mut victim = Worker::spawn(&binary, &url)?;
        victim.send(&json!({"op": "execute", "key": "crash", "sleep_ms": 600_000, "lease_ms": lease.as_millis() as u64, "announce": true}))?;
        let event = victim.receive()?;
        ensure(event["event"] == json!("executing"), || {
            format!("expected the executor to start: {event}")
        })?;
        victim.kill();
        Ok(unix_millis())
    })?;
    ensure(
        effect_state(fresh.store.as_ref(), "crash").await? == Some(EffectState::Reserved),
        || "the killed worker's reservation is missing".to_owned(),
    )?;
    // Wait for the lease to lapse (measured from the kill, which came after the reservation).
    let lapse = killed_at + lease.as_millis() as i64 + 100 - unix_millis();
    if lapse > 0 {
        tokio::time::sleep(Duration::from_millis(lapse.unsigned_abs())).await;
    }
    let control = system_control(Arc::clone(&fresh.store));
    let calls = Arc::new(AtomicUsize::new(0));
    let after = run_counted(&control, call("crash"), &calls, Duration::ZERO, ok).await;
    ensure(reason_of(&after) == "ambiguous", || {
        format!("after the crash a retry got `{}`", reason_of(&after))
    })?;
    ensure(calls.load(Ordering::SeqCst) == 0, || {
        "the crashed effect ran again".to_owned()
    })?;
    ensure(
        effect_state(fresh.store.as_ref(), "crash").await? == Some(EffectState::Ambiguous),
        || "the crashed effect is not ambiguous".to_owned(),
    )?;
    check_chain(fresh.store.as_ref(), None).await
}
