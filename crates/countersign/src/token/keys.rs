//! Approver keys: the Ed25519 [`PublicKey`] a verifier trusts and the [`SigningKey`] an
//! issuer holds, their PEM files, and [`write_keypair`].

use super::*;

/// The public half of an Ed25519 key pair (RFC 8032): what a policy's `approvers.keys` lists.
///
/// Two text forms are accepted by [`PublicKey::parse`]: inline, `ed25519:` followed by the 32 raw
/// key bytes in base64url without padding (43 characters), as [`Display`](fmt::Display) shows it;
/// or a PEM `-----BEGIN PUBLIC KEY-----` block (SubjectPublicKeyInfo, RFC 8410), as
/// [`PublicKey::to_pem`] writes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PublicKey(pub(super) ed25519_dalek::VerifyingKey);

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

    /// The key with these 32 raw bytes (RFC 8032 encoding), unless they are not a point on the
    /// curve or are a small-order ("weak") point.
    pub fn from_bytes(bytes: [u8; 32]) -> Option<PublicKey> {
        ed25519_dalek::VerifyingKey::from_bytes(&bytes)
            .ok()
            .filter(|key| !key.is_weak())
            .map(PublicKey)
    }

    /// The 32 raw key bytes (RFC 8032 encoding).
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes()
    }

    /// Does `signature` (64 bytes, RFC 8032) sign `message` under this key? Checked strictly
    /// (ed25519-dalek's `verify_strict`: no small-order key or `R`, canonical `S`), as signed
    /// notes and checkpoints are ([`crate::evidence::note`]).
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        let Ok(signature) = ed25519_dalek::Signature::from_slice(signature) else {
            return false;
        };
        self.0.verify_strict(message, &signature).is_ok()
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
pub struct KeyId(pub(super) String);

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
pub struct SigningKey(pub(super) ed25519_dalek::SigningKey);

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

    /// The Ed25519 signature (RFC 8032, 64 bytes) of `message`: what a signed note or a
    /// checkpoint carries ([`crate::evidence::note`]).
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        use ed25519_dalek::Signer;
        self.0.sign(message).to_bytes()
    }

    /// The key whose 32-byte RFC 8032 seed is `seed` (test vectors publish keys this way).
    #[cfg(test)]
    pub(crate) fn from_seed(seed: [u8; 32]) -> SigningKey {
        SigningKey(ed25519_dalek::SigningKey::from_bytes(&seed))
    }

    /// The public half, to list in a policy.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// The key as PKCS#8 PEM, ending in a newline. The text is the secret: write it only to a
    /// file readable by its owner.
    pub(super) fn to_pkcs8_pem(&self) -> Result<String, TokenError> {
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
pub(super) fn write_new_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), TokenError> {
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

/// Parse public-key text; `path` is where it came from, for messages.
pub(super) fn parse_public_key(text: &str, path: Option<&Path>) -> Result<PublicKey, TokenError> {
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
pub(super) fn read_key_file(path: &Path) -> Result<String, TokenError> {
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
