//! Sign-in with an identity provider's JWT (OIDC ID or access token), verified against a
//! configured JWKS (`--jwks FILE_OR_URL --jwt-issuer ISS --jwt-audience AUD`).
//!
//! - The key set comes from a file, or from an `http://` URL (fetched on start and again every
//!   [`OidcSignIn::max_age`]; a failed refresh keeps the last good set and logs a warning that
//!   names the source, never a token). `https://` is refused: the JWKS fetch does not use TLS
//!   yet (its client comes from `countersign_http`, trusting no authority), so fetch the
//!   provider's JWKS into a file, or through a local proxy on loopback.
//! - The token's header `kid` picks the key; an unknown `kid` is refused. Only `RS256`,
//!   `ES256` and `EdDSA` are accepted (never `none` or `HS*`), and the algorithm must fit the
//!   key's type (and the key's own `alg`, when it has one).
//! - `iss` and `aud` must match; `exp` is required and `nbf` honoured, both with
//!   [`CLOCK_SKEW`] of allowance, judged by the service's clock; `sub` is the identity; groups
//!   come from a configured claim (an array of strings, `groups` by default).
//!
//! No message repeats the token.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign::Timestamp;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

/// How long a fetched key set is used before it is fetched again, unless configured otherwise.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(10 * 60);

/// Allowance for clocks that disagree, on `exp` and `nbf`: 60 seconds.
pub const CLOCK_SKEW: Duration = Duration::from_secs(60);

/// The longest token read: 16 KiB (ID tokens with many groups run to a few KiB).
const MAX_TOKEN_LENGTH: usize = 16 * 1024;

/// The largest key set read: 1 MiB.
const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// How long one fetch of the key set may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the key set comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JwksSource {
    /// A JWKS file, read again at every refresh.
    File(PathBuf),
    /// An `http://` URL.
    Url(String),
}

impl JwksSource {
    /// `--jwks`: an `http://` URL or a file path.
    ///
    /// # Errors
    ///
    /// [`JwksError::HttpsUnsupported`] for an `https://` URL.
    pub fn parse(text: &str) -> Result<JwksSource, JwksError> {
        let text = text.trim();
        let lower = text.to_ascii_lowercase();
        if lower.starts_with("https://") {
            return Err(JwksError::HttpsUnsupported {
                url: redacted(text),
            });
        }
        if lower.starts_with("http://") {
            return Ok(JwksSource::Url(text.to_owned()));
        }
        Ok(JwksSource::File(PathBuf::from(text)))
    }
}

impl std::fmt::Display for JwksSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JwksSource::File(path) => write!(f, "{}", path.display()),
            JwksSource::Url(url) => f.write_str(&redacted(url)),
        }
    }
}

/// A URL for messages and logs: without user info (`user:password@`) and without its query,
/// either of which may hold a secret.
fn redacted(url: &str) -> String {
    let without_query = url.split(['?', '#']).next().unwrap_or("");
    let Some((scheme, rest)) = without_query.split_once("://") else {
        return without_query.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://***@{host}{path}"),
        None => without_query.to_owned(),
    }
}

/// What a valid token must say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwtRules {
    /// The expected `iss`.
    pub issuer: String,
    /// The expected `aud` (one of the token's audiences).
    pub audience: String,
    /// The claim holding the groups (an array of strings).
    pub groups_claim: String,
}

/// Why the key set could not be configured or read.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    /// `https://` needs TLS, which the JWKS fetch does not use yet.
    #[error(
        "`--jwks {url}`: fetching the JWKS over https is not supported yet: save the provider's JWKS to a file and pass its path, or fetch it through a proxy on loopback with an `http://127.0.0.1:…` URL"
    )]
    HttpsUnsupported {
        /// The URL given.
        url: String,
    },
    /// The file could not be read, or the URL fetched.
    #[error("cannot read the JWKS from `{source_name}`: {problem}")]
    Unreadable {
        /// The file or URL.
        source_name: String,
        /// What went wrong.
        problem: String,
    },
    /// It is not a JWKS with at least one usable key.
    #[error("`{source_name}` is not a usable JWKS: {problem}")]
    Invalid {
        /// The file or URL.
        source_name: String,
        /// What is wrong.
        problem: String,
    },
}

/// One usable key.
#[derive(Clone)]
struct Key {
    algorithm: Algorithm,
    decoding: DecodingKey,
}

/// Sign-in with a JWT from an identity provider, verified against its JWKS.
#[derive(Clone)]
pub struct OidcSignIn {
    rules: JwtRules,
    source: JwksSource,
    max_age: Duration,
    keys: Arc<RwLock<BTreeMap<String, Key>>>,
}

impl std::fmt::Debug for OidcSignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcSignIn")
            .field("rules", &self.rules)
            .field("source", &self.source)
            .field("max_age", &self.max_age)
            .finish_non_exhaustive()
    }
}

impl OidcSignIn {
    /// Read the key set now, and refresh it every `max_age` in the background (on the current
    /// Tokio runtime) for as long as a clone of the returned value lives.
    ///
    /// # Errors
    ///
    /// [`JwksError`] when the first read fails or finds no usable key.
    pub async fn load(
        source: JwksSource,
        rules: JwtRules,
        max_age: Duration,
    ) -> Result<OidcSignIn, JwksError> {
        let keys = fetch(&source).await?;
        let sign_in = OidcSignIn {
            rules,
            source,
            max_age,
            keys: Arc::new(RwLock::new(keys)),
        };
        let weak = Arc::downgrade(&sign_in.keys);
        tokio::spawn(refresh(weak, sign_in.source.clone(), max_age));
        Ok(sign_in)
    }

    /// The rules tokens are checked against.
    pub fn rules(&self) -> &JwtRules {
        &self.rules
    }

    /// How long a key set is used before it is read again.
    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    /// Where the key set comes from.
    pub fn source(&self) -> &JwksSource {
        &self.source
    }

    /// Verify `jwt` at `now`: its subject and groups.
    ///
    /// # Errors
    ///
    /// An [`OidcRefusal`]: a reason code and a sentence saying what failed (unknown key, bad
    /// signature, expired, wrong issuer, wrong audience, ...); it never repeats the token.
    pub fn verify(&self, jwt: &str, now: Timestamp) -> Result<(String, Vec<String>), OidcRefusal> {
        if jwt.len() > MAX_TOKEN_LENGTH {
            return Err(refused(
                "malformed",
                format!(
                    "the token is {} bytes, over the {MAX_TOKEN_LENGTH} accepted",
                    jwt.len()
                ),
            ));
        }
        let header = unverified_header(jwt).map_err(|detail| refused("malformed", detail))?;
        let alg = header
            .get("alg")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let algorithm = match alg {
            "RS256" => Algorithm::RS256,
            "ES256" => Algorithm::ES256,
            "EdDSA" => Algorithm::EdDSA,
            other => {
                return Err(refused(
                    "unsupported_algorithm",
                    format!(
                        "the token is signed with `{}`: only RS256, ES256 and EdDSA are accepted",
                        printable(other)
                    ),
                ));
            }
        };
        let Some(kid) = header.get("kid").and_then(serde_json::Value::as_str) else {
            return Err(refused(
                "unknown_key",
                "the token's header names no key (`kid`): the identity provider must sign with a key from the configured JWKS",
            ));
        };
        let key = {
            let keys = self
                .keys
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            keys.get(kid).cloned()
        };
        let Some(key) = key else {
            return Err(refused(
                "unknown_key",
                format!(
                    "unknown key `{}`: the token's `kid` is not in the configured JWKS",
                    printable(kid)
                ),
            ));
        };
        if key.algorithm != algorithm {
            return Err(refused(
                "unsupported_algorithm",
                format!(
                    "the token's algorithm `{alg}` does not fit key `{}`",
                    printable(kid)
                ),
            ));
        }
        let mut validation = Validation::new(algorithm);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.required_spec_claims = HashSet::new();
        validation.set_issuer(&[&self.rules.issuer]);
        validation.set_audience(&[&self.rules.audience]);
        let data = jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
            jwt,
            &key.decoding,
            &validation,
        )
        .map_err(|error| {
            use jsonwebtoken::errors::ErrorKind;
            match error.kind() {
                ErrorKind::InvalidSignature => refused(
                    "bad_signature",
                    "bad signature: the token was not signed by the key its `kid` names, or was altered",
                ),
                ErrorKind::InvalidIssuer => refused(
                    "wrong_issuer",
                    format!(
                        "wrong issuer: the token's `iss` is not `{}`",
                        self.rules.issuer
                    ),
                ),
                ErrorKind::InvalidAudience => refused(
                    "wrong_audience",
                    format!(
                        "wrong audience: the token's `aud` does not include `{}`",
                        self.rules.audience
                    ),
                ),
                ErrorKind::MissingRequiredClaim(claim) => {
                    refused("missing_claim", format!("the token has no `{claim}` claim"))
                }
                _ => refused("malformed", "the token is malformed"),
            }
        })?;
        let claims = data.claims;
        if claims.get("iss").is_none() {
            return Err(refused(
                "wrong_issuer",
                format!(
                    "wrong issuer: the token has no `iss`, `{}` is expected",
                    self.rules.issuer
                ),
            ));
        }
        if claims.get("aud").is_none() {
            return Err(refused(
                "wrong_audience",
                format!(
                    "wrong audience: the token has no `aud`, `{}` is expected",
                    self.rules.audience
                ),
            ));
        }
        let skew = i64::try_from(CLOCK_SKEW.as_secs()).unwrap_or(60);
        let now_seconds = now.as_millis().div_euclid(1000);
        let Some(exp) = claims.get("exp").and_then(numeric_date) else {
            return Err(refused(
                "missing_claim",
                "the token has no `exp` claim (a number of seconds)",
            ));
        };
        if now_seconds > exp.saturating_add(skew) {
            return Err(refused(
                "expired",
                format!(
                    "the token expired at {}",
                    Timestamp::from_millis(exp.saturating_mul(1000))
                ),
            ));
        }
        if let Some(nbf) = claims.get("nbf").and_then(numeric_date)
            && now_seconds.saturating_add(skew) < nbf
        {
            return Err(refused(
                "not_yet_valid",
                format!(
                    "the token is not valid before {}",
                    Timestamp::from_millis(nbf.saturating_mul(1000))
                ),
            ));
        }
        // Taken exactly as signed (never trimmed: `human:alice ` is not `human:alice`); the
        // caller then refuses anything that is not an approver id (`auth.rs`).
        let subject = claims
            .get("sub")
            .and_then(serde_json::Value::as_str)
            .filter(|sub| !sub.is_empty())
            .ok_or_else(|| refused("missing_subject", "the token names no subject (`sub`)"))?
            .to_owned();
        let groups = match claims.get(&self.rules.groups_claim) {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map(str::trim)
                        .filter(|group| !group.is_empty())
                        .map(str::to_owned)
                })
                .collect::<Option<Vec<String>>>()
                .ok_or_else(|| {
                    refused(
                        "malformed",
                        format!(
                            "the token's `{}` claim holds something other than group names",
                            self.rules.groups_claim
                        ),
                    )
                })?,
            Some(_) => {
                return Err(refused(
                    "malformed",
                    format!(
                        "the token's `{}` claim is not an array of group names",
                        self.rules.groups_claim
                    ),
                ));
            }
        };
        Ok((subject, groups))
    }
}

/// Why an identity provider's token was refused: `reason` is the code a 401 carries as
/// `token_reason` (`malformed`, `unsupported_algorithm`, `unknown_key`, `bad_signature`,
/// `wrong_issuer`, `wrong_audience`, `missing_claim`, `expired`, `not_yet_valid`,
/// `missing_subject`), `detail` the sentence; neither repeats the token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct OidcRefusal {
    /// The reason code.
    pub reason: &'static str,
    /// What failed.
    pub detail: String,
}

fn refused(reason: &'static str, detail: impl Into<String>) -> OidcRefusal {
    OidcRefusal {
        reason,
        detail: detail.into(),
    }
}

/// Does this token name an issuer (`iss`)? Approver tokens do not, so a token that does is
/// taken for an identity provider's.
pub(crate) fn names_an_issuer(jwt: &str) -> bool {
    jwt.split('.')
        .nth(1)
        .and_then(|payload| URL_SAFE_NO_PAD.decode(payload).ok())
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .is_some_and(|claims| claims.get("iss").is_some())
}

fn unverified_header(jwt: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let malformed = || "the token is malformed: it is not `header.payload.signature`".to_owned();
    let mut parts = jwt.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed());
    };
    let bytes = URL_SAFE_NO_PAD.decode(header).map_err(|_| malformed())?;
    serde_json::from_slice(&bytes).map_err(|_| malformed())
}

fn numeric_date(value: &serde_json::Value) -> Option<i64> {
    value.as_i64().or_else(|| {
        value
            .as_f64()
            .filter(|seconds| seconds.is_finite())
            .map(|seconds| seconds as i64)
    })
}

/// At most 64 printable characters of something a caller sent, for a message.
fn printable(text: &str) -> String {
    text.chars()
        .take(64)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

async fn refresh(keys: Weak<RwLock<BTreeMap<String, Key>>>, source: JwksSource, max_age: Duration) {
    loop {
        tokio::time::sleep(max_age).await;
        if keys.strong_count() == 0 {
            return;
        }
        match fetch(&source).await {
            Ok(fresh) => {
                let Some(keys) = keys.upgrade() else { return };
                *keys
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
            }
            Err(error) => {
                countersign::stderr_line!("warning: {error}: keeping the last good JWKS");
            }
        }
    }
}

async fn fetch(source: &JwksSource) -> Result<BTreeMap<String, Key>, JwksError> {
    let unreadable = |problem: String| JwksError::Unreadable {
        source_name: source.to_string(),
        problem,
    };
    let bytes = match source {
        JwksSource::File(path) => {
            let bytes = tokio::fs::read(path)
                .await
                .map_err(|error| unreadable(error.to_string()))?;
            if bytes.len() > MAX_JWKS_BYTES {
                return Err(unreadable(format!("over {MAX_JWKS_BYTES} bytes")));
            }
            bytes
        }
        JwksSource::Url(url) => {
            // Plain http:// only (see `JwksSource::parse`): the one constructor, trusting no
            // authority.
            let client = countersign_http::client_builder(&countersign_http::Trust::nothing())
                .map_err(|error| unreadable(error.to_string()))?
                .timeout(FETCH_TIMEOUT)
                .build()
                .map_err(|error| unreadable(error.to_string()))?;
            let mut response = client
                .get(url)
                .send()
                .await
                .map_err(|error| unreadable(error.without_url().to_string()))?;
            if !response.status().is_success() {
                return Err(unreadable(format!("HTTP status {}", response.status())));
            }
            let mut bytes = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|error| unreadable(error.without_url().to_string()))?
            {
                bytes.extend_from_slice(&chunk);
                if bytes.len() > MAX_JWKS_BYTES {
                    return Err(unreadable(format!("over {MAX_JWKS_BYTES} bytes")));
                }
            }
            bytes
        }
    };
    parse_jwks(&bytes).map_err(|problem| JwksError::Invalid {
        source_name: source.to_string(),
        problem,
    })
}

/// The usable keys of a JWKS, by `kid`: RSA (RS256), P-256 (ES256) and Ed25519 (EdDSA) keys
/// with a `kid`; other keys (symmetric, other curves, no `kid`) are skipped.
fn parse_jwks(bytes: &[u8]) -> Result<BTreeMap<String, Key>, String> {
    let set: JwkSet = serde_json::from_slice(bytes)
        .map_err(|error| format!("not a JWKS (`{{\"keys\": [...]}}`): {error}"))?;
    let mut keys = BTreeMap::new();
    for jwk in &set.keys {
        let Some(kid) = jwk.common.key_id.clone() else {
            continue;
        };
        let algorithm = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(params) if params.curve == EllipticCurve::P256 => {
                Algorithm::ES256
            }
            AlgorithmParameters::OctetKeyPair(params) if params.curve == EllipticCurve::Ed25519 => {
                Algorithm::EdDSA
            }
            _ => continue,
        };
        let declared_fits = match jwk.common.key_algorithm {
            None => true,
            Some(KeyAlgorithm::RS256) => algorithm == Algorithm::RS256,
            Some(KeyAlgorithm::ES256) => algorithm == Algorithm::ES256,
            Some(KeyAlgorithm::EdDSA) => algorithm == Algorithm::EdDSA,
            Some(_) => false,
        };
        if !declared_fits {
            continue;
        }
        let Ok(decoding) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        keys.insert(
            kid,
            Key {
                algorithm,
                decoding,
            },
        );
    }
    if keys.is_empty() {
        return Err(
            "no usable key: each needs a `kid` and must be RSA (RS256), P-256 (ES256) or Ed25519 (EdDSA)".to_owned(),
        );
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_https_and_takes_http_and_files() {
        assert!(matches!(
            JwksSource::parse("https://idp.example.com/jwks"),
            Err(JwksError::HttpsUnsupported { .. })
        ));
        assert_eq!(
            JwksSource::parse("http://127.0.0.1:9/jwks").expect("a URL"),
            JwksSource::Url("http://127.0.0.1:9/jwks".to_owned())
        );
        assert_eq!(
            JwksSource::parse("keys.json").expect("a file"),
            JwksSource::File(PathBuf::from("keys.json"))
        );
    }

    #[test]
    fn urls_lose_user_info_and_query_in_messages() {
        assert_eq!(
            redacted("http://user:pw@127.0.0.1:8/jwks?key=s#x"),
            "http://***@127.0.0.1:8/jwks"
        );
        assert_eq!(
            redacted("http://127.0.0.1:8/jwks"),
            "http://127.0.0.1:8/jwks"
        );
        assert_eq!(
            JwksSource::Url("http://a:b@h/k".to_owned()).to_string(),
            "http://***@h/k"
        );
    }

    #[test]
    fn skips_symmetric_keys_and_keys_without_kid() {
        let only_secret = br#"{"keys":[{"kty":"oct","kid":"s","k":"c2VjcmV0"}]}"#;
        assert!(parse_jwks(only_secret).is_err());
        let no_kid = br#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#;
        assert!(parse_jwks(no_kid).is_err());
        let good = br#"{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"a","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#;
        assert_eq!(parse_jwks(good).expect("one key").len(), 1);
    }
}
