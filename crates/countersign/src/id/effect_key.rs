//! [`EffectKey`]: the identity of one real-world effect.

use std::fmt;

/// An effect key: the identity of one real-world effect, rendered from the policy's `effect`
/// template (`refund:{payment_id}` → `refund:pi_1`). At most 512 bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct EffectKey(String);

impl EffectKey {
    /// The longest key accepted, in bytes.
    pub const MAX_LEN: usize = 512;

    /// Wrap a key.
    ///
    /// # Errors
    ///
    /// [`EffectKeyError`] when the key is empty, longer than [`EffectKey::MAX_LEN`] bytes, or
    /// holds a NUL character (which PostgreSQL's text cannot store: a key must mean the same on
    /// every store).
    pub fn new(key: impl Into<String>) -> Result<EffectKey, EffectKeyError> {
        let key = key.into();
        if key.is_empty() {
            return Err(EffectKeyError::Empty);
        }
        if key.len() > Self::MAX_LEN {
            return Err(EffectKeyError::TooLong { length: key.len() });
        }
        // Found by a first-time user: SQLite kept such a key, PostgreSQL refused it with a raw
        // driver error.
        if let Some(at) = key.find('\0') {
            return Err(EffectKeyError::HoldsNul { at });
        }
        Ok(EffectKey(key))
    }

    /// Wrap a key the kernel stored itself, as it is: the lenient read path for rows and
    /// receipts an older version wrote (see [`crate::id`]). Never for a key from outside: use
    /// [`EffectKey::new`].
    pub fn from_stored(key: impl Into<String>) -> EffectKey {
        EffectKey(key.into())
    }

    /// The key text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Lenient, like [`EffectKey::from_stored`]: `Deserialize` reads records the kernel wrote.
impl<'de> serde::Deserialize<'de> for EffectKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <String as serde::Deserialize>::deserialize(deserializer).map(EffectKey)
    }
}

/// Read-only access to the text, so `&id` serves wherever `&str` is read.
impl std::ops::Deref for EffectKey {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for EffectKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for EffectKey {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for EffectKey {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for EffectKey {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for EffectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a rendered effect key was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EffectKeyError {
    /// The template rendered to an empty string.
    #[error("effect key is empty: the effect template must render to at least one character")]
    Empty,
    /// The key is longer than [`EffectKey::MAX_LEN`].
    #[error("effect key is {length} bytes long: the limit is 512")]
    TooLong {
        /// Its length in bytes.
        length: usize,
    },
    /// The key holds a NUL character (U+0000), which no store can keep alike.
    #[error(
        "effect key holds a NUL character (U+0000) at byte {at}, which PostgreSQL cannot store: the argument the effect template reads holds it; send the call without it"
    )]
    HoldsNul {
        /// Its byte offset in the key.
        at: usize,
    },
}
