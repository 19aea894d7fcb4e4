//! The lost COMMIT (issue #22): a fault-injecting TCP proxy between the PostgreSQL store and the
//! server drops the connection when it sees the client's `COMMIT`, either after passing it on
//! (the transaction committed, the client never hears so) or before (it never reached the
//! server). The store settles each on a fresh connection (`txid_status`): the first returns the
//! committed result, written once; the second runs the operation again, written once. When no
//! fresh connection can be had either (the proxy refuses every new one), the caller gets the
//! typed `StoreError::OutcomeUnknown`, never a guess. Behind PgBouncer in transaction mode the
//! settling read runs on whichever server connection the pooler hands out, and still settles.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use countersign::StoreError;
use countersign::clock::{Clock, SystemClock};
use countersign::evidence::{ReceiptDraft, ReceiptKind, ReceiptOutcome};
use countersign::store::open_url_async;
use countersign_conformance::store_kit::{
    PGBOUNCER_URL_VAR, PostgresBackend, postgres_url_from_env,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::support::{fresh, postgres};

/// What the proxy does.
const PASS: u8 = 0;
/// At the next `COMMIT`: pass it on, then cut both sides before the reply comes back.
const CUT_AFTER_COMMIT: u8 = 1;
/// At the next `COMMIT`: cut both sides without passing it on.
const CUT_BEFORE_COMMIT: u8 = 2;
/// At the next `COMMIT`: cut before passing it on, and refuse every connection from then on.
const CUT_AND_GO_DOWN: u8 = 3;

/// A TCP proxy in front of the test server that can drop a connection at its `COMMIT`.
struct Proxy {
    port: u16,
    mode: Arc<AtomicU8>,
    down: Arc<AtomicU8>,
    cuts: Arc<AtomicUsize>,
}

impl Proxy {
    async fn start(server: (String, u16)) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let mode = Arc::new(AtomicU8::new(PASS));
        let down = Arc::new(AtomicU8::new(0));
        let cuts = Arc::new(AtomicUsize::new(0));
        let (task_mode, task_down, task_cuts) = (mode.clone(), down.clone(), cuts.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if task_down.load(Ordering::SeqCst) == 1 {
                    drop(client);
                    continue;
                }
                let Ok(upstream) = TcpStream::connect(server.clone()).await else {
                    continue;
                };
                tokio::spawn(relay(
                    client,
                    upstream,
                    task_mode.clone(),
                    task_down.clone(),
                    task_cuts.clone(),
                ));
            }
        });
        Proxy {
            port,
            mode,
            down,
            cuts,
        }
    }

    fn arm(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }
}

/// Pass bytes both ways; client bytes holding a simple-query `COMMIT` trigger the armed fault.
async fn relay(
    client: TcpStream,
    upstream: TcpStream,
    mode: Arc<AtomicU8>,
    down: Arc<AtomicU8>,
    cuts: Arc<AtomicUsize>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = upstream.into_split();
    let replies = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
    });
    let mut buffer = vec![0u8; 64 * 1024];
    while let Ok(read) = client_read.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        let chunk = &buffer[..read];
        let commit = chunk.windows(7).any(|window| window == b"COMMIT\0");
        let armed = mode.load(Ordering::SeqCst);
        if commit && armed != PASS {
            mode.store(PASS, Ordering::SeqCst);
            cuts.fetch_add(1, Ordering::SeqCst);
            if armed == CUT_AFTER_COMMIT {
                let _ = server_write.write_all(chunk).await;
                let _ = server_write.flush().await;
                // Let the server commit before the connection goes away.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            if armed == CUT_AND_GO_DOWN {
                down.store(1, Ordering::SeqCst);
            }
            replies.abort();
            return;
        }
        if server_write.write_all(chunk).await.is_err() {
            break;
        }
    }
    replies.abort();
}

/// The host and port of the test server, from its URL (`postgres://USER@HOST:PORT/DB`).
fn server_of(url: &str) -> (String, u16) {
    let authority = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("a postgres:// URL");
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = host_port.rsplit_once(':').unwrap_or((host_port, "5432"));
    (host.to_owned(), port.parse().expect("a port"))
}

/// The kit URL with its host and port replaced by the proxy's.
fn through(url: &str, server: &(String, u16), proxy: &Proxy) -> String {
    url.replacen(
        &format!("{}:{}", server.0, server.1),
        &format!("127.0.0.1:{}", proxy.port),
        1,
    )
}

fn note(detail: &str) -> ReceiptDraft {
    ReceiptDraft {
        kind: Some(ReceiptKind::Attempt),
        outcome: Some(ReceiptOutcome::Committed),
        action: Some("kit.note".to_owned()),
        detail: Some(detail.to_owned()),
        ..ReceiptDraft::default()
    }
}

/// How many receipts carry `detail`, read directly.
async fn count_detail(store: &dyn countersign::Store, detail: &str) -> usize {
    store
        .receipts(0, 10_000)
        .await
        .expect("receipts")
        .iter()
        .filter(|stored| stored.body.contains(detail))
        .count()
}

async fn setup(case: &str) -> (countersign_conformance::store_kit::Fresh, Proxy, String) {
    let backend = postgres("lost_commit").with_options("max_connections=1&retry_budget_ms=3000");
    let fresh = fresh(&backend, case).await;
    let server = server_of(&postgres_url_from_env().expect("the test server"));
    let proxy = Proxy::start(server.clone()).await;
    let url = through(&fresh.url, &server, &proxy);
    (fresh, proxy, url)
}

/// As [`setup`], the proxy in front of PgBouncer (transaction mode) instead of the server.
async fn setup_behind_pgbouncer(
    case: &str,
) -> (countersign_conformance::store_kit::Fresh, Proxy, String) {
    let backend = match PostgresBackend::pgbouncer_from_env("lost_commit_pooled") {
        Ok(backend) => backend.with_options("max_connections=1&retry_budget_ms=3000"),
        Err(message) => panic!("{message}"),
    };
    let fresh = fresh(&backend, case).await;
    let pgbouncer = std::env::var(PGBOUNCER_URL_VAR).expect("checked by pgbouncer_from_env");
    let server = server_of(&pgbouncer);
    let proxy = Proxy::start(server.clone()).await;
    let url = through(&fresh.url, &server, &proxy);
    (fresh, proxy, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_pgbouncer_a_lost_commit_is_settled_on_another_server_connection() {
    let (fresh, proxy, url) = setup_behind_pgbouncer("landed_behind_pgbouncer").await;
    assert!(url.contains("pooler=transaction"), "{url}");
    let store = open_url_async(&url).await.expect("opens through the proxy");
    proxy.arm(CUT_AFTER_COMMIT);
    store
        .append_receipt(note("lost-commit-pooled-landed"), SystemClock.now())
        .await
        .expect("settled as committed");
    proxy.arm(CUT_BEFORE_COMMIT);
    store
        .append_receipt(note("lost-commit-pooled-aborted"), SystemClock.now())
        .await
        .expect("settled as aborted, then run again");
    assert_eq!(
        proxy.cuts.load(Ordering::SeqCst),
        2,
        "the proxy cut two COMMITs"
    );
    for detail in ["lost-commit-pooled-landed", "lost-commit-pooled-aborted"] {
        assert_eq!(
            count_detail(fresh.store.as_ref(), detail).await,
            1,
            "{detail}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_landed_but_was_not_heard_is_settled_as_committed_once() {
    let (fresh, proxy, url) = setup("committed_unheard").await;
    let store = open_url_async(&url).await.expect("opens through the proxy");
    proxy.arm(CUT_AFTER_COMMIT);
    let receipt = store
        .append_receipt(note("lost-commit-landed"), SystemClock.now())
        .await
        .expect("settled as committed");
    assert_eq!(
        proxy.cuts.load(Ordering::SeqCst),
        1,
        "the proxy cut a COMMIT"
    );
    assert_eq!(
        count_detail(fresh.store.as_ref(), "lost-commit-landed").await,
        1,
        "written exactly once: {receipt:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_never_arrived_is_run_again_and_written_once() {
    let (fresh, proxy, url) = setup("commit_never_arrived").await;
    let store = open_url_async(&url).await.expect("opens through the proxy");
    proxy.arm(CUT_BEFORE_COMMIT);
    store
        .append_receipt(note("lost-commit-aborted"), SystemClock.now())
        .await
        .expect("settled as aborted, then run again");
    assert_eq!(
        proxy.cuts.load(Ordering::SeqCst),
        1,
        "the proxy cut a COMMIT"
    );
    assert_eq!(
        count_detail(fresh.store.as_ref(), "lost-commit-aborted").await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsettleable_commit_is_reported_as_outcome_unknown() {
    let (fresh, proxy, url) = setup("commit_unsettleable").await;
    let store = open_url_async(&url).await.expect("opens through the proxy");
    proxy.arm(CUT_AND_GO_DOWN);
    let error = store
        .append_receipt(note("lost-commit-unknown"), SystemClock.now())
        .await
        .expect_err("no answer can be had");
    assert!(
        matches!(
            error,
            StoreError::OutcomeUnknown {
                operation: "append_receipt"
            }
        ),
        "expected OutcomeUnknown, got {error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("check with `countersign inspect`"),
        "{error}"
    );
    assert_eq!(proxy.down.load(Ordering::SeqCst), 1);
    // Never a guess: the receipt is there or not, and the direct store reads it as it is.
    assert!(count_detail(fresh.store.as_ref(), "lost-commit-unknown").await <= 1);
}
