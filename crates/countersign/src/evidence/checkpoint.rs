//! Signed checkpoints of the receipt log's Merkle tree, in the C2SP `tlog-checkpoint` format
//! (<https://c2sp.org/tlog-checkpoint>) inside a signed note ([`super::note`]).
//!
//! A checkpoint's text is three lines and optional extension lines, each ending in a newline:
//! the origin (the log's name), the tree size in decimal (no leading zeros), and the root hash
//! in standard base64; extension lines are non-empty. The log signs it as a note under a key
//! named by the origin, so a verifier needs only the checkpoint and the public key: the key id
//! is derived from both ([`super::note::key_id`]). `docs/evidence.md` says what a checkpoint
//! proves and what it does not.

use super::merkle::NodeHash;
use super::note::{self, Note, NoteError, NoteVerifier};
use crate::token::{PublicKey, SigningKey};

/// A tree head: the log's name, its size and its root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The log's name, and the name of the key that signs it: no spaces, no `+`.
    pub origin: String,
    /// The number of leaves (receipts) the root covers.
    pub size: u64,
    /// The Merkle root ([`super::merkle`]) of the first `size` leaves.
    pub root: NodeHash,
    /// Extension lines (none are written today), each non-empty.
    pub extensions: Vec<String>,
}

/// Why a checkpoint could not be made, read or trusted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// The signed note around it is malformed or its signature does not hold.
    #[error("{0}")]
    Note(#[from] NoteError),
    /// The note's text is not a checkpoint.
    #[error("the checkpoint is malformed: {problem}")]
    Malformed {
        /// What is wrong.
        problem: String,
    },
}

impl Checkpoint {
    /// The checkpoint's text: origin, size and root lines, then any extension lines.
    pub fn text(&self) -> String {
        let mut text = format!("{}\n{}\n{}\n", self.origin, self.size, self.root);
        for line in &self.extensions {
            text.push_str(line);
            text.push('\n');
        }
        text
    }

    /// Parse a checkpoint's text (as [`Checkpoint::text`] writes it).
    ///
    /// # Errors
    ///
    /// [`CheckpointError::Malformed`] naming the first line that is wrong.
    pub fn parse(text: &str) -> Result<Checkpoint, CheckpointError> {
        let malformed = |problem: String| CheckpointError::Malformed { problem };
        let body = text
            .strip_suffix('\n')
            .ok_or_else(|| malformed("the text does not end in a newline".to_owned()))?;
        let mut lines = body.split('\n');
        let origin = lines.next().unwrap_or_default();
        if !note::is_valid_key_name(origin) {
            return Err(malformed(format!(
                "the origin line `{}` is empty or has spaces or `+`",
                super::printable(origin)
            )));
        }
        let size_line = lines
            .next()
            .ok_or_else(|| malformed("there is no size line".to_owned()))?;
        let size = parse_size(size_line).ok_or_else(|| {
            malformed(format!(
                "the size line `{}` is not a decimal number without leading zeros",
                super::printable(size_line)
            ))
        })?;
        let root_line = lines
            .next()
            .ok_or_else(|| malformed("there is no root hash line".to_owned()))?;
        let root = NodeHash::parse_base64(root_line)
            .map_err(|error| malformed(format!("the root hash line: {error}")))?;
        let mut extensions = Vec::new();
        for line in lines {
            if line.is_empty() {
                return Err(malformed("an extension line is empty".to_owned()));
            }
            extensions.push(line.to_owned());
        }
        Ok(Checkpoint {
            origin: origin.to_owned(),
            size,
            root,
            extensions,
        })
    }
}

/// A decimal size without sign or leading zeros (`0` itself is allowed).
fn parse_size(line: &str) -> Option<u64> {
    let canonical = !line.is_empty()
        && line.bytes().all(|byte| byte.is_ascii_digit())
        && (line == "0" || !line.starts_with('0'));
    canonical.then(|| line.parse().ok()).flatten()
}

/// Sign `checkpoint` with `key` under its origin: the signed note's text.
///
/// # Errors
///
/// [`CheckpointError::Note`] when the origin cannot name a key or the checkpoint's text has a
/// control character.
pub fn sign(checkpoint: &Checkpoint, key: &SigningKey) -> Result<String, CheckpointError> {
    let text = checkpoint.text();
    // What is signed must read back as the same checkpoint.
    Checkpoint::parse(&text)?;
    Ok(note::sign(&text, &checkpoint.origin, key)?)
}

/// The verifier of checkpoints of `origin` signed with `key`.
///
/// # Errors
///
/// [`CheckpointError::Note`] when `origin` cannot name a key.
pub fn verifier(origin: &str, key: PublicKey) -> Result<NoteVerifier, CheckpointError> {
    Ok(NoteVerifier::new(origin, key)?)
}

/// Open a signed checkpoint: its signature by `key` under the checkpoint's own origin must
/// verify, and its text must be a checkpoint. Other signatures (a witness's) are returned
/// unchecked in the [`Note`].
///
/// # Errors
///
/// [`CheckpointError`] when the note is malformed, is not signed by `key` under its origin,
/// or holds no checkpoint.
pub fn open(signed: &[u8], key: &PublicKey) -> Result<(Checkpoint, Note), CheckpointError> {
    // The key name is the origin, the note's first line: read it before checking the signature
    // (which covers it), then parse only the text the signature covers.
    let origin = signed
        .split(|byte| *byte == b'\n')
        .next()
        .and_then(|line| std::str::from_utf8(line).ok())
        .unwrap_or_default();
    let verifier = verifier(origin, key.clone())?;
    let note = note::open(signed, &verifier)?;
    let checkpoint = Checkpoint::parse(&note.text)?;
    Ok((checkpoint, note))
}

#[cfg(test)]
mod tests;
