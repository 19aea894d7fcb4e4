//! The PostgreSQL store's schema: its forward-only migrations.

/// The forward-only migrations: version `n` is applied to a database at version `n − 1`.
/// Never edit an applied migration; add the next one (and move
/// [`SCHEMA_VERSION`](super::SCHEMA_VERSION) to it: a test holds the two together).
pub(super) const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        "
CREATE TABLE approvals (
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
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    answered_at BIGINT,
    approver TEXT,
    note TEXT,
    consumed_at BIGINT,
    consumed_by TEXT
);
CREATE INDEX approvals_by_hash ON approvals (action_hash);
CREATE INDEX approvals_by_created ON approvals (created_at, id);
CREATE TABLE effects (
    key TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    action_hash TEXT NOT NULL,
    attempt_id TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    lease_until BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    resolved_by TEXT,
    detail TEXT
);
CREATE TABLE receipts (
    seq BIGINT PRIMARY KEY,
    prev_hash TEXT NOT NULL UNIQUE,
    hash TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE chain_head (
    id SMALLINT PRIMARY KEY CHECK (id = 1),
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL
);
INSERT INTO chain_head (id, seq, hash) VALUES (1, 0, '');
",
    ),
    (
        2,
        "
ALTER TABLE approvals ADD COLUMN rule TEXT;
ALTER TABLE approvals ADD COLUMN answers TEXT;
ALTER TABLE approvals ADD COLUMN run TEXT;
CREATE TABLE correlations (
    framework TEXT NOT NULL,
    run TEXT NOT NULL,
    call_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    PRIMARY KEY (framework, run, call_id)
);
ALTER TABLE effects ADD COLUMN attempt TEXT;
",
    ),
    (
        3,
        "
CREATE TABLE revoked_tokens (
    jti TEXT PRIMARY KEY,
    revoked_at BIGINT NOT NULL,
    revoked_by TEXT NOT NULL,
    reason TEXT
);
",
    ),
    (
        4,
        "
CREATE TABLE outbox (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    request_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX outbox_by_created ON outbox (created_at);
CREATE TABLE deliveries (
    id BIGSERIAL PRIMARY KEY,
    event_seq BIGINT NOT NULL,
    endpoint TEXT NOT NULL,
    request_id TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    next_at BIGINT NOT NULL,
    window_start BIGINT NOT NULL,
    lease_owner TEXT,
    lease_until BIGINT,
    last_error TEXT,
    delivered_at BIGINT,
    reference TEXT,
    UNIQUE (event_seq, endpoint)
);
CREATE INDEX deliveries_by_request ON deliveries (endpoint, request_id, state, event_seq);
",
    ),
    (
        5,
        "CREATE INDEX outbox_by_kind ON outbox (kind, seq);
     CREATE INDEX approvals_by_state ON approvals (state, created_at, id);
     CREATE INDEX effects_by_state ON effects (state, key);",
    ),
    (
        6,
        // Lanes (issue #21, SPEC 1.5): 16 chain heads instead of one, so writers on several
        // hosts do not all queue on one row lock. Every receipt so far is lane 0's and keeps
        // its place in the log (its `seq`); `ticket` (drawn from a sequence when a receipt is
        // inserted, after every read of its transaction) orders the receipts committed since
        // the last placing, which `receipt_positions` records (`postgres/log.rs`). The lock
        // first: an older build still writing on another host appends under the old head until
        // this commits, never between the head's copy and the receipts' placing.
        "
LOCK TABLE chain_head, receipts IN ACCESS EXCLUSIVE MODE;
CREATE TABLE lane_heads (
    lane INTEGER PRIMARY KEY CHECK (lane >= 0 AND lane < 16),
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL
);
INSERT INTO lane_heads (lane, seq, hash) SELECT 0, seq, hash FROM chain_head WHERE id = 1;
INSERT INTO lane_heads (lane, seq, hash) SELECT lane, 0, '' FROM generate_series(1, 15) AS lane;
DROP TABLE chain_head;
ALTER TABLE receipts ADD COLUMN lane INTEGER NOT NULL DEFAULT 0;
ALTER TABLE receipts DROP CONSTRAINT receipts_pkey;
ALTER TABLE receipts ADD PRIMARY KEY (lane, seq);
ALTER TABLE receipts DROP CONSTRAINT receipts_prev_hash_key;
ALTER TABLE receipts ADD CONSTRAINT receipts_lane_prev_hash_key UNIQUE (lane, prev_hash);
CREATE SEQUENCE receipt_tickets;
ALTER TABLE receipts ADD COLUMN ticket BIGINT;
ALTER TABLE receipts ALTER COLUMN ticket SET DEFAULT nextval('receipt_tickets');
CREATE TABLE receipt_positions (
    position BIGINT PRIMARY KEY,
    lane INTEGER NOT NULL,
    seq BIGINT NOT NULL,
    UNIQUE (lane, seq)
);
INSERT INTO receipt_positions (position, lane, seq) SELECT seq, 0, seq FROM receipts;
",
    ),
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_schema_version_is_the_last_migration() {
        assert_eq!(
            super::MIGRATIONS.last().map(|(version, _)| *version),
            Some(super::super::SCHEMA_VERSION)
        );
    }
}
