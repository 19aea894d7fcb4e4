//! The approver token verifier ([`countersign::token::verify`]) and the inline public-key
//! parser ([`countersign::token::PublicKey::parse`]).
//!
//! The first byte of an input picks what the rest is:
//!
//! - `0` (mod 3): token text as a surface receives it, verified against a fixed key; the same
//!   text is also read as a public key and for its `jti`;
//! - `1`: a JWT payload (claims), signed with the fixed key under a correct header, so that the
//!   claim rules are reached; `now` is the payload's `iat`, when it has one;
//! - `2`: a header and a payload separated by the first newline, both signed as given.
//!
//! For every input: verification gives a token or a refusal with a message that never contains
//! the token; a verified token has a non-empty subject, came from the fixed key, was checked
//! at a `now` before its expiry, and has a lifetime of at most
//! [`countersign::token::MAX_LIFETIME`].

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign::Timestamp;
use countersign::token::{self, PublicKey};
use ed25519_dalek::Signer;

/// The fixed test key (never a real one: 32 bytes of 7).
fn signing_key() -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[7; 32])
}

fn public_key() -> PublicKey {
    let inline = format!(
        "ed25519:{}",
        URL_SAFE_NO_PAD.encode(signing_key().verifying_key().as_bytes())
    );
    // INVARIANT: the inline form of a valid Ed25519 key parses.
    PublicKey::parse(&inline).expect("the fixed test key parses")
}

/// A fixed `now` (2026-12-01T00:00:00Z) for token text that carries no `iat` to use.
const NOW_SECONDS: i64 = 1_795_996_800;

/// Sign `header` and `payload` (raw bytes, base64url-encoded here) with the fixed key.
fn signed(header: &[u8], payload: &[u8]) -> String {
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(payload)
    );
    let signature = signing_key().sign(input.as_bytes());
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes()))
}

/// Read one input as a token (or the parts of one) and verify it.
///
/// # Panics
///
/// When a property in the module docs does not hold (the fuzzer's crash).
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (token, now_seconds) = match mode % 3 {
        0 => {
            let Some(text) = crate::text(rest) else {
                return;
            };
            match PublicKey::parse(text) {
                Ok(key) => assert_eq!(PublicKey::parse(&key.to_string()).ok(), Some(key)),
                Err(error) => crate::check_message(error, "PublicKey::parse"),
            }
            let _ = token::unverified_jti(text);
            (text.to_owned(), NOW_SECONDS)
        }
        1 => (
            signed(br#"{"alg":"EdDSA","typ":"JWT"}"#, rest),
            issued_at(rest),
        ),
        _ => {
            let split = rest
                .iter()
                .position(|&byte| byte == b'\n')
                .unwrap_or(rest.len());
            let (header, payload) = rest.split_at(split);
            let payload = payload.get(1..).unwrap_or_default();
            (signed(header, payload), issued_at(payload))
        }
    };
    let now = Timestamp::from_millis(now_seconds.saturating_mul(1000));
    match token::verify(&token, &[public_key()], now) {
        Ok(verified) => {
            assert!(
                !verified.subject.trim().is_empty(),
                "a token without a subject verified"
            );
            assert_eq!(verified.key_id, public_key().key_id());
            assert!(now < verified.expires_at, "an expired token verified");
            let lifetime = verified.expires_at.as_millis() - now_seconds.saturating_mul(1000);
            assert!(
                u128::try_from(lifetime).is_ok_and(|lifetime| lifetime
                    <= token::MAX_LIFETIME.as_millis() + token::CLOCK_SKEW.as_millis()),
                "a token living {lifetime} ms verified"
            );
        }
        Err(error) => {
            let message = error.to_string();
            assert!(
                !message.trim().is_empty(),
                "a token refusal without a message"
            );
            if token.len() >= 16 {
                assert!(!message.contains(&token), "a token refusal shows the token");
            }
        }
    }
}

/// The payload's `iat` claim when it is an integer, else the fixed `now`.
fn issued_at(payload: &[u8]) -> i64 {
    serde_json::from_slice::<serde_json::Value>(payload)
        .ok()
        .and_then(|claims| claims.get("iat").and_then(serde_json::Value::as_i64))
        .unwrap_or(NOW_SECONDS)
}
