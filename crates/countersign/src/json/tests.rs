//! The strict reader (issue #19) and the depth bound of every kernel walker: cases B50, B51,
//! B52 (shared/cases/gateway-2026.md) and B27/B28 (shared/cases/canonical-form.md).

use serde_json::{Value, json};

use super::*;
use crate::action::canonical::to_canonical;

/// The reason and the place of the refusal of `text`.
fn refusal(text: &str) -> (&'static str, usize, usize) {
    let error = read(text).expect_err(text);
    (error.reason(), error.line, error.column)
}

fn check_refused(text: &str, reason: &str) {
    assert_eq!(read(text).expect_err(text).reason(), reason, "{text}");
}

#[test]
fn refuses_a_duplicate_key_at_the_top_level() {
    // B52: the gateway's example; `serde_json` would keep `1000`.
    let error = read(r#"{"to":"a@x","amount":1,"amount":1000}"#).unwrap_err();
    assert_eq!(error.reason(), "duplicate_key");
    assert_eq!((error.line, error.column), (1, 24), "the second `amount`");
    assert!(error.to_string().contains("`amount`"), "{error}");
    assert!(error.is_well_formed());
}

#[test]
fn refuses_a_duplicate_key_anywhere() {
    check_refused(r#"{"p":{"k":1,"k":2}}"#, "duplicate_key");
    check_refused(r#"[{"ok":1},{"k":1,"k":2}]"#, "duplicate_key");
    check_refused(r#"{"a":[[{"x":{"y":1,"y":1}}]]}"#, "duplicate_key");
    let nested = read(r#"{"p":{"k":1,"k":2}}"#).unwrap_err();
    assert_eq!(
        nested.source,
        CanonicalError::DuplicateKey {
            path: "/p".into(),
            key: "k".into()
        }
    );
}

#[test]
fn refuses_keys_that_differ_only_by_escaping() {
    // B52: keys are compared after unescaping.
    check_refused(r#"{"a":1,"\u0061":2}"#, "duplicate_key");
    check_refused(r#"{"é":1,"\u00e9":2}"#, "duplicate_key");
    // NFC and NFD spellings are different strings, not duplicates (no normalization).
    assert!(read("{\"\u{e9}\":1,\"e\u{301}\":2}").is_ok());
}

#[test]
fn names_the_line_and_column_of_a_duplicate_on_a_later_line() {
    let text = "{\n  \"a\": 1,\n  \"b\": {\"c\": 2,\n         \"c\": 3}\n}";
    assert_eq!(refusal(text), ("duplicate_key", 4, 10));
}

#[test]
fn accepts_nesting_to_the_limit_and_refuses_one_level_more() {
    for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
        let at_limit = format!("{}1{}", open.repeat(MAX_DEPTH), close.repeat(MAX_DEPTH));
        assert!(read(&at_limit).is_ok(), "{open} x {MAX_DEPTH}");
        let past = format!(
            "{}1{}",
            open.repeat(MAX_DEPTH + 1),
            close.repeat(MAX_DEPTH + 1)
        );
        let error = read(&past).unwrap_err();
        assert_eq!(error.reason(), "too_deep", "{open}");
        // The opening bracket of level 129.
        assert_eq!(error.line, 1);
        assert_eq!(error.column, MAX_DEPTH * open.chars().count() + 1, "{open}");
        assert!(error.to_string().contains("64"), "{error}");
    }
}

#[test]
fn refuses_deep_text_on_a_small_stack_without_overflowing() {
    // B50 (a): 200, 1 000 and 100 000 levels, as arrays and as objects, on a 256 KiB stack.
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            for levels in [200, 1_000, 100_000] {
                for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
                    let text = format!("{}1{}", open.repeat(levels), close.repeat(levels));
                    assert_eq!(read(&text).unwrap_err().reason(), "too_deep", "{levels}");
                    let bytes = text.into_bytes();
                    assert_eq!(read_slice(&bytes).unwrap_err().reason(), "too_deep");
                }
            }
        })
        .expect("a thread")
        .join()
        .expect("no stack overflow");
}

#[test]
fn refuses_lone_surrogates_and_accepts_a_valid_pair() {
    // B51: `\ud800`, `\udc00` and the reversed pair `\ude00\ud83d`.
    for text in [r#"["\ud800"]"#, r#"["\udc00"]"#, r#"["\ude00\ud83d"]"#] {
        assert_eq!(refusal(text), ("lone_surrogate", 1, 3), "{text}");
    }
    assert_eq!(
        refusal(r#"{"\ud800":1}"#).0,
        "lone_surrogate",
        "in a key too"
    );
    let pair = read(r#"["\ud83d\ude00"]"#).unwrap();
    assert_eq!(pair, json!(["\u{1F600}"]));
    assert_eq!(pair, read("[\"\u{1F600}\"]").unwrap());
}

#[test]
fn refuses_bytes_that_are_not_utf8() {
    // B51: a raw 0xFF, the overlong C0 80 and the CESU-8 surrogate ED A0 80.
    for (bytes, column) in [
        (&b"[\"a\xFF\"]"[..], 4),
        (&b"[\"\xC0\x80\"]"[..], 3),
        (&b"\n[\"\xED\xA0\x80\"]"[..], 3),
    ] {
        let error = read_slice(bytes).unwrap_err();
        assert_eq!(error.reason(), "invalid_utf8", "{bytes:?}");
        assert_eq!(error.column, column, "{bytes:?}");
        assert!(!error.is_well_formed());
    }
    assert_eq!(
        read_slice(&b"\n[\"\xED\xA0\x80\"]"[..]).unwrap_err().line,
        2
    );
    assert_eq!(
        read_slice("[\"\u{1F600}\"]".as_bytes()).unwrap(),
        json!(["\u{1F600}"])
    );
}

#[test]
fn accepts_the_safe_integer_boundaries_as_integers() {
    for (text, expected) in [
        ("9007199254740991", 9_007_199_254_740_991_i64),
        ("-9007199254740991", -9_007_199_254_740_991_i64),
        ("0", 0),
        ("-1", -1),
    ] {
        let value = read(text).unwrap();
        assert_eq!(value.as_i64(), Some(expected), "{text}");
        assert!(value.is_i64() || value.is_u64(), "{text} is an integer");
    }
}

#[test]
fn refuses_integer_literals_past_the_boundaries_in_both_signs() {
    for text in [
        "9007199254740992",
        "-9007199254740992",
        "9007199254740993",
        "-9007199254740993",
        "100000000000000000000",
        "-100000000000000000000",
        "18446744073709551615",
    ] {
        let error = read(&format!("{{\n \"n\": {text}}}")).unwrap_err();
        assert_eq!(error.reason(), "unsafe_integer", "{text}");
        assert_eq!(
            (error.line, error.column),
            (2, 7),
            "{text}: the number's place"
        );
    }
}

#[test]
fn reads_a_number_with_a_fraction_or_exponent_as_the_double_it_is() {
    assert_eq!(read("1e20").unwrap().as_f64(), Some(1e20));
    assert!(read("1e20").unwrap().is_f64());
    assert_eq!(read("0.1").unwrap(), json!(0.1));
    // `1.0` is the number 1 in canonical JSON: it is read as the integer 1.
    assert_eq!(read("1.0").unwrap().as_i64(), Some(1));
    assert_eq!(read("1e0").unwrap().as_i64(), Some(1));
    check_refused("-0", "negative_zero");
    check_refused("-0.0", "negative_zero");
    check_refused("1e400", "not_finite");
    check_refused("NaN", "not_finite");
}

#[test]
fn refuses_what_is_not_json_with_its_place() {
    assert_eq!(refusal("{\"a\":1,}"), ("invalid_json", 1, 8));
    assert_eq!(refusal("{\"a\":1} x"), ("invalid_json", 1, 9));
    assert_eq!(refusal(""), ("invalid_json", 1, 1));
    assert!(!read("{").unwrap_err().is_well_formed());
}

#[test]
fn keeps_what_it_reads_unchanged() {
    let text = r#"{"s":"世界","e":"\u4e16\u754c","n":[1,2.5,null,true,{"k":"v"}]}"#;
    let value = read(text).unwrap();
    assert_eq!(
        value["s"], value["e"],
        "a `\\u` escape and the raw character are one string"
    );
    assert_eq!(value["n"], json!([1, 2.5, null, true, {"k": "v"}]));
}

/// A value nested `levels` deep, built in code, past any parser's limit (B50 (b)).
fn deep_array(levels: usize) -> Value {
    let mut value = json!(1);
    for _ in 0..levels {
        value = Value::Array(vec![value]);
    }
    value
}

fn deep_object(levels: usize) -> Value {
    let mut value = json!(1);
    for _ in 0..levels {
        let mut map = serde_json::Map::new();
        map.insert("a".into(), value);
        value = Value::Object(map);
    }
    value
}

/// Takes a deep value apart one level at a time: `serde_json`'s own drop recurses.
fn dismantle(mut value: Value) {
    loop {
        value = match value {
            Value::Array(mut items) => match items.pop() {
                Some(inner) => inner,
                None => return,
            },
            Value::Object(map) => match map.into_iter().next() {
                Some((_, inner)) => inner,
                None => return,
            },
            _ => return,
        };
    }
}

#[test]
fn every_kernel_walker_refuses_a_value_nested_past_the_limit_on_a_small_stack() {
    use crate::control::{ActionRequest, Control, StaticIdentity};
    use crate::error::ControlError;
    use crate::store::MemoryStore;
    use crate::{Policy, Principal};

    // Loading the policy is not a walker over arguments: done on the test's own thread.
    let policy = Policy::from_yaml_str(
        "schema: countersign.policy/v1\nactions:\n  deep.call:\n    rules:\n      - when: { a: { eq: [1] } }\n        decision: allow\n      - decision: approve\n",
        None,
    )
    .expect("policy");
    let control = Control::builder(policy.clone(), MemoryStore::new())
        .identity(StaticIdentity::new(Principal::new("agent:deep").unwrap()))
        .build();
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            for deep in [deep_array(10_000), deep_object(10_000)] {
                // The canonicalizer (hashing, receipts, approvals, display all start from it).
                let error = to_canonical(&deep).unwrap_err();
                assert_eq!(error.reason(), "too_deep");
                // The pipeline: nothing is decided, opened or written.
                match control.evaluate(&ActionRequest::new("deep.call", &deep)) {
                    Err(ControlError::InvalidArguments { source, .. }) => {
                        assert_eq!(source.reason(), "too_deep");
                    }
                    other => panic!("expected too_deep, got {other:?}"),
                }
                // Policy conditions compare at most as deep as the policy's own operand, so a
                // deep argument decides without walking it.
                let wrapped = json!({"a": deep_array(1)});
                assert_eq!(
                    policy.decide("deep.call", &wrapped).decision,
                    crate::Decision::Allow
                );
                let deep_argument = {
                    let mut map = serde_json::Map::new();
                    map.insert("a".into(), deep);
                    Value::Object(map)
                };
                assert_eq!(
                    policy.decide("deep.call", &deep_argument).decision,
                    crate::Decision::Approve
                );
                let explained = policy.explain("deep.call", &deep_argument);
                assert_eq!(explained.decision, crate::Decision::Approve);
                assert_eq!(explained.rules[0].conditions[0].actual, None, "not copied");
                assert!(super::nests_deeper_than(&deep_argument, MAX_DEPTH));
                assert!(!super::nests_deeper_than(&wrapped, MAX_DEPTH));
                dismantle(deep_argument);
            }
        })
        .expect("a thread")
        .join()
        .expect("no stack overflow");
}

#[test]
fn refuses_text_past_the_size_limit_before_parsing_it() {
    // B50 (d): the limit itself is accepted, one byte more is refused as `too_large`, and the
    // size is judged first: an oversized text that is not even JSON is `too_large`, not
    // `invalid_json`.
    let quoted = |length: usize| format!("\"{}\"", "a".repeat(length - 2));
    assert!(read(&quoted(MAX_TEXT_BYTES)).is_ok());
    let error = read(&quoted(MAX_TEXT_BYTES + 1)).unwrap_err();
    assert_eq!(error.reason(), "too_large");
    assert_eq!(
        error.source,
        CanonicalError::TooLarge {
            bytes: MAX_TEXT_BYTES + 1,
            limit: MAX_TEXT_BYTES
        }
    );
    assert!(error.to_string().contains("4194304-byte limit"), "{error}");
    assert_eq!(
        read(&"x".repeat(MAX_TEXT_BYTES + 1)).unwrap_err().reason(),
        "too_large"
    );
    // Bytes: judged before the UTF-8 check.
    assert_eq!(
        read_slice(&vec![0xFF; MAX_TEXT_BYTES + 1])
            .unwrap_err()
            .reason(),
        "too_large"
    );
    // An object with 1 000 000 keys.
    let mut many = String::from("{");
    for index in 0..1_000_000 {
        if index > 0 {
            many.push(',');
        }
        many.push_str(&format!("\"k{index}\":1"));
    }
    many.push('}');
    assert_eq!(read(&many).unwrap_err().reason(), "too_large");
    assert_eq!(
        canonical::parse_canonical(&many).unwrap_err().reason(),
        "too_large"
    );
}
