//! One crypto stack (RustCrypto): neither ring nor aws-lc is in the build (issue #32).
//!
//! Two checks:
//!
//! - **the lockfile** (`check`, pure): a package named in [`FORBIDDEN`] in `Cargo.lock` fails,
//!   unless every package that lists it is one of [`WEAK_ONLY`]. Cargo writes into the
//!   lockfile an optional dependency that a crate only names through a weak feature
//!   (`ring?/alloc`), even when nothing enables it (rust-lang/cargo#10801 and #11426): rustls'
//!   certificate verifier `rustls-webpki` does this for ring, so ring has a lockfile entry that
//!   is never compiled.
//! - **the build graph** (`check_build_graph`, run by `cargo xtask tidy` on the checkout): for
//!   each forbidden package the lockfile does hold, `cargo tree -i` over every target and
//!   dependency kind must print nothing, so that a weak-only entry that some feature does turn
//!   on still fails.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{Rule, Violation, Workspace};

/// Crypto libraries other than RustCrypto.
pub(crate) const FORBIDDEN: &[&str] = &["ring", "aws-lc-rs", "aws-lc-sys", "aws-lc-fips-sys"];

/// `(package, dependent)`: lockfile entries cargo writes for a weak feature only.
pub(crate) const WEAK_ONLY: &[(&str, &str)] = &[("ring", "rustls-webpki")];

/// The forbidden packages in `Cargo.lock` with the line of their `name`, and their dependents.
fn locked(root: &Path) -> Result<Vec<(String, usize, Vec<String>)>> {
    let path = root.join("Cargo.lock");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(Vec::new());
    };
    let lock: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("{} is not valid TOML", path.display()))?;
    let packages = lock
        .get("package")
        .and_then(|item| item.as_array_of_tables())
        .map(|tables| tables.iter().collect::<Vec<_>>())
        .unwrap_or_default();
    let mut found = Vec::new();
    for forbidden in FORBIDDEN {
        let present = packages
            .iter()
            .any(|package| package.get("name").and_then(|name| name.as_str()) == Some(forbidden));
        if !present {
            continue;
        }
        let dependents: Vec<String> = packages
            .iter()
            .filter(|package| {
                package
                    .get("dependencies")
                    .and_then(|list| list.as_array())
                    .is_some_and(|list| {
                        list.iter().any(|entry| {
                            entry
                                .as_str()
                                .and_then(|entry| entry.split(' ').next())
                                .is_some_and(|name| name == *forbidden)
                        })
                    })
            })
            .filter_map(|package| package.get("name").and_then(|name| name.as_str()))
            .map(str::to_owned)
            .collect();
        let needle = format!("name = \"{forbidden}\"");
        let line = text
            .lines()
            .position(|line| line.trim() == needle)
            .map_or(0, |index| index + 1);
        found.push(((*forbidden).to_owned(), line, dependents));
    }
    Ok(found)
}

/// The lockfile check.
///
/// # Errors
///
/// A `Cargo.lock` that is not TOML.
pub(crate) fn check(workspace: &Workspace) -> Result<Vec<Violation>> {
    let mut violations = Vec::new();
    for (name, line, dependents) in locked(&workspace.root)? {
        let strong: Vec<&String> = dependents
            .iter()
            .filter(|dependent| !WEAK_ONLY.contains(&(name.as_str(), dependent.as_str())))
            .collect();
        if strong.is_empty() && !dependents.is_empty() {
            continue;
        }
        violations.push(Violation {
            rule: Rule::CryptoStack,
            file: PathBuf::from("Cargo.lock"),
            line,
            message: format!(
                "`{name}` is in Cargo.lock (through {}): Countersign has one crypto stack, RustCrypto; use `countersign_http` for TLS and RustCrypto crates for the rest (see `cargo tree -i {name}`)",
                if strong.is_empty() {
                    "nothing".to_owned()
                } else {
                    strong.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
                }
            ),
        });
    }
    Ok(violations)
}

/// The build-graph check: `cargo tree -i` for each forbidden package the lockfile holds.
///
/// # Errors
///
/// `cargo tree` cannot run.
pub(crate) fn check_build_graph(root: &Path) -> Result<Vec<Violation>> {
    let mut violations = Vec::new();
    for (name, line, _) in locked(root)? {
        let output = std::process::Command::new(
            std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()),
        )
        .current_dir(root)
        .args([
            "tree",
            "--workspace",
            "--target",
            "all",
            "-e",
            "normal,build,dev",
            "--prefix",
            "none",
            "-i",
            &name,
        ])
        .output()
        .context("cannot run `cargo tree`")?;
        if !output.status.success() {
            anyhow::bail!(
                "`cargo tree -i {name}` failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        let tree = String::from_utf8_lossy(&output.stdout);
        let first: Vec<&str> = tree.lines().take(4).collect();
        if !first.is_empty() {
            violations.push(Violation {
                rule: Rule::CryptoStack,
                file: PathBuf::from("Cargo.lock"),
                line,
                message: format!(
                    "`{name}` is compiled into the build ({}): Countersign has one crypto stack, RustCrypto",
                    first.join(" ← ")
                ),
            });
        }
    }
    Ok(violations)
}
