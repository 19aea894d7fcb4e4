//! The operator commands: pending, approve, deny, resolve, receipts, effects, inspect, verify.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use countersign::approval::{self, AnswerDecision};
use countersign::evidence::{self, Anchor, StoredReceipt};
use countersign::store::{self, Store};
use countersign::{ApprovalId, ApprovalState, Clock, EffectKey, EffectState, Policy, SystemClock};

use crate::render::{self, Table};
use crate::{Failure, Global};

/// Open the store the operator points at; refuse to create an empty one by accident.
pub async fn open_existing(global: &Global) -> Result<Arc<dyn Store>, Failure> {
    let url = global.store_url();
    if let Some(path) = url.strip_prefix("sqlite:") {
        let path = path.strip_prefix("//").unwrap_or(path);
        let path = path.split('?').next().unwrap_or(path);
        if !std::path::Path::new(path).exists() {
            return Err(Failure(format!(
                "no store at `{path}`: nothing has been recorded there yet; point at the agent's store with --store-url or --policy"
            )));
        }
    }
    Ok(store::open_url(&url)?)
}

fn write_json(out: &mut dyn Write, value: &impl serde::Serialize) -> Result<(), Failure> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}

/// `countersign pending`.
pub async fn pending(global: &Global, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let store = open_existing(global).await?;
    let now = SystemClock.now();
    let waiting: Vec<_> = store
        .approvals(Some(ApprovalState::Pending))
        .await?
        .into_iter()
        .filter(|record| !record.is_expired_at(now))
        .collect();
    if global.json {
        write_json(out, &waiting)?;
        return Ok(ExitCode::SUCCESS);
    }
    if waiting.is_empty() {
        writeln!(out, "no approval requests are waiting")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new(["ID", "ACTION", "PRINCIPAL", "EXPIRES", "ARGUMENTS"]);
    for record in &waiting {
        table.row([
            record.id.to_string(),
            record.action.clone(),
            record.principal.clone(),
            record.expires_at.to_string(),
            render::truncate(record.arguments.as_str(), 60),
        ]);
    }
    table.write(out)?;
    writeln!(
        out,
        "\nanswer with `countersign approve <ID>` or `countersign deny <ID> --note \"why\"`"
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `approve` and `deny`.
#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// The approval request (`apr_…`, from `countersign pending`).
    id: String,
    /// Who is answering. Default: `human:$USER`.
    #[arg(long = "as", value_name = "WHO", env = "COUNTERSIGN_APPROVER")]
    approver: Option<String>,
    /// A note kept with the answer (shown to the agent as data).
    #[arg(long, value_name = "TEXT")]
    note: Option<String>,
}

fn approver(given: &Option<String>) -> Result<String, Failure> {
    match given {
        Some(who) if !who.trim().is_empty() => Ok(who.clone()),
        _ => match std::env::var("USER").or_else(|_| std::env::var("USERNAME")) {
            Ok(user) if !user.trim().is_empty() => Ok(format!("human:{user}")),
            _ => Err(Failure("say who is answering with `--as NAME`".to_owned())),
        },
    }
}

/// `countersign approve` and `countersign deny`.
pub async fn answer(
    global: &Global,
    args: &AnswerArgs,
    approve: bool,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let id = ApprovalId::parse(args.id.trim())?;
    let who = approver(&args.approver)?;
    let store = open_existing(global).await?;
    let decision = if approve {
        AnswerDecision::Approve
    } else {
        AnswerDecision::Reject
    };
    let record = approval::record_answer(
        store.as_ref(),
        &id,
        decision,
        &who,
        args.note.as_deref(),
        SystemClock.now(),
    )
    .await?;
    if global.json {
        write_json(out, &record)?;
    } else {
        let verb = if approve { "approved" } else { "denied" };
        writeln!(
            out,
            "{verb} {}: {} {} for {}",
            record.id, record.action, record.arguments, record.principal
        )?;
        if approve {
            writeln!(
                out,
                "it authorizes this exact call once, until {}",
                record.expires_at
            )?;
        } else {
            writeln!(
                out,
                "the agent will be told the call was denied and did not run"
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `resolve`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("outcome").required(true).args(["committed", "failed"])))]
pub struct ResolveArgs {
    /// The effect key, as `countersign effects --state ambiguous` lists it.
    key: String,
    /// The effect happened: every retry will be refused as a duplicate.
    #[arg(long)]
    committed: bool,
    /// The effect definitely did not happen: a retry may run it.
    #[arg(long)]
    failed: bool,
    /// Who is resolving. Default: `human:$USER`.
    #[arg(long = "as", value_name = "WHO", env = "COUNTERSIGN_APPROVER")]
    resolver: Option<String>,
    /// How you found out (kept in the receipt).
    #[arg(long, value_name = "TEXT")]
    note: Option<String>,
}

/// `countersign resolve`.
pub async fn resolve(
    global: &Global,
    args: &ResolveArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let key = EffectKey::new(args.key.clone())?;
    let who = approver(&args.resolver)?;
    let store = open_existing(global).await?;
    let to = if args.committed {
        EffectState::Committed
    } else {
        EffectState::Failed
    };
    let resolve = store::ResolveEffect {
        key,
        to,
        resolver: who,
        note: args.note.clone(),
    };
    let record = store.resolve_effect(resolve, SystemClock.now()).await?;
    if global.json {
        write_json(out, &record)?;
    } else {
        writeln!(out, "resolved {} as {}", record.key, record.state)?;
        match record.state {
            EffectState::Committed => writeln!(
                out,
                "every new attempt on this key will be refused as a duplicate"
            )?,
            _ => writeln!(out, "a new attempt on this key may run")?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `receipts`.
#[derive(Debug, Args)]
pub struct ReceiptsArgs {
    /// Show the newest N receipts.
    #[arg(long, value_name = "N", default_value_t = 20)]
    last: usize,
    /// Verify the whole chain instead of listing receipts.
    #[arg(long)]
    verify: bool,
    /// With --verify: also check the log still reaches this anchor (a JSON file from
    /// --export-anchor), which detects deleted newest receipts.
    #[arg(long, value_name = "FILE", requires = "verify")]
    anchor: Option<std::path::PathBuf>,
    /// Print the chain's head as an anchor (JSON); keep it somewhere else.
    #[arg(long, conflicts_with = "verify")]
    export_anchor: bool,
}

/// `countersign receipts`.
pub async fn receipts(
    global: &Global,
    args: &ReceiptsArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let store = open_existing(global).await?;
    if args.verify {
        return verify_chain(store.as_ref(), args.anchor.as_deref(), global.json, out).await;
    }
    if args.export_anchor {
        let Some(head) = store.chain_head().await? else {
            return Err(Failure(
                "the receipt log is empty: there is nothing to anchor yet".to_owned(),
            ));
        };
        write_json(
            out,
            &Anchor {
                seq: head.seq,
                hash: head.hash,
            },
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let head = store.chain_head().await?.map_or(0, |head| head.seq);
    let after = head.saturating_sub(args.last as u64);
    let stored = store.receipts(after, args.last).await?;
    let receipts = parse_all(&stored)?;
    if global.json {
        write_json(out, &receipts)?;
    } else if receipts.is_empty() {
        writeln!(out, "no receipts yet")?;
    } else {
        render::receipts_table(&receipts).write(out)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_all(stored: &[StoredReceipt]) -> Result<Vec<countersign::Receipt>, Failure> {
    stored
        .iter()
        .map(|receipt| {
            receipt.to_receipt().map_err(|error| {
                Failure(format!(
                    "receipt {} is unreadable ({error}): run `countersign receipts --verify`",
                    receipt.seq
                ))
            })
        })
        .collect()
}

/// Verify the chain and report; exit 1 on a break or a failed anchor.
pub async fn verify_chain(
    store: &dyn Store,
    anchor_file: Option<&std::path::Path>,
    json: bool,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let anchor = match anchor_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|error| {
                Failure(format!("cannot read anchor `{}`: {error}", path.display()))
            })?;
            Some(serde_json::from_str::<Anchor>(&text).map_err(|error| {
                Failure(format!("`{}` is not an anchor ({error}): export one with `countersign receipts --export-anchor`", path.display()))
            })?)
        }
        None => None,
    };
    let report = evidence::verify_store(store, anchor.as_ref()).await?;
    if json {
        write_json(out, &report)?;
    } else {
        render::verify_report(&report, out)?;
    }
    Ok(if report.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Arguments of `effects`.
#[derive(Debug, Args)]
pub struct EffectsArgs {
    /// Only effects in this state: reserved, committed, failed or ambiguous.
    #[arg(long, value_name = "STATE", value_parser = ["reserved", "committed", "failed", "ambiguous"])]
    state: Option<String>,
}

/// `countersign effects`.
pub async fn effects(
    global: &Global,
    args: &EffectsArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let store = open_existing(global).await?;
    let state = args.state.as_deref().and_then(EffectState::parse);
    let records = store.effects(state).await?;
    if global.json {
        write_json(out, &records)?;
    } else if records.is_empty() {
        writeln!(out, "no effects")?;
    } else {
        let mut table = Table::new(["KEY", "STATE", "ATTEMPTS", "UPDATED", "DETAIL"]);
        for record in &records {
            table.row([
                record.key.to_string(),
                record.state.to_string(),
                record.attempts.to_string(),
                record.updated_at.to_string(),
                render::truncate(record.detail.as_deref().unwrap_or(""), 60),
            ]);
        }
        table.write(out)?;
        if records
            .iter()
            .any(|record| record.state == EffectState::Ambiguous)
        {
            writeln!(
                out,
                "\nambiguous effects refuse every retry: find out what happened, then run `countersign resolve <KEY> --committed` or `--failed`"
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// An approval request (apr_…), an attempt (att_…), an effect key, or an action hash
    /// (sha256:…).
    id: String,
}

/// `countersign inspect`.
pub async fn inspect(
    global: &Global,
    args: &InspectArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let store = open_existing(global).await?;
    let id = args.id.trim();
    let approval = match ApprovalId::parse(id) {
        Ok(parsed) => store.approval(&parsed).await?,
        Err(_) => None,
    };
    let effect = match EffectKey::new(id.to_owned()) {
        Ok(key) => store.effect(&key).await?,
        Err(_) => None,
    };
    let mut receipts = Vec::new();
    let mut after = 0;
    loop {
        let page = store.receipts(after, 2_000).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for receipt in parse_all(&page)? {
            let fields = [
                &receipt.attempt_id,
                &receipt.approval_id,
                &receipt.effect_key,
                &receipt.action_hash,
            ];
            if fields.iter().any(|field| field.as_deref() == Some(id)) {
                receipts.push(receipt);
            }
        }
        if page.len() < 2_000 {
            break;
        }
    }
    if approval.is_none() && effect.is_none() && receipts.is_empty() {
        return Err(Failure(format!(
            "nothing is recorded for `{id}`: give an approval id (apr_…), an attempt id (att_…), an effect key or an action hash"
        )));
    }
    if global.json {
        write_json(
            out,
            &serde_json::json!({"approval": approval, "effect": effect, "receipts": receipts}),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(record) = &approval {
        writeln!(out, "approval {}: {}", record.id, record.state)?;
        writeln!(out, "  action      {} {}", record.action, record.arguments)?;
        writeln!(out, "  principal   {}", record.principal)?;
        writeln!(out, "  action hash {}", record.action_hash)?;
        writeln!(out, "  expires     {}", record.expires_at)?;
        if let Some(approver) = &record.approver {
            writeln!(
                out,
                "  answered by {approver}{}",
                record
                    .note
                    .as_deref()
                    .map(|note| format!(" (note: {note:?})"))
                    .unwrap_or_default()
            )?;
        }
        writeln!(out)?;
    }
    if let Some(record) = &effect {
        writeln!(
            out,
            "effect {}: {} after {} attempt(s)",
            record.key, record.state, record.attempts
        )?;
        if let Some(detail) = &record.detail {
            writeln!(out, "  detail      {detail}")?;
        }
        if let Some(resolver) = &record.resolved_by {
            writeln!(out, "  resolved by {resolver}")?;
        }
        writeln!(out)?;
    }
    if !receipts.is_empty() {
        render::receipts_table(&receipts).write(out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Also check the log still reaches this anchor.
    #[arg(long, value_name = "FILE")]
    anchor: Option<std::path::PathBuf>,
}

/// `countersign verify`: the policy loads, and the chain is intact.
pub async fn verify(
    global: &Global,
    args: &VerifyArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let path = global.policy_path();
    let policy = Policy::load(&path)?;
    if !global.json {
        writeln!(
            out,
            "policy {} loads: {} ({} mode)",
            path.display(),
            policy.hash(),
            policy.mode().as_str()
        )?;
    }
    let store = open_existing(global).await?;
    verify_chain(store.as_ref(), args.anchor.as_deref(), global.json, out).await
}
