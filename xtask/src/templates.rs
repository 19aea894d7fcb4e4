//! The adapter templates out of tree (issue #28): `cargo xtask test` copies
//! `examples/adapter-template/` outside the workspace and runs its tests as an adapter author's
//! CI would, with `countersign` and `countersign-conformance` patched to this checkout on the
//! command line (the template itself names versions only), building into the shared target
//! folder.

use std::path::Path;

use anyhow::{Context, Result};

use crate::{cargo, run, target_dir};

/// Copy `from` (files and folders, recursively) into `to`, leaving out `target/`.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        if name == "target" {
            continue;
        }
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            copy_tree(&path, &to.join(&name))?;
        } else {
            std::fs::copy(&path, to.join(&name))
                .with_context(|| format!("copying {}", path.display()))?;
        }
    }
    Ok(())
}

/// The Rust template's kit test, from a copy outside the workspace.
pub fn rust_template(root: &Path) -> Result<()> {
    let copy = target_dir(root).join("adapter-template-copy");
    if copy.exists() {
        std::fs::remove_dir_all(&copy)?;
    }
    copy_tree(&root.join("examples/adapter-template"), &copy)?;
    let patch = |name: &str, dir: &str| {
        format!(
            "patch.crates-io.{name}.path={:?}",
            root.join(dir).display().to_string()
        )
    };
    let mut cli = cargo();
    cli.current_dir(root)
        .args(["build", "--quiet", "-p", "countersign-cli"]);
    run(cli)?;
    let mut test = cargo();
    test.current_dir(&copy)
        .env(
            "COUNTERSIGN_BIN",
            target_dir(root).join("debug/countersign"),
        )
        .args(["test", "--quiet", "--config"])
        .arg(patch("countersign", "crates/countersign"))
        .arg("--config")
        .arg(patch("countersign-conformance", "conformance"))
        .args(["--", "--nocapture"]);
    run(test)
}

/// The Python template's kit test, from a copy outside the workspace, in a fresh venv holding
/// the wheel `adapters/python-tests.sh` built with the conformance kit.
pub fn python_template(root: &Path) -> Result<()> {
    let target = target_dir(root);
    let copy = target.join("adapter-template-python-copy");
    let venv = target.join("adapter-template-python-venv");
    for folder in [&copy, &venv] {
        if folder.exists() {
            std::fs::remove_dir_all(folder)?;
        }
    }
    copy_tree(&root.join("examples/adapter-template-python"), &copy)?;
    let wheel = std::fs::read_dir(target.join("py-wheels"))
        .context("no test wheel: adapters/python-tests.sh builds it first")?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .find(|path| path.extension().is_some_and(|extension| extension == "whl"))
        .context("no countersign wheel in py-wheels/")?;
    let mut make = std::process::Command::new("python3");
    make.args(["-m", "venv"]).arg(&venv);
    run(make)?;
    let mut install = std::process::Command::new(venv.join("bin/python"));
    install
        .args(["-m", "pip", "install", "--quiet", "pytest==9.2.0"])
        .arg(&wheel)
        .arg(&copy);
    run(install)?;
    let mut pytest = std::process::Command::new(venv.join("bin/python"));
    pytest
        .current_dir(&copy)
        .env("COUNTERSIGN_BIN", target.join("debug/countersign"))
        .args(["-m", "pytest", "-q"]);
    run(pytest)
}
