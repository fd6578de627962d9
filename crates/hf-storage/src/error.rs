//! The storage error type and the one place where SQLSTATE codes become error kinds.

use hf_sql::sqlstate::{server_failure_of as server_failure, ServerFailure};
use tokio_postgres::error::SqlState;

/// Everything that can go wrong talking to PostgreSQL or running the embedded cluster.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A statement failed or the connection broke.
    #[error("database error: {}", Causes(.0))]
    Db(tokio_postgres::Error),
    /// No connection could be had from the pool within the wait timeout, or a new one could not
    /// be opened.
    #[error("no database connection available: {}", Causes(.0))]
    Pool(deadpool_postgres::PoolError),
    /// The pool could not be built from the configuration.
    #[error("invalid database configuration: {0}")]
    Config(String),
    /// A step that cannot fail on valid input did: a bug, or a state the service did not make
    /// (a record plan that disagrees with its table, a crashed blocking task).
    #[error("internal error: {0}")]
    Internal(String),
    /// The caller's role does not exist (any more): its principal was deleted while the
    /// request was under way.
    #[error("the role `{role}` does not exist")]
    RoleMissing {
        /// The role the request was to run as.
        role: String,
    },
    /// The connection broke while a write's `COMMIT` was in flight (or while the lone
    /// statement of a write, which commits by itself, ran): the transaction may have
    /// committed or not, and nothing on this side can tell which. A client must read before
    /// it repeats the write.
    #[error("the connection was lost while the write was committing: {}", Causes(.0))]
    CommitOutcomeUnknown(tokio_postgres::Error),
    /// A live write waited [`crate::PoolSettings::live_write_wait`] for its turn (other live
    /// writes of this process, then the database lock that serialises them across instances)
    /// and gave up; nothing was written.
    #[error("another live write held the live branch for {} s", .waited.as_secs())]
    LiveWriteBusy {
        /// How long it waited.
        waited: std::time::Duration,
    },
    /// The database said nothing on a request's connection for its statement timeout and
    /// [`crate::run_as::ANSWER_GRACE`]: the server or the network to it has stopped (a server
    /// that runs enforces the statement timeout itself and answers in time). The connection
    /// was given up. For a write, whether it committed is unknown: its `COMMIT` went out with
    /// its statements.
    #[error("the database said nothing for {} ms", .waited.as_millis())]
    NoAnswer {
        /// How long the connection was silent.
        waited: std::time::Duration,
        /// Whether the request was a write.
        write: bool,
    },
    /// The database was found not answering (an attempt to connect failed for want of it, or
    /// a connection was given up for its silence), and another request is trying it now (see
    /// `connect_gate`). Refused at once rather than waiting as that one does.
    #[error("the database has not answered for {} ms; another request is trying it", .failing_for.as_millis())]
    Unreachable {
        /// Since the database was found not answering.
        failing_for: std::time::Duration,
    },
    /// A connection held outside the pool (the notification listener) closed.
    #[error("connection closed: {0}")]
    ConnectionLost(String),
    /// The embedded PostgreSQL cluster could not be created, started or stopped.
    #[error("embedded PostgreSQL: {0}")]
    Embedded(String),
    /// The metadata store refused or failed (a missing branch, a refused edit, a moved ref).
    #[error(transparent)]
    Metadata(#[from] hf_metastore::Error),
    /// Planning or applying DDL failed; the error names the statement.
    #[error(transparent)]
    Ddl(#[from] hf_ddl::Error),
    /// `/apply` of a branch that does not descend from the live head.
    #[error("branch `{branch}` does not descend from the live branch's head")]
    BranchDiverged {
        /// The branch that was to be applied.
        branch: String,
    },
    /// An import would move a branch that is not an ancestor of the imported head (the two
    /// histories diverged); nothing was imported.
    #[error(
        "branch `{branch}` has diverged: the database has {database}, the imported repository \
         has {import}, which does not descend from it; nothing was imported"
    )]
    ImportDiverged {
        /// The branch.
        branch: String,
        /// Its head in the database.
        database: String,
        /// Its head in the imported repository.
        import: String,
    },
    /// Reading or writing a file of the embedded cluster failed.
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// The underlying failure.
        source: std::io::Error,
    },
}

impl From<tokio_postgres::Error> for Error {
    fn from(error: tokio_postgres::Error) -> Self {
        Error::Db(error)
    }
}

impl From<deadpool_postgres::PoolError> for Error {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        Error::Pool(error)
    }
}

/// A driver error followed by its causes, each said once, on one line. tokio-postgres's own text
/// is only "db error" or "error connecting to server": the server's message ("could not extend
/// file …: No space left on device") and the I/O failure ("Connection refused") are its sources,
/// which a log line needs. The [`Error`] variants that hold a driver error therefore show its causes
/// themselves and do not name it as their source, so a report that walks the chain does not
/// repeat them.
struct Causes<'a, E>(&'a E);

impl<E: std::error::Error> std::fmt::Display for Causes<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut said = self.0.to_string();
        let mut cause = self.0.source();
        while let Some(error) = cause {
            let text = error.to_string();
            if !said.contains(&text) {
                said.push_str(": ");
                said.push_str(&text);
            }
            cause = error.source();
        }
        // The server's message carries its hint on a line of its own; a log line stays one.
        f.write_str(&said.replace('\n', " "))
    }
}

/// What kind of failure an [`Error`] is, so callers can decide without matching on messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The database cannot be reached, or the connection broke: retry later.
    Unavailable,
    /// The database is up but every pooled connection stayed busy for the whole wait timeout:
    /// the service is overloaded, not broken; retry later.
    Busy,
    /// The connection broke while a write was committing: whether it took effect is unknown.
    CommitOutcomeUnknown,
    /// The statement ran longer than its timeout or waited too long for a lock.
    Timeout,
    /// The database cannot write or read its files (its disk is full or failing): the request
    /// did nothing, and retrying may succeed once an operator has made room.
    Storage,
    /// The caller's role is gone: the request speaks for a principal that no longer exists.
    RoleMissing,
    /// The caller's database role lacks a privilege (SQLSTATE 42501).
    Forbidden,
    /// A unique constraint was violated (SQLSTATE 23505).
    UniqueViolation,
    /// A foreign key points at a missing row (SQLSTATE 23503).
    ForeignKeyViolation,
    /// A NOT NULL constraint was violated (SQLSTATE 23502).
    NotNullViolation,
    /// A check constraint or a value conversion failed, or a value or statement is beyond what
    /// the database holds or allows (SQLSTATE classes 22 and 54, 23514, 53400).
    InvalidValue,
    /// Anything else: a bug or an unexpected server state.
    Internal,
}

impl Error {
    /// Classifies the error: what blames the statement is told here, what blames the server
    /// (a lost connection, a full disk) by [`hf_sql::sqlstate`], which the planner shares.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Db(error) => db_error_kind(error),
            Error::Pool(deadpool_postgres::PoolError::Backend(error)) => db_error_kind(error),
            Error::Pool(deadpool_postgres::PoolError::Timeout(
                deadpool_postgres::TimeoutType::Wait,
            )) => ErrorKind::Busy,
            Error::Pool(_) | Error::ConnectionLost(_) | Error::Unreachable { .. } => {
                ErrorKind::Unavailable
            }
            Error::LiveWriteBusy { .. } => ErrorKind::Busy,
            Error::CommitOutcomeUnknown(_) | Error::NoAnswer { write: true, .. } => {
                ErrorKind::CommitOutcomeUnknown
            }
            Error::NoAnswer { write: false, .. } => ErrorKind::Unavailable,
            Error::RoleMissing { .. } => ErrorKind::RoleMissing,
            Error::Config(_) | Error::Internal(_) | Error::Embedded(_) | Error::Io { .. } => {
                ErrorKind::Internal
            }
            // Callers look inside these two; as a kind they are not database failures.
            Error::Metadata(_)
            | Error::Ddl(_)
            | Error::BranchDiverged { .. }
            | Error::ImportDiverged { .. } => ErrorKind::Internal,
        }
    }

    /// The SQLSTATE of a database error, if the server sent one.
    pub fn sql_state(&self) -> Option<&SqlState> {
        match self {
            Error::Db(error)
            | Error::CommitOutcomeUnknown(error)
            | Error::Pool(deadpool_postgres::PoolError::Backend(error)) => error.code(),
            _ => None,
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// Whether a statement failed because its connection broke (no answer, or the server ending
/// the session): after such a failure on `COMMIT` the outcome of the transaction is unknown.
/// A failure with any other SQLSTATE (a deferred constraint, a serialization failure) is a
/// definite rollback.
pub(crate) fn is_connection_loss(error: &tokio_postgres::Error) -> bool {
    server_failure(error) == Some(ServerFailure::ConnectionLost)
}

/// The error of a failed `COMMIT`: a connection lost during it is
/// [`Error::CommitOutcomeUnknown`], any other failure (a definite rollback) a plain
/// [`Error::Db`]. Every commit of a write maps its failure through here:
/// `transaction.commit().await.map_err(commit_failed)?`.
pub(crate) fn commit_failed(error: tokio_postgres::Error) -> Error {
    if is_connection_loss(&error) {
        Error::CommitOutcomeUnknown(error)
    } else {
        Error::Db(error)
    }
}

fn db_error_kind(error: &tokio_postgres::Error) -> ErrorKind {
    match server_failure(error) {
        Some(ServerFailure::ConnectionLost | ServerFailure::Resources) => {
            return ErrorKind::Unavailable
        }
        Some(ServerFailure::Storage) => return ErrorKind::Storage,
        None => {}
    }
    let Some(state) = error.code() else {
        // The driver refused the statement's parameters or rows (a lost connection is told
        // above): a bug, not the database's state.
        return ErrorKind::Internal;
    };
    match *state {
        SqlState::INSUFFICIENT_PRIVILEGE => ErrorKind::Forbidden,
        SqlState::UNIQUE_VIOLATION => ErrorKind::UniqueViolation,
        SqlState::FOREIGN_KEY_VIOLATION => ErrorKind::ForeignKeyViolation,
        SqlState::NOT_NULL_VIOLATION => ErrorKind::NotNullViolation,
        SqlState::CHECK_VIOLATION => ErrorKind::InvalidValue,
        SqlState::QUERY_CANCELED | SqlState::LOCK_NOT_AVAILABLE => ErrorKind::Timeout,
        // A value PostgreSQL refuses (class 22), or a value or statement beyond what it can
        // hold or an operator allows (class 54: an index entry too long; 53400:
        // temp_file_limit).
        SqlState::CONFIGURATION_LIMIT_EXCEEDED => ErrorKind::InvalidValue,
        _ if state.code().starts_with("22") || state.code().starts_with("54") => {
            ErrorKind::InvalidValue
        }
        _ => ErrorKind::Internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the server said, and why a connection failed, reach the log line: the driver's
    /// own text says only "db error" or "error connecting to server".
    #[tokio::test]
    async fn a_driver_error_says_what_the_server_or_the_network_said() {
        let db = hf_testkit::TestDb::new().await;
        let client = db.client().await;
        let failed = client.batch_execute("SELECT 1/0").await.unwrap_err();
        let text = Error::from(failed).to_string();
        assert!(text.contains("division by zero"), "{text}");

        let refused = tokio_postgres::connect(
            "postgres://postgres@127.0.0.1:1/postgres",
            tokio_postgres::NoTls,
        )
        .await
        .err()
        .unwrap();
        let text = Error::from(refused).to_string();
        assert!(text.contains("refused"), "{text}");
        assert_eq!(
            text.matches("error connecting to server").count(),
            1,
            "{text}"
        );
    }

    /// Each SQLSTATE the server may answer a request with has its kind: a full disk is
    /// storage, memory run short is unavailability, a value or statement beyond a limit is the
    /// request's own invalid value (none of them an internal failure).
    #[tokio::test]
    async fn server_errors_get_their_kinds() {
        let db = hf_testkit::TestDb::new().await;
        let client = db.client().await;
        let cases = [
            ("53100", ErrorKind::Storage),
            ("58030", ErrorKind::Storage),
            ("53200", ErrorKind::Unavailable),
            ("53300", ErrorKind::Unavailable),
            ("53400", ErrorKind::InvalidValue),
            ("54000", ErrorKind::InvalidValue),
            ("22003", ErrorKind::InvalidValue),
            ("57014", ErrorKind::Timeout),
            ("XX000", ErrorKind::Internal),
        ];
        for (sqlstate, kind) in cases {
            // The code is a constant of this test, not input; RAISE takes it only as a literal.
            let raised = client
                .batch_execute(&format!(
                    "DO $$ BEGIN RAISE EXCEPTION 'raised' USING ERRCODE = '{sqlstate}'; END $$"
                ))
                .await
                .unwrap_err();
            assert_eq!(Error::from(raised).kind(), kind, "{sqlstate}");
        }
    }

    /// When the driver itself refuses a statement's parameters or rows (no SQLSTATE), the
    /// statement is at fault and the connection is fine: an internal failure, never "the
    /// database is unavailable", and on a `COMMIT` a definite failure, not "outcome unknown".
    /// A connection that really broke is still a lost connection.
    #[tokio::test]
    async fn the_driver_refusing_a_statement_is_not_a_lost_connection() {
        let db = hf_testkit::TestDb::new().await;
        let client = db.client().await;
        let refusals = [
            // A parameter of the wrong type.
            client
                .query("SELECT $1::int4", &[&"text"])
                .await
                .unwrap_err(),
            // Too few parameters.
            client.query("SELECT $1::int4", &[]).await.unwrap_err(),
            // No row where one was expected.
            client
                .query_one("SELECT 1 WHERE false", &[])
                .await
                .unwrap_err(),
            // A column read as the wrong type, and a column that is not there.
            client
                .query_one("SELECT 1::int4 AS n", &[])
                .await
                .unwrap()
                .try_get::<_, String>(0)
                .unwrap_err(),
            client
                .query_one("SELECT 1::int4 AS n", &[])
                .await
                .unwrap()
                .try_get::<_, i32>("m")
                .unwrap_err(),
        ];
        for refused in refusals {
            let text = refused.to_string();
            assert!(!is_connection_loss(&refused), "{text}");
            assert!(matches!(commit_failed(refused), Error::Db(_)), "{text}");
        }
        let refused = client
            .query_one("SELECT 1 WHERE false", &[])
            .await
            .unwrap_err();
        assert_eq!(Error::from(refused).kind(), ErrorKind::Internal);

        // The connection is as good as before.
        assert_eq!(
            client
                .query_one("SELECT 1::int4", &[])
                .await
                .unwrap()
                .get::<_, i32>(0),
            1
        );

        let (lost, connection) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        let connection = tokio::spawn(connection);
        let pid: i32 = lost
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        client
            .execute("SELECT pg_terminate_backend($1)", &[&pid])
            .await
            .unwrap();
        let _ = connection.await;
        let failed = lost.query("SELECT 1", &[]).await.unwrap_err();
        assert!(is_connection_loss(&failed), "{failed}");
        assert_eq!(Error::from(failed).kind(), ErrorKind::Unavailable);
    }
}
