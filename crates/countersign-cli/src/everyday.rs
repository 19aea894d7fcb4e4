//! The everyday commands: `init`, `evaluate`, `policy diff`, `policy replay`, `stats` and
//! `completions` (issue #29).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use countersign::action::REDACTED;
use countersign::canonical;
use countersign::evidence::ReceiptKind;
use countersign::policy::{ConditionTrace, EntryMatch, Explanation, LoadErrorKind};
use countersign::store::MemoryStore;
use countersign::{
    ActionRequest, Clock, Control, Policy, Principal, Receipt, StaticIdentity, SystemClock,
};
use serde::Serialize;
use serde_json::Value;

use crate::render::Table;
use crate::style;
use crate::{Failure, Global};
mod policy;

pub(crate) use policy::{PolicyArgs, policy, policy_summary, write_policy_summary};

/// Load the policy at `path`, saying what to do when there is none.
pub fn load_policy(path: &Path) -> Result<Policy, Failure> {
    load_policy_or(
        path,
        "pass one with `--policy FILE`, or start one here with `countersign init`",
    )
}

/// Load the policy file `path` named as an argument (not through `--policy`): when it is
/// missing, `hint` says what to do.
pub fn load_policy_or(path: &Path, hint: &str) -> Result<Policy, Failure> {
    Policy::load(path).map_err(|error| match &error.kind {
        LoadErrorKind::Io { kind, .. } if *kind == std::io::ErrorKind::NotFound => {
            Failure(format!("no policy file at `{}`: {hint}", path.display()))
        }
        _ => Failure(error.to_string()),
    })
}

/// Parse `--args` text with the kernel's one strict reader (`countersign::json::read`: duplicate
/// keys, nesting past 64 levels, lone surrogates and integers outside ±(2^53−1) refused, at
/// their line and column) into an object.
pub fn parse_arguments(text: &str, what: &str) -> Result<Value, Failure> {
    let value = countersign::json::read(text).map_err(|error| {
        Failure(format!(
            "{what} is not valid JSON for an action ({error}): give an object, for example `{{\"payment_id\": \"pi_1\", \"amount\": 900}}`"
        ))
    })?;
    if !value.is_object() {
        let shown = canonical::to_canonical(&value)
            .map(canonical::CanonicalJson::into_string)
            .unwrap_or_default();
        return Err(Failure(format!(
            "{what} must be a JSON object of named arguments, not `{}`: for example `{{\"command\": \"ls\"}}`",
            crate::render::truncate(&shown, 40)
        )));
    }
    Ok(value)
}

/// A principal from `--principal`.
pub fn principal(given: &str) -> Result<Principal, Failure> {
    Principal::new(given.to_owned()).map_err(|error| {
        Failure(format!(
            "`{}` is not a principal ({error}): name the agent, for example `--principal agent:claude-code`",
            given.escape_debug()
        ))
    })
}

fn write_json(out: &mut dyn Write, value: &impl Serialize) -> Result<(), Failure> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// init

/// The starter policy `countersign init` writes. It loads, and `tests/cli/everyday.rs` checks
/// that it does.
pub const STARTER_POLICY: &str = r#"# Countersign policy (countersign.policy/v1): what an agent may do on its own, what waits
# for a human, and what is refused. Every key is described in docs/policy.md.
schema: countersign.policy/v1

# enforce: decisions are enforced. observe: every call runs and its receipt says what
# enforcement would have done (try a policy on real traffic first).
mode: enforce

# Part of every action hash: an approval given in one environment authorizes nothing in another.
environment: development

# How long an approval request waits for an answer, and a grant for its call.
approval_ttl: 15m

actions:
  # Coding agents' tools, as `countersign check` (a Claude Code PreToolUse hook) names them:
  # the action is the tool name, the arguments are its `tool_input`.
  Read:
    decision: allow
  Glob:
    decision: allow
  Grep:
    decision: allow
  Bash:
    rules:                          # first match wins; no match denies
      - when: { command: { in: ["git status", "git diff", "cargo test"] } }
        decision: allow
      - decision: approve           # any other command waits for `countersign approve <ID>`
  Write:
    decision: approve
  Edit:
    decision: approve
  # MCP tools reach Claude Code as mcp__<server>__<tool>; a pattern covers a whole server.
  "mcp__*":
    decision: approve

  # A command run as a protected action:
  #   countersign exec --action deploy --args '{"service": "api"}' -- ./deploy.sh api
  # The effect key makes a second run for the same service a refused duplicate.
  deploy:
    effect: "deploy:{service}"
    decision: approve

  # Anything not listed here is denied (`unknown_action`).
"#;

/// Arguments of `init`.
#[derive(Debug, Args)]
pub struct InitArgs {}

/// What `init --json` prints.
#[derive(Serialize)]
struct Initialized {
    policy: String,
    store_folder: String,
    policy_hash: String,
}

/// `countersign init`: a commented starter policy and `.countersign/` beside it. Never
/// overwrites: an existing policy file is refused before anything is written.
pub fn init(global: &Global, _args: &InitArgs, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let path = global.policy_path();
    if path.exists() {
        return Err(Failure(format!(
            "`{}` already exists: nothing was written; edit it, or pass `--policy OTHER.yaml` to start another policy",
            path.display()
        )));
    }
    let folder = crate::default_store_path(&path)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".countersign"));
    let policy = Policy::from_yaml_str(STARTER_POLICY, Some(&path)).map_err(|error| {
        Failure(format!(
            "the starter policy does not load ({error}): please report it"
        ))
    })?;
    // `create_new`: a file that appeared since the check above is refused, not overwritten.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|error| {
            Failure(format!(
                "cannot create `{}` ({error}): nothing was written; check the folder exists and is writable",
                path.display()
            ))
        })?;
    let written = file
        .write_all(STARTER_POLICY.as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::create_dir_all(&folder));
    if let Err(error) = written {
        // No partial write left behind: the policy file is ours, made just now.
        let _ = std::fs::remove_file(&path);
        return Err(Failure(format!(
            "cannot write `{}` or create `{}` ({error}): nothing was kept",
            path.display(),
            folder.display()
        )));
    }
    // The store holds receipts and approvals, not source: keep it out of git. An existing
    // `.gitignore` there is left as it is.
    let ignore = folder.join(".gitignore");
    if !ignore.exists() {
        let _ = std::fs::write(
            &ignore,
            "# Countersign's store: approvals, effects, receipts.\n*\n",
        );
    }
    if global.json {
        write_json(
            out,
            &Initialized {
                policy: path.display().to_string(),
                store_folder: folder.display().to_string(),
                policy_hash: policy.hash().to_string(),
            },
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "wrote {} ({})", path.display(), policy.hash())?;
    writeln!(
        out,
        "made {}/ for the store (approvals, effects and receipts; ignored by git)",
        folder.display()
    )?;
    writeln!(out)?;
    writeln!(out, "{}", style::heading("next"))?;
    writeln!(
        out,
        "  countersign evaluate Bash --args '{{\"command\": \"rm -rf build\"}}'   what the policy decides, and why"
    )?;
    writeln!(
        out,
        "  countersign exec --action deploy --args '{{\"service\": \"api\"}}' -- ./deploy.sh api"
    )?;
    writeln!(
        out,
        "  countersign pending, then countersign approve <ID>                  answer what waits"
    )?;
    writeln!(
        out,
        "  gate Claude Code's tools: add `countersign check` as a PreToolUse hook (docs/cli.md)"
    )?;
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------------------------------------
// evaluate

/// Arguments of `evaluate`.
#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// The action name, as the policy lists it (`stripe.refund`, `Bash`, `mcp__files__write`).
    #[arg(value_parser = crate::args::action_name)]
    action: String,
    /// The action's arguments: a JSON object (canonicalized as the kernel does; duplicate keys,
    /// `-0` and integers beyond ±(2^53−1) are refused).
    #[arg(long = "args", value_name = "JSON", default_value = "{}")]
    arguments: String,
    /// Who would act: part of the action hash (the decision does not depend on it).
    #[arg(
        long,
        value_name = "WHO",
        default_value = "agent:local",
        env = "COUNTERSIGN_PRINCIPAL"
    )]
    principal: String,
}

/// What `evaluate --json` prints.
#[derive(Serialize)]
struct EvaluateReport<'a> {
    policy: String,
    #[serde(flatten)]
    evaluation: &'a countersign::Evaluation,
    principal: &'a str,
    explanation: &'a Explanation,
}

/// `countersign evaluate`: the decision and why, writing nothing.
pub fn evaluate(
    global: &Global,
    args: &EvaluateArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let path = global.policy_path();
    let policy = load_policy(&path)?;
    let arguments = parse_arguments(&args.arguments, "`--args`")?;
    let principal = principal(&args.principal)?;
    let explanation = policy.explain(&args.action, &arguments);
    // The kernel's own evaluation, on a store that is never touched: nothing is written.
    let control = Control::builder(policy, MemoryStore::new())
        .identity(StaticIdentity::new(principal.clone()))
        .build();
    // `evaluate` runs nothing, so the kernel's "not executed" wording would mislead here.
    let evaluation = control
        .evaluate(&ActionRequest::new(args.action.clone(), &arguments))
        .map_err(|error| match error {
            countersign::ControlError::Template { action, source } => Failure(format!(
                "cannot evaluate `{}` with these arguments: {source} (its effect key or resource template reads it): add it to `--args`",
                countersign::evidence::printable(&action)
            )),
            other => Failure(other.to_string()),
        })?;
    if global.json {
        write_json(
            out,
            &EvaluateReport {
                policy: path.display().to_string(),
                evaluation: &evaluation,
                principal: principal.as_str(),
                explanation: &explanation,
            },
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let decision = evaluation.decision.as_str();
    writeln!(
        out,
        "{}: {}",
        countersign::evidence::printable(&args.action),
        style::word(decision)
    )?;
    write_explanation(&explanation, &path, out)?;
    let mut facts = Table::new(["", ""]);
    facts.row(["action hash".to_owned(), evaluation.action_hash.to_string()]);
    if let Some(key) = &evaluation.effect_key {
        facts.row(["effect key".to_owned(), key.to_string()]);
    }
    if let Some(resource) = &evaluation.resource {
        facts.row(["resource".to_owned(), resource.clone()]);
    }
    facts.row([
        "principal".to_owned(),
        format!(
            "{} (environment `{}`, mode {})",
            principal.as_str(),
            control.policy().environment(),
            evaluation.mode.as_str()
        ),
    ]);
    facts.row([
        "policy".to_owned(),
        format!("{} {}", path.display(), evaluation.policy_hash),
    ]);
    let mut facts_text = Vec::new();
    facts.write(&mut facts_text)?;
    for line in String::from_utf8_lossy(&facts_text).lines() {
        writeln!(out, "  {line}")?;
    }
    let next = match (evaluation.mode, evaluation.decision) {
        (countersign::Mode::Observe, _) => {
            "the policy is in observe mode: the call would run and its receipt would say what enforcement would have done".to_owned()
        }
        (_, countersign::Decision::Allow) => "the call would run on its own".to_owned(),
        (_, countersign::Decision::Approve) => format!(
            "the call would wait for a human: a call through `countersign exec --action {} --args '…' -- COMMAND` or `countersign check` opens the request, `countersign pending` lists it and `countersign approve <ID>` answers it; the identical call then runs once",
            args.action
        ),
        (_, countersign::Decision::Deny) => "the call would be refused, with a receipt".to_owned(),
    };
    writeln!(out, "{next}")?;
    writeln!(out, "nothing was written")?;
    Ok(ExitCode::SUCCESS)
}

/// One condition in words: `amount lte 50000: amount is 75000 (holds)`.
fn condition_text(condition: &ConditionTrace) -> String {
    let actual = match &condition.actual {
        Some(value) => format!("{} is {value}", condition.field),
        None => format!("{} is missing", condition.field),
    };
    format!(
        "{} {} {}: {actual} ({})",
        condition.field,
        condition.operator,
        condition.operand,
        if condition.holds { "holds" } else { "false" }
    )
}

/// The "why" lines of an explanation: the entry, each rule tried, and what decided.
fn write_explanation(
    explanation: &Explanation,
    policy_path: &Path,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let printable = countersign::evidence::printable;
    let Some(entry) = &explanation.entry else {
        writeln!(
            out,
            "  why          no action key matches `{}`, so it is denied (unknown_action): add it under `actions:` in {}",
            printable(&explanation.action),
            policy_path.display()
        )?;
        return Ok(());
    };
    let how = match explanation.matched_by {
        Some(EntryMatch::Pattern) => "the longest matching pattern",
        _ => "the exact name",
    };
    writeln!(out, "  entry        `{}` ({how})", printable(entry))?;
    if explanation.reason == "action_default" {
        writeln!(
            out,
            "  why          the entry's `decision: {}`",
            explanation.decision.as_str()
        )?;
        return Ok(());
    }
    for rule in &explanation.rules {
        let verdict = if rule.matched {
            "matches"
        } else {
            "does not match"
        };
        let head = format!(
            "  rule {:<7} {} — {verdict}",
            // Counted from 1, as the inbox and a person reading the file count them.
            rule.index + 1,
            rule.decision.as_str()
        );
        if rule.conditions.is_empty() {
            writeln!(out, "{head} (no `when`: always matches)")?;
            continue;
        }
        writeln!(out, "{head}")?;
        for condition in &rule.conditions {
            writeln!(
                out,
                "                 {}",
                printable(&condition_text(condition))
            )?;
        }
    }
    match explanation.rule {
        Some(index) => writeln!(
            out,
            "  why          rule {} is the first rule whose conditions all hold",
            index + 1
        )?,
        None => writeln!(
            out,
            "  why          no rule matched, so it is denied (no_matching_rule)"
        )?,
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// stats

/// Parse a `--since` duration: a number and a unit (`30m`, `24h`, `7d`, `2w`; several may be
/// combined, `1h 30m`).
fn parse_since(text: &str) -> Result<Duration, String> {
    crate::args::duration(text, "30m, 24h, 7d or 2w")
}

/// Arguments of `stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Only receipts recorded in this window up to now: a number and a unit, `s` `m` `h` `d`
    /// `w` (also `min`, `hours`, `days`, `weeks`), such as `30m`, `24h`, `7d`, or combined,
    /// `1h 30m` [default: every receipt].
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = parse_since)]
    since: Option<Duration>,
}

/// One row of `stats`: how many receipts share an action, outcome and reason.
#[derive(Serialize)]
struct StatsRow {
    action: Option<String>,
    outcome: &'static str,
    reason: Option<String>,
    count: u64,
}

/// What `stats --json` prints.
#[derive(Serialize)]
struct StatsReport {
    /// The window's start (UTC), when `--since` was given.
    from: Option<countersign::Timestamp>,
    receipts: u64,
    by_outcome: BTreeMap<&'static str, u64>,
    by_action: BTreeMap<String, u64>,
    by_reason: BTreeMap<String, u64>,
    rows: Vec<StatsRow>,
}

/// `countersign stats`: receipts counted by action, outcome and reason.
pub async fn stats(
    global: &Global,
    args: &StatsArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    let store = crate::store_access::open_existing(global).await?;
    let from = args.since.map(|since| {
        let now = SystemClock.now().as_millis();
        let back = i64::try_from(since.as_millis()).unwrap_or(i64::MAX);
        // A window reaching before 1970 counts everything: it starts at the epoch, never at a
        // time no clock can show.
        countersign::Timestamp::from_millis(now.saturating_sub(back).max(0))
    });
    let head = store.chain_head().await?.map_or(0, |head| head.seq);
    let progress = style::progress(head, "counting receipts");
    let mut rows: BTreeMap<(Option<String>, &'static str, Option<String>), u64> = BTreeMap::new();
    let mut report = StatsReport {
        from,
        receipts: 0,
        by_outcome: BTreeMap::new(),
        by_action: BTreeMap::new(),
        by_reason: BTreeMap::new(),
        rows: Vec::new(),
    };
    let mut after = 0;
    loop {
        let page = store.receipts(after, 2_000).await?;
        let Some(last) = page.last() else { break };
        after = last.position;
        progress.inc(page.len() as u64);
        for stored in &page {
            let receipt =
                crate::commands::parse_receipt(stored, &crate::store_access::store_flags(global))?;
            if from.is_some_and(|from| receipt.recorded_at < from) {
                continue;
            }
            let outcome = receipt.outcome.as_str();
            report.receipts += 1;
            *report.by_outcome.entry(outcome).or_default() += 1;
            *report
                .by_action
                .entry(receipt.action.clone().unwrap_or_else(|| "-".to_owned()))
                .or_default() += 1;
            if let Some(reason) = &receipt.reason {
                *report.by_reason.entry(reason.clone()).or_default() += 1;
            }
            *rows
                .entry((receipt.action, outcome, receipt.reason))
                .or_default() += 1;
        }
        if page.len() < 2_000 {
            break;
        }
    }
    progress.finish_and_clear();
    report.rows = rows
        .into_iter()
        .map(|((action, outcome, reason), count)| StatsRow {
            action,
            outcome,
            reason,
            count,
        })
        .collect();
    if global.json {
        write_json(out, &report)?;
        return Ok(ExitCode::SUCCESS);
    }
    match from {
        Some(from) => writeln!(out, "{} receipt(s) since {from}", report.receipts)?,
        None => writeln!(out, "{} receipt(s)", report.receipts)?,
    }
    if report.receipts == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    let totals: Vec<String> = report
        .by_outcome
        .iter()
        .map(|(outcome, count)| format!("{count} {}", style::word(outcome)))
        .collect();
    writeln!(out, "{}", totals.join(", "))?;
    writeln!(out)?;
    let mut table = Table::new(["ACTION", "OUTCOME", "REASON", "COUNT"]);
    for row in &report.rows {
        table.row([
            row.action.clone().unwrap_or_else(|| "-".to_owned()),
            row.outcome.to_owned(),
            row.reason.clone().unwrap_or_else(|| "-".to_owned()),
            row.count.to_string(),
        ]);
    }
    table.write(out)?;
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------------------------------------
// completions

/// Arguments of `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    shell: clap_complete::Shell,
}

/// `countersign completions SHELL`: the completion script, on standard output.
pub fn completions(args: &CompletionsArgs, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let mut command = <crate::Cli as clap::CommandFactory>::command();
    clap_complete::generate(args.shell, &mut command, "countersign", out);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::policy::replay_decision;
    use super::*;

    fn explain(policy: &str, action: &str, arguments: &Value) -> Explanation {
        Policy::from_yaml_str(policy, None)
            .expect("policy")
            .explain(action, arguments)
    }

    const POLICY: &str = "schema: countersign.policy/v1\nactions:\n  pay:\n    rules:\n      - when: { amount: { lte: 100 }, card.token: { eq: \"t\" } }\n        decision: allow\n      - when: { amount: { lte: 1000 } }\n        decision: approve\n      - decision: deny\n";

    #[test]
    fn a_decision_reading_a_redacted_argument_is_undecidable() {
        let arguments = json!({"amount": 50, "card": {"token": REDACTED}});
        let explained = explain(POLICY, "pay", &arguments);
        assert_eq!(
            replay_decision(&explained, &arguments),
            Err(vec!["card.token".to_owned()])
        );
        // A whole redacted object hides every path under it.
        let arguments = json!({"amount": 50, "card": REDACTED});
        let explained = explain(POLICY, "pay", &arguments);
        assert_eq!(
            replay_decision(&explained, &arguments),
            Err(vec!["card.token".to_owned()])
        );
    }

    #[test]
    fn a_rule_settled_by_known_arguments_does_not_need_the_redacted_one() {
        // amount 500 fails rule 0 on a known value whatever the token was; rule 1 decides.
        let arguments = json!({"amount": 500, "card": {"token": REDACTED}});
        let explained = explain(POLICY, "pay", &arguments);
        assert_eq!(
            replay_decision(&explained, &arguments),
            Ok("approve".to_owned())
        );
    }

    #[test]
    fn since_takes_the_documented_units() {
        assert_eq!(parse_since("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_since("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_since("1h 30m"), Ok(Duration::from_secs(5_400)));
        assert!(parse_since("yesterday").is_err());
    }

    #[test]
    fn the_starter_policy_loads() {
        let policy = Policy::from_yaml_str(STARTER_POLICY, None).expect("loads");
        assert!(policy.approval_warnings().is_empty());
    }
}
