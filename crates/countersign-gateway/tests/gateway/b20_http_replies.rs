//! B20: Streamable HTTP replies read by transport, never guessed: a streamed success with
//! progress is committed, an empty 202 for a notification is not an error, a success under an
//! older protocol revision is committed, and a cut stream or a wrong-id final event is
//! ambiguous.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use countersign::EffectState;
use countersign_gateway::{Gateway, Upstream};
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::harness::{config, memory_store, policy, refusal};

#[derive(Clone, Copy, Debug)]
enum Reply {
    /// text/event-stream: two progress events, then the success for the request's id.
    StreamedSuccess,
    /// application/json success without `resultType`, under revision 2024-11-05.
    OlderRevisionSuccess,
    /// text/event-stream: one progress event, then the stream ends.
    EarlyEof,
    /// text/event-stream: a final event carrying another id.
    WrongIdFinalEvent,
}

#[derive(Default)]
struct Seen {
    calls: usize,
    notifications: Vec<String>,
}

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|event| format!("event: message\ndata: {event}\n\n"))
        .collect()
}

async fn serve_fake(reply: Reply, seen: Arc<Mutex<Seen>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                        let seen = Arc::clone(&seen);
                        async move {
                            if request.method() == hyper::Method::GET {
                                // No listening stream on this fake.
                                return Ok::<_, Infallible>(
                                    Response::builder()
                                        .status(405)
                                        .body(Full::new(Bytes::new()))
                                        .expect("405"),
                                );
                            }
                            let body = request
                                .into_body()
                                .collect()
                                .await
                                .map(|body| body.to_bytes())
                                .unwrap_or_default();
                            let message: Value =
                                serde_json::from_slice(&body).unwrap_or(Value::Null);
                            Ok::<_, Infallible>(answer(reply, &message, &seen))
                        }
                    });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    url
}

fn answer(reply: Reply, message: &Value, seen: &Mutex<Seen>) -> Response<Full<Bytes>> {
    let respond = |status: u16, content_type: &str, body: String| {
        Response::builder()
            .status(status)
            .header("content-type", content_type)
            .header("mcp-session-id", "fake-session")
            .body(Full::new(Bytes::from(body)))
            .expect("response")
    };
    let id = message.get("id").cloned();
    let method = message["method"].as_str().unwrap_or_default();
    let Some(id) = id else {
        seen.lock()
            .expect("seen")
            .notifications
            .push(method.to_owned());
        return respond(202, "application/json", String::new());
    };
    match method {
        "initialize" => {
            let version = match reply {
                Reply::OlderRevisionSuccess => "2024-11-05",
                _ => "2025-06-18",
            };
            respond(200, "application/json", json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "fake-http", "version": "0"}}}).to_string())
        }
        "tools/call" => {
            seen.lock().expect("seen").calls += 1;
            let token = message
                .pointer("/params/_meta/progressToken")
                .cloned()
                .unwrap_or(json!("none"));
            let progress = |done: u32| json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": done, "total": 2}});
            let success = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "sent"}]}});
            match reply {
                Reply::StreamedSuccess => respond(
                    200,
                    "text/event-stream",
                    sse(&[progress(1), progress(2), success]),
                ),
                Reply::OlderRevisionSuccess => {
                    respond(200, "application/json", success.to_string())
                }
                Reply::EarlyEof => respond(200, "text/event-stream", sse(&[progress(1)])),
                Reply::WrongIdFinalEvent => respond(
                    200,
                    "text/event-stream",
                    sse(&[
                        progress(1),
                        json!({"jsonrpc": "2.0", "id": 999, "result": {"content": []}}),
                    ]),
                ),
            }
        }
        _ => respond(
            200,
            "application/json",
            json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string(),
        ),
    }
}

struct Run {
    replies: Vec<Value>,
    effects: Vec<countersign::EffectRecord>,
    seen: Arc<Mutex<Seen>>,
}

/// Start a stdio-fronted gateway over the fake HTTP upstream; initialize, send one
/// notification, call `send_mail` once with a progress token; collect what the client got.
async fn run(reply: Reply) -> Run {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let url = serve_fake(reply, Arc::clone(&seen)).await;
    let store = memory_store();
    let policy = policy(
        "schema: countersign.policy/v1\nactions:\n  mcp.mail.send_mail:\n    effect: \"mail:{to}\"\n    decision: allow\n",
    );
    let gateway = Gateway::new(config("mail"), policy, Arc::clone(&store)).expect("gateway");
    let (client_side, gateway_side) = tokio::io::duplex(1 << 20);
    let (gateway_reader, gateway_writer) = tokio::io::split(gateway_side);
    let task = tokio::spawn(async move {
        let _ = gateway
            .serve_io(gateway_reader, gateway_writer, Upstream::Url(url))
            .await;
    });
    let (reader, mut writer) = tokio::io::split(client_side);
    let mut lines = BufReader::new(reader).lines();
    let mut replies = Vec::new();
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "send_mail", "arguments": {"to": "bob"}, "_meta": {"progressToken": "p1"}}}),
    ] {
        let mut line = serde_json::to_vec(&message).expect("json");
        line.push(b'\n');
        writer.write_all(&line).await.expect("write");
        if message.get("id").is_none() {
            continue;
        }
        loop {
            let line = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
                .await
                .expect("an answer within 20 s")
                .expect("read")
                .expect("open");
            let received: Value = serde_json::from_str(&line).expect("json");
            let done = received.get("id") == message.get("id");
            replies.push(received);
            if done {
                break;
            }
        }
    }
    task.abort();
    let effects = store.effects(None).await.expect("effects");
    Run {
        replies,
        effects,
        seen,
    }
}

#[tokio::test]
async fn streamed_success_with_progress_is_committed_and_progress_arrives_first() {
    let run = run(Reply::StreamedSuccess).await;
    let methods: Vec<&str> = run.replies[1..]
        .iter()
        .map(|reply| reply["method"].as_str().unwrap_or("(response)"))
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/progress",
            "notifications/progress",
            "(response)"
        ]
    );
    let last = run.replies.last().expect("reply");
    assert_eq!(last["result"]["content"][0]["text"], "sent", "{last}");
    assert_eq!(
        last["result"]["_meta"]["countersign"]["outcome"],
        "committed"
    );
    assert_eq!(run.effects[0].state, EffectState::Committed);
}

#[tokio::test]
async fn empty_202_for_a_notification_is_no_error_and_creates_no_effect() {
    let run = run(Reply::StreamedSuccess).await;
    assert_eq!(
        run.seen.lock().expect("seen").notifications,
        ["notifications/initialized"]
    );
    // Nothing came back for the notification: every message the client got answers a request
    // or is progress for one.
    assert!(
        run.replies
            .iter()
            .all(|reply| reply.get("id").is_some() || reply["method"] == "notifications/progress")
    );
    assert_eq!(
        run.effects.len(),
        1,
        "only the tool call has an effect record"
    );
}

#[tokio::test]
async fn success_under_an_older_protocol_revision_is_committed() {
    let run = run(Reply::OlderRevisionSuccess).await;
    assert_eq!(run.replies[0]["result"]["protocolVersion"], "2024-11-05");
    let last = run.replies.last().expect("reply");
    assert_eq!(
        last["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{last}"
    );
    assert_eq!(run.effects[0].state, EffectState::Committed);
}

#[tokio::test]
async fn stream_cut_before_the_reply_is_ambiguous() {
    let run = run(Reply::EarlyEof).await;
    let last = run.replies.last().expect("reply");
    assert_eq!(
        refusal(last),
        (-32097, "outcome_unknown".to_owned()),
        "{last}"
    );
    assert_eq!(run.effects[0].state, EffectState::Ambiguous);
    assert_eq!(run.seen.lock().expect("seen").calls, 1);
}

#[tokio::test]
async fn final_event_with_another_id_is_ambiguous() {
    let run = run(Reply::WrongIdFinalEvent).await;
    let last = run.replies.last().expect("reply");
    assert_eq!(
        refusal(last),
        (-32097, "outcome_unknown".to_owned()),
        "{last}"
    );
    assert!(
        last["error"]["data"]["upstream"]
            .as_str()
            .unwrap_or_default()
            .contains("999"),
        "{last}"
    );
    assert_eq!(run.effects[0].state, EffectState::Ambiguous);
}
