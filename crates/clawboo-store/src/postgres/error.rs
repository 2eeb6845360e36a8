//! PostgreSQL's and the pool's errors as the store's backend-neutral [`BackendError`].

use deadpool_postgres::PoolError;
use tokio_postgres::error::SqlState;

use crate::error::{BackendError, BackendErrorKind, StoreError};

/// What kind of failure a driver error is: a lost or refused connection, or a server
/// shutting down, is `Unavailable` (retry once it is back); a serialization failure or
/// deadlock is `Busy`.
fn kind_of(error: &tokio_postgres::Error) -> BackendErrorKind {
    if error.is_closed() {
        return BackendErrorKind::Unavailable;
    }
    let Some(code) = error.code() else {
        // No SQLSTATE: the error came from the socket, TLS or the protocol, not the server.
        return BackendErrorKind::Unavailable;
    };
    match code {
        c if *c == SqlState::T_R_SERIALIZATION_FAILURE
            || *c == SqlState::T_R_DEADLOCK_DETECTED
            || *c == SqlState::LOCK_NOT_AVAILABLE =>
        {
            BackendErrorKind::Busy
        }
        c if c.code().starts_with("08")
            || c.code().starts_with("57P")
            || c.code().starts_with("53")
            || *c == SqlState::CANNOT_CONNECT_NOW =>
        {
            BackendErrorKind::Unavailable
        }
        _ => BackendErrorKind::Other,
    }
}

/// The server's own message with its detail, never the connection URL.
fn message_of(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{}: {detail}", db.message()),
            None => db.message().to_owned(),
        },
        None => error.to_string(),
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> StoreError {
        StoreError::Backend(BackendError {
            kind: kind_of(&error),
            message: format!("PostgreSQL: {}", message_of(&error)),
        })
    }
}

impl From<PoolError> for StoreError {
    fn from(error: PoolError) -> StoreError {
        match error {
            PoolError::Backend(e) => StoreError::from(e),
            other => StoreError::Backend(BackendError {
                kind: BackendErrorKind::Unavailable,
                message: format!(
                    "PostgreSQL cannot be reached ({other}); retry once the server is back"
                ),
            }),
        }
    }
}

/// A failure of the backend's own machinery (its runtime), reported as unavailable.
pub(super) fn unavailable(message: impl Into<String>) -> StoreError {
    StoreError::Backend(BackendError {
        kind: BackendErrorKind::Unavailable,
        message: message.into(),
    })
}
