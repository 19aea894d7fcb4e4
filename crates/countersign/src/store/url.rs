//! Store URLs: `sqlite:PATH`, `memory:` and `postgres://…`, read into the backend they name
//! and opened.

use super::{MemoryStore, SqliteStore, Store, sqlite};
#[cfg(feature = "postgres")]
use super::{PostgresStore, postgres};
use crate::error::StoreError;

/// The file a `sqlite:` store URL names (`sqlite:PATH`, `sqlite://PATH`, options after `?`
/// dropped), or `None` for any other URL. The path may be empty (which [`open_url`] refuses).
pub fn sqlite_path(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("sqlite:")?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    Some(rest.split_once('?').map_or(rest, |(path, _)| path))
}

/// Open a store from a URL:
///
/// - `sqlite:PATH`, `sqlite://PATH` (relative) or `sqlite:///ABSOLUTE/PATH` — the embedded
///   default; add `?synchronous=full` to survive power loss at a cost in throughput;
/// - `memory:` — in this process only (nothing is kept: for tests and demos).
///
/// # Errors
///
/// [`StoreError::Open`] for an unknown scheme or an unusable location, and the errors of
/// [`SqliteStore::open`].
pub fn open_url(url: &str) -> Result<std::sync::Arc<dyn Store>, StoreError> {
    match locate(url)? {
        Location::Memory => Ok(std::sync::Arc::new(MemoryStore::new())),
        Location::Sqlite { path, options } => {
            Ok(std::sync::Arc::new(SqliteStore::open_with(path, options)?))
        }
        Location::Postgres => Err(StoreError::Open {
            location: url.to_owned(),
            message: "a PostgreSQL store is opened asynchronously: call `store::open_url_async`"
                .to_owned(),
        }),
    }
}

/// Where a store URL points, read without opening or creating anything.
enum Location<'a> {
    Memory,
    Sqlite {
        path: &'a str,
        options: sqlite::SqliteOptions,
    },
    /// `postgres://` or `postgresql://`; its options are read by the PostgreSQL store.
    Postgres,
}

/// Read a store URL: its scheme, and for `sqlite:` its path and options.
fn locate(url: &str) -> Result<Location<'_>, StoreError> {
    let open_error = |message: &str| StoreError::Open {
        location: url.to_owned(),
        message: message.to_owned(),
    };
    if url == "memory:" || url == "memory://" {
        return Ok(Location::Memory);
    }
    if let Some(path) = sqlite_path(url) {
        let query = url.split_once('?').map(|(_, query)| query);
        if path.is_empty() {
            return Err(open_error(
                "no file path: write `sqlite:PATH`, for example `sqlite:.countersign/countersign.db`",
            ));
        }
        let mut options = sqlite::SqliteOptions::default();
        for pair in query.into_iter().flat_map(|query| query.split('&')) {
            match pair {
                "synchronous=full" => options.synchronous_full = true,
                "synchronous=normal" => options.synchronous_full = false,
                other => {
                    return Err(open_error(&format!(
                        "unknown option `{other}`: the SQLite store accepts `synchronous=full` or `synchronous=normal`"
                    )));
                }
            }
        }
        return Ok(Location::Sqlite { path, options });
    }
    if is_postgres_url(url) {
        return Ok(Location::Postgres);
    }
    let scheme = url.split(':').next().unwrap_or(url);
    Err(open_error(&format!(
        "unknown store scheme `{scheme}`: use `sqlite:PATH` (the default), `postgres://USER@HOST/DATABASE` or `memory:`"
    )))
}

/// Read a store URL the way [`open_url_async`] does, without opening, creating or connecting to
/// anything: the backend it names (`memory`, `sqlite` or `postgres`), or the same
/// [`StoreError::Open`] opening it would give for a malformed URL. A `postgres://` URL has its
/// store options and its connection options read (with the `postgres` feature; without it, it
/// is refused as [`open_url_async`] refuses it).
///
/// For the fuzz targets in `fuzz/` (issue #30), which must not touch files or the network; not
/// part of the API, and hidden from its docs.
///
/// # Errors
///
/// [`StoreError::Open`], naming what is wrong with the URL.
///
/// # Panics
///
/// Never.
#[doc(hidden)]
pub fn read_url(url: &str) -> Result<&'static str, StoreError> {
    match locate(url)? {
        Location::Memory => Ok("memory"),
        Location::Sqlite { .. } => Ok("sqlite"),
        Location::Postgres => read_postgres_url(url).map(|()| "postgres"),
    }
}

#[cfg(feature = "postgres")]
fn read_postgres_url(url: &str) -> Result<(), StoreError> {
    postgres::read_url(url).map(|_| ())
}

#[cfg(not(feature = "postgres"))]
fn read_postgres_url(url: &str) -> Result<(), StoreError> {
    Err(StoreError::Open {
        location: url.to_owned(),
        message: "this build of Countersign has no PostgreSQL store: build it with the cargo feature `postgres`".to_owned(),
    })
}

fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Open a store from a URL, asynchronously: every URL [`open_url`] accepts, and
/// `postgres://USER@HOST:PORT/DATABASE` (or `postgresql://…`) for the PostgreSQL store (cargo
/// feature `postgres`; see [`PostgresStore`] for its options, such as `?schema=NAME`).
///
/// # Errors
///
/// As [`open_url`], and the errors of [`PostgresStore::connect`].
///
/// # Cancel safety
///
/// Opening PostgreSQL runs its migrations in one transaction: dropping the future leaves them
/// applied or not. The other backends open synchronously.
pub async fn open_url_async(url: &str) -> Result<std::sync::Arc<dyn Store>, StoreError> {
    #[cfg(feature = "postgres")]
    if is_postgres_url(url) {
        return Ok(std::sync::Arc::new(PostgresStore::connect(url).await?));
    }
    #[cfg(not(feature = "postgres"))]
    if is_postgres_url(url) {
        return Err(StoreError::Open {
            location: url.to_owned(),
            message: "this build of Countersign has no PostgreSQL store: build it with the cargo feature `postgres`".to_owned(),
        });
    }
    open_url(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_url_without_opening_or_creating_anything() {
        let folder = tempfile::tempdir().expect("a temporary folder");
        let file = folder.path().join("never.db");
        let url = format!("sqlite:{}?synchronous=full", file.display());
        assert_eq!(read_url(&url).expect("a valid URL"), "sqlite");
        assert!(!file.exists(), "reading a URL created its file");
        assert_eq!(read_url("memory:").expect("a valid URL"), "memory");
        #[cfg(feature = "postgres")]
        assert_eq!(
            read_url("postgres://root@127.0.0.1:1/none?schema=kit_a&sslmode=disable")
                .expect("a valid URL"),
            "postgres"
        );
    }

    #[test]
    fn refuses_what_opening_refuses_with_the_same_error() {
        for url in ["sqlite:", "sqlite:x.db?journal=wal", "mysql://h/db"] {
            let read = read_url(url).expect_err("refused");
            let opened = open_url(url).err().expect("refused");
            assert_eq!(read.to_string(), opened.to_string(), "{url}");
            assert!(matches!(read, StoreError::Open { .. }), "{read:?}");
        }
        #[cfg(feature = "postgres")]
        {
            let error =
                read_url("postgres://alice:hunter22@h/db?schema=a\"b").expect_err("refused");
            let message = error.to_string();
            assert!(message.contains("schema name"), "{message}");
            assert!(
                !message.contains("hunter22"),
                "the password shows: {message}"
            );
        }
    }
}
