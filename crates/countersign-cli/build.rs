//! Names the git commit the `countersign` binary is built from, for `countersign --version`:
//! `COUNTERSIGN_GIT_COMMIT` when set (`cargo xtask dist` sets it), else `git rev-parse HEAD` in
//! this checkout, else `unknown` (a build from a crates.io package has no repository).

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn main() {
    println!("cargo::rerun-if-env-changed=COUNTERSIGN_GIT_COMMIT");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".to_owned());
    let dir = Path::new(&manifest);
    let commit = match std::env::var("COUNTERSIGN_GIT_COMMIT") {
        Ok(given) if !given.trim().is_empty() => given.trim().to_owned(),
        _ => {
            // Rebuild when HEAD moves: the checkout's HEAD file and the ref it points at.
            for file in ["HEAD", "packed-refs"] {
                if let Some(path) = git(dir, &["rev-parse", "--git-path", file]) {
                    println!("cargo::rerun-if-changed={}", dir.join(path).display());
                }
            }
            if let Some(head_ref) = git(dir, &["symbolic-ref", "-q", "HEAD"])
                && let Some(path) = git(dir, &["rev-parse", "--git-path", &head_ref])
            {
                println!("cargo::rerun-if-changed={}", dir.join(path).display());
            }
            git(dir, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned())
        }
    };
    println!("cargo::rustc-env=COUNTERSIGN_GIT_COMMIT={commit}");
}
