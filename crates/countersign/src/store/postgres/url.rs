//! The `postgres://` URL: the schema to use, its name checked, and the password redacted
//! wherever the URL is shown.

use super::*;

/// Split a `postgres://` URL into sqlx's part and the store's options.
pub(super) fn parse_url(url: &str) -> Result<(String, PostgresOptions), String> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, query),
        None => (url, ""),
    };
    let mut options = PostgresOptions::default();
    let mut passed = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (raw_key, value) = pair.split_once('=').unwrap_or((pair, ""));
        // The key as sqlx reads it: `sch%65ma` is `schema`, `pass%77ord` is `password`.
        let key = crate::store::url::query_key(raw_key);
        // Which of two `schema=` was meant cannot be told, and the wrong one is another store
        // (found by a first-time user: the last one was used without a word).
        if !seen.insert(key.clone().into_owned()) {
            return Err(format!(
                "`{}` is given twice in the store URL's query: give it once",
                crate::evidence::printable(&key)
            ));
        }
        match key.as_ref() {
            "schema" => {
                check_schema_name(value)?;
                options.schema = Some(value.to_owned());
            }
            "isolation" => {
                options.isolation = Some(match value {
                    "read_committed" => Isolation::ReadCommitted,
                    "repeatable_read" => Isolation::RepeatableRead,
                    "serializable" => Isolation::Serializable,
                    other => {
                        return Err(format!(
                            "unknown isolation `{other}`: use `read_committed`, `repeatable_read` or `serializable`"
                        ));
                    }
                });
            }
            "pooler" => {
                options.pooler = match value {
                    "none" => Pooler::None,
                    "transaction" => Pooler::Transaction,
                    other => {
                        return Err(format!(
                            "unknown pooler `{other}`: use `transaction` behind a pooler in transaction mode (PgBouncer `pool_mode=transaction`), or `none`"
                        ));
                    }
                };
            }
            "max_connections" => {
                options.max_connections = value
                    .parse()
                    .ok()
                    .filter(|count| *count > 0)
                    .ok_or_else(|| {
                        format!("`max_connections={value}` is not a positive whole number")
                    })?;
            }
            "retry_budget_ms" => {
                options.retry_budget = Duration::from_millis(value.parse().map_err(|_| {
                    format!("`retry_budget_ms={value}` is not a whole number of milliseconds")
                })?);
            }
            // INVARIANT (one-crypto-stack): sqlx is built without TLS (its TLS backends bring
            // ring, aws-lc or OpenSSL), so a mode that demands TLS can never be met: say so
            // here rather than let the driver fail at connect with a message about its build.
            "sslmode" if matches!(value, "require" | "verify-ca" | "verify-full") => {
                return Err(format!(
                    "`sslmode={value}` asks for TLS, and this build connects to PostgreSQL without TLS: reach the server over its Unix socket or a private network with `sslmode=disable` (or `prefer`), or put a TLS-terminating proxy next to Countersign (for example PgBouncer with `server_tls_sslmode`) and point the URL at it"
                ));
            }
            // The driver's own parameters (sqlx 0.9, `PgConnectOptions` from a URL), passed on.
            "sslmode"
            | "ssl-mode"
            | "sslrootcert"
            | "ssl-root-cert"
            | "ssl-ca"
            | "sslcert"
            | "ssl-cert"
            | "sslkey"
            | "ssl-key"
            | "statement-cache-capacity"
            | "host"
            | "hostaddr"
            | "port"
            | "dbname"
            | "user"
            | "password"
            | "application_name"
            | "options" => passed.push(pair),
            // The driver would ignore it without a word (found by a first-time user: a
            // misspelt `shema=` opened the default schema, another store).
            other => {
                return Err(format!(
                    "the store URL has {}, which neither the PostgreSQL store nor its driver reads: check its spelling; the store reads `schema`, `isolation`, `pooler`, `max_connections` and `retry_budget_ms`, and passes `sslmode`, `sslrootcert`, `sslcert`, `sslkey`, `statement-cache-capacity`, `host`, `hostaddr`, `port`, `dbname`, `user`, `password`, `application_name` and `options` to the driver",
                    // A name is echoed; anything else (`password%3D…` decodes to
                    // `password=…`) may hold a secret.
                    if !other.is_empty()
                        && other.len() <= 64
                        && other
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
                    {
                        format!("the parameter `{other}`")
                    } else {
                        "a parameter whose name is not a name (not shown: it may hold a secret)"
                            .to_owned()
                    }
                ));
            }
        }
    }
    let sqlx_url = if passed.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", passed.join("&"))
    };
    Ok((sqlx_url, options))
}

pub(super) fn check_schema_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "schema name `{}` is not usable: use lowercase letters, digits and `_`, at most 63 characters, not starting with a digit",
            name.escape_debug()
        ))
    }
}

/// Where a URL points, without its password.
///
/// The user information is what precedes the last `@` of the authority (the part after `://`
/// up to the first `/`, `?` or `#`), as the URL standard reads it and sqlx with it: a password
/// may hold a raw `@` (`postgres://alice:p@ss@db/x`), and an `@` after the authority (in a
/// query value) is no user information at all.
pub(super) fn redact(url: &str) -> String {
    crate::store::url::redact_url(url)
}
