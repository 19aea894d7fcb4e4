//! The PostgreSQL store, for many workers on many hosts, through sqlx (cargo feature
//! `postgres`, on by default).
//!
//! # Design
//!
//! - **Same rules as every backend.** Every writing operation is one plan (`store::plan`): this
//!   module fetches the rows the plan asks for, locked, and applies the writes it decided, each a
//!   compare-and-set on the prior state the plan expects; it decides nothing itself.
//! - **Correct at READ COMMITTED and at SERIALIZABLE.** Every row a decision rests on is read
//!   with `SELECT … FOR UPDATE` (the approvals of one action hash are also guarded by a
//!   transaction advisory lock, so two first requests cannot both create one). Every write is a
//!   compare-and-set whose row count is checked: an effect key is claimed with `INSERT … ON
//!   CONFLICT DO NOTHING` and an existing record or approval is updated only `WHERE` it is still
//!   in the state that was read. A count of 0 means another transaction got there first: the
//!   whole transaction is rolled back and run again, and the re-read decides (so the loser of a
//!   same-key race gets the typed `in_progress` or `duplicate`, never a store error: case B22).
//! - **Retries are bounded by time, not count.** Serialization failures (SQLSTATE 40001),
//!   deadlocks (40P01) and lost compare-and-sets roll back and run again after a jittered,
//!   growing sleep (2 ms doubling to 200 ms, times a random factor in [0.5, 1.5)) until the retry
//!   budget (default 10 s) is spent; then the caller gets [`StoreError::Busy`] and nothing was
//!   written (case B25).
//! - **Lanes, no fork, no gap** (issue #21, `postgres/log.rs`). The log is 16 chains (lanes),
//!   each with its head row in `lane_heads`. A transaction that appends receipts locks the
//!   lowest free lane's head with `SELECT … FOR UPDATE SKIP LOCKED`, after its other writes (so
//!   it is held for the append and the `COMMIT` only), and moves it by compare-and-set on its
//!   `seq` in the statement that appends the receipts; `(lane, seq)` is the primary key and
//!   `(lane, prev_hash)` is unique, so even a bug in the locking could not store a fork. Reads
//!   of the log first place newly committed receipts in one total order
//!   (`receipt_positions`), which respects each lane's order and what each transaction saw.
//! - **Group commit** (issue #21, `postgres/group.rs`): concurrent writing calls on one store
//!   share a transaction, so their receipts share the head's lock and one commit flush. The
//!   operations run with no savepoint between them unless one fails after writing; then the
//!   group runs again with each under its own savepoint, so that one is undone alone. A lone
//!   caller runs its operation alone, as before.
//! - **An unknown commit is settled, never guessed.** Each writing transaction learns its
//!   transaction id before `COMMIT` (every write returns `txid_current()`). If the connection fails during `COMMIT`, the store asks
//!   the server (`txid_status`) on another connection: `committed` returns the result,
//!   `aborted` runs the operation again; if that cannot be learned the caller gets
//!   [`StoreError::OutcomeUnknown`].
//! - **Migrations run on open**, forward-only, each recorded in `countersign_schema_version`,
//!   under a transaction advisory lock so several processes may open one database at once. A
//!   database migrated by a newer Countersign is refused with [`StoreError::Incompatible`].
//!
//! # URL
//!
//! `postgres://USER@HOST:PORT/DATABASE?OPTIONS` (or `postgresql://`). Besides sqlx's own
//! options (`sslmode`, `application_name`, ...), the store reads and removes the ones below.
//! The connection has no TLS (sqlx's TLS backends would add a second crypto stack), so
//! `sslmode=require`, `verify-ca` and `verify-full` are refused when the URL is read, with what
//! to do instead (a socket, a private network, or a TLS-terminating proxy). The store's own
//! options:
//!
//! - `schema=NAME`: keep the tables in schema `NAME` (created if missing; `[a-z0-9_]`, at most
//!   63 characters). Default: the server's `search_path` (usually `public`).
//! - `isolation=read_committed|repeatable_read|serializable`: the isolation level of every
//!   transaction. Default: the server's `default_transaction_isolation`.
//! - `max_connections=N`: the pool size (default 16).
//! - `retry_budget_ms=N`: how long to keep retrying conflicts (default 10000).
//! - `pooler=transaction|none`: `transaction` behind a pooler in transaction mode (PgBouncer
//!   `pool_mode=transaction`): no named prepared statement, no session setting, no session
//!   lock ([`Pooler::Transaction`]; `docs/postgres-pooling.md`). Default `none`.
//!
//! # Cancel safety
//!
//! Dropping a future before `COMMIT` rolls its transaction back (sqlx rolls back a dropped
//! transaction when its connection returns to the pool). Dropping it during `COMMIT` leaves the
//! transaction committed or not, exactly like a lost connection; an effect reserved that way
//! turns `ambiguous` when its lease lapses, and is never released.

macro_rules! approval_columns {
    () => {
        "id, action_hash, action, arguments, principal, resource, environment, effect_key, policy_hash, entry_fingerprint, state, created_at, expires_at, answered_at, approver, note, consumed_at, consumed_by, rule, answers, run"
    };
}

macro_rules! effect_columns {
    () => {
        "key, state, action_hash, attempt_id, attempts, lease_until, updated_at, resolved_by, detail, attempt"
    };
}

mod clock;
mod commit;
mod connect;
mod failure;
mod group;
mod log;
mod outbox;
mod pooled;
mod rows;
mod schema;
mod sql;
mod url;

use failure::*;
use log::LANES;
use rows::*;
use schema::MIGRATIONS;
use sql::*;
use url::*;

pub use pooled::Pooler;

use std::collections::HashMap;
use std::str::FromStr;
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};

/// How long opening a store waits for the first connection before reporting the server
/// unreachable.
const CONNECT_PROBE: Duration = Duration::from_secs(5);
use sqlx::{Postgres, Row, Transaction};

use crate::ActionHash;
use crate::action::canonical;
use crate::approval::{ApprovalId, ApprovalRecord, ApprovalState, Correlation};
use crate::clock::Timestamp;
use crate::effect::{EffectKey, EffectRecord, EffectState};
use crate::error::{AnswerError, ResolveError, StoreError};
use crate::evidence::{ChainHead, Receipt, ReceiptDraft, StoredReceipt};
use crate::id::ReceiptHash;
use crate::store::plan::{
    self, Done, EffectVersion, Fetched, Halt, Operation, Read, Reads, Unsealed, Write,
};
use crate::store::stored;
use crate::store::{
    BeginAttempt, BeginOutcome, FinishAttempt, HandOff, HandOffOutcome, NewApproval, OpenOutcome,
    RecordAnswer, ResolveEffect, Store,
};

/// The schema version this build migrates to, writes and reads (2: issue #12; 3: issue #31's
/// token deny-list; 4: issue #17's outbox; 5: issue #23's `log.checkpoint` events and the index
/// `outbox_by_kind`, as [`crate::store::sqlite::SCHEMA_VERSION`] says; 6: issue #21's lanes,
/// PostgreSQL's alone, `postgres/log.rs`).
pub const SCHEMA_VERSION: i64 = 6;

/// The isolation level of the store's transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// `READ COMMITTED`.
    ReadCommitted,
    /// `REPEATABLE READ`.
    RepeatableRead,
    /// `SERIALIZABLE`.
    Serializable,
}

/// How long a pooled connection may sit idle before it is pinged ahead of its next use.
const IDLE_PING: Duration = Duration::from_secs(1);

impl Isolation {
    fn begin_statement(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "BEGIN ISOLATION LEVEL READ COMMITTED",
            Isolation::RepeatableRead => "BEGIN ISOLATION LEVEL REPEATABLE READ",
            Isolation::Serializable => "BEGIN ISOLATION LEVEL SERIALIZABLE",
        }
    }
}

/// Options for [`PostgresStore::connect_with`]; see the [module docs](self) for the URL form.
#[derive(Clone, Debug)]
pub struct PostgresOptions {
    /// The schema holding the tables (`[a-z0-9_]`, at most 63 characters), or `None` for the
    /// server's `search_path`.
    pub schema: Option<String>,
    /// The isolation level, or `None` for the server's default.
    pub isolation: Option<Isolation>,
    /// The pool size. Default 16.
    pub max_connections: u32,
    /// How long to keep retrying serialization failures, deadlocks and lost compare-and-sets
    /// before [`StoreError::Busy`]. Default 10 s.
    pub retry_budget: Duration,
    /// What sits between the store and the server. Default [`Pooler::None`].
    pub pooler: Pooler,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            schema: None,
            isolation: None,
            max_connections: 16,
            retry_budget: Duration::from_secs(10),
            pooler: Pooler::None,
        }
    }
}

/// The PostgreSQL store. See the [module docs](self) for its design.
pub struct PostgresStore {
    pool: PgPool,
    /// Concurrent writing calls share transactions (issue #21).
    group: crate::store::group::Group,
    options: PostgresOptions,
    location: String,
    /// A test's clock offset ([`Store::shift_clock_for_tests`]), added to the server's clock.
    offset: crate::store::clock::TestOffset,
    /// This crate's model test judges by the caller's clock (`postgres/clock.rs`).
    #[cfg(test)]
    caller_clock: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("location", &self.location)
            .field("schema", &self.options.schema)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connect to the database at `url` (see the [module docs](self) for the URL form), create
    /// the schema if asked, and run the migrations this build knows.
    ///
    /// # Errors
    ///
    /// [`StoreError::Open`] for a malformed URL or an unreachable server,
    /// [`StoreError::Incompatible`] when a newer Countersign migrated the database,
    /// [`StoreError::Backend`] when a migration fails.
    ///
    /// # Cancel safety
    ///
    /// Migrations run in one transaction: dropping the future leaves them applied or not.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        let (connect_options, options, location) = read_url(url)?;
        PostgresStore::connect_with(connect_options, options, location).await
    }

    /// Connect with explicit sqlx options and store options. `location` names the database in
    /// error messages (no password). Errors as [`PostgresStore::connect`].
    ///
    /// # Errors
    ///
    /// As [`PostgresStore::connect`].
    ///
    /// # Cancel safety
    ///
    /// As [`PostgresStore::connect`].
    pub async fn connect_with(
        connect_options: PgConnectOptions,
        options: PostgresOptions,
        location: String,
    ) -> Result<PostgresStore, StoreError> {
        PostgresStore::connect_inner(connect_options, options, location, connect::Opening::Create)
            .await
    }

    /// Run `operation` in one transaction, shared with the operations other callers queued
    /// meanwhile (group commit, `postgres/group.rs`), again and again while it conflicts,
    /// within the retry budget. See the [module docs](self).
    async fn run(&self, operation: Operation, now: Timestamp) -> Result<Done, StoreError> {
        let backoff = crate::store::group::Backoff {
            first: Duration::from_millis(2),
            max: Duration::from_millis(200),
            budget: self.options.retry_budget,
        };
        self.group.run(self, operation, now, backoff).await
    }

    async fn begin(&self) -> Result<Transaction<'static, Postgres>, PgFailure> {
        self.begin_transaction().await.map_err(classify)
    }

    /// One run of `operation`: commit, or say why not.
    async fn try_write(&self, operation: &Operation, now: Timestamp) -> Result<Done, PgFailure> {
        let transaction = self.begin().await?;
        let mut pg = PgTxn::new(transaction, self.persistent());
        // One clock (issue #22): judged by the server's clock, read inside the transaction.
        let store_now = self.transaction_now(&mut pg).await?;
        let (operation, now) = self.judged(operation, now, store_now);
        let unsealed = pg.run(&operation, now).await?;
        let done = match pg.append(vec![unsealed]).await?.pop() {
            Some(result) => result?,
            None => {
                return Err(PgFailure::Store(StoreError::Internal {
                    detail: "one plan appended gave no result".to_owned(),
                }));
            }
        };
        self.commit_settled(pg, operation.name())
            .await
            .map(|()| done)
    }
}

impl PostgresStore {
    async fn read_rows(
        &self,
        query: sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<Vec<PgRow>, StoreError> {
        self.fetch_rows(query)
            .await
            .map_err(|error| backend(&error))
    }
}

#[async_trait::async_trait]
impl Store for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn store_now(&self, now: Timestamp) -> Result<Timestamp, StoreError> {
        self.read_store_now(now).await
    }

    fn shift_clock_for_tests(&self, millis: i64) -> Result<(), StoreError> {
        self.offset.shift(millis);
        Ok(())
    }

    async fn open_approval(
        &self,
        new: NewApproval,
        now: Timestamp,
    ) -> Result<OpenOutcome, StoreError> {
        self.run(Operation::Open(new), now).await?.opened()
    }

    async fn answer_approval(
        &self,
        answer: RecordAnswer,
        now: Timestamp,
    ) -> Result<ApprovalRecord, AnswerError> {
        self.run(Operation::Answer(answer), now).await?.answered()
    }

    async fn withdraw_approval(
        &self,
        withdrawal: crate::approval::withdraw::Withdrawal,
        now: Timestamp,
    ) -> Result<ApprovalRecord, AnswerError> {
        self.run(Operation::Withdraw(withdrawal), now)
            .await?
            .answered()
    }

    async fn approval(&self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
        let rows = self
            .read_rows(
                sqlx::query(concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals WHERE id = $1"
                ))
                .bind(id.as_str().to_owned()),
            )
            .await?;
        rows.first().map(approval_from_row).transpose()
    }

    async fn correlated(
        &self,
        correlation: &Correlation,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        let rows = self
            .read_rows(
                sqlx::query(concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals WHERE id = (SELECT request_id FROM correlations WHERE framework = $1 AND run = $2 AND call_id = $3)"
                ))
                .bind(correlation.framework.clone())
                .bind(correlation.run.clone().unwrap_or_default())
                .bind(correlation.call_id.clone()),
            )
            .await?;
        rows.first().map(approval_from_row).transpose()
    }

    async fn approvals(
        &self,
        state: Option<ApprovalState>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        // Two statements, not `$1 IS NULL OR state = $1`: only a plain `state = $1` can use the
        // index `approvals_by_state` (a generic plan cannot drop the `OR`).
        let rows = match state {
            Some(state) => {
                self.read_rows(
                    sqlx::query(concat!(
                        "SELECT ",
                        approval_columns!(),
                        " FROM approvals WHERE state = $1 ORDER BY created_at, id"
                    ))
                    .bind(state.as_str()),
                )
                .await?
            }
            None => {
                self.read_rows(sqlx::query(concat!(
                    "SELECT ",
                    approval_columns!(),
                    " FROM approvals ORDER BY created_at, id"
                )))
                .await?
            }
        };
        rows.iter().map(approval_from_row).collect()
    }

    async fn begin_attempt(
        &self,
        begin: BeginAttempt,
        now: Timestamp,
    ) -> Result<BeginOutcome, StoreError> {
        self.run(Operation::Begin(begin), now).await?.begun()
    }

    async fn finish_attempt(
        &self,
        finish: FinishAttempt,
        now: Timestamp,
    ) -> Result<Receipt, StoreError> {
        self.run(Operation::Finish(finish), now).await?.receipt()
    }

    async fn hand_off(
        &self,
        hand_off: HandOff,
        now: Timestamp,
    ) -> Result<HandOffOutcome, StoreError> {
        self.run(Operation::HandOff(hand_off), now)
            .await?
            .handed_off()
    }

    async fn append_receipt(
        &self,
        draft: ReceiptDraft,
        now: Timestamp,
    ) -> Result<Receipt, StoreError> {
        self.run(Operation::Append(draft), now).await?.receipt()
    }

    async fn effect(&self, key: &EffectKey) -> Result<Option<EffectRecord>, StoreError> {
        let rows = self
            .read_rows(
                sqlx::query(concat!(
                    "SELECT ",
                    effect_columns!(),
                    " FROM effects WHERE key = $1"
                ))
                .bind(key.as_str().to_owned()),
            )
            .await?;
        rows.first().map(effect_from_row).transpose()
    }

    async fn effects(&self, state: Option<EffectState>) -> Result<Vec<EffectRecord>, StoreError> {
        // As for `approvals`: a plain `state = $1` uses the index `effects_by_state`.
        let rows = match state {
            Some(state) => {
                self.read_rows(
                    sqlx::query(concat!(
                        "SELECT ",
                        effect_columns!(),
                        " FROM effects WHERE state = $1 ORDER BY key COLLATE \"C\""
                    ))
                    .bind(state.as_str()),
                )
                .await?
            }
            None => {
                self.read_rows(sqlx::query(concat!(
                    "SELECT ",
                    effect_columns!(),
                    " FROM effects ORDER BY key COLLATE \"C\""
                )))
                .await?
            }
        };
        rows.iter().map(effect_from_row).collect()
    }

    async fn resolve_effect(
        &self,
        resolve: ResolveEffect,
        now: Timestamp,
    ) -> Result<EffectRecord, ResolveError> {
        self.run(Operation::Resolve(resolve), now).await?.resolved()
    }

    async fn receipts(&self, after: u64, limit: usize) -> Result<Vec<StoredReceipt>, StoreError> {
        self.placed_receipts(after, limit).await
    }

    async fn revoke_token(
        &self,
        jti: &str,
        by: &str,
        reason: Option<&str>,
        _now: Timestamp,
    ) -> Result<bool, StoreError> {
        let done = self
            .execute_one(
                // Recorded in the store's clock (issue #22).
                sqlx::query(concat!(
                    "INSERT INTO revoked_tokens (jti, revoked_at, revoked_by, reason) VALUES ($1, ",
                    clock::server_now!("$2"),
                    ", $3, $4) ON CONFLICT (jti) DO NOTHING"
                ))
                .bind(jti.to_owned())
                .bind(self.offset.millis())
                .bind(by.to_owned())
                .bind(reason.map(str::to_owned)),
            )
            .await
            .map_err(|error| StoreError::Backend {
                message: format!("cannot write the token deny-list: {error}"),
            })?;
        Ok(done.rows_affected() == 1)
    }

    async fn token_revoked(&self, jti: &str) -> Result<bool, StoreError> {
        let rows = self
            .read_rows(
                sqlx::query("SELECT 1 FROM revoked_tokens WHERE jti = $1").bind(jti.to_owned()),
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn expire_approval(
        &self,
        id: &ApprovalId,
        now: Timestamp,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.run(Operation::Expire(id.clone()), now)
            .await?
            .expired()
    }

    async fn events(
        &self,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<crate::outbox::StoredEvent>, StoreError> {
        self.outbox_events(after_seq, limit).await
    }

    async fn claim_deliveries(
        &self,
        claim: crate::store::DeliveryClaim,
        now: Timestamp,
    ) -> Result<Vec<crate::outbox::ClaimedDelivery>, StoreError> {
        self.outbox_claim(&claim, now).await
    }

    async fn settle_delivery(
        &self,
        id: u64,
        owner: &str,
        settlement: crate::outbox::Settlement,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.outbox_settle(id, owner, &settlement, now).await
    }

    async fn deliveries(
        &self,
        state: Option<crate::outbox::DeliveryState>,
        limit: usize,
    ) -> Result<Vec<crate::outbox::Delivery>, StoreError> {
        self.outbox_deliveries(state, limit).await
    }

    async fn delivery_reference(
        &self,
        request_id: &ApprovalId,
        endpoint: &str,
    ) -> Result<Option<String>, StoreError> {
        self.outbox_reference(request_id, endpoint).await
    }

    async fn redeliver(
        &self,
        id: u64,
        now: Timestamp,
    ) -> Result<Option<crate::outbox::Delivery>, StoreError> {
        let _ = now;
        self.outbox_redeliver(id).await
    }

    async fn prune_outbox(&self, before: Timestamp) -> Result<u64, StoreError> {
        self.outbox_prune(before).await
    }

    async fn append_event(&self, event: &crate::outbox::OutboxEvent) -> Result<(), StoreError> {
        self.outbox_append(event).await
    }

    async fn last_event(
        &self,
        kind: crate::outbox::EventKind,
    ) -> Result<Option<crate::outbox::StoredEvent>, StoreError> {
        self.outbox_last_event(kind).await
    }

    async fn chain_head(&self) -> Result<Option<ChainHead>, StoreError> {
        self.placed_head().await
    }

    async fn anchor(&self) -> Result<Option<crate::evidence::Anchor>, StoreError> {
        self.lanes_anchor().await
    }

    async fn recorded_heads(&self) -> Result<Option<crate::evidence::Anchor>, StoreError> {
        self.lanes_anchor().await
    }

    fn lanes(&self) -> u32 {
        LANES
    }

    async fn stray_receipt(&self) -> Result<Option<crate::store::StrayReceipt>, StoreError> {
        self.stray().await
    }
}

/// Read a `postgres://` URL without connecting: sqlx's connection options, the store's options
/// and the location to name in messages (no password).
pub(super) fn read_url(
    url: &str,
) -> Result<(PgConnectOptions, PostgresOptions, String), StoreError> {
    let location = redact(url);
    let open_error = |message: String| StoreError::Open {
        location: location.clone(),
        message,
    };
    let (sqlx_url, options) = parse_url(url).map_err(open_error)?;
    let connect_options = PgConnectOptions::from_str(&sqlx_url)
        .map_err(|error| open_error(format!("malformed PostgreSQL URL: {error}")))?;
    Ok((connect_options, options, location))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_store_options_out_of_the_url() {
        let (sqlx_url, options) = parse_url(
            "postgres://root@127.0.0.1:5432/test?schema=kit_a&isolation=serializable&sslmode=disable&max_connections=4",
        )
        .expect("a valid URL");
        assert_eq!(
            sqlx_url,
            "postgres://root@127.0.0.1:5432/test?sslmode=disable"
        );
        assert_eq!(options.schema.as_deref(), Some("kit_a"));
        assert_eq!(options.isolation, Some(Isolation::Serializable));
        assert_eq!(options.max_connections, 4);
        assert_eq!(options.pooler, Pooler::None);
    }

    #[test]
    fn reads_the_pooler_option() {
        let (sqlx_url, options) =
            parse_url("postgres://h:6432/db?pooler=transaction&sslmode=disable").expect("valid");
        assert_eq!(sqlx_url, "postgres://h:6432/db?sslmode=disable");
        assert_eq!(options.pooler, Pooler::Transaction);
        let error = parse_url("postgres://h/db?pooler=session").expect_err("refused");
        assert!(error.contains("unknown pooler `session`"), "{error}");
    }

    #[test]
    fn a_tls_mode_this_build_cannot_meet_is_refused_with_what_to_do() {
        for mode in ["require", "verify-ca", "verify-full"] {
            let error = parse_url(&format!("postgres://h/db?sslmode={mode}")).expect_err("refused");
            assert!(
                error.contains(&format!("`sslmode={mode}` asks for TLS"))
                    && error.contains("without TLS")
                    && error.contains("sslmode=disable"),
                "{error}"
            );
        }
        for mode in ["disable", "prefer", "allow"] {
            parse_url(&format!("postgres://h/db?sslmode={mode}")).expect("no TLS demanded");
        }
    }

    #[test]
    fn refuses_a_schema_name_that_needs_quoting() {
        let error = parse_url("postgres://h/db?schema=a&schema=b").expect_err("refused");
        assert!(error.contains("`schema` is given twice"), "{error}");
        let error = parse_url("postgres://h/db?schema=a\"b").expect_err("refused");
        assert!(error.contains("schema name"), "{error}");
        // Found by a first-time user: a percent-encoded key is the same key to the driver.
        let error = parse_url("postgres://h/db?schema=a&sch%65ma=b").expect_err("refused");
        assert!(error.contains("`schema` is given twice"), "{error}");
        let error = parse_url("postgres://h/db?password=a&pass%77ord=b").expect_err("refused");
        assert!(error.contains("`password` is given twice"), "{error}");
        let (_, options) = parse_url("postgres://h/db?sch%65ma=kit_b").expect("valid");
        assert_eq!(options.schema.as_deref(), Some("kit_b"));
        // A parameter nobody reads is refused, never ignored: a misspelt `schema` would open
        // another store.
        let error = parse_url("postgres://h/db?shema=kit_b").expect_err("refused");
        assert!(
            error.contains("`shema`") && error.contains("check its spelling"),
            "{error}"
        );
        // A "name" that is not one may hold a secret: it is not echoed.
        let error = parse_url("postgres://h/db?password%3DSECRETG").expect_err("refused");
        assert!(
            !error.contains("SECRETG") && error.contains("not shown"),
            "{error}"
        );
        let (url, _) = parse_url("postgres://h/db?application_name=agent&sslmode=disable")
            .expect("the driver's own");
        assert_eq!(
            url,
            "postgres://h/db?application_name=agent&sslmode=disable"
        );
    }

    #[test]
    fn redacts_a_password_whose_key_is_percent_encoded() {
        for key in ["pass%77ord", "PASSWORD", "%70assword", "sslpass%77ord"] {
            let printed = redact(&format!("postgres://h/db?{key}=hunter22&schema=a"));
            assert!(!printed.contains("hunter22"), "{key}: {printed}");
            assert!(printed.contains("schema=a"), "{key}: {printed}");
        }
    }

    #[test]
    fn redacts_the_password_from_the_location() {
        assert_eq!(
            redact("postgres://alice:secret@db:5432/x"),
            "postgres://alice@db:5432/x"
        );
        // fuzz/regressions/store_url/issue30-at-sign-in-password: the first `@` was taken as
        // the end of the password, so the rest of it was shown.
        assert_eq!(
            redact("postgres://alice:hunter@2secret@db:5432/x?schema=Bad"),
            "postgres://alice@db:5432/x?schema=Bad"
        );
        // An `@` after the authority is no password: nothing is cut.
        assert_eq!(
            redact("postgres://db/x?application_name=a:b@c"),
            "postgres://db/x?application_name=a:b@c"
        );
        assert_eq!(redact("postgres://db/x"), "postgres://db/x");
    }

    #[test]
    fn a_refusal_never_shows_a_password_that_holds_an_at_sign() {
        let error = read_url("postgres://alice:hunter@2secret@db:5432/x?schema=Bad")
            .expect_err("the schema name is refused");
        let message = error.to_string();
        assert!(message.contains("schema name"), "{message}");
        assert!(
            !message.contains("2secret"),
            "the password shows: {message}"
        );
    }
}
