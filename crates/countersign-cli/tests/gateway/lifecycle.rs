//! How `countersign gateway` ends, with the real npm filesystem server: its input ending (a
//! host closing the pipe, or a file piped in) answers everything already read; a signal stops
//! it at once. Either way it closes its store: no `-wal` file is left beside it.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use super::support::{BIN, World};

/// The requests of a short session: `initialize` (id 1), a read (id 2), `tools/list` (id 3).
fn session_lines(world: &World) -> String {
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "lifecycle-test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_text_file", "arguments": {"path": world.data.join("a.txt").display().to_string()}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}),
    ];
    messages
        .iter()
        .map(|message| format!("{message}\n"))
        .collect()
}

/// The store's write-ahead log, beside the policy.
fn write_ahead_log(world: &World) -> PathBuf {
    world
        .policy
        .parent()
        .expect("the policy's folder")
        .join(".countersign/countersign.db-wal")
}

/// Start the gateway over pipes and write the session's requests; returns it and its input.
async fn spawn(world: &World) -> (Child, ChildStdin) {
    spawn_with(world, &[]).await
}

/// [`spawn`], with `global` options (`--store-url URL`) before the gateway's own.
async fn spawn_with(world: &World, global: &[&str]) -> (Child, ChildStdin) {
    let mut gateway = Command::new(BIN)
        .args(global)
        .args(world.gateway_args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start countersign gateway");
    let mut input = gateway.stdin.take().expect("stdin");
    input
        .write_all(session_lines(world).as_bytes())
        .await
        .expect("write the requests");
    (gateway, input)
}

/// Start the gateway in front of `upstream` (a command and its arguments), its input and
/// output pipes, its standard error `stderr`.
fn spawn_in_front_of(world: &World, upstream: &[&str], stderr: Stdio) -> Child {
    let policy = world.policy.display().to_string();
    Command::new(BIN)
        .args([
            "--policy",
            policy.as_str(),
            "gateway",
            "--alias",
            "files",
            "--principal",
            "agent:e2e",
            "--",
        ])
        .args(upstream)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .expect("start countersign gateway")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_piped_in_are_all_answered_before_the_gateway_exits() {
    let world = World::new();
    let (gateway, input) = spawn(&world).await;
    // The input ends at once, as when a file is piped in: nothing has been answered yet.
    drop(input);
    let output = tokio::time::timeout(Duration::from_secs(60), gateway.wait_with_output())
        .await
        .expect("the gateway exits within 60 s of its input ending")
        .expect("wait for the gateway");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
    let replies: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON-RPC line"))
        .collect();
    let mut ids: Vec<i64> = replies
        .iter()
        .filter_map(|reply| reply["id"].as_i64())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![1, 2, 3], "{replies:?}\n{stderr}");
    let read = replies.iter().find(|reply| reply["id"] == 2).expect("id 2");
    assert_eq!(read["result"]["content"][0]["text"], "hello\n", "{read}");
    assert!(!write_ahead_log(&world).exists(), "the store was closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_records_in_a_postgresql_store() {
    // Found by a first-time user: `gateway --store-url postgres://…` was refused ("a
    // PostgreSQL store is opened asynchronously"), so the gateway ran only on SQLite.
    let base = std::env::var("COUNTERSIGN_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "COUNTERSIGN_TEST_POSTGRES_URL is not set: this test needs PostgreSQL; run `.ci/postgres.sh` and export the URL it prints"
        )
    });
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}schema=gateway_pg_{}", std::process::id());
    let world = World::new();
    let (gateway, input) = spawn_with(&world, &["--store-url", url.as_str()]).await;
    drop(input);
    let output = tokio::time::timeout(Duration::from_secs(60), gateway.wait_with_output())
        .await
        .expect("the gateway exits within 60 s of its input ending")
        .expect("wait for the gateway");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
    let read = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON-RPC line"))
        .find(|reply| reply["id"] == 2)
        .expect("a reply to the read");
    assert_eq!(
        read["result"]["_meta"]["countersign"]["outcome"], "committed",
        "{read}"
    );
    // The receipt is in PostgreSQL, and its chain verifies.
    let (ok, stdout, stderr) = world.cli(&["--store-url", url.as_str(), "receipts", "--json"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("mcp.files.read_text_file"), "{stdout}");
    let (ok, _, stderr) = world.cli(&["--store-url", url.as_str(), "verify"]);
    assert!(ok, "{stderr}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_stops_the_gateway_at_once_and_closes_its_store() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        let world = World::new();
        // The host keeps the input open: only the signal can end the gateway.
        let (mut gateway, input) = spawn(&world).await;
        let mut lines = BufReader::new(gateway.stdout.take().expect("stdout")).lines();
        let mut answered = 0;
        while answered < 3 {
            let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
                .await
                .expect("the gateway answers within 60 s")
                .expect("read")
                .expect("the gateway is still running");
            let reply: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
            if reply.get("id").is_some() {
                answered += 1;
            }
        }
        assert!(write_ahead_log(&world).exists(), "the store is open");

        let pid = Pid::from_raw(i32::try_from(gateway.id().expect("pid")).expect("a pid"));
        kill(pid, signal).expect("signal the gateway");
        let status = tokio::time::timeout(Duration::from_secs(20), gateway.wait())
            .await
            .expect("a signalled gateway exits within 20 s, its input still open")
            .expect("wait for the gateway");
        let mut stderr = String::new();
        let mut errors = gateway.stderr.take().expect("stderr");
        tokio::time::timeout(
            Duration::from_secs(20),
            tokio::io::AsyncReadExt::read_to_string(&mut errors, &mut stderr),
        )
        .await
        .expect("standard error ends with the gateway and its upstream")
        .expect("read stderr");
        assert!(status.success(), "{signal}: {status:?}: {stderr}");
        assert!(stderr.contains("stopped by a signal"), "{signal}: {stderr}");
        assert!(
            !write_ahead_log(&world).exists(),
            "{signal}: the store was closed"
        );
        drop(input);
    }
}

/// An MCP server that notes how it ended (`eof` when its input closed, `term` on `SIGTERM`) in
/// the file named by its argument, after starting a process of its own that ignores `SIGTERM`
/// (as an `npx` wrapper starts the real server) whose pid it writes beside it.
const NOTING_SERVER: &str = r#"
import json, signal, subprocess, sys
marker = sys.argv[1]
helper = subprocess.Popen(
    [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
open(marker + ".pid", "w").write(str(helper.pid))
def term(*_):
    open(marker, "a").write("term\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    result = {}
    if message["method"] == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "noting", "version": "0"}}
    elif message["method"] == "tools/list":
        result = {"tools": []}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
open(marker, "a").write("eof\n")
"#;

/// A gateway in front of the Python server `source` (written to `NAME.py` in the world's
/// folder, run with the marker path `ended` beside it), initialized: the gateway, its input,
/// its output's lines, the reply to `initialize` and the marker's path.
async fn start_python_upstream(
    world: &World,
    name: &str,
    source: &str,
) -> (
    Child,
    ChildStdin,
    tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    String,
    PathBuf,
) {
    let folder = world.policy.parent().expect("the policy's folder");
    let script = folder.join(format!("{name}.py"));
    std::fs::write(&script, source).expect("write the server");
    let marker = folder.join("ended");
    let script = script.display().to_string();
    let marker_path = marker.display().to_string();
    let mut gateway = spawn_in_front_of(world, &["python3", &script, &marker_path], Stdio::piped());
    let mut input = gateway.stdin.take().expect("stdin");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "lifecycle-test", "version": "0"}}});
    input
        .write_all(format!("{initialize}\n").as_bytes())
        .await
        .expect("write initialize");
    let mut lines = BufReader::new(gateway.stdout.take().expect("stdout")).lines();
    let reply = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("initialize is answered")
        .expect("read")
        .expect("a reply");
    (gateway, input, lines, reply, marker)
}

/// Is process `pid` gone (within 5 s)?
#[cfg(unix)]
async fn gone(pid: i32) -> bool {
    for _ in 0..100 {
        if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_sees_its_input_end_and_what_it_started_is_ended_too() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    // Ended by the client closing the gateway's input, then by a signal with it still open.
    for signal in [None, Some(Signal::SIGTERM)] {
        let world = World::new();
        let (mut gateway, input, _lines, reply, marker) =
            start_python_upstream(&world, "noting_server", NOTING_SERVER).await;
        assert!(reply.contains("noting"), "{reply}");
        let helper: i32 = std::fs::read_to_string(marker.with_extension("pid"))
            .expect("the server's helper pid")
            .parse()
            .expect("a pid");
        match signal {
            None => drop(input),
            Some(signal) => {
                let pid = Pid::from_raw(i32::try_from(gateway.id().expect("pid")).expect("pid"));
                kill(pid, signal).expect("signal the gateway");
            }
        }
        let status = tokio::time::timeout(Duration::from_secs(20), gateway.wait())
            .await
            .expect("the gateway exits")
            .expect("wait");
        assert!(status.success(), "{signal:?}: {status:?}");
        assert_eq!(
            std::fs::read_to_string(&marker).expect("the server noted how it ended"),
            "eof\n",
            "{signal:?}: the server saw its input end, and was not killed"
        );
        assert!(
            gone(helper).await,
            "{signal:?}: what the server started ended with it"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_exits_ends_the_gateway_with_an_error() {
    let world = World::new();
    let mut gateway = spawn_in_front_of(
        &world,
        &["sh", "-c", "echo 'the server could not start' >&2; exit 1"],
        Stdio::piped(),
    );
    // The client is still connected: its input stays open.
    let _input = gateway.stdin.take().expect("stdin");
    let output = tokio::time::timeout(Duration::from_secs(20), gateway.wait_with_output())
        .await
        .expect("the gateway exits once its upstream has")
        .expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the server could not start")
            && stderr.contains("error: the upstream ended while its client was still connected")
            && stderr.contains("it exited with status 1"),
        "the message names the upstream's exit status: {stderr}"
    );
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standard_error_nobody_reads_does_not_take_the_gateway_down() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let world = World::new();
    let folder = world.policy.parent().expect("the policy's folder");
    // An upstream that writes nothing to standard error (a server that does dies of it, and
    // the gateway then ends with the upstream, as it should).
    let script = folder.join("noting_server.py");
    std::fs::write(&script, NOTING_SERVER).expect("write the server");
    let marker = folder.join("ended");
    // Its reader gone at once: every line written to it fails (EPIPE), as after a hang-up.
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let script = script.display().to_string();
    let marker = marker.display().to_string();
    let mut gateway =
        spawn_in_front_of(&world, &["python3", &script, &marker], Stdio::from(writer));
    let mut input = gateway.stdin.take().expect("stdin");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "lifecycle-test", "version": "0"}}});
    // A call the policy has no entry for: refused, which the gateway logs (to the dead stream).
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "unlisted", "arguments": {}}});
    input
        .write_all(format!("{initialize}\n{call}\n").as_bytes())
        .await
        .expect("write the requests");
    let mut lines = BufReader::new(gateway.stdout.take().expect("stdout")).lines();
    for _ in 0..2 {
        tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the gateway answers")
            .expect("read")
            .expect("the gateway is still running");
    }
    let pid = Pid::from_raw(i32::try_from(gateway.id().expect("pid")).expect("a pid"));
    kill(pid, Signal::SIGTERM).expect("signal the gateway");
    let status = tokio::time::timeout(Duration::from_secs(20), gateway.wait())
        .await
        .expect("the gateway exits")
        .expect("wait");
    // Its log lines and "stopped by a signal" could not be written: it stops all the same.
    assert!(status.success(), "{status:?}");
    assert!(!write_ahead_log(&world).exists(), "the store was closed");
    drop(input);
}

/// An MCP server that outlives its input (it notes `eof` and keeps running) and notes `term` on
/// each `SIGTERM` without exiting: only `SIGKILL` ends it. Its pid is written beside the marker.
const STUBBORN_SERVER: &str = r#"
import json, os, signal, sys, time
marker = sys.argv[1]
open(marker + ".pid", "w").write(str(os.getpid()))
signal.signal(signal.SIGTERM, lambda *_: open(marker, "a").write("term\n"))
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "stubborn", "version": "0"}}}), flush=True)
open(marker, "a").write("eof\n")
while True:
    time.sleep(1)
"#;

/// A second signal while the gateway waits for its upstream to exit kills the upstream at once:
/// it is never sent `SIGTERM` (its grace ends at the second signal, not 2 s after its input
/// closed), and the gateway still exits 0 having closed its store.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_kills_an_upstream_that_will_not_exit() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let world = World::new();
    let (gateway, input, _lines, reply, marker) =
        start_python_upstream(&world, "stubborn_server", STUBBORN_SERVER).await;
    assert!(reply.contains("stubborn"), "{reply}");
    let server: i32 = std::fs::read_to_string(marker.with_extension("pid"))
        .expect("the server's pid")
        .parse()
        .expect("a pid");
    let pid = Pid::from_raw(i32::try_from(gateway.id().expect("pid")).expect("pid"));
    kill(pid, Signal::SIGTERM).expect("signal the gateway");
    // The stop has reached the upstream: its input is closed, and it is given its grace.
    let mut noted = String::new();
    for _ in 0..1000 {
        noted = std::fs::read_to_string(&marker).unwrap_or_default();
        if !noted.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(noted, "eof\n", "the server saw its input close first");
    kill(pid, Signal::SIGINT).expect("signal the gateway again");
    let output = tokio::time::timeout(Duration::from_secs(20), gateway.wait_with_output())
        .await
        .expect("the gateway exits")
        .expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("a second signal: the upstream is killed"),
        "{stderr}"
    );
    assert!(gone(server).await, "the server was killed");
    assert_eq!(
        std::fs::read_to_string(&marker).expect("the marker"),
        "eof\n",
        "the server was killed before any SIGTERM, 2 s after its input closed"
    );
    assert!(!write_ahead_log(&world).exists(), "the store was closed");
    drop(input);
}
