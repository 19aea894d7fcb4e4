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
    scan_request_id(bytes).unwrap_or(Value::Null)
}

fn scan_request_id(bytes: &[u8]) -> Option<Value> {
    let mut scan = Scan { bytes, at: 0 };
    scan.whitespace();
    scan.expect(b'{')?;
    let mut found = None;
    loop {
        scan.whitespace();
        if scan.peek()? == b'}' {
            return found;
        }
        let key_start = scan.at;
        scan.skip_string()?;
        let key = countersign::json::read_slice(&bytes[key_start..scan.at]).ok()?;
        scan.whitespace();
        scan.expect(b':')?;
        scan.whitespace();
        let value_start = scan.at;
        scan.skip_value()?;
        if key == "id" {
            if found.is_some() {
                // Twice: which one the client meant cannot be told.
                return None;
            }
            let value = countersign::json::read_slice(&bytes[value_start..scan.at]).ok()?;
            if !(value.is_string() || value.is_number() || value.is_null()) {
                return None;
            }
            found = Some(value);
        }
        scan.whitespace();
        match scan.peek()? {
            b',' => scan.at += 1,
            b'}' => return found,
            _ => return found,
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
