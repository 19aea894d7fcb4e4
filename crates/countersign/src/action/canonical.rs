//! Canonical JSON: the RFC 8785 JSON Canonicalization Scheme (JCS).
//!
//! Everything the kernel hashes (actions, effect keys, receipts) is first put in canonical form,
//! so that two parties holding the same JSON value compute the same bytes and the same SHA-256.
//! The rules are RFC 8785's (<https://www.rfc-editor.org/rfc/rfc8785>):
//!
//! - **Objects**: members sorted by the UTF-16 code units of their keys (RFC 8785 section
//!   3.2.3), not by code point or UTF-8 bytes; `"\u{1F600}"` sorts before `"\u{FF21}"`.
//!   Duplicate keys are refused, never resolved by "last one wins".
//! - **Numbers**: every number is an IEEE-754 double, written as ECMAScript
//!   `Number.prototype.toString` writes it (RFC 8785 section 3.2.2.3). So `1`, `1.0` and `1e0`
//!   are one number and **one action**: a policy or approval keyed on the hash cannot tell them
//!   apart, by design. `1e21` becomes `1e+21`, `1e-7` stays `1e-7`, `1e20` becomes
//!   `100000000000000000000`. The shortest round-trip digits come from Ryu, which breaks ties
//!   to even as ECMAScript does (Rust's own `{:e}` does not: Appendix B row `43143ff3c1cb0959`).
//! - **Strings**: byte-exact. No Unicode normalization (NFC `é` and NFD `e` + U+0301 hash
//!   differently); only `"`, `\` and control characters below U+0020 are escaped, with the short
//!   forms `\b \t \n \f \r` and lowercase `\u00xx` otherwise. Everything else, `/` and non-ASCII
//!   included, is written as raw UTF-8. A `\u` escape and the raw character are the same string.
//!
//! What RFC 8785 cannot carry faithfully is refused with a [`CanonicalError`], never silently
//! changed:
//!
//! - NaN and infinities, as native `f64` values and as the non-standard literals `NaN`,
//!   `Infinity` and `-Infinity` (and literals such as `1e400` that overflow to infinity).
//! - Negative zero in any spelling (`-0`, `-0.0`, `-0e0`, `f64` `-0.0`). RFC 8785 Appendix B
//!   writes `-0` as `0`, but erratum 7920 (<https://www.rfc-editor.org/errata/eid7920>) says a
//!   parser should raise an error, and silently turning `-0` into `0` would let two different
//!   inputs share one hash. This module follows the erratum.
//! - Integers whose magnitude exceeds 2^53 − 1, the largest a double holds exactly (I-JSON,
//!   RFC 7493 section 2.2): integer values from `serde` (`i64`, `u64`, `i128`, `u128`, ...) and
//!   integer literals in JSON text (no fraction, no exponent), by one rule (issue #19), whatever
//!   their spelling: `9007199254740992` and `100000000000000000000` are refused as well as
//!   `9007199254740993`. Send such numbers as strings. A number written with a fraction or an
//!   exponent is a double by the sender's choice (`1e20` is accepted, and its canonical text is
//!   `100000000000000000000`); so every integer that is accepted reaches an executor as an
//!   integer. Canonical text holding such a spelling (the canonical form of `1e20`) is re-read
//!   only by the kernel itself, from its own output ([`CanonicalJson::to_value`], stored rows).
//! - Unpaired surrogates from `\u` escapes (JSON text only; a Rust `str` cannot hold one).
//! - Nesting deeper than [`MAX_DEPTH`] (64) arrays and objects, reported as an error, not a
//!   stack overflow. The same limit holds for [`crate::json::read`], the one strict reader of
//!   JSON text at every edge.
//!
//! Numbers written with a fraction or exponent are floating-point by the sender's own choice and
//! are rounded to the nearest double like any JSON parser does: `0.1` stays `0.1`,
//! `9007199254740993.0` becomes `9007199254740992`.
//!
//! JSON text is best canonicalized with [`parse_canonical`], whose number reading is correctly
//! rounded. `serde_json::from_str` without its `float_roundtrip` feature may read a long
//! decimal one unit in the last place off (RFC 8785's own sample `333333333.33333329` is one),
//! so a `Value` parsed that way can hash differently from the text it came from.
//!
//! Two entry points share one value tree and one writer: [`to_canonical`] for anything
//! `Serialize` (typed structs, `serde_json::Value`), through a serializer of this module that
//! refuses NaN (unlike `serde_json::to_value`, which turns NaN into `null`), and
//! [`parse_canonical`] for JSON text, through a strict parser of this module. Choices for serde
//! data model corners:
//!
//! - Map keys: strings, chars and integers (any size, written in decimal, as `serde_json` does);
//!   unit enum variants by name. Other keys (`bool`, floats, options, sequences) are refused
//!   with [`CanonicalError::UnsupportedValue`].
//! - `f32` values are widened through their shortest decimal form, so `0.1f32` is `0.1` (the
//!   number `serde_json` would have written), not `0.10000000149011612`.
//! - Enums follow `serde_json`'s external tagging; byte slices are arrays of numbers; `None` and
//!   `()` are `null`.
//! - `serde_json::value::RawValue` (feature `raw_value`) and `serde_json::Number` under the
//!   `arbitrary_precision` feature, should another crate in the build enable them, are parsed
//!   with the strict parser instead of being written as their private marker structs.
//!
//! By concept: `write` holds the value tree and its writer, `parse` the strict text parser,
//! `serialize` the serde `Serializer`; this file the public types and entry points.

use std::cmp::Ordering;
use std::fmt;
use std::fmt::Write as _;

use serde::Serialize;
use serde::ser;
use sha2::{Digest, Sha256};

mod parse;
mod serialize;
mod write;

use parse::*;
use serialize::*;
use write::*;

pub(crate) use parse::line_and_column;
pub(crate) use write::write_string;

#[cfg(test)]
mod tests;

/// Deepest nesting of arrays and objects accepted from outside the kernel (canonical form of a
/// value or text, the strict reader [`crate::json::read`], and with them every walker over
/// arguments); the root container is level 1. A value nested deeper is refused with
/// [`CanonicalError::TooDeep`].
///
/// 64, a documented choice (issue #19, case B50): every walker, the serde path through
/// `serde_json`'s own recursive `Serialize` included, stays within a 256 KiB stack at this
/// depth even in an unoptimized build (at 128, the limit before, it did not), and tool arguments
/// nested deeper than 64 levels are not a thing a person can review.
pub const MAX_DEPTH: usize = 64;

/// Largest JSON text accepted from outside the kernel, and largest canonical form of an
/// action's arguments, in bytes: 4 MiB (issue #19, case B50 (d)). Text longer than this is
/// refused with [`CanonicalError::TooLarge`] before a byte of it is parsed ([`parse_canonical`],
/// [`crate::json::read`]); arguments given as a value are refused once their canonical form is
/// known to pass it, before anything is hashed or written.
///
/// 4 MiB, a documented choice: the gateway's default message cap, so one limit holds at every
/// door; a tool call's arguments are something a person may have to review, and content past
/// this belongs behind a reference (a file name, a URL) rather than in the hashed arguments.
pub const MAX_TEXT_BYTES: usize = 4 * 1024 * 1024;

/// The nesting canonical text written before issue #19 may have (128), accepted only when the
/// kernel re-reads its own stored output.
const STORED_MAX_DEPTH: usize = 128;

/// Largest integer magnitude a double holds exactly with its neighbours distinct: 2^53 − 1.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Longest literal kept verbatim in an error; longer ones are cut and end in `…`.
const MAX_LITERAL_IN_ERROR: usize = 64;

/// The marker `serde_json` uses to serialize `RawValue` (feature `raw_value`).
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// The marker `serde_json` uses to serialize `Number` under `arbitrary_precision`.
const ARBITRARY_NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Canonical JSON text per RFC 8785 (JCS), UTF-8, no whitespace, no trailing newline.
///
/// Built only by [`to_canonical`] and [`parse_canonical`]. Two values are the same JSON value
/// exactly when their `CanonicalJson` texts are equal, so equality, hashing and
/// [`CanonicalJson::sha256`] compare values, not spellings.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
// INVARIANT (canonical-text): the string is always valid RFC 8785 canonical form, as this
// module's writer produced it; `parse_canonical` of it returns it unchanged.
pub struct CanonicalJson(String);

impl CanonicalJson {
    /// The canonical text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The canonical text, giving up the wrapper.
    pub fn into_string(self) -> String {
        self.0
    }

    /// SHA-256 over the canonical UTF-8 bytes: `sha256:` plus 64 lowercase hex digits.
    ///
    /// # Panics
    ///
    /// Never.
    pub fn sha256(&self) -> String {
        sha256_prefixed(self.0.as_bytes())
    }

    /// The canonical text as a `serde_json::Value`.
    ///
    /// Numbers that are integers within ±(2^53 − 1) become integer numbers; every other number
    /// becomes a floating-point number. So `to_canonical(&json.to_value())` gives `json` back,
    /// even for `100000000000000000000` (the canonical form of `1e20`, which
    /// `serde_json::from_str` would read as a `u64` that [`to_canonical`] refuses), and nesting
    /// down to 128 levels (stored before issue #19) is kept, past `serde_json`'s own parser limit.
    ///
    /// # Panics
    ///
    /// Never: canonical text always parses (invariant `canonical-text`).
    pub fn to_value(&self) -> serde_json::Value {
        // INVARIANT (canonical-text): our own output parses with our own parser.
        let node = parse_document(&self.0, 0, Source::OwnOutput)
            .expect("canonical text always re-parses (INVARIANT canonical-text)");
        node_to_value(node)
    }
}

impl fmt::Display for CanonicalJson {
    /// Writes the canonical text as is.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// Puts any `Serialize` value (a typed struct, a `serde_json::Value`, a map) in canonical form.
///
/// Numbers are checked as they are serialized: NaN and infinities, negative zero and integers
/// outside ±(2^53 − 1) are refused, never written as `null` or rounded.
///
/// # Errors
///
/// - [`CanonicalError::NotFinite`]: an `f64` or `f32` is NaN or infinite.
/// - [`CanonicalError::NegativeZero`]: a float is `-0.0`.
/// - [`CanonicalError::UnsafeInteger`]: an integer's magnitude exceeds 2^53 − 1 (the rule
///   [`parse_canonical`] applies to integer literals).
/// - [`CanonicalError::DuplicateKey`]: the value emits one object key twice.
/// - [`CanonicalError::UnsupportedValue`]: a map key is not a string, char, integer or unit
///   variant, or a raw JSON marker is malformed.
/// - [`CanonicalError::TooDeep`]: arrays and objects nest deeper than [`MAX_DEPTH`] (64) levels.
/// - [`CanonicalError::SerializeFailed`]: the value's own `Serialize` code failed.
/// - For a `serde_json` `RawValue`, any error of [`parse_canonical`] on its text.
///
/// Every error names the JSON Pointer path of the value at fault. Nothing is hashed or kept on
/// error; the same value always gives the same error, so retrying unchanged is pointless.
pub fn to_canonical<T: Serialize + ?Sized>(value: &T) -> Result<CanonicalJson, CanonicalError> {
    let node = value
        .serialize(NodeSerializer { depth: 0 })
        .map_err(|error| error.0)?;
    Ok(CanonicalJson(render(&node)))
}

/// Puts JSON text (RFC 8259, strictly) in canonical form.
///
/// Accepts exactly one JSON value, with optional whitespace (space, tab, line feed, carriage
/// return) around tokens. Refuses comments, trailing commas, trailing text, single quotes, a
/// byte order mark, leading zeros, `+1`, `.5`, `1.`, and unescaped control characters in
/// strings.
///
/// # Errors
///
/// - [`CanonicalError::InvalidJson`]: a syntax error, with its 1-based line and column
///   (column counted in characters).
/// - [`CanonicalError::NotFinite`]: a `NaN`, `Infinity` or `-Infinity` literal, or a number
///   literal too large for a double (`1e400`).
/// - [`CanonicalError::NegativeZero`]: `-0` in any spelling (`-0`, `-0.0`, `-0e0`, `-1e-400`).
/// - [`CanonicalError::UnsafeInteger`]: an integer literal (no fraction, no exponent) whose
///   magnitude exceeds 2^53 − 1, whatever its spelling.
/// - [`CanonicalError::DuplicateKey`]: an object has one key twice (compared after unescaping).
/// - [`CanonicalError::LoneSurrogate`]: a `\u` escape leaves an unpaired surrogate.
/// - [`CanonicalError::TooDeep`]: arrays and objects nest deeper than [`MAX_DEPTH`] (64) levels.
/// - [`CanonicalError::TooLarge`]: the text is longer than [`MAX_TEXT_BYTES`] (checked first).
///
/// Nothing is hashed or kept on error; the same text always gives the same error.
pub fn parse_canonical(text: &str) -> Result<CanonicalJson, CanonicalError> {
    let node = parse_document(text, 0, Source::Outside)?;
    Ok(CanonicalJson(render(&node)))
}

/// Re-reads canonical text this kernel wrote earlier (a stored row's arguments): as
/// [`parse_canonical`], but an integer spelled exactly as its double's canonical text
/// (`100000000000000000000`, the canonical form of `1e20`) is kept, so canonical text stays a
/// fixed point (INVARIANT canonical-text). Never for text from outside the kernel.
pub(crate) fn reparse_canonical(text: &str) -> Result<CanonicalJson, CanonicalError> {
    let node = parse_document(text, 0, Source::OwnOutput)?;
    Ok(CanonicalJson(render(&node)))
}

/// The strict reading of JSON text into a `serde_json::Value`, for [`crate::json::read`].
pub(crate) fn read_value(text: &str) -> Result<serde_json::Value, (CanonicalError, usize, usize)> {
    let node = parse_located(text, 0, Source::Outside)?;
    Ok(node_to_value(node))
}

/// SHA-256 of any bytes, written as `sha256:` plus 64 lowercase hex digits.
///
/// The one digest format of the kernel: action hashes, effect keys and receipt chains use it.
///
/// # Panics
///
/// Never.
pub fn sha256_prefixed(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Why a value or a JSON text has no canonical form. Nothing was hashed.
///
/// Every variant is a refusal of the input, not a fault of the kernel: canonicalization is
/// deterministic, so the same input always gives the same error and retrying unchanged cannot
/// succeed; the message says what to change. `path` fields are JSON Pointers (RFC 6901) to the
/// value at fault, `""` for the top level, for example `/amount` or `/items/2`. `line` and
/// `column` are 1-based; the column counts characters. [`CanonicalError::reason`] gives a
/// stable code for logs and wire formats.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    /// A number is NaN or infinite; JSON has neither.
    #[error(
        "number `{value}` at {} is not finite and JSON cannot carry it: send it as a string or leave it out",
        describe_path(.path)
    )]
    NotFinite {
        /// Where the number is.
        path: String,
        /// The literal as written (`NaN`, `1e400`) or the float's Rust spelling (`inf`).
        value: String,
    },

    /// A number is negative zero, refused per RFC 8785 erratum 7920.
    #[error(
        "number at {} is negative zero, which canonical JSON refuses (RFC 8785 erratum 7920): send `0`",
        describe_path(.path)
    )]
    NegativeZero {
        /// Where the number is.
        path: String,
    },

    /// An integer's magnitude exceeds 2^53 − 1, so a double cannot hold it exactly.
    #[error(
        "integer `{value}` at {} is outside ±(2^53−1) and would lose precision: send it as a string",
        describe_path(.path)
    )]
    UnsafeInteger {
        /// Where the integer is.
        path: String,
        /// Its decimal digits as given (cut to 64 characters, then `…`).
        value: String,
    },

    /// An object has the same key twice.
    #[error(
        "key `{}` appears more than once in the object at {}: send each key once",
        escape_for_message(.key),
        describe_path(.path)
    )]
    DuplicateKey {
        /// Where the object is.
        path: String,
        /// The repeated key, unescaped.
        key: String,
    },

    /// A `\u` escape in JSON text leaves a surrogate without its pair.
    #[error(
        "`\\u` escape at line {line}, column {column} leaves a lone surrogate in the string at {}: send a valid surrogate pair",
        describe_path(.path)
    )]
    LoneSurrogate {
        /// Where the string (or, for a key, its object) is.
        path: String,
        /// Line of the escape's backslash.
        line: usize,
        /// Column of the escape's backslash.
        column: usize,
    },

    /// Arrays and objects nest deeper than the limit.
    #[error(
        "value at {} nests deeper than {limit} arrays and objects: flatten it",
        describe_path(.path)
    )]
    TooDeep {
        /// Where the first container past the limit is.
        path: String,
        /// The limit: [`MAX_DEPTH`] (64) levels, the root container being level 1.
        limit: usize,
    },

    /// The JSON text, or the canonical form of arguments given as a value, is longer than
    /// [`MAX_TEXT_BYTES`].
    #[error(
        "JSON of {bytes} bytes is larger than the {limit}-byte limit: send less, or pass large content by reference (a file name, a URL)"
    )]
    TooLarge {
        /// Its size in bytes (of the text, or of the canonical form).
        bytes: usize,
        /// The limit: [`MAX_TEXT_BYTES`].
        limit: usize,
    },

    /// The bytes are not UTF-8 (a stray `0xFF`, an overlong or a CESU-8 encoding): JSON text is
    /// UTF-8 (RFC 8259 section 8.1), and repairing it would let two inputs share one hash.
    #[error(
        "invalid UTF-8 at line {line}, column {column}: send the text as UTF-8, with any unusual character as a `\\u` escape"
    )]
    InvalidUtf8 {
        /// Line of the first byte that is not UTF-8.
        line: usize,
        /// Column of that byte (characters before it on its line, plus one).
        column: usize,
    },

    /// The text is not JSON.
    #[error("invalid JSON at line {line}, column {column}: {detail}")]
    InvalidJson {
        /// Line of the fault.
        line: usize,
        /// Column of the fault.
        column: usize,
        /// What was expected or found there.
        detail: &'static str,
    },

    /// A serde value has no JSON form here (for example a map key that is a `bool`).
    #[error("value at {} has no canonical JSON form: {detail}", describe_path(.path))]
    UnsupportedValue {
        /// Where the value is.
        path: String,
        /// What is unsupported and what to use instead.
        detail: &'static str,
    },

    /// The value's own `Serialize` code reported an error.
    #[error("value at {} failed to serialize: {message}", describe_path(.path))]
    SerializeFailed {
        /// Where the value is.
        path: String,
        /// The message the value's `Serialize` code gave.
        message: String,
    },
}

impl CanonicalError {
    /// A stable snake_case code for the refusal, for logs, metrics and wire formats.
    ///
    /// One of `not_finite`, `negative_zero`, `unsafe_integer`, `duplicate_key`,
    /// `lone_surrogate`, `too_deep`, `too_large`, `invalid_utf8`, `invalid_json`, `unsupported_value`,
    /// `serialize_failed`.
    pub fn reason(&self) -> &'static str {
        match self {
            CanonicalError::NotFinite { .. } => "not_finite",
            CanonicalError::NegativeZero { .. } => "negative_zero",
            CanonicalError::UnsafeInteger { .. } => "unsafe_integer",
            CanonicalError::DuplicateKey { .. } => "duplicate_key",
            CanonicalError::LoneSurrogate { .. } => "lone_surrogate",
            CanonicalError::TooDeep { .. } => "too_deep",
            CanonicalError::TooLarge { .. } => "too_large",
            CanonicalError::InvalidUtf8 { .. } => "invalid_utf8",
            CanonicalError::InvalidJson { .. } => "invalid_json",
            CanonicalError::UnsupportedValue { .. } => "unsupported_value",
            CanonicalError::SerializeFailed { .. } => "serialize_failed",
        }
    }

    /// The JSON Pointer (RFC 6901) of the value at fault (`""` for the top level), or `None`
    /// for a syntax error or bytes that are not UTF-8, which have a line and column instead.
    pub fn path(&self) -> Option<&str> {
        match self {
            CanonicalError::NotFinite { path, .. }
            | CanonicalError::NegativeZero { path }
            | CanonicalError::UnsafeInteger { path, .. }
            | CanonicalError::DuplicateKey { path, .. }
            | CanonicalError::LoneSurrogate { path, .. }
            | CanonicalError::TooDeep { path, .. }
            | CanonicalError::UnsupportedValue { path, .. }
            | CanonicalError::SerializeFailed { path, .. } => Some(path),
            CanonicalError::InvalidJson { .. }
            | CanonicalError::InvalidUtf8 { .. }
            | CanonicalError::TooLarge { .. } => None,
        }
    }

    fn path_mut(&mut self) -> Option<&mut String> {
        match self {
            CanonicalError::NotFinite { path, .. }
            | CanonicalError::NegativeZero { path }
            | CanonicalError::UnsafeInteger { path, .. }
            | CanonicalError::DuplicateKey { path, .. }
            | CanonicalError::LoneSurrogate { path, .. }
            | CanonicalError::TooDeep { path, .. }
            | CanonicalError::UnsupportedValue { path, .. }
            | CanonicalError::SerializeFailed { path, .. } => Some(path),
            CanonicalError::InvalidJson { .. }
            | CanonicalError::InvalidUtf8 { .. }
            | CanonicalError::TooLarge { .. } => None,
        }
    }

    /// Moves the error's path one level down: under the member `segment` of its parent.
    /// Errors are raised with a path relative to the value at fault and prefixed on the way out.
    fn nested_under(mut self, segment: &str) -> Self {
        if let Some(path) = self.path_mut() {
            let mut prefixed = String::with_capacity(1 + segment.len() + path.len());
            prefixed.push('/');
            for character in segment.chars() {
                match character {
                    '~' => prefixed.push_str("~0"),
                    '/' => prefixed.push_str("~1"),
                    other => prefixed.push(other),
                }
            }
            prefixed.push_str(path);
            *path = prefixed;
        }
        self
    }

    fn nested_under_index(self, index: usize) -> Self {
        self.nested_under(&index.to_string())
    }
}

fn describe_path(path: &str) -> String {
    if path.is_empty() {
        "the top level".to_owned()
    } else {
        format!("`{path}`")
    }
}

/// User text for a message: JSON string escapes keep it on one line.
fn escape_for_message(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    write_string_body(text, &mut escaped);
    escaped
}

fn cut_literal(literal: &str) -> String {
    match literal.char_indices().nth(MAX_LITERAL_IN_ERROR) {
        Some((cut, _)) => format!("{}…", &literal[..cut]),
        None => literal.to_owned(),
    }
}

/// Serialized as the JSON value it holds (not as a string), so records that carry canonical
/// arguments show them as JSON.
impl Serialize for CanonicalJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}
