//! The store kit and the store cases (B22, B24, B25, B33, crash) against every backend.
//!
//! PostgreSQL tests read `COUNTERSIGN_TEST_POSTGRES_URL` and fail loudly without it (run
//! `.ci/postgres.sh` to get one).

mod stores {
    pub mod b22_same_key_in_flight;
    pub mod b24_sqlite_busy;
    pub mod b25_serialization_retries;
    pub mod b33_tamper_evidence;
    pub mod b56_sqlite_read_then_write;
    pub mod b57_transaction_pooler;
    pub mod b58_nothing_checked;
    pub mod kit;
    pub mod lanes;
    pub mod legacy_ids;
    pub mod lost_commit;
    pub mod migration;
    pub mod migration_v4;
    pub mod migration_v5;
    pub mod postgres_store;
    pub mod sqlite_migration_v5;
    pub mod support;
}
