//! JSON-RPC 2.0 message shapes, read from raw JSON without reshaping anything.

use serde_json::{Value, json};

/// What a JSON-RPC message is, judged by its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `method` and `id`.
    Request,
    /// `method`, no `id`.
    Notification,
    /// `result` or `error`, no `method`.
    Response,
    /// Anything else (including a batch).
    Invalid,
}

/// Classify `message`.
pub fn kind(message: &Value) -> Kind {
    let Some(object) = message.as_object() else {
        return Kind::Invalid;
    };
    let has_method = object.get("method").is_some_and(Value::is_string);
    let has_id = object.contains_key("id");
    match (has_method, has_id) {
        (true, true) => Kind::Request,
        (true, false) => Kind::Notification,
        (false, _) if object.contains_key("result") || object.contains_key("error") => {
            Kind::Response
        }
        _ => Kind::Invalid,
    }
}

/// The `method` member, if a string.
pub fn method(message: &Value) -> Option<&str> {
    message.get("method").and_then(Value::as_str)
}

/// A JSON-RPC error response.
pub fn error_response(id: Value, error: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// The message for a client message that does not parse: what the parser said (with its line
/// and column), and what to send instead. `unit` is `line` (stdio) or `request` (HTTP). The
/// parser refuses nesting deeper than 128 levels, which the message names.
pub fn unparsable_message(error: &serde_json::Error, unit: &str) -> String {
    format!(
        "not JSON-RPC the gateway can read ({error}): send one JSON-RPC message per {unit}, nested at most 128 levels deep"
    )
}

/// A JSON-RPC error object with a plain code and message.
pub fn error_object(code: i64, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into()})
}

/// A JSON-RPC notification.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// At most `limit` bytes of `text` (cut on a character boundary), marked when cut.
pub fn truncated(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[{} bytes cut]", &text[..end], text.len() - end)
}
