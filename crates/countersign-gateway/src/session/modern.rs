//! A session's 2026-07-28 side: requests that carry their own version, identity and
//! capabilities in `_meta` (no `initialize`), `server/discover`, `subscriptions/listen`, and
//! approvals as multi round-trip requests (an input-required result whose MAC'd `requestState`
//! names the approval request and the action hash; the retried call carries the answer).
//!
//! To the upstream the gateway speaks the newest revision both support: it probes with
//! `server/discover` and speaks 2026-07-28 to an upstream that lists it; otherwise it performs
//! the handshake itself (`initialize` with 2025-11-25, then `notifications/initialized`) and
//! strips the modern `_meta` fields from what it forwards.

use std::sync::Arc;
use std::time::Duration;

use countersign::{ActionHash, ApprovalId, PendingApproval};
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

use super::{Forwarded, Inner, id_text};
use crate::request_state::{self, Claims};
use crate::{codes, era, wire};

/// How long an upstream has to answer the `server/discover` probe before it is taken for a
/// handshake-era server (which may ignore a method it does not know).
const DISCOVER_TIMEOUT: Duration = Duration::from_secs(5);

/// The key of the gateway's approval question in `inputRequests` and of its answer in
/// `inputResponses`.
pub(crate) const APPROVAL_INPUT: &str = "countersign/approval";

/// How the client of a session opened it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Era {
    /// Nothing yet.
    #[default]
    Unknown,
    /// With `initialize`: everything is relayed as the handshake revisions define.
    Legacy,
    /// With a 2026-07-28 request.
    Modern,
}

/// The upstream as the gateway found it for a 2026-07-28 client.
#[derive(Clone, Debug)]
pub(crate) struct UpstreamInfo {
    /// Does the upstream speak 2026-07-28?
    pub(crate) modern: bool,
    /// Its `server/discover` or `initialize` result (capabilities, serverInfo, instructions).
    pub(crate) init: Map<String, Value>,
}

/// What a 2026-07-28 `tools/call` brings to its decision.
#[derive(Clone, Debug)]
pub(crate) struct ModernCall {
    /// Ask for approval in the result (the client declared elicitation, and inline approvals
    /// are on); otherwise the out-of-band refusal.
    pub(crate) elicitation: bool,
    /// Forward with the modern `_meta` (the upstream speaks 2026-07-28).
    pub(crate) upstream_modern: bool,
    /// The client's self-reported name (quoted, never trusted).
    pub(crate) client_name: String,
    /// The answer the retried call carried, under the state it verified against.
    pub(crate) answer: Option<(Claims, Value)>,
    /// The approval service's base URL when approvals go there by URL-mode elicitation: the
    /// gateway has `--approval-url` and the request's capabilities declare `elicitation.url`.
    pub(crate) approval_url: Option<String>,
}

impl ModernCall {
    /// The answer about `pending`, if the verified state names this very request and action.
    pub(crate) fn answer_for(&self, pending: &PendingApproval) -> Option<Value> {
        let (claims, answer) = self.answer.as_ref()?;
        (claims.request_id == pending.request_id.as_str()
            && claims.action_hash == pending.action_hash.as_str())
        .then(|| answer.clone())
    }
}

/// Does a 2026-07-28 request's `_meta` capabilities declare URL-mode elicitation
/// (`elicitation.url`)?
fn declares_url_elicitation(message: &Value) -> bool {
    message
        .pointer("/params/_meta")
        .and_then(|meta| meta.get(era::META_CAPABILITIES))
        .and_then(|capabilities| capabilities.pointer("/elicitation/url"))
        .is_some_and(|value| !value.is_null())
}

/// Take `requestState` and `inputResponses` out of a retried call's params.
pub(crate) fn take_round_trip(params: &mut Value) -> (Option<Value>, Option<Value>) {
    match params.as_object_mut() {
        Some(params) => (
            params.remove("requestState"),
            params.remove("inputResponses"),
        ),
        None => (None, None),
    }
}

/// Add the per-request `meta` (version, client identity and capabilities) to a request a
/// handshake-era client sent, for a 2026-07-28 upstream; the client's own `_meta` keys stay.
pub(crate) fn add_meta(message: &mut Value, meta: &Map<String, Value>) {
    let Some(object) = message.as_object_mut() else {
        return;
    };
    let params = object.entry("params").or_insert_with(|| json!({}));
    let Some(params) = params.as_object_mut() else {
        return;
    };
    let own = params.entry("_meta").or_insert_with(|| json!({}));
    if let Some(own) = own.as_object_mut() {
        for (key, value) in meta {
            own.insert(key.clone(), value.clone());
        }
    }
}

/// The capabilities a handshake-era client is told for a 2026-07-28 upstream: the upstream's,
/// less what the gateway cannot deliver to it (`listChanged`: a 2026-07-28 server sends list
/// changes only on a `subscriptions/listen` stream; `subscribe`: `resources/subscribe` is not a
/// 2026-07-28 method).
fn bridged_capabilities(capabilities: Option<&Value>) -> Value {
    let mut capabilities = capabilities.cloned().unwrap_or_else(|| json!({}));
    crate::tasks::strip_capabilities(&mut capabilities);
    if let Some(object) = capabilities.as_object_mut() {
        for capability in object.values_mut() {
            if let Some(capability) = capability.as_object_mut() {
                capability.remove("listChanged");
                capability.remove("subscribe");
            }
        }
    }
    capabilities
}

/// Strip the modern per-request fields from a `_meta` object (for a handshake-era upstream).
pub(crate) fn strip_meta_object(meta: &mut Option<Value>) {
    let Some(value) = meta.take() else { return };
    let mut holder = json!({ "_meta": value });
    era::strip_modern_meta(&mut holder);
    *meta = holder.get("_meta").cloned();
}

/// The form the approval question asks for: one decision, `approve` or `deny`.
pub(crate) fn approval_schema(action: &str, action_hash: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "enum": ["approve", "deny"],
                "description": format!(
                    "approve or deny {} {action_hash}",
                    countersign::display::shown(action).text
                ),
            }
        },
        "required": ["decision"],
    })
}

fn round_trip_refusal(action: &str, why: &str) -> Value {
    json!({
        "code": codes::INVALID_PARAMS,
        "message": format!(
            "not executed: the `requestState` of this retried call to `{action}` {why}: send the call again without `requestState` and `inputResponses` to be asked again"
        ),
        "data": {
            "countersign": true,
            "reason": "invalid_request_state",
            "action": action,
            "did_run": "no",
            "may_retry": true,
        },
    })
}

impl Inner {
    /// Serve one 2026-07-28 request.
    pub(super) async fn modern_request(
        self: Arc<Self>,
        client_id: Value,
        method: String,
        message: Value,
    ) {
        if let Err(error) = era::check_request_meta(&message) {
            self.to_client(
                wire::error_response(client_id.clone(), error),
                Some(client_id),
            );
            return;
        }
        {
            let mut state = self.state();
            if state.era == Era::Unknown {
                state.era = Era::Modern;
            }
        }
        if let Some(token) = message.pointer("/params/_meta/progressToken") {
            self.state()
                .progress
                .insert(id_text(token), client_id.clone());
        }
        let info = match self.upstream_info().await {
            Ok(info) => info,
            Err(detail) => {
                self.refuse_unsent(
                    client_id,
                    &method,
                    message.get("params").unwrap_or(&Value::Null),
                    format!(
                        "not executed: the upstream cannot be reached: {detail}: nothing was sent for this request: send it again once the upstream is back"
                    ),
                );
                return;
            }
        };
        match method.as_str() {
            "server/discover" => {
                let reply = json!({"jsonrpc": "2.0", "id": client_id, "result": era::discover_result(&info.init)});
                self.to_client(reply, Some(client_id));
            }
            "subscriptions/listen" if !info.modern => {
                self.listen(client_id, &message, &info).await;
            }
            "tools/call" => {
                let call = ModernCall {
                    elicitation: self.shared.config.elicitation
                        && era::declares(&message, "elicitation"),
                    upstream_modern: info.modern,
                    client_name: message
                        .pointer("/params/_meta")
                        .and_then(|meta| meta.get(era::META_CLIENT_INFO))
                        .and_then(|info| info.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or("unnamed client")
                        .to_owned(),
                    answer: None,
                    approval_url: self
                        .shared
                        .config
                        .approval_url
                        .clone()
                        .filter(|_| self.shared.config.elicitation)
                        .filter(|_| declares_url_elicitation(&message)),
                };
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                self.spawn_call(client_id, params, Some(call));
            }
            _ => {
                let mut message = message;
                if !info.modern
                    && let Some(params) = message.get_mut("params")
                {
                    era::strip_modern_meta(params);
                }
                self.forward(client_id, method, message, true).await;
            }
        }
    }

    /// The upstream's era, learned once (see the module's documentation).
    async fn upstream_info(self: &Arc<Self>) -> Result<UpstreamInfo, String> {
        self.upstream_info
            .get_or_try_init(|| self.establish())
            .await
            .cloned()
    }

    /// Ask the upstream `server/discover`: its result when it lists 2026-07-28.
    async fn discover_modern(&self) -> Option<UpstreamInfo> {
        let reply = self
            .internal_request(
                "server/discover",
                json!({"_meta": era::own_meta()}),
                DISCOVER_TIMEOUT,
            )
            .await
            .ok()?;
        let result = reply.get("result").and_then(Value::as_object)?;
        let modern = result
            .get("supportedVersions")
            .and_then(Value::as_array)
            .is_some_and(|versions| versions.iter().any(|version| version == era::MODERN));
        if !modern {
            return None;
        }
        self.log(format_args!(
            "the upstream speaks {}: speaking it upstream",
            era::MODERN
        ));
        Some(UpstreamInfo {
            modern: true,
            init: result.clone(),
        })
    }

    async fn establish(&self) -> Result<UpstreamInfo, String> {
        if let Some(info) = self.discover_modern().await {
            return Ok(info);
        }
        let reply = self
            .internal_request(
                "initialize",
                json!({
                    "protocolVersion": era::LEGACY[0],
                    "capabilities": {},
                    "clientInfo": {"name": "countersign-gateway", "version": env!("CARGO_PKG_VERSION")},
                }),
                self.shared.config.call_timeout,
            )
            .await?;
        let Some(result) = reply.get("result").and_then(Value::as_object) else {
            return Err(format!(
                "it refused `initialize`: {}",
                wire::truncated(&reply.to_string(), 4096)
            ));
        };
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("(none)");
        self.log(format_args!(
            "the upstream speaks the handshake revision {version}: speaking it upstream"
        ));
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.upstream.send(&initialized, None).await?;
        Ok(UpstreamInfo {
            modern: false,
            init: result.clone(),
        })
    }

    /// Send the gateway's own request upstream and wait at most `wait` for its reply.
    pub(super) async fn internal_request(
        &self,
        method: &str,
        params: Value,
        wait: Duration,
    ) -> Result<Value, String> {
        let (sender, reply) = oneshot::channel();
        let id = {
            let mut state = self.state();
            let id = state.next_id;
            state.next_id += 1;
            state
                .forwarded
                .insert(id, Forwarded::Internal { reply: sender });
            id
        };
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if let Err(detail) = self.upstream.send(&message, Some(id)).await {
            self.state().forwarded.remove(&id);
            return Err(detail);
        }
        match tokio::time::timeout(wait, reply).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(format!("no usable reply to `{method}`")),
            Err(_) => {
                self.state().forwarded.remove(&id);
                // The upstream may stop working on it.
                let reason = format!("countersign gateway: no reply within {wait:?}");
                self.cancel_upstream(id, method, &reason).await;
                Err(format!("no reply to `{method}` within {wait:?}"))
            }
        }
    }

    /// A handshake-era client's `initialize` was refused by the upstream (`refusal`, already
    /// under the client's id). If the upstream speaks 2026-07-28 (its `server/discover` says
    /// so), the gateway answers `initialize` itself — the client's version if the gateway speaks
    /// it, else the newest handshake revision — and from then on forwards each of the client's
    /// requests with the per-request `_meta` built from its `initialize`; otherwise the client
    /// gets the refusal as it came.
    pub(super) fn bridge_initialize(&self, client_id: Value, refusal: Value) {
        let Some(inner) = self.this.upgrade() else {
            return;
        };
        inner.state().bridging = true;
        tokio::spawn(async move {
            let _bridging = Bridging(Arc::clone(&inner));
            // Only the probe: an upstream that does not speak 2026-07-28 refused the client's
            // own handshake, and a handshake of the gateway's would open a session nobody uses
            // (found by a first-time user: a second `initialize` followed every refused one).
            let known = inner.upstream_info.get().cloned();
            let info = match known {
                Some(info) => Some(info),
                None => match inner.discover_modern().await {
                    Some(info) => {
                        let _ = inner.upstream_info.set(info.clone());
                        Some(info)
                    }
                    None => None,
                },
            };
            let info = match info {
                Some(info) if info.modern => info,
                _ => {
                    inner.state().handshake_refused = Some(super::detail_of(&refusal));
                    inner.to_client(refusal, Some(client_id));
                    return;
                }
            };
            let params = inner.state().initialize.clone().unwrap_or(Value::Null);
            let requested = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let version = if era::LEGACY.contains(&requested) {
                requested
            } else {
                era::LEGACY[0]
            };
            let mut meta = Map::new();
            meta.insert(era::META_VERSION.into(), json!(era::MODERN));
            meta.insert(
                era::META_CLIENT_INFO.into(),
                params
                    .get("clientInfo")
                    .cloned()
                    .unwrap_or_else(|| json!({"name": "unnamed client", "version": "0"})),
            );
            meta.insert(
                era::META_CAPABILITIES.into(),
                params
                    .get("capabilities")
                    .filter(|capabilities| capabilities.is_object())
                    .cloned()
                    .unwrap_or_else(|| json!({})),
            );
            inner.state().bridged = Some(meta);
            let mut result = Map::new();
            result.insert("protocolVersion".into(), json!(version));
            result.insert(
                "capabilities".into(),
                bridged_capabilities(info.init.get("capabilities")),
            );
            for key in ["serverInfo", "instructions"] {
                if let Some(value) = info.init.get(key) {
                    result.insert(key.into(), value.clone());
                }
            }
            inner.log(format_args!(
                "the upstream speaks {} only: answered the client's `initialize` ({version}) for it and forward its requests in {}",
                era::MODERN,
                era::MODERN
            ));
            let reply = json!({"jsonrpc": "2.0", "id": client_id, "result": result});
            inner.to_client(reply, Some(client_id));
        });
    }

    /// A notification from the upstream for a 2026-07-28 client.
    pub(super) fn modern_notification(&self, mut message: Value) {
        let method = wire::method(&message).unwrap_or_default().to_owned();
        if method == "notifications/progress" {
            let related = message
                .pointer("/params/progressToken")
                .and_then(|token| self.state().progress.get(&id_text(token)).cloned());
            self.to_client(message, related);
            return;
        }
        // On a 2026-07-28 upstream's listen stream: it names the upstream's listen request.
        let subscription = message
            .pointer("/params/_meta")
            .and_then(|meta| meta.get(era::META_SUBSCRIPTION))
            .and_then(Value::as_u64);
        if let Some(subscription) = subscription {
            let client_id = match self.state().forwarded.get(&subscription) {
                Some(Forwarded::Passthrough { client_id, .. }) => Some(client_id.clone()),
                _ => None,
            };
            if let Some(client_id) = client_id {
                message["params"]["_meta"][era::META_SUBSCRIPTION] = client_id.clone();
                self.to_client(message, Some(client_id));
            }
            return;
        }
        if method == "notifications/resources/updated" {
            let uri = message
                .pointer("/params/uri")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let listeners: Vec<Value> = self
                .state()
                .listeners
                .values()
                .filter(|listener| listener.resources.contains(&uri))
                .map(|listener| listener.id.clone())
                .collect();
            for id in listeners {
                let mut copy = message.clone();
                copy["params"]["_meta"] = json!({ era::META_SUBSCRIPTION: id });
                self.to_client(copy, Some(id));
            }
            return;
        }
        let kind = match method.as_str() {
            "notifications/tools/list_changed" => "toolsListChanged",
            "notifications/prompts/list_changed" => "promptsListChanged",
            "notifications/resources/list_changed" => "resourcesListChanged",
            _ => {
                self.to_client(message, None);
                return;
            }
        };
        let listeners: Vec<Value> = self
            .state()
            .listeners
            .values()
            .filter(|listener| listener.kinds.iter().any(|wanted| wanted == kind))
            .map(|listener| listener.id.clone())
            .collect();
        for id in listeners {
            let mut copy = message.clone();
            if !copy.get("params").is_some_and(Value::is_object) {
                copy["params"] = json!({});
            }
            copy["params"]["_meta"] = json!({ era::META_SUBSCRIPTION: id });
            self.to_client(copy, Some(id));
        }
    }

    /// Answer a request the upstream sent to a 2026-07-28 client, which takes none.
    pub(super) fn refuse_upstream_request(&self, upstream_id: Value) {
        let refusal = wire::error_response(
            upstream_id,
            wire::error_object(
                codes::METHOD_NOT_FOUND,
                format!(
                    "the client speaks MCP {} and takes no requests from a server: return an input-required result instead",
                    era::MODERN
                ),
            ),
        );
        let link = Arc::clone(&self.upstream);
        tokio::spawn(async move {
            let _ = link.send(&refusal, None).await;
        });
    }

    /// Check a retried call's round trip: the gateway's own `requestState` must verify (MAC,
    /// principal, expiry, this action's hash) before its answer counts; the upstream's own
    /// state and answers pass on to a 2026-07-28 upstream. `Err` is the error object to answer.
    pub(super) fn round_trip(
        &self,
        call: &mut ModernCall,
        action: &str,
        action_hash: Option<&str>,
        request_state: Option<Value>,
        mut input_responses: Option<Value>,
        extra: &mut Map<String, Value>,
    ) -> Result<(), Value> {
        let ours = request_state
            .as_ref()
            .and_then(Value::as_str)
            .filter(|state| state.starts_with(request_state::PREFIX));
        let answer = input_responses
            .as_mut()
            .and_then(Value::as_object_mut)
            .and_then(|responses| responses.remove(APPROVAL_INPUT));
        if ours.is_none() && answer.is_none() {
            if call.upstream_modern {
                if let Some(state) = request_state {
                    extra.insert("requestState".into(), state);
                }
                if let Some(responses) = input_responses {
                    extra.insert("inputResponses".into(), responses);
                }
            }
            return Ok(());
        }
        let Some(state) = ours else {
            return Err(round_trip_refusal(
                action,
                "is missing or not the gateway's, yet the call carries an answer to its approval question",
            ));
        };
        let principal = self
            .principal
            .as_ref()
            .map(|principal| principal.as_str().to_owned())
            .unwrap_or_default();
        let Some(action_hash) = action_hash else {
            return Err(round_trip_refusal(
                action,
                "cannot be checked: the call cannot be evaluated",
            ));
        };
        match self.shared.state_key.verify(state, &principal, action_hash) {
            Ok(claims) => {
                call.answer = answer.map(|answer| (claims, answer));
                Ok(())
            }
            Err(why) => {
                self.log(format_args!(
                    "tools/call {action}: refused a requestState that does not verify ({why})"
                ));
                Err(round_trip_refusal(
                    action,
                    &format!("does not verify: {why}"),
                ))
            }
        }
    }

    /// The input-required result that asks a 2026-07-28 client for approval of `request_id`.
    pub(super) async fn input_required(
        &self,
        client_id: Value,
        action: &str,
        request_id: &ApprovalId,
        action_hash: &ActionHash,
        url: Option<String>,
    ) -> Value {
        let record = self
            .control
            .store()
            .approval(request_id)
            .await
            .ok()
            .flatten();
        let display = record
            .as_ref()
            .map(|record| countersign::display::render(record, None));
        let message = match &display {
            Some(display) => codes::elicitation_message(display),
            None => format!(
                "Countersign: approve this exact action? {} {action_hash}",
                countersign::display::shown(action).text
            ),
        };
        let principal = self
            .principal
            .as_ref()
            .map(|principal| principal.as_str().to_owned())
            .unwrap_or_default();
        let state = self.shared.state_key.issue(&Claims {
            principal,
            request_id: request_id.as_str().to_owned(),
            action_hash: action_hash.as_str().to_owned(),
            expires: request_state::expires_in(self.shared.config.elicitation_timeout),
        });
        let mut countersign = json!({
            "reason": "approval_required",
            "action": action,
            "request_id": request_id.as_str(),
            "action_hash": action_hash.as_str(),
        });
        if let Some(flags) = &self.shared.config.command_flags {
            countersign["approve_with"] = json!(format!("countersign approve {request_id}{flags}"));
        }
        if let Some(display) = &display {
            countersign["display"] = json!(display.to_text());
        }
        // URL mode: the person goes to the approval service's page; the client's answer only
        // says whether it was opened, and never counts as a decision.
        let params = match &url {
            Some(url) => {
                countersign["approval_url"] = json!(url);
                json!({
                    "mode": "url",
                    "elicitationId": request_id.as_str(),
                    "url": url,
                    "message": codes::url_elicitation_message(&message),
                })
            }
            None => json!({
                "mode": "form",
                "message": message,
                "requestedSchema": approval_schema(action, action_hash.as_str()),
            }),
        };
        json!({"jsonrpc": "2.0", "id": client_id, "result": {
            "resultType": "input_required",
            "inputRequests": {
                APPROVAL_INPUT: {
                    "method": "elicitation/create",
                    "params": params,
                },
            },
            "requestState": state,
            "_meta": {"countersign": countersign},
        }})
    }
}

/// Ends [`Inner::bridge_initialize`]'s part of the handshake however the bridging task ends:
/// requests held behind `initialize` look again.
struct Bridging(Arc<Inner>);

impl Drop for Bridging {
    fn drop(&mut self) {
        self.0.state().bridging = false;
        self.0.progress.notify_waiters();
    }
}
