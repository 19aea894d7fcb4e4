//! The store kit: one set of cases every [`Store`] backend must pass.
//!
//! A [`StoreBackend`] hands out a fresh, empty store per case (a fresh SQLite file, a fresh
//! PostgreSQL schema named from the case path, a new in-memory store) and says whether its
//! stores can be opened from another OS process and reopened after a restart. [`run`] runs
//! every case and returns a [`Report`]; a case a backend cannot exercise is *not applicable*
//! with the backend's reason, and never counts as a pass. The report line reads
//! `sqlite: 26/26 (0 not applicable)`, that is `passed/applicable (k not applicable)`.
//!
//! Cases that need other processes drive the `countersign-store-worker` binary of this crate
//! (see [`worker`]); pass its path in [`KitOptions::worker`].
//!
//! The kit proves it can fail: [`broken`] holds deliberately broken stores (a real store with
//! one method broken), and each must fail the case named for it.

pub mod broken;
pub mod cases;
pub mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use countersign::store::{MemoryStore, open_url_async};
use countersign::store::{PostgresStore, SqliteStore, Store};

/// The environment variable naming the PostgreSQL server the tests use, for example
/// `postgres://postgres@127.0.0.1:5432/test`.
pub const POSTGRES_URL_VAR: &str = "COUNTERSIGN_TEST_POSTGRES_URL";

/// The environment variable naming the same server through PgBouncer in transaction mode, a
/// store URL with `pooler=transaction` (`.ci/pgbouncer.sh` prints it), for example
/// `postgres://postgres@127.0.0.1:6432/test?pooler=transaction`.
pub const PGBOUNCER_URL_VAR: &str = "COUNTERSIGN_TEST_PGBOUNCER_URL";

/// A failure to set a case up or to run it: the message says what happened.
pub type KitError = String;

/// A fresh store for one case.
pub struct Fresh {
    /// The URL another process opens the same store with (`memory:` for the memory backend,
    /// which no other process can reach).
    pub url: String,
    /// The store, opened in this process.
    pub store: Arc<dyn Store>,
    /// Keeps a temporary folder alive as long as the store is used.
    _folder: Option<Arc<tempfile::TempDir>>,
}

impl Fresh {
    /// A fresh store at `url`, keeping `folder` alive.
    pub fn new(
        url: String,
        store: Arc<dyn Store>,
        folder: Option<Arc<tempfile::TempDir>>,
    ) -> Fresh {
        Fresh {
            url,
            store,
            _folder: folder,
        }
    }

    /// The same store with another handle in its place (used by broken fixtures).
    pub fn with_store(self, store: Arc<dyn Store>) -> Fresh {
        Fresh { store, ..self }
    }
}

/// A store backend under test.
#[async_trait::async_trait]
pub trait StoreBackend: Send + Sync {
    /// Its name in the report: `memory`, `sqlite`, `postgres`, or a broken fixture's name.
    fn name(&self) -> String;

    /// `Err(reason)` when another OS process cannot open this backend's stores.
    fn cross_process(&self) -> Result<(), String>;

    /// `Err(reason)` when a store opened again does not hold what was written.
    fn durable(&self) -> Result<(), String>;

    /// A fresh, empty store for the case `case_path` (for example `reservation/one_winner`).
    ///
    /// # Errors
    ///
    /// A message when the store cannot be created: setup failures fail loudly.
    async fn fresh(&self, case_path: &str) -> Result<Fresh, KitError>;

    /// Another handle on the store of `fresh`, opened anew in this process (a restart, or a
    /// second connection racing the first).
    ///
    /// # Errors
    ///
    /// A message when the store cannot be opened.
    async fn reopen(&self, fresh: &Fresh) -> Result<Arc<dyn Store>, KitError>;
}

/// The in-memory backend: one process, nothing kept.
#[derive(Debug, Default)]
pub struct MemoryBackend;

#[async_trait::async_trait]
impl StoreBackend for MemoryBackend {
    fn name(&self) -> String {
        "memory".to_owned()
    }

    fn cross_process(&self) -> Result<(), String> {
        Err("the memory store lives inside one process: no other process can reach it".to_owned())
    }

    fn durable(&self) -> Result<(), String> {
        Err(
            "the memory store keeps nothing when it is dropped: there is nothing to reopen"
                .to_owned(),
        )
    }

    async fn fresh(&self, _case_path: &str) -> Result<Fresh, KitError> {
        Ok(Fresh::new(
            "memory:".to_owned(),
            Arc::new(MemoryStore::new()),
            None,
        ))
    }

    async fn reopen(&self, fresh: &Fresh) -> Result<Arc<dyn Store>, KitError> {
        // One process, one store: every handle is the same store.
        Ok(Arc::clone(&fresh.store))
    }
}

/// The SQLite backend: a fresh file in a temporary folder per case.
#[derive(Debug, Default)]
pub struct SqliteBackend;

#[async_trait::async_trait]
impl StoreBackend for SqliteBackend {
    fn name(&self) -> String {
        "sqlite".to_owned()
    }

    fn cross_process(&self) -> Result<(), String> {
        Ok(())
    }

    fn durable(&self) -> Result<(), String> {
        Ok(())
    }

    async fn fresh(&self, case_path: &str) -> Result<Fresh, KitError> {
        let folder = tempfile::Builder::new()
            .prefix(&format!("cs-kit-{}-", sanitize(case_path)))
            .tempdir()
            .map_err(|error| format!("cannot create a temporary folder: {error}"))?;
        let path = folder.path().join("countersign.db");
        let store = SqliteStore::open(&path)
            .map_err(|error| format!("cannot open `{}`: {error}", path.display()))?;
        Ok(Fresh::new(
            format!("sqlite:{}", path.display()),
            Arc::new(store),
            Some(Arc::new(folder)),
        ))
    }

    async fn reopen(&self, fresh: &Fresh) -> Result<Arc<dyn Store>, KitError> {
        open_url_async(&fresh.url)
            .await
            .map_err(|error| format!("cannot reopen `{}`: {error}", fresh.url))
    }
}

/// The PostgreSQL backend: a fresh schema per case, named from the case path, in the database
/// named by [`POSTGRES_URL_VAR`].
#[derive(Debug, Clone)]
pub struct PostgresBackend {
    base_url: String,
    prefix: String,
    extra: String,
    /// The URL the stores connect through when it is not `base_url` (a transaction pooler in
    /// front of the same server); schemas are still dropped over `base_url`.
    pooled_url: Option<String>,
}

impl PostgresBackend {
    /// The backend over the server at `base_url` (no `schema=` option); schemas are named
    /// `PREFIX_CASEPATH`.
    pub fn new(base_url: impl Into<String>, prefix: impl Into<String>) -> PostgresBackend {
        PostgresBackend {
            base_url: base_url.into(),
            prefix: prefix.into(),
            extra: String::new(),
            pooled_url: None,
        }
    }

    /// The backend over the server named by [`POSTGRES_URL_VAR`], its stores connecting
    /// through the PgBouncer (transaction mode) named by [`PGBOUNCER_URL_VAR`] (a URL with
    /// `pooler=transaction`); schemas are set up and dropped over the direct connection.
    ///
    /// # Errors
    ///
    /// A message saying how to start PgBouncer when the variable is missing (the tests fail
    /// loudly, never skip).
    pub fn pgbouncer_from_env(prefix: impl Into<String>) -> Result<PostgresBackend, KitError> {
        let direct = postgres_url_from_env()?;
        let pooled = match std::env::var(PGBOUNCER_URL_VAR) {
            Ok(url) if !url.trim().is_empty() => url,
            _ => {
                return Err(format!(
                    "{PGBOUNCER_URL_VAR} is not set: the pooled PostgreSQL tests need PgBouncer in transaction mode; run `.ci/pgbouncer.sh ENV_FILE` (after `.ci/postgres.sh`) and `source ENV_FILE`"
                ));
            }
        };
        let mut backend = PostgresBackend::new(direct, prefix);
        backend.pooled_url = Some(pooled);
        Ok(backend)
    }

    /// The backend over the server named by [`POSTGRES_URL_VAR`].
    ///
    /// # Errors
    ///
    /// A message saying how to set the variable when it is missing (the tests fail loudly,
    /// never skip).
    pub fn from_env(prefix: impl Into<String>) -> Result<PostgresBackend, KitError> {
        Ok(PostgresBackend::new(postgres_url_from_env()?, prefix))
    }

    /// Add store URL options (for example `isolation=serializable&max_connections=32`).
    pub fn with_options(mut self, options: &str) -> PostgresBackend {
        if !options.is_empty() {
            self.extra.push('&');
            self.extra.push_str(options);
        }
        self
    }

    /// The schema for `case_path`: `PREFIX_CASE`, lowercase, at most 63 bytes (a hash of the
    /// full path keeps long names distinct).
    pub fn schema_for(&self, case_path: &str) -> String {
        let name = format!("{}_{}", self.prefix, sanitize(case_path));
        if name.len() <= 63 {
            return name;
        }
        let digest = countersign::canonical::sha256_prefixed(name.as_bytes());
        let short = &digest["sha256:".len().."sha256:".len() + 10];
        format!("{}_{short}", &name[..52])
    }

    /// The store URL of `schema`.
    pub fn url_for(&self, schema: &str) -> String {
        let base = self.pooled_url.as_deref().unwrap_or(&self.base_url);
        let joiner = if base.contains('?') { '&' } else { '?' };
        format!("{base}{joiner}schema={schema}{}", self.extra)
    }

    /// Drop `schema` and everything in it.
    ///
    /// # Errors
    ///
    /// A message when the server cannot be reached.
    pub async fn drop_schema(&self, schema: &str) -> Result<(), KitError> {
        let pool = admin_pool(&self.base_url).await?;
        // INVARIANT (schema-name): `schema_for` only yields [a-z0-9_].
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
        )))
        .execute(&pool)
        .await
        .map_err(|error| format!("cannot drop schema `{schema}`: {error}"))?;
        pool.close().await;
        Ok(())
    }
}

/// The PostgreSQL URL of the test server.
///
/// # Errors
///
/// A message saying how to set [`POSTGRES_URL_VAR`] when it is missing.
pub fn postgres_url_from_env() -> Result<String, KitError> {
    match std::env::var(POSTGRES_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => Ok(url),
        _ => Err(format!(
            "{POSTGRES_URL_VAR} is not set{}: the PostgreSQL tests need a server; run `.ci/postgres.sh` and use the `export {POSTGRES_URL_VAR}=...` line it prints (or set it to, for example, `postgres://postgres@127.0.0.1:5432/test`)",
            if std::env::var_os("CI").is_some() {
                " in CI"
            } else {
                ""
            }
        )),
    }
}

/// A one-connection pool on `url`, for setup and direct SQL.
///
/// # Errors
///
/// A message when the server cannot be reached.
pub async fn admin_pool(url: &str) -> Result<sqlx::PgPool, KitError> {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .map_err(|error| format!("cannot connect to PostgreSQL at `{url}`: {error}"))
}

#[async_trait::async_trait]
impl StoreBackend for PostgresBackend {
    fn name(&self) -> String {
        if self.pooled_url.is_some() {
            "postgres-pgbouncer".to_owned()
        } else {
            "postgres".to_owned()
        }
    }

    fn cross_process(&self) -> Result<(), String> {
        Ok(())
    }

    fn durable(&self) -> Result<(), String> {
        Ok(())
    }

    async fn fresh(&self, case_path: &str) -> Result<Fresh, KitError> {
        let schema = self.schema_for(case_path);
        self.drop_schema(&schema).await?;
        let url = self.url_for(&schema);
        let store = PostgresStore::connect(&url)
            .await
            .map_err(|error| format!("cannot open schema `{schema}`: {error}"))?;
        Ok(Fresh::new(url, Arc::new(store), None))
    }

    async fn reopen(&self, fresh: &Fresh) -> Result<Arc<dyn Store>, KitError> {
        open_url_async(&fresh.url)
            .await
            .map_err(|error| format!("cannot reopen the schema: {error}"))
    }
}

/// Lowercase `[a-z0-9_]` form of a case path.
pub fn sanitize(case_path: &str) -> String {
    case_path
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// How to run the kit.
#[derive(Clone, Debug, Default)]
pub struct KitOptions {
    /// The `countersign-store-worker` binary; without it, cross-process cases fail (they are
    /// applicable, and a missing worker is a setup failure, not a reason to skip).
    pub worker: Option<PathBuf>,
    /// Run only cases whose `suite/name` contains this text.
    pub filter: Option<String>,
}

/// How one case ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaseStatus {
    /// Every assertion held.
    Passed,
    /// An assertion failed, or the case could not be set up.
    Failed(String),
    /// The backend cannot exercise the case, for this reason. Never counts as a pass.
    NotApplicable(String),
}

/// One case's result.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// `suite/name`.
    pub case: String,
    /// How it ended.
    pub status: CaseStatus,
}

/// The kit's result for one backend.
#[derive(Clone, Debug)]
pub struct Report {
    /// The backend.
    pub backend: String,
    /// Every case run, in order.
    pub results: Vec<CaseResult>,
}

impl Report {
    /// Cases passed.
    pub fn passed(&self) -> usize {
        self.count(|status| matches!(status, CaseStatus::Passed))
    }

    /// Cases applicable (passed or failed).
    pub fn applicable(&self) -> usize {
        self.count(|status| !matches!(status, CaseStatus::NotApplicable(_)))
    }

    /// Cases not applicable.
    pub fn not_applicable(&self) -> usize {
        self.count(|status| matches!(status, CaseStatus::NotApplicable(_)))
    }

    fn count(&self, wanted: impl Fn(&CaseStatus) -> bool) -> usize {
        self.results
            .iter()
            .filter(|result| wanted(&result.status))
            .count()
    }

    /// The failed cases and why.
    pub fn failures(&self) -> Vec<(&str, &str)> {
        self.results
            .iter()
            .filter_map(|result| match &result.status {
                CaseStatus::Failed(why) => Some((result.case.as_str(), why.as_str())),
                _ => None,
            })
            .collect()
    }

    /// Did the case `case` (`suite/name`) fail?
    pub fn failed(&self, case: &str) -> bool {
        self.results
            .iter()
            .any(|result| result.case == case && matches!(result.status, CaseStatus::Failed(_)))
    }

    /// `sqlite: 26/26 (1 not applicable)`.
    pub fn summary(&self) -> String {
        format!(
            "{}: {}/{} ({} not applicable)",
            self.backend,
            self.passed(),
            self.applicable(),
            self.not_applicable()
        )
    }

    /// The summary line, then one line per case that did not pass.
    pub fn render(&self) -> String {
        let mut text = self.summary();
        for result in &self.results {
            match &result.status {
                CaseStatus::Passed => {}
                CaseStatus::Failed(why) => {
                    text.push_str(&format!("\n  FAILED {}: {why}", result.case));
                }
                CaseStatus::NotApplicable(why) => {
                    text.push_str(&format!("\n  not applicable {}: {why}", result.case));
                }
            }
        }
        text
    }
}

/// What a case may use.
pub struct CaseContext<'a> {
    /// The backend.
    pub backend: &'a dyn StoreBackend,
    /// The worker binary, if given.
    pub worker: Option<&'a Path>,
    /// `suite/name`.
    pub case_path: String,
}

impl CaseContext<'_> {
    /// A fresh store for this case.
    ///
    /// # Errors
    ///
    /// The backend's setup error.
    pub async fn fresh(&self) -> Result<Fresh, KitError> {
        self.backend.fresh(&self.case_path).await
    }

    /// The worker binary.
    ///
    /// # Errors
    ///
    /// A message when none was given.
    pub fn worker(&self) -> Result<&Path, KitError> {
        self.worker.ok_or_else(|| {
            "this case needs the `countersign-store-worker` binary: pass it in KitOptions::worker"
                .to_owned()
        })
    }
}

/// Run every case (or those matching the filter) against `backend`, one after another.
pub async fn run(backend: &dyn StoreBackend, options: &KitOptions) -> Report {
    let mut results = Vec::new();
    for case in cases::all() {
        let path = case.path();
        if let Some(filter) = &options.filter
            && !path.contains(filter.as_str())
        {
            continue;
        }
        let status = run_case(backend, options, case).await;
        results.push(CaseResult { case: path, status });
    }
    Report {
        backend: backend.name(),
        results,
    }
}

/// Run the one case `case_path` (`suite/name`) against `backend`.
///
/// # Errors
///
/// A message when no case has that path.
pub async fn run_one(
    backend: &dyn StoreBackend,
    options: &KitOptions,
    case_path: &str,
) -> Result<CaseStatus, KitError> {
    let case = cases::all()
        .into_iter()
        .find(|case| case.path() == case_path)
        .ok_or_else(|| format!("no store kit case `{case_path}`"))?;
    Ok(run_case(backend, options, case).await)
}

async fn run_case(
    backend: &dyn StoreBackend,
    options: &KitOptions,
    case: cases::Case,
) -> CaseStatus {
    let needs = match case.needs {
        cases::Needs::InProcess => Ok(()),
        cases::Needs::CrossProcess => backend.cross_process(),
        cases::Needs::Durable => backend.durable(),
    };
    if let Err(reason) = needs {
        return CaseStatus::NotApplicable(reason);
    }
    let context = CaseContext {
        backend,
        worker: options.worker.as_deref(),
        case_path: case.path(),
    };
    let run = (case.run)(&context);
    match tokio::time::timeout(Duration::from_secs(120), run).await {
        Ok(Ok(())) => CaseStatus::Passed,
        Ok(Err(why)) => CaseStatus::Failed(why),
        Err(_) => CaseStatus::Failed("the case did not finish within 120 s".to_owned()),
    }
}
