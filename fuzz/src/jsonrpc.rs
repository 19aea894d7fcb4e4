//! The gateway's reading of JSON-RPC messages from MCP clients: one stdio line or HTTP body
//! through the size and batch checks, the strict reader, the message classification, the
//! refusal that echoes the request id, and the 2026-07-28 `_meta` and header checks
//! ([`countersign_gateway::fuzzing`], [`countersign_gateway::era`]).
//!
//! For every input: a blank line is skipped, anything else is either a message the session
//! routes or a JSON-RPC error response (`jsonrpc: "2.0"`, an `error` with an integer `code` and
//! a non-empty `message`, an `id` that is a string, a number or `null`); a message over the
//! cap or a batch is refused; the id a refusal echoes is one the message really holds at its
//! top level; and the headers the gateway sends upstream for a modern request pass its own
//! header check, unless the body itself is invalid (a call that names no tool), which is
//! refused as invalid params, never as a header mismatch.

use countersign_gateway::era;
use countersign_gateway::fuzzing::{self, Kind};
use serde_json::Value;

/// The cap the target reads with: small, so the fuzzer reaches the size refusal too.
const MAX_MESSAGE_BYTES: usize = 4096;

/// Read one input as a client line, then apply the checks a request goes through.
///
/// # Panics
///
/// When a property in the module docs does not hold (the fuzzer's crash).
pub fn run(data: &[u8]) {
    let id = fuzzing::request_id_of(data);
    assert!(
        id.is_string() || id.is_number() || id.is_null(),
        "an echoed id that is not a string, a number or null: {id}"
    );
    let Some(read) = fuzzing::read_client_line(data, MAX_MESSAGE_BYTES) else {
        assert!(data.trim_ascii().is_empty(), "a line with text was skipped");
        return;
    };
    let message = match read {
        Ok((kind, message)) => {
            assert!(
                data.trim_ascii().len() <= MAX_MESSAGE_BYTES,
                "a message over the cap was read"
            );
            assert!(!data.trim_ascii().starts_with(b"["), "a batch was read");
            assert_eq!(kind, classify(&message), "misclassified: {message}");
            message
        }
        Err(reply) => {
            check_error_response(&reply);
            return;
        }
    };
    if classify(&message) == Kind::Request {
        if era::declared_version(&message).is_some() && era::check_request_meta(&message).is_ok() {
            check_own_headers(&message);
        }
        let _ = era::declares(&message, "elicitation");
    }
}

/// JSON-RPC 2.0's rule, written again: `method` (a string) and `id` make a request, `method`
/// alone a notification, `result` or `error` without `method` a response.
fn classify(message: &Value) -> Kind {
    let method = fuzzing::method(message);
    match message.as_object() {
        Some(object) if method.is_some() && object.contains_key("id") => Kind::Request,
        Some(_) if method.is_some() => Kind::Notification,
        Some(object) if object.contains_key("result") || object.contains_key("error") => {
            Kind::Response
        }
        _ => Kind::Invalid,
    }
}

/// A JSON-RPC error response as the gateway must write one.
fn check_error_response(reply: &Value) {
    assert_eq!(reply.get("jsonrpc"), Some(&Value::from("2.0")), "{reply}");
    let id = reply.get("id").expect("an error response without `id`");
    assert!(id.is_string() || id.is_number() || id.is_null(), "{reply}");
    let error = reply
        .get("error")
        .expect("an error response without `error`");
    assert!(error.get("code").is_some_and(Value::is_i64), "{reply}");
    assert!(
        error
            .get("message")
            .and_then(Value::as_str)
            .is_some_and(|message| !message.trim().is_empty()),
        "{reply}"
    );
}

/// The headers the gateway sends upstream for a modern request pass its own check of them.
fn check_own_headers(message: &Value) {
    let method = fuzzing::method(message).unwrap_or_default();
    // A method that is not visible ASCII cannot be a header value as it is: HTTP refuses it
    // before any check (noted in docs/fuzzing.md), so the property is for the others.
    if !method.bytes().all(|byte| (0x20..0x7f).contains(&byte)) {
        return;
    }
    let headers = era::request_headers(message);
    let header = |name: &str| {
        headers
            .iter()
            .find(|(sent, _)| sent.eq_ignore_ascii_case(name))
            .map(|(_, value)| {
                value
                    .bytes()
                    .all(|byte| (0x20..0x7f).contains(&byte))
                    .then_some(value.as_str())
            })
    };
    // They pass, or the body itself is refused (invalid params: a call that names no tool);
    // a header mismatch would blame headers the gateway wrote itself.
    if let Err(error) = era::check_headers(message, header) {
        assert_eq!(
            error.get("code").and_then(Value::as_i64),
            Some(countersign_gateway::codes::INVALID_PARAMS),
            "the gateway's own headers {headers:?} fail its header check: {error}"
        );
    }
}
