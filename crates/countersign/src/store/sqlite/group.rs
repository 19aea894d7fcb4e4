//! Group commit on SQLite (issue #21, `store/group.rs`): the operations concurrent callers
//! queued, applied in one `BEGIN IMMEDIATE` transaction inline on the leading caller's thread.

use super::*;
use crate::store::group::{self, Apply, Job, Outcome};

impl SqliteStore {
    /// Apply a group of operations in one `BEGIN IMMEDIATE` transaction, inline on the calling
    /// thread. A lone operation runs bare, as before group commit; in a group each runs under
    /// its own savepoint, so one that fails is rolled back alone. A busy database rolls the
    /// whole group back: every operation is retried.
    fn apply_group(&self, jobs: &[Job]) -> Vec<Outcome> {
        let every = |outcome: &dyn Fn() -> Outcome| -> Vec<Outcome> {
            jobs.iter().map(|_| outcome()).collect()
        };
        let connection = match self.connection.lock() {
            Ok(connection) => connection,
            Err(_) => {
                return every(&|| {
                    Outcome::Final(Err(StoreError::Internal {
                        detail: "the SQLite connection is poisoned by an earlier panic".to_owned(),
                    }))
                });
            }
        };
        let transaction = match Immediate::begin(&connection) {
            Ok(transaction) => transaction,
            Err(error) if is_busy(&error) => return every(&|| Outcome::Retry),
            Err(error) => {
                let error = backend(error);
                return every(&|| Outcome::Final(Err(group::duplicate(&error))));
            }
        };
        let mut txn = SqliteTxn {
            transaction: transaction.connection,
            busy: false,
        };
        let grouped = jobs.len() > 1;
        let mut results = Vec::with_capacity(jobs.len());
        for job in jobs {
            if grouped && let Err(error) = savepoint(&connection, "SAVEPOINT grouped") {
                if is_busy(&error) {
                    return every(&|| Outcome::Retry);
                }
                let error = backend(error);
                return every(&|| Outcome::Final(Err(group::duplicate(&error))));
            }
            // One host, one clock: the caller's `now` is the store's time (issue #22), moved
            // only by a test's offset.
            let judged = self.offset.apply(job.now);
            let rebased;
            let operation = if judged == job.now {
                &job.operation
            } else {
                rebased = crate::store::clock::rebase(&job.operation, job.now, judged);
                &rebased
            };
            let now = crate::store::plan::Now {
                store: judged,
                caller: job.now,
            };
            let result = txn.run(operation, now);
            if txn.busy {
                drop(transaction); // rolls back
                return every(&|| Outcome::Retry);
            }
            if grouped {
                let closed = if result.is_ok() {
                    savepoint(&connection, "RELEASE grouped")
                } else {
                    savepoint(&connection, "ROLLBACK TO grouped")
                        .and_then(|()| savepoint(&connection, "RELEASE grouped"))
                };
                if let Err(error) = closed {
                    let error = backend(error);
                    return every(&|| Outcome::Final(Err(group::duplicate(&error))));
                }
            } else if let Err(error) = result {
                drop(transaction);
                return vec![Outcome::Final(Err(error))];
            }
            results.push(result);
        }
        match transaction.commit() {
            Ok(()) => results.into_iter().map(Outcome::Final).collect(),
            Err(error) if is_busy(&error) => every(&|| Outcome::Retry),
            Err(error) => {
                let error = backend(error);
                results
                    .into_iter()
                    .map(|result| Outcome::Final(result.and(Err(group::duplicate(&error)))))
                    .collect()
            }
        }
    }
}

impl Apply for SqliteStore {
    fn apply(&self, jobs: &[Job]) -> impl std::future::Future<Output = Vec<Outcome>> + Send {
        std::future::ready(self.apply_group(jobs))
    }
}

/// Run a savepoint statement (`SAVEPOINT`, `RELEASE`, `ROLLBACK TO`) as a cached statement.
fn savepoint(connection: &Connection, statement: &str) -> rusqlite::Result<()> {
    connection.prepare_cached(statement)?.execute([]).map(drop)
}
