//! Shared setup for the store tests.

use std::path::{Path, PathBuf};

use countersign_conformance::store_kit::{Fresh, KitOptions, PostgresBackend, StoreBackend};

/// The worker binary of this crate.
pub fn worker() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_countersign-store-worker"))
}

/// Kit options with the worker binary.
pub fn kit_options() -> KitOptions {
    KitOptions {
        worker: Some(worker()),
        filter: None,
    }
}

/// The PostgreSQL backend for this test binary's schemas, or a loud failure saying how to set
/// the server up.
pub fn postgres(prefix: &str) -> PostgresBackend {
    match PostgresBackend::from_env(prefix) {
        Ok(backend) => backend,
        Err(message) => panic!("{message}"),
    }
}

/// A fresh store, or a loud failure.
pub async fn fresh(backend: &dyn StoreBackend, case_path: &str) -> Fresh {
    match backend.fresh(case_path).await {
        Ok(fresh) => fresh,
        Err(message) => panic!("setting up `{case_path}` on {}: {message}", backend.name()),
    }
}

/// The SQLite file behind a `sqlite:` URL.
pub fn sqlite_file(url: &str) -> &Path {
    Path::new(url.strip_prefix("sqlite:").unwrap_or(url))
}

/// The schema behind a PostgreSQL kit URL.
pub fn schema_of(url: &str) -> String {
    url.split(['?', '&'])
        .find_map(|pair| pair.strip_prefix("schema="))
        .unwrap_or("public")
        .to_owned()
}
