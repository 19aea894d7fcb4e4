//! What the kernel's integration tests share.

/// `COUNTERSIGN_TEST_POSTGRES_URL` with `schema=NAME_PID_NANOS` added: a schema no other test
/// or run uses, created when a store first opens the URL.
///
/// # Panics
///
/// When the variable is not set, saying how to set it (the tests need PostgreSQL, and fail
/// loudly rather than skip).
pub fn fresh_postgres_url(name: &str) -> String {
    let url = std::env::var("COUNTERSIGN_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "COUNTERSIGN_TEST_POSTGRES_URL is not set: these tests need PostgreSQL; run `.ci/postgres.sh` and export the URL it prints"
        )
    });
    let separator = if url.contains('?') { '&' } else { '?' };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    format!(
        "{url}{separator}schema={name}_{}_{nanos}",
        std::process::id()
    )
}
