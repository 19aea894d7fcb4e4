//! The Streamable HTTP client side: one POST per message; a reply is a JSON body, an event
//! stream, or (for notifications and responses) an empty 202.
//!
//! Outcome rules (the gateway never guesses): a connection refused before any byte was sent is
//! [`Event::NotSent`]; a 4xx or 5xx, a body that is not JSON, or an event stream that ends
//! before the reply to its request is [`Event::Broken`] or [`Event::Malformed`], which the
//! session records as ambiguous.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

use super::renew::Renewal;
use super::{Event, Link, parse_event};
use crate::wire;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

struct HttpLink {
    client: reqwest::Client,
    url: String,
    /// How messages name the upstream, and what its certificate was checked against.
    peer: Arc<Peer>,
    events: mpsc::UnboundedSender<Event>,
    session: Arc<Mutex<Option<String>>>,
    version: Arc<Mutex<Option<String>>>,
    max_body: usize,
    renewal: Arc<Renewal>,
    /// The tasks reading replies (and the GET stream): aborted when the link is closed, so that
    /// a request the client no longer waits for (an `initialize` it gave up on) is dropped
    /// rather than left to open a session nobody will end.
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

/// The upstream as messages name it, and the trust its certificate is checked against.
pub(super) struct Peer {
    /// `scheme://host[:port]`: never the path or query, which may carry a token.
    origin: String,
    trust: countersign_http::Trust,
}

impl Peer {
    /// Why sending failed, in a sentence: a failed TLS handshake says what was wrong with the
    /// upstream's certificate and what to do; anything else is reqwest's description.
    pub(super) fn describe(&self, error: &reqwest::Error) -> String {
        let Some(failure) = countersign_http::tls_failure(error, &self.trust) else {
            return error.without_url_text();
        };
        let next = match &failure {
            countersign_http::TlsFailure::UnknownAuthority { .. } => format!(
                "give the gateway the authority that signed it with --upstream-ca FILE (its PEM certificate), or add it to the system's trust store (trusted now: {})",
                self.trust.describe()
            ),
            countersign_http::TlsFailure::WrongHost => {
                "use in --upstream-url the host name the certificate was issued for".to_owned()
            }
            countersign_http::TlsFailure::Expired => {
                "the upstream's operator must renew its certificate (or fix the clock)".to_owned()
            }
            countersign_http::TlsFailure::Other(_) => {
                "check that the upstream speaks TLS on this port".to_owned()
            }
        };
        format!(
            "the TLS handshake with the upstream `{}` failed, so nothing was sent: {failure}: {next}",
            self.origin
        )
    }
}

/// reqwest's description of an error without its URL (which may carry a token).
trait WithoutUrlText {
    fn without_url_text(&self) -> String;
}

impl WithoutUrlText for reqwest::Error {
    fn without_url_text(&self) -> String {
        let mut text = self.to_string();
        if let Some(url) = self.url() {
            text = text.replace(&format!(" for url ({url})"), "");
        }
        let mut source = std::error::Error::source(self);
        while let Some(inner) = source {
            text.push_str(": ");
            text.push_str(&inner.to_string());
            source = inner.source();
        }
        text
    }
}

/// Connect to the Streamable HTTP endpoint `url` with `client` (built by the one constructor
/// for `trust`). Opening a new session when one expires may take `renew_wait`.
pub(crate) fn connect(
    client: reqwest::Client,
    trust: countersign_http::Trust,
    url: &str,
    max_body: usize,
    renew_wait: std::time::Duration,
) -> (Arc<dyn Link>, mpsc::UnboundedReceiver<Event>) {
    let (events, receiver) = mpsc::unbounded_channel();
    let peer = Arc::new(Peer {
        origin: countersign_http::origin(url),
        trust,
    });
    let session = Arc::new(Mutex::new(None));
    let version = Arc::new(Mutex::new(None));
    let renewal = Arc::new(Renewal::new(
        client.clone(),
        url.to_owned(),
        Arc::clone(&session),
        Arc::clone(&version),
        Arc::clone(&peer),
        renew_wait,
    ));
    let link = HttpLink {
        client,
        url: url.to_owned(),
        peer,
        events,
        session,
        version,
        max_body,
        renewal,
        tasks: Mutex::new(Vec::new()),
    };
    (Arc::new(link), receiver)
}

pub(super) fn read_header(slot: &Mutex<Option<String>>) -> Option<String> {
    slot.lock().map(|value| value.clone()).unwrap_or(None)
}

pub(super) fn write_header(slot: &Mutex<Option<String>>, value: String) {
    if let Ok(mut slot) = slot.lock() {
        *slot = Some(value);
    }
}

#[async_trait::async_trait]
impl Link for HttpLink {
    async fn send(&self, message: &Value, related: Option<u64>) -> Result<(), String> {
        self.send_with_headers(message, related, Vec::new()).await
    }

    async fn send_with_headers(
        &self,
        message: &Value,
        related: Option<u64>,
        extra: Vec<(String, String)>,
    ) -> Result<(), String> {
        let initialize = wire::method(message) == Some("initialize");
        if initialize {
            self.renewal.remember(message);
        } else if crate::era::request_headers(message).is_empty() {
            // A handshake-era message never goes out without the session it needs.
            self.renewal.recover().await?;
        }
        let (request, sent_session) = self.renewal.post_with(message, &extra)?;
        let is_initialized = wire::method(message) == Some("notifications/initialized");
        let mut exchange = Exchange {
            peer: Arc::clone(&self.peer),
            events: self.events.clone(),
            session: Arc::clone(&self.session),
            version: Arc::clone(&self.version),
            related,
            max_body: self.max_body,
            sent_session: sent_session.clone(),
        };
        match related {
            // A request: its reply may take as long as the tool runs; read it in its own task.
            Some(_) => {
                let renewal = Arc::clone(&self.renewal);
                let message = message.clone();
                let task = tokio::spawn(async move {
                    let response = request.send().await;
                    // A 404 for a session id the upstream issued: the session expired and the
                    // request was not processed (the specification requires it). Renew the
                    // session once and send the request once on it.
                    let expired = matches!(&response, Ok(response) if response.status() == reqwest::StatusCode::NOT_FOUND);
                    if expired
                        && !initialize
                        && let Some(stale) = sent_session
                    {
                        match renewal.renew(&stale).await {
                            Ok(()) => match renewal.post_with(&message, &extra) {
                                Ok((retry, session)) => {
                                    exchange.sent_session = session;
                                    exchange.run(retry.send().await).await;
                                }
                                Err(detail) => exchange.not_sent(detail),
                            },
                            Err(detail) => exchange.not_sent(format!(
                                "the upstream session expired (HTTP 404, the request was not processed) and a new one could not be opened: {detail}"
                            )),
                        }
                        return;
                    }
                    exchange.run(response).await;
                });
                self.keep(task.abort_handle());
                Ok(())
            }
            // A notification or a response: wait for the acknowledgement, so that order holds.
            None => {
                let response = request.send().await;
                if let Err(error) = &response
                    && error.is_connect()
                {
                    return Err(format!(
                        "cannot connect to the upstream: {}",
                        self.peer.describe(error)
                    ));
                }
                exchange.run(response).await;
                if is_initialized {
                    self.open_listening_stream();
                }
                Ok(())
            }
        }
    }

    /// End the upstream's session with `DELETE` (the handshake revisions: a client that no
    /// longer needs a session SHOULD). An upstream without sessions, or one that refuses (405),
    /// is fine.
    async fn close(&self) {
        self.abort_tasks();
        let Some(session) = read_header(&self.session) else {
            return;
        };
        let mut request = self
            .client
            .delete(&self.url)
            .header(SESSION_HEADER, session);
        if let Some(version) = read_header(&self.version) {
            request = request.header(VERSION_HEADER, version);
        }
        let _ = tokio::time::timeout(CLOSE_WAIT, request.send()).await;
    }

    fn kill(&self) {
        self.abort_tasks();
    }
}

/// How long ending an HTTP upstream session may take.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl HttpLink {
    /// Abort what the link still waits for: its GET stream and requests in flight.
    fn abort_tasks(&self) {
        if let Ok(mut tasks) = self.tasks.lock() {
            for task in tasks.drain(..) {
                task.abort();
            }
        }
    }

    /// Keep `task` to abort on [`Link::close`] (forgetting those already finished).
    fn keep(&self, task: tokio::task::AbortHandle) {
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.retain(|task| !task.is_finished());
            tasks.push(task);
        }
    }

    /// The GET stream for messages the upstream sends on its own (list changes, requests).
    /// An upstream that offers none (405) is fine.
    fn open_listening_stream(&self) {
        let mut request = self
            .client
            .get(&self.url)
            .header("accept", "text/event-stream");
        if let Some(session) = read_header(&self.session) {
            request = request.header(SESSION_HEADER, session);
        }
        if let Some(version) = read_header(&self.version) {
            request = request.header(VERSION_HEADER, version);
        }
        let exchange = Exchange {
            peer: Arc::clone(&self.peer),
            events: self.events.clone(),
            session: Arc::clone(&self.session),
            version: Arc::clone(&self.version),
            related: None,
            max_body: self.max_body,
            sent_session: None,
        };
        let task = tokio::spawn(async move {
            if let Ok(response) = request.send().await
                && response.status().is_success()
            {
                exchange.run(Ok(response)).await;
            }
        });
        self.keep(task.abort_handle());
    }
}

/// One POST's reply, read to its end.
struct Exchange {
    peer: Arc<Peer>,
    events: mpsc::UnboundedSender<Event>,
    session: Arc<Mutex<Option<String>>>,
    version: Arc<Mutex<Option<String>>>,
    related: Option<u64>,
    max_body: usize,
    /// The session id the request carried, if any.
    sent_session: Option<String>,
}

impl Exchange {
    fn not_sent(&self, detail: String) {
        if let Some(related) = self.related {
            let _ = self.events.send(Event::NotSent { related, detail });
        }
    }

    fn broken(&self, detail: String) {
        if let Some(related) = self.related {
            let _ = self.events.send(Event::Broken { related, detail });
        }
    }

    fn deliver(&self, raw: String) -> bool {
        let event = parse_event(raw, self.related);
        let answers = match &event {
            Event::Message { message, .. } => {
                if let Some(version) = message
                    .pointer("/result/protocolVersion")
                    .and_then(Value::as_str)
                {
                    write_header(&self.version, version.to_owned());
                }
                self.related.is_some_and(|related| {
                    wire::kind(message) == wire::Kind::Response
                        && message.get("id").and_then(Value::as_u64) == Some(related)
                        && message.get("id").is_some_and(Value::is_u64)
                })
            }
            _ => false,
        };
        let _ = self.events.send(event);
        answers
    }

    async fn run(self, response: Result<reqwest::Response, reqwest::Error>) {
        let response = match response {
            Ok(response) => response,
            Err(error) if error.is_connect() => {
                if let Some(related) = self.related {
                    let _ = self.events.send(Event::NotSent {
                        related,
                        detail: format!(
                            "cannot connect to the upstream: {}",
                            self.peer.describe(&error)
                        ),
                    });
                }
                return;
            }
            Err(error) => {
                self.broken(format!("the HTTP exchange failed after sending: {error}"));
                return;
            }
        };
        if let Some(session) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|value| value.to_str().ok())
        {
            write_header(&self.session, session.to_owned());
        }
        let status = response.status();
        let event_stream = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if status == reqwest::StatusCode::NOT_FOUND && self.sent_session.is_some() {
            // The upstream no longer knows the session: it refused without processing.
            self.not_sent(
                "the upstream answered HTTP 404 for its own session id: the session ended and the request was not processed"
                    .to_owned(),
            );
            return;
        }
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            self.broken(format!(
                "the upstream answered HTTP {status}: {}",
                wire::truncated(&body, 4096)
            ));
            return;
        }
        if event_stream {
            self.read_events(response).await;
            return;
        }
        let body = match response.bytes().await {
            Ok(body) => body,
            Err(error) => {
                self.broken(format!("the reply body was cut: {error}"));
                return;
            }
        };
        if body.is_empty() {
            // 202 Accepted for a notification or a response: nothing to deliver. For a
            // request it is not a reply.
            self.broken(format!("the upstream answered HTTP {status} with no reply"));
            return;
        }
        let text = String::from_utf8_lossy(&body[..body.len().min(self.max_body)]).into_owned();
        self.deliver(text);
    }

    async fn read_events(self, response: reqwest::Response) {
        let mut stream = response.bytes_stream();
        let mut buffer: Vec<u8> = Vec::new();
        let mut answered = false;
        let mut cut = None;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(chunk) => buffer.extend_from_slice(&chunk),
                Err(error) => {
                    cut = Some(format!("the event stream was cut: {error}"));
                    break;
                }
            }
            while let Some((event, rest)) = split_event(&buffer) {
                if let Some(data) = event_data(&event)
                    && self.deliver(data)
                {
                    answered = true;
                }
                buffer = rest;
            }
            if buffer.len() > self.max_body {
                cut = Some("an event was larger than the message size cap".to_owned());
                break;
            }
        }
        if !answered {
            self.broken(cut.unwrap_or_else(|| {
                "the event stream ended before the reply to this request".to_owned()
            }));
        }
    }
}

/// Split one complete event (ended by a blank line) off the front of `buffer`.
fn split_event(buffer: &[u8]) -> Option<(String, Vec<u8>)> {
    let text = std::str::from_utf8(buffer)
        .ok()
        .map(str::to_owned)
        .or_else(|| {
            // Keep going on bytes that are not UTF-8: the event will be malformed, not lost.
            Some(String::from_utf8_lossy(buffer).into_owned())
        })?;
    let normalized = text.replace("\r\n", "\n");
    let end = normalized.find("\n\n")?;
    let event = normalized[..end].to_owned();
    let rest = normalized.as_bytes()[end + 2..].to_vec();
    Some((event, rest))
}

/// The `data` of one event (its `data:` lines joined), or `None` for a comment-only event.
fn event_data(event: &str) -> Option<String> {
    let lines: Vec<&str> = event
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| data.strip_prefix(' ').unwrap_or(data))
        .collect();
    if lines.is_empty() {
        return None;
    }
    let data = lines.join("\n");
    (!data.trim().is_empty()).then_some(data)
}
