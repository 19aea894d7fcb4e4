//! What every CLI test needs: a sandbox folder, a way to run the binary in it, snapshot filters,
//! and a small agent that uses the kernel directly on the sandbox's SQLite store.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use countersign::store::SqliteStore;
use countersign::{
    ActionRequest, ApprovalId, Control, ControlError, ExecutorError, Policy, Principal,
    StaticIdentity,
};
use serde_json::json;

/// The policy every sandbox starts with: refunds up to 50000 run alone, up to 1000000 wait for
/// a human, larger ones are denied. The same decisions as the demo's example policy, kept here
/// so that editing the example does not change these tests.
pub const POLICY: &str = "\
schema: countersign.policy/v1
mode: enforce
environment: test
approval_ttl: 15m
actions:
  stripe.refund:
    effect: \"refund:{payment_id}\"
    resource: \"payment:{payment_id}\"
    rules:
      - when: { amount: { lte: 50000 } }
        decision: allow
      - when: { amount: { lte: 1000000 } }
        decision: approve
      - decision: deny
";

/// A fresh folder per test: `work/` is the binary's working directory (holding
/// `countersign.yaml`, so the default store is `work/.countersign/countersign.db`) and `tmp/` is
/// its `TMPDIR`.
pub struct Sandbox {
    root: tempfile::TempDir,
}

impl Sandbox {
    /// A sandbox with [`POLICY`] in `work/countersign.yaml` and no store yet.
    pub fn new() -> Sandbox {
        let root = tempfile::Builder::new()
            .prefix("countersign-cli-test-")
            .tempdir()
            .expect("create the sandbox folder");
        std::fs::create_dir(root.path().join("work")).expect("create work/");
        std::fs::create_dir(root.path().join("tmp")).expect("create tmp/");
        let sandbox = Sandbox { root };
        std::fs::write(sandbox.policy_path(), POLICY).expect("write the policy");
        sandbox
    }

    /// The binary's working directory.
    pub fn work(&self) -> PathBuf {
        self.root.path().join("work")
    }

    /// The binary's `TMPDIR`.
    pub fn tmp(&self) -> PathBuf {
        self.root.path().join("tmp")
    }

    /// `work/countersign.yaml`.
    pub fn policy_path(&self) -> PathBuf {
        self.work().join("countersign.yaml")
    }

    /// The default store: `work/.countersign/countersign.db`.
    pub fn store_path(&self) -> PathBuf {
        self.work().join(".countersign").join("countersign.db")
    }

    /// Write `text` to `work/NAME` and return its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.work().join(name);
        std::fs::write(&path, text).expect("write a sandbox file");
        path
    }

    /// Run `countersign ARGS` in `work/`, with a clean environment: no `COUNTERSIGN_*`
    /// variables, `USER=tester`, and a 100-column help width.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_in(&self.work(), args)
    }

    /// Run `countersign ARGS` with `cwd` as the working directory.
    pub fn run_in(&self, cwd: &Path, args: &[&str]) -> Run {
        self.run_with(cwd, args, None)
    }

    /// Run `countersign ARGS` in `work/` with `stdin` as its standard input.
    pub fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Run {
        self.run_with(&self.work(), args, Some(stdin))
    }

    /// Run `countersign ARGS` in `cwd`, with `stdin` as its standard input if given.
    pub fn run_with(&self, cwd: &Path, args: &[&str], stdin: Option<&str>) -> Run {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(args)
            .current_dir(cwd)
            .stdin(if stdin.is_some() {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .env("TMPDIR", self.tmp())
            .env("USER", "tester")
            .env("COLUMNS", "100")
            .env_remove("COUNTERSIGN_POLICY")
            .env_remove("COUNTERSIGN_STORE_URL")
            .env_remove("COUNTERSIGN_APPROVER")
            .env_remove("CLICOLOR_FORCE")
            .env_remove("RUST_BACKTRACE")
            .env_remove("COUNTERSIGN_PRINCIPAL")
            .spawn()
            .expect("start the countersign binary");
        if let Some(text) = stdin {
            let mut pipe = child.stdin.take().expect("a stdin pipe");
            pipe.write_all(text.as_bytes()).expect("write stdin");
        }
        let output = child
            .wait_with_output()
            .expect("wait for the countersign binary");
        let run = Run {
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            status: output.status.code(),
            stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
        };
        run.assert_no_panic();
        run
    }

    /// Fill the default store by running the demo on it: 11 receipts, three committed effects,
    /// two answered approvals.
    pub fn fill_with_demo(&self) -> Run {
        let run = self.run(&[
            "demo",
            "--policy",
            "countersign.yaml",
            "--store-url",
            "sqlite:.countersign/countersign.db",
        ]);
        assert_eq!(run.status, Some(0), "the demo failed: {run:?}");
        run
    }

    /// Insta settings that redact what varies between runs: the sandbox path, ids, hashes and
    /// times.
    pub fn settings(&self) -> insta::Settings {
        let mut settings = insta::Settings::clone_current();
        settings.set_prepend_module_to_snapshot(false);
        let root = self.root.path();
        let mut roots = vec![root.to_path_buf()];
        if let Ok(canonical) = root.canonicalize()
            && canonical != root
        {
            roots.push(canonical);
        }
        for path in roots {
            settings.add_filter(&regex_escape(&path.display().to_string()), "[SANDBOX]");
        }
        settings.add_filter(
            r"countersign-demo-[A-Za-z0-9]+",
            "countersign-demo-[RANDOM]",
        );
        settings.add_filter(r"apr_[a-z2-7]{20}", "apr_[ID]");
        settings.add_filter(r"att_[a-z2-7]{20}", "att_[ID]");
        settings.add_filter(r"tok_[a-z2-7]{20}", "tok_[ID]");
        settings.add_filter(r"evt_[a-z2-7]{20}", "evt_[ID]");
        settings.add_filter(r"sha256:[0-9a-f]{64}", "sha256:[HASH]");
        settings.add_filter(
            r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
            "[TIME]",
        );
        settings.add_filter(r"countersign \d+\.\d+\.\d+\S*", "countersign [VERSION]");
        settings
    }

    /// A kernel on the sandbox's policy and default store, acting as `agent:support-bot`.
    pub fn agent(&self) -> Agent {
        let policy = Policy::load(&self.policy_path()).expect("the sandbox policy loads");
        let store = SqliteStore::open(self.store_path()).expect("open the sandbox store");
        let control = Control::builder(policy, store)
            .identity(StaticIdentity::new(
                Principal::new("agent:support-bot").expect("a valid principal"),
            ))
            .build();
        Agent {
            control,
            refunds: Arc::new(AtomicUsize::new(0)),
        }
    }
}

/// Escape `text` for use as a literal in a regular expression.
fn regex_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(character) {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

/// One finished run of the binary.
#[derive(Debug)]
pub struct Run {
    /// The arguments given.
    pub args: Vec<String>,
    /// The exit status (`None` if killed by a signal).
    pub status: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// The run as a snapshot: the command, the status, then both streams.
    pub fn transcript(&self) -> String {
        let status = self
            .status
            .map_or_else(|| "killed".to_owned(), |code| code.to_string());
        format!(
            "$ countersign {}\nstatus: {status}\n--- stdout\n{}--- stderr\n{}",
            self.args.join(" "),
            self.stdout,
            self.stderr
        )
    }

    /// Neither stream shows a panic, a backtrace hint or an internal error.
    pub fn assert_no_panic(&self) {
        for stream in [&self.stdout, &self.stderr] {
            for bad in [
                "panicked",
                "RUST_BACKTRACE",
                "internal error",
                "stack backtrace",
            ] {
                assert!(!stream.contains(bad), "`{bad}` reached the user: {self:?}");
            }
        }
    }

    /// The run failed with status 1, printed nothing on stdout, and said one line on stderr:
    /// `error: ` and a lowercase message without a final period. Returns the message.
    pub fn one_line_error(&self) -> &str {
        assert_eq!(self.status, Some(1), "expected exit status 1: {self:?}");
        assert_eq!(
            self.stdout, "",
            "a failed command printed on stdout: {self:?}"
        );
        let message = self
            .stderr
            .strip_prefix("error: ")
            .and_then(|rest| rest.strip_suffix('\n'))
            .unwrap_or_else(|| panic!("stderr is not one `error: ` line: {self:?}"));
        assert!(!message.contains('\n'), "more than one line: {self:?}");
        assert!(!message.ends_with('.'), "a final period: {self:?}");
        let first = message.chars().next().expect("a non-empty message");
        assert!(
            !first.is_uppercase(),
            "the message starts with a capital letter: {self:?}"
        );
        message
    }
}

/// What is on disk at a store location: the database file and its write-ahead log, byte for
/// byte, and whether the shared-memory index exists (its content changes on mere reads while
/// another connection is open, so only its presence is compared).
#[derive(PartialEq, Eq)]
pub struct StoreFiles {
    database: Option<Vec<u8>>,
    wal: Option<Vec<u8>>,
    shm_exists: bool,
}

impl StoreFiles {
    /// Read the files of the store at `path`.
    pub fn read(path: &Path) -> StoreFiles {
        let with_suffix = |suffix: &str| PathBuf::from(format!("{}{suffix}", path.display()));
        StoreFiles {
            database: std::fs::read(path).ok(),
            wal: std::fs::read(with_suffix("-wal")).ok(),
            shm_exists: with_suffix("-shm").exists(),
        }
    }

    /// True when no file of the store exists.
    pub fn is_absent(&self) -> bool {
        self.database.is_none() && self.wal.is_none() && !self.shm_exists
    }
}

impl std::fmt::Debug for StoreFiles {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Lengths and a checksum: the bytes themselves would drown the failure message.
        let summary = |bytes: &Option<Vec<u8>>| {
            bytes.as_ref().map(|bytes| {
                let checksum = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
                    (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
                });
                format!("{} bytes, fnv1a {checksum:016x}", bytes.len())
            })
        };
        formatter
            .debug_struct("StoreFiles")
            .field("database", &summary(&self.database))
            .field("wal", &summary(&self.wal))
            .field("shm_exists", &self.shm_exists)
            .finish()
    }
}

/// A stand-in agent: the kernel, used directly on the sandbox store, calling a payment
/// provider that only counts its refunds.
pub struct Agent {
    control: Control,
    refunds: Arc<AtomicUsize>,
}

impl Agent {
    /// Ask for a refund, presenting `approval` if given.
    pub async fn refund(
        &self,
        payment_id: &str,
        amount: u64,
        approval: Option<&ApprovalId>,
    ) -> Result<String, ControlError> {
        let mut request = ActionRequest::new(
            "stripe.refund",
            &json!({"payment_id": payment_id, "amount": amount}),
        );
        if let Some(id) = approval {
            request = request.with_approval(id.clone());
        }
        let refunds = Arc::clone(&self.refunds);
        self.control
            .execute(request, |arguments| async move {
                refunds.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ExecutorError>(format!("refunded {}", arguments["payment_id"]))
            })
            .await
            .map(|executed| executed.value)
    }

    /// Ask for a refund whose reply is lost: the effect becomes ambiguous.
    pub async fn refund_losing_the_reply(&self, payment_id: &str, amount: u64) -> ControlError {
        let request = ActionRequest::new(
            "stripe.refund",
            &json!({"payment_id": payment_id, "amount": amount}),
        );
        let refunds = Arc::clone(&self.refunds);
        let result = self
            .control
            .execute(request, |_| async move {
                refunds.fetch_add(1, Ordering::SeqCst);
                Err::<String, _>(ExecutorError::may_have_run("the connection dropped"))
            })
            .await;
        result.expect_err("a lost reply cannot succeed")
    }

    /// Ask for a refund that needs a human; return the pending request's id.
    pub async fn request_approval(&self, payment_id: &str, amount: u64) -> ApprovalId {
        match self.refund(payment_id, amount, None).await {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected a pending approval request, got {other:?}"),
        }
    }

    /// Ask for `action` with `arguments` (its policy must say `approve`); return the pending
    /// request's id. The executor never runs.
    pub async fn request_approval_for(
        &self,
        action: &str,
        arguments: &serde_json::Value,
    ) -> ApprovalId {
        let outcome = self
            .control
            .execute(ActionRequest::new(action, arguments), |_| async move {
                Ok::<_, ExecutorError>("ran".to_owned())
            })
            .await;
        match outcome {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected a pending approval request, got {other:?}"),
        }
    }

    /// Ask for a refund in `run` that needs a human; return the pending request's id.
    pub async fn request_approval_in_run(
        &self,
        payment_id: &str,
        amount: u64,
        run: &str,
    ) -> ApprovalId {
        let request = ActionRequest::new(
            "stripe.refund",
            &json!({"payment_id": payment_id, "amount": amount}),
        )
        .with_run(run);
        match self
            .control
            .execute(
                request,
                |_| async move { Ok::<_, ExecutorError>(String::new()) },
            )
            .await
        {
            Err(ControlError::ApprovalRequired { request_id, .. }) => request_id,
            other => panic!("expected a pending approval request, got {other:?}"),
        }
    }

    /// How many times the payment provider was called.
    pub fn refunds(&self) -> usize {
        self.refunds.load(Ordering::SeqCst)
    }
}

/// The policy of the `check` and `exec` tests (`work/agent.yaml`): Claude Code tools and
/// commands run as protected actions.
pub const AGENT_POLICY: &str = "\
schema: countersign.policy/v1
environment: test
actions:
  Read:
    decision: allow
  Bash:
    rules:
      - when: { command: { eq: \"rm -rf /\" } }
        decision: deny
      - when: { command: { in: [\"ls\", \"git status\"] } }
        decision: allow
      - decision: approve
  \"mcp__github__*\":
    decision: approve
  job:
    effect: \"job:{id}\"
    decision: allow
  deploy:
    effect: \"deploy:{service}\"
    decision: approve
";

impl Sandbox {
    /// Write [`AGENT_POLICY`] to `work/agent.yaml`; its default store is the sandbox's.
    pub fn with_agent_policy(&self) -> &Sandbox {
        self.write("agent.yaml", AGENT_POLICY);
        self
    }

    /// Every receipt in the default store, as `receipts --json` prints them.
    pub fn receipts_json(&self) -> Vec<serde_json::Value> {
        let run = self.run(&["receipts", "--last", "1000", "--json"]);
        assert_eq!(run.status, Some(0), "{run:?}");
        serde_json::from_str(&run.stdout).expect("receipts --json is JSON")
    }
}

/// A store URL on the test PostgreSQL server (`COUNTERSIGN_TEST_POSTGRES_URL`) in a schema of
/// its own, `{prefix}_{pid}`, and that schema's name. Panics, saying what to run, without the
/// variable: these tests need a real PostgreSQL.
pub fn postgres_schema_url(prefix: &str) -> (String, String) {
    let base = std::env::var("COUNTERSIGN_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "COUNTERSIGN_TEST_POSTGRES_URL is not set: this test needs PostgreSQL; run `.ci/postgres.sh` and export the URL it prints"
        )
    });
    let separator = if base.contains('?') { '&' } else { '?' };
    let schema = format!("{prefix}_{}", std::process::id());
    (format!("{base}{separator}schema={schema}"), schema)
}
