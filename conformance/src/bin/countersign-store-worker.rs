//! `countersign-store-worker URL`: a worker process for the store kit's cross-process cases.
//! See `countersign_conformance::store_kit::worker` for its line protocol.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

use countersign::evidence::{ReceiptDraft, ReceiptKind, ReceiptOutcome};
use countersign::store::{Store, open_url_async};
use countersign::{
    ActionRequest, ApprovalId, Clock, Control, ExecutorError, Policy, Principal, StaticIdentity,
    SystemClock,
};
use countersign_conformance::store_kit::worker::{KIT_POLICY, KIT_PRINCIPAL, unix_millis};
use serde_json::{Value, json};

fn main() -> std::process::ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: countersign-store-worker STORE_URL");
        return std::process::ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("worker: cannot start the runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(&url)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("worker: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn say(value: &Value) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{value}");
    let _ = stdout.flush();
}

async fn serve(url: &str) -> Result<(), String> {
    let store = open_url_async(url)
        .await
        .map_err(|error| format!("cannot open `{url}`: {error}"))?;
    let policy = Arc::new(
        Policy::from_yaml_str(KIT_POLICY, None).map_err(|error| format!("kit policy: {error}"))?,
    );
    say(&json!({"ready": true}));
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = lines.recv().await {
        let request: Value = serde_json::from_str(&line)
            .map_err(|error| format!("bad request `{line}`: {error}"))?;
        if let Some(start) = request["start_at_ms"].as_i64() {
            let wait = start - unix_millis();
            if wait > 0 {
                tokio::time::sleep(Duration::from_millis(wait.unsigned_abs())).await;
            }
        }
        let reply = match request["op"].as_str() {
            Some("execute") => execute(&store, &policy, &request).await,
            Some("execute_many") => execute_many(&store, &policy, &request).await,
            Some("append_many") => append_many(&store, &request).await,
            Some("revoke") => revoke(&store, &policy, &request).await,
            Some("quit") => return Ok(()),
            other => json!({"error": format!("unknown op {other:?}")}),
        };
        say(&reply);
    }
    Ok(())
}

fn control(
    store: &Arc<dyn Store>,
    policy: &Arc<Policy>,
    lease_ms: Option<u64>,
) -> Result<Control, String> {
    let principal = Principal::new(KIT_PRINCIPAL).map_err(|error| error.to_string())?;
    let mut builder = Control::builder_shared(Arc::clone(policy), Arc::clone(store))
        .identity(StaticIdentity::new(principal))
        .clock(Arc::new(SystemClock) as Arc<dyn Clock>);
    if let Some(lease) = lease_ms {
        builder = builder.lease(Duration::from_millis(lease));
    }
    Ok(builder.build())
}

/// `{"op": "revoke", "approval": ID, "approver": WHO}`: revoke the grant (issue #31) as an
/// asserted approver; replies `{"ok": true, "state": …}` or `{"ok": false, "reason": …}`.
async fn revoke(store: &Arc<dyn Store>, policy: &Arc<Policy>, request: &Value) -> Value {
    let control = match control(store, policy, None) {
        Ok(control) => control,
        Err(error) => return json!({"error": error}),
    };
    let id = match ApprovalId::parse(request["approval"].as_str().unwrap_or("")) {
        Ok(id) => id,
        Err(error) => return json!({"error": error.to_string()}),
    };
    let approver = request["approver"].as_str().unwrap_or("human:kit-approver");
    match control.revoke(&id, approver, Some("store kit race")).await {
        Ok(record) => json!({"ok": true, "state": record.state.as_str()}),
        Err(error) => json!({"ok": false, "reason": error.reason(), "message": error.to_string()}),
    }
}

async fn execute(store: &Arc<dyn Store>, policy: &Arc<Policy>, request: &Value) -> Value {
    let control = match control(store, policy, request["lease_ms"].as_u64()) {
        Ok(control) => control,
        Err(error) => return json!({"error": error}),
    };
    let action = request["action"].as_str().unwrap_or("kit.effect");
    let key = request["key"].as_str().unwrap_or("kit-key");
    let sleep = Duration::from_millis(request["sleep_ms"].as_u64().unwrap_or(0));
    let announce = request["announce"].as_bool().unwrap_or(false);
    let mut call = ActionRequest::new(action, &json!({"key": key}));
    if let Some(id) = request["approval"].as_str() {
        match ApprovalId::parse(id) {
            Ok(id) => call = call.with_approval(id),
            Err(error) => return json!({"error": error.to_string()}),
        }
    }
    let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    let result = control
        .execute(call, move |_arguments| async move {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            if announce {
                say(&json!({"event": "executing", "pid": std::process::id()}));
            }
            tokio::time::sleep(sleep).await;
            Ok::<_, ExecutorError>(())
        })
        .await;
    let ran = ran.load(std::sync::atomic::Ordering::SeqCst);
    match result {
        Ok(_) => json!({"ran": ran, "ok": true}),
        Err(error) => json!({
            "ran": ran,
            "ok": false,
            "reason": error.reason(),
            "message": error.to_string(),
        }),
    }
}

async fn execute_many(store: &Arc<dyn Store>, policy: &Arc<Policy>, request: &Value) -> Value {
    let control = match control(store, policy, None) {
        Ok(control) => control,
        Err(error) => return json!({"error": error}),
    };
    let prefix = request["prefix"].as_str().unwrap_or("k");
    let count = request["count"].as_u64().unwrap_or(0);
    let (mut ran, mut ok) = (0u64, 0u64);
    let mut reasons: BTreeMap<String, u64> = BTreeMap::new();
    let mut messages = Vec::new();
    for index in 0..count {
        let call = ActionRequest::new("kit.effect", &json!({"key": format!("{prefix}-{index}")}));
        let result = control
            .execute(call, |_arguments| async { Ok::<_, ExecutorError>(()) })
            .await;
        match result {
            Ok(_) => {
                ran += 1;
                ok += 1;
            }
            Err(error) => {
                *reasons.entry(error.reason().to_owned()).or_default() += 1;
                if messages.len() < 5 {
                    messages.push(error.to_string());
                }
            }
        }
    }
    json!({"ran": ran, "ok": ok, "reasons": reasons, "messages": messages})
}

async fn append_many(store: &Arc<dyn Store>, request: &Value) -> Value {
    let count = request["count"].as_u64().unwrap_or(0);
    let mut ok = 0u64;
    let mut errors = Vec::new();
    for index in 0..count {
        let draft = ReceiptDraft {
            kind: Some(ReceiptKind::Attempt),
            outcome: Some(ReceiptOutcome::Committed),
            action: Some("kit.note".to_owned()),
            detail: Some(format!("worker {} note {index}", std::process::id())),
            ..ReceiptDraft::default()
        };
        match store.append_receipt(draft, SystemClock.now()).await {
            Ok(_) => ok += 1,
            Err(error) => {
                if errors.len() < 5 {
                    errors.push(error.to_string());
                }
            }
        }
    }
    json!({"ok": ok, "errors": errors})
}
