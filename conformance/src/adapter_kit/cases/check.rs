//! What a case observed (its results, receipts and effects) and the checks against what the
//! case wants.

use super::*;

/// What a world shows after a case's calls.
pub(crate) struct Observed {
    results: Vec<Result<serde_json::Value, ControlError>>,
    tool_calls: usize,
    received: Vec<serde_json::Value>,
    returned: Vec<serde_json::Value>,
    asked: usize,
    answered: usize,
    suspended: usize,
    failed: usize,
    receipts: Vec<Receipt>,
    approvals: Vec<ApprovalRecord>,
    steps: Vec<AfterCall>,
}

impl Observed {
    pub(super) async fn read<I>(
        world: &World<I>,
        results: Vec<Result<serde_json::Value, ControlError>>,
        steps: Vec<AfterCall>,
    ) -> Result<Observed, String> {
        let (answered, suspended, failed) = world.counts.get();
        let tool = world.session.tool();
        Ok(Observed {
            results,
            tool_calls: tool.calls(),
            received: tool.received(),
            returned: tool.returned(),
            asked: world.session.reviewer().asked(),
            answered,
            suspended,
            failed,
            receipts: read_receipts(world.store.as_ref()).await?,
            approvals: world
                .store
                .approvals(None)
                .await
                .map_err(|error| format!("the kit cannot read approvals: {error}"))?,
            steps,
        })
    }
}

/// Every receipt in `store`, after checking the chain.
pub(crate) async fn read_receipts(store: &dyn Store) -> Result<Vec<Receipt>, String> {
    let report = countersign::audit::verify_store(store, None)
        .await
        .map_err(|error| format!("the kit cannot read receipts: {error}"))?;
    if let Some(chain_break) = report.first_break {
        return Err(format!("the receipt chain is broken: {chain_break}"));
    }
    let stored = store
        .receipts(0, 10_000)
        .await
        .map_err(|error| format!("the kit cannot read receipts: {error}"))?;
    stored
        .iter()
        .map(|receipt| receipt.to_receipt())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("a receipt is unreadable: {error}"))
}

/// `kind/outcome[/reason]`.
pub(crate) fn receipt_line(receipt: &Receipt) -> String {
    let name = |value: serde_json::Value| value.as_str().unwrap_or("?").to_owned();
    let kind = name(serde_json::to_value(receipt.kind).unwrap_or_default());
    let mut line = format!("{kind}/{}", receipt.outcome.as_str());
    if let Some(reason) = &receipt.reason {
        line.push('/');
        line.push_str(reason);
    }
    line
}

/// The variant's name: an exhaustive match, so a new refusal forces the kit to place it.
pub(crate) fn variant(error: &ControlError) -> &'static str {
    match error {
        ControlError::InvalidArguments { .. } => "InvalidArguments",
        ControlError::Template { .. } => "Template",
        ControlError::NoPrincipal { .. } => "NoPrincipal",
        ControlError::ActionDenied { .. } => "ActionDenied",
        ControlError::ApprovalRequired { .. } => "ApprovalRequired",
        ControlError::ApprovalDenied { .. } => "ApprovalDenied",
        ControlError::ApprovalMismatch { .. } => "ApprovalMismatch",
        ControlError::ApprovalConsumed { .. } => "ApprovalConsumed",
        ControlError::ApprovalExpired { .. } => "ApprovalExpired",
        ControlError::ApprovalUnknown { .. } => "ApprovalUnknown",
        ControlError::ApprovalVoid { .. } => "ApprovalVoid",
        ControlError::ApprovalRevoked { .. } => "ApprovalRevoked",
        ControlError::ApprovalCancelled { .. } => "ApprovalCancelled",
        ControlError::ApprovalOtherRun { .. } => "ApprovalOtherRun",
        ControlError::InterruptFailed { .. } => "InterruptFailed",
        ControlError::AnswerRefused { .. } => "AnswerRefused",
        ControlError::DuplicateEffect { .. } => "DuplicateEffect",
        ControlError::AmbiguousEffect { .. } => "AmbiguousEffect",
        ControlError::NotExecuted { .. } => "NotExecuted",
        ControlError::OutcomeUnknown { .. } => "OutcomeUnknown",
        ControlError::Store { .. } => "Store",
        ControlError::Internal(_) => "Internal",
    }
}

/// `ok` or `Variant(reason)`.
pub(crate) fn result_line(result: &Result<serde_json::Value, ControlError>) -> String {
    match result {
        Ok(_) => "ok".to_owned(),
        // An internal error is never wanted: show what it says, so the report points at it.
        Err(ControlError::Internal(message)) => format!("Internal({message})"),
        Err(error) => format!("{}({})", variant(error), error.reason()),
    }
}

pub(super) fn want_line(want: &Want) -> String {
    match want {
        Want::Value(_) => "ok".to_owned(),
        Want::Refused(variant, reason) => format!("{variant}({reason})"),
    }
}

/// Collects every difference between what a case wants and what it saw.
#[derive(Default)]
pub(crate) struct Differences(Vec<String>);

impl Differences {
    pub(crate) fn eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            self.0.push(format!("{what}: got {got:?}, want {want:?}"));
        }
    }

    pub(crate) fn push(&mut self, difference: String) {
        self.0.push(difference);
    }

    pub(crate) fn finish(self) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(self.0.join("; "))
        }
    }
}

pub(super) fn check(scenario: &Scenario, observed: &Observed) -> Result<(), String> {
    let mut differences = Differences::default();
    differences.eq(
        "results",
        observed.results.iter().map(result_line).collect::<Vec<_>>(),
        scenario.results.iter().map(want_line).collect(),
    );
    for (index, (got, want)) in observed.results.iter().zip(&scenario.results).enumerate() {
        if let (Ok(value), Want::Value(run)) = (got, want)
            && observed.returned.get(*run) != Some(value)
        {
            differences.push(format!(
                "call {}: the value returned is not the executor's value: got {value}",
                index + 1
            ));
        }
        if let (Err(ControlError::ApprovalDenied { approver, note, .. }), Some(want_note)) =
            (got, scenario.denial_note)
        {
            differences.eq(
                &format!("call {}: denial", index + 1),
                (approver.as_str(), note.as_deref()),
                (KIT_REVIEWER, Some(want_note)),
            );
        }
    }
    differences.eq("executor calls", observed.tool_calls, scenario.tool_calls);
    for arguments in &observed.received {
        if !scenario
            .calls
            .iter()
            .any(|call| &call.arguments == arguments)
        {
            differences.push(format!(
                "the executor ran with arguments no call had: {arguments}"
            ));
        }
    }
    differences.eq("times a human was asked", observed.asked, scenario.asked);
    if scenario.answered_pinned {
        differences.eq(
            "answers the interrupt handed the kernel",
            observed.answered,
            scenario.answered,
        );
    }
    if let Some(suspended) = scenario.suspended {
        differences.eq("interrupt suspensions", observed.suspended, suspended);
    }
    differences.eq("interrupt failures", observed.failed, 0);
    differences.eq(
        "receipts",
        observed
            .receipts
            .iter()
            .map(receipt_line)
            .collect::<Vec<_>>(),
        scenario
            .receipts
            .iter()
            .map(|line| (*line).to_owned())
            .collect(),
    );
    differences.eq(
        "approval requests",
        observed
            .approvals
            .iter()
            .map(|record| record.state.as_str())
            .collect::<Vec<_>>(),
        scenario.approvals.clone(),
    );
    if !scenario.counted.is_empty() {
        differences.eq(
            "approvers counted on each request",
            observed
                .approvals
                .iter()
                .map(|record| {
                    record
                        .answers
                        .iter()
                        .map(|answer| answer.approver.id.as_str())
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>(),
            scenario.counted.clone(),
        );
    }
    if !scenario.steps.is_empty() {
        differences.eq("after each call", &observed.steps, &scenario.steps);
    }
    if scenario.runs_pinned {
        check_runs(&mut differences, scenario, observed);
    }
    check_evidence(&mut differences, &observed.receipts, &scenario.approvers);
    differences.finish()
}

/// Run scope: every request names a run; calls of different runs never pause on the same
/// request; requests of different runs name different runs.
pub(super) fn check_runs(differences: &mut Differences, scenario: &Scenario, observed: &Observed) {
    for record in &observed.approvals {
        if record.run.is_none() {
            differences.push(format!(
                "approval request {} is not scoped to a run: the adapter did not pass its run id (`ActionRequest::with_run`)",
                record.id
            ));
        }
    }
    let paused: Vec<(&str, &ApprovalId)> = scenario
        .calls
        .iter()
        .zip(&observed.results)
        .filter_map(|(call, result)| match result {
            Err(ControlError::ApprovalRequired { request_id, .. }) => {
                Some((call.run.as_str(), request_id))
            }
            _ => None,
        })
        .collect();
    for (index, (run, request)) in paused.iter().enumerate() {
        for (other_run, other_request) in &paused[index + 1..] {
            if run != other_run && request == other_request {
                differences.push(format!(
                    "runs `{run}` and `{other_run}` paused on the same request {request}: each run needs its own"
                ));
            }
        }
    }
    let runs: Vec<Option<&str>> = observed
        .approvals
        .iter()
        .map(|record| record.run.as_deref())
        .collect();
    for (index, run) in runs.iter().enumerate() {
        if run.is_some() && runs[index + 1..].contains(run) {
            differences.push(format!(
                "two approval requests are scoped to the same run {run:?}: the adapter maps two runs to one id"
            ));
        }
    }
}

/// Who acted and who answered, on every receipt: the identity provider's principal, and one
/// of `approvers` (the humans the operator passed).
pub(crate) fn check_evidence(
    differences: &mut Differences,
    receipts: &[Receipt],
    approvers: &[&str],
) {
    for receipt in receipts {
        if receipt
            .principal
            .as_deref()
            .is_some_and(|p| p != KIT_PRINCIPAL)
        {
            differences.push(format!(
                "receipt {} names principal {:?}, not the identity provider's `{KIT_PRINCIPAL}`",
                receipt.seq, receipt.principal
            ));
        }
        if receipt
            .approver
            .as_deref()
            .is_some_and(|who| !approvers.contains(&who))
        {
            differences.push(format!(
                "receipt {} names approver {:?}, not the human the operator passed ({})",
                receipt.seq,
                receipt.approver,
                approvers
                    .iter()
                    .map(|who| format!("`{who}`"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
        }
    }
}
