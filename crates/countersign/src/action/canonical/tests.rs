use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::Serialize;
use serde::ser::{SerializeMap, SerializeStruct};
use serde_json::{Value, json};

use super::{
    CanonicalError, CanonicalJson, MAX_DEPTH, parse_canonical, sha256_prefixed, to_canonical,
};

// ---------------------------------------------------------------------------------------------
// Helpers

/// The one table-test helper: canonicalize JSON text and compare with the expected outcome.
fn check(input: &str, expected: Result<&str, CanonicalError>) {
    let actual = parse_canonical(input).map(CanonicalJson::into_string);
    assert_eq!(actual, expected.map(str::to_owned), "input: {input:?}");
}

fn not_finite(path: &str, value: &str) -> CanonicalError {
    CanonicalError::NotFinite {
        path: path.to_owned(),
        value: value.to_owned(),
    }
}

fn negative_zero(path: &str) -> CanonicalError {
    CanonicalError::NegativeZero {
        path: path.to_owned(),
    }
}

fn unsafe_integer(path: &str, value: &str) -> CanonicalError {
    CanonicalError::UnsafeInteger {
        path: path.to_owned(),
        value: value.to_owned(),
    }
}

fn duplicate_key(path: &str, key: &str) -> CanonicalError {
    CanonicalError::DuplicateKey {
        path: path.to_owned(),
        key: key.to_owned(),
    }
}

fn lone_surrogate(path: &str, line: usize, column: usize) -> CanonicalError {
    CanonicalError::LoneSurrogate {
        path: path.to_owned(),
        line,
        column,
    }
}

fn invalid(line: usize, column: usize, detail: &'static str) -> CanonicalError {
    CanonicalError::InvalidJson {
        line,
        column,
        detail,
    }
}

fn too_deep(path: &str) -> CanonicalError {
    CanonicalError::TooDeep {
        path: path.to_owned(),
        limit: MAX_DEPTH,
    }
}

fn canonical_text<T: Serialize + ?Sized>(value: &T) -> String {
    to_canonical(value)
        .expect("value has a canonical form")
        .into_string()
}

/// Strips one trailing line break an editor may add to a vector file.
fn vector_text(text: &str) -> &str {
    text.strip_suffix('\n').unwrap_or(text)
}

// ---------------------------------------------------------------------------------------------
// RFC 8785 published vectors

const RFC_NUMBERS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/canonical-vectors/rfc8785-numbers.txt"
));
const RFC_SAMPLE_INPUT: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/canonical-vectors/rfc8785-sample-input.json"
));
const RFC_SAMPLE_OUTPUT: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/canonical-vectors/rfc8785-sample-output.json"
));
const RFC_SORTING_INPUT: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/canonical-vectors/rfc8785-sorting-input.json"
));
const RFC_SORTING_ORDER: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/canonical-vectors/rfc8785-sorting-order.txt"
));

#[test]
fn formats_every_rfc8785_appendix_b_number() {
    let mut rows = 0;
    for line in RFC_NUMBERS.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let columns: Vec<&str> = line.split('|').map(str::trim).collect();
        let [hex_bits, expected, _comment] = columns[..] else {
            panic!("malformed vector row: {line:?}");
        };
        rows += 1;
        let bits = u64::from_str_radix(hex_bits, 16).expect("hex bits");
        let value = f64::from_bits(bits);
        let actual = to_canonical(&value).map(CanonicalJson::into_string);
        if expected.is_empty() {
            // RFC: values out of range are not permitted in JSON.
            assert_eq!(
                actual,
                Err(not_finite("", &value.to_string())),
                "{hex_bits}"
            );
        } else if bits == 0x8000_0000_0000_0000 {
            // Deviation from the table, per RFC 8785 erratum 7920.
            assert_eq!(actual, Err(negative_zero("")), "{hex_bits}");
        } else {
            assert_eq!(actual.as_deref(), Ok(expected), "{hex_bits}");
            // The canonical text is a fixed point of the kernel's re-reading, and reads back
            // bit-exact. From outside, a row spelled as an integer past ±(2^53−1)
            // (`9007199254740992`, `295147905179352830000`) is refused (issue #19).
            assert_eq!(
                super::reparse_canonical(expected).map(CanonicalJson::into_string),
                Ok(expected.to_owned())
            );
            if !expected.contains(['.', 'e']) && value.abs() > 9_007_199_254_740_991.0 {
                check(expected, Err(unsafe_integer("", expected)));
            } else {
                check(expected, Ok(expected));
            }
            assert_eq!(
                expected.parse::<f64>().map(f64::to_bits),
                Ok(bits),
                "{hex_bits}"
            );
        }
    }
    assert_eq!(rows, 26, "RFC 8785 Table 1 has 26 rows");
}

#[test]
fn canonicalizes_rfc8785_sample_to_published_output() {
    let expected = vector_text(RFC_SAMPLE_OUTPUT);
    check(RFC_SAMPLE_INPUT, Ok(expected));
}

#[test]
fn sorts_rfc8785_sorting_sample_by_utf16_code_units() {
    let canonical = parse_canonical(RFC_SORTING_INPUT).expect("sample canonicalizes");
    let Value::Object(_) = canonical.to_value() else {
        panic!("sample is an object");
    };
    // Read the member values back in text order: serde_json's map would re-sort them.
    let text = canonical.as_str();
    let mut positions: Vec<(usize, &str)> = RFC_SORTING_ORDER
        .lines()
        .map(|name| {
            (
                text.find(&format!("\"{name}\"")).expect("value present"),
                name,
            )
        })
        .collect();
    positions.sort();
    let order: Vec<&str> = positions.into_iter().map(|(_, name)| name).collect();
    let expected: Vec<&str> = RFC_SORTING_ORDER.lines().collect();
    assert_eq!(order, expected);
    assert_eq!(
        text,
        "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
         \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
         \"\u{1F600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}"
    );
}

// ---------------------------------------------------------------------------------------------
// Case B27: ordering and number format

#[test]
fn sorts_astral_key_before_fullwidth_key() {
    let expected = "{\"\u{1F600}\":1,\"\u{FF21}\":2}";
    check("{\"\u{1F600}\":1, \"\u{FF21}\":2}", Ok(expected));
    check("{\"\u{FF21}\":2, \"\u{1F600}\":1}", Ok(expected));
    check(r#"{"\uFF21":2,"\ud83d\ude00":1}"#, Ok(expected));
    let mut map = BTreeMap::new(); // BTreeMap orders by code point: U+FF21 first.
    map.insert("\u{FF21}", 2);
    map.insert("\u{1F600}", 1);
    assert_eq!(canonical_text(&map), expected);
}

#[test]
fn formats_numbers_like_ecmascript() {
    let expected = r#"{"a":1e-7,"b":1e+21,"c":100000000000000000000,"d":0.1}"#;
    check(r#"{"a":1e-7,"b":1e21,"c":1e20,"d":0.1}"#, Ok(expected));

    #[derive(Serialize)]
    struct Numbers {
        a: f64,
        b: f64,
        c: f64,
        d: f64,
    }
    let typed = Numbers {
        a: 1e-7,
        b: 1e21,
        c: 1e20,
        d: 0.1,
    };
    assert_eq!(canonical_text(&typed), expected);
}

#[test]
fn formats_number_table() {
    check("0", Ok("0"));
    check("0.0", Ok("0"));
    check("0e5", Ok("0"));
    check("-1", Ok("-1"));
    check("4.50", Ok("4.5"));
    check("2e-3", Ok("0.002"));
    check("1E30", Ok("1e+30"));
    check("1e+30", Ok("1e+30"));
    check("0.000001", Ok("0.000001"));
    check("0.0000001", Ok("1e-7"));
    check(
        "123456789012345680000",
        Err(unsafe_integer("", "123456789012345680000")),
    );
    check("1.2345678901234568e20", Ok("123456789012345680000"));
    check("1.5e300", Ok("1.5e+300"));
    check("-1.5e-300", Ok("-1.5e-300"));
    check("12.5e-1", Ok("1.25"));
    check("1e-400", Ok("0"));
    check("9007199254740993.0", Ok("9007199254740992"));
    check("0.1e1", Ok("1"));
}

// ---------------------------------------------------------------------------------------------
// Case B28: one hash per value, refusals for what JCS cannot carry

#[test]
fn hashes_spellings_of_one_million_equal() {
    let hashes: Vec<String> = [r#"{"n":1e6}"#, r#"{"n":1000000}"#, r#"{"n":1000000.0}"#]
        .iter()
        .map(|text| parse_canonical(text).expect("canonical").sha256())
        .collect();
    assert_eq!(hashes[0], hashes[1]);
    assert_eq!(hashes[1], hashes[2]);
    assert_eq!(hashes[0], sha256_prefixed(br#"{"n":1000000}"#));
    // The same choice makes 1, 1.0 and 1e0 one action.
    check("[1,1.0,1e0,10e-1]", Ok("[1,1,1,1]"));
}

#[test]
fn refuses_negative_zero_literal() {
    for literal in ["-0", "-0.0", "-0e0", "-0E+3", "-0.000", "-1e-400"] {
        check(&format!(r#"{{"n":{literal}}}"#), Err(negative_zero("/n")));
    }
    check(r#"{"n":0}"#, Ok(r#"{"n":0}"#));
    assert_ne!(
        parse_canonical(r#"{"n":-0.0}"#),
        parse_canonical(r#"{"n":0}"#)
    );
}

#[test]
fn refuses_negative_zero_from_typed_struct() {
    #[derive(Serialize)]
    struct ToolArgs {
        n: f64,
        m: f32,
    }
    assert_eq!(
        to_canonical(&ToolArgs { n: -0.0, m: 0.0 }),
        Err(negative_zero("/n"))
    );
    assert_eq!(
        to_canonical(&ToolArgs { n: 0.0, m: -0.0 }),
        Err(negative_zero("/m"))
    );
    assert_eq!(
        canonical_text(&ToolArgs { n: 0.0, m: 0.0 }),
        r#"{"m":0,"n":0}"#
    );
}

#[test]
fn refuses_nan_and_infinity_literals() {
    check(r#"{"n":NaN}"#, Err(not_finite("/n", "NaN")));
    check(r#"{"n":Infinity}"#, Err(not_finite("/n", "Infinity")));
    check(r#"{"n":-Infinity}"#, Err(not_finite("/n", "-Infinity")));
    check("[1e400]", Err(not_finite("/0", "1e400")));
    check("[-1e400]", Err(not_finite("/0", "-1e400")));
}

#[test]
fn refuses_nan_and_infinity_from_typed_struct() {
    #[derive(Serialize)]
    struct ToolArgs {
        n: f64,
    }
    #[derive(Serialize)]
    struct SingleArgs {
        n: f32,
    }
    assert_eq!(
        to_canonical(&ToolArgs { n: f64::NAN }),
        Err(not_finite("/n", "NaN"))
    );
    assert_eq!(
        to_canonical(&ToolArgs { n: f64::INFINITY }),
        Err(not_finite("/n", "inf"))
    );
    assert_eq!(
        to_canonical(&ToolArgs {
            n: f64::NEG_INFINITY
        }),
        Err(not_finite("/n", "-inf"))
    );
    assert_eq!(
        to_canonical(&SingleArgs { n: f32::NAN }),
        Err(not_finite("/n", "NaN"))
    );
    // serde_json::to_value would have made this `{"n":null}` and hashed it.
    assert_eq!(
        serde_json::to_value(ToolArgs { n: f64::NAN }).ok(),
        Some(json!({"n": null}))
    );
}

#[test]
fn hashes_raw_and_escaped_strings_equal() {
    let raw = parse_canonical("{\"s\":\"世界\"}").expect("canonical");
    let escaped = parse_canonical(r#"{"s":"\u4e16\u754c"}"#).expect("canonical");
    assert_eq!(raw.sha256(), escaped.sha256());
    assert_eq!(raw.as_str(), "{\"s\":\"世界\"}");
    assert_eq!(canonical_text(&json!({"s": "世界"})), raw.as_str());
}

// ---------------------------------------------------------------------------------------------
// Strings

#[test]
fn escapes_only_quote_backslash_and_control_characters() {
    check(r#""\u0000""#, Ok(r#""\u0000""#));
    check(r#""\u001F""#, Ok(r#""\u001f""#));
    check(r#""\u000b""#, Ok(r#""\u000b""#));
    check(r#""\b\t\n\f\r""#, Ok(r#""\b\t\n\f\r""#));
    check(r#""\u0008\u0009\u000A\u000C\u000D""#, Ok(r#""\b\t\n\f\r""#));
    check(r#""\"\\""#, Ok(r#""\"\\""#));
    check(r#""\/""#, Ok(r#""/""#));
    check(r#""\u007f""#, Ok("\"\u{7f}\""));
    check(r#""\u00e9\u2028\u2029""#, Ok("\"é\u{2028}\u{2029}\""));
    check(r#""<\u0026>""#, Ok(r#""<&>""#));
    assert_eq!(canonical_text("\u{1}\u{1f}"), r#""\u0001\u001f""#);
}

#[test]
fn keeps_strings_byte_exact_without_normalization() {
    let composed = parse_canonical("\"\u{e9}\"").expect("canonical");
    let decomposed = parse_canonical("\"e\u{301}\"").expect("canonical");
    assert_ne!(composed.sha256(), decomposed.sha256());
    assert_eq!(decomposed.as_str(), "\"e\u{301}\"");
}

#[test]
fn decodes_escaped_surrogate_pair() {
    check(r#""\ud83d\ude00""#, Ok("\"\u{1F600}\""));
    check(r#""\uD83D\uDE00""#, Ok("\"\u{1F600}\""));
}

#[test]
fn refuses_lone_surrogate_escape() {
    check(r#"{"s":"\ud800"}"#, Err(lone_surrogate("/s", 1, 7)));
    check(r#"{"s":"\udc00"}"#, Err(lone_surrogate("/s", 1, 7)));
    check(r#"{"s":"ab\ud83d\u0041"}"#, Err(lone_surrogate("/s", 1, 9)));
    check(r#"{"s":"\ud83dx"}"#, Err(lone_surrogate("/s", 1, 7)));
    check("[\n\"\\ude00\"]", Err(lone_surrogate("/0", 2, 2)));
    // A lone surrogate in a key belongs to the object holding it.
    check(r#"{"a":{"\ud800":1}}"#, Err(lone_surrogate("/a", 1, 8)));
}

// ---------------------------------------------------------------------------------------------
// Integers

#[test]
fn refuses_unsafe_integer_literals() {
    check(
        r#"{"id":9007199254740993}"#,
        Err(unsafe_integer("/id", "9007199254740993")),
    );
    check(
        r#"{"id":-9007199254740993}"#,
        Err(unsafe_integer("/id", "-9007199254740993")),
    );
    check(
        "[1000000000000000000000]",
        Err(unsafe_integer("/0", "1000000000000000000000")),
    );
    check(
        "[12345678901234567890]",
        Err(unsafe_integer("/0", "12345678901234567890")),
    );
    let long = "1".repeat(100);
    let cut = format!("{}…", "1".repeat(64));
    check(&format!("[{long}]"), Err(unsafe_integer("/0", &cut)));
}

#[test]
fn accepts_safe_integer_boundaries() {
    check(
        "[9007199254740991,-9007199254740991]",
        Ok("[9007199254740991,-9007199254740991]"),
    );
    assert_eq!(
        canonical_text(&[9_007_199_254_740_991_i64, -9_007_199_254_740_991]),
        "[9007199254740991,-9007199254740991]"
    );
    assert_eq!(
        canonical_text(&9_007_199_254_740_991_u64),
        "9007199254740991"
    );
}

#[test]
fn refuses_large_integer_literals_whatever_their_spelling() {
    // Issue #19: one rule, the issue's, even for a literal that is already the canonical
    // spelling of its double; `reparse_canonical` (the kernel's own output) still keeps it.
    for literal in [
        "100000000000000000000",
        "9007199254740992",
        "-9007199254740992",
        "-295147905179352830000",
    ] {
        check(literal, Err(unsafe_integer("", literal)));
        assert_eq!(
            super::reparse_canonical(literal).map(|json| json.into_string()),
            Ok(literal.to_owned())
        );
    }
}

#[test]
fn accepts_floats_with_fraction_or_exponent_beyond_safe_range() {
    check("1e21", Ok("1e+21"));
    check("1.5e300", Ok("1.5e+300"));
    check("9007199254740993e0", Ok("9007199254740992"));
}

#[test]
fn refuses_unsafe_integer_values() {
    assert_eq!(
        to_canonical(&9_007_199_254_740_993_u64),
        Err(unsafe_integer("", "9007199254740993"))
    );
    assert_eq!(
        to_canonical(&1_152_921_504_606_846_976_u64),
        Err(unsafe_integer("", "1152921504606846976"))
    );
    assert_eq!(
        to_canonical(&json!({"id": u64::MAX})),
        Err(unsafe_integer("/id", "18446744073709551615"))
    );
    assert_eq!(
        to_canonical(&[i64::MIN]),
        Err(unsafe_integer("/0", "-9223372036854775808"))
    );
    assert_eq!(
        to_canonical(&u128::MAX),
        Err(unsafe_integer("", &u128::MAX.to_string()))
    );
    assert_eq!(
        to_canonical(&i128::MIN),
        Err(unsafe_integer("", &i128::MIN.to_string()))
    );
    assert_eq!(canonical_text(&-5_i128), "-5");
    assert_eq!(canonical_text(&5_u128), "5");
}

#[test]
fn refuses_large_integer_values_as_their_literals() {
    // One integer rule for values and text (issue #19): beyond ±(2^53 − 1), an integer is
    // refused, both signs, the first integer past each boundary included.
    for (value, literal) in [
        (9_007_199_254_740_992_i128, "9007199254740992"),
        (-9_007_199_254_740_992_i128, "-9007199254740992"),
        (100_000_000_000_000_000_000_i128, "100000000000000000000"),
        (-295_147_905_179_352_830_000_i128, "-295147905179352830000"),
    ] {
        assert_eq!(to_canonical(&value), Err(unsafe_integer("", literal)));
        check(literal, Err(unsafe_integer("", literal)));
    }
    assert_eq!(
        to_canonical(&9_007_199_254_740_992_u64),
        Err(unsafe_integer("", "9007199254740992"))
    );
    // The same magnitudes written as doubles are the sender's choice, and accepted.
    assert_eq!(
        canonical_text(&9_007_199_254_740_992_f64),
        "9007199254740992"
    );
    assert_eq!(canonical_text(&1e20_f64), "100000000000000000000");
}

#[test]
fn widens_f32_through_its_shortest_decimal() {
    assert_eq!(canonical_text(&0.1_f32), "0.1");
    let through_text = serde_json::to_string(&0.1_f32).expect("serializes");
    check(&through_text, Ok("0.1"));
    assert_eq!(canonical_text(&16_777_216_f32), "16777216");
}

// ---------------------------------------------------------------------------------------------
// Syntax

#[test]
fn refuses_invalid_json_with_line_and_column() {
    check(
        "",
        Err(invalid(
            1,
            1,
            "expected a JSON value, found the end of the text",
        )),
    );
    check(
        "   ",
        Err(invalid(
            1,
            4,
            "expected a JSON value, found the end of the text",
        )),
    );
    check(
        "{\n  \"a\": 1,\n}",
        Err(invalid(3, 1, "expected a string key")),
    );
    check("[1,]", Err(invalid(1, 4, "expected a JSON value")));
    check(
        "[1 2]",
        Err(invalid(1, 4, "expected `,` or `]` after an array element")),
    );
    check(
        r#"{"a" 1}"#,
        Err(invalid(1, 6, "expected `:` after an object key")),
    );
    check(
        r#"{"a":1 "b":2}"#,
        Err(invalid(1, 8, "expected `,` or `}` after an object member")),
    );
    check("{1:2}", Err(invalid(1, 2, "expected a string key")));
    check(
        "[1] x",
        Err(invalid(1, 5, "unexpected text after the JSON value")),
    );
    check(
        "1 2",
        Err(invalid(1, 3, "unexpected text after the JSON value")),
    );
    check(
        "01",
        Err(invalid(1, 2, "a number must not have leading zeros")),
    );
    check(
        "-01",
        Err(invalid(1, 3, "a number must not have leading zeros")),
    );
    check(
        "1.",
        Err(invalid(1, 3, "expected a digit after the decimal point")),
    );
    check(
        "1.e5",
        Err(invalid(1, 3, "expected a digit after the decimal point")),
    );
    check(".5", Err(invalid(1, 1, "expected a JSON value")));
    check("+1", Err(invalid(1, 1, "expected a JSON value")));
    check("-", Err(invalid(1, 2, "expected a digit")));
    check("1e", Err(invalid(1, 3, "expected a digit in the exponent")));
    check(
        "1e+",
        Err(invalid(1, 4, "expected a digit in the exponent")),
    );
    check("// c\n1", Err(invalid(1, 1, "expected a JSON value")));
    check(
        "1 /* c */",
        Err(invalid(1, 3, "unexpected text after the JSON value")),
    );
    check("'a'", Err(invalid(1, 1, "expected a JSON value")));
    check("tru", Err(invalid(1, 1, "expected a JSON value")));
    check("nan", Err(invalid(1, 1, "expected a JSON value")));
    check("NaNa", Err(not_finite("", "NaN")));
    check("Inf", Err(invalid(1, 1, "expected a JSON value")));
    check("\u{feff}1", Err(invalid(1, 1, "expected a JSON value")));
    check("\"abc", Err(invalid(1, 5, "unterminated string")));
    check("\"ab\\", Err(invalid(1, 5, "unterminated string")));
    check(
        "[\"é\\x\"]",
        Err(invalid(1, 4, "unknown escape in a string")),
    );
    check(
        r#""\u12g4""#,
        Err(invalid(1, 6, "expected four hex digits after `\\u`")),
    );
    check(
        "[\"a\nb\"]",
        Err(invalid(
            1,
            4,
            "control character in a string: write it as a `\\u` escape",
        )),
    );
    check(
        "[\"\t\"]",
        Err(invalid(
            1,
            3,
            "control character in a string: write it as a `\\u` escape",
        )),
    );
    check("\u{a0}1", Err(invalid(1, 1, "expected a JSON value")));
    check(
        "[1,\r\n 2,\r\n x]",
        Err(invalid(3, 2, "expected a JSON value")),
    );
}

#[test]
fn accepts_whitespace_and_scalars() {
    check(
        " \t\n\r{ \"b\" : [ 1 , 2 ] , \"a\" : { } } \n",
        Ok(r#"{"a":{},"b":[1,2]}"#),
    );
    check("[]", Ok("[]"));
    check("\"\"", Ok("\"\""));
    check("null", Ok("null"));
    check("true", Ok("true"));
    check("false", Ok("false"));
    check("[true,false,null]", Ok("[true,false,null]"));
}

#[test]
fn refuses_duplicate_keys() {
    check(r#"{"a":1,"a":2}"#, Err(duplicate_key("", "a")));
    check(r#"{"a":1,"a":1}"#, Err(duplicate_key("", "a")));
    check(
        r#"{"x":[{"a":1,"b":2,"a":1}]}"#,
        Err(duplicate_key("/x/0", "a")),
    );
    check(r#"{"a":1,"\u0061":2}"#, Err(duplicate_key("", "a")));
}

#[test]
fn refuses_duplicate_keys_from_serializer() {
    struct TwoSameKeys;
    impl Serialize for TwoSameKeys {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let mut map = serializer.serialize_map(Some(2))?;
            map.serialize_entry("k", &1)?;
            map.serialize_entry("k", &2)?;
            map.end()
        }
    }
    let mut outer = BTreeMap::new();
    outer.insert("m", TwoSameKeys);
    assert_eq!(to_canonical(&outer), Err(duplicate_key("/m", "k")));
}

// ---------------------------------------------------------------------------------------------
// Depth

fn nested_arrays(levels: usize) -> String {
    format!("{}{}", "[".repeat(levels), "]".repeat(levels))
}

fn nested_value(levels: usize) -> Value {
    let mut value = Value::Array(Vec::new());
    for _ in 1..levels {
        value = Value::Array(vec![value]);
    }
    value
}

#[test]
fn accepts_nesting_up_to_the_limit() {
    let text = nested_arrays(MAX_DEPTH);
    check(&text, Ok(&text));
    let value = nested_value(MAX_DEPTH);
    assert_eq!(canonical_text(&value), text);
    // to_value keeps every level, past serde_json's own parser limit.
    let canonical = parse_canonical(&text).expect("canonical");
    assert_eq!(to_canonical(&canonical.to_value()), Ok(canonical));
}

#[test]
fn refuses_nesting_past_the_limit() {
    let path = "/0".repeat(MAX_DEPTH);
    check(&nested_arrays(MAX_DEPTH + 1), Err(too_deep(&path)));
    assert_eq!(
        to_canonical(&nested_value(MAX_DEPTH + 1)),
        Err(too_deep(&path))
    );
    // Far past the limit: an error, not a stack overflow.
    check(&"[".repeat(1_000_000), Err(too_deep(&path)));
    let objects = format!("{}1{}", r#"{"k":"#.repeat(200), "}".repeat(200));
    check(&objects, Err(too_deep(&"/k".repeat(MAX_DEPTH))));
}

// ---------------------------------------------------------------------------------------------
// Serde data model

#[test]
fn stringifies_integer_map_keys_and_sorts_them_as_strings() {
    let mut map = BTreeMap::new();
    map.insert(10_u32, "ten");
    map.insert(2, "two");
    map.insert(1, "one");
    assert_eq!(canonical_text(&map), r#"{"1":"one","10":"ten","2":"two"}"#);
    let mut wide = BTreeMap::new();
    wide.insert(u64::MAX, true); // a key is a string: no precision limit
    assert_eq!(canonical_text(&wide), r#"{"18446744073709551615":true}"#);
    let mut chars = BTreeMap::new();
    chars.insert('z', 1);
    assert_eq!(canonical_text(&chars), r#"{"z":1}"#);
}

#[test]
fn refuses_non_string_non_integer_map_keys() {
    let mut flags = BTreeMap::new();
    flags.insert(true, 1);
    let mut outer = BTreeMap::new();
    outer.insert("m", flags);
    assert_eq!(
        to_canonical(&outer),
        Err(CanonicalError::UnsupportedValue {
            path: "/m".to_owned(),
            detail: "an object key must be a string or an integer",
        })
    );
    let mut tuples = BTreeMap::new();
    tuples.insert((1, 2), 3);
    assert_eq!(
        to_canonical(&tuples).map_err(|error| error.reason()),
        Err("unsupported_value")
    );
}

#[test]
fn serializes_enums_options_and_bytes_like_serde_json() {
    #[derive(Serialize)]
    enum Effect {
        Noop,
        Pay(u32),
        Move(i8, i8),
        Send { to: String, cc: Option<String> },
    }
    #[derive(Serialize)]
    struct Unit;
    #[derive(Serialize)]
    struct Wrapper(u8);
    #[derive(Serialize)]
    struct Plan {
        effects: Vec<Effect>,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        unit: Unit,
        wrapped: Wrapper,
        nothing: (),
        bytes: serde_bytes_like::Bytes,
    }
    mod serde_bytes_like {
        pub struct Bytes(pub Vec<u8>);
        impl serde::Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_bytes(&self.0)
            }
        }
    }
    let plan = Plan {
        effects: vec![
            Effect::Noop,
            Effect::Pay(5),
            Effect::Move(-1, 2),
            Effect::Send {
                to: "b".to_owned(),
                cc: None,
            },
        ],
        note: None,
        unit: Unit,
        wrapped: Wrapper(7),
        nothing: (),
        bytes: serde_bytes_like::Bytes(vec![0, 255]),
    };
    let canonical = canonical_text(&plan);
    assert_eq!(
        canonical,
        r#"{"bytes":[0,255],"effects":["Noop",{"Pay":5},{"Move":[-1,2]},{"Send":{"cc":null,"to":"b"}}],"nothing":null,"unit":null,"wrapped":7}"#
    );
    let through_text = serde_json::to_string(&plan).expect("serializes");
    check(&through_text, Ok(&canonical));
}

#[test]
fn reports_json_pointer_paths_with_escapes() {
    let value = json!({"a/b": {"m~n": [0, {"x": -0.0}]}});
    assert_eq!(to_canonical(&value), Err(negative_zero("/a~1b/m~0n/1/x")));
    check(
        r#"{"a/b":{"m~n":[0,{"x":-0.0}]}}"#,
        Err(negative_zero("/a~1b/m~0n/1/x")),
    );
    #[derive(Serialize)]
    enum Wrapped {
        Tuple(u8, f64),
        Record { value: f64 },
        Newtype(f64),
    }
    assert_eq!(
        to_canonical(&[Wrapped::Tuple(1, f64::NAN)]),
        Err(not_finite("/0/Tuple/1", "NaN"))
    );
    assert_eq!(
        to_canonical(&Wrapped::Record { value: -0.0 }),
        Err(negative_zero("/Record/value"))
    );
    assert_eq!(
        to_canonical(&Wrapped::Newtype(f64::INFINITY)),
        Err(not_finite("/Newtype", "inf"))
    );
}

#[test]
fn reports_errors_raised_by_a_values_own_serialize_code() {
    struct Clock;
    impl Serialize for Clock {
        fn serialize<S: serde::Serializer>(&self, _serializer: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("clock is out of range"))
        }
    }
    let mut map = BTreeMap::new();
    map.insert("when", Clock);
    assert_eq!(
        to_canonical(&map),
        Err(CanonicalError::SerializeFailed {
            path: "/when".to_owned(),
            message: "clock is out of range".to_owned(),
        })
    );
}

/// Serializes the way `serde_json` serializes `RawValue` and (under `arbitrary_precision`)
/// `Number`: a private marker struct with one field holding JSON text.
struct MarkerLike {
    token: &'static str,
    text: &'static str,
}

impl Serialize for MarkerLike {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut marker = serializer.serialize_struct(self.token, 1)?;
        marker.serialize_field(self.token, self.text)?;
        marker.end()
    }
}

#[test]
fn parses_serde_json_raw_value_markers_strictly() {
    let raw = |text| MarkerLike {
        token: super::RAW_VALUE_TOKEN,
        text,
    };
    let number = |text| MarkerLike {
        token: super::ARBITRARY_NUMBER_TOKEN,
        text,
    };
    assert_eq!(
        canonical_text(&[raw(r#"{ "b": 1e0, "a": "\u0041" }"#)]),
        r#"[{"a":"A","b":1}]"#
    );
    assert_eq!(
        to_canonical(&[raw(r#"{"a":1,"a":2}"#)]),
        Err(duplicate_key("/0", "a"))
    );
    assert_eq!(
        to_canonical(&[raw(r#"{"n":-0}"#)]),
        Err(negative_zero("/0/n"))
    );
    assert_eq!(canonical_text(&number("1.50")), "1.5");
    assert_eq!(
        to_canonical(&[number("9007199254740993")]),
        Err(unsafe_integer("/0", "9007199254740993"))
    );
    assert_eq!(
        to_canonical(&number("\"not a number\"")).map_err(|error| error.reason()),
        Err("unsupported_value")
    );
}

// ---------------------------------------------------------------------------------------------
// Public API and messages

#[test]
fn hashes_canonical_bytes_with_sha256_prefix() {
    assert_eq!(
        sha256_prefixed(b""),
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        sha256_prefixed(b"abc"),
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let canonical = parse_canonical(r#"{ "b": 1, "a": 2 }"#).expect("canonical");
    assert_eq!(canonical.sha256(), sha256_prefixed(br#"{"a":2,"b":1}"#));
    assert_eq!(canonical.to_string(), r#"{"a":2,"b":1}"#);
    assert_eq!(canonical.as_str(), r#"{"a":2,"b":1}"#);
    assert_eq!(canonical.clone().into_string(), r#"{"a":2,"b":1}"#);
    assert_eq!(canonical.to_value(), json!({"a": 2, "b": 1}));
}

#[test]
fn to_value_reads_large_and_fractional_numbers_as_floats() {
    let canonical = parse_canonical("[9007199254740992.0,1e+300,0.5,-3]").expect("canonical");
    let value = canonical.to_value();
    assert_eq!(value, json!([9007199254740992.0_f64, 1e300, 0.5, -3]));
    assert_eq!(to_canonical(&value), Ok(canonical));
}

#[test]
fn gives_stable_reason_codes() {
    let cases = [
        (not_finite("", "NaN"), "not_finite"),
        (negative_zero(""), "negative_zero"),
        (unsafe_integer("", "1"), "unsafe_integer"),
        (duplicate_key("", "a"), "duplicate_key"),
        (lone_surrogate("", 1, 1), "lone_surrogate"),
        (too_deep(""), "too_deep"),
        (invalid(1, 1, "x"), "invalid_json"),
        (
            CanonicalError::UnsupportedValue {
                path: String::new(),
                detail: "x",
            },
            "unsupported_value",
        ),
        (
            CanonicalError::SerializeFailed {
                path: String::new(),
                message: "x".to_owned(),
            },
            "serialize_failed",
        ),
    ];
    for (error, reason) in cases {
        assert_eq!(error.reason(), reason);
    }
}

#[test]
fn writes_messages_in_house_style() {
    let messages = [
        (
            unsafe_integer("/id", "9007199254740993"),
            "integer `9007199254740993` at `/id` is outside ±(2^53−1) and would lose precision: send it as a string",
        ),
        (
            negative_zero("/n"),
            "number at `/n` is negative zero, which canonical JSON refuses (RFC 8785 erratum 7920): send `0`",
        ),
        (
            not_finite("", "NaN"),
            "number `NaN` at the top level is not finite and JSON cannot carry it: send it as a string or leave it out",
        ),
        (
            duplicate_key("/x", "line\nbreak"),
            "key `line\\nbreak` appears more than once in the object at `/x`: send each key once",
        ),
        (
            lone_surrogate("/s", 2, 5),
            "`\\u` escape at line 2, column 5 leaves a lone surrogate in the string at `/s`: send a valid surrogate pair",
        ),
        (
            too_deep("/0"),
            "value at `/0` nests deeper than 64 arrays and objects: flatten it",
        ),
        (
            invalid(3, 1, "expected a string key"),
            "invalid JSON at line 3, column 1: expected a string key",
        ),
        (
            CanonicalError::UnsupportedValue {
                path: "/m".to_owned(),
                detail: "an object key must be a string or an integer",
            },
            "value at `/m` has no canonical JSON form: an object key must be a string or an integer",
        ),
        (
            CanonicalError::SerializeFailed {
                path: "/when".to_owned(),
                message: "clock is out of range".to_owned(),
            },
            "value at `/when` failed to serialize: clock is out of range",
        ),
    ];
    for (error, expected) in messages {
        let message = error.to_string();
        assert_eq!(message, expected);
        assert!(!message.ends_with('.'), "{message}");
        assert!(!message.contains('\n'), "{message}");
        assert!(
            message.starts_with(|c: char| !c.is_uppercase()),
            "{message}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Properties

fn finite_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<u64>().prop_map(f64::from_bits),
        any::<i32>().prop_map(f64::from),
        (any::<i32>(), -30_i32..30).prop_map(|(mantissa, exponent)| {
            format!("{mantissa}e{exponent}").parse().expect("parses")
        }),
    ]
    .prop_filter("finite", |value| value.is_finite())
}

fn key() -> impl Strategy<Value = String> {
    // A small alphabet so keys collide and straddle the UTF-16 versus code point order.
    let alphabet = prop::sample::select(vec![
        "a",
        "b",
        "A",
        "1",
        "\u{0}",
        "\n",
        "\"",
        "é",
        "\u{FF21}",
        "\u{FB33}",
        "\u{1F600}",
        "\u{10000}",
        "~",
        "/",
    ]);
    prop::collection::vec(alphabet, 0..4).prop_map(|parts| parts.concat())
}

/// Arbitrary JSON values; `with_negative_zero` lets `-0.0` in.
fn json_value(with_negative_zero: bool) -> impl Strategy<Value = Value> {
    let number = finite_f64().prop_filter("no -0 unless asked", move |value| {
        with_negative_zero || !(*value == 0.0 && value.is_sign_negative())
    });
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-9_007_199_254_740_991_i64..=9_007_199_254_740_991).prop_map(Value::from),
        number.prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        key().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// Writes an object's members as JSON text in the given order.
fn object_text(members: &[(String, Value)]) -> String {
    let parts: Vec<String> = members
        .iter()
        .map(|(key, value)| {
            format!(
                "{}:{}",
                serde_json::to_string(key).expect("key serializes"),
                serde_json::to_string(value).expect("value serializes")
            )
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn canonical_text_is_a_fixed_point(value in json_value(false)) {
        let canonical = to_canonical(&value).expect("finite values canonicalize");
        // The kernel's own text re-reads unchanged (a double such as `1e20` is written
        // `100000000000000000000`, an integer literal text from outside may not use).
        prop_assert_eq!(super::reparse_canonical(canonical.as_str()), Ok(canonical.clone()));
        prop_assert_eq!(to_canonical(&canonical.to_value()), Ok(canonical));
    }

    #[test]
    fn member_order_does_not_change_canonical_form(
        members in prop::collection::btree_map(key(), json_value(false), 0..8),
        seed in any::<u64>(),
    ) {
        let forward: Vec<(String, Value)> = members.into_iter().collect();
        let mut shuffled = forward.clone();
        // A deterministic shuffle from the seed.
        let mut state = seed | 1;
        for index in (1..shuffled.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            shuffled.swap(index, (state % (index as u64 + 1)) as usize);
        }
        let reversed: Vec<(String, Value)> = forward.iter().rev().cloned().collect();
        let expected = parse_canonical(&object_text(&forward));
        prop_assert_eq!(parse_canonical(&object_text(&shuffled)), expected.clone());
        prop_assert_eq!(parse_canonical(&object_text(&reversed)), expected);
    }

    #[test]
    fn typed_and_text_paths_agree(value in json_value(true)) {
        let text = serde_json::to_string(&value).expect("serializes");
        prop_assert_eq!(to_canonical(&value), parse_canonical(&text));
        let pretty = serde_json::to_string_pretty(&value).expect("serializes");
        prop_assert_eq!(to_canonical(&value), parse_canonical(&pretty));
    }

    #[test]
    fn integers_meet_one_rule_as_values_and_as_text(
        value in prop_oneof![
            any::<i128>(),
            any::<i64>().prop_map(i128::from),
            // Integers that are exact doubles beyond 2^53, some of them canonical spellings.
            (53_u32..100, 1_i128..16, any::<bool>())
                .prop_map(|(shift, mantissa, negative)| {
                    let value = mantissa << shift;
                    if negative { -value } else { value }
                }),
            (1_u32..38).prop_map(|exponent| 10_i128.pow(exponent)),
        ]
    ) {
        // INVARIANT (one integer rule): a Rust integer and its decimal digits as JSON text are
        // accepted or refused alike, with the same canonical text or the same error.
        prop_assert_eq!(to_canonical(&value), parse_canonical(&value.to_string()));
    }

    #[test]
    fn numbers_round_trip_to_the_same_double(value in finite_f64()) {
        let result = to_canonical(&value);
        if value == 0.0 && value.is_sign_negative() {
            prop_assert_eq!(result, Err(negative_zero("")));
        } else {
            let canonical = result.expect("finite numbers canonicalize");
            let read_back: f64 = canonical.as_str().parse().expect("canonical number parses");
            prop_assert_eq!(read_back.to_bits(), value.to_bits());
            prop_assert_eq!(super::reparse_canonical(canonical.as_str()), Ok(canonical.clone()));
            // From outside, an integer literal past ±(2^53 − 1) is refused, whatever spelling.
            let from_outside = parse_canonical(canonical.as_str());
            if value.fract() == 0.0 && value.abs() > 9_007_199_254_740_991.0 && !canonical.as_str().contains(['e', '.']) {
                prop_assert_eq!(from_outside.map_err(|error| error.reason()), Err("unsafe_integer"));
            } else {
                prop_assert_eq!(from_outside, Ok(canonical));
            }
        }
    }

    #[test]
    fn numbers_use_the_fewest_digits_that_read_back(value in finite_f64()) {
        prop_assume!(value != 0.0);
        let (digits, _) = super::shortest_digits(value.abs());
        prop_assert!(!digits.starts_with('0') && !digits.ends_with('0'), "{}", digits);
        if digits.len() > 1 {
            // Rust's `{:.p$e}` rounds correctly: the best candidate one digit shorter.
            let shorter: f64 = format!("{:.*e}", digits.len() - 2, value).parse().expect("parses");
            prop_assert_ne!(shorter.to_bits(), value.to_bits());
        }
    }

    #[test]
    fn spellings_of_one_number_are_one_canonical_form(value in finite_f64()) {
        prop_assume!(!(value == 0.0 && value.is_sign_negative()));
        let expected = to_canonical(&value).expect("canonical");
        for spelling in [format!("{value:e}"), format!("{value:E}"), format!("{value:?}")] {
            prop_assert_eq!(parse_canonical(&spelling), Ok(expected.clone()), "{}", spelling);
        }
    }

    #[test]
    fn integer_spellings_hash_equal(integer in -9_007_199_254_740_991_i64..=9_007_199_254_740_991) {
        let expected = parse_canonical(&integer.to_string()).expect("safe integer");
        for spelling in [format!("{integer}.0"), format!("{integer}e0"), format!("{integer}.000E+0")] {
            prop_assert_eq!(
                parse_canonical(&spelling).map(|json| json.sha256()),
                Ok(expected.sha256()),
                "{}", spelling
            );
        }
    }

    #[test]
    fn parser_never_panics(text in any::<String>()) {
        if let Ok(canonical) = parse_canonical(&text) {
            prop_assert_eq!(parse_canonical(canonical.as_str()), Ok(canonical));
        }
    }

    #[test]
    fn parser_never_panics_on_json_like_text(text in "[\\[\\]{}\":,\\\\ u0-9a-fA-FeE+.\\-tnrl\\n\u{e9}\u{1F600}]{0,40}") {
        if let Ok(canonical) = parse_canonical(&text) {
            prop_assert_eq!(parse_canonical(canonical.as_str()), Ok(canonical));
        }
    }
}
