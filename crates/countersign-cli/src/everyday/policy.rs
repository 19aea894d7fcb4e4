//! `policy diff` (what changes between two policies, entry by entry) and `policy replay` (the
//! stored receipts decided again under a new policy).

use super::*;

/// Arguments of `policy`.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
pub(super) enum PolicyCommand {
    /// Check that a policy file loads (the one `--policy` names, by default), and print its
    /// hash, mode and warnings. Reads no store; exit 0 when it loads, 1 when it does not.
    Check,
    /// What changes between two policy files, by meaning (parsed documents compared, so
    /// comments, formatting and key order do not count): settings, and actions added, removed
    /// or changed, field by field.
    Diff(DiffArgs),
    /// What a candidate policy (`--policy NEW`) would have decided for every attempt already
    /// recorded in the store, next to what was decided then. Writes nothing.
    ///
    /// Each attempt receipt's action, principal, environment and canonical arguments are
    /// evaluated under NEW. Arguments the recorded policy redacted (`secret_arguments`) are
    /// `"[redacted]"` in receipts: a decision that depends on one is reported `undecidable`,
    /// never guessed.
    Replay(ReplayArgs),
}

/// Arguments of `policy diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The policy as it is now.
    old: PathBuf,
    /// The policy as it would be.
    new: PathBuf,
}

/// Arguments of `policy replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Only the attempts among the newest N receipts [default: every receipt].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    last: Option<u64>,
}

/// `countersign policy …`.
pub async fn policy(
    global: &Global,
    args: &PolicyArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    match &args.command {
        PolicyCommand::Check => check(global, out),
        PolicyCommand::Diff(diff_args) => diff(global, diff_args, out),
        PolicyCommand::Replay(replay_args) => replay(global, replay_args, out).await,
    }
}

/// `policy check`: the policy loads; its hash, mode and warnings (`--json`: one object).
fn check(global: &Global, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let path = global.policy_path();
    let policy = load_policy(&path)?;
    let summary = policy_summary(&path, &policy);
    if global.json {
        write_json(out, &summary)?;
    } else {
        write_policy_summary(&summary, out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What `policy check` and `verify` say of a loaded policy: `{file, hash, mode, warnings}`.
pub(crate) fn policy_summary(path: &Path, policy: &Policy) -> Value {
    serde_json::json!({
        "file": path.display().to_string(),
        "hash": policy.hash(),
        "mode": policy.mode().as_str(),
        "warnings": policy.approval_warnings(),
    })
}

/// [`policy_summary`] in words: `policy FILE loads: HASH (MODE mode)`, then one `warning:` line
/// each.
pub(crate) fn write_policy_summary(summary: &Value, out: &mut dyn Write) -> std::io::Result<()> {
    let text = |key: &str| summary[key].as_str().unwrap_or_default().to_owned();
    writeln!(
        out,
        "policy {} loads: {} ({} mode)",
        text("file"),
        text("hash"),
        text("mode")
    )?;
    for warning in summary["warnings"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "warning: {}",
            countersign::evidence::printable(warning.as_str().unwrap_or_default())
        )?;
    }
    Ok(())
}

/// One difference between two documents: a path into the document and the two values
/// (`null` where absent).
#[derive(Clone, Debug, Serialize)]
pub(super) struct Change {
    path: String,
    old: Option<Value>,
    new: Option<Value>,
}

pub(super) fn diff_values(
    path: &str,
    old: Option<&Value>,
    new: Option<&Value>,
    changes: &mut Vec<Change>,
) {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                diff_values(&child, a.get(key), b.get(key), changes);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for index in 0..a.len().max(b.len()) {
                diff_values(
                    &format!("{path}[{index}]"),
                    a.get(index),
                    b.get(index),
                    changes,
                );
            }
        }
        (a, b) if a == b => {}
        (a, b) => changes.push(Change {
            path: path.to_owned(),
            old: a.cloned(),
            new: b.cloned(),
        }),
    }
}

/// What `policy diff --json` prints.
#[derive(Serialize)]
pub(super) struct PolicyDiff {
    old: PolicySide,
    new: PolicySide,
    same: bool,
    settings: Vec<Change>,
    added: BTreeMap<String, Value>,
    removed: BTreeMap<String, Value>,
    changed: BTreeMap<String, Vec<Change>>,
}

#[derive(Serialize)]
pub(super) struct PolicySide {
    file: String,
    hash: String,
}

pub(super) fn diff(
    global: &Global,
    args: &DiffArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let hint = "check the path: `policy diff OLD NEW` compares two policy files (an old one from git: `git show HEAD:countersign.yaml > old.yaml`)";
    let old = super::load_policy_or(&args.old, hint)?;
    let new = super::load_policy_or(&args.new, hint)?;
    let empty = serde_json::Map::new();
    let actions = |policy: &Policy| {
        policy
            .document()
            .get("actions")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_else(|| empty.clone())
    };
    let (old_actions, new_actions) = (actions(&old), actions(&new));
    let settings_of = |policy: &Policy| {
        let mut settings = policy.document().clone();
        if let Value::Object(map) = &mut settings {
            map.remove("actions");
        }
        settings
    };
    let mut settings = Vec::new();
    diff_values(
        "",
        Some(&settings_of(&old)),
        Some(&settings_of(&new)),
        &mut settings,
    );
    let mut report = PolicyDiff {
        old: PolicySide {
            file: args.old.display().to_string(),
            hash: old.hash().to_string(),
        },
        new: PolicySide {
            file: args.new.display().to_string(),
            hash: new.hash().to_string(),
        },
        same: old.hash() == new.hash(),
        settings,
        added: BTreeMap::new(),
        removed: BTreeMap::new(),
        changed: BTreeMap::new(),
    };
    for (key, entry) in &new_actions {
        match old_actions.get(key) {
            None => {
                report.added.insert(key.clone(), entry.clone());
            }
            Some(before) if before != entry => {
                let mut changes = Vec::new();
                diff_values("", Some(before), Some(entry), &mut changes);
                report.changed.insert(key.clone(), changes);
            }
            Some(_) => {}
        }
    }
    for (key, entry) in &old_actions {
        if !new_actions.contains_key(key) {
            report.removed.insert(key.clone(), entry.clone());
        }
    }
    if global.json {
        write_json(out, &report)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{} ({}) → {} ({})",
        args.old.display(),
        old.hash(),
        args.new.display(),
        new.hash()
    )?;
    if report.same {
        writeln!(
            out,
            "no difference in meaning: both decide every call alike"
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let shown = |value: &Option<Value>| {
        value
            .as_ref()
            .map_or_else(|| "(absent)".to_owned(), Value::to_string)
    };
    for change in &report.settings {
        writeln!(
            out,
            "{} {}: {} → {}",
            style::word("changed"),
            change.path,
            shown(&change.old),
            shown(&change.new)
        )?;
    }
    for (key, entry) in &report.added {
        writeln!(out, "{} action `{key}`: {entry}", style::word("added"))?;
    }
    for key in report.removed.keys() {
        writeln!(
            out,
            "{} action `{key}`: its calls fall to a pattern, or are denied as unknown",
            style::word("removed")
        )?;
    }
    for (key, changes) in &report.changed {
        writeln!(out, "{} action `{key}`:", style::word("changed"))?;
        for change in changes {
            writeln!(
                out,
                "    {}: {} → {}",
                change.path,
                shown(&change.old),
                shown(&change.new)
            )?;
        }
    }
    if !report.changed.is_empty() {
        writeln!(
            out,
            "approvals granted under a changed action's old entry authorize nothing under the new one (its fingerprint changed)"
        )?;
    }
    writeln!(
        out,
        "see what the new policy would have decided for the recorded attempts: countersign policy replay --policy {}",
        args.new.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// What NEW says about one recorded attempt.
#[derive(Clone, Debug, Serialize)]
pub(super) struct Replayed {
    seq: u64,
    recorded_at: countersign::Timestamp,
    action: String,
    principal: Option<String>,
    environment: Option<String>,
    outcome: &'static str,
    /// The decision recorded then (`allow`, `approve`, `deny`), if the receipt has one.
    was: Option<String>,
    /// NEW's decision, or `undecidable`.
    now: String,
    /// `same`, `changed` or `undecidable`.
    verdict: &'static str,
    /// NEW's reason code and rule, or which redacted arguments the decision would depend on.
    why: String,
}

/// What `policy replay --json` prints.
#[derive(Serialize)]
pub(super) struct ReplayReport {
    policy: PolicySide,
    environment: String,
    attempts: usize,
    same: usize,
    changed: usize,
    undecidable: usize,
    replayed: Vec<Replayed>,
}

/// Does reading `path` in `arguments` reach a redacted value (the path or a prefix of it)?
pub(super) fn touches_redacted(arguments: &Value, path: &str) -> bool {
    let mut current = arguments;
    for segment in path.split('.') {
        if current.as_str() == Some(REDACTED) {
            return true;
        }
        match current.as_object().and_then(|object| object.get(segment)) {
            Some(next) => current = next,
            None => return false,
        }
    }
    current.as_str() == Some(REDACTED)
}

/// NEW's decision for `arguments`, or the redacted fields that make it undecidable. A rule
/// is settled without the redacted values when a condition on known values is false (it cannot
/// match) or when it reads no redacted value; the first unsettled rule makes the decision
/// undecidable.
pub(super) fn replay_decision(
    explanation: &Explanation,
    arguments: &Value,
) -> Result<String, Vec<String>> {
    for rule in &explanation.rules {
        let redacted: Vec<String> = rule
            .conditions
            .iter()
            .filter(|condition| touches_redacted(arguments, &condition.field))
            .map(|condition| condition.field.clone())
            .collect();
        let known_false = rule
            .conditions
            .iter()
            .any(|condition| !condition.holds && !touches_redacted(arguments, &condition.field));
        if known_false {
            continue;
        }
        if !redacted.is_empty() {
            return Err(redacted);
        }
        break;
    }
    Ok(explanation.decision.as_str().to_owned())
}

pub(super) async fn replay(
    global: &Global,
    args: &ReplayArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let path = global.policy_path();
    let policy = load_policy(&path)?;
    let store = crate::store_access::open_existing(global).await?;
    let head = store.chain_head().await?.map_or(0, |head| head.seq);
    let start = args.last.map_or(0, |last| head.saturating_sub(last));
    let progress = style::progress(head.saturating_sub(start), "replaying receipts");
    let mut replayed = Vec::new();
    let mut after = start;
    loop {
        let page = store.receipts(after, 2_000).await?;
        let Some(last) = page.last() else { break };
        after = last.position;
        progress.inc(page.len() as u64);
        for stored in &page {
            let receipt = stored.to_receipt().map_err(|error| {
                Failure(format!(
                    "receipt {} is unreadable ({error}): run `countersign receipts --verify`",
                    stored.seq
                ))
            })?;
            if let Some(row) = replay_one(&policy, &receipt) {
                replayed.push(row);
            }
        }
        if page.len() < 2_000 {
            break;
        }
    }
    progress.finish_and_clear();
    let count = |verdict: &str| replayed.iter().filter(|row| row.verdict == verdict).count();
    let report = ReplayReport {
        policy: PolicySide {
            file: path.display().to_string(),
            hash: policy.hash().to_string(),
        },
        environment: policy.environment().to_owned(),
        attempts: replayed.len(),
        same: count("same"),
        changed: count("changed"),
        undecidable: count("undecidable"),
        replayed,
    };
    if global.json {
        write_json(out, &report)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "replayed {} attempt(s) under {} ({}): {} same, {} changed, {} undecidable",
        report.attempts,
        path.display(),
        policy.hash(),
        report.same,
        report.changed,
        report.undecidable
    )?;
    let shown: Vec<&Replayed> = report
        .replayed
        .iter()
        .filter(|row| row.verdict != "same")
        .collect();
    if !shown.is_empty() {
        let mut table = Table::new(["SEQ", "ACTION", "PRINCIPAL", "WAS", "NOW", "WHY"]);
        for row in &shown {
            table.row([
                row.seq.to_string(),
                row.action.clone(),
                row.principal.clone().unwrap_or_else(|| "-".to_owned()),
                row.was.clone().unwrap_or_else(|| "-".to_owned()),
                row.now.clone(),
                row.why.clone(),
            ]);
        }
        table.write(out)?;
    }
    let other_environment = report
        .replayed
        .iter()
        .filter(|row| row.environment.as_deref() != Some(policy.environment()))
        .count();
    if other_environment > 0 {
        writeln!(
            out,
            "note: {other_environment} attempt(s) were recorded in another environment than `{}`: decisions do not depend on it, but their action hashes would differ",
            policy.environment()
        )?;
    }
    if report.undecidable > 0 {
        writeln!(
            out,
            "undecidable: the decision depends on an argument the recorded policy redacted (`secret_arguments`); receipts never keep those values"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn replay_one(policy: &Policy, receipt: &Receipt) -> Option<Replayed> {
    if receipt.kind != ReceiptKind::Attempt {
        return None;
    }
    let action = receipt.action.clone()?;
    let arguments = receipt.arguments.clone()?;
    let explanation = policy.explain(&action, &arguments);
    let (now, verdict, why) = match replay_decision(&explanation, &arguments) {
        Ok(decision) => {
            let why = match explanation.rule {
                // Counted from 1, as `policy explain`, `check` and the approval warnings count.
                Some(index) => format!(
                    "rule {} of `{}`",
                    index + 1,
                    explanation.entry.clone().unwrap_or_default()
                ),
                None => explanation.reason.to_owned(),
            };
            let verdict = if receipt.decision.as_deref() == Some(decision.as_str()) {
                "same"
            } else {
                "changed"
            };
            (decision, verdict, why)
        }
        Err(fields) => (
            "undecidable".to_owned(),
            "undecidable",
            format!(
                "depends on redacted {}",
                fields
                    .iter()
                    .map(|field| format!("`{field}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
    };
    Some(Replayed {
        seq: receipt.seq,
        recorded_at: receipt.recorded_at,
        action,
        principal: receipt.principal.as_ref().map(ToString::to_string),
        environment: receipt.environment.clone(),
        outcome: receipt.outcome.as_str(),
        was: receipt.decision.clone(),
        now,
        verdict,
        why,
    })
}
