//! The strict JSON reader ([`countersign::json::read_slice`]), the canonicalizer
//! ([`countersign::canonical`]) and the hash over canonical text.
//!
//! For every input: the reader and [`countersign::canonical::parse_canonical`] agree on
//! whether the text is acceptable; what the reader accepts has a canonical form, the same one
//! `parse_canonical` gives; canonical text is a fixed point (`to_value` gives it back, and so
//! does canonicalizing it again whenever the strict reading accepts it); its hash is `sha256:` and 64 lowercase hex
//! digits and depends only on the value.

use countersign::canonical::{parse_canonical, sha256_prefixed, to_canonical};

/// Feed one input to the reader and the canonicalizer.
///
/// # Panics
///
/// When a property in the module docs does not hold (the fuzzer's crash).
pub fn run(data: &[u8]) {
    let read = countersign::json::read_slice(data);
    let Some(text) = crate::text(data) else {
        let error = read.expect_err("bytes that are not UTF-8 were read as JSON");
        assert_eq!(error.reason(), "invalid_utf8", "{error}");
        crate::check_message(&error, "read_slice");
        return;
    };
    let canonical = parse_canonical(text);
    let value = match read {
        Ok(value) => value,
        Err(error) => {
            crate::check_message(&error, "read");
            let refused =
                canonical.expect_err("parse_canonical accepted text the strict reader refused");
            crate::check_message(&refused, "parse_canonical");
            return;
        }
    };
    let canonical = canonical.expect("parse_canonical refused text the strict reader accepted");
    let from_value =
        to_canonical(&value).expect("a value the strict reader returned has no canonical form");
    assert_eq!(
        from_value, canonical,
        "the reader's value and the text canonicalize differently"
    );
    // Canonical text read again from outside is the same value, or refused as a whole: the
    // canonical form of a double such as 1e20 is the integer literal `100000000000000000000`,
    // which the strict reader refuses (send it as a string); it never reads as another value.
    if let Ok(again) = parse_canonical(canonical.as_str()) {
        assert_eq!(again, canonical, "canonical text is not a fixed point");
    }
    assert_eq!(
        to_canonical(&canonical.to_value()).expect("to_value has no canonical form"),
        canonical,
        "to_value does not give the canonical value back"
    );
    let hash = canonical.sha256();
    assert_eq!(hash, sha256_prefixed(canonical.as_str().as_bytes()));
    assert!(
        hash.len() == 71
            && hash.starts_with("sha256:")
            && hash[7..]
                .bytes()
                .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f')),
        "not a sha256: digest: {hash}"
    );
}
