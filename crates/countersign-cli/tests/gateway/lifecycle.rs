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
    let mut gateway = Command::new(BIN)
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
