//! Cases on the receipt chain: round trips, concurrent writers, one receipt per refusal.

use super::*;

pub(super) async fn receipts_round_trip_without_coercion(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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

pub(super) async fn chain_intact_under_concurrent_writers(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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

pub(super) async fn chain_intact_under_concurrent_processes(
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

pub(super) async fn every_refusal_leaves_one_receipt(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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
        matches!(&denied, Err(error) if error.kind() == countersign::Reason::UnknownAction),
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

pub(super) async fn chain_head_is_the_newest_receipt(
    context: &CaseContext<'_>,
) -> Result<(), KitError> {
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
