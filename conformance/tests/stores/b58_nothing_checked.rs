//! Case B58: verification never passes when nothing was checked, on every backend. (a) an
//! empty log, (b) receipts whose hash columns are NULL (written outside Countersign, into a
//! table without its constraints), (c) a range past the head, (d) a good chain followed by
//! unhashed rows, (e) a healthy chain and a range of it. The report always says how much was
//! checked, the first and last positions and the log's head as stored.

use countersign::audit::{verify_store, verify_store_range};
use countersign::evidence::{ChainBreak, VerifyOutcome, VerifyRange};
use countersign_conformance::store_kit::{SqliteBackend, StoreBackend};

use super::b33_tamper_evidence::{tamper, twenty_receipts};
use super::support::{fresh, postgres};

/// The statement that lets the receipts table hold NULL hashes.
fn allow_null_hashes(url: &str) -> String {
    if url.starts_with("sqlite:") {
        "CREATE TABLE receipts_loose (seq INTEGER PRIMARY KEY, prev_hash TEXT, hash TEXT, body TEXT); INSERT INTO receipts_loose SELECT * FROM receipts; DROP TABLE receipts; ALTER TABLE receipts_loose RENAME TO receipts;".to_owned()
    } else {
        "ALTER TABLE receipts ALTER COLUMN hash DROP NOT NULL, ALTER COLUMN prev_hash DROP NOT NULL, DROP CONSTRAINT receipts_lane_prev_hash_key".to_owned()
    }
}

async fn a_empty_log(backend: &dyn StoreBackend) {
    let fresh = fresh(backend, "b58/a_empty").await;
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(
        report.outcome,
        VerifyOutcome::Unverifiable,
        "{}",
        backend.name()
    );
    assert_eq!(
        (report.checked, report.first_seq, report.last_seq),
        (0, None, None)
    );
    assert_eq!(report.log_head, None);
}

async fn b_null_hashes(backend: &dyn StoreBackend) {
    let fresh = twenty_receipts(backend, "b58/b_null").await;
    tamper(
        &fresh,
        &[
            allow_null_hashes(&fresh.url),
            "UPDATE receipts SET hash = NULL, prev_hash = NULL".to_owned(),
        ],
    )
    .await;
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("NULL columns are read, not refused");
    assert_eq!(
        report.outcome,
        VerifyOutcome::Unverifiable,
        "{}: {report:?}",
        backend.name()
    );
    assert_eq!(
        report.first_break,
        Some(ChainBreak::Unhashed { lane: 0, seq: 1 })
    );
    assert_eq!(report.checked, 0);
    let head = report.log_head.expect("the head as stored");
    assert_eq!(head.seq, 20);
    assert!(head.hash.is_empty(), "{head:?}");
    // One receipt with a hash among them makes the unhashed first one a failure.
    let fresh = twenty_receipts(backend, "b58/b_some").await;
    tamper(
        &fresh,
        &[
            allow_null_hashes(&fresh.url),
            "UPDATE receipts SET hash = NULL WHERE seq = 1".to_owned(),
        ],
    )
    .await;
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(report.outcome, VerifyOutcome::Failed, "{}", backend.name());
    assert_eq!(
        report.first_break,
        Some(ChainBreak::Unhashed { lane: 0, seq: 1 })
    );
}

async fn c_range_past_the_head(backend: &dyn StoreBackend) {
    let fresh = twenty_receipts(backend, "b58/c_range").await;
    let range = |from, to| Some(VerifyRange { from, to });
    let report = verify_store_range(fresh.store.as_ref(), range(25, None), None)
        .await
        .expect("verify");
    assert_eq!(
        report.outcome,
        VerifyOutcome::Unverifiable,
        "{}",
        backend.name()
    );
    assert_eq!(report.checked, 0);
    assert_eq!(report.log_head.map(|head| head.seq), Some(20));
    let report = verify_store_range(fresh.store.as_ref(), range(5, Some(25)), None)
        .await
        .expect("verify");
    assert_eq!(report.outcome, VerifyOutcome::Unverifiable);
    assert_eq!(
        (report.checked, report.first_seq, report.last_seq),
        (16, Some(5), Some(20))
    );
    let report = verify_store_range(fresh.store.as_ref(), range(9, Some(4)), None)
        .await
        .expect("verify");
    assert_eq!(report.outcome, VerifyOutcome::Unverifiable);
    assert_eq!(report.checked, 0);
}

async fn d_unhashed_rows_after_a_good_chain(backend: &dyn StoreBackend) {
    let fresh = twenty_receipts(backend, "b58/d_after").await;
    tamper(
        &fresh,
        &[
            allow_null_hashes(&fresh.url),
            "INSERT INTO receipts (seq, prev_hash, hash, body) VALUES (21, NULL, NULL, '{}'), (22, NULL, NULL, '{}')".to_owned(),
        ],
    )
    .await;
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(report.outcome, VerifyOutcome::Failed, "{}", backend.name());
    assert_eq!(
        report.first_break,
        Some(ChainBreak::Unhashed { lane: 0, seq: 21 })
    );
    assert_eq!(
        (report.checked, report.first_seq, report.last_seq),
        (20, Some(1), Some(20))
    );
    assert_eq!(report.log_head.map(|head| head.seq), Some(22));
}

async fn e_healthy(backend: &dyn StoreBackend) {
    let fresh = twenty_receipts(backend, "b58/e_healthy").await;
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(
        report.outcome,
        VerifyOutcome::Verified,
        "{}",
        backend.name()
    );
    assert_eq!(
        (report.checked, report.first_seq, report.last_seq),
        (20, Some(1), Some(20))
    );
    assert_eq!(report.log_head, report.head);
    let report = verify_store_range(
        fresh.store.as_ref(),
        Some(VerifyRange {
            from: 5,
            to: Some(15),
        }),
        None,
    )
    .await
    .expect("verify");
    assert_eq!(report.outcome, VerifyOutcome::Verified);
    assert_eq!(
        (report.checked, report.first_seq, report.last_seq),
        (11, Some(5), Some(15))
    );
}

async fn all_cases(backend: &dyn StoreBackend) {
    a_empty_log(backend).await;
    b_null_hashes(backend).await;
    c_range_past_the_head(backend).await;
    d_unhashed_rows_after_a_good_chain(backend).await;
    e_healthy(backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_verification_never_passes_with_nothing_checked() {
    all_cases(&SqliteBackend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_verification_never_passes_with_nothing_checked() {
    all_cases(&postgres("b58")).await;
}
