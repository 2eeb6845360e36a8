//! PostgreSQL's errors as the store's backend-neutral [`BackendError`].

use std::error::Error as _;

use tokio_postgres::error::SqlState;

use crate::error::{BackendError, BackendErrorKind, StoreError};

/// What kind of failure a driver error is. A lost, refused or timed-out connection, a TLS
/// failure or a server shutting down or refusing connections is `Unavailable` (retry once
/// it is back); a serialization failure, deadlock or lock not available is `Busy`. A value
/// that does not convert, a wrong parameter count or a statement the server refuses is a
/// mistake in the SQL, `Other`: reporting it as an outage would send callers to wait for a
/// server that is fine.
fn kind_of(error: &tokio_postgres::Error) -> BackendErrorKind {
    if let Some(code) = error.code() {
        return match code.code() {
            _ if *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::LOCK_NOT_AVAILABLE =>
            {
                BackendErrorKind::Busy
            }
            // 08: connection exceptions; 57P01-04: admin or crash shutdown, cannot connect
            // now, database dropped; 53: out of connections, memory or disk.
            c if c.starts_with("08") || c.starts_with("57P") || c.starts_with("53") => {
                BackendErrorKind::Unavailable
            }
            _ => BackendErrorKind::Other,
        };
    }
    let transport = error.is_closed()
        || io_error_in(error)
        || is_tls(error)
        // tokio-postgres's connect timeout carries no I/O error to find.
        || error.to_string() == "timeout waiting for server";
    if transport {
        BackendErrorKind::Unavailable
    } else {
        BackendErrorKind::Other
    }
}

/// Whether the TLS handshake failed (the driver's error kinds are private; its text is
/// the one way to tell).
fn is_tls(error: &tokio_postgres::Error) -> bool {
    error.code().is_none() && error.to_string() == "error performing TLS handshake"
}

/// Whether an I/O error (a socket's) is among `error`'s causes.
fn io_error_in(error: &tokio_postgres::Error) -> bool {
    let mut cause = error.source();
    while let Some(e) = cause {
        if e.is::<std::io::Error>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// The server's own message with its detail and hint, or the driver's with its causes;
/// never the connection URL (neither carries it).
fn message_of(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        let mut message = db.message().to_owned();
        for extra in [db.detail(), db.hint()].into_iter().flatten() {
            message.push_str(": ");
            message.push_str(extra);
        }
        return message;
    }
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        message.push_str(": ");
        message.push_str(&e.to_string());
        cause = e.source();
    }
    message
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> StoreError {
        crate::counters::postgres_error();
        let kind = kind_of(&error);
        let mut message = format!("PostgreSQL: {}", message_of(&error));
        if is_tls(&error) {
            message.push_str(
                "; check the server's certificate against the URL's sslmode \
                 (verify-full wants one signed for that host name by a public authority, \
                 or by the CA whose PEM file the URL's sslrootcert names)",
            );
        } else if kind == BackendErrorKind::Unavailable {
            message.push_str("; retry once the database server is reachable again");
        } else if kind == BackendErrorKind::Busy {
            message.push_str(
                "; another transaction held what this one needed: nothing was written, \
                 retry the call",
            );
        }
        StoreError::Backend(BackendError { kind, message })
    }
}

pub(super) fn unavailable(message: impl Into<String>) -> StoreError {
    crate::counters::postgres_error();
    StoreError::Backend(BackendError {
        kind: BackendErrorKind::Unavailable,
        message: message.into(),
    })
}
