//! Cases on a worker killed mid-attempt.

use super::*;

/// A worker running an approved attempt is killed (SIGKILL) inside its executor; when its
/// lease lapses, the receipt that records the effect ambiguous names what the dead attempt was:
/// its action, principal, environment, policy, when it started, the approval it consumed and
/// who granted it (issue #12: the consumption of an approval is never invisible).
pub(super) async fn killed_approved_attempt_leaves_a_receipt_naming_it(
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

/// Case B55: a worker killed (SIGKILL) after its reservation is durable, whether or not its
/// executor had run, leaves the key `ambiguous` when the lease lapses; the next worker is refused
/// and the executor count stays 1. The reservation is Countersign's "started" record: it is
/// committed before the executor is called, so "killed before started was durable" means no
/// record at all, and the next worker simply reserves the key.
pub(super) async fn killed_worker_leaves_an_ambiguous_effect_never_run_again(
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
