//! Opening a store for reading only ([`SqliteOptions::read_only`]): `countersign verify` and
//! `receipts --verify` must never create, migrate or repair what they check.

use std::path::PathBuf;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension};

use super::{SCHEMA_VERSION, SqliteOptions, SqliteStore};
use crate::error::StoreError;

/// The tables a reader of the log needs; a file without one of them is not a Countersign store.
const READ_TABLES: [&str; 4] = ["meta", "receipts", "effects", "approvals"];

impl SqliteStore {
    /// [`SqliteOptions::read_only`]: open an existing store without writing anything.
    pub(super) fn open_read_only(
        path: PathBuf,
        options: SqliteOptions,
    ) -> Result<SqliteStore, StoreError> {
        let open_error = |message: String| StoreError::Open {
            location: path.display().to_string(),
            message,
        };
        let connection = Connection::open_with_flags(&path, Self::reading_flags(&path))
            .map_err(|error| open_error(format!("cannot open it for reading: {error}")))?;
        // Whatever the flags, no statement may write: a writing operation fails with
        // `SQLITE_READONLY`, as on a read-only connection.
        connection
            .pragma_update(None, "query_only", true)
            .map_err(|error| open_error(error.to_string()))?;
        // A reader of a WAL database waits only while a writer checkpoints: bounded by the
        // same budget as a write.
        connection
            .busy_timeout(options.busy_budget)
            .map_err(|error| open_error(error.to_string()))?;
        Self::check_readable(&connection).map_err(open_error)?;
        connection.set_prepared_statement_cache_capacity(32);
        Ok(SqliteStore {
            // A reader writes nothing, so it has no log to checkpoint.
            checkpointer: None,
            connection: Mutex::new(connection),
            path,
            options,
            group: crate::store::group::Group::new(1),
            offset: Default::default(),
        })
    }

    /// How to open `path` for reading. Reading a database in WAL mode needs its `-wal` and `-shm`
    /// files, and SQLite creates them if they are missing; only a connection that may write
    /// removes them again when it closes as the last one (<https://sqlite.org/wal.html>,
    /// "Read-Only Databases"). So a store closed cleanly (no `-wal` beside it) is opened
    /// read-write without `SQLITE_OPEN_CREATE`, under `query_only`: its log is empty, closing
    /// writes nothing to the file, and the two files go away as they came, where a read-only
    /// connection left them behind empty. A store with a `-wal` (in use, or left by a crash) is
    /// opened `SQLITE_OPEN_READ_ONLY`, so that closing never checkpoints another process's log
    /// into the file. A write-protected file opens read-only either way.
    fn reading_flags(path: &std::path::Path) -> rusqlite::OpenFlags {
        let mut log = path.as_os_str().to_owned();
        log.push("-wal");
        let access = if std::path::Path::new(&log).exists() {
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
        };
        access | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
    }

    /// Is the existing file at `path` a Countersign store, at any schema version (which a writer
    /// then migrates)? Opened as for reading, so nothing is written; for the commands that must
    /// not turn a file that is not a store into one ([`crate::store::open_url_existing`]).
    ///
    /// # Errors
    ///
    /// [`StoreError::NoStore`] for a file with no table at all (empty, or made by `touch`);
    /// [`StoreError::Open`] for a database that is not a Countersign store, naming the table it
    /// lacks. What is not a readable database is `Ok`, for the writer's open to refuse.
    pub(crate) fn check_existing(path: &std::path::Path) -> Result<(), StoreError> {
        let location = path.display().to_string();
        let open_error = |message: String| StoreError::Open {
            location: location.clone(),
            message,
        };
        // What cannot be read as a database at all (a folder, a text file) is left to the
        // writer's open, whose refusal says what it is and what to do.
        if path.is_dir() {
            return Ok(());
        }
        let Ok(connection) = Connection::open_with_flags(path, Self::reading_flags(path)) else {
            return Ok(());
        };
        if connection.pragma_update(None, "query_only", true).is_err() {
            return Ok(());
        }
        let Ok(tables) = Self::tables(&connection) else {
            return Ok(());
        };
        if tables.is_empty() {
            return Err(StoreError::NoStore {
                location: location.clone(),
                message: "no Countersign store here: the file holds no table, so nothing has been recorded in it yet; nothing was created: pass the agent's store URL".to_owned(),
            });
        }
        Self::check_tables(&tables).map_err(open_error)
    }

    /// The names of the tables in the database.
    fn tables(connection: &Connection) -> Result<Vec<String>, String> {
        connection
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .and_then(|mut statement| {
                statement
                    .query_map([], |row| row.get::<_, String>(0))?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|error| {
                format!("it is not a readable SQLite database ({error}): pass the agent's store with `--store-url sqlite:PATH`")
            })
    }

    /// Does a database with these tables hold a Countersign store (of any version)?
    fn check_tables(tables: &[String]) -> Result<(), String> {
        for table in READ_TABLES {
            if !tables.iter().any(|name| name == table) {
                return Err(format!(
                    "not a Countersign store: it has no `{table}` table (it was made by another program, or the table was dropped); nothing was changed: pass the agent's store with `--store-url sqlite:PATH`, or restore the file from a backup"
                ));
            }
        }
        Ok(())
    }

    /// Is this file a Countersign store at this build's schema version? The message names the
    /// first thing missing and what to do next.
    fn check_readable(connection: &Connection) -> Result<(), String> {
        Self::check_tables(&Self::tables(connection)?)?;
        let found: Option<String> = connection
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |row| row.get(0),
            )
            .optional()
            .map_err(|error| format!("its schema version is unreadable: {error}"))?;
        let found = found.as_deref().unwrap_or("1");
        match found.parse::<i64>() {
            Ok(found) if found == SCHEMA_VERSION => Ok(()),
            Ok(found) if found > SCHEMA_VERSION => Err(format!(
                "its schema version {found} is newer than this Countersign reads ({SCHEMA_VERSION}): upgrade Countersign"
            )),
            Ok(found) => Err(format!(
                "its schema version {found} is older than this Countersign reads ({SCHEMA_VERSION}), and reading never migrates: run any other command on it once with this version (for example `countersign receipts`) to migrate it, or check it with the version that wrote it"
            )),
            Err(_) => Err(format!(
                "its schema version `{found}` is unreadable: restore the file from a backup"
            )),
        }
    }
}
