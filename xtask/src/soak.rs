//! `cargo xtask soak`: build `countersign-soak` (release unless `--debug`), copy it into a
//! run folder `<target>/soak/run-UNIXSECONDS/` so that later builds never replace the binary a
//! long soak re-executes for its restarted workers, and run it there (docs/soak.md).
//!
//! With `--store postgres` and no `--store-url`, the server is the one named by
//! `COUNTERSIGN_TEST_POSTGRES_URL`, or the one `.ci/postgres.sh` starts.

use anyhow::{Context, Result, bail};

const HELP: &str = "\
cargo xtask soak [--debug] [OPTIONS]

Builds countersign-soak (release; --debug: a debug build, as `cargo xtask test` runs it), copies
it into <target>/soak/run-UNIXSECONDS/ and runs it there with OPTIONS; the run folder keeps the
tallies, the kill log, the worker logs and summary.json. For --store postgres without
--store-url it uses COUNTERSIGN_TEST_POSTGRES_URL, or starts PostgreSQL with .ci/postgres.sh.

The options of countersign-soak:
";

/// Run `cargo xtask soak ARGS`.
///
/// # Errors
///
/// When the build fails, PostgreSQL cannot be set up, or the soak fails a check.
pub fn run(args: &[String]) -> Result<()> {
    let root = crate::project_root();
    let debug = args.iter().any(|arg| arg == "--debug");
    let help = args
        .iter()
        .any(|arg| matches!(arg.as_str(), "-h" | "--help" | "help"));
    let options: Vec<String> = args
        .iter()
        .filter(|arg| arg.as_str() != "--debug")
        .cloned()
        .collect();
    let postgres = options
        .windows(2)
        .any(|pair| pair[0] == "--store" && pair[1] == "postgres");
    if postgres && !options.iter().any(|arg| arg == "--store-url") && !help {
        crate::ensure_postgres(&root)?;
    }
    let mut build = crate::cargo();
    build.current_dir(&root).args([
        "build",
        "--quiet",
        "-p",
        "countersign-conformance",
        "--bin",
        "countersign-soak",
    ]);
    if !debug {
        build.arg("--release");
    }
    crate::run(build)?;
    let binary_name = format!("countersign-soak{}", std::env::consts::EXE_SUFFIX);
    let built = crate::target_dir(&root)
        .join(if debug { "debug" } else { "release" })
        .join(&binary_name);
    if help {
        print!("{HELP}");
        let mut show = std::process::Command::new(&built);
        show.arg("--help");
        return crate::run(show);
    }
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0);
    let folder = crate::target_dir(&root)
        .join("soak")
        .join(format!("run-{seconds}"));
    if folder.exists() {
        bail!(
            "the run folder `{}` exists already: start the soak again in a second",
            folder.display()
        );
    }
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create `{}`", folder.display()))?;
    let copy = folder.join(&binary_name);
    std::fs::copy(&built, &copy)
        .with_context(|| format!("cannot copy `{}` to `{}`", built.display(), copy.display()))?;
    let mut soak = std::process::Command::new(&copy);
    soak.current_dir(&root).args(&options);
    if !options.iter().any(|arg| arg == "--run-dir") {
        soak.arg("--run-dir").arg(&folder);
    }
    if let Some(url) = crate::POSTGRES_URL.get() {
        soak.env("COUNTERSIGN_TEST_POSTGRES_URL", url);
    }
    crate::run(soak)
}

/// The soak `cargo xtask test` runs: 60 seconds on SQLite, 4 workers, a debug build.
///
/// # Errors
///
/// As [`run`].
pub fn smoke() -> Result<()> {
    let args: Vec<String> = [
        "--debug",
        "--store",
        "sqlite",
        "--workers",
        "4",
        "--seconds",
        "60",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    run(&args)
}
