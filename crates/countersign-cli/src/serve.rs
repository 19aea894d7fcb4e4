//! `countersign serve`: the approval service (sign-in, the web inbox and the JSON API).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use countersign::token::PublicKey;
use countersign::{Policy, SystemClock, store};
use countersign_server::auth::{DEFAULT_SECRET_HEADER, ProxySignIn, SignIn};
use countersign_server::jwks::{DEFAULT_MAX_AGE, JwksSource, JwtRules, OidcSignIn};
use countersign_server::slack::SlackConfig;
use countersign_server::webhook::{WebhookEndpoint, WebhookSecret};
use countersign_server::{Notifications, Service, ServiceConfig, StoreSource};

use crate::{Failure, Global};

mod checkpointer;
mod notify_file;

/// Arguments of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen. Loopback only unless --behind-proxy.
    /// An IP address and port such as `127.0.0.1:8080` or `[::1]:8080`; host names are not
    /// resolved, so the address checked for loopback is the one bound.
    #[arg(long, value_name = "ADDR", default_value = countersign_server::DEFAULT_LISTEN, value_parser = parse_listen)]
    listen: SocketAddr,
    /// The URL people reach the service at, through the proxy (for example
    /// `https://approvals.example.com`).
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
    /// A reverse proxy in front terminates TLS: allow --listen on an address that is not
    /// loopback. The service has no TLS of its own.
    #[arg(long)]
    behind_proxy: bool,
    /// An Ed25519 public key that may sign approver tokens, besides the policy's
    /// `approvers.keys`: a `.pub` file or the `ed25519:` line (repeatable). A token signed by it
    /// signs in; each answer is still judged against the keys stored with its request.
    #[arg(long, value_name = "KEY")]
    approver_key: Vec<String>,
    /// Accept the signed-in person's id from this header, set by an authenticating proxy, but
    /// only with the proxy's shared secret (see --proxy-secret-file).
    #[arg(long, value_name = "NAME", requires = "proxy_secret_file")]
    proxy_header: Option<String>,
    /// A file holding the shared secret (at least 32 bytes) the proxy sends in
    /// --proxy-secret-header. Kept in a file so that it never shows in the process list.
    #[arg(long, value_name = "FILE", requires = "proxy_header")]
    proxy_secret_file: Option<PathBuf>,
    /// The header the proxy sends its shared secret in.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_SECRET_HEADER, requires = "proxy_header")]
    proxy_secret_header: String,
    /// Sign in with an identity provider's JWT (`Authorization: Bearer`), verified against this
    /// JWKS: a file, or an `http://` URL fetched on start and every 10 minutes (https is not
    /// fetched: save the JWKS to a file, or fetch it through a proxy on loopback).
    #[arg(long, value_name = "FILE_OR_URL", requires_all = ["jwt_issuer", "jwt_audience"])]
    jwks: Option<String>,
    /// The `iss` a JWT must carry (with --jwks).
    #[arg(long, value_name = "ISS", requires = "jwks")]
    jwt_issuer: Option<String>,
    /// The audience (`aud`) a JWT must be for (with --jwks).
    #[arg(long, value_name = "AUD", requires = "jwks")]
    jwt_audience: Option<String>,
    /// The JWT claim holding the caller's groups, an array of strings (with --jwks).
    #[arg(
        long,
        value_name = "CLAIM",
        default_value = "groups",
        requires = "jwks"
    )]
    jwt_groups_claim: String,
    /// Members of this group (from a token's `groups` or the policy's directory) may read every
    /// request, receipt and effect; what they may answer is still up to each request's rule.
    #[arg(long, value_name = "NAME")]
    auditors_group: Option<String>,
    /// Deliver every outbox event (a request opened, answered, expired, voided, consumed,
    /// revoked or cancelled) to this http:// or https:// URL, signed per Standard Webhooks
    /// (repeatable; see docs/approvals.md).
    #[arg(long, value_name = "URL", requires = "webhook_secret_file")]
    webhook: Vec<String>,
    /// A file holding the `whsec_…` secret of the matching --webhook (the first file for the
    /// first URL, and so on). Two lines during a rotation: both secrets sign.
    #[arg(long, value_name = "FILE")]
    webhook_secret_file: Vec<PathBuf>,
    /// How long one webhook delivery attempt may take before it is retried.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "10s", value_parser = crate::args::positive_duration)]
    webhook_timeout: std::time::Duration,
    /// How long delivered events are kept in the outbox.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "7days", value_parser = crate::args::any_duration)]
    outbox_retention: std::time::Duration,
    /// Post one message per request, with Approve and Deny buttons, to this Slack channel id
    /// (see docs/approvals.md); answers arrive at /slack/interactions.
    #[arg(long, value_name = "CHANNEL_ID", requires_all = ["slack_token_file", "slack_signing_secret_file", "slack_users"])]
    slack_channel: Option<String>,
    /// A file holding the Slack app's bot token (`xoxb-…`).
    #[arg(long, value_name = "FILE", requires = "slack_channel")]
    slack_token_file: Option<PathBuf>,
    /// A file holding the Slack app's signing secret: every button press must carry its
    /// signature.
    #[arg(long, value_name = "FILE", requires = "slack_channel")]
    slack_signing_secret_file: Option<PathBuf>,
    /// A file mapping Slack user ids to approvers, one `SLACK_USER_ID: approver` per line; an
    /// unmapped user's press is refused.
    #[arg(long, value_name = "FILE", requires = "slack_channel")]
    slack_users: Option<PathBuf>,
    /// Where Slack's Web API is reached: `https://slack.com/api` directly, or a forwarding
    /// proxy's http:// address (the default, on loopback).
    #[arg(long, value_name = "URL", default_value = countersign_server::slack::DEFAULT_API_URL, requires = "slack_channel")]
    slack_api_url: String,
    /// Webhooks and Slack from a YAML file (`webhooks:` with `url` and `secret_file`, `slack:`
    /// with `channel`, `token_file`, `signing_secret_file`, `users` and `api_url`; paths
    /// relative to the file), besides the flags (see docs/approvals.md).
    #[arg(long, value_name = "FILE")]
    notify_config: Option<PathBuf>,
    /// Trust only the certificate authorities in this PEM file for https:// webhooks and Slack,
    /// instead of the system's trust store (or `ca_file:` in the --notify-config file).
    #[arg(long, value_name = "FILE")]
    notify_ca: Option<PathBuf>,
    /// Sign a checkpoint of the receipt log with this key (from `countersign keygen --out
    /// FILE`) every --checkpoint-every while the log grows, and write each to the outbox as a
    /// `log.checkpoint` event that the webhooks deliver. Only this service holds the key, never
    /// an agent.
    #[arg(long, value_name = "FILE")]
    checkpoint_key: Option<PathBuf>,
    /// How often --checkpoint-key signs the log (each checkpoint reads the whole log).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, default_value = "1m", value_parser = crate::args::positive_duration, requires = "checkpoint_key")]
    checkpoint_every: std::time::Duration,
    /// Do not log each request to standard error. By default one line per request names its
    /// method, path, status, refusal reason (`not_authenticated (expired)`) and time taken;
    /// never a token, a header, a body or a query.
    #[arg(long)]
    quiet: bool,
}

/// Read a file named by a flag, for a message naming it.
fn read_file(flag: &str, file: &std::path::Path) -> Result<String, Failure> {
    std::fs::read_to_string(file).map_err(|error| {
        Failure(format!(
            "cannot read the {flag} file `{}`: {error}",
            file.display()
        ))
    })
}

/// The Slack configuration, when `--slack-channel` is given.
fn slack(args: &ServeArgs) -> Result<Option<SlackConfig>, Failure> {
    let (Some(channel), Some(token), Some(secret), Some(users)) = (
        &args.slack_channel,
        &args.slack_token_file,
        &args.slack_signing_secret_file,
        &args.slack_users,
    ) else {
        return Ok(None);
    };
    let users_text = read_file("--slack-users", users)?;
    let users = SlackConfig::parse_users(&users_text, &users.display().to_string())?;
    Ok(Some(SlackConfig::new(
        &args.slack_api_url,
        &read_file("--slack-token-file", token)?,
        &read_file("--slack-signing-secret-file", secret)?,
        channel,
        users,
    )?))
}

/// The webhook endpoints: each `--webhook` with the secrets of its `--webhook-secret-file`.
fn webhooks(args: &ServeArgs) -> Result<Vec<WebhookEndpoint>, Failure> {
    if args.webhook.len() != args.webhook_secret_file.len() {
        return Err(Failure(format!(
            "{} --webhook and {} --webhook-secret-file given: pass one secret file for each webhook, in the same order",
            args.webhook.len(),
            args.webhook_secret_file.len()
        )));
    }
    args.webhook
        .iter()
        .zip(&args.webhook_secret_file)
        .map(|(url, file)| webhook_endpoint(url, file))
        .collect()
}

/// One webhook endpoint: `url`, signed by the secrets in `file`.
fn webhook_endpoint(url: &str, file: &std::path::Path) -> Result<WebhookEndpoint, Failure> {
    let text = std::fs::read_to_string(file).map_err(|error| {
        Failure(format!(
            "cannot read the webhook secret file `{}`: {error}",
            file.display()
        ))
    })?;
    let secrets = WebhookSecret::parse_all(&text, &file.display().to_string())?;
    if secrets.is_empty() {
        return Err(Failure(format!(
            "the webhook secret file `{}` is empty: write the endpoint's `whsec_…` secret in it",
            file.display()
        )));
    }
    Ok(WebhookEndpoint::new(url, secrets)?)
}

/// Parses `--listen`: an IP address and a port, with an error that says what to give instead
/// of clap's generic "invalid socket address syntax".
fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.trim().parse().map_err(|_| {
        let hint = match text.rsplit_once(':') {
            Some((host, port)) if port.parse::<u16>().is_ok() && !host.is_empty() => format!(
                "`{host}` is not an IP address (host names are not resolved, so that the address checked for loopback is the one bound): give `127.0.0.1:{port}` or `[::1]:{port}`"
            ),
            _ => "give an IP address and a port, such as `127.0.0.1:8080` or `[::1]:8080`"
                .to_owned(),
        };
        format!("`{text}` is not an address to listen on: {hint}")
    })
}

/// The approver keys: the policy's, then each `--approver-key`.
fn approver_keys(policy: &Policy, given: &[String]) -> Result<Vec<PublicKey>, Failure> {
    let mut keys = Vec::new();
    for text in policy.approver_keys() {
        keys.push(PublicKey::parse(text)?);
    }
    for text in given {
        let text = text.trim();
        let key = if text.starts_with("ed25519:") || text.starts_with("-----BEGIN") {
            PublicKey::parse(text)?
        } else {
            PublicKey::load(std::path::Path::new(text))?
        };
        keys.push(key);
    }
    keys.dedup();
    Ok(keys)
}

/// A warning when keys given only with `--approver-key` appear in no waiting request's stored
/// rule: a token they sign signs in, but each answer is judged against the keys stored with its
/// request, so such a person sees nothing to answer (a fresh user met exactly that on the demo's
/// store). `None` when every key is stored with some waiting request, nothing waits, or the
/// store cannot be listed (the service reports that itself).
async fn unstored_keys_warning(url: &str, policy: &Policy, sign_in: &SignIn) -> Option<String> {
    let policy_keys: Vec<PublicKey> = policy
        .approver_keys()
        .iter()
        .filter_map(|text| PublicKey::parse(text).ok())
        .collect();
    let extra: Vec<&PublicKey> = sign_in
        .approver_keys
        .iter()
        .filter(|key| !policy_keys.contains(key))
        .collect();
    if extra.is_empty() {
        return None;
    }
    let store = store::open_url_async(url).await.ok()?;
    let waiting = store
        .approvals(Some(countersign::ApprovalState::Pending))
        .await
        .ok()?;
    if waiting.is_empty() {
        return None;
    }
    let unstored: Vec<String> = extra
        .iter()
        .filter(|key| {
            let text = key.to_string();
            !waiting
                .iter()
                .any(|record| record.rule.keys.iter().any(|stored| stored.trim() == text))
        })
        .map(|key| format!("key {}", key.key_id()))
        .collect();
    if unstored.is_empty() {
        return None;
    }
    Some(format!(
        "warning: {} given with --approver-key {} in none of the {} waiting request(s)' stored rules: a token it signs signs in, but cannot answer them (each request is judged by the keys stored with it); list the key under `approvers.keys` in the policy so that new requests store it",
        unstored.join(", "),
        if unstored.len() == 1 { "is" } else { "are" },
        waiting.len()
    ))
}

/// `countersign serve`.
pub async fn run(
    global: &Global,
    args: &ServeArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    countersign_server::check_listen(args.listen, args.behind_proxy)?;
    if let Some(url) = &args.public_url
        && !(url.starts_with("https://") || url.starts_with("http://"))
    {
        return Err(Failure(format!(
            "`--public-url {}` is not an http(s) URL: give the address people open, for example `https://approvals.example.com`",
            url.escape_debug()
        )));
    }
    let mut slack = slack(args)?;
    let mut webhooks = webhooks(args)?;
    let mut notify_ca = args.notify_ca.clone();
    if let Some(file) = &args.notify_config {
        let from_file = notify_file::load(file)?;
        webhooks.extend(from_file.webhooks);
        if let Some(ca_file) = from_file.ca_file {
            if notify_ca.is_some() {
                return Err(Failure(format!(
                    "the notify CA is given twice, by --notify-ca and `ca_file` in `{}`: keep one",
                    file.display()
                )));
            }
            notify_ca = Some(ca_file);
        }
        if from_file.slack.is_some() {
            if slack.is_some() {
                return Err(Failure(format!(
                    "Slack is configured twice, by --slack-channel and in `{}`: keep one",
                    file.display()
                )));
            }
            slack = from_file.slack;
        }
    }
    let trust = match &notify_ca {
        Some(file) => countersign_http::Trust::pem_file(file)
            .map_err(|error| Failure(format!("the notify CA: {error}")))?,
        None => countersign_http::Trust::system(),
    };
    if let Some(configured) = slack.take() {
        slack = Some(configured.with_trust(trust.clone())?);
    }
    let notifications = Notifications {
        webhooks,
        timeout: args.webhook_timeout,
        retention: args.outbox_retention,
        trust,
        ..Notifications::default()
    };
    let checkpoint_key = args
        .checkpoint_key
        .as_deref()
        .map(checkpointer::load_key)
        .transpose()?;
    if args.checkpoint_every.is_zero() {
        return Err(Failure(
            "`--checkpoint-every 0s` would sign the log without pause: give a duration such as `1m`".to_owned(),
        ));
    }
    let policy = crate::everyday::load_policy(&global.policy_path())?;
    let url = global.store_url();
    if let Some(path) = crate::store_access::missing_store_file(global) {
        return Err(Failure(crate::store_access::missing_store_message(
            global, &path,
        )));
    }
    let proxy = match (&args.proxy_header, &args.proxy_secret_file) {
        (Some(name), Some(file)) => {
            let secret = std::fs::read_to_string(file).map_err(|error| {
                Failure(format!(
                    "cannot read the proxy secret file `{}`: {error}",
                    file.display()
                ))
            })?;
            Some(ProxySignIn::new(name, &args.proxy_secret_header, &secret)?)
        }
        _ => None,
    };
    let oidc = match (&args.jwks, &args.jwt_issuer, &args.jwt_audience) {
        (Some(jwks), Some(issuer), Some(audience)) => {
            let source = JwksSource::parse(jwks).map_err(|error| Failure(error.to_string()))?;
            let rules = JwtRules {
                issuer: issuer.clone(),
                audience: audience.clone(),
                groups_claim: args.jwt_groups_claim.clone(),
            };
            Some(
                OidcSignIn::load(source, rules, DEFAULT_MAX_AGE)
                    .await
                    .map_err(|error| Failure(error.to_string()))?,
            )
        }
        _ => None,
    };
    let sign_in = SignIn {
        approver_keys: approver_keys(&policy, &args.approver_key)?,
        proxy,
        oidc,
    };
    let slack_on = slack.is_some();
    let mut service = Service::new(ServiceConfig {
        store: StoreSource::Url(url.clone()),
        sign_in: sign_in.clone(),
        directory: policy.directory().clone(),
        auditors_group: args.auditors_group.clone(),
        public_url: args.public_url.clone(),
        clock: Arc::new(SystemClock),
        policy: Some(Arc::new(policy.clone())),
    });
    if let Some(slack) = slack {
        service = service.with_slack(slack);
    }
    if !args.quiet {
        service = service.with_request_log();
    }
    if let Err(error) = service.open_store().await {
        countersign::stderr_line!(
            "warning: {error}: serving anyway; calls answer 503 until the store can be reached"
        );
    } else if let Some(warning) = unstored_keys_warning(&url, &policy, &sign_in).await {
        countersign::stderr_line!("{warning}");
    }
    // Issue #31: an approval nobody can answer is said at once, not after every request expired.
    for warning in policy.approval_warnings() {
        countersign::stderr_line!("warning: {}", countersign::evidence::printable(&warning));
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|error| {
            let hint = if error.kind() == std::io::ErrorKind::AddrInUse {
                // Another port than the one taken.
                let mut other = args.listen;
                other.set_port(args.listen.port().wrapping_add(1).max(1024));
                format!(
                    ": another process listens there (another `countersign serve`?); stop it, or pass another address such as `--listen {other}`"
                )
            } else {
                String::new()
            };
            Failure(format!("cannot listen on `{}`: {error}{hint}", args.listen))
        })?;
    let bound = listener.local_addr()?;
    if !sign_in.is_configured() {
        countersign::stderr_line!(
            "warning: no sign-in method is configured, so every API call will answer 401: add `approvers.keys` to the policy, pass `--approver-key`, `--jwks FILE_OR_URL --jwt-issuer ISS --jwt-audience AUD`, or `--proxy-header NAME --proxy-secret-file FILE`"
        );
    }
    let webhook_count = notifications.webhooks.len();
    writeln!(
        out,
        "countersign approval service on http://{bound}/ (inbox: /inbox, API: /api/v1/; {} approver key{}{}{}{}); Ctrl-C stops it",
        sign_in.approver_keys.len(),
        if sign_in.approver_keys.len() == 1 {
            ""
        } else {
            "s"
        },
        if sign_in.oidc.is_some() {
            ", JWT sign-in"
        } else {
            ""
        },
        if sign_in.proxy.is_some() {
            ", proxy sign-in"
        } else {
            ""
        },
        match (webhook_count, slack_on) {
            (0, false) => String::new(),
            (0, true) => ", Slack".to_owned(),
            (1, slack_on) => format!(", 1 webhook{}", if slack_on { ", Slack" } else { "" }),
            (count, slack_on) => format!(
                ", {count} webhooks{}",
                if slack_on { ", Slack" } else { "" }
            ),
        }
    )?;
    if let Some(key) = checkpoint_key {
        writeln!(
            out,
            "signing a checkpoint of the receipt log every {} while it grows (`log.checkpoint` events)",
            humantime::format_duration(args.checkpoint_every)
        )?;
        checkpointer::spawn(url.clone(), key, args.checkpoint_every);
    }
    out.flush()?;
    countersign_server::serve_notifying(
        listener,
        service,
        notifications,
        countersign_server::shutdown_signal(),
    )
    .await?;
    writeln!(out, "stopped")?;
    Ok(ExitCode::SUCCESS)
}
