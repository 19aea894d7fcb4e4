//! Issue #27 end to end: `countersign gateway --approval-url` in front of the real
//! `@modelcontextprotocol/server-filesystem`, the real approval service (`countersign serve`)
//! beside it, and a raw MCP client that declares URL-mode elicitation (2025-11-25). The
//! person follows the URL and answers through the service's API, signed in with an approver
//! token; an unentitled approver at the same URL changes nothing; the retried call runs once.
//! The same run checks what the tool list shows and how annotations count.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::support::{BIN, filesystem_server};

/// Writes need a `files-admins` approver; reads and listings pass; `edit_*` and `create_*`
/// are pattern allows (the first raised by `edit_file`'s `destructiveHint: true`, the second
/// not, `create_directory` saying `destructiveHint: false`); `move_file` is an exact allow
/// (never changed, though it says `destructiveHint: true`); every other tool has no entry.
const POLICY: &str = "schema: countersign.policy/v1
directory:
  human:alice: [files-admins]
  human:bob: [readers]
approvers:
  keys: [approvers.pub]
actions:
  \"mcp.files.read_*\":
    decision: allow
  \"mcp.files.list_*\":
    decision: allow
  mcp.files.write_file:
    effect: \"write:{path}\"
    decision: approve
    approval: { approvers: [\"group:files-admins\"] }
  \"mcp.files.edit_*\":
    decision: allow
  \"mcp.files.create_*\":
    decision: allow
  mcp.files.move_file:
    decision: allow
";

struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cli(dir: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new(BIN)
        .arg("--policy")
        .arg(dir.join("countersign.yaml"))
        .args(args)
        .output()
        .expect("run countersign");
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// One HTTP/1.1 request to the service; (status, body).
fn http(port: u16, method: &str, path: &str, token: &str, body: Option<&Value>) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the service");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let body = body.map(Value::to_string).unwrap_or_default();
    let auth = if token.is_empty() {
        String::new()
    } else {
        format!("Authorization: Bearer {token}\r\n")
    };
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

struct Mcp {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    next_id: i64,
    notifications: Vec<Value>,
}

impl Mcp {
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.expect("write");
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
                .await
                .expect("the gateway answers")
                .expect("read")
                .expect("the gateway is running");
            let message: Value = serde_json::from_str(&line).expect("JSON");
            if message["id"] == json!(id) && message.get("method").is_none() {
                return message;
            }
            assert_ne!(
                message["method"], "elicitation/create",
                "URL mode never asks the client inline: {message}"
            );
            self.notifications.push(message);
        }
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
    }
}

fn refusal(reply: &Value) -> (i64, &str) {
    (
        reply["error"]["code"].as_i64().unwrap_or_default(),
        reply["error"]["data"]["reason"]
            .as_str()
            .unwrap_or_default(),
    )
}

fn committed(reply: &Value) -> bool {
    reply["result"]["_meta"]["countersign"]["outcome"] == "committed"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_mode_approval_through_the_service_runs_the_retry_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().canonicalize().expect("canonical");
    let data = root.join("data");
    std::fs::create_dir(&data).expect("data");
    std::fs::write(data.join("a.txt"), "hello\n").expect("a.txt");
    let key = root.join("approvers");
    cli(&root, &["keygen", "--out", key.to_str().expect("utf-8")]);
    std::fs::write(root.join("countersign.yaml"), POLICY).expect("policy");
    let token = |subject: &str, groups: &str| {
        let mut args = vec![
            "approver",
            "token",
            "--key",
            key.to_str().expect("utf-8"),
            "--subject",
            subject,
            "--ttl",
            "10m",
        ];
        if !groups.is_empty() {
            args.extend(["--groups", groups]);
        }
        cli(&root, &args)
    };
    let alice = token("human:alice", "");
    let bob = token("human:bob", "");

    // The approval service's port, chosen now: the service starts once the gateway has made
    // the store (it refuses to serve a store that does not exist yet).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let base = format!("http://127.0.0.1:{port}");

    // The gateway, with a client that declares URL-mode elicitation.
    let mut child = tokio::process::Command::new(BIN)
        .arg("--policy")
        .arg(root.join("countersign.yaml"))
        .args([
            "gateway",
            "--alias",
            "files",
            "--principal",
            "agent:e2e",
            "--approval-url",
            &base,
            "--",
            "node",
        ])
        .arg(filesystem_server())
        .arg(&data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the gateway");
    let stdin = child.stdin.take().expect("stdin");
    let lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut mcp = Mcp {
        child,
        stdin,
        lines,
        next_id: 0,
        notifications: Vec::new(),
    };
    let initialized = mcp
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25",
                   "capabilities": {"elicitation": {"form": {}, "url": {}}},
                   "clientInfo": {"name": "e2e", "version": "0"}}),
        )
        .await;
    assert!(initialized.get("result").is_some(), "{initialized}");
    mcp.stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .expect("write");

    // The approval service over the same store.
    let mut service = Command::new(BIN)
        .arg("--policy")
        .arg(root.join("countersign.yaml"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start countersign serve");
    let mut started = String::new();
    // Kept open until the end: the service may write more.
    let mut service_output = BufReader::new(service.stdout.take().expect("stdout"));
    service_output
        .read_line(&mut started)
        .expect("the startup line");
    let service = Service(service);
    assert!(
        started.starts_with(&format!("countersign approval service on {base}")),
        "{started:?}"
    );

    // The list: no entry, no tool (get_file_info says readOnlyHint: true, and is still hidden).
    let listed = mcp.request("tools/list", json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    for shown in [
        "read_text_file",
        "write_file",
        "edit_file",
        "create_directory",
        "move_file",
    ] {
        assert!(names.contains(&shown), "{shown} in {names:?}");
    }
    for hidden in ["get_file_info", "search_files", "directory_tree"] {
        assert!(!names.contains(&hidden), "{hidden} in {names:?}");
    }
    let hidden = mcp
        .call("get_file_info", json!({"path": data.join("a.txt")}))
        .await;
    assert_eq!(refusal(&hidden), (-32094, "unknown_action"), "{hidden}");

    // A write sends the person to the service's page for the request.
    let b = data.join("b.txt");
    let write = json!({"path": b, "content": "written once"});
    let paused = mcp.call("write_file", write.clone()).await;
    assert_eq!(refusal(&paused), (-32042, "approval_required"), "{paused}");
    let request_id = paused["error"]["data"]["request_id"]
        .as_str()
        .expect("request id")
        .to_owned();
    let url = paused["error"]["data"]["elicitations"][0]["url"]
        .as_str()
        .expect("url")
        .to_owned();
    assert_eq!(url, format!("{base}/requests/{request_id}"));
    assert!(!b.exists());
    let path = url.strip_prefix(&base).expect("under the base");

    // Following the URL without signing in shows nothing and changes nothing.
    let (status, _) = http(port, "GET", path, "", None);
    assert_eq!(
        status, 303,
        "the page sends an anonymous visitor to sign in"
    );

    // Bob is signed in but not entitled: his yes changes nothing.
    let api = format!("/api/v1/approvals/{request_id}");
    let (status, shown) = http(port, "GET", &api, &alice, None);
    assert_eq!(status, 200, "{shown}");
    let shown: Value = serde_json::from_str(&shown).expect("JSON");
    let hash = shown["action_hash"].as_str().expect("hash").to_owned();
    assert_eq!(
        hash,
        paused["error"]["data"]["action_hash"]
            .as_str()
            .expect("hash")
    );
    let yes = json!({"decision": "approve", "action_hash": hash});
    let (status, refused) = http(port, "POST", &format!("{api}/answer"), &bob, Some(&yes));
    assert!((400..500).contains(&status), "{status} {refused}");
    assert!(refused.contains("not_entitled"), "{refused}");
    let still = mcp.call("write_file", write.clone()).await;
    assert_eq!(refusal(&still), (-32042, "approval_required"), "{still}");
    assert_eq!(still["error"]["data"]["request_id"], request_id.as_str());
    assert!(!b.exists(), "nothing ran for bob's answer");

    // Alice, entitled, approves through the API; the retried call writes exactly once.
    let (status, granted) = http(port, "POST", &format!("{api}/answer"), &alice, Some(&yes));
    assert_eq!(status, 200, "{granted}");
    let done = mcp.call("write_file", write.clone()).await;
    assert!(committed(&done), "{done}");
    assert_eq!(std::fs::read_to_string(&b).expect("b.txt"), "written once");
    std::fs::write(&b, "changed by someone else").expect("overwrite");
    let again = mcp.call("write_file", write).await;
    assert_eq!(refusal(&again), (-32095, "duplicate"), "{again}");
    assert_eq!(
        std::fs::read_to_string(&b).expect("b.txt"),
        "changed by someone else"
    );

    // Annotations: a pattern allow is raised for edit_file (destructiveHint: true) ...
    let a = data.join("a.txt");
    let edit = json!({"path": a, "edits": [{"oldText": "hello", "newText": "hi"}]});
    let raised = mcp.call("edit_file", edit.clone()).await;
    assert_eq!(refusal(&raised), (-32042, "approval_required"), "{raised}");
    assert_eq!(std::fs::read_to_string(&a).expect("a.txt"), "hello\n");
    let edit_id = raised["error"]["data"]["request_id"].as_str().expect("id");
    let edit_hash = raised["error"]["data"]["action_hash"].clone();
    let (status, granted) = http(
        port,
        "POST",
        &format!("/api/v1/approvals/{edit_id}/answer"),
        &alice,
        Some(&json!({"decision": "approve", "action_hash": edit_hash})),
    );
    assert_eq!(status, 200, "{granted}");
    let edited = mcp.call("edit_file", edit).await;
    assert!(committed(&edited), "{edited}");
    assert_eq!(std::fs::read_to_string(&a).expect("a.txt"), "hi\n");
    // ... not for create_directory (destructiveHint: false), and never for an exact allow.
    let made = mcp
        .call("create_directory", json!({"path": data.join("d")}))
        .await;
    assert!(committed(&made), "{made}");
    assert!(data.join("d").is_dir());
    let moved = mcp
        .call(
            "move_file",
            json!({"source": data.join("d"), "destination": data.join("e")}),
        )
        .await;
    assert!(committed(&moved), "{moved}");
    assert!(data.join("e").is_dir());

    drop(mcp.stdin);
    let _ = mcp.child.wait().await;
    drop(service);
    drop(service_output);
    let receipts = cli(&root, &["--json", "receipts"]);
    let receipts: Value = serde_json::from_str(&receipts).expect("receipts JSON");
    let attempts: Vec<&Value> = receipts
        .as_array()
        .expect("a list")
        .iter()
        .filter(|receipt| receipt["kind"] == "attempt" && receipt["outcome"] == "committed")
        .collect();
    let by_action = |action: &str| {
        attempts
            .iter()
            .find(|receipt| receipt["action"] == action)
            .unwrap_or_else(|| panic!("{action} in {attempts:?}"))
    };
    assert_eq!(
        by_action("mcp.files.edit_file")["raised_by"],
        "destructiveHint"
    );
    assert_eq!(by_action("mcp.files.write_file").get("raised_by"), None);
    assert_eq!(by_action("mcp.files.move_file").get("raised_by"), None);
    assert_eq!(
        by_action("mcp.files.create_directory").get("raised_by"),
        None
    );
    // Every committed attempt's action hash covers the tool's schema digest.
    for attempt in &attempts {
        assert!(
            attempt["tool_schema"]
                .as_str()
                .is_some_and(|digest| digest.starts_with("sha256:")),
            "{attempt}"
        );
    }
    let verified = cli(&root, &["receipts", "--verify"]);
    assert!(!verified.is_empty());
}
