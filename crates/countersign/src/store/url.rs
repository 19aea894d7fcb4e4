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

/// `url` fit to print in a message or a log: the password of its user information
/// (`scheme://user:password@host` becomes `scheme://user@host`) and the value of a `password` or
/// `sslpassword` query parameter (becomes `***`) removed.
///
/// The user information ends at the last `@` before the first `/`, `?` or `#` after the scheme,
/// as the URL standard reads it and sqlx with it (a password may hold a raw `@`). Every scheme is
/// redacted alike, a mistyped one too (`postgress://`, `Postgres://`, `postgres:/`): a typo is
/// exactly when a URL reaches an error message. A `sqlite:` URL is a file path and is returned
/// unchanged.
pub fn redact_url(url: &str) -> String {
    if sqlite_path(url).is_some() {
        return url.to_owned();
    }
    let Some(colon) = url.find(':') else {
        return url.to_owned();
    };
    let after_scheme = &url[colon + 1..];
    let start = colon + 1 + (after_scheme.len() - after_scheme.trim_start_matches('/').len());
    let rest = &url[start..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let mut printed = match authority.rfind('@') {
        Some(at) => {
            let user = authority[..at].split(':').next().unwrap_or("");
            format!("{}{user}{}", &url[..start], &rest[at..])
        }
        None => url.to_owned(),
    };
    if let Some(question) = printed.find('?') {
        let (head, tail) = printed.split_at(question + 1);
        let (query, fragment) = tail.split_at(tail.find('#').unwrap_or(tail.len()));
        let query: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _))
                    if query_key(key).eq_ignore_ascii_case("password")
                        || query_key(key).eq_ignore_ascii_case("sslpassword") =>
                {
                    format!("{key}=***")
                }
                _ => pair.to_owned(),
            })
            .collect();
        printed = format!("{head}{}{fragment}", query.join("&"));
    }
    printed
}

/// A URL query key as the driver reads it (`application/x-www-form-urlencoded`, as the URL
/// standard's query parsing does): `+` is a space and `%XX` the byte it names, so
/// `pass%77ord` is `password`. Found by a first-time user: an encoded key got past the
/// redaction and the check for a key given twice.
pub(crate) fn query_key(raw: &str) -> std::borrow::Cow<'_, str> {
    if !raw.contains(['%', '+']) {
        return std::borrow::Cow::Borrowed(raw);
    }
    let spaced = raw.replace('+', " ");
    std::borrow::Cow::Owned(
        percent_encoding::percent_decode_str(&spaced)
            .decode_utf8_lossy()
            .into_owned(),
    )
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
            location: redact_url(url),
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
        location: redact_url(url),
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
    if url.starts_with("memory:") {
        return Err(open_error(
            "the in-process store is `memory:` with nothing after the colon (it keeps nothing, so it has no name or path)",
        ));
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
        location: redact_url(url),
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
            location: redact_url(url),
            message: "this build of Countersign has no PostgreSQL store: build it with the cargo feature `postgres`".to_owned(),
        });
    }
    open_url(url)
}

/// Open a store that must already exist, from any URL [`open_url_async`] accepts, migrating an
/// older one forward: the operator's commands that read or answer what an agent recorded
/// (`countersign receipts`, `approve`, `resolve`…) open with this, so that a mistyped location
/// is refused instead of shown as an empty store. `sqlite:` refuses a file that does not exist,
/// holds no table, or is another program's database (nothing is added to it);
/// `postgres://` refuses a database (or `?schema=`) holding none of a store's tables
/// ([`PostgresStore::connect_existing`]); `memory:` is a new empty store.
///
/// # Errors
///
/// As [`open_url_async`]; [`StoreError::NoStore`] when nothing of a store is at the location
/// (nothing was created).
pub async fn open_url_existing(url: &str) -> Result<std::sync::Arc<dyn Store>, StoreError> {
    #[cfg(feature = "postgres")]
    if is_postgres_url(url) {
        return Ok(std::sync::Arc::new(
            PostgresStore::connect_existing(url).await?,
        ));
    }
    if let Some(path) = sqlite_path(url)
        && !path.is_empty()
    {
        if !std::path::Path::new(path).exists() {
            return Err(StoreError::NoStore {
                location: url.to_owned(),
                message: format!(
                    "no Countersign store here: the file `{path}` does not exist, so nothing has been recorded in it yet; nothing was created: pass the agent's store URL"
                ),
            });
        }
        // A file that is not a store (another program's database, an empty file) is refused
        // before a writer's open would add the store's tables to it.
        SqliteStore::check_existing(std::path::Path::new(path))?;
    }
    open_url_async(url).await
}

/// Open a store for reading only, from any URL [`open_url_async`] accepts: nothing is created
/// (no folder, file, schema or table) and nothing is migrated (`countersign verify` and
/// `receipts --verify`: a verifier only reads). `sqlite:` opens the file read-only
/// ([`sqlite::SqliteOptions::read_only`]); `postgres://` connects without migrating and checks
/// the tables are there at this build's version; `memory:` is a new empty store.
///
/// # Errors
///
/// As [`open_url_async`]; [`StoreError::Open`] when the location is not a Countersign store (it
/// names the missing table) or is at another schema version (it says how to migrate).
pub async fn open_url_for_reading(url: &str) -> Result<std::sync::Arc<dyn Store>, StoreError> {
    #[cfg(feature = "postgres")]
    if is_postgres_url(url) {
        return Ok(std::sync::Arc::new(
            PostgresStore::connect_for_reading(url).await?,
        ));
    }
    match locate(url)? {
        Location::Sqlite { path, mut options } => {
            options.read_only = true;
            Ok(std::sync::Arc::new(SqliteStore::open_with(path, options)?))
        }
        _ => open_url_async(url).await,
    }
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
        for url in [
            "sqlite:",
            "sqlite:x.db?journal=wal",
            "mysql://h/db",
            "memory:x",
        ] {
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

#[cfg(test)]
mod redact_tests {
    use super::redact_url;

    /// A password never reaches a message, whatever the scheme or its spelling (found by a
    /// first-time user: a mistyped scheme printed the whole URL).
    #[test]
    fn passwords_are_removed_from_every_scheme_and_query() {
        for (url, printed) in [
            ("postgres://bob:hunter2pw@db/x", "postgres://bob@db/x"),
            ("postgress://bob:hunter2pw@db/x", "postgress://bob@db/x"),
            ("Postgres://bob:hunter2pw@db/x", "Postgres://bob@db/x"),
            ("postgres:/bob:hunter2pw@db/x", "postgres:/bob@db/x"),
            (" postgres://bob:hunter2pw@db/x", " postgres://bob@db/x"),
            ("mysql://bob:hunter2pw@db/x", "mysql://bob@db/x"),
            ("http://bob:hunter2pw@db/x", "http://bob@db/x"),
            (
                "postgres://alice:hunter@2secret@db:5432/x",
                "postgres://alice@db:5432/x",
            ),
            (
                "postgres://bob@db/x?password=qwerty99&schema=s",
                "postgres://bob@db/x?password=***&schema=s",
            ),
            (
                "postgres://db/x?sslpassword=qwerty99#f",
                "postgres://db/x?sslpassword=***#f",
            ),
            (
                "postgres://db/x?application_name=a:b@c",
                "postgres://db/x?application_name=a:b@c",
            ),
            ("sqlite:odd:name@file.db", "sqlite:odd:name@file.db"),
            ("memory:", "memory:"),
        ] {
            assert_eq!(redact_url(url), printed, "{url}");
        }
    }

    #[test]
    fn an_unknown_scheme_is_refused_without_its_password() {
        let error = super::read_url("postgress://bob:hunter2pw@127.0.0.1/db")
            .expect_err("an unknown scheme");
        let message = error.to_string();
        assert!(!message.contains("hunter2pw"), "{message}");
        assert!(
            message.contains("unknown store scheme `postgress`"),
            "{message}"
        );
    }

    #[test]
    fn memory_with_a_name_says_memory_takes_nothing() {
        let message = super::open_url("memory:x")
            .err()
            .expect("refused")
            .to_string();
        assert!(
            message.contains("`memory:` with nothing after the colon"),
            "{message}"
        );
    }
}
