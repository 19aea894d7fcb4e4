//! `cargo xtask bench` (stores part): allow + effect throughput with 1, 2, 4, 8 and 16 concurrent
//! callers on SQLite and PostgreSQL, and with 1, 2, 4 and 8 worker processes on one PostgreSQL
//! database, built in release mode. Prints a table; asserts no timing.

use anyhow::Result;

/// Run the store benchmark (`quick`: 160 calls per row instead of 3,200, for smoke runs).
///
/// # Errors
///
/// When the build or the benchmark fails (PostgreSQL needs `COUNTERSIGN_TEST_POSTGRES_URL`).
pub fn run(quick: bool) -> Result<()> {
    let mut bench = crate::cargo();
    bench.current_dir(crate::project_root()).args([
        "run",
        "--quiet",
        "-p",
        "countersign-conformance",
        "--bin",
        "countersign-store-bench",
    ]);
    if !quick {
        bench.arg("--release");
    }
    bench.arg("--");
    if quick {
        bench.arg("--quick");
    }
    crate::run(bench)
}
