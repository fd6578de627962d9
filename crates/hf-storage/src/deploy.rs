//! Keeping the database in step with the metadata: plan a branch against the live database,
//! apply it, and write to the live branch with its DDL applied atomically.
//!
//! A live write is ONE database transaction (see docs/ddl.md): it takes an advisory lock that
//! serialises live writes across instances, reads the live head, has the store build the
//! metadata commit (objects computed locally, nothing published), runs the DDL, records the
//! applied commit in `hf.schema_state`, and publishes the commit (its new objects, the branch
//! move by compare-and-swap, the announcement to other instances) with
//! [`crate::metadata::publish_in`]; then it commits. The live branch and the schema move
//! together or not at all, whatever fails or crashes at any point, so there is nothing to
//! repair. [`drift`] still reports a database whose recorded state disagrees with the live head
//! (a first start that imported an old on-disk repository, or changes made outside hf; `hf
//! metadata import` runs the live branch's DDL with its move, see `metadata::import`).
//!
//! These functions need a store opened with [`crate::metadata::open_store`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use hf_ddl::{ApplyOptions, ApplyStats, Plan};
use hf_metastore::remote::from_hex;
use hf_metastore::{Head, ObjectId, Prepared, Published, Snapshot, Store};
use hf_model::{Change, Model};
use tokio_postgres::GenericClient;

use crate::pool::LiveWriteTurn;
use crate::{Error, ErrorKind, Pool, Result};

/// Advisory lock key that serialises every schema change ("hf-apply").
pub const APPLY_LOCK_KEY: i64 = 0x6866_2d61_7070_6c79;
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

/// The live branch and the database disagree (the live branch was imported or moved outside hf,
/// or `hf.schema_state` was changed by hand).
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
///
/// `check` is a rule the caller keeps: it sees the branch's model and the model the
/// database reflects (the last applied tree, or the live head when nothing was applied or that
/// tree is gone), read under the lock that serialises live writes, so no concurrent write can
/// slip in between the check and the apply. When it refuses, nothing runs and its error is
/// returned inside `Ok`.
pub async fn apply_checked<E, C>(
    pool: &Pool,
    store: &Arc<Store>,
    branch: &str,
    allow_destructive: bool,
    check: C,
) -> Result<Result<Applied, E>>
where
    C: FnOnce(&Model, &Model) -> std::result::Result<(), E>,
{
    require_shared(store)?;
    let turn = pool.live_write_turn().await?;
    let mut client = pool.get().await?;
    let transaction = client.transaction().await?;
    lock_live_writes(&transaction, &turn).await?;
    refresh_heads(&transaction, store, &[store.live_branch(), branch]).await?;
    let live = snapshot(store, store.live_branch()).await?;
    let target = snapshot(store, branch).await?;
    let reflected = reflected_model(&*transaction, store, &live).await?;
    if let Err(refused) = check(&target.model, &reflected) {
        return Ok(Err(refused));
    }
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
    let mut moved = None;
    if target.branch != live.branch {
        // The target is a branch head, so its objects are in the database already.
        let (old, new) = (object_id(&live.commit)?, object_id(&target.commit)?);
        match crate::metadata::publish_in(&transaction, &live.branch, Some(&old), &new, &[]).await?
        {
            Published::Moved { version } => {
                moved = Some(Head {
                    branch: live.branch.clone(),
                    commit: new,
                    version,
                });
            }
            Published::Conflict { actual } => {
                return Err(Error::Metadata(hf_metastore::Error::Conflict {
                    branch: live.branch.clone(),
                    expected: Some(live.commit.clone()),
                    actual: actual.map(|head| hf_metastore::remote::to_hex(&head.commit)),
                }))
            }
        }
    }
    transaction
        .commit()
        .await
        .map_err(crate::error::commit_failed)?;
    if let Some(head) = moved {
        store.set_cached_head(&head);
    }
    Ok(Ok(Applied {
        branch: target.branch.clone(),
        commit: target.commit.clone(),
        stats,
        plan,
    }))
}

/// The model the database reflects: the last applied tree, or `live`'s when nothing was
/// applied or that tree is gone.
async fn reflected_model<C: GenericClient>(
    client: &C,
    store: &Arc<Store>,
    live: &Snapshot,
) -> Result<Arc<Model>> {
    let Some(applied) = applied_state_in(client).await? else {
        return Ok(Arc::clone(&live.model));
    };
    let at_tree = {
        let store = Arc::clone(store);
        tokio::task::spawn_blocking(move || store.model_at_tree(&applied.tree))
            .await
            .map_err(|error| Error::Internal(format!("a metadata task failed: {error}")))?
    };
    Ok(at_tree.unwrap_or_else(|_| Arc::clone(&live.model)))
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
    require_shared(store)?;
    let turn = pool.live_write_turn().await?;
    for _ in 0..MAX_LIVE_ATTEMPTS {
        let mut client = pool.get().await?;
        let transaction = client.transaction().await?;
        lock_live_writes(&transaction, &turn).await?;
        refresh_heads(&transaction, store, &[store.live_branch()]).await?;
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
        let commit = LiveCommit {
            branch: &prepared.branch,
            expected_old: prepared.expected_old.as_deref(),
            commit: &prepared.commit,
            tree: &prepared.tree,
            base: &prepared.base,
            model: &prepared.model,
        };
        let Some((head, stats, _plan)) =
            apply_and_publish(&transaction, store, &commit, allow_destructive).await?
        else {
            // Another writer moved the branch without the lock (a tool of an older version):
            // nothing of ours is kept (dropping the transaction rolls it back); prepare again.
            continue;
        };
        commit_and_remember(transaction, store, &head).await?;
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

/// Commits a live write's transaction and, once it holds, remembers the branch's new head (a
/// lost connection during `COMMIT` is [`Error::CommitOutcomeUnknown`]).
async fn commit_and_remember(
    transaction: deadpool_postgres::Transaction<'_>,
    store: &Store,
    head: &Head,
) -> Result<()> {
    transaction
        .commit()
        .await
        .map_err(crate::error::commit_failed)?;
    store.set_cached_head(head);
    Ok(())
}

/// Seeds the empty live branch with metadata files (the demo of `hf serve --demo`) as one live
/// write: the seed commit, its DDL and the recorded applied state in one transaction, under the
/// lock that serialises live writes. `None` when the live branch already holds metadata.
pub async fn seed_live(
    pool: &Pool,
    store: &Arc<Store>,
    files: Vec<(String, Vec<u8>)>,
    source: &str,
    author: &str,
) -> Result<Option<Applied>> {
    require_shared(store)?;
    let turn = pool.live_write_turn().await?;
    for _ in 0..MAX_LIVE_ATTEMPTS {
        let mut client = pool.get().await?;
        let transaction = client.transaction().await?;
        lock_live_writes(&transaction, &turn).await?;
        refresh_heads(&transaction, store, &[store.live_branch()]).await?;
        let seed = blocking({
            let store = Arc::clone(store);
            let (files, source, author) = (files.clone(), source.to_owned(), author.to_owned());
            move || store.prepare_seed(files, &source, &author)
        })
        .await?;
        let Some(seed) = seed else {
            return Ok(None);
        };
        let commit = LiveCommit {
            branch: &seed.branch,
            expected_old: Some(&seed.expected_old),
            commit: &seed.commit,
            tree: &seed.tree,
            base: &seed.base,
            model: &seed.model,
        };
        let Some((head, stats, plan)) =
            apply_and_publish(&transaction, store, &commit, false).await?
        else {
            continue;
        };
        commit_and_remember(transaction, store, &head).await?;
        return Ok(Some(Applied {
            branch: seed.branch.clone(),
            commit: seed.commit.clone(),
            stats,
            plan,
        }));
    }
    Err(Error::Internal(format!(
        "the live branch kept moving; gave up after {MAX_LIVE_ATTEMPTS} attempts"
    )))
}

/// A commit built on the live head and not published yet: a write's or a seed's.
struct LiveCommit<'a> {
    branch: &'a str,
    /// The head it was built on; `None` when the branch did not exist.
    expected_old: Option<&'a str>,
    commit: &'a str,
    tree: &'a str,
    base: &'a Model,
    model: &'a Model,
}

/// The rest of a live write, inside its transaction (the lock held): runs the DDL from the
/// commit's base to its model, records the commit as applied, and publishes it (its new objects
/// and the branch move by compare-and-swap); returns the new head, the statement counts and the
/// plan that ran. `None` when another writer moved the branch first.
async fn apply_and_publish(
    transaction: &tokio_postgres::Transaction<'_>,
    store: &Arc<Store>,
    commit: &LiveCommit<'_>,
    allow_destructive: bool,
) -> Result<Option<(Head, ApplyStats, Plan)>> {
    let plan = plan_model(transaction, commit.model, Some(commit.base)).await?;
    let options = ApplyOptions {
        allow_destructive,
        ..ApplyOptions::default()
    };
    let stats = hf_ddl::apply(transaction, &plan, &options).await?;
    let applied = AppliedState {
        branch: commit.branch.to_owned(),
        commit: commit.commit.to_owned(),
        tree: commit.tree.to_owned(),
    };
    write_applied_state(transaction, &applied).await?;
    let objects = blocking({
        let store = Arc::clone(store);
        let new = commit.commit.to_owned();
        move || store.objects_added(&new)
    })
    .await?;
    let old = commit.expected_old.map(object_id).transpose()?;
    let new = object_id(commit.commit)?;
    match crate::metadata::publish_in(transaction, commit.branch, old.as_ref(), &new, &objects)
        .await?
    {
        Published::Moved { version } => Ok(Some((
            Head {
                branch: commit.branch.to_owned(),
                commit: new,
                version,
            },
            stats,
            plan,
        ))),
        Published::Conflict { actual } => {
            if let Some(head) = actual {
                store.set_cached_head(&head);
            }
            Ok(None)
        }
    }
}

/// Takes the advisory lock that serialises every change of the live branch and the schema,
/// until `transaction` ends; waits for it no longer than `turn` has left
/// ([`Error::LiveWriteBusy`] then), and from then on lets the transaction sit idle between
/// statements no longer than the writes behind it wait.
pub(crate) async fn lock_live_writes(
    transaction: &tokio_postgres::Transaction<'_>,
    turn: &LiveWriteTurn,
) -> Result<()> {
    let left = turn
        .deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    // Both limits are the transaction's own (`set_config(…, true)`): the lock wait for the
    // time the turn has left; the idle limit for as long as the writes queued behind this one
    // wait, so that a writer that stops half-way (a hung process, a lost client) has its
    // session ended by the server and the lock passes on, instead of holding it for ever. The
    // server counts whole milliseconds: the time left is rounded up, so the turn's wait never
    // ends before its deadline (rounded down, it ended up to a millisecond early).
    transaction
        .execute(
            "SELECT set_config('lock_timeout', $1, true), \
                    set_config('idle_in_transaction_session_timeout', $2, true)",
            &[
                &format!("{}ms", left.as_micros().div_ceil(1000)),
                &format!("{}ms", turn.wait.as_millis()),
            ],
        )
        .await?;
    if let Err(error) = transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&APPLY_LOCK_KEY])
        .await
    {
        let error = Error::from(error);
        return Err(match error.kind() {
            ErrorKind::Timeout => Error::LiveWriteBusy { waited: turn.wait },
            _ => error,
        });
    }
    // The apply's statements set their own lock timeout; the rest wait as long as any of the
    // service's own statements (`SERVICE_LOCK_TIMEOUT`, the session's default).
    transaction
        .batch_execute("SET LOCAL lock_timeout TO DEFAULT")
        .await?;
    Ok(())
}

/// What the database last recorded as applied.
pub async fn applied_state(pool: &Pool) -> Result<Option<AppliedState>> {
    let client = pool.get().await?;
    applied_state_in(&**client).await
}

async fn applied_state_in<C: GenericClient>(client: &C) -> Result<Option<AppliedState>> {
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

pub(crate) async fn write_applied_state(
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

/// Refuses a store whose heads are not in the database: the branch and the schema could not
/// move in one transaction.
fn require_shared(store: &Store) -> Result<()> {
    if store.is_shared() {
        Ok(())
    } else {
        Err(Error::Config(
            "the live branch can only be written through the metadata store in the database \
             (hf_storage::metadata::open_store)"
                .to_owned(),
        ))
    }
}

/// Reads the heads of `branches` inside the transaction (after its lock), so what the store
/// builds on is current even if this instance has not heard of the latest move yet.
async fn refresh_heads(
    transaction: &tokio_postgres::Transaction<'_>,
    store: &Store,
    branches: &[&str],
) -> Result<()> {
    for branch in branches {
        if let Some(head) = crate::metadata::head(transaction, branch).await? {
            store.set_cached_head(&head);
        }
    }
    Ok(())
}

fn object_id(hex: &str) -> Result<ObjectId> {
    from_hex(hex).ok_or_else(|| {
        Error::Metadata(hf_metastore::Error::UnknownObject {
            kind: "commit",
            id: hex.to_owned(),
        })
    })
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
