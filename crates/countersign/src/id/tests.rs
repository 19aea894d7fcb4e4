use proptest::prelude::*;

use super::*;

const HASH: &str = "sha256:2f639245aa640049e9cfa9cf7c45604a27dce2ef56d5d3efae1a4b9504373ec6";

#[test]
fn generated_ids_have_their_own_shape() {
    let attempt = AttemptId::generate();
    assert!(attempt.as_str().starts_with("att_") && attempt.as_str().len() == 24);
    assert_eq!(AttemptId::parse(attempt.as_str()), Ok(attempt.clone()));
    assert!(attempt.is_well_formed());
    let request = ApprovalId::generate();
    assert_eq!(ApprovalId::parse(request.as_str()), Ok(request.clone()));
    // An attempt id is not a request id, nor the other way round.
    assert!(ApprovalId::parse(attempt.as_str()).is_err());
    assert!(AttemptId::parse(request.as_str()).is_err());
}

#[test]
fn refuses_off_shape_ids_naming_the_expected_shape() {
    for bad in [
        "",
        "att_",
        "att_aaaaaaaaaaaaaaaaaaa",   // 19 characters
        "att_aaaaaaaaaaaaaaaaaaaaa", // 21 characters
        "att_AAAAAAAAAAAAAAAAAAAA",  // upper case
        "att_aaaaaaaaaaaaaaaaaaa1",  // 1 is not base 32
        "att_aaaaaaaaaaaaaaaaaaa8",
        " att_aaaaaaaaaaaaaaaaaaaa",
        "apr_aaaaaaaaaaaaaaaaaaaa",
    ] {
        let error = AttemptId::parse(bad).unwrap_err();
        assert_eq!(error.given, bad);
        assert_eq!(
            error.to_string(),
            format!(
                "`{}` is not an attempt id: expected `att_` followed by 20 characters of `a`-`z` and `2`-`7`",
                bad.escape_debug()
            )
        );
    }
    let error = ApprovalId::parse("apr_NOT-AN-ID").unwrap_err();
    assert_eq!(
        error.to_string(),
        "`apr_NOT-AN-ID` is not an approval request id: expected `apr_` followed by 20 characters of `a`-`z` and `2`-`7`; list them with `countersign pending`"
    );
}

#[test]
fn hashes_are_sha256_and_64_lowercase_hex_digits() {
    for parse in [
        |text: &str| PolicyHash::parse(text).map(PolicyHash::into_string),
        |text: &str| ReceiptHash::parse(text).map(ReceiptHash::into_string),
        |text: &str| ActionHash::parse(text).map(ActionHash::into_string),
    ] {
        assert_eq!(parse(HASH).as_deref(), Ok(HASH));
        let zeros = format!("sha256:{}", "0".repeat(64));
        assert_eq!(parse(&zeros), Ok(zeros.clone()));
        for bad in [
            String::new(),
            "sha256:".to_owned(),
            HASH.to_uppercase(),
            HASH.replace("sha256:", "SHA256:"),
            HASH.replace("sha256:", "sha512:"),
            HASH[..HASH.len() - 1].to_owned(),
            format!("{HASH}0"),
            HASH.replace('f', "g"),
            format!("{HASH}\n"),
        ] {
            let error = parse(&bad).unwrap_err();
            assert!(
                error
                    .to_string()
                    .ends_with(": expected `sha256:` followed by 64 lowercase hex digits"),
                "{error}"
            );
        }
    }
    assert_eq!(
        PolicyHash::parse("md5:1").unwrap_err().to_string(),
        "`md5:1` is not a policy hash: expected `sha256:` followed by 64 lowercase hex digits"
    );
    assert_eq!(ReceiptHash::genesis().as_str(), GENESIS);
}

const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

#[test]
fn stored_text_of_an_older_shape_still_reads_and_writes_back_unchanged() {
    // A row an older `main` wrote before a shape rule existed: read leniently, never refused,
    // and written back byte for byte (a receipt body's hash depends on it).
    let attempt = AttemptId::from_stored("attempt-7".into());
    assert!(!attempt.is_well_formed());
    assert_eq!(attempt.as_str(), "attempt-7");
    let read: AttemptId = serde_json::from_str("\"attempt-7\"").expect("lenient");
    assert_eq!(read, attempt);
    assert_eq!(
        serde_json::to_string(&read).expect("serializes"),
        "\"attempt-7\""
    );
    let principal: Principal = serde_json::from_str("\"bad\\u0007principal\"").expect("lenient");
    assert!(Principal::new(principal.as_str()).is_err());
    assert_eq!(principal.as_str(), "bad\u{7}principal");
    let key: EffectKey = serde_json::from_str("\"\"").expect("lenient");
    assert_eq!(key.as_str(), "");
}

#[test]
fn receipt_hash_is_unset_only_when_empty() {
    assert!(ReceiptHash::default().is_unset());
    assert!(!ReceiptHash::genesis().is_unset());
}

proptest! {
    #[test]
    fn parse_accepts_exactly_the_documented_random_id_shape(text in "(att_|apr_|att|)[a-z2-9A-Z_]{0,22}") {
        let expected = text.len() == 24
            && text.starts_with("att_")
            && text[4..].bytes().all(|byte| byte.is_ascii_lowercase() || (b'2'..=b'7').contains(&byte));
        prop_assert_eq!(AttemptId::parse(&text).is_ok(), expected);
    }

    #[test]
    fn parse_accepts_exactly_the_documented_hash_shape(text in "(sha256:|sha256|SHA256:|)[0-9a-gA-F]{62,66}") {
        let expected = text.len() == 71
            && text.starts_with("sha256:")
            && text[7..].bytes().all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte));
        prop_assert_eq!(PolicyHash::parse(&text).is_ok(), expected);
        prop_assert_eq!(ReceiptHash::parse(&text).is_ok(), expected);
        prop_assert_eq!(ActionHash::parse(&text).is_ok(), expected);
    }

    #[test]
    fn any_stored_text_reads_back_and_serializes_unchanged(text in any::<String>()) {
        let json = serde_json::to_string(&text).expect("a string serializes");
        let attempt: AttemptId = serde_json::from_str(&json).expect("lenient read");
        prop_assert_eq!(attempt.as_str(), text.as_str());
        prop_assert_eq!(serde_json::to_string(&attempt).expect("serializes"), json);
    }
}
