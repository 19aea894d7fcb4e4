//! Case B57: a session advisory lock stranded behind a transaction-pooling proxy. Two kernels
//! (worker processes) append evidence and reserve effect keys at the same time through PgBouncer
//! in transaction mode (`pooler=transaction`), with a direct connection as the control:
//!
//! - a transaction holding the chain head and a transaction advisory lock is killed (its
//!   `psql` gets SIGKILL while idle in the transaction): the other kernel's appends, waiting on
//!   that lock, then proceed, every one of them;
//! - one kernel is killed with SIGKILL while both race over the same 300 effect keys: the other
//!   finishes, every key it did not run refused as typed `in_progress` or `duplicate`;
//! - afterwards: no two receipts share a previous hash (no fork) and the log verifies, no effect
//!   key was reserved twice (`attempts` is 1 on every row), and no advisory lock is held by a
//!   server connection outside a transaction (no lock outlived its transaction).
//!
//! The static half of the case (no session-level lock or `SET` in the code) is the tidy rule
//! `pooler-safe`.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use countersign::audit::verify_store;
use countersign_conformance::store_kit::worker::{self, Worker, start_in};
use countersign_conformance::store_kit::{
    PostgresBackend, StoreBackend, admin_pool, postgres_url_from_env,
};
use serde_json::{Value, json};

use super::support::{fresh, postgres, schema_of, worker as worker_binary};

/// How long the surviving kernel may take to finish after the kill before the test calls the
/// lock stranded (generous: a stranded lock waits forever, a released one at once).
const STRANDED_AFTER: Duration = Duration::from_secs(60);

/// The store URL without its query (`psql` takes no store options).
fn plain(url: &str) -> &str {
    url.split('?').next().unwrap_or(url)
}

/// A `psql` in the middle of a transaction holding every lane's head row (so a writer has no
/// free lane and waits) and a transaction advisory lock, as a kernel killed mid-append would
/// leave it.
fn hold_the_chain_head(url: &str, schema: &str) -> Child {
    let mut child = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", plain(url)])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("psql starts (it comes with PostgreSQL: run .ci/postgres.sh)");
    let stdin = child.stdin.as_mut().expect("psql's stdin is piped");
    write!(
        stdin,
        "BEGIN;\nSET LOCAL search_path TO \"{schema}\";\nSELECT pg_advisory_xact_lock(hashtextextended('countersign:b57', 0));\nSELECT seq FROM lane_heads ORDER BY lane FOR UPDATE;\n"
    )
    .expect("psql takes the statements");
    stdin.flush().expect("psql takes the statements");
    child
}

/// Wait until a server connection sits idle inside the transaction that locked the lane heads.
async fn wait_until_held(direct: &sqlx::PgPool) {
    for _ in 0..200 {
        let held: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction' AND query LIKE '%FROM lane_heads ORDER BY lane FOR UPDATE%'",
        )
        .fetch_one(direct)
        .await
        .expect("pg_stat_activity is readable");
        if held > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the psql transaction never took the chain head lock");
}

/// Wait for `worker`'s reply, or fail naming a stranded lock.
async fn reply_within(worker: Worker, what: &str) -> (Worker, Value) {
    let waiting = tokio::task::spawn_blocking(move || {
        let mut worker = worker;
        let reply = worker.receive();
        (worker, reply)
    });
    match tokio::time::timeout(STRANDED_AFTER, waiting).await {
        Ok(Ok((worker, Ok(reply)))) => (worker, reply),
        Ok(Ok((_, Err(message)))) => panic!("{what}: the surviving kernel failed: {message}"),
        Ok(Err(error)) => panic!("{what}: {error}"),
        Err(_) => panic!(
            "{what}: the surviving kernel still waits {STRANDED_AFTER:?} after the kill: a lock outlived the killed transaction"
        ),
    }
}

async fn two_kernels_one_killed(backend: &PostgresBackend) {
    let name = backend.name();
    let fresh = fresh(backend, "b57/two_kernels_one_killed").await;
    let url = fresh.url.clone();
    let schema = schema_of(&url);
    let direct = admin_pool(&postgres_url_from_env().expect("the test server"))
        .await
        .expect("a direct connection");
    let mut workers = tokio::task::block_in_place(|| {
        worker::spawn_many(&worker_binary(), &url, 2).expect("workers start")
    });
    let survivor = workers.pop().expect("two workers");
    let mut victim = workers.pop().expect("two workers");

    // 1. A transaction killed while it holds the chain head: the survivor's appends wait on it,
    //    then all go through.
    let mut holder = hold_the_chain_head(&url, &schema);
    wait_until_held(&direct).await;
    let mut survivor = survivor;
    survivor
        .send(&json!({"op": "append_many", "count": 20, "start_at_ms": start_in(Duration::ZERO)}))
        .expect("the survivor takes the request");
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.kill().expect("psql is killed");
    let _ = holder.wait();
    let (survivor, appended) = reply_within(survivor, &format!("{name}: appends")).await;
    assert_eq!(
        appended["ok"],
        json!(20),
        "{name}: appends after the kill: {appended}"
    );

    // 2. Both kernels race over the same keys; one is killed at a moment inside that race.
    let start = start_in(Duration::from_millis(50));
    let race = json!({"op": "execute_many", "prefix": "b57", "count": 300, "start_at_ms": start});
    victim.send(&race).expect("the victim takes the request");
    let mut survivor = survivor;
    survivor
        .send(&race)
        .expect("the survivor takes the request");
    tokio::time::sleep(Duration::from_millis(50 + 250)).await;
    tokio::task::block_in_place(|| victim.kill());
    let (survivor, raced) = reply_within(survivor, &format!("{name}: the key race")).await;
    let ran = raced["ran"].as_u64().expect("a count");
    let mut refused = 0;
    for (reason, count) in raced["reasons"].as_object().expect("reasons").iter() {
        assert!(
            reason == "in_progress" || reason == "duplicate",
            "{name}: a key the survivor did not run was refused as `{reason}`, not a typed in_progress or duplicate: {raced}"
        );
        refused += count.as_u64().expect("a count");
    }
    assert_eq!(ran + refused, 300, "{name}: {raced}");

    // 3. The survivor goes on after the kill.
    let mut survivor = survivor;
    let after = survivor
        .request(&json!({"op": "append_many", "count": 5, "start_at_ms": start_in(Duration::ZERO)}))
        .expect("the survivor answers");
    assert_eq!(
        after["ok"],
        json!(5),
        "{name}: appends after the kill: {after}"
    );
    let _ = survivor.send(&json!({"op": "quit"}));

    // No key reserved twice, no fork, the log verifies.
    let rows: Vec<(String, i32)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT key, attempts FROM \"{schema}\".effects"
    )))
    .fetch_all(&direct)
    .await
    .expect("effects are readable");
    assert!(rows.len() <= 300, "{name}: {} effect rows", rows.len());
    assert!(
        rows.len() as u64 >= ran,
        "{name}: {} rows, {ran} run",
        rows.len()
    );
    for (key, attempts) in &rows {
        assert_eq!(
            *attempts, 1,
            "{name}: effect key `{key}` reserved {attempts} times"
        );
    }
    let forks: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM (SELECT lane, prev_hash FROM \"{schema}\".receipts GROUP BY lane, prev_hash HAVING count(*) > 1) AS shared"
    )))
    .fetch_one(&direct)
    .await
    .expect("receipts are readable");
    assert_eq!(forks, 0, "{name}: receipts of a lane share a previous hash");
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("the log is readable");
    assert_eq!(report.first_break, None, "{name}: the log does not verify");
    assert!(
        report.checked >= 25,
        "{name}: {} receipts checked",
        report.checked
    );

    // No lock outlived its transaction: no advisory lock on a connection outside a transaction.
    let stranded: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND a.datname = current_database() AND a.state = 'idle'",
    )
    .fetch_one(&direct)
    .await
    .expect("pg_locks is readable");
    assert_eq!(
        stranded, 0,
        "{name}: advisory locks held outside a transaction"
    );
    direct.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_kernels_through_pgbouncer_one_killed_no_fork_no_double_reservation() {
    let backend = match PostgresBackend::pgbouncer_from_env("b57_pooled") {
        Ok(backend) => backend,
        Err(message) => panic!("{message}"),
    };
    two_kernels_one_killed(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_kernels_on_a_direct_connection_one_killed_no_fork_no_double_reservation() {
    two_kernels_one_killed(&postgres("b57_direct")).await;
}
