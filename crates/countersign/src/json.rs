//! The one strict reader of JSON text that comes from outside the kernel (issue #19).
//!
//! Every edge reads JSON through [`read`] or [`read_slice`]: the gateway's JSON-RPC messages, the
//! CLI's `--args`, the approval service's request bodies, and the Python and Node bindings. It
//! reads RFC 8259 strictly and refuses, with a [`ReadError`] that names the line and column:
//!
//! - a key that appears twice in one object, anywhere in the document, compared after
//!   unescaping (`{"a":1,"\u0061":2}` is refused); `serde_json` would keep the last one, so an
//!   approver and an executor could see different values (case B52);
//! - nesting deeper than [`MAX_DEPTH`] (64) arrays and objects, the root container being level
//!   1 (case B50), the same limit every kernel walker keeps;
//! - a `\u` escape that leaves a lone surrogate, and bytes that are not UTF-8 (case B51);
//! - an integer literal (no fraction, no exponent) outside ±(2^53 − 1), the boundaries
//!   themselves accepted: send such a number as a string; `NaN`, infinities and `-0`;
//! - text longer than [`MAX_TEXT_BYTES`] (4 MiB), before a byte of it is parsed (case B50 (d)).
//!
//! What it returns is a `serde_json::Value` in which every number that is an integer within
//! ±(2^53 − 1) is an integer (`1`, and also `1.0`, which canonical JSON makes the same number),
//! and every other number a double, so an integer argument reaches every executor (Rust, Python,
//! Node) as an integer, never a float.

use serde_json::Value;

use crate::action::canonical::{self, CanonicalError};

pub use crate::action::canonical::{MAX_DEPTH, MAX_TEXT_BYTES};

/// Why JSON text was refused: what is wrong ([`ReadError::source`]) and where.
///
/// `line` and `column` are 1-based; the column counts characters. Nothing was kept; the same
/// text always gives the same error, so sending it again unchanged is pointless.
///
/// Its message is the source's, which names the line and column itself for a syntax error, a
/// lone surrogate or bytes that are not UTF-8, and is prefixed with `at line L, column C: `
/// otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    /// Line of the fault: a syntax error's place, a duplicate key's second occurrence, the
    /// opening bracket past the depth limit, a number's first character, a lone surrogate's
    /// backslash, the first byte that is not UTF-8.
    pub line: usize,
    /// Column of the fault.
    pub column: usize,
    /// What is wrong, with the JSON Pointer path of the value at fault where it has one.
    pub source: CanonicalError,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.source {
            CanonicalError::InvalidJson { .. }
            | CanonicalError::InvalidUtf8 { .. }
            | CanonicalError::LoneSurrogate { .. }
            | CanonicalError::TooLarge { .. } => write!(formatter, "{}", self.source),
            _ => write!(
                formatter,
                "at line {}, column {}: {}",
                self.line, self.column, self.source
            ),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl ReadError {
    /// The stable code of the refusal: [`CanonicalError::reason`] (`duplicate_key`,
    /// `too_deep`, `lone_surrogate`, `unsafe_integer`, `invalid_utf8`, `invalid_json`, ...).
    pub fn reason(&self) -> &'static str {
        self.source.reason()
    }

    /// Whether the text is JSON at all: `false` for a syntax error or bytes that are not UTF-8,
    /// `true` for well-formed JSON this reader refuses (a duplicate key, nesting too deep, a
    /// lone surrogate, a number it cannot carry).
    pub fn is_well_formed(&self) -> bool {
        !matches!(
            self.source,
            CanonicalError::InvalidJson { .. } | CanonicalError::InvalidUtf8 { .. }
        )
    }
}

/// Reads one JSON value from `text`, strictly (see the module docs).
///
/// Whitespace around tokens is allowed; comments, trailing commas, trailing text, a byte order
/// mark, leading zeros and unescaped control characters in strings are syntax errors.
///
/// # Errors
///
/// A [`ReadError`] whose `source` is [`CanonicalError::InvalidJson`],
/// [`CanonicalError::DuplicateKey`], [`CanonicalError::TooDeep`],
/// [`CanonicalError::LoneSurrogate`], [`CanonicalError::UnsafeInteger`],
/// [`CanonicalError::NotFinite`] or [`CanonicalError::NegativeZero`].
///
/// # Panics
///
/// Never; nesting is bounded by [`MAX_DEPTH`], so no input exhausts the stack.
pub fn read(text: &str) -> Result<Value, ReadError> {
    canonical::read_value(text).map_err(|(source, line, column)| ReadError {
        line,
        column,
        source,
    })
}

/// Reads one JSON value from bytes, which must be UTF-8: as [`read`].
///
/// # Errors
///
/// As [`read`], plus [`CanonicalError::InvalidUtf8`] at the first byte that is not UTF-8 (a
/// stray `0xFF`, the overlong `C0 80`, the CESU-8 surrogate `ED A0 80`).
pub fn read_slice(bytes: &[u8]) -> Result<Value, ReadError> {
    if bytes.len() > MAX_TEXT_BYTES {
        return Err(ReadError {
            line: 1,
            column: 1,
            source: CanonicalError::TooLarge {
                bytes: bytes.len(),
                limit: MAX_TEXT_BYTES,
            },
        });
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => read(text),
        Err(error) => {
            let valid = &bytes[..error.valid_up_to()];
            // INVARIANT: `valid_up_to` ends a valid UTF-8 prefix.
            let prefix = std::str::from_utf8(valid).unwrap_or_default();
            let (line, column) = canonical::line_and_column(prefix, prefix.len());
            Err(ReadError {
                line,
                column,
                source: CanonicalError::InvalidUtf8 { line, column },
            })
        }
    }
}

/// Whether `value` nests deeper than `limit` arrays and objects (the root container being level
/// 1), found without recursion, so any depth is safe to ask about. A walker that would recurse
/// over a value it did not canonicalize asks this first.
pub fn nests_deeper_than(value: &Value, limit: usize) -> bool {
    let mut pending: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((value, depth)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(members) => Box::new(members.values()),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => continue,
        };
        if depth + 1 > limit {
            return true;
        }
        pending.extend(children.map(|child| (child, depth + 1)));
    }
    false
}

#[cfg(test)]
mod tests;
