//! Shared setup: the npm upstream, a policy and data folder per test, the CLI binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The `countersign` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_countersign");

/// The policy of the filesystem example: reads and listings allowed, writes approved once per
/// path and content, moves denied, everything else unknown (denied).
pub const POLICY: &str = include_str!("../../../../examples/mcp-filesystem/countersign.yaml");

fn node_folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../countersign-gateway/tests/node")
}

/// The server-filesystem entry point, after `npm ci` (run once, then reused).
pub fn filesystem_server() -> PathBuf {
    static INSTALLED: OnceLock<PathBuf> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let folder = node_folder();
            let entry =
                folder.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
            if !entry.exists() {
                let status = Command::new("npm")
                    .args(["ci", "--no-audit", "--no-fund"])
                    .current_dir(&folder)
                    .status()
                    .expect("npm must be installed to run the gateway end-to-end tests");
                assert!(status.success(), "`npm ci` failed in {}", folder.display());
            }
            assert!(entry.exists(), "server-filesystem missing after npm ci");
            entry
        })
        .clone()
}

/// A fresh folder with the example policy, a data folder holding `a.txt`, and the store
/// beside the policy.
pub struct World {
    pub _dir: tempfile::TempDir,
    pub policy: PathBuf,
    pub data: PathBuf,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::tempdir().expect("temp dir");
        let policy = dir.path().join("countersign.yaml");
        std::fs::write(&policy, POLICY).expect("write policy");
        let data = dir.path().join("data");
        std::fs::create_dir(&data).expect("data dir");
        std::fs::write(data.join("a.txt"), "hello\n").expect("write a.txt");
        // server-filesystem resolves symlinks; use the canonical path in arguments.
        let data = data.canonicalize().expect("canonical data dir");
        World {
            _dir: dir,
            policy,
            data,
        }
    }

    /// The command line an MCP host would run.
    pub fn gateway_args(&self) -> Vec<String> {
        vec![
            "--policy".into(),
            self.policy.display().to_string(),
            "gateway".into(),
            "--alias".into(),
            "files".into(),
            "--principal".into(),
            "agent:e2e".into(),
            "--".into(),
            "node".into(),
            filesystem_server().display().to_string(),
            self.data.display().to_string(),
        ]
    }

    /// Run the CLI with `--policy` and `args`; returns (success, stdout, stderr).
    pub fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let output = Command::new(BIN)
            .arg("--policy")
            .arg(&self.policy)
            .args(args)
            .output()
            .expect("run countersign");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}
