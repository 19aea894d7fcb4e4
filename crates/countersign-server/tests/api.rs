//! The approval service end to end: a real server on 127.0.0.1:0 over real stores (SQLite and
//! PostgreSQL), the agent's `Control` on the same store, and an HTTP client.
//!
//! PostgreSQL tests read `COUNTERSIGN_TEST_POSTGRES_URL` and fail loudly without it (run
//! `.ci/postgres.sh` to get one). The inbox tests (`inbox::`) drive real Chromium and fail
//! loudly without it (run `.ci/browser.sh`, which `cargo xtask test` runs first).

mod api {
    pub mod browser;
    pub mod chromium;
    pub mod inbox;
    pub mod interrupts;
    pub mod oidc;
    pub mod pages;
    pub mod robustness;
    pub mod routes;
    pub mod slack;
    pub mod support;
    pub mod webhooks;
}
