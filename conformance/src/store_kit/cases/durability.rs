//! Cases on what survives closing and reopening the store.

use super::*;

pub(super) async fn ambiguous_state_survives_reopen(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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

pub(super) async fn terminal_states_survive_reopen(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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
            AnswerDecision::Deny,
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

pub(super) async fn receipts_survive_reopen_and_verify(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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
