//! Approver tokens: short-lived JWTs, signed with Ed25519, that say who is answering an approval
//! request and which groups they belong to.
//!
//! The rules come from RFC 7519 (JSON Web Token), RFC 8037 (`EdDSA` in JOSE) and RFC 8032
//! (Ed25519); `docs/SPEC.md` ("Approver tokens") describes the format for operators.
//!
//! - A token is `header.payload.signature`, each part base64url without padding. The header's
//!   `alg` must be `EdDSA`; `none`, `HS256` and every other algorithm are refused before any key
//!   is tried, so a public key can never be used as an HMAC secret.
//! - The claims are [`TokenClaims`]: `sub`, `groups`, and `iat` and `exp` in whole **seconds**
//!   since the Unix epoch (JWT NumericDate; [`Timestamp`] is in milliseconds).
//! - A token lives at most [`MAX_LIFETIME`] (24 h), counted from `iat` to `exp`; it is refused at
//!   issue and again at verification.
//! - [`verify`] is the one check every surface uses (the CLI, `countersign serve`): it takes the
//!   public keys the policy lists and an explicit `now`.
//!
//! Keys: [`SigningKey`] is the secret half, kept in a PKCS#8 PEM file written by
//! [`write_keypair`] (`countersign keygen`); [`PublicKey`] is the public half, written as
//! `FILE.pub` (SPKI PEM) and shown inline as `ed25519:` plus base64url. A policy lists public
//! keys only: [`PublicKey::load`] refuses a file holding a private key.
//!
//! No error of this module echoes the token text: a token is a bearer credential.
//!
//! By concept: this file issues and verifies tokens; `keys` holds the key types and their PEM
//! files ([`PublicKey`], [`SigningKey`], [`write_keypair`]).

mod keys;

pub use keys::{KeyId, KeyPairFiles, PublicKey, SigningKey, generate_keypair, write_keypair};

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use sha2::{Digest, Sha256};

use crate::clock::Timestamp;

/// The longest a token may live, from `iat` to `exp`: 24 hours.
pub const MAX_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// How far in the future a token's `iat` may be and still verify: 60 seconds, for clocks that
/// disagree a little between the machine that issued the token and the one verifying it.
///
/// Only `iat` gets this allowance; `exp` is compared with `now` exactly, like every other expiry
/// in Countersign.
pub const CLOCK_SKEW: Duration = Duration::from_secs(60);

/// The longest token text [`verify`] reads: 8 KiB. Real tokens are a few hundred bytes.
pub const MAX_TOKEN_LENGTH: usize = 8 * 1024;

/// The longest key file [`PublicKey::load`] and [`SigningKey::load`] read: 64 KiB.
const MAX_KEY_FILE_LENGTH: u64 = 64 * 1024;

/// The prefix of a public key's inline form.
const INLINE_PREFIX: &str = "ed25519:";

/// The claims of an approver token (RFC 7519 §4.1), as they travel in its payload.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenClaims {
    /// Who answers, for example `human:alice`. Never empty.
    pub sub: String,
    /// The groups the approver belongs to, for example `["finance"]`; missing means none.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Issued at: whole seconds since the Unix epoch, UTC.
    pub iat: i64,
    /// Expires at: whole seconds since the Unix epoch, UTC. At most [`MAX_LIFETIME`] after `iat`.
    pub exp: i64,
    /// The token's id (RFC 7519 §4.1.7), `tok_` and 20 base32 characters, set by [`issue`]:
    /// `countersign approver revoke JTI` puts it on the store's deny-list (issue #31). Tokens
    /// issued before it existed have none and cannot be revoked one by one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
}

/// Issue a token for `subject` in `groups`, valid from `now` for `ttl`.
///
/// `iat` is `now` rounded down to the second and `exp` is `iat` plus `ttl` in whole seconds
/// (a fraction of a second is dropped). The header is `{"alg":"EdDSA","typ":"JWT","kid":…}`, the
/// key id being [`PublicKey::key_id`] of the signing key; [`verify`] does not trust it.
///
/// # Errors
///
/// [`TokenError::MissingSubject`] for an empty subject, [`TokenError::InvalidSubject`] for one
/// that is not an [`crate::approver::ApproverId`] (such as `human:` or `human: bob`; no
/// trimming), [`TokenError::EmptyGroup`] for an empty
/// group name, [`TokenError::LifetimeTooShort`] for a `ttl` under one second and
/// [`TokenError::LifetimeTooLong`] for one over [`MAX_LIFETIME`].
pub fn issue(
    signing_key: &SigningKey,
    subject: &str,
    groups: &[String],
    ttl: Duration,
    now: Timestamp,
) -> Result<String, TokenError> {
    if subject.trim().is_empty() {
        return Err(TokenError::MissingSubject);
    }
    // The one shape of an approver id (issue #19): a token whose `sub` is `human:` or
    // `human: bob` would be refused at every answer.
    crate::approver::ApproverId::parse(subject).map_err(TokenError::InvalidSubject)?;
    if groups.iter().any(|group| group.trim().is_empty()) {
        return Err(TokenError::EmptyGroup);
    }
    if let Some(group) = groups.iter().find(|group| !group_shaped(group)) {
        return Err(TokenError::InvalidGroup {
            group: crate::text::printable(group).into_owned(),
        });
    }
    if ttl > MAX_LIFETIME {
        return Err(TokenError::LifetimeTooLong { lifetime: ttl });
    }
    if ttl.as_secs() == 0 {
        return Err(TokenError::LifetimeTooShort { lifetime: ttl });
    }
    let iat = now.as_millis().div_euclid(1000);
    // INVARIANT (lifetime-bounded): ttl is at most 24 h here, so it fits an i64 of seconds.
    let ttl_seconds = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    let claims = TokenClaims {
        sub: subject.to_owned(),
        groups: groups.to_vec(),
        iat,
        exp: iat.saturating_add(ttl_seconds),
        jti: Some(crate::id::random_id("tok_")),
    };
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some(signing_key.public_key().key_id().0);
    let der = signing_key
        .0
        .to_pkcs8_der()
        .map_err(|error| TokenError::SigningFailed {
            problem: error.to_string(),
        })?;
    let encoding_key = jsonwebtoken::EncodingKey::from_ed_der(der.as_bytes());
    jsonwebtoken::encode(&header, &claims, &encoding_key).map_err(|error| {
        TokenError::SigningFailed {
            problem: error.to_string(),
        }
    })
}

/// A token that [`verify`] accepted: who answers, in which groups, until when, and under which
/// configured key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedToken {
    /// The `sub` claim, for example `human:alice`. Never empty.
    pub subject: String,
    /// The `groups` claim; empty when the token has none.
    pub groups: Vec<String>,
    /// When the token stops verifying: its `exp`, in milliseconds since the epoch.
    pub expires_at: Timestamp,
    /// The id of the configured key whose signature verified.
    pub key_id: KeyId,
    /// The `jti` claim, when the token has one (issue #31: the id a revocation names).
    pub jti: Option<String>,
}

/// The claims as found in a token whose signature verified, before the rules are applied, so
/// that each missing claim gets its own error.
#[derive(serde::Deserialize)]
struct FoundClaims {
    sub: Option<String>,
    groups: Option<Vec<String>>,
    iat: Option<i64>,
    exp: Option<i64>,
    nbf: Option<i64>,
    jti: Option<String>,
}

/// Is `group` a group name: non-empty, without whitespace, control or invisible formatting
/// characters (the policy's `directory` rule for group names, and [`crate::evidence::printable`]'s
/// hidden characters)? A group that is not could never match an `approvers` pattern as a person
/// reads it, so a token naming one is refused rather than half-trusted.
fn group_shaped(group: &str) -> bool {
    !group.is_empty()
        && !group
            .chars()
            .any(|c| c.is_whitespace() || crate::text::is_hidden(c))
}

/// The `jti` claim of `token`, read **without verifying it**: only for looking the token up on
/// the store's deny-list before [`verify`] judges it (a forged id can only get its own token
/// refused; the id of a token that verifies is the signed one). `None` when the token has no
/// readable `jti`.
pub fn unverified_jti(token: &str) -> Option<String> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    value.get("jti")?.as_str().map(str::to_owned)
}

/// The token id a revocation names, from `given`: either the id itself (`tok_` and 20 of
/// `a`–`z`, `2`–`7`, as `countersign approver token --json` prints it) or a whole token, whose
/// `jti` claim is read without verifying it (revoking a forged token's id harms nobody).
///
/// # Errors
///
/// A message saying what `given` was and what to pass instead: a token without a `jti` claim
/// (issued before tokens had ids; remove its key to refuse it), or text of neither shape.
pub fn revocable_id(given: &str) -> Result<String, String> {
    let given = given.trim();
    let jti = if given.contains('.') {
        unverified_jti(given).ok_or_else(|| {
            "that token has no `jti` claim (it was issued before tokens had ids): it cannot be revoked alone; remove its key from `approvers.keys` to refuse every token it signed".to_owned()
        })?
    } else {
        given.to_owned()
    };
    if is_token_id(&jti) {
        Ok(jti)
    } else {
        Err(format!(
            "`{}` is not a token id: ids look like `tok_` and 20 letters and digits, as `countersign approver token --json` shows; or pass the whole token",
            jti.escape_debug()
        ))
    }
}

/// Is `jti` a token id as [`issue`] makes them: `tok_` and 20 of `a`–`z`, `2`–`7` (RFC 4648
/// base32, lowercase)? Only such an id can be named by `countersign approver revoke`.
fn is_token_id(jti: &str) -> bool {
    jti.len() == 24
        && jti.starts_with("tok_")
        && jti[4..]
            .chars()
            .all(|c| c.is_ascii_lowercase() || ('2'..='7').contains(&c))
}

/// Verify an approver token against the public keys the policy lists, at `now`.
///
/// This is the one check every approval surface uses. In order:
///
/// 1. at least one key is configured, and the token is at most [`MAX_TOKEN_LENGTH`] bytes of
///    three base64url parts;
/// 2. the header's `alg` is `EdDSA` (RFC 8037); `none`, `HS*` and all others are refused, and so
///    is a `crit` header;
/// 3. the signature verifies under one of `keys`, tried in turn (the header's `kid` is not
///    trusted);
/// 4. `exp`, `iat` and `jti` are present (`exp` and `iat` in whole seconds), with `iat < exp`
///    and `exp - iat` at most [`MAX_LIFETIME`]; `sub` is a non-empty string; `groups`, if
///    present, is an array of group names (non-empty, no whitespace or control characters);
/// 5. `iat`, and `nbf` when present (RFC 7519 §4.1.5), are at most [`CLOCK_SKEW`] after
///    `now`, and `now` is before `exp`.
///
/// A token without `jti` is refused: it could not be revoked alone (issue #31), and every token
/// [`issue`] makes has one. Other claims (`aud`, …) are ignored; `jti` is returned, and checked
/// against the store's deny-list by the store, not here.
///
/// # Errors
///
/// One [`TokenError`] per failed rule; none of them contains the token text.
///
/// # Panics
///
/// Never.
pub fn verify(
    token: &str,
    keys: &[PublicKey],
    now: Timestamp,
) -> Result<VerifiedToken, TokenError> {
    if keys.is_empty() {
        return Err(TokenError::NoKeysConfigured);
    }
    check_header(token)?;
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
    // The time and claim rules are applied below against the `now` given, not the system clock.
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    validation.leeway = 0;
    let mut found = None;
    for key in keys {
        let decoding_key = jsonwebtoken::DecodingKey::from_ed_der(key.0.as_bytes());
        match jsonwebtoken::decode::<FoundClaims>(token, &decoding_key, &validation) {
            Ok(data) => {
                found = Some((data.claims, key.key_id()));
                break;
            }
            Err(error) if *error.kind() == jsonwebtoken::errors::ErrorKind::InvalidSignature => {}
            Err(error) => return Err(malformed_after_header(&error)),
        }
    }
    let Some((claims, key_id)) = found else {
        return Err(TokenError::BadSignature {
            keys_tried: keys.len(),
        });
    };
    let subject = claims
        .sub
        .filter(|subject| !subject.trim().is_empty())
        .ok_or(TokenError::MissingSubject)?;
    let exp = claims
        .exp
        .ok_or(TokenError::MissingClaim { claim: "exp" })?;
    let iat = claims
        .iat
        .ok_or(TokenError::MissingClaim { claim: "iat" })?;
    // Found by a first-time user: a token without an id was accepted, and could then only be
    // refused by removing its key, with every other token that key signed.
    if claims.jti.as_deref().is_none_or(str::is_empty) {
        return Err(TokenError::MissingClaim { claim: "jti" });
    }
    // Found by a first-time user: a token whose `jti` was not of the shape `approver revoke`
    // takes signed in, and could not then be revoked alone.
    if !claims.jti.as_deref().is_some_and(is_token_id) {
        return Err(TokenError::Malformed {
            problem: "its `jti` claim is not a token id (`tok_` and 20 letters and digits), so it could not be revoked alone",
        });
    }
    if claims
        .groups
        .as_ref()
        .is_some_and(|groups| !groups.iter().all(|group| group_shaped(group)))
    {
        return Err(TokenError::Malformed {
            problem: "a `groups` entry is empty or holds whitespace, control or invisible characters",
        });
    }
    let lifetime_seconds = exp.checked_sub(iat).unwrap_or(i64::MAX);
    if lifetime_seconds <= 0 {
        return Err(TokenError::Malformed {
            problem: "its `exp` is not after its `iat`",
        });
    }
    let lifetime = Duration::from_secs(u64::try_from(lifetime_seconds).unwrap_or(u64::MAX));
    if lifetime > MAX_LIFETIME {
        return Err(TokenError::LifetimeTooLong { lifetime });
    }
    let (Some(issued_at), Some(expires_at)) =
        (seconds_to_timestamp(iat), seconds_to_timestamp(exp))
    else {
        return Err(TokenError::Malformed {
            problem: "its `iat` or `exp` is out of range",
        });
    };
    if issued_at > now.plus(CLOCK_SKEW) {
        return Err(TokenError::NotYetValid { issued_at });
    }
    if let Some(nbf) = claims.nbf {
        let not_before = seconds_to_timestamp(nbf).ok_or(TokenError::Malformed {
            problem: "its `nbf` is out of range",
        })?;
        if not_before > now.plus(CLOCK_SKEW) {
            return Err(TokenError::NotBefore { not_before });
        }
    }
    if now >= expires_at {
        return Err(TokenError::Expired {
            expired_at: expires_at,
        });
    }
    Ok(VerifiedToken {
        jti: claims.jti,
        subject,
        groups: claims.groups.unwrap_or_default(),
        expires_at,
        key_id,
    })
}

/// Seconds since the epoch as a [`Timestamp`], if it fits in milliseconds.
fn seconds_to_timestamp(seconds: i64) -> Option<Timestamp> {
    seconds.checked_mul(1000).map(Timestamp::from_millis)
}

/// Check the token's shape and its header's algorithm, before any key is tried.
fn check_header(token: &str) -> Result<(), TokenError> {
    if token.len() > MAX_TOKEN_LENGTH {
        return Err(TokenError::Malformed {
            problem: "it is longer than 8 KiB",
        });
    }
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 || parts.iter().any(|part| part.is_empty()) {
        return Err(TokenError::Malformed {
            problem: "it is not three base64url parts separated by dots",
        });
    }
    let header_bytes = URL_SAFE_NO_PAD
        .decode(parts[0])
        .map_err(|_| TokenError::Malformed {
            problem: "its header is not base64url",
        })?;
    let header: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&header_bytes)
        .map_err(|_| TokenError::Malformed {
            problem: "its header is not a JSON object",
        })?;
    let algorithm = match header.get("alg") {
        Some(serde_json::Value::String(algorithm)) => algorithm,
        _ => {
            return Err(TokenError::Malformed {
                problem: "its header has no `alg`",
            });
        }
    };
    if algorithm != "EdDSA" {
        return Err(TokenError::UnsupportedAlgorithm {
            algorithm: printable_prefix(algorithm),
        });
    }
    if header.contains_key("crit") {
        return Err(TokenError::Malformed {
            problem: "its header has `crit` extensions, which approver tokens do not use",
        });
    }
    Ok(())
}

/// A failure of the JWT library other than a bad signature: the token is not well formed.
fn malformed_after_header(error: &jsonwebtoken::errors::Error) -> TokenError {
    use jsonwebtoken::errors::ErrorKind;
    let problem = match error.kind() {
        ErrorKind::Json(_) | ErrorKind::InvalidClaimFormat(_) | ErrorKind::Utf8(_) => {
            "its claims are not a JSON object with `sub` a string, `groups` an array of strings, and `iat` and `exp` whole seconds"
        }
        ErrorKind::Base64(_) => "a part is not base64url",
        ErrorKind::InvalidAlgorithm => "its header does not name `EdDSA`",
        _ => "it is not a signed JWT",
    };
    TokenError::Malformed { problem }
}

/// At most 16 printable ASCII characters of `text`, for echoing a header value safely.
fn printable_prefix(text: &str) -> String {
    let mut shown: String = text
        .chars()
        .filter(|character| character.is_ascii_graphic() || *character == ' ')
        .take(16)
        .collect();
    if text.chars().count() > 16 {
        shown.push('…');
    }
    shown
}

/// Why a token could not be issued or verified, or a key could not be read or written.
///
/// Each variant has a stable [`TokenError::reason`]. Messages never contain the token text, nor
/// any key material. A refused token authorizes nothing; retrying with the same token gives the
/// same answer, except [`TokenError::NotYetValid`], which may pass once the clocks agree.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token is not a well-formed JWT of three base64url parts with JSON header and claims.
    #[error(
        "the approver token is malformed: {problem}: issue a new one with `countersign approver token`"
    )]
    Malformed {
        /// What is wrong with it (never the token itself).
        problem: &'static str,
    },
    /// The header's `alg` is not `EdDSA`: `none`, `HS256` and the rest are refused.
    #[error(
        "the approver token is signed with `{algorithm}`, not `EdDSA`: approver tokens are Ed25519 only; issue one with `countersign approver token`"
    )]
    UnsupportedAlgorithm {
        /// The `alg` found, cut to 16 printable characters.
        algorithm: String,
    },
    /// No configured key verifies the signature: signed by another key, or altered since.
    #[error(
        "the approver token's signature does not verify under any of the {keys_tried} configured approver keys: it was signed by another key or altered; issue it with a key whose public half is in the policy's `approvers.keys`"
    )]
    BadSignature {
        /// How many keys were tried.
        keys_tried: usize,
    },
    /// `now` is at or after the token's `exp`.
    #[error("the approver token expired at {expired_at}: issue a new one")]
    Expired {
        /// The token's `exp`.
        expired_at: Timestamp,
    },
    /// The token's `iat` is more than [`CLOCK_SKEW`] in the future.
    #[error(
        "the approver token was issued in the future, at {issued_at}: check the clocks of the issuing and the verifying machines"
    )]
    NotYetValid {
        /// The token's `iat`.
        issued_at: Timestamp,
    },
    /// The lifetime (`ttl` at issue, `exp - iat` at verification) is over [`MAX_LIFETIME`].
    #[error("an approver token lives at most 24h, this one {}: issue one with a lifetime of 24h or less", humantime::format_duration(*lifetime))]
    LifetimeTooLong {
        /// The lifetime asked for or found.
        lifetime: Duration,
    },
    /// The `ttl` asked for is under one second.
    #[error("an approver token must live at least 1s, not {}: give a lifetime such as 8h", humantime::format_duration(*lifetime))]
    LifetimeTooShort {
        /// The lifetime asked for.
        lifetime: Duration,
    },
    /// The subject is missing or empty.
    #[error("the approver token names no subject: issue it with a subject such as `human:alice`")]
    MissingSubject,
    /// The subject asked for at issue is not of the one shape of an approver id
    /// ([`crate::approver::ApproverId`]): every answer made with such a token would be refused,
    /// so it is not issued.
    #[error("cannot issue an approver token for this subject: {0}")]
    InvalidSubject(crate::approver::ApproverIdError),
    /// The token's `nbf` (RFC 7519 §4.1.5) is more than [`CLOCK_SKEW`] in the future.
    #[error(
        "the approver token is not valid before {not_before}: use it then, or check the clocks of the issuing and the verifying machines"
    )]
    NotBefore {
        /// The token's `nbf`.
        not_before: Timestamp,
    },
    /// A group name to issue holds whitespace or control characters: it could never match the
    /// policy's `approvers`.
    #[error(
        "an approver group name holds whitespace, control or invisible characters (`{group}`): give single-word group names such as `finance`, as the policy's `directory` does"
    )]
    InvalidGroup {
        /// The group, with control characters escaped.
        group: String,
    },
    /// A required claim (`exp`, `iat` or `jti`) is missing.
    #[error(
        "the approver token has no `{claim}` claim: issue a new one with `countersign approver token`"
    )]
    MissingClaim {
        /// The claim's name.
        claim: &'static str,
    },
    /// A group name to issue is empty.
    #[error("an approver group name is empty: give group names such as `finance`")]
    EmptyGroup,
    /// No public keys were given to verify with.
    #[error(
        "no approver keys are configured, so no approver token can verify: list public keys under `approvers.keys` in the policy (`countersign keygen` makes a key pair)"
    )]
    NoKeysConfigured,
    /// A key (text or file) is not a usable Ed25519 key of the expected kind.
    #[error("{}: not a usable Ed25519 key: {problem}", key_subject(path.as_deref()))]
    InvalidKey {
        /// The file it came from, if any.
        path: Option<PathBuf>,
        /// What is wrong (never the key material).
        problem: &'static str,
    },
    /// A private key was given where a public key belongs.
    #[error("{} holds a private key where a public key belongs (a policy's `approvers.keys`, `--approver-key`, `--key` of `verify`): never give a secret there; give the `.pub` file `countersign keygen` wrote, or the `ed25519:` form it printed", key_subject(path.as_deref()))]
    PrivateKeyGiven {
        /// The file it came from, if any.
        path: Option<PathBuf>,
    },
    /// A public key was given where the private key belongs.
    #[error("`{}` holds a public key, which cannot sign: give the private key file `countersign keygen` wrote (without `.pub`)", path.display())]
    PublicKeyGiven {
        /// The file.
        path: PathBuf,
    },
    /// A key file cannot be read.
    #[error("cannot read the key file `{}`: {}", path.display(), describe_io(error))]
    KeyFileUnreadable {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        error: std::io::Error,
    },
    /// A key file to write already exists; nothing was written.
    #[error("`{}` already exists: keys are never overwritten; choose another path, or move the old key pair away first", path.display())]
    KeyFileExists {
        /// The existing file.
        path: PathBuf,
    },
    /// A key file cannot be written; no half of the pair is left behind.
    #[error("cannot write the key file `{}`: {}", path.display(), describe_io(error))]
    KeyFileUnwritable {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        error: std::io::Error,
    },
    /// No key could be generated or encoded.
    #[error("cannot generate a key: {problem}")]
    KeyGenerationFailed {
        /// What failed.
        problem: String,
    },
    /// Signing failed: a bug of ours.
    #[error("cannot sign the approver token: {problem}: this is a bug, please report it")]
    SigningFailed {
        /// What the JWT library said.
        problem: String,
    },
}

/// An I/O error in words that fit a lowercase message.
fn describe_io(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound => "there is no such file".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        std::io::ErrorKind::IsADirectory => "it is a folder".to_owned(),
        _ => error.to_string(),
    }
}

/// The start of a key error message: "`PATH` holds " or "the key is ".
/// What a key error is about: the file, or "the key" given as text.
fn key_subject(path: Option<&Path>) -> String {
    match path {
        Some(path) => format!("`{}`", path.display()),
        None => "the key".to_owned(),
    }
}

impl TokenError {
    /// A stable, machine-readable code for this error, such as `expired` or `bad_signature`.
    pub fn reason(&self) -> &'static str {
        match self {
            TokenError::Malformed { .. } => "malformed",
            TokenError::UnsupportedAlgorithm { .. } => "unsupported_algorithm",
            TokenError::BadSignature { .. } => "bad_signature",
            TokenError::Expired { .. } => "expired",
            TokenError::NotYetValid { .. } | TokenError::NotBefore { .. } => "not_yet_valid",
            TokenError::InvalidGroup { .. } => "invalid_group",
            TokenError::LifetimeTooLong { .. } => "lifetime_too_long",
            TokenError::LifetimeTooShort { .. } => "lifetime_too_short",
            TokenError::MissingSubject => "missing_subject",
            TokenError::InvalidSubject(_) => "invalid_subject",
            TokenError::MissingClaim { .. } => "missing_claim",
            TokenError::EmptyGroup => "empty_group",
            TokenError::NoKeysConfigured => "no_keys_configured",
            TokenError::InvalidKey { .. } => "invalid_key",
            TokenError::PrivateKeyGiven { .. } => "private_key_given",
            TokenError::PublicKeyGiven { .. } => "public_key_given",
            TokenError::KeyFileUnreadable { .. } => "key_file_unreadable",
            TokenError::KeyFileExists { .. } => "key_file_exists",
            TokenError::KeyFileUnwritable { .. } => "key_file_unwritable",
            TokenError::KeyGenerationFailed { .. } => "key_generation_failed",
            TokenError::SigningFailed { .. } => "signing_failed",
        }
    }
}

#[cfg(test)]
mod tests;
