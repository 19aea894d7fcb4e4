//! The Streamable HTTP front: the MCP exchange over POST (JSON and event-stream replies),
//! sessions, and each security refusal.

use std::sync::{Arc, Mutex};

use countersign::{ApprovalState, Policy, Store};
use countersign_gateway::{
    Gateway, GatewayConfig, GatewayError, HeaderPrincipal, HttpFrontConfig, PrincipalSource,
    Upstream,
};
use futures::StreamExt;
use serde_json::{Value, json};

use super::fake::{self, Behaviour, Fake};
use super::harness::{config, memory_store, policy};

const SECRET: &str = "0123456789abcdef0123456789abcdef-test-secret";

const POLICY: &str = "schema: countersign.policy/v1\nactions:\n  mcp.s.read:\n    decision: allow\n  mcp.s.write:\n    decision: approve\n";

/// A gateway serving HTTP on a free loopback port, each session with its own fake upstream.
pub struct Server {
    pub url: String,
    fakes: Arc<Mutex<Vec<Arc<Fake>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    pub fn upstream_calls(&self) -> usize {
        self.fakes
            .lock()
            .expect("fakes")
            .iter()
            .map(|fake| fake.calls())
            .sum()
    }
}

pub async fn serve(
    config: GatewayConfig,
    policy: Arc<Policy>,
    store: Arc<dyn Store>,
    front: HttpFrontConfig,
) -> Server {
    let gateway = Gateway::new(config, policy, store).expect("gateway");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let fakes: Arc<Mutex<Vec<Arc<Fake>>>> = Arc::default();
    let factory = fake_factory(&["read", "write", "locate"], Behaviour::Succeed, &fakes);
    let task = tokio::spawn(async move {
        let _ = gateway.serve_http(listener, front, factory).await;
    });
    Server {
        url: format!("http://{address}/mcp"),
        fakes,
        task,
    }
}

/// An upstream factory for `serve_http`: a fresh fake server `s` offering `tools` per session,
/// each kept in `fakes`.
pub fn fake_factory(
    tools: &'static [&'static str],
    behaviour: Behaviour,
    fakes: &Arc<Mutex<Vec<Arc<Fake>>>>,
) -> impl Fn() -> Result<Upstream, GatewayError> + Send + Sync + 'static {
    let made = Arc::clone(fakes);
    move || {
        let (upstream_side, fake_side) = tokio::io::duplex(1 << 20);
        let fake = fake::start("s", tools, behaviour, fake_side);
        made.lock().expect("fakes").push(fake);
        let (reader, writer) = tokio::io::split(upstream_side);
        Ok(Upstream::Io {
            reader: Box::new(reader),
            writer: Box::new(writer),
        })
    }
}

pub async fn default_server() -> Server {
    serve(
        config("s"),
        policy(POLICY),
        memory_store(),
        HttpFrontConfig::default(),
    )
    .await
}

/// One POST of `body` with the headers an MCP client sends, plus `extra`.
pub async fn post(
    url: &str,
    session: Option<&str>,
    body: &Value,
    extra: &[(&str, &str)],
) -> reqwest::Response {
    post_raw(url, session, body.to_string(), extra).await
}

async fn post_raw(
    url: &str,
    session: Option<&str>,
    body: String,
    extra: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = super::harness::http_client()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    request.send().await.expect("the gateway answers")
}

fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

fn initialize_body(capabilities: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": capabilities,
        "clientInfo": {"name": "http-test", "version": "0"}}})
}

/// Send `initialize`; the new session's id and the reply.
async fn initialize(url: &str, capabilities: Value, extra: &[(&str, &str)]) -> (String, Value) {
    let response = post(url, None, &initialize_body(capabilities), extra).await;
    assert_eq!(response.status(), 200);
    assert!(content_type(&response).starts_with("application/json"));
    let session = response
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .expect("ascii")
        .to_owned();
    (session, response.json_value().await)
}

/// Initialize a session and send `notifications/initialized`; returns the session id.
pub async fn open_session(url: &str, capabilities: Value, extra: &[(&str, &str)]) -> String {
    let (session, reply) = initialize(url, capabilities, extra).await;
    assert_eq!(reply["result"]["serverInfo"]["name"], "s", "{reply}");
    let initialized = post(
        url,
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        extra,
    )
    .await;
    assert_eq!(initialized.status(), 202);
    assert!(initialized.bytes().await.expect("body").is_empty());
    session
}

pub trait JsonValue {
    async fn json_value(self) -> Value;
}

impl JsonValue for reqwest::Response {
    async fn json_value(self) -> Value {
        let bytes = self.bytes().await.expect("body");
        serde_json::from_slice(&bytes).expect("a JSON body")
    }
}

/// Reads `data:` events off an event-stream response.
pub struct Events {
    stream: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl Events {
    pub fn new(response: reqwest::Response) -> Events {
        Events {
            stream: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next event's data as JSON, or `None` when the stream ends.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data: "))
                    .collect();
                if !data.is_empty() {
                    return Some(serde_json::from_str(&data.join("\n")).expect("event JSON"));
                }
                continue;
            }
            let chunk =
                tokio::time::timeout(std::time::Duration::from_secs(20), self.stream.next())
                    .await
                    .expect("the gateway streams within 20 s")?;
            self.buffer
                .push_str(std::str::from_utf8(&chunk.expect("chunk")).expect("utf-8"));
        }
    }
}

#[tokio::test]
async fn initialize_list_and_an_allowed_call_are_answered_as_json_in_one_session() {
    let server = default_server().await;
    let session = open_session(&server.url, json!({}), &[]).await;
    let listed = post(
        &server.url,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        &[],
    )
    .await;
    assert_eq!(listed.status(), 200);
    let listed = listed.json_value().await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(names, ["read", "write"]);

    let called = post(
        &server.url,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read", "arguments": {"path": "a"}}}),
        &[],
    )
    .await;
    assert_eq!(called.status(), 200);
    assert!(content_type(&called).starts_with("application/json"));
    let called = called.json_value().await;
    assert_eq!(called["id"], 3);
    assert_eq!(called["result"]["content"][0]["text"], "s did read");
    assert_eq!(
        called["result"]["_meta"]["countersign"]["receipt"]["outcome"],
        "committed"
    );
    assert_eq!(server.upstream_calls(), 1);

    // DELETE ends the session; its id is then unknown.
    let deleted = super::harness::http_client()
        .delete(&server.url)
        .header("mcp-session-id", &session)
        .send()
        .await
        .expect("delete");
    assert_eq!(deleted.status(), 200);
    let after = post(
        &server.url,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
        &[],
    )
    .await;
    assert_eq!(after.status(), 404);
}

#[tokio::test]
async fn a_call_needing_approval_streams_the_elicitation_then_the_result_over_sse() {
    let store = memory_store();
    // The operator attests this HTTP client by its authenticated principal.
    let mut attested = config("s");
    attested.attested_clients = vec!["agent:test".to_owned()];
    let server = serve(
        attested,
        policy(POLICY),
        Arc::clone(&store),
        HttpFrontConfig::default(),
    )
    .await;
    let session = open_session(&server.url, json!({"elicitation": {}}), &[]).await;
    let called = post(
        &server.url,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": "w1", "method": "tools/call", "params": {"name": "write", "arguments": {"path": "b", "text": "hi"}}}),
        &[],
    )
    .await;
    assert_eq!(called.status(), 200);
    assert!(content_type(&called).starts_with("text/event-stream"));
    let mut events = Events::new(called);
    let question = events.next().await.expect("the elicitation");
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let text = question["params"]["message"].as_str().expect("message");
    assert!(text.contains("  /path = \"b\"\n  /text = \"hi\""), "{text}");
    assert_eq!(server.upstream_calls(), 0);

    let answered = post(
        &server.url,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"decision": "approve"}}}),
        &[],
    )
    .await;
    assert_eq!(answered.status(), 202);
    let result = events.next().await.expect("the result");
    assert_eq!(result["id"], "w1", "{result}");
    assert_eq!(
        result["result"]["_meta"]["countersign"]["receipt"]["outcome"],
        "committed"
    );
    assert!(
        events.next().await.is_none(),
        "the stream ends after the reply"
    );
    assert_eq!(server.upstream_calls(), 1);
    let approvals = store
        .approvals(Some(ApprovalState::Consumed))
        .await
        .expect("approvals");
    assert_eq!(approvals.len(), 1);
}

#[tokio::test]
async fn a_disallowed_origin_gets_403_and_a_listed_one_is_served() {
    let front = HttpFrontConfig {
        allowed_origins: vec!["http://localhost:5173".to_owned()],
        ..HttpFrontConfig::default()
    };
    let server = serve(config("s"), policy(POLICY), memory_store(), front).await;
    let refused = post(
        &server.url,
        None,
        &initialize_body(json!({})),
        &[("origin", "http://evil.example")],
    )
    .await;
    assert_eq!(refused.status(), 403);
    let body = refused.json_value().await;
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("Origin is not allowed")),
        "{body}"
    );
    open_session(
        &server.url,
        json!({}),
        &[("origin", "http://localhost:5173")],
    )
    .await;
    assert_eq!(
        server.fakes.lock().expect("fakes").len(),
        1,
        "only the allowed one opened a session"
    );
}

#[tokio::test]
async fn a_foreign_host_header_gets_403_on_a_loopback_listener() {
    let server = default_server().await;
    let refused = post(
        &server.url,
        None,
        &initialize_body(json!({})),
        &[("host", "rebound.example:8931")],
    )
    .await;
    assert_eq!(refused.status(), 403);
    assert!(server.fakes.lock().expect("fakes").is_empty());
}

#[tokio::test]
async fn a_body_over_the_cap_gets_413_and_reaches_nothing() {
    let mut config = config("s");
    config.max_message_bytes = 1024;
    let server = serve(
        config,
        policy(POLICY),
        memory_store(),
        HttpFrontConfig::default(),
    )
    .await;
    let session = open_session(&server.url, json!({}), &[]).await;
    let big = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read", "arguments": {"path": "x".repeat(4096)}}});
    let refused = post(&server.url, Some(&session), &big, &[]).await;
    assert_eq!(refused.status(), 413);
    assert_eq!(refused.json_value().await["error"]["code"], -32600);
    assert_eq!(server.upstream_calls(), 0);
}

#[tokio::test]
async fn a_batch_gets_400_with_an_error_saying_batches_are_not_supported() {
    let server = default_server().await;
    let session = open_session(&server.url, json!({}), &[]).await;
    let batch = json!([
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read", "arguments": {}}}
    ]);
    let refused = post(&server.url, Some(&session), &batch, &[]).await;
    assert_eq!(refused.status(), 400);
    let body = refused.json_value().await;
    assert_eq!(body["error"]["code"], -32600);
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("batch requests are not supported")),
        "{body}"
    );
    assert_eq!(server.upstream_calls(), 0);
}

#[tokio::test]
async fn requests_without_a_session_or_with_an_unknown_one_or_a_wrong_accept_are_refused() {
    let server = default_server().await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    assert_eq!(post(&server.url, None, &list, &[]).await.status(), 400);
    assert_eq!(
        post(&server.url, Some("no-such-session"), &list, &[])
            .await
            .status(),
        404
    );
    let json_only = super::harness::http_client()
        .post(&server.url)
        .header("accept", "application/json")
        .header("content-type", "application/json")
        .body(initialize_body(json!({})).to_string())
        .send()
        .await
        .expect("answer");
    assert_eq!(json_only.status(), 406);
    let not_json = post_raw(&server.url, None, "{not json".to_owned(), &[]).await;
    assert_eq!(not_json.status(), 400);
    assert_eq!(not_json.json_value().await["error"]["code"], -32700);
}

#[tokio::test]
async fn a_non_loopback_listener_is_refused_unless_public_and_public_needs_an_authenticated_principal()
 {
    let any = tokio::net::TcpListener::bind("0.0.0.0:0")
        .await
        .expect("bind");
    let gateway = Gateway::new(config("s"), policy(POLICY), memory_store()).expect("gateway");
    let refused = gateway
        .serve_http(any, HttpFrontConfig::default(), || {
            Err(GatewayError::UpstreamNotReusable)
        })
        .await;
    assert!(
        matches!(refused, Err(GatewayError::PublicListen(_))),
        "{refused:?}"
    );

    let any = tokio::net::TcpListener::bind("0.0.0.0:0")
        .await
        .expect("bind");
    let public = HttpFrontConfig {
        public: true,
        ..HttpFrontConfig::default()
    };
    let refused = gateway
        .serve_http(any, public, || Err(GatewayError::UpstreamNotReusable))
        .await;
    assert!(
        matches!(refused, Err(GatewayError::PublicWithoutAuthentication)),
        "{refused:?}"
    );
}

#[tokio::test]
async fn the_principal_comes_only_from_the_authenticated_header_never_from_arguments() {
    let store = memory_store();
    let trusted = HeaderPrincipal::new("X-Countersign-Principal", SECRET).expect("header");
    let mut config = GatewayConfig::new("s", PrincipalSource::Header(trusted));
    config.log = false;
    let server = serve(
        config,
        policy(POLICY),
        Arc::clone(&store),
        HttpFrontConfig::default(),
    )
    .await;
    let bearer = format!("Bearer {SECRET}");
    let initialize = initialize_body(json!({}));
    let cases: [(&str, Vec<(&str, &str)>); 3] = [
        ("no secret", vec![("x-countersign-principal", "user:alice")]),
        (
            "a wrong secret",
            vec![
                (
                    "authorization",
                    "Bearer wrong-wrong-wrong-wrong-wrong-wrong",
                ),
                ("x-countersign-principal", "user:alice"),
            ],
        ),
        (
            "no principal header",
            vec![("authorization", bearer.as_str())],
        ),
    ];
    for (case, headers) in cases {
        let refused = post(&server.url, None, &initialize, &headers).await;
        assert_eq!(refused.status(), 401, "{case}");
    }
    assert!(
        server.fakes.lock().expect("fakes").is_empty(),
        "no session without a principal"
    );

    let alice = [
        ("authorization", bearer.as_str()),
        ("x-countersign-principal", "user:alice"),
    ];
    let session = open_session(&server.url, json!({}), &alice).await;
    // The model puts a principal in the arguments: it is only an argument.
    let paused = post(
        &server.url,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "write", "arguments": {"principal": "user:root"}}}),
        &alice,
    )
    .await
    .json_value()
    .await;
    assert_eq!(paused["error"]["code"], -32090, "{paused}");
    let pending = store
        .approvals(Some(ApprovalState::Pending))
        .await
        .expect("approvals");
    assert_eq!(
        pending
            .iter()
            .map(|record| record.principal.as_str())
            .collect::<Vec<_>>(),
        ["user:alice"]
    );

    // Another authenticated principal cannot use Alice's session.
    let bob = [
        ("authorization", bearer.as_str()),
        ("x-countersign-principal", "user:bob"),
    ];
    let hijack = post(
        &server.url,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}),
        &bob,
    )
    .await;
    assert_eq!(hijack.status(), 403);
    assert_eq!(server.upstream_calls(), 0);
}

#[test]
fn a_short_shared_secret_or_the_authorization_header_as_principal_header_is_refused() {
    assert!(matches!(
        HeaderPrincipal::new("x-countersign-principal", "short"),
        Err(GatewayError::BadPrincipalHeader(_))
    ));
    assert!(matches!(
        HeaderPrincipal::new("authorization", SECRET),
        Err(GatewayError::BadPrincipalHeader(_))
    ));
    let debug = format!("{:?}", HeaderPrincipal::new("x-p", SECRET).expect("ok"));
    assert!(!debug.contains(SECRET), "{debug}");
}

#[tokio::test]
async fn messages_unrelated_to_any_request_arrive_on_the_get_stream() {
    let server = default_server().await;
    let session = open_session(&server.url, json!({}), &[]).await;
    let listening = super::harness::http_client()
        .get(&server.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .expect("get");
    assert_eq!(listening.status(), 200);
    assert!(content_type(&listening).starts_with("text/event-stream"));
    let mut events = Events::new(listening);
    let fake = Arc::clone(&server.fakes.lock().expect("fakes")[0]);
    fake.add_tool("delete");
    let announced = events.next().await.expect("an event");
    assert_eq!(announced["method"], "notifications/tools/list_changed");
}

#[tokio::test]
async fn a_protocol_version_header_must_name_the_version_the_session_negotiated() {
    let server = default_server().await;
    let (session, reply) = initialize(&server.url, json!({}), &[]).await;
    let negotiated = reply["result"]["protocolVersion"]
        .as_str()
        .expect("the initialize reply names a protocol version")
        .to_owned();
    let list = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});

    let matching = post(
        &server.url,
        Some(&session),
        &list(2),
        &[("mcp-protocol-version", &negotiated)],
    )
    .await;
    assert_eq!(matching.status(), 200);

    let other = post(
        &server.url,
        Some(&session),
        &list(3),
        &[("mcp-protocol-version", "1999-01-01")],
    )
    .await;
    assert_eq!(other.status(), 400);
    let refusal = other.json_value().await;
    let message = refusal["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`1999-01-01`") && message.contains(&format!("`{negotiated}`")),
        "{refusal}"
    );

    // No header: served as the session negotiated (clients older than the header send none).
    let without = post(&server.url, Some(&session), &list(4), &[]).await;
    assert_eq!(without.status(), 200);
}

#[tokio::test]
async fn a_message_nested_too_deep_is_refused_as_invalid_params_under_its_id() {
    let server = default_server().await;
    let session = open_session(&server.url, json!({}), &[]).await;
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{{"x":{}1{}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let response = post_raw(&server.url, Some(&session), deep, &[]).await;
    assert_eq!(response.status(), 400);
    let refusal = response.json_value().await;
    // Issue #19: the strict reader refuses it (not serde_json's recursion limit), the fault is
    // inside `params`, and the request id is kept.
    assert_eq!(refusal["error"]["code"], -32602);
    assert_eq!(refusal["id"], 2);
    assert_eq!(refusal["error"]["data"]["reason"], "too_deep");
    let message = refusal["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("invalid params") && message.contains("64 levels"),
        "{refusal}"
    );
    assert_eq!(server.upstream_calls(), 0);
}
