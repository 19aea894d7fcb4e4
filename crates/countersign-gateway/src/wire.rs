//! JSON-RPC 2.0 message shapes, read from raw JSON without reshaping anything.

use countersign::json::ReadError;
use serde_json::{Value, json};

use crate::codes;

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

/// The refusal of a client message the strict reader ([`countersign::json::read_slice`]) did
/// not accept, keeping the message's request id whenever it can be read (case B50: a client
/// waiting on id 7 gets its answer, never silence).
///
/// Text that is not JSON (or not UTF-8) is a parse error (`-32700`); well-formed JSON the reader
/// refuses (a duplicate key, nesting past 64 levels, a lone surrogate, an integer outside
/// ±(2^53−1)) is invalid params (`-32602`) when the fault is inside `params`, an invalid
/// request (`-32600`) otherwise. `data` carries `countersign: true`, the reader's `reason`
/// (`duplicate_key`, `too_deep`, ...), `line`, `column`, `did_run: "no"`, `may_retry: false`, and
/// the refused bytes' size and SHA-256 (`raw_bytes`, `raw_digest`: `sha256:` + hex; case B51).
/// `unit` is `line` (stdio) or `request` (HTTP).
pub fn unreadable(bytes: &[u8], error: &ReadError, unit: &str) -> Value {
    let in_params = matches!(
        error.source.path(),
        Some(path) if path == "/params" || path.starts_with("/params/")
    );
    let (code, what) = if !error.is_well_formed() {
        (codes::PARSE_ERROR, "not JSON-RPC the gateway can read")
    } else if in_params {
        (codes::INVALID_PARAMS, "invalid params")
    } else {
        (codes::INVALID_REQUEST, "invalid request")
    };
    let message = format!(
        "not executed: {what}: {error}: send one JSON-RPC message per {unit}, each key once, nested at most {} levels deep, integers within ±(2^53−1)",
        countersign::json::MAX_DEPTH
    );
    // The bytes refused are named by size and digest (case B51), never echoed: the client can
    // match the refusal to what it sent, and the log and any record keep a fixed-size trace.
    let data = json!({
        "countersign": true,
        "reason": error.reason(),
        "line": error.line,
        "column": error.column,
        "did_run": "no",
        "may_retry": false,
        "raw_bytes": bytes.len(),
        "raw_digest": countersign::canonical::sha256_prefixed(bytes),
    });
    error_response(
        request_id_of(bytes),
        json!({"code": code, "message": message, "data": data}),
    )
}

/// The `id` member of a JSON-RPC message the strict reader refused, when it can be read: the
/// message is an object whose top level holds `id` once, as a string, a number or `null`, read
/// by the strict reader itself. Otherwise `null`. The scan is flat (a counter, no recursion), so
/// no nesting exhausts the stack, and it stops at the first thing it cannot follow.
pub fn request_id_of(bytes: &[u8]) -> Value {
    let mut found = IdScan::default();
    match scan_request_id(bytes, &mut found) {
        Some(()) if !found.twice => found.id.unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

/// The `id` of a message read only in part (the start of a line over the size cap): as
/// [`request_id_of`], but an `id` met before the text stops counts. `None` when none was met,
/// or two were.
pub fn leading_request_id(bytes: &[u8]) -> Option<Value> {
    partial_message(bytes, &[]).id
}

/// What can be told of a message read only in part (a line over the size cap): from its
/// `head` (the bytes kept) and its `tail` (the line's last bytes, or none).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Partial {
    /// The top-level `id`, met in the head before the scan stopped, or, failing that, the
    /// integer `id` that closes the object at the very end of the tail (`…,"id":7}`, where
    /// serializers that write `result` first put it). `None` when neither, or two were met.
    pub id: Option<Value>,
    /// A top-level `method` key was met: a request or a notification, never a response.
    pub has_method: bool,
    /// A top-level `result` or `error` key was met: a response.
    pub is_response: bool,
}

/// Read what [`Partial`] says of the message whose first bytes are `head` and last `tail`.
pub(crate) fn partial_message(head: &[u8], tail: &[u8]) -> Partial {
    let mut found = IdScan::default();
    let _ = scan_request_id(head, &mut found);
    let id = if found.twice {
        None
    } else {
        found.id.or_else(|| trailing_id(tail).map(Value::from))
    };
    Partial {
        id,
        has_method: found.method,
        is_response: found.response,
    }
}

/// The integer `id` that is the last member of the object ending `tail`: `…,"id": 7 }` at the
/// very end. The last `}` of a complete object closes its top level, so a member right before
/// it is a top-level one.
fn trailing_id(tail: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(tail).ok()?.trim_end();
    let text = text.strip_suffix('}')?.trim_end();
    let digits = text.len() - text.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (before, number) = text.split_at(text.len() - digits);
    let before = before.trim_end().strip_suffix(':')?.trim_end();
    let before = before.strip_suffix("\"id\"")?.trim_end();
    // A `,` before the key: the member follows another one at the same level (an object that
    // is nothing but `{"id":7}` is never over the cap).
    if !before.ends_with(',') {
        return None;
    }
    number.parse().ok()
}

/// What [`scan_request_id`] met.
#[derive(Default)]
struct IdScan {
    id: Option<Value>,
    /// `id` was given twice: which one the sender meant cannot be told.
    twice: bool,
    /// A top-level `method` key was met.
    method: bool,
    /// A top-level `result` or `error` key was met.
    response: bool,
}

/// Scan the top level of `bytes` for `id` into `found`; `Some` when the object was followed to
/// its end (or to something after a member that is not `,`), `None` where the scan stopped.
fn scan_request_id(bytes: &[u8], found: &mut IdScan) -> Option<()> {
    let mut scan = Scan { bytes, at: 0 };
    scan.whitespace();
    scan.expect(b'{')?;
    loop {
        scan.whitespace();
        if scan.peek()? == b'}' {
            return Some(());
        }
        let key_start = scan.at;
        scan.skip_string()?;
        let key = countersign::json::read_slice(&bytes[key_start..scan.at]).ok()?;
        match key.as_str() {
            Some("method") => found.method = true,
            Some("result" | "error") => found.response = true,
            _ => {}
        }
        scan.whitespace();
        scan.expect(b':')?;
        scan.whitespace();
        let value_start = scan.at;
        scan.skip_value()?;
        if key == "id" {
            if found.id.is_some() {
                found.twice = true;
                return None;
            }
            let value = countersign::json::read_slice(&bytes[value_start..scan.at]).ok()?;
            if !(value.is_string() || value.is_number() || value.is_null()) {
                return None;
            }
            found.id = Some(value);
        }
        scan.whitespace();
        match scan.peek()? {
            b',' => scan.at += 1,
            _ => return Some(()),
        }
    }
}

/// The top-level members of a JSON object's text, as (key, byte range of its value), in order;
/// `None` when the text is not an object the flat scan can follow, or a key appears twice. Like
/// [`request_id_of`], it counts brackets instead of recursing, so a value nested past any
/// parser's limit is stepped over, not read.
pub(crate) fn top_level_members(bytes: &[u8]) -> Option<Vec<(String, std::ops::Range<usize>)>> {
    let mut scan = Scan { bytes, at: 0 };
    scan.whitespace();
    scan.expect(b'{')?;
    let mut members: Vec<(String, std::ops::Range<usize>)> = Vec::new();
    scan.whitespace();
    if scan.peek()? == b'}' {
        return Some(members);
    }
    loop {
        scan.whitespace();
        let key_start = scan.at;
        scan.skip_string()?;
        let key = countersign::json::read_slice(&bytes[key_start..scan.at]).ok()?;
        let key = key.as_str()?.to_owned();
        scan.whitespace();
        scan.expect(b':')?;
        scan.whitespace();
        let start = scan.at;
        scan.skip_value()?;
        if members.iter().any(|(seen, _)| *seen == key) {
            return None;
        }
        members.push((key, start..scan.at));
        scan.whitespace();
        match scan.peek()? {
            b',' => scan.at += 1,
            b'}' => return Some(members),
            _ => return None,
        }
    }
}

/// A flat cursor over JSON bytes for [`request_id_of`] and [`top_level_members`].
struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Past a string whose opening quote is next.
    fn skip_string(&mut self) -> Option<()> {
        self.expect(b'"')?;
        loop {
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                b'\\' => self.at += 2,
                _ => self.at += 1,
            }
        }
    }

    /// Past one value of any depth, counting brackets instead of recursing.
    fn skip_value(&mut self) -> Option<()> {
        let mut depth = 0_usize;
        loop {
            match self.peek()? {
                b'"' => self.skip_string()?,
                b'[' | b'{' => {
                    depth += 1;
                    self.at += 1;
                }
                b']' | b'}' => {
                    if depth == 0 {
                        return Some(());
                    }
                    depth -= 1;
                    self.at += 1;
                }
                b',' if depth == 0 => return Some(()),
                _ => self.at += 1,
            }
            if depth == 0 {
                // A scalar ends at `,`, `}` or whitespace; a container just closed.
                let closed_container = matches!(self.bytes.get(self.at - 1), Some(b']' | b'}'));
                if closed_container
                    || matches!(
                        self.peek(),
                        Some(b',' | b'}' | b' ' | b'\t' | b'\n' | b'\r') | None
                    )
                {
                    return Some(());
                }
            }
        }
    }
}

/// A JSON-RPC error object with a plain code and message.
pub fn error_object(code: i64, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into()})
}

/// The error object of a message the gateway refused to read or run, nothing sent upstream:
/// `data` as every Countersign refusal has it (`countersign: true`, `reason`, `did_run: "no"`,
/// `may_retry: false`: the same message would be refused again).
pub fn refusal_object(code: i64, reason: &str, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into(), "data": {
        "countersign": true, "reason": reason, "did_run": "no", "may_retry": false}})
}

/// Is `id` usable as a request's id: a string or a number (JSON-RPC 2.0 §4; MCP 2025-06-18,
/// "Requests": never `null`)? An array, object, boolean or `null` id is refused.
pub fn is_request_id(id: &Value) -> bool {
    id.is_string() || id.is_number()
}

/// Why a client message is not one the gateway handles, as (`reason`, message), when
/// [`kind`] finds it [`Kind::Invalid`] or it is a request whose id is unusable.
pub fn invalid_message(message: &Value) -> Option<(&'static str, &'static str)> {
    match message.get("jsonrpc").and_then(Value::as_str) {
        Some("2.0") => {}
        _ => {
            return Some((
                "invalid_request",
                "not executed: not a JSON-RPC 2.0 message (an object with `\"jsonrpc\": \"2.0\"` and a `method`, or a response)",
            ));
        }
    }
    match kind(message) {
        Kind::Invalid => Some((
            "invalid_request",
            "not executed: not a JSON-RPC 2.0 message (an object with `\"jsonrpc\": \"2.0\"` and a `method`, or a response)",
        )),
        Kind::Request if !message.get("id").is_some_and(is_request_id) => Some((
            "invalid_request_id",
            "not executed: a request's `id` must be a string or a number, never null, an array, an object or a boolean (JSON-RPC 2.0 §4, MCP \"Requests\"): send it under such an id, or as a notification without one",
        )),
        _ => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_message_says_what_it_is_from_its_head_and_its_id_from_either_end() {
        let cut = |text: &str| text.as_bytes()[..text.len() / 2].to_vec();
        let notification = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}"#;
        let seen = partial_message(&cut(notification), b"xxxx\"}}");
        assert!(seen.has_method && !seen.is_response && seen.id.is_none());

        let id_first = r#"{"jsonrpc":"2.0","id":4,"result":{"content":"xxxxxxxxxxxxxxxxxxxxxxx"}}"#;
        let seen = partial_message(&cut(id_first), b"");
        assert_eq!(seen.id, Some(json!(4)));
        assert!(seen.is_response && !seen.has_method);

        let id_last =
            r#"{"jsonrpc":"2.0","result":{"content":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},"id":9}"#;
        let seen = partial_message(&cut(id_last), br#"xxxx"}, "id" : 9 }"#);
        assert_eq!(seen.id, Some(json!(9)));
        // An `id` inside the result (the last `}` is not followed by the top level's) or in a
        // string is not taken for the message's.
        assert_eq!(partial_message(b"{\"result\":{", br#"{"id":9}}"#).id, None);
        assert_eq!(partial_message(b"{\"result\":{", br#"x\"id\":9}"#).id, None);
        assert_eq!(partial_message(b"{\"result\":{", br#""id":-9}"#).id, None);
    }
}
