//! Webhooks (issue #17): each outbox event POSTed to each configured endpoint, signed per
//! Standard Webhooks (<https://www.standardwebhooks.com/>, "Signature scheme", read
//! 2026-12-01).
//!
//! Every request carries `webhook-id` (the event's `evt_…` id, the same for every retry and
//! every duplicate), `webhook-timestamp` (Unix seconds of this attempt) and
//! `webhook-signature`: `v1,` and the base64 HMAC-SHA256, keyed with the secret's bytes, of
//! `{webhook-id}.{webhook-timestamp}.{body}`; with several secrets (during a rotation) one
//! signature per secret, separated by spaces. The body is the event's `countersign.event/v1`
//! JSON, byte for byte as stored. A 2xx answer acknowledges it; anything else (another
//! status, no answer within the timeout, no connection) is retried by [`crate::notify`].
//!
//! Endpoints are `http://` or `https://`; an `https://` receiver's certificate is verified
//! against [`crate::notify::Notifications::trust`] (the system's trust store unless a CA file is
//! given) by the one HTTP client constructor (`countersign_http`: rustls with the RustCrypto
//! provider). A failed handshake is a failed attempt, retried like any other, with the reason
//! in the delivery's last error.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Why a webhook's configuration was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WebhookConfigError {
    /// The secret is not `whsec_` and base64.
    #[error(
        "the webhook secret in `{source_name}` is not a Standard Webhooks secret: write `whsec_` followed by the base64 of at least 24 random bytes (for example `whsec_$(head -c 32 /dev/urandom | base64)`)"
    )]
    Secret {
        /// Where it came from (a file name), never the secret.
        source_name: String,
    },
    /// No secret at all for an endpoint.
    #[error(
        "the webhook `{url}` has no secret: pass `--webhook-secret-file FILE` once for each `--webhook`, in the same order"
    )]
    NoSecret {
        /// The endpoint.
        url: String,
    },
    /// The URL carries user information (`user:password@`): it would be stored with every
    /// delivery row and shown by `countersign webhooks`. The URL is not repeated here.
    #[error(
        "a webhook URL must not carry credentials (`user:password@host`): they would be kept with every delivery and shown by `countersign webhooks`; the signature (`--webhook-secret-file`) authenticates Countersign to the receiver"
    )]
    Credentials,
    /// A query or path parameter is named like a credential (`?token=…`, `;api_key=…`, `sig`…),
    /// or the URL has a fragment (never sent, so only a secret kept by mistake): as for
    /// [`WebhookConfigError::Credentials`], it would be kept with every delivery and shown.
    /// Only the parameter's name is repeated, never its value.
    #[error(
        "a webhook URL must not carry a credential in its query, path parameters or fragment (`{name}…`): it would be kept with every delivery and shown by `countersign webhooks`; the signature (`--webhook-secret-file`) authenticates Countersign to the receiver, which should check it instead"
    )]
    QueryCredential {
        /// The query parameter's name.
        name: String,
    },
    /// Not an `http://` or `https://` URL.
    #[error(
        "`{url}` is not an http:// or https:// URL: give the receiver's address, for example `https://hooks.example.com/countersign`"
    )]
    Url {
        /// The URL given.
        url: String,
    },
}

/// Is a query parameter named like a credential? Its name, lowercased, holds one of the words
/// services put credentials under (`token`, `access_token`, `secret`, `password`, `key`,
/// `api_key`, `auth`, `sig`, `signature`, `credential`, `code`, `jwt`, `bearer`, `session`).
fn is_credential_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "token",
        "secret",
        "passw",
        "key",
        "auth",
        "sig",
        "credential",
        "code",
        "jwt",
        "bearer",
        "session",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// One signing secret (`whsec_` and base64 of the key bytes). Its bytes are never shown: the
/// `Debug` form hides them.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret {
    key: Vec<u8>,
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(***)")
    }
}

impl WebhookSecret {
    /// Parse `whsec_BASE64` (standard alphabet, padded; at least 24 key bytes). `source_name`
    /// names where it came from in the error.
    ///
    /// # Errors
    ///
    /// [`WebhookConfigError::Secret`].
    pub fn parse(text: &str, source_name: &str) -> Result<WebhookSecret, WebhookConfigError> {
        let refused = || WebhookConfigError::Secret {
            source_name: source_name.to_owned(),
        };
        let encoded = text.trim().strip_prefix("whsec_").ok_or_else(refused)?;
        let key = STANDARD.decode(encoded).map_err(|_| refused())?;
        if key.len() < 24 {
            return Err(refused());
        }
        Ok(WebhookSecret { key })
    }

    /// Every secret in a file's text: one per non-empty line (two during a rotation).
    ///
    /// # Errors
    ///
    /// [`WebhookConfigError::Secret`] for a line that is not one.
    pub fn parse_all(
        text: &str,
        source_name: &str,
    ) -> Result<Vec<WebhookSecret>, WebhookConfigError> {
        text.lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .map(|line| WebhookSecret::parse(line, source_name))
            .collect()
    }

    /// `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` under this secret.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        // INVARIANT (hmac-any-key): HMAC takes a key of any length, so this never fails.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key) else {
            unreachable!("HMAC accepts every key length")
        };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// The `webhook-signature` header for these secrets: one `v1,` signature per secret, separated
/// by single spaces.
pub fn signature_header(
    secrets: &[WebhookSecret],
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    secrets
        .iter()
        .map(|secret| secret.sign(id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One webhook endpoint: where to POST, and the secrets that sign.
#[derive(Clone, Debug)]
pub struct WebhookEndpoint {
    url: String,
    secrets: Vec<WebhookSecret>,
}

impl WebhookEndpoint {
    /// An endpoint at `url` (`http://` or `https://`) signed by `secrets` (at least one).
    ///
    /// # Errors
    ///
    /// [`WebhookConfigError::Url`], [`WebhookConfigError::Credentials`],
    /// [`WebhookConfigError::NoSecret`].
    pub fn new(
        url: &str,
        secrets: Vec<WebhookSecret>,
    ) -> Result<WebhookEndpoint, WebhookConfigError> {
        let parsed = reqwest::Url::parse(url).map_err(|_| WebhookConfigError::Url {
            url: url.to_owned(),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(WebhookConfigError::Url {
                url: url.to_owned(),
            });
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(WebhookConfigError::Credentials);
        }
        if let Some((name, _)) = parsed
            .query_pairs()
            .find(|(name, _)| is_credential_name(name))
        {
            return Err(WebhookConfigError::QueryCredential {
                name: name.into_owned(),
            });
        }
        // A fragment is never sent, so it can only be a secret kept here by mistake; a path
        // parameter (`/h;token=…`) is a query by another name.
        let path_parameter = parsed
            .path()
            .split('/')
            .flat_map(|segment| segment.split(';').skip(1))
            .map(|parameter| parameter.split('=').next().unwrap_or(parameter))
            .find(|name| is_credential_name(name));
        if parsed.fragment().is_some() || path_parameter.is_some() {
            return Err(WebhookConfigError::QueryCredential {
                name: path_parameter.map_or_else(|| "#".to_owned(), str::to_owned),
            });
        }
        if secrets.is_empty() {
            return Err(WebhookConfigError::NoSecret {
                url: url.to_owned(),
            });
        }
        Ok(WebhookEndpoint {
            url: url.to_owned(),
            secrets,
        })
    }

    /// The URL, as given: the delivery rows name the endpoint by it.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// POST one event: `Ok` for a 2xx answer, otherwise why not (a status, a failed TLS
    /// handshake with its reason, or a transport error without the URL, which may carry a token
    /// in its query). `trust` is what `client` trusts, for the reason.
    pub(crate) async fn post(
        &self,
        client: &reqwest::Client,
        trust: &countersign_http::Trust,
        event_id: &str,
        body: &str,
        timestamp: i64,
        timeout: Duration,
    ) -> Result<(), String> {
        let signature = signature_header(&self.secrets, event_id, timestamp, body.as_bytes());
        let sent = client
            .post(&self.url)
            .timeout(timeout)
            .header("content-type", "application/json")
            .header(
                "user-agent",
                concat!("countersign/", env!("CARGO_PKG_VERSION")),
            )
            .header("webhook-id", event_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body.to_owned())
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(response) => {
                let status = response.status();
                // Receivers often say why in the body: keep a short, printable start of it.
                let said = response.text().await.unwrap_or_default();
                Err(rejected(status, &said))
            }
            Err(error) if error.is_timeout() => {
                Err(format!("no answer within {}s", timeout.as_secs_f64()))
            }
            Err(error) => Err(match countersign_http::tls_failure(&error, trust) {
                Some(failure) => tls_refusal(&self.url, &failure, trust),
                None => format!(
                    "cannot deliver to `{}`: {}",
                    countersign_http::origin(&self.url),
                    root_cause(error)
                ),
            }),
        }
    }
}

/// The longest part of a receiver's refusal body kept in `last_error`, in characters.
const SAID_CHARS: usize = 200;

/// `last_error` for a receiver that answered with a non-2xx status: the status with its reason
/// phrase, and the start of what the receiver said (control characters dropped).
fn rejected(status: reqwest::StatusCode, said: &str) -> String {
    let phrase = status.canonical_reason().unwrap_or("");
    let said: String = said
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(SAID_CHARS)
        .collect();
    let said = said.trim();
    let retry = if status.is_client_error() {
        "check the receiver's configuration (its URL, its secret); it is sent again"
    } else {
        "the receiver failed; it is sent again"
    };
    if said.is_empty() {
        format!(
            "the receiver answered HTTP {} {phrase}: {retry}",
            status.as_u16()
        )
    } else {
        format!(
            "the receiver answered HTTP {} {phrase} (\"{said}\"): {retry}",
            status.as_u16()
        )
    }
}

/// The innermost cause of a transport error ("Connection refused (os error 111)"), which says
/// what went wrong where reqwest's own message says only "error sending request". No URL: the
/// caller names the origin, never the path (it may carry a secret).
pub(crate) fn root_cause(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut cause: &dyn std::error::Error = &error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// Why an HTTPS delivery failed in its handshake, and what to do: shared with Slack's calls.
pub(crate) fn tls_refusal(
    url: &str,
    failure: &countersign_http::TlsFailure,
    trust: &countersign_http::Trust,
) -> String {
    let next = match failure {
        countersign_http::TlsFailure::UnknownAuthority { .. } => format!(
            "give the service the authority that signed it with `ca_file:` in the notify file or --notify-ca FILE (its PEM certificate), or add it to the system's trust store (trusted now: {})",
            trust.describe()
        ),
        countersign_http::TlsFailure::WrongHost => {
            "use the host name the certificate was issued for in the URL".to_owned()
        }
        countersign_http::TlsFailure::Expired => {
            "the receiver's operator must renew its certificate (or fix the clock)".to_owned()
        }
        countersign_http::TlsFailure::Other(_) => {
            "check that the receiver speaks TLS on this port".to_owned()
        }
    };
    format!(
        "cannot deliver: the TLS handshake with `{}` failed, so nothing was sent: {failure}: {next}",
        countersign_http::origin(url)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_status_and_what_the_receiver_said() {
        assert_eq!(
            rejected(reqwest::StatusCode::UNAUTHORIZED, "bad\tsignature\n"),
            "the receiver answered HTTP 401 Unauthorized (\"bad signature\"): check the receiver's configuration (its URL, its secret); it is sent again"
        );
        assert_eq!(
            rejected(reqwest::StatusCode::SERVICE_UNAVAILABLE, "  "),
            "the receiver answered HTTP 503 Service Unavailable: the receiver failed; it is sent again"
        );
        let long = "x".repeat(1_000);
        assert_eq!(
            rejected(reqwest::StatusCode::BAD_GATEWAY, &long)
                .matches('x')
                .count(),
            SAID_CHARS
        );
    }

    /// The Standard Webhooks reference implementations' published vector: reproducing it is
    /// what says a receiver's library will accept our signatures.
    #[test]
    fn signatures_reproduce_the_standard_webhooks_test_vector() {
        let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "test")
            .expect("the vector's secret");
        assert_eq!(
            secret.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn during_a_rotation_every_secret_signs() {
        let text =
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n\nwhsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n";
        let secrets = WebhookSecret::parse_all(text, "secrets.txt").expect("two secrets");
        let header = signature_header(&secrets, "evt_1", 1, b"{}");
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], secrets[0].sign("evt_1", 1, b"{}"));
        assert_ne!(parts[0], parts[1]);
    }

    #[test]
    fn refuses_what_is_not_a_secret_without_showing_it() {
        for text in ["hunter2", "whsec_not base64!", "whsec_c2hvcnQ="] {
            let error = WebhookSecret::parse(text, "secret.txt").expect_err(text);
            assert!(!error.to_string().contains(text), "{error}");
            assert!(error.to_string().contains("secret.txt"));
        }
        let secret =
            WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "x").expect("secret");
        assert_eq!(format!("{secret:?}"), "WebhookSecret(***)");
    }

    #[test]
    fn endpoints_are_http_or_https_urls_with_a_secret() {
        let secret = || {
            vec![
                WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "x")
                    .expect("secret"),
            ]
        };
        assert!(WebhookEndpoint::new("http://127.0.0.1:9/hook", secret()).is_ok());
        // Issue #32: HTTPS through the one client constructor (it was refused before).
        assert!(WebhookEndpoint::new("https://example.com/hook", secret()).is_ok());
        assert!(matches!(
            WebhookEndpoint::new("ftp://example.com/hook", secret()),
            Err(WebhookConfigError::Url { .. })
        ));
        for with_credentials in [
            "http://user:s3cretpw@127.0.0.1:9/x",
            "https://token@hooks.example.com/x",
        ] {
            let refused = WebhookEndpoint::new(with_credentials, secret()).expect_err("refused");
            assert!(matches!(refused, WebhookConfigError::Credentials));
            assert!(!refused.to_string().contains("s3cretpw"));
            assert!(!refused.to_string().contains("token@"));
        }
        // A credential in the query is refused the same way, naming the parameter only.
        for with_token in [
            "https://hooks.example.com/x?token=s3cretpw",
            "https://hooks.example.com/x?team=ops&API_KEY=s3cretpw",
            "https://hooks.example.com/x?sig=s3cretpw",
            "https://hooks.example.com/x?jwt=s3cretpw",
            "https://hooks.example.com/x;token=s3cretpw",
            "https://hooks.example.com/x#token=s3cretpw",
        ] {
            let refused = WebhookEndpoint::new(with_token, secret()).expect_err("refused");
            assert!(
                matches!(refused, WebhookConfigError::QueryCredential { .. }),
                "{with_token}"
            );
            assert!(!refused.to_string().contains("s3cretpw"), "{refused}");
        }
        assert!(WebhookEndpoint::new("https://hooks.example.com/x?team=ops", secret()).is_ok());
        assert!(matches!(
            WebhookEndpoint::new("not a url", secret()),
            Err(WebhookConfigError::Url { .. })
        ));
        assert!(matches!(
            WebhookEndpoint::new("http://127.0.0.1:9/hook", Vec::new()),
            Err(WebhookConfigError::NoSecret { .. })
        ));
    }
}
