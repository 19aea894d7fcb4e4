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
                // Only a password that appears once in the URL can be told apart from the rest.
                if password.len() >= 4 && url.matches(password).count() == 1 {
                    assert!(
                        !error.to_string().contains(password),
                        "a refusal shows the password: {error}"
                    );
                }
            }
        }
    }
}

/// The password of `postgres://USER:PASSWORD@...` (or `postgresql://`), if the URL has one.
fn password_of(url: &str) -> Option<&str> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return None;
    }
    let scheme_end = url.find("://")?;
    let at = url.find('@')?;
    let userinfo = url.get(scheme_end + 3..at)?;
    userinfo.split_once(':').map(|(_, password)| password)
}
