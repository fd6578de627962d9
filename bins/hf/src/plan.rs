//! `hf plan` and `hf apply`: the DDL that brings the database to a metadata branch, printed as
//! readable SQL, and applying it.
//!
//! Like the other tools they talk to the database and the metadata repository directly, not to a
//! running service, with the same flags and environment as `hf serve`; without a database URL
//! they attach to the embedded cluster of a running `hf serve`, or start it for the command.
//! They run the same use cases as the service's `/plan` and `/apply` (`hf_app`), so `hf apply`
//! keeps the same rules (it refuses a branch that breaks a screen) and takes the same advisory
//! lock as `/apply` and live writes, so it is safe while the service runs.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use hf_app::App;
use hf_ddl::Plan;
use hf_metastore::Store;
use hf_storage::Pool;

use crate::DatabaseArgs;

/// Where the metadata is: the same flags and variables as `hf serve`.
#[derive(Debug, Clone, Args)]
pub struct MetadataArgs {
    /// This machine's cache of the metadata objects (the metadata itself is in the database);
    /// a git repository found there when the database has no branch yet is imported first.
    /// Default `<data dir>/metadata`.
    #[arg(long, env = "HF_METADATA_PATH")]
    pub metadata_path: Option<PathBuf>,
    /// The branch the database reflects.
    #[arg(long, env = "HF_LIVE_BRANCH", default_value = "main")]
    pub live_branch: String,
}

/// `hf plan [--branch B]`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The branch to plan; the live branch when absent.
    #[arg(long)]
    branch: Option<String>,
    #[command(flatten)]
    metadata: MetadataArgs,
    #[command(flatten)]
    database: DatabaseArgs,
}

/// `hf apply [--branch B] [--allow-destructive]`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The branch to apply; the live branch when absent. Another branch must descend from the
    /// live head, which then moves to it.
    #[arg(long)]
    branch: Option<String>,
    /// Allow steps that lose data (dropped columns and tables, lossy type changes).
    #[arg(long)]
    allow_destructive: bool,
    #[command(flatten)]
    metadata: MetadataArgs,
    #[command(flatten)]
    database: DatabaseArgs,
}

/// Runs `hf plan`: prints the plan and changes nothing.
pub fn run_plan(args: PlanArgs) -> anyhow::Result<()> {
    let cache = cache_path(&args.metadata, &args.database);
    crate::principal::with_database_url(&args.database, |pool, url| async move {
        let store = open_store(&pool, &url, &cache, &args.metadata.live_branch).await?;
        let app = App::new(pool, store);
        let branch = args.branch.unwrap_or_else(|| app.live_branch().to_owned());
        report_drift(&app).await;
        let planned = app
            .plan(Some(&branch))
            .await
            .with_context(|| format!("planning branch `{branch}`"))?;
        println!(
            "-- plan of branch `{}` at {}",
            planned.branch, planned.commit
        );
        print!("{}", render(&planned.plan));
        Ok(())
    })
}

/// Runs `hf apply`: applies the plan in one transaction and prints what ran.
pub fn run_apply(args: ApplyArgs) -> anyhow::Result<()> {
    let cache = cache_path(&args.metadata, &args.database);
    crate::principal::with_database_url(&args.database, |pool, url| async move {
        let store = open_store(&pool, &url, &cache, &args.metadata.live_branch).await?;
        let app = App::new(pool, store);
        let branch = args.branch.unwrap_or_else(|| app.live_branch().to_owned());
        let applied = match app.apply(Some(&branch), args.allow_destructive).await {
            Ok(applied) => applied,
            Err(hf_app::Error::Storage(hf_storage::Error::Ddl(hf_ddl::Error::Destructive {
                targets,
            }))) => {
                anyhow::bail!(
                    "nothing was applied: the plan loses the data of {}; review it with \
                         `hf plan` and repeat with --allow-destructive to accept that",
                    targets.join(", ")
                )
            }
            Err(error) => {
                return Err(anyhow::Error::new(error)
                    .context(format!("applying branch `{branch}` (nothing was applied)")))
            }
        };
        println!(
            "-- applied branch `{}` at {}",
            applied.branch, applied.commit
        );
        print!("{}", render(&applied.plan));
        println!(
            "-- done: {} tables created, {} columns added, {} statements executed; the live \
             branch `{}` is at {}",
            applied.stats.tables_created,
            applied.stats.columns_added,
            applied.stats.ddl_executed,
            app.live_branch(),
            applied.commit
        );
        Ok(())
    })
}

/// The plan as a script: the statements with their comments, a summary line, then the
/// diagnostics as comments.
fn render(plan: &Plan) -> String {
    let mut text = if plan.changes.is_empty() {
        "-- no changes: the database is up to date\n".to_owned()
    } else {
        plan.to_sql_script()
    };
    let summary = &plan.summary;
    text.push_str(&format!(
        "-- summary: {} tables created, {} columns added, {} statements, {} destructive\n",
        summary.tables_created, summary.columns_added, summary.ddl_statements, summary.destructive
    ));
    for diagnostic in &plan.diagnostics {
        text.push_str(&format!("-- {diagnostic}\n"));
    }
    text
}

/// Says so when the database does not reflect the live branch (the live branch was imported or
/// moved outside hf); `hf apply` brings the database to it.
async fn report_drift(app: &App) {
    match app.drift().await {
        Ok(None) => {}
        Ok(Some(drift)) => println!(
            "-- drift: the live branch is at {} but the database reflects {}; `hf apply` repairs this",
            drift.live_commit,
            drift.applied_commit.as_deref().unwrap_or("nothing")
        ),
        Err(error) => tracing::warn!(%error, "could not compare the live branch with the database"),
    }
}

/// Opens the metadata store in the database (importing an old on-disk repository first, as
/// `hf serve` does), for one command: no listener, no poll.
pub async fn open_store(
    pool: &Pool,
    database_url: &str,
    path: &std::path::Path,
    live_branch: &str,
) -> anyhow::Result<Arc<Store>> {
    let options = hf_storage::metadata::SharedOptions {
        listen: false,
        poll_interval: None,
    };
    let (store, _) =
        hf_storage::metadata::open_store_importing(pool, database_url, path, live_branch, &options)
            .await
            .with_context(|| format!("opening the metadata store (cache {})", path.display()))?;
    Ok(store)
}

/// Where this machine caches metadata objects: `--metadata-path`, else `<data dir>/metadata`.
pub fn cache_path(metadata: &MetadataArgs, database: &DatabaseArgs) -> PathBuf {
    metadata
        .metadata_path
        .clone()
        .unwrap_or_else(|| database.data_dir.join("metadata"))
}
