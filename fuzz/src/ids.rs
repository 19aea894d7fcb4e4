//! The identifiers the `countersign` command reads from its arguments, with the kernel's own
//! parsers it calls: approval request ids ([`countersign::ApprovalId::parse`], for `approve`,
//! `deny`, `inspect`, `takeback`), approver ids ([`countersign::approver::ApproverId::parse`],
//! for `--as` and token subjects), effect keys ([`countersign::EffectKey::new`], for `resolve`
//! and `inspect`) and token ids ([`countersign::token::revocable_id`], for `approver revoke`,
//! which also reads a whole token's `jti` without verifying it).
//!
//! For every input: each parser accepts exactly the documented shape and gives back the text it
//! accepted; each refusal has a message.

use countersign::approver::ApproverId;
use countersign::{ApprovalId, EffectKey};

/// Read one input, trimmed as the CLI trims it, with every id parser.
///
/// # Panics
///
/// When a property in the module docs does not hold (the fuzzer's crash).
pub fn run(data: &[u8]) {
    let Some(text) = crate::text(data) else {
        return;
    };
    let trimmed = text.trim();
    match ApprovalId::parse(trimmed) {
        Ok(id) => {
            assert_eq!(id.as_str(), trimmed);
            assert!(
                is_base32_id(trimmed, "apr_"),
                "`{trimmed}` read as an approval id"
            );
        }
        Err(message) => {
            assert!(
                !is_base32_id(trimmed, "apr_"),
                "`{trimmed}` refused as an approval id"
            );
            crate::check_message(message, "ApprovalId::parse");
        }
    }
    match ApproverId::parse(text) {
        Ok(id) => {
            assert!(
                !id.as_str().trim().is_empty(),
                "a blank approver id was accepted"
            );
            assert!(id.as_str().len() <= ApproverId::MAX_LEN);
        }
        Err(error) => crate::check_message(error, "ApproverId::parse"),
    }
    match EffectKey::new(trimmed) {
        Ok(key) => {
            assert_eq!(key.as_str(), trimmed);
            assert!(!trimmed.is_empty() && trimmed.len() <= EffectKey::MAX_LEN);
        }
        Err(error) => crate::check_message(error, "EffectKey::new"),
    }
    match countersign::token::revocable_id(text) {
        Ok(jti) => assert!(is_base32_id(&jti, "tok_"), "`{jti}` read as a token id"),
        Err(message) => crate::check_message(message, "revocable_id"),
    }
    let _ = countersign::token::unverified_jti(trimmed);
}

/// `prefix` and 20 characters of the lowercase base-32 alphabet (`a`–`z`, `2`–`7`).
fn is_base32_id(text: &str, prefix: &str) -> bool {
    text.strip_prefix(prefix).is_some_and(|rest| {
        rest.len() == 20
            && rest
                .bytes()
                .all(|byte| matches!(byte, b'a'..=b'z' | b'2'..=b'7'))
    })
}
