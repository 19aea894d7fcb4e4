//! The gateway's reading of client messages, without a session, for the fuzz targets in `fuzz/`
//! (issue #30). Not part of the API: hidden from the docs, and free to change with the fuzz
//! crate.

use serde_json::Value;

pub use crate::wire::Kind;

/// What the stdio front does with one line a client sent, up to handing it to the session:
/// `None` for a blank line (skipped), `Some(Ok((kind, message)))` for a message the session
/// would route by `kind`, `Some(Err(reply))` for the JSON-RPC error the gateway answers
/// directly (a message over `max_message_bytes`, a batch, text the strict reader refuses).
///
/// # Panics
///
/// Never (the property the fuzz target checks).
pub fn read_client_line(
    line: &[u8],
    max_message_bytes: usize,
) -> Option<Result<(Kind, Value), Value>> {
    let text = line.trim_ascii();
    if text.is_empty() {
        return None;
    }
    if let Some(refusal) = crate::front::stdio::refuse_message(text, max_message_bytes) {
        return Some(Err(refusal));
    }
    Some(match countersign::json::read_slice(text) {
        Ok(message) => Ok((crate::wire::kind(&message), message)),
        Err(error) => Err(crate::wire::unreadable(text, &error, "line")),
    })
}

/// The request id the gateway echoes when it refuses a message it could not read
/// (`wire::request_id_of`): a string, a number or `null`.
pub fn request_id_of(bytes: &[u8]) -> Value {
    crate::wire::request_id_of(bytes)
}

/// The `method` member of a message, if a string (how the session dispatches a request).
pub fn method(message: &Value) -> Option<&str> {
    crate::wire::method(message)
}
