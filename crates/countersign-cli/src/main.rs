//! `countersign`: the operator's command line for the Countersign kernel.
//!
//! Every command takes `--policy` and `--store-url`; every listing takes `--json`. Kernel
//! refusals and bad input end with exit status 1 and one line that says what happened and what
//! to do next; usage errors end with status 2.
#![forbid(unsafe_code)]

mod commands;
mod demo;
mod render;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Countersign: policy, single-use approvals, at-most-once effects and hash-chained receipts
/// for AI agents' tool calls.
#[derive(Debug, Parser)]
#[command(name = "countersign", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// The policy file (countersign.policy/v1 YAML). The default store lives beside it, in
    /// `.countersign/countersign.db`.
    /// Default: `countersign.yaml` in the current folder (for `demo`: the example policy).
    #[arg(long, global = true, env = "COUNTERSIGN_POLICY", value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Where approvals, effects and receipts are kept: `sqlite:PATH` or `memory:`.
    /// Default: `sqlite:` + the `.countersign/countersign.db` file beside the policy.
    #[arg(long, global = true, env = "COUNTERSIGN_STORE_URL", value_name = "URL")]
    store_url: Option<String>,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Walk through the kernel on a fresh SQLite store: allow, approve, a mismatched answer,
    /// a duplicate, a lost response, an unknown action, and the verified receipt chain.
    Demo(demo::DemoArgs),
    /// List approval requests waiting for a human.
    Pending,
    /// Grant an approval request: it authorizes exactly the action it shows, once.
    Approve(commands::AnswerArgs),
    /// Deny an approval request: the agent gets a recorded denial, not an error to retry.
    Deny(commands::AnswerArgs),
    /// Settle an ambiguous effect once you know what happened.
    Resolve(commands::ResolveArgs),
    /// Show receipts, verify the chain, or export an anchor for later verification.
    Receipts(commands::ReceiptsArgs),
    /// List effect records.
    Effects(commands::EffectsArgs),
    /// Show everything recorded about one approval (apr_…), attempt (att_…), effect key or
    /// action hash (sha256:…).
    Inspect(commands::InspectArgs),
    /// Check that the policy loads and the receipt chain is intact.
    Verify(commands::VerifyArgs),
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
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout().lock();
    let result = runtime.block_on(run(cli, &mut stdout));
    match result {
        Ok(code) => code,
        Err(Failure(message)) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Run one parsed command, writing its output to `out`.
pub async fn run(cli: Cli, out: &mut dyn std::io::Write) -> Result<ExitCode, Failure> {
    let global = &cli.global;
    match cli.command {
        Command::Demo(args) => demo::run(global, &args, out).await,
        Command::Pending => commands::pending(global, out).await,
        Command::Approve(args) => commands::answer(global, &args, true, out).await,
        Command::Deny(args) => commands::answer(global, &args, false, out).await,
        Command::Resolve(args) => commands::resolve(global, &args, out).await,
        Command::Receipts(args) => commands::receipts(global, &args, out).await,
        Command::Effects(args) => commands::effects(global, &args, out).await,
        Command::Inspect(args) => commands::inspect(global, &args, out).await,
        Command::Verify(args) => commands::verify(global, &args, out).await,
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
