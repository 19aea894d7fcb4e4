//! The adapter kit's own tests: the reference adapter passes every suite, each deliberately
//! broken adapter fails its named suite, the reports read as documented, and an adapter written
//! from docs/SPEC.md alone (for a toy framework) passes.
//!
//! One test binary (STYLE.md §6); the durability case re-runs the current test in child
//! processes, and runs the `countersign` command, built once per run by [`cli`].

mod adapter_kit {
    pub mod broken;
    pub mod reference;
    pub mod reports;
    pub mod toy_framework;
}

use std::path::PathBuf;
use std::sync::OnceLock;

use countersign_conformance::adapter_kit::KitOptions;

/// Kit options whose durability case uses the workspace's own `countersign` command.
pub fn options() -> KitOptions {
    KitOptions {
        cli: Some(cli().clone()),
        ..KitOptions::default()
    }
}

/// The `countersign` command: `$COUNTERSIGN_BIN`, or built from the workspace once.
pub fn cli() -> &'static PathBuf {
    static CLI: OnceLock<PathBuf> = OnceLock::new();
    CLI.get_or_init(|| {
        if let Some(path) = std::env::var_os("COUNTERSIGN_BIN") {
            return PathBuf::from(path);
        }
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the conformance crate sits in the workspace")
            .to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = std::process::Command::new(cargo)
            .current_dir(&root)
            .args([
                "build",
                "--quiet",
                "-p",
                "countersign-cli",
                "--bin",
                "countersign",
            ])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the countersign command failed");
        let exe = std::env::current_exe().expect("the test binary has a path");
        // target/<profile>/deps/<test binary> → target/<profile>/countersign
        exe.parent()
            .and_then(|deps| deps.parent())
            .expect("the test binary lives in target/<profile>/deps")
            .join(format!("countersign{}", std::env::consts::EXE_SUFFIX))
    })
}
