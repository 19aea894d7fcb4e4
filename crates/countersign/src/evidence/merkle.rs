//! Merkle tree hashing over the receipt log, as in RFC 6962 section 2.1 and RFC 9162 section
//! 2.1: SHA-256, a leaf hashed as `SHA-256(0x00 || data)`, an interior node as
//! `SHA-256(0x01 || left || right)`, the empty tree as `SHA-256("")`; inclusion proofs (an
//! "audit path") for one leaf and consistency proofs between two sizes of one append-only log,
//! and their verification (RFC 9162 sections 2.1.3.2 and 2.1.4.2).
//!
//! This module knows nothing of receipts: what a leaf is, and in which order leaves come, is
//! [`super::log`]'s. Tested against the vectors published with transparency-dev/merkle
//! (`crates/countersign/merkle-vectors/`).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One node of the tree: a leaf hash, an interior node or a root. 32 bytes (SHA-256). Written
/// in text as standard base64 with padding (44 characters), as a C2SP checkpoint writes its
/// root and as bundles write proofs.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeHash([u8; 32]);

impl NodeHash {
    /// The hash with these 32 bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> NodeHash {
        NodeHash(bytes)
    }

    /// The hash with these bytes, if there are exactly 32.
    pub fn from_slice(bytes: &[u8]) -> Option<NodeHash> {
        <[u8; 32]>::try_from(bytes).ok().map(NodeHash)
    }

    /// Parse standard base64 (with padding) of exactly 32 bytes.
    ///
    /// # Errors
    ///
    /// [`ProofError::MalformedHash`] naming the text.
    pub fn parse_base64(text: &str) -> Result<NodeHash, ProofError> {
        STANDARD
            .decode(text)
            .ok()
            .and_then(|bytes| NodeHash::from_slice(&bytes))
            .ok_or_else(|| ProofError::MalformedHash {
                text: text.to_owned(),
            })
    }

    /// The 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Standard base64 with padding.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    /// 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl std::fmt::Debug for NodeHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeHash({})", self.to_hex())
    }
}

impl std::fmt::Display for NodeHash {
    /// Standard base64 with padding.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_base64())
    }
}

impl Serialize for NodeHash {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_base64())
    }
}

impl<'de> Deserialize<'de> for NodeHash {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<NodeHash, D::Error> {
        let text = String::deserialize(deserializer)?;
        NodeHash::parse_base64(&text).map_err(serde::de::Error::custom)
    }
}

/// Why a proof could not be made or does not verify.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    /// A leaf index at or past the tree's size.
    #[error("leaf {index} is not in a tree of {size} leaves")]
    IndexOutOfRange {
        /// The 0-based leaf index.
        index: u64,
        /// The tree size.
        size: u64,
    },
    /// A tree size larger than the log.
    #[error("a tree of {size} leaves was asked for, but the log has {available}")]
    SizeOutOfRange {
        /// The size asked for.
        size: u64,
        /// The leaves there are.
        available: u64,
    },
    /// The older size of a consistency proof is 0 or larger than the newer one (RFC 9162 2.1.4:
    /// `0 < first <= second`; a proof from the empty tree proves nothing).
    #[error("no consistency proof exists from a tree of {old_size} leaves to one of {new_size}")]
    BadSizes {
        /// The older size.
        old_size: u64,
        /// The newer size.
        new_size: u64,
    },
    /// The proof has the wrong number of hashes for the sizes it claims.
    #[error("the proof has {found} hashes, but a proof for these sizes has {expected}")]
    WrongLength {
        /// The hashes a proof for these positions has.
        expected: usize,
        /// The hashes it has.
        found: usize,
    },
    /// The proof, hashed up, does not reach the root it is checked against.
    #[error("the proof does not lead to the expected root: it was changed, or is for another tree")]
    RootMismatch,
    /// Text that should be a 32-byte base64 hash is not one.
    #[error("`{text}` is not a 32-byte hash in standard base64")]
    MalformedHash {
        /// The text.
        text: String,
    },
}

/// The hash of one leaf: `SHA-256(0x00 || data)`.
pub fn leaf_hash(data: &[u8]) -> NodeHash {
    let mut hasher = Sha256::new();
    hasher.update([0x00]);
    hasher.update(data);
    NodeHash(hasher.finalize().into())
}

/// The hash of an interior node: `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &NodeHash, right: &NodeHash) -> NodeHash {
    let mut hasher = Sha256::new();
    hasher.update([0x01]);
    hasher.update(left.0);
    hasher.update(right.0);
    NodeHash(hasher.finalize().into())
}

/// The root of the empty tree: `SHA-256("")`.
pub fn empty_root() -> NodeHash {
    NodeHash(Sha256::digest([]).into())
}

/// The largest power of two smaller than `n` (`n >= 2`): where RFC 6962 splits a tree.
fn split_point(n: usize) -> usize {
    debug_assert!(n >= 2);
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

/// MTH over leaf hashes (RFC 6962 2.1).
fn subtree_root(leaves: &[NodeHash]) -> NodeHash {
    match leaves {
        [] => empty_root(),
        [only] => *only,
        _ => {
            let k = split_point(leaves.len());
            node_hash(&subtree_root(&leaves[..k]), &subtree_root(&leaves[k..]))
        }
    }
}

/// PATH(m, D[n]) over leaf hashes (RFC 6962 2.1.1), appended to `proof`, leaf side first.
fn path(index: usize, leaves: &[NodeHash], proof: &mut Vec<NodeHash>) {
    if leaves.len() <= 1 {
        return;
    }
    let k = split_point(leaves.len());
    if index < k {
        path(index, &leaves[..k], proof);
        proof.push(subtree_root(&leaves[k..]));
    } else {
        path(index - k, &leaves[k..], proof);
        proof.push(subtree_root(&leaves[..k]));
    }
}

/// SUBPROOF(m, D[n], b) over leaf hashes (RFC 6962 2.1.2), appended to `proof`.
fn subproof(old_size: usize, leaves: &[NodeHash], whole: bool, proof: &mut Vec<NodeHash>) {
    if old_size == leaves.len() {
        if !whole {
            proof.push(subtree_root(leaves));
        }
        return;
    }
    let k = split_point(leaves.len());
    if old_size <= k {
        subproof(old_size, &leaves[..k], whole, proof);
        proof.push(subtree_root(&leaves[k..]));
    } else {
        subproof(old_size - k, &leaves[k..], false, proof);
        proof.push(subtree_root(&leaves[..k]));
    }
}

/// A Merkle tree held as its leaf hashes, in log order (32 bytes a leaf: a million leaves is
/// 32 MB). Roots and proofs for any earlier size are computed from them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    leaves: Vec<NodeHash>,
}

impl Tree {
    /// The empty tree.
    pub fn new() -> Tree {
        Tree::default()
    }

    /// Append a leaf: its data is hashed with [`leaf_hash`].
    pub fn push_leaf(&mut self, data: &[u8]) {
        self.leaves.push(leaf_hash(data));
    }

    /// The number of leaves.
    pub fn size(&self) -> u64 {
        self.leaves.len() as u64
    }

    /// The root over every leaf ([`empty_root`] when there is none).
    pub fn root(&self) -> NodeHash {
        subtree_root(&self.leaves)
    }

    /// The hash of leaf `index` (0-based).
    pub fn leaf(&self, index: u64) -> Option<NodeHash> {
        usize::try_from(index)
            .ok()
            .and_then(|index| self.leaves.get(index))
            .copied()
    }

    /// The leaves of the tree of the first `size` leaves.
    fn prefix(&self, size: u64) -> Result<&[NodeHash], ProofError> {
        usize::try_from(size)
            .ok()
            .and_then(|size| self.leaves.get(..size))
            .ok_or(ProofError::SizeOutOfRange {
                size,
                available: self.size(),
            })
    }

    /// The root of the tree of the first `size` leaves.
    ///
    /// # Errors
    ///
    /// [`ProofError::SizeOutOfRange`] if `size` is past the tree.
    pub fn root_at(&self, size: u64) -> Result<NodeHash, ProofError> {
        Ok(subtree_root(self.prefix(size)?))
    }

    /// The inclusion proof of leaf `index` (0-based) in the tree of the first `size` leaves
    /// (RFC 6962 2.1.1), leaf side first.
    ///
    /// # Errors
    ///
    /// [`ProofError::SizeOutOfRange`] if `size` is past the tree, and
    /// [`ProofError::IndexOutOfRange`] if `index >= size`.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<NodeHash>, ProofError> {
        let leaves = self.prefix(size)?;
        if index >= size {
            return Err(ProofError::IndexOutOfRange { index, size });
        }
        let mut proof = Vec::new();
        // INVARIANT (index-fits): index < size, and size fits in usize (prefix succeeded).
        path(index as usize, leaves, &mut proof);
        Ok(proof)
    }

    /// The consistency proof from the tree of the first `old_size` leaves to the tree of the
    /// first `new_size` (RFC 6962 2.1.2); empty when the sizes are equal.
    ///
    /// # Errors
    ///
    /// [`ProofError::SizeOutOfRange`] if `new_size` is past the tree, and
    /// [`ProofError::BadSizes`] unless `0 < old_size <= new_size`.
    pub fn consistency_proof(
        &self,
        old_size: u64,
        new_size: u64,
    ) -> Result<Vec<NodeHash>, ProofError> {
        let leaves = self.prefix(new_size)?;
        if old_size == 0 || old_size > new_size {
            return Err(ProofError::BadSizes { old_size, new_size });
        }
        let mut proof = Vec::new();
        // INVARIANT (index-fits): old_size <= new_size, which fits in usize.
        subproof(old_size as usize, leaves, true, &mut proof);
        Ok(proof)
    }
}

/// Check that `proof` shows leaf `index` (0-based) with hash `leaf` is in the tree of `size`
/// leaves whose root is `root` (RFC 9162 2.1.3.2).
///
/// # Errors
///
/// [`ProofError::IndexOutOfRange`] if `index >= size`, [`ProofError::WrongLength`] if the
/// proof has too many or too few hashes, [`ProofError::RootMismatch`] if it does not hash up to
/// `root`.
pub fn verify_inclusion(
    index: u64,
    size: u64,
    leaf: &NodeHash,
    proof: &[NodeHash],
    root: &NodeHash,
) -> Result<(), ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let expected = inclusion_proof_length(index, size);
    if proof.len() != expected {
        return Err(ProofError::WrongLength {
            expected,
            found: proof.len(),
        });
    }
    let (mut f_n, mut s_n) = (index, size - 1);
    let mut hash = *leaf;
    for sibling in proof {
        if s_n == 0 {
            return Err(ProofError::RootMismatch);
        }
        if f_n & 1 == 1 || f_n == s_n {
            hash = node_hash(sibling, &hash);
            if f_n & 1 == 0 {
                while f_n & 1 == 0 && f_n != 0 {
                    f_n >>= 1;
                    s_n >>= 1;
                }
            }
        } else {
            hash = node_hash(&hash, sibling);
        }
        f_n >>= 1;
        s_n >>= 1;
    }
    if s_n == 0 && hash == *root {
        Ok(())
    } else {
        Err(ProofError::RootMismatch)
    }
}

/// How many hashes the inclusion proof of leaf `index` in a tree of `size` has: one a level
/// where the paths to `index` and to the last leaf have split, plus one a left sibling above.
fn inclusion_proof_length(index: u64, size: u64) -> usize {
    // Levels below the point where the paths to `index` and `size - 1` diverge.
    let inner = 64 - (index ^ (size - 1)).leading_zeros();
    let border = index.checked_shr(inner).unwrap_or(0).count_ones();
    (inner + border) as usize
}

/// Check that `proof` shows the tree of `old_size` leaves with root `old_root` is a prefix of
/// the tree of `new_size` leaves with root `new_root` (RFC 9162 2.1.4.2). Equal sizes need an
/// empty proof and equal roots.
///
/// # Errors
///
/// [`ProofError::BadSizes`] unless `0 < old_size <= new_size`, [`ProofError::WrongLength`] for
/// a proof of the wrong shape, [`ProofError::RootMismatch`] when it does not lead to both roots.
pub fn verify_consistency(
    old_size: u64,
    new_size: u64,
    proof: &[NodeHash],
    old_root: &NodeHash,
    new_root: &NodeHash,
) -> Result<(), ProofError> {
    if old_size == 0 || old_size > new_size {
        return Err(ProofError::BadSizes { old_size, new_size });
    }
    if old_size == new_size {
        if !proof.is_empty() {
            return Err(ProofError::WrongLength {
                expected: 0,
                found: proof.len(),
            });
        }
        return if old_root == new_root {
            Ok(())
        } else {
            Err(ProofError::RootMismatch)
        };
    }
    if proof.is_empty() {
        return Err(ProofError::WrongLength {
            expected: 1,
            found: 0,
        });
    }
    let mut path: Vec<NodeHash> = Vec::with_capacity(proof.len() + 1);
    if old_size.is_power_of_two() {
        path.push(*old_root);
    }
    path.extend_from_slice(proof);
    let (mut f_n, mut s_n) = (old_size - 1, new_size - 1);
    while f_n & 1 == 1 {
        f_n >>= 1;
        s_n >>= 1;
    }
    let mut old_hash = path[0];
    let mut new_hash = path[0];
    for node in &path[1..] {
        if s_n == 0 {
            return Err(ProofError::WrongLength {
                expected: path.len() - 1,
                found: proof.len(),
            });
        }
        if f_n & 1 == 1 || f_n == s_n {
            old_hash = node_hash(node, &old_hash);
            new_hash = node_hash(node, &new_hash);
            if f_n & 1 == 0 {
                while f_n & 1 == 0 && f_n != 0 {
                    f_n >>= 1;
                    s_n >>= 1;
                }
            }
        } else {
            new_hash = node_hash(&new_hash, node);
        }
        f_n >>= 1;
        s_n >>= 1;
    }
    if s_n == 0 && old_hash == *old_root && new_hash == *new_root {
        Ok(())
    } else {
        Err(ProofError::RootMismatch)
    }
}

#[cfg(test)]
mod tests;
