//! Keeping the database in step with the metadata: plan a branch against the live database,
//! apply it, and write to the live branch with its DDL applied atomically.
//!
//! Order of a live write (crash-safe, see docs/ddl.md): one database transaction takes an
//! advisory lock that serialises live writes across instances, the metadata commit is written
//! (no ref moved yet), the DDL runs and the applied commit is recorded in `hf.schema_state`, the
//! branch ref moves by compare-and-swap, and only then the transaction commits. A failure before
//! the ref move leaves both sides unchanged; a crash between the ref move and the commit leaves
//! the branch ahead of the database, which [`drift`] reports at start and `/apply` repairs.
//!
//! With the test-only feature `failpoints`, [`failpoints`] can stop a live write exactly there,
//! so the tests exercise that repair for real.

use std::sync::Arc;

use hf_ddl::{ApplyOptions, ApplyStats, Plan};
use hf_metastore::{Prepared, Snapshot, Store};
use hf_model::{Change, Model};
use tokio_postgres::GenericClient;

use crate::{Error, Pool, Result};

/// Advisory lock key that serialises every schema change ("hf-apply").
const APPLY_LOCK_KEY: i64 = 0x6866_2d61_7070_6c79;
/// How often a live write re-prepares after losing the race for the branch ref.
const MAX_LIVE_ATTEMPTS: usize = 20;

/// A plan of one branch against the live database.
#[derive(Debug, Clone)]
pub struct BranchPlan {
    /// The planned branch.
    pub branch: String,
    /// Its head commit.
    pub commit: String,
    /// The ordered DDL.
    pub plan: Plan,
}

/// What an apply did.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The applied branch.
    pub branch: String,
    /// The applied commit, now also the live branch's head.
    pub commit: String,
    /// Statement counts.
    pub stats: ApplyStats,
    /// The plan that ran (for `hf apply` to show).
    pub plan: Plan,
}

/// The result of a live-branch metadata write.
#[derive(Debug, Clone)]
pub struct LiveWrite {
    /// What the edit did.
    pub change: Change,
    /// The item's file, relative to the metadata directory.
    pub file: String,
    /// The new head.
    pub commit: String,
    /// Statement counts of the DDL that ran with it.
    pub stats: ApplyStats,
}

/// The commit the database reflects, from `hf.schema_state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedState {
    /// The branch that was applied.
    pub branch: String,
    /// The applied commit.
    pub commit: String,
    /// Its tree.
    pub tree: String,
}

/// The live branch and the database disagree (a crash between the ref move and the commit, or
/// an apply that never happened).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// The live branch's head.
    pub live_commit: String,
    /// What the database last recorded, if anything.
    pub applied_commit: Option<String>,
}

/// Plans `branch` against the live database without changing anything.
pub async fn plan(pool: &Pool, store: &Arc<Store>, branch: &str) -> Result<BranchPlan> {
    let snapshot = snapshot(store, branch).await?;
    let client = pool.get().await?;
    let plan = plan_model(&**client, &snapshot.model, None).await?;
    Ok(BranchPlan {
        branch: snapshot.branch.clone(),
        commit: snapshot.commit.clone(),
        plan,
    })
}

/// Applies `branch` to the database in one transaction and makes it the live head. A branch
/// other than the live one must descend from the live head (it is fast-forwarded); otherwise
/// [`Error::BranchDiverged`].
pub async fn apply(
    pool: &Pool,
    store: &Arc<Store>,
    branch: &str,
    allow_destructive: bool,
) -> Result<Applied> {
    let mut client = pool.get().await?;
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&APPLY_LOCK_KEY])
        .await?;
    let live = snapshot(store, store.live_branch()).await?;
    let target = snapshot(store, branch).await?;
    if target.branch != live.branch {
        let descends = blocking({
            let store = Arc::clone(store);
            let (descendant, ancestor) = (target.commit.clone(), live.commit.clone());
            move || store.descends_from(&descendant, &ancestor)
        })
        .await?;
        if !descends {
            return Err(Error::BranchDiverged {
                branch: target.branch.clone(),
            });
        }
    }
    let plan = plan_model(&*transaction, &target.model, Some(&live.model)).await?;
    let options = ApplyOptions {
        allow_destructive,
        ..ApplyOptions::default()
    };
    let stats = hf_ddl::apply(&transaction, &plan, &options).await?;
    record_applied(&transaction, &target).await?;
    if target.branch != live.branch {
        let store = Arc::clone(store);
        let (live_branch, old, new) = (
            live.branch.clone(),
            live.commit.clone(),
            target.commit.clone(),
        );
        blocking(move || store.advance(&live_branch, Some(&old), &new)).await?;
    }
    transaction.commit().await?;
    Ok(Applied {
        branch: target.branch.clone(),
        commit: target.commit.clone(),
        stats,
        plan,
    })
}

/// Writes to the live branch: the edit's commit and its DDL succeed together or not at all.
///
/// `edit` may run more than once (when another writer moved the branch first), so it must only
/// change the model it is given.
pub async fn write_live<F>(
    pool: &Pool,
    store: &Arc<Store>,
    author: &str,
    allow_destructive: bool,
    edit: F,
) -> Result<LiveWrite>
where
    F: FnMut(&mut Model) -> Result<Change, hf_metastore::Error> + Clone + Send + 'static,
{
    for _ in 0..MAX_LIVE_ATTEMPTS {
        let mut client = pool.get().await?;
        let transaction = client.transaction().await?;
        transaction
            .execute("SELECT pg_advisory_xact_lock($1)", &[&APPLY_LOCK_KEY])
            .await?;
        let prepared: Prepared = blocking({
            let store = Arc::clone(store);
            let (branch, author, edit) = (
                store.live_branch().to_owned(),
                author.to_owned(),
                edit.clone(),
            );
            move || store.prepare(&branch, &author, edit)
        })
        .await?;
        let plan = plan_model(&*transaction, &prepared.model, Some(&prepared.base)).await?;
        let options = ApplyOptions {
            allow_destructive,
            ..ApplyOptions::default()
        };
        let stats = hf_ddl::apply(&transaction, &plan, &options).await?;
        let applied = AppliedState {
            branch: prepared.branch.clone(),
            commit: prepared.commit.clone(),
            tree: prepared.tree.clone(),
        };
        write_applied_state(&transaction, &applied).await?;
        let moved = blocking({
            let store = Arc::clone(store);
            let prepared = prepared.clone();
            move || {
                store.advance(
                    &prepared.branch,
                    prepared.expected_old.as_deref(),
                    &prepared.commit,
                )
            }
        })
        .await;
        match moved {
            Ok(()) => {}
            // Another process moved the branch between prepare and advance: nothing of ours is
            // visible yet, so roll back (dropping the transaction) and try again on the new head.
            Err(Error::Metadata(hf_metastore::Error::Conflict { .. })) => continue,
            Err(error) => return Err(error),
        }
        #[cfg(feature = "failpoints")]
        if failpoints::take_crash_after_ref_move(store.path()) {
            // As if the process died here: the ref has moved, the transaction is dropped (rolled
            // back), and nothing puts the ref back.
            return Err(Error::Internal(
                "failpoint crash_after_ref_move: stopped between the ref move and the commit"
                    .to_owned(),
            ));
        }
        if let Err(error) = transaction.commit().await {
            // The ref moved but the DDL did not commit: put the ref back if nobody moved it since,
            // so git and the database agree again. If that fails too, start-up drift detection
            // reports it and /apply repairs it.
            let store = Arc::clone(store);
            let prepared_back = prepared.clone();
            let reverted = blocking(move || {
                store.advance(
                    &prepared_back.branch,
                    Some(&prepared_back.commit),
                    &prepared_back.parent,
                )
            })
            .await;
            if let Err(revert_error) = reverted {
                tracing::error!(%revert_error, "live branch is ahead of the database; run /apply");
            }
            return Err(error.into());
        }
        return Ok(LiveWrite {
            change: prepared.change,
            file: prepared.file,
            commit: prepared.commit,
            stats,
        });
    }
    Err(Error::Internal(format!(
        "the live branch kept moving; gave up after {MAX_LIVE_ATTEMPTS} attempts"
    )))
}

/// What the database last recorded as applied.
pub async fn applied_state(pool: &Pool) -> Result<Option<AppliedState>> {
    let client = pool.get().await?;
    let row = client
        .query_opt(
            "SELECT applied_branch, applied_commit, applied_tree FROM hf.schema_state",
            &[],
        )
        .await?;
    Ok(match row {
        Some(row) => Some(AppliedState {
            branch: row.try_get(0)?,
            commit: row.try_get(1)?,
            tree: row.try_get(2)?,
        }),
        None => None,
    })
}

/// Compares the live head with what the database recorded. `None` when they agree, or when
/// nothing was ever applied and the live branch holds no metadata.
pub async fn drift(pool: &Pool, store: &Arc<Store>) -> Result<Option<Drift>> {
    let live = snapshot(store, store.live_branch()).await?;
    let applied = applied_state(pool).await?;
    let in_sync = match &applied {
        Some(state) => state.commit == live.commit || state.tree == live.tree,
        None => live.model.modules.is_empty(),
    };
    Ok((!in_sync).then(|| Drift {
        live_commit: live.commit.clone(),
        applied_commit: applied.map(|s| s.commit),
    }))
}

async fn record_applied(
    transaction: &tokio_postgres::Transaction<'_>,
    snapshot: &Snapshot,
) -> Result<()> {
    let state = AppliedState {
        branch: snapshot.branch.clone(),
        commit: snapshot.commit.clone(),
        tree: snapshot.tree.clone(),
    };
    write_applied_state(transaction, &state).await
}

async fn write_applied_state(
    transaction: &tokio_postgres::Transaction<'_>,
    state: &AppliedState,
) -> Result<()> {
    transaction
        .execute(
            "INSERT INTO hf.schema_state (singleton, applied_branch, applied_commit, applied_tree, applied_at)
             VALUES (true, $1, $2, $3, now())
             ON CONFLICT (singleton) DO UPDATE
                SET applied_branch = excluded.applied_branch,
                    applied_commit = excluded.applied_commit,
                    applied_tree = excluded.applied_tree,
                    applied_at = excluded.applied_at",
            &[&state.branch, &state.commit, &state.tree],
        )
        .await?;
    Ok(())
}

/// Introspects the schemas of `model` (and of `previous`, so dropped modules are seen) and plans
/// the difference. The model's `renamedFrom` hints make renames `ALTER … RENAME` (data kept);
/// a hint applies only while the old name exists in the database and the new one does not.
pub async fn plan_model<C: GenericClient>(
    client: &C,
    model: &Model,
    previous: Option<&Model>,
) -> Result<Plan> {
    let mut schemas: Vec<String> = model.modules.keys().cloned().collect();
    if let Some(previous) = previous {
        schemas.extend(previous.modules.keys().cloned());
    }
    schemas.sort();
    schemas.dedup();
    let current = hf_ddl::introspect(client, &schemas).await?;
    let desired = hf_ddl::desired_schema(model);
    let hints = hf_ddl::rename_hints(model);
    Ok(hf_ddl::plan(&current, &desired, &hints))
}

async fn snapshot(store: &Arc<Store>, branch: &str) -> Result<Arc<Snapshot>> {
    let store = Arc::clone(store);
    let branch = branch.to_owned();
    blocking(move || store.snapshot(&branch)).await
}

/// Runs git work off the async executor.
async fn blocking<T, F>(work: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, hf_metastore::Error> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| Error::Internal(format!("a metadata task failed: {error}")))?
        .map_err(Error::Metadata)
}

/// Test-only failpoints (feature `failpoints`, never enabled in the service's own build): stop a
/// live write at a precise step, as a crash there would, so that drift detection and repair are
/// tested for real. Each is armed for one metadata repository, so tests running side by side in
/// one process do not trip each other's.
#[cfg(feature = "failpoints")]
pub mod failpoints {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    /// Repositories whose next live write stops after the ref move.
    static CRASH_AFTER_REF_MOVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

    /// Makes the next live write on the metadata repository at `store_path` stop after moving the
    /// branch ref and before committing the database transaction: the branch is then ahead of
    /// the database, as after a `kill -9` between the two steps.
    pub fn crash_after_ref_move(store_path: &Path) {
        let mut armed = CRASH_AFTER_REF_MOVE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        armed.push(normalise(store_path));
    }

    /// Whether the failpoint is armed for this repository; disarms it.
    pub(crate) fn take_crash_after_ref_move(store_path: &Path) -> bool {
        let mut armed = CRASH_AFTER_REF_MOVE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let path = normalise(store_path);
        match armed.iter().position(|p| *p == path) {
            Some(index) => {
                armed.remove(index);
                true
            }
            None => false,
        }
    }

    fn normalise(path: &Path) -> PathBuf {
        path.canonicalize().unwrap_or_else(|_| path.to_owned())
    }
}
