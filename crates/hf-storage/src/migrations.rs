//! Versioned, transactional migrations of the service's own schema `hf`.
//!
//! A small embedded runner rather than a migration crate: the popular ones either want a
//! synchronous driver or do not serialise two instances starting at once. Here the whole run is
//! one transaction that first takes a transaction-scoped advisory lock, so concurrent starts apply
//! each migration exactly once and a failed migration leaves nothing behind.
//!
//! A migration that alters a table needs a lock that conflicts with every reader, and while it
//! waits for one (behind a backup or a long transaction that reads the table), PostgreSQL queues
//! every later reader of the table behind it: the running instances' logins and principal checks
//! would stop until the long reader ends. So a migration waits for a lock no longer than
//! [`MIGRATION_LOCK_WAIT`]; then the run is rolled back, releasing the queue, and tried again
//! after a pause, for as long as it takes. The statements themselves have no time limit: a
//! migration may rewrite a large table.

use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use crate::{Error, Result};

/// How long a migration's statement waits for a lock before the run is rolled back and tried
/// again (see the module comment): the longest the running instances' statements on the table
/// queue behind it.
pub const MIGRATION_LOCK_WAIT: Duration = Duration::from_secs(2);

/// The pause before a run that could not take its locks is tried again (doubling from the first
/// to the last).
const RETRY_PAUSES: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(8));

/// One step of the `hf` schema's history. Never edit a step that has shipped; add a new one.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Applied in increasing order; recorded in `hf.schema_migrations`.
    pub version: i32,
    /// A short name, recorded next to the version.
    pub name: &'static str,
    /// The SQL, run inside the migration transaction.
    pub sql: &'static str,
}

/// Every migration this build knows, in order.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("../migrations/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "auth",
        sql: include_str!("../migrations/0002_auth.sql"),
    },
    Migration {
        version: 3,
        name: "principal_notify",
        sql: include_str!("../migrations/0003_principal_notify.sql"),
    },
    Migration {
        version: 4,
        name: "metadata",
        sql: include_str!("../migrations/0004_metadata.sql"),
    },
    Migration {
        version: 5,
        name: "server_secrets",
        sql: include_str!("../migrations/0005_server_secrets.sql"),
    },
    Migration {
        version: 6,
        name: "secret_rotation",
        sql: include_str!("../migrations/0006_secret_rotation.sql"),
    },
    Migration {
        version: 7,
        name: "idempotency_keys",
        sql: include_str!("../migrations/0007_idempotency_keys.sql"),
    },
];

/// The advisory lock key that serialises migration runs ("hf-migr" in ASCII).
const MIGRATION_LOCK_KEY: i64 = 0x0068_662d_6d69_6772;

/// Brings the `hf` schema up to date and returns the versions it applied now.
///
/// Refuses to run against a database that has migrations this build does not know, because an
/// older binary must not write into a newer schema. A run that could not take a lock within
/// [`MIGRATION_LOCK_WAIT`] is rolled back and tried again until it can (logged each time).
pub async fn migrate(client: &mut Client) -> Result<Vec<i32>> {
    migrate_steps(client, MIGRATIONS).await
}

/// [`migrate`] with the given steps (the tests use their own).
#[doc(hidden)]
pub async fn migrate_steps(client: &mut Client, migrations: &[Migration]) -> Result<Vec<i32>> {
    let mut pause = RETRY_PAUSES.0;
    loop {
        match migrate_once(client, migrations).await {
            Err(error) if error.sql_state() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
                tracing::warn!(
                    %error,
                    retry_in_ms = pause.as_millis(),
                    "a migration of the hf schema waited {} ms for a lock another session holds \
                     (pg_locks shows which); rolled back, trying again",
                    MIGRATION_LOCK_WAIT.as_millis()
                );
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RETRY_PAUSES.1);
            }
            outcome => return outcome,
        }
    }
}

async fn migrate_once(client: &mut Client, migrations: &[Migration]) -> Result<Vec<i32>> {
    let transaction = client.transaction().await?;
    // Waiting for another instance's run blocks nobody else, so that wait has no bound; the
    // statements that follow may run long, but wait for a table's lock only briefly.
    transaction
        .batch_execute("SET LOCAL lock_timeout = 0; SET LOCAL statement_timeout = 0")
        .await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_KEY])
        .await?;
    transaction
        .execute(
            "SELECT set_config('lock_timeout', $1, true)",
            &[&format!("{}ms", MIGRATION_LOCK_WAIT.as_millis())],
        )
        .await?;
    transaction
        .batch_execute(
            "CREATE SCHEMA IF NOT EXISTS hf;
             CREATE TABLE IF NOT EXISTS hf.schema_migrations (
                 version    integer PRIMARY KEY,
                 name       text NOT NULL,
                 applied_at timestamptz NOT NULL DEFAULT now()
             );",
        )
        .await?;
    let applied: Vec<i32> = transaction
        .query(
            "SELECT version FROM hf.schema_migrations ORDER BY version",
            &[],
        )
        .await?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<Result<_, _>>()?;
    let newest_known = migrations.last().map_or(0, |m| m.version);
    if let Some(unknown) = applied.iter().find(|v| **v > newest_known) {
        return Err(Error::Config(format!(
            "the database's hf schema is at migration {unknown}, newer than this build knows \
             ({newest_known}); run a newer hf"
        )));
    }
    let mut ran = Vec::new();
    for migration in migrations.iter().filter(|m| !applied.contains(&m.version)) {
        transaction.batch_execute(migration.sql).await?;
        transaction
            .execute(
                "INSERT INTO hf.schema_migrations (version, name) VALUES ($1, $2)",
                &[&migration.version, &migration.name],
            )
            .await?;
        ran.push(migration.version);
    }
    transaction.commit().await?;
    Ok(ran)
}

#[cfg(test)]
mod tests {
    use super::MIGRATIONS;

    #[test]
    fn versions_increase_without_gaps() {
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version as usize, index + 1, "{}", migration.name);
        }
    }
}
