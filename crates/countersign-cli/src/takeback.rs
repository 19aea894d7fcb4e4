//! Taking it back (issue #31): `countersign revoke` (an approver takes back a grant not yet
//! used, or their yes from a quorum still pending) and `countersign cancel` (the operator
//! clears a request, or every waiting request of a run).

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use countersign::approval::withdraw::{Withdrawal, WithdrawalKind};
use countersign::approver::Channel;
use countersign::evidence::printable;
use countersign::{AnswerError, ApprovalId, ApprovalRecord, ApprovalState, Clock, SystemClock};

use crate::commands::{self, IdentityArgs};
use crate::{Failure, Global};

/// Arguments of `revoke`.
#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// The approval request (`apr_…`) whose grant, or whose counted yes, you take back.
    id: String,
    #[command(flatten)]
    identity: IdentityArgs,
    /// Why, kept on the receipt (shown to the agent as data; at most 4096 bytes).
    #[arg(long, value_name = "TEXT", value_parser = crate::args::NoteParser)]
    reason: Option<String>,
}

/// Arguments of `cancel`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["id", "run"])))]
pub struct CancelArgs {
    /// The approval request (`apr_…`) to cancel.
    id: Option<String>,
    /// Cancel every waiting (pending or granted, unused) request of this run instead.
    #[arg(long, value_name = "ID", conflicts_with = "id")]
    run: Option<String>,
    /// Why, kept on the receipt.
    #[arg(long, value_name = "TEXT")]
    reason: String,
    /// Who cancels, recorded on the receipt [default: `human:$USER`].
    #[arg(long = "as", value_name = "WHO", env = "COUNTERSIGN_OPERATOR")]
    operator: Option<String>,
}

fn shown(record: &ApprovalRecord) -> String {
    format!(
        "{}: {} {} for {}",
        record.id,
        printable(&record.action),
        printable(record.arguments.as_str()),
        printable(&record.principal)
    )
}

fn reason_text(given: &Option<String>) -> Result<Option<String>, Failure> {
    match given {
        Some(text) if text.trim().is_empty() => Err(Failure(
            "`--reason` is empty: say why, for example `--reason \"wrong payment\"`".to_owned(),
        )),
        Some(text) => Ok(Some(text.trim().to_owned())),
        None => Ok(None),
    }
}

/// `countersign revoke`.
pub async fn revoke(
    global: &Global,
    args: &RevokeArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let id = ApprovalId::parse(args.id.trim())?;
    let credential = args.identity.credential()?;
    let reason = reason_text(&args.reason)?;
    let store = crate::store_access::open_existing(global).await?;
    commands::warn_if_asserted_on_shared_store(store.as_ref(), &credential);
    let withdrawal = Withdrawal {
        request_id: id,
        kind: WithdrawalKind::Revoke {
            approver: credential,
            channel: Channel::Cli,
        },
        reason,
    };
    let record = store
        .withdraw_approval(withdrawal, SystemClock.now())
        .await?;
    if global.json {
        commands::write_json(out, &record)?;
        return Ok(ExitCode::SUCCESS);
    }
    if record.state == ApprovalState::Pending {
        writeln!(
            out,
            "withdrew your approval of {}\n{}: it needs {} more from {} before it authorizes anything",
            shown(&record),
            countersign::display::approvals_count(record.approvals_given(), record.rule.quorum),
            record.rule.quorum.saturating_sub(record.approvals_given()),
            record.rule.summary()
        )?;
    } else {
        writeln!(
            out,
            "revoked {}\nit authorizes nothing now: an attempt presenting it is refused `revoked`",
            shown(&record)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `countersign cancel`.
pub async fn cancel(
    global: &Global,
    args: &CancelArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    if args.reason.trim().is_empty() {
        return Err(Failure(
            "`--reason` is empty: say why, for example `--reason \"run abandoned\"`".to_owned(),
        ));
    }
    let operator = commands::approver(&args.operator)?;
    let reason = Some(args.reason.trim().to_owned());
    let store = crate::store_access::open_existing(global).await?;
    let targets: Vec<ApprovalId> = match (&args.id, &args.run) {
        (Some(id), _) => vec![ApprovalId::parse(id.trim())?],
        (None, Some(run)) => {
            let mut waiting = Vec::new();
            for state in [ApprovalState::Pending, ApprovalState::Granted] {
                waiting.extend(
                    store
                        .approvals(Some(state))
                        .await?
                        .into_iter()
                        .filter(|record| record.run.as_deref() == Some(run.as_str())),
                );
            }
            waiting.sort_by_key(|record| record.created_at);
            waiting.into_iter().map(|record| record.id).collect()
        }
        (None, None) => {
            return Err(Failure(
                "say what to cancel: a request id, or `--run ID`".to_owned(),
            ));
        }
    };
    let mut done: Vec<ApprovalRecord> = Vec::new();
    let mut refused: Vec<(ApprovalId, AnswerError)> = Vec::new();
    for id in targets {
        let withdrawal = Withdrawal {
            request_id: id.clone(),
            kind: WithdrawalKind::Cancel {
                operator: operator.clone(),
                channel: Channel::Cli,
            },
            reason: reason.clone(),
        };
        match store.withdraw_approval(withdrawal, SystemClock.now()).await {
            Ok(record) => done.push(record),
            // One request: its refusal is the command's error.
            Err(error) if args.id.is_some() => return Err(error.into()),
            Err(AnswerError::Store(error)) => return Err(error.into()),
            Err(error) => refused.push((id, error)),
        }
    }
    if global.json {
        let value = serde_json::json!({
            "cancelled": done,
            "refused": refused.iter().map(|(id, error)| serde_json::json!({
                "request_id": id,
                "reason": error.reason(),
                "message": error.to_string(),
            })).collect::<Vec<_>>(),
        });
        commands::write_json(out, &value)?;
    } else {
        if let Some(run) = &args.run
            && done.is_empty()
            && refused.is_empty()
        {
            writeln!(out, "run `{}` has no waiting requests", printable(run))?;
        }
        for record in &done {
            writeln!(out, "cancelled {}", shown(record))?;
        }
        if !done.is_empty() {
            writeln!(
                out,
                "it left every inbox; a late answer is refused `cancelled`"
            )?;
        }
        for (_, error) in &refused {
            writeln!(out, "not cancelled: {error}")?;
        }
    }
    Ok(if refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
