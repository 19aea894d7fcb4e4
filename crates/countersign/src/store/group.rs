//! Group commit (issue #21): concurrent callers of one store share transactions.
//!
//! A writing call queues its [`Operation`] and then tries to *lead*: whichever caller holds the
//! group's lead applies every queued operation in one transaction of its backend
//! ([`Apply::apply`]), on its own task — there is no dedicated thread and no hop per statement
//! (DESIGN.md, "Stores"). Each operation is planned and sealed in turn inside that transaction,
//! so the receipts of a group are chained in queue order onto the head the previous operation
//! left; each keeps its own result. A backend applies the operations of a group of two or more
//! each under its own savepoint, so one that fails is rolled back alone and never fails the
//! others (PostgreSQL first tries the group without savepoints, which cost it a round trip
//! each, and runs it again with them only when an operation failed after writing). A lone caller finds the lead free and its own operation alone in the queue, and runs
//! exactly the transaction it ran before group commit (no savepoint): it never waits for
//! company.
//!
//! A store may let up to N callers lead at once ([`Group::new`]): each leader takes whatever is
//! queued when it starts and applies it in its own transaction, so one group's statements
//! overlap another's commit (PostgreSQL, each leader on its own connection). SQLite has one
//! connection and one leader.
//!
//! An operation the backend could not apply this time ([`Outcome::Retry`]: a busy SQLite file,
//! a PostgreSQL conflict) stays with the caller that led it, who sleeps (jittered, growing
//! backoff) without the lead and applies it again with whatever has been queued meanwhile, until
//! the operation's own budget is spent ([`StoreError::Busy`]).
//!
//! # Cancel safety
//!
//! An operation whose caller dropped its future before a leader took it is skipped, never run.
//! Once taken, it is committed with its group or not at all, as a lone transaction dropped
//! during `COMMIT` is. A leader dropped (or panicking) while it applies a group leaves the other
//! callers of that group with [`StoreError::OutcomeUnknown`]: the transaction may have committed,
//! so their operations are never run again blindly. A leader dropped while it holds operations
//! to retry (rolled back, sleeping) puts them back in the queue, and their callers (who look
//! again at least every [`POLL`]) lead them.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::clock::Timestamp;
use crate::error::StoreError;
use crate::store::plan::{Done, Operation};

/// How often a caller whose operation is held by another leader (sleeping before a retry)
/// looks again, in case that leader was dropped.
const POLL: Duration = Duration::from_millis(20);

/// One queued operation and where its result goes.
pub(crate) struct Job {
    /// The operation.
    pub(crate) operation: Operation,
    /// The time its caller passed.
    pub(crate) now: Timestamp,
    /// When it was queued: its retry budget runs from here.
    queued: Instant,
    reply: oneshot::Sender<Result<Done, StoreError>>,
}

/// What a backend made of one operation of a group.
#[allow(
    clippy::large_enum_variant,
    reason = "an outcome is moved once, into its caller's channel; boxing would allocate per operation"
)]
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Final: committed (`Ok`), or refused with nothing of it written (`Err`).
    Final(Result<Done, StoreError>),
    /// Not applied (rolled back); apply it again after a sleep.
    Retry,
}

/// A backend that applies a group of operations in one transaction.
pub(crate) trait Apply: Sync {
    /// Apply `jobs` in one transaction and return one outcome per job, in order. With more
    /// than one job, a job that fails must be rolled back alone.
    fn apply(&self, jobs: &[Job]) -> impl std::future::Future<Output = Vec<Outcome>> + Send;
}

/// Retry pacing: the first sleep, the longest, and the budget per operation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Backoff {
    pub(crate) first: Duration,
    pub(crate) max: Duration,
    pub(crate) budget: Duration,
}

/// The queue and the leads of one store.
#[derive(Debug)]
pub(crate) struct Group {
    queue: Mutex<Vec<Job>>,
    /// One permit per caller that may lead a group at once.
    lead: tokio::sync::Semaphore,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("operation", &self.operation.name())
            .finish_non_exhaustive()
    }
}

/// Operations a leader holds for a retry; put back in the queue if the leader is dropped.
struct Held<'g> {
    group: &'g Group,
    jobs: Vec<Job>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if !self.jobs.is_empty() {
            let jobs = std::mem::take(&mut self.jobs);
            self.group.queue().extend(jobs);
        }
    }
}

impl Group {
    /// A group letting up to `leaders` callers (at least one) lead at once.
    pub(crate) fn new(leaders: usize) -> Group {
        Group {
            queue: Mutex::default(),
            lead: tokio::sync::Semaphore::new(leaders.max(1)),
        }
    }

    fn queue(&self) -> MutexGuard<'_, Vec<Job>> {
        // A panic while the queue was locked leaves a Vec that is still whole (push and
        // drain only): keep using it.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Run `operation` in a shared transaction of `backend` (see the [module docs](self)).
    pub(crate) async fn run<A: Apply>(
        &self,
        backend: &A,
        operation: Operation,
        now: Timestamp,
        backoff: Backoff,
    ) -> Result<Done, StoreError> {
        let name = operation.name();
        let (reply, mut answer) = oneshot::channel();
        self.queue().push(Job {
            operation,
            now,
            queued: Instant::now(),
            reply,
        });
        // The caller leading this operation's group was dropped (or panicked) while applying
        // it: the group's transaction may or may not have committed.
        let lost = || StoreError::OutcomeUnknown { operation: name };
        let mut held = Held {
            group: self,
            jobs: Vec::new(),
        };
        let mut delay = backoff.first;
        loop {
            let lead = tokio::select! {
                biased;
                result = &mut answer, if held.jobs.is_empty() => {
                    return result.unwrap_or_else(|_| Err(lost()));
                }
                lead = self.lead.acquire() => lead,
            };
            let Ok(lead) = lead else {
                // INVARIANT (never-closed): nothing closes the semaphore; say so if it happens.
                return Err(StoreError::Internal {
                    detail: "the group commit lead was closed".to_owned(),
                });
            };
            if held.jobs.is_empty()
                && let Ok(result) = answer.try_recv()
            {
                return result;
            }
            let mut batch = std::mem::take(&mut held.jobs);
            batch.extend(self.queue().drain(..).filter(|job| !job.reply.is_closed()));
            if batch.is_empty() {
                // Our operation is being applied by another leader, or held by one sleeping
                // before its retry.
                drop(lead);
                tokio::select! {
                    result = &mut answer => return result.unwrap_or_else(|_| Err(lost())),
                    () = tokio::time::sleep(POLL) => continue,
                }
            }
            let outcomes = backend.apply(&batch).await;
            drop(lead);
            if outcomes.len() != batch.len() {
                let detail = format!(
                    "a group of {} operations got {} outcomes",
                    batch.len(),
                    outcomes.len()
                );
                for job in batch {
                    let _ = job.reply.send(Err(StoreError::Internal {
                        detail: detail.clone(),
                    }));
                }
                continue;
            }
            for (job, outcome) in batch.into_iter().zip(outcomes) {
                match outcome {
                    Outcome::Final(result) => {
                        let _ = job.reply.send(result);
                    }
                    Outcome::Retry if job.queued.elapsed() >= backoff.budget => {
                        let waited = job.queued.elapsed();
                        let _ = job.reply.send(Err(StoreError::Busy { waited }));
                    }
                    Outcome::Retry => held.jobs.push(job),
                }
            }
            if held.jobs.is_empty() {
                delay = backoff.first;
                continue;
            }
            tokio::time::sleep(crate::store::jitter(delay)).await;
            delay = (delay * 2).min(backoff.max);
        }
    }
}

/// The same error again, for every operation of a group that one failure ended.
pub(crate) fn duplicate(error: &StoreError) -> StoreError {
    match error {
        StoreError::Busy { waited } => StoreError::Busy { waited: *waited },
        StoreError::OutcomeUnknown { operation } => StoreError::OutcomeUnknown { operation },
        StoreError::Incompatible { found, supported } => StoreError::Incompatible {
            found: *found,
            supported: *supported,
        },
        StoreError::Corrupt { detail } => StoreError::Corrupt {
            detail: detail.clone(),
        },
        StoreError::Open { location, message } => StoreError::Open {
            location: location.clone(),
            message: message.clone(),
        },
        StoreError::NoStore { location, message } => StoreError::NoStore {
            location: location.clone(),
            message: message.clone(),
        },
        StoreError::Backend { message } => StoreError::Backend {
            message: message.clone(),
        },
        StoreError::Internal { detail } => StoreError::Internal {
            detail: detail.clone(),
        },
    }
}

/// `delay` scaled by a random factor in [0.5, 1.5): the backoff both backends use between
/// retries of a busy or conflicting transaction, so racing callers spread out.
pub(crate) fn jitter(delay: std::time::Duration) -> std::time::Duration {
    use rand::Rng;
    delay.mul_f64(rand::rng().random_range(0.5..1.5))
}

#[cfg(test)]
mod tests {
    //! Group commit through the real backends: every caller gets its own result and receipt,
    //! one failing operation in a group leaves the others committed, and the chain verifies.

    use std::collections::BTreeSet;
    use std::sync::Arc;

    use super::*;
    use crate::effect::EffectState;
    use crate::evidence::{ReceiptDraft, ReceiptKind, ReceiptOutcome};
    use crate::id::AttemptId;
    use crate::id::EffectKey;
    use crate::store::{FinishAttempt, SqliteStore, Store};

    const NOW: i64 = 1_780_000_000_000;

    fn draft(attempt: &str) -> ReceiptDraft {
        ReceiptDraft {
            kind: Some(ReceiptKind::Attempt),
            outcome: Some(ReceiptOutcome::Committed),
            attempt_id: Some(AttemptId::from_stored(attempt.to_owned())),
            action: Some("group.test".to_owned()),
            environment: Some("test".to_owned()),
            ..ReceiptDraft::default()
        }
    }

    fn job(operation: Operation) -> (Job, oneshot::Receiver<Result<Done, StoreError>>) {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            operation,
            now: Timestamp::from_millis(NOW),
            queued: Instant::now(),
            reply,
        };
        (job, answer)
    }

    /// A finish whose effect key no store holds: its plan fails (`Corrupt`).
    fn failing_finish() -> FinishAttempt {
        FinishAttempt {
            attempt_id: AttemptId::from_stored("att-missing".to_owned()),
            effect_key: Some(EffectKey::from_stored("group:missing".to_owned())),
            state: EffectState::Committed,
            detail: None,
            draft: draft("att-missing"),
        }
    }

    fn failing() -> Operation {
        Operation::Finish(failing_finish())
    }

    async fn stores(dir: &std::path::Path, name: &str) -> Vec<Arc<dyn Store>> {
        let mut stores: Vec<Arc<dyn Store>> = vec![Arc::new(
            SqliteStore::open(dir.join(format!("{name}.db"))).expect("sqlite"),
        )];
        #[cfg(feature = "postgres")]
        stores.push(Arc::new(postgres(name, 4).await));
        stores
    }

    /// A PostgreSQL store in a schema of its own (`group_{name}_{pid}`) with a pool of
    /// `connections`.
    ///
    /// # Panics
    ///
    /// When `COUNTERSIGN_TEST_POSTGRES_URL` is not set, saying how to set it: these tests need
    /// PostgreSQL, and fail loudly rather than skip.
    #[cfg(feature = "postgres")]
    async fn postgres(name: &str, connections: u32) -> crate::store::PostgresStore {
        let url = std::env::var("COUNTERSIGN_TEST_POSTGRES_URL").unwrap_or_else(|_| {
            panic!(
                "COUNTERSIGN_TEST_POSTGRES_URL is not set: the group commit tests need PostgreSQL; run `.ci/postgres.sh` and export the URL it prints"
            )
        });
        let separator = if url.contains('?') { '&' } else { '?' };
        let url = format!(
            "{url}{separator}schema=group_{name}_{}&max_connections={connections}",
            std::process::id()
        );
        crate::store::PostgresStore::connect(&url)
            .await
            .expect("postgres")
    }

    async fn assert_chain_verifies(store: &dyn Store, receipts: usize) {
        let report = crate::audit::verify_store(store, None)
            .await
            .expect("readable");
        assert!(report.is_intact(), "{}: {report:?}", store.backend());
        assert_eq!(report.checked, receipts as u64, "{}", store.backend());
    }

    /// Apply one hand-made group [ok, failing, ok] through `apply` directly, so the three are
    /// certainly in one transaction.
    async fn failing_operation_leaves_the_others<A: Apply>(backend: &A) -> Vec<Outcome> {
        let (first, _a) = job(Operation::Append(draft("att-first")));
        let (bad, _b) = job(failing());
        let (last, _c) = job(Operation::Append(draft("att-last")));
        backend.apply(&[first, bad, last]).await
    }

    fn receipt_of(outcome: &Outcome) -> crate::evidence::Receipt {
        match outcome {
            Outcome::Final(Ok(done)) => match done {
                Done::Receipt(receipt) => (**receipt).clone(),
                other => panic!("not a receipt: {other:?}"),
            },
            Outcome::Final(Err(error)) => panic!("refused: {error}"),
            Outcome::Retry => panic!("asked for a retry"),
        }
    }

    #[tokio::test]
    async fn a_failing_operation_in_a_group_fails_alone_on_sqlite() {
        let dir = tempfile::tempdir().expect("a folder");
        let store = SqliteStore::open(dir.path().join("fail.db")).expect("sqlite");
        let outcomes = failing_operation_leaves_the_others(&store).await;
        assert_eq!(outcomes.len(), 3);
        let first = receipt_of(&outcomes[0]);
        assert!(
            matches!(&outcomes[1], Outcome::Final(Err(StoreError::Corrupt { detail })) if detail.contains("group:missing")),
            "the failing finish gets its own error"
        );
        let last = receipt_of(&outcomes[2]);
        assert_eq!((first.seq, last.seq), (1, 2));
        assert_eq!(last.prev_hash, first.hash);
        assert_eq!(
            last.attempt_id.as_ref().map(AttemptId::as_str),
            Some("att-last")
        );
        assert_chain_verifies(&store, 2).await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test]
    async fn a_failing_operation_in_a_group_fails_alone_on_postgres() {
        let store = postgres("fail", 2).await;
        let outcomes = failing_operation_leaves_the_others(&store).await;
        let first = receipt_of(&outcomes[0]);
        assert!(
            matches!(
                &outcomes[1],
                Outcome::Final(Err(StoreError::Corrupt { .. }))
            ),
            "the failing finish gets its own error"
        );
        let last = receipt_of(&outcomes[2]);
        assert_eq!((first.seq, last.seq), (1, 2));
        assert_eq!(last.prev_hash, first.hash);
        assert_chain_verifies(&store, 2).await;
    }

    /// A request `apr_dirty` for action `n` (its hash is `n` in hex).
    fn open_request(n: u8) -> Operation {
        use crate::approval::{ApprovalId, ApprovalRecord, ApprovalState};
        use crate::id::{PolicyHash, Principal};
        let now = Timestamp::from_millis(NOW);
        Operation::Open(crate::store::NewApproval {
            record: ApprovalRecord {
                id: ApprovalId::from_stored("apr_dirty".to_owned()),
                action_hash: crate::ActionHash::from_stored(format!("sha256:{n:064x}")),
                action: format!("group.action{n}"),
                arguments: crate::action::canonical::to_canonical(&serde_json::json!({ "n": n }))
                    .expect("canonical arguments"),
                principal: Principal::from_stored("agent:group".to_owned()),
                resource: None,
                environment: "test".to_owned(),
                effect_key: None,
                policy_hash: PolicyHash::from_stored("sha256:policy".to_owned()),
                entry_fingerprint: "entry".to_owned(),
                state: ApprovalState::Pending,
                created_at: now,
                expires_at: now.plus(std::time::Duration::from_secs(300)),
                answered_at: None,
                approver: None,
                note: None,
                consumed_at: None,
                consumed_by: None,
                run: None,
                rule: crate::approver::ApprovalRule::default(),
                answers: Vec::new(),
            },
            effect_key: None,
            correlation: None,
        })
    }

    /// A group [ok, a job whose write fails after its plan succeeded, ok]: the request id
    /// `apr_dirty` is taken already (by action 1), so inserting it again for action 2 fails
    /// with a unique violation, a statement error that aborts the whole transaction. That job
    /// must fail alone and leave nothing behind, the others commit with their receipts.
    async fn a_failing_write_fails_alone(store: &(impl Apply + Store)) {
        let (opened, _o) = job(open_request(1));
        let first = store.apply(&[opened]).await;
        assert!(
            matches!(&first[..], [Outcome::Final(Ok(_))]),
            "{}: {first:?}",
            store.backend()
        );
        let (before, _a) = job(Operation::Append(draft("att-before")));
        let (bad, _b) = job(open_request(2));
        let (after, _c) = job(Operation::Append(draft("att-after")));
        let outcomes = store.apply(&[before, bad, after]).await;
        assert_eq!(outcomes.len(), 3);
        let before = receipt_of(&outcomes[0]);
        assert!(
            matches!(
                &outcomes[1],
                Outcome::Final(Err(StoreError::Backend { .. }))
            ),
            "{}: the failing write gets its own error: {:?}",
            store.backend(),
            outcomes[1]
        );
        let after = receipt_of(&outcomes[2]);
        assert_eq!(after.prev_hash, before.hash, "{}", store.backend());
        let stored = store
            .approval(&crate::approval::ApprovalId::from_stored(
                "apr_dirty".to_owned(),
            ))
            .await
            .expect("readable")
            .expect("the first request");
        assert_eq!(stored.action, "group.action1", "{}", store.backend());
        // Opening a request writes no receipt: the two appended are the log.
        assert_chain_verifies(store, 2).await;
    }

    #[tokio::test]
    async fn a_write_failing_in_a_group_fails_alone_on_sqlite() {
        let dir = tempfile::tempdir().expect("a folder");
        let store = SqliteStore::open(dir.path().join("dirty.db")).expect("sqlite");
        a_failing_write_fails_alone(&store).await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test]
    async fn a_write_failing_in_a_group_fails_alone_on_postgres() {
        let store = postgres("dirty", 2).await;
        a_failing_write_fails_alone(&store).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_callers_each_get_their_own_receipt() {
        const CALLERS: usize = 16;
        const CALLS: usize = 25;
        let dir = tempfile::tempdir().expect("a folder");
        for store in stores(dir.path(), "own").await {
            let mut tasks = Vec::new();
            for caller in 0..CALLERS {
                let store = Arc::clone(&store);
                tasks.push(tokio::spawn(async move {
                    let mut got = Vec::new();
                    for call in 0..CALLS {
                        let attempt = format!("att-{caller}-{call}");
                        let receipt = store
                            .append_receipt(draft(&attempt), Timestamp::from_millis(NOW))
                            .await
                            .expect("appended");
                        // Each caller gets the receipt of its own draft, never a neighbour's.
                        assert_eq!(
                            receipt.attempt_id.as_ref().map(AttemptId::as_str),
                            Some(attempt.as_str())
                        );
                        got.push((receipt.lane, receipt.seq));
                    }
                    got
                }));
            }
            let mut callers = Vec::new();
            for task in tasks {
                callers.push(task.await.expect("a caller"));
            }
            // Where the log placed each receipt (one lane in memory and SQLite; PostgreSQL's
            // callers spread over lanes).
            let placed: std::collections::BTreeMap<(u32, u64), u64> = store
                .receipts(0, usize::MAX)
                .await
                .expect("the log")
                .iter()
                .map(|stored| ((stored.lane, stored.seq), stored.position))
                .collect();
            let mut seen = BTreeSet::new();
            for got in &callers {
                let positions: Vec<u64> = got
                    .iter()
                    .map(|at| *placed.get(at).expect("every receipt is in the log"))
                    .collect();
                assert!(
                    positions.windows(2).all(|pair| pair[0] < pair[1]),
                    "one caller's receipts are in its call order in the log: {got:?} at {positions:?}"
                );
                for at in got {
                    assert!(seen.insert(*at), "{at:?} given twice");
                }
            }
            // No gap and no duplicate: each lane's `seq` runs from 1.
            let mut next = std::collections::BTreeMap::new();
            for (lane, seq) in &seen {
                let expected = next.entry(*lane).or_insert(1_u64);
                assert_eq!(seq, expected, "{}: lane {lane}", store.backend());
                *expected += 1;
            }
            assert_eq!(seen.len(), CALLERS * CALLS, "{}", store.backend());
            assert_chain_verifies(store.as_ref(), CALLERS * CALLS).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn several_leaders_each_answer_their_own_callers() {
        // Three callers may lead at once; each drains what is queued when it starts.
        const CALLERS: usize = 12;
        const CALLS: usize = 10;
        let dir = tempfile::tempdir().expect("a folder");
        let store = Arc::new(SqliteStore::open(dir.path().join("leaders.db")).expect("sqlite"));
        let group = Arc::new(Group::new(3));
        let backoff = Backoff {
            first: Duration::from_millis(1),
            max: Duration::from_millis(10),
            budget: Duration::from_secs(10),
        };
        let mut tasks = Vec::new();
        for caller in 0..CALLERS {
            let (store, group) = (Arc::clone(&store), Arc::clone(&group));
            tasks.push(tokio::spawn(async move {
                for call in 0..CALLS {
                    let attempt = format!("att-{caller}-{call}");
                    let operation = Operation::Append(draft(&attempt));
                    let done = group
                        .run(
                            store.as_ref(),
                            operation,
                            Timestamp::from_millis(NOW),
                            backoff,
                        )
                        .await
                        .expect("appended");
                    let Done::Receipt(receipt) = done else {
                        panic!("not a receipt: {done:?}");
                    };
                    assert_eq!(
                        receipt.attempt_id.as_ref().map(AttemptId::as_str),
                        Some(attempt.as_str())
                    );
                }
            }));
        }
        for task in tasks {
            task.await.expect("a caller");
        }
        assert_chain_verifies(store.as_ref(), CALLERS * CALLS).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_failures_never_fail_their_neighbours() {
        const CALLERS: usize = 8;
        const CALLS: usize = 20;
        let dir = tempfile::tempdir().expect("a folder");
        for store in stores(dir.path(), "mixed").await {
            let mut tasks = Vec::new();
            for caller in 0..CALLERS {
                let store = Arc::clone(&store);
                tasks.push(tokio::spawn(async move {
                    for call in 0..CALLS {
                        let now = Timestamp::from_millis(NOW);
                        if caller % 2 == 0 {
                            let error = store.finish_attempt(failing_finish(), now).await;
                            assert!(
                                matches!(error, Err(StoreError::Corrupt { .. })),
                                "{error:?}"
                            );
                        } else {
                            let attempt = format!("att-{caller}-{call}");
                            store
                                .append_receipt(draft(&attempt), now)
                                .await
                                .expect("a good operation next to a failing one commits");
                        }
                    }
                }));
            }
            for task in tasks {
                task.await.expect("a caller");
            }
            assert_chain_verifies(store.as_ref(), CALLERS / 2 * CALLS).await;
        }
    }
}
