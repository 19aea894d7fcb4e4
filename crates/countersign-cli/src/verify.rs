//! `countersign verify` and `receipts --verify`: the policy, the chain and the state tables
//! checked, with three outcomes and their exit statuses (0 verified, 1 failed, 3 unverifiable).

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use countersign::Policy;
use countersign::evidence::{self, Anchor};
use countersign::policy::LoadErrorKind;
use countersign::store::Store;

use crate::commands::write_json;
use crate::render;
use crate::store_access::{
    missing_store_file, missing_store_message, open_or_nothing, store_flags,
};
use crate::{Failure, Global};

/// Verify the chain and report; exit 1 on a break or a failed anchor, 3 when the log is empty.
pub async fn verify_chain(
    store: &dyn Store,
    anchor_file: Option<&std::path::Path>,
    global: &Global,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let anchor = read_anchor(anchor_file)?;
    let report = countersign::audit::verify_store(store, anchor.as_ref()).await?;
    if global.json {
        write_json(out, &report)?;
    } else {
        render::verify_report(&report, &store_flags(global), out)?;
    }
    Ok(exit_for(&report))
}

/// The exit status of a verification: 0 verified (something was checked and all of it holds),
/// 1 failed, 3 unverifiable (nothing to check). clap keeps 2 for usage errors.
pub(crate) fn exit_for(report: &evidence::VerifyReport) -> ExitCode {
    match report.outcome {
        evidence::VerifyOutcome::Verified => ExitCode::SUCCESS,
        evidence::VerifyOutcome::Failed => ExitCode::FAILURE,
        evidence::VerifyOutcome::Unverifiable => ExitCode::from(UNVERIFIABLE),
    }
}

/// Exit status for "nothing could be checked" (`verify`, `receipts --verify`): never 0.
pub(crate) const UNVERIFIABLE: u8 = 3;

/// The anchor in `anchor_file`, if one was given.
fn read_anchor(anchor_file: Option<&std::path::Path>) -> Result<Option<Anchor>, Failure> {
    let Some(path) = anchor_file else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|error| Failure(format!("cannot read anchor `{}`: {error}", path.display())))?;
    // The kernel's one strict reader (duplicate keys, depth, number range), then the shape.
    let anchor = countersign::json::read(&text)
        .map_err(|error| error.to_string())
        .and_then(|value| {
            if !value.is_object() {
                return Err(
                    "an anchor is one JSON object, such as {\"seq\": 12, \"hash\": \"sha256:…\"}"
                        .to_owned(),
                );
            }
            serde_json::from_value::<Anchor>(value).map_err(|error| error.to_string())
        })
        .and_then(|anchor| anchor.check_shape().map(|()| anchor))
        .map_err(|error| {
            Failure(format!(
                "`{}` is not an anchor ({error}): export one with `countersign receipts --export-anchor`",
                path.display()
            ))
        })?;
    Ok(Some(anchor))
}

/// Arguments of `verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Also check the log still reaches this anchor (a JSON file from `countersign receipts
    /// --export-anchor`), which detects deleted newest receipts.
    #[arg(long, value_name = "FILE")]
    anchor: Option<std::path::PathBuf>,
    /// Check the store against a signed checkpoint you kept (from `countersign checkpoint
    /// --out FILE`): its first receipts must be exactly the ones the checkpoint signed, which
    /// catches truncation, forks and rewrites before it. Needs `--key`.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["anchor", "bundle"])]
    checkpoint: Option<std::path::PathBuf>,
    /// Check an offline bundle (from `countersign receipts --bundle`) with no store and no
    /// policy. Needs `--key`.
    #[arg(long, value_name = "FILE", conflicts_with = "anchor")]
    bundle: Option<std::path::PathBuf>,
    /// The log's public key (the `.pub` file `countersign keygen` wrote), for `--checkpoint`
    /// and `--bundle`.
    #[arg(long, value_name = "FILE")]
    key: Option<std::path::PathBuf>,
    /// Check only the receipts from this place in the log on (default 1; a receipt's seq on a
    /// one-lane SQLite store): the receipt before it must hash to its own hash and the next
    /// receipt of its lane must link to it; earlier receipts are not checked, and neither are
    /// the effects and approvals tables. A start after the log's head checks nothing: exit 3.
    #[arg(long, value_name = "POSITION", value_parser = clap::value_parser!(u64).range(1..), conflicts_with_all = ["anchor", "checkpoint", "bundle"])]
    from: Option<u64>,
    /// Check only the receipts up to this place in the log (default the log's head). An end
    /// past the head cannot be verified whole: exit 3, after checking the receipts that exist.
    #[arg(long, value_name = "POSITION", value_parser = clap::value_parser!(u64).range(1..), conflicts_with_all = ["anchor", "checkpoint", "bundle"])]
    to: Option<u64>,
}

impl VerifyArgs {
    /// The range asked for, if any.
    fn range(&self) -> Option<evidence::VerifyRange> {
        (self.from.is_some() || self.to.is_some()).then(|| evidence::VerifyRange {
            from: self.from.unwrap_or(1),
            to: self.to,
        })
    }
}

/// What `verify` says when no store is where it looked: with an anchor (a refusal), without.
struct NoStore {
    anchor: String,
    text: String,
}

/// `countersign verify`: the policy loads, and the chain is intact.
///
/// Exit 0 only when at least one receipt was checked and everything holds; 1 when something
/// does not; 3 (unverifiable) when there is nothing to check: no store file yet at the default
/// path (the policy is still checked and the output says so; `countersign policy check` checks
/// only the policy), an empty log, a log without hashes, or a `--from`/`--to` range past the
/// head, empty, or ending past it (case B58). With a range the state tables are not compared.
/// Never creates a store; a store named with `--store-url` must exist, and is checked alone
/// (the output says so; `--json` `"policy": null`) when no policy is at the default path and
/// none was named with `--policy`.
pub async fn verify(
    global: &Global,
    args: &VerifyArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    if let (Some(from), Some(to)) = (args.from, args.to)
        && from > to
    {
        // A usage error (exit status 2, as clap's own), not an unverifiable log: no store
        // could make this range mean anything.
        crate::usage_error(
            global.json,
            &format!(
                "`--from {from}` is after `--to {to}`: a range runs from its first receipt to its last, such as `--from {to} --to {from}`"
            ),
        );
    }
    // Flags no run could use together are usage errors (2), not a failed check (1).
    let signed = args
        .bundle
        .as_ref()
        .map(|_| "--bundle")
        .or(args.checkpoint.as_ref().map(|_| "--checkpoint"));
    match (signed, &args.key) {
        (Some(flag), None) => crate::usage_error(
            global.json,
            &format!(
                "`{flag}` needs `--key PUBLIC_KEY_FILE`: the `.pub` file `countersign keygen` wrote beside the log's private key"
            ),
        ),
        (None, Some(_)) => crate::usage_error(
            global.json,
            "`--key` is for `--checkpoint FILE` or `--bundle FILE`: pass one of them, or leave `--key` out",
        ),
        _ => {}
    }
    if let Some(bundle) = &args.bundle {
        return crate::transparency::verify_bundle(global, bundle, args.key.as_deref(), out);
    }
    if let Some(checkpoint) = &args.checkpoint {
        return crate::transparency::verify_checkpoint(
            global,
            checkpoint,
            args.key.as_deref(),
            out,
        )
        .await;
    }
    // A bad anchor file is refused before anything is printed or opened.
    let anchor = read_anchor(args.anchor.as_deref())?;
    let path = global.policy_path();
    // A store named with `--store-url` is checked on its own when no policy is at the default
    // path (an auditor's copy of a store, say): the policy is then not checked, and the output
    // says so. A policy named with `--policy` must exist.
    let unpoliced = global.policy.is_none() && global.store_url.is_some() && !path.exists();
    let policy_summary = if unpoliced {
        if !global.json {
            writeln!(
                out,
                "policy: none at `{}`, so only the store is checked; pass `--policy FILE` to check the agent's policy too",
                path.display()
            )?;
        }
        serde_json::Value::Null
    } else {
        let policy = Policy::load(&path).map_err(|error| match &error.kind {
            LoadErrorKind::Io { kind, .. } if *kind == std::io::ErrorKind::NotFound => {
                Failure(format!(
                    "no policy file at `{}`: pass one with `--policy FILE`, start one here with `countersign init`, or check a store alone with `--store-url URL`",
                    path.display()
                ))
            }
            _ => Failure(error.to_string()),
        })?;
        let summary = crate::everyday::policy_summary(&path, &policy);
        if !global.json {
            crate::everyday::write_policy_summary(&summary, out)?;
        }
        summary
    };
    // Nothing recorded where the store should be (a SQLite file that does not exist, a
    // PostgreSQL database or schema with none of a store's tables): unverifiable, never created.
    let loads = if policy_summary.is_null() {
        ""
    } else {
        " the policy loads."
    };
    let opened = match missing_store_file(global) {
        Some(store_file) => Err(NoStore {
            anchor: format!(
                "no store at `{store_file}` to check the anchor against: pass the agent's store with `--store-url sqlite:PATH`"
            ),
            text: if global.store_url.is_none() {
                format!(
                    "unverifiable: no store at `{store_file}` yet, so no receipt was checked (exit status 3);{loads} Pass the agent's store with `--store-url sqlite:PATH`, or check only the policy with `countersign policy check`"
                )
            } else {
                format!(
                    "unverifiable: no receipt was checked (exit status 3);{loads} {}",
                    missing_store_message(global, &store_file)
                )
            },
        }),
        None => open_or_nothing(global).await?.map_err(|nothing| NoStore {
            anchor: format!("{nothing}; so there is nothing to check the anchor against"),
            text: format!("unverifiable: no receipt was checked (exit status 3);{loads} {nothing}"),
        }),
    };
    let store = match opened {
        Ok(store) => store,
        Err(NoStore {
            anchor: refusal, ..
        }) if args.anchor.is_some() => {
            return Err(Failure(refusal));
        }
        Err(NoStore { text, .. }) => {
            if global.json {
                // Why nothing was checked, as the text says it (a script cannot tell "no store"
                // from an empty log otherwise).
                let detail = text
                    .strip_prefix("unverifiable: ")
                    .unwrap_or(&text)
                    .to_owned();
                write_json(
                    out,
                    &serde_json::json!({"outcome": "unverifiable", "detail": detail, "policy": policy_summary, "store": null, "chain": null}),
                )?;
            } else {
                writeln!(out, "{text}")?;
            }
            return Ok(ExitCode::from(UNVERIFIABLE));
        }
    };
    let range = args.range();
    let report =
        countersign::audit::verify_store_range(store.as_ref(), range, anchor.as_ref()).await?;
    // The effects table is what the kernel consults before running an effect and it is not
    // chained: compare it with the receipts (only meaningful on a whole, intact chain).
    let (effects, approvals) = match (&report.first_break, range) {
        (None, None) => (
            Some(countersign::audit::cross_check_effects(store.as_ref()).await?),
            Some(countersign::audit::cross_check_approvals(store.as_ref()).await?),
        ),
        _ => (None, None),
    };
    let agree = effects
        .as_ref()
        .is_none_or(countersign::audit::StateCheck::agrees)
        && approvals
            .as_ref()
            .is_none_or(countersign::audit::StateCheck::agrees);
    let overall = if agree {
        report.outcome
    } else {
        evidence::VerifyOutcome::Failed
    };
    if global.json {
        write_json(
            out,
            &serde_json::json!({"outcome": overall.as_str(), "policy": policy_summary, "store": global.store_url(), "chain": report, "effects": effects, "approvals": approvals}),
        )?;
    } else {
        render::verify_report(&report, &store_flags(global), out)?;
        if range.is_some() {
            writeln!(
                out,
                "not compared with a range: the effects and approvals tables (run `countersign verify` without `--from`/`--to` for them)"
            )?;
        }
        if let Some(check) = &effects {
            render::state_check(
                "effects",
                check,
                "the effects table and the receipts disagree, so one of them was changed outside Countersign: the receipts are the record once they are known whole (`verify --anchor`, or `--checkpoint`, against one kept elsewhere: a receipt rewritten with its hash passes a check without one); then find what wrote to the store, and restore the table from a backup before the agent runs again",
                out,
            )?;
        }
        if let Some(check) = &approvals {
            render::state_check(
                "granted approvals",
                check,
                "the approvals table and the receipts disagree, so one of them was changed outside Countersign: stop the agent; the receipts are the record once they are known whole (`verify --anchor`, or `--checkpoint`, against one kept elsewhere); then find what wrote to the store, and restore the table from a backup",
                out,
            )?;
        }
    }
    Ok(match overall {
        evidence::VerifyOutcome::Verified => ExitCode::SUCCESS,
        evidence::VerifyOutcome::Failed => ExitCode::FAILURE,
        evidence::VerifyOutcome::Unverifiable => ExitCode::from(UNVERIFIABLE),
    })
}
