//! SQLite failures mapped to the store's neutral kinds: a busy database is retried, anything
//! else is final.

use super::*;

pub(super) fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

pub(super) fn backend(error: rusqlite::Error) -> StoreError {
    // SQLITE_NOTADB: the file holds something else (another program's file, a truncated copy).
    // Nothing is written to it; say how to go on rather than only SQLite's words.
    if error.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) {
        return StoreError::Backend {
            message: format!(
                "the file is not a SQLite database ({error}), so it was left as it is: pass the agent's store with `--store-url sqlite:PATH`, or move this file aside to start a new store there"
            ),
        };
    }
    StoreError::Backend {
        message: error.to_string(),
    }
}

/// Either a busy database (retry) or a final error.
pub(super) enum Attempt<E> {
    Busy,
    Failed(E),
}

impl From<rusqlite::Error> for Attempt<StoreError> {
    fn from(error: rusqlite::Error) -> Self {
        if is_busy(&error) {
            Attempt::Busy
        } else {
            Attempt::Failed(backend(error))
        }
    }
}

pub(super) fn map_read_error(error: rusqlite::Error) -> StoreError {
    match error {
        rusqlite::Error::FromSqlConversionFailure(_, _, cause) => StoreError::Corrupt {
            detail: cause.to_string(),
        },
        other => backend(other),
    }
}
