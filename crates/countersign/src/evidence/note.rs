//! Signed notes: text signed by one or more Ed25519 keys, in the format of C2SP `signed-note`
//! (<https://c2sp.org/signed-note>) and Go's `golang.org/x/mod/sumdb/note`, which checkpoints
//! ([`super::checkpoint`]) use.
//!
//! A signed note is the text (ending in a newline), a blank line, and one line per signature:
//! `— <key name> <base64(key id || signature)>` and a newline (the dash is U+2014). The key id
//! is 4 bytes, big-endian: the first 4 bytes of `SHA-256(key name || 0x0A || 0x01 || the 32
//! public key bytes)` (0x01: the Ed25519 algorithm). The signature is Ed25519 (RFC 8032) over
//! the text, its final newline included and the blank line not. A note is valid UTF-8 with no
//! control character but newline, and has at most [`MAX_SIGNATURES`] signature lines.
//!
//! A key name is non-empty and has no Unicode white space and no `+`. A verifier key is written
//! `<name>+<8 hex digits of the key id>+<base64(0x01 || public key)>`, as Go's `note.NewVerifier`
//! reads it ([`NoteVerifier`]'s `Display` and [`NoteVerifier::parse`]).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};

use crate::token::{PublicKey, SigningKey};

/// The most signature lines a note may have (as Go's `note.Open`).
pub const MAX_SIGNATURES: usize = 100;

/// The algorithm byte of an Ed25519 key in a key id and a verifier key.
const ALGORITHM_ED25519: u8 = 0x01;

/// What starts a signature line: an em dash (U+2014) and a space.
const SIGNATURE_PREFIX: &str = "\u{2014} ";

/// Why a note could not be signed or opened.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    /// The note is not in the signed-note format.
    #[error("the signed note is malformed: {problem}")]
    Malformed {
        /// What is wrong.
        problem: &'static str,
    },
    /// A key name that the format does not allow.
    #[error(
        "`{name}` cannot name a note key: a key name is non-empty and has no spaces and no `+`"
    )]
    InvalidKeyName {
        /// The name.
        name: String,
    },
    /// A verifier key that is not `<name>+<hex key id>+<base64 key>`.
    #[error("the verifier key is malformed: {problem}")]
    MalformedVerifierKey {
        /// What is wrong.
        problem: &'static str,
    },
    /// The note carries a signature by the verifier's key (name and key id) that does not verify:
    /// the text was changed after signing, or the signature was.
    #[error(
        "the signature by `{name}` (key id {key_id:08x}) does not verify: the note was changed after it was signed"
    )]
    InvalidSignature {
        /// The key name.
        name: String,
        /// The key id.
        key_id: u32,
    },
    /// No signature in the note is by the verifier's key.
    #[error(
        "the note is not signed by `{name}` with key id {key_id:08x}: it carries only {found}: it was signed with another key, or under another name"
    )]
    NoVerifiedSignature {
        /// The key name looked for.
        name: String,
        /// The key id looked for.
        key_id: u32,
        /// The signatures present, as `name+keyid`, comma-separated.
        found: String,
    },
}

/// Is `name` a valid key name (non-empty, no Unicode white space, no `+`)?
pub fn is_valid_key_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(char::is_whitespace) && !name.contains('+')
}

/// The 4-byte key id of an Ed25519 key named `name`: the first 4 bytes, big-endian, of
/// `SHA-256(name || 0x0A || 0x01 || key)`.
pub fn key_id(name: &str, key: &PublicKey) -> u32 {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update(b"\n");
    hasher.update([ALGORITHM_ED25519]);
    hasher.update(key.to_bytes());
    let digest = hasher.finalize();
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// One key that can verify a note's signature: a name and an Ed25519 public key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteVerifier {
    name: String,
    key: PublicKey,
    key_id: u32,
}

impl NoteVerifier {
    /// The verifier of `key` under `name`.
    ///
    /// # Errors
    ///
    /// [`NoteError::InvalidKeyName`] if the name is not a valid key name.
    pub fn new(name: &str, key: PublicKey) -> Result<NoteVerifier, NoteError> {
        if !is_valid_key_name(name) {
            return Err(NoteError::InvalidKeyName {
                name: name.to_owned(),
            });
        }
        let key_id = key_id(name, &key);
        Ok(NoteVerifier {
            name: name.to_owned(),
            key,
            key_id,
        })
    }

    /// Parse a verifier key, `<name>+<8 hex digits>+<base64(0x01 || 32 key bytes)>`.
    ///
    /// # Errors
    ///
    /// [`NoteError::MalformedVerifierKey`] for any other shape, a key id that is not the key's,
    /// an algorithm other than Ed25519, or a weak key.
    pub fn parse(text: &str) -> Result<NoteVerifier, NoteError> {
        let malformed = |problem| NoteError::MalformedVerifierKey { problem };
        let mut parts = text.splitn(3, '+');
        let (Some(name), Some(id_hex), Some(key_base64)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed("expected `<name>+<key id>+<key>`"));
        };
        if id_hex.len() != 8 || !id_hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return Err(malformed("the key id is not 8 hex digits"));
        }
        let id = u32::from_str_radix(id_hex, 16).map_err(|_| malformed("the key id is not hex"))?;
        let bytes = STANDARD
            .decode(key_base64)
            .map_err(|_| malformed("the key is not standard base64"))?;
        let (algorithm, key_bytes) = bytes.split_first().ok_or(malformed("the key is empty"))?;
        if *algorithm != ALGORITHM_ED25519 {
            return Err(malformed("the key's algorithm is not Ed25519 (1)"));
        }
        let key_bytes = <[u8; 32]>::try_from(key_bytes)
            .map_err(|_| malformed("an Ed25519 key has 32 bytes"))?;
        let key = PublicKey::from_bytes(key_bytes)
            .ok_or(malformed("the bytes are not a usable Ed25519 public key"))?;
        let verifier = NoteVerifier::new(name, key)
            .map_err(|_| malformed("the name is empty or has spaces or `+`"))?;
        if verifier.key_id != id {
            return Err(malformed("the key id does not match the name and key"));
        }
        Ok(verifier)
    }

    /// The key name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The 4-byte key id.
    pub fn key_id(&self) -> u32 {
        self.key_id
    }

    /// The public key.
    pub fn key(&self) -> &PublicKey {
        &self.key
    }
}

impl std::fmt::Display for NoteVerifier {
    /// The verifier key: `<name>+<8 hex digits>+<base64(0x01 || key)>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut bytes = vec![ALGORITHM_ED25519];
        bytes.extend_from_slice(&self.key.to_bytes());
        write!(
            f,
            "{}+{:08x}+{}",
            self.name,
            self.key_id,
            STANDARD.encode(bytes)
        )
    }
}

/// One signature line of a note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteSignature {
    /// The key name.
    pub name: String,
    /// The key id.
    pub key_id: u32,
    /// The base64 of the key id and the signature, as written.
    pub base64: String,
}

/// A note whose signature by the verifier's key was checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The text, ending in a newline.
    pub text: String,
    /// The verified signature.
    pub verified: NoteSignature,
    /// Signatures by other keys (a witness's cosignature, for example), kept but not checked.
    pub unverified: Vec<NoteSignature>,
}

/// Sign `text` (which must end in a newline) with `key` under `name`: the text, a blank line
/// and one signature line.
///
/// # Errors
///
/// [`NoteError::InvalidKeyName`] for a bad name; [`NoteError::Malformed`] when the text does not
/// end in a newline or has a control character other than newline.
pub fn sign(text: &str, name: &str, key: &SigningKey) -> Result<String, NoteError> {
    let verifier = NoteVerifier::new(name, key.public_key())?;
    if !text.ends_with('\n') {
        return Err(NoteError::Malformed {
            problem: "the text does not end in a newline",
        });
    }
    check_characters(text)?;
    let mut signature = verifier.key_id.to_be_bytes().to_vec();
    signature.extend_from_slice(&key.sign(text.as_bytes()));
    Ok(format!(
        "{text}\n{SIGNATURE_PREFIX}{name} {}\n",
        STANDARD.encode(signature)
    ))
}

/// Refuse control characters other than newline.
fn check_characters(text: &str) -> Result<(), NoteError> {
    if text
        .chars()
        .any(|character| character < '\u{20}' && character != '\n')
    {
        return Err(NoteError::Malformed {
            problem: "it has a control character other than newline",
        });
    }
    Ok(())
}

/// Open a signed note: parse it and check its signature by `verifier`'s key. Signatures by
/// other keys are kept unchecked ([`Note::unverified`]); repeated identical lines count once.
///
/// # Errors
///
/// [`NoteError::Malformed`] when the bytes are not a signed note; [`NoteError::InvalidSignature`]
/// when the verifier's signature does not verify; [`NoteError::NoVerifiedSignature`] when there
/// is none by the verifier's key.
pub fn open(message: &[u8], verifier: &NoteVerifier) -> Result<Note, NoteError> {
    let malformed = |problem| NoteError::Malformed { problem };
    let message = std::str::from_utf8(message).map_err(|_| malformed("it is not UTF-8"))?;
    check_characters(message)?;
    let split = message
        .rfind("\n\n")
        .ok_or(malformed("no blank line before the signatures"))?;
    let (text, signatures) = (&message[..=split], &message[split + 2..]);
    if signatures.is_empty() || !signatures.ends_with('\n') {
        return Err(malformed("the signature lines do not end in a newline"));
    }
    let mut verified: Option<NoteSignature> = None;
    let mut unverified: Vec<NoteSignature> = Vec::new();
    for (count, line) in signatures[..signatures.len() - 1].split('\n').enumerate() {
        if count >= MAX_SIGNATURES {
            return Err(malformed("it has more than 100 signatures"));
        }
        let line = line
            .strip_prefix(SIGNATURE_PREFIX)
            .ok_or(malformed("a signature line does not start with `— `"))?;
        let (name, base64) = line.split_once(' ').unwrap_or((line, ""));
        let bytes = STANDARD
            .decode(base64)
            .map_err(|_| malformed("a signature is not standard base64"))?;
        if !is_valid_key_name(name) || bytes.len() < 5 {
            return Err(malformed(
                "a signature line has a bad key name or a short signature",
            ));
        }
        let key_id = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let signature = NoteSignature {
            name: name.to_owned(),
            key_id,
            base64: base64.to_owned(),
        };
        if name != verifier.name || key_id != verifier.key_id {
            if !unverified.contains(&signature) {
                unverified.push(signature);
            }
            continue;
        }
        if verified.is_some() {
            continue;
        }
        if !verifier.key.verifies(text.as_bytes(), &bytes[4..]) {
            return Err(NoteError::InvalidSignature {
                name: name.to_owned(),
                key_id,
            });
        }
        verified = Some(signature);
    }
    let Some(verified) = verified else {
        let found = unverified
            .iter()
            .map(|signature| format!("{}+{:08x}", signature.name, signature.key_id))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(NoteError::NoVerifiedSignature {
            name: verifier.name.clone(),
            key_id: verifier.key_id,
            found,
        });
    };
    Ok(Note {
        text: text.to_owned(),
        verified,
        unverified,
    })
}

#[cfg(test)]
mod tests;
