//! Running data statements as the caller's database role: the one helper every data statement
//! goes through (HOQS queries, record reads and writes).
//!
//! A request's statements run in one transaction that starts by switching to the caller's role
//! with `set_config('role', $1, true)` (the bindable form of `SET LOCAL ROLE`), together with a
//! statement timeout and the UTC time zone. `BEGIN`, that setup, the statements and `COMMIT`
//! are sent in one round trip (pipelined): all of them are queued on the connection in the
//! first poll, so:
//! - the role can never leak to the next user of the connection: everything set is
//!   transaction-local, and `COMMIT` (which rolls back a failed transaction) is always queued,
//!   even when the request is dropped half-way because its client went away;
//! - a failing setup (an unknown role) aborts the transaction before any statement runs, so no
//!   statement ever runs as the service's own login role; a role that does not exist (its
//!   principal was deleted after the request authenticated) is [`Error::RoleMissing`];
//! - a failing statement aborts the transaction, so a failed request changes nothing.
//!
//! Statements are prepared once per connection (deadpool's statement cache) with every
//! parameter typed `text`: values are always sent as text and cast in the SQL (`$2::numeric`).
//! Privilege errors (SQLSTATE 42501, including row-level security refusals) classify as
//! [`crate::ErrorKind::Forbidden`] and timeouts (57014) as [`crate::ErrorKind::Timeout`].

use std::time::Duration;

use futures_util::future::join_all;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;

use crate::{Error, Pool, Result};

/// How long a read may run (5 s: a request, not a report).
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a write may run (15 s: writes check rules and references too).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(15);

/// The most statements one connection keeps prepared. HOQS lets callers send any number of
/// distinct statements, and each prepared statement holds memory in the server's backend, so
/// past this many the connection's cache is emptied and refilled by use.
pub const MAX_CACHED_STATEMENTS: usize = 256;

/// The transaction-local role switch, statement timeout and time zone of every request, and the
/// principal's id (`hf.caller_id`, empty when unknown), which writes record as `created_by` and
/// `updated_by` and rules read as `$User.id`.
const SETUP: &str =
    "SELECT set_config('role', $1, true), set_config('statement_timeout', $2, true), \
set_config('TimeZone', 'UTC', true), set_config('hf.caller_id', $3, true)";

/// Who runs the statements, and how.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The PostgreSQL role of the principal (its `pgRole`).
    pub role: &'a str,
    /// The statement timeout of the transaction.
    pub timeout: Duration,
    /// Whether the transaction is `READ ONLY` (queries and record reads).
    pub read_only: bool,
    /// The principal's id, set as `hf.caller_id` for the transaction.
    pub principal_id: Option<uuid::Uuid>,
}

impl<'a> Caller<'a> {
    /// A reader: read-only, with [`READ_TIMEOUT`].
    pub fn reader(role: &'a str) -> Caller<'a> {
        Caller {
            role,
            timeout: READ_TIMEOUT,
            read_only: true,
            principal_id: None,
        }
    }

    /// A writer, with [`WRITE_TIMEOUT`].
    pub fn writer(role: &'a str) -> Caller<'a> {
        Caller {
            role,
            timeout: WRITE_TIMEOUT,
            read_only: false,
            principal_id: None,
        }
    }

    /// The same caller, known as this principal (`hf.caller_id`).
    pub fn for_principal(self, id: uuid::Uuid) -> Caller<'a> {
        Caller {
            principal_id: Some(id),
            ..self
        }
    }
}

/// One statement of a request with its parameter values (each bound as text; `None` is NULL).
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    /// The SQL; its parameters are `$1..$n`, typed `text`.
    pub sql: &'a str,
    /// The values of `$1..$n`.
    pub params: &'a [Option<String>],
}

/// What a request's transaction did.
#[derive(Debug)]
pub enum Ran {
    /// Every statement succeeded and the transaction committed: the rows of each step.
    Rows(Vec<Vec<Row>>),
    /// A statement failed and the transaction rolled back; the first failure, in order.
    Failed {
        /// The failing step's index, or `None` for `BEGIN`, the setup or `COMMIT`.
        step: Option<usize>,
        /// PostgreSQL's error (see [`Error::kind`] once wrapped in [`Error::Db`]).
        error: tokio_postgres::Error,
    },
}

impl Ran {
    /// The rows of every step, or the failure as an [`Error`].
    pub fn into_rows(self) -> Result<Vec<Vec<Row>>> {
        match self {
            Ran::Rows(rows) => Ok(rows),
            Ran::Failed { error, .. } => Err(Error::Db(error)),
        }
    }
}

/// Runs `steps` as `caller.role` in one transaction, in one round trip once the statements are
/// prepared on the connection. `Err` means no connection could be had or a statement could not
/// be prepared (a bug in generated SQL, or the database going away); a statement that fails
/// while running is [`Ran::Failed`].
pub async fn run_as(pool: &Pool, caller: &Caller<'_>, steps: &[Step<'_>]) -> Result<Ran> {
    let client = pool.get().await?;
    let begin_sql = if caller.read_only {
        "BEGIN READ ONLY"
    } else {
        "BEGIN"
    };
    let begin = client.prepare_cached(begin_sql).await?;
    let setup = client
        .prepare_typed_cached(SETUP, &[Type::TEXT, Type::TEXT, Type::TEXT])
        .await?;
    let commit = client.prepare_cached("COMMIT").await?;
    let mut prepared = Vec::with_capacity(steps.len());
    for step in steps {
        let types = vec![Type::TEXT; step.params.len()];
        prepared.push(client.prepare_typed_cached(step.sql, &types).await?);
    }

    let role = caller.role.to_owned();
    let timeout = format!("{}ms", caller.timeout.as_millis());
    let principal = caller
        .principal_id
        .map(|id| id.hyphenated().to_string())
        .unwrap_or_default();
    let setup_params: [&(dyn ToSql + Sync); 3] = [&role, &timeout, &principal];
    let step_params: Vec<Vec<&(dyn ToSql + Sync)>> = steps
        .iter()
        .map(|step| {
            step.params
                .iter()
                .map(|value| value as &(dyn ToSql + Sync))
                .collect()
        })
        .collect();
    let mut calls = Vec::with_capacity(steps.len() + 3);
    calls.push(client.query(&begin, &[]));
    calls.push(client.query(&setup, &setup_params));
    for (statement, params) in prepared.iter().zip(&step_params) {
        calls.push(client.query(statement, params));
    }
    calls.push(client.query(&commit, &[]));
    // `join_all` polls the calls in order, so every one of them, COMMIT included, is queued on
    // the connection in its first poll.
    let results = join_all(calls).await;
    if client.statement_cache.size() > MAX_CACHED_STATEMENTS {
        // Dropping the cached statements closes them on the server once no call uses them.
        client.statement_cache.clear();
    }

    let mut rows = Vec::with_capacity(steps.len());
    for (index, result) in results.into_iter().enumerate() {
        let step = index.checked_sub(2).filter(|step| *step < steps.len());
        match result {
            Ok(found) if step.is_some() => rows.push(found),
            Ok(_) => {}
            // `set_config('role', ..)` of a role that does not exist: the principal was
            // deleted after this request authenticated.
            Err(error)
                if index == 1 && error.code() == Some(&SqlState::INVALID_PARAMETER_VALUE) =>
            {
                return Err(Error::RoleMissing {
                    role: caller.role.to_owned(),
                })
            }
            Err(error) => return Ok(Ran::Failed { step, error }),
        }
    }
    Ok(Ran::Rows(rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    /// A NOLOGIN role that exists for one test (roles belong to the whole cluster).
    async fn role(client: &tokio_postgres::Client) -> String {
        let name = format!("hf_run_as_{}", uuid::Uuid::new_v4().simple());
        let quoted = hf_sql::quote_ident(&name).unwrap();
        client
            .batch_execute(&format!(
                "CREATE ROLE {quoted} NOLOGIN; GRANT {quoted} TO CURRENT_USER"
            ))
            .await
            .unwrap();
        name
    }

    async fn drop_role(client: &tokio_postgres::Client, name: &str) {
        let quoted = hf_sql::quote_ident(name).unwrap();
        client
            .batch_execute(&format!("DROP OWNED BY {quoted}; DROP ROLE {quoted}"))
            .await
            .unwrap();
    }

    /// The role a fresh checkout of the (one-connection) pool runs as.
    async fn current_user(pool: &Pool) -> String {
        let client = pool.get().await.unwrap();
        let row = client
            .query_one("SELECT current_user::text", &[])
            .await
            .unwrap();
        row.get(0)
    }

    fn one_connection(db: &hf_testkit::TestDb) -> Pool {
        let settings = crate::PoolSettings {
            max_size: 1,
            ..crate::PoolSettings::default()
        };
        crate::connect(db.url(), &settings).unwrap()
    }

    #[tokio::test]
    async fn runs_as_the_role_and_never_leaks_it() {
        let db = hf_testkit::TestDb::new().await;
        let admin = db.client().await;
        admin
            .batch_execute("CREATE TABLE secret (x int); INSERT INTO secret VALUES (1)")
            .await
            .unwrap();
        let reader = role(&admin).await;
        let pool = one_connection(&db);
        let login = current_user(&pool).await;

        // The statements run as the role, in UTC, read-only.
        let steps = [Step {
            sql: "SELECT current_user::text, current_setting('TimeZone'), current_setting('transaction_read_only'), $1::text",
            params: &[Some("it's; DROP TABLE secret; --".to_owned())],
        }];
        let rows = run_as(&pool, &Caller::reader(&reader), &steps)
            .await
            .unwrap()
            .into_rows()
            .unwrap();
        let row = &rows[0][0];
        assert_eq!(row.get::<_, String>(0), reader);
        assert_eq!(row.get::<_, String>(1), "UTC");
        assert_eq!(row.get::<_, String>(2), "on");
        assert_eq!(row.get::<_, String>(3), "it's; DROP TABLE secret; --");
        assert_eq!(current_user(&pool).await, login);

        // A privilege error is Forbidden, and the next checkout is the login role again.
        let steps = [Step {
            sql: "SELECT x FROM secret",
            params: &[],
        }];
        let ran = run_as(&pool, &Caller::reader(&reader), &steps)
            .await
            .unwrap();
        let error = ran.into_rows().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Forbidden, "{error}");
        assert_eq!(current_user(&pool).await, login);

        // A statement over its timeout is Timeout; the connection stays healthy.
        let caller = Caller {
            timeout: Duration::from_millis(50),
            ..Caller::reader(&reader)
        };
        let steps = [Step {
            sql: "SELECT pg_sleep(2)",
            params: &[],
        }];
        let error = run_as(&pool, &caller, &steps)
            .await
            .unwrap()
            .into_rows()
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Timeout, "{error}");
        assert_eq!(current_user(&pool).await, login);

        // An unknown role fails the setup; the statement never runs as the login role.
        let steps = [Step {
            sql: "INSERT INTO secret VALUES (2)",
            params: &[],
        }];
        let error = run_as(&pool, &Caller::writer("no_such_role_here"), &steps)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::RoleMissing, "{error}");
        let count: i64 = admin
            .query_one("SELECT count(*) FROM secret", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(count, 1);

        // A request dropped half-way (its client went away) still ends its transaction.
        let steps = [Step {
            sql: "SELECT pg_sleep(0.3)",
            params: &[],
        }];
        let dropped = tokio::time::timeout(
            Duration::from_millis(50),
            run_as(&pool, &Caller::reader(&reader), &steps),
        )
        .await;
        assert!(dropped.is_err(), "the request was cut short");
        assert_eq!(current_user(&pool).await, login);
        let client = pool.get().await.unwrap();
        let in_transaction: String = client
            .query_one("SELECT current_setting('transaction_read_only')", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(in_transaction, "off", "no transaction is left open");
        drop(client);

        // The statement cache stays bounded however many distinct statements arrive.
        for n in 0..MAX_CACHED_STATEMENTS + 10 {
            let sql = format!("SELECT {n}");
            let steps = [Step {
                sql: &sql,
                params: &[],
            }];
            run_as(&pool, &Caller::reader(&reader), &steps)
                .await
                .unwrap()
                .into_rows()
                .unwrap();
        }
        let client = pool.get().await.unwrap();
        assert!(client.statement_cache.size() <= MAX_CACHED_STATEMENTS);
        drop(client);

        drop(pool);
        drop_role(&admin, &reader).await;
    }
}
