//! Behind a pooler in transaction mode (PgBouncer `pool_mode=transaction`, case B57): a
//! server connection is the store's only from `BEGIN` to `COMMIT`, so nothing may outlive a
//! transaction on it. See [`Pooler::Transaction`] and `docs/postgres-pooling.md`.

use super::*;

/// What sits between the store and the PostgreSQL server (URL option `pooler=`).
///
/// Rationale and setup: `docs/postgres-pooling.md` (case B57).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pooler {
    /// A direct connection, or a pooler in session mode (`pooler=none`): the store may keep
    /// state on a connection between transactions (its named prepared statements, the
    /// `search_path` startup option).
    #[default]
    None,
    /// A pooler in transaction mode, such as PgBouncer with `pool_mode=transaction`
    /// (`pooler=transaction`): a connection is the store's only from `BEGIN` to `COMMIT`. The
    /// store then sends no named prepared statement (every statement is unnamed, parsed again
    /// each time), no session setting (the schema is set with `SET LOCAL` inside each
    /// transaction, and no startup option but `application_name` is sent), takes only
    /// transaction-scoped locks, and runs even its single reads inside `BEGIN … COMMIT`, so
    /// that a statement's parse and execute reach the same server connection.
    Transaction,
}

impl PostgresStore {
    /// `BEGIN` at the configured isolation, then, behind a transaction pooler, the schema for
    /// this transaction only (`SET LOCAL search_path`).
    pub(super) async fn begin_transaction(
        &self,
    ) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        let begin = || async {
            match self.options.isolation {
                Some(isolation) => self.pool.begin_with(isolation.begin_statement()).await,
                None => self.pool.begin().await,
            }
        };
        let mut transaction = match begin().await {
            // The connection died while idle (pooled connections are pinged only after
            // `IDLE_PING` idle): nothing was begun, and sqlx drops that connection. Once more,
            // on another.
            Err(sqlx::Error::Io(_)) => begin().await?,
            begun => begun?,
        };
        if let (Pooler::Transaction, Some(schema)) = (self.options.pooler, &self.options.schema) {
            // INVARIANT (schema-name): checked by `check_schema_name`, so quoting is safe.
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "SET LOCAL search_path TO \"{schema}\""
            )))
            .execute(&mut *transaction)
            .await?;
        }
        Ok(transaction)
    }

    /// May statements be named and cached on the connection? Not behind a transaction pooler,
    /// where the next transaction may run on another server connection (or this one may serve
    /// another client).
    pub(super) fn persistent(&self) -> bool {
        self.options.pooler == Pooler::None
    }

    /// Run one statement on its own: directly on the pool, or behind a transaction pooler
    /// inside `BEGIN … COMMIT` (see [`Pooler::Transaction`]).
    pub(super) async fn execute_one(
        &self,
        query: sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<sqlx::postgres::PgQueryResult, sqlx::Error> {
        match self.options.pooler {
            Pooler::None => query.execute(&self.pool).await,
            Pooler::Transaction => {
                let mut transaction = self.begin_transaction().await?;
                let done = query.persistent(false).execute(&mut *transaction).await?;
                transaction.commit().await?;
                Ok(done)
            }
        }
    }

    /// Read rows with one statement, as [`PostgresStore::execute_one`] runs it.
    pub(super) async fn fetch_rows(
        &self,
        query: sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<Vec<PgRow>, sqlx::Error> {
        match self.options.pooler {
            Pooler::None => query.fetch_all(&self.pool).await,
            Pooler::Transaction => {
                let mut transaction = self.begin_transaction().await?;
                let rows = query.persistent(false).fetch_all(&mut *transaction).await?;
                transaction.commit().await?;
                Ok(rows)
            }
        }
    }
}
