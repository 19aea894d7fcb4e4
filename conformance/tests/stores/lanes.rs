//! Issue #21: a PostgreSQL store's log in several lanes. A writer takes the lowest lane no
//! other transaction holds; the log places each lane's receipts in order and after what their
//! transactions saw; `verify` names an edit, a deletion (by the place that still lists it, the
//! newest included), a forged insertion and a moved receipt in any lane, a receipt in a lane
//! the store never writes, and a lane's deleted tail whose places were renumbered too against
//! an anchor naming every lane.
//!
//! The lanes are made deterministic by holding lane heads from another transaction, as a
//! concurrent writer would, while the store appends.

use countersign::audit::verify_store;
use countersign::evidence::{
    AnchorCheck, ChainBreak, ChainHead, ReceiptDraft, ReceiptKind, ReceiptOutcome, StoredReceipt,
    VerifyOutcome, seal_in_lane,
};
use countersign::{Anchor, Clock, SystemClock};
use countersign_conformance::store_kit::{Fresh, admin_pool, postgres_url_from_env};

use super::b33_tamper_evidence::tamper;
use super::support::{fresh, postgres, schema_of};

fn note(index: usize) -> ReceiptDraft {
    ReceiptDraft {
        kind: Some(ReceiptKind::Attempt),
        outcome: Some(ReceiptOutcome::Committed),
        action: Some("lanes.note".to_owned()),
        detail: Some(format!("note {index}")),
        ..ReceiptDraft::default()
    }
}

/// Append `count` receipts while another transaction holds the heads of `held` lanes; returns
/// the lanes they went to.
async fn append_holding(fresh: &Fresh, held: &[i32], count: usize, first: usize) -> Vec<u32> {
    let admin = admin_pool(&postgres_url_from_env().expect("url"))
        .await
        .expect("admin");
    let mut holder = admin.begin().await.expect("begin");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "SET LOCAL search_path TO \"{}\"",
        schema_of(&fresh.url)
    )))
    .execute(&mut *holder)
    .await
    .expect("search_path");
    let locked = sqlx::query("SELECT lane FROM lane_heads WHERE lane = ANY($1) FOR UPDATE")
        .bind(held)
        .fetch_all(&mut *holder)
        .await
        .expect("hold the lanes");
    assert_eq!(locked.len(), held.len());
    let mut lanes = Vec::new();
    for index in first..first + count {
        let receipt = fresh
            .store
            .append_receipt(note(index), SystemClock.now())
            .await
            .expect("append");
        lanes.push(receipt.lane);
    }
    holder.rollback().await.expect("release");
    lanes
}

/// A store whose log holds lane 0's receipts 1–3, lane 1's 1–3, lane 2's 1–3 and lane 0's
/// 4–5, written in that order.
async fn three_lanes(case: &str) -> Fresh {
    let fresh = fresh(&postgres("lanes"), case).await;
    assert_eq!(append_holding(&fresh, &[], 3, 0).await, vec![0, 0, 0]);
    assert_eq!(append_holding(&fresh, &[0], 3, 3).await, vec![1, 1, 1]);
    assert_eq!(append_holding(&fresh, &[0, 1], 3, 6).await, vec![2, 2, 2]);
    assert_eq!(append_holding(&fresh, &[], 2, 9).await, vec![0, 0]);
    fresh
}

async fn log_of(fresh: &Fresh) -> Vec<StoredReceipt> {
    fresh.store.receipts(0, 1_000).await.expect("receipts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_take_free_lanes_and_the_log_places_them_in_the_order_they_were_written() {
    let fresh = three_lanes("lanes/order").await;
    let log = log_of(&fresh).await;
    let placed: Vec<(u64, u32, u64)> = log
        .iter()
        .map(|receipt| (receipt.position, receipt.lane, receipt.seq))
        .collect();
    assert_eq!(
        placed,
        vec![
            (1, 0, 1),
            (2, 0, 2),
            (3, 0, 3),
            (4, 1, 1),
            (5, 1, 2),
            (6, 1, 3),
            (7, 2, 1),
            (8, 2, 2),
            (9, 2, 3),
            (10, 0, 4),
            (11, 0, 5),
        ]
    );
    // Each lane is its own chain; a lane's first receipt starts from genesis.
    assert_eq!(log[3].prev_hash, countersign::id::ReceiptHash::genesis());
    assert_eq!(log[9].prev_hash, log[2].hash);
    let anchor = fresh.store.anchor().await.expect("anchor").expect("anchor");
    assert_eq!(anchor.seq, 5);
    assert_eq!(anchor.hash, log[10].hash.as_str());
    let named: Vec<(u32, u64)> = anchor
        .lanes
        .iter()
        .map(|head| (head.lane, head.seq))
        .collect();
    assert_eq!(named, vec![(1, 3), (2, 3)]);
    let report = verify_store(fresh.store.as_ref(), Some(&anchor))
        .await
        .expect("verify");
    assert_eq!(report.outcome, VerifyOutcome::Verified, "{report:?}");
    assert_eq!(report.checked, 11);
    assert_eq!(report.anchor, AnchorCheck::Matched);
    assert_eq!(report.recorded_heads, AnchorCheck::Matched);
    let reached: Vec<(u32, u64)> = report
        .lanes
        .iter()
        .map(|head| (head.lane, head.seq))
        .collect();
    assert_eq!(reached, vec![(1, 3), (2, 3)]);
    // The log's head is its last place.
    let head = fresh.store.chain_head().await.expect("head").expect("head");
    assert_eq!((head.seq, head.hash), (11, log[10].hash.clone()));
    // A part of the log checks from the receipt before it, each other lane from its first.
    let part = countersign::audit::verify_store_range(
        fresh.store.as_ref(),
        Some(countersign::evidence::VerifyRange {
            from: 5,
            to: Some(10),
        }),
        None,
    )
    .await
    .expect("verify part");
    assert_eq!(part.outcome, VerifyOutcome::Verified, "{part:?}");
    assert_eq!(part.checked, 6);
}

/// Verify a tampered three-lane store; the first break.
async fn first_break_after(case: &str, statements: &[&str]) -> ChainBreak {
    let fresh = three_lanes(case).await;
    // Placed before the tampering, as a store read since would have them.
    assert_eq!(log_of(&fresh).await.len(), 11);
    let statements: Vec<String> = statements.iter().map(|s| (*s).to_owned()).collect();
    tamper(&fresh, &statements).await;
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(report.outcome, VerifyOutcome::Failed, "{report:?}");
    report.first_break.expect("a break")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_in_any_lane_is_named_with_its_lane() {
    for lane in [0, 1, 2] {
        let first = first_break_after(
            &format!("lanes/edit{lane}"),
            &[&format!(
                "UPDATE receipts SET body = replace(body, 'note', 'fake') WHERE lane = {lane} AND seq = 2"
            )],
        )
        .await;
        assert!(
            matches!(first, ChainBreak::HashMismatch { lane: l, seq: 2, .. } if l == lane),
            "lane {lane}: {first}"
        );
        if lane != 0 {
            assert!(
                first
                    .to_string()
                    .starts_with(&format!("receipt 2 of lane {lane} was altered")),
                "{first}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_in_any_lane_is_named_by_the_place_that_lists_it() {
    // Lane 0's receipt 2 is at place 2, lane 1's at 5, lane 2's at 8.
    for (lane, position) in [(0, 2), (1, 5), (2, 8)] {
        let first = first_break_after(
            &format!("lanes/delete{lane}"),
            &[&format!(
                "DELETE FROM receipts WHERE lane = {lane} AND seq = 2"
            )],
        )
        .await;
        assert_eq!(
            first,
            ChainBreak::Missing {
                lane,
                seq: 2,
                position
            },
            "lane {lane}: {first}"
        );
        assert!(
            first
                .to_string()
                .contains(&format!("is missing: the log names it at place {position}")),
            "{first}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_with_its_place_is_a_gap_in_its_lane_or_in_the_places() {
    // Lane 1's receipt 2 and its place: the next place read, 6, is lane 1's receipt 3.
    let first = first_break_after(
        "lanes/delete_place",
        &[
            "DELETE FROM receipts WHERE lane = 1 AND seq = 2",
            "DELETE FROM receipt_positions WHERE position = 5",
        ],
    )
    .await;
    assert_eq!(
        first,
        ChainBreak::SeqGap {
            lane: 1,
            expected: 2,
            found: 3
        },
        "{first}"
    );
    // Lane 1's receipt 3 and its place: the next place read, 7, is lane 2's first, whose own
    // lane holds; the break is named by the place left empty, not by the receipt after it.
    let first = first_break_after(
        "lanes/delete_place_last",
        &[
            "DELETE FROM receipts WHERE lane = 1 AND seq = 3",
            "DELETE FROM receipt_positions WHERE position = 6",
        ],
    )
    .await;
    assert_eq!(
        first,
        ChainBreak::Misplaced {
            lane: 2,
            seq: 1,
            expected_position: 6,
            position: 7
        },
        "{first}"
    );
    assert!(
        first.to_string().starts_with(
            "no receipt is at place 6 of the log: the next one, receipt 1 of lane 2, is at place 7"
        ),
        "{first}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_insertion_in_a_lane_is_named_at_the_receipt_after_it() {
    let fresh = three_lanes("lanes/forge").await;
    let log = log_of(&fresh).await;
    // Lane 2's receipt 1, and a forgery sealed onto it as lane 2's receipt 2.
    let first_of_lane_2 = &log[6];
    let (_, forged) = seal_in_lane(
        2,
        note(999),
        Some(&ChainHead {
            seq: first_of_lane_2.seq,
            hash: first_of_lane_2.hash.clone(),
        }),
        SystemClock.now(),
    )
    .expect("seal");
    tamper(
        &fresh,
        &[
            "ALTER TABLE receipts DROP CONSTRAINT receipts_lane_prev_hash_key".to_owned(),
            // Make room: lane 2's receipts 2 and 3 become 3 and 4, every place from 8 on moves
            // up one, and the forgery takes lane 2's receipt 2 at place 8.
            "UPDATE receipt_positions SET seq = -seq WHERE lane = 2 AND seq > 1".to_owned(),
            "UPDATE receipts SET seq = -seq WHERE lane = 2 AND seq > 1".to_owned(),
            "UPDATE receipts SET seq = 1 - seq WHERE lane = 2 AND seq < 0".to_owned(),
            "UPDATE receipt_positions SET seq = 1 - seq WHERE lane = 2 AND seq < 0".to_owned(),
            "UPDATE receipt_positions SET position = -position WHERE position >= 8".to_owned(),
            "UPDATE receipt_positions SET position = 1 - position WHERE position < 0".to_owned(),
            "INSERT INTO receipt_positions (position, lane, seq) VALUES (8, 2, 2)".to_owned(),
            format!(
                "INSERT INTO receipts (lane, seq, prev_hash, hash, body) VALUES (2, 2, '{}', '{}', '{}')",
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
    // The forged receipt is consistent on its own; the real one after it no longer follows.
    assert!(
        matches!(
            first,
            ChainBreak::PrevHashMismatch {
                lane: 2,
                seq: 3,
                ..
            }
        ),
        "{first}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_in_a_lane_no_writer_uses_is_named() {
    let fresh = three_lanes("lanes/foreign").await;
    assert_eq!(log_of(&fresh).await.len(), 11);
    // A whole chain of its own, from genesis, in lane 99, placed at the end of the log: it
    // holds on its own, and no recorded head names lane 99, as the store keeps lanes 0 to 15.
    // (The placer places only the lanes the store keeps, so the forger places it too.)
    let (_, forged) = seal_in_lane(99, note(999), None, SystemClock.now()).expect("seal");
    tamper(
        &fresh,
        &[
            format!(
                "INSERT INTO receipts (lane, seq, prev_hash, hash, body) VALUES (99, 1, '{}', '{}', '{}')",
                forged.prev_hash,
                forged.hash,
                forged.body.replace('\'', "''")
            ),
            "INSERT INTO receipt_positions (position, lane, seq) VALUES (12, 99, 1)".to_owned(),
        ],
    )
    .await;
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(report.outcome, VerifyOutcome::Failed, "{report:?}");
    let first = report.first_break.expect("the forgery is found");
    assert!(
        matches!(
            first,
            ChainBreak::Unreadable {
                lane: 99,
                seq: 1,
                ..
            }
        ),
        "{first}"
    );
    assert!(
        first
            .to_string()
            .contains("this store writes lanes 0 to 15 only"),
        "{first}"
    );
    // Everything before it held.
    assert_eq!(report.checked, 11);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unplaced_receipt_in_a_lane_no_writer_uses_is_named() {
    let fresh = three_lanes("lanes/stray").await;
    // Rows in lanes 99 and -1 with no place: no reader of the log sees them, so the walk
    // checks the 11 receipts and finds nothing; the store is asked for such rows after it.
    let mut statements = Vec::new();
    for lane in [99, -1] {
        let (_, forged) = seal_in_lane(99, note(999), None, SystemClock.now()).expect("seal");
        statements.push(format!(
            "INSERT INTO receipts (lane, seq, prev_hash, hash, body) VALUES ({lane}, 1, '{}', '{}', '{}')",
            forged.prev_hash,
            forged.hash,
            forged.body.replace('\'', "''")
        ));
    }
    tamper(&fresh, &statements).await;
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(report.outcome, VerifyOutcome::Failed, "{report:?}");
    assert_eq!(report.checked, 11);
    let first = report.first_break.expect("the stray rows are found");
    let text = first.to_string();
    // The lowest first: lane -1, which has no `u32` and is named as stored.
    assert!(
        matches!(first, ChainBreak::Unreadable { seq: 1, .. }),
        "{text}"
    );
    assert!(
        text.contains("stored in lane -1, but this store writes lanes 0 to 15 only, and no place of the log holds it"),
        "{text}"
    );
    assert!(
        text.contains("(1 other receipt is stored the same way)"),
        "{text}"
    );
    // Reading the whole log (export, `verify --checkpoint`) names it too.
    let log = countersign::audit::read_log(fresh.store.as_ref(), |_| false)
        .await
        .expect("read");
    assert_eq!(log.report.first_break, Some(first));
    // A range is a span of places: a row with none is outside every range.
    let ranged = countersign::audit::verify_store_range(
        fresh.store.as_ref(),
        Some(countersign::evidence::VerifyRange {
            from: 1,
            to: Some(11),
        }),
        None,
    )
    .await
    .expect("verify a range");
    assert_eq!(ranged.first_break, None, "{ranged:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_moved_in_the_log_is_named() {
    let first = first_break_after(
        "lanes/moved",
        &["UPDATE receipt_positions SET position = 100 WHERE position = 8"],
    )
    .await;
    assert_eq!(
        first,
        ChainBreak::SeqGap {
            lane: 2,
            expected: 2,
            found: 3
        },
        "{first}"
    );
    // Moved to the end of the log instead: its lane still holds, but its place does not.
    let first = first_break_after(
        "lanes/moved_last",
        &["UPDATE receipt_positions SET position = 100 WHERE position = 11"],
    )
    .await;
    assert_eq!(
        first,
        ChainBreak::Misplaced {
            lane: 0,
            seq: 5,
            expected_position: 11,
            position: 100
        },
        "{first}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lanes_deleted_tail_is_caught_by_its_place_or_by_an_anchor() {
    // Deleted alone, lane 1's last receipt is still listed at its place.
    let first = first_break_after(
        "lanes/hole",
        &["DELETE FROM receipts WHERE lane = 1 AND seq = 3"],
    )
    .await;
    assert_eq!(
        first,
        ChainBreak::Missing {
            lane: 1,
            seq: 3,
            position: 6
        },
        "{first}"
    );
    // So is the log's newest receipt, with no anchor and no write after it; the log's head
    // is still its last place.
    let fresh = three_lanes("lanes/newest").await;
    assert_eq!(log_of(&fresh).await.len(), 11);
    tamper(
        &fresh,
        &["DELETE FROM receipts WHERE lane = 0 AND seq = 5".to_owned()],
    )
    .await;
    let report = verify_store(fresh.store.as_ref(), None)
        .await
        .expect("verify");
    assert_eq!(report.outcome, VerifyOutcome::Failed, "{report:?}");
    assert_eq!(
        report.first_break,
        Some(ChainBreak::Missing {
            lane: 0,
            seq: 5,
            position: 11
        })
    );
    assert_eq!(report.checked, 10);
    let head = report.log_head.expect("the log's head");
    assert_eq!(head.seq, 11);
    assert!(head.hash.trim().is_empty(), "{head:?}");
    // A reader of the receipts is told too, instead of getting a receipt that is not there.
    let listed = log_of(&fresh).await;
    let newest = listed.last().expect("the last place");
    assert!(newest.missing);
    let refused = newest.to_receipt().expect_err("no receipt to read");
    assert!(refused.starts_with("receipt 5 is missing"), "{refused}");
    // Deleted with its place, and every later place moved down one, only the anchor, which
    // names every lane's head, can tell.
    for (lane, position) in [(1_u32, 6), (2, 9)] {
        let fresh = three_lanes(&format!("lanes/tail{lane}")).await;
        assert_eq!(log_of(&fresh).await.len(), 11);
        let anchor: Anchor = fresh.store.anchor().await.expect("anchor").expect("anchor");
        tamper(
            &fresh,
            &[
                format!("DELETE FROM receipts WHERE lane = {lane} AND seq = 3"),
                format!("DELETE FROM receipt_positions WHERE position = {position}"),
                format!(
                    "UPDATE receipt_positions SET position = -position WHERE position > {position}"
                ),
                "UPDATE receipt_positions SET position = -position - 1 WHERE position < 0"
                    .to_owned(),
            ],
        )
        .await;
        let bare = verify_store(fresh.store.as_ref(), None)
            .await
            .expect("verify");
        assert_eq!(bare.first_break, None, "{bare:?}");
        assert_eq!(bare.anchor, AnchorCheck::NotGiven);
        // The chain alone holds, but the head the store recorded for the lane is gone (a
        // deletion by hand; one that also edits `lane_heads` needs the anchor below).
        let AnchorCheck::Failed { detail } = &bare.recorded_heads else {
            panic!("lane {lane}: the recorded heads did not catch it: {bare:?}")
        };
        assert!(
            detail.starts_with(&format!(
                "the store records receipt 3 of lane {lane} as its lane's newest, but the log ends at receipt 2 of lane {lane}"
            )),
            "{detail}"
        );
        assert_eq!(bare.outcome, VerifyOutcome::Failed);
        tamper(
            &fresh,
            &[format!(
                "UPDATE lane_heads SET seq = 2, hash = (SELECT hash FROM receipts WHERE lane = {lane} AND seq = 2) WHERE lane = {lane}"
            )],
        )
        .await;
        let edited = verify_store(fresh.store.as_ref(), None)
            .await
            .expect("verify");
        assert_eq!(edited.recorded_heads, AnchorCheck::Matched, "{edited:?}");
        assert_eq!(edited.outcome, VerifyOutcome::Verified);
        let report = verify_store(fresh.store.as_ref(), Some(&anchor))
            .await
            .expect("verify");
        let AnchorCheck::Failed { detail } = &report.anchor else {
            panic!("lane {lane}: the anchor did not catch it: {report:?}")
        };
        assert!(
            detail.contains(&format!("receipt 3 of lane {lane}")),
            "{detail}"
        );
        assert_eq!(report.outcome, VerifyOutcome::Failed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_placing_while_writers_write_never_skip_or_repeat_a_place() {
    // At every isolation a store may run at: the placer reads at READ COMMITTED whatever it is.
    for isolation in ["read_committed", "serializable"] {
        let backend = postgres("lanes_read").with_options(&format!("isolation={isolation}"));
        let fresh = fresh(&backend, &format!("lanes/readers_{isolation}")).await;
        let mut writers = Vec::new();
        for writer in 0..6 {
            let store = std::sync::Arc::clone(&fresh.store);
            writers.push(tokio::spawn(async move {
                for index in 0..30 {
                    store
                        .append_receipt(note(writer * 100 + index), SystemClock.now())
                        .await
                        .expect("append");
                }
            }));
        }
        let mut readers = Vec::new();
        for _ in 0..3 {
            let store = std::sync::Arc::clone(&fresh.store);
            readers.push(tokio::spawn(async move {
                let mut longest = 0;
                for _ in 0..20 {
                    let log = store.receipts(0, 10_000).await.expect("read");
                    // Every read is a prefix of the log: places 1..n, never fewer than before.
                    for (index, receipt) in log.iter().enumerate() {
                        assert_eq!(receipt.position, index as u64 + 1, "a skipped place");
                    }
                    assert!(log.len() >= longest, "a read lost receipts");
                    longest = log.len();
                }
            }));
        }
        for task in writers.into_iter().chain(readers) {
            task.await.expect("a task");
        }
        let report = verify_store(fresh.store.as_ref(), None)
            .await
            .expect("verify");
        assert_eq!(
            report.outcome,
            VerifyOutcome::Verified,
            "{isolation}: {report:?}"
        );
        assert_eq!(report.checked, 180, "{isolation}");
    }
}
