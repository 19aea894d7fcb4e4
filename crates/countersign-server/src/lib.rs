//! The Countersign approval service (`countersign serve`): sign-in and the JSON API.
//!
//! The service lets people answer an agent's approval requests and settle ambiguous effects
//! from anywhere the operator exposes it, through the one closed answer contract every surface
//! shares ([`countersign::control::submit_answer`] and the store's `resolve_effect`). It never
//! writes a grant itself and never takes an identity from anything a caller asserts: callers sign
//! in with an approver token, an identity provider's JWT ([`jwks`]) or through an
//! authenticating proxy ([`auth`]), and the kernel
//! judges every answer against the rule stored with the request.
//!
//! Routes (all JSON; errors are RFC 9457 problem details, [`problem`]):
//!
//! | route | what |
//! |---|---|
//! | `GET /api/v1/health` | liveness, store reachability and the policy's approval warnings (no sign-in) |
//! | `GET /api/v1/approvals` | requests the caller may answer (`?state=`, `?cursor=`, `?limit=`) |
//! | `GET /api/v1/approvals/{id}` | one request, with its `display` |
//! | `POST /api/v1/approvals/{id}/answer` | `{decision, action_hash, note}` |
//! | `POST /api/v1/approvals/{id}/revoke` | `{note}`: take back your unused grant or counted yes (issue #31) |
//! | `POST /api/v1/approvals/{id}/cancel` | `{note}`: cancel a waiting request, as one of its resolvers (issue #31) |
//! | `GET /api/v1/interrupts` | the requests the caller may answer, as `countersign.interrupt/v1` objects (`?run=`) |
//! | `POST /api/v1/interrupts/responses` | `{responses: {id: {decision, action_hash, note}}}`: the chat-surface contract (issue #17) |
//! | `GET /api/v1/receipts` | receipts the caller may read |
//! | `GET /api/v1/effects` | effect records the caller may read (`?state=`) |
//! | `POST /api/v1/effects/{key}/resolve` | `{to: committed\|failed, note}` |
//! | `GET /signin`, `POST /signin`, `POST /signout` | browser sign-in: a token for a session cookie ([`browser`]) |
//! | `GET /inbox`, `/requests/{id}`, `/history`, `/receipts`, `/effects`; `POST /requests/{id}/answer`, `/requests/{id}/take-back`, `/effects/{key}/resolve` | the web inbox: HTML pages over the same kernel calls ([`pages`]) |
//! | `GET /static/inbox.css`, `/static/inbox.js` | the pages' style sheet and their few lines of script |
//! | `GET /metrics` | counters in Prometheus text (no sign-in; no ids or names in labels) |
//! | `POST /slack/interactions` | a Slack button press, signed by Slack ([`slack`]; 404 unless [`Service::with_slack`]) |
//!
//! The service has no TLS of its own: it listens on loopback, or behind a reverse proxy that
//! terminates TLS (see `docs/approval-service.md`).
#![forbid(unsafe_code)]
// Standard error through `countersign::stderr_line!`, which never panics on a closed stream.
#![deny(clippy::print_stderr)]

mod api;
pub mod auth;
pub mod browser;
pub mod chain;
pub mod jwks;
mod metrics;
pub mod notify;
pub mod pages;
pub mod problem;
mod scope;
pub mod slack;
pub mod webhook;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use countersign::store::{self, Store};
use countersign::{Clock, Policy, StoreError};

pub use auth::{Caller, ProxySignIn, SignIn};
pub use jwks::{JwksSource, JwtRules, OidcSignIn};
pub use notify::Notifications;
pub use problem::{Problem, REDACTED_TOKEN, redact_tokens};

/// The address `countersign serve` listens on unless told otherwise: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8780";

/// How long one attempt to open the store may take before the call answers 503.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything the service needs.
#[derive(Clone)]
pub struct ServiceConfig {
    /// Where the store is: an open store, or a URL opened on first use (and again after a
    /// failure, so a database that comes up later is picked up without a restart).
    pub store: StoreSource,
    /// How callers sign in.
    pub sign_in: SignIn,
    /// The policy's directory (identity → groups), for the caller's groups at sign-in.
    pub directory: BTreeMap<String, Vec<String>>,
    /// Members of this group may read every request, receipt and effect.
    pub auditors_group: Option<String>,
    /// The URL people reach the service at (shown by `/api/v1/health`).
    pub public_url: Option<String>,
    /// The clock every expiry is judged by.
    pub clock: Arc<dyn Clock>,
    /// The policy the service was started with, if any: the request page names the policy
    /// rule that required approval when the action's entry is unchanged since the request
    /// (same entry fingerprint). Every answer is still judged by the request's stored rule.
    pub policy: Option<Arc<Policy>>,
}

/// Where the service's store comes from.
#[derive(Clone)]
pub enum StoreSource {
    /// An open store.
    Open(Arc<dyn Store>),
    /// A store URL (`sqlite:PATH`, `postgres://…`), opened on first use.
    Url(String),
}

/// The store, opened at most once successfully.
struct StoreHandle {
    source: StoreSource,
    opened: tokio::sync::OnceCell<Arc<dyn Store>>,
}

impl StoreHandle {
    /// The store, opening it if needed.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when it cannot be opened (within [`OPEN_TIMEOUT`]); the next call tries
    /// again.
    async fn get(&self) -> Result<Arc<dyn Store>, StoreError> {
        let url = match &self.source {
            StoreSource::Open(store) => return Ok(Arc::clone(store)),
            StoreSource::Url(url) => url,
        };
        self.opened
            .get_or_try_init(|| async {
                match tokio::time::timeout(OPEN_TIMEOUT, store::open_url_async(url)).await {
                    Ok(result) => result,
                    Err(_) => Err(StoreError::Open {
                        location: store::redact_url(url),
                        message: format!(
                            "no answer within {OPEN_TIMEOUT:?}: check that the database is running"
                        ),
                    }),
                }
            })
            .await
            .map(Arc::clone)
    }
}

/// The running service's shared state.
#[derive(Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

struct Inner {
    store: StoreHandle,
    sign_in: SignIn,
    directory: BTreeMap<String, Vec<String>>,
    auditors_group: Option<String>,
    public_url: Option<String>,
    clock: Arc<dyn Clock>,
    metrics: metrics::Metrics,
    sessions: browser::Sessions,
    policy: Option<Arc<Policy>>,
    chain: chain::ChainCache,
    /// A random key for the CSRF value of pages opened without a browser session (proxy
    /// sign-in): the value is a keyed digest of the signed-in identity.
    page_key: [u8; 32],
    /// Slack, when configured ([`Service::with_slack`]).
    slack: std::sync::OnceLock<Arc<slack::SlackConfig>>,
    /// Write one line per request to standard error ([`Service::with_request_log`]).
    request_log: std::sync::atomic::AtomicBool,
    /// The request log's lines, kept here instead of written, for the unit tests to read.
    #[cfg(test)]
    logged: std::sync::Mutex<Vec<String>>,
}

impl Service {
    /// A service with this configuration. Nothing is opened yet.
    pub fn new(config: ServiceConfig) -> Service {
        Service {
            inner: Arc::new(Inner {
                store: StoreHandle {
                    source: config.store,
                    opened: tokio::sync::OnceCell::new(),
                },
                sign_in: config.sign_in,
                directory: config.directory,
                auditors_group: config.auditors_group,
                public_url: config.public_url,
                clock: config.clock,
                metrics: metrics::Metrics::default(),
                sessions: browser::Sessions::default(),
                policy: config.policy,
                chain: chain::ChainCache::default(),
                page_key: {
                    let mut key = [0_u8; 32];
                    rand::RngCore::fill_bytes(&mut rand::rng(), &mut key);
                    key
                },
                slack: std::sync::OnceLock::new(),
                request_log: std::sync::atomic::AtomicBool::new(false),
                #[cfg(test)]
                logged: std::sync::Mutex::default(),
            }),
        }
    }

    /// This service with Slack (issue #17): its interactivity endpoint answers button presses
    /// (`POST /slack/interactions`), and the background task posts and updates one message per
    /// request. Set once: a second call keeps the first configuration.
    pub fn with_slack(self, slack: slack::SlackConfig) -> Service {
        let _ = self.inner.slack.set(Arc::new(slack));
        self
    }

    /// Log each request to standard error, one line: method, path (without its query),
    /// status, the refusal's reason code (`not_authenticated (expired)`, `not_entitled`) and
    /// the time taken, such as `countersign serve: POST /api/v1/approvals/apr_…/answer -> 403
    /// not_entitled (4 ms)`. Every request gets its line: API routes, the inbox's pages (a
    /// refusal shown as a page, or as the redirect to the sign-in form, logs its reason code
    /// too), and routes that do not exist (`404 not_found`). Never a header, a body, a token
    /// or a query: what a caller sends stays out of the log, and a token pasted into the path
    /// is logged as `[redacted token]` ([`redact_tokens`]) (found by a first-time user:
    /// `serve` logged nothing, not even a refused sign-in).
    pub fn with_request_log(self) -> Service {
        self.inner
            .request_log
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// Open the store now (the service also opens it on first use).
    ///
    /// # Errors
    ///
    /// [`StoreError`] when it cannot be opened; the service still serves, answering 503 until
    /// the store can be reached.
    pub async fn open_store(&self) -> Result<(), StoreError> {
        self.inner.store.get().await.map(|_| ())
    }

    /// The HTTP routes, with every error as problem details.
    pub fn router(&self) -> axum::Router {
        api::router(self.clone())
    }
}

/// Why `--listen` was refused.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// A non-loopback address without `--behind-proxy`.
    #[error(
        "refusing to listen on `{addr}` without TLS: the approval service has no TLS of its own; keep the default loopback address ({DEFAULT_LISTEN}) and reach it through a reverse proxy that terminates TLS, then pass `--behind-proxy` to listen where the proxy can reach it (see docs/approval-service.md)"
    )]
    NotLoopback {
        /// The address given.
        addr: SocketAddr,
    },
}

/// May the service listen on `addr`? Loopback always; any other address only `behind_proxy`
/// (a proxy in front terminates TLS).
///
/// # Errors
///
/// [`ListenError::NotLoopback`].
pub fn check_listen(addr: SocketAddr, behind_proxy: bool) -> Result<(), ListenError> {
    if addr.ip().is_loopback() || behind_proxy {
        Ok(())
    } else {
        Err(ListenError::NotLoopback { addr })
    }
}

/// Serve `service` on `listener` until `shutdown` completes, then finish the calls in flight,
/// with the default [`Notifications`]: the expiry sweeper runs, and no webhook is configured.
///
/// # Errors
///
/// The listener's I/O error.
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: Service,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_notifying(listener, service, Notifications::default(), shutdown).await
}

/// Serve `service` on `listener` until `shutdown` completes, then finish the calls in flight.
/// While it serves, a background task keeps the receipt chain's status current
/// ([`chain::REFRESH`]) for the receipts page, and another expires requests at their
/// `expires_at` and delivers the outbox's events ([`notify`]).
///
/// # Errors
///
/// The listener's I/O error.
pub async fn serve_notifying(
    listener: tokio::net::TcpListener,
    service: Service,
    notifications: Notifications,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let verifying = chain::spawn(&service);
    let notifying = notify::spawn(&service, notifications);
    let served = axum::serve(listener, service.router())
        .with_graceful_shutdown(shutdown)
        .await;
    verifying.abort();
    notifying.abort();
    served
}

/// Completes on Ctrl-C (SIGINT) or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        // If the handler cannot be installed, wait for the other signal only.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}

/// Completes on SIGINT, SIGTERM or SIGHUP (on other platforms, Ctrl-C), for a process whose
/// client went away with its terminal too (`countersign gateway`).
///
/// Unlike [`shutdown_signal`], the handlers are installed when this is called, not when the
/// future is first polled: a signal that comes while the caller is still starting (opening its
/// store) is kept, and completes the future at its first poll, instead of killing the process
/// by the default action. A signal whose handler cannot be installed is not waited for.
pub fn shutdown_signal_from_now() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        async fn next(signal: &mut Option<Signal>) {
            match signal {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        let mut interrupt = signal(SignalKind::interrupt()).ok();
        let mut terminate = signal(SignalKind::terminate()).ok();
        let mut hangup = signal(SignalKind::hangup()).ok();
        async move {
            tokio::select! {
                () = next(&mut interrupt) => {}
                () = next(&mut terminate) => {}
                () = next(&mut hangup) => {}
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listens_beyond_loopback_only_behind_a_proxy() {
        let loopback: SocketAddr = "127.0.0.1:8780".parse().expect("an address");
        let v6_loopback: SocketAddr = "[::1]:8780".parse().expect("an address");
        let public: SocketAddr = "0.0.0.0:8780".parse().expect("an address");
        assert!(check_listen(loopback, false).is_ok());
        assert!(check_listen(v6_loopback, false).is_ok());
        assert!(matches!(
            check_listen(public, false),
            Err(ListenError::NotLoopback { .. })
        ));
        assert!(check_listen(public, true).is_ok());
    }
}
