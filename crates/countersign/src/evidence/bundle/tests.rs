//! Bundles: made from a chain, checked with no store, refused after any edit.

use super::*;
use crate::clock::Timestamp;
use crate::evidence::{ChainHead, ReceiptDraft, ReceiptKind, ReceiptOutcome, seal};
use crate::token::SigningKey;
use proptest::prelude::*;

fn chain(length: u64) -> Vec<StoredReceipt> {
    let mut stored: Vec<StoredReceipt> = Vec::new();
    for n in 0..length {
        let head = stored.last().map(|last| ChainHead {
            seq: last.seq,
            hash: last.hash.clone(),
        });
        let draft = ReceiptDraft {
            kind: Some(ReceiptKind::Attempt),
            outcome: Some(ReceiptOutcome::Committed),
            action: Some(format!("refund.{n}")),
            ..ReceiptDraft::default()
        };
        let (_, mut next) = seal(
            draft,
            head.as_ref(),
            Timestamp::from_millis(1_000 + n as i64),
        )
        .expect("seals");
        // Placed at its `seq`, as a store of one lane reads it back.
        next.position = next.seq;
        stored.push(next);
    }
    stored
}

fn key(seed: u8) -> SigningKey {
    SigningKey::from_seed([seed; 32])
}

/// A bundle of the receipts at `seqs` from a chain of `length`, against a checkpoint of the
/// whole chain signed with key 1.
fn bundle_of(length: u64, seqs: &[u64]) -> String {
    let receipts = chain(length);
    let mut tree = log::LogTree::new();
    for receipt in &receipts {
        tree.push(receipt).expect("in order");
    }
    let head = Checkpoint {
        origin: "countersign.test/log".to_owned(),
        size: tree.size(),
        root: tree.tree().root(),
        extensions: Vec::new(),
    };
    let signed = checkpoint::sign(&head, &key(1)).expect("signs");
    let selected: Vec<StoredReceipt> = receipts
        .into_iter()
        .filter(|receipt| seqs.contains(&receipt.seq))
        .collect();
    let bundle = make_bundle(&signed, &head, &tree, &selected).expect("bundles");
    serde_json::to_string_pretty(&bundle).expect("serializes")
}

#[test]
fn a_bundle_verifies_with_only_the_public_key() {
    let text = bundle_of(13, &[1, 7, 13]);
    let verified = verify_bundle(text.as_bytes(), &key(1).public_key()).expect("verifies");
    assert_eq!(verified.checkpoint.size, 13);
    let seqs: Vec<u64> = verified
        .receipts
        .iter()
        .map(|receipt| receipt.seq)
        .collect();
    assert_eq!(seqs, [1, 7, 13]);
    assert_eq!(verified.receipts[1].action.as_deref(), Some("refund.6"));
}

#[test]
fn a_bundle_fails_under_another_key() {
    let text = bundle_of(5, &[2]);
    assert!(matches!(
        verify_bundle(text.as_bytes(), &key(2).public_key()),
        Err(BundleError::Checkpoint(_))
    ));
}

#[test]
fn a_bundle_with_no_receipt_is_unverifiable() {
    let text = bundle_of(5, &[]);
    let error = verify_bundle(text.as_bytes(), &key(1).public_key()).expect_err("empty");
    assert!(error.is_unverifiable());
}

/// A receipt listed twice is refused by name (found by a first-time user: it verified as
/// "(6, 6)").
#[test]
fn a_receipt_listed_twice_fails() {
    let text = bundle_of(9, &[3, 6]);
    let mut bundle: Bundle = serde_json::from_str(&text).expect("parses");
    bundle.receipts.push(bundle.receipts[1].clone());
    let repeated = serde_json::to_vec(&bundle).expect("serializes");
    let error = verify_bundle(&repeated, &key(1).public_key()).expect_err("refused");
    assert_eq!(error, BundleError::Repeated { lane: 0, seq: 6 });
    assert!(!error.is_unverifiable());
    assert!(error.to_string().contains("listed twice"), "{error}");
}

#[test]
fn a_receipt_moved_or_swapped_fails() {
    let text = bundle_of(9, &[3, 4]);
    let mut bundle: Bundle = serde_json::from_str(&text).expect("parses");
    // Another receipt's proof: the right receipt, the wrong path.
    let proofs = (
        bundle.receipts[0].inclusion_proof.clone(),
        bundle.receipts[1].inclusion_proof.clone(),
    );
    bundle.receipts[0].inclusion_proof = proofs.1;
    bundle.receipts[1].inclusion_proof = proofs.0;
    let swapped = serde_json::to_vec(&bundle).expect("serializes");
    assert!(matches!(
        verify_bundle(&swapped, &key(1).public_key()),
        Err(BundleError::NotIncluded { seq: 3, .. })
    ));
}

#[test]
fn unknown_fields_and_other_schemas_are_unreadable() {
    let text = bundle_of(3, &[1]);
    let mut value: serde_json::Value = serde_json::from_str(&text).expect("parses");
    value["extra"] = serde_json::json!(true);
    assert!(matches!(
        verify_bundle(value.to_string().as_bytes(), &key(1).public_key()),
        Err(BundleError::Unreadable { .. })
    ));
    let mut value: serde_json::Value = serde_json::from_str(&text).expect("parses");
    value["schema"] = serde_json::json!("countersign.bundle/v0");
    assert!(matches!(
        verify_bundle(value.to_string().as_bytes(), &key(1).public_key()),
        Err(BundleError::Unreadable { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any single byte of the bundle file changed to another value: it no longer verifies,
    /// unless the change is one JSON cannot see (white space between tokens, or an escape that
    /// decodes to the same text).
    #[test]
    fn any_edit_to_a_bundle_fails(position in any::<prop::sample::Index>(), value in any::<u8>()) {
        let text = bundle_of(6, &[2, 5]);
        let mut bytes = text.clone().into_bytes();
        let index = position.index(bytes.len());
        prop_assume!(bytes[index] != value);
        bytes[index] = value;
        let original: serde_json::Value = serde_json::from_str(&text).expect("parses");
        let same_json = serde_json::from_slice::<serde_json::Value>(&bytes)
            .is_ok_and(|edited| edited == original);
        if !same_json {
            prop_assert!(verify_bundle(&bytes, &key(1).public_key()).is_err());
        }
    }

    /// Deleting any one line of the bundle file, or truncating it anywhere, fails.
    #[test]
    fn a_deleted_line_or_truncation_fails(pick in any::<prop::sample::Index>()) {
        let text = bundle_of(6, &[2, 5]);
        let lines: Vec<&str> = text.lines().collect();
        let line = pick.index(lines.len());
        let mut without = lines.clone();
        without.remove(line);
        let without = without.join("\n");
        let original: serde_json::Value = serde_json::from_str(&text).expect("parses");
        if serde_json::from_str::<serde_json::Value>(&without).ok() != Some(original) {
            prop_assert!(verify_bundle(without.as_bytes(), &key(1).public_key()).is_err());
        }
        let cut = pick.index(text.len().saturating_sub(1));
        prop_assert!(verify_bundle(&text.as_bytes()[..cut], &key(1).public_key()).is_err());
    }
}
