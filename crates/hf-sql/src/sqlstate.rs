//! What a failed statement's SQLSTATE says about the database itself, rather than about the
//! statement: the one table of it, shared by the planner's apply (`hf-ddl`) and the data path
//! (`hf-storage`), so a full disk or a lost connection means the same under both.
//!
//! Most SQLSTATEs blame the statement (a constraint, a bad value, a missing privilege) and are
//! the caller's to classify. The ones here blame the server: the request did nothing and may
//! succeed unchanged once the database is well again, so they are answered "try again later"
//! and never with the server's own text, which names files and internals.
//!
//! Codes are compared as the five-character text PostgreSQL sends, so the table needs no
//! driver; [`server_failure_of`] (feature `pg`) reads a tokio-postgres error through it.

/// How a database server failed a statement it did not reject on its merits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerFailure {
    /// The connection broke, or the server is shutting down or starting up (no SQLSTATE at all,
    /// class 08, `57P01`–`57P03`): a statement under way may or may not have taken effect if it
    /// was a `COMMIT`.
    ConnectionLost,
    /// The server cannot write or read its files: its disk is full (`53100`) or failing
    /// (`58030`). It stays so until an operator makes room or mends the disk.
    Storage,
    /// The server ran short of memory or connections (`53000`, `53200`, `53300`): usually
    /// passing, so retrying shortly may succeed.
    Resources,
}

/// What `sqlstate` (the five-character code of the server's error; `None` when the failure
/// carried none, as a broken connection does) says about the server, or `None` when it blames
/// the statement.
pub fn server_failure(sqlstate: Option<&str>) -> Option<ServerFailure> {
    let Some(code) = sqlstate else {
        return Some(ServerFailure::ConnectionLost);
    };
    match code {
        // disk_full, io_error
        "53100" | "58030" => Some(ServerFailure::Storage),
        // insufficient_resources, out_of_memory, too_many_connections
        "53000" | "53200" | "53300" => Some(ServerFailure::Resources),
        // admin_shutdown, crash_shutdown, cannot_connect_now
        "57P01" | "57P02" | "57P03" => Some(ServerFailure::ConnectionLost),
        // connection_exception and its subclasses
        _ if code.starts_with("08") => Some(ServerFailure::ConnectionLost),
        _ => None,
    }
}

/// [`server_failure`] of a tokio-postgres error.
///
/// A failure without a SQLSTATE is a lost connection, except when the driver itself refused
/// the statement's own parameters or rows: a value it could not encode or decode, a column it
/// does not have, a wrong count of parameters, columns or rows. Those blame the statement (a
/// bug of its caller), and the connection is as good as before; calling them a lost connection
/// would answer "try again later" to something that will fail again, and a `COMMIT` "outcome
/// unknown" where nothing was sent.
#[cfg(feature = "pg")]
pub fn server_failure_of(error: &tokio_postgres::Error) -> Option<ServerFailure> {
    let code = error.code().map(tokio_postgres::error::SqlState::code);
    if code.is_none() && driver_refused_the_statement(error) {
        return None;
    }
    server_failure(code)
}

/// Whether a failure without a SQLSTATE is the driver refusing the statement's parameters or
/// rows rather than a failure of the connection. The driver keeps its error kinds private and
/// names each in its text, which is what tells them apart here; the data path's tests cause
/// each of them against a real database, so a change of that text is noticed.
#[cfg(feature = "pg")]
fn driver_refused_the_statement(error: &tokio_postgres::Error) -> bool {
    const STATEMENT_ERRORS: [&str; 4] = [
        "error serializing parameter",
        "error deserializing column",
        "invalid column",
        "query returned an unexpected number of",
    ];
    let text = error.to_string();
    STATEMENT_ERRORS.iter().any(|start| text.starts_with(start))
        || (text.starts_with("expected ") && text.contains(" parameters but got "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_of_the_server_are_told_from_failures_of_the_statement() {
        let cases = [
            (None, Some(ServerFailure::ConnectionLost)),
            (Some("08006"), Some(ServerFailure::ConnectionLost)),
            (Some("08000"), Some(ServerFailure::ConnectionLost)),
            (Some("57P01"), Some(ServerFailure::ConnectionLost)),
            (Some("57P03"), Some(ServerFailure::ConnectionLost)),
            (Some("53100"), Some(ServerFailure::Storage)),
            (Some("58030"), Some(ServerFailure::Storage)),
            (Some("53200"), Some(ServerFailure::Resources)),
            (Some("53300"), Some(ServerFailure::Resources)),
            (Some("53000"), Some(ServerFailure::Resources)),
            // A query over a configured limit (temp_file_limit) is the query's own doing.
            (Some("53400"), None),
            (Some("57014"), None),
            (Some("23505"), None),
            (Some("42501"), None),
            (Some("55P03"), None),
        ];
        for (sqlstate, expected) in cases {
            assert_eq!(server_failure(sqlstate), expected, "{sqlstate:?}");
        }
    }
}
