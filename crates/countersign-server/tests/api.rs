//! The approval service end to end: a real server on 127.0.0.1:0 over real stores (SQLite and
//! PostgreSQL), the agent's `Control` on the same store, and an HTTP client.
//!
//! PostgreSQL tests read `COUNTERSIGN_TEST_POSTGRES_URL` and fail loudly without it (run
//! `.ci/postgres.sh` to get one).

mod api {
    pub mod browser;
    pub mod oidc;
    pub mod robustness;
    pub mod routes;
    pub mod support;
}
