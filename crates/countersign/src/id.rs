//! Identifiers and hashes as types (issue #19): [`ApprovalId`] (`apr_…`), [`AttemptId`]
//! (`att_…`), [`ActionHash`], [`PolicyHash`] and [`ReceiptHash`] (`sha256:` plus 64 lowercase
//! hex digits), [`Principal`] and [`EffectKey`]; the [`ShapeError`] every strict parse of an id
//! or a hash returns; and `random_id`, the generator of every random id. The modules that
//! speak of them (`action`, `approval`, `effect`) re-export them; they live here, in the
//! lowest module of the vocabulary, so every record can name them without two modules
//! importing each other.
//!
//! Each type has two ways in:
//!
//! - `parse`, strict: for text from a person, a client or another process. It refuses anything
//!   that is not the documented shape, with a [`ShapeError`] that names the expected shape.
//! - `from_stored` (and `Deserialize`), lenient: for records the kernel wrote itself (store rows,
//!   receipt bodies, the stored attempt context). It wraps the text as it is, so a row written
//!   by an older `main`, before a shape rule existed, still loads; a receipt body read this way
//!   also serializes back byte for byte, which keeps its hash.

use std::fmt;

use rand::Rng;

/// A random identifier: `prefix` plus 20 lowercase base-32 characters (100 bits).
pub(crate) fn random_id(prefix: &str) -> String {
    let mut rng = rand::rng();
    let mut id = String::with_capacity(prefix.len() + 20);
    id.push_str(prefix);
    for _ in 0..RANDOM_LEN {
        id.push(BASE32[rng.random_range(0..32)] as char);
    }
    id
}

/// The alphabet of random ids: RFC 4648 base 32, lowercase.
const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// How many base-32 characters follow a random id's prefix.
const RANDOM_LEN: usize = 20;

/// Is `text` `prefix` followed by exactly 20 characters of `a`–`z` and `2`–`7`?
pub(crate) fn is_random_id(text: &str, prefix: &str) -> bool {
    text.strip_prefix(prefix).is_some_and(|rest| {
        rest.len() == RANDOM_LEN && rest.bytes().all(|byte| BASE32.contains(&byte))
    })
}

/// Is `text` `sha256:` followed by exactly 64 lowercase hex digits?
pub(crate) fn is_sha256(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// The shape every hash has, as refusals state it.
pub(crate) const SHA256_SHAPE: &str = "`sha256:` followed by 64 lowercase hex digits";

/// Why a text is not an id or a hash of the kind asked for: what was given, what kind it was
/// read as, and the shape that kind has.
///
/// Displayed as, for example, ``` `att_1` is not an attempt id: expected `att_` followed by 20
/// characters of `a`-`z` and `2`-`7` ```.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{}` is not {kind}: expected {expected}", given.escape_debug())]
pub struct ShapeError {
    /// The text given.
    pub given: String,
    /// What it was read as, with its article (`an attempt id`, `a policy hash`).
    pub kind: &'static str,
    /// The shape that kind has.
    pub expected: &'static str,
}

/// Declares a string newtype with a strict `parse`, a lenient `from_stored`, `as_str`,
/// `Display`, transparent `Serialize` and a lenient `Deserialize`.
macro_rules! string_id {
    (
        $(#[$doc:meta])*
        $name:ident, kind = $kind:literal, expected = $expected:expr, check = $check:expr
    ) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The shape, as a refusal states it.
            pub const EXPECTED: &'static str = $expected;

            /// Parse text from outside the kernel strictly (no trimming).
            ///
            /// # Errors
            ///
            /// [`ShapeError`] naming the text and the expected shape when `text` does not have
            /// it.
            pub fn parse(text: &str) -> Result<$name, ShapeError> {
                let check: fn(&str) -> bool = $check;
                if check(text) {
                    Ok($name(text.to_owned()))
                } else {
                    Err(ShapeError {
                        given: text.to_owned(),
                        kind: $kind,
                        expected: Self::EXPECTED,
                    })
                }
            }

            /// Wrap text the kernel stored itself, as it is: the lenient read path for rows and
            /// records an older version wrote (see the module docs). Never for text from a
            /// person or a client: use `parse`.
            pub fn from_stored(text: String) -> $name {
                $name(text)
            }

            /// Wrap text the kernel just computed in this shape (a digest it formatted, an id
            /// it generated).
            #[allow(dead_code)]
            pub(crate) fn computed(text: String) -> $name {
                debug_assert!(Self::parse(&text).is_ok(), "{text}");
                $name(text)
            }

            /// Does the text have the current shape? Always true for a parsed or generated
            /// value; a value read with `from_stored` may predate the rule.
            pub fn is_well_formed(&self) -> bool {
                let check: fn(&str) -> bool = $check;
                check(&self.0)
            }

            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The text, giving up the wrapper.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str(&self.0)
            }
        }

        /// Read-only access to the text, so `&id` serves wherever `&str` is read.
        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                self.0 == *other
            }
        }

        /// Lenient, like `from_stored`: `Deserialize` reads records the kernel wrote.
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                <String as serde::Deserialize>::deserialize(deserializer).map($name)
            }
        }
    };
}

string_id! {
    /// One attempt at an action (`att_` plus 20 characters of `a`–`z` and `2`–`7`, 100 random
    /// bits): what an effect record, a consumed approval and a receipt name as the attempt.
    AttemptId,
    kind = "an attempt id",
    expected = "`att_` followed by 20 characters of `a`-`z` and `2`-`7`",
    check = |text| is_random_id(text, "att_")
}

impl AttemptId {
    /// A fresh random attempt id.
    pub fn generate() -> AttemptId {
        AttemptId(random_id("att_"))
    }
}

string_id! {
    /// The hash of a loaded policy document: `sha256:` plus 64 lowercase hex digits, SHA-256
    /// over the RFC 8785 form of the document (`Policy::hash`).
    PolicyHash,
    kind = "a policy hash",
    expected = SHA256_SHAPE,
    check = is_sha256
}

string_id! {
    /// The hash of one receipt, which the next receipt names as its `prev_hash`: `sha256:` plus
    /// 64 lowercase hex digits (the first receipt's `prev_hash` is `GENESIS_HASH`, 64 zeros).
    ReceiptHash,
    kind = "a receipt hash",
    expected = SHA256_SHAPE,
    check = is_sha256
}

impl ReceiptHash {
    /// Is it the empty text a receipt carries before it is sealed (its `hash` field only)?
    pub fn is_unset(&self) -> bool {
        self.0.is_empty()
    }

    /// `GENESIS_HASH`: `sha256:` and 64 zeros, the first receipt's `prev_hash`.
    pub fn genesis() -> ReceiptHash {
        ReceiptHash(format!("sha256:{}", "0".repeat(64)))
    }
}

/// The empty text: the `hash` of a receipt not yet sealed ([`ReceiptHash::is_unset`]).
impl Default for ReceiptHash {
    fn default() -> ReceiptHash {
        ReceiptHash(String::new())
    }
}

string_id! {
    /// The hash an approval is bound to: `sha256:` plus 64 lowercase hex digits.
    ///
    /// It is SHA-256 over the RFC 8785 form of
    /// `{schema, name, arguments, principal, resource, environment}`, where `arguments` has
    /// every secret argument replaced by `"[redacted]"` (see `docs/policy.md`, "Secret
    /// arguments").
    ActionHash,
    kind = "an action hash",
    expected = SHA256_SHAPE,
    check = is_sha256
}

string_id! {
    /// An approval request identifier: `apr_` plus 20 characters of `a`–`z` and `2`–`7` (100
    /// random bits).
    ApprovalId,
    kind = "an approval request id",
    expected = "`apr_` followed by 20 characters of `a`-`z` and `2`-`7`; list them with `countersign pending`",
    check = |text| is_random_id(text, "apr_")
}

impl ApprovalId {
    /// A fresh random identifier.
    pub fn generate() -> ApprovalId {
        ApprovalId(random_id("apr_"))
    }
}

mod effect_key;
mod principal;

pub use effect_key::{EffectKey, EffectKeyError};
pub use principal::{Principal, PrincipalError};

#[cfg(test)]
mod tests;
