//! `countersign`: the operator's command line for the Countersign kernel.
//!
//! Every command takes `--policy` and `--store-url`; every listing takes `--json`. Kernel
//! refusals and bad input end with exit status 1 and one line that says what happened and what
//! to do next; usage errors end with status 2.
#![forbid(unsafe_code)]
// Standard error through `countersign::stderr_line!`, which never panics on a closed stream.
#![deny(clippy::print_stderr)]

mod args;
mod commands;
mod demo;
mod everyday;
mod exec;
mod export;
mod gateway;
mod hook;
mod keys;
mod render;
mod serve;
mod store_access;
mod style;
mod takeback;
mod transparency;
mod verify;
mod webhooks;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Countersign, the operator's side: answer an AI agent's approval requests, settle ambiguous
/// effects, and read and verify the hash-chained receipts its actions leave behind.
#[derive(Debug, Parser)]
#[command(
    name = "countersign",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("COUNTERSIGN_GIT_COMMIT"), ")"),
    long_about = None,
    propagate_version = true,
    after_help = "New here? `countersign init` starts a policy in this folder; `countersign demo` walks through every guarantee on a scratch store."
)]
pub struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// The help heading of the options every command takes.
const GLOBAL_OPTIONS: &str = "Global options";

/// Options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// The policy file (countersign.policy/v1 YAML) [default: `countersign.yaml`; for `demo`,
    /// the example policy]
    #[arg(
        long,
        global = true,
        env = "COUNTERSIGN_POLICY",
        value_name = "FILE",
        help_heading = GLOBAL_OPTIONS
    )]
    policy: Option<PathBuf>,
    /// Where approvals, effects and receipts are kept: `sqlite:PATH`, `postgres://USER@HOST/DB` or `memory:` [default:
    /// `sqlite:` and `.countersign/countersign.db` in the policy's folder]
    #[arg(
        long,
        global = true,
        env = "COUNTERSIGN_STORE_URL",
        value_name = "URL",
        help_heading = GLOBAL_OPTIONS
    )]
    store_url: Option<String>,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true, help_heading = GLOBAL_OPTIONS)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start here: write a commented starter policy (`countersign.yaml`) and `.countersign/`
    /// for its store in this folder. Never overwrites an existing policy.
    Init(everyday::InitArgs),
    /// What the policy decides for one call, and why: which entry, which rule, which condition.
    /// Writes nothing.
    Evaluate(everyday::EvaluateArgs),
    /// Claude Code's PreToolUse hook: read the tool call on standard input, answer allow or
    /// deny on standard output (an `approve` opens a request and denies until it is granted).
    ///
    /// The action is `tool_name` (`Bash`, `Write`, `mcp__server__tool`) and the arguments are
    /// `tool_input`. A granted request lets the identical call through once, recorded
    /// `handed_off` (the tool runs outside Countersign). Malformed input, a policy that does
    /// not load or a store that cannot be written is a blocking error: exit status 2, the
    /// reason on standard error, nothing written. Protocol:
    /// https://code.claude.com/docs/en/hooks#pretooluse (read 2026-12-01).
    Check(hook::CheckArgs),
    /// Run a command as a protected action: policy, approval, effect key and a receipt with its
    /// exit status. `countersign exec --action NAME --args JSON -- COMMAND…`
    ///
    /// Exit 0 is `committed`; an exit code listed with `--not-executed-exit` is `failed` (a
    /// retry may run); any other exit, a signal or `--timeout` is `ambiguous` (every retry on
    /// its effect key refused until resolved). The command's output passes through, and exec
    /// exits with the command's status (128+N for signal N, 124 after `--timeout`), or 125 when
    /// Countersign refused or failed (bad `--args`, no policy, no store) and the command did
    /// not run (127/126: not found/not executable).
    Exec(exec::ExecArgs),
    /// Compare two policies, or replay the recorded attempts under a candidate policy.
    Policy(everyday::PolicyArgs),
    /// Count receipts by action, outcome and reason, optionally over a recent window.
    Stats(everyday::StatsArgs),
    /// Print a shell completion script: `countersign completions bash > /etc/bash_completion.d/countersign`.
    Completions(everyday::CompletionsArgs),
    /// Walk through the kernel on a fresh SQLite store: allow, approve, a mismatched answer,
    /// a refund two finance approvers must countersign (with refused answers), a duplicate, a
    /// lost response, an unknown action, and the verified receipt chain.
    Demo(demo::DemoArgs),
    /// List approval requests waiting for a human, with who may answer and how many answers
    /// each still needs.
    Pending(commands::PendingArgs),
    /// Grant an approval request: it authorizes exactly the action it shows, once.
    Approve(commands::AnswerArgs),
    /// Deny an approval request: the agent gets a recorded denial, not an error to retry.
    Deny(commands::AnswerArgs),
    /// Take back a grant not yet used (or your yes from a quorum still pending): an attempt
    /// presenting it is refused `revoked`. A used grant cannot be revoked.
    Revoke(takeback::RevokeArgs),
    /// Cancel a waiting request (or, with `--run ID`, every waiting request of an abandoned
    /// run): it leaves every inbox and a late answer is refused `cancelled`.
    Cancel(takeback::CancelArgs),
    /// Settle an ambiguous effect once you know what happened.
    Resolve(commands::ResolveArgs),
    /// Show receipts, verify the chain, export them (JSONL, OCSF), or bundle them with proofs.
    Receipts(commands::ReceiptsArgs),
    /// List effect records.
    Effects(commands::EffectsArgs),
    /// Show everything recorded about one approval (apr_…), attempt (att_…), effect key or
    /// action hash (sha256:…).
    Inspect(commands::InspectArgs),
    /// Check that the policy loads, the receipt chain is intact, and the effects and granted
    /// approvals agree with the receipts.
    ///
    /// Exit 0 verified (at least one receipt was checked and all of it holds), 1 failed (the
    /// first bad record is named), 3 unverifiable (nothing to check: no store yet, or an empty
    /// log). Prints how many receipts it checked, the first and last, and the head. Never
    /// creates a store. With `--store-url` and no policy at the default path, checks the store
    /// alone and says so.
    Verify(verify::VerifyArgs),
    /// Sign the receipt log's Merkle tree head (a C2SP checkpoint) with the log's key, so a
    /// third party can later check the log without trusting the store.
    ///
    /// Verifies the chain first and refuses to sign a broken or empty log. Prints the signed
    /// note (with `--json`, also the verifier key `origin+keyid+key` that Go's
    /// `golang.org/x/mod/sumdb/note` reads), and with `--out FILE` writes it there. Run it from
    /// one place that holds the key (cron, or the service), never from an agent. See
    /// docs/evidence.md.
    Checkpoint(transparency::CheckpointArgs),
    /// Put Countersign in front of an MCP tool server: `countersign gateway --alias NAME
    /// --principal WHO -- UPSTREAM COMMAND…`, or `--upstream-url URL` for an HTTP upstream.
    ///
    /// Over stdio it runs until its input ends, then answers every request already read and
    /// exits 0. SIGINT, SIGTERM or SIGHUP stops it at once: running tool calls are cancelled,
    /// each one already sent upstream is recorded `ambiguous` (never run again), and it exits
    /// 0, or 1 if the store refused a record. See docs/gateway.md.
    Gateway(gateway::GatewayArgs),
    /// Make an Ed25519 key pair for approver tokens: FILE (private, mode 0600) and FILE.pub.
    ///
    /// Writes the private key to FILE (PKCS#8 PEM, readable by you only) and the public key to
    /// FILE.pub (PEM), and prints the public key's one-line `ed25519:` form. Neither file is ever
    /// overwritten. List the public key (the .pub file or the `ed25519:` line) under
    /// `approvers.keys` in the policy; keep the private key where tokens are issued, and never
    /// put it in a policy.
    Keygen(keys::KeygenArgs),
    /// Approver identities: `countersign approver token` issues a signed, short-lived token;
    /// `countersign approver revoke JTI` refuses one before it expires.
    Approver(keys::ApproverArgs),
    /// Run the approval service: sign-in (approver tokens, an identity provider's JWT, or an
    /// authenticating proxy), the web inbox at /inbox and the JSON API for answering approvals
    /// and resolving effects, on loopback by default.
    Serve(Box<serve::ServeArgs>),
    /// List webhook deliveries of the outbox's events (newest first), or send one again with
    /// `--redeliver ID`.
    Webhooks(webhooks::WebhooksArgs),
}

/// A failure to report: one line, then exit status 1.
#[derive(Debug)]
pub struct Failure(String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure(error.to_string())
    }
}

fn main() -> ExitCode {
    // A panic is a bug of ours: say so in one line, never with a backtrace hint.
    std::panic::set_hook(Box::new(|info| {
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|text| (*text).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let place = info
            .location()
            .map(|location| format!(" ({}:{})", location.file(), location.line()))
            .unwrap_or_default();
        countersign::stderr_line!(
            "error: internal error, please report it at https://github.com/countersign/countersign/issues: {payload}{place}"
        );
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // `--json` asked for errors as JSON: a usage error is one too (exit status 2, clap's).
        Err(error) if error.use_stderr() && json_asked() => {
            usage_error_json(&usage_message(&error.render().to_string()))
        }
        Err(error) => error.exit(),
    };
    style::init();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            countersign::stderr_line!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = ClosablePipe {
        inner: std::io::stdout().lock(),
        closed: false,
    };
    let json = cli.global.json;
    // `exec` exits with its command's status, so its own failures (bad `--args`, no policy, a
    // store it cannot open) must not look like the command's exit 1: they exit 125, as
    // `env(1)` and `timeout(1)` do for their own errors, and the command did not run.
    let failure_status = match cli.command {
        Command::Exec(_) => exec::REFUSED,
        _ => 1,
    };
    // The stdio gateway reads its input on one of the runtime's blocking threads, which stays
    // blocked until the client closes the pipe: stopped by a signal, it must not wait for that
    // thread. It wrote and flushed everything, and closed its store, before `run` returned.
    let gateway = matches!(cli.command, Command::Gateway(_));
    let result = runtime.block_on(run(cli, &mut stdout));
    if gateway {
        runtime.shutdown_background();
    }
    match result {
        Ok(code) => code,
        Err(Failure(message)) if json => {
            // A script that asked for JSON reads the error as JSON too: one object on standard
            // error, `{"error": MESSAGE, "exit_status": N}`.
            countersign::stderr_line!(
                "{}",
                serde_json::json!({"error": message, "exit_status": failure_status})
            );
            ExitCode::from(failure_status)
        }
        Err(Failure(message)) => {
            // Whatever the message quotes (a policy key, a file name, an id) reaches a terminal:
            // control and invisible formatting characters are shown as escapes, so a quoted
            // value can neither hide a character nor forge a second line.
            countersign::stderr_line!("error: {}", countersign::evidence::printable(&message));
            ExitCode::from(failure_status)
        }
    }
}

/// Did the command line ask for `--json` (before any `--`, after which the words are a
/// command's own)? Read from the raw arguments, for errors found before they parse.
fn json_asked() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|word| word != "--")
        .any(|word| word == "--json")
}

/// A usage error with `--json`: `{"error": MESSAGE, "exit_status": 2}` on standard error, the
/// shape of every other error under `--json`, and exit status 2 (clap's, for a command line
/// no run could use).
pub(crate) fn usage_error_json(message: &str) -> ! {
    countersign::stderr_line!(
        "{}",
        serde_json::json!({"error": message, "exit_status": 2})
    );
    std::process::exit(2)
}

/// A usage error found after parsing (flags no run could use together): exit status 2, as
/// clap's own, with `message` as clap would print it, or as JSON under `--json`.
pub(crate) fn usage_error(json: bool, message: &str) -> ! {
    if json {
        usage_error_json(message);
    }
    clap::Error::raw(
        clap::error::ErrorKind::ArgumentConflict,
        format!("{message}\n"),
    )
    .exit()
}

/// clap's rendered usage error as one line for `--json`: every line of what went wrong (the
/// arguments missing, the values possible, a tip), without the `error: ` prefix and the usage
/// and `--help` lines that follow, joined with spaces.
fn usage_message(rendered: &str) -> String {
    // A command that needs a subcommand renders its help instead of an error: say which
    // command and which subcommands it takes (the help's `Usage:` and `Commands:` lines).
    if let Some(usage) = rendered
        .lines()
        .find_map(|line| line.strip_prefix("Usage: "))
        .filter(|usage| usage.ends_with("<COMMAND>"))
        && rendered.lines().any(|line| line == "Commands:")
    {
        let command = usage
            .split(" [OPTIONS]")
            .next()
            .unwrap_or(usage)
            .trim_end_matches(" <COMMAND>");
        let subcommands: Vec<&str> = rendered
            .lines()
            .skip_while(|line| *line != "Commands:")
            .skip(1)
            .take_while(|line| !line.is_empty())
            .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
            .filter_map(|line| line.split_whitespace().next())
            .filter(|name| *name != "help")
            .collect();
        return format!(
            "`{command}` needs a subcommand: one of {}; see `{command} --help`",
            subcommands.join(", ")
        );
    }
    let said: Vec<&str> = rendered
        .lines()
        .take_while(|line| !line.starts_with("Usage:") && !line.starts_with("For more information"))
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let message = said.join(" ");
    message
        .strip_prefix("error: ")
        .map_or(message.clone(), str::to_owned)
}

/// Set once standard output's reader has gone (see [`ClosablePipe`]).
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Has standard output's reader gone? A long stream (`receipts --export`) stops reading the
/// store then, instead of writing the rest into a closed pipe.
pub(crate) fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Standard output that takes a closed pipe (`countersign receipts | head -3`) as the reader
/// having read enough: the rest of the output is dropped instead of failing the command.
struct ClosablePipe<W> {
    inner: W,
    closed: bool,
}

impl<W: std::io::Write> std::io::Write for ClosablePipe<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        match self.inner.write(buf) {
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
                Ok(buf.len())
            }
            other => other,
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.closed {
            return Ok(());
        }
        match self.inner.flush() {
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            other => other,
        }
    }
}

/// Run one parsed command, writing its output to `out`.
pub async fn run(cli: Cli, out: &mut dyn std::io::Write) -> Result<ExitCode, Failure> {
    let global = &cli.global;
    match cli.command {
        Command::Init(args) => everyday::init(global, &args, out),
        Command::Evaluate(args) => everyday::evaluate(global, &args, out),
        Command::Check(args) => hook::check(global, &args, out).await,
        Command::Exec(args) => exec::exec(global, &args, out).await,
        Command::Policy(args) => everyday::policy(global, &args, out).await,
        Command::Stats(args) => everyday::stats(global, &args, out).await,
        Command::Completions(args) => everyday::completions(&args, out),
        Command::Demo(args) => demo::run(global, &args, out).await,
        Command::Pending(args) => commands::pending(global, &args, out).await,
        Command::Approve(args) => commands::answer(global, &args, true, out).await,
        Command::Deny(args) => commands::answer(global, &args, false, out).await,
        Command::Revoke(args) => takeback::revoke(global, &args, out).await,
        Command::Cancel(args) => takeback::cancel(global, &args, out).await,
        Command::Resolve(args) => commands::resolve(global, &args, out).await,
        Command::Receipts(args) => commands::receipts(global, &args, out).await,
        Command::Effects(args) => commands::effects(global, &args, out).await,
        Command::Inspect(args) => commands::inspect(global, &args, out).await,
        Command::Verify(args) => verify::verify(global, &args, out).await,
        Command::Checkpoint(args) => transparency::checkpoint(global, &args, out).await,
        Command::Gateway(args) => gateway::run(global, &args, out).await,
        Command::Keygen(args) => keys::keygen(global, &args, out),
        Command::Approver(args) => keys::approver(global, &args, out).await,
        Command::Serve(args) => serve::run(global, &args, out).await,
        Command::Webhooks(args) => webhooks::webhooks(global, &args, out).await,
    }
}

impl Global {
    /// The policy file: `--policy`, or `countersign.yaml`.
    fn policy_path(&self) -> PathBuf {
        self.policy
            .clone()
            .unwrap_or_else(|| PathBuf::from("countersign.yaml"))
    }

    /// The store URL: `--store-url`, or the default file beside the policy.
    fn store_url(&self) -> String {
        match &self.store_url {
            Some(url) => url.clone(),
            None => format!(
                "sqlite:{}",
                default_store_path(&self.policy_path()).display()
            ),
        }
    }
}

/// `.countersign/countersign.db` in the policy file's folder.
pub fn default_store_path(policy: &Path) -> PathBuf {
    let folder = policy
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    folder.join(".countersign").join("countersign.db")
}

#[cfg(test)]
mod usage_tests {
    use clap::Parser;

    /// Every line of what went wrong is kept: the missing argument, the possible values.
    #[test]
    fn a_json_usage_error_keeps_what_clap_said_in_one_line() {
        for (args, expected) in [
            (
                vec!["countersign", "resolve", "--committed"],
                "the following required arguments were not provided: <KEY>",
            ),
            (
                vec!["countersign", "receipts", "--export", "xml"],
                "[possible values: jsonl, ocsf]",
            ),
            (
                vec!["countersign", "policy"],
                "`countersign policy` needs a subcommand: one of check, diff, replay",
            ),
        ] {
            let error = super::Cli::try_parse_from(&args).expect_err("a usage error");
            let message = super::usage_message(&error.render().to_string());
            assert!(message.contains(expected), "{args:?}: {message}");
            assert!(
                !message.contains('\n') && !message.starts_with("error:"),
                "{message}"
            );
            assert!(!message.contains("Usage:"), "{message}");
        }
    }
}
