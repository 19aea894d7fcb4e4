//! The store URL the `countersign` command reads from `--store-url` (and the bindings from their
//! `store` argument): [`countersign::store::read_url`], the reading [`countersign::store::open_url_async`]
//! does before it opens anything, including a `postgres://` URL's options and sqlx's own reading
//! of its connection options, and [`countersign::store::sqlite_path`].
//!
//! For every input: the URL names `memory`, `sqlite` or `postgres`, or is refused with
//! [`countersign::StoreError::Open`] and a message; a URL the reading accepts as `sqlite` has a
//! non-empty path, and `sqlite_path` finds the path of exactly the `sqlite:` URLs; a refusal
//! never shows a `postgres://` URL's password.

use countersign::StoreError;
use countersign::store;

/// Read one input as a store URL, opening nothing.
///
/// # Panics
///
/// When a property in the module docs does not hold (the fuzzer's crash).
pub fn run(data: &[u8]) {
    let Some(url) = crate::text(data) else {
        return;
    };
    let path = store::sqlite_path(url);
    assert_eq!(path.is_some(), url.starts_with("sqlite:"));
    match store::read_url(url) {
        Ok(backend) => {
            assert!(
                matches!(backend, "memory" | "sqlite" | "postgres"),
                "{backend}"
            );
            if backend == "sqlite" {
                assert!(
                    path.is_some_and(|path| !path.is_empty()),
                    "`{url}` has no path"
                );
            }
        }
        Err(error) => {
            assert!(matches!(error, StoreError::Open { .. }), "{error:?}");
            crate::check_message(&error, "store::read_url");
            if let Some(password) = password_of(url) {
                check_password_hidden(url, password);
            }
        }
    }
}

/// No piece of the password (between its `@` and `:`) shows in the refusal. A piece that also
/// reads as the message's own words (`greS` in `PostgreSQL`) is told apart by sending the URL
/// again with that piece replaced by a marker: only a copied password carries the marker.
fn check_password_hidden(url: &str, password: &str) {
    for piece in password.split(['@', ':']) {
        if piece.len() < 4 || url.matches(piece).count() != 1 {
            continue;
        }
        let marker = "Z".repeat(piece.len());
        if url.contains(&marker) {
            continue;
        }
        let marked = url.replacen(piece, &marker, 1);
        if let Err(error) = store::read_url(&marked) {
            assert!(
                !error.to_string().contains(&marker),
                "a refusal shows the password: {error}"
            );
        }
    }
}

/// The password of `postgres://USER:PASSWORD@HOST...` (or `postgresql://`), as the URL standard
/// reads it: the user information is what precedes the last `@` of the authority, which ends at
/// the first `/`, `?` or `#`.
fn password_of(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let userinfo = &authority[..authority.rfind('@')?];
    userinfo.split_once(':').map(|(_, password)| password)
}
