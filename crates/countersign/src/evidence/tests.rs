use super::*;

mod lanes;

fn draft(n: u64) -> ReceiptDraft {
    ReceiptDraft {
        kind: Some(ReceiptKind::Attempt),
        outcome: Some(ReceiptOutcome::Committed),
        action: Some(format!("action.{n}")),
        arguments: Some(
            canonical::to_canonical(&serde_json::json!({"n": n, "text": "世界"})).unwrap(),
        ),
        ..ReceiptDraft::default()
    }
}

fn chain(length: u64) -> Vec<StoredReceipt> {
    let mut stored: Vec<StoredReceipt> = Vec::new();
    for n in 0..length {
        let head = stored.last().map(|last| ChainHead {
            seq: last.seq,
            hash: last.hash.clone(),
        });
        let (_, next) = seal(
            draft(n),
            head.as_ref(),
            Timestamp::from_millis(1_000 + n as i64),
        )
        .unwrap();
        stored.push(next);
    }
    stored
}

#[test]
fn an_intact_chain_verifies_but_says_truncation_is_undetectable_without_an_anchor() {
    let receipts = chain(10);
    let report = verify(&receipts, None);
    assert!(report.is_intact());
    assert_eq!(report.checked, 10);
    assert_eq!(report.head.as_ref().map(|head| head.seq), Some(10));
    assert_eq!(report.anchor, AnchorCheck::NotGiven);
}

#[test]
fn the_first_receipt_points_at_genesis_and_each_next_at_its_predecessor() {
    let receipts = chain(3);
    assert_eq!(receipts[0].prev_hash, GENESIS_HASH);
    assert_eq!(receipts[1].prev_hash, receipts[0].hash);
    assert_eq!(receipts[2].prev_hash, receipts[1].hash);
}

#[test]
fn an_edited_field_names_the_edited_receipt() {
    let mut receipts = chain(10);
    receipts[4].body = receipts[4].body.replace("action.4", "action.X");
    let report = verify(&receipts, None);
    assert!(!report.is_intact());
    assert!(
        matches!(
            report.first_break,
            Some(ChainBreak::HashMismatch { seq: 5, .. })
        ),
        "{report:?}"
    );
}

#[test]
fn an_edit_with_a_recomputed_hash_breaks_the_next_link() {
    let mut receipts = chain(10);
    receipts[4].body = receipts[4].body.replace("action.4", "action.X");
    receipts[4].hash = crate::id::ReceiptHash::from_stored(canonical::sha256_prefixed(
        receipts[4].body.as_bytes(),
    ));
    let report = verify(&receipts, None);
    assert!(
        matches!(
            report.first_break,
            Some(ChainBreak::PrevHashMismatch { seq: 6, .. })
        ),
        "{report:?}"
    );
}

#[test]
fn a_forged_receipt_between_two_real_ones_is_named() {
    let mut receipts = chain(10);
    let head = ChainHead {
        seq: receipts[3].seq,
        hash: receipts[3].hash.clone(),
    };
    let (_, forged) = seal(draft(99), Some(&head), Timestamp::from_millis(5)).unwrap();
    receipts.insert(4, forged);
    let report = verify(&receipts, None);
    // The forged receipt itself chains; the real one after it no longer does.
    assert!(
        matches!(
            report.first_break,
            Some(ChainBreak::SeqGap {
                lane: 0,
                expected: 6,
                found: 5
            })
        ),
        "{report:?}"
    );
    assert_eq!(report.first_break.as_ref().map(ChainBreak::seq), Some(5));
}

#[test]
fn tail_truncation_is_caught_only_against_an_anchor() {
    let receipts = chain(10);
    let anchor = Anchor {
        seq: 10,
        hash: receipts[9].hash.to_string(),
        lanes: Vec::new(),
    };
    assert_eq!(
        verify(&receipts, Some(&anchor)).anchor,
        AnchorCheck::Matched
    );
    let truncated = &receipts[..7];
    let without = verify(truncated, None);
    assert!(without.is_intact());
    assert_eq!(without.anchor, AnchorCheck::NotGiven);
    let against = verify(truncated, Some(&anchor));
    assert!(!against.is_intact());
    match against.anchor {
        AnchorCheck::Failed { detail } => assert!(detail.contains("ends at receipt 7"), "{detail}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_edit_before_the_anchor_is_not_called_a_removal() {
    let mut receipts = chain(10);
    receipts[4].body = receipts[4].body.replace("action.4", "action.X");
    let anchor = Anchor {
        seq: 10,
        hash: receipts[9].hash.to_string(),
        lanes: Vec::new(),
    };
    let report = verify(&receipts, Some(&anchor));
    assert_eq!(report.first_break.as_ref().map(ChainBreak::seq), Some(5));
    match report.anchor {
        AnchorCheck::Failed { detail } => {
            assert!(
                detail.contains("breaks before it, at receipt 5"),
                "{detail}"
            );
            assert!(!detail.contains("removed"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_wrong_anchor_hash_fails() {
    let receipts = chain(3);
    let anchor = Anchor {
        seq: 2,
        hash: GENESIS_HASH.to_owned(),
        lanes: Vec::new(),
    };
    assert!(matches!(
        verify(&receipts, Some(&anchor)).anchor,
        AnchorCheck::Failed { .. }
    ));
}

#[test]
fn a_receipt_round_trips_through_its_stored_form() {
    let (receipt, stored) = seal(draft(1), None, Timestamp::from_millis(42)).unwrap();
    assert_eq!(stored.to_receipt().unwrap(), receipt);
    assert!(!stored.body.contains("\"hash\""));
    assert_eq!(
        receipt.hash,
        canonical::sha256_prefixed(stored.body.as_bytes())
    );
}

#[test]
fn receipt_snapshot() {
    let mut first = draft(1);
    first.reason = Some("approved".into());
    first.attempt_id = Some(crate::id::AttemptId::from_stored("att_example".to_owned()));
    first.action_hash = Some(crate::id::ActionHash::from_stored(
        "sha256:1111111111111111111111111111111111111111111111111111111111111111".to_owned(),
    ));
    first.principal = Some(crate::id::Principal::from_stored(
        "agent:support-bot".to_owned(),
    ));
    first.effect_key = Some(crate::id::EffectKey::from_stored("refund:pi_1".to_owned()));
    first.decision = Some("approve".into());
    first.mode = Some("enforce".into());
    first.policy_hash = Some(crate::id::PolicyHash::from_stored(
        "sha256:2222222222222222222222222222222222222222222222222222222222222222".to_owned(),
    ));
    let (receipt, _) = seal(first, None, Timestamp::from_millis(1_764_499_583_123)).unwrap();
    insta::assert_json_snapshot!(receipt);
}

#[test]
fn printable_escapes_what_could_forge_or_hide_text() {
    assert_eq!(printable("plain é 世界"), "plain é 世界");
    assert_eq!(printable("a\nb"), "a\\u{a}b");
    assert_eq!(printable("x\u{202e}gpj.exe"), "x\\u{202e}gpj.exe");
    assert_eq!(printable("nul\u{0}\u{1b}[31m"), "nul\\u{0}\\u{1b}[31m");
    assert_eq!(printable("zero\u{200b}width"), "zero\\u{200b}width");
}

/// The hand-written body is exactly the generic canonical form of the receipt, for every kind,
/// every outcome, absent and present fields, and text that needs escaping.
#[test]
fn body_matches_the_generic_canonical_form() {
    let kinds = [
        ReceiptKind::Attempt,
        ReceiptKind::Answer,
        ReceiptKind::ApprovalExpired,
        ReceiptKind::ApprovalVoided,
        ReceiptKind::LeaseExpired,
        ReceiptKind::Resolution,
    ];
    let outcomes = [
        ReceiptOutcome::Committed,
        ReceiptOutcome::Failed,
        ReceiptOutcome::Ambiguous,
        ReceiptOutcome::Refused,
        ReceiptOutcome::Observed,
        ReceiptOutcome::Granted,
        ReceiptOutcome::Denied,
        ReceiptOutcome::Expired,
        ReceiptOutcome::Voided,
        ReceiptOutcome::Counted,
        ReceiptOutcome::HandedOff,
    ];
    let awkward =
        "quote \" backslash \\ newline \n tab \t nul \u{0} bell \u{7} del \u{7f} é 世界 \u{1F600}";
    let full = |n: usize| ReceiptDraft {
        kind: Some(kinds[n % kinds.len()]),
        outcome: Some(outcomes[n % outcomes.len()]),
        reason: Some(format!("reason {n}")),
        attempt_id: Some(crate::id::AttemptId::from_stored("att_x".to_owned())),
        action: Some(awkward.to_owned()),
        action_hash: Some(crate::id::ActionHash::from_stored("sha256:ab".to_owned())),
        principal: Some(crate::id::Principal::from_stored("agent:\"p\"".to_owned())),
        resource: Some("payment:pi_1\r".to_owned()),
        environment: Some("test".to_owned()),
        effect_key: Some(crate::id::EffectKey::from_stored("refund:pi_1".to_owned())),
        arguments: Some(
            canonical::to_canonical(&serde_json::json!({
                "z": [1.5, 1e21, -3, null, true], "a": {"\u{1F600}": awkward, "é": 0.1}
            }))
            .unwrap(),
        ),
        decision: Some("allow".to_owned()),
        mode: Some("enforce".to_owned()),
        approval_id: Some(crate::id::ApprovalId::from_stored("apr_1".to_owned())),
        approver: Some(awkward.to_owned()),
        note: Some(awkward.to_owned()),
        policy_hash: Some(crate::id::PolicyHash::from_stored("sha256:cd".to_owned())),
        approval_policy_hash: Some(crate::id::PolicyHash::from_stored("sha256:ef".to_owned())),
        detail: Some(awkward.to_owned()),
        // v2 fields: set on every other draft, so both shapes are checked.
        approvals_given: n.is_multiple_of(2).then_some(1),
        approvals_needed: n.is_multiple_of(2).then_some(2),
        approver_groups: n
            .is_multiple_of(2)
            .then(|| vec!["finance".to_owned(), awkward.to_owned()]),
        channel: n
            .is_multiple_of(2)
            .then(|| "interrupt:lang\"graph".to_owned()),
        authentication: n.is_multiple_of(2).then(|| "token".to_owned()),
        hash_confirmed: n.is_multiple_of(2).then_some(n.is_multiple_of(4)),
        approvers: n.is_multiple_of(2).then(|| {
            vec![crate::approver::Approver {
                id: crate::approver::ApproverId::from_stored(awkward),
                groups: vec!["b".to_owned(), "a".to_owned()],
                channel: crate::approver::Channel::Interrupt("x".to_owned()),
                authentication: crate::approver::Authentication::Oidc,
            }]
        }),
        attempt_started_at: n
            .is_multiple_of(2)
            .then(|| Timestamp::from_millis(1_700_000_000_123)),
        exit_status: match n % 3 {
            0 => Some(ProcessExit::code(n as i32 - 7)),
            1 => Some(ProcessExit::signal(9)),
            _ => None,
        },
        raised_by: n.is_multiple_of(3).then(|| "destructiveHint".to_owned()),
        tool_schema: n.is_multiple_of(5).then(|| "sha256:00ff".to_owned()),
    };
    let drafts = (0..kinds.len() * outcomes.len())
        .map(full)
        .chain([ReceiptDraft::default(), draft(7)]);
    for (n, draft) in drafts.enumerate() {
        let head = (n % 2 == 1).then(|| ChainHead {
            seq: 41 + n as u64,
            hash: crate::id::ReceiptHash::from_stored("sha256:00".to_owned()),
        });
        // Lanes 0 (no field), 1 and a large one, so the `lane` field's place is checked too.
        let lane = [0, 1, u32::MAX][n % 3];
        let (receipt, stored) = seal_in_lane(
            lane,
            draft,
            head.as_ref(),
            Timestamp::from_millis(1_700_000_000_123),
        )
        .unwrap();
        assert_eq!(stored.body.contains("\"lane\":"), lane != 0, "receipt {n}");
        let mut unhashed = receipt.clone();
        unhashed.hash = crate::id::ReceiptHash::default();
        let generic = canonical::to_canonical(&unhashed).unwrap().into_string();
        assert_eq!(stored.body, generic, "receipt {n}");
        assert_eq!(receipt.hash, canonical::sha256_prefixed(generic.as_bytes()));
    }
}

/// `countersign.receipt/v2`'s `handed_off` outcome and `exit_status` field verify in a chain,
/// and a receipt that claims `v1` while carrying either is unreadable.
#[test]
fn reads_handed_off_and_exit_status_and_refuses_them_in_v1() {
    let handed = draft(1).with_outcome(ReceiptOutcome::HandedOff, None);
    let exited = ReceiptDraft {
        exit_status: Some(ProcessExit::code(3)),
        ..draft(2)
    }
    .with_outcome(ReceiptOutcome::Ambiguous, Some("executor_error"));
    let (first, first_stored) = seal(handed, None, Timestamp::from_millis(1)).unwrap();
    let head = ChainHead {
        seq: first.seq,
        hash: first.hash.clone(),
    };
    let (second, second_stored) = seal(exited, Some(&head), Timestamp::from_millis(2)).unwrap();
    assert!(first_stored.body.contains("\"outcome\":\"handed_off\""));
    assert!(second_stored.body.contains("\"exit_status\":{\"code\":3}"));
    assert_eq!(second_stored.to_receipt().unwrap(), second);
    let report = verify([&first_stored, &second_stored], None);
    assert!(report.is_intact(), "{report:?}");

    // Each alone, as the first receipt of a chain, relabelled `v1` and rehashed.
    for relabelled in [
        draft(1).with_outcome(ReceiptOutcome::HandedOff, None),
        ReceiptDraft {
            exit_status: Some(ProcessExit::signal(9)),
            ..draft(2)
        },
        // Issue #27's `raised_by` is v2 too.
        ReceiptDraft {
            raised_by: Some("destructiveHint".to_owned()),
            ..draft(3)
        },
    ] {
        let (_, mut stored) = seal(relabelled, None, Timestamp::from_millis(1)).unwrap();
        stored.body = stored.body.replace(RECEIPT_SCHEMA, RECEIPT_SCHEMAS[0]);
        stored.hash =
            crate::id::ReceiptHash::from_stored(canonical::sha256_prefixed(stored.body.as_bytes()));
        match verify([&stored], None).first_break {
            Some(ChainBreak::Unreadable { detail, .. }) => {
                assert!(detail.contains("only v2 has"), "{detail}")
            }
            other => panic!("a v1 receipt with v2 content must be unreadable: {other:?}"),
        }
    }
}

// Case B58: nothing checked is never a pass; a record without a hash is named, never skipped.
#[test]
fn an_empty_log_is_unverifiable_not_verified() {
    let report = verify(&[], None);
    assert_eq!(report.outcome, VerifyOutcome::Unverifiable);
    assert_eq!(report.checked, 0);
    assert_eq!(report.first_seq, None);
    assert!(report.head.is_none());
}

#[test]
fn an_empty_log_against_an_anchor_fails() {
    let anchor = Anchor {
        seq: 3,
        hash: "sha256:00".to_owned(),
        lanes: Vec::new(),
    };
    let report = verify(&[], Some(&anchor));
    assert_eq!(report.outcome, VerifyOutcome::Failed);
}

#[test]
fn a_checked_chain_is_verified_with_its_first_and_last_positions() {
    let receipts = chain(4);
    let report = verify(&receipts, None);
    assert_eq!(report.outcome, VerifyOutcome::Verified);
    assert_eq!(report.first_seq, Some(1));
    assert_eq!(report.head.as_ref().map(|head| head.seq), Some(4));
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["outcome"], "verified");
}

#[test]
fn a_receipt_without_a_hash_is_the_first_break_not_skipped() {
    for position in [0_usize, 2, 3] {
        let mut receipts = chain(4);
        receipts[position].hash = crate::id::ReceiptHash::default();
        let report = verify(&receipts, None);
        assert_eq!(report.outcome, VerifyOutcome::Failed, "at {position}");
        assert_eq!(
            report.first_break,
            Some(ChainBreak::Unhashed {
                lane: 0,
                seq: position as u64 + 1
            })
        );
        assert_eq!(report.checked, position as u64);
        assert!(
            report
                .first_break
                .as_ref()
                .unwrap()
                .to_string()
                .contains("has no hash")
        );
    }
}

#[test]
fn a_space_at_either_end_of_a_key_is_shown() {
    for (key, shown) in [
        ("job:trail ", r"job:trail\u{20}"),
        (" job: lead", r"\u{20}job: lead"),
        ("  ", r"\u{20}\u{20}"),
        ("job: inner space", "job: inner space"),
    ] {
        assert_eq!(super::escaped(key), shown, "{key:?}");
        assert_eq!(crate::display::unescape(shown), key, "{shown}");
    }
}
