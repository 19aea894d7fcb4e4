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

mod approvals;
mod clock;
mod crash;
mod durability;
mod evidence;
mod reservation;
mod resolution;

use approvals::*;
use clock::*;
use crash::*;
use durability::*;
use evidence::*;
use reservation::*;
use resolution::*;

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
            effect_records_never_expire_by_time,
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
        case!("clock", expiry_follows_the_store_clock, InProcess),
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

/// Time passes by `store`'s clock (issue #22): its test offset, applied by every backend.
fn pass(store: &dyn Store, by: Duration) -> Result<(), KitError> {
    let millis = i64::try_from(by.as_millis()).map_err(|error| error.to_string())?;
    store
        .shift_clock_for_tests(millis)
        .map_err(store_error("shifting the store's clock"))
}

/// The store's time, for a caller whose clock reads `now`.
async fn store_now(store: &dyn Store, now: Timestamp) -> Result<Timestamp, KitError> {
    store
        .store_now(now)
        .await
        .map_err(store_error("reading the store's clock"))
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
    Err(ExecutorError::may_have_run(
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
        let after = receipts
            .last()
            .map_or(0, |last: &StoredReceipt| last.position);
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

/// The log has `expected` receipts (if given), no gaps and no fork in any lane, and verifies.
async fn check_chain(store: &dyn Store, expected: Option<usize>) -> Result<(), KitError> {
    let receipts = all_receipts(store).await?;
    if let Some(expected) = expected {
        ensure(receipts.len() == expected, || {
            format!("expected {expected} receipts, found {}", receipts.len())
        })?;
    }
    // One chain per lane (SPEC 1.5): each lane's `seq` runs from 1 in log order, no two of its
    // receipts share a `prev_hash`, and the log's places run from 1.
    let mut previous = HashSet::new();
    let mut next_in_lane = std::collections::BTreeMap::new();
    for (index, receipt) in receipts.iter().enumerate() {
        ensure(receipt.position == index as u64 + 1, || {
            format!(
                "the receipt at place {} comes {}th in the log: a gap",
                receipt.position,
                index + 1
            )
        })?;
        let next = next_in_lane.entry(receipt.lane).or_insert(1_u64);
        ensure(receipt.seq == *next, || {
            format!(
                "receipt seq {} of lane {} where {} comes next: a gap",
                receipt.seq, receipt.lane, next
            )
        })?;
        *next += 1;
        ensure(
            previous.insert((receipt.lane, receipt.prev_hash.clone())),
            || {
                format!(
                    "receipt {} of lane {} shares its prev_hash with another: a fork",
                    receipt.seq, receipt.lane
                )
            },
        )?;
    }
    let report = countersign::audit::verify_store(store, None)
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
