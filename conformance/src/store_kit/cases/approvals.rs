//! Cases on approvals: one consumer, one hash, single use, expiry, the first answer.

use super::*;

pub(super) async fn one_consumer_among_threads(context: &CaseContext<'_>) -> Result<(), KitError> {
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

pub(super) async fn one_consumer_across_processes(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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
pub(super) async fn revoke_versus_consume_across_processes_has_one_winner(
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

pub(super) async fn grant_versus_deny_race_has_one_winner(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let stores = handles(context, &fresh, 2).await?;
    let control = system_control(Arc::clone(&fresh.store));
    for round in 0..5 {
        let id = request_approval(&control, &format!("g{round}")).await?;
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let mut tasks = Vec::new();
        for (index, decision) in [AnswerDecision::Approve, AnswerDecision::Deny]
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
                Err(error) if error.kind() == countersign::Reason::AlreadyDecided => {}
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

pub(super) async fn binding_to_one_hash(context: &CaseContext<'_>) -> Result<(), KitError> {
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

pub(super) async fn single_use(context: &CaseContext<'_>) -> Result<(), KitError> {
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
    .filter(|error| error.kind() == countersign::Reason::NotExecuted)
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

pub(super) async fn expiry_is_recorded(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let clock = manual_clock();
    let control = kit_control(Arc::clone(&fresh.store), clock.clone(), None);
    let id = granted(&control, "e1").await?;
    pass(fresh.store.as_ref(), Duration::from_secs(24 * 3600))?;
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

pub(super) async fn refused_reservation_leaves_the_approval_granted(
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

pub(super) async fn first_answer_stands(context: &CaseContext<'_>) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let control = system_control(Arc::clone(&fresh.store));
    let id = granted(&control, "f1").await?;
    let receipts = all_receipts(fresh.store.as_ref()).await?.len();
    let second = control
        .answer(&id, AnswerDecision::Deny, "human:late", None)
        .await;
    ensure(
        matches!(&second, Err(error) if error.kind() == countersign::Reason::AlreadyDecided),
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

pub(super) async fn reentry_asks_once(context: &CaseContext<'_>) -> Result<(), KitError> {
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
