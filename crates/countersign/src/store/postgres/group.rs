//! Group commit on PostgreSQL (issue #21, `store/group.rs`): the operations concurrent callers
//! queued, applied in one transaction.
//!
//! A lone operation runs as [`PostgresStore::try_write`]. In a group, each operation's reads
//! and row writes run under its own savepoint: one that loses a compare-and-set or a conflict
//! is rolled back to its savepoint and retried in a later transaction; one that fails is rolled
//! back alone and gets its error. Then a lane's head row is locked once (`postgres/log.rs`),
//! every receipt of the group is sealed onto it in queue order and appended in one statement,
//! and the group commits: the head is held only for that last statement and the one `COMMIT`,
//! whose WAL flush the group shares. A store runs up to [`LEADERS`] groups at once, each on its
//! own connection and, the lanes being several, each in its own lane, so one group's reads,
//! writes and commit overlap another's.

use super::*;
use crate::store::group::{Apply, Job, Outcome, duplicate};
use crate::store::plan::Unsealed;

/// How many groups one store runs at once, at most (issue #21). Measured on the 2-core machine
/// (docs/benchmarks.md): with one chain head, 2 and 4 leaders did worse than 1 with 16 callers,
/// as each group took the one head through its own flush; with lanes each group commits in its
/// own lane, and 4 leaders did best (the fourth pass's experiment, and the fifth pass).
pub(super) const LEADERS: usize = 4;

/// The leaders of a store whose pool holds `max_connections`: [`LEADERS`], fewer with a
/// smaller pool, always leaving a connection for reads; at least one.
pub(super) fn leaders(max_connections: u32) -> usize {
    let spare = usize::try_from(max_connections.saturating_sub(1)).unwrap_or(usize::MAX);
    LEADERS.min(spare).max(1)
}

impl Apply for PostgresStore {
    async fn apply(&self, jobs: &[Job]) -> Vec<Outcome> {
        match jobs {
            [job] => vec![match self.try_write(&job.operation, job.now).await {
                Ok(done) => Outcome::Final(Ok(done)),
                Err(PgFailure::Retry) => Outcome::Retry,
                Err(PgFailure::Store(error)) => Outcome::Final(Err(error)),
            }],
            jobs => self.try_group(jobs).await,
        }
    }
}

/// The outcome of every job when the whole transaction failed.
fn every(jobs: &[Job], failure: &PgFailure) -> Vec<Outcome> {
    jobs.iter()
        .map(|_| match failure {
            PgFailure::Retry => Outcome::Retry,
            PgFailure::Store(error) => Outcome::Final(Err(duplicate(error))),
        })
        .collect()
}

impl PgTxn {
    /// Run savepoint statements (`SAVEPOINT`, `RELEASE SAVEPOINT`, `ROLLBACK TO SAVEPOINT`,
    /// several separated by `;`) in one round trip (the simple query protocol: nothing is
    /// prepared, so behind a transaction pooler too).
    async fn savepoint(&mut self, statements: &'static str) -> Result<(), PgFailure> {
        sqlx::raw_sql(statements)
            .execute(&mut *self.transaction)
            .await
            .map(drop)
            .map_err(classify)
    }
}

/// How a group's jobs are kept apart in its transaction.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Jobs {
    /// One after the other with nothing between them: a job that fails after writing rolls
    /// the whole transaction back.
    Together,
    /// Each under its own savepoint: a job that fails is rolled back alone.
    Savepoints,
}

/// Where a group's savepoint stands before the next job.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Savepoint {
    /// None yet (the first job).
    None,
    /// Open, holding the last job's changes: release it and open the next.
    Kept,
    /// Open and empty (the last job was rolled back to it): the next job runs under it.
    Empty,
}

impl PostgresStore {
    /// Apply two or more jobs in one transaction; then lock a lane's head once, seal every
    /// receipt of the group onto it in queue order and append them in one statement
    /// ([`PgTxn::append`]), and commit.
    ///
    /// The jobs run first one after the other with nothing between them, as most groups have
    /// no job that fails after writing. When one does (it lost a compare-and-set, or a
    /// statement failed), the transaction is rolled back and the group runs again with each
    /// job under its own savepoint, so that job alone is undone. A job whose plan refuses after
    /// its reads wrote nothing and needs no savepoint. Skipping the savepoints saves one round
    /// trip per job (issue #21).
    async fn try_group(&self, jobs: &[Job]) -> Vec<Outcome> {
        match self.try_group_with(jobs, Jobs::Together).await {
            Some(outcomes) => outcomes,
            None => self
                .try_group_with(jobs, Jobs::Savepoints)
                .await
                .unwrap_or_else(|| every(jobs, &PgFailure::Retry)),
        }
    }

    /// One run of [`PostgresStore::try_group`]: `None` when, with [`Jobs::Together`], a job
    /// left the transaction needing a rollback (it has been rolled back).
    async fn try_group_with(&self, jobs: &[Job], isolation: Jobs) -> Option<Vec<Outcome>> {
        let transaction = match self.begin().await {
            Ok(transaction) => transaction,
            Err(failure) => return Some(every(jobs, &failure)),
        };
        let mut pg = PgTxn::new(transaction, self.persistent());
        // One clock (issue #22): one server time for the whole group.
        let store_now = match self.transaction_now(&mut pg).await {
            Ok(store_now) => store_now,
            Err(failure) => return Some(every(jobs, &failure)),
        };
        // Per job: `None` while its receipts and reply wait in `pending`, or its outcome.
        let mut decided: Vec<Option<Outcome>> = Vec::with_capacity(jobs.len());
        let mut pending: Vec<Unsealed> = Vec::with_capacity(jobs.len());
        let mut savepoint = Savepoint::None;
        for job in jobs {
            if isolation == Jobs::Savepoints {
                let opened = match savepoint {
                    Savepoint::None => pg.savepoint("SAVEPOINT grouped").await,
                    Savepoint::Kept => {
                        pg.savepoint("RELEASE SAVEPOINT grouped; SAVEPOINT grouped")
                            .await
                    }
                    Savepoint::Empty => Ok(()),
                };
                if let Err(failure) = opened {
                    return Some(every(jobs, &failure));
                }
            }
            // Every update of an approval follows its read in the same operation; a rolled-back
            // operation must leave no remembered `answers` behind.
            pg.read_answers.clear();
            let (operation, now) = self.judged(&job.operation, job.now, store_now);
            match pg.run(&operation, now).await {
                Ok(unsealed) => {
                    savepoint = Savepoint::Kept;
                    decided.push(None);
                    pending.push(unsealed);
                }
                Err(RunFailure { failure, dirty }) => {
                    match isolation {
                        Jobs::Together if dirty => {
                            // Dropping the transaction rolls it back.
                            return None;
                        }
                        Jobs::Together => {}
                        Jobs::Savepoints => {
                            if let Err(failure) =
                                pg.savepoint("ROLLBACK TO SAVEPOINT grouped").await
                            {
                                return Some(every(jobs, &failure));
                            }
                            savepoint = Savepoint::Empty;
                        }
                    }
                    decided.push(Some(match failure {
                        PgFailure::Retry => Outcome::Retry,
                        PgFailure::Store(error) => Outcome::Final(Err(error)),
                    }));
                }
            }
        }
        let sealed = match pg.append(pending).await {
            Ok(sealed) => sealed,
            Err(failure) => return Some(every(jobs, &failure)),
        };
        if sealed.iter().any(Result::is_err) {
            // Nothing was appended. Roll the whole transaction back (dropping it): the plan
            // that could not be sealed gets its error, every other applied job runs again.
            drop(pg);
            let mut sealed = sealed.into_iter();
            return Some(
                decided
                    .into_iter()
                    .map(|decided| match decided {
                        Some(outcome) => outcome,
                        None => match sealed.next() {
                            Some(Err(error)) => Outcome::Final(Err(error)),
                            Some(Ok(_)) | None => Outcome::Retry,
                        },
                    })
                    .collect(),
            );
        }
        let committed = self.commit_group(pg).await;
        let mut sealed = sealed.into_iter();
        Some(
            decided
                .into_iter()
                .zip(jobs)
                .map(|(decided, job)| match decided {
                    Some(outcome) => outcome,
                    None => sealed_outcome(sealed.next(), &committed, job),
                })
                .collect(),
        )
    }

    /// Commit a group's transaction; a connection lost during `COMMIT` is settled as for a
    /// lone operation ([`PostgresStore::commit_settled`]).
    async fn commit_group(&self, pg: PgTxn) -> Result<(), PgFailure> {
        self.commit_settled(pg, "group").await
    }
}

/// The outcome of a job of a group whose plan was applied and sealed (`sealed`), once the
/// group's `COMMIT` ended as `committed`.
fn sealed_outcome(
    sealed: Option<Result<Done, StoreError>>,
    committed: &Result<(), PgFailure>,
    job: &Job,
) -> Outcome {
    match (sealed, committed) {
        (Some(Ok(done)), Ok(())) => Outcome::Final(Ok(done)),
        (Some(Ok(_)), Err(PgFailure::Retry)) => Outcome::Retry,
        (Some(Ok(_)), Err(PgFailure::Store(StoreError::OutcomeUnknown { .. }))) => {
            Outcome::Final(Err(StoreError::OutcomeUnknown {
                operation: job.operation.name(),
            }))
        }
        (Some(Ok(_)), Err(PgFailure::Store(error))) => Outcome::Final(Err(duplicate(error))),
        (Some(Err(error)), _) => Outcome::Final(Err(error)),
        (None, _) => Outcome::Final(Err(StoreError::Internal {
            detail: "a group's job got no sealed result".to_owned(),
        })),
    }
}
