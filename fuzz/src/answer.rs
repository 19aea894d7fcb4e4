//! The parsers of an approver's answer: the closed response to an interrupt object
//! ([`countersign::display::parse_interrupt_response`]), a submitted decision value
//! ([`countersign::AnswerDecision::from_submitted`], as the Python and Node bindings read it) and
//! decision text ([`countersign::AnswerDecision::parse`], as the gateway's elicitation reads it).
//!
//! For every input read as JSON: a response is accepted only with exactly the fields the
//! format names (`decision` `approve` or `deny`, `action_hash` a string, `note` a short string
//! or `null`), and the accepted answer says what was sent; a refusal carries the submitted
//! value as compact JSON. Decision text is accepted only as `approve`, `deny` or `reject`.

use countersign::AnswerDecision;
use countersign::display::parse_interrupt_response;
use serde_json::Value;

/// Read one input as a submitted answer, and as decision text.
///
/// # Panics
///
/// When a property in the module docs does not hold (the fuzzer's crash).
pub fn run(data: &[u8]) {
    let Some(text) = crate::text(data) else {
        return;
    };
    match AnswerDecision::parse(text) {
        Ok(decision) => assert!(
            matches!(
                (text, decision),
                ("approve", AnswerDecision::Approve) | ("deny" | "reject", AnswerDecision::Deny)
            ),
            "`{text}` read as {decision:?}"
        ),
        Err(invalid) => {
            assert_eq!(invalid.given, Value::String(text.to_owned()).to_string());
        }
    }
    let Ok(value) = countersign::json::read(text) else {
        return;
    };
    match parse_interrupt_response(&value) {
        Ok(response) => {
            let object = value
                .as_object()
                .expect("a response that is not an object was accepted");
            assert!(
                object
                    .keys()
                    .all(|key| matches!(key.as_str(), "decision" | "action_hash" | "note"))
            );
            let sent = match object.get("decision").and_then(Value::as_str) {
                Some("approve") => AnswerDecision::Approve,
                Some("deny") => AnswerDecision::Deny,
                other => panic!("decision {other:?} was accepted"),
            };
            assert_eq!(response.decision, sent);
            assert_eq!(
                Some(response.action_hash.as_str()),
                object.get("action_hash").and_then(Value::as_str)
            );
            assert_eq!(
                response.note.as_deref(),
                object.get("note").and_then(Value::as_str)
            );
        }
        Err(invalid) => {
            assert_eq!(
                invalid.given,
                value.to_string(),
                "the refusal lost what was sent"
            );
        }
    }
    match AnswerDecision::from_submitted(value.get("decision")) {
        Ok(decision) => {
            let given = value.get("decision").and_then(Value::as_str);
            assert_eq!(
                AnswerDecision::parse(given.expect("a decision that is not text was accepted")),
                Ok(decision)
            );
        }
        Err(invalid) => assert_eq!(
            invalid.given,
            value
                .get("decision")
                .map_or_else(|| "null".to_owned(), Value::to_string),
            "the refusal lost what was sent"
        ),
    }
}
