//! The JSON columns schema version 2 added, encoded and decoded once for every SQL backend.
//!
//! - `approvals.rule`: the [`ApprovalRule`] as canonical JSON. NULL (a request stored at
//!   version 1) reads as [`ApprovalRule::default`], the rule every request had then: anyone but
//!   the requester, one answer, asserted identities allowed.
//! - `approvals.answers`: the [`RecordedAnswer`]s as JSON. NULL reads as the one answer a
//!   version-1 row recorded in its `approver` column, if any: an asserted answer through the
//!   programmatic API (version 1 did not record the channel; `api` is the one that claims
//!   nothing), without a hash echo.
//! - `effects.attempt`: the [`AttemptContext`] as JSON; NULL reads as `None`.

use crate::action::canonical;
use crate::approval::{AnswerDecision, ApprovalState, RecordedAnswer};
use crate::approver::{ApprovalRule, Approver, Authentication, Channel};
use crate::clock::Timestamp;
use crate::effect::AttemptContext;

/// The `rule` column's text.
pub(crate) fn rule_text(rule: &ApprovalRule) -> String {
    canonical_text(rule)
}

/// The `answers` column's text.
pub(crate) fn answers_text(answers: &[RecordedAnswer]) -> String {
    canonical_text(&answers)
}

/// The `attempt` column's text.
pub(crate) fn attempt_text(attempt: Option<&AttemptContext>) -> Option<String> {
    attempt.map(canonical_text)
}

fn canonical_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    // INVARIANT (representable): these values hold only strings, booleans, small integers and
    // timestamps as strings, so canonical form cannot refuse them; plain JSON is the fallback.
    canonical::to_canonical(value)
        .map(canonical::CanonicalJson::into_string)
        .unwrap_or_else(|_| serde_json::to_string(value).unwrap_or_default())
}

/// The rule and answers of an approval row; `legacy` is the row's state, `approver`, `note`
/// and `answered_at` columns, read when `answers` is NULL.
///
/// # Errors
///
/// A message naming the column that does not parse.
pub(crate) fn rule_and_answers(
    rule: Option<&str>,
    answers: Option<&str>,
    legacy: (ApprovalState, Option<&str>, Option<&str>, Option<Timestamp>),
) -> Result<(ApprovalRule, Vec<RecordedAnswer>), String> {
    let rule = match rule {
        Some(text) => {
            serde_json::from_str(text).map_err(|error| format!("approval rule column: {error}"))?
        }
        None => ApprovalRule::default(),
    };
    let answers = match answers {
        Some(text) => serde_json::from_str(text)
            .map_err(|error| format!("approval answers column: {error}"))?,
        None => legacy_answers(legacy),
    };
    Ok((rule, answers))
}

fn legacy_answers(
    (state, approver, note, answered_at): (
        ApprovalState,
        Option<&str>,
        Option<&str>,
        Option<Timestamp>,
    ),
) -> Vec<RecordedAnswer> {
    let (Some(id), Some(answered_at)) = (approver, answered_at) else {
        return Vec::new();
    };
    let decision = match state {
        ApprovalState::Denied => AnswerDecision::Deny,
        _ => AnswerDecision::Approve,
    };
    vec![RecordedAnswer {
        approver: Approver {
            id: crate::approver::ApproverId::from_stored(id),
            groups: Vec::new(),
            channel: Channel::Api,
            authentication: Authentication::Asserted,
        },
        decision,
        answered_at,
        note: note.map(str::to_owned),
        hash_confirmed: false,
    }]
}

/// The attempt context of an effect row.
///
/// # Errors
///
/// A message when the column does not parse.
pub(crate) fn attempt(text: Option<&str>) -> Result<Option<AttemptContext>, String> {
    text.map(|text| {
        serde_json::from_str(text).map_err(|error| format!("effect attempt column: {error}"))
    })
    .transpose()
}
