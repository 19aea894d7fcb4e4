//! The approval service's latency and throughput, run by `cargo xtask bench` (release).
//!
//! On a fresh SQLite store with 1,000 pending requests (quorum 1, tokens required), a real
//! server on 127.0.0.1:0 and one HTTP client:
//!
//! - `GET /api/v1/approvals` (the first page of 50, every request judged against its stored
//!   rule): p50 and p99 over many calls;
//! - `GET /inbox`, the web inbox signed in with a browser session (the first page of 100 rows
//!   rendered as HTML, every request judged against its stored rule): p50 and p99;
//! - `POST /api/v1/approvals/{id}/answer`, one after another: answers per second.
//!
//! `--quick` runs a few of each, so the harness never rots; its figures mean nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use countersign::store::Store;
use countersign::{
    ActionRequest, Clock, Control, ControlError, Policy, Principal, StaticIdentity, SystemClock,
    store, token,
};
use countersign_server::{Service, ServiceConfig, SignIn, StoreSource};
use serde_json::json;

const PENDING: usize = 1_000;

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn main() -> anyhow::Result<()> {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(quick))
}

async fn run(quick: bool) -> anyhow::Result<()> {
    let folder = tempfile::tempdir()?;
    let key = token::generate_keypair()?;
    let policy = Policy::from_yaml_str(
        &format!(
            r#"schema: countersign.policy/v1
directory: {{ "human:alice": [finance] }}
approvers: {{ keys: ["{}"] }}
actions:
  stripe.refund:
    effect: "refund:{{payment_id}}"
    decision: approve
    approval: {{ approvers: ["group:finance"], require: authenticated }}
"#,
            key.public_key()
        ),
        None,
    )?;
    let store: Arc<dyn Store> = store::open_url(&format!(
        "sqlite:{}",
        folder.path().join("bench.db").display()
    ))?;
    let control = Control::builder_shared(Arc::new(policy.clone()), Arc::clone(&store))
        .identity(StaticIdentity::new(Principal::new("agent:bot")?))
        .build();
    let mut pending = Vec::with_capacity(PENDING);
    for index in 0..PENDING {
        let request = ActionRequest::new(
            "stripe.refund",
            &json!({"payment_id": format!("pi_{index}")}),
        );
        match control.execute(request, |_| async { Ok(()) }).await {
            Err(ControlError::ApprovalRequired {
                request_id,
                action_hash,
                ..
            }) => pending.push((request_id, action_hash)),
            other => anyhow::bail!("expected a pending request, got {other:?}"),
        }
    }
    let service = Service::new(ServiceConfig {
        store: StoreSource::Open(Arc::clone(&store)),
        sign_in: SignIn {
            approver_keys: vec![key.public_key()],
            proxy: None,
            oidc: None,
        },
        directory: policy.directory().clone(),
        auditors_group: None,
        public_url: None,
        clock: Arc::new(SystemClock),
        policy: Some(Arc::new(policy.clone())),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(countersign_server::serve(listener, service, async move {
        let _ = stopped.await;
    }));
    let alice = token::issue(
        &key,
        "human:alice",
        &[],
        Duration::from_secs(3600),
        SystemClock.now(),
    )?;
    let client =
        countersign_http::client(&countersign_http::Trust::nothing()).expect("an HTTP client");

    let listings = if quick { 5 } else { 300 };
    let mut latencies = Vec::with_capacity(listings);
    for _ in 0..listings {
        let started = Instant::now();
        let response = client
            .get(format!("{base}/api/v1/approvals"))
            .bearer_auth(&alice)
            .send()
            .await?;
        anyhow::ensure!(response.status() == 200, "listing: {}", response.status());
        let body = response.bytes().await?;
        latencies.push(started.elapsed());
        anyhow::ensure!(!body.is_empty());
    }
    latencies.sort();
    println!(
        "serve: GET /api/v1/approvals, {PENDING} pending, first page of 50: p50 {:.2} ms, p99 {:.2} ms ({listings} calls)",
        percentile(&latencies, 0.50).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
    );

    // The web inbox, as a browser signed in through the form sees it.
    let browser = countersign_http::client_builder(&countersign_http::Trust::nothing())
        .expect("an HTTP client builder")
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let form = browser.get(format!("{base}/signin")).send().await?;
    let csrf = form
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|value| value.strip_prefix("countersign_csrf="))
        .and_then(|value| value.split(';').next())
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("the sign-in form set no CSRF cookie"))?;
    let signed_in = browser
        .post(format!("{base}/signin"))
        .header("cookie", format!("countersign_csrf={csrf}"))
        .form(&[("csrf", csrf.as_str()), ("token", alice.as_str())])
        .send()
        .await?;
    anyhow::ensure!(signed_in.status() == 303, "sign-in: {}", signed_in.status());
    let session = signed_in
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with("countersign_session="))
        .and_then(|value| value.split(';').next())
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("sign-in set no session cookie"))?;
    let mut latencies = Vec::with_capacity(listings);
    let mut page_bytes = 0;
    for _ in 0..listings {
        let started = Instant::now();
        let response = browser
            .get(format!("{base}/inbox"))
            .header("cookie", &session)
            .send()
            .await?;
        anyhow::ensure!(response.status() == 200, "inbox: {}", response.status());
        let body = response.text().await?;
        latencies.push(started.elapsed());
        anyhow::ensure!(
            body.contains(&format!("{PENDING} requests wait")),
            "the inbox does not list {PENDING} requests"
        );
        page_bytes = body.len();
    }
    latencies.sort();
    println!(
        "serve: GET /inbox (HTML, browser session), {PENDING} pending, first page of 100 rows ({} KiB): p50 {:.2} ms, p99 {:.2} ms ({listings} calls)",
        page_bytes / 1024,
        percentile(&latencies, 0.50).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
    );

    let answers = if quick { 10 } else { PENDING };
    let started = Instant::now();
    for (id, hash) in pending.iter().take(answers) {
        let response = client
            .post(format!("{base}/api/v1/approvals/{id}/answer"))
            .bearer_auth(&alice)
            .json(&json!({"decision": "approve", "action_hash": hash.as_str()}))
            .send()
            .await?;
        anyhow::ensure!(response.status() == 200, "answer: {}", response.status());
    }
    let elapsed = started.elapsed();
    println!(
        "serve: POST /api/v1/approvals/{{id}}/answer, one client, SQLite: {:.0} answers/s ({answers} answers in {:.2} s)",
        answers as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    let _ = stop.send(());
    server.await??;
    Ok(())
}
