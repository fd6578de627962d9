//! The metadata store in PostgreSQL: several stores (as on several machines, each with its own
//! cache directory) on one database serve the same branches; a write through one is read through
//! the others (by notification, or by the poll while nobody listens); a lost race re-applies;
//! a deleted cache loses nothing; old on-disk repositories are imported with their commit ids;
//! export and import round-trip, and a diverged branch is refused whole.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hf_metastore::Store;
use hf_storage::metadata::{self, ImportMode, SharedOptions};
use hf_testkit::TestDb;

/// How long a move may take to reach another store before the test fails; in practice a few
/// milliseconds.
const DEADLINE: Duration = Duration::from_secs(10);

async fn prepared_db() -> TestDb {
    let db = TestDb::new().await;
    let mut client = db.client().await;
    hf_storage::migrate(&mut client).await.unwrap();
    db
}

async fn open(db: &TestDb, cache: &Path, options: &SharedOptions) -> Arc<Store> {
    metadata::open_store(db.url(), cache, "main", options)
        .await
        .unwrap()
}

fn quiet() -> SharedOptions {
    SharedOptions {
        listen: false,
        poll_interval: None,
    }
}

/// Writes one file on a branch through a store (off the async executor), returns the commit.
async fn write(store: &Arc<Store>, branch: &str, path: &str, text: &str) -> String {
    let store = Arc::clone(store);
    let (branch, path, text) = (branch.to_owned(), path.to_owned(), text.to_owned());
    tokio::task::spawn_blocking(move || {
        store
            .write_file(&branch, "tester", &path, Some(text.as_bytes()))
            .unwrap()
            .snapshot
            .commit
            .clone()
    })
    .await
    .unwrap()
}

async fn head(store: &Arc<Store>, branch: &str) -> Option<String> {
    let store = Arc::clone(store);
    let branch = branch.to_owned();
    tokio::task::spawn_blocking(move || store.snapshot(&branch).ok().map(|s| s.commit.clone()))
        .await
        .unwrap()
}

async fn file(store: &Arc<Store>, branch: &str, path: &str) -> Option<String> {
    let store = Arc::clone(store);
    let (branch, path) = (branch.to_owned(), path.to_owned());
    tokio::task::spawn_blocking(move || {
        let snapshot = store.snapshot(&branch).unwrap();
        store
            .read_file(&snapshot.tree, &path)
            .unwrap()
            .map(|bytes| String::from_utf8(bytes).unwrap())
    })
    .await
    .unwrap()
}

/// Waits until `store` reads `branch` at `commit`; returns how long that took.
async fn until_seen(store: &Arc<Store>, branch: &str, commit: &str) -> Duration {
    let started = Instant::now();
    while head(store, branch).await.as_deref() != Some(commit) {
        assert!(
            started.elapsed() < DEADLINE,
            "{branch} never reached {commit}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    started.elapsed()
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

#[tokio::test]
async fn a_write_through_one_store_is_read_through_another() {
    let db = prepared_db().await;
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = open(&db, one.path(), &SharedOptions::default()).await;
    let second = open(&db, two.path(), &SharedOptions::default()).await;
    assert_eq!(head(&first, "main").await, head(&second, "main").await);
    // The listener connects in the background; the first move may be found by the poll.
    let commit = write(&first, "main", "a.txt", "one").await;
    until_seen(&second, "main", &commit).await;
    let mut latencies = Vec::new();
    for n in 0..50 {
        let commit = write(&first, "main", "a.txt", &format!("edit {n}")).await;
        latencies.push(until_seen(&second, "main", &commit).await);
    }
    let commit = write(&first, "feature", "b.txt", "two").await;
    until_seen(&second, "feature", &commit).await;
    assert_eq!(
        file(&second, "feature", "b.txt").await.as_deref(),
        Some("two")
    );
    assert_eq!(
        file(&second, "main", "a.txt").await.as_deref(),
        Some("edit 49")
    );
    let branches: Vec<String> = second
        .branches()
        .unwrap()
        .into_iter()
        .map(|b| b.branch)
        .collect();
    assert_eq!(branches, ["feature", "main"]);
    println!(
        "write -> visible through another store (NOTIFY): p50 {:?}, p99 {:?}, max {:?}",
        percentile(&mut latencies, 0.5),
        percentile(&mut latencies, 0.99),
        percentile(&mut latencies, 1.0)
    );
}

#[tokio::test]
async fn with_the_listener_down_the_poll_keeps_heads_current() {
    let db = prepared_db().await;
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = open(&db, one.path(), &quiet()).await;
    let polled = SharedOptions {
        listen: false,
        poll_interval: Some(Duration::from_millis(250)),
    };
    let second = open(&db, two.path(), &polled).await;
    let mut latencies = Vec::new();
    for n in 0..5 {
        let commit = write(&first, "main", "a.txt", &format!("edit {n}")).await;
        let took = until_seen(&second, "main", &commit).await;
        assert!(took < Duration::from_secs(1), "{took:?}");
        latencies.push(took);
    }
    println!(
        "write -> visible through another store (poll, 250 ms): max {:?}",
        percentile(&mut latencies, 1.0)
    );
}

#[tokio::test]
async fn a_lost_race_re_applies_and_loses_nothing() {
    let db = prepared_db().await;
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Neither hears of the other's moves: every write after the first one races from a stale
    // head and must lose the compare-and-swap, re-read and re-apply.
    let first = open(&db, one.path(), &quiet()).await;
    let second = open(&db, two.path(), &quiet()).await;
    let mut writers = Vec::new();
    for (name, store) in [("x", &first), ("y", &second)] {
        let store = Arc::clone(store);
        writers.push(tokio::task::spawn_blocking(move || {
            for n in 0..10 {
                store
                    .write_file("main", "tester", &format!("{name}{n}.txt"), Some(b"1"))
                    .unwrap();
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let cache = tempfile::tempdir().unwrap();
    let reader = open(&db, cache.path(), &quiet()).await;
    for name in ["x", "y"] {
        for n in 0..10 {
            assert_eq!(
                file(&reader, "main", &format!("{name}{n}.txt"))
                    .await
                    .as_deref(),
                Some("1"),
                "{name}{n}"
            );
        }
    }
}

#[tokio::test]
async fn deleting_the_cache_loses_nothing() {
    let db = prepared_db().await;
    let cache = tempfile::tempdir().unwrap();
    let path = cache.path().join("metadata");
    let store = open(&db, &path, &quiet()).await;
    let mut commit = String::new();
    for n in 0..5 {
        commit = write(&store, "main", &format!("dir/f{n}.txt"), &format!("{n}")).await;
    }
    let feature = write(&store, "feature", "g.txt", "g").await;
    let tree = store.live().unwrap().tree.clone();
    drop(store);
    std::fs::remove_dir_all(&path).unwrap();
    let started = Instant::now();
    let store = open(&db, &path, &quiet()).await;
    assert_eq!(head(&store, "main").await.as_deref(), Some(commit.as_str()));
    assert_eq!(store.live().unwrap().tree, tree);
    println!("reopened on an empty cache in {:?}", started.elapsed());
    assert_eq!(
        head(&store, "feature").await.as_deref(),
        Some(feature.as_str())
    );
    for n in 0..5 {
        assert_eq!(
            file(&store, "main", &format!("dir/f{n}.txt")).await,
            Some(n.to_string())
        );
    }
    let descends = {
        let store = Arc::clone(&store);
        let (feature, commit) = (feature.clone(), commit.clone());
        tokio::task::spawn_blocking(move || store.descends_from(&feature, &commit).unwrap())
            .await
            .unwrap()
    };
    assert!(descends, "history is fetched as needed");
}

/// A local (on-disk) repository with `main`, `feature` and `other` and 100 commits in all.
fn old_repository(path: &Path) -> Store {
    let store = Store::open_or_init(path, "main").unwrap();
    for n in 0..60 {
        store
            .write_file(
                "main",
                "old",
                &format!("d{}/f{n}.txt", n % 7),
                Some(b"main"),
            )
            .unwrap();
    }
    for n in 0..25 {
        store
            .write_file("feature", "old", &format!("feature/{n}.txt"), Some(b"f"))
            .unwrap();
    }
    for n in 0..14 {
        store
            .write_file("other", "old", &format!("other/{n}.txt"), Some(b"o"))
            .unwrap();
    }
    store
}

fn heads_of(store: &Store) -> Vec<(String, String)> {
    store
        .branches()
        .unwrap()
        .into_iter()
        .map(|b| (b.branch, b.commit))
        .collect()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn an_old_repository_is_imported_once_with_its_commit_ids() {
    let db = prepared_db().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metadata");
    let old = tokio::task::spawn_blocking({
        let path = path.clone();
        move || heads_of(&old_repository(&path))
    })
    .await
    .unwrap();
    let commits = git(&path, &["rev-list", "--all", "--count"]);
    assert_eq!(commits.trim(), "100");

    // Two instances start at once on the same old repository: one imports, the other finds
    // the branches there.
    let pool = db.pool();
    let options = quiet();
    let (a, b) = tokio::join!(
        metadata::open_store_importing(&pool, db.url(), &path, "main", &options),
        metadata::open_store_importing(&pool, db.url(), &path, "main", &options),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let imports: Vec<_> = [&a.1, &b.1].into_iter().flatten().collect();
    assert_eq!(imports.len(), 1, "imported once");
    assert_eq!(imports[0].created.len(), 3);
    assert_eq!(heads_of(&a.0), old);
    assert_eq!(heads_of(&b.0), old);

    // Again: nothing changes.
    let again = metadata::import(&pool, &path, ImportMode::FastForward, None)
        .await
        .unwrap();
    assert!(
        again.created.is_empty() && again.moved.is_empty(),
        "{again:?}"
    );
    assert_eq!(again.unchanged, ["feature", "main", "other"]);
    let client = db.client().await;
    let objects: i64 = client
        .query_one("SELECT count(*) FROM hf.metadata_objects", &[])
        .await
        .unwrap()
        .get(0);
    println!("imported 100 commits as {objects} objects");

    // The database wins from now on: the old repository is only a cache.
    let fresh = tempfile::tempdir().unwrap();
    let elsewhere = open(&db, fresh.path(), &quiet()).await;
    assert_eq!(heads_of(&elsewhere), old);
    assert_eq!(
        file(&elsewhere, "other", "other/13.txt").await.as_deref(),
        Some("o")
    );
}

#[tokio::test]
async fn export_and_import_round_trip_and_a_diverged_branch_is_refused() {
    let db = prepared_db().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metadata");
    let old = tokio::task::spawn_blocking({
        let path = path.clone();
        move || heads_of(&old_repository(&path))
    })
    .await
    .unwrap();
    let pool = db.pool();
    metadata::import(&pool, &path, ImportMode::FastForward, None)
        .await
        .unwrap();

    let exported = dir.path().join("exported");
    let report = metadata::export(&pool, &exported, "main").await.unwrap();
    assert_eq!(report.branches, old);
    let log = git(&exported, &["log", "--format=%H", "main"]);
    assert_eq!(log.lines().count(), 61, "60 writes and the first commit");
    assert_eq!(log.lines().next(), Some(old[1].1.as_str()));
    assert_eq!(
        git(&exported, &["rev-list", "--all", "--count"]).trim(),
        "100"
    );
    git(&exported, &["fsck", "--strict"]);
    let cloned = dir.path().join("clone");
    let status = std::process::Command::new("git")
        .arg("clone")
        .arg("-q")
        .arg(&exported)
        .arg(&cloned)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(cloned.join("d0/f0.txt").exists());

    // Into an empty database: the same branches and ids.
    let other = prepared_db().await;
    let report = metadata::import(&other.pool(), &exported, ImportMode::FastForward, None)
        .await
        .unwrap();
    assert_eq!(report.created, old);

    // main moves on in the database; the exported repository's main is behind it (refused: it
    // is not a fast-forward), and a new branch there is not created either.
    let cache = tempfile::tempdir().unwrap();
    let store = open(&db, cache.path(), &quiet()).await;
    let moved = write(&store, "main", "new.txt", "n").await;
    let refs_before: Vec<(String, String)> = heads_of(&store);
    let work = dir.path().join("work");
    let diverged = tokio::task::spawn_blocking({
        let (exported, work) = (exported.clone(), work.clone());
        move || {
            let local = Store::open_or_init(&work, "main").unwrap();
            drop(local);
            std::fs::remove_dir_all(&work).unwrap();
            let status = std::process::Command::new("git")
                .args(["clone", "-q", "--bare"])
                .arg(&exported)
                .arg(&work)
                .status()
                .unwrap();
            assert!(status.success());
            let local = Store::open_or_init(&work, "main").unwrap();
            local
                .write_file("main", "elsewhere", "diverged.txt", Some(b"d"))
                .unwrap();
            local
                .write_file("brand-new", "elsewhere", "x.txt", Some(b"x"))
                .unwrap();
            local.branches().unwrap()
        }
    })
    .await
    .unwrap();
    let diverged_main = diverged
        .iter()
        .find(|b| b.branch == "main")
        .unwrap()
        .commit
        .clone();
    let error = metadata::import(&pool, &work, ImportMode::FastForward, None)
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("`main`"), "{message}");
    assert!(message.contains(&moved), "{message}");
    assert!(message.contains(&diverged_main), "{message}");
    let cache = tempfile::tempdir().unwrap();
    let after = open(&db, cache.path(), &quiet()).await;
    assert_eq!(heads_of(&after), refs_before, "nothing was imported");
}

#[tokio::test]
async fn cold_start_on_a_500_object_repository() {
    let db = prepared_db().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metadata");
    tokio::task::spawn_blocking({
        let path = path.clone();
        move || {
            let store = Store::open_or_init(&path, "main").unwrap();
            store
                .seed_from_dir(
                    &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo"),
                    "old",
                )
                .unwrap();
            for n in 0..180 {
                store
                    .write_file("main", "old", &format!("d{}/f{n}.txt", n % 9), Some(b"x"))
                    .unwrap();
            }
        }
    })
    .await
    .unwrap();
    let pool = db.pool();
    metadata::import(&pool, &path, ImportMode::FastForward, None)
        .await
        .unwrap();
    let client = db.client().await;
    let objects: i64 = client
        .query_one("SELECT count(*) FROM hf.metadata_objects", &[])
        .await
        .unwrap()
        .get(0);
    assert!(objects >= 500, "{objects}");
    let mut times = Vec::new();
    for _ in 0..5 {
        let empty = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let store = open(&db, &empty.path().join("metadata"), &quiet()).await;
        let live = tokio::task::spawn_blocking(move || store.live().unwrap())
            .await
            .unwrap();
        times.push(started.elapsed());
        assert!(!live.model.modules.is_empty());
    }
    println!(
        "cold start on {objects} objects (open + parsed live snapshot, empty cache): median {:?}, max {:?}",
        percentile(&mut times, 0.5),
        percentile(&mut times, 1.0)
    );
}

/// Importing a new head of the live branch runs its DDL in the same transaction, so the live
/// branch and the schema never disagree: a created live branch gets its tables, a moved one its
/// new columns, and the database records the imported head as applied (no drift). A plan that
/// would lose data refuses the whole import: neither the branch nor the schema moves.
#[tokio::test]
async fn importing_the_live_branch_applies_its_schema_in_the_same_transaction() {
    use hf_model::{Field, FieldKind, Model, Module, Object, QualifiedName, ScalarType};

    let db = prepared_db().await;
    let pool = db.pool();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("repo");
    let local = Store::open_or_init(&path, "main").unwrap();
    let account = QualifiedName::new("crm", "account");
    let text_field = |key: &str| {
        Field::new(
            key,
            "Label",
            FieldKind::Scalar {
                field_type: ScalarType::Text,
                required: false,
                unique: false,
                indexed: false,
                values: Vec::new(),
                default_value: None,
            },
        )
    };
    let write = |edit: &dyn Fn(&mut Model) -> Result<hf_model::Change, hf_model::Error>| {
        local
            .write("main", "git", |model: &mut Model| {
                edit(model).map_err(hf_metastore::Error::from)
            })
            .unwrap()
            .snapshot
            .commit
            .clone()
    };
    write(&|m| m.create_module(Module::new("crm", "CRM")));
    write(&|m| m.create_object("crm", Object::new("account", "Account")));
    let first = write(&|m| m.create_field(&account, text_field("name")));

    let columns = || async {
        let client = db.client().await;
        let rows = client
            .query(
                "SELECT column_name::text FROM information_schema.columns
                  WHERE table_schema = 'crm' AND table_name = 'account' ORDER BY 1",
                &[],
            )
            .await
            .unwrap();
        rows.iter()
            .map(|row| row.get::<_, String>(0))
            .collect::<Vec<_>>()
    };
    let report = metadata::import(&pool, &path, ImportMode::FastForward, Some("main"))
        .await
        .unwrap();
    assert_eq!(report.created.len(), 1, "{report:?}");
    assert!(columns().await.contains(&"name".to_owned()));
    let applied = hf_storage::deploy::applied_state(&pool)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(applied.commit, first);

    let second = write(&|m| m.create_field(&account, text_field("city")));
    metadata::import(&pool, &path, ImportMode::FastForward, Some("main"))
        .await
        .unwrap();
    let now = columns().await;
    assert!(now.contains(&"city".to_owned()), "{now:?}");
    let applied = hf_storage::deploy::applied_state(&pool)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(applied.commit, second);
    let store = open(&db, &dir.path().join("cache"), &quiet()).await;
    assert_eq!(
        hf_storage::deploy::drift(&pool, &store).await.unwrap(),
        None,
        "the live branch and the schema agree"
    );

    // Dropping a column that holds values loses data: the import is refused as a whole.
    db.client()
        .await
        .batch_execute("INSERT INTO crm.account (name, city) VALUES ('a', 'Paris')")
        .await
        .unwrap();
    write(&|m| m.delete_field(&account, "city"));
    let error = metadata::import(&pool, &path, ImportMode::FastForward, Some("main"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            hf_storage::Error::Ddl(hf_ddl::Error::Destructive { .. })
        ),
        "{error}"
    );
    assert!(columns().await.contains(&"city".to_owned()), "nothing ran");
    let applied = hf_storage::deploy::applied_state(&pool)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(applied.commit, second, "nothing was recorded");
    let head: Vec<u8> = db
        .client()
        .await
        .query_one(
            "SELECT head FROM hf.metadata_refs WHERE branch = 'main'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(hex(&head), second, "the branch did not move");
}

/// Live writes queued behind the lock that serialises them hold one login connection between
/// them, not one each: while another instance holds the lock, a burst of writes through a pool
/// of two leaves a connection for everything else (logins, token checks).
#[tokio::test]
async fn live_writes_waiting_for_the_lock_leave_login_connections_free() {
    let db = prepared_db().await;
    let settings = hf_storage::PoolSettings {
        max_size: 2,
        wait_timeout: Duration::from_secs(1),
        ..hf_storage::PoolSettings::default()
    };
    let (pool, store, _dir) = live_branch_with_first_module(&db, &settings).await;

    let held = db
        .hold_advisory_lock(hf_storage::deploy::APPLY_LOCK_KEY)
        .await;
    let writes: Vec<_> = (0..4)
        .map(|n| {
            let (pool, store) = (pool.clone(), Arc::clone(&store));
            tokio::spawn(async move {
                hf_storage::deploy::write_live(
                    &pool,
                    &store,
                    "tester",
                    false,
                    new_module(&format!("m{n}")),
                )
                .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let free = pool.get().await;
    assert!(free.is_ok(), "a login connection is free: {:?}", free.err());
    drop(free);
    held.release().await;
    for write in writes {
        write.await.unwrap().unwrap();
    }
    let modules =
        tokio::task::spawn_blocking(move || store.snapshot("main").unwrap().model.modules.len())
            .await
            .unwrap();
    assert_eq!(modules, 5, "every queued write landed");
}

/// A live write that creates module `key`.
fn new_module(
    key: &str,
) -> impl FnMut(&mut hf_model::Model) -> Result<hf_model::Change, hf_metastore::Error>
       + Clone
       + Send
       + 'static {
    let key = key.to_owned();
    move |model| {
        model
            .create_module(hf_model::Module::new(&key, "Module"))
            .map_err(hf_metastore::Error::from)
    }
}

/// A pool with `settings`, a store whose cache lives in the returned directory, and a live
/// branch holding module `first`, written through them.
async fn live_branch_with_first_module(
    db: &TestDb,
    settings: &hf_storage::PoolSettings,
) -> (hf_storage::Pool, Arc<Store>, tempfile::TempDir) {
    let pool = hf_storage::connect(db.url(), settings).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = open(db, &dir.path().join("cache"), &quiet()).await;
    hf_storage::deploy::write_live(&pool, &store, "tester", false, new_module("first"))
        .await
        .unwrap();
    (pool, store, dir)
}

/// The module keys of the live branch as `store` sees it.
async fn module_keys(store: &Arc<Store>) -> Vec<String> {
    let store = Arc::clone(store);
    tokio::task::spawn_blocking(move || {
        let snapshot = store.snapshot("main").unwrap();
        snapshot.model.modules.keys().cloned().collect()
    })
    .await
    .unwrap()
}

/// A live write waits for the writes ahead of it (this process's, then the database lock that
/// other instances take too) no longer than `live_write_wait`, then is refused with nothing
/// written; once the way is free, writes land again.
#[tokio::test]
async fn a_live_write_waits_for_the_writes_ahead_no_longer_than_its_bound() {
    let db = prepared_db().await;
    let wait = Duration::from_secs(1);
    let settings = hf_storage::PoolSettings {
        live_write_wait: wait,
        ..hf_storage::PoolSettings::default()
    };
    let (pool, store, _dir) = live_branch_with_first_module(&db, &settings).await;

    // Another instance holds the lock: the first write waits for it, the second for the first.
    let held = db
        .hold_advisory_lock(hf_storage::deploy::APPLY_LOCK_KEY)
        .await;
    let started = Instant::now();
    let writes: Vec<_> = ["second", "third"]
        .into_iter()
        .map(|key| {
            let (pool, store) = (pool.clone(), Arc::clone(&store));
            tokio::spawn(async move {
                let result =
                    hf_storage::deploy::write_live(&pool, &store, "tester", false, new_module(key))
                        .await;
                (result, started.elapsed())
            })
        })
        .collect();
    for write in writes {
        let (result, waited) = write.await.unwrap();
        let error = result.unwrap_err();
        assert!(
            matches!(error, hf_storage::Error::LiveWriteBusy { .. }),
            "{error}"
        );
        assert_eq!(error.kind(), hf_storage::ErrorKind::Busy);
        assert!(
            waited >= wait && waited < wait + Duration::from_secs(2),
            "refused after {waited:?}"
        );
    }

    held.release().await;
    hf_storage::deploy::write_live(&pool, &store, "tester", false, new_module("fourth"))
        .await
        .unwrap();
    let mut keys = module_keys(&store).await;
    keys.sort();
    assert_eq!(keys, ["first", "fourth"], "the refused writes left nothing");
}

/// A live write that stops half-way while it holds the lock (a hung process: here an edit that
/// takes far longer than it should) has its session ended by the server once it has sat idle in
/// its transaction as long as the writes behind it wait, so the lock passes on to another
/// instance's write instead of being held for as long as the writer hangs.
#[tokio::test]
async fn a_live_write_stuck_half_way_loses_the_lock_to_the_next() {
    let db = prepared_db().await;
    let dir = tempfile::tempdir().unwrap();
    let stuck_pool = hf_storage::connect(
        db.url(),
        &hf_storage::PoolSettings {
            live_write_wait: Duration::from_secs(1),
            ..hf_storage::PoolSettings::default()
        },
    )
    .unwrap();
    let stuck_store = open(&db, &dir.path().join("stuck"), &quiet()).await;
    let other_pool = db.pool();
    let other_store = open(&db, &dir.path().join("other"), &quiet()).await;
    hf_storage::deploy::write_live(
        &other_pool,
        &other_store,
        "tester",
        false,
        new_module("first"),
    )
    .await
    .unwrap();

    let hang = Duration::from_secs(5);
    let stuck = {
        let mut edit = new_module("stuck");
        tokio::spawn(async move {
            hf_storage::deploy::write_live(
                &stuck_pool,
                &stuck_store,
                "tester",
                false,
                move |model| {
                    std::thread::sleep(hang);
                    edit(model)
                },
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    hf_storage::deploy::write_live(
        &other_pool,
        &other_store,
        "tester",
        false,
        new_module("next"),
    )
    .await
    .unwrap();
    let waited = started.elapsed();
    assert!(
        waited < hang - Duration::from_secs(1),
        "the next write waited {waited:?}, as long as the stuck one hung"
    );

    // Its connection was closed under it: answered as a database that is unavailable.
    let error = stuck.await.unwrap().unwrap_err();
    let unavailable = match &error {
        hf_storage::Error::Ddl(error) => error.kind() == hf_ddl::ErrorKind::Unavailable,
        other => other.kind() == hf_storage::ErrorKind::Unavailable,
    };
    assert!(unavailable, "{error}");
    let mut keys = module_keys(&other_store).await;
    keys.sort();
    assert_eq!(keys, ["first", "next"], "the stuck write left nothing");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
