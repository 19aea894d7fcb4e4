//! A fake MCP server over newline-delimited JSON, with injectable faults.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{Notify, mpsc};

/// How the fake answers `tools/call`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// A success result at once.
    Succeed,
    /// Nothing until the gateway cancels the request, then a (late) success.
    HoldUntilCancelled,
    /// Do the work, then an error reply carrying id 999.
    ErrorWithOtherId,
    /// Do the work, then an error reply with no id.
    ErrorWithoutId,
    /// Do the work, then an error reply whose id is the request's id as a string.
    ErrorWithStringId,
    /// Do the work, then a success reply carrying id 999.
    SuccessWithOtherId,
    /// 2026-07-28: ask for more input (an input-required result with `requestState`
    /// `up-state`) without running anything.
    InputRequired,
    /// Do the work, then a success reply whose result nests `levels` arrays deep (sent as raw
    /// text: no parser, no recursion on this side).
    DeepResult { levels: usize },
    /// Ask the client `roots/list` first (a request of the server's, id `up-ask-<call id>`),
    /// then, once answered, a success whose text is the answer (`{"result": …}` or
    /// `{"error": …}`).
    AskClientFirst,
}

/// The key of a message the fake's writer sends as the raw line it holds.
const RAW_LINE: &str = "__raw_line";

#[derive(Default)]
pub struct Seen {
    /// Every tools/call received: (upstream id, tool name, arguments).
    pub calls: Vec<(Value, String, Value)>,
    /// Every notifications/cancelled received: the requestId.
    pub cancelled: Vec<Value>,
    /// Every notification method received.
    pub notifications: Vec<String>,
    /// Every request method received, in order.
    pub requests: Vec<String>,
    /// The params of every `initialize` received.
    pub initialize: Vec<Value>,
    /// The `_meta` of every tools/call received (`null` when it had none).
    pub call_metas: Vec<Value>,
}

/// The fake's shared state.
pub struct Fake {
    pub name: String,
    pub seen: Mutex<Seen>,
    pub tools: Mutex<Vec<String>>,
    /// Per tool: `annotations` to list it with (issue #27).
    pub annotations: Mutex<HashMap<String, Value>>,
    /// Per tool: an `inputSchema` to list it with instead of `{"type": "object"}`.
    pub schemas: Mutex<HashMap<String, Value>>,
    pub behaviour: Mutex<Behaviour>,
    /// When set, `tools/list` is never answered (a server stuck listing).
    pub list_hangs: std::sync::atomic::AtomicBool,
    pub late_reply_sent: Notify,
    announce: mpsc::UnboundedSender<Value>,
}

impl Fake {
    /// Every `notifications/cancelled` received (their `requestId`s), once there is at least
    /// one: the fake reads them on its own task, so a test waits up to 10 s for the first.
    ///
    /// # Panics
    ///
    /// When none arrives within 10 s.
    pub async fn cancellations(&self) -> Vec<Value> {
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                let cancelled = self.seen.lock().expect("seen").cancelled.clone();
                if !cancelled.is_empty() {
                    return cancelled;
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the upstream is sent notifications/cancelled")
    }

    pub fn calls(&self) -> usize {
        self.seen.lock().expect("seen").calls.len()
    }

    /// Send `message` to the gateway as the upstream's own (a notification).
    pub fn notify(&self, message: Value) {
        let _ = self.announce.send(message);
    }

    /// Announce a new tool (tools/list_changed).
    pub fn add_tool(&self, tool: &str) {
        self.tools.lock().expect("tools").push(tool.to_owned());
        self.announce_list_changed();
    }

    /// List `tool` with `annotations` from now on.
    pub fn annotate(&self, tool: &str, annotations: Value) {
        self.annotations
            .lock()
            .expect("annotations")
            .insert(tool.to_owned(), annotations);
    }

    /// Change `tool`'s input schema and announce it (tools/list_changed).
    pub fn change_schema(&self, tool: &str, schema: Value) {
        self.schemas
            .lock()
            .expect("schemas")
            .insert(tool.to_owned(), schema);
        self.announce_list_changed();
    }

    fn announce_list_changed(&self) {
        let _ = self
            .announce
            .send(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    }

    /// `tool` as `tools/list` shows it.
    fn listed(&self, name: &str) -> Value {
        let mut entry = tool_entry(name);
        if let Some(schema) = self.schemas.lock().expect("schemas").get(name) {
            entry["inputSchema"] = schema.clone();
        }
        if let Some(annotations) = self.annotations.lock().expect("annotations").get(name) {
            entry["annotations"] = annotations.clone();
        }
        entry
    }
}

fn tool_entry(name: &str) -> Value {
    if name == "locate" {
        // A 2026-07-28 tool that mirrors a parameter into a header (`Mcp-Param-Region`).
        return json!({"name": name, "description": "fake locate", "inputSchema": {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}});
    }
    json!({"name": name, "description": format!("fake {name}"), "inputSchema": {"type": "object"}})
}

/// Start a fake MCP server on `stream` exposing `tools`.
pub fn start(name: &str, tools: &[&str], behaviour: Behaviour, stream: DuplexStream) -> Arc<Fake> {
    start_with_era(name, tools, behaviour, stream, false)
}

/// As [`start`]; with `modern`, a 2026-07-28 server: it answers `server/discover` listing only
/// 2026-07-28 and refuses `initialize`. Otherwise a 2025-06-18 server, which answers every
/// method it does not know (such as `server/discover`) with an empty result.
pub fn start_with_era(
    name: &str,
    tools: &[&str],
    behaviour: Behaviour,
    stream: DuplexStream,
    modern: bool,
) -> Arc<Fake> {
    let (announce, mut announcements) = mpsc::unbounded_channel::<Value>();
    let fake = Arc::new(Fake {
        name: name.to_owned(),
        seen: Mutex::new(Seen::default()),
        tools: Mutex::new(tools.iter().map(|tool| (*tool).to_owned()).collect()),
        annotations: Mutex::new(HashMap::new()),
        schemas: Mutex::new(HashMap::new()),
        behaviour: Mutex::new(behaviour),
        list_hangs: std::sync::atomic::AtomicBool::new(false),
        late_reply_sent: Notify::new(),
        announce,
    });
    let (reader, writer) = tokio::io::split(stream);
    let (out, mut outgoing) = mpsc::unbounded_channel::<Value>();
    tokio::spawn(async move {
        let mut writer = writer;
        loop {
            let message = tokio::select! {
                Some(message) = outgoing.recv() => message,
                Some(message) = announcements.recv() => message,
                else => return,
            };
            let mut line = match message.get(RAW_LINE).and_then(Value::as_str) {
                Some(raw) => raw.as_bytes().to_vec(),
                None => serde_json::to_vec(&message).expect("json"),
            };
            line.push(b'\n');
            if writer.write_all(&line).await.is_err() {
                return;
            }
        }
    });
    let state = Arc::clone(&fake);
    tokio::spawn(async move {
        let mut lines = BufReader::new(reader).lines();
        let mut held: Vec<Value> = Vec::new();
        // The server's own requests to the client: its id, and the call waiting on it.
        let mut asked: Vec<(Value, Value)> = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            let message: Value = serde_json::from_str(&line).expect("the gateway sends JSON");
            let id = message.get("id").cloned();
            let method = message["method"].as_str().unwrap_or_default().to_owned();
            if id.is_some() {
                let mut seen = state.seen.lock().expect("seen");
                seen.requests.push(method.clone());
                if method == "initialize" {
                    seen.initialize.push(message["params"].clone());
                }
                if method == "tools/call" {
                    seen.call_metas.push(message["params"]["_meta"].clone());
                }
            }
            match (method.as_str(), id) {
                ("server/discover", Some(id)) if modern => {
                    let _ = out.send(json!({"jsonrpc": "2.0", "id": id, "result": {
                        "resultType": "complete",
                        "supportedVersions": ["2026-07-28"],
                        "capabilities": {"tools": {"listChanged": true}},
                        "serverInfo": {"name": state.name, "version": "0"}}}));
                }
                ("initialize", Some(id)) if modern => {
                    let _ = out.send(json!({"jsonrpc": "2.0", "id": id, "error": {
                        "code": -32022, "message": "Unsupported protocol version",
                        "data": {"supported": ["2026-07-28"]}}}));
                }
                ("initialize", Some(id)) => {
                    let _ = out.send(json!({"jsonrpc": "2.0", "id": id, "result": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {"tools": {"listChanged": true}, "resources": {"subscribe": true}},
                        "serverInfo": {"name": state.name, "version": "0"}}}));
                }
                // A read the server never answers (a resource that hangs).
                ("resources/read", Some(_))
                    if message["params"]["uri"]
                        .as_str()
                        .is_some_and(|uri| uri.starts_with("hang://")) => {}
                ("resources/subscribe", Some(id))
                    if message["params"]["uri"]
                        .as_str()
                        .is_some_and(|uri| uri.starts_with("secret://")) =>
                {
                    let _ = out.send(json!({"jsonrpc": "2.0", "id": id, "error": {
                        "code": -32002, "message": "Resource not found"}}));
                }
                ("tools/list", Some(_))
                    if state.list_hangs.load(std::sync::atomic::Ordering::SeqCst) => {}
                ("tools/list", Some(id)) => {
                    let names = state.tools.lock().expect("tools").clone();
                    let tools: Vec<Value> = names.iter().map(|t| state.listed(t)).collect();
                    let _ =
                        out.send(json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}}));
                }
                ("tools/call", Some(id)) => {
                    let tool = message["params"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let arguments = message["params"]["arguments"].clone();
                    state.seen.lock().expect("seen").calls.push((
                        id.clone(),
                        tool.clone(),
                        arguments,
                    ));
                    let success = json!({"content": [{"type": "text", "text": format!("{} did {tool}", state.name)}]});
                    let error = json!({"code": -32603, "message": "refund failed"});
                    let behaviour = *state.behaviour.lock().expect("behaviour");
                    let reply = match behaviour {
                        Behaviour::Succeed => {
                            json!({"jsonrpc": "2.0", "id": id, "result": success})
                        }
                        Behaviour::HoldUntilCancelled => {
                            held.push(id);
                            continue;
                        }
                        Behaviour::AskClientFirst => {
                            let ask = json!(format!("up-ask-{id}"));
                            asked.push((ask.clone(), id));
                            let _ = out
                                .send(json!({"jsonrpc": "2.0", "id": ask, "method": "roots/list"}));
                            continue;
                        }
                        Behaviour::ErrorWithOtherId => {
                            json!({"jsonrpc": "2.0", "id": 999, "error": error})
                        }
                        Behaviour::ErrorWithoutId => json!({"jsonrpc": "2.0", "error": error}),
                        Behaviour::ErrorWithStringId => {
                            json!({"jsonrpc": "2.0", "id": id.to_string(), "error": error})
                        }
                        Behaviour::SuccessWithOtherId => {
                            json!({"jsonrpc": "2.0", "id": 999, "result": success})
                        }
                        Behaviour::InputRequired => {
                            json!({"jsonrpc": "2.0", "id": id, "result": {
                                "resultType": "input_required",
                                "inputRequests": {"confirm": {"method": "elicitation/create",
                                    "params": {"mode": "form", "message": "sure?",
                                        "requestedSchema": {"type": "object", "properties": {}}}}},
                                "requestState": "up-state"}})
                        }
                        Behaviour::DeepResult { levels } => {
                            let raw = format!(
                                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":{}1{}}}}}"#,
                                "[".repeat(levels),
                                "]".repeat(levels)
                            );
                            json!({ RAW_LINE: raw })
                        }
                    };
                    let _ = out.send(reply);
                }
                ("", Some(answered)) if asked.iter().any(|(ask, _)| *ask == answered) => {
                    let position = asked
                        .iter()
                        .position(|(ask, _)| *ask == answered)
                        .expect("asked");
                    let (_, call) = asked.remove(position);
                    let mut answer = message.clone();
                    if let Some(answer) = answer.as_object_mut() {
                        answer.remove("jsonrpc");
                        answer.remove("id");
                    }
                    let _ = out.send(json!({"jsonrpc": "2.0", "id": call, "result": {"content": [{"type": "text", "text": answer.to_string()}]}}));
                }
                ("notifications/cancelled", None) => {
                    let request_id = message["params"]["requestId"].clone();
                    state
                        .seen
                        .lock()
                        .expect("seen")
                        .cancelled
                        .push(request_id.clone());
                    if let Some(position) = held.iter().position(|id| *id == request_id) {
                        let id = held.remove(position);
                        let _ = out.send(json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "late"}]}}));
                        state.late_reply_sent.notify_one();
                    }
                }
                (method, None) => {
                    state
                        .seen
                        .lock()
                        .expect("seen")
                        .notifications
                        .push(method.to_owned());
                }
                (_, Some(id)) => {
                    let _ = out.send(json!({"jsonrpc": "2.0", "id": id, "result": {}}));
                }
            }
        }
    });
    fake
}
