//! Sign-in: who is calling, established by the service, never asserted.
//!
//! Two methods, either or both configured:
//!
//! - `Authorization: Bearer <approver token>`: the kernel's Ed25519 JWT, checked with
//!   [`countersign::token::verify`] against the service's keys (the policy's `approvers.keys`
//!   plus `--approver-key`). The caller's credential stays the token itself, so every answer is
//!   judged again by the kernel against the keys stored with the request's rule.
//! - An identity header set by an authenticating proxy (`--proxy-header NAME`), accepted only
//!   when the request also carries the proxy's shared secret in
//!   [`ProxySignIn::secret_header`], compared in constant time. The caller becomes a
//!   [`Credential::Verified`] with [`Authentication::ProxyHeader`].
//!
//! - `Authorization: Bearer <JWT>` from an identity provider (`--jwks`, `--jwt-issuer`,
//!   `--jwt-audience`), verified by [`crate::jwks::OidcSignIn`]; the caller becomes a
//!   [`Credential::Verified`] with [`Authentication::Oidc`] and the groups of the token's
//!   groups claim. A bearer token is taken for the identity provider's when it names an issuer
//!   (`iss`; approver tokens do not), or when no approver keys are configured.
//!
//! When `Authorization` is present it decides alone: a refused token is never retried as a
//! proxy identity. With no method configured every call is refused `not_authenticated`.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, HeaderName, header};
use countersign::Timestamp;
use countersign::approver::{Authentication, Credential};
use countersign::token::{self, PublicKey};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::jwks::{self, OidcSignIn};
use crate::problem::Problem;

/// The header that carries the proxy's shared secret unless configured otherwise.
pub const DEFAULT_SECRET_HEADER: &str = "x-countersign-proxy-secret";

/// The longest identity a proxy header may carry, in bytes.
const MAX_PROXY_IDENTITY: usize = 256;

/// Sign-in through an authenticating proxy: the identity header, and the shared secret that
/// proves the proxy set it.
#[derive(Clone)]
pub struct ProxySignIn {
    /// The header holding the signed-in person's id (for example `x-forwarded-user`).
    pub identity_header: HeaderName,
    /// The header holding the shared secret ([`DEFAULT_SECRET_HEADER`] by default).
    pub secret_header: HeaderName,
    /// SHA-256 of the secret: comparing digests in constant time leaks neither the secret's
    /// bytes nor its length.
    secret_digest: [u8; 32],
}

impl std::fmt::Debug for ProxySignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret's digest is not printed either: it would let anyone test guesses offline.
        f.debug_struct("ProxySignIn")
            .field("identity_header", &self.identity_header)
            .field("secret_header", &self.secret_header)
            .finish_non_exhaustive()
    }
}

/// Why a proxy sign-in could not be configured.
#[derive(Debug, thiserror::Error)]
pub enum ProxyConfigError {
    /// The secret is shorter than 32 bytes (after trimming surrounding whitespace).
    #[error(
        "the proxy secret is {length} bytes: use at least 32 random bytes, for example `openssl rand -hex 32 > FILE`"
    )]
    SecretTooShort {
        /// Its length in bytes.
        length: usize,
    },
    /// A header name is not a valid HTTP header name.
    #[error(
        "`{name}` is not an HTTP header name: use letters, digits and `-`, for example `x-forwarded-user`"
    )]
    InvalidHeader {
        /// The name given.
        name: String,
    },
    /// The identity header and the secret header are the same header.
    #[error("the identity header and the secret header must be two different headers")]
    SameHeader,
}

impl ProxySignIn {
    /// Configure proxy sign-in with `secret` (surrounding whitespace, such as a file's final
    /// newline, is ignored).
    ///
    /// # Errors
    ///
    /// [`ProxyConfigError`] for a secret under 32 bytes, a header name that is not one, or one
    /// header used for both.
    pub fn new(
        identity_header: &str,
        secret_header: &str,
        secret: &str,
    ) -> Result<ProxySignIn, ProxyConfigError> {
        let header = |name: &str| {
            HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
                ProxyConfigError::InvalidHeader {
                    name: name.escape_debug().to_string(),
                }
            })
        };
        let identity_header = header(identity_header)?;
        let secret_header = header(secret_header)?;
        let secret = secret.trim();
        if secret.len() < 32 {
            return Err(ProxyConfigError::SecretTooShort {
                length: secret.len(),
            });
        }
        if identity_header == secret_header {
            return Err(ProxyConfigError::SameHeader);
        }
        Ok(ProxySignIn {
            identity_header,
            secret_header,
            secret_digest: Sha256::digest(secret.as_bytes()).into(),
        })
    }

    fn secret_matches(&self, given: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(given).into();
        digest.ct_eq(&self.secret_digest).into()
    }
}

/// How the service signs callers in.
#[derive(Clone, Debug, Default)]
pub struct SignIn {
    /// Keys that may sign approver tokens (the policy's `approvers.keys` and `--approver-key`).
    pub approver_keys: Vec<PublicKey>,
    /// Sign-in through an authenticating proxy, if configured.
    pub proxy: Option<ProxySignIn>,
    /// Sign-in with an identity provider's JWT, verified against its JWKS, if configured.
    pub oidc: Option<OidcSignIn>,
}

impl SignIn {
    /// Is any sign-in method configured?
    pub fn is_configured(&self) -> bool {
        !self.approver_keys.is_empty() || self.proxy.is_some() || self.oidc.is_some()
    }
}

/// A signed-in caller.
#[derive(Clone, Debug)]
pub struct Caller {
    /// What the kernel is handed for this caller's answers and resolutions.
    pub credential: Credential,
    /// Who, as the service verified it (a token's `sub`, the proxy header's value).
    pub id: String,
    /// Groups from the token's `groups` claim and the policy's directory, sorted and unique.
    pub groups: Vec<String>,
    /// How the caller signed in.
    pub authentication: Authentication,
    /// A member of the configured auditors group: may read everything (answers are still
    /// judged by each request's rule).
    pub auditor: bool,
}

/// Sign the caller of one request in.
///
/// # Errors
///
/// A 401 `not_authenticated` [`Problem`] saying what is missing or wrong (with
/// `token_reason` for a refused token); it never repeats the token or the secret.
pub fn authenticate(
    sign_in: &SignIn,
    directory: &BTreeMap<String, Vec<String>>,
    auditors_group: Option<&str>,
    headers: &HeaderMap,
    now: Timestamp,
) -> Result<Caller, Problem> {
    if !sign_in.is_configured() {
        return Err(Problem::not_authenticated(
            "this approval service has no sign-in method configured: start it with approver keys (`approvers.keys` in the policy, or `--approver-key`), with `--jwks FILE_OR_URL --jwt-issuer ISS --jwt-audience AUD`, or with `--proxy-header NAME --proxy-secret-file FILE`",
        ));
    }
    let mut authorizations = headers.get_all(header::AUTHORIZATION).iter();
    if let Some(authorization) = authorizations.next() {
        if authorizations.next().is_some() {
            return Err(Problem::not_authenticated(
                "more than one `Authorization` header: send one, `Authorization: Bearer TOKEN`",
            ));
        }
        let text = authorization.to_str().unwrap_or("");
        let bearer = text
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|token| !token.is_empty());
        let Some(jwt) = bearer else {
            return Err(Problem::not_authenticated(
                "the `Authorization` header is not `Bearer TOKEN`: send an approver token from `countersign approver token`",
            ));
        };
        if let Some(oidc) = &sign_in.oidc
            && (sign_in.approver_keys.is_empty() || jwks::names_an_issuer(jwt))
        {
            return oidc_caller(oidc, directory, auditors_group, jwt, now);
        }
        return token_caller(sign_in, directory, auditors_group, jwt, now);
    }
    if let Some(proxy) = &sign_in.proxy
        && let Some(identity) = headers.get(&proxy.identity_header)
    {
        let secret_ok = {
            let mut secrets = headers.get_all(&proxy.secret_header).iter();
            match (secrets.next(), secrets.next()) {
                (Some(secret), None) => proxy.secret_matches(secret.as_bytes()),
                _ => false,
            }
        };
        if !secret_ok {
            return Err(Problem::not_authenticated(format!(
                "the identity header `{}` came without the proxy's shared secret in `{}`: only the authenticating proxy may set it",
                proxy.identity_header, proxy.secret_header
            )));
        }
        // A proxy that appends its header instead of replacing the client's would pass the
        // client's own copy along: with two, nobody can say which one the proxy vouched for.
        if headers
            .get_all(&proxy.identity_header)
            .iter()
            .nth(1)
            .is_some()
        {
            return Err(Problem::not_authenticated(format!(
                "the identity header `{}` came more than once, so which person the proxy signed in is unknown: configure the proxy to replace the header a client sends, not to add its own beside it",
                proxy.identity_header
            )));
        }
        let id = identity
            .to_str()
            .ok()
            .map(str::trim)
            .filter(|id| {
                !id.is_empty()
                    && id.len() <= MAX_PROXY_IDENTITY
                    && !id.chars().any(char::is_control)
            })
            .ok_or_else(|| {
                Problem::not_authenticated(format!(
                    "the identity header `{}` is empty, too long or not printable text: check the proxy's configuration",
                    proxy.identity_header
                ))
            })?
            .to_owned();
        let id = approver_shaped(
            id,
            &format!("the identity header `{}`", proxy.identity_header),
            "check what the proxy puts in it (an id such as `human:alice` or `alice@example.com`)",
        )?;
        let groups = merged_groups(directory, &id, &[]);
        return Ok(Caller {
            credential: Credential::Verified {
                id: id.clone(),
                groups: Vec::new(),
                authentication: Authentication::ProxyHeader,
            },
            auditor: is_auditor(auditors_group, &groups),
            id,
            groups,
            authentication: Authentication::ProxyHeader,
        });
    }
    Err(Problem::not_authenticated(
        "sign in: send `Authorization: Bearer TOKEN` with an approver token (`countersign approver token` issues one), or come through the authenticating proxy",
    ))
}

/// The caller an approver token signs in (from `Authorization: Bearer`, or a browser session
/// opened with it).
///
/// # Errors
///
/// A 401 `not_authenticated` [`Problem`], with `token_reason` when the token is refused.
pub fn token_caller(
    sign_in: &SignIn,
    directory: &BTreeMap<String, Vec<String>>,
    auditors_group: Option<&str>,
    jwt: &str,
    now: Timestamp,
) -> Result<Caller, Problem> {
    if sign_in.approver_keys.is_empty() {
        return Err(Problem::not_authenticated(
            "this approval service accepts no approver tokens: no approver keys are configured (`approvers.keys` in the policy, or `--approver-key`)",
        ));
    }
    let verified = token::verify(jwt, &sign_in.approver_keys, now).map_err(|error| {
        Problem::not_authenticated(error.to_string()).with("token_reason", error.reason())
    })?;
    let subject = token_subject(verified.subject)?;
    let groups = merged_groups(directory, &subject, &verified.groups);
    Ok(Caller {
        credential: Credential::Token(jwt.to_owned()),
        auditor: is_auditor(auditors_group, &groups),
        id: subject,
        groups,
        authentication: Authentication::Token,
    })
}

/// The caller an identity provider's JWT signs in.
///
/// # Errors
///
/// A 401 `not_authenticated` [`Problem`] saying what failed (unknown key, bad signature,
/// expired, wrong issuer, wrong audience); it never repeats the token.
fn oidc_caller(
    oidc: &OidcSignIn,
    directory: &BTreeMap<String, Vec<String>>,
    auditors_group: Option<&str>,
    jwt: &str,
    now: Timestamp,
) -> Result<Caller, Problem> {
    let (id, claimed) = oidc.verify(jwt, now).map_err(|refusal| {
        Problem::not_authenticated(format!(
            "the identity provider's token is refused: {refusal}"
        ))
        .with("token_reason", refusal.reason)
    })?;
    let id = approver_shaped(
        id,
        "the identity provider's subject (`sub`)",
        "check what the provider puts in its `sub` claim",
    )
    .map_err(|problem| problem.with("token_reason", "invalid_subject"))?;
    let groups = merged_groups(directory, &id, &claimed);
    Ok(Caller {
        credential: Credential::Verified {
            id: id.clone(),
            groups: claimed,
            authentication: Authentication::Oidc,
        },
        auditor: is_auditor(auditors_group, &groups),
        id,
        groups,
        authentication: Authentication::Oidc,
    })
}

/// A verified approver token's subject, when it is an approver id; otherwise the 401 with
/// `token_reason: invalid_subject` (for the API and the browser sign-in form alike).
///
/// # Errors
///
/// The [`Problem`], naming what is wrong with the subject.
pub(crate) fn token_subject(subject: String) -> Result<String, Problem> {
    approver_shaped(
        subject,
        "the token's subject (`sub`)",
        "issue a token with one (`countersign approver token --subject human:alice`)",
    )
    .map_err(|problem| problem.with("token_reason", "invalid_subject"))
}

/// `id` when it is of the one shape of approver ids ([`countersign::approver::ApproverId`]);
/// otherwise a 401 `not_authenticated` naming `what` carried it, why, and `next`: such a caller
/// could sign in, but every answer would then be refused `invalid_approver` (a trailing space, a
/// zero-width character), so it is refused here, before anything is shown under a name no answer
/// can use.
fn approver_shaped(id: String, what: &str, next: &str) -> Result<String, Problem> {
    match countersign::approver::ApproverId::parse(&id) {
        Ok(_) => Ok(id),
        Err(error) => Err(Problem::not_authenticated(format!(
            "{what} is not an approver id, so no answer could be counted for it ({}): {next}",
            countersign::evidence::printable(&error.to_string())
        ))),
    }
}

fn merged_groups(
    directory: &BTreeMap<String, Vec<String>>,
    id: &str,
    claimed: &[String],
) -> Vec<String> {
    let mut groups: Vec<String> = directory.get(id).cloned().unwrap_or_default();
    groups.extend(claimed.iter().cloned());
    groups.sort();
    groups.dedup();
    groups
}

fn is_auditor(auditors_group: Option<&str>, groups: &[String]) -> bool {
    auditors_group.is_some_and(|auditors| groups.iter().any(|group| group == auditors))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy() -> ProxySignIn {
        ProxySignIn::new(
            "x-user",
            DEFAULT_SECRET_HEADER,
            "0123456789abcdef0123456789abcdef\n",
        )
        .expect("a valid proxy configuration")
    }

    #[test]
    fn refuses_a_short_secret_and_one_header_for_both() {
        assert!(matches!(
            ProxySignIn::new("x-user", "x-secret", "short"),
            Err(ProxyConfigError::SecretTooShort { length: 5 })
        ));
        assert!(matches!(
            ProxySignIn::new("x-user", "X-User", "0123456789abcdef0123456789abcdef"),
            Err(ProxyConfigError::SameHeader)
        ));
    }

    #[test]
    fn the_secret_matches_only_exactly() {
        let proxy = proxy();
        assert!(proxy.secret_matches(b"0123456789abcdef0123456789abcdef"));
        assert!(!proxy.secret_matches(b"0123456789abcdef0123456789abcde"));
        assert!(!proxy.secret_matches(b""));
        assert!(!format!("{proxy:?}").contains("0123"));
    }
}
