//! Apply: runs a plan inside the caller's transaction.
//!
//! The caller owns the transaction so that it can record the applied commit in the same
//! transaction and commit both or neither. Apply sets `lock_timeout` and `statement_timeout`
//! for that transaction only, runs each change's pre-check and statement in order, and finally
//! rewrites the `managed` markers. On any error it stops at once; the caller rolls back and the
//! database is exactly as before.

use std::time::Duration;

use serde::Serialize;
use tokio_postgres::{GenericClient, Transaction};

use crate::error::Error;
use crate::markers::{MARKER_SCHEMA, MARKER_TABLE};
use crate::plan::{Action, Plan};

/// How apply runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyOptions {
    /// How long one statement may wait for a lock before failing; short, so that apply gives
    /// up instead of queueing every reader behind its ACCESS EXCLUSIVE request.
    pub lock_timeout: Duration,
    /// How long one statement may run.
    pub statement_timeout: Duration,
    /// Whether changes that lose data may run (`allowDestructive`).
    pub allow_destructive: bool,
}

impl Default for ApplyOptions {
    /// 2 s lock timeout and 60 s statement timeout (short enough that a
    /// blocked apply gives up before it stalls readers); no data loss.
    fn default() -> Self {
        Self {
            lock_timeout: Duration::from_secs(2),
            statement_timeout: Duration::from_secs(60),
            allow_destructive: false,
        }
    }
}

/// What apply did, as the `apply` object of the API.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyStats {
    /// Tables created.
    pub tables_created: u64,
    /// Columns added to existing tables.
    pub columns_added: u64,
    /// Plan statements executed.
    pub ddl_executed: u64,
}

const ENSURE_MARKER_SCHEMA: &str = "CREATE SCHEMA IF NOT EXISTS ";
const MARKER_COLUMNS: &str = " (kind text NOT NULL, schema_name text NOT NULL, \
table_name text NOT NULL, item_name text NOT NULL, \
PRIMARY KEY (kind, schema_name, table_name, item_name))";

/// Runs a `SELECT EXISTS (...)` of the plan and gives its answer.
async fn ask<C: GenericClient>(client: &C, target: &str, query: &str) -> Result<bool, Error> {
    let failed = |source| Error::Statement {
        target: target.to_owned(),
        sql: query.to_owned(),
        source,
    };
    let row = client.query_one(query, &[]).await.map_err(failed)?;
    row.try_get(0).map_err(failed)
}

/// Why `plan` may not run, before anything runs: a plan with error diagnostics, and one with
/// destructive changes unless `allow_destructive` (a change that loses data only when rows hold
/// certain values asks the database). [`apply`] refuses exactly these inside its transaction; a
/// dry run asks the same question on any connection.
pub async fn refusal<C: GenericClient>(
    client: &C,
    plan: &Plan,
    allow_destructive: bool,
) -> Result<(), Error> {
    if plan.has_errors() {
        let errors = plan
            .diagnostics
            .iter()
            .filter(|d| d.severity == crate::Severity::Error)
            .cloned()
            .collect();
        return Err(Error::InvalidPlan { errors });
    }
    if !allow_destructive {
        let mut targets = Vec::new();
        for change in plan.destructive_changes() {
            let loses_data = match &change.loses_data_if {
                None => true,
                Some(query) => ask(client, &change.target, query).await?,
            };
            if loses_data {
                targets.push(change.target.clone());
            }
        }
        if !targets.is_empty() {
            return Err(Error::Destructive { targets });
        }
    }
    Ok(())
}

/// Runs `plan` in `transaction`; the caller commits (after recording what it applied) or
/// rolls back on `Err`.
///
/// Refuses a plan with error diagnostics, and one with destructive changes unless
/// `options.allow_destructive`, before running anything ([`refusal`]).
pub async fn apply(
    transaction: &Transaction<'_>,
    plan: &Plan,
    options: &ApplyOptions,
) -> Result<ApplyStats, Error> {
    refusal(transaction, plan, options.allow_destructive).await?;
    let lock = format!("{}ms", options.lock_timeout.as_millis());
    let statement = format!("{}ms", options.statement_timeout.as_millis());
    transaction
        .query(
            "SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true), \
             set_config('standard_conforming_strings', 'on', true)",
            &[&lock, &statement],
        )
        .await
        .map_err(|source| Error::Setup { step: "timeouts", source })?;

    let mut stats = ApplyStats::default();
    for change in &plan.changes {
        if let Some(precheck) = &change.precheck {
            if ask(transaction, &change.target, &precheck.sql).await? {
                return Err(Error::Precheck {
                    target: change.target.clone(),
                    sql: change.sql.clone(),
                    reason: precheck.failure.clone(),
                });
            }
        }
        transaction
            .batch_execute(&change.sql)
            .await
            .map_err(|source| Error::Statement {
                target: change.target.clone(),
                sql: change.sql.clone(),
                source,
            })?;
        stats.ddl_executed += 1;
        match change.action {
            Action::CreateTable => stats.tables_created += 1,
            Action::AddColumn => stats.columns_added += 1,
            _ => {}
        }
    }
    write_markers(transaction, plan).await?;
    Ok(stats)
}

/// Replaces the markers of the plan's schemas with the desired items.
async fn write_markers(transaction: &Transaction<'_>, plan: &Plan) -> Result<(), Error> {
    let schema = hf_sql::quote_ident(MARKER_SCHEMA).unwrap_or_default();
    let table = hf_sql::quote_qualified(MARKER_SCHEMA, MARKER_TABLE).unwrap_or_default();
    let setup = |source| Error::Setup {
        step: "markers",
        source,
    };
    let mut ensure = String::from(ENSURE_MARKER_SCHEMA);
    ensure.push_str(&schema);
    transaction.batch_execute(&ensure).await.map_err(setup)?;
    let mut create = String::from("CREATE TABLE IF NOT EXISTS ");
    create.push_str(&table);
    create.push_str(MARKER_COLUMNS);
    transaction.batch_execute(&create).await.map_err(setup)?;

    let mut delete = String::from("DELETE FROM ");
    delete.push_str(&table);
    delete.push_str(" WHERE schema_name = ANY($1)");
    transaction
        .execute(&delete, &[&plan.managed.scope])
        .await
        .map_err(setup)?;

    let markers = &plan.managed.markers;
    let kinds: Vec<&str> = markers.iter().map(|m| m.kind.as_str()).collect();
    let schemas: Vec<&str> = markers.iter().map(|m| m.schema.as_str()).collect();
    let tables: Vec<&str> = markers.iter().map(|m| m.table.as_str()).collect();
    let names: Vec<&str> = markers.iter().map(|m| m.name.as_str()).collect();
    let mut insert = String::from("INSERT INTO ");
    insert.push_str(&table);
    insert.push_str(
        " (kind, schema_name, table_name, item_name) \
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) ON CONFLICT DO NOTHING",
    );
    transaction
        .execute(&insert, &[&kinds, &schemas, &tables, &names])
        .await
        .map_err(setup)?;
    Ok(())
}
