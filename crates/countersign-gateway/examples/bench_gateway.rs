//! Benchmark of the MCP gateway: the latency it adds to an allowed `tools/call`, and the
//! resident memory of an idle `countersign gateway` process.
//!
//! ```text
//! cargo build --release -p countersign-cli        # for the idle-memory figure
//! cargo run --release -p countersign-gateway --example bench_gateway [-- --quick]
//! ```
//!
//! Latency: a client sends calls one at a time over an in-process pipe, either straight to a
//! fake upstream that answers at once, or through the gateway in front of the same fake
//! (SQLite store in a temporary folder, the embedded default). The difference of the two
//! distributions is what the gateway adds: policy decision, canonical form, the store
//! transactions and the receipt. Two actions: `read` (allow, no effect key) and `write` (allow,
//! a fresh effect key per call, so the reservation is included).
//!
//! Memory: spawns the release `countersign gateway` beside this example's binary, with this
//! binary (`--fake-upstream`) as its upstream, initializes it, makes one call, waits a second,
//! and reads `VmRSS` from `/proc/<pid>/status` (Linux).

use std::sync::Arc;
use std::time::{Duration, Instant};

use countersign::{Policy, Principal};
use countersign_gateway::{Gateway, GatewayConfig, PrincipalSource, Upstream};
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream, Lines,
    ReadHalf, WriteHalf,
};

const POLICY: &str = "schema: countersign.policy/v1\nactions:\n  mcp.bench.read:\n    decision: allow\n  mcp.bench.write:\n    effect: \"write:{n}\"\n    decision: allow\n";

type Failure = Box<dyn std::error::Error>;

/// Answer MCP on `reader`/`writer` at once: initialize, tools/list, tools/call (echo).
async fn fake_upstream<R, W>(reader: R, mut writer: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut lines = BufReader::new(reader).lines();
    while let Some(line) = lines.next_line().await? {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = message.get("id").cloned() else {
            continue;
        };
        let result = match message["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench-fake", "version": "0"}}),
            Some("tools/list") => json!({"tools": [
                {"name": "read", "inputSchema": {"type": "object"}},
                {"name": "write", "inputSchema": {"type": "object"}}]}),
            Some("tools/call") => json!({"content": [{"type": "text", "text": "ok"}]}),
            _ => json!({}),
        };
        let mut reply = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .map_err(std::io::Error::other)?;
        reply.push(b'\n');
        writer.write_all(&reply).await?;
        writer.flush().await?;
    }
    Ok(())
}

/// A line client on one end of a pipe.
struct Client {
    writer: WriteHalf<DuplexStream>,
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    next_id: u64,
}

impl Client {
    fn new(stream: DuplexStream) -> Client {
        let (reader, writer) = tokio::io::split(stream);
        Client {
            writer,
            lines: BufReader::new(reader).lines(),
            next_id: 0,
        }
    }

    async fn request(&mut self, method: &str, params: Value) -> Result<Value, Failure> {
        self.next_id += 1;
        let id = self.next_id;
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )?;
        line.push(b'\n');
        self.writer.write_all(&line).await?;
        loop {
            let line = self
                .lines
                .next_line()
                .await?
                .ok_or("the other side closed")?;
            let message: Value = serde_json::from_str(&line)?;
            if message["id"] == json!(id) {
                if message.get("error").is_some() {
                    return Err(format!("an error reply: {message}").into());
                }
                return Ok(message);
            }
        }
    }

    async fn initialize(&mut self) -> Result<(), Failure> {
        self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
        )
        .await?;
        self.writer
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await?;
        Ok(())
    }
}

/// Round-trip times, in microseconds, of `calls` sequential calls of `tool`.
async fn measure(client: &mut Client, tool: &str, calls: usize) -> Result<Vec<f64>, Failure> {
    let mut times = Vec::with_capacity(calls);
    for n in 0..calls {
        let arguments = json!({"n": format!("{tool}-{n}"), "text": "benchmark payload"});
        let started = Instant::now();
        client
            .request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await?;
        times.push(started.elapsed().as_secs_f64() * 1e6);
    }
    Ok(times)
}

fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn summary(mut times: Vec<f64>) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    (percentile(&times, 0.50), percentile(&times, 0.99))
}

async fn latency(calls: usize) -> Result<(), Failure> {
    let folder = tempfile::tempdir()?;
    let store = countersign::store::open_url(&format!(
        "sqlite:{}",
        folder.path().join("bench.db").display()
    ))?;
    let policy = Arc::new(Policy::from_yaml_str(POLICY, None)?);
    let mut config = GatewayConfig::new(
        "bench",
        PrincipalSource::Fixed(Principal::new("agent:bench")?),
    );
    config.log = false;
    let gateway = Gateway::new(config, policy, store)?;

    // Direct: client → fake.
    let (client_side, fake_side) = tokio::io::duplex(1 << 16);
    let (fake_reader, fake_writer) = tokio::io::split(fake_side);
    tokio::spawn(fake_upstream(fake_reader, fake_writer));
    let mut direct = Client::new(client_side);
    direct.initialize().await?;

    // Through the gateway: client → gateway → fake.
    let (upstream_side, fake_side) = tokio::io::duplex(1 << 16);
    let (fake_reader, fake_writer) = tokio::io::split(fake_side);
    tokio::spawn(fake_upstream(fake_reader, fake_writer));
    let (upstream_reader, upstream_writer) = tokio::io::split(upstream_side);
    let (client_side, gateway_side) = tokio::io::duplex(1 << 16);
    let (gateway_reader, gateway_writer) = tokio::io::split(gateway_side);
    tokio::spawn(async move {
        let upstream = Upstream::Io {
            reader: Box::new(upstream_reader),
            writer: Box::new(upstream_writer),
        };
        let _ = gateway
            .serve_io(gateway_reader, gateway_writer, upstream)
            .await;
    });
    let mut through = Client::new(client_side);
    through.initialize().await?;

    // Warm up both paths (and the SQLite file) before measuring.
    let warm = (calls / 10).max(50);
    measure(&mut direct, "read", warm).await?;
    measure(&mut through, "read", warm).await?;

    println!("gateway added latency per allowed tools/call ({calls} sequential calls each, µs):");
    println!(
        "{:<36} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "action", "direct p50", "direct p99", "gw p50", "gw p99", "added p50", "added p99"
    );
    for (tool, label) in [
        ("read", "read (allow, no effect key)"),
        ("write", "write (allow, fresh effect key)"),
    ] {
        let (direct_p50, direct_p99) = summary(measure(&mut direct, tool, calls).await?);
        let (through_p50, through_p99) = summary(measure(&mut through, tool, calls).await?);
        println!(
            "{label:<36} {direct_p50:>10.1} {direct_p99:>10.1} {through_p50:>10.1} {through_p99:>10.1} {:>10.1} {:>10.1}",
            through_p50 - direct_p50,
            through_p99 - direct_p99,
        );
    }
    Ok(())
}

/// `VmRSS` of `pid`, in KiB.
fn resident_kib(pid: u32) -> Result<u64, Failure> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .ok_or("no VmRSS line in /proc/<pid>/status")?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .ok_or("a VmRSS line without a number")?
        .parse()?)
}

async fn idle_memory() -> Result<(), Failure> {
    let this = std::env::current_exe()?;
    // `<target>/<profile>/examples/bench_gateway` → `<target>/<profile>/countersign`.
    let binary = this
        .parent()
        .and_then(std::path::Path::parent)
        .map(|profile| profile.join("countersign"))
        .ok_or("cannot locate the target folder")?;
    if !binary.exists() {
        return Err(format!(
            "`{}` is missing: build it first with `cargo build --release -p countersign-cli`",
            binary.display()
        )
        .into());
    }
    let folder = tempfile::tempdir()?;
    let policy = folder.path().join("countersign.yaml");
    std::fs::write(&policy, POLICY)?;
    let mut child = tokio::process::Command::new(&binary)
        .arg("--policy")
        .arg(&policy)
        .args([
            "gateway",
            "--alias",
            "bench",
            "--principal",
            "agent:bench",
            "--",
        ])
        .arg(&this)
        .arg("--fake-upstream")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().ok_or("the gateway exited at once")?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let mut exchange = async |message: Value| -> Result<(), Failure> {
        let mut line = serde_json::to_vec(&message)?;
        line.push(b'\n');
        stdin.write_all(&line).await?;
        if message.get("id").is_some() {
            lines.next_line().await?.ok_or("the gateway closed")?;
        }
        Ok(())
    };
    exchange(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})).await?;
    exchange(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await?;
    exchange(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read", "arguments": {}}})).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let kib = resident_kib(pid)?;
    println!(
        "idle `countersign gateway` resident memory (VmRSS, after initialize and one call): {kib} KiB ({:.1} MiB)",
        kib as f64 / 1024.0
    );
    child.kill().await?;
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "--fake-upstream") {
        fake_upstream(tokio::io::stdin(), tokio::io::stdout()).await?;
        return Ok(());
    }
    let quick = args.iter().any(|arg| arg == "--quick");
    let calls = if quick { 200 } else { 2_000 };
    if cfg!(debug_assertions) {
        println!("note: a debug build; run with --release for meaningful figures");
    }
    latency(calls).await?;
    idle_memory().await?;
    Ok(())
}
