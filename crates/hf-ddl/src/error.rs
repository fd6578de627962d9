//! The one error type of the crate: why introspection or apply could not run.
//!
//! Planning never fails (its problems are diagnostics in the plan); these errors come from
//! talking to PostgreSQL or from refusing to apply a plan.

#[cfg(feature = "pg")]
use hf_sql::sqlstate::{server_failure_of as server_failure, ServerFailure};

/// Why introspection or apply did not complete. After any apply error the caller must roll its
/// transaction back; nothing of the plan is then left in the database.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A catalog query of introspection failed.
    #[cfg(feature = "pg")]
    #[error("reading the catalog ({query}) failed: {source}")]
    Catalog {
        /// Which query.
        query: &'static str,
        /// The driver error.
        source: tokio_postgres::Error,
    },
    /// A statement apply runs around the plan (timeouts, the marker table) failed.
    #[cfg(feature = "pg")]
    #[error("preparing or finishing the apply ({step}) failed: {source}")]
    Setup {
        /// Which step.
        step: &'static str,
        /// The driver error.
        source: tokio_postgres::Error,
    },
    /// A plan statement failed; `sql` is the statement, so the error names it.
    #[cfg(feature = "pg")]
    #[error("`{sql}` ({target}) failed: {source}")]
    Statement {
        /// The change's target.
        target: String,
        /// The statement.
        sql: String,
        /// The driver error (its SQLSTATE tells a lock timeout from other failures).
        source: tokio_postgres::Error,
    },
    /// A pre-check found that a statement would fail on the existing rows, so it was not run.
    #[error("`{sql}` ({target}) would fail: {reason}")]
    Precheck {
        /// The change's target.
        target: String,
        /// The statement that was not run.
        sql: String,
        /// Why it would fail.
        reason: String,
    },
    /// The plan loses data and the caller did not allow that.
    #[error("the plan has destructive changes: {}", targets.join(", "))]
    Destructive {
        /// The targets of the destructive changes.
        targets: Vec<String>,
    },
    /// The plan carries error diagnostics, so it is incomplete. The diagnostics travel with the
    /// error, so whoever reports it can name each item at fault.
    #[error("the plan cannot be applied: {}", describe(errors))]
    InvalidPlan {
        /// The error diagnostics of the plan (never empty), each naming its target.
        errors: Vec<crate::Diagnostic>,
    },
}

/// The first error of a plan with its target, and how many more there are.
fn describe(errors: &[crate::Diagnostic]) -> String {
    match errors {
        [] => "it has error diagnostics".to_owned(),
        [only] => format!("`{}`: {}", only.target, only.message),
        [first, rest @ ..] => format!(
            "`{}`: {} (and {} more error diagnostics)",
            first.target,
            first.message,
            rest.len()
        ),
    }
}

/// What kind of failure an [`Error`] is, so callers map it without matching on text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A statement or pre-check failed (`APPLY_FAILED`).
    ApplyFailed,
    /// A statement waited longer than `lock_timeout` for a lock (`DDL_LOCK_TIMEOUT`); retrying
    /// later may succeed.
    LockTimeout,
    /// Destructive changes were not allowed (`DESTRUCTIVE_CHANGE`).
    Destructive,
    /// The plan had errors (a caller bug or bad metadata).
    InvalidPlan,
    /// Talking to the database failed outside the plan's statements.
    Database,
    /// The connection broke, the server is shutting down, or it ran short of memory or
    /// connections: nothing of the plan was committed, and retrying once the database is back
    /// may succeed.
    Unavailable,
    /// The server cannot write its files (its disk is full or failing): nothing of the plan was
    /// committed, and retrying may succeed once an operator has made room.
    Storage,
}

impl Error {
    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            #[cfg(feature = "pg")]
            Error::Catalog { source, .. }
            | Error::Setup { source, .. }
            | Error::Statement { source, .. }
                if server_failure(source).is_some() =>
            {
                if server_failure(source) == Some(ServerFailure::Storage) {
                    ErrorKind::Storage
                } else {
                    ErrorKind::Unavailable
                }
            }
            #[cfg(feature = "pg")]
            Error::Catalog { .. } | Error::Setup { .. } => ErrorKind::Database,
            #[cfg(feature = "pg")]
            Error::Statement { source, .. } => {
                if source.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) {
                    ErrorKind::LockTimeout
                } else {
                    ErrorKind::ApplyFailed
                }
            }
            Error::Precheck { .. } => ErrorKind::ApplyFailed,
            Error::Destructive { .. } => ErrorKind::Destructive,
            Error::InvalidPlan { .. } => ErrorKind::InvalidPlan,
        }
    }
}
