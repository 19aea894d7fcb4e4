//! The soak's checker: after every worker stopped, it reads the store and the tallies and
//! proves (or names what breaks):
//!
//! 1. **at most once** — no effect key has two executions in the tallies;
//! 2. **the store agrees with what ran** — a `committed` effect ran exactly once, a `failed` one
//!    never ran, every execution has its effect record, and an executor fault the kernel had to
//!    treat as unknown (`lose`, `hang-*`) never ended `committed`;
//! 3. **every unknown outcome has a cause** — each `ambiguous` effect, and each `reserved` one
//!    left behind, is attributed: a lapsed lease (`reserved`, or made ambiguous by
//!    `lease_expired`) to its attempt's worker instance having been killed, or to a store
//!    failure that instance saw after its executor ran; an ambiguous outcome the attempt
//!    recorded itself to a `lose` / `hang-*` fault injected on that key by that instance;
//! 4. **the evidence holds** — the receipt chain verifies ([`countersign::evidence::Verifier`],
//!    the code behind `countersign verify`), and the effect and approval tables agree with the
//!    receipts ([`countersign::audit::cross_check_effects`], [`cross_check_approvals`]).
//!
//! [`cross_check_approvals`]: countersign::audit::cross_check_approvals

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use countersign::EffectState;
use countersign::evidence::{Verifier, VerifyOutcome};
use countersign::store::Store;
use serde_json::{Value, json};

use super::instance_of;
use super::supervisor::{Kill, Tallied};
use super::tally;

/// What the checker found.
#[derive(Debug, Default)]
pub struct CheckReport {
    /// Receipts verified.
    pub receipts: u64,
    /// The verification's outcome and first break, if any.
    pub chain: String,
    /// True when the chain verified.
    pub chain_verified: bool,
    /// Receipts by `kind/outcome` (`attempt/committed`, `lease_expired/ambiguous`, …).
    pub receipt_kinds: BTreeMap<String, u64>,
    /// Effect records by state.
    pub effects: BTreeMap<&'static str, u64>,
    /// Executions in the tallies.
    pub executions: usize,
    /// Tally files read.
    pub tally_files: usize,
    /// Effect keys executed more than once, described.
    pub doubles: Vec<String>,
    /// Ambiguous or stranded effects by cause.
    pub attributed: BTreeMap<&'static str, u64>,
    /// Ambiguous or stranded effects without a cause, described.
    pub unattributed: Vec<String>,
    /// Disagreements between the store and the tallies, described.
    pub mismatches: Vec<String>,
    /// The library's cross-checks of the effect and approval tables against the receipts.
    pub table_disagreements: Vec<String>,
    /// Tally lines cut short.
    pub torn: Vec<String>,
}

/// Read the store and the tallies in `run_dir`; `killed` holds the instances the supervisor
/// killed.
///
/// # Errors
///
/// A message when the store or the tallies cannot be read.
pub async fn run(
    store: &dyn Store,
    run_dir: &Path,
    killed: &BTreeSet<String>,
) -> Result<CheckReport, String> {
    let mut report = CheckReport::default();
    let read = |error: countersign::StoreError| format!("cannot read the store: {error}");

    // 4. The chain, page by page, with the library's verifier; receipts counted by kind.
    let mut verifier = Verifier::new();
    let mut after = 0;
    loop {
        let page = store.receipts(after, 2_000).await.map_err(read)?;
        let Some(last) = page.last() else { break };
        after = last.position;
        for stored in &page {
            verifier.feed(stored, None);
            if let Ok(receipt) = stored.to_receipt() {
                let kind = serde_json::to_value(receipt.kind)
                    .ok()
                    .and_then(|kind| kind.as_str().map(str::to_owned))
                    .unwrap_or_default();
                let name = format!("{kind}/{}", receipt.outcome.as_str());
                *report.receipt_kinds.entry(name).or_default() += 1;
            }
        }
        if page.len() < 2_000 {
            break;
        }
    }
    let verified = verifier.finish(None);
    report.receipts = verified.checked;
    report.chain_verified = verified.outcome == VerifyOutcome::Verified;
    report.chain = match &verified.first_break {
        Some(first_break) => format!("{}: {first_break}", verified.outcome.as_str()),
        None => verified.outcome.as_str().to_owned(),
    };
    let effects_check = countersign::audit::cross_check_effects(store)
        .await
        .map_err(read)?;
    report
        .table_disagreements
        .extend(effects_check.disagreements.iter().map(ToString::to_string));
    let approvals_check = countersign::audit::cross_check_approvals(store)
        .await
        .map_err(read)?;
    report.table_disagreements.extend(
        approvals_check
            .disagreements
            .iter()
            .map(ToString::to_string),
    );

    // 1. At most once.
    let tallies = tally::read(run_dir)?;
    report.executions = tallies.execution_count();
    report.tally_files = tallies.files;
    report.torn = tallies.torn.clone();
    for (key, runs) in &tallies.executions {
        if runs.len() > 1 {
            let by: Vec<String> = runs
                .iter()
                .map(|(instance, mode)| format!("{instance} ({})", mode.as_str()))
                .collect();
            report.doubles.push(format!(
                "effect `{key}` executed {} times: by {}",
                runs.len(),
                by.join(", ")
            ));
        }
    }

    // 2 and 3. Every effect record against the tallies.
    let records = store.effects(None).await.map_err(read)?;
    let mut recorded = BTreeSet::new();
    for record in &records {
        let key = record.key.as_str();
        recorded.insert(key.to_owned());
        *report.effects.entry(record.state.as_str()).or_default() += 1;
        let ran = tallies.executions.get(key).map_or(0, Vec::len);
        let instance = record
            .attempt
            .as_ref()
            .and_then(|attempt| instance_of(attempt.principal.as_str()))
            .unwrap_or("(unknown)");
        match record.state {
            EffectState::Committed if ran == 0 => report.mismatches.push(format!(
                "effect `{key}` is committed but no tally records it running"
            )),
            EffectState::Failed if ran > 0 => report.mismatches.push(format!(
                "effect `{key}` is failed (did not run) but {instance}'s executor ran it"
            )),
            EffectState::Ambiguous | EffectState::Reserved => {
                let lapsed = record.state == EffectState::Reserved
                    || record
                        .detail
                        .as_deref()
                        .is_some_and(|detail| detail.starts_with("the lease of attempt"));
                let cause = if lapsed {
                    if killed.contains(instance) {
                        Some("worker killed")
                    } else if tallies
                        .store_failures
                        .get(key)
                        .is_some_and(|who| who.iter().any(|who| who == instance))
                    {
                        Some("store failure after the executor ran")
                    } else {
                        None
                    }
                } else if tallies.faults.get(key).is_some_and(|faults| {
                    faults
                        .iter()
                        .any(|(who, mode)| who == instance && mode.leaves_ambiguous())
                }) {
                    Some("executor failed, hung or lost its reply")
                } else {
                    None
                };
                match cause {
                    Some(cause) => *report.attributed.entry(cause).or_default() += 1,
                    None => report.unattributed.push(format!(
                        "effect `{key}` is {} after attempt {} by {instance} (detail: {}); {instance} was {}killed and its tally shows no fault on the key",
                        record.state.as_str(),
                        record.attempt_id,
                        record.detail.as_deref().unwrap_or("none"),
                        if killed.contains(instance) { "" } else { "not " },
                    )),
                }
            }
            EffectState::Committed | EffectState::Failed => {}
        }
    }
    for key in tallies.executions.keys() {
        if !recorded.contains(key) {
            report.mismatches.push(format!(
                "effect `{key}` ran (tally) but the store has no record of it"
            ));
        }
    }
    let states: BTreeMap<&str, EffectState> = records
        .iter()
        .map(|record| (record.key.as_str(), record.state))
        .collect();
    for (key, faults) in &tallies.faults {
        if faults.iter().any(|(_, mode)| mode.leaves_ambiguous())
            && states.get(key.as_str()) == Some(&EffectState::Committed)
        {
            report.mismatches.push(format!(
                "effect `{key}`: its executor failed, hung or lost its reply, yet it is committed"
            ));
        }
    }
    Ok(report)
}

impl CheckReport {
    /// Every failed check, described; empty when all pass.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        if !self.chain_verified {
            failures.push(format!("the receipt chain does not verify: {}", self.chain));
        }
        let lists = [
            ("double execution", &self.doubles),
            ("unattributed ambiguous effect", &self.unattributed),
            ("store and tallies disagree", &self.mismatches),
            ("tables and receipts disagree", &self.table_disagreements),
            ("torn tally line", &self.torn),
        ];
        for (what, list) in lists {
            for item in list.iter().take(20) {
                failures.push(format!("{what}: {item}"));
            }
            if list.len() > 20 {
                failures.push(format!("{what}: … and {} more", list.len() - 20));
            }
        }
        failures
    }
}

fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Print the totals and every check; true when all passed. `failures` are the supervisor's
/// own (a worker that exited on its own, one that did not stop).
pub(crate) fn print(
    report: &CheckReport,
    tallied: &Tallied,
    kills: &[Kill],
    failures: &[String],
    traffic: Duration,
    workers: usize,
) -> bool {
    let calls = tallied.total("calls");
    let seconds = traffic.as_secs_f64().max(0.001);
    let unexpected = tallied.total("unexpected");
    let effects: Vec<String> = report
        .effects
        .iter()
        .map(|(state, count)| format!("{state} {}", thousands(*count)))
        .collect();
    let attributed: Vec<String> = report
        .attributed
        .iter()
        .map(|(cause, count)| format!("{cause}: {}", thousands(*count)))
        .collect();
    println!("soak: totals");
    if tallied.latest.is_empty() {
        println!("  actions            (a re-check does not know them: see summary.json)");
    } else {
        println!(
            "  actions            {} kernel calls + {} answers in {:.0}s by {workers} workers ({:.0} calls/s); a killed worker's last second is not counted",
            thousands(calls),
            thousands(tallied.total("answers")),
            seconds,
            calls as f64 / seconds
        );
    }
    println!(
        "  kills survived     {} (SIGKILL, each followed by a restart)",
        kills.len()
    );
    println!(
        "  receipts           {} ({})",
        thousands(report.receipts),
        report.chain
    );
    println!("  effects            {}", effects.join(", "));
    println!(
        "  executions         {} (tallies of {} worker instances)",
        thousands(report.executions as u64),
        report.tally_files
    );
    println!(
        "  unknown outcomes   attributed {} ({}); unattributed {}",
        report.attributed.values().sum::<u64>(),
        if attributed.is_empty() {
            "none".to_owned()
        } else {
            attributed.join(", ")
        },
        report.unattributed.len()
    );
    println!("  double executions  {}", report.doubles.len());
    if !tallied.latest.is_empty() {
        println!(
            "  store errors       {} (seen by callers; not failures by themselves)",
            tallied.total("store_error")
        );
    }
    println!("  load average       {} (at the end)", load_average());
    let mut all = report.failures();
    all.extend(failures.iter().cloned());
    if unexpected > 0 {
        all.push(format!(
            "{unexpected} calls got an outcome their traffic does not allow"
        ));
        for (instance, samples) in &tallied.unexpected {
            for sample in samples.iter().take(5) {
                all.push(format!("unexpected ({instance}): {sample}"));
            }
        }
    }
    if all.is_empty() {
        println!(
            "soak: PASS: every effect key executed at most once; every unknown outcome attributed; the chain verifies; the tables agree with the receipts"
        );
        true
    } else {
        println!("soak: FAIL: {} problem(s):", all.len());
        for failure in &all {
            println!("  - {failure}");
        }
        false
    }
}

/// The run's figures as one JSON value (written to `RUN_DIR/summary.json`).
pub(crate) fn summary(
    report: &CheckReport,
    tallied: &Tallied,
    kills: &[Kill],
    failures: &[String],
    traffic: Duration,
    passed: bool,
) -> Value {
    json!({
        "passed": passed,
        "traffic_seconds": traffic.as_secs_f64(),
        "counts": tallied.totals(),
        "kills": kills.len(),
        "receipts": report.receipts,
        "chain": report.chain,
        "receipt_kinds": report.receipt_kinds,
        "effects": report.effects,
        "executions": report.executions,
        "double_executions": report.doubles,
        "attributed": report.attributed,
        "unattributed": report.unattributed,
        "mismatches": report.mismatches,
        "table_disagreements": report.table_disagreements,
        "torn": report.torn,
        "supervisor_failures": failures,
        "load_average": load_average(),
    })
}
