//! Opening a PostgreSQL store: the connection probe, the pool, the schema check for readers and
//! the migrations for writers (see the [parent module](super) for the URL and the rules).

use super::*;

/// How [`PostgresStore::connect_inner`] treats the tables it finds.
#[derive(Clone, Copy, Debug)]
pub(super) enum Opening {
    /// Create what is missing and migrate (a store's writer: the agent, `serve`).
    Create,
    /// Migrate an existing store; refuse a location holding none of its tables.
    Existing,
    /// Only check the store is there at this build's version (a verifier).
    Read,
}

impl PostgresStore {
    /// [`PostgresStore::connect_with`], opening as `opening` says.
    pub(super) async fn connect_inner(
        connect_options: PgConnectOptions,
        options: PostgresOptions,
        location: String,
        opening: Opening,
    ) -> Result<PostgresStore, StoreError> {
        let open_error = |message: String| StoreError::Open {
            location: location.clone(),
            message,
        };
        if let Some(schema) = &options.schema {
            check_schema_name(schema).map_err(open_error)?;
        }
        let mut connect_options = connect_options.application_name("countersign");
        match options.pooler {
            Pooler::None => {
                if let Some(schema) = &options.schema {
                    connect_options = connect_options.options([("search_path", schema.as_str())]);
                }
            }
            // INVARIANT (pooled-session): nothing is left on a server connection between
            // transactions: no cached (named) statement, no startup option a transaction
            // pooler would refuse or carry to another client; the schema is `SET LOCAL`.
            Pooler::Transaction => {
                connect_options = connect_options
                    .statement_cache_capacity(0)
                    .extra_float_digits(None);
            }
        }
        // One direct connection first, bounded by CONNECT_PROBE: an unreachable server (refused,
        // unknown host) is reported at once instead of after the pool's 30 s acquire timeout.
        let probe = tokio::time::timeout(
            CONNECT_PROBE,
            sqlx::ConnectOptions::connect(&connect_options),
        )
        .await;
        match probe {
            Ok(Ok(connection)) => {
                let _ = sqlx::Connection::close(connection).await;
            }
            Ok(Err(error)) => {
                return Err(open_error(format!(
                    "cannot connect: {error}: check that PostgreSQL is running and the URL names a database you may use"
                )));
            }
            Err(_) => {
                return Err(open_error(format!(
                    "cannot connect: no answer within {CONNECT_PROBE:?}: check the host and port, and that PostgreSQL is running"
                )));
            }
        }
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(Duration::from_secs(30))
            // A round trip per transaction saved (issue #21): a connection is pinged before use
            // only after IDLE_PING idle; one that died sooner fails its `BEGIN`, which
            // `begin_transaction` then runs once more on another connection.
            .test_before_acquire(false)
            .before_acquire(|connection, meta| {
                Box::pin(async move {
                    if meta.idle_for > IDLE_PING {
                        sqlx::Connection::ping(connection).await?;
                    }
                    Ok(true)
                })
            })
            .connect_with(connect_options)
            .await
            .map_err(|error| {
                open_error(format!(
                    "cannot connect: {error}: check that PostgreSQL is running and the URL names a database you may use"
                ))
            })?;
        let store = PostgresStore {
            pool,
            group: crate::store::group::Group::new(group::leaders(options.max_connections)),
            options,
            location,
            offset: Default::default(),
            #[cfg(test)]
            caller_clock: Default::default(),
        };
        match opening {
            Opening::Create => store.migrate().await?,
            Opening::Read => store.check_readable().await?,
            // Only an older store is migrated: a location with none of a store's tables, or
            // with some but not all (another program's `approvals`), is refused untouched.
            Opening::Existing => match store.found_version().await? {
                found if found == SCHEMA_VERSION => {}
                found if found > SCHEMA_VERSION => {
                    return Err(StoreError::Incompatible {
                        found,
                        supported: SCHEMA_VERSION,
                    });
                }
                _ => store.migrate().await?,
            },
        }
        Ok(store)
    }

    /// Connect for reading only (`countersign verify`): as [`PostgresStore::connect`], but
    /// nothing is created or migrated; the database (and `?schema=`) must already hold a
    /// Countersign store at this build's schema version.
    ///
    /// # Errors
    ///
    /// As [`PostgresStore::connect`]; [`StoreError::Open`] naming the missing table, or the
    /// version found and how to migrate.
    pub async fn connect_for_reading(url: &str) -> Result<PostgresStore, StoreError> {
        let (connect_options, options, location) = read_url(url)?;
        PostgresStore::connect_inner(connect_options, options, location, Opening::Read).await
    }

    /// Connect to a store that must already exist (`countersign receipts`, `approve`,
    /// `resolve`…): as [`PostgresStore::connect`], migrating an older store forward, but a
    /// database (or `?schema=`) holding none of a store's tables is refused instead of set up,
    /// so that a mistyped URL is not shown as an empty store.
    ///
    /// # Errors
    ///
    /// As [`PostgresStore::connect`]; [`StoreError::NoStore`] when none of a store's tables is
    /// there (nothing was created).
    ///
    /// # Cancel safety
    ///
    /// As [`PostgresStore::connect`].
    pub async fn connect_existing(url: &str) -> Result<PostgresStore, StoreError> {
        let (connect_options, options, location) = read_url(url)?;
        PostgresStore::connect_inner(connect_options, options, location, Opening::Existing).await
    }

    /// Is a Countersign store at this build's version here? Reads only.
    pub(super) async fn check_readable(&self) -> Result<(), StoreError> {
        match self.found_version().await? {
            found if found == SCHEMA_VERSION => Ok(()),
            found if found > SCHEMA_VERSION => Err(StoreError::Incompatible {
                found,
                supported: SCHEMA_VERSION,
            }),
            found => Err(StoreError::Open {
                location: self.location.clone(),
                message: format!(
                    "its schema version {found} is older than this Countersign reads ({SCHEMA_VERSION}), and reading never migrates: run any other command on it once with this version (for example `countersign receipts`) to migrate it, or check it with the version that wrote it"
                ),
            }),
        }
    }

    /// The schema version of the Countersign store here, of any version. Reads only.
    ///
    /// # Errors
    ///
    /// [`StoreError::NoStore`] when none of a store's tables is here; [`StoreError::Open`]
    /// naming the table missing when some are (another program's tables, or a damaged store),
    /// or when they cannot be read.
    async fn found_version(&self) -> Result<i64, StoreError> {
        let open_error = |message: String| StoreError::Open {
            location: self.location.clone(),
            message,
        };
        const TABLES: [&str; 4] = [
            "countersign_schema_version",
            "receipts",
            "effects",
            "approvals",
        ];
        // In a transaction, which sets the schema behind a transaction pooler too (`SET LOCAL`,
        // `pooled.rs`); rolled back, as nothing is written.
        let mut transaction = self
            .begin_transaction()
            .await
            .map_err(|error| open_error(format!("cannot read its tables: {error}")))?;
        let mut missing = Vec::new();
        for table in TABLES {
            let present: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
                .bind(table)
                .persistent(self.persistent())
                .fetch_one(&mut *transaction)
                .await
                .map_err(|error| open_error(format!("cannot read its tables: {error}")))?;
            if present.is_none() {
                missing.push(table);
            }
        }
        let where_ = match &self.options.schema {
            Some(schema) => format!("the schema `{schema}` (`?schema=`)"),
            None => "the schema on the server's `search_path` (`public` unless set; `?schema=` names another)".to_owned(),
        };
        if missing.len() == TABLES.len() {
            // Nothing of a store: nothing has been recorded here (or the URL is not the
            // agent's), as for a SQLite file that does not exist.
            return Err(StoreError::NoStore {
                location: self.location.clone(),
                message: format!(
                    "no Countersign store here: {where_} has none of its tables, so nothing has been recorded in it yet; nothing was created: pass the agent's store URL, with its `?schema=` if it has one"
                ),
            });
        }
        if let Some(table) = missing.first() {
            return Err(open_error(format!(
                "not a whole Countersign store: {where_} has no `{table}` table, though it has others of a store's; nothing was created: restore it from a backup, or pass the agent's store URL"
            )));
        }
        let found: Option<i64> =
            sqlx::query_scalar("SELECT max(version) FROM countersign_schema_version")
                .persistent(self.persistent())
                .fetch_one(&mut *transaction)
                .await
                .map_err(|error| open_error(format!("cannot read its schema version: {error}")))?;
        drop(transaction);
        Ok(found.unwrap_or(0))
    }

    /// The database and schema in use, for messages (no password).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Create the schema if asked, then apply every migration newer than the database's version.
    pub(super) async fn migrate(&self) -> Result<(), StoreError> {
        let started = Instant::now();
        let mut delay = Duration::from_millis(2);
        loop {
            let mut tx = self.begin_transaction().await.map_err(migration_failed)?;
            let result: Result<(), sqlx::Error> = async {
                // One migrator per schema at a time, across processes and hosts.
                let schema = self.options.schema.clone().unwrap_or_default();
                sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('countersign:migrate:' || $1, 0))")
                    .bind(&schema)
                    .persistent(self.persistent()).execute(&mut *tx)
                    .await?;
                if let Some(schema) = &self.options.schema {
                    // INVARIANT (schema-name): checked by `check_schema_name`, so quoting is safe.
                    sqlx::query(sqlx::AssertSqlSafe(format!(
                        "CREATE SCHEMA IF NOT EXISTS \"{schema}\""
                    )))
                    .persistent(self.persistent()).execute(&mut *tx)
                    .await?;
                }
                sqlx::query(
                    "CREATE TABLE IF NOT EXISTS countersign_schema_version (version BIGINT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
                )
                .persistent(self.persistent()).execute(&mut *tx)
                .await?;
                Ok(())
            }
            .await;
            match result {
                Ok(()) => {}
                Err(error)
                    if is_conflict(&error) && started.elapsed() < self.options.retry_budget =>
                {
                    drop(tx);
                    tokio::time::sleep(crate::store::jitter(delay)).await;
                    delay = (delay * 2).min(Duration::from_millis(200));
                    continue;
                }
                Err(error) => return Err(migration_failed(error)),
            }
            let found: Option<i64> =
                sqlx::query_scalar("SELECT max(version) FROM countersign_schema_version")
                    .persistent(self.persistent())
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(migration_failed)?;
            let found = found.unwrap_or(0);
            if found > SCHEMA_VERSION {
                return Err(StoreError::Incompatible {
                    found,
                    supported: SCHEMA_VERSION,
                });
            }
            for (version, sql) in MIGRATIONS.iter().filter(|(version, _)| *version > found) {
                sqlx::raw_sql(*sql)
                    .execute(&mut *tx)
                    .await
                    .map_err(migration_failed)?;
                sqlx::query("INSERT INTO countersign_schema_version (version) VALUES ($1)")
                    .bind(version)
                    .persistent(self.persistent())
                    .execute(&mut *tx)
                    .await
                    .map_err(migration_failed)?;
            }
            tx.commit().await.map_err(migration_failed)?;
            return Ok(());
        }
    }
}
