//! SQLite's errors as the store's backend-neutral [`BackendError`].

use rusqlite::ErrorCode;

use crate::error::{BackendError, BackendErrorKind, StoreError};

/// What kind of failure a SQLite error is.
fn kind_of(error: &rusqlite::Error) -> BackendErrorKind {
    let Some(code) = error.sqlite_error_code() else {
        return BackendErrorKind::Other;
    };
    match code {
        ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => BackendErrorKind::Busy,
        ErrorCode::CannotOpen
        | ErrorCode::SystemIoFailure
        | ErrorCode::DiskFull
        | ErrorCode::ReadOnly
        | ErrorCode::PermissionDenied
        | ErrorCode::FileLockingProtocolFailed
        | ErrorCode::NoLargeFileSupport
        | ErrorCode::OutOfMemory => BackendErrorKind::Unavailable,
        ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => BackendErrorKind::Corrupt,
        _ => BackendErrorKind::Other,
    }
}

/// Domain code runs SQL with `?`; this turns what SQLite reported into the store's
/// backend-neutral error, so no caller ever sees a rusqlite type. Hidden from the docs: it
/// is how the store is built, not part of what it offers.
#[doc(hidden)]
impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> StoreError {
        crate::counters::sqlite_error();
        StoreError::Backend(BackendError {
            kind: kind_of(&error),
            message: error.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    #[test]
    fn sqlite_failures_map_to_kinds_a_caller_can_act_on() {
        let kind = |e| match StoreError::from(e) {
            StoreError::Backend(b) => b.kind,
            other => panic!("not a backend error: {other}"),
        };
        assert_eq!(
            kind(failure(rusqlite::ffi::SQLITE_BUSY)),
            BackendErrorKind::Busy
        );
        assert_eq!(
            kind(failure(rusqlite::ffi::SQLITE_CANTOPEN)),
            BackendErrorKind::Unavailable
        );
        assert_eq!(
            kind(failure(rusqlite::ffi::SQLITE_FULL)),
            BackendErrorKind::Unavailable
        );
        assert_eq!(
            kind(failure(rusqlite::ffi::SQLITE_NOTADB)),
            BackendErrorKind::Corrupt
        );
        assert_eq!(
            kind(rusqlite::Error::QueryReturnedNoRows),
            BackendErrorKind::Other
        );
    }

    #[test]
    fn an_unreachable_database_reports_backend_unavailable() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        // A directory cannot be opened as a database file.
        let error = crate::Store::open(dir.path()).expect_err("a directory is no database");
        assert_eq!(error.code(), "backend_unavailable", "{error}");
    }
}
