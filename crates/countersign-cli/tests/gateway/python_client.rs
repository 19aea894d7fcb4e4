//! The official Python `mcp` client package driving `countersign gateway`, over stdio and over
//! the Streamable HTTP front, in front of the real npm filesystem server.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

use super::support::{BIN, World, filesystem_server};

/// The `mcp` release the test pins (PyPI).
const MCP_VERSION: &str = "2.3.0";

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gateway/mcp_client.py");

/// The venv's python: `<target dir>/mcp-py-venv`, created with the pinned `mcp` when missing
/// or holding another version. Fails loudly when python3 or pip fails; never skips.
fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            // The binary is `<target dir>/<profile>/countersign`.
            let target = Path::new(BIN)
                .parent()
                .and_then(Path::parent)
                .expect("the binary lives under the target dir");
            let venv = target.join("mcp-py-venv");
            let python = venv.join("bin/python");
            let installed = Command::new(&python)
                .args([
                    "-c",
                    "import importlib.metadata as m; print(m.version('mcp'))",
                ])
                .output()
                .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == MCP_VERSION);
            if !installed {
                let created = Command::new("python3")
                    .args(["-m", "venv"])
                    .arg(&venv)
                    .output()
                    .expect("python3 must be installed to run the Python client test");
                assert!(
                    created.status.success(),
                    "`python3 -m venv {}` failed: {}",
                    venv.display(),
                    String::from_utf8_lossy(&created.stderr)
                );
                let pip = Command::new(&python)
                    .args([
                        "-m",
                        "pip",
                        "install",
                        "--disable-pip-version-check",
                        "--quiet",
                    ])
                    .arg(format!("mcp=={MCP_VERSION}"))
                    .output()
                    .expect("run pip");
                assert!(
                    pip.status.success(),
                    "`pip install mcp=={MCP_VERSION}` failed (network to PyPI needed): {}{}",
                    String::from_utf8_lossy(&pip.stdout),
                    String::from_utf8_lossy(&pip.stderr)
                );
            }
            python
        })
        .clone()
}

fn run_script(args: &[String]) -> Value {
    let output = Command::new(python())
        .arg(SCRIPT)
        .args(args)
        .output()
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the Python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("the script prints one JSON object")
}

fn check_summary(summary: &Value) {
    let tools: Vec<&str> = summary["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(tools.contains(&"read_text_file"), "{summary}");
    assert!(!tools.contains(&"move_file"), "hidden: {summary}");
    assert_eq!(summary["read_text"], json!(["hello\n"]), "{summary}");
    assert_eq!(summary["read_is_error"], false);
    assert_eq!(summary["receipt_outcome"], "committed");
    assert_eq!(summary["write_error"]["code"], -32090, "{summary}");
    assert_eq!(summary["write_error"]["reason"], "approval_required");
}

#[test]
fn the_python_mcp_client_lists_and_reads_through_the_stdio_gateway() {
    let world = World::new();
    let summary = run_script(&[
        "stdio".into(),
        BIN.into(),
        world.policy.display().to_string(),
        filesystem_server().display().to_string(),
        world.data.display().to_string(),
    ]);
    check_summary(&summary);
    assert!(!world.data.join("py.txt").exists(), "the write never ran");
}

/// Kills the gateway when the test ends, however it ends.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `countersign gateway --listen 127.0.0.1:0` with `extra` options; its URL.
fn listen(world: &World, extra: &[&str]) -> (String, Running) {
    let mut args = world.gateway_args();
    let split = args.iter().position(|arg| arg == "--").expect("--");
    for option in extra.iter().rev() {
        args.insert(split, (*option).to_owned());
    }
    args.insert(split, "127.0.0.1:0".into());
    args.insert(split, "--listen".into());
    let mut child = Command::new(BIN)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the gateway");
    let stderr = child.stderr.take().expect("stderr");
    let running = Running(child);
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("the gateway prints its address before anything else")
            .expect("stderr");
        if let Some(url) = line.strip_prefix("countersign gateway: listening on ") {
            break url.to_owned();
        }
    };
    // Keep draining the log so that the gateway never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (url, running)
}

#[test]
fn the_python_mcp_client_lists_and_reads_through_the_http_front() {
    let world = World::new();
    let (url, _running) = listen(&world, &[]);
    let summary = run_script(&["http".into(), url, world.data.display().to_string()]);
    check_summary(&summary);
    assert!(!world.data.join("py.txt").exists(), "the write never ran");
}

/// MCP 2026-07-28 over HTTP with the Python `mcp` client: no session; the write's approval is
/// an input-required result the client answers through its elicitation callback (the
/// operator attested the principal), and the write runs once.
#[test]
fn the_python_mcp_client_speaks_2026_07_28_and_answers_the_approval_round_trip() {
    let world = World::new();
    let (url, _running) = listen(&world, &["--attested-client", "agent:e2e"]);
    let summary = run_script(&["modern-http".into(), url, world.data.display().to_string()]);
    let tools: Vec<&str> = summary["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"read_text_file") && !tools.contains(&"move_file"),
        "{summary}"
    );
    assert_eq!(summary["read_text"], json!(["hello\n"]), "{summary}");
    assert_eq!(summary["receipt_outcome"], "committed", "{summary}");
    assert_eq!(summary["write_outcome"], "committed", "{summary}");
    let asked = summary["asked"].as_array().expect("asked");
    assert_eq!(asked.len(), 1, "one question: {summary}");
    assert!(
        asked[0]
            .as_str()
            .is_some_and(|text| text.contains("mcp.files.write_file")),
        "{summary}"
    );
    assert_eq!(
        std::fs::read_to_string(world.data.join("py.txt")).expect("py.txt"),
        "x",
        "the approved write ran once"
    );
}

#[test]
fn the_http_front_refuses_a_non_loopback_address_without_listen_public() {
    let world = World::new();
    let output = Command::new(BIN)
        .arg("--policy")
        .arg(&world.policy)
        .args([
            "gateway",
            "--alias",
            "files",
            "--principal",
            "agent:e2e",
            "--listen",
            "0.0.0.0:0",
            "--",
            "node",
            "unused.js",
        ])
        .output()
        .expect("run countersign");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a loopback address"), "{stderr}");
}
