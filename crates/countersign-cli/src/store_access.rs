//! Which store a command opens, and what it says when the store is not there: reading
//! commands never create one; recording commands (`exec`, `check`) create one only in a folder
//! that exists.

use std::sync::Arc;

use countersign::store::{self, Store};

use crate::{Failure, Global};

/// The SQLite file the operator points at, when it does not exist. Reading commands never
/// create it: a typo would otherwise show an empty store.
pub(crate) fn missing_store_file(global: &Global) -> Option<String> {
    let url = global.store_url();
    let path = store::sqlite_path(&url)?;
    (!path.is_empty() && !std::path::Path::new(path).exists()).then(|| path.to_owned())
}

/// Why a missing store file is refused, with the next step: the store beside a policy that
/// exists (what `countersign init` sets up) is made by the agent's first call; any other path is
/// probably not the agent's store.
pub(crate) fn missing_store_message(global: &Global, path: &str) -> String {
    if global.store_url.is_none() && global.policy_path().is_file() {
        format!(
            "no store at `{path}` yet: nothing has been recorded under `{}`; the agent's first call makes it (the kernel API, `countersign exec` or `countersign check`), so there is nothing to show until then",
            global.policy_path().display()
        )
    } else {
        format!(
            "no store at `{path}`: nothing has been recorded there yet: pass the agent's store with `--store-url sqlite:PATH`, or its policy with `--policy FILE` (the store is `.countersign/countersign.db` beside it); `countersign demo` makes one to try"
        )
    }
}

/// The `--policy` and `--store-url` the operator passed, as flags to repeat in a command this
/// one suggests (` --store-url sqlite:x.db`), each value quoted for a POSIX shell where it needs
/// it (` --store-url 'postgres://db/app?schema=agents'`), so that the suggestion works when
/// pasted as shown; empty when both are the defaults. A password in the store URL is left out
/// ([`countersign::store::redact_url`]): a suggestion may be logged, or shown to a model by the
/// gateway; `PGPASSWORD` supplies it.
pub(crate) fn store_flags(global: &Global) -> String {
    let mut flags = String::new();
    if let Some(policy) = &global.policy {
        flags.push_str(&format!(
            " --policy {}",
            shell_word(&policy.display().to_string())
        ));
    }
    if let Some(url) = &global.store_url {
        flags.push_str(&format!(
            " --store-url {}",
            shell_word(&suggestable_url(url))
        ));
    }
    flags
}

/// `url` to suggest in a command: redacted ([`countersign::store::redact_url`]), and without
/// the query parameters whose values redaction hid, so that the command works pasted as shown
/// (found by a first-time user: `?password=***` sent `***` as the password, over
/// `PGPASSWORD`).
fn suggestable_url(url: &str) -> String {
    let redacted = countersign::store::redact_url(url);
    let Some((base, query)) = redacted.split_once('?') else {
        return redacted;
    };
    let (query, fragment) = query.split_at(query.find('#').unwrap_or(query.len()));
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| *pair != "***" && !pair.ends_with("=***"))
        .collect();
    if kept.is_empty() {
        format!("{base}{fragment}")
    } else {
        format!("{base}?{}{fragment}", kept.join("&"))
    }
}

/// [`store_flags`] for a suggestion shown away from this process's folder (the gateway's
/// `data.approve_with`, read by whoever answers, wherever they are): always `--policy`, with the
/// policy's absolute path, and a `sqlite:` store URL's path made absolute (found by a
/// first-time user: relative paths worked only from the gateway's own folder). A `memory:`
/// store is named as it is: no other process can reach it, which the gateway says when it starts.
pub(crate) fn absolute_store_flags(global: &Global) -> String {
    let absolute =
        |path: &std::path::Path| std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut flags = format!(
        " --policy {}",
        shell_word(&absolute(&global.policy_path()).display().to_string())
    );
    if let Some(url) = &global.store_url {
        let url = match store::sqlite_path(url) {
            Some(path) if !path.is_empty() => {
                let query = url.split_once('?').map(|(_, query)| format!("?{query}"));
                format!(
                    "sqlite:{}{}",
                    absolute(std::path::Path::new(path)).display(),
                    query.unwrap_or_default()
                )
            }
            _ => suggestable_url(url),
        };
        flags.push_str(&format!(" --store-url {}", shell_word(&url)));
    }
    flags
}

/// `word` as one word of a POSIX shell command line: as it is when nothing in it is special to
/// the shell, otherwise quoted (`shlex`). A word with a NUL byte, which no command line can
/// carry, is shown as it is.
pub(crate) fn shell_word(word: &str) -> std::borrow::Cow<'_, str> {
    shlex::try_quote(word).unwrap_or(std::borrow::Cow::Borrowed(word))
}

/// Open the store a command that records (`exec`, `check`) writes to: created on first use, but
/// never in a folder that does not exist, so that a mistyped `--store-url` fails instead of
/// quietly keeping requests where no human looks.
///
/// # Errors
///
/// A [`Failure`] naming the missing folder, or the store's own error.
pub(crate) async fn open_for_recording(global: &Global) -> Result<Arc<dyn Store>, Failure> {
    let url = global.store_url();
    if global.store_url.is_some()
        && let Some(path) = store::sqlite_path(&url)
        && !path.is_empty()
        && let Some(folder) = std::path::Path::new(path).parent()
        && !folder.as_os_str().is_empty()
        && !folder.is_dir()
    {
        return Err(Failure(format!(
            "the store's folder `{}` does not exist, so `--store-url {url}` is probably mistyped: give the store the humans look at, or create the folder first (`mkdir -p {}`)",
            folder.display(),
            shell_word(&folder.display().to_string())
        )));
    }
    Ok(store::open_url_async(&url).await?)
}

/// Open the store the operator points at, migrating an older one; refuse to create an empty
/// one by accident: a SQLite file that does not exist, or a PostgreSQL database or `?schema=`
/// holding none of a store's tables ([`store::open_url_existing`]).
pub(crate) async fn open_existing(global: &Global) -> Result<Arc<dyn Store>, Failure> {
    if let Some(path) = missing_store_file(global) {
        return Err(Failure(missing_store_message(global, &path)));
    }
    Ok(store::open_url_existing(&global.store_url()).await?)
}

/// Open the store for reading only (`verify`, `receipts --verify`): as [`open_existing`], but
/// nothing is created or migrated, and a file that is not a Countersign store is refused naming
/// what it lacks (`store::open_url_for_reading`).
pub(crate) async fn open_for_reading(global: &Global) -> Result<Arc<dyn Store>, Failure> {
    if let Some(path) = missing_store_file(global) {
        return Err(Failure(missing_store_message(global, &path)));
    }
    Ok(store::open_url_for_reading(&global.store_url()).await?)
}

/// [`open_for_reading`] for a command whose outcome "nothing to check" is its own
/// (`verify`, `receipts --verify`: exit 3, unverifiable): `Ok(Err(why))` when a PostgreSQL URL
/// names a database or schema holding none of a store's tables
/// ([`countersign::StoreError::NoStore`]), as a SQLite file that does not exist is (which the
/// caller checks first, with [`missing_store_file`]).
///
/// # Errors
///
/// As [`open_for_reading`], for every other failure.
pub(crate) async fn open_or_nothing(
    global: &Global,
) -> Result<Result<Arc<dyn Store>, String>, Failure> {
    if let Some(path) = missing_store_file(global) {
        return Err(Failure(missing_store_message(global, &path)));
    }
    match store::open_url_for_reading(&global.store_url()).await {
        Ok(store) => Ok(Ok(store)),
        Err(error @ countersign::StoreError::NoStore { .. }) => Ok(Err(error.to_string())),
        Err(error) => Err(error.into()),
    }
}

/// The effect key an operator means by `typed` (`resolve KEY`, `inspect KEY`): the key that
/// prints exactly as `typed` ([`countersign::evidence::escaped`], how every listing and message
/// prints a key: hidden characters as `\u{HEX}`, a backslash that starts `\u{` as `\u{5c}`),
/// when such a key is recorded; otherwise the key as typed. Printing is one-to-one, so at most
/// one key prints as `typed`: an escape the printer never writes (`\u{41}` for `A`) is not read
/// (found by a first-time user: typing `a\u{41}` acted on `aA`). `None` when `typed` is not a
/// valid key either way.
///
/// # Errors
///
/// The store's own error.
pub(crate) async fn effect_key_named(
    store: &dyn Store,
    typed: &str,
) -> Result<Option<countersign::EffectKey>, Failure> {
    use countersign::EffectKey;
    let literal = EffectKey::new(typed.to_owned()).ok();
    let unescaped = countersign::display::unescape(typed);
    if unescaped == typed || countersign::evidence::escaped(&unescaped) != typed {
        return Ok(literal);
    }
    let Ok(unescaped) = EffectKey::new(unescaped) else {
        return Ok(literal);
    };
    if store.effect(&unescaped).await?.is_some() || literal.is_none() {
        return Ok(Some(unescaped));
    }
    Ok(literal)
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn a_suggested_store_url_leaves_out_what_redaction_hid() {
        assert_eq!(
            super::suggestable_url("postgres://bob:pw@db/x?password=pw&schema=s"),
            "postgres://bob@db/x?schema=s"
        );
        assert_eq!(
            super::suggestable_url("postgres://db/x?pass%77ord=pw"),
            "postgres://db/x"
        );
        assert_eq!(
            super::suggestable_url("postgres://db/x?schema=s"),
            "postgres://db/x?schema=s"
        );
    }

    #[test]
    fn a_suggested_word_is_quoted_only_where_a_shell_would_change_it() {
        assert_eq!(
            shell_word("sqlite:.countersign/countersign.db"),
            "sqlite:.countersign/countersign.db"
        );
        for word in [
            "postgres://db/app?schema=agents&sslmode=require",
            "sqlite:my store.db",
            "it's $HOME",
            "*",
        ] {
            let quoted = shell_word(word);
            assert_ne!(quoted, word, "{word} is special to a shell");
            // A POSIX shell reads it back as the one word it was.
            assert_eq!(
                shlex::split(&quoted),
                Some(vec![word.to_owned()]),
                "{quoted}"
            );
        }
    }
}
