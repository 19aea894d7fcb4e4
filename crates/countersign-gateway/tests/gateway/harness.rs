//! A gateway in process, a raw JSON-RPC client, and a fake upstream.

use std::sync::Arc;
use std::time::Duration;

use countersign::store::MemoryStore;
use countersign::{Policy, Principal, Store};
use countersign_gateway::{Gateway, GatewayConfig, GatewayError, PrincipalSource, Upstream};
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};

use super::fake::{self, Behaviour, Fake};

pub fn policy(yaml: &str) -> Arc<Policy> {
    Arc::new(Policy::from_yaml_str(yaml, None).expect("policy loads"))
}

pub fn memory_store() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

pub fn config(alias: &str) -> GatewayConfig {
    let mut config = GatewayConfig::new(
        alias,
        PrincipalSource::Fixed(Principal::new("agent:test").expect("principal")),
    );
    config.log = false;
    config
}

/// A raw JSON-RPC client speaking to a gateway.
pub struct Client {
    writer: WriteHalf<DuplexStream>,
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    next_id: i64,
    /// Every message received, in order.
    pub received: Vec<Value>,
}

impl Client {
    pub async fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).expect("json");
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .await
            .expect("write to gateway");
    }

    /// Send raw bytes as one line, exactly as given (no JSON check): what a faulty client sends.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        let mut line = bytes.to_vec();
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .await
            .expect("write to gateway");
    }

    /// The next message from the gateway.
    pub async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .expect("the gateway answers within 20 s")
            .expect("read")
            .expect("the gateway is still connected");
        let message: Value = serde_json::from_str(&line).expect("the gateway sends JSON");
        self.received.push(message.clone());
        message
    }

    /// Send a request with `id` and wait for its response (other messages are kept).
    pub async fn request_with_id(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let message = self.next().await;
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                return message;
            }
        }
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.request_with_id(id, method, params).await
    }

    /// End the gateway's input, as an MCP host does to stop a stdio server.
    pub async fn close_input(&mut self) {
        self.writer
            .shutdown()
            .await
            .expect("close the gateway's input");
    }

    /// The next message, or `None` once the gateway has closed its output.
    pub async fn next_or_end(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .expect("the gateway answers or ends within 20 s")
            .expect("read")?;
        let message: Value = serde_json::from_str(&line).expect("the gateway sends JSON");
        self.received.push(message.clone());
        Some(message)
    }

    pub async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
    }

    pub async fn initialize(&mut self, capabilities: Value) {
        let reply = self
            .request(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": {"name": "test", "version": "0"}}),
            )
            .await;
        assert!(reply.get("result").is_some(), "{reply}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// A 2026-07-28 request: `params` with the per-request `_meta` (version, client info and
    /// `capabilities`).
    pub async fn modern(&mut self, method: &str, params: Value, capabilities: Value) -> Value {
        self.request(method, modern_params(params, capabilities))
            .await
    }

    pub async fn tool_names(&mut self) -> Vec<String> {
        let reply = self.request("tools/list", json!({})).await;
        reply["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|tool| tool["name"].as_str().expect("name").to_owned())
            .collect()
    }
}

/// `params` with the 2026-07-28 per-request `_meta` added.
pub fn modern_params(mut params: Value, capabilities: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "modern-test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    params
}

/// A gateway over a fake upstream, with a client connected.
pub struct Harness {
    pub client: Client,
    pub fake: Arc<Fake>,
    pub gateway: Gateway,
    /// The serving task: what `serve_io_until` returned.
    pub task: tokio::task::JoinHandle<Result<(), GatewayError>>,
    /// Notified: the serving gateway's shutdown (`Gateway::serve_io_until`) completes.
    pub stop: Arc<tokio::sync::Notify>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn start(
    config: GatewayConfig,
    policy: Arc<Policy>,
    store: Arc<dyn Store>,
    tools: &[&str],
    behaviour: Behaviour,
) -> Harness {
    start_with_capabilities(config, policy, store, tools, behaviour, json!({})).await
}

/// As [`start`], with the client declaring `capabilities` in `initialize`.
pub async fn start_with_capabilities(
    config: GatewayConfig,
    policy: Arc<Policy>,
    store: Arc<dyn Store>,
    tools: &[&str],
    behaviour: Behaviour,
    capabilities: Value,
) -> Harness {
    let mut harness = start_unopened(config, policy, store, tools, behaviour, false);
    harness.client.initialize(capabilities).await;
    harness
}

/// A gateway over a fake upstream (a 2026-07-28 one with `modern_upstream`), with a client
/// connected that has sent nothing yet.
pub fn start_unopened(
    config: GatewayConfig,
    policy: Arc<Policy>,
    store: Arc<dyn Store>,
    tools: &[&str],
    behaviour: Behaviour,
    modern_upstream: bool,
) -> Harness {
    let name = config.alias.clone();
    let gateway = Gateway::new(config, policy, store).expect("gateway");
    let (upstream_side, fake_side) = tokio::io::duplex(1 << 20);
    let fake = fake::start_with_era(&name, tools, behaviour, fake_side, modern_upstream);
    let (upstream_reader, upstream_writer) = tokio::io::split(upstream_side);
    let (client_side, gateway_side) = tokio::io::duplex(1 << 20);
    let (gateway_reader, gateway_writer) = tokio::io::split(gateway_side);
    let serving = gateway.clone();
    let stop = Arc::new(tokio::sync::Notify::new());
    let stopped = Arc::clone(&stop);
    let task = tokio::spawn(async move {
        let upstream = Upstream::Io {
            reader: Box::new(upstream_reader),
            writer: Box::new(upstream_writer),
        };
        serving
            .serve_io_until(gateway_reader, gateway_writer, upstream, async move {
                stopped.notified().await;
            })
            .await
    });
    let (reader, writer) = tokio::io::split(client_side);
    let client = Client {
        writer,
        lines: BufReader::new(reader).lines(),
        next_id: 0,
        received: Vec::new(),
    };
    Harness {
        client,
        fake,
        gateway,
        task,
        stop,
    }
}

/// A client on a fresh stdio front of `gateway` over `upstream`; the task serves until aborted.
pub fn connect(gateway: &Gateway, upstream: Upstream) -> (Client, tokio::task::JoinHandle<()>) {
    let (client_side, gateway_side) = tokio::io::duplex(1 << 20);
    let (gateway_reader, gateway_writer) = tokio::io::split(gateway_side);
    let serving = gateway.clone();
    let task = tokio::spawn(async move {
        let _ = serving
            .serve_io(gateway_reader, gateway_writer, upstream)
            .await;
    });
    let (reader, writer) = tokio::io::split(client_side);
    let client = Client {
        writer,
        lines: BufReader::new(reader).lines(),
        next_id: 0,
        received: Vec::new(),
    };
    (client, task)
}

/// The error's `data.reason` and code.
pub fn refusal(reply: &Value) -> (i64, String) {
    (
        reply["error"]["code"].as_i64().unwrap_or_default(),
        reply["error"]["data"]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// An HTTP client for tests that speak plain `http://` to 127.0.0.1: built by the one
/// constructor (a plain reqwest client panics once rustls is in the build), trusting no
/// authority.
pub fn http_client() -> reqwest::Client {
    countersign_http::client(&countersign_http::Trust::nothing()).expect("an HTTP client")
}
