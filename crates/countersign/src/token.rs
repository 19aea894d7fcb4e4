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

/// The public half of an Ed25519 key pair (RFC 8032): what a policy's `approvers.keys` lists.
///
/// Two text forms are accepted by [`PublicKey::parse`]: inline, `ed25519:` followed by the 32 raw
/// key bytes in base64url without padding (43 characters), as [`Display`](fmt::Display) shows it;
/// or a PEM `-----BEGIN PUBLIC KEY-----` block (SubjectPublicKeyInfo, RFC 8410), as
/// [`PublicKey::to_pem`] writes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PublicKey(ed25519_dalek::VerifyingKey);

impl PublicKey {
    /// Parse a public key from its inline `ed25519:` form or from PEM text.
    ///
    /// # Errors
    ///
    /// [`TokenError::PrivateKeyGiven`] if the text is a private key, and
    /// [`TokenError::InvalidKey`] if it is neither form, or is a small-order ("weak") point that
    /// would let signatures be forged.
    pub fn parse(text: &str) -> Result<PublicKey, TokenError> {
        parse_public_key(text, None)
    }

    /// Read a public-key file: PEM or the inline form, surrounding whitespace ignored.
    ///
    /// # Errors
    ///
    /// [`TokenError::KeyFileUnreadable`] if the file cannot be read,
    /// [`TokenError::PrivateKeyGiven`] if it holds a private key (a policy lists public keys
    /// only, never a secret), and [`TokenError::InvalidKey`] if it holds no public key.
    pub fn load(path: &Path) -> Result<PublicKey, TokenError> {
        let text = read_key_file(path)?;
        parse_public_key(&text, Some(path))
    }

    /// A short id for messages and logs: the first 16 lowercase hex digits of SHA-256 over the
    /// 32 raw key bytes.
    pub fn key_id(&self) -> KeyId {
        let digest = Sha256::digest(self.0.as_bytes());
        let mut id = hex::encode(digest);
        id.truncate(16);
        KeyId(id)
    }

    /// The key as a PEM `-----BEGIN PUBLIC KEY-----` block (SubjectPublicKeyInfo), ending in a
    /// newline.
    pub fn to_pem(&self) -> String {
        // INVARIANT (spki-encodes): encoding a valid Ed25519 public key as SPKI PEM cannot fail;
        // the inline form is written instead should the library ever refuse.
        self.0
            .to_public_key_pem(LineEnding::LF)
            .unwrap_or_else(|_| format!("{self}\n"))
    }
}

impl fmt::Display for PublicKey {
    /// The inline form: `ed25519:` and 43 base64url characters.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{INLINE_PREFIX}{}",
            URL_SAFE_NO_PAD.encode(self.0.as_bytes())
        )
    }
}

impl std::str::FromStr for PublicKey {
    type Err = TokenError;

    fn from_str(text: &str) -> Result<PublicKey, TokenError> {
        PublicKey::parse(text)
    }
}

/// The short id of a [`PublicKey`]: 16 lowercase hex digits (see [`PublicKey::key_id`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(String);

impl KeyId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The secret half of an Ed25519 key pair, which issues tokens.
///
/// Kept in a PKCS#8 PEM file (`-----BEGIN PRIVATE KEY-----`, RFC 5958 and RFC 8410) readable by
/// its owner only. Its `Debug` output never shows the key.
pub struct SigningKey(ed25519_dalek::SigningKey);

impl SigningKey {
    /// Read the private-key file [`write_keypair`] wrote.
    ///
    /// # Errors
    ///
    /// [`TokenError::KeyFileUnreadable`] if the file cannot be read,
    /// [`TokenError::PublicKeyGiven`] if it holds a public key, and [`TokenError::InvalidKey`]
    /// if it holds no Ed25519 private key in PKCS#8 PEM.
    pub fn load(path: &Path) -> Result<SigningKey, TokenError> {
        let text = read_key_file(path)?;
        let text = text.trim();
        if text.starts_with(INLINE_PREFIX) || text.contains("-----BEGIN PUBLIC KEY-----") {
            return Err(TokenError::PublicKeyGiven {
                path: path.to_path_buf(),
            });
        }
        ed25519_dalek::SigningKey::from_pkcs8_pem(text)
            .map(SigningKey)
            .map_err(|_| TokenError::InvalidKey {
                path: Some(path.to_path_buf()),
                problem: "expected an Ed25519 private key in PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), as `countersign keygen` writes it",
            })
    }

    /// The public half, to list in a policy.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// The key as PKCS#8 PEM, ending in a newline. The text is the secret: write it only to a
    /// file readable by its owner.
    fn to_pkcs8_pem(&self) -> Result<String, TokenError> {
        self.0
            .to_pkcs8_pem(LineEnding::LF)
            .map(|pem| pem.as_str().to_owned())
            .map_err(|error| TokenError::KeyGenerationFailed {
                problem: error.to_string(),
            })
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("public_key", &self.public_key())
            .finish_non_exhaustive()
    }
}

/// A fresh key pair from the operating system's random number generator.
///
/// # Errors
///
/// [`TokenError::KeyGenerationFailed`] if the operating system gives no random bytes.
pub fn generate_keypair() -> Result<SigningKey, TokenError> {
    use rand::TryRngCore;
    let mut secret = [0_u8; ed25519_dalek::SECRET_KEY_LENGTH];
    rand::rngs::OsRng
        .try_fill_bytes(&mut secret)
        .map_err(|error| TokenError::KeyGenerationFailed {
            problem: error.to_string(),
        })?;
    let key = ed25519_dalek::SigningKey::from_bytes(&secret);
    secret.fill(0);
    Ok(SigningKey(key))
}

/// The files [`write_keypair`] wrote.
#[derive(Debug)]
pub struct KeyPairFiles {
    /// The private key, PKCS#8 PEM, mode 0600 on Unix: the `out` path given.
    pub private_key_file: PathBuf,
    /// The public key, SPKI PEM: the `out` path with `.pub` appended.
    pub public_key_file: PathBuf,
    /// The public key written.
    pub public_key: PublicKey,
}

/// Generate a key pair and write it: the private key to `out` (PKCS#8 PEM, created with mode 0600
/// on Unix) and the public key to `out` + `.pub` (SPKI PEM, `-----BEGIN PUBLIC KEY-----`).
///
/// Never overwrites: both files are created new. Never leaves one without the other: if the
/// public-key file cannot be written, the private-key file is removed again.
///
/// # Errors
///
/// [`TokenError::KeyFileExists`] if either file exists (nothing is written),
/// [`TokenError::KeyFileUnwritable`] if a file cannot be written, and
/// [`TokenError::KeyGenerationFailed`] if no key could be made.
pub fn write_keypair(out: &Path) -> Result<KeyPairFiles, TokenError> {
    let public_key_file = {
        let mut name = out.as_os_str().to_owned();
        name.push(".pub");
        PathBuf::from(name)
    };
    // Checked first so that an existing file refuses before anything is created; the
    // create-new opens below still refuse if either file appears in between.
    for path in [out, public_key_file.as_path()] {
        if path.symlink_metadata().is_ok() {
            return Err(TokenError::KeyFileExists {
                path: path.to_path_buf(),
            });
        }
    }
    let key = generate_keypair()?;
    let public_key = key.public_key();
    let private_pem = key.to_pkcs8_pem()?;
    write_new_file(out, private_pem.as_bytes(), 0o600)?;
    if let Err(error) = write_new_file(&public_key_file, public_key.to_pem().as_bytes(), 0o644) {
        // Best effort: the private key is useless without its public half being known.
        let _ = std::fs::remove_file(out);
        return Err(error);
    }
    Ok(KeyPairFiles {
        private_key_file: out.to_path_buf(),
        public_key_file,
        public_key,
    })
}

/// Create `path` (refusing an existing one) with `mode` on Unix, write `bytes` and sync. A
/// partly written file is removed.
fn write_new_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), TokenError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::AlreadyExists {
            TokenError::KeyFileExists {
                path: path.to_path_buf(),
            }
        } else {
            TokenError::KeyFileUnwritable {
                path: path.to_path_buf(),
                error,
            }
        }
    })?;
    if let Err(error) = file.write_all(bytes).and_then(|()| file.sync_all()) {
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(TokenError::KeyFileUnwritable {
            path: path.to_path_buf(),
            error,
        });
    }
    Ok(())
}

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
/// [`TokenError::MissingSubject`] for an empty subject, [`TokenError::EmptyGroup`] for an empty
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
    if groups.iter().any(|group| group.trim().is_empty()) {
        return Err(TokenError::EmptyGroup);
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
        jti: Some(crate::store::random_id("tok_")),
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
    jti: Option<String>,
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
/// 4. `exp` and `iat` are present, in whole seconds, with `iat < exp` and `exp - iat` at most
///    [`MAX_LIFETIME`]; `sub` is a non-empty string; `groups`, if present, is an array of strings;
/// 5. `iat` is at most [`CLOCK_SKEW`] after `now`, and `now` is before `exp`.
///
/// Other claims (`aud`, …) are ignored; `jti` is returned, and checked against the store's
/// deny-list by the store (issue #31), not here.
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

/// Parse public-key text; `path` is where it came from, for messages.
fn parse_public_key(text: &str, path: Option<&Path>) -> Result<PublicKey, TokenError> {
    let text = text.trim();
    let invalid = |problem: &'static str| TokenError::InvalidKey {
        path: path.map(Path::to_path_buf),
        problem,
    };
    if text.contains("PRIVATE KEY-----") {
        return Err(TokenError::PrivateKeyGiven {
            path: path.map(Path::to_path_buf),
        });
    }
    let key = if let Some(encoded) = text.strip_prefix(INLINE_PREFIX) {
        let bytes = URL_SAFE_NO_PAD.decode(encoded).map_err(|_| {
            invalid("after `ed25519:` expected 43 base64url characters without padding")
        })?;
        let bytes: [u8; ed25519_dalek::PUBLIC_KEY_LENGTH] = bytes.try_into().map_err(|_| {
            invalid("after `ed25519:` expected the 32 bytes of an Ed25519 public key")
        })?;
        ed25519_dalek::VerifyingKey::from_bytes(&bytes)
            .map_err(|_| invalid("the bytes after `ed25519:` are not an Ed25519 public key"))?
    } else if text.starts_with("-----BEGIN PUBLIC KEY-----") {
        ed25519_dalek::VerifyingKey::from_public_key_pem(text)
            .map_err(|_| invalid("the PEM block is not an Ed25519 public key"))?
    } else {
        return Err(invalid(
            "expected `ed25519:` and 43 base64url characters, or a PEM `-----BEGIN PUBLIC KEY-----` block",
        ));
    };
    if key.is_weak() {
        return Err(invalid(
            "it is a small-order (weak) Ed25519 key, under which signatures can be forged",
        ));
    }
    Ok(PublicKey(key))
}

/// Read a key file as text, refusing one larger than any key file.
fn read_key_file(path: &Path) -> Result<String, TokenError> {
    let unreadable = |error| TokenError::KeyFileUnreadable {
        path: path.to_path_buf(),
        error,
    };
    let metadata = std::fs::metadata(path).map_err(unreadable)?;
    if metadata.len() > MAX_KEY_FILE_LENGTH {
        return Err(TokenError::InvalidKey {
            path: Some(path.to_path_buf()),
            problem: "the file is larger than 64 KiB, far more than a key",
        });
    }
    let bytes = std::fs::read(path).map_err(unreadable)?;
    String::from_utf8(bytes).map_err(|_| TokenError::InvalidKey {
        path: Some(path.to_path_buf()),
        problem: "the file is not text",
    })
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
    /// A required claim (`exp` or `iat`) is missing.
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
    #[error("{}not a usable Ed25519 key: {problem}", key_place(path.as_deref()))]
    InvalidKey {
        /// The file it came from, if any.
        path: Option<PathBuf>,
        /// What is wrong (never the key material).
        problem: &'static str,
    },
    /// A private key was given where a public key belongs.
    #[error("{}a private key: a policy lists public keys only, never a secret: list the `.pub` file `countersign keygen` wrote, or the `ed25519:` form it printed", key_place(path.as_deref()))]
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
fn key_place(path: Option<&Path>) -> String {
    match path {
        Some(path) => format!("`{}` holds ", path.display()),
        None => "the key is ".to_owned(),
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
            TokenError::NotYetValid { .. } => "not_yet_valid",
            TokenError::LifetimeTooLong { .. } => "lifetime_too_long",
            TokenError::LifetimeTooShort { .. } => "lifetime_too_short",
            TokenError::MissingSubject => "missing_subject",
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
