//! The embedded default store: one SQLite file, through rusqlite.
//!
//! # Design
//!
//! - **Same rules as every backend.** Every writing operation is one plan (`store/plan.rs`):
//!   this module fetches the rows the plan asks for and applies the writes it decided (its
//!   `sql` module); it decides nothing itself.
//! - **WAL, `synchronous=NORMAL`.** Each transaction is atomic and survives a crash of the
//!   process (kill -9); a power loss may drop the newest transactions but never half-applies
//!   one. Open with `?synchronous=full` in the store URL to also survive power loss, at about a
//!   fifth of the throughput (DESIGN.md, "Stores", has the figures).
//! - **Checkpoints off the write path** (issue #21, the `checkpoint` module): a thread of the
//!   store's own copies the log back into the database file on a connection of its own, so a
//!   commit never waits on a checkpoint's two syncs, save once per 16,000 log pages when a
//!   writer that never pauses outruns it. A read-only store has none.
//! - **Every read-modify-write is one `BEGIN IMMEDIATE` transaction**, so the write lock is taken
//!   up front and two processes can never both read a free effect key (case B24).
//! - **Inline on the calling thread.** A transaction takes tens of microseconds; handing each
//!   statement to another thread costs more than the work (DESIGN.md measured about 1,000
//!   calls/s that way against about 11,000 inline).
//! - **Group commit** (issue #21, `store/group.rs`): concurrent writing calls queue their
//!   operations; whichever caller holds the lead applies all of them in one `BEGIN IMMEDIATE`
//!   transaction, still inline on its own thread, each under its own savepoint (one that fails
//!   is rolled back alone) and each keeping its own result and receipt. A lone caller runs its
//!   operation alone, with no savepoint, exactly as before.
//! - **Bounded, non-blocking waits.** `busy_timeout` is 0: when another process holds the write
//!   lock, the transaction is rolled back, the connection released, and the task *sleeps
//!   asynchronously* (jittered, growing backoff) before trying again, so a busy database never
//!   stalls other tasks on the runtime. After the busy budget (default 5 s) the caller gets
//!   [`StoreError::Busy`] and nothing was written — never a raw "database is locked".
//!
//! # Cancel safety
//!
//! A transaction never spans an `.await`: dropping a future leaves each transaction committed
//! or not started.

mod checkpoint;
mod failure;
mod group;
mod outbox;
mod reading;
mod rows;
mod schema;
mod sql;

use failure::*;
use rows::*;
use sql::*;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, params};

use crate::ActionHash;
use crate::action::canonical;
use crate::approval::{ApprovalId, ApprovalRecord, ApprovalState, Correlation};
use crate::clock::Timestamp;
use crate::effect::{EffectKey, EffectRecord, EffectState};
use crate::error::{AnswerError, ResolveError, StoreError};
use crate::evidence::{ChainHead, Receipt, ReceiptDraft, StoredReceipt};
use crate::id::ReceiptHash;
use crate::store::group::{Backoff, Group};
use crate::store::plan::{self, Done, EffectVersion, Fetched, Mapping, Operation, Read, Write};
use crate::store::stored;
use crate::store::{
    BeginAttempt, BeginOutcome, FinishAttempt, HandOff, HandOffOutcome, NewApproval, OpenOutcome,
    RecordAnswer, ResolveEffect, Store,
};

/// The schema version this build writes and reads.
///
/// 2 (issues #12 and #13): approvals gain `rule` (the stored approval rule, canonical JSON),
/// `answers` (every answer that counted, JSON) and `run` (the run a request is scoped to);
/// `correlations` maps (framework, run, call id) to a request (`run` is `''` for none); effects
/// gain `attempt` (the reserving attempt's context, JSON). Rows written at version 1 keep NULL
/// there and read as the default rule, the one recorded answer, no run and no context.
///
/// 3 (issue #31): `revoked_tokens`, the deny-list of approver token ids (`jti`): a token whose
/// id is listed is refused `not_authenticated` everywhere, before it expires.
///
/// 4 (issue #17): `outbox`, the events every change to a request writes in its own
/// transaction, and `deliveries`, one row per (event, endpoint) with its lease and retries.
///
/// 5 (issue #23): the outbox also holds events about the log (`log.checkpoint`, with an empty
/// `request_id`), which version 4 cannot read, and the index `outbox_by_kind` finds the newest
/// event of a kind; `approvals_by_state` and `effects_by_state` serve the listings by state
/// (the pending requests, the lapsed reservations) without reading the whole table.
///
/// 6 (issue #21): `effects_by_state` keeps only the effects that are not settled (`reserved`,
/// `ambiguous`): the ones its listings look for. Every effect key used to leave an entry there
/// for good, in a random leaf of an index that grew with every call; it now stays a few pages
/// that every call touches, so it does not split or fall out of the cache (docs/benchmarks.md,
/// "Issue #21, ninth pass"). Listing `committed` or `failed` effects reads the table in key
/// order instead.
pub const SCHEMA_VERSION: i64 = 6;

/// Options for [`SqliteStore::open_with`].
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// Use `synchronous=FULL` (survives power loss; slower). Default false (`NORMAL`).
    pub synchronous_full: bool,
    /// How long to keep retrying a busy database before [`StoreError::Busy`]. Default 5 s.
    pub busy_budget: Duration,
    /// Open for reading only (`countersign verify`, `receipts --verify`): the file is opened
    /// `SQLITE_OPEN_READ_ONLY`, nothing is created (no folder, no file, no table) and nothing is
    /// migrated. A file that is not a Countersign store, or one at another schema version, is
    /// refused with [`StoreError::Open`] naming what is missing and what to do. Every writing
    /// operation then fails with the database's own read-only error. Default false.
    pub read_only: bool,
}

impl SqliteOptions {
    /// The `synchronous` pragma's value these options ask for.
    fn synchronous(&self) -> &'static str {
        if self.synchronous_full {
            "FULL"
        } else {
            "NORMAL"
        }
    }
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous_full: false,
            busy_budget: Duration::from_secs(5),
            read_only: false,
        }
    }
}

/// The statement listing the effects in `state`, in key order, and its one parameter if it
/// has one. The partial index `effects_by_state` (schema 6) holds `reserved` and `ambiguous`
/// only, and SQLite uses a partial index only for a query whose own `WHERE` names its states:
/// a literal, not a parameter (sqlite.org/partialindex.html, section 3). Those two are written
/// in (fixed words, never input); the settled states are read in key order from the table.
fn effects_in_state(state: EffectState) -> (String, Option<&'static str>) {
    match state {
        EffectState::Reserved | EffectState::Ambiguous => (
            format!(
                "SELECT {EFFECT_COLUMNS} FROM effects WHERE state = '{}' ORDER BY key",
                state.as_str()
            ),
            None,
        ),
        EffectState::Committed | EffectState::Failed => (
            format!("SELECT {EFFECT_COLUMNS} FROM effects WHERE state = ?1 ORDER BY key"),
            Some(state.as_str()),
        ),
    }
}

/// The SQLite store. See the [module docs](self) for its design.
pub struct SqliteStore {
    /// Checkpoints the log off the write path (`None`: SQLite's automatic checkpoint). Dropped
    /// with the store, it ends its thread and closes its connection, so nothing holds the file
    /// once the store is gone.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "held for its thread and its Drop; tests look at it"
        )
    )]
    checkpointer: Option<checkpoint::Checkpointer>,
    connection: Mutex<Connection>,
    /// Concurrent writing calls share transactions (issue #21).
    group: Group,
    path: PathBuf,
    options: SqliteOptions,
    /// A test's clock offset ([`Store::shift_clock_for_tests`]).
    offset: crate::store::clock::TestOffset,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Open (creating if needed, with its parent folder) the database at `path` with default
    /// options.
    ///
    /// # Errors
    ///
    /// [`StoreError::Open`] when the file cannot be created or opened,
    /// [`StoreError::Incompatible`] when it was written by a newer Countersign,
    /// [`StoreError::Busy`] when another process kept it locked past the busy budget.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, SqliteOptions::default())
    }

    /// Open with explicit options. Errors as [`SqliteStore::open`].
    pub fn open_with(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        let open_error = |message: String| StoreError::Open {
            location: path.display().to_string(),
            message,
        };
        if path.is_dir() {
            return Err(open_error(format!(
                "`{}` is a folder, not a database file: name a file inside it, for example `sqlite:{}`",
                path.display(),
                path.join("countersign.db").display()
            )));
        }
        if options.read_only {
            return Self::open_read_only(path, options);
        }
        if let Some(parent) = path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent).map_err(|error| {
                open_error(format!(
                    "cannot create folder `{}`: {error}",
                    parent.display()
                ))
            })?;
        }
        let mut connection =
            Connection::open(&path).map_err(|error| open_error(error.to_string()))?;
        let started = Instant::now();
        let mut delay = Duration::from_millis(2);
        loop {
            match Self::prepare(&connection, &options) {
                Ok(()) => break,
                Err(Attempt::Busy) if started.elapsed() < options.busy_budget => {
                    std::thread::sleep(crate::store::jitter(delay));
                    delay = (delay * 2).min(Duration::from_millis(50));
                }
                Err(Attempt::Busy) => {
                    return Err(StoreError::Busy {
                        waited: started.elapsed(),
                    });
                }
                Err(Attempt::Failed(StoreError::Backend { message })) => {
                    return Err(open_error(message));
                }
                Err(Attempt::Failed(error)) => return Err(error),
            }
        }
        // Every statement of the store stays prepared (rusqlite keeps 16 by default).
        connection.set_prepared_statement_cache_capacity(32);
        let checkpointer =
            checkpoint::Checkpointer::start(&path, &mut connection, checkpoint::Thresholds::STORE);
        Ok(SqliteStore {
            checkpointer,
            connection: Mutex::new(connection),
            group: Group::new(1),
            path,
            options,
            offset: Default::default(),
        })
    }

    /// Settings, schema creation and the version check.
    fn prepare(
        connection: &Connection,
        options: &SqliteOptions,
    ) -> Result<(), Attempt<StoreError>> {
        connection.busy_timeout(Duration::ZERO)?;
        let mode: String = connection.query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Attempt::Failed(StoreError::Backend {
                message: format!("the database refused WAL mode (it is in `{mode}` mode)"),
            }));
        }
        connection.execute_batch(&format!("PRAGMA synchronous={};", options.synchronous()))?;
        connection.execute_batch("BEGIN IMMEDIATE")?;
        let result = (|| -> Result<(), Attempt<StoreError>> {
            connection.execute_batch(schema::SCHEMA)?;
            let found: Option<String> = connection
                .query_row(
                    "SELECT value FROM meta WHERE key = 'schema_version'",
                    [],
                    |row| row.get(0),
                )
                .optional()?;
            // `SCHEMA` makes the version-1 tables; a file without a version is new, at 1.
            let found = match found.map(|text| text.parse::<i64>()) {
                None => 1,
                Some(Ok(found)) if found > SCHEMA_VERSION => {
                    return Err(Attempt::Failed(StoreError::Incompatible {
                        found,
                        supported: SCHEMA_VERSION,
                    }));
                }
                Some(Ok(found)) => found,
                Some(Err(_)) => {
                    return Err(Attempt::Failed(StoreError::Corrupt {
                        detail: "unreadable schema_version".to_owned(),
                    }));
                }
            };
            for (_, sql) in schema::MIGRATIONS
                .iter()
                .filter(|(version, _)| *version > found)
            {
                connection.execute_batch(sql)?;
            }
            connection.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?1) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![SCHEMA_VERSION.max(found).to_string()],
            )?;
            Ok(())
        })();
        match result {
            Ok(()) => connection.execute_batch("COMMIT").map_err(Attempt::from),
            Err(error) => {
                let _ = connection.execute_batch("ROLLBACK");
                Err(error)
            }
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Run `operation` in one `BEGIN IMMEDIATE` transaction, retrying (after an asynchronous
    /// sleep) while the database is busy. The transaction commits when `operation` returns
    /// `Ok`, and rolls back otherwise.
    async fn write<R>(
        &self,
        mut operation: impl FnMut(&mut SqliteTxn<'_>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let started = Instant::now();
        let mut delay = Duration::from_millis(1);
        loop {
            match self.try_write(&mut operation) {
                Ok(result) => return result,
                Err(()) => {
                    if started.elapsed() >= self.options.busy_budget {
                        return Err(StoreError::Busy {
                            waited: started.elapsed(),
                        });
                    }
                    tokio::time::sleep(crate::store::jitter(delay)).await;
                    delay = (delay * 2).min(Duration::from_millis(25));
                }
            }
        }
    }

    /// Plan `operation` and apply it in one `BEGIN IMMEDIATE` transaction, shared with the
    /// operations other callers queued meanwhile (group commit, `store/group.rs`), retrying
    /// while the database is busy.
    async fn run(&self, operation: Operation, now: Timestamp) -> Result<Done, StoreError> {
        let backoff = Backoff {
            first: Duration::from_millis(1),
            max: Duration::from_millis(25),
            budget: self.options.busy_budget,
        };
        self.group.run(self, operation, now, backoff).await
    }

    /// One try: `Err(())` means busy (rolled back, retry).
    fn try_write<R>(
        &self,
        operation: &mut impl FnMut(&mut SqliteTxn<'_>) -> Result<R, StoreError>,
    ) -> Result<Result<R, StoreError>, ()> {
        let connection = match self.connection.lock() {
            Ok(connection) => connection,
            Err(_) => {
                return Ok(Err(StoreError::Internal {
                    detail: "the SQLite connection is poisoned by an earlier panic".to_owned(),
                }));
            }
        };
        // BEGIN and COMMIT are cached statements: parsing them again for every transaction was
        // a measurable share of a call (issue #8).
        let transaction = match Immediate::begin(&connection) {
            Ok(transaction) => transaction,
            Err(error) if is_busy(&error) => return Err(()),
            Err(error) => return Ok(Err(backend(error))),
        };
        let mut txn = SqliteTxn {
            transaction: transaction.connection,
            busy: false,
        };
        let result = operation(&mut txn);
        if txn.busy {
            drop(transaction); // rolls back
            return Err(());
        }
        if result.is_err() {
            drop(transaction);
            return Ok(result);
        }
        match transaction.commit() {
            Ok(()) => Ok(result),
            Err(error) if is_busy(&error) => Err(()),
            Err(error) => Ok(Err(backend(error))),
        }
    }

    /// Run a read on the connection, retrying while busy.
    async fn read<R>(
        &self,
        mut read: impl FnMut(&Connection) -> rusqlite::Result<R>,
    ) -> Result<R, StoreError> {
        let started = Instant::now();
        let mut delay = Duration::from_millis(1);
        loop {
            let result = {
                let connection = self.connection.lock().map_err(|_| StoreError::Internal {
                    detail: "the SQLite connection is poisoned by an earlier panic".to_owned(),
                })?;
                read(&connection)
            };
            match result {
                Ok(value) => return Ok(value),
                Err(error) if is_busy(&error) && started.elapsed() < self.options.busy_budget => {
                    tokio::time::sleep(crate::store::jitter(delay)).await;
                    delay = (delay * 2).min(Duration::from_millis(25));
                }
                Err(error) if is_busy(&error) => {
                    return Err(StoreError::Busy {
                        waited: started.elapsed(),
                    });
                }
                Err(error) => return Err(map_read_error(error)),
            }
        }
    }
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn store_now(&self, now: Timestamp) -> Result<Timestamp, StoreError> {
        Ok(self.offset.apply(now))
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
        self.read(|connection| {
            connection
                .prepare_cached(&format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"
                ))?
                .query_row(params![id.as_str()], approval_from_row)
                .optional()
        })
        .await
    }

    async fn correlated(
        &self,
        correlation: &Correlation,
    ) -> Result<Option<ApprovalRecord>, StoreError> {
        self.read(|connection| {
            connection
                .prepare_cached(&format!(
                    "SELECT {} FROM approvals WHERE id = (SELECT request_id FROM correlations WHERE framework = ?1 AND run = ?2 AND call_id = ?3)",
                    APPROVAL_COLUMNS
                ))?
                .query_row(
                    params![
                        correlation.framework,
                        correlation.run.as_deref().unwrap_or(""),
                        correlation.call_id
                    ],
                    approval_from_row,
                )
                .optional()
        })
        .await
    }

    async fn approvals(
        &self,
        state: Option<ApprovalState>,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        // Two statements, not `?1 IS NULL OR state = ?1`: only a plain `state = ?1` can use the
        // index `approvals_by_state`.
        self.read(|connection| match state {
            Some(state) => connection
                .prepare_cached(&format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE state = ?1 ORDER BY created_at, id"
                ))?
                .query_map(params![state.as_str()], approval_from_row)?
                .collect(),
            None => connection
                .prepare_cached(&format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals ORDER BY created_at, id"
                ))?
                .query_map([], approval_from_row)?
                .collect(),
        })
        .await
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
        self.read(|connection| {
            connection
                .prepare_cached(&format!(
                    "SELECT {EFFECT_COLUMNS} FROM effects WHERE key = ?1"
                ))?
                .query_row(params![key.as_str()], effect_from_row)
                .optional()
        })
        .await
    }

    async fn effects(&self, state: Option<EffectState>) -> Result<Vec<EffectRecord>, StoreError> {
        self.read(|connection| match state {
            Some(state) => {
                let (sql, parameter) = effects_in_state(state);
                let mut statement = connection.prepare_cached(&sql)?;
                match parameter {
                    Some(state) => statement.query_map(params![state], effect_from_row)?,
                    None => statement.query_map([], effect_from_row)?,
                }
                .collect()
            }
            None => connection
                .prepare_cached(&format!(
                    "SELECT {EFFECT_COLUMNS} FROM effects ORDER BY key"
                ))?
                .query_map([], effect_from_row)?
                .collect(),
        })
        .await
    }

    async fn resolve_effect(
        &self,
        resolve: ResolveEffect,
        now: Timestamp,
    ) -> Result<EffectRecord, ResolveError> {
        self.run(Operation::Resolve(resolve), now).await?.resolved()
    }

    async fn receipts(&self, after: u64, limit: usize) -> Result<Vec<StoredReceipt>, StoreError> {
        // One lane: a receipt's place in the log is its `seq`.
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|connection| {
            // The log starts at 1, and a row below it would never be read by a page after 0:
            // refuse to read the log at all rather than verify it as intact (found by a
            // first-time user: rows inserted at seq 0 and below went unreported).
            if after == 0 {
                let outside: Option<i64> = connection
                    .prepare_cached("SELECT seq FROM receipts WHERE seq <= 0 ORDER BY seq LIMIT 1")?
                    .query_row([], |row| row.get(0))
                    .optional()?;
                if let Some(seq) = outside {
                    return Err(rows::corrupt(format!(
                        "a receipt row at seq {seq}, where the log starts at 1: a row was inserted outside Countersign; keep the file as evidence and restore the store from a backup"
                    )));
                }
            }
            let mut statement = connection
                .prepare_cached("SELECT seq, prev_hash, hash, body FROM receipts WHERE seq > ?1 ORDER BY seq LIMIT ?2")?;
            statement.query_map(params![after, limit], receipt_from_row)?.collect()
        })
        .await
    }

    async fn revoke_token(
        &self,
        jti: &str,
        by: &str,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.read(|connection| {
            connection
                .prepare_cached(
                    "INSERT INTO revoked_tokens (jti, revoked_at, revoked_by, reason) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (jti) DO NOTHING",
                )?
                .execute(params![jti, self.offset.apply(now).as_millis(), by, reason])
                .map(|inserted| inserted == 1)
        })
        .await
    }

    async fn token_revoked(&self, jti: &str) -> Result<bool, StoreError> {
        self.read(|connection| {
            connection
                .prepare_cached("SELECT 1 FROM revoked_tokens WHERE jti = ?1")?
                .exists(params![jti])
        })
        .await
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
        self.read(|connection| outbox::events(connection, after_seq, limit))
            .await
    }

    async fn claim_deliveries(
        &self,
        claim: crate::store::DeliveryClaim,
        now: Timestamp,
    ) -> Result<Vec<crate::outbox::ClaimedDelivery>, StoreError> {
        let judged = self.offset.apply(now);
        let mut claimed = self
            .write(|txn| {
                let result = outbox::claim(txn.transaction, &claim, judged);
                txn.check(result)
            })
            .await?;
        // The lease as the caller's clock reads it (see `ClaimedDelivery::lease_until`).
        for held in &mut claimed {
            held.lease_until = now.plus(claim.lease);
        }
        Ok(claimed)
    }

    async fn settle_delivery(
        &self,
        id: u64,
        owner: &str,
        settlement: crate::outbox::Settlement,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let judged = self.offset.apply(now);
        let settlement = crate::store::clock::settlement(settlement, now, judged);
        self.write(|txn| {
            let result = outbox::settle(txn.transaction, id, owner, &settlement, judged);
            txn.check(result)
        })
        .await
    }

    async fn deliveries(
        &self,
        state: Option<crate::outbox::DeliveryState>,
        limit: usize,
    ) -> Result<Vec<crate::outbox::Delivery>, StoreError> {
        self.read(|connection| outbox::deliveries(connection, state, limit))
            .await
    }

    async fn delivery_reference(
        &self,
        request_id: &ApprovalId,
        endpoint: &str,
    ) -> Result<Option<String>, StoreError> {
        self.read(|connection| outbox::reference(connection, request_id, endpoint))
            .await
    }

    async fn redeliver(
        &self,
        id: u64,
        now: Timestamp,
    ) -> Result<Option<crate::outbox::Delivery>, StoreError> {
        let now = self.offset.apply(now);
        self.write(|txn| {
            let result = outbox::redeliver(txn.transaction, id, now);
            txn.check(result)
        })
        .await
    }

    async fn prune_outbox(&self, before: Timestamp) -> Result<u64, StoreError> {
        self.write(|txn| {
            let result = outbox::prune(txn.transaction, before);
            txn.check(result)
        })
        .await
    }

    async fn append_event(&self, event: &crate::outbox::OutboxEvent) -> Result<(), StoreError> {
        self.write(|txn| {
            let result = outbox::insert_event(txn.transaction, event);
            txn.check(result)
        })
        .await
    }

    async fn last_event(
        &self,
        kind: crate::outbox::EventKind,
    ) -> Result<Option<crate::outbox::StoredEvent>, StoreError> {
        self.read(|connection| outbox::last_event(connection, kind))
            .await
    }

    async fn chain_head(&self) -> Result<Option<ChainHead>, StoreError> {
        let head = self
            .read(|connection| {
                connection
                    .prepare_cached("SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1")?
                    .query_row([], |row| {
                        Ok((
                            row.get::<_, i64>(0)?,
                            row.get::<_, Option<String>>(1)?.unwrap_or_default(),
                        ))
                    })
                    .optional()
            })
            .await?;
        Ok(head.map(|(seq, hash)| ChainHead {
            seq: u64::try_from(seq).unwrap_or(0),
            hash: ReceiptHash::from_stored(hash),
        }))
    }
}
