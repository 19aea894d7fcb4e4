//! Approver keys and tokens: `countersign keygen` and `countersign approver token`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use countersign::token::{self, SigningKey, TokenError};
use countersign::{Clock, SystemClock};

use crate::{Failure, Global};

/// Arguments of `countersign keygen`.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Where to write the private key; the public key goes to the same path plus `.pub`.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// Arguments of `countersign approver`.
#[derive(Debug, Args)]
pub struct ApproverArgs {
    #[command(subcommand)]
    command: ApproverCommand,
}

#[derive(Debug, Subcommand)]
enum ApproverCommand {
    /// Issue an approver token: a signed statement of who answers and in which groups, valid
    /// for at most 24 hours.
    ///
    /// The token is a JWT signed with Ed25519 (`EdDSA`); its claims are the subject (`sub`), the
    /// groups, when it was issued (`iat`) and expires (`exp`), and its id (`jti`, `tok_` and 20
    /// letters and digits), which `countersign approver revoke` names to refuse it before it
    /// expires; `--json` prints the id beside the token. It is printed alone, so
    /// `TOKEN=$(countersign approver token …)` works. Anyone holding the token can answer as its
    /// subject until it expires: hand it over as you would a password. It verifies only where
    /// the policy lists the key's public half under `approvers.keys`.
    Token(TokenArgs),
    /// Revoke an approver token before it expires: put its id (`jti`, shown by `countersign
    /// approver token --json`) on the store's deny-list. From then on every answer or
    /// revocation presenting it is refused `not_authenticated`, on every surface.
    Revoke(RevokeTokenArgs),
}

/// Arguments of `countersign approver revoke`.
#[derive(Debug, clap::Args)]
pub struct RevokeTokenArgs {
    /// The token's id (`tok_…`), or the whole token (its id is read from it).
    jti: String,
    /// Why, kept with the deny-list entry.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// Who revokes it, recorded with the entry [default: `human:$USER`].
    #[arg(long = "as", value_name = "WHO", env = "COUNTERSIGN_OPERATOR")]
    operator: Option<String>,
}

/// Arguments of `countersign approver token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The private key file `countersign keygen` wrote.
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// Who the token speaks for, for example `human:alice`.
    #[arg(long, value_name = "WHO")]
    subject: String,
    /// The approver's groups, comma-separated or repeated, for example `finance,ops`.
    #[arg(long, value_name = "GROUP", value_delimiter = ',')]
    groups: Vec<String>,
    /// How long the token is valid: a duration such as `30m`, `8h` or `1day`; at most 24h.
    #[arg(
        long,
        value_name = "DURATION",
        allow_hyphen_values = true,
        default_value = "8h"
    )]
    ttl: String,
}

/// `countersign keygen`.
pub fn keygen(
    global: &Global,
    args: &KeygenArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    if let Some(folder) = args.out.parent()
        && !folder.as_os_str().is_empty()
        && !folder.is_dir()
    {
        return Err(Failure(format!(
            "the folder `{}` does not exist, so `--out {}` cannot be written: create it first (`mkdir -p {}`) or give a path in an existing folder",
            folder.display(),
            args.out.display(),
            folder.display()
        )));
    }
    let files = token::write_keypair(&args.out)?;
    let key_id = files.public_key.key_id();
    if global.json {
        let value = serde_json::json!({
            "private_key_file": files.private_key_file.display().to_string(),
            "public_key_file": files.public_key_file.display().to_string(),
            "public_key": files.public_key.to_string(),
            "key_id": key_id.as_str(),
        });
        serde_json::to_writer_pretty(&mut *out, &value)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "private key: {} (keep it secret: readable by you only)",
        files.private_key_file.display()
    )?;
    writeln!(out, "public key:  {}", files.public_key_file.display())?;
    writeln!(out, "             {} (key id {key_id})", files.public_key)?;
    writeln!(
        out,
        "\nfor approver tokens: list the public key under `approvers.keys` in the policy, then issue tokens with `countersign approver token --key {0} --subject human:NAME`\nfor signed log checkpoints: `countersign checkpoint --key {0}` (or `serve --checkpoint-key {0}`), and give auditors the public key",
        files.private_key_file.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `countersign approver …`.
pub async fn approver(
    global: &Global,
    args: &ApproverArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    match &args.command {
        ApproverCommand::Token(args) => issue_token(global, args, out),
        ApproverCommand::Revoke(args) => revoke_token(global, args, out).await,
    }
}

/// `countersign approver revoke`.
async fn revoke_token(
    global: &Global,
    args: &RevokeTokenArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let jti = token::revocable_id(&args.jti).map_err(Failure)?;
    let operator = crate::commands::approver(&args.operator)?;
    let store = crate::store_access::open_existing(global).await?;
    let reason = args.reason.as_deref().map(str::trim);
    let added = store
        .revoke_token(&jti, &operator, reason, SystemClock.now())
        .await?;
    if global.json {
        let value = serde_json::json!({"jti": jti, "revoked": true, "already_revoked": !added});
        serde_json::to_writer_pretty(&mut *out, &value)?;
        writeln!(out)?;
    } else if added {
        writeln!(
            out,
            "revoked approver token {jti}: every answer presenting it is now refused `not_authenticated`"
        )?;
    } else {
        writeln!(
            out,
            "approver token {jti} was already revoked: nothing changed"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `countersign approver token`.
fn issue_token(
    global: &Global,
    args: &TokenArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let ttl_text = args.ttl.trim();
    let ttl: Duration = crate::args::duration(ttl_text, "`30m` or `8h`")
        .map_err(|error| Failure(format!("`--ttl {ttl_text}` is not a duration: {error}")))?;
    let groups: Vec<String> = args
        .groups
        .iter()
        .map(|group| group.trim().to_owned())
        .collect();
    let subject = args.subject.trim();
    // Approver ids are `KIND:NAME` (`human:alice`), as the policy's `approvers:` lists name them;
    // a bare name would sign in but match no rule, and every answer would be refused.
    if !subject.is_empty() && !subject.contains(':') {
        return Err(Failure(format!(
            "`--subject {subject}` has no kind: approver ids are written `KIND:NAME`, as the policy names them: pass `--subject human:{subject}`"
        )));
    }
    // The one shape of an approver id (issue #19): a token for `human:` or `human: bob` would be
    // refused at every answer, so it is not issued.
    if !subject.is_empty()
        && let Err(error) = countersign::approver::ApproverId::parse(subject)
    {
        return Err(Failure(format!("`--subject`: {error}")));
    }
    let key = SigningKey::load(&args.key)?;
    let now = SystemClock.now();
    let issued = token::issue(&key, subject, &groups, ttl, now).map_err(|error| {
        match error {
            TokenError::LifetimeTooLong { .. } => Failure(format!(
                "`--ttl {ttl_text}` is longer than an approver token may live: pass `--ttl 24h` or less"
            )),
            TokenError::LifetimeTooShort { .. } => Failure(format!(
                "`--ttl {ttl_text}` is shorter than one second: pass a lifetime such as `--ttl 8h`"
            )),
            TokenError::MissingSubject => Failure(
                "`--subject` is empty: say who the token speaks for, for example `--subject human:alice`".to_owned(),
            ),
            TokenError::EmptyGroup => Failure(
                "`--groups` has an empty group name: give names such as `--groups finance,ops`".to_owned(),
            ),
            other => Failure::from(other),
        }
    })?;
    // Check the token as a verifier will, before handing it out.
    let verified = token::verify(&issued, &[key.public_key()], now)?;
    if global.json {
        let value = serde_json::json!({
            "token": issued,
            "subject": verified.subject,
            "groups": verified.groups,
            "expires_at": verified.expires_at,
            "key_id": verified.key_id.as_str(),
            "jti": verified.jti,
        });
        serde_json::to_writer_pretty(&mut *out, &value)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{issued}")?;
    }
    Ok(ExitCode::SUCCESS)
}
