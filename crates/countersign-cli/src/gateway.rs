//! `countersign gateway`: Countersign in front of an MCP tool server.

use std::future::Future;
use std::io::Write;
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{ArgGroup, Args};
use countersign::{Policy, Principal, store};
use countersign_gateway::{
    Gateway, GatewayConfig, HeaderPrincipal, HttpFrontConfig, PrincipalSource, Upstream,
};

use crate::{Failure, Global};

/// Arguments of `gateway`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("upstream").required(true).args(["upstream_url", "command"])))]
pub struct GatewayArgs {
    /// The upstream's name in action names: its tools become `mcp.<ALIAS>.<tool>`.
    #[arg(long, value_name = "NAME")]
    alias: String,
    /// The principal every call is made as (for example `agent:claude-desktop`).
    #[arg(long, value_name = "PRINCIPAL", conflicts_with = "principal_header")]
    principal: Option<String>,
    /// Serve MCP over Streamable HTTP at `http://ADDR/mcp` instead of stdio (for example
    /// `127.0.0.1:8931`; port 0 picks a free port, printed on stderr). Loopback only unless
    /// --listen-public.
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
    /// Allow --listen on an address that is not loopback (requires --principal-header).
    #[arg(long, requires = "listen")]
    listen_public: bool,
    /// A browser origin allowed to call the HTTP front (repeatable; exact match, for example
    /// `http://localhost:5173`). Requests with any other Origin get 403.
    #[arg(long, value_name = "ORIGIN", requires = "listen")]
    allow_origin: Vec<String>,
    /// Take each HTTP session's principal from this header, set by an authenticating proxy,
    /// trusted only with `Authorization: Bearer <secret>` (see --principal-header-secret-file).
    #[arg(
        long,
        value_name = "HEADER",
        requires_all = ["listen", "principal_header_secret_file"]
    )]
    principal_header: Option<String>,
    /// A file holding the shared secret (at least 32 bytes) the proxy presents as a bearer
    /// token. Kept in a file so that it never shows in the process list.
    #[arg(long, value_name = "PATH", requires = "principal_header")]
    principal_header_secret_file: Option<std::path::PathBuf>,
    /// The most live HTTP sessions, each with its own upstream connection.
    #[arg(long, value_name = "N", default_value_t = countersign_gateway::DEFAULT_MAX_SESSIONS, requires = "listen")]
    max_sessions: usize,
    /// How long the upstream has to answer a tools/call (then: ambiguous, cancelled, never
    /// re-sent).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "120s", value_parser = crate::args::positive_duration)]
    call_timeout: Duration,
    /// When approval is needed, wait this long for `countersign approve` before answering.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::args::any_duration)]
    approval_wait: Option<Duration>,
    /// List every upstream tool, also those the policy can never permit.
    #[arg(long)]
    show_all_tools: bool,
    /// Never ask for approvals inline through the client's elicitation support.
    #[arg(long)]
    no_elicitation: bool,
    /// Count this MCP client's elicitation answers as a human's: the authenticated principal of
    /// an HTTP client (with --principal-header), or `stdio` for the client on standard input.
    /// Repeat for several. Unattested clients' answers are recorded as refused and leave the
    /// request pending for `countersign approve`. Never matched against a client's
    /// self-reported name.
    #[arg(long = "attested-client", value_name = "NAME")]
    attested_clients: Vec<String>,
    /// The approval service's base URL (`countersign serve`, for example
    /// `https://approvals.example.com`). A client that supports URL-mode elicitation is sent to
    /// the service's page for the request (`BASE/requests/apr_…`), where the person signs in;
    /// the identical call, sent again after an entitled approver said yes, runs once. Nothing
    /// in the URL authorizes.
    #[arg(long, value_name = "BASE")]
    approval_url: Option<String>,
    /// The largest message accepted, in bytes, whitespace included: from 1024 (an
    /// `initialize` must fit) to 4194304, the kernel's JSON reader's own limit.
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = countersign_gateway::DEFAULT_MAX_MESSAGE_BYTES as u64,
        value_parser = clap::value_parser!(u64).range(1024..=countersign::json::MAX_TEXT_BYTES as u64)
    )]
    max_message_bytes: u64,
    /// The upstream MCP server's Streamable HTTP endpoint: `http://…`, or `https://…` with
    /// its certificate verified against the system's trust store (or --upstream-ca).
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    upstream_url: Option<String>,
    /// Trust only the certificate authorities in this PEM file for an `https://` --upstream-url
    /// (a private CA), instead of the system's trust store.
    #[arg(long, value_name = "FILE", requires = "upstream_url")]
    upstream_ca: Option<std::path::PathBuf>,
    /// The upstream MCP server's command, after `--`.
    #[arg(last = true, value_name = "UPSTREAM COMMAND")]
    command: Vec<String>,
}

/// `countersign gateway`.
pub async fn run(
    global: &Global,
    args: &GatewayArgs,
    _out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let mut signal = Signal::install();
    let policy_path = global.policy_path();
    let policy = Policy::load(&policy_path)?;
    let url = global.store_url();
    if let Some(path) = url.strip_prefix("sqlite:") {
        let path = path.strip_prefix("//").unwrap_or(path);
        let path = path.split('?').next().unwrap_or(path);
        if let Some(folder) = std::path::Path::new(path).parent()
            && !folder.as_os_str().is_empty()
        {
            std::fs::create_dir_all(folder).map_err(|error| {
                Failure(format!(
                    "cannot create the store folder `{}`: {error}",
                    folder.display()
                ))
            })?;
        }
    }
    let store = store::open_url_async(&url).await?;
    let principal = match (&args.principal, &args.principal_header) {
        (Some(name), _) => PrincipalSource::Fixed(Principal::new(name)?),
        (None, Some(header)) => {
            let path = args
                .principal_header_secret_file
                .as_deref()
                .ok_or_else(|| {
                    Failure(
                        "--principal-header needs --principal-header-secret-file PATH".to_owned(),
                    )
                })?;
            let secret = std::fs::read_to_string(path).map_err(|error| {
                Failure(format!(
                    "cannot read the shared secret `{}`: {error}",
                    path.display()
                ))
            })?;
            PrincipalSource::Header(HeaderPrincipal::new(header, secret.trim())?)
        }
        (None, None) => {
            return Err(Failure(
                "no principal: pass --principal NAME (or, with --listen, --principal-header): no principal, no call".to_owned(),
            ));
        }
    };
    let mut config = GatewayConfig::new(args.alias.clone(), principal);
    config.call_timeout = args.call_timeout;
    config.approval_wait = args.approval_wait;
    config.hide_unpermitted_tools = !args.show_all_tools;
    config.elicitation = !args.no_elicitation;
    config.attested_clients = args.attested_clients.clone();
    config.approval_url = args.approval_url.clone();
    config.max_message_bytes = usize::try_from(args.max_message_bytes)
        .unwrap_or(countersign_gateway::DEFAULT_MAX_MESSAGE_BYTES);
    config.command_flags = Some(crate::store_access::absolute_store_flags(global));
    if url.starts_with("memory:") {
        config.command_flags = None;
        countersign::stderr_line!(
            "countersign gateway: warning: the store is `memory:`, so no other process (`countersign approve`, `countersign serve`) can answer an approval request; answers come only through the client's elicitation, and nothing is kept when the gateway exits"
        );
    }
    if let Some(file) = &args.upstream_ca {
        if !args
            .upstream_url
            .as_deref()
            .is_some_and(|url| url.to_ascii_lowercase().starts_with("https://"))
        {
            return Err(Failure(
                "--upstream-ca is for an https:// --upstream-url: give the upstream's https:// address, or leave --upstream-ca out".to_owned(),
            ));
        }
        config.upstream_trust = Some(
            countersign_http::Trust::pem_file(file)
                .map_err(|error| Failure(format!("--upstream-ca: {error}")))?,
        );
    }
    let upstream = match (&args.upstream_url, args.command.split_first()) {
        (Some(url), _) => Upstream::Url(url.clone()),
        (None, Some((program, rest))) => Upstream::Command {
            program: program.clone(),
            args: rest.to_vec(),
        },
        (None, None) => {
            return Err(Failure(
                "no upstream: give its command after `--`, or --upstream-url URL".to_owned(),
            ));
        }
    };
    let gateway = Gateway::new(config, Arc::new(policy), store)?;
    if let Some(address) = args.listen {
        let front = HttpFrontConfig {
            public: args.listen_public,
            allowed_origins: args.allow_origin.clone(),
            max_sessions: args.max_sessions,
        };
        if !front.public && !address.ip().is_loopback() {
            return Err(countersign_gateway::GatewayError::PublicListen(address).into());
        }
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|error| Failure(format!("cannot listen on `{address}`: {error}")))?;
        let bound = listener
            .local_addr()
            .map_err(|error| Failure(format!("cannot listen on `{address}`: {error}")))?;
        countersign::stderr_line!(
            "countersign gateway: listening on http://{bound}{}",
            countersign_gateway::HTTP_PATH
        );
        gateway
            .serve_http_until(
                listener,
                front,
                upstream.reconnecting()?,
                signal.shutdown(&gateway),
            )
            .await?;
        signal.say_stopped();
        return Ok(ExitCode::SUCCESS);
    }
    // The command line holds the standard output lock while a command runs; write the
    // protocol through a duplicate of the descriptor instead of `std::io::stdout()`.
    let stdout = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|error| Failure(format!("cannot use standard output: {error}")))?;
    let stdout = tokio::fs::File::from_std(std::fs::File::from(stdout));
    gateway
        .serve_io_until(
            tokio::io::stdin(),
            stdout,
            upstream,
            signal.shutdown(&gateway),
        )
        .await?;
    signal.say_stopped();
    Ok(ExitCode::SUCCESS)
}

/// `SIGINT`, `SIGTERM` or `SIGHUP`, and whether one came: the gateway then stops at once
/// (running tool calls cancelled and recorded), closes its store and exits 0, as `countersign
/// serve` does; a second one while it stops kills the upstream rather than wait for it. The handlers are installed when this is made, before the store is opened, so
/// that a signal while starting is kept rather than killing the process half-open.
struct Signal {
    came: Arc<std::sync::atomic::AtomicBool>,
    installed: Option<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Signal {
    fn install() -> Signal {
        Signal {
            came: Arc::default(),
            installed: Some(Box::pin(countersign_server::shutdown_signal_from_now())),
        }
    }

    /// Completes on the first signal (at once if one came since [`Signal::install`]). A second
    /// signal during the stop that follows forces it ([`Gateway::force_stop`]): the upstream is
    /// killed instead of being given its few seconds of grace.
    fn shutdown(&mut self, gateway: &Gateway) -> impl Future<Output = ()> + Send + 'static {
        let came = Arc::clone(&self.came);
        let installed = self.installed.take();
        let gateway = gateway.clone();
        async move {
            match installed {
                Some(signal) => signal.await,
                None => std::future::pending::<()>().await,
            }
            came.store(true, std::sync::atomic::Ordering::SeqCst);
            // Listening from now on, before the stop begins, so no second signal is missed.
            let again = countersign_server::shutdown_signal_from_now();
            tokio::spawn(async move {
                again.await;
                countersign::stderr_line!(
                    "countersign gateway: a second signal: the upstream is killed without waiting for it to exit"
                );
                gateway.force_stop();
            });
        }
    }

    /// Say on standard error (standard output is the protocol's) that a signal stopped it.
    fn say_stopped(&self) {
        if self.came.load(std::sync::atomic::Ordering::SeqCst) {
            countersign::stderr_line!(
                "countersign gateway: stopped by a signal: running tool calls were cancelled (each one already sent upstream is recorded `ambiguous`, never run again) and the store was closed"
            );
        }
    }
}
