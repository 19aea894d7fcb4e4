//! The upstream side: the MCP server the gateway fronts, as a child process over stdio, any
//! byte stream, or Streamable HTTP.
//!
//! Every upstream delivers [`Event`]s. A reply is kept as the raw text it arrived as, so that
//! whatever the gateway cannot trust (a malformed line, a reply whose id matches no request)
//! is kept as evidence rather than parsed away.

use serde_json::Value;

mod http;
mod io;
mod renew;

pub(crate) use http::connect as connect_http;
pub(crate) use io::{connect_io, spawn_command};

/// What the upstream side delivers to a session.
#[derive(Debug)]
pub(crate) enum Event {
    /// A JSON-RPC message (object), with the raw text it came as. `related`: the gateway's
    /// upstream request id whose HTTP response carried it, when the transport knows.
    Message {
        message: Value,
        raw: String,
        related: Option<u64>,
    },
    /// Text that is not one JSON-RPC message object (bad JSON, a batch, a bare value).
    Malformed { raw: String, related: Option<u64> },
    /// A line longer than the gateway's cap for one message: `bytes` long in all, of which
    /// `raw` is the start that was kept and `tail` the last bytes
    /// ([`crate::lines::TAIL_BYTES`] at most). It is not read; what its ends say of it
    /// ([`crate::wire::partial_message`]: a request or notification, or a reply, and to which
    /// request) decides what it ends.
    Oversized {
        bytes: usize,
        raw: String,
        tail: String,
    },
    /// A response to the gateway's request `upstream_id` whose `result` nests too deep for the
    /// gateway to read (past `serde_json`'s limit of 128 levels), though its envelope reads:
    /// the call ran; its result cannot be represented (case B50 (c)). `result_bytes` and
    /// `result_digest` (`sha256:` + hex of the result's bytes as sent) identify it.
    Unrepresentable {
        upstream_id: u64,
        result_bytes: usize,
        result_digest: String,
        problem: String,
        raw: String,
        related: Option<u64>,
    },
    /// The request `related` was definitely never delivered.
    NotSent { related: u64, detail: String },
    /// The reply to `related` ended without a JSON-RPC response (a cut stream, a 5xx).
    Broken { related: u64, detail: String },
    /// The upstream connection is gone.
    Closed { detail: String },
}

/// The sending half of an upstream connection.
#[async_trait::async_trait]
pub(crate) trait Link: Send + Sync {
    /// Send one message; `related` is the gateway's request id when `message` is a request.
    /// `Err` means the message was definitely not delivered.
    async fn send(&self, message: &Value, related: Option<u64>) -> Result<(), String>;

    /// [`Link::send`] with `headers` added to the HTTP request (2026-07-28 `Mcp-Param-*`
    /// headers mirroring a call's arguments); transports without headers ignore them.
    async fn send_with_headers(
        &self,
        message: &Value,
        related: Option<u64>,
        headers: Vec<(String, String)>,
    ) -> Result<(), String> {
        let _ = headers;
        self.send(message, related).await
    }

    /// End the connection as an MCP client should when it is done (MCP 2025-06-18,
    /// "Lifecycle", "Shutdown"): a child process's input is closed and it is given time to exit
    /// before it is signalled; an HTTP session is ended with `DELETE`. Bounded: a few seconds at
    /// most. Nothing can be sent afterwards.
    async fn close(&self) {}

    /// End the connection at once, without [`Link::close`]'s grace (a forced stop, which may
    /// interrupt a `close` under way): a child's process group is killed; an HTTP session's
    /// background requests are aborted, and it is not `DELETE`d.
    fn kill(&self) {}
}

/// Classify one line or body of upstream text.
pub(crate) fn parse_event(raw: String, related: Option<u64>) -> Event {
    match serde_json::from_str::<Value>(&raw) {
        Ok(message) if message.is_object() => Event::Message {
            message,
            raw,
            related,
        },
        Ok(_) => Event::Malformed { raw, related },
        Err(error) if error.to_string().contains("recursion limit") => match deep_result(&raw) {
            Some((upstream_id, result)) => Event::Unrepresentable {
                upstream_id,
                result_bytes: result.len(),
                result_digest: countersign::canonical::sha256_prefixed(&raw.as_bytes()[result]),
                problem: format!("it nests deeper than the gateway reads ({error})"),
                raw,
                related,
            },
            None => Event::Malformed { raw, related },
        },
        Err(_) => Event::Malformed { raw, related },
    }
}

/// The request id and the byte range of the `result` of a response too deep to parse: its top
/// level must read flat as `jsonrpc: "2.0"`, an integer `id` and a `result`, with no `error`.
fn deep_result(raw: &str) -> Option<(u64, std::ops::Range<usize>)> {
    let members = crate::wire::top_level_members(raw.as_bytes())?;
    let member = |name: &str| {
        members
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, range)| range.clone())
    };
    let text = |range: std::ops::Range<usize>| countersign::json::read(&raw[range]).ok();
    if members.iter().any(|(key, _)| key == "error") || text(member("jsonrpc")?)? != "2.0" {
        return None;
    }
    let id = text(member("id")?)?.as_u64()?;
    Some((id, member("result")?))
}
