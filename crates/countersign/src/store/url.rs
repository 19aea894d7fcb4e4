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
/// (`scheme://user:password@host` becomes `scheme://user@host`), and the value of every query
/// parameter that is not one of the known, non-secret ones ([`SHOWN_PARAMETERS`]) replaced by
/// `***` (`?password=…`, and a misspelt `?pasword=…` alike; a pair without `=` that is not
/// known is `***` whole, since `password%3D…` is one).
///
/// The user information ends at the last `@` before the first `/`, `?` or `#` after the scheme,
/// as the URL standard reads it and sqlx with it (a password may hold a raw `@`). A URL with an
/// `@` only later is malformed — a password holding a raw `/`, `?` or `#` — and is read failing
/// closed: everything before its last `@` is user information (found by a first-time user: such
/// a password was printed whole in the error saying the URL was malformed). Every scheme is
/// redacted alike, a mistyped one too (`postgress://`, `Postgres://`, `postgres:/`,
/// `postgres//`): a typo is exactly when a URL reaches an error message. A `sqlite:` URL is a
/// file path and is returned unchanged.
pub fn redact_url(url: &str) -> String {
    if sqlite_path(url).is_some() {
        return url.to_owned();
    }
    // Where the part after the scheme starts: after the first `//` when it comes before the
    // first `:` (a scheme typed without its colon), else after the first `:` and its slashes.
    let start = match (url.find("//"), url.find(':')) {
        (Some(slashes), Some(colon)) if slashes < colon => slashes + 2,
        (_, Some(colon)) => {
            let after = &url[colon + 1..];
            colon + 1 + (after.len() - after.trim_start_matches('/').len())
        }
        (Some(slashes), None) => slashes + 2,
        (None, None) => return url.to_owned(),
    };
    let rest = &url[start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let at = authority.rfind('@').or_else(|| {
        // No `@` in the authority: user information only if what would be its port is not a
        // number (`user:pa/ss@host` reads as host `user`, port `pa`), and an `@` comes later.
        let host_port = match authority.strip_prefix('[') {
            Some(bracketed) => bracketed.split_once(']').map_or("", |(_, port)| port),
            None => authority,
        };
        let bad_port = host_port
            .rfind(':')
            .is_some_and(|colon| !host_port[colon + 1..].bytes().all(|b| b.is_ascii_digit()));
        if bad_port { rest.rfind('@') } else { None }
    });
    let mut printed = match at {
        Some(at) => {
            let user = rest[..at].split([':', '/', '?', '#']).next().unwrap_or("");
            format!("{}{user}{}", &url[..start], &rest[at..])
        }
        None => url.to_owned(),
    };
    if let Some(question) = printed.find('?') {
        let (head, tail) = printed.split_at(question + 1);
        let (query, fragment) = tail.split_at(tail.find('#').unwrap_or(tail.len()));
        let query: Vec<String> = query
            .split('&')
            .map(|pair| {
                let (key, value) = match pair.split_once('=') {
                    Some((key, value)) => (key, Some(value)),
                    None => (pair, None),
                };
                let shown = SHOWN_PARAMETERS.contains(&query_key(key).as_ref());
                match value {
                    _ if shown || pair.is_empty() => pair.to_owned(),
                    Some(_) => format!("{key}=***"),
                    None => "***".to_owned(),
                }
            })
            .collect();
        printed = format!("{head}{}{fragment}", query.join("&"));
    }
    printed
}

/// The query parameters whose values [`redact_url`] shows: the PostgreSQL store's own and its
/// driver's (sqlx 0.9), less `password`. Any other may be a secret under another name.
pub const SHOWN_PARAMETERS: &[&str] = &[
    "schema",
    "isolation",
    "pooler",
    "max_connections",
    "retry_budget_ms",
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "application_name",
    "options",
];

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
            // Found by a first-time user: each of these was printed whole.
            (
                "postgres://bob:SECRETQ/@h:5432/x",
                "postgres://bob@h:5432/x",
            ),
            ("postgres://bob:SECRETR#@h/x", "postgres://bob@h/x"),
            ("postgres://bob:SECRETS?@h/x", "postgres://bob@h/x"),
            ("postgres//bob:SECRETT@h/x", "postgres//bob@h/x"),
            (
                "postgres://h/x?pasword=SECRETX&schema=s",
                "postgres://h/x?pasword=***&schema=s",
            ),
            ("postgres://h/x?passwd=SECRETY", "postgres://h/x?passwd=***"),
            ("postgres://h/x?password%3DSECRETG", "postgres://h/x?***"),
            (
                "postgres://h/x?pass%77ord=SECRETH",
                "postgres://h/x?pass%77ord=***",
            ),
            (
                "postgres://[::1]:5432/x?sslmode=disable",
                "postgres://[::1]:5432/x?sslmode=disable",
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
