//! A log of several lanes (issue #21, [`Receipt::lane`]): each lane is its own chain, fed to
//! [`Verifier`] interleaved in any order, and an edit, a deletion, a fork, an insertion and a gap
//! are each named in whichever lane they are made.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

/// A log whose `n`-th receipt goes to lane `lanes[n]`, in that (interleaved) order.
fn log_of(lanes: &[u32]) -> Vec<StoredReceipt> {
    let mut heads: BTreeMap<u32, ChainHead> = BTreeMap::new();
    let mut log = Vec::with_capacity(lanes.len());
    for (n, &lane) in lanes.iter().enumerate() {
        let (_, stored) = seal_in_lane(
            lane,
            draft(n as u64),
            heads.get(&lane),
            Timestamp::from_millis(1_000 + n as i64),
        )
        .unwrap();
        heads.insert(
            lane,
            ChainHead {
                seq: stored.seq,
                hash: stored.hash.clone(),
            },
        );
        log.push(stored);
    }
    log
}

/// Lanes 0, 1 and 7, interleaved: 0 1 1 7 0 1 7 7 1 0 1 7 (lane 0: 3, lane 1: 5, lane 7: 4).
const MIXED: [u32; 12] = [0, 1, 1, 7, 0, 1, 7, 7, 1, 0, 1, 7];

/// The index in `log` of receipt `seq` of `lane`.
fn at(log: &[StoredReceipt], lane: u32, seq: u64) -> usize {
    log.iter()
        .position(|receipt| receipt.lane == lane && receipt.seq == seq)
        .unwrap()
}

/// The anchor a full verification of `log` would export: every lane's head.
fn anchor_of(log: &[StoredReceipt]) -> Anchor {
    let report = verify(log, None);
    let (seq, hash) = report.head.map_or((0, GENESIS_HASH.to_owned()), |head| {
        (head.seq, head.hash.into_string())
    });
    Anchor {
        seq,
        hash,
        lanes: report.lanes,
    }
}

#[test]
fn interleaved_lanes_verify_and_the_report_names_each_lanes_head() {
    let log = log_of(&MIXED);
    assert!(!log[0].body.contains("\"lane\""), "lane 0 writes no field");
    assert!(log[1].body.contains("\"lane\":1"));
    let report = verify(&log, None);
    assert_eq!(report.outcome, VerifyOutcome::Verified, "{report:?}");
    assert_eq!(report.checked, 12);
    assert_eq!(report.head.as_ref().map(|head| head.seq), Some(3));
    assert_eq!((report.first_seq, report.last_seq), (Some(1), Some(3)));
    let heads: Vec<(u32, u64)> = report.lanes.iter().map(|h| (h.lane, h.seq)).collect();
    assert_eq!(heads, [(1, 5), (7, 4)]);
    assert_eq!(report.lanes[0].hash, log[at(&log, 1, 5)].hash);
    // Each lane's first receipt starts from genesis, whatever came before it in the log.
    assert_eq!(log[at(&log, 7, 1)].prev_hash, GENESIS_HASH);
    assert_eq!(log[at(&log, 7, 2)].prev_hash, log[at(&log, 7, 1)].hash);
}

#[test]
fn an_edit_in_any_lane_names_that_lane_and_receipt() {
    for (lane, seq) in [(0, 2), (1, 4), (7, 1)] {
        let mut log = log_of(&MIXED);
        let index = at(&log, lane, seq);
        log[index].body = log[index].body.replace("\"n\":", "\"m\":");
        let report = verify(&log, None);
        assert_eq!(report.outcome, VerifyOutcome::Failed);
        let found = report.first_break.unwrap();
        assert!(
            matches!(found, ChainBreak::HashMismatch { .. }),
            "{found:?}"
        );
        assert_eq!((found.lane(), found.seq()), (lane, seq));
    }
}

#[test]
fn a_deletion_in_the_middle_of_any_lane_is_a_gap_in_that_lane() {
    for (lane, seq) in [(0, 2), (1, 3), (7, 2)] {
        let mut log = log_of(&MIXED);
        log.remove(at(&log, lane, seq));
        let report = verify(&log, None);
        assert_eq!(
            report.first_break,
            Some(ChainBreak::SeqGap {
                lane,
                expected: seq,
                found: seq + 1
            })
        );
        let shown = report.first_break.unwrap().to_string();
        if lane != 0 {
            assert!(shown.contains(&format!("of lane {lane}")), "{shown}");
        }
    }
}

/// `log` placed at 1, 2, 3, … in its order, as a store of several lanes reads it.
fn placed(mut log: Vec<StoredReceipt>) -> Vec<StoredReceipt> {
    for (index, receipt) in log.iter_mut().enumerate() {
        receipt.position = index as u64 + 1;
    }
    log
}

#[test]
fn a_receipt_gone_from_its_place_is_named_missing_wherever_it_was() {
    for (lane, seq) in [(0, 2), (1, 3), (7, 4)] {
        let mut log = placed(log_of(&MIXED));
        let index = at(&log, lane, seq);
        // What a store that keeps its places apart reads for a deleted row.
        let gone = &mut log[index];
        gone.missing = true;
        gone.hash = crate::id::ReceiptHash::default();
        gone.prev_hash = crate::id::ReceiptHash::default();
        gone.body.clear();
        let position = gone.position;
        let report = verify(&log, None);
        let expected = ChainBreak::Missing {
            lane,
            seq,
            position,
        };
        assert_eq!(report.first_break, Some(expected.clone()));
        assert_eq!(report.outcome, VerifyOutcome::Failed);
        assert_eq!(report.checked, index as u64);
        // Read on its own (a bundle, the receipt before a range), and parsed, it is named too.
        assert_eq!(check_alone(&log[index]).unwrap_err(), expected);
        let refused = log[index].to_receipt().unwrap_err();
        assert_eq!(refused, expected.to_string());
        assert!(
            refused.contains(&format!("is missing: the log names it at place {position}")),
            "{refused}"
        );
        let json = serde_json::to_value(&expected).unwrap();
        assert_eq!(json["kind"], "missing");
        assert_eq!(json.get("lane").is_some(), lane != 0, "{json}");
    }
}

#[test]
fn a_place_left_empty_is_named_by_the_place_not_the_receipt_after_it() {
    // Lane 7's receipt 1 (place 4) and its place are gone: the next place read, 5, is lane 0's
    // receipt 2, whose own lane holds.
    let mut log = placed(log_of(&MIXED));
    log.remove(3);
    let report = verify(&log, None);
    let first = report.first_break.unwrap();
    assert_eq!(
        first,
        ChainBreak::Misplaced {
            lane: 0,
            seq: 2,
            expected_position: 4,
            position: 5
        }
    );
    assert!(
        first.to_string().starts_with(
            "no receipt is at place 4 of the log: the next one, receipt 2, is at place 5"
        ),
        "{first}"
    );
    // A place given twice (places changed by hand) reads differently.
    let mut log = placed(log_of(&MIXED));
    log[4].position = 4;
    let first = verify(&log, None).first_break.unwrap();
    assert!(
        first.to_string().ends_with(
            "is at place 4 of the log, but place 5 comes next: the log's places were changed"
        ),
        "{first}"
    );
}

#[test]
fn receipts_of_a_lane_read_out_of_order_are_named_so() {
    // Lane 1's receipts 2 and 3 swapped in the log's order: 3 comes first.
    let mut log = log_of(&MIXED);
    let (two, three) = (at(&log, 1, 2), at(&log, 1, 3));
    log.swap(two, three);
    let first = verify(&log, None).first_break.unwrap();
    assert_eq!(
        first.to_string(),
        "receipt 2 of lane 1 is missing where it belongs: the next one of lane 1 found is 3 (it was removed, or moved later in the log)"
    );
    // A lane's receipt read again after a later one.
    let mut log = log_of(&MIXED);
    let again = log[at(&log, 1, 1)].clone();
    log.insert(at(&log, 1, 2) + 1, again);
    let first = verify(&log, None).first_break.unwrap();
    assert_eq!(
        first.to_string(),
        "receipt 1 of lane 1 is out of order: receipt 3 of lane 1 was expected next in its lane (receipts were moved, or numbered again)"
    );
}

#[test]
fn the_log_is_held_to_the_heads_the_store_records() {
    let log = log_of(&MIXED);
    let heads = anchor_of(&log);
    let mut report = verify(&log, None);
    report.judge_recorded_heads(&heads);
    assert_eq!(report.recorded_heads, AnchorCheck::Matched);
    assert_eq!(report.outcome, VerifyOutcome::Verified);
    // Lane 1's newest receipt deleted, its recorded head left as it was.
    let mut short = log.clone();
    short.remove(at(&short, 1, 5));
    let mut report = verify(&short, None);
    assert_eq!(report.first_break, None);
    report.judge_recorded_heads(&heads);
    assert_eq!(
        report.recorded_heads,
        AnchorCheck::Failed {
            detail: "the store records receipt 5 of lane 1 as its lane's newest, but the log ends at receipt 4 of lane 1: receipts were removed, or the head record edited".to_owned()
        }
    );
    assert_eq!(report.outcome, VerifyOutcome::Failed);
    assert!(!report.is_intact());
    // A recorded head whose hash is not the receipt's.
    let mut edited = heads.clone();
    edited.hash = format!("sha256:{}", "ab".repeat(32));
    let mut report = verify(&log, None);
    report.judge_recorded_heads(&edited);
    assert!(
        matches!(&report.recorded_heads, AnchorCheck::Failed { detail } if detail.contains("but that receipt hashes to")),
        "{report:?}"
    );
    // Past a break nothing is judged: the break is the news.
    let mut broken = log.clone();
    broken.remove(at(&broken, 7, 2));
    let mut report = verify(&broken, None);
    report.judge_recorded_heads(&heads);
    assert_eq!(report.recorded_heads, AnchorCheck::NotGiven);
}

#[test]
fn a_fork_or_an_insertion_in_a_lane_is_named_there() {
    // A fork: a second receipt 3 of lane 1, chained on receipt 2, placed after the first.
    let mut log = log_of(&MIXED);
    let second = &log[at(&log, 1, 2)];
    let head = ChainHead {
        seq: second.seq,
        hash: second.hash.clone(),
    };
    let (_, fork) = seal_in_lane(1, draft(99), Some(&head), Timestamp::from_millis(9)).unwrap();
    let third = at(&log, 1, 3);
    log.insert(third + 1, fork);
    assert_eq!(
        verify(&log, None).first_break,
        Some(ChainBreak::SeqGap {
            lane: 1,
            expected: 4,
            found: 3
        })
    );

    // An insertion: receipt 2 of lane 7 replaced by one chained on something else.
    let mut log = log_of(&MIXED);
    let elsewhere = ChainHead {
        seq: 1,
        hash: log[at(&log, 1, 1)].hash.clone(),
    };
    let (_, forged) =
        seal_in_lane(7, draft(98), Some(&elsewhere), Timestamp::from_millis(9)).unwrap();
    let index = at(&log, 7, 2);
    log[index] = forged;
    let found = verify(&log, None).first_break.unwrap();
    assert!(
        matches!(
            found,
            ChainBreak::PrevHashMismatch {
                lane: 7,
                seq: 2,
                ..
            }
        ),
        "{found:?}"
    );
}

#[test]
fn a_receipt_moved_to_another_lane_is_refused() {
    // Receipt 1 of lane 7 stored as if it were lane 3's: its body still says lane 7.
    let mut log = log_of(&MIXED);
    let index = at(&log, 7, 1);
    log[index].lane = 3;
    let found = verify(&log, None).first_break.unwrap();
    assert!(
        matches!(&found, ChainBreak::Unreadable { lane: 3, seq: 1, detail } if detail == "its body names lane 7, but it is stored in lane 3: it was moved between lanes"),
        "{found:?}"
    );
    // And a store that keeps one lane reads every row as lane 0, so a body naming lane 1
    // there is refused the same way.
    let mut log = log_of(&[1]);
    log[0].lane = 0;
    assert!(matches!(
        verify(&log, None).first_break,
        Some(ChainBreak::Unreadable {
            lane: 0,
            seq: 1,
            ..
        })
    ));
}

#[test]
fn a_lanes_deleted_tail_is_caught_only_against_an_anchor_naming_every_lane() {
    let full = log_of(&MIXED);
    let anchor = anchor_of(&full);
    assert_eq!(anchor.lanes.len(), 2);
    assert_eq!(verify(&full, Some(&anchor)).anchor, AnchorCheck::Matched);
    for (lane, seq) in [(0, 3), (1, 5), (7, 4)] {
        let mut log = full.clone();
        log.remove(at(&log, lane, seq));
        let alone = verify(&log, None);
        assert_eq!(alone.outcome, VerifyOutcome::Verified, "without an anchor");
        let report = verify(&log, Some(&anchor));
        assert_eq!(report.outcome, VerifyOutcome::Failed);
        let AnchorCheck::Failed { detail } = report.anchor else {
            panic!("{:?}", report.anchor)
        };
        let lane_words = if lane == 0 {
            String::new()
        } else {
            format!(" of lane {lane}")
        };
        assert!(
            detail.contains(&format!("ends at receipt {}{lane_words}", seq - 1)),
            "{detail}"
        );
    }
    // A whole lane gone is caught the same way.
    let log: Vec<StoredReceipt> = full.iter().filter(|r| r.lane != 7).cloned().collect();
    let AnchorCheck::Failed { detail } = verify(&log, Some(&anchor)).anchor else {
        panic!("a vanished lane must fail the anchor")
    };
    assert!(
        detail.contains("the log holds no receipt of lane 7"),
        "{detail}"
    );
}

#[test]
fn an_anchor_is_read_strictly_and_written_as_before_for_one_lane() {
    let one = Anchor {
        seq: 4,
        hash: format!("sha256:{}", "ab".repeat(32)),
        lanes: Vec::new(),
    };
    let text = serde_json::to_string(&one).unwrap();
    assert_eq!(text, format!(r#"{{"seq":4,"hash":"{}"}}"#, one.hash));
    assert_eq!(serde_json::from_str::<Anchor>(&text).unwrap(), one);
    assert_eq!(one.check_shape(), Ok(()));
    // Lane 0 empty beside another lane's head is well formed.
    let empty_first = Anchor {
        seq: 0,
        hash: GENESIS_HASH.to_owned(),
        lanes: vec![LaneHead {
            lane: 5,
            seq: 1,
            hash: ReceiptHash::from_stored(format!("sha256:{}", "ef".repeat(32))),
        }],
    };
    assert_eq!(empty_first.check_shape(), Ok(()));
    let lane = |lane, seq| LaneHead {
        lane,
        seq,
        hash: ReceiptHash::from_stored(format!("sha256:{}", "cd".repeat(32))),
    };
    let bad = [
        (
            Anchor {
                seq: 0,
                ..one.clone()
            },
            "numbered from 1",
        ),
        (
            Anchor {
                seq: 0,
                lanes: vec![lane(2, 1)],
                ..one.clone()
            },
            "is not the genesis hash",
        ),
        (
            Anchor {
                hash: "not a hash".to_owned(),
                ..one.clone()
            },
            "`not a hash` is not a receipt hash",
        ),
        (
            Anchor {
                hash: one.hash.to_uppercase(),
                ..one.clone()
            },
            "64 lowercase hex digits",
        ),
        (
            Anchor {
                lanes: vec![lane(0, 2)],
                ..one.clone()
            },
            "names lane 0",
        ),
        (
            Anchor {
                lanes: vec![lane(2, 0)],
                ..one.clone()
            },
            "lane 2's `seq` is 0",
        ),
        (
            Anchor {
                lanes: vec![lane(2, 1), lane(2, 3)],
                ..one.clone()
            },
            "lane 2 twice",
        ),
    ];
    for (anchor, words) in bad {
        let problem = anchor.check_shape().unwrap_err();
        assert!(problem.contains(words), "{problem}");
    }
}

#[test]
fn a_v1_receipt_may_not_name_a_lane_and_breaks_serialize_their_lane_only_outside_lane_0() {
    let mut log = log_of(&[2]);
    log[0].body = log[0]
        .body
        .replace("countersign.receipt/v2", "countersign.receipt/v1");
    log[0].hash = ReceiptHash::computed(canonical::sha256_prefixed(log[0].body.as_bytes()));
    let found = verify(&log, None).first_break.unwrap();
    assert!(
        matches!(&found, ChainBreak::Unreadable { lane: 2, detail, .. } if detail.contains("only v2 has")),
        "{found:?}"
    );
    let json = serde_json::to_value(&found).unwrap();
    assert_eq!(json["lane"], 2);
    let zero = ChainBreak::Unhashed { lane: 0, seq: 1 };
    assert_eq!(
        serde_json::to_value(&zero).unwrap(),
        serde_json::json!({"kind": "unhashed", "seq": 1})
    );
}

/// A log of up to 4 lanes, interleaved at random.
fn lanes() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(0u32..4, 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any interleaving verifies, every receipt is checked, and each lane's head is its last.
    #[test]
    fn any_interleaving_verifies(lanes in lanes()) {
        let log = log_of(&lanes);
        let report = verify(&log, None);
        prop_assert_eq!(report.outcome, VerifyOutcome::Verified);
        prop_assert_eq!(report.checked, lanes.len() as u64);
        for head in &report.lanes {
            let count = lanes.iter().filter(|&&lane| lane == head.lane).count() as u64;
            prop_assert_eq!(head.seq, count);
        }
        prop_assert_eq!(verify(&log, Some(&anchor_of(&log))).anchor, AnchorCheck::Matched);
    }

    /// Removing any one receipt is caught: as a gap in its lane when a later receipt of that
    /// lane remains, and against the anchor when it was its lane's newest.
    #[test]
    fn any_deletion_is_caught(lanes in lanes(), pick in any::<prop::sample::Index>()) {
        let full = log_of(&lanes);
        let anchor = Some(anchor_of(&full));
        let index = pick.index(full.len());
        let (lane, seq) = (full[index].lane, full[index].seq);
        let mut log = full.clone();
        log.remove(index);
        let newest = !log.iter().any(|receipt| receipt.lane == lane && receipt.seq > seq);
        let report = verify(&log, anchor.as_ref());
        if newest {
            prop_assert_eq!(report.first_break, None);
            if let Some(anchor) = &anchor {
                prop_assert!(matches!(report.anchor, AnchorCheck::Failed { .. }), "{:?}", anchor);
            }
        } else {
            prop_assert_eq!(
                report.first_break,
                Some(ChainBreak::SeqGap { lane, expected: seq, found: seq + 1 })
            );
        }
    }

    /// Editing any receipt's body names exactly that receipt.
    #[test]
    fn any_edit_is_caught(lanes in lanes(), pick in any::<prop::sample::Index>()) {
        let mut log = log_of(&lanes);
        let index = pick.index(log.len());
        log[index].body = log[index].body.replace("action.", "action!");
        let found = verify(&log, None).first_break;
        prop_assert!(matches!(found, Some(ChainBreak::HashMismatch { .. })), "{:?}", found);
        let found = found.unwrap();
        prop_assert_eq!((found.lane(), found.seq()), (log[index].lane, log[index].seq));
    }
}
