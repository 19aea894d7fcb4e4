//! Evidence benchmarks (issue #23): how long a checkpoint takes and how large a one-receipt
//! bundle is, at 10k, 100k and 1M receipts (`--quick`: 1k).
//!
//! The receipts are sealed in memory (`evidence::seal`, each with ten canonical arguments), so
//! the checkpoint time is the Merkle tree over their stored bodies (leaf hashing included), its
//! root and the Ed25519 signature: reading the receipts out of a store is not included
//! (`receipts` pages of 2,000, measured by the store scenarios). Printed, never asserted.

use std::time::Instant;

use anyhow::{Context, Result};
use countersign::evidence::bundle::{make_bundle, verify_bundle};
use countersign::evidence::checkpoint::{self, Checkpoint};
use countersign::evidence::log::LogTree;
use countersign::evidence::{ChainHead, ReceiptDraft, ReceiptKind, ReceiptOutcome, seal};
use countersign::{Timestamp, canonical};

/// Run the evidence benchmark at each size and print one line per size.
pub fn run(quick: bool) -> Result<()> {
    let sizes: &[u64] = if quick {
        &[1_000]
    } else {
        &[10_000, 100_000, 1_000_000]
    };
    let key = countersign::token::generate_keypair()?;
    println!(
        "\n{:<12} {:>16} {:>16} {:>14} {:>14}",
        "receipts", "checkpoint ms", "bundle bytes", "proof hashes", "verify ms"
    );
    for &size in sizes {
        let mut stored = Vec::with_capacity(size as usize);
        let mut head: Option<ChainHead> = None;
        for n in 0..size {
            let draft = ReceiptDraft {
                kind: Some(ReceiptKind::Attempt),
                outcome: Some(ReceiptOutcome::Committed),
                action: Some("stripe.refund".to_owned()),
                arguments: Some(canonical::to_canonical(&crate::ten_arguments(n as usize))?),
                ..ReceiptDraft::default()
            };
            let (_, receipt) = seal(draft, head.as_ref(), Timestamp::from_millis(n as i64))
                .context("seal a receipt")?;
            head = Some(ChainHead {
                seq: receipt.seq,
                hash: receipt.hash.clone(),
            });
            stored.push(receipt);
        }
        let started = Instant::now();
        let mut tree = LogTree::new();
        for receipt in &stored {
            tree.push(receipt)?;
        }
        let checkpoint = Checkpoint {
            origin: "countersign/bench".to_owned(),
            size: tree.size(),
            root: tree.tree().root(),
            extensions: Vec::new(),
        };
        let signed = checkpoint::sign(&checkpoint, &key)?;
        let checkpoint_ms = started.elapsed().as_secs_f64() * 1_000.0;
        let middle = &stored[(size / 2) as usize];
        let bundle = make_bundle(&signed, &checkpoint, &tree, std::slice::from_ref(middle))?;
        let text = serde_json::to_string_pretty(&bundle)?;
        let started = Instant::now();
        verify_bundle(text.as_bytes(), &key.public_key())?;
        let verify_ms = started.elapsed().as_secs_f64() * 1_000.0;
        println!(
            "{:<12} {:>16.1} {:>16} {:>14} {:>14.2}",
            size,
            checkpoint_ms,
            text.len(),
            bundle.receipts[0].inclusion_proof.len(),
            verify_ms
        );
    }
    Ok(())
}
