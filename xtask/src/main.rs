//! Project automation: `cargo xtask test | bench`.
//!
//! `cargo xtask test` is the one test command (README, Quick start); CI runs exactly it.

mod bench;

use std::process::Command;

use anyhow::{Context, Result, bail};

const HELP: &str = "\
cargo xtask <command>

Commands:
  test     run the whole test suite (what CI runs)
  bench    run the kernel benchmarks and print calls per second
           options: --quick (fewer iterations, for smoke runs)
";

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let command = args.next();
    let rest: Vec<String> = args.collect();
    match command.as_deref() {
        Some("test") => test(&rest),
        Some("bench") => bench::run(&rest),
        Some("-h" | "--help" | "help") | None => {
            print!("{HELP}");
            Ok(())
        }
        Some(other) => bail!("unknown xtask command `{other}`\n\n{HELP}"),
    }
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
}

fn run(mut command: Command) -> Result<()> {
    eprintln!("xtask: running {command:?}");
    let status = command
        .status()
        .with_context(|| format!("cannot start {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed with {status}");
    }
    Ok(())
}

fn test(_args: &[String]) -> Result<()> {
    let root = project_root();
    let mut tests = cargo();
    tests
        .current_dir(&root)
        .args(["test", "--workspace", "--all-targets"]);
    run(tests)?;
    let mut doctests = cargo();
    doctests
        .current_dir(&root)
        .args(["test", "--workspace", "--doc"]);
    run(doctests)?;
    // The benchmark harness runs once, briefly, so it never rots (no timing is asserted).
    bench::run(&["--quick".to_owned()])?;
    Ok(())
}

fn project_root() -> std::path::PathBuf {
    let manifest = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or(manifest)
}
