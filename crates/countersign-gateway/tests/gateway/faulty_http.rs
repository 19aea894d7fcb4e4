//! A fault-injecting Streamable HTTP upstream: it counts every request it receives and keeps
//! its headers. [`Mode::CutCalls`]: it speaks MCP 2026-07-28 and cuts the event stream of every
//! `tools/call` after one progress event, after the call reached it. [`Mode::Sessions`]: it
//! speaks 2025-06-18 with sessions, runs every call, and after [`Faulty::expire`] answers HTTP
//! 404 (without processing) to a request carrying the session id it issued before; while
//! [`Faulty::refuse_sessions`] is set, it refuses every request without a session with HTTP 503,
//! as a server at its session limit does.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};

/// What one request brought.
#[derive(Clone, Debug)]
pub struct Received {
    /// The HTTP method (`POST`, `DELETE`, …).
    pub http_method: String,
    /// The JSON-RPC method of the body, or empty.
    pub method: String,
    pub body: Value,
    /// Every header, lowercase name and value.
    pub headers: Vec<(String, String)>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// How the upstream behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    CutCalls,
    Sessions,
}

pub struct Faulty {
    pub mode: Mode,
    pub received: Mutex<Vec<Received>>,
    /// The session id issued last, and whether it has expired.
    session: Mutex<(u32, bool)>,
    /// `tools/call`s actually run (not refused with 404).
    pub executed: Mutex<Vec<Value>>,
    /// [`Mode::Sessions`]: refuse to open a session (HTTP 503), as a server at its limit does.
    pub refuse_sessions: AtomicBool,
    /// [`Mode::Sessions`]: how long `initialize` takes to be answered, in milliseconds (a slow
    /// server start).
    pub initialize_delay_ms: AtomicU64,
}

impl Faulty {
    /// The current session expires: a request carrying it gets 404, unprocessed.
    pub fn expire(&self) {
        self.session.lock().expect("session").1 = true;
    }

    /// How many `tools/call` of `tool` arrived.
    pub fn calls_of(&self, tool: &str) -> usize {
        self.received
            .lock()
            .expect("received")
            .iter()
            .filter(|request| {
                request.method == "tools/call" && request.body["params"]["name"] == tool
            })
            .count()
    }
}

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

fn json_body(value: &Value) -> hyper::Response<Body> {
    let mut response = hyper::Response::new(
        Full::new(Bytes::from(value.to_string()))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

async fn handle(
    faulty: Arc<Faulty>,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Body>, Infallible> {
    let http_method = request.method().as_str().to_owned();
    let headers = request
        .headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                value.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let sent_session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let bytes = request
        .into_body()
        .collect()
        .await
        .map(|body| body.to_bytes())
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let method = body["method"].as_str().unwrap_or_default().to_owned();
    faulty.received.lock().expect("received").push(Received {
        http_method,
        method: method.clone(),
        body: body.clone(),
        headers,
    });
    let id = body["id"].clone();
    let delay = faulty.initialize_delay_ms.load(Ordering::SeqCst);
    if faulty.mode == Mode::Sessions && method == "initialize" && delay > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
    }
    if faulty.mode == Mode::Sessions {
        return Ok(sessions(
            &faulty,
            &method,
            id,
            &body,
            sent_session.as_deref(),
        ));
    }
    let reply = match method.as_str() {
        "server/discover" => json!({"jsonrpc": "2.0", "id": id, "result": {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "faulty", "version": "0"}}}),
        "tools/call" => {
            // The call arrived: one progress event, then the connection is cut mid-stream.
            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "p", "progress": 1}});
            let events: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![
                Ok(Frame::data(Bytes::from(format!(
                    "event: message\ndata: {progress}\n\n"
                )))),
                Err(std::io::Error::other("cut")),
            ];
            let mut response = hyper::Response::new(BodyExt::boxed_unsync(StreamBody::new(
                futures::stream::iter(events),
            )));
            response.headers_mut().insert(
                "content-type",
                hyper::header::HeaderValue::from_static("text/event-stream"),
            );
            return Ok(response);
        }
        "tools/list" => json!({"jsonrpc": "2.0", "id": id, "result": {
            "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
            "tools": [{"name": "locate", "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"}}}}]}}),
        _ => json!({"jsonrpc": "2.0", "id": id, "result": {"resultType": "complete"}}),
    };
    Ok(json_body(&reply))
}

/// [`Mode::Sessions`]: one request.
fn sessions(
    faulty: &Faulty,
    method: &str,
    id: Value,
    body: &Value,
    sent: Option<&str>,
) -> hyper::Response<Body> {
    let mut session = faulty.session.lock().expect("session");
    if sent.is_none() && faulty.refuse_sessions.load(Ordering::SeqCst) {
        let mut response = json_body(&json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32000, "message": "too many sessions"}}));
        *response.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
        return response;
    }
    if method == "initialize" {
        session.0 += 1;
        session.1 = false;
        let mut response = json_body(&json!({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "faulty", "version": "0"}}}));
        let issued = format!("session-{}", session.0);
        response.headers_mut().insert(
            "mcp-session-id",
            hyper::header::HeaderValue::from_str(&issued).expect("header"),
        );
        return response;
    }
    let current = format!("session-{}", session.0);
    let known = sent == Some(current.as_str()) && !session.1;
    if !known {
        let mut response = json_body(&json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32001, "message": "Session not found"}}));
        *response.status_mut() = hyper::StatusCode::NOT_FOUND;
        return response;
    }
    if id.is_null() {
        let mut response = hyper::Response::new(
            Full::new(Bytes::new())
                .map_err(|never| match never {})
                .boxed_unsync(),
        );
        *response.status_mut() = hyper::StatusCode::ACCEPTED;
        return response;
    }
    let result = match method {
        "tools/call" => {
            faulty
                .executed
                .lock()
                .expect("executed")
                .push(body["params"].clone());
            json!({"content": [{"type": "text", "text": "done"}]})
        }
        "tools/list" => json!({"tools": [
            {"name": "create_invoice", "inputSchema": {"type": "object"}}]}),
        _ => json!({}),
    };
    json_body(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// Start the upstream on a free loopback port: its `/mcp` URL and its record.
pub async fn start() -> (String, Arc<Faulty>, tokio::task::JoinHandle<()>) {
    start_in(Mode::CutCalls).await
}

/// As [`start`], in `mode`.
pub async fn start_in(mode: Mode) -> (String, Arc<Faulty>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let faulty = Arc::new(Faulty {
        mode,
        received: Mutex::new(Vec::new()),
        session: Mutex::new((0, false)),
        executed: Mutex::new(Vec::new()),
        refuse_sessions: AtomicBool::new(false),
        initialize_delay_ms: AtomicU64::new(0),
    });
    let state = Arc::clone(&faulty);
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request| handle(Arc::clone(&state), request));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{address}/mcp"), faulty, task)
}
