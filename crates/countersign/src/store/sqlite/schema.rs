//! The SQLite store's tables: the version-1 schema every new file starts from, and the
//! forward-only migrations to [`super::SCHEMA_VERSION`] (what each version added is listed
//! there).

/// The forward-only migrations: version `n` is applied to a database at version `n − 1`, all of
/// them in the one `BEGIN IMMEDIATE` transaction that opens the store. Never edit one; add the
/// next.
pub(super) const MIGRATIONS: &[(i64, &str)] = &[
    (
        2,
        "ALTER TABLE approvals ADD COLUMN rule TEXT;
     ALTER TABLE approvals ADD COLUMN answers TEXT;
     ALTER TABLE approvals ADD COLUMN run TEXT;
     CREATE TABLE correlations (
         framework TEXT NOT NULL,
         run TEXT NOT NULL,
         call_id TEXT NOT NULL,
         request_id TEXT NOT NULL,
         PRIMARY KEY (framework, run, call_id)
     ) WITHOUT ROWID;
     ALTER TABLE effects ADD COLUMN attempt TEXT;",
    ),
    (
        3,
        "CREATE TABLE revoked_tokens (
         jti TEXT PRIMARY KEY,
         revoked_at INTEGER NOT NULL,
         revoked_by TEXT NOT NULL,
         reason TEXT
     ) WITHOUT ROWID;",
    ),
    (
        4,
        "CREATE TABLE outbox (
         seq INTEGER PRIMARY KEY AUTOINCREMENT,
         id TEXT NOT NULL UNIQUE,
         kind TEXT NOT NULL,
         request_id TEXT NOT NULL,
         created_at INTEGER NOT NULL,
         body TEXT NOT NULL
     );
     CREATE INDEX outbox_by_created ON outbox (created_at);
     CREATE TABLE deliveries (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         event_seq INTEGER NOT NULL,
         endpoint TEXT NOT NULL,
         request_id TEXT NOT NULL,
         state TEXT NOT NULL,
         attempts INTEGER NOT NULL,
         next_at INTEGER NOT NULL,
         window_start INTEGER NOT NULL,
         lease_owner TEXT,
         lease_until INTEGER,
         last_error TEXT,
         delivered_at INTEGER,
         reference TEXT,
         UNIQUE (event_seq, endpoint)
     );
     CREATE INDEX deliveries_by_request ON deliveries (endpoint, request_id, state, event_seq);",
    ),
    (
        5,
        "CREATE INDEX outbox_by_kind ON outbox (kind, seq);
     CREATE INDEX approvals_by_state ON approvals (state, created_at, id);
     CREATE INDEX effects_by_state ON effects (state, key);",
    ),
    (
        6,
        "DROP INDEX effects_by_state;
     CREATE INDEX effects_by_state ON effects (state, key) WHERE state = 'reserved' OR state = 'ambiguous';",
    ),
];

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    action_hash TEXT NOT NULL,
    action TEXT NOT NULL,
    arguments TEXT NOT NULL,
    principal TEXT NOT NULL,
    resource TEXT,
    environment TEXT NOT NULL,
    effect_key TEXT,
    policy_hash TEXT NOT NULL,
    entry_fingerprint TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    answered_at INTEGER,
    approver TEXT,
    note TEXT,
    consumed_at INTEGER,
    consumed_by TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS approvals_by_hash ON approvals (action_hash);
CREATE TABLE IF NOT EXISTS effects (
    key TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    action_hash TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    lease_until INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    resolved_by TEXT,
    detail TEXT
) WITHOUT ROWID;
-- INVARIANT (no-fork): receipts are appended only inside a BEGIN IMMEDIATE transaction that
-- read the head, so seq (the primary key) is unique and each prev_hash is its predecessor's;
-- a second index on prev_hash would cost a page write per receipt and guard nothing more.
CREATE TABLE IF NOT EXISTS receipts (
    seq INTEGER PRIMARY KEY,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    body TEXT NOT NULL
);
";

#[cfg(test)]
mod tests {
    use super::super::{SqliteStore, effects_in_state};
    use crate::effect::EffectState;

    #[test]
    fn listing_unsettled_effects_reads_the_partial_index_and_settled_ones_cannot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.db");
        drop(SqliteStore::open(&path).unwrap());
        let connection = rusqlite::Connection::open(&path).unwrap();
        for state in [
            EffectState::Reserved,
            EffectState::Ambiguous,
            EffectState::Committed,
            EffectState::Failed,
        ] {
            let (sql, parameter) = effects_in_state(state);
            let mut statement = connection
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap();
            // A plan step's `detail` column.
            fn detail(row: &rusqlite::Row<'_>) -> rusqlite::Result<String> {
                row.get(3)
            }
            let steps = match parameter {
                Some(parameter) => statement.query_map([parameter], detail),
                None => statement.query_map([], detail),
            }
            .unwrap()
            .collect::<Result<Vec<String>, _>>()
            .unwrap();
            let indexed = steps.iter().any(|step| step.contains("effects_by_state"));
            assert_eq!(
                indexed,
                matches!(state, EffectState::Reserved | EffectState::Ambiguous),
                "{state:?}: {steps:?}"
            );
        }
    }
}
