//! The MCP gateway: Countersign in front of any MCP tool server.
//!
//! The gateway is an MCP server to its client (over stdio, or as a Streamable HTTP endpoint
//! with [`Gateway::serve_http`]) and an MCP client to one upstream server (a child process over stdio, or Streamable HTTP). Everything
//! passes through as it came (initialize, notifications, resources, prompts, pings, progress)
//! except `tools/call`, which becomes the Countersign action `mcp.<alias>.<tool>` with the
//! call's arguments canonicalized, and is decided by the kernel ([`countersign::Control`]):
//!
//! - `allow`: the upstream receives the canonical arguments; the result comes back with its
//!   receipt in `_meta.countersign.receipt` (`seq`, `hash`, `outcome`, ...).
//! - `approve`: the client gets a JSON-RPC error [`codes::APPROVAL_REQUIRED`] naming the request
//!   (`countersign approve apr_…`); the identical call, sent again after the approval, runs
//!   once. A client that declares elicitation support is asked inline instead.
//! - `deny`: [`codes::POLICY_DENIED`]; the upstream never sees the call.
//!
//! Outcomes are never guessed: a result is `committed`; `isError` or a JSON-RPC error is
//! `ambiguous` unless the policy entry says `mcp: { not_executed_on_error: true }`; a call that
//! never reached the upstream is `failed` (retry allowed); a timeout (after which the gateway
//! sends `notifications/cancelled` and never re-sends), a cut stream, a reply whose id matches
//! no request, malformed JSON and HTTP errors are `ambiguous`, with the raw reply kept in the
//! receipt's `detail`.
//!
//! `tools/list` hides, per principal, the tools the policy can never permit for it
//! ([`countersign::Policy::could_permit`]; configurable), including tools announced later; a
//! call to a hidden tool is decided like any other, so an unlisted one falls under the policy's
//! fail-closed default. A tool's annotations only ever tighten: a pattern entry's `allow` is
//! raised to `approve` for a tool whose `destructiveHint` is true or absent. The tool's input
//! schema is part of the action hash, so a changed schema voids open requests (`tool_changed`).
//! With [`GatewayConfig::approval_url`], a client that supports URL-mode elicitation is sent to
//! the approval service's page for the request (issue #27).
//!
//! MCP 2026-07-28 is served beside the handshake revisions ([`era`]): a request carrying its
//! own `_meta` version needs no `initialize` and no session, `server/discover` is answered by
//! the gateway, approvals become input-required results whose `requestState` is
//! HMAC-protected, and the upstream is spoken to in the newest revision both support.
//!
//! The principal comes from the configuration (or, over HTTP, a header set by an
//! authenticating proxy that also presents the gateway's shared secret), never from the model
//! or the arguments: no principal, no call. The HTTP front's security defaults (loopback only,
//! an `Origin` allow-list, a body cap, no batches) are in `docs/gateway.md`.
#![forbid(unsafe_code)]
// Standard error through `countersign::stderr_line!`, which never panics on a closed stream.
#![deny(clippy::print_stderr)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use countersign::{Policy, Principal, Store};
use tokio::io::{AsyncRead, AsyncWrite};

pub mod codes;
pub mod era;
mod front;
#[doc(hidden)]
pub mod fuzzing;
mod lines;
mod request_state;
mod session;
mod tasks;
mod upstream;
mod wire;

use session::LateReplies;

/// The default cap on one JSON-RPC message, in either direction: 4 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The default time an upstream has to answer a `tools/call`: 120 seconds.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Where the principal of every call comes from.
#[derive(Clone, Debug)]
pub enum PrincipalSource {
    /// Always this principal (the operator's configuration).
    Fixed(Principal),
    /// The value of a request header, set by an authenticating reverse proxy, trusted only on
    /// a request that also carries the proxy's shared secret; Streamable HTTP front only. The
    /// stdio front has no headers: every call is refused with `no_principal`.
    Header(HeaderPrincipal),
    /// None: every call is refused with `no_principal`.
    Missing,
}

/// The smallest shared secret [`HeaderPrincipal`] accepts: 32 bytes.
pub const MIN_SECRET_BYTES: usize = 32;

/// A principal taken from a request header, trusted only when the same request carries
/// `Authorization: Bearer <secret>` with the shared secret the operator gave the gateway and
/// its authenticating proxy.
///
/// The secret proves the request came through the proxy, which authenticated the caller and
/// set the header; without it anyone who can reach the port could name any principal. The
/// secret is compared in constant time (over SHA-256 digests) and never printed.
#[derive(Clone)]
pub struct HeaderPrincipal {
    header: String,
    secret_digest: [u8; 32],
}

impl HeaderPrincipal {
    /// Trust header `header` (case-insensitive, for example `x-countersign-principal`) on
    /// requests that present `secret` as a bearer token.
    ///
    /// # Errors
    ///
    /// [`GatewayError::BadPrincipalHeader`] when `header` is not a valid header name, or
    /// `secret` is shorter than [`MIN_SECRET_BYTES`] or holds whitespace.
    pub fn new(header: &str, secret: &str) -> Result<HeaderPrincipal, GatewayError> {
        let header = header.trim().to_ascii_lowercase();
        let header_ok = !header.is_empty()
            && header
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
        if !header_ok {
            return Err(GatewayError::BadPrincipalHeader(format!(
                "`{header}` is not a header name: use letters, digits and `-`"
            )));
        }
        if header == "authorization" {
            return Err(GatewayError::BadPrincipalHeader(
                "the principal header cannot be `authorization`, which carries the shared secret: use for example `x-countersign-principal`".to_owned(),
            ));
        }
        if secret.len() < MIN_SECRET_BYTES || secret.chars().any(char::is_whitespace) {
            return Err(GatewayError::BadPrincipalHeader(format!(
                "the shared secret must be at least {MIN_SECRET_BYTES} bytes with no whitespace: generate one with `openssl rand -hex 32`"
            )));
        }
        Ok(HeaderPrincipal {
            header,
            secret_digest: digest(secret.as_bytes()),
        })
    }

    /// The header name, lowercase.
    pub fn header(&self) -> &str {
        &self.header
    }

    /// True when `presented` is the shared secret (constant time).
    pub(crate) fn secret_matches(&self, presented: &[u8]) -> bool {
        let presented = digest(presented);
        // INVARIANT (constant-time-secret): no early exit on the first differing byte.
        presented
            .iter()
            .zip(self.secret_digest.iter())
            .fold(0u8, |difference, (a, b)| difference | (a ^ b))
            == 0
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

impl std::fmt::Debug for HeaderPrincipal {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("HeaderPrincipal")
            .field("header", &self.header)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// The path of the Streamable HTTP front's one endpoint: `/mcp`.
pub const HTTP_PATH: &str = "/mcp";

/// The default number of live Streamable HTTP sessions (each has its own upstream
/// connection): 16.
pub const DEFAULT_MAX_SESSIONS: usize = 16;

/// Settings of the Streamable HTTP front ([`Gateway::serve_http`]).
#[derive(Clone, Debug)]
pub struct HttpFrontConfig {
    /// Serve on an address that is not loopback. Off by default; when on, the principal must
    /// come from an authenticated header ([`PrincipalSource::Header`]), never a fixed one.
    pub public: bool,
    /// Browser origins allowed to call the gateway, exact (ASCII case-insensitive) matches of
    /// the `Origin` header such as `http://localhost:5173`. A request with any other `Origin`
    /// gets 403; a request without one (a program, not a browser page) is allowed. Default:
    /// none.
    pub allowed_origins: Vec<String>,
    /// The most live sessions; an `initialize` beyond it gets 503 (default
    /// [`DEFAULT_MAX_SESSIONS`]).
    pub max_sessions: usize,
}

impl Default for HttpFrontConfig {
    fn default() -> HttpFrontConfig {
        HttpFrontConfig {
            public: false,
            allowed_origins: Vec::new(),
            max_sessions: DEFAULT_MAX_SESSIONS,
        }
    }
}

/// The gateway's settings.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// The upstream's alias: tools become `mcp.<alias>.<tool>`. Letters, digits, `_` and `-`.
    pub alias: String,
    /// Where the principal comes from.
    pub principal: PrincipalSource,
    /// How long the upstream has to answer a `tools/call` before the outcome is `ambiguous`.
    pub call_timeout: Duration,
    /// Hide, in `tools/list`, tools the policy can never permit for the session's principal
    /// (default true).
    pub hide_unpermitted_tools: bool,
    /// Ask for approvals inline when the client declares elicitation support (default true).
    pub elicitation: bool,
    /// How long an inline (elicitation) question waits for the human before the request is
    /// left pending for `countersign approve` (default 10 minutes).
    pub elicitation_timeout: Duration,
    /// When approval is needed, wait this long for an out-of-band answer before replying
    /// `approval_required` (default: do not wait).
    pub approval_wait: Option<Duration>,
    /// The largest message accepted, in bytes ([`DEFAULT_MAX_MESSAGE_BYTES`]).
    pub max_message_bytes: usize,
    /// Write one line per decision to stderr (never arguments).
    pub log: bool,
    /// The MCP clients whose elicitation answers count as a human's (`--attested-client`): the
    /// authenticated principal of an HTTP client, or `stdio` for the client on the gateway's
    /// own standard input. An "accept" from any other client is recorded as a refused answer
    /// and leaves the request pending for another channel. Never matched against the
    /// client's self-reported `clientInfo.name`.
    pub attested_clients: Vec<String>,
    /// The key that integrity-protects the `requestState` of 2026-07-28 input-required results
    /// (HMAC-SHA-256; at least [`MIN_SECRET_BYTES`] bytes). `None` (the default): 32 random
    /// bytes made when the gateway starts, so a state outlives neither the process nor a
    /// restart; set one to let states survive a restart or span replicas.
    pub request_state_key: Option<RequestStateKey>,
    /// The certificate authorities an `https://` upstream's certificate must chain to
    /// (`--upstream-ca FILE`). `None` (the default): the system's trust store
    /// ([`countersign_http::Trust::system`]). A handshake that fails (unknown authority, a
    /// certificate for another host name, expired) fails the request before anything is sent:
    /// the call is `not_executed`, with the reason and what to do in the message. Never
    /// downgraded to plain HTTP.
    pub upstream_trust: Option<countersign_http::Trust>,
    /// The approval service's base URL (`--approval-url`, for example
    /// `https://approvals.example.com`): when set, a client that supports URL-mode elicitation
    /// (MCP 2025-11-25's `elicitation.url` capability, or the same in a 2026-07-28 request's
    /// capabilities) is sent to the service's page for the request, `<base>/requests/<id>`,
    /// instead of being asked inline (issue #27). The URL carries nothing that authorizes: the
    /// page has the service's own sign-in and entitlement. Checked by [`Gateway::new`].
    pub approval_url: Option<String>,
    /// Flags a suggested `countersign` command needs to reach this gateway's store, such as
    /// ` --policy agent.yaml --store-url sqlite:x.db` (leading space; empty, the default, when
    /// the defaults apply): appended to `data.approve_with`. Never a password: the CLI leaves it
    /// out of the store URL ([`countersign::store::redact_url`]). `None` when no other process
    /// can reach the store (`memory:`): then no command is suggested, and a refusal says to
    /// answer in the client's approval prompt instead.
    pub command_flags: Option<String>,
}

/// A key for [`GatewayConfig::request_state_key`]; never printed.
#[derive(Clone)]
pub struct RequestStateKey(Vec<u8>);

impl RequestStateKey {
    /// The key `bytes` (checked for length by [`Gateway::new`]).
    pub fn new(bytes: Vec<u8>) -> RequestStateKey {
        RequestStateKey(bytes)
    }
}

impl std::fmt::Debug for RequestStateKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("RequestStateKey(<redacted>)")
    }
}

impl GatewayConfig {
    /// Defaults for `alias` and `principal`.
    pub fn new(alias: impl Into<String>, principal: PrincipalSource) -> GatewayConfig {
        GatewayConfig {
            alias: alias.into(),
            principal,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            hide_unpermitted_tools: true,
            elicitation: true,
            elicitation_timeout: Duration::from_secs(600),
            approval_wait: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            log: true,
            attested_clients: Vec::new(),
            request_state_key: None,
            upstream_trust: None,
            approval_url: None,
            command_flags: Some(String::new()),
        }
    }
}

/// The MCP server the gateway fronts.
pub enum Upstream {
    /// A child process speaking MCP over its stdin and stdout.
    Command {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A Streamable HTTP endpoint (`http://…`, or `https://…` verified against
    /// [`GatewayConfig::upstream_trust`]).
    Url(String),
    /// An MCP server already connected over a byte stream (newline-delimited JSON-RPC).
    Io {
        /// What the server writes.
        reader: Box<dyn AsyncRead + Send + Unpin>,
        /// What the server reads.
        writer: Box<dyn AsyncWrite + Send + Unpin>,
    },
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Upstream::Command { program, args } => formatter
                .debug_struct("Command")
                .field("program", program)
                .field("args", args)
                .finish(),
            Upstream::Url(url) => formatter.debug_tuple("Url").field(url).finish(),
            Upstream::Io { .. } => formatter.write_str("Io"),
        }
    }
}

/// Why the gateway could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The alias is not usable in action names.
    #[error(
        "alias `{0}` is not usable: use letters, digits, `_` and `-` only (it becomes `mcp.<alias>.<tool>`)"
    )]
    BadAlias(String),
    /// The upstream command could not be started.
    #[error("cannot start the upstream `{program}`: {source}: check the command after `--`")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// Reading from or writing to the client failed.
    #[error("the client connection failed: {0}")]
    Client(std::io::Error),
    /// The principal header settings are unusable.
    #[error("the principal header is unusable: {0}")]
    BadPrincipalHeader(String),
    /// The HTTP front was asked to listen on a non-loopback address without opting in.
    #[error(
        "refusing to listen on `{0}`, which is not a loopback address: use 127.0.0.1, or pass --listen-public with --principal-header behind an authenticating proxy"
    )]
    PublicListen(SocketAddr),
    /// A public HTTP front was configured without an authenticated principal header.
    #[error(
        "a public listener needs the principal from an authenticated header: pass --principal-header and --principal-header-secret-file, not --principal"
    )]
    PublicWithoutAuthentication,
    /// An [`Upstream::Io`] cannot be shared by HTTP sessions.
    #[error(
        "an upstream byte stream serves one client only: give the HTTP front a command or a URL"
    )]
    UpstreamNotReusable,
    /// The configured `requestState` key is too short.
    #[error(
        "the requestState key must be at least 32 bytes: generate one with `openssl rand -hex 32`"
    )]
    BadStateKey,
    /// The approval service's URL is unusable.
    #[error(
        "the approval URL `{0}` is unusable: give the service's base URL, `http://` or `https://` with a host and no query or fragment, such as `https://approvals.example.com`"
    )]
    BadApprovalUrl(String),
    /// Accepting HTTP connections failed.
    #[error("the HTTP listener failed: {0}")]
    Listen(std::io::Error),
    /// The stdio upstream connection ended while the client was still connected (the server
    /// exited or closed its output): the gateway cannot serve, and says so.
    #[error(
        "the upstream ended while its client was still connected ({0}): look for the server's own messages above, then start the gateway again"
    )]
    UpstreamGone(String),
    /// The gateway stopped on its shutdown, but the store refused to record some of the tool
    /// calls it cancelled ([`countersign::Control::settled`]).
    #[error("stopped, but {0}")]
    Unrecorded(countersign::UnrecordedAttempts),
    /// The upstream URL is not an `http://` or `https://` URL.
    #[error(
        "the upstream URL `{0}` is not an http:// or https:// URL: give the server's Streamable HTTP endpoint, for example `https://mcp.example.com/mcp`"
    )]
    BadUpstreamUrl(String),
    /// The HTTP client for the upstream could not be made.
    #[error("cannot reach the upstream over HTTP: {0}")]
    HttpClient(#[from] countersign_http::HttpClientError),
}

/// A late reply to a `tools/call` that timed out: never delivered, kept as evidence and used
/// by reconciliation (a late success proves the effect committed).
#[derive(Clone, Debug)]
pub struct LateReply {
    /// The gateway's upstream request id the reply carried.
    pub upstream_id: u64,
    /// The action name.
    pub action: String,
    /// The effect key, if the action had one.
    pub effect_key: Option<String>,
    /// True for a result without `isError`.
    pub success: bool,
    /// The reply as it came (at most 64 KiB).
    pub raw: String,
}

pub(crate) struct GatewayShared {
    pub(crate) config: GatewayConfig,
    pub(crate) policy: Arc<Policy>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) late: Arc<LateReplies>,
    pub(crate) state_key: request_state::StateKey,
    /// Each upstream tool's input schema digest as this gateway last saw it listed (`None`:
    /// listed without a usable schema); a change voids its open requests (issue #27).
    pub(crate) tool_schemas: std::sync::Mutex<std::collections::HashMap<String, Option<String>>>,
    /// Set by [`Gateway::force_stop`]: ending an upstream skips its grace.
    pub(crate) forced: tokio::sync::watch::Sender<bool>,
}

/// A configured gateway. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    shared: Arc<GatewayShared>,
}

impl Gateway {
    /// A gateway deciding with `policy` and recording in `store`.
    ///
    /// # Errors
    ///
    /// [`GatewayError::BadAlias`] for an alias with characters other than letters, digits,
    /// `_` and `-` (a `.` would make `mcp.<alias>.<tool>` ambiguous);
    /// [`GatewayError::BadStateKey`] for a short `requestState` key;
    /// [`GatewayError::BadApprovalUrl`] for an approval URL that is not an `http(s)` base URL.
    pub fn new(
        config: GatewayConfig,
        policy: Arc<Policy>,
        store: Arc<dyn Store>,
    ) -> Result<Gateway, GatewayError> {
        let alias_ok = !config.alias.is_empty()
            && config
                .alias
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !alias_ok {
            return Err(GatewayError::BadAlias(config.alias));
        }
        if config
            .request_state_key
            .as_ref()
            .is_some_and(|key| key.0.len() < MIN_SECRET_BYTES)
        {
            return Err(GatewayError::BadStateKey);
        }
        if let Some(url) = &config.approval_url
            && !approval_url_ok(url)
        {
            return Err(GatewayError::BadApprovalUrl(url.clone()));
        }
        let state_key = request_state::StateKey::new(
            config
                .request_state_key
                .as_ref()
                .map(|key| key.0.as_slice()),
        );
        Ok(Gateway {
            shared: Arc::new(GatewayShared {
                config,
                policy,
                store,
                late: Arc::new(LateReplies::default()),
                state_key,
                tool_schemas: std::sync::Mutex::new(std::collections::HashMap::new()),
                forced: tokio::sync::watch::Sender::new(false),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GatewayConfig {
        &self.shared.config
    }

    /// Stop without the upstreams' grace, as on a second `SIGINT` while a stop is under way:
    /// an upstream command being ended, or ended later, has its process group killed
    /// (`SIGKILL`) at once instead of being given 2 s to exit after its input closes and 2 s
    /// more after `SIGTERM`; an HTTP upstream session is abandoned without its `DELETE`.
    /// Nothing else is cut short: running calls are still cancelled and recorded first, so no
    /// effect key is left to its lease. Lasts for the life of this gateway and its clones.
    pub fn force_stop(&self) {
        self.shared.forced.send_replace(true);
    }

    /// Late replies to timed-out calls seen so far (evidence; never delivered to a client).
    pub fn late_replies(&self) -> Vec<LateReply> {
        self.shared.late.all()
    }

    /// Serve one client over the process's stdin and stdout until either side closes.
    ///
    /// # Errors
    ///
    /// [`GatewayError`]: the upstream cannot start, or the client connection failed.
    pub async fn serve_stdio(&self, upstream: Upstream) -> Result<(), GatewayError> {
        self.serve_io(tokio::io::stdin(), tokio::io::stdout(), upstream)
            .await
    }

    /// Serve one client speaking newline-delimited JSON-RPC on `reader`/`writer` until either
    /// side closes. When `reader` ends, every request already read is answered first (as
    /// [`Gateway::serve_io_until`] without a shutdown).
    ///
    /// # Errors
    ///
    /// As [`Gateway::serve_stdio`].
    pub async fn serve_io<R, W>(
        &self,
        reader: R,
        writer: W,
        upstream: Upstream,
    ) -> Result<(), GatewayError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        self.serve_io_until(reader, writer, upstream, std::future::pending())
            .await
    }

    /// [`Gateway::serve_io`], until `shutdown` completes (for example on `SIGTERM`).
    ///
    /// - **The client's input ends** (how an MCP host stops a stdio server): nothing more is
    ///   read, and this returns once every request already read has its reply written (tool
    ///   calls run to their end; a `subscriptions/listen` stream is not waited for). The
    ///   gateway asks the client nothing from then on: an approval it would have elicited stays
    ///   pending and the call is answered as suspended.
    /// - **`shutdown` completes**: nothing more is read, every running tool call is cancelled
    ///   without a reply, and this returns once the kernel has recorded each one whose upstream
    ///   request was sent as `ambiguous` (never released for a second run). Replies already made
    ///   get up to 1 second to be written.
    ///
    /// # Errors
    ///
    /// As [`Gateway::serve_stdio`].
    pub async fn serve_io_until<R, W, S>(
        &self,
        reader: R,
        writer: W,
        upstream: Upstream,
        shutdown: S,
    ) -> Result<(), GatewayError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
        S: std::future::Future<Output = ()> + Send,
    {
        front::stdio::serve(Arc::clone(&self.shared), reader, writer, upstream, shutdown).await
    }

    /// Serve MCP clients over Streamable HTTP on `listener`, at the path `/mcp`, until
    /// accepting fails. Each session (one `initialize`) gets its own upstream connection from
    /// `upstream`, which is called once per session.
    ///
    /// Security defaults (see `docs/gateway.md`): a listener on a non-loopback address is
    /// refused unless [`HttpFrontConfig::public`]; the `Host` of a loopback listener must be a
    /// loopback name; a disallowed `Origin` gets 403; a body over
    /// [`GatewayConfig::max_message_bytes`] gets 413; a JSON-RPC batch gets 400; the principal
    /// is the configured one or the authenticated header's (no principal: 401).
    ///
    /// # Errors
    ///
    /// [`GatewayError::PublicListen`], [`GatewayError::PublicWithoutAuthentication`] before
    /// serving; [`GatewayError::Listen`] when accepting connections fails.
    pub async fn serve_http<F>(
        &self,
        listener: tokio::net::TcpListener,
        front: HttpFrontConfig,
        upstream: F,
    ) -> Result<(), GatewayError>
    where
        F: Fn() -> Result<Upstream, GatewayError> + Send + Sync + 'static,
    {
        self.serve_http_until(listener, front, upstream, std::future::pending())
            .await
    }

    /// [`Gateway::serve_http`], until `shutdown` completes (for example on `SIGTERM`): then no
    /// connection is accepted, every session's running tool calls are cancelled without a
    /// reply, and this returns once the kernel has recorded each one whose upstream request
    /// was sent as `ambiguous` (never released for a second run).
    ///
    /// # Errors
    ///
    /// As [`Gateway::serve_http`].
    pub async fn serve_http_until<F, S>(
        &self,
        listener: tokio::net::TcpListener,
        front: HttpFrontConfig,
        upstream: F,
        shutdown: S,
    ) -> Result<(), GatewayError>
    where
        F: Fn() -> Result<Upstream, GatewayError> + Send + Sync + 'static,
        S: std::future::Future<Output = ()> + Send,
    {
        front::http::serve(
            Arc::clone(&self.shared),
            listener,
            front,
            Arc::new(upstream),
            shutdown,
        )
        .await
    }
}

impl Upstream {
    /// A factory for [`Gateway::serve_http`]: a fresh connection to the same upstream per
    /// session.
    ///
    /// # Errors
    ///
    /// [`GatewayError::UpstreamNotReusable`] for [`Upstream::Io`], which serves one client.
    pub fn reconnecting(
        self,
    ) -> Result<impl Fn() -> Result<Upstream, GatewayError> + Send + Sync + 'static, GatewayError>
    {
        let (program, args, url) = match self {
            Upstream::Command { program, args } => (Some(program), args, None),
            Upstream::Url(url) => (None, Vec::new(), Some(url)),
            Upstream::Io { .. } => return Err(GatewayError::UpstreamNotReusable),
        };
        Ok(move || {
            Ok(match (&program, &url) {
                (Some(program), _) => Upstream::Command {
                    program: program.clone(),
                    args: args.clone(),
                },
                (None, Some(url)) => Upstream::Url(url.clone()),
                (None, None) => return Err(GatewayError::UpstreamNotReusable),
            })
        })
    }
}

/// Is `url` an `http://` or `https://` base URL with a host, and no query, fragment,
/// whitespace or control character (the approval page's URL is built from it)?
fn approval_url_ok(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    let Some(rest) = rest else { return false };
    let host = rest.split('/').next().unwrap_or_default();
    !host.is_empty()
        && !url.chars().any(|c| {
            c.is_whitespace() || c.is_control() || matches!(c, '?' | '#' | '"' | '<' | '>')
        })
}

/// The approval service's page for request `request_id` under base URL `base`.
pub(crate) fn approval_page(base: &str, request_id: &str) -> String {
    format!("{}/requests/{request_id}", base.trim_end_matches('/'))
}

/// Connect to `upstream` as [`front`]s need it.
pub(crate) fn connect(
    shared: &GatewayShared,
    upstream: Upstream,
) -> Result<
    (
        Arc<dyn upstream::Link>,
        tokio::sync::mpsc::UnboundedReceiver<upstream::Event>,
    ),
    GatewayError,
> {
    let max = shared.config.max_message_bytes;
    match upstream {
        Upstream::Command { program, args } => upstream::spawn_command(&program, &args, max)
            .map_err(|source| GatewayError::Spawn { program, source }),
        Upstream::Url(url) => {
            let scheme = url
                .split_once("://")
                .map(|(scheme, _)| scheme.to_ascii_lowercase());
            let trust = match scheme.as_deref() {
                Some("https") => shared
                    .config
                    .upstream_trust
                    .clone()
                    .unwrap_or_else(countersign_http::Trust::system),
                // Plain HTTP needs no authority; a redirect to https:// then fails closed.
                Some("http") => shared
                    .config
                    .upstream_trust
                    .clone()
                    .unwrap_or_else(countersign_http::Trust::nothing),
                _ => return Err(GatewayError::BadUpstreamUrl(url)),
            };
            let client = countersign_http::client(&trust)?;
            // A renewal may take half of a call's time, so that a call waiting on it is
            // answered `not_executed` before its own reply times out.
            let renew_wait = shared.config.call_timeout / 2;
            Ok(upstream::connect_http(client, trust, &url, max, renew_wait))
        }
        Upstream::Io { reader, writer } => Ok(upstream::connect_io(reader, writer, max)),
    }
}
