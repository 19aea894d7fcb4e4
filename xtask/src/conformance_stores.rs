//! `cargo xtask conformance --stores`: the store kit against memory, SQLite, PostgreSQL and
//! PostgreSQL through PgBouncer in transaction mode, one report line per backend
//! (`sqlite: 30/30 (0 not applicable)`, `postgres-pgbouncer: 33/33 (0 not applicable)`).
//!
//! PostgreSQL is the server named by `COUNTERSIGN_TEST_POSTGRES_URL` (`.ci/postgres.sh` prints
//! the line to export), PgBouncer the one named by `COUNTERSIGN_TEST_PGBOUNCER_URL`
//! (`.ci/pgbouncer.sh`; `cargo xtask test` starts it); without one, its line says so and the
//! command fails.

use anyhow::Result;

/// Build the kit and its worker, then run the kit. `args` are passed on (`--filter TEXT`,
/// `--backend NAME`).
///
/// # Errors
///
/// When the build fails, a case fails, or a backend cannot be set up.
pub fn run(args: &[String]) -> Result<()> {
    let root = crate::project_root();
    let mut build = crate::cargo();
    build.current_dir(&root).args([
        "build",
        "--quiet",
        "-p",
        "countersign-conformance",
        "--bins",
    ]);
    crate::run(build)?;
    let mut kit = crate::cargo();
    kit.current_dir(&root)
        .args([
            "run",
            "--quiet",
            "-p",
            "countersign-conformance",
            "--bin",
            "countersign-store-kit",
            "--",
        ])
        .args(args.iter().filter(|arg| arg.as_str() != "--stores"));
    crate::run(kit)
}
