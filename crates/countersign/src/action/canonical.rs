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
//!   integer literals in JSON text, by one rule. Send such numbers as strings. One exception
//!   keeps canonical text a fixed point: an integer (value or literal) that is already exactly
//!   the canonical spelling of its double (`9007199254740992`, `100000000000000000000`) is
//!   accepted, because no digit of it changes. `9007199254740993` (which would become
//!   `...992`) and `1000000000000000000000` (which would become `1e+21`) are refused.
//! - Unpaired surrogates from `\u` escapes (JSON text only; a Rust `str` cannot hold one).
//! - Nesting deeper than 128 arrays and objects, reported as an error, not a stack overflow.
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

use std::cmp::Ordering;
use std::fmt;
use std::fmt::Write as _;

use serde::Serialize;
use serde::ser;
use sha2::{Digest, Sha256};

#[cfg(test)]
mod tests;

/// Deepest nesting of arrays and objects accepted; the root container is level 1.
const MAX_DEPTH: usize = 128;

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
    /// even for `9007199254740992` or `1e+300` (which `serde_json::from_str` would read as a
    /// `u64` that [`to_canonical`] refuses), and nesting down to 128 levels is kept (past
    /// `serde_json`'s own parser limit).
    ///
    /// # Panics
    ///
    /// Never: canonical text always parses (invariant `canonical-text`).
    pub fn to_value(&self) -> serde_json::Value {
        // INVARIANT (canonical-text): our own output parses with our own parser.
        let node = parse_document(&self.0, 0)
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
/// - [`CanonicalError::UnsafeInteger`]: an integer's magnitude exceeds 2^53 − 1, unless its
///   digits are already the canonical spelling of its double (the rule [`parse_canonical`]
///   applies to integer literals).
/// - [`CanonicalError::DuplicateKey`]: the value emits one object key twice.
/// - [`CanonicalError::UnsupportedValue`]: a map key is not a string, char, integer or unit
///   variant, or a raw JSON marker is malformed.
/// - [`CanonicalError::TooDeep`]: arrays and objects nest deeper than 128 levels.
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
///   magnitude exceeds 2^53 − 1, unless it is already the canonical spelling of its double.
/// - [`CanonicalError::DuplicateKey`]: an object has one key twice (compared after unescaping).
/// - [`CanonicalError::LoneSurrogate`]: a `\u` escape leaves an unpaired surrogate.
/// - [`CanonicalError::TooDeep`]: arrays and objects nest deeper than 128 levels.
///
/// Nothing is hashed or kept on error; the same text always gives the same error.
pub fn parse_canonical(text: &str) -> Result<CanonicalJson, CanonicalError> {
    let node = parse_document(text, 0)?;
    Ok(CanonicalJson(render(&node)))
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
        /// The limit: 128 levels, the root container being level 1.
        limit: usize,
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
    /// `lone_surrogate`, `too_deep`, `invalid_json`, `unsupported_value`, `serialize_failed`.
    pub fn reason(&self) -> &'static str {
        match self {
            CanonicalError::NotFinite { .. } => "not_finite",
            CanonicalError::NegativeZero { .. } => "negative_zero",
            CanonicalError::UnsafeInteger { .. } => "unsafe_integer",
            CanonicalError::DuplicateKey { .. } => "duplicate_key",
            CanonicalError::LoneSurrogate { .. } => "lone_surrogate",
            CanonicalError::TooDeep { .. } => "too_deep",
            CanonicalError::InvalidJson { .. } => "invalid_json",
            CanonicalError::UnsupportedValue { .. } => "unsupported_value",
            CanonicalError::SerializeFailed { .. } => "serialize_failed",
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
            CanonicalError::InvalidJson { .. } => None,
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

// ---------------------------------------------------------------------------------------------
// Value tree and writer

/// A JSON value that is already known to have a canonical form.
#[derive(Debug)]
// INVARIANT (canonical-node): every `Number` is finite and not negative zero; every `Object`
// has unique keys sorted by UTF-16 code units. `number_node`, `integer_node` and `object_node`
// are the only constructors of those variants.
enum Node {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

fn number_node(value: f64) -> Result<Node, CanonicalError> {
    if !value.is_finite() {
        return Err(CanonicalError::NotFinite {
            path: String::new(),
            value: value.to_string(),
        });
    }
    if value == 0.0 && value.is_sign_negative() {
        return Err(CanonicalError::NegativeZero {
            path: String::new(),
        });
    }
    Ok(Node::Number(value))
}

fn integer_node(value: i128) -> Result<Node, CanonicalError> {
    if value.unsigned_abs() > u128::from(MAX_SAFE_INTEGER) {
        // INVARIANT (one integer rule): an integer outside ±(2^53 − 1) is accepted only when
        // canonical form keeps every digit of it, whether it comes as a Rust integer or as an
        // integer literal in JSON text (`parse_canonical`), so the typed and text paths (and
        // with them the Rust, Python and Node bindings) refuse exactly the same integers.
        // Shared vectors: `tests/vectors/numbers.json`.
        let digits = value.to_string();
        if !is_canonical_integer_spelling(&digits) {
            return Err(CanonicalError::UnsafeInteger {
                path: String::new(),
                value: digits,
            });
        }
    }
    // Exact: below 2^53 in magnitude, or a double whose canonical spelling is these digits.
    Ok(Node::Number(value as f64))
}

/// Whether `digits` (`-?digits`) is exactly the canonical spelling of the double nearest it.
fn is_canonical_integer_spelling(digits: &str) -> bool {
    let Ok(value) = digits.parse::<f64>() else {
        return false;
    };
    let mut canonical = String::new();
    write_number(value, &mut canonical);
    canonical == digits
}

fn utf16_order(left: &str, right: &str) -> Ordering {
    left.encode_utf16().cmp(right.encode_utf16())
}

fn object_node(mut members: Vec<(String, Node)>) -> Result<Node, CanonicalError> {
    members.sort_by(|left, right| utf16_order(&left.0, &right.0));
    // Equal UTF-16 sequences are equal strings, so duplicates are now neighbours.
    if let Some(pair) = members.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        return Err(CanonicalError::DuplicateKey {
            path: String::new(),
            key: pair[0].0.clone(),
        });
    }
    Ok(Node::Object(members))
}

fn render(node: &Node) -> String {
    let mut out = String::new();
    write_node(node, &mut out);
    out
}

fn write_node(node: &Node, out: &mut String) {
    match node {
        Node::Null => out.push_str("null"),
        Node::Bool(true) => out.push_str("true"),
        Node::Bool(false) => out.push_str("false"),
        Node::Number(value) => write_number(*value, out),
        Node::String(text) => write_string(text, out),
        Node::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_node(item, out);
            }
            out.push(']');
        }
        Node::Object(members) => {
            // INVARIANT (canonical-node): members are already sorted and unique.
            out.push('{');
            for (index, (key, value)) in members.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_node(value, out);
            }
            out.push('}');
        }
    }
}

/// Write `text` as a canonical JSON string (quoted, RFC 8785 escapes) for callers that build
/// canonical text around parts that are already canonical.
pub(crate) fn write_string(text: &str, out: &mut String) {
    out.push('"');
    write_string_body(text, out);
    out.push('"');
}

/// RFC 8785 section 3.2.2.2: escape `"`, `\` and U+0000..U+001F only.
///
/// Runs of bytes that need no escape are copied whole: every byte of a multi-byte UTF-8
/// sequence is 0x80 or above, so splitting at the ASCII bytes below keeps characters intact.
fn write_string_body(text: &str, out: &mut String) {
    let bytes = text.as_bytes();
    let mut copied = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[copied..index]);
        if escape.is_empty() {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\u{:04x}", byte);
        } else {
            out.push_str(escape);
        }
        copied = index + 1;
    }
    out.push_str(&text[copied..]);
}

/// ECMAScript `Number::toString(x)` (ECMA-262 section 6.1.6.1.20, cited by RFC 8785 section
/// 3.2.2.3).
fn write_number(value: f64, out: &mut String) {
    // INVARIANT (canonical-node): finite and not negative zero.
    if value == 0.0 {
        out.push('0');
        return;
    }
    if value < 0.0 {
        out.push('-');
    }
    let (digits, n) = shortest_digits(value.abs());
    // value = 0.d1d2...dk × 10^n, in ECMAScript's terms.
    let k = digits.len() as i32;
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if n > 0 { '+' } else { '-' });
        // Writing to a String cannot fail.
        let _ = write!(out, "{}", (n - 1).abs());
    }
}

/// The shortest decimal digits `d1...dk` (no leading or trailing zeros) and the exponent `n`
/// with `value = 0.d1...dk × 10^n`, for a finite `value > 0`.
///
/// The digits come from Ryu, which picks, among the shortest digit strings that read back as
/// `value`, the one closest to it, ties to even: ECMAScript's rule. (Rust's own `{:e}` rounds
/// ties up, which breaks RFC 8785 Appendix B row `43143ff3c1cb0959`.) The reading below does
/// not depend on how Ryu lays the digits out.
fn shortest_digits(value: f64) -> (String, i32) {
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(value);
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (
            mantissa,
            exponent
                .parse::<i32>()
                .expect("Ryu writes the exponent as a decimal integer"),
        ),
        None => (text, 0),
    };
    let (integer_part, fraction_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = format!("{integer_part}{fraction_part}");
    let leading_zeros = all_digits.len() - all_digits.trim_start_matches('0').len();
    let digits = all_digits
        .trim_start_matches('0')
        .trim_end_matches('0')
        .to_owned();
    let n = integer_part.len() as i32 + exponent - leading_zeros as i32;
    (digits, n)
}

fn node_to_value(node: Node) -> serde_json::Value {
    use serde_json::Value;
    match node {
        Node::Null => Value::Null,
        Node::Bool(flag) => Value::Bool(flag),
        Node::Number(number) => {
            if number.fract() == 0.0 && number.abs() <= MAX_SAFE_INTEGER as f64 {
                // Exact: an integer below 2^53 in magnitude.
                Value::from(number as i64)
            } else {
                // INVARIANT (canonical-node): finite, so from_f64 succeeds.
                Value::Number(
                    serde_json::Number::from_f64(number)
                        .expect("canonical numbers are finite (INVARIANT canonical-node)"),
                )
            }
        }
        Node::String(text) => Value::String(text),
        Node::Array(items) => Value::Array(items.into_iter().map(node_to_value).collect()),
        Node::Object(members) => Value::Object(
            members
                .into_iter()
                .map(|(key, value)| (key, node_to_value(value)))
                .collect(),
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Strict JSON text parser

fn parse_document(text: &str, depth: usize) -> Result<Node, CanonicalError> {
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        position: 0,
    };
    parser.skip_whitespace();
    let node = parser.value(depth)?;
    parser.skip_whitespace();
    if parser.position < parser.bytes.len() {
        return Err(parser.syntax_error("unexpected text after the JSON value"));
    }
    Ok(node)
}

struct Parser<'text> {
    text: &'text str,
    bytes: &'text [u8],
    /// Byte offset of the next unread byte, always on a character boundary between tokens.
    position: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.position).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.position += 1;
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    fn line_and_column(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }

    fn syntax_error_at(&self, offset: usize, detail: &'static str) -> CanonicalError {
        let (line, column) = self.line_and_column(offset);
        CanonicalError::InvalidJson {
            line,
            column,
            detail,
        }
    }

    fn syntax_error(&self, detail: &'static str) -> CanonicalError {
        self.syntax_error_at(self.position, detail)
    }

    fn expect_byte(&mut self, expected: u8, detail: &'static str) -> Result<(), CanonicalError> {
        if self.peek() == Some(expected) {
            self.position += 1;
            Ok(())
        } else {
            Err(self.syntax_error(detail))
        }
    }

    /// A value enclosed by `depth` arrays and objects.
    fn value(&mut self, depth: usize) -> Result<Node, CanonicalError> {
        match self.peek() {
            Some(b'{') => self.object(enter(depth)?),
            Some(b'[') => self.array(enter(depth)?),
            Some(b'"') => Ok(Node::String(self.string()?)),
            Some(b't') => self.literal("true", Node::Bool(true)),
            Some(b'f') => self.literal("false", Node::Bool(false)),
            Some(b'n') => self.literal("null", Node::Null),
            Some(b'N') => self.non_finite("NaN"),
            Some(b'I') => self.non_finite("Infinity"),
            Some(b'-') if self.bytes.get(self.position + 1) == Some(&b'I') => {
                self.non_finite("-Infinity")
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            None => Err(self.syntax_error("expected a JSON value, found the end of the text")),
            Some(_) => Err(self.syntax_error("expected a JSON value")),
        }
    }

    fn literal(&mut self, word: &str, node: Node) -> Result<Node, CanonicalError> {
        if self.bytes[self.position..].starts_with(word.as_bytes()) {
            self.position += word.len();
            Ok(node)
        } else {
            Err(self.syntax_error("expected a JSON value"))
        }
    }

    fn non_finite(&mut self, word: &'static str) -> Result<Node, CanonicalError> {
        if self.bytes[self.position..].starts_with(word.as_bytes()) {
            Err(CanonicalError::NotFinite {
                path: String::new(),
                value: word.to_owned(),
            })
        } else {
            Err(self.syntax_error("expected a JSON value"))
        }
    }

    /// An object whose own level is `depth`.
    fn object(&mut self, depth: usize) -> Result<Node, CanonicalError> {
        self.position += 1; // `{`
        let mut members = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.position += 1;
            return object_node(members);
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.syntax_error("expected a string key"));
            }
            let key = self.string()?;
            self.skip_whitespace();
            self.expect_byte(b':', "expected `:` after an object key")?;
            self.skip_whitespace();
            let value = self
                .value(depth)
                .map_err(|error| error.nested_under(&key))?;
            members.push((key, value));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.position += 1,
                Some(b'}') => {
                    self.position += 1;
                    return object_node(members);
                }
                _ => return Err(self.syntax_error("expected `,` or `}` after an object member")),
            }
        }
    }

    /// An array whose own level is `depth`.
    fn array(&mut self, depth: usize) -> Result<Node, CanonicalError> {
        self.position += 1; // `[`
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.position += 1;
            return Ok(Node::Array(items));
        }
        loop {
            self.skip_whitespace();
            let index = items.len();
            let item = self
                .value(depth)
                .map_err(|error| error.nested_under_index(index))?;
            items.push(item);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.position += 1,
                Some(b']') => {
                    self.position += 1;
                    return Ok(Node::Array(items));
                }
                _ => return Err(self.syntax_error("expected `,` or `]` after an array element")),
            }
        }
    }

    fn string(&mut self) -> Result<String, CanonicalError> {
        self.position += 1; // `"`
        let mut out = String::new();
        let mut run_start = self.position;
        loop {
            let Some(byte) = self.peek() else {
                return Err(self.syntax_error("unterminated string"));
            };
            match byte {
                b'"' => {
                    out.push_str(&self.text[run_start..self.position]);
                    self.position += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(&self.text[run_start..self.position]);
                    let character = self.escape()?;
                    out.push(character);
                    run_start = self.position;
                }
                0x00..=0x1f => {
                    return Err(self.syntax_error(
                        "control character in a string: write it as a `\\u` escape",
                    ));
                }
                // Bytes of a multi-byte character are all >= 0x80: runs end on ASCII bytes,
                // so each run is whole characters.
                _ => self.position += 1,
            }
        }
    }

    /// One escape sequence, the backslash at `position`.
    fn escape(&mut self) -> Result<char, CanonicalError> {
        let backslash = self.position;
        self.position += 1;
        let Some(kind) = self.peek() else {
            return Err(self.syntax_error("unterminated string"));
        };
        self.position += 1;
        let simple = match kind {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(backslash),
            _ => return Err(self.syntax_error_at(backslash, "unknown escape in a string")),
        };
        Ok(simple)
    }

    /// The rest of a `\uXXXX` escape (and of its low surrogate escape, if it starts a pair).
    fn unicode_escape(&mut self, backslash: usize) -> Result<char, CanonicalError> {
        let unit = self.hex4()?;
        match unit {
            0xD800..=0xDBFF => {
                let rest = &self.bytes[self.position..];
                if !rest.starts_with(b"\\u") {
                    return Err(self.lone_surrogate(backslash));
                }
                let saved = self.position;
                self.position += 2;
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    self.position = saved;
                    return Err(self.lone_surrogate(backslash));
                }
                let scalar =
                    0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                Ok(char::from_u32(scalar).expect("a surrogate pair always decodes to a scalar"))
            }
            0xDC00..=0xDFFF => Err(self.lone_surrogate(backslash)),
            other => {
                Ok(char::from_u32(u32::from(other)).expect("a non-surrogate unit is a scalar"))
            }
        }
    }

    fn lone_surrogate(&self, backslash: usize) -> CanonicalError {
        let (line, column) = self.line_and_column(backslash);
        CanonicalError::LoneSurrogate {
            path: String::new(),
            line,
            column,
        }
    }

    fn hex4(&mut self) -> Result<u16, CanonicalError> {
        let mut unit: u16 = 0;
        for _ in 0..4 {
            let digit = match self.peek() {
                Some(byte @ b'0'..=b'9') => byte - b'0',
                Some(byte @ b'a'..=b'f') => byte - b'a' + 10,
                Some(byte @ b'A'..=b'F') => byte - b'A' + 10,
                _ => return Err(self.syntax_error("expected four hex digits after `\\u`")),
            };
            unit = unit * 16 + u16::from(digit);
            self.position += 1;
        }
        Ok(unit)
    }

    fn digits(&mut self) -> usize {
        let start = self.position;
        while let Some(b'0'..=b'9') = self.peek() {
            self.position += 1;
        }
        self.position - start
    }

    /// RFC 8259 section 6: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Result<Node, CanonicalError> {
        let start = self.position;
        if self.peek() == Some(b'-') {
            self.position += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.position += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.syntax_error("a number must not have leading zeros"));
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.syntax_error("expected a digit")),
        }
        let mut is_integer_literal = true;
        if self.peek() == Some(b'.') {
            is_integer_literal = false;
            self.position += 1;
            if self.digits() == 0 {
                return Err(self.syntax_error("expected a digit after the decimal point"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            is_integer_literal = false;
            self.position += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.position += 1;
            }
            if self.digits() == 0 {
                return Err(self.syntax_error("expected a digit in the exponent"));
            }
        }
        let literal = &self.text[start..self.position];
        // Rust's f64 parser accepts this grammar and rounds correctly, to the nearest double.
        let value: f64 = literal
            .parse()
            .expect("the RFC 8259 number grammar is a subset of what f64::from_str accepts");
        if !value.is_finite() {
            return Err(CanonicalError::NotFinite {
                path: String::new(),
                value: cut_literal(literal),
            });
        }
        let node = number_node(value)?;
        if is_integer_literal && !is_safe_integer_literal(literal) {
            // Accepted only when no digit changes: the literal is its double's canonical text
            // (INVARIANT (one integer rule), as `integer_node`).
            if !is_canonical_integer_spelling(literal) {
                return Err(CanonicalError::UnsafeInteger {
                    path: String::new(),
                    value: cut_literal(literal),
                });
            }
        }
        Ok(node)
    }
}

/// Whether an integer literal (`-?digits`, no leading zeros) is within ±(2^53 − 1).
fn is_safe_integer_literal(literal: &str) -> bool {
    const MAX_SAFE_DIGITS: &str = "9007199254740991";
    let digits = literal.strip_prefix('-').unwrap_or(literal);
    digits.len() < MAX_SAFE_DIGITS.len()
        || (digits.len() == MAX_SAFE_DIGITS.len() && digits <= MAX_SAFE_DIGITS)
}

/// The level of a container opened inside `depth` enclosing ones, or `TooDeep`.
fn enter(depth: usize) -> Result<usize, CanonicalError> {
    if depth >= MAX_DEPTH {
        Err(CanonicalError::TooDeep {
            path: String::new(),
            limit: MAX_DEPTH,
        })
    } else {
        Ok(depth + 1)
    }
}

// ---------------------------------------------------------------------------------------------
// serde Serializer into the value tree

/// The serializer's error: a `CanonicalError`, kept private so serde stays out of the public
/// type's trait list.
struct SerializeError(CanonicalError);

impl From<CanonicalError> for SerializeError {
    fn from(error: CanonicalError) -> Self {
        SerializeError(error)
    }
}

impl SerializeError {
    fn nested_under(self, segment: &str) -> Self {
        SerializeError(self.0.nested_under(segment))
    }

    fn nested_under_index(self, index: usize) -> Self {
        SerializeError(self.0.nested_under_index(index))
    }
}

impl fmt::Debug for SerializeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, formatter)
    }
}

impl fmt::Display for SerializeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, formatter)
    }
}

impl std::error::Error for SerializeError {}

impl ser::Error for SerializeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        SerializeError(CanonicalError::SerializeFailed {
            path: String::new(),
            message: message.to_string(),
        })
    }
}

fn unsupported(detail: &'static str) -> SerializeError {
    SerializeError(CanonicalError::UnsupportedValue {
        path: String::new(),
        detail,
    })
}

/// Serializes one value enclosed by `depth` arrays and objects.
#[derive(Clone, Copy)]
struct NodeSerializer {
    depth: usize,
}

/// `f32` through its shortest decimal form, so `0.1f32` means `0.1`, as `serde_json` writes it.
fn widen_f32(value: f32) -> f64 {
    if value.is_finite() {
        value
            .to_string()
            .parse()
            .expect("the Display form of a finite f32 parses as f64")
    } else {
        f64::from(value)
    }
}

impl ser::Serializer for NodeSerializer {
    type Ok = Node;
    type Error = SerializeError;
    type SerializeSeq = ArrayBuilder;
    type SerializeTuple = ArrayBuilder;
    type SerializeTupleStruct = ArrayBuilder;
    type SerializeTupleVariant = TupleVariantBuilder;
    type SerializeMap = ObjectBuilder;
    type SerializeStruct = StructBuilder;
    type SerializeStructVariant = StructVariantBuilder;

    fn serialize_bool(self, value: bool) -> Result<Node, SerializeError> {
        Ok(Node::Bool(value))
    }

    fn serialize_i8(self, value: i8) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_i16(self, value: i16) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_i32(self, value: i32) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_i64(self, value: i64) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_i128(self, value: i128) -> Result<Node, SerializeError> {
        Ok(integer_node(value)?)
    }

    fn serialize_u8(self, value: u8) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_u16(self, value: u16) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_u32(self, value: u32) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_u64(self, value: u64) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_u128(self, value: u128) -> Result<Node, SerializeError> {
        match i128::try_from(value) {
            Ok(signed) => Ok(integer_node(signed)?),
            Err(_) => Err(SerializeError(CanonicalError::UnsafeInteger {
                path: String::new(),
                value: value.to_string(),
            })),
        }
    }

    fn serialize_f32(self, value: f32) -> Result<Node, SerializeError> {
        Ok(number_node(widen_f32(value))?)
    }

    fn serialize_f64(self, value: f64) -> Result<Node, SerializeError> {
        Ok(number_node(value)?)
    }

    fn serialize_char(self, value: char) -> Result<Node, SerializeError> {
        Ok(Node::String(value.to_string()))
    }

    fn serialize_str(self, value: &str) -> Result<Node, SerializeError> {
        Ok(Node::String(value.to_owned()))
    }

    fn serialize_bytes(self, value: &[u8]) -> Result<Node, SerializeError> {
        enter(self.depth)?;
        Ok(Node::Array(
            value
                .iter()
                .map(|byte| Node::Number(f64::from(*byte)))
                .collect(),
        ))
    }

    fn serialize_none(self) -> Result<Node, SerializeError> {
        Ok(Node::Null)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Node, SerializeError> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<Node, SerializeError> {
        Ok(Node::Null)
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<Node, SerializeError> {
        Ok(Node::Null)
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Node, SerializeError> {
        Ok(Node::String(variant.to_owned()))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Node, SerializeError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Node, SerializeError> {
        let depth = enter(self.depth)?;
        let inner = value
            .serialize(NodeSerializer { depth })
            .map_err(|error| error.nested_under(variant))?;
        Ok(object_node(vec![(variant.to_owned(), inner)])?)
    }

    fn serialize_seq(self, length: Option<usize>) -> Result<ArrayBuilder, SerializeError> {
        Ok(ArrayBuilder {
            depth: enter(self.depth)?,
            items: Vec::with_capacity(length.unwrap_or(0).min(1024)),
        })
    }

    fn serialize_tuple(self, length: usize) -> Result<ArrayBuilder, SerializeError> {
        self.serialize_seq(Some(length))
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        length: usize,
    ) -> Result<ArrayBuilder, SerializeError> {
        self.serialize_seq(Some(length))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        length: usize,
    ) -> Result<TupleVariantBuilder, SerializeError> {
        let outer = enter(self.depth)?;
        let array = NodeSerializer { depth: outer }
            .serialize_seq(Some(length))
            .map_err(|error| error.nested_under(variant))?;
        Ok(TupleVariantBuilder { variant, array })
    }

    fn serialize_map(self, _length: Option<usize>) -> Result<ObjectBuilder, SerializeError> {
        Ok(ObjectBuilder {
            depth: enter(self.depth)?,
            members: Vec::new(),
            pending_key: None,
        })
    }

    fn serialize_struct(
        self,
        name: &'static str,
        length: usize,
    ) -> Result<StructBuilder, SerializeError> {
        if name == RAW_VALUE_TOKEN || name == ARBITRARY_NUMBER_TOKEN {
            return Ok(StructBuilder::Token {
                name,
                depth: self.depth,
                node: None,
            });
        }
        Ok(StructBuilder::Object(self.serialize_map(Some(length))?))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        length: usize,
    ) -> Result<StructVariantBuilder, SerializeError> {
        let outer = enter(self.depth)?;
        let object = NodeSerializer { depth: outer }
            .serialize_map(Some(length))
            .map_err(|error| error.nested_under(variant))?;
        Ok(StructVariantBuilder { variant, object })
    }
}

struct ArrayBuilder {
    /// The array's own level.
    depth: usize,
    items: Vec<Node>,
}

impl ArrayBuilder {
    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerializeError> {
        let index = self.items.len();
        let item = value
            .serialize(NodeSerializer { depth: self.depth })
            .map_err(|error| error.nested_under_index(index))?;
        self.items.push(item);
        Ok(())
    }
}

impl ser::SerializeSeq for ArrayBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.push(value)
    }

    fn end(self) -> Result<Node, SerializeError> {
        Ok(Node::Array(self.items))
    }
}

impl ser::SerializeTuple for ArrayBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.push(value)
    }

    fn end(self) -> Result<Node, SerializeError> {
        Ok(Node::Array(self.items))
    }
}

impl ser::SerializeTupleStruct for ArrayBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.push(value)
    }

    fn end(self) -> Result<Node, SerializeError> {
        Ok(Node::Array(self.items))
    }
}

struct TupleVariantBuilder {
    variant: &'static str,
    array: ArrayBuilder,
}

impl ser::SerializeTupleVariant for TupleVariantBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        let variant = self.variant;
        self.array
            .push(value)
            .map_err(|error| error.nested_under(variant))
    }

    fn end(self) -> Result<Node, SerializeError> {
        let array = Node::Array(self.array.items);
        Ok(object_node(vec![(self.variant.to_owned(), array)])?)
    }
}

struct ObjectBuilder {
    /// The object's own level.
    depth: usize,
    members: Vec<(String, Node)>,
    pending_key: Option<String>,
}

impl ObjectBuilder {
    fn push<T: Serialize + ?Sized>(
        &mut self,
        key: String,
        value: &T,
    ) -> Result<(), SerializeError> {
        let node = value
            .serialize(NodeSerializer { depth: self.depth })
            .map_err(|error| error.nested_under(&key))?;
        self.members.push((key, node));
        Ok(())
    }

    fn finish(self) -> Result<Node, SerializeError> {
        Ok(object_node(self.members)?)
    }
}

impl ser::SerializeMap for ObjectBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Self::Error> {
        self.pending_key = Some(key.serialize(KeySerializer)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        let key = self.pending_key.take().ok_or_else(|| {
            <SerializeError as ser::Error>::custom("a map value came without its key")
        })?;
        self.push(key, value)
    }

    fn end(self) -> Result<Node, SerializeError> {
        self.finish()
    }
}

enum StructBuilder {
    Object(ObjectBuilder),
    /// A `serde_json` private marker struct: one field holding JSON text.
    Token {
        name: &'static str,
        /// Arrays and objects enclosing the marker.
        depth: usize,
        node: Option<Node>,
    },
}

impl ser::SerializeStruct for StructBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        match self {
            StructBuilder::Object(object) => object.push(key.to_owned(), value),
            StructBuilder::Token { name, depth, node } => {
                let Node::String(text) = value.serialize(NodeSerializer { depth: *depth })? else {
                    return Err(unsupported("a raw JSON marker must hold JSON text"));
                };
                let parsed = parse_document(&text, *depth)?;
                if *name == ARBITRARY_NUMBER_TOKEN && !matches!(parsed, Node::Number(_)) {
                    return Err(unsupported("a JSON number marker must hold a number"));
                }
                *node = Some(parsed);
                Ok(())
            }
        }
    }

    fn end(self) -> Result<Node, SerializeError> {
        match self {
            StructBuilder::Object(object) => object.finish(),
            StructBuilder::Token { node, .. } => {
                node.ok_or_else(|| unsupported("a raw JSON marker must hold JSON text"))
            }
        }
    }
}

struct StructVariantBuilder {
    variant: &'static str,
    object: ObjectBuilder,
}

impl ser::SerializeStructVariant for StructVariantBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        let variant = self.variant;
        self.object
            .push(key.to_owned(), value)
            .map_err(|error| error.nested_under(variant))
    }

    fn end(self) -> Result<Node, SerializeError> {
        let variant = self.variant;
        let inner = self
            .object
            .finish()
            .map_err(|error| error.nested_under(variant))?;
        Ok(object_node(vec![(variant.to_owned(), inner)])?)
    }
}

/// Serializes a map key to its string: strings, chars, integers and unit variants only.
struct KeySerializer;

const KEY_DETAIL: &str = "an object key must be a string or an integer";

impl ser::Serializer for KeySerializer {
    type Ok = String;
    type Error = SerializeError;
    type SerializeSeq = ser::Impossible<String, SerializeError>;
    type SerializeTuple = ser::Impossible<String, SerializeError>;
    type SerializeTupleStruct = ser::Impossible<String, SerializeError>;
    type SerializeTupleVariant = ser::Impossible<String, SerializeError>;
    type SerializeMap = ser::Impossible<String, SerializeError>;
    type SerializeStruct = ser::Impossible<String, SerializeError>;
    type SerializeStructVariant = ser::Impossible<String, SerializeError>;

    fn serialize_bool(self, _value: bool) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_i8(self, value: i8) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_i16(self, value: i16) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_i32(self, value: i32) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_i64(self, value: i64) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_i128(self, value: i128) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_u8(self, value: u8) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_u16(self, value: u16) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_u32(self, value: u32) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_u64(self, value: u64) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_u128(self, value: u128) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_f32(self, _value: f32) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_f64(self, _value: f64) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_char(self, value: char) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_str(self, value: &str) -> Result<String, SerializeError> {
        Ok(value.to_owned())
    }

    fn serialize_bytes(self, _value: &[u8]) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_none(self) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_unit(self) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<String, SerializeError> {
        Ok(variant.to_owned())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<String, SerializeError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_seq(self, _length: Option<usize>) -> Result<Self::SerializeSeq, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_tuple(self, _length: usize) -> Result<Self::SerializeTuple, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _length: usize,
    ) -> Result<Self::SerializeTupleStruct, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _length: usize,
    ) -> Result<Self::SerializeTupleVariant, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_map(self, _length: Option<usize>) -> Result<Self::SerializeMap, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _length: usize,
    ) -> Result<Self::SerializeStruct, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _length: usize,
    ) -> Result<Self::SerializeStructVariant, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }
}

/// Serialized as the JSON value it holds (not as a string), so records that carry canonical
/// arguments show them as JSON.
impl Serialize for CanonicalJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}
