//! The Streamable HTTP front: many MCP sessions on one endpoint, `/mcp`.
//!
//! Transport rules (MCP 2025-06-18, "Streamable HTTP"): a client POSTs one JSON-RPC message
//! per request. A notification or a response gets 202 with no body. A request gets either one
//! JSON body or, when the gateway has something to send before the reply (an elicitation
//! question, progress, a request from the upstream), an event stream that ends with the reply.
//! `initialize` opens a session and its reply carries `Mcp-Session-Id`, which every later
//! request must send back (missing: 400; unknown or ended: 404). GET opens the session's
//! stream for messages unrelated to any request; DELETE ends the session. A later request that
//! sends `MCP-Protocol-Version` must name the version its session negotiated at `initialize`
//! (otherwise 400, MCP 2025-06-18 "Protocol Version Header"); one that sends none is served as
//! the session negotiated (the specification's fallback for clients older than the header).
//!
//! MCP 2026-07-28 on the same endpoint (see [`crate::era`]): a POST whose body declares its
//! version in `_meta` (or, without a session, whose `MCP-Protocol-Version` is not a handshake
//! revision) needs no session; its headers must match its body (400 with -32020 otherwise,
//! -32022 for a version the gateway does not speak), and it is served by the principal's one
//! modern session under an id of the gateway's. GET and DELETE with a 2026-07-28 version get
//! 405; `Last-Event-ID` on a GET gets 400 (nothing is kept to replay).
//!
//! Checks run before anything reaches a session, in this order: the path, `Host` (a loopback
//! listener answers only to loopback names: DNS rebinding), `Origin` (the allow-list: 403),
//! the principal (configured, or an authenticated header: 401), `Accept` (406),
//! `Content-Type` (415), the body cap (413), and the body itself (not JSON: 400 with -32700;
//! a batch: 400 with -32600). The rationale for each default is in `docs/gateway.md`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use countersign::Principal;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

use crate::session::Session;
use crate::wire::{self, Kind};
use crate::{GatewayError, GatewayShared, HttpFrontConfig, PrincipalSource, Upstream, codes, era};

mod responses;
mod sessions;

use responses::{empty, event_stream, event_stream_mapped, json_response, refuse, refuse_with};
use sessions::Opening;

use crate::HTTP_PATH as ENDPOINT;
const SESSION_HEADER: &str = "mcp-session-id";
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";

type Body = UnsyncBoxBody<Bytes, Infallible>;
/// A refusal ready to send (boxed: a response is large).
type Refused = Box<Response<Body>>;
type UpstreamFactory = Arc<dyn Fn() -> Result<Upstream, GatewayError> + Send + Sync>;

/// Where a session's messages for the client go.
#[derive(Default)]
struct Routes {
    /// The client's request id (as JSON text) to the POST waiting for its reply.
    posts: HashMap<String, mpsc::UnboundedSender<Value>>,
    /// The GET stream, if the client opened one.
    listening: Option<mpsc::UnboundedSender<Value>>,
}

struct HttpSession {
    session: Session,
    principal: Principal,
    routes: Arc<Mutex<Routes>>,
    ended: Arc<Notify>,
    /// The `protocolVersion` of the `initialize` reply, once seen.
    protocol_version: Mutex<Option<String>>,
}

struct Front {
    shared: Arc<GatewayShared>,
    config: HttpFrontConfig,
    loopback: bool,
    upstream: UpstreamFactory,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
    /// 2026-07-28 has no sessions: one gateway session (one upstream connection) per
    /// principal serves every modern request, each under an id of the gateway's.
    modern: Mutex<HashMap<String, Arc<HttpSession>>>,
    next_id: std::sync::atomic::AtomicU64,
}

pub(crate) async fn serve(
    shared: Arc<GatewayShared>,
    listener: tokio::net::TcpListener,
    config: HttpFrontConfig,
    upstream: UpstreamFactory,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), GatewayError> {
    let address = listener.local_addr().map_err(GatewayError::Listen)?;
    let loopback = address.ip().is_loopback();
    if !loopback && !config.public {
        return Err(GatewayError::PublicListen(address));
    }
    if config.public && !matches!(shared.config.principal, PrincipalSource::Header(_)) {
        return Err(GatewayError::PublicWithoutAuthentication);
    }
    let front = Arc::new(Front {
        shared,
        config,
        loopback,
        upstream,
        sessions: Mutex::new(HashMap::new()),
        modern: Mutex::new(HashMap::new()),
        next_id: std::sync::atomic::AtomicU64::new(1),
    });
    tokio::pin!(shutdown);
    // Every connection's task, so that stopping ends the ones a client keeps open.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => accepted.map_err(GatewayError::Listen)?,
            Some(_) = connections.join_next() => continue,
            () = &mut shutdown => {
                // Calls first (cancelled and recorded), then the clients' connections (a request
                // still waiting, such as an `initialize`, is dropped: no session is handed out
                // by a gateway that is stopping), then the upstreams.
                let (sessions, stopped) = front.stop_calls().await;
                connections.shutdown().await;
                Front::close_upstreams(&sessions).await;
                return stopped.map_err(GatewayError::Unrecorded);
            }
        };
        let front = Arc::clone(&front);
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let front = Arc::clone(&front);
                async move { Ok::<_, Infallible>(front.handle(request).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

impl Front {
    /// Stop every session's calls: running tool calls are cancelled and recorded
    /// ([`Session::stop`]). The sessions, and the records the store refused, summed over them.
    async fn stop_calls(
        &self,
    ) -> (
        Vec<Arc<HttpSession>>,
        Result<(), countersign::UnrecordedAttempts>,
    ) {
        let mut sessions: Vec<Arc<HttpSession>> = lock(&self.sessions).values().cloned().collect();
        sessions.extend(lock(&self.modern).values().cloned());
        let mut unrecorded: Option<countersign::UnrecordedAttempts> = None;
        for session in &sessions {
            if let Err(refused) = session.session.stop().await {
                match &mut unrecorded {
                    Some(sum) => {
                        sum.count += refused.count;
                        sum.error = refused.error;
                    }
                    None => unrecorded = Some(refused),
                }
            }
        }
        (sessions, unrecorded.map_or(Ok(()), Err))
    }

    /// End every session's upstream, all at once: each close takes a few seconds at most.
    async fn close_upstreams(sessions: &[Arc<HttpSession>]) {
        futures::future::join_all(
            sessions
                .iter()
                .map(|session| session.session.close_upstream()),
        )
        .await;
    }
}

/// Lock a mutex whose data stays sound across a panic (every update is one insert or remove).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// The host part of a `Host` header: `[::1]:8080` → `[::1]`, `localhost:80` → `localhost`.
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    host.split(':').next().unwrap_or(host)
}

fn accepts(headers: &HeaderMap, media_type: &str) -> bool {
    headers
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|item| item.split(';').next().unwrap_or_default().trim())
        .any(|item| item.eq_ignore_ascii_case(media_type) || item == "*/*")
}

fn is_final_reply(message: &Value, related: &str) -> bool {
    wire::kind(message) == Kind::Response
        && message
            .get("id")
            .is_some_and(|id| *id.to_string() == *related)
}

impl Front {
    fn log(&self, line: std::fmt::Arguments<'_>) {
        if self.shared.config.log {
            countersign::stderr_line!(
                "countersign-gateway[{}] http: {line}",
                self.shared.config.alias
            );
        }
    }

    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Response<Body> {
        if request.uri().path() != ENDPOINT {
            return refuse(
                StatusCode::NOT_FOUND,
                codes::INVALID_REQUEST,
                "not found: the MCP endpoint is `/mcp`",
            );
        }
        if let Some(refusal) = self.check_host_and_origin(request.headers()) {
            return refusal;
        }
        let principal = match self.principal(request.headers()) {
            Ok(principal) => principal,
            Err(refusal) => return *refusal,
        };
        let modern_header = header(request.headers(), PROTOCOL_VERSION_HEADER)
            .is_some_and(era::is_modern_shaped)
            && header(request.headers(), SESSION_HEADER).is_none();
        match *request.method() {
            Method::POST => self.post(request, principal).await,
            // 2026-07-28 has no GET stream and no sessions to delete.
            Method::GET | Method::DELETE if modern_header => {
                let mut response = refuse(
                    StatusCode::METHOD_NOT_ALLOWED,
                    codes::INVALID_REQUEST,
                    "method not allowed: MCP 2026-07-28 has no GET stream and no sessions: POST `subscriptions/listen` for change notifications",
                );
                response
                    .headers_mut()
                    .insert(hyper::header::ALLOW, HeaderValue::from_static("POST"));
                response
            }
            Method::GET => self.get(request.headers(), &principal),
            Method::DELETE => self.delete(request.headers(), &principal),
            _ => {
                let mut response = refuse(
                    StatusCode::METHOD_NOT_ALLOWED,
                    codes::INVALID_REQUEST,
                    "method not allowed: use POST, GET or DELETE on `/mcp`",
                );
                response.headers_mut().insert(
                    hyper::header::ALLOW,
                    HeaderValue::from_static("GET, POST, DELETE"),
                );
                response
            }
        }
    }

    fn check_host_and_origin(&self, headers: &HeaderMap) -> Option<Response<Body>> {
        if self.loopback {
            // DNS rebinding: a page on `evil.example` resolved to 127.0.0.1 sends its own Host.
            let host = header(headers, "host").map(host_name).unwrap_or_default();
            let loopback_name = matches!(host, "localhost" | "127.0.0.1" | "[::1]")
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            if !loopback_name {
                return Some(refuse(
                    StatusCode::FORBIDDEN,
                    codes::INVALID_REQUEST,
                    "forbidden: a loopback gateway answers only to `localhost`, `127.0.0.1` or `[::1]` in the Host header",
                ));
            }
        }
        if let Some(origin) = headers.get(hyper::header::ORIGIN) {
            let allowed = origin.to_str().is_ok_and(|origin| {
                self.config
                    .allowed_origins
                    .iter()
                    .any(|allowed| allowed.eq_ignore_ascii_case(origin))
            });
            if !allowed {
                self.log(format_args!("refused a request from a disallowed Origin"));
                return Some(refuse(
                    StatusCode::FORBIDDEN,
                    codes::INVALID_REQUEST,
                    "forbidden: this Origin is not allowed: the operator can add it with --allow-origin",
                ));
            }
        }
        None
    }

    /// The principal of this request: the configured one, or the authenticated header's.
    fn principal(&self, headers: &HeaderMap) -> Result<Principal, Refused> {
        let unauthorized = |message: &str| {
            let mut response = refuse(StatusCode::UNAUTHORIZED, codes::REFUSED, message);
            response.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer"),
            );
            response
        };
        match &self.shared.config.principal {
            PrincipalSource::Fixed(principal) => Ok(principal.clone()),
            PrincipalSource::Missing => Err(Box::new(unauthorized(
                "no principal: the gateway has none configured: no principal, no call",
            ))),
            PrincipalSource::Header(trusted) => {
                let presented = header(headers, "authorization")
                    .and_then(|value| value.strip_prefix("Bearer "))
                    .map(str::trim);
                if !presented.is_some_and(|secret| trusted.secret_matches(secret.as_bytes())) {
                    return Err(Box::new(unauthorized(
                        "unauthorized: the request lacks the gateway's shared secret as `Authorization: Bearer …`: send it through the authenticating proxy",
                    )));
                }
                let Some(name) = header(headers, trusted.header()) else {
                    return Err(Box::new(unauthorized(&format!(
                        "no principal: the request has no `{}` header: no principal, no call",
                        trusted.header()
                    ))));
                };
                Principal::new(name).map_err(|error| {
                    Box::new(unauthorized(&format!(
                        "no principal: the `{}` header is not a principal: {error}",
                        trusted.header()
                    )))
                })
            }
        }
    }

    /// The session named by the request's `Mcp-Session-Id`, checked against `principal`.
    fn session(
        &self,
        headers: &HeaderMap,
        principal: &Principal,
    ) -> Result<(String, Arc<HttpSession>), Refused> {
        let Some(id) = header(headers, SESSION_HEADER) else {
            return Err(Box::new(refuse(
                StatusCode::BAD_REQUEST,
                codes::INVALID_REQUEST,
                "no session: send `initialize` first, then its `Mcp-Session-Id` with every request",
            )));
        };
        let Some(session) = lock(&self.sessions).get(id).cloned() else {
            return Err(Box::new(refuse(
                StatusCode::NOT_FOUND,
                codes::INVALID_REQUEST,
                "unknown or ended session: send `initialize` again to start a new one",
            )));
        };
        if session.principal != *principal {
            return Err(Box::new(refuse(
                StatusCode::FORBIDDEN,
                codes::REFUSED,
                "forbidden: this session belongs to another principal: start your own with `initialize`",
            )));
        }
        if let Some(sent) = headers.get(PROTOCOL_VERSION_HEADER) {
            let negotiated = lock(&session.protocol_version).clone();
            let sent = sent.to_str().unwrap_or_default();
            if let Some(negotiated) = negotiated.filter(|negotiated| negotiated != sent) {
                return Err(Box::new(refuse(
                    StatusCode::BAD_REQUEST,
                    codes::INVALID_REQUEST,
                    &format!(
                        "unsupported MCP protocol version `{}`: this session negotiated `{negotiated}` at `initialize`: send `MCP-Protocol-Version: {negotiated}`",
                        countersign::evidence::printable(sent)
                    ),
                )));
            }
        }
        Ok((id.to_owned(), session))
    }

    async fn post(
        self: Arc<Self>,
        request: Request<Incoming>,
        principal: Principal,
    ) -> Response<Body> {
        let headers = request.headers().clone();
        if !(accepts(&headers, "application/json") && accepts(&headers, "text/event-stream")) {
            return refuse(
                StatusCode::NOT_ACCEPTABLE,
                codes::INVALID_REQUEST,
                "not acceptable: send `Accept: application/json, text/event-stream`",
            );
        }
        let json_body = header(&headers, "content-type").is_some_and(|value| {
            value
                .split(';')
                .next()
                .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
        });
        if !json_body {
            return refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                codes::INVALID_REQUEST,
                "unsupported media type: send the message as `Content-Type: application/json`",
            );
        }
        let max = self.shared.config.max_message_bytes;
        let too_large = || {
            refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                codes::INVALID_REQUEST,
                &format!("not executed: the message is larger than the gateway's {max}-byte cap"),
            )
        };
        let declared = header(&headers, "content-length").and_then(|value| value.parse().ok());
        if declared.is_some_and(|length: usize| length > max) {
            return too_large();
        }
        let body = match Limited::new(request.into_body(), max).collect().await {
            Ok(body) => body.to_bytes(),
            Err(error) if error.is::<http_body_util::LengthLimitError>() => return too_large(),
            Err(_) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    codes::INVALID_REQUEST,
                    "the request body could not be read: send it again",
                );
            }
        };
        let message: Value = match countersign::json::read_slice(&body) {
            Ok(message) => message,
            Err(error) => {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    &wire::unreadable(&body, &error, "request"),
                );
            }
        };
        if message.is_array() {
            return refuse(
                StatusCode::BAD_REQUEST,
                codes::INVALID_REQUEST,
                "not executed: batch requests are not supported: send one message per request",
            );
        }
        if let Some((reason, text)) = wire::invalid_message(&message) {
            return refuse_with(
                StatusCode::BAD_REQUEST,
                codes::INVALID_REQUEST,
                reason,
                text,
            );
        }
        let kind = wire::kind(&message);
        let modern = kind != Kind::Response
            && wire::method(&message) != Some("initialize")
            && (era::declared_version(&message).is_some()
                || (header(&headers, SESSION_HEADER).is_none()
                    && headers.contains_key(PROTOCOL_VERSION_HEADER)
                    && header(&headers, PROTOCOL_VERSION_HEADER)
                        .is_none_or(era::is_modern_shaped)));
        if modern {
            return self.post_modern(&headers, message, kind, principal).await;
        }
        let initializing = kind == Kind::Request
            && wire::method(&message) == Some("initialize")
            && header(&headers, SESSION_HEADER).is_none();
        let (session_id, session) = if initializing {
            match self.open_session(principal, None) {
                Ok(opened) => opened,
                Err(refusal) => return *refusal,
            }
        } else {
            match self.session(&headers, &principal) {
                Ok(found) => found,
                Err(refusal) => return *refusal,
            }
        };
        if kind != Kind::Request {
            session.session.handle_client(message).await;
            return empty(StatusCode::ACCEPTED);
        }
        let request_id = message.get("id").cloned().unwrap_or(Value::Null);
        let related = request_id.to_string();
        let (sender, mut receiver) = mpsc::unbounded_channel();
        {
            let mut routes = lock(&session.routes);
            if routes.posts.contains_key(&related) {
                return refuse_with(
                    StatusCode::BAD_REQUEST,
                    codes::INVALID_REQUEST,
                    "duplicate_request_id",
                    "not executed: a request with this id is already in flight in this session; this one was not run, the earlier one still runs: send each request under a new id",
                );
            }
            routes.posts.insert(related.clone(), sender);
        }
        // Until the upstream has accepted the handshake, the session is ended if this POST is
        // dropped (the client gave up waiting) or the handshake fails: it never holds a slot
        // nobody can use.
        let mut opening = initializing.then(|| Opening {
            front: Arc::clone(&self),
            id: session_id.clone(),
            session: Arc::clone(&session),
            accepted: false,
        });
        session.session.handle_client(message).await;
        // The session is the client's only once the upstream accepted the handshake, so the
        // reply to `initialize` is read to its end (within `--call-timeout`) before answering;
        // what came ahead of it (a log notification, a ping) is sent ahead of it on an event
        // stream.
        let mut ahead = Vec::new();
        let wait = self.shared.config.call_timeout;
        let first = loop {
            let next = if initializing {
                match tokio::time::timeout(wait, receiver.recv()).await {
                    Ok(next) => next,
                    Err(_) => {
                        let error = wire::error_object(
                            codes::INTERNAL_ERROR,
                            format!(
                                "the upstream did not answer `initialize` within --call-timeout ({}s): no session was opened: send `initialize` again",
                                wait.as_secs_f64()
                            ),
                        );
                        return json_response(
                            StatusCode::GATEWAY_TIMEOUT,
                            &wire::error_response(request_id, error),
                        );
                    }
                }
            } else {
                receiver.recv().await
            };
            match next {
                Some(message) if initializing && !is_final_reply(&message, &related) => {
                    ahead.push(message);
                }
                other => break other,
            }
        };
        let Some(first) = first else {
            return refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                codes::INTERNAL_ERROR,
                "the session ended before the reply: the upstream may have stopped; send `initialize` again",
            );
        };
        if initializing && first.get("result").is_none() {
            // The upstream refused the handshake (`503 too many sessions`, say): no session
            // is issued, so it holds no `--max-sessions` slot and no call can reach an
            // upstream that has no session for it. The client gets the refusal as it came.
            self.log(format_args!(
                "the upstream refused `initialize`: no session was opened"
            ));
            return json_response(StatusCode::OK, &first);
        }
        // Accepted: the session is the client's from now on.
        if let Some(opening) = opening.as_mut() {
            opening.accepted = true;
        }
        if initializing
            && let Some(version) = first
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
        {
            *lock(&session.protocol_version) = Some(version.to_owned());
        }
        let mut response = if ahead.is_empty() && is_final_reply(&first, &related) {
            json_response(StatusCode::OK, &first)
        } else {
            ahead.push(first);
            event_stream(ahead, receiver)
        };
        if initializing && let Ok(value) = HeaderValue::from_str(&session_id) {
            response.headers_mut().insert(SESSION_HEADER, value);
        }
        response
    }

    /// A 2026-07-28 request (or notification): the header–body checks, then the principal's
    /// modern session, under an id of the gateway's (the client's is restored in the reply).
    async fn post_modern(
        self: Arc<Self>,
        headers: &HeaderMap,
        mut message: Value,
        kind: Kind,
        principal: Principal,
    ) -> Response<Body> {
        let client_id = message.get("id").cloned().unwrap_or(Value::Null);
        let checked = era::check_headers(&message, |name| {
            headers.get(name).map(|value| value.to_str().ok())
        })
        .and_then(|()| era::check_request_meta(&message));
        if let Err(error) = checked {
            return json_response(
                StatusCode::BAD_REQUEST,
                &wire::error_response(client_id, error),
            );
        }
        let key = principal.as_str().to_owned();
        let existing = lock(&self.modern).get(&key).cloned();
        let session = match existing {
            Some(session) => session,
            None => match self.open_session(principal, Some(key)) {
                Ok((_, session)) => session,
                Err(refusal) => return *refusal,
            },
        };
        if kind != Kind::Request {
            session.session.handle_client(message).await;
            return empty(StatusCode::ACCEPTED);
        }
        let tool = message.pointer("/params/name").and_then(Value::as_str);
        let params = tool.and_then(|tool| session.session.param_headers(tool));
        let sends_params = headers
            .keys()
            .any(|name| name.as_str().starts_with("mcp-param-"));
        let checked =
            era::check_call_param_headers(&message, params.as_deref(), sends_params, |name| {
                headers.get(name).map(|value| value.to_str().ok())
            });
        if let Err(error) = checked {
            return json_response(
                StatusCode::BAD_REQUEST,
                &wire::error_response(client_id, error),
            );
        }
        let ours = json!(format!(
            "cs-http-{}",
            self.next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        message["id"] = ours.clone();
        let related = ours.to_string();
        let (sender, mut receiver) = mpsc::unbounded_channel();
        lock(&session.routes).posts.insert(related.clone(), sender);
        session.session.handle_client(message).await;
        let restore = move |mut message: Value| {
            if message.get("id") == Some(&ours) && wire::kind(&message) == Kind::Response {
                message["id"] = client_id.clone();
            }
            if let Some(meta) = message.pointer_mut("/params/_meta")
                && meta.get(era::META_SUBSCRIPTION) == Some(&ours)
            {
                meta[era::META_SUBSCRIPTION] = client_id.clone();
            }
            message
        };
        let Some(first) = receiver.recv().await else {
            return refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                codes::INTERNAL_ERROR,
                "the upstream connection ended before the reply: the upstream may have stopped; send the request again",
            );
        };
        if is_final_reply(&first, &related) {
            json_response(StatusCode::OK, &restore(first))
        } else {
            let mut response = event_stream_mapped(vec![first], receiver, restore);
            response
                .headers_mut()
                .insert("x-accel-buffering", HeaderValue::from_static("no"));
            response
        }
    }

    fn get(&self, headers: &HeaderMap, principal: &Principal) -> Response<Body> {
        if !accepts(headers, "text/event-stream") {
            return refuse(
                StatusCode::NOT_ACCEPTABLE,
                codes::INVALID_REQUEST,
                "not acceptable: a GET opens an event stream: send `Accept: text/event-stream`",
            );
        }
        let (_, session) = match self.session(headers, principal) {
            Ok(found) => found,
            Err(refusal) => return *refusal,
        };
        if headers.contains_key("last-event-id") {
            // Nothing is stored to replay, so nothing can cross sessions (case B48): say so.
            return refuse(
                StatusCode::BAD_REQUEST,
                codes::INVALID_REQUEST,
                "resuming an event stream is not supported: the gateway keeps no events to replay: open a new GET stream without `Last-Event-ID`",
            );
        }
        let (sender, receiver) = mpsc::unbounded_channel();
        {
            let mut routes = lock(&session.routes);
            if routes
                .listening
                .as_ref()
                .is_some_and(|open| !open.is_closed())
            {
                return refuse(
                    StatusCode::CONFLICT,
                    codes::INVALID_REQUEST,
                    "this session already has an open GET stream: close it first",
                );
            }
            routes.listening = Some(sender);
        }
        event_stream(Vec::new(), receiver)
    }

    fn delete(&self, headers: &HeaderMap, principal: &Principal) -> Response<Body> {
        let (id, session) = match self.session(headers, principal) {
            Ok(found) => found,
            Err(refusal) => return *refusal,
        };
        self.end_session(&id, &session);
        empty(StatusCode::OK)
    }
}
