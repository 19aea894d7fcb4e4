//! The PostgreSQL store's schema: its forward-only migrations.

/// The forward-only migrations: version `n` is applied to a database at version `n − 1`.
/// Never edit an applied migration; add the next one.
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
];
