//! The `clock` suite (issue #22, "one clock"): expiry is judged by the store's clock (the
//! server's on PostgreSQL, the host's on SQLite and memory), and every time the store writes is
//! in that clock.

use super::*;

/// The kit policy's approval TTL (the policy-wide default).
const TTL: Duration = Duration::from_secs(15 * 60);

/// An approval expires its TTL after the *store's* time it was opened at: `expires_at` and the
/// expiry receipt's time are the store's, a minute before it nothing expires it, a minute after
/// the use is refused `expired`.
pub(super) async fn expiry_follows_the_store_clock(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
    let fresh = context.fresh().await?;
    let store = fresh.store.as_ref();
    let clock = manual_clock();
    let control = kit_control(Arc::clone(&fresh.store), clock.clone(), None);
    let before = store_now(store, clock.now()).await?;
    let id = granted(&control, "c1").await?;
    let after = store_now(store, clock.now()).await?;
    let record = store
        .approval(&id)
        .await
        .map_err(store_error("reading the approval"))?
        .ok_or("the approval vanished")?;
    ensure(
        record.expires_at >= before.plus(TTL) && record.expires_at <= after.plus(TTL),
        || {
            format!(
                "expires_at {} is not the store's time ({before}..{after}) plus the TTL",
                record.expires_at
            )
        },
    )?;
    pass(store, TTL - Duration::from_secs(60))?;
    let early = store
        .expire_approval(&id, clock.now())
        .await
        .map_err(store_error("expiring early"))?;
    ensure(early.is_none(), || {
        "a minute before its expiry by the store's clock, the approval expired".to_owned()
    })?;
    pass(store, Duration::from_secs(120))?;
    let calls = Arc::new(AtomicUsize::new(0));
    let marked_from = store_now(store, clock.now()).await?;
    let late = run_counted(
        &control,
        approve_call("c1").with_approval(id.clone()),
        &calls,
        Duration::ZERO,
        ok,
    )
    .await;
    let marked_to = store_now(store, clock.now()).await?;
    ensure(reason_of(&late) == "expired", || {
        format!("a use past the expiry got `{}`", reason_of(&late))
    })?;
    ensure(calls.load(Ordering::SeqCst) == 0, || {
        "an expired approval authorized a run".to_owned()
    })?;
    let expired: Vec<_> = all_receipts(store)
        .await?
        .iter()
        .filter_map(|stored| stored.to_receipt().ok())
        .filter(|receipt| receipt.kind == ReceiptKind::ApprovalExpired)
        .collect();
    let [receipt] = expired.as_slice() else {
        return Err(format!(
            "expected one approval_expired receipt, found {}",
            expired.len()
        ));
    };
    ensure(
        receipt.recorded_at >= marked_from && receipt.recorded_at <= marked_to,
        || {
            format!(
                "the expiry receipt is dated {}, not the store's time ({marked_from}..{marked_to})",
                receipt.recorded_at
            )
        },
    )?;
    check_chain(store, None).await
}
