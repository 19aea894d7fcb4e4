//! `cargo xtask fuzz`: the fuzz targets in `fuzz/` under AFL++ (issue #30), and their replay as
//! ordinary tests for `cargo xtask test` (docs/fuzzing.md).
//!
//! The fuzz crate is outside the workspace. Its instrumented build goes to `fuzz-afl/` inside the
//! target folder, apart from every ordinary build; the replay is an ordinary `cargo test` of the
//! crate, without the `afl` feature, so it needs no fuzzer and builds into the shared target
//! folder like the rest of the tests.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::{project_root, run, target_dir};

/// The cargo-afl release the targets are built with (the `afl` crate in `fuzz/Cargo.toml` is
/// pinned to the same version: the two must match).
const CARGO_AFL_VERSION: &str = "0.18.2";

const HELP: &str = "\
cargo xtask fuzz [--minutes N] [--jobs J] [--update-corpus] [--no-nice] [TARGET...]
cargo xtask fuzz --minimize [TARGET...]
cargo xtask fuzz --list
cargo xtask fuzz --replay

Fuzz the parsers of untrusted input with AFL++ (stable toolchain, through cargo-afl), each
TARGET (default: all of them) for N minutes (default 10), J at a time (default 1), starting from
its corpus in fuzz/corpus/<target>/. Progress is printed every minute (AFL writes its figures
about once a minute); at the end, a table of executions per second, coverage (AFL's map
density and edges found), crashes and hangs. It fails when any target found a crash or a hang,
naming the inputs to turn into regressions (fuzz/regressions/<target>/, see docs/fuzzing.md).

Options:
  --minutes N       how long each target runs (default 10)
  --jobs J          how many targets run at once (default 1; each takes one core)
  --update-corpus   afterwards, minimize the corpus and what the run found (afl-cmin -e) and
                    write the result back to fuzz/corpus/<target>/
  --minimize        do not fuzz: minimize each corpus with what the last run found (kept in
                    <target folder>/fuzz-afl/out/<target>/) and write it back, as --update-corpus
  --no-nice         do not lower the fuzzers' priority (by default they run under
                    `nice -n 19`, so a shared machine stays responsive; that lowers
                    executions per second when other work is running)
  --list            print the targets and exit
  --replay          run every corpus and regression input through its target as ordinary
                    tests, without the fuzzer (what `cargo xtask test` does), and exit

Installs cargo-afl with `cargo install --locked` when it is missing, and builds the targets
into <target folder>/fuzz-afl/. `cargo xtask test` replays every corpus and regression input
as ordinary tests, without the fuzzer.
";

/// The fuzz crate.
fn fuzz_dir(root: &Path) -> PathBuf {
    root.join("fuzz")
}

/// The targets: the files in `fuzz/fuzz_targets/`, sorted.
fn targets(root: &Path) -> Result<Vec<String>> {
    let folder = fuzz_dir(root).join("fuzz_targets");
    let mut names: Vec<String> = std::fs::read_dir(&folder)
        .with_context(|| format!("cannot read {}", folder.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|extension| extension == "rs"))
        .filter_map(|path| path.file_stem()?.to_str().map(str::to_owned))
        .collect();
    names.sort();
    Ok(names)
}

/// What the command line asked for.
struct Options {
    minutes: u64,
    jobs: usize,
    update_corpus: bool,
    minimize: bool,
    nice: bool,
    targets: Vec<String>,
}

fn parse(args: &[String], known: &[String]) -> Result<Options> {
    let mut options = Options {
        minutes: 10,
        jobs: 1,
        update_corpus: false,
        minimize: false,
        nice: true,
        targets: Vec::new(),
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--minutes" => {
                options.minutes = args
                    .next()
                    .and_then(|value| value.parse().ok())
                    .filter(|minutes| *minutes > 0)
                    .context("`--minutes` needs a whole number of minutes above 0, such as `--minutes 10`")?;
            }
            "--jobs" => {
                options.jobs = args
                    .next()
                    .and_then(|value| value.parse().ok())
                    .filter(|jobs| *jobs > 0)
                    .context("`--jobs` needs a whole number above 0, such as `--jobs 2`")?;
            }
            "--update-corpus" => options.update_corpus = true,
            "--minimize" => options.minimize = true,
            "--no-nice" => options.nice = false,
            other if other.starts_with('-') => {
                bail!("unknown option `{other}`: see `cargo xtask fuzz --help`")
            }
            target if known.iter().any(|name| name == target) => {
                options.targets.push(target.to_owned());
            }
            target => bail!(
                "no fuzz target `{target}`: the targets are {}",
                known.join(", ")
            ),
        }
    }
    if options.targets.is_empty() {
        options.targets = known.to_vec();
    }
    Ok(options)
}

/// `cargo xtask fuzz`.
///
/// # Errors
///
/// Bad arguments, a failed install or build, or a target that found a crash or a hang.
pub fn run_fuzz(args: &[String]) -> Result<()> {
    if args
        .iter()
        .any(|arg| matches!(arg.as_str(), "-h" | "--help" | "help"))
    {
        print!("{HELP}");
        return Ok(());
    }
    let root = project_root();
    let known = targets(&root)?;
    if args.iter().any(|arg| arg == "--list") {
        for name in &known {
            println!("{name}");
        }
        return Ok(());
    }
    if args.iter().any(|arg| arg == "--replay") {
        return replay(&root);
    }
    let options = parse(args, &known)?;
    ensure_cargo_afl()?;
    let build_dir = target_dir(&root).join("fuzz-afl");
    let mut build = afl_command(&build_dir);
    build
        .current_dir(fuzz_dir(&root))
        .args(["afl", "build", "--release", "--features", "afl"]);
    for target in &options.targets {
        build.args(["--bin", target]);
    }
    run(build)?;
    if options.minimize {
        for target in &options.targets {
            update_corpus(
                &root,
                &build_dir,
                target,
                &build_dir.join("out").join(target),
            )?;
        }
        return Ok(());
    }
    let results = fuzz_all(&root, &build_dir, &options)?;
    print_table(&results);
    if options.update_corpus {
        for result in &results {
            update_corpus(&root, &build_dir, &result.target, &result.out)?;
        }
    }
    let found: Vec<&Outcome> = results
        .iter()
        .filter(|result| result.crashes + result.hangs > 0)
        .collect();
    if !found.is_empty() {
        for result in &found {
            eprintln!(
                "xtask: `{}` found {} crash(es) and {} hang(s) in {} and {}",
                result.target,
                result.crashes,
                result.hangs,
                result.out.join("default/crashes").display(),
                result.out.join("default/hangs").display()
            );
        }
        bail!(
            "the fuzzers found crashes or hangs: fix each in the product code, copy its input into fuzz/regressions/<target>/ (named after the issue) and add a test (docs/fuzzing.md)"
        );
    }
    eprintln!("xtask: fuzz passed: no crash and no hang");
    Ok(())
}

/// `cargo` with the instrumented build's own target folder.
fn afl_command(build_dir: &Path) -> Command {
    let mut command = crate::cargo();
    command.env("CARGO_TARGET_DIR", build_dir);
    command
}

/// Install cargo-afl when `cargo afl` is missing, and build its AFL++ runtime when that is.
fn ensure_cargo_afl() -> Result<()> {
    let installed = crate::cargo()
        .args(["afl", "--version"])
        .output()
        .is_ok_and(|output| {
            output.status.success()
                && String::from_utf8_lossy(&output.stdout).contains(CARGO_AFL_VERSION)
        });
    if !installed {
        let mut install = crate::cargo();
        install.args([
            "install",
            "--locked",
            "--version",
            CARGO_AFL_VERSION,
            "cargo-afl",
        ]);
        run(install)?;
    }
    // Builds AFL++ for this toolchain; says so and fails when it is already built.
    let output = crate::cargo()
        .args(["afl", "config", "--build"])
        .output()
        .context("cannot run `cargo afl config --build`")?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() && !stderr.contains("already built") {
        bail!("`cargo afl config --build` failed: {}", stderr.trim());
    }
    Ok(())
}

/// One target's run, read from AFL's `fuzzer_stats`.
struct Outcome {
    target: String,
    out: PathBuf,
    execs: u64,
    execs_per_sec: f64,
    map_density: String,
    edges: String,
    corpus: String,
    crashes: u64,
    hangs: u64,
}

/// Run every target, `options.jobs` at a time, printing progress every minute (AFL writes
/// `fuzzer_stats` about once a minute).
fn fuzz_all(root: &Path, build_dir: &Path, options: &Options) -> Result<Vec<Outcome>> {
    let mut waiting: Vec<&String> = options.targets.iter().rev().collect();
    let mut running: Vec<(String, PathBuf, Child, Instant)> = Vec::new();
    let mut results = Vec::new();
    let seconds = options.minutes * 60;
    let mut last_report = Instant::now();
    loop {
        while running.len() < options.jobs {
            let Some(target) = waiting.pop() else { break };
            let out = build_dir.join("out").join(target);
            if out.exists() {
                std::fs::remove_dir_all(&out)
                    .with_context(|| format!("cannot clear {}", out.display()))?;
            }
            std::fs::create_dir_all(&out)?;
            let child = start(root, build_dir, target, &out, seconds, options.nice)?;
            eprintln!(
                "xtask: fuzzing `{target}` for {} minute(s) (output in {})",
                options.minutes,
                out.display()
            );
            running.push((target.clone(), out, child, Instant::now()));
        }
        if running.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
        let mut index = 0;
        while index < running.len() {
            if let Some(status) = running[index].2.try_wait()? {
                let (target, out, _, _) = running.remove(index);
                if !status.success() {
                    bail!(
                        "afl-fuzz for `{target}` failed with {status}: its log is {}",
                        out.join("afl.log").display()
                    );
                }
                let outcome = outcome(&target, &out)?;
                eprintln!("xtask: `{target}` done: {}", progress_line(&outcome));
                results.push(outcome);
            } else {
                index += 1;
            }
        }
        if last_report.elapsed() >= Duration::from_secs(60) {
            last_report = Instant::now();
            for (target, out, _, started) in &running {
                if let Ok(outcome) = outcome(target, out) {
                    eprintln!(
                        "xtask: `{target}` {}s/{seconds}s: {}",
                        started.elapsed().as_secs(),
                        progress_line(&outcome)
                    );
                }
            }
        }
    }
    results.sort_by(|a, b| a.target.cmp(&b.target));
    Ok(results)
}

/// Start afl-fuzz on one target, its screen off (several may run at once) and its output in
/// `out/afl.log`.
fn start(
    root: &Path,
    build_dir: &Path,
    target: &str,
    out: &Path,
    seconds: u64,
    nice: bool,
) -> Result<Child> {
    let mut command = if nice {
        let mut nice = Command::new("nice");
        nice.args(["-n", "19"])
            .arg(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
        nice
    } else {
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
    };
    let log = std::fs::File::create(out.join("afl.log"))?;
    command
        .current_dir(root)
        .env("AFL_NO_UI", "1")
        // Other work shares the cores: do not pin a fuzzer to one.
        .env("AFL_NO_AFFINITY", "1")
        .env("AFL_SKIP_CPUFREQ", "1")
        // Crashes are read from AFL's own output, not from core dumps.
        .env("AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES", "1")
        .args(["afl", "fuzz", "-i"])
        .arg(fuzz_dir(root).join("corpus").join(target))
        .arg("-o")
        .arg(out)
        .args(["-V", &seconds.to_string(), "-t", "1000", "--"])
        .arg(build_dir.join("release").join(target))
        .stdout(log.try_clone()?)
        .stderr(log);
    command
        .spawn()
        .with_context(|| format!("cannot start afl-fuzz for `{target}`"))
}

/// The figures of `out/default/fuzzer_stats`.
fn outcome(target: &str, out: &Path) -> Result<Outcome> {
    let path = out.join("default").join("fuzzer_stats");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "no {} (see {})",
            path.display(),
            out.join("afl.log").display()
        )
    })?;
    let field = |name: &str| {
        text.lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(key, _)| key.trim() == name)
            .map(|(_, value)| value.trim().to_owned())
            .unwrap_or_default()
    };
    let number = |name: &str| field(name).parse::<u64>().unwrap_or(0);
    let execs = number("execs_done");
    let run_time = number("run_time").max(1);
    Ok(Outcome {
        target: target.to_owned(),
        out: out.to_path_buf(),
        execs,
        // The average over the whole run (`execs_per_sec` is AFL's recent rate).
        execs_per_sec: execs as f64 / run_time as f64,
        map_density: field("bitmap_cvg"),
        edges: format!("{}/{}", field("edges_found"), field("total_edges")),
        corpus: field("corpus_count"),
        crashes: number("saved_crashes"),
        hangs: number("saved_hangs"),
    })
}

fn progress_line(outcome: &Outcome) -> String {
    format!(
        "{} execs ({:.0}/s), map density {}, edges {}, corpus {}, crashes {}, hangs {}",
        outcome.execs,
        outcome.execs_per_sec,
        outcome.map_density,
        outcome.edges,
        outcome.corpus,
        outcome.crashes,
        outcome.hangs
    )
}

fn print_table(results: &[Outcome]) {
    println!(
        "{:<10} {:>12} {:>9} {:>12} {:>13} {:>7} {:>8} {:>6}",
        "target", "execs", "execs/s", "map density", "edges", "corpus", "crashes", "hangs"
    );
    for result in results {
        println!(
            "{:<10} {:>12} {:>9.0} {:>12} {:>13} {:>7} {:>8} {:>6}",
            result.target,
            result.execs,
            result.execs_per_sec,
            result.map_density,
            result.edges,
            result.corpus,
            result.crashes,
            result.hangs
        );
    }
}

/// Minimize the corpus and the run's queue with afl-cmin, and write the result back to
/// `fuzz/corpus/<target>/`.
fn update_corpus(root: &Path, build_dir: &Path, target: &str, out: &Path) -> Result<()> {
    let corpus = fuzz_dir(root).join("corpus").join(target);
    let merged = out.join("merged");
    let minimized = out.join("minimized");
    for folder in [&merged, &minimized] {
        if folder.exists() {
            std::fs::remove_dir_all(folder)?;
        }
    }
    std::fs::create_dir_all(&merged)?;
    let queue = out.join("default/queue");
    if !queue.is_dir() {
        bail!(
            "no queue of `{target}` in {}: fuzz it first (`cargo xtask fuzz {target}`)",
            queue.display()
        );
    }
    for folder in [corpus.clone(), queue] {
        for entry in std::fs::read_dir(&folder)? {
            let path = entry?.path();
            if path.is_file()
                && let Some(name) = path.file_name()
            {
                std::fs::copy(&path, merged.join(name))?;
            }
        }
    }
    // afl-cmin.awk: cargo-afl's `cargo afl cmin` (the Python afl-cmin of AFL++ 4.40c) found
    // no coverage at all for most targets here and would have emptied their corpora. `-e`: edge
    // coverage only (hit counts ignored), which keeps the corpus small.
    let mut cmin = Command::new(afl_bin()?.join("afl-cmin.awk"));
    cmin.env("AFL_SKIP_CPUFREQ", "1")
        .env("AFL_PATH", afl_bin()?)
        .args(["-e", "-i"])
        .arg(&merged)
        .arg("-o")
        .arg(&minimized)
        .args(["-t", "1000", "--"])
        .arg(build_dir.join("release").join(target));
    run(cmin)?;
    let kept = std::fs::read_dir(&minimized)?.count();
    if kept == 0 {
        bail!("afl-cmin kept no input of `{target}`: fuzz/corpus/{target}/ is left as it was");
    }
    std::fs::remove_dir_all(&corpus)?;
    std::fs::create_dir_all(&corpus)?;
    for entry in std::fs::read_dir(&minimized)? {
        let path = entry?.path();
        if path.is_file() {
            let bytes = std::fs::read(&path)?;
            // A seed keeps its name; an input AFL found (`id:000012,src:...`) is named by its
            // content, so a rerun that keeps it keeps its name.
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .filter(|name| !name.contains(':'))
                .map_or_else(|| format!("found-{:016x}", fnv1a(&bytes)), str::to_owned);
            std::fs::write(corpus.join(name), bytes)?;
        }
    }
    eprintln!("xtask: fuzz/corpus/{target} now holds the minimized corpus ({kept} inputs)");
    Ok(())
}

/// The folder of the AFL++ programs cargo-afl built for this toolchain:
/// `$XDG_DATA_HOME/afl.rs/rustc-…/afl.rs-VERSION/afl/bin` (`~/.local/share` by default).
fn afl_bin() -> Result<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share")))
        .context("neither XDG_DATA_HOME nor HOME is set: cannot find cargo-afl's AFL++")?
        .join("afl.rs");
    let rustc = String::from_utf8_lossy(
        &Command::new("rustc")
            .arg("--version")
            .output()
            .context("cannot run `rustc --version`")?
            .stdout,
    )
    .into_owned();
    // `rustc 1.95.0 (59807616e 2026-04-14)` → `rustc-1.95.0-5980761`.
    let mut words = rustc.split_whitespace().skip(1);
    let version = words.next().unwrap_or_default();
    let hash: String = words
        .next()
        .unwrap_or_default()
        .trim_start_matches('(')
        .chars()
        .take(7)
        .collect();
    let bin = data
        .join(format!("rustc-{version}-{hash}"))
        .join(format!("afl.rs-{CARGO_AFL_VERSION}"))
        .join("afl/bin");
    if !bin.join("afl-cmin.awk").is_file() {
        bail!(
            "no AFL++ in {}: run `cargo afl config --build` (cargo-afl {CARGO_AFL_VERSION})",
            bin.display()
        );
    }
    Ok(bin)
}

/// FNV-1a, 64 bits: a stable file name for a corpus input (not a security hash).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The replay for `cargo xtask test`: the fuzz crate's tests, without the fuzzer, built into
/// the shared target folder. Not `--locked`: a dependency a product crate adds later is
/// resolved into `fuzz/Cargo.lock` then, keeping every version the lock already holds.
///
/// # Errors
///
/// When the build fails or an input makes a target fail.
pub fn replay(root: &Path) -> Result<()> {
    let mut test = crate::cargo();
    test.current_dir(fuzz_dir(root))
        .env("CARGO_TARGET_DIR", target_dir(root))
        .args(["test", "--quiet"]);
    run(test)
}
