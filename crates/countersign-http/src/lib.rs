//! The one way Countersign builds an outbound HTTP client (issue #32).
//!
//! Every HTTP client in the workspace — the gateway's Streamable HTTP upstreams, the approval
//! service's webhooks, its Slack calls and its JWKS fetches — is a [`reqwest::Client`] made by
//! [`client`] or [`client_builder`] here, and nowhere else (`cargo xtask tidy` checks it: rule
//! `http-client`). HTTPS goes through rustls with the RustCrypto provider
//! ([`rustls_rustcrypto`]), **passed explicitly** into each [`rustls::ClientConfig`]: this crate
//! never installs a process-wide default provider, so a program that links Countersign keeps
//! whatever rustls setup it has. The workspace carries one crypto stack: no ring, no aws-lc
//! (`cargo xtask tidy`, rule `crypto-stack`).
//!
//! Why one constructor: reqwest's features are unified across a build, so once any crate turns
//! on its rustls support, a plain `reqwest::Client::new()` anywhere in the same build looks for
//! a process-wide rustls provider and panics ("No provider set"). Building every client here
//! keeps that from happening.
//!
//! Which certificates are trusted is a [`Trust`]:
//!
//! - [`Trust::system`] — the operating system's trust store, read at run time with
//!   [`rustls_native_certs`] (on Linux the files of the `ca-certificates` package, or those
//!   `SSL_CERT_FILE` / `SSL_CERT_DIR` name). Chosen over a compiled-in list (webpki-roots) so
//!   that an operator's own or corporate authorities, and removals the OS ships, count without a
//!   new Countersign build.
//! - [`Trust::pem_file`] — only the certificate authorities in one PEM file (an `--upstream-ca`
//!   or a notify file's `ca_file`): a private upstream's CA, and nothing else.
//! - [`Trust::nothing`] — no authority at all: every `https://` request fails. For clients that
//!   only ever speak plain `http://` (tests, benchmarks).
//!
//! A failed handshake is never retried here and never downgraded to plain HTTP: the request
//! fails, and [`tls_failure`] says in a sentence why (unknown authority, wrong host name,
//! expired certificate).
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// Which certificate authorities an HTTPS client trusts. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Trust {
    source: Source,
}

#[derive(Clone, Debug)]
enum Source {
    System,
    File {
        path: PathBuf,
        roots: Arc<RootCertStore>,
    },
    Nothing,
}

/// Why a [`Trust`] or a client could not be made.
#[derive(Debug, thiserror::Error)]
pub enum HttpClientError {
    /// A CA file that cannot be read.
    #[error("cannot read the CA file `{path}`: {source}: give the path of a PEM file")]
    CaUnreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A CA file that holds no usable certificate.
    #[error(
        "the CA file `{path}` holds no usable certificate ({problem}): give a PEM file with one or more `-----BEGIN CERTIFICATE-----` blocks of the authority that signed the server's certificate"
    )]
    CaUnusable {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// reqwest refused the configuration (a bug of ours: please report it).
    #[error("cannot build the HTTP client: {0}: this is a bug in Countersign, please report it")]
    Build(String),
}

impl Trust {
    /// The operating system's trust store, read once per process when the first client that
    /// needs it is built (see the crate's documentation). When none can be read, every
    /// `https://` request fails and [`tls_failure`] says so; plain `http://` still works.
    pub fn system() -> Trust {
        Trust {
            source: Source::System,
        }
    }

    /// Only the certificate authorities in the PEM file `path` (one or more `CERTIFICATE`
    /// blocks; anything else in the file is ignored), not the system's.
    ///
    /// # Errors
    ///
    /// [`HttpClientError::CaUnreadable`] when the file cannot be read,
    /// [`HttpClientError::CaUnusable`] when it holds no certificate rustls accepts as an
    /// authority.
    pub fn pem_file(path: &Path) -> Result<Trust, HttpClientError> {
        let bytes = std::fs::read(path).map_err(|source| HttpClientError::CaUnreadable {
            path: path.to_path_buf(),
            source,
        })?;
        let unusable = |problem: String| HttpClientError::CaUnusable {
            path: path.to_path_buf(),
            problem,
        };
        let mut roots = RootCertStore::empty();
        for certificate in CertificateDer::pem_slice_iter(&bytes) {
            let certificate = certificate.map_err(|error| unusable(error.to_string()))?;
            roots
                .add(certificate)
                .map_err(|error| unusable(error.to_string()))?;
        }
        if roots.is_empty() {
            return Err(unusable("no `CERTIFICATE` block".to_owned()));
        }
        Ok(Trust {
            source: Source::File {
                path: path.to_path_buf(),
                roots: Arc::new(roots),
            },
        })
    }

    /// No authority at all: every `https://` request fails closed. For clients that only speak
    /// plain `http://`.
    pub fn nothing() -> Trust {
        Trust {
            source: Source::Nothing,
        }
    }

    /// What is trusted, for messages: `the system's trust store`, `the CA file `…``, `no
    /// certificate authority`.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::System => "the system's trust store".to_owned(),
            Source::File { path, .. } => format!("the CA file `{}`", path.display()),
            Source::Nothing => "no certificate authority".to_owned(),
        }
    }

    fn roots(&self) -> Arc<RootCertStore> {
        match &self.source {
            Source::System => Arc::clone(&system_roots().roots),
            Source::File { roots, .. } => Arc::clone(roots),
            Source::Nothing => Arc::new(RootCertStore::empty()),
        }
    }
}

/// The system's roots, loaded once per process, and why none were found, if so.
struct SystemRoots {
    roots: Arc<RootCertStore>,
    /// Set when no root could be loaded: what went wrong.
    missing: Option<String>,
}

fn system_roots() -> &'static SystemRoots {
    static ROOTS: OnceLock<SystemRoots> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let loaded = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        let (_added, _ignored) = roots.add_parsable_certificates(loaded.certs);
        let missing = roots.is_empty().then(|| {
            let errors: Vec<String> = loaded
                .errors
                .iter()
                .map(ToString::to_string)
                .take(3)
                .collect();
            if errors.is_empty() {
                "the system's trust store holds no certificate".to_owned()
            } else {
                format!(
                    "the system's trust store could not be read: {}",
                    errors.join("; ")
                )
            }
        });
        SystemRoots {
            roots: Arc::new(roots),
            missing,
        }
    })
}

/// The one crypto provider every TLS connection of Countersign uses: rustls-rustcrypto's,
/// made once per process and passed explicitly (never installed as the process default).
/// Public so that a test's TLS server can use the same provider.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    Arc::clone(PROVIDER.get_or_init(|| Arc::new(rustls_rustcrypto::provider())))
}

/// The rustls client configuration for `trust`: TLS 1.2 and 1.3 with the RustCrypto
/// provider, certificates verified by webpki against `trust`'s authorities, no client
/// certificate.
///
/// # Errors
///
/// [`HttpClientError::Build`] when the provider offers no safe protocol version (a bug).
pub fn tls_config(trust: &Trust) -> Result<rustls::ClientConfig, HttpClientError> {
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| HttpClientError::Build(error.to_string()))?
        .with_root_certificates(trust.roots())
        .with_no_client_auth())
}

/// A [`reqwest::ClientBuilder`] with TLS set up for `trust`; add timeouts or a redirect policy
/// and `build()` it. Do not replace its TLS settings.
///
/// # Errors
///
/// As [`tls_config`].
pub fn client_builder(trust: &Trust) -> Result<reqwest::ClientBuilder, HttpClientError> {
    // INVARIANT (one-http-constructor): the only place a reqwest client is configured.
    Ok(reqwest::Client::builder().use_preconfigured_tls(tls_config(trust)?))
}

/// A client trusting `trust`.
///
/// # Errors
///
/// [`HttpClientError::Build`] (a bug).
pub fn client(trust: &Trust) -> Result<reqwest::Client, HttpClientError> {
    client_builder(trust)?
        .build()
        .map_err(|error| HttpClientError::Build(error.to_string()))
}

/// Why a TLS handshake failed, read from a failed request's error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsFailure {
    /// The server's certificate chains to no trusted authority.
    UnknownAuthority {
        /// Set when the system's trust store was meant but could not be read.
        no_system_roots: Option<String>,
    },
    /// The certificate is not valid for the host name that was asked for.
    WrongHost,
    /// The certificate has expired or is not valid yet.
    Expired,
    /// Any other TLS failure, as rustls describes it.
    Other(String),
}

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsFailure::UnknownAuthority {
                no_system_roots: Some(why),
            } => write!(
                formatter,
                "its certificate is signed by an authority this process does not trust ({why})"
            ),
            TlsFailure::UnknownAuthority {
                no_system_roots: None,
            } => formatter
                .write_str("its certificate is signed by an authority this process does not trust"),
            TlsFailure::WrongHost => {
                formatter.write_str("its certificate is not valid for the host name in the URL")
            }
            TlsFailure::Expired => {
                formatter.write_str("its certificate has expired or is not valid yet")
            }
            TlsFailure::Other(text) => write!(formatter, "the TLS handshake failed: {text}"),
        }
    }
}

/// The TLS failure behind `error`, if the request failed in the TLS handshake; `trust` is what
/// the client trusted (to say when the system's store was empty).
pub fn tls_failure(error: &reqwest::Error, trust: &Trust) -> Option<TlsFailure> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(found) = current.downcast_ref::<rustls::Error>() {
            return Some(classify(found, trust));
        }
        // An I/O error's `source()` skips the error it wraps: step into it.
        let wrapped = current
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .map(|inner| inner as &(dyn std::error::Error + 'static));
        source = wrapped.or_else(|| current.source());
    }
    None
}

fn classify(error: &rustls::Error, trust: &Trust) -> TlsFailure {
    use rustls::CertificateError;
    match error {
        rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        ) => TlsFailure::UnknownAuthority {
            no_system_roots: matches!(trust.source, Source::System)
                .then(|| system_roots().missing.clone())
                .flatten(),
        },
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => TlsFailure::WrongHost,
        rustls::Error::InvalidCertificate(
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. },
        ) => TlsFailure::Expired,
        other => TlsFailure::Other(other.to_string()),
    }
}

/// `scheme://host[:port]` of `url`, without user information, path or query (which may carry
/// tokens): how a message names a server. `url` itself when it does not parse.
pub fn origin(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => {
            let host = parsed.host_str().unwrap_or_default();
            match parsed.port() {
                Some(port) => format!("{}://{host}:{port}", parsed.scheme()),
                None => format!("{}://{host}", parsed.scheme()),
            }
        }
        Err(_) => url.to_owned(),
    }
}

#[cfg(feature = "_test-tls")]
pub mod testing;

#[cfg(test)]
mod tests;
