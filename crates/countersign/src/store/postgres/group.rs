//! Group commit on PostgreSQL (issue #21, `store/group.rs`): the operations concurrent callers
//! queued, applied in one transaction.
//!
//! A lone operation runs exactly as before ([`PostgresStore::try_write`]). In a group, each
//! operation runs under its own savepoint: one that loses a compare-and-set or a conflict is
//! rolled back to its savepoint and retried in a later transaction; one that fails is rolled
//! back alone and gets its error. The chain head row is locked by the first operation that
//! seals a receipt and held to the one `COMMIT`, so the group's receipts are chained in queue
//! order and share one commit flush — which is the point: on PostgreSQL the commit's WAL flush
//! under the head's lock bounds throughput (docs/benchmarks.md).

use super::*;
use crate::store::group::{Apply, Job, Outcome, duplicate};

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
    /// Run a savepoint statement (`SAVEPOINT`, `RELEASE SAVEPOINT`, `ROLLBACK TO SAVEPOINT`).
    async fn savepoint(&mut self, statement: &'static str) -> Result<(), PgFailure> {
        sqlx::query(statement)
            .persistent(self.persistent)
            .execute(&mut *self.transaction)
            .await
            .map(drop)
            .map_err(classify)
    }
}

impl PostgresStore {
    /// Apply two or more jobs in one transaction, each under its own savepoint.
    async fn try_group(&self, jobs: &[Job]) -> Vec<Outcome> {
        let transaction = match self.begin().await {
            Ok(transaction) => transaction,
            Err(failure) => return every(jobs, &failure),
        };
        let mut pg = PgTxn {
            transaction,
            persistent: self.persistent(),
            read_answers: HashMap::new(),
            wrote: false,
        };
        // One clock (issue #22): one server time for the whole group.
        let store_now = match self.transaction_now(&mut pg).await {
            Ok(store_now) => store_now,
            Err(failure) => return every(jobs, &failure),
        };
        // Per job: `Some(done)` to commit, or its outcome already decided.
        let mut applied: Vec<Result<Done, Outcome>> = Vec::with_capacity(jobs.len());
        for job in jobs {
            if let Err(failure) = pg.savepoint("SAVEPOINT grouped").await {
                return every(jobs, &failure);
            }
            // Every update of an approval follows its read in the same operation; a rolled-back
            // operation must leave no remembered `answers` behind.
            pg.read_answers.clear();
            let (operation, now) = self.judged(&job.operation, job.now, store_now);
            match pg.run(&operation, now).await {
                Ok(done) => {
                    if let Err(failure) = pg.savepoint("RELEASE SAVEPOINT grouped").await {
                        return every(jobs, &failure);
                    }
                    applied.push(Ok(done));
                }
                Err(failure) => {
                    let rolled_back = match pg.savepoint("ROLLBACK TO SAVEPOINT grouped").await {
                        Ok(()) => pg.savepoint("RELEASE SAVEPOINT grouped").await,
                        Err(error) => Err(error),
                    };
                    if let Err(failure) = rolled_back {
                        return every(jobs, &failure);
                    }
                    applied.push(Err(match failure {
                        PgFailure::Retry => Outcome::Retry,
                        PgFailure::Store(error) => Outcome::Final(Err(error)),
                    }));
                }
            }
        }
        let committed = self.commit_group(pg).await;
        applied
            .into_iter()
            .zip(jobs)
            .map(|(applied, job)| match (applied, &committed) {
                (Err(outcome), _) => outcome,
                (Ok(done), Ok(())) => Outcome::Final(Ok(done)),
                (Ok(_), Err(PgFailure::Retry)) => Outcome::Retry,
                (Ok(_), Err(PgFailure::Store(StoreError::OutcomeUnknown { .. }))) => {
                    Outcome::Final(Err(StoreError::OutcomeUnknown {
                        operation: job.operation.name(),
                    }))
                }
                (Ok(_), Err(PgFailure::Store(error))) => Outcome::Final(Err(duplicate(error))),
            })
            .collect()
    }

    /// Commit a group's transaction; a connection lost during `COMMIT` is settled as for a
    /// lone operation ([`PostgresStore::commit_settled`]).
    async fn commit_group(&self, pg: PgTxn) -> Result<(), PgFailure> {
        self.commit_settled(pg, "group").await
    }
}
