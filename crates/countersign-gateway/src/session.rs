//! One client's session: routes messages both ways and decides every `tools/call`.
//!
//! Requests are forwarded with ids the gateway assigns (numbers from 1), so that every
//! upstream reply is correlated by exact JSON equality with one request: a reply whose id
//! matches nothing (another number, a missing id, the string `"42"` for the number 42) is never
//! taken as the answer to anything; it makes every tool call it may belong to ambiguous.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use countersign::approver::Credential;
use countersign::effect::Reconciled;
use countersign::{
    ActionRequest, AnswerDecision, ApprovalAnswer, ApprovalId, CommitNoteSlot, Control,
    ControlError, EffectRecord, ExecutorError, FrameworkInterrupt, IdentityProvider,
    InterruptApprovalProvider, InterruptError, PendingApproval, Principal, ReconcileHook,
};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot, watch};

use crate::upstream::{Event, Link};
use crate::wire::{self, Kind};
use crate::{GatewayShared, LateReply, codes, era};

mod listen;
mod modern;
mod tools;

use modern::{Era, ModernCall, UpstreamInfo};
use tools::ToolInfo;

/// The `_meta` key of a `tools/call` in which a client presents an approval id.
const APPROVAL_META: &str = "countersign/approval";

/// How much of a raw upstream reply is kept as evidence in a receipt: 64 KiB.
const EVIDENCE_BYTES: usize = 64 * 1024;

tokio::task_local! {
    /// The client's request id of the `tools/call` being decided on this task.
    static CURRENT_CALL: Value;
    /// The modern-era (2026-07-28) context of the `tools/call` being decided on this task: the
    /// approval question travels in its result, never as a request to the client.
    static MODERN_CALL: ModernCall;
}

/// A message for the client; `related` is the client request it belongs to, if any.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    pub(crate) message: Value,
    // The stdio front writes everything in order; the Streamable HTTP front routes by it to
    // the POST stream of the request it belongs to.
    pub(crate) related: Option<Value>,
}

/// What a waiting tool call is handed.
enum Reply {
    Message {
        message: Value,
        raw: String,
    },
    Malformed {
        raw: String,
    },
    /// The call's reply reads as a result, but one the gateway cannot represent (case B50 (c)).
    Withheld {
        bytes: usize,
        digest: String,
        problem: String,
    },
    Uncorrelated {
        raw: String,
    },
    NotSent {
        detail: String,
    },
    Broken {
        detail: String,
    },
}

enum Forwarded {
    Passthrough {
        client_id: Value,
        method: String,
        /// Asked by a 2026-07-28 client: its result gets `resultType`.
        modern: bool,
    },
    /// The gateway's own request (the upstream handshake for a 2026-07-28 client).
    Internal { reply: oneshot::Sender<Value> },
    ToolCall {
        client_id: Value,
        reply: oneshot::Sender<Reply>,
    },
    Abandoned {
        effect_key: Option<String>,
        action: String,
    },
    /// A request that is not a tool call, given up on: the client's input ended
    /// ([`Session::drain`]), the client cancelled it, or it was an `initialize` not answered
    /// within --call-timeout. The client was answered or no longer waits; a late reply is
    /// dropped (MCP 2025-06-18, "Cancellation": a reply to a cancelled request is not sent).
    GivenUp { method: String, why: &'static str },
}

/// The client's cancellation (`notifications/cancelled`) of one of its running `tools/call`s.
///
/// `requested` is set, and the call's upstream id looked up, under the session's state lock;
/// the call itself checks `requested` under that lock before it is sent upstream. So a call is
/// either cancelled before it is sent (then it is not run at all: `unsent` wakes its task,
/// which drops it, or it finds `requested` and is recorded not executed) or the cancellation
/// is forwarded upstream under the call's upstream id. Either way the client gets no reply
/// (MCP 2025-06-18, "Cancellation": the receiver of a cancellation does not answer it).
#[derive(Default)]
struct CallCancel {
    requested: AtomicBool,
    unsent: tokio::sync::Notify,
}

#[derive(Default)]
struct State {
    next_id: u64,
    forwarded: HashMap<u64, Forwarded>,
    /// The client's request id (as JSON text) to the upstream id it was forwarded under.
    client_ids: HashMap<String, u64>,
    /// The ids (as JSON text) of the client's requests not yet answered, nor cancelled by the
    /// client: a second request under one of them is refused, never run (JSON-RPC 2.0 §4: the
    /// id correlates one request with one response).
    in_flight: std::collections::HashSet<String>,
    /// Requests from the upstream to the client: the gateway's id to the upstream's.
    server_requests: HashMap<String, Value>,
    /// The gateway's own requests to the client (elicitation).
    own_requests: HashMap<String, oneshot::Sender<Value>>,
    /// Progress tokens (as JSON text) to the client request that set them.
    progress: HashMap<String, Value>,
    client_elicitation: bool,
    /// Did the client declare URL-mode elicitation (`capabilities.elicitation.url`, 2025-11-25)?
    client_url_elicitation: bool,
    client_name: String,
    /// How the client opened: `initialize` (handshake era) or a 2026-07-28 request.
    era: Era,
    /// Each listed tool's `x-mcp-header` parameters, from the last `tools/list` relayed.
    param_headers: HashMap<String, Vec<(String, Vec<String>)>>,
    /// The handshake-era client's `initialize` params, kept to answer it in the gateway's name
    /// when the upstream speaks 2026-07-28 only.
    initialize: Option<Value>,
    /// Set when the gateway answered a handshake-era client's `initialize` itself for a
    /// 2026-07-28-only upstream: the per-request `_meta` every forwarded request then carries.
    bridged: Option<Map<String, Value>>,
    /// Each listed tool's schema and annotations, from the last `tools/list` seen (issue #27).
    tools: HashMap<String, ToolInfo>,
    /// Approval requests whose settling is being watched for URL-mode elicitation (one
    /// watcher each, however often the call is retried meanwhile).
    watched: std::collections::HashSet<String>,
    /// `subscriptions/listen` requests the gateway serves itself (handshake-era upstream): the
    /// client's request id (as JSON text) to the listener.
    listeners: HashMap<String, listen::Listener>,
    /// The client's input has ended ([`Session::drain`]): it can answer no request of the
    /// gateway's, so none is sent.
    input_closed: bool,
    /// Why the upstream refused the handshake-era client's last `initialize`, until another
    /// one is sent: meanwhile no request but `ping` is sent upstream, since an upstream that
    /// opened no session for the client cannot have run it.
    handshake_refused: Option<String>,
    /// Is an `initialize` the upstream has not answered given up on after `--call-timeout`
    /// ([`Session::bound_initialize`]; the stdio front's, since the HTTP front bounds its own)?
    bound_initialize: bool,
    /// Is the upstream's refusal of `initialize` being turned into a 2026-07-28 session
    /// ([`Inner::bridge_initialize`])? The handshake is not over until it is.
    bridging: bool,
    /// The running `tools/call`s, by the client's request id (as JSON text).
    calls: HashMap<String, Arc<CallCancel>>,
}

pub(crate) struct Inner {
    shared: Arc<GatewayShared>,
    control: Control,
    upstream: Arc<dyn Link>,
    to_client: mpsc::UnboundedSender<Outgoing>,
    state: Mutex<State>,
    /// Why the upstream connection is gone, once it is.
    closed: watch::Sender<Option<String>>,
    /// The principal every call of this session is decided for.
    principal: Option<Principal>,
    /// The upstream's era and identity, learned once for a 2026-07-28 client.
    /// Not kept when learning it failed: the next request tries again.
    upstream_info: tokio::sync::OnceCell<UpstreamInfo>,
    /// This session, for work it starts from a synchronous handler.
    this: Weak<Inner>,
    /// Tool calls running on tasks of their own ([`Inner::spawn_call`]).
    calls_running: AtomicUsize,
    /// Woken when a tool call ends or an upstream event has been routed: [`Session::drain`]
    /// and [`Session::stop`] look again.
    progress: tokio::sync::Notify,
    /// Set by [`Session::stop`]: every running tool call ends at once.
    stopping: watch::Sender<bool>,
}

/// A running session. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Session {
    inner: Arc<Inner>,
}

struct FixedPrincipal(Option<Principal>);

impl IdentityProvider for FixedPrincipal {
    fn principal(&self) -> Option<Principal> {
        self.0.clone()
    }
}

impl Session {
    /// Start a session for `principal` over an upstream connection. Returns the session and
    /// the stream of messages for the client.
    pub(crate) fn start(
        shared: Arc<GatewayShared>,
        principal: Option<Principal>,
        client: &str,
        upstream: Arc<dyn Link>,
        mut events: mpsc::UnboundedReceiver<Event>,
    ) -> (Session, mpsc::UnboundedReceiver<Outgoing>) {
        let (to_client, outgoing) = mpsc::unbounded_channel();
        let (closed, _) = watch::channel(None);
        let inner = Arc::new_cyclic(|weak: &Weak<Inner>| {
            let mut builder =
                Control::builder_shared(Arc::clone(&shared.policy), Arc::clone(&shared.store))
                    .identity(FixedPrincipal(principal.clone()))
                    .reconcile_hook(Arc::clone(&shared.late) as Arc<dyn ReconcileHook>);
            if shared.config.elicitation {
                let interrupt = Arc::new(Elicitation {
                    session: weak.clone(),
                    client: client.to_owned(),
                    attested: shared
                        .config
                        .attested_clients
                        .iter()
                        .any(|name| name == client),
                });
                builder = builder.approval_provider(Arc::new(InterruptApprovalProvider::new(
                    Arc::clone(&shared.store),
                    interrupt,
                    Arc::new(countersign::SystemClock),
                )));
            }
            Inner {
                control: builder.build(),
                shared,
                upstream,
                to_client,
                state: Mutex::new(State {
                    next_id: 1,
                    ..State::default()
                }),
                closed,
                principal,
                upstream_info: tokio::sync::OnceCell::new(),
                this: weak.clone(),
                calls_running: AtomicUsize::new(0),
                progress: tokio::sync::Notify::new(),
                stopping: watch::Sender::new(false),
            }
        });
        let pump = Arc::downgrade(&inner);
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let Some(inner) = pump.upgrade() else { return };
                inner.handle_upstream(event);
                inner.progress.notify_waiters();
            }
        });
        (Session { inner }, outgoing)
    }

    /// Bound the wait for the upstream's answer to `initialize` by `--call-timeout` (the stdio
    /// front: an MCP client over stdio may wait for ever; the HTTP front bounds its own).
    pub(crate) fn bound_initialize(&self) {
        self.inner.state().bound_initialize = true;
    }

    /// Handle one message from the client.
    pub(crate) async fn handle_client(&self, message: Value) {
        Arc::clone(&self.inner).handle_client(message).await;
    }

    /// Resolves when the upstream connection is gone, with why.
    pub(crate) async fn upstream_closed(&self) -> String {
        let mut closed = self.inner.closed.subscribe();
        let detail = closed
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|detail| detail.clone());
        match detail {
            Some(detail) => detail,
            // The sender lives in the session, which `self` holds: never reached.
            None => std::future::pending().await,
        }
    }

    /// The client's input has ended: resolves once no request of the client's is left
    /// unanswered (every running tool call has replied and every forwarded request has its
    /// reply), or the upstream is gone. A `subscriptions/listen` stream, which only ends when
    /// cancelled, is not waited for.
    ///
    /// From now on the gateway sends the client no request of its own: an approval it would
    /// have asked for over elicitation stays pending and the call is answered as suspended, and
    /// a question already asked ends the same way. This is how an MCP host shuts a stdio server
    /// down (it closes the server's input, waits for it to exit, and sends `SIGTERM` after a
    /// while: MCP 2025-06-18, "Lifecycle", "Shutdown").
    pub(crate) async fn drain(&self) {
        let (unanswerable, forwarded): (Vec<oneshot::Sender<Value>>, Vec<Value>) = {
            let mut state = self.inner.state();
            state.input_closed = true;
            (
                state
                    .own_requests
                    .drain()
                    .map(|(_, waiter)| waiter)
                    .collect(),
                state.server_requests.drain().map(|(_, id)| id).collect(),
            )
        };
        drop(unanswerable);
        // The upstream's requests already passed to the client will get no answer from it.
        for upstream_id in forwarded {
            self.inner.answer_unanswerable(upstream_id);
        }
        // A tool call ends within `--call-timeout`; any other request is given that long too.
        let give_up = async {
            tokio::time::sleep(self.inner.shared.config.call_timeout).await;
            self.inner.give_up_on_forwarded().await;
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = self.inner.until(Inner::answered_all) => {}
            _ = self.upstream_closed() => {}
            () = give_up => {}
        }
    }

    /// Stop at once (the gateway was signalled): every running tool call is cancelled, and this
    /// resolves once the kernel has recorded each one whose upstream request had been sent as
    /// `ambiguous` ([`Control::settled`]), so that no effect key is left to its lease. A
    /// cancelled call gets no reply.
    ///
    /// # Errors
    ///
    /// [`countersign::UnrecordedAttempts`] when the store refused some of those records.
    pub(crate) async fn stop(&self) -> Result<(), countersign::UnrecordedAttempts> {
        let _ = self.inner.stopping.send(true);
        self.inner
            .until(|inner| inner.calls_running.load(Ordering::SeqCst) == 0)
            .await;
        self.inner.control.settled().await
    }
}

impl Session {
    /// End the upstream connection as a client should ([`Link::close`]): a few seconds at most,
    /// or at once ([`Link::kill`]) if the gateway is, or becomes, forced to stop
    /// ([`crate::Gateway::force_stop`]).
    pub(crate) async fn close_upstream(&self) {
        let mut forced = self.inner.shared.forced.subscribe();
        tokio::select! {
            biased;
            _ = forced.wait_for(|forced| *forced) => self.inner.upstream.kill(),
            () = self.inner.upstream.close() => {}
        }
    }
}

/// One tool call counted as running while it lives ([`Session::drain`]).
struct Running(Arc<Inner>);

impl Running {
    fn start(inner: &Arc<Inner>) -> Running {
        inner.calls_running.fetch_add(1, Ordering::SeqCst);
        Running(Arc::clone(inner))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.calls_running.fetch_sub(1, Ordering::SeqCst);
        self.0.progress.notify_waiters();
    }
}

/// The `error.message` of a JSON-RPC error response, for a sentence about it.
pub(super) fn detail_of(response: &Value) -> String {
    response
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("no reason given")
        .to_owned()
}

fn id_text(id: &Value) -> String {
    id.to_string()
}

impl Inner {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock means a panic while routing; the routing tables are still sound
        // (every update is a single insert or remove), so keep going.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Send `message` to the client; a response ends its request's id being in flight.
    fn to_client(&self, message: Value, related: Option<Value>) {
        if wire::kind(&message) == Kind::Response
            && let Some(id) = message.get("id")
        {
            self.state().in_flight.remove(&id_text(id));
        }
        let _ = self.to_client.send(Outgoing { message, related });
    }

    /// Refuse a request whose id is that of a request still in flight: answered under that id
    /// (the only one the client can match), without ending the first request's.
    fn refuse_reused_id(&self, client_id: Value) {
        let message = format!(
            "not executed: request id {} is already in use by a request of this session that has not been answered yet; this request was not run, the earlier one still runs and is answered under the same id: send each request under a new id",
            countersign::evidence::printable(&id_text(&client_id))
        );
        let error = json!({
            "code": codes::INVALID_REQUEST,
            "message": message,
            "data": {"countersign": true, "reason": "duplicate_request_id", "did_run": "no", "may_retry": true},
        });
        let message = wire::error_response(client_id.clone(), error);
        let _ = self.to_client.send(Outgoing {
            message,
            related: Some(client_id),
        });
    }

    /// Is the client's `initialize` still unanswered: forwarded and not answered, or being
    /// bridged to a 2026-07-28 upstream?
    fn initialize_pending(&self) -> bool {
        let state = self.state();
        state.bridging
            || state.forwarded.values().any(
                |entry| matches!(entry, Forwarded::Passthrough { method, .. } if method == "initialize"),
            )
    }

    /// Give up on the forwarded `initialize` `upstream_id` if the upstream has not answered it
    /// within `--call-timeout`: the client is told, and nothing but another `initialize` (or a
    /// ping) is sent upstream until one succeeds. A late answer is dropped; `initialize` is
    /// never cancelled (MCP 2025-06-18, "Cancellation").
    fn bound_handshake(&self, upstream_id: u64) {
        let this = self.this.clone();
        let wait = self.shared.config.call_timeout;
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let Some(inner) = this.upgrade() else { return };
            let client_id = {
                let mut state = inner.state();
                match state.forwarded.remove(&upstream_id) {
                    Some(Forwarded::Passthrough {
                        client_id, method, ..
                    }) => {
                        state.client_ids.remove(&id_text(&client_id));
                        state.forwarded.insert(
                            upstream_id,
                            Forwarded::GivenUp {
                                method,
                                why: "initialize was not answered within --call-timeout",
                            },
                        );
                        state.handshake_refused = Some(format!(
                            "it did not answer within --call-timeout ({}s)",
                            wait.as_secs_f64()
                        ));
                        client_id
                    }
                    Some(entry) => {
                        state.forwarded.insert(upstream_id, entry);
                        return;
                    }
                    None => return,
                }
            };
            let error = wire::error_object(
                codes::INTERNAL_ERROR,
                format!(
                    "the upstream did not answer `initialize` within --call-timeout ({}s): the gateway stopped waiting for it, and sends nothing else upstream until an `initialize` succeeds: send `initialize` again",
                    wait.as_secs_f64()
                ),
            );
            inner.to_client(
                wire::error_response(client_id.clone(), error),
                Some(client_id),
            );
            inner.progress.notify_waiters();
        });
    }

    /// Resolves once `done` holds, looking again each time [`Inner::progress`] is woken.
    async fn until(&self, done: impl Fn(&Inner) -> bool) {
        loop {
            let progress = self.progress.notified();
            tokio::pin!(progress);
            // Registered before looking, so that a wake between the look and the wait counts.
            progress.as_mut().enable();
            if done(self) {
                return;
            }
            progress.await;
        }
    }

    /// Answer a request of the upstream's that the client can no longer answer (its input has
    /// ended), so that a tool call waiting on it can finish.
    fn answer_unanswerable(&self, upstream_id: Value) {
        let refusal = wire::error_response(
            upstream_id,
            wire::error_object(
                codes::INTERNAL_ERROR,
                "the client has closed its connection and can answer no request",
            ),
        );
        let link = Arc::clone(&self.upstream);
        tokio::spawn(async move {
            let _ = link.send(&refusal, None).await;
        });
    }

    /// Answer each forwarded request (not a tool call, nor a `subscriptions/listen` stream) the
    /// upstream has not answered within `--call-timeout` of the client's input ending, and
    /// tell the upstream it is cancelled: a `resources/read` that hangs must not keep the
    /// gateway from exiting.
    async fn give_up_on_forwarded(&self) {
        let seconds = self.shared.config.call_timeout.as_secs_f64();
        let given_up: Vec<(u64, Value, String)> = {
            let mut state = self.state();
            let ids: Vec<u64> = state
                .forwarded
                .iter()
                .filter(|(_, entry)| {
                    matches!(entry, Forwarded::Passthrough { method, .. } if method != "subscriptions/listen")
                })
                .map(|(id, _)| *id)
                .collect();
            ids.into_iter()
                .filter_map(|id| match state.forwarded.remove(&id) {
                    Some(Forwarded::Passthrough {
                        client_id, method, ..
                    }) => {
                        state.client_ids.remove(&id_text(&client_id));
                        state.forwarded.insert(
                            id,
                            Forwarded::GivenUp {
                                method: method.clone(),
                                why: "the client's input ended",
                            },
                        );
                        Some((id, client_id, method))
                    }
                    _ => None,
                })
                .collect()
        };
        for (_, client_id, method) in &given_up {
            // `initialize` is given up on here but never cancelled upstream (below).
            let ending = if method == "initialize" {
                "the gateway stopped waiting for it"
            } else {
                "the request was cancelled"
            };
            let error = wire::error_object(
                codes::INTERNAL_ERROR,
                format!(
                    "the upstream did not answer within --call-timeout ({seconds}s) after the client's input ended: {ending}"
                ),
            );
            self.to_client(
                wire::error_response(client_id.clone(), error),
                Some(client_id.clone()),
            );
        }
        self.progress.notify_waiters();
        // Last: an upstream that reads nothing may hold these sends up.
        for (upstream_id, _, method) in given_up {
            self.cancel_upstream(upstream_id, &method, "the client's input ended")
                .await;
        }
    }

    /// Tell the upstream the gateway no longer waits for its request `upstream_id` (of
    /// `method`): `notifications/cancelled` with `reason`. `initialize` is never cancelled (MCP
    /// 2025-06-18, "Cancellation"). True when the notification was sent.
    pub(super) async fn cancel_upstream(
        &self,
        upstream_id: u64,
        method: &str,
        reason: &str,
    ) -> bool {
        if method == "initialize" {
            return false;
        }
        let cancel = wire::notification(
            "notifications/cancelled",
            json!({"requestId": upstream_id, "reason": reason}),
        );
        self.upstream.send(&cancel, None).await.is_ok()
    }

    /// Answer the client's request `client_id` (of `method`, with `params`) with -32098: it was
    /// refused before the kernel, and nothing was sent upstream ([`codes::not_executed`]).
    fn refuse_unsent(
        &self,
        client_id: Value,
        method: &str,
        params: &Value,
        message: impl Into<String>,
    ) {
        let error = codes::not_executed(message, &self.action_of(method, params));
        self.to_client(
            wire::error_response(client_id.clone(), error),
            Some(client_id),
        );
    }

    /// What a refusal's `data.action` names for a request of `method` with `params`: the
    /// policy action of a `tools/call` (`mcp.<alias>.<tool>`), else the method.
    fn action_of(&self, method: &str, params: &Value) -> String {
        match params.get("name").and_then(Value::as_str) {
            Some(tool) if method == "tools/call" => {
                format!("mcp.{}.{tool}", self.shared.config.alias)
            }
            _ => method.to_owned(),
        }
    }

    /// Has every request of the client's been answered (subscriptions aside)?
    fn answered_all(&self) -> bool {
        self.calls_running.load(Ordering::SeqCst) == 0
            && !self.state().forwarded.values().any(|entry| {
                matches!(entry, Forwarded::Passthrough { method, .. } if method != "subscriptions/listen")
            })
    }

    /// Run one `tools/call` on a task of its own and answer it. The task is counted for
    /// [`Session::drain`] and ended by [`Session::stop`]; `modern` is the 2026-07-28 context.
    fn spawn_call(self: Arc<Self>, client_id: Value, params: Value, modern: Option<ModernCall>) {
        let mut stopping = self.stopping.subscribe();
        if *stopping.borrow() {
            self.refuse_unsent(
                client_id,
                "tools/call",
                &params,
                "not executed: the gateway is stopping: send the identical call again once it is back",
            );
            return;
        }
        let running = Running::start(&self);
        let key = id_text(&client_id);
        let cancel = Arc::new(CallCancel::default());
        self.state().calls.insert(key.clone(), Arc::clone(&cancel));
        tokio::spawn(async move {
            let _running = running;
            let call = CURRENT_CALL.scope(
                client_id.clone(),
                self.tool_call(client_id.clone(), params, modern, Arc::clone(&cancel)),
            );
            tokio::select! {
                response = call => {
                    if cancel.requested.load(Ordering::SeqCst) {
                        self.log(format_args!(
                            "tools/call {key}: cancelled by the client, so its reply was not sent"
                        ));
                    } else {
                        self.to_client(response, Some(client_id));
                    }
                }
                // Cancelled by the client before it was sent upstream (waiting for approval,
                // say): dropped here, so nothing runs, however it is answered later.
                () = cancel.unsent.notified() => {
                    self.log(format_args!(
                        "tools/call {key}: cancelled by the client before it was sent upstream: not run"
                    ));
                }
                // Dropping the call cancels it: the kernel records an attempt whose executor
                // had started as `ambiguous` (`Session::stop` waits for that record).
                _ = stopping.wait_for(|stopping| *stopping) => {}
            }
            let mut state = self.state();
            if state
                .calls
                .get(&key)
                .is_some_and(|running| Arc::ptr_eq(running, &cancel))
            {
                state.calls.remove(&key);
            }
        });
    }

    fn log(&self, line: std::fmt::Arguments<'_>) {
        if self.shared.config.log {
            // Tool names and ids come from the client: never let them forge a log line.
            let line = line.to_string();
            countersign::stderr_line!(
                "countersign-gateway[{}]: {}",
                countersign::evidence::printable(&self.shared.config.alias),
                countersign::evidence::printable(&line)
            );
        }
    }

    async fn handle_client(self: Arc<Self>, message: Value) {
        // A client message is JSON-RPC 2.0 or it is refused: one without `"jsonrpc": "2.0"`
        // (`"1.0"`, none) is never forwarded, and one that is not even an object (`"hello"`,
        // `42`) is answered too, with a null id as JSON-RPC 2.0 §5 says when the id cannot be
        // read (found by a first-time user: both were forwarded or dropped without a word).
        // A request whose id is not a string or a number is refused too (found by a first-time
        // user: `[1]`, `true`, `{}` and `null` were taken as ids).
        if let Some((reason, text)) = wire::invalid_message(&message) {
            let id = message
                .get("id")
                .filter(|id| wire::is_request_id(id))
                .cloned()
                .unwrap_or(Value::Null);
            let error = wire::refusal_object(codes::INVALID_REQUEST, reason, text);
            let related = (!id.is_null()).then(|| id.clone());
            self.to_client(wire::error_response(id, error), related);
            return;
        }
        match wire::kind(&message) {
            Kind::Request => self.client_request(message).await,
            Kind::Notification => self.client_notification(message).await,
            Kind::Response => self.client_response(message).await,
            Kind::Invalid => {}
        }
    }

    async fn client_request(self: Arc<Self>, message: Value) {
        let client_id = message.get("id").cloned().unwrap_or(Value::Null);
        let method = wire::method(&message).unwrap_or_default().to_owned();
        // Found by a first-time user: two `tools/call`s under one id both ran, and the client
        // got two replies it could not tell apart.
        if !self.state().in_flight.insert(id_text(&client_id)) {
            self.refuse_reused_id(client_id);
            return;
        }
        if let Some(token) = message.pointer("/params/_meta/progressToken") {
            self.state()
                .progress
                .insert(id_text(token), client_id.clone());
        }
        if crate::tasks::is_task_method(&method) {
            let refusal = crate::tasks::method_refusal(&method);
            self.to_client(
                wire::error_response(client_id.clone(), refusal),
                Some(client_id),
            );
            return;
        }
        if method != "initialize"
            && self.state().era != Era::Legacy
            && era::declared_version(&message).is_some()
        {
            self.modern_request(client_id, method, message).await;
            return;
        }
        if method == "ping" && self.state().handshake_refused.is_some() {
            // The gateway is alive; an upstream with no session for the client cannot answer.
            let pong = json!({"jsonrpc": "2.0", "id": client_id.clone(), "result": {}});
            self.to_client(pong, Some(client_id));
            return;
        }
        if method != "initialize" && method != "ping" && self.initialize_pending() {
            // MCP 2025-06-18, "Lifecycle": until the server has answered `initialize`, the client
            // sends nothing but pings. A client that sends its requests right behind it (a file
            // piped in) has them held here until the handshake ends, then sent, or refused below
            // if it failed: an upstream still initializing never sees one it may not run. The
            // hold is bounded by --call-timeout (over stdio by the wait for `initialize` itself,
            // [`Inner::bound_handshake`]), after which the request is refused unsent.
            let wait = self.shared.config.call_timeout;
            let answered = self.until(|inner| !inner.initialize_pending());
            let held = if self.state().bound_initialize {
                answered.await;
                Ok(())
            } else {
                tokio::time::timeout(wait, answered).await
            };
            if held.is_err() {
                self.refuse_unsent(
                    client_id,
                    &method,
                    message.get("params").unwrap_or(&Value::Null),
                    format!(
                        "not executed: the upstream had not answered `initialize` after --call-timeout ({}s), so this request was not sent: send it again once `initialize` is answered",
                        wait.as_secs_f64()
                    ),
                );
                return;
            }
            // Cancelled while it was held (over HTTP; the stdio front reads the cancellation
            // only after the held requests): not sent, and not answered.
            if !self.state().in_flight.contains(&id_text(&client_id)) {
                return;
            }
        }
        // Read into a binding of its own: a guard in an `if let` condition lives through the
        // block, and the refusal below locks the state again (found by a first-time user: the
        // gateway froze on the first request after a refused `initialize`).
        let refused = self.state().handshake_refused.clone();
        if method != "initialize"
            && let Some(detail) = refused
        {
            self.refuse_unsent(
                client_id,
                &method,
                message.get("params").unwrap_or(&Value::Null),
                format!(
                    "not executed: the upstream did not accept `initialize` ({detail}), so it has no session for this client: send `initialize` again, and this request once it succeeds"
                ),
            );
            return;
        }
        let mut message = message;
        let bridged = self.state().bridged.clone();
        if method != "initialize"
            && let Some(meta) = bridged
        {
            modern::add_meta(&mut message, &meta);
        }
        if method == "initialize" {
            let mut state = self.state();
            state.era = Era::Legacy;
            state.handshake_refused = None;
            state.initialize = message.get("params").cloned();
            state.client_elicitation = message
                .pointer("/params/capabilities/elicitation")
                .is_some_and(|value| !value.is_null());
            state.client_url_elicitation = message
                .pointer("/params/capabilities/elicitation/url")
                .is_some_and(|value| !value.is_null());
            state.client_name = message
                .pointer("/params/clientInfo/name")
                .and_then(Value::as_str)
                .unwrap_or("unnamed client")
                .to_owned();
        }
        if method == "tools/call" {
            let params = message.get("params").cloned().unwrap_or(Value::Null);
            self.spawn_call(client_id, params, None);
            return;
        }
        self.forward(client_id, method, message, false).await;
    }

    /// Forward a client request upstream under a fresh id of the gateway's.
    async fn forward(&self, client_id: Value, method: String, message: Value, modern: bool) {
        let mut forwarded = message;
        let upstream_id = {
            let mut state = self.state();
            let id = state.next_id;
            state.next_id += 1;
            state.forwarded.insert(
                id,
                Forwarded::Passthrough {
                    client_id: client_id.clone(),
                    method,
                    modern,
                },
            );
            state.client_ids.insert(id_text(&client_id), id);
            id
        };
        forwarded["id"] = json!(upstream_id);
        if forwarded.get("method").and_then(Value::as_str) == Some("initialize")
            && self.state().bound_initialize
        {
            self.bound_handshake(upstream_id);
        }
        if let Err(detail) = self.upstream.send(&forwarded, Some(upstream_id)).await {
            self.state().forwarded.remove(&upstream_id);
            self.progress.notify_waiters();
            let error = wire::error_object(
                codes::INTERNAL_ERROR,
                format!("not sent: the upstream is unreachable: {detail}"),
            );
            self.to_client(
                wire::error_response(client_id.clone(), error),
                Some(client_id),
            );
        }
    }

    async fn client_notification(self: Arc<Self>, mut message: Value) {
        if self.state().handshake_refused.is_some() {
            // An upstream that refused the handshake has no session to tell anything.
            return;
        }
        if wire::method(&message) == Some("notifications/initialized")
            && self.state().bridged.is_some()
        {
            // The gateway answered `initialize` itself: a 2026-07-28 upstream has no handshake.
            return;
        }
        if wire::method(&message) == Some("notifications/cancelled")
            && let Some(request_id) = message.pointer("/params/requestId").cloned()
        {
            let key = id_text(&request_id);
            // The client no longer waits for it (MCP: it ignores any later reply), so its id
            // is free again.
            self.state().in_flight.remove(&key);
            // A subscription the gateway serves itself ends here.
            let ended = self.state().listeners.remove(&key);
            if let Some(listener) = ended {
                self.forget_listener(listener).await;
                return;
            }
            let (upstream_id, unsent_call) = {
                let mut state = self.state();
                let call = state.calls.remove(&key);
                if let Some(call) = &call {
                    call.requested.store(true, Ordering::SeqCst);
                }
                let upstream_id = state.client_ids.remove(&key);
                // A request passed through is answered by nobody now: its late reply is
                // dropped. `initialize` is never cancelled (MCP 2025-06-18, "Cancellation").
                if let Some(id) = upstream_id
                    && let Some(Forwarded::Passthrough { method, .. }) = state.forwarded.get(&id)
                    && method != "initialize"
                {
                    let method = method.clone();
                    state.forwarded.insert(
                        id,
                        Forwarded::GivenUp {
                            method,
                            why: "the client cancelled it",
                        },
                    );
                }
                (upstream_id, call.filter(|_| upstream_id.is_none()))
            };
            if let Some(call) = unsent_call {
                // Not sent upstream yet: it never will be.
                call.unsent.notify_one();
                self.progress.notify_waiters();
                return;
            }
            match upstream_id {
                Some(id) => message["params"]["requestId"] = json!(id),
                // A cancellation of something the upstream never saw: nothing to forward.
                None => return,
            }
        }
        let _ = self.upstream.send(&message, None).await;
    }

    async fn client_response(self: Arc<Self>, mut message: Value) {
        let Some(id) = message.get("id").and_then(Value::as_str).map(str::to_owned) else {
            return;
        };
        let own = self.state().own_requests.remove(&id);
        if let Some(waiter) = own {
            let _ = waiter.send(message);
            return;
        }
        let upstream_id = self.state().server_requests.remove(&id);
        if let Some(upstream_id) = upstream_id {
            message["id"] = upstream_id;
            let _ = self.upstream.send(&message, None).await;
        }
    }

    /// Route one event from the upstream.
    fn handle_upstream(&self, event: Event) {
        match event {
            Event::Message {
                message,
                raw,
                related,
            } => match wire::kind(&message) {
                Kind::Response => self.upstream_response(message, raw, related),
                Kind::Request => self.upstream_request(message, related),
                Kind::Notification => self.upstream_notification(message),
                Kind::Invalid => self.fail_calls(related, |raw| Reply::Malformed { raw }, raw),
            },
            Event::Malformed { raw, related } => {
                self.fail_calls(related, |raw| Reply::Malformed { raw }, raw);
            }
            Event::Oversized { bytes, raw, tail } => self.upstream_oversized(bytes, &raw, &tail),
            Event::Unrepresentable {
                upstream_id,
                result_bytes,
                result_digest,
                problem,
                raw,
                related,
            } => {
                let entry = self.state().forwarded.remove(&upstream_id);
                match entry {
                    Some(Forwarded::ToolCall { reply, .. }) => {
                        let _ = reply.send(Reply::Withheld {
                            bytes: result_bytes,
                            digest: result_digest,
                            problem,
                        });
                    }
                    // Any other reply too deep to read stays what it was: unreadable.
                    Some(entry) => {
                        self.state().forwarded.insert(upstream_id, entry);
                        self.handle_upstream(Event::Malformed { raw, related });
                    }
                    None => self.handle_upstream(Event::Malformed { raw, related }),
                }
            }
            Event::NotSent { related, detail } => {
                self.end_forwarded(related, Reply::NotSent { detail });
            }
            Event::Broken { related, detail } => {
                self.end_forwarded(related, Reply::Broken { detail });
            }
            Event::Closed { detail } => {
                let ids: Vec<u64> = self.state().forwarded.keys().copied().collect();
                for id in ids {
                    self.end_forwarded(
                        id,
                        Reply::Broken {
                            detail: format!("the upstream connection closed: {detail}"),
                        },
                    );
                }
                self.log(format_args!("upstream closed: {detail}"));
                let _ = self.closed.send(Some(detail));
            }
        }
    }

    /// An upstream message of `bytes`, over the cap, of which `head` and `tail` were kept
    /// ([`Event::Oversized`]). A request or notification (it has a `method`) is never a reply:
    /// a notification is dropped, a request is refused to the upstream. A reply ends the
    /// request it names; one whose request cannot be told ends every request it may answer, so
    /// that none waits forever: tool calls as outcome unknown, other requests with an error,
    /// their late replies dropped.
    fn upstream_oversized(&self, bytes: usize, head: &str, tail: &str) {
        let max = self.shared.config.max_message_bytes;
        let seen = wire::partial_message(head.as_bytes(), tail.as_bytes());
        if seen.has_method {
            self.log(format_args!(
                "the upstream sent a request or notification of {bytes} bytes, over the {max}-byte cap for one message: not read{}",
                if seen.id.is_some() { "; refused to the upstream" } else { "; dropped" }
            ));
            if let Some(id) = seen.id {
                let refusal = wire::error_response(
                    id,
                    wire::error_object(
                        codes::INVALID_REQUEST,
                        format!(
                            "the request is {bytes} bytes, larger than the gateway's {max}-byte cap for one message; it was not passed on"
                        ),
                    ),
                );
                let upstream = Arc::clone(&self.upstream);
                tokio::spawn(async move {
                    let _ = upstream.send(&refusal, None).await;
                });
            }
            return;
        }
        let detail = format!(
            "the upstream sent a reply of {bytes} bytes, over the gateway's {max}-byte cap for one message, and it was not read"
        );
        let answers = seen.id.as_ref().and_then(Value::as_u64);
        if let Some(upstream_id) = answers
            && self.state().forwarded.contains_key(&upstream_id)
        {
            self.end_forwarded(upstream_id, Reply::Broken { detail });
            return;
        }
        let waiting: Vec<u64> = self
            .state()
            .forwarded
            .iter()
            .filter(|(_, entry)| {
                // `initialize` is bounded by its own wait (`Inner::bound_handshake`).
                matches!(entry, Forwarded::Passthrough { method, .. }
                    if method != "subscriptions/listen" && method != "initialize")
            })
            .map(|(id, _)| *id)
            .collect();
        for upstream_id in waiting {
            let method = match self.state().forwarded.get(&upstream_id) {
                Some(Forwarded::Passthrough { method, .. }) => method.clone(),
                _ => continue,
            };
            self.end_forwarded(
                upstream_id,
                Reply::Broken {
                    detail: format!(
                        "{detail}; which request it answers cannot be told, so this one was given up on: send it again"
                    ),
                },
            );
            self.state()
                .forwarded
                .entry(upstream_id)
                .or_insert(Forwarded::GivenUp {
                    method,
                    why: "an oversized reply that may have been its answer was not read",
                });
        }
        self.fail_calls(
            None,
            |raw| Reply::Broken {
                detail: format!("{detail}; it starts: {raw}"),
            },
            head.to_owned(),
        );
    }

    fn end_forwarded(&self, upstream_id: u64, reply: Reply) {
        let entry = self.state().forwarded.remove(&upstream_id);
        match entry {
            Some(Forwarded::ToolCall { reply: waiter, .. }) => {
                let _ = waiter.send(reply);
            }
            // The gateway's own request gets the failure as an error reply, so that what it
            // says reaches the client's refusal.
            Some(Forwarded::Internal { reply: waiter }) => {
                let detail = match reply {
                    Reply::NotSent { detail } => format!("not sent: {detail}"),
                    Reply::Broken { detail } => detail,
                    _ => "the upstream reply was unusable".to_owned(),
                };
                let _ = waiter.send(wire::error_response(
                    Value::Null,
                    wire::error_object(codes::INTERNAL_ERROR, detail),
                ));
            }
            Some(Forwarded::GivenUp { .. }) => {}
            Some(Forwarded::Passthrough {
                client_id, method, ..
            }) => {
                let broken = matches!(reply, Reply::Broken { .. });
                let detail = match reply {
                    Reply::NotSent { detail } => format!("not sent: {detail}"),
                    Reply::Broken { detail } => detail,
                    _ => "the upstream reply was unusable".to_owned(),
                };
                let error = wire::error_object(codes::INTERNAL_ERROR, detail);
                let response = wire::error_response(client_id.clone(), error);
                // A 2026-07-28-only HTTP upstream refuses `initialize` with HTTP 400.
                if method == "initialize" && broken {
                    self.bridge_initialize(client_id, response);
                    return;
                }
                if method == "initialize" {
                    self.state().handshake_refused = Some(detail_of(&response));
                }
                self.to_client(response, Some(client_id));
            }
            Some(entry @ Forwarded::Abandoned { .. }) => {
                self.state().forwarded.insert(upstream_id, entry);
            }
            None => {}
        }
    }

    /// Hand `raw` to the tool calls it may belong to: the related one if the transport knows
    /// it, else every tool call in flight. Never to a passthrough request.
    fn fail_calls(&self, related: Option<u64>, make: impl Fn(String) -> Reply, raw: String) {
        let raw = wire::truncated(&raw, EVIDENCE_BYTES);
        let waiters: Vec<oneshot::Sender<Reply>> = {
            let mut state = self.state();
            let targets: Vec<u64> = match related {
                Some(id)
                    if matches!(state.forwarded.get(&id), Some(Forwarded::ToolCall { .. })) =>
                {
                    vec![id]
                }
                _ => state
                    .forwarded
                    .iter()
                    .filter(|(_, entry)| matches!(entry, Forwarded::ToolCall { .. }))
                    .map(|(id, _)| *id)
                    .collect(),
            };
            targets
                .into_iter()
                .filter_map(|id| match state.forwarded.remove(&id) {
                    Some(Forwarded::ToolCall { reply, .. }) => Some(reply),
                    _ => None,
                })
                .collect()
        };
        if waiters.is_empty() {
            self.log(format_args!(
                "an upstream message matched no request and no tool call was waiting: ignored ({} bytes)",
                raw.len()
            ));
        }
        for waiter in waiters {
            let _ = waiter.send(make(raw.clone()));
        }
    }

    fn upstream_response(&self, mut message: Value, raw: String, related: Option<u64>) {
        // INVARIANT (exact-correlation): only a JSON number equal to an id we sent matches.
        let matched = message
            .get("id")
            .filter(|id| id.is_u64())
            .and_then(Value::as_u64)
            .and_then(|id| self.state().forwarded.remove(&id).map(|entry| (id, entry)));
        let Some((upstream_id, entry)) = matched else {
            self.fail_calls(related, |raw| Reply::Uncorrelated { raw }, raw);
            return;
        };
        match entry {
            Forwarded::Internal { reply } => {
                let _ = reply.send(message);
            }
            Forwarded::Passthrough {
                client_id,
                method,
                modern,
            } => {
                if method == "initialize" && message.get("error").is_some() {
                    self.state().client_ids.remove(&id_text(&client_id));
                    message["id"] = client_id.clone();
                    self.bridge_initialize(client_id, message);
                    return;
                }
                if method == "tools/list" {
                    self.learn_tools(&message);
                    self.filter_tools(&mut message);
                    self.learn_param_headers(&message);
                    if let Some(result) = message.get_mut("result") {
                        crate::tasks::strip_tools(result);
                    }
                }
                if method == "initialize"
                    && let Some(capabilities) = message.pointer_mut("/result/capabilities")
                {
                    crate::tasks::strip_capabilities(capabilities);
                }
                if modern && let Some(result) = message.get_mut("result") {
                    era::complete_result(&method, result);
                }
                self.state().client_ids.remove(&id_text(&client_id));
                message["id"] = client_id.clone();
                self.to_client(message, Some(client_id));
            }
            Forwarded::ToolCall { reply, .. } => {
                let _ = reply.send(Reply::Message { message, raw });
            }
            Forwarded::GivenUp { method, why } => {
                self.log(format_args!(
                    "a late reply to upstream request {upstream_id} ({method}), given up on ({why}), was dropped"
                ));
            }
            Forwarded::Abandoned { effect_key, action } => {
                let success = message.get("result").is_some_and(|result| {
                    result.get("isError").and_then(Value::as_bool) != Some(true)
                });
                self.log(format_args!(
                    "a late reply to timed-out upstream request {upstream_id} ({action}) was kept as evidence and not delivered"
                ));
                self.shared.late.record(LateReply {
                    upstream_id,
                    action,
                    effect_key,
                    success,
                    raw: wire::truncated(&raw, EVIDENCE_BYTES),
                });
            }
        }
    }

    fn upstream_request(&self, mut message: Value, related: Option<u64>) {
        let upstream_id = message.get("id").cloned().unwrap_or(Value::Null);
        if self.state().era == Era::Modern {
            // A 2026-07-28 client takes no requests from a server: refuse for it, at once.
            self.refuse_upstream_request(upstream_id);
            return;
        }
        let routed = {
            let mut state = self.state();
            // Once the client's input has ended, nobody can answer it (checked under the lock
            // `Session::drain` takes, so no request slips in between).
            (!state.input_closed).then(|| {
                let id = format!("cs-up-{}", state.next_id);
                state.next_id += 1;
                state
                    .server_requests
                    .insert(id.clone(), upstream_id.clone());
                let client_related =
                    related.and_then(|related| match state.forwarded.get(&related) {
                        Some(Forwarded::ToolCall { client_id, .. })
                        | Some(Forwarded::Passthrough { client_id, .. }) => Some(client_id.clone()),
                        _ => None,
                    });
                (id, client_related)
            })
        };
        let Some((gateway_id, client_related)) = routed else {
            // Say so at once, so that the call asking it can finish.
            self.answer_unanswerable(upstream_id);
            return;
        };
        message["id"] = json!(gateway_id);
        self.to_client(message, client_related);
    }

    fn upstream_notification(&self, mut message: Value) {
        // The upstream's tools changed: what the gateway knows of them is stale. The next call
        // lists them again itself before it is decided (`tool_info`), whether or not the client
        // lists them, so a schema that changed voids the grants for the old one at once and the
        // call is a new action (found by a first-time user: a grant for the old schema ran the
        // changed tool when the client did not re-list).
        if wire::method(&message) == Some("notifications/tools/list_changed") {
            self.state().tools.clear();
        }
        if self.state().era == Era::Modern {
            self.modern_notification(message);
            return;
        }
        let related = match wire::method(&message) {
            Some("notifications/progress") => message
                .pointer("/params/progressToken")
                .and_then(|token| self.state().progress.get(&id_text(token)).cloned()),
            Some("notifications/cancelled") => {
                // The upstream cancels one of its own requests to the client: use our id.
                let upstream_id = message.pointer("/params/requestId").cloned();
                let ours = upstream_id.and_then(|upstream_id| {
                    let state = self.state();
                    state
                        .server_requests
                        .iter()
                        .find(|(_, theirs)| **theirs == upstream_id)
                        .map(|(ours, _)| ours.clone())
                });
                match ours {
                    Some(ours) => message["params"]["requestId"] = json!(ours),
                    None => return,
                }
                None
            }
            _ => None,
        };
        self.to_client(message, related);
    }

    /// Hide the tools this session's principal can never be allowed to call, or get approved
    /// ([`countersign::Policy::could_permit`]; unless configured not to, or in observe mode,
    /// where nothing is enforced). Every `tools/list` reply passes here, so a tool announced
    /// later (either era's `notifications/tools/list_changed`) is filtered the same way when
    /// the client lists again.
    fn filter_tools(&self, message: &mut Value) {
        let policy = &self.shared.policy;
        if !self.shared.config.hide_unpermitted_tools || policy.mode() == countersign::Mode::Observe
        {
            return;
        }
        let alias = &self.shared.config.alias;
        // No principal: every call is refused `no_principal`, so nothing is offered.
        let principal = self.principal.as_ref().map(Principal::as_str);
        if let Some(tools) = message
            .pointer_mut("/result/tools")
            .and_then(Value::as_array_mut)
        {
            tools.retain(|tool| {
                let name = tool.get("name").and_then(Value::as_str);
                match (name, principal) {
                    (Some(name), Some(principal)) => {
                        policy.could_permit(&format!("mcp.{alias}.{name}"), principal)
                    }
                    _ => false,
                }
            });
        }
    }

    /// Decide one `tools/call` and, if it may run, forward it; returns the response for the
    /// client. A call `cancel`led by the client before it is forwarded is not sent.
    async fn tool_call(
        self: &Arc<Self>,
        client_id: Value,
        mut params: Value,
        modern: Option<ModernCall>,
        cancel: Arc<CallCancel>,
    ) -> Value {
        let invalid = |message: &str| {
            wire::error_response(
                client_id.clone(),
                wire::error_object(codes::INVALID_PARAMS, message),
            )
        };
        // A 2026-07-28 retry carries the answers and the state of an earlier input-required
        // result: never forwarded as they came.
        let (request_state, input_responses) = match &modern {
            Some(_) => modern::take_round_trip(&mut params),
            None => (None, None),
        };
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return invalid("not executed: `tools/call` needs the tool's `name` as a string");
        };
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(object @ Value::Object(_)) => object.clone(),
            Some(_) => return invalid("not executed: `arguments` must be a JSON object"),
        };
        // The client may present the approval it is using (`_meta["countersign/approval"]`,
        // from an earlier -32090's `data.request_id`); it is never forwarded upstream.
        let mut meta = params.get("_meta").cloned();
        let presented = meta
            .as_mut()
            .and_then(Value::as_object_mut)
            .and_then(|meta| meta.remove(APPROVAL_META));
        if meta
            .as_ref()
            .is_some_and(|meta| meta.as_object().is_some_and(Map::is_empty))
        {
            meta = None;
        }
        let presented = match presented {
            None => None,
            Some(Value::String(text)) => match ApprovalId::parse(&text) {
                Ok(id) => Some(id),
                Err(problem) => {
                    return invalid(&format!(
                        "not executed: `_meta.{APPROVAL_META}` is not an approval id: {problem}"
                    ));
                }
            },
            Some(_) => {
                return invalid(&format!(
                    "not executed: `_meta.{APPROVAL_META}` must be a string such as `apr_…`"
                ));
            }
        };
        let action = format!("mcp.{}.{name}", self.shared.config.alias);
        let entry = self.shared.policy.entry(&action);
        let not_executed_on_error = entry.is_some_and(|entry| entry.not_executed_on_error());
        // Issue #27: the tool's input schema is part of the action, and its annotations can
        // only raise a pattern's `allow` (an unknown tool is taken as destructive).
        // (No entry: denied whatever the tool says, so it is not looked up.)
        let tool = match entry {
            Some(_) => self.tool_info(name).await,
            None => None,
        };
        if tool.as_ref().is_some_and(|tool| tool.task_required) {
            return wire::error_response(client_id, crate::tasks::required_refusal(name, &action));
        }
        let described = |request: ActionRequest| {
            let request = match tool.as_ref().and_then(|tool| tool.schema.as_ref()) {
                Some(schema) => request.with_tool_schema(schema),
                None => request,
            };
            match tool.as_ref().map_or(
                Some(countersign::policy::Raise::DestructiveHint),
                ToolInfo::raise,
            ) {
                Some(by) => request.with_raise(by),
                None => request,
            }
        };
        let evaluation = self
            .control
            .evaluate(&described(ActionRequest::new(&action, &arguments)))
            .ok();
        let effect_key = evaluation
            .as_ref()
            .and_then(|evaluation| evaluation.effect_key.as_ref())
            .map(|key| key.as_str().to_owned());
        let mut extra = Map::new();
        let mut modern = modern;
        if let Some(call) = modern.as_mut() {
            if !call.upstream_modern {
                modern::strip_meta_object(&mut meta);
            }
            let action_hash = evaluation
                .as_ref()
                .map(|evaluation| evaluation.action_hash.as_str().to_owned());
            match self.round_trip(
                call,
                &action,
                action_hash.as_deref(),
                request_state,
                input_responses,
                &mut extra,
            ) {
                Ok(()) => {}
                Err(error) => return wire::error_response(client_id, error),
            }
        }
        let note = CommitNoteSlot::new();
        let mut request =
            described(ActionRequest::new(&action, &arguments)).with_commit_note(note.clone());
        if let Some(wait) = self.shared.config.approval_wait {
            request = request.with_wait(wait);
        }
        if let Some(presented) = presented {
            request = request.with_approval(presented);
        }
        let call = UpstreamCall {
            inner: Arc::clone(self),
            tool: name.to_owned(),
            action: action.clone(),
            meta,
            extra,
            client_id: client_id.clone(),
            effect_key,
            not_executed_on_error,
            note,
            cancel,
        };
        let execution = self
            .control
            .execute(request, |canonical| call.run(canonical));
        let outcome = match modern.clone() {
            Some(call) => MODERN_CALL.scope(call, execution).await,
            None => execution.await,
        };
        match outcome {
            Ok(executed) => {
                let receipt = &executed.receipt;
                self.log(format_args!(
                    "tools/call {action}: committed (receipt {})",
                    receipt.seq
                ));
                let mut result = executed.value;
                attach_meta(
                    &mut result,
                    json!({
                        "outcome": "committed",
                        "receipt": {
                            "seq": receipt.seq,
                            "hash": receipt.hash,
                            "outcome": receipt.outcome.as_str(),
                            "action": receipt.action,
                            "action_hash": receipt.action_hash,
                            "effect_key": receipt.effect_key,
                        },
                    }),
                );
                // A note the call's executor left (a withheld result, case B50 (c)).
                if let (Some(detail), Some(shown)) = (
                    &receipt.detail,
                    result.pointer_mut("/_meta/countersign/receipt"),
                ) {
                    shown["detail"] = json!(detail);
                }
                if modern.is_some() {
                    era::mark_complete(&mut result);
                }
                json!({"jsonrpc": "2.0", "id": client_id, "result": result})
            }
            Err(ControlError::ApprovalRequired {
                request_id,
                action_hash,
                ..
            }) if modern.as_ref().is_some_and(|call| call.elicitation) => {
                let url = modern
                    .as_ref()
                    .and_then(|call| call.approval_url.as_deref())
                    .map(|base| crate::approval_page(base, request_id.as_str()));
                self.log(format_args!(
                    "tools/call {action}: approval_required (input requested in the result)"
                ));
                self.input_required(client_id, &action, &request_id, &action_hash, url)
                    .await
            }
            Err(error) => {
                self.log(format_args!("tools/call {action}: {}", error.reason()));
                // What the executor kept comes back with its error, never by a side channel.
                let kept = match &error {
                    ControlError::NotExecuted { evidence, .. }
                    | ControlError::OutcomeUnknown { evidence, .. } => {
                        evidence.as_ref().and_then(Evidence::read)
                    }
                    _ => None,
                };
                match kept {
                    Some(Evidence::ToolError(mut result)) => {
                        // The tool's own error result, as it sent it, marked with what
                        // Countersign recorded: the client's view and the record agree.
                        let outcome = match error.did_run() {
                            countersign::DidRun::No => "failed",
                            countersign::DidRun::Maybe => "ambiguous",
                        };
                        attach_meta(
                            &mut result,
                            json!({
                                "outcome": outcome,
                                "reason": error.reason(),
                                "message": error.to_string(),
                            }),
                        );
                        json!({"jsonrpc": "2.0", "id": client_id, "result": result})
                    }
                    Some(Evidence::Upstream(evidence)) => wire::error_response(
                        client_id,
                        codes::refusal(&error, &action, Some(&evidence)),
                    ),
                    None => {
                        let mut refusal = codes::refusal(&error, &action, None);
                        codes::add_command_flags(
                            &mut refusal,
                            self.shared.config.command_flags.as_deref(),
                        );
                        if let ControlError::ApprovalRequired { request_id, .. } = &error
                            && let Ok(Some(record)) =
                                self.control.store().approval(request_id).await
                        {
                            let display = countersign::display::render(&record, None);
                            codes::attach_display(&mut refusal, &display);
                            if let Some(base) = self.url_elicitation() {
                                let url = crate::approval_page(&base, request_id.as_str());
                                codes::require_url_elicitation(
                                    &mut refusal,
                                    request_id.as_str(),
                                    &url,
                                    &display,
                                );
                                self.watch_for_completion(request_id.clone());
                            }
                        }
                        wire::error_response(client_id, refusal)
                    }
                }
            }
        }
    }

    fn client_supports_elicitation(&self) -> Option<String> {
        let state = self.state();
        state.client_elicitation.then(|| state.client_name.clone())
    }

    /// The approval service's base URL, when this (handshake-era) session's approvals go there
    /// by URL-mode elicitation: `--approval-url` is set, inline approvals are on, and the
    /// client declared `elicitation.url`.
    fn url_elicitation(&self) -> Option<String> {
        let config = &self.shared.config;
        let declared = self.state().client_url_elicitation;
        (config.elicitation && declared)
            .then(|| config.approval_url.clone())
            .flatten()
    }

    /// Tell the client when request `request_id` is no longer pending
    /// (`notifications/elicitation/complete`, 2025-11-25), so it may retry at once; checks the
    /// store every second for at most the elicitation timeout. Informational only: the retry
    /// is decided by the kernel, whatever this says.
    fn watch_for_completion(self: &Arc<Self>, request_id: ApprovalId) {
        if !self.state().watched.insert(request_id.as_str().to_owned()) {
            return;
        }
        let session = Arc::downgrade(self);
        let wait = self.shared.config.elicitation_timeout;
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + wait;
            while tokio::time::Instant::now() < deadline {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                let Some(inner) = session.upgrade() else {
                    return;
                };
                let record = inner.control.store().approval(&request_id).await;
                let settled = match record {
                    Ok(Some(record)) => record.state != countersign::ApprovalState::Pending,
                    Ok(None) => true,
                    Err(_) => false,
                };
                if settled {
                    inner.state().watched.remove(request_id.as_str());
                    let done = wire::notification(
                        "notifications/elicitation/complete",
                        json!({"elicitationId": request_id.as_str()}),
                    );
                    inner.to_client(done, None);
                    return;
                }
            }
            if let Some(inner) = session.upgrade() {
                inner.state().watched.remove(request_id.as_str());
            }
        });
    }
}

fn attach_meta(result: &mut Value, countersign: Value) {
    if !result.is_object() {
        *result = json!({ "value": result.take() });
    }
    let meta = result
        .as_object_mut()
        .map(|object| object.entry("_meta").or_insert_with(|| json!({})));
    if let Some(Value::Object(meta)) = meta {
        meta.insert("countersign".into(), countersign);
    }
}

/// What the executor keeps about a failed call, carried by its error
/// ([`ExecutorError::with_evidence`]) and read back from the kernel's refusal.
enum Evidence {
    /// A tool result with `isError: true`, to show the client as it came.
    ToolError(Value),
    /// The raw upstream reply (or what happened), kept in the error's `data.upstream`.
    Upstream(Value),
}

impl Evidence {
    fn into_value(self) -> Value {
        match self {
            Evidence::ToolError(result) => json!({ "tool_error": result }),
            Evidence::Upstream(reply) => json!({ "upstream": reply }),
        }
    }

    /// The evidence this session's executor attached, if `value` is one.
    fn read(value: &Value) -> Option<Evidence> {
        if let Some(result) = value.get("tool_error") {
            return Some(Evidence::ToolError(result.clone()));
        }
        value
            .get("upstream")
            .map(|reply| Evidence::Upstream(reply.clone()))
    }
}

/// The executor: forwards one decided call and maps its reply, never guessing.
struct UpstreamCall {
    inner: Arc<Inner>,
    tool: String,
    action: String,
    meta: Option<Value>,
    /// `requestState` and `inputResponses` of the upstream's own round trip (2026-07-28).
    extra: Map<String, Value>,
    client_id: Value,
    effect_key: Option<String>,
    not_executed_on_error: bool,
    /// Where a call that completed says what became of its result ([`Reply::Withheld`]).
    note: CommitNoteSlot,
    /// Set once the client cancelled the call: then it is not sent.
    cancel: Arc<CallCancel>,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Unknown(String);

impl UpstreamCall {
    fn ambiguous(&self, detail: String) -> ExecutorError {
        let evidence = Evidence::Upstream(json!(detail)).into_value();
        ExecutorError::may_have_run(Unknown(detail)).with_evidence(evidence)
    }

    async fn run(self, canonical: Value) -> Result<Value, ExecutorError> {
        let inner = &self.inner;
        let (reply_sender, reply) = oneshot::channel();
        let upstream_id = {
            let mut state = inner.state();
            if self.cancel.requested.load(Ordering::SeqCst) {
                return Err(ExecutorError::not_executed(
                    "the client cancelled the call (`notifications/cancelled`) before it was sent upstream",
                ));
            }
            let id = state.next_id;
            state.next_id += 1;
            state.forwarded.insert(
                id,
                Forwarded::ToolCall {
                    client_id: self.client_id.clone(),
                    reply: reply_sender,
                },
            );
            state.client_ids.insert(id_text(&self.client_id), id);
            id
        };
        let mut params = json!({"name": self.tool, "arguments": canonical});
        if let Some(meta) = &self.meta {
            params["_meta"] = meta.clone();
        }
        for (key, value) in &self.extra {
            params[key.as_str()] = value.clone();
        }
        let message =
            json!({"jsonrpc": "2.0", "id": upstream_id, "method": "tools/call", "params": params});
        // 2026-07-28: mirror the parameters the tool's schema marks into their headers.
        let mirrored = match inner.state().param_headers.get(&self.tool) {
            Some(params) if era::declared_version(&message).is_some() => {
                era::param_header_values(&message["params"]["arguments"], params)
            }
            _ => Vec::new(),
        };
        if let Err(detail) = inner
            .upstream
            .send_with_headers(&message, Some(upstream_id), mirrored)
            .await
        {
            inner.state().forwarded.remove(&upstream_id);
            return Err(ExecutorError::not_executed(format!(
                "the call never reached the upstream: {detail}"
            )));
        }
        let timeout = inner.shared.config.call_timeout;
        let reply = match tokio::time::timeout(timeout, reply).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => return Err(self.ambiguous("the gateway lost track of the call".into())),
            Err(_) => {
                // INVARIANT (never-resent): a timed-out call is cancelled, never sent again.
                inner.state().forwarded.insert(
                    upstream_id,
                    Forwarded::Abandoned {
                        effect_key: self.effect_key.clone(),
                        action: self.action.clone(),
                    },
                );
                let sent = inner
                    .cancel_upstream(
                        upstream_id,
                        "tools/call",
                        "countersign gateway: no reply within the call timeout",
                    )
                    .await;
                return Err(self.ambiguous(format!(
                    "no reply within {timeout:?} to upstream request {upstream_id}; {}; a late reply is kept as evidence and never delivered",
                    if sent { "sent notifications/cancelled for it" } else { "could not send notifications/cancelled for it" }
                )));
            }
        };
        inner.state().client_ids.remove(&id_text(&self.client_id));
        match reply {
            Reply::Message { message, raw } => self.classify(message, raw),
            Reply::Withheld {
                bytes,
                digest,
                problem,
            } => {
                // Case B50 (c): the upstream answered with a result, so the call completed; the
                // result itself cannot be represented. Committed, never a retryable error; the
                // client is told so, and the receipt keeps the result's size and digest.
                self.note.set(format!(
                    "result not representable: {problem}: withheld from the client; {bytes} bytes, {digest}"
                ));
                Ok(json!({
                    "content": [{
                        "type": "text",
                        "text": format!(
                            "the call completed, but its result was withheld: it is not representable ({problem}); {bytes} bytes, {digest}: do not send the call again"
                        ),
                    }],
                    "isError": false,
                }))
            }
            Reply::Malformed { raw } => Err(self.ambiguous(format!(
                "the upstream sent a reply that is not a JSON-RPC message: {raw}"
            ))),
            Reply::Uncorrelated { raw } => Err(self.ambiguous(format!(
                "the upstream sent a reply whose id does not match request {upstream_id}: {raw}"
            ))),
            Reply::NotSent { detail } => {
                let evidence = Evidence::Upstream(json!(detail)).into_value();
                Err(ExecutorError::not_executed(format!(
                    "the call never reached the upstream: {detail}"
                ))
                .with_evidence(evidence))
            }
            Reply::Broken { detail } => Err(self.ambiguous(detail)),
        }
    }

    fn classify(&self, message: Value, raw: String) -> Result<Value, ExecutorError> {
        let raw = wire::truncated(&raw, EVIDENCE_BYTES);
        if let Some(error) = message.get("error") {
            let evidence = Evidence::Upstream(error.clone()).into_value();
            return Err(if self.not_executed_on_error {
                ExecutorError::not_executed(format!(
                    "the upstream answered an error and the policy marks this tool's errors as definite: {raw}"
                ))
            } else {
                ExecutorError::may_have_run(Unknown(format!(
                    "the upstream answered an error; whether the tool ran is unknown: {raw}"
                )))
            }
            .with_evidence(evidence));
        }
        let Some(result) = message.get("result").filter(|result| result.is_object()) else {
            return Err(self.ambiguous(format!("the upstream reply has no result object: {raw}")));
        };
        // 2026-07-28: an input-required result is the upstream asking for more before it runs
        // the tool ("Multi Round-Trip Requests"): not executed, and the client may send the
        // call again with the answers (a new attempt). Never `committed`.
        if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
            let evidence = Evidence::ToolError(result.clone()).into_value();
            return Err(ExecutorError::not_executed(format!(
                "the upstream asks for more input before it runs the tool (input_required): send the call again with the inputResponses and requestState it gave: {raw}"
            ))
            .with_evidence(evidence));
        }
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            let evidence = Evidence::ToolError(result.clone()).into_value();
            return Err(if self.not_executed_on_error {
                ExecutorError::not_executed(format!(
                    "the tool reported an error and the policy marks its errors as definite: {raw}"
                ))
            } else {
                ExecutorError::may_have_run(Unknown(format!(
                    "the tool reported an error (isError); its effect is unknown: {raw}"
                )))
            }
            .with_evidence(evidence));
        }
        Ok(result.clone())
    }
}

/// Inline approvals: asks the human through the client's elicitation support, showing the
/// exact action. An answer is bound server-side to the action hash by the kernel.
///
/// It counts as a human's answer only when the operator attested this client
/// ([`crate::GatewayConfig::attested_clients`]): then the approver is
/// `human:mcp-client:<client>`, asserted, through the `elicitation` channel, echoing the hash it
/// showed. From any other client an answer is handed to the kernel as
/// [`countersign::approver::Credential::Unverified`], which records it as a refused answer and
/// leaves the request pending.
struct Elicitation {
    session: Weak<Inner>,
    /// The name this session's client is attested under: its authenticated principal over
    /// HTTP, `stdio` on standard input.
    client: String,
    /// Did the operator name it with `--attested-client`?
    attested: bool,
}

#[async_trait::async_trait]
impl FrameworkInterrupt for Elicitation {
    fn framework(&self) -> &str {
        "mcp-elicitation"
    }

    fn carries_approved_arguments(&self) -> bool {
        false
    }

    fn channel(&self) -> countersign::approver::Channel {
        countersign::approver::Channel::Elicitation
    }

    async fn interrupt(&self, pending: PendingApproval) -> Result<ApprovalAnswer, InterruptError> {
        let Some(inner) = self.session.upgrade() else {
            return Err(InterruptError::Suspended);
        };
        // URL mode (issue #27): the person answers on the approval service's page, where they
        // sign in; nothing the client sends back about it counts, so it is not asked here.
        let url_mode = match MODERN_CALL.try_with(|call| call.approval_url.is_some()) {
            Ok(modern) => modern,
            Err(_) => inner.url_elicitation().is_some(),
        };
        if url_mode {
            return Err(InterruptError::Suspended);
        }
        let (reply, client_name) = match MODERN_CALL.try_with(ModernCall::clone) {
            // 2026-07-28: the answer, if any, came in the retried call's `inputResponses`
            // under a verified `requestState` naming this very request and action.
            Ok(call) => match call.answer_for(&pending) {
                Some(answer) => (json!({ "result": answer }), call.client_name),
                None => return Err(InterruptError::Suspended),
            },
            Err(_) => ask_over_elicitation(&inner, &pending).await?,
        };
        let action = reply.pointer("/result/action").and_then(Value::as_str);
        // The form asks for exactly one field (case B45): content with any other field is
        // not an answer to the question that was shown.
        let decision = reply
            .pointer("/result/content")
            .and_then(Value::as_object)
            .filter(|content| content.len() == 1)
            .and_then(|content| content.get("decision"))
            .and_then(Value::as_str);
        let decision = match (action, decision) {
            // The closed decision set (case B38); `reject` is read as `deny`.
            (Some("accept"), Some(text)) => match AnswerDecision::parse(text) {
                Ok(decision) => decision,
                Err(_) => return Err(InterruptError::Suspended),
            },
            (Some("decline"), _) => AnswerDecision::Deny,
            // Cancelled, an error, or an answer we cannot read: stays pending, out of band.
            _ => return Err(InterruptError::Suspended),
        };
        // Identity comes from the operator's attestation of this connection, never from the
        // client's self-reported name (which is only quoted in the refusal).
        let approver = if self.attested {
            Credential::Asserted(format!("human:mcp-client:{}", self.client))
        } else {
            Credential::Unverified {
                source: format!(
                    "the MCP client `{}` (reporting itself as `{}`)",
                    self.client,
                    client_name.escape_debug()
                ),
                reason: format!(
                    "its elicitation answers are not a human's until the operator attests it with `countersign gateway --attested-client {}`; the request stays pending: {}",
                    self.client,
                    match self.session.upgrade().and_then(|inner| inner
                        .shared
                        .config
                        .command_flags
                        .clone())
                    {
                        Some(flags) => format!(
                            "answer it with `countersign approve {}{flags}`",
                            pending.request_id
                        ),
                        None =>
                            "nothing else can answer it, since the gateway's store is `memory:`"
                                .to_owned(),
                    }
                ),
            }
        };
        Ok(ApprovalAnswer {
            decision,
            approver,
            shown_hash: Some(pending.action_hash.clone()),
            note: None,
            arguments: None,
        })
    }
}

/// Ask through `elicitation/create` on the client's connection (handshake era): the client's
/// reply and its self-reported name.
async fn ask_over_elicitation(
    inner: &Arc<Inner>,
    pending: &PendingApproval,
) -> Result<(Value, String), InterruptError> {
    let Some(client_name) = inner.client_supports_elicitation() else {
        return Err(InterruptError::Suspended);
    };
    let related = CURRENT_CALL.try_with(Value::clone).ok();
    let (sender, answer) = oneshot::channel();
    let id = {
        let mut state = inner.state();
        if state.input_closed {
            return Err(InterruptError::Suspended);
        }
        let id = format!("cs-approval-{}", state.next_id);
        state.next_id += 1;
        state.own_requests.insert(id.clone(), sender);
        id
    };
    // The one rendering every surface uses: the canonical arguments exactly as hashed
    // (secrets already redacted by the kernel), in full, with every character a person
    // could misread escaped (case B44).
    let text = codes::elicitation_message(&countersign::display::render_pending(pending, None));
    let request = json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "elicitation/create",
        "params": {
            "message": text,
            "requestedSchema": modern::approval_schema(&pending.action, pending.action_hash.as_str()),
        },
    });
    inner.to_client(request, related);
    let wait = inner.shared.config.elicitation_timeout;
    let reply = match tokio::time::timeout(wait, answer).await {
        Ok(Ok(reply)) => reply,
        _ => {
            inner.state().own_requests.remove(&id);
            return Err(InterruptError::Suspended);
        }
    };
    Ok((reply, client_name))
}

/// Late replies to timed-out calls, and the reconcile hook that reads them.
#[derive(Default)]
pub(crate) struct LateReplies {
    replies: Mutex<Vec<LateReply>>,
}

impl LateReplies {
    fn record(&self, reply: LateReply) {
        if let Ok(mut replies) = self.replies.lock() {
            replies.push(reply);
        }
    }

    pub(crate) fn all(&self) -> Vec<LateReply> {
        self.replies
            .lock()
            .map(|replies| replies.clone())
            .unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl ReconcileHook for LateReplies {
    async fn reconcile(
        &self,
        effect: &EffectRecord,
    ) -> Result<Reconciled, Box<dyn std::error::Error + Send + Sync>> {
        // A late success reply correlated to the timed-out request proves the effect
        // happened. Nothing else proves anything: an error or no reply stays unknown.
        let committed = self
            .all()
            .iter()
            .any(|reply| reply.success && reply.effect_key.as_deref() == Some(effect.key.as_str()));
        Ok(if committed {
            Reconciled::Committed
        } else {
            Reconciled::Unknown
        })
    }
}

impl Inner {
    fn learn_param_headers(&self, message: &Value) {
        let Some(tools) = message.pointer("/result/tools").and_then(Value::as_array) else {
            return;
        };
        let mut state = self.state();
        for tool in tools {
            if let (Some(name), Some(schema)) = (
                tool.get("name").and_then(Value::as_str),
                tool.get("inputSchema"),
            ) {
                state
                    .param_headers
                    .insert(name.to_owned(), era::param_headers(schema));
            }
        }
    }
}

impl Session {
    /// The `x-mcp-header` parameters of `tool`, if a `tools/list` naming it was relayed.
    pub(crate) fn param_headers(&self, tool: &str) -> Option<Vec<(String, Vec<String>)>> {
        self.inner.state().param_headers.get(tool).cloned()
    }

    /// Send `message` to the client as it is (a refusal of unreadable input).
    pub(crate) fn reply_directly(&self, message: Value) {
        self.inner.to_client(message, None);
    }

    /// Is the client's message `text`, over the `max`-byte cap and not read, a reply to a
    /// request of the upstream's or of the gateway's (`result` or `error`, no `method`, an id
    /// such a request is waiting under)? Then it is not answered (a reply gets no reply, found
    /// by a first-time user: it was refused as if it were a request); the request it answers is
    /// ended instead: the upstream's is answered -32603 saying why, the gateway's own approval
    /// question counts as unanswered (the approval request stays pending).
    pub(crate) async fn client_oversized_reply(
        &self,
        head: &[u8],
        tail: &[u8],
        bytes: usize,
        max: usize,
    ) -> bool {
        let seen = wire::partial_message(head, tail);
        if seen.has_method {
            return false;
        }
        let why = format!(
            "the client's reply was {bytes} bytes, larger than the gateway's {max}-byte cap for one message, and was not read"
        );
        let Some(id) = seen.id.as_ref().and_then(Value::as_str).map(str::to_owned) else {
            // A reply (it has `result` or `error`) to nothing the gateway can name gets no
            // reply either.
            if seen.is_response {
                self.inner.log(format_args!(
                    "{why}; it answers no request waiting: dropped"
                ));
            }
            return seen.is_response;
        };
        let (own, upstream_id) = {
            let mut state = self.inner.state();
            let own = state.own_requests.remove(&id);
            let upstream_id = if own.is_none() {
                state.server_requests.remove(&id)
            } else {
                None
            };
            (own, upstream_id)
        };
        if let Some(waiter) = own {
            let _ = waiter.send(wire::error_response(
                json!(id),
                wire::error_object(codes::INVALID_REQUEST, why),
            ));
            return true;
        }
        let Some(upstream_id) = upstream_id else {
            if seen.is_response {
                self.inner.log(format_args!(
                    "{why}; it answers no request waiting: dropped"
                ));
            }
            return seen.is_response;
        };
        self.inner.log(format_args!(
            "{why}; the upstream's request was answered with an error"
        ));
        let refusal =
            wire::error_response(upstream_id, wire::error_object(codes::INTERNAL_ERROR, why));
        let _ = self.inner.upstream.send(&refusal, None).await;
        true
    }
}
