//! The metadata repository in PostgreSQL: git objects and branch heads in `hf.metadata_objects`
//! and `hf.metadata_refs`, shared by every instance of the service.
//!
//! - [`open_store`] opens a [`Store`] whose heads and objects live here; the repository on disk
//!   is only a cache, filled on demand (a snapshot fetches its commit, then its trees level by
//!   level, then the blobs missing locally), so an instance's data directory can be deleted.
//! - A branch moves by compare-and-swap (`UPDATE … WHERE head = <the head the writer read>`,
//!   creation an insert that fails on conflict) in the same transaction as the objects it adds:
//!   [`publish_in`], which `deploy` calls inside its DDL transaction, so the live branch and the
//!   schema commit together.
//! - A trigger announces every move on channel `hf_metadata`; each instance listens (through the
//!   listener shared with the principal cache, `listen.rs`) and keeps every head in memory,
//!   so reading a head costs no I/O. While the listener is down the heads table is polled
//!   instead ([`SharedOptions::poll_interval`]), and read again in full when it comes back.
//! - [`import`] loads an ordinary git repository (an instance's old on-disk store at first start,
//!   or `hf metadata import`), keeping commit ids; [`export`] writes one.
//!
//! The store calls its [`Remote`] synchronously from any thread, request handlers running on an
//! async runtime included, where blocking on a future of that runtime would deadlock or panic.
//! So the remote owns a small thread with its own runtime and connection pool; a call sends the
//! work there and waits for the answer on a plain channel.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use futures_util::future::BoxFuture;
use hf_metastore::remote::{from_hex, to_hex};
use hf_metastore::transfer::{RepositoryWriter, SourceRepository};
use hf_metastore::{Head, Object, ObjectId, ObjectKind, Published, Remote, Store};
use hf_model::Model;
use tokio::sync::{mpsc, Notify};
use tokio_postgres::GenericClient;

use crate::pool::connection_config;
use crate::{connect, Error, Pool, PoolSettings, Result};

/// The notification channel the `hf.metadata_refs` trigger announces moves on.
pub const METADATA_CHANNEL: &str = "hf_metadata";
/// Subscribes to [`METADATA_CHANNEL`] (a plain lower-case name, so it needs no quoting).
const LISTEN_STATEMENT: &str = "LISTEN hf_metadata";
/// The `application_name` of the metadata store's own connections.
pub const APPLICATION_NAME: &str = "hf-metadata";
/// Advisory lock key that serialises imports ("hf-impor").
const IMPORT_LOCK_KEY: i64 = 0x6866_2d69_6d70_6f72;
/// Objects per insert statement.
const INSERT_BATCH: usize = 1000;

/// How a shared store keeps its heads current.
#[derive(Debug, Clone)]
pub struct SharedOptions {
    /// Listen for moves (`true` in the service). Tools that open a store for one command, and
    /// tests of the poll, turn it off.
    pub listen: bool,
    /// How often the heads are read again while the listener is not receiving (or never, with
    /// `None`).
    pub poll_interval: Option<Duration>,
}

impl Default for SharedOptions {
    fn default() -> Self {
        Self {
            listen: true,
            poll_interval: Some(Duration::from_millis(250)),
        }
    }
}

/// Opens the metadata store whose heads and objects live in the database at `database_url`
/// (its `hf` schema migrated), caching objects in the repository at `cache_path`. The live
/// branch is created with an empty first commit if the database has no such branch.
pub async fn open_store(
    database_url: &str,
    cache_path: &Path,
    live_branch: &str,
    options: &SharedOptions,
) -> Result<Arc<Store>> {
    let remote = Arc::new(PgRemote::start(database_url)?);
    let store = {
        let remote: Arc<dyn Remote> = remote.clone();
        let (path, live) = (cache_path.to_owned(), live_branch.to_owned());
        tokio::task::spawn_blocking(move || Store::open_shared(&path, &live, remote))
            .await
            .map_err(|error| Error::Internal(format!("opening the metadata store: {error}")))??
    };
    let store = Arc::new(store);
    remote.keep_current(Arc::downgrade(&store), database_url, options)?;
    Ok(store)
}

/// [`open_store`], after importing the git repository at `cache_path` if there is one and the
/// database has no branch yet: the first start of an instance whose metadata used to live on its
/// disk keeps every branch and commit id. Once the database has branches it wins, and the
/// repository is only a cache. Returns the import's report when one ran.
pub async fn open_store_importing(
    pool: &Pool,
    database_url: &str,
    cache_path: &Path,
    live_branch: &str,
    options: &SharedOptions,
) -> Result<(Arc<Store>, Option<ImportReport>)> {
    let has_repository = cache_path.join("HEAD").exists() || cache_path.join(".git").exists();
    let report = if has_repository {
        let report = import(pool, cache_path, ImportMode::IfEmpty, None).await?;
        let imported = !report.created.is_empty();
        imported.then_some(report)
    } else {
        None
    };
    let store = open_store(database_url, cache_path, live_branch, options).await?;
    Ok((store, report))
}

/// The database side of a shared [`Store`]; see the module documentation.
struct PgRemote {
    jobs: mpsc::UnboundedSender<Job>,
    subscriber: Arc<HeadSubscriber>,
}

type Job = Box<dyn FnOnce(Pool) -> BoxFuture<'static, ()> + Send>;

impl PgRemote {
    /// Starts the remote's thread (its runtime and its pool of at most 4 connections).
    fn start(database_url: &str) -> Result<Self> {
        let settings = PoolSettings {
            max_size: 4,
            application_name: APPLICATION_NAME.to_owned(),
            ..PoolSettings::default()
        };
        let pool = connect(database_url, &settings)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| Error::Internal(format!("metadata runtime: {error}")))?;
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
        std::thread::Builder::new()
            .name("hf-metadata".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    while let Some(job) = queue.recv().await {
                        tokio::spawn(job(pool.clone()));
                    }
                });
            })
            .map_err(|error| Error::Internal(format!("metadata thread: {error}")))?;
        Ok(Self {
            jobs,
            subscriber: Arc::new(HeadSubscriber::default()),
        })
    }

    /// Runs `work` on the remote's thread and waits for its answer.
    fn call<T, F>(&self, work: F) -> Result<T, hf_metastore::Error>
    where
        T: Send + 'static,
        F: FnOnce(Pool) -> BoxFuture<'static, Result<T>> + Send + 'static,
    {
        let (answer, answered) = std::sync::mpsc::channel();
        let job: Job = Box::new(move |pool| {
            Box::pin(async move {
                let _ = answer.send(work(pool).await);
            })
        });
        let gone = || hf_metastore::Error::Remote {
            message: "the metadata connection thread has stopped".to_owned(),
        };
        self.jobs.send(job).map_err(|_| gone())?;
        answered
            .recv()
            .map_err(|_| gone())?
            .map_err(|error| hf_metastore::Error::Remote {
                message: error.to_string(),
            })
    }

    /// Starts what keeps `store`'s heads current: the listener and the poll.
    fn keep_current(
        &self,
        store: Weak<Store>,
        database_url: &str,
        options: &SharedOptions,
    ) -> Result<()> {
        let _ = self.subscriber.store.set(store);
        let subscriber = Arc::downgrade(&self.subscriber);
        if options.listen {
            let settings = PoolSettings {
                application_name: crate::auth::LISTENER_APPLICATION_NAME.to_owned(),
                ..PoolSettings::default()
            };
            let (config, tls) = connection_config(database_url, &settings)?;
            let listener = subscriber.clone();
            let job: Job = Box::new(move |_pool| {
                Box::pin(crate::listen::run(
                    listener,
                    config,
                    tls,
                    crate::listen::Channel {
                        statement: LISTEN_STATEMENT,
                        what: "metadata branch",
                        listening_name: None,
                    },
                ))
            });
            self.jobs
                .send(job)
                .map_err(|_| Error::Internal("the metadata thread has stopped".to_owned()))?;
        }
        if let Some(interval) = options.poll_interval {
            let job: Job = Box::new(move |pool| Box::pin(poll(subscriber, pool, interval)));
            self.jobs
                .send(job)
                .map_err(|_| Error::Internal("the metadata thread has stopped".to_owned()))?;
        }
        Ok(())
    }
}

impl Remote for PgRemote {
    fn heads(&self) -> Result<Vec<Head>, hf_metastore::Error> {
        self.call(|pool| {
            Box::pin(async move {
                let client = pool.get().await?;
                heads(&**client).await
            })
        })
    }

    fn head(&self, branch: &str) -> Result<Option<Head>, hf_metastore::Error> {
        let branch = branch.to_owned();
        self.call(move |pool| {
            Box::pin(async move {
                let client = pool.get().await?;
                head(&**client, &branch).await
            })
        })
    }

    fn fetch(&self, ids: &[ObjectId]) -> Result<Vec<Object>, hf_metastore::Error> {
        let ids: Vec<Vec<u8>> = ids.iter().map(|id| id.to_vec()).collect();
        self.call(move |pool| {
            Box::pin(async move {
                let client = pool.get().await?;
                fetch(&**client, &ids).await
            })
        })
    }

    fn publish(
        &self,
        branch: &str,
        expected_old: Option<&ObjectId>,
        new: &ObjectId,
        objects: &[Object],
    ) -> Result<Published, hf_metastore::Error> {
        let (branch, old, new, objects) = (
            branch.to_owned(),
            expected_old.copied(),
            *new,
            objects.to_vec(),
        );
        self.call(move |pool| {
            Box::pin(async move {
                let mut client = pool.get().await?;
                let transaction = client.transaction().await?;
                let published =
                    publish_in(&transaction, &branch, old.as_ref(), &new, &objects).await?;
                if matches!(published, Published::Moved { .. }) {
                    transaction
                        .commit()
                        .await
                        .map_err(crate::error::commit_failed)?;
                }
                Ok(published)
            })
        })
    }
}

/// What the listener and the poll feed: the store whose heads they keep current.
#[derive(Default)]
struct HeadSubscriber {
    store: OnceLock<Weak<Store>>,
    listening: AtomicBool,
    /// Set when the heads must be read in full (the listener (re)connected, a branch was
    /// deleted); the poll does it at once.
    reread: AtomicBool,
    wake: Notify,
}

impl HeadSubscriber {
    fn store(&self) -> Option<Arc<Store>> {
        self.store.get().and_then(Weak::upgrade)
    }
}

impl crate::listen::Subscriber for HeadSubscriber {
    fn set_listening(&self, listening: bool) {
        self.listening.store(listening, Ordering::SeqCst);
        // Moves made while nobody listened were not announced: read everything once.
        self.reread.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    fn notified(&self, payload: &str) -> Option<crate::listen::Reply> {
        let store = self.store()?;
        match parse_announcement(payload) {
            Some(head) => {
                store.set_cached_head(&head);
            }
            None => {
                self.reread.store(true, Ordering::SeqCst);
                self.wake.notify_one();
            }
        }
        None
    }
}

/// "<version> <branch> <head hex>"; `None` for a deletion ("… -") or anything unexpected.
fn parse_announcement(payload: &str) -> Option<Head> {
    let mut parts = payload.split(' ');
    let version = parts.next()?.parse().ok()?;
    let branch = parts.next()?.to_owned();
    let commit = from_hex(parts.next()?)?;
    Some(Head {
        branch,
        commit,
        version,
    })
}

/// Reads every head again while the listener is not receiving, and once whenever asked.
async fn poll(subscriber: Weak<HeadSubscriber>, pool: Pool, interval: Duration) {
    let mut outage = crate::listen::Outage::default();
    loop {
        let Some(current) = subscriber.upgrade() else {
            return;
        };
        // Holding the subscriber while waiting delays nothing: the remote's thread, and every
        // task on it, stops as soon as the store is dropped.
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = current.wake.notified() => {}
        }
        let due = !current.listening.load(Ordering::SeqCst)
            || current.reread.swap(false, Ordering::SeqCst);
        let Some(store) = current.store() else {
            return;
        };
        drop(current);
        if !due {
            continue;
        }
        let read = async {
            let client = pool.get().await?;
            heads(&**client).await
        };
        match read.await {
            Ok(all) => {
                store.replace_cached_heads(&all);
                if let Some((lasted, attempts)) = outage.ended() {
                    tracing::info!(
                        failed_for_ms = u64::try_from(lasted.as_millis()).unwrap_or(u64::MAX),
                        attempts,
                        "reading the metadata branch heads works again"
                    );
                }
            }
            Err(error) if outage.failed() => tracing::warn!(
                %error,
                "reading the metadata branch heads failed (tried again at every poll, logged when it works)"
            ),
            Err(error) => tracing::debug!(%error, "reading the metadata branch heads failed again"),
        }
    }
}

async fn heads<C: GenericClient>(client: &C) -> Result<Vec<Head>> {
    client
        .query(
            "SELECT branch, head, version FROM hf.metadata_refs ORDER BY branch",
            &[],
        )
        .await?
        .iter()
        .map(head_of_row)
        .collect()
}

pub(crate) async fn head<C: GenericClient>(client: &C, branch: &str) -> Result<Option<Head>> {
    client
        .query_opt(
            "SELECT branch, head, version FROM hf.metadata_refs WHERE branch = $1",
            &[&branch],
        )
        .await?
        .as_ref()
        .map(head_of_row)
        .transpose()
}

fn head_of_row(row: &tokio_postgres::Row) -> Result<Head> {
    let commit: Vec<u8> = row.try_get(1)?;
    Ok(Head {
        branch: row.try_get(0)?,
        commit: object_id(&commit)?,
        version: row.try_get(2)?,
    })
}

fn object_id(bytes: &[u8]) -> Result<ObjectId> {
    bytes
        .try_into()
        .map_err(|_| Error::Internal("a stored object id is not 20 bytes".to_owned()))
}

async fn fetch<C: GenericClient>(client: &C, ids: &[Vec<u8>]) -> Result<Vec<Object>> {
    client
        .query(
            "SELECT id, kind, data FROM hf.metadata_objects WHERE id = ANY($1)",
            &[&ids],
        )
        .await?
        .iter()
        .map(|row| {
            let id: Vec<u8> = row.try_get(0)?;
            let kind: i16 = row.try_get(1)?;
            Ok(Object {
                id: object_id(&id)?,
                kind: ObjectKind::from_code(kind)
                    .ok_or_else(|| Error::Internal(format!("a stored object has kind {kind}")))?,
                data: row.try_get(2)?,
            })
        })
        .collect()
}

/// Stores `objects` and moves `branch` from `expected_old` (`None`: creates it) to `new`, inside
/// the caller's transaction; the move is announced when that transaction commits. On
/// [`Published::Conflict`] the caller must roll back (nothing of the move is kept then) and,
/// after [`Store::set_cached_head`] with the actual head, prepare its change again.
pub async fn publish_in(
    transaction: &tokio_postgres::Transaction<'_>,
    branch: &str,
    expected_old: Option<&ObjectId>,
    new: &ObjectId,
    objects: &[Object],
) -> Result<Published> {
    insert_objects(transaction, objects).await?;
    let new = new.to_vec();
    let moved = match expected_old {
        Some(old) => {
            transaction
                .query_opt(
                    "UPDATE hf.metadata_refs
                        SET head = $2, version = nextval('hf.metadata_ref_version'),
                            updated_at = now()
                      WHERE branch = $1 AND head = $3
                  RETURNING version",
                    &[&branch, &new, &old.to_vec()],
                )
                .await?
        }
        None => {
            transaction
                .query_opt(
                    "INSERT INTO hf.metadata_refs (branch, head) VALUES ($1, $2)
                     ON CONFLICT (branch) DO NOTHING
                     RETURNING version",
                    &[&branch, &new],
                )
                .await?
        }
    };
    match moved {
        Some(row) => Ok(Published::Moved {
            version: row.try_get(0)?,
        }),
        None => Ok(Published::Conflict {
            actual: head(transaction, branch).await?,
        }),
    }
}

async fn insert_objects<C: GenericClient>(client: &C, objects: &[Object]) -> Result<()> {
    for batch in objects.chunks(INSERT_BATCH) {
        let ids: Vec<&[u8]> = batch.iter().map(|o| o.id.as_slice()).collect();
        let kinds: Vec<i16> = batch.iter().map(|o| o.kind.code()).collect();
        let data: Vec<&[u8]> = batch.iter().map(|o| o.data.as_slice()).collect();
        client
            .execute(
                "INSERT INTO hf.metadata_objects (id, kind, data)
                 SELECT * FROM unnest($1::bytea[], $2::int2[], $3::bytea[])
                 ON CONFLICT (id) DO NOTHING",
                &[&ids, &kinds, &data],
            )
            .await?;
    }
    Ok(())
}

/// Which branches [`import`] may move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportMode {
    /// Import only when the database has no branch at all (an instance's first start with an
    /// old on-disk store): the database wins once it has any.
    IfEmpty,
    /// Create missing branches and fast-forward existing ones; refuse (importing nothing) when
    /// a branch diverged.
    FastForward,
}

/// What [`import`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Branches created, with their head.
    pub created: Vec<(String, String)>,
    /// Branches fast-forwarded: branch, old head, new head.
    pub moved: Vec<(String, String, String)>,
    /// Branches already at the imported head.
    pub unchanged: Vec<String>,
    /// Branches whose names are not valid branch ids, left out.
    pub skipped: Vec<String>,
    /// Objects sent to the database (some may have been there already).
    pub objects: usize,
}

/// Loads the branches of the git repository at `dir` into the database with their commit ids
/// and full history, in one transaction: either every branch is imported or none. Two imports
/// at once take turns (an advisory lock), so two instances starting together import once.
///
/// `live` names the live branch when the import must keep it and the schema in step: when the
/// import creates or moves that branch, the DDL from its old model to its new one runs, and the
/// new head is recorded as applied, in the same transaction (under the lock that serialises
/// live writes), as a live write does. A plan that would lose data refuses the whole import
/// ([`hf_ddl::Error::Destructive`]): import the branch under another name and apply it with
/// `hf apply --branch NAME --allow-destructive`. With `None` (a first start importing an old
/// on-disk repository) the schema is left alone, and the drift is reported.
pub async fn import(
    pool: &Pool,
    dir: &Path,
    mode: ImportMode,
    live: Option<&str>,
) -> Result<ImportReport> {
    let no_check = |_: &Model, _: &Model| Ok::<(), std::convert::Infallible>(());
    match import_checked(pool, dir, mode, live, no_check).await? {
        Ok(report) => Ok(report),
        Err(never) => match never {},
    }
}

/// [`import`], with a rule the caller keeps when the import moves the live branch: `check` sees
/// the live branch's new model and its model before the import (empty when the import creates
/// the branch), under the lock that serialises live writes. When it refuses, nothing is
/// imported and its error is returned inside `Ok`.
pub async fn import_checked<E, C>(
    pool: &Pool,
    dir: &Path,
    mode: ImportMode,
    live: Option<&str>,
    check: C,
) -> Result<std::result::Result<ImportReport, E>>
where
    C: FnOnce(&Model, &Model) -> std::result::Result<(), E>,
{
    let source = {
        let dir = dir.to_owned();
        blocking(move || SourceRepository::open(&dir)).await?
    };
    let source = Arc::new(std::sync::Mutex::new(source));
    let (branches, skipped) = with_source(&source, |s| s.branches()).await?;
    let turn = match live {
        Some(_) => Some(pool.live_write_turn().await?),
        None => None,
    };
    let mut client = pool.get().await?;
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&IMPORT_LOCK_KEY])
        .await?;
    if let Some(turn) = &turn {
        crate::deploy::lock_live_writes(&transaction, turn).await?;
    }
    let existing = heads(&*transaction).await?;
    let mut report = ImportReport {
        skipped,
        ..ImportReport::default()
    };
    if mode == ImportMode::IfEmpty && !existing.is_empty() {
        return Ok(Ok(report));
    }
    let mut moves: Vec<(String, Option<ObjectId>, ObjectId)> = Vec::new();
    for (branch, new) in branches {
        let old = existing
            .iter()
            .find(|h| h.branch == branch)
            .map(|h| h.commit);
        match old {
            Some(old) if old == new => report.unchanged.push(branch),
            Some(old) => {
                let descends = with_source(&source, move |s| s.descends_from(&new, &old)).await?;
                if !descends {
                    return Err(Error::ImportDiverged {
                        branch,
                        database: to_hex(&old),
                        import: to_hex(&new),
                    });
                }
                moves.push((branch, Some(old), new));
            }
            None => moves.push((branch, None, new)),
        }
    }
    let tips: Vec<ObjectId> = moves.iter().map(|(_, _, new)| *new).collect();
    let objects = with_source(&source, move |s| s.reachable_objects(&tips)).await?;
    report.objects = objects.len();
    insert_objects(&*transaction, &objects).await?;
    if let Some((branch, old, new)) = moves
        .iter()
        .find(|(branch, _, _)| Some(branch.as_str()) == live)
    {
        let (branch, old, new) = (branch.clone(), *old, *new);
        let (model, tree) = with_source(&source, move |s| s.model_at(&new)).await?;
        let previous = match old {
            Some(old) => Some(with_source(&source, move |s| s.model_at(&old)).await?.0),
            None => None,
        };
        if let Err(refused) = check(&model, previous.as_ref().unwrap_or(&Model::default())) {
            return Ok(Err(refused));
        }
        let plan = crate::deploy::plan_model(&*transaction, &model, previous.as_ref()).await?;
        hf_ddl::apply(&transaction, &plan, &hf_ddl::ApplyOptions::default()).await?;
        let applied = crate::deploy::AppliedState {
            branch,
            commit: to_hex(&new),
            tree,
        };
        crate::deploy::write_applied_state(&transaction, &applied).await?;
    }
    for (branch, old, new) in moves {
        match publish_in(&transaction, &branch, old.as_ref(), &new, &[]).await? {
            Published::Moved { .. } => match old {
                Some(old) => report.moved.push((branch, to_hex(&old), to_hex(&new))),
                None => report.created.push((branch, to_hex(&new))),
            },
            Published::Conflict { actual } => {
                return Err(Error::Metadata(hf_metastore::Error::Conflict {
                    branch,
                    expected: old.map(|id| to_hex(&id)),
                    actual: actual.map(|head| to_hex(&head.commit)),
                }))
            }
        }
    }
    transaction
        .commit()
        .await
        .map_err(crate::error::commit_failed)?;
    Ok(Ok(report))
}

/// What [`export`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// Every branch with its head.
    pub branches: Vec<(String, String)>,
    /// Objects written.
    pub objects: usize,
}

/// Writes every branch (full history) of the database as a new bare git repository at `dir`
/// (missing or empty), `HEAD` on `head_branch`: `git log` and `git clone` work on it. Reads one
/// consistent snapshot of the database.
pub async fn export(pool: &Pool, dir: &Path, head_branch: &str) -> Result<ExportReport> {
    let mut client = pool.get().await?;
    let transaction = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let all = heads(&*transaction).await?;
    let mut writer = {
        let (dir, head_branch) = (dir.to_owned(), head_branch.to_owned());
        blocking(move || RepositoryWriter::create(&dir, &head_branch)).await?
    };
    let mut report = ExportReport::default();
    let mut after: Vec<u8> = Vec::new();
    loop {
        let rows = transaction
            .query(
                "SELECT id, kind, data FROM hf.metadata_objects WHERE id > $1 ORDER BY id LIMIT 2000",
                &[&after],
            )
            .await?;
        let Some(last) = rows.last() else {
            break;
        };
        after = last.try_get(0)?;
        let mut objects = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: Vec<u8> = row.try_get(0)?;
            let kind: i16 = row.try_get(1)?;
            objects.push(Object {
                id: object_id(&id)?,
                kind: ObjectKind::from_code(kind)
                    .ok_or_else(|| Error::Internal(format!("a stored object has kind {kind}")))?,
                data: row.try_get(2)?,
            });
        }
        report.objects += objects.len();
        writer = blocking(move || writer.add(&objects).map(|()| writer)).await?;
    }
    transaction
        .commit()
        .await
        .map_err(crate::error::commit_failed)?;
    let refs: Vec<(String, ObjectId)> = all.iter().map(|h| (h.branch.clone(), h.commit)).collect();
    report.branches = all
        .iter()
        .map(|h| (h.branch.clone(), to_hex(&h.commit)))
        .collect();
    blocking(move || writer.finish(&refs)).await?;
    Ok(report)
}

async fn with_source<T, F>(source: &Arc<std::sync::Mutex<SourceRepository>>, work: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(&SourceRepository) -> Result<T, hf_metastore::Error> + Send + 'static,
{
    let source = Arc::clone(source);
    blocking(move || {
        let source = source.lock().unwrap_or_else(|e| e.into_inner());
        work(&source)
    })
    .await
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
