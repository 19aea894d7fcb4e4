//! Cases on reserving an effect: one winner, leases, the retry table.

use super::*;

pub(super) async fn first_attempt_reserves_and_commits(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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

pub(super) async fn failed_record_may_be_reserved_again(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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
pub(super) async fn hold_attempt(
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

pub(super) async fn live_lease_refuses_as_in_progress(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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

pub(super) async fn committed_effect_refuses_as_duplicate(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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

pub(super) async fn ambiguous_effect_refuses_until_resolved(
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

/// A lapsed lease makes the effect ambiguous, never retryable; the original holder finishing
/// late (a zombie, case B55) cannot release or overwrite the record, so it can never cause a
/// second run.
pub(super) async fn lapsed_lease_becomes_ambiguous_and_is_never_released(
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
    pass(fresh.store.as_ref(), Duration::from_secs(5))?;
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
    pass(fresh.store.as_ref(), Duration::from_secs(60))?;
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

/// Case B54: an effect key's record is kept by its state, never by a timer. An ambiguous key
/// stays refused and a committed one stays a duplicate an hour, a day and a month later
/// (Countersign has no retention job: every effect record is a permanent tombstone, so a retry
/// never depends on how long a downstream provider keeps its own idempotency keys).
pub(super) async fn effect_records_never_expire_by_time(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let clock = manual_clock();
    let control = kit_control(Arc::clone(&fresh.store), clock.clone(), None);
    let calls = Arc::new(AtomicUsize::new(0));
    let first = run_counted(
        &control,
        call("b54-ambiguous"),
        &calls,
        Duration::ZERO,
        unknown,
    )
    .await;
    ensure(reason_of(&first) == "outcome_unknown", || {
        format!("the first attempt got `{}`", reason_of(&first))
    })?;
    run_counted(&control, call("b54-committed"), &calls, Duration::ZERO, ok)
        .await
        .map_err(|error| format!("the committed attempt: {error}"))?;
    let hour = Duration::from_secs(3600);
    let mut elapsed = Duration::ZERO;
    for later in [hour, 25 * hour, 30 * 24 * hour] {
        pass(fresh.store.as_ref(), later - elapsed)?;
        elapsed = later;
        let again = run_counted(&control, call("b54-ambiguous"), &calls, Duration::ZERO, ok).await;
        ensure(reason_of(&again) == "ambiguous", || {
            format!(
                "{} h later, a retry of the ambiguous key got `{}`",
                later.as_secs() / 3600,
                reason_of(&again)
            )
        })?;
        let duplicate =
            run_counted(&control, call("b54-committed"), &calls, Duration::ZERO, ok).await;
        ensure(reason_of(&duplicate) == "duplicate", || {
            format!(
                "{} h later, a retry of the committed key got `{}`",
                later.as_secs() / 3600,
                reason_of(&duplicate)
            )
        })?;
    }
    ensure(calls.load(Ordering::SeqCst) == 2, || {
        format!(
            "the executor ran {} times for two keys",
            calls.load(Ordering::SeqCst)
        )
    })?;
    ensure(
        effect_state(fresh.store.as_ref(), "b54-ambiguous").await? == Some(EffectState::Ambiguous),
        || "the ambiguous record changed with time alone".to_owned(),
    )
}

pub(super) async fn refusal_changes_nothing_and_leaves_a_receipt(
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

pub(super) async fn one_winner_among_threads(context: &CaseContext<'_>) -> Result<(), KitError> {
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

pub(super) async fn one_winner_among_8_processes(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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
