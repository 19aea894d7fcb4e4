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
        let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the conformance crate sits in the workspace");
        countersign_conformance::adapter_kit::workspace_cli(workspace)
            .unwrap_or_else(|error| panic!("{error}"))
    })
}
