//! The log a Merkle tree ([`super::merkle`]) is built over: which receipt is which leaf, and
//! which bytes of it are hashed.
//!
//! **The order.** The log's one total order is the receipt's place in it,
//! [`StoredReceipt::position`] (from 1, without gaps; SPEC 1.5): leaf `i` (0-based) is the
//! receipt at position `i + 1`. A store of one lane places every receipt at its `seq`; a store
//! of several lanes (PostgreSQL, issue #21) places each lane's receipts in their `seq` order
//! after they commit. [`leaf_index`] and [`position_of_leaf`] are the only places that map
//! places to leaves.
//!
//! **The leaf.** A receipt's leaf data is its stored canonical body ([`StoredReceipt::body`]):
//! the UTF-8 bytes of the RFC 8785 JSON of every field but `hash`, exactly as stored, with no
//! trailing newline. Its receipt hash is `sha256:` + hex SHA-256 of the same bytes, so a leaf
//! hash is `SHA-256(0x00 || body)` and covers `seq` and `prev_hash` too.

use super::StoredReceipt;
use super::merkle::{ProofError, Tree};

/// The 0-based leaf index of the receipt at log position `position` (`position - 1`); `None`
/// for position 0, which no placed receipt has.
pub fn leaf_index(position: u64) -> Option<u64> {
    position.checked_sub(1)
}

/// The log position of leaf `index` (`index + 1`); `None` past `u64::MAX`.
pub fn position_of_leaf(index: u64) -> Option<u64> {
    index.checked_add(1)
}

/// The bytes of `receipt` its leaf hashes: its stored canonical body.
pub fn leaf_data(receipt: &StoredReceipt) -> &[u8] {
    receipt.body.as_bytes()
}

/// A receipt that does not come next in the log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the receipt at position {position} is not the next one in the log: leaf {expected_index} comes next"
)]
pub struct OutOfOrder {
    /// The receipt's position (0: it has none).
    pub position: u64,
    /// The leaf index the tree expects next.
    pub expected_index: u64,
}

/// The Merkle tree of a receipt log, built one receipt at a time in log order.
#[derive(Clone, Debug, Default)]
pub struct LogTree {
    tree: Tree,
}

impl LogTree {
    /// An empty log.
    pub fn new() -> LogTree {
        LogTree::default()
    }

    /// Append `receipt`, which must be the next in log order.
    ///
    /// # Errors
    ///
    /// [`OutOfOrder`] when its position is not the next one (nothing is appended).
    pub fn push(&mut self, receipt: &StoredReceipt) -> Result<(), OutOfOrder> {
        let expected_index = self.tree.size();
        if leaf_index(receipt.position) != Some(expected_index) {
            return Err(OutOfOrder {
                position: receipt.position,
                expected_index,
            });
        }
        self.tree.push_leaf(leaf_data(receipt));
        Ok(())
    }

    /// The tree.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// The number of receipts.
    pub fn size(&self) -> u64 {
        self.tree.size()
    }

    /// The inclusion proof of the receipt at log position `position` in the tree of the first
    /// `size` receipts.
    ///
    /// # Errors
    ///
    /// [`ProofError`] when `position` or `size` is outside the log.
    pub fn inclusion_proof(
        &self,
        position: u64,
        size: u64,
    ) -> Result<Vec<super::merkle::NodeHash>, ProofError> {
        let index = leaf_index(position).ok_or(ProofError::IndexOutOfRange { index: 0, size })?;
        self.tree.inclusion_proof(index, size)
    }
}
