//! The Block Kit message for one request, built from the request as stored.

use countersign::{ApprovalRecord, ApprovalState, Timestamp, display};
use serde_json::{Value, json};

/// Slack's limit on one text object's characters.
const TEXT_LIMIT: usize = 3_000;

/// A `plain_text` object: Slack shows it as it is (no markup, no emoji names).
fn plain(text: &str) -> Value {
    json!({"type": "plain_text", "text": text, "emoji": false})
}

/// `text` in sections of at most [`TEXT_LIMIT`] characters each: every character is shown,
/// none is cut.
fn sections(text: &str) -> Vec<Value> {
    let characters: Vec<char> = text.chars().collect();
    characters
        .chunks(TEXT_LIMIT)
        .map(|chunk| json!({"type": "section", "text": plain(&chunk.iter().collect::<String>())}))
        .collect()
}

/// The short form of an action hash: `sha256:` and its first 12 hex digits.
pub fn short_hash(hash: &str) -> String {
    let cut = hash
        .char_indices()
        .nth("sha256:".len() + 12)
        .map_or(hash.len(), |(index, _)| index);
    format!("{}…", &hash[..cut])
}

/// What has happened to the request, in one line, or `None` while it waits for answers.
fn outcome(record: &ApprovalRecord) -> Option<String> {
    let by = record.approver.as_deref().unwrap_or("someone");
    let at = |time: Option<Timestamp>| time.map_or_else(String::new, |time| format!(" at {time}"));
    Some(match record.state {
        ApprovalState::Pending => return None,
        ApprovalState::Granted => format!("Approved by {by}{}", at(record.answered_at)),
        ApprovalState::Denied => format!("Denied by {by}{}", at(record.answered_at)),
        ApprovalState::Consumed => format!(
            "Approved by {by}{}; used by attempt {}{}",
            at(record.answered_at),
            record.consumed_by.as_deref().unwrap_or("-"),
            at(record.consumed_at)
        ),
        ApprovalState::Expired => expired_text(record),
        ApprovalState::Void => {
            "Void: the policy entry or the tool changed before it was used; nothing was authorized"
                .to_owned()
        }
        ApprovalState::Revoked => "Revoked: the grant was taken back before it was used".to_owned(),
        ApprovalState::Cancelled => {
            "Cancelled: it authorizes nothing (its receipt names by whom)".to_owned()
        }
    })
}

/// The message for `record` at `now`: the fallback text and the blocks. While the request is
/// `pending` and unexpired it has Approve and Deny buttons whose value is the request id and
/// the full action hash (`apr_…|sha256:…`), so an answer is bound to what the message showed.
pub fn blocks(record: &ApprovalRecord, now: Timestamp) -> (String, Value) {
    let shown = display::render(record, None);
    let waiting = record.state == ApprovalState::Pending && !record.is_expired_at(now);
    // The header says whether anyone need act: a message updated after the request ended (or
    // first posted then) must not still ask for an approval.
    let header = if waiting {
        "Countersign: approval needed".to_owned()
    } else {
        format!("Countersign: approval request {}", state_word(record, now))
    };
    let mut blocks = vec![json!({
        "type": "header",
        "text": plain(&header),
    })];
    blocks.extend(sections(&shown.to_text()));
    let given = record.approvals_given();
    let mut context = format!(
        "{} · expires {} · {}",
        short_hash(record.action_hash.as_str()),
        record.expires_at,
        display::approvals_count(given, record.rule.quorum)
    );
    let approvers: Vec<&str> = record
        .answers
        .iter()
        .filter(|answer| answer.decision == countersign::AnswerDecision::Approve)
        .map(|answer| answer.approver.id.as_str())
        .collect();
    if !approvers.is_empty() {
        context.push_str(&format!(" so far: {}", approvers.join(", ")));
    }
    blocks.push(json!({"type": "context", "elements": [plain(&context)]}));
    let summary = match outcome(record) {
        Some(outcome) => {
            blocks.push(json!({"type": "section", "text": plain(&outcome)}));
            format!("{}: {outcome}", shown.action.text)
        }
        None if waiting => {
            let value = format!("{}|{}", record.id, record.action_hash.as_str());
            blocks.push(json!({
                "type": "actions",
                "block_id": "countersign",
                "elements": [
                    {"type": "button", "action_id": "approve", "style": "primary",
                     "text": plain("Approve"), "value": value},
                    {"type": "button", "action_id": "deny", "style": "danger",
                     "text": plain("Deny"), "value": value},
                ],
            }));
            format!("Approval needed: {} ({})", shown.action.text, record.id)
        }
        None => {
            let expired = expired_text(record);
            blocks.push(json!({"type": "section", "text": plain(&expired)}));
            format!("{}: {expired}", shown.action.text)
        }
    };
    (summary, Value::Array(blocks))
}

/// The request's state at `now` as one word for a header: a pending request past its expiry
/// is `expired`, whether or not the sweeper has marked it.
fn state_word(record: &ApprovalRecord, now: Timestamp) -> &'static str {
    if record.state == ApprovalState::Pending && record.is_expired_at(now) {
        ApprovalState::Expired.as_str()
    } else {
        record.state.as_str()
    }
}

/// What an expired request's message says: a grant nobody used is not a question nobody
/// answered (found by a first-time user).
fn expired_text(record: &ApprovalRecord) -> String {
    match &record.approver {
        Some(by) => format!(
            "Expired at {}: approved by {by}, but not used before then, so nothing ran",
            record.expires_at
        ),
        None => format!(
            "Expired at {}: nobody answered in time, so nothing was authorized",
            record.expires_at
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_hashes_keep_the_prefix_and_twelve_digits() {
        assert_eq!(
            short_hash("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
            "sha256:0123456789ab…"
        );
        assert_eq!(short_hash("sha256:01"), "sha256:01…");
    }

    #[test]
    fn long_text_is_split_never_cut() {
        let text = "é".repeat(TEXT_LIMIT + 5);
        let parts = sections(&text);
        assert_eq!(parts.len(), 2);
        let joined: String = parts
            .iter()
            .map(|part| part["text"]["text"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(joined, text);
    }
}
