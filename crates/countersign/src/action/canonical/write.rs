//! The value tree every canonical form passes through, and its writer: RFC 8785 key order
//! (UTF-16 code units), ECMAScript number text, and the minimal string escapes.

use super::*;

/// A JSON value that is already known to have a canonical form.
#[derive(Debug)]
// INVARIANT (canonical-node): every `Number` is finite and not negative zero; every `Object`
// has unique keys sorted by UTF-16 code units. `number_node`, `integer_node` and `object_node`
// are the only constructors of those variants.
pub(super) enum Node {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

pub(super) fn number_node(value: f64) -> Result<Node, CanonicalError> {
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

pub(super) fn integer_node(value: i128) -> Result<Node, CanonicalError> {
    if value.unsigned_abs() > u128::from(MAX_SAFE_INTEGER) {
        // INVARIANT (one integer rule): an integer outside ±(2^53 − 1) is refused, whether it
        // comes as a Rust integer or as an integer literal in JSON text (`parse_canonical`,
        // `json::read`), so the typed and text paths (and with them the Rust, Python and Node
        // bindings) refuse exactly the same integers, and every integer that is accepted reaches
        // an executor as an integer. Shared vectors: `tests/vectors/numbers.json`.
        return Err(CanonicalError::UnsafeInteger {
            path: String::new(),
            value: value.to_string(),
        });
    }
    // Exact: below 2^53 in magnitude.
    Ok(Node::Number(value as f64))
}

/// Whether `digits` (`-?digits`) is exactly the canonical spelling of the double nearest it.
pub(super) fn is_canonical_integer_spelling(digits: &str) -> bool {
    let Ok(value) = digits.parse::<f64>() else {
        return false;
    };
    let mut canonical = String::new();
    write_number(value, &mut canonical);
    canonical == digits
}

pub(super) fn utf16_order(left: &str, right: &str) -> Ordering {
    left.encode_utf16().cmp(right.encode_utf16())
}

pub(super) fn object_node(mut members: Vec<(String, Node)>) -> Result<Node, CanonicalError> {
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

pub(super) fn render(node: &Node) -> String {
    let mut out = String::new();
    write_node(node, &mut out);
    out
}

pub(super) fn write_node(node: &Node, out: &mut String) {
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
pub(super) fn write_string_body(text: &str, out: &mut String) {
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
pub(super) fn write_number(value: f64, out: &mut String) {
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
pub(super) fn shortest_digits(value: f64) -> (String, i32) {
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

pub(super) fn node_to_value(node: Node) -> serde_json::Value {
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
