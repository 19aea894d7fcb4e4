//! Verifying a store that is being written (found by a new user running `countersign verify`
//! beside working agents): the chain check reports the log as it stood when the check began,
//! and the effects cross-check, which reads the receipts and then the table, never calls a row
//! written between its two reads tampering. On SQLite and PostgreSQL.
//!
//! PostgreSQL reads `COUNTERSIGN_TEST_POSTGRES_URL` and fails loudly without it (run
//! `.ci/postgres.sh`).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use countersign::audit::{cross_check_effects, verify_store};
use countersign::evidence::VerifyOutcome;
use countersign::store::{self, SqliteStore, Store};
use countersign::{ActionRequest, Control, ExecutorError, Policy, Principal, StaticIdentity};
use serde_json::json;

const POLICY: &str = "schema: countersign.policy/v1\nenvironment: test\nactions:\n  job:\n    effect: \"job:{id}\"\n    decision: allow\n";

/// How many calls each of the two writers commits.
const WRITES: u64 = 400;

/// Two writers commit allow + effect-key calls without pause while checks run one after the
/// other until they are done; every check must find the chain intact up to the head it read
/// and the effects table in agreement with the receipts.
async fn checks_while_writers_write(store: Arc<dyn Store>) {
    let control = Control::builder_shared(
        Arc::new(Policy::from_yaml_str(POLICY, None).expect("policy")),
        Arc::clone(&store),
    )
    .identity(StaticIdentity::new(
        Principal::new("agent:live").expect("principal"),
    ))
    .build();
    let finished = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for writer in 0..2 {
        let control = control.clone();
        let finished = Arc::clone(&finished);
        writers.push(tokio::spawn(async move {
            let mut written = 0_u64;
            while written < WRITES {
                let request =
                    ActionRequest::new("job", &json!({"id": format!("{writer}-{written}")}));
                control
                    .execute(request, |_| async { Ok::<_, ExecutorError>(()) })
                    .await
                    .expect("allowed, and committed");
                written += 1;
            }
            finished.fetch_add(1, Ordering::Relaxed);
            written
        }));
    }
    let mut check = 0;
    while finished.load(Ordering::Relaxed) < 2 {
        check += 1;
        let report = verify_store(store.as_ref(), None).await.expect("verify");
        assert_eq!(report.first_break, None, "check {check}: {report:?}");
        if let Some(head) = &report.log_head {
            assert_eq!(report.outcome, VerifyOutcome::Verified, "{report:?}");
            // What was checked is the log up to the head reported, not a moving target.
            assert_eq!(report.checked, head.seq, "check {check}: {report:?}");
        }
        let effects = cross_check_effects(store.as_ref())
            .await
            .expect("cross-check");
        assert!(
            effects.agrees(),
            "check {check}: a live write read as tampering: {:?}",
            effects.disagreements
        );
    }
    assert!(check > 1, "the checks did not overlap the writes");
    let mut written = 0;
    for writer in writers {
        written += writer.await.expect("a writer");
    }
    assert_eq!(written, 2 * WRITES);
    // Once quiet, everything written is checked.
    let report = verify_store(store.as_ref(), None).await.expect("verify");
    assert_eq!(report.outcome, VerifyOutcome::Verified, "{report:?}");
    assert_eq!(report.checked, written, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn sqlite_checks_a_store_in_use_without_false_alarms() {
    let folder = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(folder.path().join("live.db")).expect("sqlite"));
    checks_while_writers_write(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn postgres_checks_a_store_in_use_without_false_alarms() {
    let store = store::open_url_async(&support::fresh_postgres_url("live"))
        .await
        .expect("the PostgreSQL store opens");
    checks_while_writers_write(store).await;
}
