//! Building the POSTs of a Streamable HTTP upstream, and renewing its session when it expires.
//!
//! The handshake revisions (2025-03-26 to 2025-11-25, "Session Management") require a server
//! to answer HTTP 404 to a request carrying a session id it no longer knows, without processing
//! it, and the client to start a new session with a fresh `initialize`. So a 404 for the
//! session id the upstream issued proves the call was not executed: the gateway opens a new
//! session with the `initialize` it sent before (same parameters), sends
//! `notifications/initialized`, and sends the refused request once on the new session. Its
//! outcome is then whatever that one attempt gives; a second 404 is `not_executed`. A timeout or
//! a cut stream proves nothing and is never re-sent.
//!
//! If the new session cannot be opened (the upstream answers `503 too many sessions`), the
//! session is lost: no request is then sent without one (the upstream would refuse it with 400,
//! which proves nothing and would be recorded `ambiguous`). Each later request first tries to
//! open a session again, and is not sent (`not_executed`) if that fails too. A request made
//! while a renewal runs waits for it rather than going out without a session. Opening a session
//! may take half of `--call-timeout`, so that a call waiting on it is answered `not_executed`
//! before its own reply times out.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::http::{Peer, read_header, write_header};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

pub(super) struct Renewal {
    client: reqwest::Client,
    url: String,
    session: Arc<Mutex<Option<String>>>,
    version: Arc<Mutex<Option<String>>>,
    peer: Arc<Peer>,
    /// The last `initialize` sent, replayed to open a new session.
    handshake: Mutex<Option<Value>>,
    /// One renewal at a time: requests refused together renew once.
    renewing: tokio::sync::Mutex<()>,
    /// Why the last renewal failed (or that one is running), while no session replaces the one
    /// that expired.
    lost: Mutex<Option<String>>,
    /// How long opening a session may take.
    wait: std::time::Duration,
}

impl Renewal {
    pub(super) fn new(
        client: reqwest::Client,
        url: String,
        session: Arc<Mutex<Option<String>>>,
        version: Arc<Mutex<Option<String>>>,
        peer: Arc<Peer>,
        wait: std::time::Duration,
    ) -> Renewal {
        Renewal {
            client,
            url,
            session,
            version,
            peer,
            handshake: Mutex::new(None),
            renewing: tokio::sync::Mutex::new(()),
            lost: Mutex::new(None),
            wait,
        }
    }

    /// The client's own `initialize` is about to be sent: it opens the next session, so an
    /// earlier lost one is no longer this link's to recover.
    pub(super) fn remember(&self, initialize: &Value) {
        if let Ok(mut slot) = self.handshake.lock() {
            *slot = Some(initialize.clone());
        }
        self.set_lost(None);
    }

    fn set_lost(&self, why: Option<String>) {
        if let Ok(mut lost) = self.lost.lock() {
            *lost = why;
        }
    }

    fn lost(&self) -> Option<String> {
        self.lost.lock().ok().and_then(|lost| lost.clone())
    }

    /// Before sending a handshake-era request: if the session was lost (a renewal failed), open
    /// a new one first.
    ///
    /// # Errors
    ///
    /// The upstream still cannot open a session: the request must not be sent, and the message
    /// says why and that nothing was sent.
    pub(super) async fn recover(&self) -> Result<(), String> {
        if self.lost().is_none() {
            return Ok(());
        }
        let _one_at_a_time = self.renewing.lock().await;
        if self.lost().is_none() {
            return Ok(());
        }
        match self.open_within().await {
            Ok(()) => {
                self.set_lost(None);
                Ok(())
            }
            Err(detail) => {
                self.set_lost(Some(detail.clone()));
                Err(format!(
                    "the upstream session ended and a new one still cannot be opened ({detail}), so nothing was sent: send the request again once the upstream takes sessions"
                ))
            }
        }
    }

    /// The POST of `message` (only the gateway's own headers: nothing the client sent), and the
    /// session id it carries.
    pub(super) fn post(
        &self,
        message: &Value,
    ) -> Result<(reqwest::RequestBuilder, Option<String>), String> {
        self.post_with(message, &[])
    }

    /// [`Renewal::post`] with `extra` headers (the call's `Mcp-Param-*`).
    pub(super) fn post_with(
        &self,
        message: &Value,
        extra: &[(String, String)],
    ) -> Result<(reqwest::RequestBuilder, Option<String>), String> {
        let body = serde_json::to_vec(message).map_err(|error| error.to_string())?;
        let mut request = self
            .client
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body);
        let headers = crate::era::request_headers(message);
        let mut sent_session = None;
        if headers.is_empty() {
            if let Some(session) = read_header(&self.session) {
                request = request.header(SESSION_HEADER, session.clone());
                sent_session = Some(session);
            }
            if let Some(version) = read_header(&self.version) {
                request = request.header(VERSION_HEADER, version);
            }
        } else {
            // 2026-07-28: no sessions; the version, method and name mirror the body.
            for (name, value) in headers {
                request = request.header(name, value);
            }
            for (name, value) in extra {
                request = request.header(name.as_str(), value.as_str());
            }
        }
        Ok((request, sent_session))
    }

    /// Open a new session in place of `stale` (unless another request already did).
    pub(super) async fn renew(&self, stale: &str) -> Result<(), String> {
        let _one_at_a_time = self.renewing.lock().await;
        match read_header(&self.session) {
            // Another request renewed it meanwhile.
            Some(current) if current != stale => return Ok(()),
            // Another request's renewal failed: nothing goes out without a session.
            None => {
                if let Some(why) = self.lost() {
                    return Err(why);
                }
            }
            _ => {}
        }
        if let Ok(mut session) = self.session.lock() {
            *session = None;
        }
        // Until the new session is open, no request goes out without one.
        self.set_lost(Some("a new session was being opened".to_owned()));
        let opened = self.open_within().await;
        self.set_lost(opened.as_ref().err().cloned());
        opened
    }

    /// [`Renewal::open`], given up after [`Renewal::wait`](Renewal).
    async fn open_within(&self) -> Result<(), String> {
        tokio::time::timeout(self.wait, self.open())
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "`initialize` got no reply within {:.1}s",
                    self.wait.as_secs_f64()
                ))
            })
    }

    /// Open a new session with the `initialize` sent last, then `notifications/initialized`.
    async fn open(&self) -> Result<(), String> {
        let initialize = self
            .handshake
            .lock()
            .ok()
            .and_then(|slot| slot.clone())
            .ok_or_else(|| "no `initialize` was sent to repeat".to_owned())?;
        let (request, _) = self.post(&initialize)?;
        let response = request
            .send()
            .await
            .map_err(|error| format!("`initialize` failed: {}", self.peer.describe(&error)))?;
        if !response.status().is_success() {
            return Err(format!("`initialize` got HTTP {}", response.status()));
        }
        let session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let body = response
            .text()
            .await
            .map_err(|error| format!("the `initialize` reply was cut: {error}"))?;
        let reply = body
            .lines()
            .map(|line| line.strip_prefix("data:").unwrap_or(line).trim())
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|message| message.get("result").is_some() || message.get("error").is_some())
            .ok_or_else(|| "the `initialize` reply holds no result".to_owned())?;
        let Some(version) = reply
            .pointer("/result/protocolVersion")
            .and_then(Value::as_str)
        else {
            return Err(format!(
                "`initialize` was refused: {}",
                crate::wire::truncated(&reply.to_string(), 1024)
            ));
        };
        write_header(&self.version, version.to_owned());
        if let Some(session) = session {
            write_header(&self.session, session);
        }
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (request, _) = self.post(&initialized)?;
        request
            .send()
            .await
            .map_err(|error| format!("`notifications/initialized` failed: {error}"))?;
        Ok(())
    }
}
