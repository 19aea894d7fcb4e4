//! Cases on resolving an ambiguous effect.

use super::*;

pub(super) async fn make_ambiguous(control: &Control, key_text: &str) -> Result<(), KitError> {
    let calls = Arc::new(AtomicUsize::new(0));
    let result = run_counted(control, call(key_text), &calls, Duration::ZERO, unknown).await;
    ensure(reason_of(&result) == "outcome_unknown", || {
        format!("making `{key_text}` ambiguous got `{}`", reason_of(&result))
    })
}

pub(super) async fn only_an_ambiguous_effect_resolves(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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

pub(super) async fn records_who_resolved(context: &CaseContext<'_>) -> Result<(), KitError> {
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

pub(super) async fn failed_resolution_permits_a_new_attempt(
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
