//! Case B33: concurrent appends from two processes never fork or gap the chain; edits, forged
//! insertions and truncation made directly in the database are found (truncation only against
//! an exported anchor; without one, verification says it cannot tell).

use std::time::Duration;

use countersign::audit::verify_store;
use countersign::evidence::{
    AnchorCheck, ReceiptDraft, ReceiptKind, ReceiptOutcome, StoredReceipt, seal,
};
use countersign::{Anchor, Clock, SystemClock};
use countersign_conformance::store_kit::worker::{self, start_in};
use countersign_conformance::store_kit::{
    Fresh, SqliteBackend, StoreBackend, admin_pool, postgres_url_from_env,
};
use serde_json::json;

use super::support::{fresh, postgres, schema_of, sqlite_file, worker as worker_binary};

/// Direct SQL on the store's own tables, as an attacker with database access would write it.
pub(super) async fn tamper(fresh: &Fresh, statements: &[String]) {
    if fresh.url.starts_with("sqlite:") {
        let connection = rusqlite::Connection::open(sqlite_file(&fresh.url)).expect("open");
        for statement in statements {
            connection.execute_batch(statement).expect("tamper");
        }
    } else {
        let schema = schema_of(&fresh.url);
        let admin = admin_pool(&postgres_url_from_env().expect("url"))
            .await
            .expect("admin");
        for statement in statements {
            let statement =
                format!("BEGIN; SET LOCAL search_path TO \"{schema}\"; {statement}; COMMIT;");
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
                .execute(&admin)
                .await
                .expect("tamper");
        }
    }
}

fn note(index: usize) -> ReceiptDraft {
    ReceiptDraft {
        kind: Some(ReceiptKind::Attempt),
        outcome: Some(ReceiptOutcome::Committed),
        action: Some("kit.note".to_owned()),
        detail: Some(format!("note {index}")),
        ..ReceiptDraft::default()
    }
}

pub(super) async fn twenty_receipts(backend: &dyn StoreBackend, case: &str) -> Fresh {
    let fresh = fresh(backend, case).await;
    for index in 0..20 {
        fresh
            .store
            .append_receipt(note(index), SystemClock.now())
            .await
            .expect("append");
    }
    fresh
}

async fn concurrent_appends_from_two_processes(backend: &dyn StoreBackend) {
    let fresh = fresh(backend, "b33/a_concurrent").await;
    let url = fresh.url.clone();
    let replies = tokio::task::block_in_place(move || {
        let mut workers = worker::spawn_many(&worker_binary(), &url, 2).expect("workers start");
        let request = json!({"op": "append_many", "count": 500, "start_at_ms": start_in(Duration::from_millis(200))});
        worker::exchange(&mut workers, &[request.clone(), request]).expect("workers answer")
    });
    for reply in &replies {
        assert_eq!(reply["ok"], json!(500), "{}: {reply}", backend.name());
    }
    let mut receipts: Vec<StoredReceipt> = Vec::new();
    loop {
        let page = fresh
            .store
            .receipts(receipts.last().map_or(0, |last| last.position), 500)
            .await
            .expect("read");
        if page.is_empty() {
            break;
        }
        receipts.extend(page);
    }
    assert_eq!(receipts.len(), 1000);
    // No fork: no two receipts of a lane share a prev_hash.
    let mut previous: Vec<(u32, &str)> = receipts
        .iter()
        .map(|receipt| (receipt.lane, receipt.prev_hash.as_str()))
        .collect();
    previous.sort_unstable();
    previous.dedup();
    assert_eq!(
        previous.len(),
        1000,
        "{}: two receipts of a lane share a prev_hash (a fork)",
        backend.name()
    );
    // No gap: the log's places run from 1, and each lane's `seq` from 1, in log order.
    let mut next_in_lane = std::collections::BTreeMap::new();
    for (index, receipt) in receipts.iter().enumerate() {
        assert_eq!(receipt.position, index as u64 + 1, "a gap in the log");
        let next = next_in_lane.entry(receipt.lane).or_insert(1_u64);
        assert_eq!(receipt.seq, *next, "a gap in lane {}", receipt.lane);
        *next += 1;
    }
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(report.first_break, None, "{}", backend.name());
}

async fn edited_record_is_named(backend: &dyn StoreBackend) {
    let fresh = twenty_receipts(backend, "b33/b_edit").await;
    tamper(
        &fresh,
        &[
            "UPDATE receipts SET body = replace(body, 'note 9', 'note 0') WHERE seq = 10"
                .to_owned(),
        ],
    )
    .await;
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    let first = report.first_break.expect("the edit is found");
    assert_eq!(first.seq(), 10, "{}: {first}", backend.name());
    assert!(
        first.to_string().contains("receipt 10 was altered"),
        "{first}"
    );
}

async fn truncation_without_an_anchor_is_reported_undetectable(backend: &dyn StoreBackend) {
    let fresh = twenty_receipts(backend, "b33/c_truncate").await;
    tamper(&fresh, &["DELETE FROM receipts WHERE seq > 17".to_owned()]).await;
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(report.first_break, None);
    assert_eq!(report.checked, 17);
    // Not "OK": the report says a chain alone cannot show that its newest receipts are gone.
    assert_eq!(report.anchor, AnchorCheck::NotGiven);
    // PostgreSQL records each lane's head apart from the receipts, so a deletion that leaves
    // that record alone is caught there; SQLite's head is its newest receipt.
    if fresh.url.starts_with("sqlite:") {
        assert_eq!(report.recorded_heads, AnchorCheck::NotGiven);
    } else {
        assert!(
            matches!(&report.recorded_heads, AnchorCheck::Failed { detail } if detail.contains("receipt 20")),
            "{report:?}"
        );
        assert!(!report.is_intact());
    }
}

async fn forged_insertion_is_named(backend: &dyn StoreBackend) {
    let fresh = twenty_receipts(backend, "b33/d_forge").await;
    let tenth = fresh
        .store
        .receipts(9, 1)
        .await
        .expect("read")
        .pop()
        .expect("receipt 10");
    let head = countersign::evidence::ChainHead {
        seq: tenth.seq,
        hash: tenth.hash.clone(),
    };
    let (_, forged) = seal(note(999), Some(&head), SystemClock.now()).expect("seal");
    let drop_unique = if fresh.url.starts_with("sqlite:") {
        "CREATE TABLE receipts_copy (seq INTEGER PRIMARY KEY, prev_hash TEXT NOT NULL, hash TEXT NOT NULL, body TEXT NOT NULL); INSERT INTO receipts_copy SELECT * FROM receipts; DROP TABLE receipts; ALTER TABLE receipts_copy RENAME TO receipts;".to_owned()
    } else {
        "ALTER TABLE receipts DROP CONSTRAINT receipts_lane_prev_hash_key".to_owned()
    };
    tamper(
        &fresh,
        &[
            drop_unique,
            "UPDATE receipts SET seq = -seq WHERE seq > 10".to_owned(),
            "UPDATE receipts SET seq = 1 - seq WHERE seq < 0".to_owned(),
            format!(
                "INSERT INTO receipts (seq, prev_hash, hash, body) VALUES (11, '{}', '{}', '{}')",
                forged.prev_hash,
                forged.hash,
                forged.body.replace('\'', "''")
            ),
        ],
    )
    .await;
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    let first = report.first_break.expect("the forgery is found");
    // The forged receipt is internally consistent; the real receipt after it no longer
    // follows, and is the first record the chain can prove bad.
    assert_eq!(first.seq(), 12, "{}: {first}", backend.name());
}

async fn truncation_against_an_anchor_fails(backend: &dyn StoreBackend) {
    let fresh = twenty_receipts(backend, "b33/e_anchor").await;
    let anchor: Anchor = fresh
        .store
        .anchor()
        .await
        .expect("anchor")
        .expect("an anchor");
    assert_eq!((anchor.seq, anchor.lanes.len()), (20, 0), "{anchor:?}");
    tamper(&fresh, &["DELETE FROM receipts WHERE seq > 17".to_owned()]).await;
    let report = verify_store(fresh.store.as_ref(), Some(&anchor))
        .await
        .expect("verify");
    assert!(
        matches!(report.anchor, AnchorCheck::Failed { .. }),
        "{:?}",
        report.anchor
    );
    assert!(!report.is_intact());
}

async fn all_cases(backend: &dyn StoreBackend) {
    concurrent_appends_from_two_processes(backend).await;
    edited_record_is_named(backend).await;
    truncation_without_an_anchor_is_reported_undetectable(backend).await;
    forged_insertion_is_named(backend).await;
    truncation_against_an_anchor_fails(backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_chain_resists_forks_and_names_tampering() {
    all_cases(&SqliteBackend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_chain_resists_forks_and_names_tampering() {
    all_cases(&postgres("b33")).await;
}
