//! Nothing that outlives a transaction on a PostgreSQL connection (issue #22, case B57): behind
//! a pooler in transaction mode the next transaction runs on another server connection, so a
//! session-level advisory lock taken on one is stranded there (and its unlock, run elsewhere,
//! returns false), and a session setting leaks to whichever client gets the connection next.
//!
//! Checked in every line of every Rust file of every member, tests included, outside comments:
//! no call to the session-level advisory lock functions (`pg_advisory_lock`,
//! `pg_try_advisory_lock`, their `_shared` forms, `pg_advisory_unlock…`; the
//! `pg_advisory_xact_lock` family is what to use), and no SQL statement that opens with `SET`
//! unless it is `SET LOCAL`, `SET TRANSACTION` or `SET CONSTRAINTS` (a `SET` after `UPDATE …`
//! is no statement of its own, and `SET SESSION` is refused).

use super::{Rule, Violation, Workspace};

/// The session-level advisory lock functions, written in pieces so this file passes its own
/// rule.
const SESSION_LOCKS: [&str; 3] = [
    concat!("pg_", "advisory_lock"),
    concat!("pg_try_", "advisory_lock"),
    concat!("pg_", "advisory_unlock"),
];

/// This rule's own file: its tests plant what it refuses.
const OWN_FILE: &str = "xtask/src/tidy/pooler_safe.rs";

/// Check every Rust file of every member but this rule's own.
pub(crate) fn check(workspace: &Workspace) -> Vec<Violation> {
    let mut violations = Vec::new();
    for file in workspace.members.iter().flat_map(|member| &member.files) {
        if file.path == std::path::Path::new(OWN_FILE) {
            continue;
        }
        for (index, line) in file.text.lines().enumerate() {
            if let Some(message) = offence(line) {
                violations.push(Violation {
                    rule: Rule::PoolerSafe,
                    file: file.path.clone(),
                    line: index + 1,
                    message,
                });
            }
        }
    }
    violations
}

/// What is wrong with one line of Rust, if anything.
pub(crate) fn offence(line: &str) -> Option<String> {
    let code = line.trim_start();
    if code.starts_with("//") {
        return None;
    }
    let lower = code.to_ascii_lowercase();
    for lock in SESSION_LOCKS {
        if lower.contains(lock) {
            return Some(format!(
                "`{lock}…` takes or releases a session-level advisory lock, which a transaction pooler strands on a server connection (case B57): use `pg_advisory_xact_lock`, a row lock or a unique constraint"
            ));
        }
    }
    if let Some(statement) = session_set(&lower) {
        return Some(format!(
            "`{statement}` changes a session setting, which a transaction pooler carries to another client (case B57): use `SET LOCAL` inside the transaction"
        ));
    }
    None
}

/// A `SET` that opens a SQL statement (after a quote, `;` or the start of the line, spaces
/// skipped) and is not transaction-scoped.
fn session_set(lower: &str) -> Option<String> {
    let bytes = lower.as_bytes();
    let mut from = 0;
    while let Some(found) = lower[from..].find("set ") {
        let at = from + found;
        from = at + 4;
        let before = lower[..at].trim_end_matches([' ', '\t']);
        let opens = before.is_empty() || before.ends_with(['"', ';', '(']);
        if !opens || (at > 0 && bytes[at - 1].is_ascii_alphanumeric()) {
            continue;
        }
        let after = lower[at + 4..].trim_start();
        let next = after
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .next()
            .unwrap_or("");
        if matches!(next, "local" | "transaction" | "constraints") {
            continue;
        }
        // SQL: `SET SESSION …`, `SET name TO …` or `SET name = …`; prose that happens to
        // start with "set" is none of these.
        let rest = after[next.len()..].trim_start();
        let is_sql = !next.is_empty()
            && next.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && (next == "session" || rest.starts_with('=') || rest.starts_with("to "));
        if !is_sql {
            continue;
        }
        let end = lower[at..]
            .find(['"', ';'])
            .map_or(lower.len(), |end| at + end);
        return Some(lower[at..end].trim().to_owned());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::offence;

    #[test]
    fn refuses_session_advisory_locks_and_unlocks() {
        for line in [
            r#"sqlx::query("SELECT pg_advisory_lock(42)")"#,
            r#"sqlx::query("SELECT PG_TRY_ADVISORY_LOCK(hashtext($1))")"#,
            r#"    "SELECT pg_advisory_lock_shared(1)","#,
            r#"sqlx::query("SELECT pg_advisory_unlock(42)")"#,
            r#"sqlx::query("SELECT pg_advisory_unlock_all()")"#,
        ] {
            let message = offence(line).unwrap_or_else(|| panic!("not caught: {line}"));
            assert!(message.contains("session-level advisory lock"), "{message}");
        }
    }

    #[test]
    fn accepts_transaction_advisory_locks() {
        assert_eq!(
            offence(r#"sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")"#),
            None
        );
        assert_eq!(
            offence(r#"sqlx::query("SELECT pg_try_advisory_xact_lock(1)")"#),
            None
        );
    }

    #[test]
    fn refuses_a_session_set_statement() {
        for line in [
            r#"sqlx::raw_sql("SET search_path TO kit")"#,
            r#"sqlx::query("set statement_timeout = 5000")"#,
            r#"sqlx::raw_sql("BEGIN; SET SESSION lock_timeout = 1")"#,
        ] {
            let message = offence(line).unwrap_or_else(|| panic!("not caught: {line}"));
            assert!(message.contains("use `SET LOCAL`"), "{message}");
        }
    }

    #[test]
    fn accepts_set_local_update_set_and_comments() {
        for line in [
            r#"sqlx::raw_sql("SET LOCAL search_path TO \"kit\"")"#,
            r#"sqlx::query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")"#,
            r#""UPDATE effects SET state = $2 WHERE key = $1","#,
            r#"    "ON CONFLICT (key) DO UPDATE SET value = excluded.value","#,
            "// SET search_path in a comment is no statement",
            "let offset = reset(x);",
            r#"    "set `mode: enforce` in the policy","#,
        ] {
            assert_eq!(offence(line), None, "{line}");
        }
    }
}
