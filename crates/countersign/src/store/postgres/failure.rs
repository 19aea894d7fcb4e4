//! PostgreSQL failures mapped to the store's neutral kinds: a conflict to retry, a lost
//! connection, an unusable schema.

use super::*;

/// Why one run of a transaction did not produce a result.
#[derive(Debug)]
pub(crate) enum PgFailure {
    /// Another transaction got there first (serialization failure, deadlock, lost
    /// compare-and-set): roll back and run the operation again.
    Retry,
    /// A final error.
    Store(StoreError),
}

impl From<StoreError> for PgFailure {
    fn from(error: StoreError) -> Self {
        PgFailure::Store(error)
    }
}

/// The SQLSTATE of a database error, if it is one.
pub(super) fn sqlstate(error: &sqlx::Error) -> Option<String> {
    match error {
        sqlx::Error::Database(database) => database.code().map(|code| code.into_owned()),
        _ => None,
    }
}

/// Serialization failure or deadlock: retry.
pub(super) fn is_conflict(error: &sqlx::Error) -> bool {
    matches!(sqlstate(error).as_deref(), Some("40001" | "40P01"))
}

pub(super) fn backend(error: &sqlx::Error) -> StoreError {
    match error {
        sqlx::Error::PoolTimedOut => StoreError::Busy {
            waited: Duration::ZERO,
        },
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => StoreError::Corrupt {
            detail: error.to_string(),
        },
        _ => StoreError::Backend {
            message: error.to_string(),
        },
    }
}

pub(super) fn classify(error: sqlx::Error) -> PgFailure {
    if is_conflict(&error) {
        PgFailure::Retry
    } else {
        PgFailure::Store(backend(&error))
    }
}

pub(super) fn migration_failed(error: sqlx::Error) -> StoreError {
    StoreError::Backend {
        message: format!("migrating the store failed: {error}"),
    }
}
