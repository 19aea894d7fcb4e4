//! Offline bundles (`countersign.bundle/v1`): receipts, each with its inclusion proof, and the
//! signed checkpoint the proofs lead to, in one JSON file that anyone holding the log's public
//! key can check with no store ([`verify_bundle`]). `docs/evidence.md` has the format and what a
//! bundle proves.

use serde::{Deserialize, Serialize};

use super::checkpoint::{self, Checkpoint, CheckpointError};
use super::merkle::{self, NodeHash, ProofError};
use super::{ChainBreak, Receipt, StoredReceipt, check_alone, log};
use crate::id::ReceiptHash;
use crate::token::PublicKey;

/// The schema string of a bundle.
pub const BUNDLE_SCHEMA: &str = "countersign.bundle/v1";

/// A bundle as written: JSON with exactly these fields. Everything in it is covered by a hash or
/// the checkpoint's signature, so any edit a JSON reader can see makes it fail; it proves its
/// receipts are in the log, not that no other receipt about the same action exists.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bundle {
    /// Always [`BUNDLE_SCHEMA`].
    pub schema: String,
    /// The signed checkpoint (a C2SP signed note, [`checkpoint`]) every proof leads to.
    pub checkpoint: String,
    /// The receipts, in log order.
    pub receipts: Vec<BundledReceipt>,
}

/// One receipt in a bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundledReceipt {
    /// Its lane ([`Receipt::lane`]); not written for lane 0.
    #[serde(default, skip_serializing_if = "is_zero_lane")]
    pub lane: u32,
    /// Its place in the log ([`StoredReceipt::position`]), whose leaf its inclusion proof starts
    /// from; not written when it is `seq` (every receipt of a log of one lane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// Its `seq` in its lane.
    pub seq: u64,
    /// Its predecessor's hash.
    pub prev_hash: ReceiptHash,
    /// Its hash: `sha256:` + hex SHA-256 of `body`.
    pub hash: ReceiptHash,
    /// Its stored canonical body, the leaf's data ([`log::leaf_data`]).
    pub body: String,
    /// Its inclusion proof in the checkpoint's tree, leaf side first, each hash standard base64.
    pub inclusion_proof: Vec<NodeHash>,
}

fn is_zero_lane(lane: &u32) -> bool {
    *lane == 0
}

impl BundledReceipt {
    /// Its place in the log: `position`, or `seq` when it is not written.
    pub fn log_position(&self) -> u64 {
        self.position.unwrap_or(self.seq)
    }

    fn stored(&self) -> StoredReceipt {
        StoredReceipt {
            lane: self.lane,
            position: self.log_position(),
            seq: self.seq,
            prev_hash: self.prev_hash.clone(),
            hash: self.hash.clone(),
            body: self.body.clone(),
            missing: false,
        }
    }
}

/// Why a bundle does not verify.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    /// The file is not a bundle.
    #[error("the bundle is unreadable: {problem}")]
    Unreadable {
        /// What is wrong.
        problem: String,
    },
    /// Its checkpoint is malformed or not signed by the key given.
    #[error("the bundle's checkpoint does not hold: {0}")]
    Checkpoint(#[from] CheckpointError),
    /// It holds no receipt: nothing to check.
    #[error("the bundle holds no receipt: there is nothing to check")]
    Empty,
    /// A receipt is altered or unreadable on its own.
    #[error("{0}")]
    Receipt(ChainBreak),
    /// The same receipt is listed twice: `countersign receipts --bundle` lists each once, so the
    /// bundle was made or edited by hand.
    #[error("{} is listed twice: a bundle lists each receipt once", super::verify::receipt_name(*lane, *seq))]
    Repeated {
        /// The receipt's lane.
        lane: u32,
        /// The receipt.
        seq: u64,
    },
    /// A receipt is not in the checkpoint's tree.
    #[error("{} is not in the log the checkpoint signs ({size} receipts): {error}", super::verify::receipt_name(*lane, *seq))]
    NotIncluded {
        /// The receipt's lane.
        lane: u32,
        /// The receipt.
        seq: u64,
        /// The checkpoint's size.
        size: u64,
        /// Why its proof fails.
        error: ProofError,
    },
}

impl BundleError {
    /// Is it "nothing to check" rather than "something does not hold"?
    pub fn is_unverifiable(&self) -> bool {
        matches!(self, BundleError::Empty)
    }
}

/// What a bundle that verifies holds.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifiedBundle {
    /// The checkpoint, signed by the key given.
    pub checkpoint: Checkpoint,
    /// The receipts, each with its hash checked and its inclusion proven.
    pub receipts: Vec<Receipt>,
    /// Signatures on the checkpoint by other keys (`name+keyid`), not checked.
    pub other_signatures: Vec<String>,
}

/// Make a bundle: each receipt's inclusion proof in `tree` at the checkpoint's size.
///
/// # Errors
///
/// [`ProofError`] when a receipt is not in the tree of the checkpoint's size (it is newer than
/// the checkpoint, or the tree is smaller).
pub fn make_bundle(
    signed_checkpoint: &str,
    checkpoint: &Checkpoint,
    tree: &log::LogTree,
    receipts: &[StoredReceipt],
) -> Result<Bundle, ProofError> {
    let mut bundled = Vec::with_capacity(receipts.len());
    for receipt in receipts {
        bundled.push(BundledReceipt {
            lane: receipt.lane,
            position: (receipt.position != receipt.seq).then_some(receipt.position),
            seq: receipt.seq,
            prev_hash: receipt.prev_hash.clone(),
            hash: receipt.hash.clone(),
            body: receipt.body.clone(),
            inclusion_proof: tree.inclusion_proof(receipt.position, checkpoint.size)?,
        });
    }
    Ok(Bundle {
        schema: BUNDLE_SCHEMA.to_owned(),
        checkpoint: signed_checkpoint.to_owned(),
        receipts: bundled,
    })
}

/// Check a bundle with no store: its checkpoint is signed by `key` (under the checkpoint's
/// origin), and each receipt hashes to its hash, is a readable receipt at its lane and `seq`,
/// and its inclusion proof leads from its leaf (at its place in the log) to the checkpoint's
/// root.
///
/// # Errors
///
/// [`BundleError`] naming the first thing that does not hold ([`BundleError::Empty`] when there
/// is nothing to check).
pub fn verify_bundle(bytes: &[u8], key: &PublicKey) -> Result<VerifiedBundle, BundleError> {
    let bundle: Bundle =
        serde_json::from_slice(bytes).map_err(|error| BundleError::Unreadable {
            problem: error.to_string(),
        })?;
    if bundle.schema != BUNDLE_SCHEMA {
        return Err(BundleError::Unreadable {
            problem: format!(
                "its schema is `{}`, not `{BUNDLE_SCHEMA}`",
                super::printable(&bundle.schema)
            ),
        });
    }
    let (checkpoint, note) = checkpoint::open(bundle.checkpoint.as_bytes(), key)?;
    if bundle.receipts.is_empty() {
        return Err(BundleError::Empty);
    }
    let mut receipts = Vec::with_capacity(bundle.receipts.len());
    let mut listed = std::collections::BTreeSet::new();
    for bundled in &bundle.receipts {
        if !listed.insert((bundled.lane, bundled.seq)) {
            return Err(BundleError::Repeated {
                lane: bundled.lane,
                seq: bundled.seq,
            });
        }
        let receipt = check_alone(&bundled.stored()).map_err(BundleError::Receipt)?;
        let not_included = |error| BundleError::NotIncluded {
            lane: bundled.lane,
            seq: bundled.seq,
            size: checkpoint.size,
            error,
        };
        let index = log::leaf_index(bundled.log_position()).ok_or(not_included(
            ProofError::IndexOutOfRange {
                index: 0,
                size: checkpoint.size,
            },
        ))?;
        let leaf = merkle::leaf_hash(bundled.body.as_bytes());
        merkle::verify_inclusion(
            index,
            checkpoint.size,
            &leaf,
            &bundled.inclusion_proof,
            &checkpoint.root,
        )
        .map_err(not_included)?;
        receipts.push(receipt);
    }
    Ok(VerifiedBundle {
        checkpoint,
        receipts,
        other_signatures: note
            .unverified
            .iter()
            .map(|signature| format!("{}+{:08x}", signature.name, signature.key_id))
            .collect(),
    })
}

#[cfg(test)]
mod tests;
